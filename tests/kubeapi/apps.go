// apps.go — the apps/v1 workloads of the test API server: Deployments,
// StatefulSets, DaemonSets and ReplicaSets, read-only through the API (get,
// list with labelSelector, Tables for `kubectl get`), created through the
// admin API. Enough for `profd capture deployment/NAME` and a bare workload
// name, and for real kubectl (`kubectl get deployments`, `kubectl get
// deployment NAME -o json`) to stay honest about the shapes.
//
//	GET /apis                                APIGroupList with the apps group
//	GET /apis/apps  /apis/apps/v1            APIGroup, APIResourceList
//	GET /apis/apps/v1/RESOURCE               list, all namespaces
//	GET /apis/apps/v1/namespaces/NS/RESOURCE list
//	GET /apis/apps/v1/namespaces/NS/RESOURCE/NAME
//
// Admin API:
//
//	GET    /admin/workloads                      every workload, a JSON array
//	POST   /admin/workloads                      add or replace: an object or an array
//	                                             (kind Deployment, StatefulSet, DaemonSet,
//	                                             ReplicaSet; spec.selector required)
//	DELETE /admin/workloads/RESOURCE/NS/NAME
//
// status is derived from the pods the selector matches at read time
// (replicas = matching pods, ready = Running and Ready ones), as the
// controllers would report it. No watch (405), no paging (every item in
// one page: limit is ignored, as the real server may do).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

var workloadKinds = map[string]string{ // resource -> kind
	"deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet", "replicasets": "ReplicaSet",
}

func kindResource(kind string) string {
	for r, k := range workloadKinds {
		if k == kind {
			return r
		}
	}
	return ""
}

func workloadKey(resource, ns, name string) string { return resource + "/" + ns + "/" + name }

// normalizeWorkload fills in what the API server would (kind/apiVersion,
// namespace, uid, resourceVersion is set by the caller, creationTimestamp,
// generation, replicas, template labels) and checks the selector.
func normalizeWorkload(o, prev obj, now time.Time) (string, error) {
	kind := str(o["kind"])
	res := kindResource(kind)
	if res == "" {
		return "", fmt.Errorf("kind %q: want Deployment, StatefulSet, DaemonSet or ReplicaSet", kind)
	}
	o["apiVersion"] = "apps/v1"
	m := meta(o)
	if metaString(o, "namespace") == "" {
		m["namespace"] = "default"
	}
	if err := validateName(metaString(o, "name")); err != nil {
		return "", fmt.Errorf("metadata.name: %v", err)
	}
	if err := validateName(metaString(o, "namespace")); err != nil {
		return "", fmt.Errorf("metadata.namespace: %v", err)
	}
	if str(m["uid"]) == "" {
		if prev != nil {
			m["uid"] = metaString(prev, "uid")
		} else {
			// the uid pods' ownerReferences get (main.go): same name -> same uid
			m["uid"] = nameUUID(kind + "/" + metaString(o, "namespace") + "/" + metaString(o, "name"))
		}
	}
	if str(m["creationTimestamp"]) == "" {
		if prev != nil && metaString(prev, "creationTimestamp") != "" {
			m["creationTimestamp"] = metaString(prev, "creationTimestamp")
		} else {
			m["creationTimestamp"] = now.UTC().Format(time.RFC3339)
		}
	}
	setDefault(m, "generation", json.Number("1"))
	spec, ok := o["spec"].(map[string]any)
	if !ok {
		return "", errors.New("spec: required")
	}
	sel, ok := spec["selector"].(map[string]any)
	if !ok {
		return "", errors.New("spec.selector: Required value")
	}
	reqs, err := selectorReqs(sel)
	if err != nil {
		return "", fmt.Errorf("spec.selector: %v", err)
	}
	if len(reqs) == 0 {
		return "", errors.New("spec.selector: Invalid value: empty selector is invalid for deployment")
	}
	if kind != "DaemonSet" {
		setDefault(spec, "replicas", json.Number("1"))
	}
	tmpl, _ := spec["template"].(map[string]any)
	if tmpl == nil {
		tmpl = obj{}
		spec["template"] = tmpl
	}
	tm := meta(tmpl)
	if _, ok := tm["labels"]; !ok {
		if ml, ok := sel["matchLabels"].(map[string]any); ok {
			labels := obj{}
			for k, v := range ml {
				labels[k] = v
			}
			tm["labels"] = labels
		}
	}
	ts, _ := tmpl["spec"].(map[string]any)
	if ts == nil {
		ts = obj{}
		tmpl["spec"] = ts
	}
	if cs, ok := ts["containers"].([]any); !ok || len(cs) == 0 {
		ts["containers"] = []any{obj{"name": "app", "image": "registry.example/app:1.0"}}
	}
	switch kind {
	case "Deployment":
		setDefault(spec, "strategy", obj{"type": "RollingUpdate", "rollingUpdate": obj{"maxSurge": "25%", "maxUnavailable": "25%"}})
		setDefault(spec, "revisionHistoryLimit", json.Number("10"))
		setDefault(spec, "progressDeadlineSeconds", json.Number("600"))
	case "StatefulSet":
		setDefault(spec, "serviceName", metaString(o, "name"))
		setDefault(spec, "podManagementPolicy", "OrderedReady")
		setDefault(spec, "updateStrategy", obj{"type": "RollingUpdate", "rollingUpdate": obj{"partition": json.Number("0")}})
	case "DaemonSet":
		setDefault(spec, "updateStrategy", obj{"type": "RollingUpdate", "rollingUpdate": obj{"maxUnavailable": json.Number("1"), "maxSurge": json.Number("0")}})
	}
	return res, nil
}

// selectorReqs turns a metav1.LabelSelector into label requirements.
func selectorReqs(sel map[string]any) ([]labelReq, error) {
	var reqs []labelReq
	if ml, ok := sel["matchLabels"].(map[string]any); ok {
		for k, v := range ml {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("matchLabels[%s]: must be a string", k)
			}
			if err := validateLabelKey(k); err != nil {
				return nil, err
			}
			if err := validateLabelValue(s); err != nil {
				return nil, err
			}
			reqs = append(reqs, labelReq{key: k, op: "=", values: []string{s}})
		}
	} else if v, ok := sel["matchLabels"]; ok && v != nil {
		return nil, errors.New("matchLabels: must be an object")
	}
	if me, ok := sel["matchExpressions"].([]any); ok {
		for i, e := range me {
			em, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("matchExpressions[%d]: must be an object", i)
			}
			key := str(em["key"])
			if err := validateLabelKey(key); err != nil {
				return nil, fmt.Errorf("matchExpressions[%d].key: %v", i, err)
			}
			var vals []string
			if vs, ok := em["values"].([]any); ok {
				for _, v := range vs {
					vals = append(vals, str(v))
				}
			}
			op := map[string]string{"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[str(em["operator"])]
			if op == "" {
				return nil, fmt.Errorf("matchExpressions[%d].operator: Unsupported value: %q", i, str(em["operator"]))
			}
			if (op == "in" || op == "notin") != (len(vals) > 0) {
				return nil, fmt.Errorf("matchExpressions[%d].values: must be specified for In and NotIn only", i)
			}
			reqs = append(reqs, labelReq{key: key, op: op, values: vals})
		}
	}
	return reqs, nil
}

// withStatus returns a copy of w with the status its controller would report.
func (s *server) withStatusLocked(w obj) obj {
	o := clone(w)
	spec := sub(o, "spec")
	sel, _ := spec["selector"].(map[string]any)
	reqs, _ := selectorReqs(sel)
	ns := metaString(o, "namespace")
	total, ready := 0, 0
	for _, p := range s.pods {
		if metaString(p, "namespace") != ns || !matchLabels(reqs, p) || metaString(p, "deletionTimestamp") != "" {
			continue
		}
		total++
		if str(sub(p, "status")["phase"]) == "Running" {
			if conds, ok := sub(p, "status")["conditions"].([]any); ok {
				for _, c := range conds {
					if cm, ok := c.(map[string]any); ok && cm["type"] == "Ready" && cm["status"] == "True" {
						ready++
					}
				}
			}
		}
	}
	gen, _ := num(meta(o)["generation"])
	n := func(i int) json.Number { return json.Number(strconv.Itoa(i)) }
	st := obj{"observedGeneration": json.Number(strconv.Itoa(int(gen)))}
	switch str(o["kind"]) {
	case "DaemonSet":
		st["desiredNumberScheduled"], st["currentNumberScheduled"], st["numberReady"] = n(total), n(total), n(ready)
		st["updatedNumberScheduled"], st["numberAvailable"], st["numberMisscheduled"] = n(total), n(ready), n(0)
	default:
		st["replicas"], st["readyReplicas"], st["availableReplicas"] = n(total), n(ready), n(ready)
		if str(o["kind"]) != "ReplicaSet" {
			st["updatedReplicas"] = n(total)
		}
		if str(o["kind"]) == "StatefulSet" {
			st["currentReplicas"] = n(total)
		} else {
			st["fullyLabeledReplicas"] = n(total)
		}
	}
	o["status"] = st
	return o
}

func (s *server) upsertWorkload(o obj) (obj, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := metaString(o, "namespace")
	if ns == "" {
		ns = "default"
	}
	prev := s.workloads[workloadKey(kindResource(str(o["kind"])), ns, metaString(o, "name"))]
	res, err := normalizeWorkload(o, prev, time.Now())
	if err != nil {
		return nil, false, err
	}
	s.rv++
	meta(o)["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	s.workloads[workloadKey(res, metaString(o, "namespace"), metaString(o, "name"))] = o
	return o, prev == nil, nil
}

// ---- discovery --------------------------------------------------------------------------

func appsGroup() obj {
	gv := obj{"groupVersion": "apps/v1", "version": "v1"}
	return obj{"name": "apps", "versions": []any{gv}, "preferredVersion": gv}
}

func apiGroupList() obj {
	return obj{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{appsGroup()}}
}

func appsResourceList() obj {
	r := func(name, singular, kind string, short []any, hash string) obj {
		return obj{"name": name, "singularName": singular, "namespaced": true, "kind": kind,
			"verbs": []any{"get", "list"}, "shortNames": short, "categories": []any{"all"}, "storageVersionHash": hash}
	}
	return obj{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1", "resources": []any{
		r("daemonsets", "daemonset", "DaemonSet", []any{"ds"}, "dd7pWHUlMKQ="),
		r("deployments", "deployment", "Deployment", []any{"deploy"}, "8aSe+NMegvE="),
		r("replicasets", "replicaset", "ReplicaSet", []any{"rs"}, "P1RzHs8/mWQ="),
		r("statefulsets", "statefulset", "StatefulSet", []any{"sts"}, "H+vl74LkKdo="),
	}}
}

// ---- serving ------------------------------------------------------------------------------

// routeApps serves /apis/...; nil when it has answered.
func (s *server) routeApps(w http.ResponseWriter, r *http.Request) *statusError {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch p {
	case "/apis":
		return s.get(w, r, apiGroupList)
	case "/apis/apps":
		return s.get(w, r, func() obj {
			g := appsGroup()
			g["kind"], g["apiVersion"] = "APIGroup", "v1"
			return g
		})
	case "/apis/apps/v1":
		return s.get(w, r, appsResourceList)
	}
	rest := strings.TrimPrefix(p, "/apis/apps/v1/")
	if rest == p {
		return newStatus(404, "the server could not find the requested resource")
	}
	parts := strings.Split(rest, "/")
	var ns, res, name string
	switch {
	case len(parts) == 1:
		res = parts[0]
	case len(parts) == 3 && parts[0] == "namespaces":
		ns, res = parts[1], parts[2]
	case len(parts) == 4 && parts[0] == "namespaces":
		ns, res, name = parts[1], parts[2], parts[3]
	default:
		return newStatus(404, "the server could not find the requested resource")
	}
	kind := workloadKinds[res]
	if kind == "" {
		return newStatus(404, "the server could not find the requested resource")
	}
	if r.Method != http.MethodGet {
		return newStatus(405, "the server does not allow this method on the requested resource")
	}
	q := r.URL.Query()
	if q.Get("watch") == "1" || q.Get("watch") == "true" {
		return newStatus(405, "watch is not supported on "+res+" by this test server")
	}
	rp, e := negotiate(r)
	if e != nil {
		return e
	}
	if name != "" {
		s.mu.Lock()
		o := s.workloads[workloadKey(res, ns, name)]
		if o != nil {
			o = s.withStatusLocked(o)
		}
		s.mu.Unlock()
		if o == nil {
			e := newStatus(404, fmt.Sprintf("%s.apps %q not found", res, name))
			e.details = obj{"name": name, "group": "apps", "kind": res}
			return e
		}
		if rp.table {
			writeJSON(w, 200, workloadTable(kind, []obj{o}, rp, obj{"resourceVersion": metaString(o, "resourceVersion")}))
		} else {
			writeJSON(w, 200, o)
		}
		return nil
	}
	return s.serveWorkloadList(w, q, kind, res, ns, rp)
}

func (s *server) serveWorkloadList(w http.ResponseWriter, q url.Values, kind, res, ns string, rp repr) *statusError {
	reqs, err := parseLabelSelector(q.Get("labelSelector"))
	if err != nil {
		return badRequest(err.Error())
	}
	fields := map[string]func(obj) string{
		"metadata.name":      func(o obj) string { return metaString(o, "name") },
		"metadata.namespace": func(o obj) string { return metaString(o, "namespace") },
	}
	freqs, err := parseFieldSelector(q.Get("fieldSelector"), fields)
	if err != nil {
		return badRequest(err.Error())
	}
	s.mu.Lock()
	var keys []string
	for k := range s.workloads {
		if strings.HasPrefix(k, res+"/") && (ns == "" || strings.HasPrefix(k, res+"/"+ns+"/")) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var items []obj
	for _, k := range keys {
		o := s.workloads[k]
		if matchLabels(reqs, o) && matchFields(freqs, fields, o) {
			items = append(items, s.withStatusLocked(o))
		}
	}
	rv := s.rv
	s.mu.Unlock()
	lm := obj{"resourceVersion": strconv.FormatUint(rv, 10)}
	if rp.table {
		writeJSON(w, 200, workloadTable(kind, items, rp, lm))
		return nil
	}
	list := make([]any, len(items))
	for i, o := range items {
		list[i] = o
	}
	writeJSON(w, 200, obj{"kind": kind + "List", "apiVersion": "apps/v1", "metadata": lm, "items": list})
	return nil
}

// ---- tables (the columns kube-apiserver prints) ---------------------------------------------

func workloadTable(kind string, items []obj, rp repr, lm obj) obj {
	var cols []any
	name := podColumns[0]
	ageCol := podColumns[4]
	cont := column("Containers", "", 1, "Names of each container in the template.")
	imgs := column("Images", "", 1, "Images referenced by each container in the template.")
	selc := column("Selector", "", 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.")
	switch kind {
	case "Deployment":
		cols = []any{name, column("Ready", "", 0, "Number of the pod with ready state"),
			column("Up-to-date", "", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
			column("Available", "", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
			ageCol, cont, imgs, selc}
	case "StatefulSet":
		cols = []any{name, column("Ready", "", 0, "Number of the pod with ready state"), ageCol, cont, imgs}
	case "DaemonSet":
		cols = []any{name, column("Desired", "integer", 0, "The total number of nodes that should be running the daemon pod."),
			column("Current", "integer", 0, "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod."),
			column("Ready", "integer", 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
			column("Up-to-date", "integer", 0, "The total number of nodes that are running updated daemon pod"),
			column("Available", "integer", 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."),
			column("Node Selector", "", 0, "NodeSelector is a selector which must be true for the pod to fit on a node."),
			ageCol, cont, imgs, selc}
	default: // ReplicaSet
		cols = []any{name, column("Desired", "integer", 0, "Number of desired pods."),
			column("Current", "integer", 0, "Number of actual replicas."),
			column("Ready", "integer", 0, "The number of ready replicas for this replica set."), ageCol, cont, imgs, selc}
	}
	now := time.Now()
	rows := make([]any, 0, len(items))
	for _, o := range items {
		spec, st := sub(o, "spec"), sub(o, "status")
		ni := func(m map[string]any, k string) int64 { f, _ := num(m[k]); return int64(f) }
		var names, images []string
		tspec := sub(sub(spec, "template"), "spec")
		if cs, ok := tspec["containers"].([]any); ok {
			for _, c := range cs {
				cm, _ := c.(map[string]any)
				names = append(names, str(cm["name"]))
				images = append(images, str(cm["image"]))
			}
		}
		sel, _ := spec["selector"].(map[string]any)
		reqs, _ := selectorReqs(sel)
		var sp []string
		for _, r := range reqs {
			switch r.op {
			case "=":
				sp = append(sp, r.key+"="+r.values[0])
			case "in", "notin":
				sp = append(sp, r.key+" "+r.op+" ("+strings.Join(r.values, ",")+")")
			case "exists":
				sp = append(sp, r.key)
			case "!":
				sp = append(sp, "!"+r.key)
			}
		}
		sort.Strings(sp)
		a := age(now, metaString(o, "creationTimestamp"))
		var cells []any
		switch kind {
		case "Deployment":
			cells = []any{metaString(o, "name"), fmt.Sprintf("%d/%d", ni(st, "readyReplicas"), ni(spec, "replicas")),
				ni(st, "updatedReplicas"), ni(st, "availableReplicas"), a, strings.Join(names, ","), strings.Join(images, ","), strings.Join(sp, ",")}
		case "StatefulSet":
			cells = []any{metaString(o, "name"), fmt.Sprintf("%d/%d", ni(st, "readyReplicas"), ni(spec, "replicas")), a,
				strings.Join(names, ","), strings.Join(images, ",")}
		case "DaemonSet":
			nsel := "<none>"
			if m, ok := tspec["nodeSelector"].(map[string]any); ok && len(m) > 0 {
				var l []string
				for k, v := range m {
					l = append(l, k+"="+str(v))
				}
				sort.Strings(l)
				nsel = strings.Join(l, ",")
			}
			cells = []any{metaString(o, "name"), ni(st, "desiredNumberScheduled"), ni(st, "currentNumberScheduled"),
				ni(st, "numberReady"), ni(st, "updatedNumberScheduled"), ni(st, "numberAvailable"), nsel, a,
				strings.Join(names, ","), strings.Join(images, ","), strings.Join(sp, ",")}
		default:
			cells = []any{metaString(o, "name"), ni(spec, "replicas"), ni(st, "replicas"), ni(st, "readyReplicas"), a,
				strings.Join(names, ","), strings.Join(images, ","), strings.Join(sp, ",")}
		}
		rows = append(rows, obj{"cells": cells, "object": rowObject(o, rp)})
	}
	return obj{"kind": "Table", "apiVersion": rp.tableVersion, "metadata": lm, "columnDefinitions": cols, "rows": rows}
}

// ---- admin ----------------------------------------------------------------------------------

// serveAdminWorkloads answers /admin/workloads[...]; false when the path is not its.
func (s *server) serveAdminWorkloads(w http.ResponseWriter, r *http.Request, p string) bool {
	fail := func(code int, msg string) { writeJSON(w, code, obj{"error": msg}) }
	switch {
	case p == "/admin/workloads" && r.Method == http.MethodGet:
		s.mu.Lock()
		keys := make([]string, 0, len(s.workloads))
		for k := range s.workloads {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		list := make([]any, 0, len(keys))
		for _, k := range keys {
			list = append(list, s.withStatusLocked(s.workloads[k]))
		}
		s.mu.Unlock()
		writeJSON(w, 200, list)
	case p == "/admin/workloads" && r.Method == http.MethodPost:
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			fail(400, err.Error())
			return true
		}
		items, err := decodeItems(data, "want a workload, an array of them or a list")
		if err != nil {
			fail(400, err.Error())
			return true
		}
		var stored []any
		created := false
		for i, it := range items {
			o, ok := it.(map[string]any)
			if !ok {
				fail(400, fmt.Sprintf("item %d is not an object", i))
				return true
			}
			so, c, err := s.upsertWorkload(o)
			if err != nil {
				fail(400, fmt.Sprintf("item %d: %v", i, err))
				return true
			}
			created = created || c
			stored = append(stored, so)
		}
		writeStored(w, created, stored)
	case strings.HasPrefix(p, "/admin/workloads/") && r.Method == http.MethodDelete:
		parts := strings.Split(strings.TrimPrefix(p, "/admin/workloads/"), "/")
		if len(parts) != 3 || workloadKinds[parts[0]] == "" {
			fail(404, "want /admin/workloads/RESOURCE/NAMESPACE/NAME (RESOURCE: deployments, statefulsets, daemonsets, replicasets)")
			return true
		}
		k := workloadKey(parts[0], parts[1], parts[2])
		s.mu.Lock()
		o := s.workloads[k]
		delete(s.workloads, k)
		if o != nil {
			s.rv++
		}
		s.mu.Unlock()
		if o == nil {
			fail(404, fmt.Sprintf("%s %s/%s not found", parts[0], parts[1], parts[2]))
			return true
		}
		writeJSON(w, 200, o)
	default:
		return false
	}
	return true
}
