// Command kubeapi is a small Kubernetes API server for profd's tests: pods
// (and, read-only, the apps/v1 workloads: apps.go), in the real shapes, over HTTPS with its own CA, so that real
// `kubectl` and profd's Kubernetes client (issue 4: discovery; issue 5: the
// pod proxy) can be tested on a machine without a cluster. Standard library
// only; built offline by `make build/kubeapi`.
//
// # Running
//
//	kubeapi -kubeconfig K [-pods pods.json] [-addr 127.0.0.1:0] [-token T]
//	        [-cert-dir DIR] [-server-version v1.32.5] [-bookmark-interval 5s]
//	        [-watch-timeout 30m] [-history 10000] [-compact-interval 0]
//	        [-strict-proxy-ip] [-v]
//
// At start it generates an ECDSA CA, a server certificate for 127.0.0.1, ::1
// and localhost (plus kubernetes.default.svc names) and a client certificate
// (CN "kubeapi-client", O "system:masters") signed by that CA, loads the pods,
// writes the kubeconfig, and only then prints exactly one line on stderr:
//
//	kubeapi: listening on https://127.0.0.1:PORT
//
// SIGINT/SIGTERM stop it (exit 0). With -v every request is logged on stderr.
//
// The kubeconfig (YAML, the layout `kubectl config view --raw` prints) has
//
//	cluster  kubeapi           server + certificate-authority-data
//	cluster  kubeapi-insecure  server + insecure-skip-tls-verify: true
//	user     kubeapi-token     token (-token, default 32 random hex chars)
//	user     kubeapi-cert      client-certificate-data + client-key-data
//	context  kubeapi           kubeapi + kubeapi-token (current-context, namespace default)
//	context  kubeapi-cert      kubeapi + kubeapi-cert
//	context  kubeapi-insecure  kubeapi-insecure + kubeapi-token
//	context  kubeapi-files     (with -cert-dir) the same credentials as files:
//	                           certificate-authority, client-certificate, client-key
//
// -cert-dir DIR also writes DIR/ca.crt, DIR/token and DIR/namespace (the
// in-cluster service-account layout, /var/run/secrets/kubernetes.io/serviceaccount)
// and DIR/client.crt, DIR/client.key.
//
// Every request, API and admin alike, needs the bearer token or a client
// certificate signed by the CA; otherwise 401 with a v1 Status
// {"kind":"Status",...,"reason":"Unauthorized","code":401} (like a server
// started with --anonymous-auth=false). An Authorization header is never
// forwarded through the pod proxy.
//
// # Kubernetes API served
//
//	GET /version /healthz /livez /readyz
//	GET /api  /api/v1  /apis          legacy discovery (APIVersions, APIResourceList,
//	                                  an APIGroupList with apps/v1); aggregated discovery
//	                                  requests get the legacy JSON, which clients
//	                                  accept as a fallback
//	GET /api/v1/pods                  list or watch, all namespaces
//	GET /api/v1/namespaces/NS/pods    list or watch, one namespace
//	GET /api/v1/namespaces/NS/pods/NAME   (also .../status)
//	GET /api/v1/watch/...             the deprecated watch paths
//	GET /api/v1/namespaces[/NS]       namespaces derived from the pods (+ default,
//	                                  kube-system, kube-public)
//	*   /api/v1/namespaces/NS/pods/[SCHEME:]NAME[:PORT]/proxy/PATH?QUERY
//	GET /apis/apps/v1/...             deployments, statefulsets, daemonsets, replicasets:
//	                                  get and list (see apps.go; /admin/workloads adds them)
//
// Lists: labelSelector (=, ==, !=, in, notin, exists, !key, gt, lt; keys and
// values validated as the real server does), fieldSelector (metadata.name,
// metadata.namespace, spec.nodeName, spec.restartPolicy, spec.schedulerName,
// spec.serviceAccountName, spec.hostNetwork, status.phase, status.podIP,
// status.nominatedNodeName; others are 400 "field label not supported"),
// limit + continue (tokens in the real format: base64url of
// {"v":"meta.k8s.io/v1","rv":N,"start":KEY}; every page is served from the
// snapshot of the first one; a token whose snapshot was compacted away gets
// 410 Expired with a fresh "inconsistent" token in metadata.continue, as etcd
// does), remainingItemCount when there is no selector, resourceVersion /
// resourceVersionMatch per the API concepts table (Exact lists older than the
// history give 410, lists newer than the server wait up to 3 s then 504
// "Too large resource version"). Items are in key order (namespace/name).
//
// Watch (watch=1|true): resourceVersion unset or "0" starts with synthetic
// ADDED events for the current state; any other value replays history after
// it, and one older than the history gives HTTP 200 with a single ERROR event
// carrying Status 410 reason Expired "too old resource version: R (OLDEST)",
// then the stream ends — exactly what kube-apiserver's watch cache does.
// allowWatchBookmarks=true adds BOOKMARK events ({"kind":"Pod","apiVersion":
// "v1","metadata":{"resourceVersion":"N"}}) every -bookmark-interval;
// sendInitialEvents=true (with allowWatchBookmarks and
// resourceVersionMatch=NotOlderThan, the WatchList protocol) ends the initial
// ADDED events with a BOOKMARK annotated k8s.io/initial-events-end: "true".
// timeoutSeconds ends the stream (default -watch-timeout). With selectors a
// pod that starts matching arrives as ADDED and one that stops matching as
// DELETED, as the watch cache does. Events are newline-delimited JSON, one
// flush per event.
//
// Tables: Accept "application/json;as=Table;v=v1;g=meta.k8s.io" (or v1beta1)
// gets a real meta.k8s.io Table with the pod columns kube-apiserver prints
// (Name, Ready, Status, Restarts, Age; IP, Node, Nominated Node, Readiness
// Gates at priority 1) and rows carrying PartialObjectMetadata (includeObject
// Metadata, the default), the whole object (Object) or nothing (None), for
// get, list and watch (column definitions only in the first watch event).
// Protobuf-only Accept headers get 406.
//
// Pod proxy: forwards to http://PODIP:PORT/PATH?QUERY (https when the name is
// prefixed "https:", certificate not verified), streaming, no timeout other
// than the client's request context (as the real proxy verb, which is
// long-running). Without a port, the first containerPort declared, else the
// bare pod IP (port 80). An unreachable target gives 503 ServiceUnavailable
// "error trying to reach service: ..."; a missing pod 404. Difference from the
// real server: it refuses pod IPs that are not global unicast (loopback
// included) with 400 "address not allowed"; here loopback is allowed unless
// -strict-proxy-ip, since tests run the targets on 127.0.0.1.
//
// Pods file (-pods FILE): a JSON array of pods, or a PodList. Pods may be
// minimal ({"metadata":{"name":"web-1"}} is enough); missing fields are filled
// in as the API server, scheduler and kubelet would: kind/apiVersion,
// namespace "default", uid, resourceVersion, creationTimestamp, ownerReference
// apiVersion/uid/controller (the uid is derived from kind/namespace/name, so
// pods of one ReplicaSet share it), generateName for owned pods, one container
// "app" if none, container defaults, restartPolicy etc., nodeName "node-1",
// status.phase "Running", podIP 127.0.0.1 (not for Pending pods), hostIP
// 127.0.0.1 once scheduled, podIPs/hostIPs, startTime, qosClass, conditions
// and containerStatuses consistent with the phase. Given fields are kept.
//
// # Admin API (not part of Kubernetes; same authentication)
//
//	GET    /admin/pods                    the current pods, a JSON array
//	POST   /admin/pods                    add or replace: a pod, an array or a PodList
//	                                      (ADDED or MODIFIED events; replacing keeps uid
//	                                      and creationTimestamp unless given)
//	PATCH  /admin/pods/NS/NAME            JSON merge patch (RFC 7386); a patch that sets
//	                                      status.phase re-derives conditions and
//	                                      containerStatuses unless it sets them too
//	DELETE /admin/pods/NS/NAME            DELETED event
//	POST   /admin/fault?code=C&count=N[&match=SUBSTR][&delay=D]
//	                                      the next N API requests (paths under /api/v1/ and
//	                                      /apis/apps/v1/ other than discovery — the pod
//	                                      proxy included: match=/pods/NAME:PORT/proxy makes
//	                                      one pod's target answer 503 or, with delay,
//	                                      hang — whose request URI contains
//	                                      SUBSTR) answer C with the real Status for it
//	                                      (401 Unauthorized, 403 Forbidden, 404 NotFound,
//	                                      410 Expired, 429 TooManyRequests + Retry-After,
//	                                      500 InternalError, 503 ServiceUnavailable,
//	                                      504 Timeout); a watch request with 410 gets
//	                                      the ERROR event instead. delay=D (Go
//	                                      duration) waits first; code=0 only delays.
//	                                      count defaults to 1; rules queue up.
//	GET    /admin/fault                   the pending rules;  DELETE clears them
//	POST   /admin/compact                 forget the history: older resourceVersions
//	                                      and continue tokens now get 410
//	POST   /admin/watches/close[?abort=1] end every open watch (as an API server
//	                                      restart would); answers {"closed":N};
//	                                      abort=1 cuts the connections instead
//	                                      (no end of the chunked stream: a crash,
//	                                      a load balancer dropping them)
//	POST   /admin/token?value=T[&keep=1]  accept token T from now on (the old one is
//	                                      revoked unless keep=1); rewrites
//	                                      -cert-dir/token and the kubeconfig
//	GET    /admin/requests                the request log (method, uri, user, code,
//	                                      watch); DELETE clears it
//	GET    /admin/state                   resourceVersion, compacted, pods, watches
//
// Every change bumps the one global resourceVersion and is delivered to the
// open watches.
//
// # Differences from kube-apiserver worth knowing
//
// Pods are read-only through the Kubernetes API (POST/PUT/PATCH/DELETE are 405;
// change them through /admin). JSON only: no protobuf, no aggregated
// discovery (clients fall back to the legacy documents, as against any older
// server), no OpenAPI. Loopback pod IPs are proxied (see above). A BOOKMARK in
// a Table watch is a Table with no rows. The gcloud SDK's kubectl is a
// dispatcher that runs kubectl.MAJOR.MINOR matching /version, so
// -server-version chooses the kubectl that tests run (1.27 to 1.33 are
// installed here; v1.32.x runs the dispatcher's own built-in 1.32).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type obj = map[string]any

var (
	flagAddr          = flag.String("addr", "127.0.0.1:0", "listen address (port 0: any free port)")
	flagKubeconfig    = flag.String("kubeconfig", "", "write a kubeconfig for this server to `FILE`")
	flagPods          = flag.String("pods", "", "load pods from `FILE` (a JSON array of pods, or a PodList)")
	flagToken         = flag.String("token", "", "bearer token to accept (default: 32 random hex chars)")
	flagCertDir       = flag.String("cert-dir", "", "also write ca.crt, token, namespace, client.crt, client.key into `DIR`")
	flagVersion       = flag.String("server-version", "v1.32.5", "gitVersion served by /version (the gcloud kubectl dispatcher runs kubectl.MAJOR.MINOR from it)")
	flagBookmark      = flag.Duration("bookmark-interval", 5*time.Second, "interval of BOOKMARK events on watches that allow them")
	flagWatchTimeout  = flag.Duration("watch-timeout", 30*time.Minute, "watch duration when the request has no timeoutSeconds")
	flagHistory       = flag.Int("history", 10000, "events kept for watches and continue tokens; older ones are compacted away")
	flagCompactEvery  = flag.Duration("compact-interval", 0, "compact the history periodically (etcd: 5m; 0: never)")
	flagStrictProxyIP = flag.Bool("strict-proxy-ip", false, "refuse to proxy to pod IPs that are not global unicast, as the real server does")
	flagVerbose       = flag.Bool("v", false, "log every request on stderr")
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("kubeapi: ")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: kubeapi [flags]\n\nA test Kubernetes API server (pods, watch, tables, pod proxy). See the comment at the top of tests/kubeapi/main.go.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *flagHistory < 1 {
		log.Fatal("-history must be at least 1")
	}

	s := newServer()
	s.token = *flagToken
	if s.token == "" {
		s.token = randHex(16)
	}
	if err := s.makeCerts(); err != nil {
		log.Fatalf("certificates: %v", err)
	}
	if *flagPods != "" {
		data, err := os.ReadFile(*flagPods)
		if err != nil {
			log.Fatal(err)
		}
		pods, err := decodePods(data)
		if err != nil {
			log.Fatalf("%s: %v", *flagPods, err)
		}
		for _, p := range pods {
			if _, _, err := s.upsert(p); err != nil {
				log.Fatalf("%s: %v", *flagPods, err)
			}
		}
	}
	// The pods of the file predate this server's history, as if the server
	// had been started long after they were created.
	s.mu.Lock()
	s.compactLocked()
	s.mu.Unlock()

	ln, err := net.Listen("tcp", *flagAddr)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	host := ln.Addr().(*net.TCPAddr).IP.String()
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s.serverURL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	s.serverAddr = net.JoinHostPort(host, strconv.Itoa(port))
	if err := s.writeFiles(); err != nil {
		log.Fatal(err)
	}

	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(handshakeFilter{}, "kubeapi: ", 0),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{s.serverCert},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    s.caPool,
		},
	}
	if *flagCompactEvery > 0 {
		go func() {
			for range time.Tick(*flagCompactEvery) {
				s.mu.Lock()
				s.compactLocked()
				s.mu.Unlock()
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	log.Printf("listening on %s", s.serverURL)
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		log.Fatalf("serve: %v", err)
	}
	s.closeWatches(false)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close() // a proxied request (a CPU profile) may outlive the grace period
	}
}

// ---- server state ------------------------------------------------------------------

type event struct {
	typ  string // ADDED, MODIFIED, DELETED
	rv   uint64
	key  string // namespace/name
	obj  obj    // the new state (DELETED: the last state, with the deletion's resourceVersion)
	prev obj    // the state before (nil for ADDED)
}

type server struct {
	mu        sync.Mutex
	rv        uint64
	compacted uint64 // history holds every event with rv > compacted
	pods      map[string]obj
	workloads map[string]obj // apps/v1 objects by "resource/namespace/name" (apps.go)
	history   []event
	watchers  map[*watcher]struct{}
	token     string
	oldTokens map[string]bool
	faults    []*fault

	reqMu    sync.Mutex
	requests []reqRecord

	serverURL, serverAddr string
	caPEM, clientCertPEM  []byte
	clientKeyPEM          []byte
	caCert                *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caPool                *x509.CertPool
	serverCert            tls.Certificate
	proxyTransport        *http.Transport
}

type fault struct {
	Code  int    `json:"code"`
	Count int    `json:"count"`
	Match string `json:"match,omitempty"`
	Delay string `json:"delay,omitempty"`
	delay time.Duration
}

type reqRecord struct {
	Time   string `json:"time"`
	Method string `json:"method"`
	URI    string `json:"uri"`
	User   string `json:"user"`
	Code   int    `json:"code"`
	Watch  bool   `json:"watch,omitempty"`
}

func newServer() *server {
	return &server{
		rv:        100,
		pods:      map[string]obj{},
		workloads: map[string]obj{},
		watchers:  map[*watcher]struct{}{},
		oldTokens: map[string]bool{},
		proxyTransport: &http.Transport{
			Proxy:                 nil, // never an HTTP(S)_PROXY from the environment
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // pod targets, as the apiserver's proxy transport
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true, // pass Accept-Encoding and bodies through untouched
			ExpectContinueTimeout: time.Second,
		},
	}
}

// upsert adds or replaces a pod and emits ADDED or MODIFIED. It returns the
// stored object and whether it was created.
func (s *server) upsert(p obj) (obj, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, name := metaString(p, "namespace"), metaString(p, "name")
	if ns == "" {
		ns = "default"
	}
	key := ns + "/" + name
	prev := s.pods[key]
	if name == "" && metaString(p, "generateName") == "" {
		return nil, false, errors.New("pod without metadata.name or metadata.generateName")
	}
	if name == "" {
		for {
			name = metaString(p, "generateName") + randSuffix(5)
			if s.pods[ns+"/"+name] == nil {
				break
			}
		}
		meta(p)["name"] = name
		key = ns + "/" + name
		prev = nil
	}
	if err := validateName(name); err != nil {
		return nil, false, err
	}
	if err := normalizePod(p, prev, time.Now()); err != nil {
		return nil, false, err
	}
	s.rv++
	meta(p)["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	typ := "MODIFIED"
	if prev == nil {
		typ = "ADDED"
	}
	s.pods[key] = p
	s.emitLocked(event{typ: typ, rv: s.rv, key: key, obj: p, prev: prev})
	return p, prev == nil, nil
}

func (s *server) remove(ns, name string) (obj, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	prev := s.pods[key]
	if prev == nil {
		return nil, false
	}
	delete(s.pods, key)
	s.rv++
	last := clone(prev)
	meta(last)["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	s.emitLocked(event{typ: "DELETED", rv: s.rv, key: key, obj: last, prev: prev})
	return last, true
}

func (s *server) emitLocked(e event) {
	s.history = append(s.history, e)
	if len(s.history) > *flagHistory {
		drop := len(s.history) - *flagHistory/2
		if drop < 1 {
			drop = 1
		}
		s.compacted = s.history[drop-1].rv
		s.history = append([]event(nil), s.history[drop:]...)
	}
	for w := range s.watchers {
		w.offerLocked(e)
	}
}

func (s *server) compactLocked() {
	s.compacted = s.rv
	s.history = nil
}

// stateAtLocked returns the pods as they were at resourceVersion rv (rv must
// not be older than the history).
func (s *server) stateAtLocked(rv uint64) map[string]obj {
	st := make(map[string]obj, len(s.pods))
	for k, v := range s.pods {
		st[k] = v
	}
	for i := len(s.history) - 1; i >= 0 && s.history[i].rv > rv; i-- {
		e := s.history[i]
		if e.prev == nil {
			delete(st, e.key)
		} else {
			st[e.key] = e.prev
		}
	}
	return st
}

func (s *server) closeWatches(abort bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for w := range s.watchers {
		w.aborted = abort
		w.closeLocked()
		n++
	}
	return n
}

// ---- pods: filling in what the control plane would --------------------------------

var workloadAPIVersion = map[string]string{
	"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Deployment": "apps/v1",
	"Job": "batch/v1", "CronJob": "batch/v1", "Node": "v1", "ReplicationController": "v1",
}

func normalizePod(p, prev obj, now time.Time) error {
	p["kind"] = "Pod"
	p["apiVersion"] = "v1"
	m := meta(p)
	if metaString(p, "namespace") == "" {
		m["namespace"] = "default"
	}
	if err := validateName(metaString(p, "namespace")); err != nil {
		return fmt.Errorf("metadata.namespace: %v", err)
	}
	if str(m["uid"]) == "" {
		if prev != nil {
			m["uid"] = metaString(prev, "uid")
		} else {
			m["uid"] = newUUID()
		}
	}
	if str(m["creationTimestamp"]) == "" {
		if prev != nil && metaString(prev, "creationTimestamp") != "" {
			m["creationTimestamp"] = metaString(prev, "creationTimestamp")
		} else {
			m["creationTimestamp"] = now.UTC().Format(time.RFC3339)
		}
	}
	for _, f := range []string{"labels", "annotations"} {
		if v, ok := m[f]; ok {
			mm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("metadata.%s must be an object of strings", f)
			}
			for k, x := range mm {
				if _, ok := x.(string); !ok {
					return fmt.Errorf("metadata.%s[%s] must be a string", f, k)
				}
				if f == "labels" {
					if err := validateLabelKey(k); err != nil {
						return fmt.Errorf("metadata.labels: %v", err)
					}
					if err := validateLabelValue(x.(string)); err != nil {
						return fmt.Errorf("metadata.labels[%s]: %v", k, err)
					}
				}
			}
		}
	}
	if refs, ok := m["ownerReferences"].([]any); ok {
		for _, r := range refs {
			ref, ok := r.(map[string]any)
			if !ok {
				return errors.New("metadata.ownerReferences: not an object")
			}
			kind, name := str(ref["kind"]), str(ref["name"])
			if kind == "" || name == "" {
				return errors.New("metadata.ownerReferences: kind and name are required")
			}
			if str(ref["apiVersion"]) == "" {
				av := workloadAPIVersion[kind]
				if av == "" {
					av = "v1"
				}
				ref["apiVersion"] = av
			}
			if str(ref["uid"]) == "" {
				ref["uid"] = nameUUID(kind + "/" + metaString(p, "namespace") + "/" + name)
			}
			if _, ok := ref["controller"]; !ok {
				ref["controller"] = true
			}
			if _, ok := ref["blockOwnerDeletion"]; !ok {
				ref["blockOwnerDeletion"] = true
			}
			if ref["controller"] == true && str(m["generateName"]) == "" && kind != "StatefulSet" &&
				strings.HasPrefix(metaString(p, "name"), name+"-") {
				m["generateName"] = name + "-"
			}
		}
	} else if _, ok := m["ownerReferences"]; ok {
		return errors.New("metadata.ownerReferences must be an array")
	}

	spec, ok := p["spec"].(map[string]any)
	if !ok {
		if _, has := p["spec"]; has {
			return errors.New("spec must be an object")
		}
		spec = obj{}
		p["spec"] = spec
	}
	containers, ok := spec["containers"].([]any)
	if !ok || len(containers) == 0 {
		containers = []any{obj{"name": "app", "image": "registry.example/app:1.0"}}
		spec["containers"] = containers
	}
	for i, c := range containers {
		cm, ok := c.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.containers[%d] is not an object", i)
		}
		if str(cm["name"]) == "" {
			return fmt.Errorf("spec.containers[%d].name is required", i)
		}
		if str(cm["image"]) == "" {
			cm["image"] = "registry.example/" + str(cm["name"]) + ":1.0"
		}
		if str(cm["imagePullPolicy"]) == "" {
			img := str(cm["image"])
			last := img[strings.LastIndex(img, "/")+1:]
			if !strings.Contains(last, ":") || strings.HasSuffix(last, ":latest") {
				cm["imagePullPolicy"] = "Always"
			} else {
				cm["imagePullPolicy"] = "IfNotPresent"
			}
		}
		setDefault(cm, "terminationMessagePath", "/dev/termination-log")
		setDefault(cm, "terminationMessagePolicy", "File")
		setDefault(cm, "resources", obj{})
		if ports, ok := cm["ports"].([]any); ok {
			for j, pt := range ports {
				pm, ok := pt.(map[string]any)
				if !ok {
					return fmt.Errorf("spec.containers[%d].ports[%d] is not an object", i, j)
				}
				if _, ok := num(pm["containerPort"]); !ok {
					return fmt.Errorf("spec.containers[%d].ports[%d].containerPort must be a number", i, j)
				}
				setDefault(pm, "protocol", "TCP")
			}
		}
	}
	setDefault(spec, "restartPolicy", "Always")
	setDefault(spec, "terminationGracePeriodSeconds", json.Number("30"))
	setDefault(spec, "dnsPolicy", "ClusterFirst")
	setDefault(spec, "serviceAccountName", "default")
	setDefault(spec, "serviceAccount", str(spec["serviceAccountName"]))
	setDefault(spec, "securityContext", obj{})
	setDefault(spec, "schedulerName", "default-scheduler")
	setDefault(spec, "priority", json.Number("0"))
	setDefault(spec, "enableServiceLinks", true)
	setDefault(spec, "preemptionPolicy", "PreemptLowerPriority")

	status, ok := p["status"].(map[string]any)
	if !ok {
		if _, has := p["status"]; has {
			return errors.New("status must be an object")
		}
		status = obj{}
		p["status"] = status
	}
	phase := str(status["phase"])
	if phase == "" {
		phase = "Running"
		status["phase"] = phase
	}
	switch phase {
	case "Pending", "Running", "Succeeded", "Failed", "Unknown":
	default:
		return fmt.Errorf("status.phase: unsupported value %q", phase)
	}
	scheduled := phase != "Pending" || str(spec["nodeName"]) != ""
	if phase != "Pending" {
		setDefault(spec, "nodeName", "node-1")
	}
	created := metaString(p, "creationTimestamp")
	if scheduled {
		if _, ok := status["hostIP"]; !ok {
			status["hostIP"] = "127.0.0.1"
		}
		if _, ok := status["hostIPs"]; !ok && str(status["hostIP"]) != "" {
			status["hostIPs"] = []any{obj{"ip": status["hostIP"]}}
		}
		setDefault(status, "startTime", created)
	}
	if phase != "Pending" {
		if _, ok := status["podIP"]; !ok {
			if ips, ok := status["podIPs"].([]any); ok && len(ips) > 0 {
				if m0, ok := ips[0].(map[string]any); ok {
					status["podIP"] = m0["ip"]
				}
			} else {
				status["podIP"] = "127.0.0.1"
			}
		}
	}
	if _, ok := status["podIPs"]; !ok && str(status["podIP"]) != "" {
		status["podIPs"] = []any{obj{"ip": status["podIP"]}}
	}
	setDefault(status, "qosClass", "BestEffort")
	if _, ok := status["containerStatuses"]; !ok {
		var css []any
		for i, c := range containers {
			cm := c.(map[string]any)
			cs := obj{
				"name":         cm["name"],
				"image":        cm["image"],
				"imageID":      "",
				"ready":        phase == "Running",
				"restartCount": json.Number("0"),
				"started":      phase == "Running",
				"lastState":    obj{},
			}
			if phase != "Pending" {
				cs["imageID"] = imageID(str(cm["image"]))
				cs["containerID"] = "containerd://" + hex.EncodeToString(sum256(metaString(p, "uid")+"/"+strconv.Itoa(i)))
			}
			switch phase {
			case "Running":
				cs["state"] = obj{"running": obj{"startedAt": created}}
			case "Succeeded":
				cs["state"] = obj{"terminated": obj{"exitCode": json.Number("0"), "reason": "Completed", "startedAt": created, "finishedAt": created, "containerID": cs["containerID"]}}
			case "Failed":
				cs["state"] = obj{"terminated": obj{"exitCode": json.Number("1"), "reason": "Error", "startedAt": created, "finishedAt": created, "containerID": cs["containerID"]}}
			case "Pending":
				if scheduled {
					cs["state"] = obj{"waiting": obj{"reason": "ContainerCreating"}}
				}
			default:
				cs["state"] = obj{}
			}
			if cs["state"] != nil {
				css = append(css, cs)
			}
		}
		if len(css) > 0 {
			status["containerStatuses"] = css
		}
	}
	if _, ok := status["conditions"]; !ok {
		ready := "False"
		if phase == "Running" {
			ready = "True"
			if css, ok := status["containerStatuses"].([]any); ok {
				for _, c := range css {
					if cm, ok := c.(map[string]any); ok && cm["ready"] != true {
						ready = "False"
					}
				}
			}
		}
		cond := func(t, st string) obj {
			return obj{"type": t, "status": st, "lastProbeTime": nil, "lastTransitionTime": created}
		}
		var conds []any
		if scheduled {
			if phase != "Pending" {
				conds = append(conds, cond("PodReadyToStartContainers", boolStr(phase == "Running")))
			}
			conds = append(conds, cond("Initialized", "True"), cond("Ready", ready), cond("ContainersReady", ready), cond("PodScheduled", "True"))
			if phase == "Succeeded" || phase == "Failed" {
				for _, c := range conds {
					if cm := c.(obj); cm["type"] == "Ready" || cm["type"] == "ContainersReady" {
						cm["reason"] = "PodCompleted"
					}
				}
			}
		} else {
			c := cond("PodScheduled", "False")
			c["reason"] = "Unschedulable"
			c["message"] = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
			conds = append(conds, c)
		}
		status["conditions"] = conds
	}
	return nil
}

// decodeItems: the objects of a JSON body that is one object, an array of
// them or a list ({"items": [...]}); what names them in the error.
// writeStored answers an /admin upload: 201 if it created something, else
// 200; the one object stored, or the array of them.
func writeStored(w http.ResponseWriter, created bool, stored []any) {
	code := 200
	if created {
		code = 201
	}
	if len(stored) == 1 {
		writeJSON(w, code, stored[0])
	} else {
		writeJSON(w, code, stored)
	}
}

func decodeItems(data []byte, what string) ([]any, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case []any:
		return t, nil
	case map[string]any:
		if l, ok := t["items"].([]any); ok {
			return l, nil
		}
		return []any{t}, nil
	}
	return nil, errors.New(what)
}

func decodePods(data []byte) ([]obj, error) {
	items, err := decodeItems(data, "want a pod, an array of pods or a PodList")
	if err != nil {
		return nil, err
	}
	var pods []obj
	for i, it := range items {
		p, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %d is not an object", i)
		}
		if k := str(p["kind"]); k != "" && k != "Pod" {
			return nil, fmt.Errorf("item %d: kind %q, want Pod", i, k)
		}
		if _, ok := p["metadata"].(map[string]any); !ok {
			return nil, fmt.Errorf("item %d: no metadata", i)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// ---- selectors ------------------------------------------------------------------------

type labelReq struct {
	key    string
	op     string // exists, !, =, !=, in, notin, gt, lt
	values []string
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	dnsSubRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dns1123Name = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

func validateName(n string) error {
	if len(n) > 253 || !dns1123Name.MatchString(n) {
		return fmt.Errorf("invalid name %q: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character", n)
	}
	return nil
}

func validateLabelKey(k string) error {
	name := k
	if i := strings.LastIndex(k, "/"); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || len(prefix) > 253 || !dnsSubRE.MatchString(prefix) {
			return fmt.Errorf("invalid label key %q: prefix part must be a DNS-1123 subdomain", k)
		}
	}
	if name == "" || len(name) > 63 || !nameRE.MatchString(name) {
		return fmt.Errorf("invalid label key %q: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", k)
	}
	return nil
}

func validateLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 || !nameRE.MatchString(v) {
		return fmt.Errorf("invalid label value %q: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", v)
	}
	return nil
}

// parseLabelSelector parses the labels.Parse grammar: comma-separated
// requirements "k", "!k", "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a,b)",
// "k>N", "k<N".
func parseLabelSelector(sel string) ([]labelReq, error) {
	toks, err := lexSelector(sel)
	if err != nil {
		return nil, err
	}
	var reqs []labelReq
	i := 0
	peek := func() string {
		if i < len(toks) {
			return toks[i]
		}
		return ""
	}
	isIdent := func(t string) bool { return t != "" && !strings.ContainsAny(t[:1], "=!(),<>") }
	if len(toks) == 0 {
		return nil, nil
	}
	for {
		var r labelReq
		if peek() == "!" {
			i++
			if !isIdent(peek()) {
				return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: identifier", peek())
			}
			r = labelReq{key: toks[i], op: "!"}
			i++
		} else {
			if !isIdent(peek()) {
				return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: !, identifier", peek())
			}
			r.key = toks[i]
			i++
			switch t := peek(); t {
			case "", ",":
				r.op = "exists"
			case "=", "==", "!=":
				r.op = map[string]string{"=": "=", "==": "=", "!=": "!="}[t]
				i++
				if isIdent(peek()) {
					r.values = []string{toks[i]}
					i++
				} else if peek() == "" || peek() == "," {
					r.values = []string{""}
				} else {
					return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: identifier", peek())
				}
			case "in", "notin":
				r.op = t
				i++
				if peek() != "(" {
					return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: '('", peek())
				}
				i++
				for {
					if isIdent(peek()) && peek() != "" {
						r.values = append(r.values, toks[i])
						i++
					} else {
						r.values = append(r.values, "")
					}
					if peek() == "," {
						i++
						continue
					}
					if peek() == ")" {
						i++
						break
					}
					return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: ',', ')'", peek())
				}
			case "<", ">":
				r.op = map[string]string{"<": "lt", ">": "gt"}[t]
				i++
				if !isIdent(peek()) {
					return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: identifier", peek())
				}
				if _, err := strconv.ParseInt(toks[i], 10, 64); err != nil {
					return nil, fmt.Errorf("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer")
				}
				r.values = []string{toks[i]}
				i++
			default:
				return nil, fmt.Errorf("unable to parse requirement: found '%s', expected: in, notin, =, ==, !=, gt, lt", t)
			}
		}
		if err := validateLabelKey(r.key); err != nil {
			return nil, fmt.Errorf("unable to parse requirement: %v", err)
		}
		if r.op != "gt" && r.op != "lt" {
			for _, v := range r.values {
				if err := validateLabelValue(v); err != nil {
					return nil, fmt.Errorf("unable to parse requirement: %v", err)
				}
			}
		}
		reqs = append(reqs, r)
		if peek() == "" {
			return reqs, nil
		}
		if peek() != "," {
			return nil, fmt.Errorf("found '%s', expected: ',' or 'end of string'", peek())
		}
		i++
	}
}

func lexSelector(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == ',' || c == '(' || c == ')' || c == '<' || c == '>':
			toks = append(toks, string(c))
			i++
		case c == '=':
			if i+1 < len(s) && s[i+1] == '=' {
				toks = append(toks, "==")
				i += 2
			} else {
				toks = append(toks, "=")
				i++
			}
		case c == '!':
			if i+1 < len(s) && s[i+1] == '=' {
				toks = append(toks, "!=")
				i += 2
			} else {
				toks = append(toks, "!")
				i++
			}
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n,()<>=!", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

func matchLabels(reqs []labelReq, p obj) bool {
	labels, _ := meta(p)["labels"].(map[string]any)
	for _, r := range reqs {
		v, has := labels[r.key]
		val := str(v)
		switch r.op {
		case "exists":
			if !has {
				return false
			}
		case "!":
			if has {
				return false
			}
		case "=", "in":
			if !has || !contains(r.values, val) {
				return false
			}
		case "!=", "notin":
			if has && contains(r.values, val) {
				return false
			}
		case "gt", "lt":
			if !has {
				return false
			}
			a, err1 := strconv.ParseInt(val, 10, 64)
			b, _ := strconv.ParseInt(r.values[0], 10, 64)
			if err1 != nil || (r.op == "gt" && !(a > b)) || (r.op == "lt" && !(a < b)) {
				return false
			}
		}
	}
	return true
}

type fieldReq struct {
	field, op, value string // op: = or !=
}

var podFields = map[string]func(p obj) string{
	"metadata.name":            func(p obj) string { return metaString(p, "name") },
	"metadata.namespace":       func(p obj) string { return metaString(p, "namespace") },
	"spec.nodeName":            func(p obj) string { return str(sub(p, "spec")["nodeName"]) },
	"spec.restartPolicy":       func(p obj) string { return str(sub(p, "spec")["restartPolicy"]) },
	"spec.schedulerName":       func(p obj) string { return str(sub(p, "spec")["schedulerName"]) },
	"spec.serviceAccountName":  func(p obj) string { return str(sub(p, "spec")["serviceAccountName"]) },
	"spec.hostNetwork":         func(p obj) string { return boolStrLower(sub(p, "spec")["hostNetwork"] == true) },
	"status.phase":             func(p obj) string { return str(sub(p, "status")["phase"]) },
	"status.podIP":             func(p obj) string { return str(sub(p, "status")["podIP"]) },
	"status.nominatedNodeName": func(p obj) string { return str(sub(p, "status")["nominatedNodeName"]) },
}

var namespaceFields = map[string]func(p obj) string{
	"metadata.name":      func(p obj) string { return metaString(p, "name") },
	"metadata.namespace": func(p obj) string { return "" },
	"status.phase":       func(p obj) string { return "Active" },
}

// parseFieldSelector parses fields.ParseSelector's grammar: comma-separated
// "f=v", "f==v", "f!=v" with backslash escapes.
func parseFieldSelector(sel string, fields map[string]func(obj) string) ([]fieldReq, error) {
	var reqs []fieldReq
	if strings.TrimSpace(sel) == "" {
		return nil, nil
	}
	var terms []string
	var cur strings.Builder
	for i := 0; i < len(sel); i++ {
		if sel[i] == '\\' && i+1 < len(sel) {
			cur.WriteByte(sel[i])
			cur.WriteByte(sel[i+1])
			i++
			continue
		}
		if sel[i] == ',' {
			terms = append(terms, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(sel[i])
	}
	terms = append(terms, cur.String())
	unescape := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		return b.String()
	}
	for _, t := range terms {
		var r fieldReq
		switch {
		case strings.Contains(t, "!="):
			i := strings.Index(t, "!=")
			r = fieldReq{t[:i], "!=", t[i+2:]}
		case strings.Contains(t, "=="):
			i := strings.Index(t, "==")
			r = fieldReq{t[:i], "=", t[i+2:]}
		case strings.Contains(t, "="):
			i := strings.Index(t, "=")
			r = fieldReq{t[:i], "=", t[i+1:]}
		default:
			return nil, fmt.Errorf("invalid selector: '%s'; can't understand '%s'", sel, t)
		}
		r.field = strings.TrimSpace(r.field)
		r.value = unescape(r.value)
		if _, ok := fields[r.field]; !ok {
			return nil, fmt.Errorf("field label not supported: %s", r.field)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func matchFields(reqs []fieldReq, fields map[string]func(obj) string, p obj) bool {
	for _, r := range reqs {
		v := fields[r.field](p)
		if (r.op == "=") != (v == r.value) {
			return false
		}
	}
	return true
}

// filter is what a list or watch selects.
type filter struct {
	ns     string // "" all namespaces
	labels []labelReq
	fields []fieldReq
}

func (f *filter) match(p obj) bool {
	if p == nil {
		return false
	}
	if f.ns != "" && metaString(p, "namespace") != f.ns {
		return false
	}
	return matchLabels(f.labels, p) && matchFields(f.fields, podFields, p)
}

// ---- HTTP: authentication, faults, request log, routing ------------------------------

type statusError struct {
	code       int
	reason     string
	msg        string
	details    obj
	cont       string
	retryAfter int
}

func (e *statusError) Error() string { return e.msg }

func (e *statusError) object() obj {
	st := obj{"kind": "Status", "apiVersion": "v1", "metadata": obj{}, "status": "Failure",
		"message": e.msg, "reason": e.reason, "code": e.code}
	if e.details != nil {
		st["details"] = e.details
	}
	if e.cont != "" {
		st["metadata"] = obj{"continue": e.cont}
	}
	return st
}

func newStatus(code int, msg string) *statusError {
	reasons := map[int]string{400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
		405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired", 422: "Invalid",
		429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
	r := reasons[code]
	if r == "" {
		r = "Unknown"
	}
	return &statusError{code: code, reason: r, msg: msg}
}

func notFound(resource, name string) *statusError {
	e := newStatus(404, fmt.Sprintf("%s %q not found", resource, name))
	e.details = obj{"name": name, "kind": resource}
	return e
}

func badRequest(msg string) *statusError { return newStatus(400, msg) }

func writeStatus(w http.ResponseWriter, e *statusError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.code, e.object())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = 500
		b.Reset()
		fmt.Fprintf(&b, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":"InternalError","code":500}`+"\n", err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
	r.ResponseWriter.WriteHeader(c)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.ResponseWriter.Write(b)
}

// Hijack lets the pod proxy pass protocol upgrades (websockets) through.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection does not support hijacking (HTTP/2)")
	}
	if r.code == 0 {
		r.code = 101
	}
	return h.Hijack()
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// authenticate returns the user name, or "" for a request without valid
// credentials. A request with a bearer token is judged by the token alone.
func (s *server) authenticate(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		const p = "bearer "
		if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
			t := strings.TrimSpace(h[len(p):])
			s.mu.Lock()
			ok := t == s.token || s.oldTokens[t]
			s.mu.Unlock()
			if ok {
				return "kubeapi-token"
			}
		}
		return ""
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		return r.TLS.PeerCertificates[0].Subject.CommonName
	}
	return ""
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	w = rec
	w.Header().Set("Audit-Id", newUUID())
	w.Header().Set("Cache-Control", "no-cache, private")
	user := s.authenticate(r)
	isWatch := isWatchRequest(r)
	defer func() {
		code := rec.code
		if code == 0 {
			code = 200
		}
		if !strings.HasPrefix(r.URL.Path, "/admin/") {
			s.reqMu.Lock()
			s.requests = append(s.requests, reqRecord{Time: start.UTC().Format(time.RFC3339Nano), Method: r.Method,
				URI: r.RequestURI, User: user, Code: code, Watch: isWatch})
			if len(s.requests) > 10000 {
				s.requests = append([]reqRecord(nil), s.requests[5000:]...)
			}
			s.reqMu.Unlock()
		}
		if *flagVerbose {
			log.Printf("%s %s user=%q accept=%q -> %d (%s)", r.Method, r.RequestURI, user, r.Header.Get("Accept"), code, time.Since(start).Round(time.Microsecond))
		}
	}()
	if user == "" {
		writeStatus(w, newStatus(401, "Unauthorized"))
		return
	}
	r.Header.Del("Authorization") // as kube-apiserver: never passed on (pod proxy)
	if strings.HasPrefix(r.URL.Path, "/admin/") {
		s.serveAdmin(w, r)
		return
	}
	if f := s.takeFault(r); f != nil {
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		if f.Code != 0 {
			s.mu.Lock()
			cur := s.rv
			s.mu.Unlock()
			e := faultStatus(f.Code, r, cur)
			if f.Code == 410 && isWatch {
				startWatchStream(w)
				writeEvent(w, "ERROR", e.object())
				return
			}
			writeStatus(w, e)
			return
		}
	}
	if e := s.route(w, r); e != nil {
		writeStatus(w, e)
	}
}

func isWatchRequest(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/api/v1/watch/") {
		return true
	}
	w := r.URL.Query().Get("watch")
	return w == "1" || w == "true"
}

func (s *server) takeFault(r *http.Request) *fault {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/api/v1/") && !strings.HasPrefix(p, "/apis/apps/v1/") {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Match != "" && !strings.Contains(r.RequestURI, f.Match) {
			continue
		}
		f.Count--
		if f.Count <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		c := *f
		return &c
	}
	return nil
}

// faultStatus is the Status an injected fault answers; cur is the current
// resourceVersion (for the 410 message).
func faultStatus(code int, r *http.Request, cur uint64) *statusError {
	switch code {
	case 401:
		return newStatus(401, "Unauthorized")
	case 403:
		e := newStatus(403, fmt.Sprintf(`pods is forbidden: User "kubeapi-token" cannot %s resource "pods" in API group "" at the cluster scope`, verbOf(r)))
		e.details = obj{"kind": "pods"}
		return e
	case 404:
		return newStatus(404, "the server could not find the requested resource")
	case 410:
		if isWatchRequest(r) {
			return newStatus(410, fmt.Sprintf("too old resource version: %s (%d)", orDefault(r.URL.Query().Get("resourceVersion"), "0"), cur))
		}
		if r.URL.Query().Get("continue") != "" {
			return newStatus(410, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		return newStatus(410, "The resourceVersion for the provided list is too old.")
	case 429:
		e := newStatus(429, "Too many requests, please try again later.")
		e.details = obj{"retryAfterSeconds": 1}
		e.retryAfter = 1
		return e
	case 500:
		e := newStatus(500, "Internal error occurred: injected fault")
		e.details = obj{"causes": []any{obj{"message": "injected fault"}}}
		return e
	case 503:
		return newStatus(503, "the server is currently unable to handle the request")
	case 504:
		e := newStatus(504, "Timeout: request did not complete within requested timeout - context deadline exceeded")
		e.details = obj{}
		return e
	}
	return newStatus(code, fmt.Sprintf("injected fault %d", code))
}

func verbOf(r *http.Request) string {
	if isWatchRequest(r) {
		return "watch"
	}
	if strings.Contains(r.URL.Path, "/proxy") {
		return "get"
	}
	return "list"
}

// route serves the Kubernetes API; it returns a Status error to write, or nil
// when it has answered.
func (s *server) route(w http.ResponseWriter, r *http.Request) *statusError {
	p := r.URL.Path
	switch p {
	case "/version", "/version/":
		return s.get(w, r, s.versionInfo)
	case "/healthz", "/livez", "/readyz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		io.WriteString(w, "ok")
		return nil
	case "/api", "/api/":
		return s.get(w, r, s.apiVersions)
	case "/api/v1", "/api/v1/":
		return s.get(w, r, apiResourceList)
	}
	if p == "/apis" || strings.HasPrefix(p, "/apis/") {
		return s.routeApps(w, r)
	}
	if !strings.HasPrefix(p, "/api/v1/") {
		return newStatus(404, "the server could not find the requested resource")
	}
	rest := strings.TrimPrefix(p, "/api/v1/")
	watchPath := false
	if strings.HasPrefix(rest, "watch/") {
		watchPath = true
		rest = strings.TrimPrefix(rest, "watch/")
	}
	parts := strings.Split(rest, "/")
	// Pod proxy: namespaces/NS/pods/NAME/proxy[/PATH]
	if !watchPath && len(parts) >= 5 && parts[0] == "namespaces" && parts[2] == "pods" && parts[4] == "proxy" {
		return s.serveProxy(w, r, parts[1], parts[3])
	}
	if r.Method != http.MethodGet {
		return newStatus(405, "the server does not allow this method on the requested resource")
	}
	q := r.URL.Query()
	if watchPath {
		q.Set("watch", "true")
	}
	switch {
	case len(parts) == 1 && parts[0] == "pods":
		return s.servePods(w, r, q, "", "")
	case len(parts) == 1 && parts[0] == "namespaces":
		return s.serveNamespaces(w, r, q, "")
	case len(parts) == 2 && parts[0] == "namespaces" && parts[1] != "":
		return s.serveNamespaces(w, r, q, parts[1])
	case len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "pods":
		return s.servePods(w, r, q, parts[1], "")
	case len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "pods" && parts[3] != "":
		return s.servePods(w, r, q, parts[1], parts[3])
	case len(parts) == 5 && parts[0] == "namespaces" && parts[2] == "pods" && parts[4] == "status" && !watchPath:
		return s.servePods(w, r, q, parts[1], parts[3])
	}
	return newStatus(404, "the server could not find the requested resource")
}

func (s *server) get(w http.ResponseWriter, r *http.Request, f func() obj) *statusError {
	if r.Method != http.MethodGet {
		return newStatus(405, "the server does not allow this method on the requested resource")
	}
	writeJSON(w, 200, f())
	return nil
}

// ---- discovery ---------------------------------------------------------------------------

func (s *server) versionInfo() obj {
	v := *flagVersion
	major, minor := "1", "32"
	if m := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindStringSubmatch(v); m != nil {
		major, minor = m[1], m[2]
	}
	return obj{"major": major, "minor": minor, "gitVersion": v,
		"gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
		"buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23.4", "compiler": "gc", "platform": "linux/amd64"}
}

func (s *server) apiVersions() obj {
	return obj{"kind": "APIVersions", "versions": []any{"v1"},
		"serverAddressByClientCIDRs": []any{obj{"clientCIDR": "0.0.0.0/0", "serverAddress": s.serverAddr}}}
}

func apiResourceList() obj {
	return obj{"kind": "APIResourceList", "groupVersion": "v1", "resources": []any{
		obj{"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
			"verbs": []any{"get", "list"}, "shortNames": []any{"ns"}, "storageVersionHash": "Q3oi5N2YM8M="},
		obj{"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
			"verbs":      []any{"get", "list", "watch"},
			"shortNames": []any{"po"}, "categories": []any{"all"}, "storageVersionHash": "xPOwRZ+Yhw8="},
		obj{"name": "pods/proxy", "singularName": "", "namespaced": true, "kind": "PodProxyOptions",
			"verbs": []any{"create", "delete", "get", "patch", "update"}},
		obj{"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
			"verbs": []any{"get"}},
	}}
}

// ---- list, get, watch ----------------------------------------------------------------------

// negotiation: the representation a GET asked for.
type repr struct {
	table         bool
	tableVersion  string // meta.k8s.io/v1 or meta.k8s.io/v1beta1
	includeObject string // Object, Metadata, None
}

func negotiate(r *http.Request) (repr, *statusError) {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return repr{}, nil
	}
	for _, part := range strings.Split(accept, ",") {
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		params := map[string]string{}
		for _, f := range fields[1:] {
			if kv := strings.SplitN(strings.TrimSpace(f), "=", 2); len(kv) == 2 {
				params[strings.ToLower(kv[0])] = kv[1]
			}
		}
		if mt != "application/json" && mt != "*/*" && mt != "application/*" {
			continue
		}
		switch params["as"] {
		case "":
			return repr{}, nil
		case "Table":
			if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
				inc := r.URL.Query().Get("includeObject")
				switch inc {
				case "":
					inc = "Metadata"
				case "Object", "Metadata", "None":
				default:
					return repr{}, badRequest(fmt.Sprintf("unrecognized includeObject value: %q", inc))
				}
				return repr{table: true, tableVersion: "meta.k8s.io/" + params["v"], includeObject: inc}, nil
			}
		}
	}
	return repr{}, newStatus(406, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")
}

func (s *server) servePods(w http.ResponseWriter, r *http.Request, q url.Values, ns, name string) *statusError {
	rp, e := negotiate(r)
	if e != nil {
		return e
	}
	watch := q.Get("watch") == "1" || q.Get("watch") == "true"
	if name != "" && !watch {
		s.mu.Lock()
		p := s.pods[ns+"/"+name]
		s.mu.Unlock()
		if p == nil {
			return notFound("pods", name)
		}
		if rp.table {
			writeJSON(w, 200, podTable([]obj{p}, rp, obj{"resourceVersion": metaString(p, "resourceVersion")}, false))
		} else {
			writeJSON(w, 200, p)
		}
		return nil
	}
	f := &filter{ns: ns}
	var err error
	if f.labels, err = parseLabelSelector(q.Get("labelSelector")); err != nil {
		return badRequest(err.Error())
	}
	if f.fields, err = parseFieldSelector(q.Get("fieldSelector"), podFields); err != nil {
		return badRequest(err.Error())
	}
	if name != "" { // watch of one pod: .../pods/NAME?watch=1 (the deprecated form)
		f.fields = append(f.fields, fieldReq{"metadata.name", "=", name})
	}
	if watch {
		return s.serveWatch(w, r, q, f, rp)
	}
	return s.serveList(w, q, f, rp)
}

type continueToken struct {
	V     string `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

func (s *server) serveList(w http.ResponseWriter, q url.Values, f *filter, rp repr) *statusError {
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return badRequest(fmt.Sprintf("invalid value for limit: %q", l))
		}
		if n > 1<<30 {
			n = 1 << 30
		}
		limit = int(n)
	}
	cont := q.Get("continue")
	rvParam := q.Get("resourceVersion")
	rvMatch := q.Get("resourceVersionMatch")
	if rvMatch != "" && rvMatch != "Exact" && rvMatch != "NotOlderThan" {
		return newStatus(422, fmt.Sprintf("resourceVersionMatch: Unsupported value: %q: supported values: \"Exact\", \"NotOlderThan\"", rvMatch))
	}
	if rvMatch != "" && rvParam == "" {
		return newStatus(422, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if cont != "" && rvParam != "" && rvParam != "0" {
		return newStatus(422, "resourceVersion: Forbidden: specifying resource version is not allowed when using continue")
	}
	prefix := ""
	if f.ns != "" {
		prefix = f.ns + "/"
	}
	var rv uint64 // snapshot to serve; 0: the current state
	start := ""
	inconsistent := false
	if cont != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cont)
		var tok continueToken
		if err == nil {
			err = json.Unmarshal(raw, &tok)
		}
		if err != nil {
			return badRequest(fmt.Sprintf("continue key is not valid: %v", err))
		}
		if tok.V != "meta.k8s.io/v1" {
			return badRequest(fmt.Sprintf("continue key is not valid: server does not recognize this encoded version %q", tok.V))
		}
		if tok.RV == 0 || tok.Start == "" || strings.Contains(tok.Start, "..") {
			return badRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
		}
		start = tok.Start
		if tok.RV < 0 {
			inconsistent = true
		} else {
			rv = uint64(tok.RV)
		}
	} else if rvParam != "" && rvParam != "0" {
		n, err := strconv.ParseUint(rvParam, 10, 64)
		if err != nil {
			return badRequest(fmt.Sprintf("invalid resource version: %v", err))
		}
		exact := rvMatch == "Exact" || (rvMatch == "" && limit > 0)
		// A resourceVersion newer than the server: wait up to 3 s for it.
		deadline := time.Now().Add(3 * time.Second)
		for {
			s.mu.Lock()
			cur := s.rv
			s.mu.Unlock()
			if n <= cur {
				break
			}
			if time.Now().After(deadline) {
				e := newStatus(504, fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", n, cur))
				e.details = obj{"causes": []any{obj{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}}, "retryAfterSeconds": 1}
				e.retryAfter = 1
				return e
			}
			time.Sleep(50 * time.Millisecond)
		}
		if exact {
			rv = n
		}
	}

	s.mu.Lock()
	state := s.pods
	snapshot := s.rv
	if rv != 0 {
		if rv < s.compacted {
			s.mu.Unlock()
			if cont != "" {
				tok, _ := json.Marshal(continueToken{V: "meta.k8s.io/v1", RV: -1, Start: start})
				e := newStatus(410, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
				e.cont = base64.RawURLEncoding.EncodeToString(tok)
				return e
			}
			return newStatus(410, "The resourceVersion for the provided list is too old.")
		}
		state = s.stateAtLocked(rv)
		snapshot = rv
	}
	keys := make([]string, 0, len(state))
	for k := range state {
		if strings.HasPrefix(k, prefix) && k >= prefix+start {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var items []obj
	next := ""
	remaining := 0
	for i, k := range keys {
		p := state[k]
		if !f.match(p) {
			continue
		}
		if limit > 0 && len(items) == limit {
			next = strings.TrimPrefix(keys[i-1], prefix) + "\x00"
			remaining = len(keys) - i
			break
		}
		items = append(items, p)
	}
	s.mu.Unlock()

	lm := obj{"resourceVersion": strconv.FormatUint(snapshot, 10)}
	if next != "" {
		tokRV := int64(snapshot)
		if inconsistent {
			tokRV = -1
		}
		tok, _ := json.Marshal(continueToken{V: "meta.k8s.io/v1", RV: tokRV, Start: next})
		lm["continue"] = base64.RawURLEncoding.EncodeToString(tok)
		if len(f.labels) == 0 && len(f.fields) == 0 {
			lm["remainingItemCount"] = remaining
		}
	}
	if rp.table {
		writeJSON(w, 200, podTable(items, rp, lm, false))
		return nil
	}
	list := make([]any, len(items))
	for i, p := range items {
		list[i] = p
	}
	writeJSON(w, 200, obj{"kind": "PodList", "apiVersion": "v1", "metadata": lm, "items": list})
	return nil
}

type watcher struct {
	f       *filter
	queue   []event
	notify  chan struct{}
	done    chan struct{}
	closed  bool
	aborted bool // cut the connection instead of ending the stream
}

// offerLocked queues e for the watcher as the watch cache would present it
// through the watcher's selectors. Callers hold s.mu.
func (w *watcher) offerLocked(e event) {
	cur, old := w.f.match(e.obj), w.f.match(e.prev)
	switch {
	case e.typ == "DELETED":
		if !old {
			return
		}
	case cur && old:
		e.typ = "MODIFIED"
	case cur && !old:
		e.typ = "ADDED"
	case !cur && old:
		last := clone(e.prev)
		meta(last)["resourceVersion"] = strconv.FormatUint(e.rv, 10)
		e = event{typ: "DELETED", rv: e.rv, key: e.key, obj: last, prev: e.prev}
	default:
		return
	}
	w.queue = append(w.queue, e)
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *watcher) closeLocked() {
	if !w.closed {
		w.closed = true
		close(w.done)
	}
}

func startWatchStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(200)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeEvent(w http.ResponseWriter, typ string, o any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj{"type": typ, "object": o}); err != nil { // one line, newline-terminated
		return err
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func bookmarkObject(rv uint64, initialEnd bool) obj {
	m := obj{"resourceVersion": strconv.FormatUint(rv, 10), "creationTimestamp": nil}
	if initialEnd {
		m["annotations"] = obj{"k8s.io/initial-events-end": "true"}
	}
	return obj{"kind": "Pod", "apiVersion": "v1", "metadata": m, "spec": obj{"containers": nil}, "status": obj{}}
}

func (s *server) serveWatch(w http.ResponseWriter, r *http.Request, q url.Values, f *filter, rp repr) *statusError {
	allowBookmarks := q.Get("allowWatchBookmarks") == "true"
	sendInitial := q.Get("sendInitialEvents")
	rvParam := q.Get("resourceVersion")
	timeout := *flagWatchTimeout
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return badRequest(fmt.Sprintf("invalid value for timeoutSeconds: %q", t))
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	if sendInitial != "" && sendInitial != "true" && sendInitial != "false" {
		return badRequest(fmt.Sprintf("invalid value for sendInitialEvents: %q", sendInitial))
	}
	if sendInitial == "true" {
		if !allowBookmarks {
			return newStatus(422, "allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true")
		}
		if q.Get("resourceVersionMatch") != "NotOlderThan" {
			return newStatus(422, "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
		}
	}
	var fromRV uint64
	replay := false
	if rvParam != "" && rvParam != "0" {
		n, err := strconv.ParseUint(rvParam, 10, 64)
		if err != nil {
			return badRequest(fmt.Sprintf("invalid resource version: %v", err))
		}
		fromRV = n
		replay = sendInitial != "true"
	}

	wt := &watcher{f: f, notify: make(chan struct{}, 1), done: make(chan struct{})}
	type out struct {
		typ string
		o   obj
	}
	var initial []out
	var errEvent obj
	s.mu.Lock()
	if replay {
		if fromRV < s.compacted {
			errEvent = newStatus(410, fmt.Sprintf("too old resource version: %d (%d)", fromRV, s.compacted)).object()
		} else {
			for _, e := range s.history {
				if e.rv > fromRV {
					wt.offerLocked(e)
				}
			}
		}
	} else if sendInitial != "false" {
		keys := make([]string, 0, len(s.pods))
		for k, p := range s.pods {
			if f.match(p) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			initial = append(initial, out{"ADDED", s.pods[k]})
		}
		if sendInitial == "true" {
			initial = append(initial, out{"BOOKMARK", bookmarkObject(s.rv, true)})
		}
	}
	if errEvent == nil {
		s.watchers[wt] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, wt)
		wt.closeLocked()
		s.mu.Unlock()
	}()

	startWatchStream(w)
	if errEvent != nil {
		writeEvent(w, "ERROR", errEvent)
		return nil
	}
	first := true
	send := func(typ string, o obj) error {
		if !rp.table || typ == "ERROR" {
			return writeEvent(w, typ, o)
		}
		if typ == "BOOKMARK" {
			t := obj{"kind": "Table", "apiVersion": rp.tableVersion, "metadata": obj{"resourceVersion": metaString(o, "resourceVersion")},
				"columnDefinitions": nil, "rows": []any{}}
			if first {
				t["columnDefinitions"] = podColumns
			}
			first = false
			return writeEvent(w, typ, t)
		}
		t := podTable([]obj{o}, rp, obj{"resourceVersion": metaString(o, "resourceVersion")}, !first)
		first = false
		return writeEvent(w, typ, t)
	}
	for _, e := range initial {
		if send(e.typ, e.o) != nil {
			return nil
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if allowBookmarks && *flagBookmark > 0 {
		t := time.NewTicker(*flagBookmark)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-timer.C:
			return nil
		case <-wt.done:
			s.mu.Lock()
			abort := wt.aborted
			s.mu.Unlock()
			if abort {
				// no terminating chunk: the client sees the connection cut mid-stream,
				// as when an API server dies or a load balancer drops the connection
				panic(http.ErrAbortHandler)
			}
			return nil
		case <-wt.notify:
			s.mu.Lock()
			evs := wt.queue
			wt.queue = nil
			s.mu.Unlock()
			for _, e := range evs {
				if send(e.typ, e.obj) != nil {
					return nil
				}
			}
		case <-tick:
			s.mu.Lock()
			pending := len(wt.queue) > 0
			rv := s.rv
			s.mu.Unlock()
			if !pending {
				if send("BOOKMARK", bookmarkObject(rv, false)) != nil {
					return nil
				}
			}
		}
	}
}

// namespaces: derived from the pods, plus the ones every cluster has.
func (s *server) serveNamespaces(w http.ResponseWriter, r *http.Request, q url.Values, name string) *statusError {
	rp, e := negotiate(r)
	if e != nil {
		return e
	}
	if q.Get("watch") == "1" || q.Get("watch") == "true" {
		return newStatus(405, "watch is not supported on namespaces by this test server")
	}
	s.mu.Lock()
	set := map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}
	for _, p := range s.pods {
		set[metaString(p, "namespace")] = true
	}
	rv := s.rv
	s.mu.Unlock()
	nsObj := func(n string) obj {
		return obj{"kind": "Namespace", "apiVersion": "v1",
			"metadata": obj{"name": n, "uid": nameUUID("Namespace/" + n), "resourceVersion": "1",
				"creationTimestamp": "2025-01-01T00:00:00Z", "labels": obj{"kubernetes.io/metadata.name": n}},
			"spec": obj{"finalizers": []any{"kubernetes"}}, "status": obj{"phase": "Active"}}
	}
	if name != "" {
		if !set[name] {
			return notFound("namespaces", name)
		}
		if rp.table {
			writeJSON(w, 200, nsTable([]obj{nsObj(name)}, rp, obj{"resourceVersion": "1"}))
		} else {
			writeJSON(w, 200, nsObj(name))
		}
		return nil
	}
	labels, err := parseLabelSelector(q.Get("labelSelector"))
	if err != nil {
		return badRequest(err.Error())
	}
	fields, err := parseFieldSelector(q.Get("fieldSelector"), namespaceFields)
	if err != nil {
		return badRequest(err.Error())
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	var items []obj
	for _, n := range names {
		o := nsObj(n)
		if matchLabels(labels, o) && matchFields(fields, namespaceFields, o) {
			items = append(items, o)
		}
	}
	lm := obj{"resourceVersion": strconv.FormatUint(rv, 10)}
	if rp.table {
		writeJSON(w, 200, nsTable(items, rp, lm))
		return nil
	}
	list := make([]any, len(items))
	for i, o := range items {
		list[i] = o
	}
	writeJSON(w, 200, obj{"kind": "NamespaceList", "apiVersion": "v1", "metadata": lm, "items": list})
	return nil
}

// ---- tables --------------------------------------------------------------------------------

var podColumns = []any{
	column("Name", "name", 0, "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"),
	column("Ready", "", 0, "The aggregate readiness state of this pod for accepting traffic."),
	column("Status", "", 0, "The aggregate status of the containers in this pod."),
	column("Restarts", "", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
	column("Age", "", 0, "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"),
	column("IP", "", 1, "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
	column("Node", "", 1, "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for preemption by the scheduler. The nodeName field is set by the scheduler when the pod is scheduled."),
	column("Nominated Node", "", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node."),
	column("Readiness Gates", "", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
}

func column(name, format string, priority int, desc string) obj {
	return obj{"name": name, "type": "string", "format": format, "description": desc, "priority": priority}
}

func rowObject(o obj, rp repr) any {
	switch rp.includeObject {
	case "Object":
		return o
	case "None":
		return nil
	}
	return obj{"kind": "PartialObjectMetadata", "apiVersion": rp.tableVersion, "metadata": meta(o)}
}

func podTable(items []obj, rp repr, lm obj, noHeaders bool) obj {
	rows := make([]any, 0, len(items))
	now := time.Now()
	for _, p := range items {
		spec, status := sub(p, "spec"), sub(p, "status")
		containers, _ := spec["containers"].([]any)
		total, ready, restarts := len(containers), 0, 0
		reason := str(status["phase"])
		if r := str(status["reason"]); r != "" {
			reason = r
		}
		var lastRestart time.Time
		css, _ := status["containerStatuses"].([]any)
		hasRunning := false
		for i := len(css) - 1; i >= 0; i-- {
			cs, _ := css[i].(map[string]any)
			n, _ := num(cs["restartCount"])
			restarts += int(n)
			if lt, ok := sub(cs, "lastState")["terminated"].(map[string]any); ok {
				if t, err := time.Parse(time.RFC3339, str(lt["finishedAt"])); err == nil && t.After(lastRestart) {
					lastRestart = t
				}
			}
			st := sub(cs, "state")
			if wt, ok := st["waiting"].(map[string]any); ok && str(wt["reason"]) != "" {
				reason = str(wt["reason"])
			} else if tm, ok := st["terminated"].(map[string]any); ok {
				if str(tm["reason"]) != "" {
					reason = str(tm["reason"])
				} else if sig, _ := num(tm["signal"]); sig != 0 {
					reason = fmt.Sprintf("Signal:%d", int(sig))
				} else {
					code, _ := num(tm["exitCode"])
					reason = fmt.Sprintf("ExitCode:%d", int(code))
				}
			} else if cs["ready"] == true {
				if _, ok := st["running"]; ok {
					hasRunning = true
					ready++
				}
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "Running"
		}
		if metaString(p, "deletionTimestamp") != "" {
			reason = "Terminating"
		}
		restartsStr := strconv.Itoa(restarts)
		if !lastRestart.IsZero() {
			restartsStr = fmt.Sprintf("%d (%s ago)", restarts, humanDuration(now.Sub(lastRestart)))
		}
		ip := str(status["podIP"])
		if ip == "" {
			ip = "<none>"
		}
		node := str(spec["nodeName"])
		if node == "" {
			node = "<none>"
		}
		nominated := str(status["nominatedNodeName"])
		if nominated == "" {
			nominated = "<none>"
		}
		gates := "<none>"
		if rg, ok := spec["readinessGates"].([]any); ok && len(rg) > 0 {
			gates = fmt.Sprintf("0/%d", len(rg))
		}
		row := obj{"cells": []any{metaString(p, "name"), fmt.Sprintf("%d/%d", ready, total), reason, restartsStr,
			age(now, metaString(p, "creationTimestamp")), ip, node, nominated, gates},
			"object": rowObject(p, rp)}
		switch str(status["phase"]) {
		case "Succeeded":
			row["conditions"] = []any{obj{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}}
		case "Failed":
			row["conditions"] = []any{obj{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}}
		}
		rows = append(rows, row)
	}
	t := obj{"kind": "Table", "apiVersion": rp.tableVersion, "metadata": lm, "columnDefinitions": podColumns, "rows": rows}
	if noHeaders {
		t["columnDefinitions"] = nil
	}
	return t
}

func nsTable(items []obj, rp repr, lm obj) obj {
	rows := make([]any, 0, len(items))
	now := time.Now()
	for _, o := range items {
		rows = append(rows, obj{"cells": []any{metaString(o, "name"), "Active", age(now, metaString(o, "creationTimestamp"))},
			"object": rowObject(o, rp)})
	}
	return obj{"kind": "Table", "apiVersion": rp.tableVersion, "metadata": lm, "rows": rows, "columnDefinitions": []any{
		podColumns[0],
		column("Status", "", 0, "The status of the namespace"),
		podColumns[4],
	}}
}

func age(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	return humanDuration(now.Sub(t))
}

// humanDuration is k8s.io/apimachinery/pkg/util/duration.HumanDuration.
func humanDuration(d time.Duration) string {
	if seconds := int(d.Seconds()); seconds < -1 {
		return "<invalid>"
	} else if seconds < 0 {
		return "0s"
	} else if seconds < 60*2 {
		return fmt.Sprintf("%ds", seconds)
	}
	minutes := int(d / time.Minute)
	if minutes < 10 {
		s := int(d/time.Second) % 60
		if s == 0 {
			return fmt.Sprintf("%dm", minutes)
		}
		return fmt.Sprintf("%dm%ds", minutes, s)
	} else if minutes < 60*3 {
		return fmt.Sprintf("%dm", minutes)
	}
	hours := int(d / time.Hour)
	if hours < 8 {
		m := int(d/time.Minute) % 60
		if m == 0 {
			return fmt.Sprintf("%dh", hours)
		}
		return fmt.Sprintf("%dh%dm", hours, m)
	} else if hours < 48 {
		return fmt.Sprintf("%dh", hours)
	} else if hours < 24*8 {
		h := hours % 24
		if h == 0 {
			return fmt.Sprintf("%dd", hours/24)
		}
		return fmt.Sprintf("%dd%dh", hours/24, h)
	} else if hours < 24*365*2 {
		return fmt.Sprintf("%dd", hours/24)
	} else if hours < 24*365*8 {
		dy := hours / 24 % 365
		if dy == 0 {
			return fmt.Sprintf("%dy", hours/24/365)
		}
		return fmt.Sprintf("%dy%dd", hours/24/365, dy)
	}
	return fmt.Sprintf("%dy", hours/24/365)
}

// ---- pod proxy -------------------------------------------------------------------------------

// splitSchemeNamePort is k8s.io/apimachinery/pkg/util/net.SplitSchemeNamePort.
func splitSchemeNamePort(id string) (scheme, name, port string, valid bool) {
	parts := strings.Split(id, ":")
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		name, port = parts[0], parts[1]
	case 3:
		scheme, name, port = parts[0], parts[1], parts[2]
	default:
		return "", "", "", false
	}
	if name != "" && (scheme == "" || scheme == "http" || scheme == "https") {
		return scheme, name, port, true
	}
	return "", "", "", false
}

func (s *server) serveProxy(w http.ResponseWriter, r *http.Request, ns, id string) *statusError {
	scheme, name, port, ok := splitSchemeNamePort(id)
	if !ok {
		return badRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	s.mu.Lock()
	p := s.pods[ns+"/"+name]
	s.mu.Unlock()
	if p == nil {
		return notFound("pods", name)
	}
	if port == "" { // the first port any container declares
		cs, _ := sub(p, "spec")["containers"].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			if ports, ok := cm["ports"].([]any); ok && len(ports) > 0 {
				pm, _ := ports[0].(map[string]any)
				if n, ok := num(pm["containerPort"]); ok {
					port = strconv.Itoa(int(n))
					break
				}
			}
		}
	}
	podIP := ""
	if ips, ok := sub(p, "status")["podIPs"].([]any); ok && len(ips) > 0 {
		if m, ok := ips[0].(map[string]any); ok {
			podIP = str(m["ip"])
		}
	}
	ip := net.ParseIP(podIP)
	if ip == nil || (*flagStrictProxyIP && !ip.IsGlobalUnicast()) || ip.IsUnspecified() {
		return badRequest("address not allowed")
	}
	if scheme == "" {
		scheme = "http"
	}
	host := podIP
	if port != "" {
		host = net.JoinHostPort(podIP, port)
	} else if strings.Contains(podIP, ":") {
		host = "[" + podIP + "]"
	}
	// The path after .../proxy, escaped as the client sent it.
	esc := r.URL.EscapedPath()
	marker := "/" + id + "/proxy"
	i := strings.Index(esc, marker)
	if i < 0 { // the id itself was escaped differently; fall back to the decoded path
		esc = r.URL.Path
		i = strings.Index(esc, marker)
	}
	rest := esc[i+len(marker):]
	if rest == "" {
		rest = "/"
	}
	target := &url.URL{Scheme: scheme, Host: host}
	if u, err := url.Parse(rest); err == nil {
		target.Path, target.RawPath = u.Path, u.RawPath
	} else {
		target.Path = rest
	}
	target.RawQuery = r.URL.RawQuery
	rp := &httputil.ReverseProxy{
		Director: func(out *http.Request) {
			out.URL = target
			out.Host = host
			out.Header.Del("Authorization")
			if _, ok := out.Header["User-Agent"]; !ok {
				out.Header.Set("User-Agent", "")
			}
		},
		Transport:     s.proxyTransport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away or timed out
			}
			writeStatus(w, newStatus(503, fmt.Sprintf("error trying to reach service: %v", err)))
		},
	}
	rp.ServeHTTP(w, r)
	return nil
}

// ---- admin API ----------------------------------------------------------------------------------

func (s *server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	q := r.URL.Query()
	fail := func(code int, msg string) { writeJSON(w, code, obj{"error": msg}) }
	if strings.HasPrefix(p, "/admin/workloads") && s.serveAdminWorkloads(w, r, p) {
		return
	}
	switch {
	case p == "/admin/pods" && r.Method == http.MethodGet:
		s.mu.Lock()
		keys := make([]string, 0, len(s.pods))
		for k := range s.pods {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		list := make([]any, 0, len(keys))
		for _, k := range keys {
			list = append(list, s.pods[k])
		}
		s.mu.Unlock()
		writeJSON(w, 200, list)
	case p == "/admin/pods" && r.Method == http.MethodPost:
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			fail(400, err.Error())
			return
		}
		pods, err := decodePods(data)
		if err != nil {
			fail(400, err.Error())
			return
		}
		var stored []any
		created := false
		for _, pod := range pods {
			o, c, err := s.upsert(pod)
			if err != nil {
				fail(400, err.Error())
				return
			}
			created = created || c
			stored = append(stored, o)
		}
		writeStored(w, created, stored)
	case strings.HasPrefix(p, "/admin/pods/") && (r.Method == http.MethodDelete || r.Method == http.MethodPatch):
		parts := strings.Split(strings.TrimPrefix(p, "/admin/pods/"), "/")
		if len(parts) != 2 {
			fail(404, "want /admin/pods/NAMESPACE/NAME")
			return
		}
		if r.Method == http.MethodDelete {
			last, ok := s.remove(parts[0], parts[1])
			if !ok {
				fail(404, fmt.Sprintf("pod %s/%s not found", parts[0], parts[1]))
				return
			}
			writeJSON(w, 200, last)
			return
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			fail(400, err.Error())
			return
		}
		patch, err := decodeJSON(data)
		pm, ok := patch.(map[string]any)
		if err != nil || !ok {
			fail(400, "want a JSON merge patch object")
			return
		}
		s.mu.Lock()
		cur := s.pods[parts[0]+"/"+parts[1]]
		s.mu.Unlock()
		if cur == nil {
			fail(404, fmt.Sprintf("pod %s/%s not found", parts[0], parts[1]))
			return
		}
		next := clone(cur)
		if st, ok := pm["status"].(map[string]any); ok {
			if _, ok := st["phase"]; ok {
				cs := sub(next, "status")
				if _, ok := st["conditions"]; !ok {
					delete(cs, "conditions")
				}
				if _, ok := st["containerStatuses"]; !ok {
					delete(cs, "containerStatuses")
				}
				if st["phase"] == "Pending" {
					delete(cs, "podIP")
					delete(cs, "podIPs")
				}
			}
		}
		next = mergePatch(next, pm).(map[string]any)
		meta(next)["name"] = parts[1]
		meta(next)["namespace"] = parts[0]
		delete(meta(next), "resourceVersion")
		o, _, err := s.upsert(next)
		if err != nil {
			fail(400, err.Error())
			return
		}
		writeJSON(w, 200, o)
	case p == "/admin/fault" && r.Method == http.MethodPost:
		f := &fault{Count: 1, Match: q.Get("match"), Delay: q.Get("delay")}
		var err error
		if f.Code, err = strconv.Atoi(orDefault(q.Get("code"), "0")); err != nil || f.Code < 0 || f.Code > 599 {
			fail(400, "code: want an HTTP status")
			return
		}
		if c := q.Get("count"); c != "" {
			if f.Count, err = strconv.Atoi(c); err != nil || f.Count < 1 {
				fail(400, "count: want a positive integer")
				return
			}
		}
		if f.Delay != "" {
			if f.delay, err = time.ParseDuration(f.Delay); err != nil {
				fail(400, "delay: "+err.Error())
				return
			}
		}
		if f.Code == 0 && f.delay == 0 {
			fail(400, "want code or delay")
			return
		}
		s.mu.Lock()
		s.faults = append(s.faults, f)
		s.mu.Unlock()
		writeJSON(w, 200, f)
	case p == "/admin/fault" && r.Method == http.MethodGet:
		s.mu.Lock()
		list := append([]*fault{}, s.faults...)
		s.mu.Unlock()
		writeJSON(w, 200, list)
	case p == "/admin/fault" && r.Method == http.MethodDelete:
		s.mu.Lock()
		s.faults = nil
		s.mu.Unlock()
		writeJSON(w, 200, []any{})
	case p == "/admin/compact" && r.Method == http.MethodPost:
		s.mu.Lock()
		s.compactLocked()
		rv := s.rv
		s.mu.Unlock()
		writeJSON(w, 200, obj{"resourceVersion": strconv.FormatUint(rv, 10), "compacted": strconv.FormatUint(rv, 10)})
	case p == "/admin/watches/close" && r.Method == http.MethodPost:
		writeJSON(w, 200, obj{"closed": s.closeWatches(q.Get("abort") == "1")})
	case p == "/admin/token" && r.Method == http.MethodPost:
		t := q.Get("value")
		if t == "" {
			t = randHex(16)
		}
		s.mu.Lock()
		if q.Get("keep") == "1" {
			s.oldTokens[s.token] = true
		} else {
			s.oldTokens = map[string]bool{}
		}
		s.token = t
		s.mu.Unlock()
		if err := s.writeFiles(); err != nil {
			fail(500, err.Error())
			return
		}
		writeJSON(w, 200, obj{"token": t})
	case p == "/admin/requests" && r.Method == http.MethodGet:
		s.reqMu.Lock()
		list := append([]reqRecord{}, s.requests...)
		s.reqMu.Unlock()
		writeJSON(w, 200, list)
	case p == "/admin/requests" && r.Method == http.MethodDelete:
		s.reqMu.Lock()
		s.requests = nil
		s.reqMu.Unlock()
		writeJSON(w, 200, []any{})
	case p == "/admin/state" && r.Method == http.MethodGet:
		s.mu.Lock()
		st := obj{"resourceVersion": strconv.FormatUint(s.rv, 10), "compacted": strconv.FormatUint(s.compacted, 10),
			"pods": len(s.pods), "watches": len(s.watchers), "history": len(s.history)}
		s.mu.Unlock()
		writeJSON(w, 200, st)
	default:
		fail(404, fmt.Sprintf("no admin route %s %s", r.Method, r.URL.Path))
	}
}

// mergePatch applies an RFC 7386 JSON merge patch.
func mergePatch(target any, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = obj{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

// ---- certificates and kubeconfig ------------------------------------------------------------------

func (s *server) makeCerts() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubeapi-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if s.caCert, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	s.caKey = caKey
	s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	s.caPool = x509.NewCertPool()
	s.caPool.AddCert(s.caCert)

	certPEM, keyPEM, err := s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	if s.serverCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return err
	}
	s.clientCertPEM, s.clientKeyPEM, err = s.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubeapi-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err
}

func (s *server) issue(t *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	t.SerialNumber = serial()
	t.NotBefore = now.Add(-time.Hour)
	t.NotAfter = now.Add(365 * 24 * time.Hour)
	t.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, t, s.caCert, &key.PublicKey, s.caKey)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// writeFiles writes the kubeconfig and the -cert-dir files (atomically, so a
// reader never sees half a file).
func (s *server) writeFiles() error {
	s.mu.Lock()
	token := s.token
	s.mu.Unlock()
	b64 := base64.StdEncoding.EncodeToString
	if *flagCertDir != "" {
		dir := *flagCertDir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for name, data := range map[string][]byte{"ca.crt": s.caPEM, "token": []byte(token), "namespace": []byte("default"),
			"client.crt": s.clientCertPEM, "client.key": s.clientKeyPEM} {
			if err := writeAtomic(filepath.Join(dir, name), data); err != nil {
				return err
			}
		}
	}
	if *flagKubeconfig == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nclusters:\n")
	fmt.Fprintf(&b, "- cluster:\n    certificate-authority-data: %s\n    server: %s\n  name: kubeapi\n", b64(s.caPEM), s.serverURL)
	fmt.Fprintf(&b, "- cluster:\n    insecure-skip-tls-verify: true\n    server: %s\n  name: kubeapi-insecure\n", s.serverURL)
	var dir string
	if *flagCertDir != "" {
		var err error
		if dir, err = filepath.Abs(*flagCertDir); err != nil {
			return err
		}
		fmt.Fprintf(&b, "- cluster:\n    certificate-authority: %s\n    server: %s\n  name: kubeapi-files\n", strconv.Quote(filepath.Join(dir, "ca.crt")), s.serverURL)
	}
	fmt.Fprintf(&b, "contexts:\n")
	fmt.Fprintf(&b, "- context:\n    cluster: kubeapi\n    namespace: default\n    user: kubeapi-token\n  name: kubeapi\n")
	fmt.Fprintf(&b, "- context:\n    cluster: kubeapi\n    user: kubeapi-cert\n  name: kubeapi-cert\n")
	if dir != "" {
		fmt.Fprintf(&b, "- context:\n    cluster: kubeapi-files\n    user: kubeapi-files\n  name: kubeapi-files\n")
	}
	fmt.Fprintf(&b, "- context:\n    cluster: kubeapi-insecure\n    user: kubeapi-token\n  name: kubeapi-insecure\n")
	fmt.Fprintf(&b, "current-context: kubeapi\nkind: Config\npreferences: {}\nusers:\n")
	fmt.Fprintf(&b, "- name: kubeapi-cert\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n", b64(s.clientCertPEM), b64(s.clientKeyPEM))
	if dir != "" {
		fmt.Fprintf(&b, "- name: kubeapi-files\n  user:\n    client-certificate: %s\n    client-key: %s\n",
			strconv.Quote(filepath.Join(dir, "client.crt")), strconv.Quote(filepath.Join(dir, "client.key")))
	}
	fmt.Fprintf(&b, "- name: kubeapi-token\n  user:\n    token: %s\n", token)
	return writeAtomic(*flagKubeconfig, []byte(b.String()))
}

// handshakeFilter passes the HTTP server's log to stderr without the TLS
// handshake errors that tests provoke on purpose (wrong CA, no certificate).
type handshakeFilter struct{}

func (handshakeFilter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("TLS handshake error")) {
		return len(b), nil
	}
	return os.Stderr.Write(b)
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ---- small helpers ----------------------------------------------------------------------------------

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func clone(o obj) obj {
	if o == nil {
		return nil
	}
	b, _ := json.Marshal(o)
	v, _ := decodeJSON(b)
	return v.(map[string]any)
}

// meta returns o's metadata, creating it if needed.
func meta(o obj) obj {
	m, ok := o["metadata"].(map[string]any)
	if !ok {
		m = obj{}
		o["metadata"] = m
	}
	return m
}

func metaString(o obj, k string) string {
	m, _ := o["metadata"].(map[string]any)
	return str(m[k])
}

// sub returns o[k] as an object (never nil; empty when missing).
func sub(o map[string]any, k string) map[string]any {
	if m, ok := o[k].(map[string]any); ok {
		return m
	}
	return obj{}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func boolStr(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func boolStrLower(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func randSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // as k8s.io/apimachinery/pkg/util/rand.String
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmtUUID(b)
}

// nameUUID is a stable (version 5 style) UUID for a name.
func nameUUID(name string) string {
	h := sha1.Sum([]byte("kubeapi/" + name))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmtUUID(b)
}

func fmtUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func sum256(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func imageID(image string) string {
	repo := image
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	if !strings.Contains(strings.SplitN(repo, "/", 2)[0], ".") {
		if !strings.Contains(repo, "/") {
			repo = "library/" + repo
		}
		repo = "docker.io/" + repo
	}
	return repo + "@sha256:" + hex.EncodeToString(sum256(image))
}
