// Command loadgen drives `profd serve` for bench/serve.sh. Standard library
// only; built offline by `make build/loadgen`.
//
// Usage:
//
//	loadgen post -url BASE -service S -type T [-c 8] [-labels k=v,...] [-token-file F] [-cacert F] FILES...
//	loadgen post -url BASE -fleet DIR -type T [-c 8] [-labels k=v,...] [-rollouts SVC=HOUR,...] [-token-file F] [-cacert F]
//	loadgen scrape -url BASE -n N -o DIR [-types heap,allocs,...] [-pause 10ms] [-cpu-seconds 1]
//
// post reads every file into memory first, then POSTs each file once to
// BASE/api/0/profiles over -c concurrent keep-alive connections (workers take
// the next file from a shared counter). Every response must be 200 with
// {"code":200,...}: on the first other answer it prints the file, the status
// and the body to stderr and exits 1. On success it prints one line
//
//	files=N bytes=B seconds=S profiles_per_s=P mb_per_s=M
//
// where seconds runs from the first request to the last response and bytes is
// the total size of the bodies as sent (MB = 1e6 bytes). With -fleet, the
// files are DIR/SERVICE/POD/*.pb.gz (bench/gen -fleet) and each is posted
// with service=SERVICE and the label pod=POD (before -labels). -token-file
// sends the file's first line as a Bearer token; -cacert verifies an https://
// BASE against that PEM CA (else the system's).
//
// scrape downloads N profiles of each type from a Go service's
// net/http/pprof (BASE/debug/pprof/TYPE), round-robin over the types with
// -pause between rounds, into DIR/TYPE/NNNN.pb.gz, and checks that each one
// is gzip. Type cpu is BASE/debug/pprof/profile?seconds=S (-cpu-seconds),
// taken back to back on a connection of its own while the other types'
// rounds go on (N of them take N*S seconds). It writes into a temporary
// directory and renames it into place, so an interrupted run leaves no
// partial set.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", a...)
	os.Exit(1)
}

func client(conns int, cacert string) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			die("%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			die("%s: no PEM certificate", cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Timeout: 5 * time.Minute, Transport: tr}
}

// token reads a -token-file: its first line, trimmed ("" = none).
func token(file string) string {
	if file == "" {
		return ""
	}
	b, err := os.ReadFile(file)
	if err != nil {
		die("%v", err)
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}

func post(args []string) {
	fs := flag.NewFlagSet("post", flag.ExitOnError)
	base := fs.String("url", "", "server base URL, e.g. http://127.0.0.1:10100")
	service := fs.String("service", "bench", "service parameter")
	typ := fs.String("type", "cpu", "type parameter")
	labels := fs.String("labels", "", "labels parameter (k=v,k=v)")
	conns := fs.Int("c", 8, "concurrent connections")
	fleet := fs.String("fleet", "", "post DIR/SERVICE/POD/*.pb.gz as SERVICE with label pod=POD")
	rollouts := fs.String("rollouts", "", "-fleet: SERVICE=HOUR,...: label version=1.1 on that service's profiles from HOUR on (file NNN is hour NNN / -per-hour), version=1.0 before and on every other service")
	perHour := fs.Int("per-hour", 6, "-fleet: profiles per pod per hour (bench/gen -fleet's)")
	tokenFile := fs.String("token-file", "", "send the file's first line as Authorization: Bearer")
	cacert := fs.String("cacert", "", "PEM CA that signed an https:// server's certificate")
	fs.Parse(args)
	files := fs.Args()
	if *fleet != "" {
		var err error
		if files, err = filepath.Glob(filepath.Join(*fleet, "*", "*", "*.pb.gz")); err != nil {
			die("%v", err)
		}
	}
	if *base == "" || len(files) == 0 || *conns < 1 {
		die("post: need -url and at least one file")
	}
	bodies := make([][]byte, len(files))
	var total int64
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			die("%v", err)
		}
		bodies[i] = b
		total += int64(len(b))
	}
	q := url.Values{"service": {*service}, "type": {*typ}}
	if *labels != "" {
		q.Set("labels", *labels)
	}
	target := strings.TrimRight(*base, "/") + "/api/0/profiles?" + q.Encode()
	rolloutAt := map[string]int{}
	for _, kv := range strings.Split(*rollouts, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		h, err := strconv.Atoi(v)
		if !ok || err != nil {
			die("-rollouts: want SERVICE=HOUR, got %q", kv)
		}
		rolloutAt[k] = h
	}
	targets := make([]string, len(files))
	for i, f := range files {
		targets[i] = target
		if *fleet != "" {
			pod := filepath.Base(filepath.Dir(f))
			fq := url.Values{"service": {filepath.Base(filepath.Dir(filepath.Dir(f)))}, "type": {*typ}}
			l := "pod=" + pod
			if *rollouts != "" {
				svc := filepath.Base(filepath.Dir(filepath.Dir(f)))
				nnn, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".pb.gz"))
				if err != nil {
					die("-rollouts: %s: not a bench/gen -fleet file name (NNN.pb.gz)", f)
				}
				if h, ok := rolloutAt[svc]; ok && nnn / *perHour >= h {
					l += ",version=1.1"
				} else {
					l += ",version=1.0"
				}
			}
			if *labels != "" {
				l += "," + *labels
			}
			fq.Set("labels", l)
			targets[i] = strings.TrimRight(*base, "/") + "/api/0/profiles?" + fq.Encode()
		}
	}
	c := client(*conns, *cacert)
	auth := ""
	if t := token(*tokenFile); t != "" {
		auth = "Bearer " + t
	}

	var next int64 = -1
	var failed int32
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.LoadInt32(&failed) == 0 {
				i := int(atomic.AddInt64(&next, 1))
				if i >= len(bodies) {
					return
				}
				req, err := http.NewRequest("POST", targets[i], bytes.NewReader(bodies[i]))
				if err != nil {
					die("%v", err)
				}
				req.Header.Set("Content-Type", "application/octet-stream")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := c.Do(req)
				if err != nil {
					if atomic.CompareAndSwapInt32(&failed, 0, 1) {
						fmt.Fprintf(os.Stderr, "loadgen: POST %s: %v\n", files[i], err)
					}
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte(`{"code":200,`)) {
					if atomic.CompareAndSwapInt32(&failed, 0, 1) {
						fmt.Fprintf(os.Stderr, "loadgen: POST %s: HTTP %d (read error %v): %s\n",
							files[i], resp.StatusCode, err, strings.TrimSpace(string(body)))
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	sec := time.Since(t0).Seconds()
	if failed != 0 {
		die("FAILED: not every POST was answered 200 (see above)")
	}
	fmt.Printf("files=%d bytes=%d seconds=%.6f profiles_per_s=%.1f mb_per_s=%.2f\n",
		len(bodies), total, sec, float64(len(bodies))/sec, float64(total)/1e6/sec)
}

func scrape(args []string) {
	fs := flag.NewFlagSet("scrape", flag.ExitOnError)
	base := fs.String("url", "", "service base URL, e.g. http://127.0.0.1:6060")
	n := fs.Int("n", 200, "profiles per type")
	out := fs.String("o", "", "output directory (must not exist)")
	types := fs.String("types", "heap,allocs,goroutine,block,mutex", "profile types")
	pause := fs.Duration("pause", 10*time.Millisecond, "pause between rounds")
	cpuSeconds := fs.Int("cpu-seconds", 1, "duration of each cpu profile (type cpu)")
	fs.Parse(args)
	if *base == "" || *out == "" || *n < 1 {
		die("scrape: need -url, -o and -n >= 1")
	}
	tmp := *out + ".tmp"
	os.RemoveAll(tmp)
	tl := strings.Split(*types, ",")
	for _, t := range tl {
		if err := os.MkdirAll(filepath.Join(tmp, t), 0o755); err != nil {
			die("%v", err)
		}
	}
	// get one profile of type t into DIR/t/NNNN.pb.gz; cpu is
	// /debug/pprof/profile?seconds=S, which holds the request for S seconds
	get := func(c *http.Client, t string, i int) {
		u := strings.TrimRight(*base, "/") + "/debug/pprof/" + t
		if t == "cpu" {
			u = strings.TrimRight(*base, "/") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", *cpuSeconds)
		}
		resp, err := c.Get(u)
		if err != nil {
			die("GET %s: %v", u, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			die("GET %s: HTTP %d (%v)", u, resp.StatusCode, err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			die("GET %s: not gzip", u)
		}
		if err := os.WriteFile(filepath.Join(tmp, t, fmt.Sprintf("%04d.pb.gz", i)), b, 0o644); err != nil {
			die("%v", err)
		}
	}
	// CPU profiles back to back on a connection of their own (Go's
	// runtime takes one at a time), beside the rounds of the other types
	var wg sync.WaitGroup
	rest := tl[:0:0]
	for _, t := range tl {
		if t != "cpu" {
			rest = append(rest, t)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client(1, "")
			for i := 0; i < *n; i++ {
				get(c, "cpu", i)
			}
		}()
	}
	c := client(1, "")
	for i := 0; i < *n && len(rest) > 0; i++ {
		for _, t := range rest {
			get(c, t, i)
		}
		time.Sleep(*pause)
	}
	wg.Wait()
	os.RemoveAll(*out)
	if err := os.Rename(tmp, *out); err != nil {
		die("%v", err)
	}
}

func main() {
	if len(os.Args) < 2 {
		die("usage: loadgen post|scrape [flags] (see main.go)")
	}
	switch os.Args[1] {
	case "post":
		post(os.Args[2:])
	case "scrape":
		scrape(os.Args[2:])
	default:
		die("unknown command %q (post, scrape)", os.Args[1])
	}
}
