#!/usr/bin/env python3
"""soak_scrape.py — pods that come and go under a running `profd scrape`
(bench/soak_scrape.sh starts everything and runs this).

    soak_scrape.py API CERTDIR PORTSFILE SCRAPER_PID SCRAPER_METRICS
                   COLLECTOR_PID SECONDS [options]

API is the test Kubernetes API server (tests/kubeapi) with CERTDIR/ca.crt and
CERTDIR/token; PORTSFILE lists the loopback targets (bench/targets), one
HOST:PORT a line. The script keeps --pods pods annotated for profiling in
--namespaces namespaces, each pod of one of --services Deployments, and every
second rolls --churn of them: a pod deleted, a pod of the same Deployment
added under a new name (a new ReplicaSet hash at every rollout of that
Deployment, a new port among the targets), as rolling updates do. Now and
then the API server misbehaves as real ones do: every --cut seconds its
watches are cut (half of the time mid-stream), and every 5th cut the history
is compacted first (the watch comes back with 410 Gone: a full list).

Every --every seconds one line: elapsed s, pods added and deleted so far,
the scraper's known targets, its ok and failed scrapes, rounds missed,
profiles posted, profiles dropped from its queue, and VmRSS, VmHWM (KiB),
descriptors and threads of the scraper, then VmRSS and VmHWM of the
collector. Exit 1 if either process
died.
"""
import argparse
import json
import os
import random
import ssl
import sys
import time
import urllib.request

from procstat import proc_status

ap = argparse.ArgumentParser()
ap.add_argument("api")
ap.add_argument("certdir")
ap.add_argument("ports")
ap.add_argument("scraper", type=int)
ap.add_argument("metrics")
ap.add_argument("collector", type=int)
ap.add_argument("seconds", type=float)
ap.add_argument("--pods", type=int, default=200)
ap.add_argument("--churn", type=int, default=4, help="pods replaced a second")
ap.add_argument("--services", type=int, default=20)
ap.add_argument("--namespaces", type=int, default=4)
ap.add_argument("--cut", type=float, default=60.0, help="seconds between watch cuts (0: none)")
ap.add_argument("--every", type=float, default=30.0)
args = ap.parse_args()

ctx = ssl.create_default_context(cafile=os.path.join(args.certdir, "ca.crt"))
with open(os.path.join(args.certdir, "token")) as fh:
    TOKEN = fh.read().strip()
with open(args.ports) as fh:
    PORTS = [ln.strip().rsplit(":", 1)[1] for ln in fh if ln.strip()]
rng = random.Random(7)


def api(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(args.api + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return r.read()


rollout = [0] * args.services  # the ReplicaSet generation of each Deployment
serial = [0]


def new_pod(svc):
    serial[0] += 1
    ns = "ns%d" % (svc % args.namespaces)
    app = "svc%d" % svc
    h = "%08x" % (hash((svc, rollout[svc])) & 0xffffffff)
    name = "%s-%s-%05d" % (app, h, serial[0])
    return ns, name, {
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"app": app, "version": "v%d" % rollout[svc], "pod-template-hash": h},
            "annotations": {"profefe.com/enable": "true", "profefe.com/port": rng.choice(PORTS)},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "%s-%s" % (app, h)}],
        },
        "spec": {"nodeName": "node-%d" % (serial[0] % 7), "containers": [{"name": app}]},
    }


OK_RESULTS = ("ok", "base", "reset", "unchanged", "empty")


def metrics():
    """The scraper's global counters (per-target series leave with their pods)."""
    m = {"targets": 0, "ok": 0, "failed": 0, "dropped": 0, "missed": 0, "posted": 0}
    try:
        with urllib.request.urlopen(args.metrics + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return m
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        k, v = line.rsplit(" ", 1)
        v = int(float(v))
        if k == "profd_scrape_kube_targets":
            m["targets"] = v
        elif k.startswith("profd_scrape_scrapes_total{"):
            ok = any('result="%s"' % r in k for r in OK_RESULTS)
            m["ok" if ok else "failed"] += v
        elif k == "profd_scrape_queue_dropped_total":
            m["dropped"] = v
        elif k.startswith("profd_scrape_missed_total{"):
            m["missed"] += v
        elif k == 'profd_scrape_posts_total{result="ok"}':
            m["posted"] = v
    return m


def main():
    live = []  # (ns, name, svc)
    batch = []
    for i in range(args.pods):
        svc = i % args.services
        ns, name, pod = new_pod(svc)
        live.append((ns, name, svc))
        batch.append(pod)
    api("POST", "/admin/pods", batch)
    added, deleted, cuts = args.pods, 0, 0
    t0 = time.monotonic()
    nxt_print = args.every
    nxt_cut = args.cut if args.cut > 0 else float("inf")
    print("seconds added deleted targets ok failed missed posted dropped scr_rss scr_hwm scr_fds scr_threads col_rss col_hwm",
          flush=True)
    rows = []
    dead = None
    while True:
        el = time.monotonic() - t0
        for _ in range(args.churn):
            k = rng.randrange(len(live))
            ns, name, svc = live[k]
            api("DELETE", "/admin/pods/%s/%s" % (ns, name))
            deleted += 1
            if rng.random() < 0.05:
                rollout[svc] += 1  # a new ReplicaSet: new pod names, a new version label
            ns, name, pod = new_pod(svc)
            api("POST", "/admin/pods", pod)
            live[k] = (ns, name, svc)
            added += 1
        if el >= nxt_cut:
            cuts += 1
            if cuts % 5 == 0:
                api("POST", "/admin/compact")
            api("POST", "/admin/watches/close" + ("?abort=1" if cuts % 2 else ""))
            nxt_cut += args.cut
        if el >= nxt_print or el >= args.seconds:
            s, c = proc_status(args.scraper), proc_status(args.collector)
            if s is None or c is None:
                dead = "scraper" if s is None else "collector"
                print("soak: the %s is gone" % dead, file=sys.stderr, flush=True)
                break
            m = metrics()
            rows.append((el, s["VmRSS"]))
            print("%.0f %d %d %d %d %d %d %d %d %d %d %d %d %d %d" % (
                el, added, deleted, m["targets"], m["ok"], m["failed"], m["missed"], m["posted"], m["dropped"],
                s["VmRSS"], s["VmHWM"], s["fds"], s["Threads"], c["VmRSS"], c["VmHWM"]), flush=True)
            nxt_print += args.every
            if el >= args.seconds:
                break
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - el)))
    half = [r for e, r in rows if e >= args.seconds / 2]
    print("soak: %d pods added, %d deleted, %d watch cuts; scraper RSS second half %d..%d KiB%s"
          % (added, deleted, cuts, min(half) if half else 0, max(half) if half else 0,
             "; %s DIED" % dead.upper() if dead else ""), flush=True)
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
