/*
 * kube.c — Kubernetes discovery for the scraper: which pods are targets
 * (kube-profefe's annotations, without its bugs: the path is honoured, the
 * service defaults to the owning workload, not the pod), and the source that
 * keeps the scraper's target list in step with the API server: one paged
 * list (--once), or list + watch in a thread of its own (continuous). The
 * config file's kubernetes entries (scrape_config.c) choose among the annotated
 * pods and give each its types, schedule, labels and label_keep.
 *
 * State: the selected pods only, sorted by namespace/name (a pod that is not
 * a target needs no memory: every watch event carries the whole pod, so it is
 * judged again when it changes). Every change of the selection rebuilds the
 * list (static targets first, then the pods) and hands it to
 * pd_scraper_set_targets, which keeps the state of targets whose key stays.
 *
 * Threads: the map, the resourceVersion and the logging belong to the
 * discovery thread (or to the caller of pd_scrape_kube_sync, before the
 * scraper runs); in continuous mode a second thread reads the map (under
 * pmu) to hand it to the scraper, coalescing bursts of events; counters are
 * atomics, read by /metrics.
 */
#define _GNU_SOURCE
#include "scrape.h"
#include "../kube/kube.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define KUBE_MAX_LABELS 64 /* the collector takes at most 64 labels per profile */
#define KUBE_LIST_LIMIT 500

enum {
	KR_UNAUTHORIZED,
	KR_FORBIDDEN,
	KR_GONE,
	KR_NOT_FOUND,
	KR_HTTP_4XX,
	KR_HTTP_5XX,
	KR_NETWORK,
	KR_INVALID,
	KR_ANNOTATION,
	KR_INTERNAL,
	KR_N
};
static const char *const reason_names[KR_N] = {"unauthorized", "forbidden", "gone",    "not_found",
                                               "http_4xx",     "http_5xx",  "network", "invalid_response",
                                               "annotation",   "internal"};

/* The HTTP status in a lib/kube message ("...: HTTP 503 Service Unavailable: ..."
 * or "watch: ERROR event: 500 InternalError: ..."); 0 if none. */
static long msg_status(const char *msg)
{
	static const char *const marks[] = {": HTTP ", "ERROR event: "};
	for (size_t i = 0; msg && i < sizeof marks / sizeof *marks; i++) {
		const char *p = strstr(msg, marks[i]);
		if (p) {
			long v = strtol(p + strlen(marks[i]), NULL, 10);
			if (v >= 100 && v <= 599)
				return v;
		}
	}
	return 0;
}

static int reason_idx(int code, const char *msg)
{
	switch (code) {
	case PD_KUBE_EUNAUTH: return KR_UNAUTHORIZED;
	case PD_KUBE_EFORBIDDEN: return KR_FORBIDDEN;
	case PD_KUBE_EGONE: return KR_GONE;
	case PD_ENOTFOUND: return KR_NOT_FOUND;
	case PD_KUBE_EHTTP: return msg_status(msg) >= 500 ? KR_HTTP_5XX : KR_HTTP_4XX;
	case PD_EIO: return KR_NETWORK;
	case PD_EINVAL:
	case PD_ELIMIT: return KR_INVALID;
	default: return KR_INTERNAL;
	}
}

const char *pd_scrape_kube_reason(int code, const char *msg)
{
	return reason_names[reason_idx(code, msg)];
}

/* ---- one pod -> one target ------------------------------------------------------------------- */

static void whyf(char *why, size_t cap, const char *fmt, ...) PD_PRINTF(3, 4);
static void whyf(char *why, size_t cap, const char *fmt, ...)
{
	if (!why || !cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, cap, fmt, ap);
	va_end(ap);
}

/* "6060" -> 6060; anything but 1..65535 in plain digits -> 0. */
static long port_number(const char *s)
{
	long v = 0;
	if (!*s || strlen(s) > 5)
		return 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		v = v * 10 + (*p - '0');
	}
	return v >= 1 && v <= 65535 ? v : 0;
}

static bool has_label(const struct pd_kv *v, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].key, key))
			return true;
	return false;
}

long pd_scrape_kube_port(const struct pd_kube_pod *p, const char *spec, const char **container)
{
	const char *cname = NULL;
	long port = port_number(spec);
	for (uint32_t i = 0; !port && *spec && i < p->ncontainers; i++)
		for (uint32_t k = 0; k < p->containers[i].nports; k++)
			if (p->containers[i].ports[k].name && !strcmp(p->containers[i].ports[k].name, spec)) {
				port = p->containers[i].ports[k].port;
				cname = p->containers[i].name;
				break;
			}
	/* the container: the one that declares the port, else the first */
	for (uint32_t i = 0; port && !cname && i < p->ncontainers; i++)
		for (uint32_t k = 0; k < p->containers[i].nports; k++)
			if (p->containers[i].ports[k].port == port) {
				cname = p->containers[i].name;
				break;
			}
	if (!cname && p->ncontainers)
		cname = p->containers[0].name;
	if (container)
		*container = port ? cname : NULL;
	return port;
}

bool pd_scrape_kube_path_ok(const char *path)
{
	size_t plen = strlen(path);
	bool ok = path[0] == '/' && plen <= 1024;
	for (size_t i = 0; ok && i < plen; i++) {
		unsigned char ch = (unsigned char)path[i];
		ok = ch > ' ' && ch != 0x7f && ch != '?' && ch != '#' && ch != '\\';
	}
	return ok;
}

const char *pd_scrape_kube_service(const struct pd_kube_pod *p, char *buf, size_t cap)
{
	const char *service = pd_kube_pod_annotation(p, "profefe.com/service");
	if (service && *service) {
		snprintf(buf, cap, "%s", service);
		return buf;
	}
	pd_kube_pod_workload(p, buf, cap, NULL);
	if (!*buf)
		snprintf(buf, cap, "%s", p->name ? p->name : "");
	return buf;
}

bool pd_scrape_kube_enable_meant(const char *v)
{
	return v && strcmp(v, "true") &&
	       (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcasecmp(v, "y") ||
	        !strcmp(v, "1"));
}

static const char *pod_label(void *ctx, const char *key) { return pd_kube_pod_label(ctx, key); }

int pd_scrape_kube_target(const struct pd_kube_pod *p, const struct pd_scrape_kube_opts *o, struct pd_scrape_targets *l,
                          int *skip, char *why, size_t whycap, struct pd_err *err)
{
	if (why && whycap)
		why[0] = 0;
	if (p->invalid) {
		*skip = PD_KS_INVALID;
		whyf(why, whycap, "%s", p->invalid);
		return 0;
	}
	const char *en = pd_kube_pod_annotation(p, "profefe.com/enable");
	if (!en || strcmp(en, "true")) {
		/* exactly "true", as kube-profefe; but a "True" or "yes" surely meant it: say why
		 * nothing happens (the verdict stays: not annotated) */
		*skip = PD_KS_NOT_ANNOTATED;
		if (pd_scrape_kube_enable_meant(en))
			whyf(why, whycap,
			     "profefe.com/enable is \"%.16s\": only \"true\" (lower case) turns profiling on", en);
		return 0;
	}
	/* the config file's kubernetes entries: the first that matches decides */
	const struct pd_scrape_kube_rule *rule = NULL;
	if (o->nrules &&
	    !(rule = pd_scrape_kube_rule_match(o->rules, o->nrules, p->namespace, pod_label, (void *)(uintptr_t)p))) {
		*skip = PD_KS_NO_RULE;
		whyf(why, whycap, "matches none of the config file's kubernetes entries");
		return 0;
	}
	if (p->deleting) {
		*skip = PD_KS_DELETING;
		whyf(why, whycap, "being deleted");
		return 0;
	}
	if (!p->phase || strcmp(p->phase, "Running")) {
		*skip = PD_KS_NOT_RUNNING;
		whyf(why, whycap, "phase %s, not Running", p->phase ? p->phase : "unknown");
		return 0;
	}
	if (!p->pod_ip || !*p->pod_ip) {
		*skip = PD_KS_NO_IP;
		whyf(why, whycap, "no pod IP yet");
		return 0;
	}

	/* the port: a number, or the name of a container port */
	const char *cname = NULL;
	char defport[16];
	snprintf(defport, sizeof defport, "%d", PD_SCRAPE_KUBE_PORT);
	const char *pa = pd_kube_pod_annotation(p, "profefe.com/port");
	long port = pd_scrape_kube_port(p, pa ? pa : defport, &cname);
	if (!port) {
		*skip = PD_KS_BAD_ANNOTATION;
		whyf(why, whycap,
		     "profefe.com/port \"%.64s\" is neither a port number (1-65535) nor the name of a "
		     "container port",
		     pa ? pa : "");
		return 0;
	}
	/* the path: absolute, no query, no blanks; trailing '/' dropped */
	const char *path = pd_kube_pod_annotation(p, "profefe.com/path");
	if (!path || !*path)
		path = PD_SCRAPE_KUBE_PATH;
	size_t plen = strlen(path);
	if (!pd_scrape_kube_path_ok(path)) {
		*skip = PD_KS_BAD_ANNOTATION;
		whyf(why, whycap,
		     "profefe.com/path \"%.64s\" is not an absolute URL path (like /debug/pprof; no query, no blanks)",
		     path);
		return 0;
	}
	while (plen && path[plen - 1] == '/')
		plen--;
	/* the service: printable, and short enough to be kept whole (never cut
	 * short, never a control sequence in the table, /targets or `get services`) */
	const char *sa = pd_kube_pod_annotation(p, "profefe.com/service");
	size_t slen = sa ? strlen(sa) : 0;
	bool sok = slen < 256;
	for (size_t i = 0; sok && i < slen; i++)
		sok = (unsigned char)sa[i] >= ' ' && sa[i] != 0x7f;
	if (!sok) {
		*skip = PD_KS_BAD_ANNOTATION;
		whyf(why, whycap, "profefe.com/service (%zu bytes) has control characters or is over 255 bytes", slen);
		return 0;
	}

	const char *ns = p->namespace ? p->namespace : "";
	const char *pod = p->name ? p->name : "";
	char wl[256];
	const char *service = pd_scrape_kube_service(p, wl, sizeof wl);

	char *url = NULL, *key = NULL, *name = NULL;
	bool v6 = strchr(p->pod_ip, ':') != NULL;
	int rc = 0;
	const char *query = rule ? rule->set.query : NULL; /* its entry's params (?debug=1) */
	if (asprintf(&url, "http://%s%s%s:%ld%.*s%s%s", v6 ? "[" : "", p->pod_ip, v6 ? "]" : "", port, (int)plen, path,
		     query ? "?" : "", query ? query : "") < 0)
		url = NULL;
	if (p->uid && *p->uid) {
		if (asprintf(&key, "%s/%s/%s", ns, pod, p->uid) < 0)
			key = NULL;
	} else if (asprintf(&key, "%s/%s", ns, pod) < 0) {
		key = NULL;
	}
	if (asprintf(&name, "%s/%s", ns, pod) < 0)
		name = NULL;
	if (!url || !key || !name) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}

	/* labels: the pod's place, then the kept pod labels (label_keep's, if
	 * any), then the extra ones (the entry's); then label_keep */
	struct pd_kv lab[KUBE_MAX_LABELS];
	const struct pd_kv *extra = rule ? rule->set.labels : o->labels;
	size_t nextra = rule ? rule->set.nlabels : o->nlabels;
	bool has_keep = rule ? rule->set.has_keep : o->has_keep;
	char *const *keep = rule ? rule->set.keep : o->label_keep;
	size_t nkeep = rule ? rule->set.nkeep : o->nlabel_keep;
	const char *const *pl = has_keep ? (const char *const *)keep : o->pod_labels;
	size_t npl = has_keep ? nkeep : o->npod_labels;
	size_t n = 0;
	lab[n++] = (struct pd_kv){(char *)"namespace", (char *)ns};
	lab[n++] = (struct pd_kv){(char *)"pod", (char *)pod};
	if (cname && *cname)
		lab[n++] = (struct pd_kv){(char *)"container", (char *)cname};
	if (p->node_name && *p->node_name)
		lab[n++] = (struct pd_kv){(char *)"node", (char *)p->node_name};
	for (size_t i = 0; i < npl && n < KUBE_MAX_LABELS; i++) {
		/* a pod label named service is never copied: a selector's service=
		 * is the profiles' service, such a label could not be selected */
		const char *v = strcmp(pl[i], "service") ? pd_kube_pod_label(p, pl[i]) : NULL;
		if (v && !has_label(lab, n, pl[i]))
			lab[n++] = (struct pd_kv){(char *)pl[i], (char *)v};
	}
	for (size_t i = 0; i < nextra && n < KUBE_MAX_LABELS; i++)
		if (!has_label(lab, n, extra[i].key))
			lab[n++] = extra[i];
	if (has_keep)
		n = pd_scrape_labels_keep(lab, n, keep, nkeep);

	if ((rc = pd_scrape_targets_add(l, key, url, service, lab, n, rule ? rule->set.types : 0, err)))
		goto out;
	if (rule && (rc = pd_scrape_targets_set_sched(l, l->n - 1, rule->set.interval_ns, rule->set.cpu_ns,
	                                               rule->set.timeout_ns, err)))
		goto out;
	if ((rc = pd_scrape_targets_set_name(l, l->n - 1, name, err)))
		goto out;
	*skip = PD_KS_TARGET;
out:
	free(url);
	free(key);
	free(name);
	return rc;
}

/* ---- the source ------------------------------------------------------------------------------ */

/* A selected pod. */
struct kpod {
	char *id; /* namespace/name: the map's order */
	char *uid;
	struct pd_scrape_targets t; /* exactly one */
};

struct pd_scrape_kube {
	struct pd_scraper *s;
	struct pd_kube_client *c;
	struct pd_scrape_kube_opts o; /* pointing at the copies below */
	char *ns, *sel;
	char **pod_labels;
	struct pd_kv *labels;
	struct pd_scrape_targets statics;
	struct kpod *pods;
	size_t npods, cap;
	char *rv;   /* resume the watch from here */
	bool dirty; /* the last push failed */
	pthread_t th;
	bool started;
	/* Continuous mode: the map is handed to the scraper by a thread of its own,
	 * at most about every PUSH_COALESCE_NS (one copy of every target per push: per
	 * event it was 30 ms at 10000 pods, a minute for a burst of 2000 events).
	 * pmu guards the map against that thread; only the discovery thread writes it. */
	bool async;
	pthread_t pth;
	bool pstarted;
	bool changed; /* under pmu: the map changed since the last push */
	pthread_mutex_t pmu;
	pthread_cond_t pcv;
	atomic_int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	_Atomic uint64_t lists, restarts, events, errors[KR_N], ntargets;
	_Atomic int api_up;
};

static void klog(struct pd_scrape_kube *d, const char *level, const char *fmt, ...) PD_PRINTF(3, 4);
static void klog(struct pd_scrape_kube *d, const char *level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pd_log_vf(d->o.log, d->o.quiet, level, "kube", fmt, ap);
	va_end(ap);
}

static void kpod_free(struct kpod *k)
{
	free(k->id);
	free(k->uid);
	pd_scrape_targets_free(&k->t);
	memset(k, 0, sizeof *k);
}

static void pods_clear(struct kpod *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kpod_free(&v[i]);
	free(v);
}

/* Index of id in the sorted map, or where it would go (*found false). */
static size_t find(const struct pd_scrape_kube *d, const char *id, bool *found)
{
	size_t lo = 0, hi = d->npods;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(d->pods[mid].id, id);
		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static bool same_target(const struct kpod *a, const struct kpod *b)
{
	const struct pd_scrape_target *x = &a->t.v[0], *y = &b->t.v[0];
	if (strcmp(x->key, y->key) || strcmp(x->url, y->url) || strcmp(x->service, y->service) ||
	    x->nlabels != y->nlabels || x->types != y->types || x->interval_ns != y->interval_ns ||
	    x->cpu_ns != y->cpu_ns || x->timeout_ns != y->timeout_ns)
		return false;
	for (size_t i = 0; i < x->nlabels; i++)
		if (strcmp(x->labels[i].key, y->labels[i].key) || strcmp(x->labels[i].value, y->labels[i].value))
			return false;
	return true;
}

/* Judge a pod; a target fills *k (kpod_free it). */
static int judge(struct pd_scrape_kube *d, const struct pd_kube_pod *p, struct kpod *k, int *skip, char *why,
                 size_t whycap, struct pd_err *err)
{
	memset(k, 0, sizeof *k);
	int rc = pd_scrape_kube_target(p, &d->o, &k->t, skip, why, whycap, err);
	if (rc || *skip != PD_KS_TARGET)
		return rc;
	if (asprintf(&k->id, "%s/%s", p->namespace ? p->namespace : "", p->name ? p->name : "") < 0)
		k->id = NULL;
	k->uid = strdup(p->uid ? p->uid : "");
	if (!k->id || !k->uid) {
		kpod_free(k);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	return 0;
}

#define PUSH_COALESCE_NS 100000000LL /* 100 ms */

/* Hand the scraper the statics and the selected pods. */
static int push(struct pd_scrape_kube *d, struct pd_err *err)
{
	struct pd_scrape_targets l = {0};
	int rc = 0;
	pthread_mutex_lock(&d->pmu);
	d->changed = false;
	size_t npods = d->npods;
	/* unique keys by construction (statics: checked when added; pods: one per
	 * namespace/name, keyed namespace/name/uid, never a URL as statics are);
	 * pd_scraper_set_targets checks them once more, in O(n) */
	for (size_t i = 0; !rc && i < d->statics.n; i++)
		rc = pd_scrape_targets_append(&l, &d->statics.v[i], err);
	for (size_t i = 0; !rc && i < d->npods; i++)
		rc = pd_scrape_targets_append(&l, &d->pods[i].t.v[0], err);
	pthread_mutex_unlock(&d->pmu);
	if (!rc)
		rc = pd_scraper_set_targets(d->s, &l, err);
	pd_scrape_targets_free(&l);
	d->dirty = rc != 0; /* the scraper has not got the selection: push again later */
	if (!rc)
		atomic_store(&d->ntargets, npods);
	return rc;
}

/* The map changed: push now (--once), or let the pusher thread do it. */
static int publish(struct pd_scrape_kube *d, struct pd_err *err)
{
	if (!d->async)
		return push(d, err);
	pthread_mutex_lock(&d->pmu);
	d->changed = true;
	pthread_cond_signal(&d->pcv);
	pthread_mutex_unlock(&d->pmu);
	return 0;
}

static void deadline_in(struct timespec *t, int64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	int64_t v = (int64_t)t->tv_sec * 1000000000 + t->tv_nsec + ns;
	t->tv_sec = (time_t)(v / 1000000000);
	t->tv_nsec = (long)(v % 1000000000);
}

/* Continuous mode: push the map when it changed, the changes of the next
 * 100 ms (a burst of events) in the same push; a failed push is tried
 * again a second later. */
static void *pusher(void *arg)
{
	struct pd_scrape_kube *d = arg;
	pthread_mutex_lock(&d->pmu);
	while (!atomic_load(&d->stop)) {
		if (!d->changed) {
			pthread_cond_wait(&d->pcv, &d->pmu);
			continue;
		}
		struct timespec until;
		deadline_in(&until, PUSH_COALESCE_NS);
		while (!atomic_load(&d->stop) && pthread_cond_timedwait(&d->pcv, &d->pmu, &until) == 0)
			;
		if (atomic_load(&d->stop))
			break;
		pthread_mutex_unlock(&d->pmu);
		struct pd_err err = {0};
		int rc = push(d, &err);
		pthread_mutex_lock(&d->pmu);
		if (rc) {
			d->changed = true;
			klog(d, "warn", "handing %zu target(s) to the scraper failed: %s; again in 1s", d->npods,
			     err.msg);
			deadline_in(&until, 1000000000LL);
			while (!atomic_load(&d->stop) && pthread_cond_timedwait(&d->pcv, &d->pmu, &until) == 0)
				;
		}
	}
	pthread_mutex_unlock(&d->pmu);
	return NULL;
}

static void count_error(struct pd_scrape_kube *d, int code, const char *msg)
{
	atomic_fetch_add(&d->errors[reason_idx(code, msg)], 1);
}

static void report_skip(struct pd_scrape_kube *d, const struct pd_kube_pod *p, int skip, const char *why)
{
	if (skip == PD_KS_NOT_ANNOTATED && why && *why) {
		klog(d, "warn", "pod %s/%s: not scraped: %s", p->namespace ? p->namespace : "", p->name ? p->name : "",
		     why);
	} else if (skip == PD_KS_INVALID) {
		atomic_fetch_add(&d->errors[KR_INVALID], 1);
		klog(d, "warn", "pod %s/%s: cannot be read, skipped: %s", p->namespace ? p->namespace : "",
		     p->name ? p->name : "", why);
	} else if (skip == PD_KS_BAD_ANNOTATION) {
		atomic_fetch_add(&d->errors[KR_ANNOTATION], 1);
		klog(d, "warn", "pod %s/%s: annotated for profiling but skipped: %s", p->namespace ? p->namespace : "",
		     p->name ? p->name : "", why);
	} else if (skip != PD_KS_NOT_ANNOTATED && skip != PD_KS_TARGET && skip != PD_KS_NO_RULE) {
		/* (a pod outside every kubernetes entry of the config is not ours: silent, as one
		 * outside -l would be) */
		klog(d, "info", "pod %s/%s: annotated for profiling but skipped: %s", p->namespace ? p->namespace : "",
		     p->name ? p->name : "", why);
	}
}

struct listctx {
	struct pd_scrape_kube *d;
	struct kpod *v;
	size_t n, cap, listed, annotated;
};

static int on_list_pod(void *ctx, const struct pd_kube_pod *p, struct pd_err *err)
{
	struct listctx *lc = ctx;
	struct kpod k;
	int skip;
	char why[300];
	lc->listed++;
	int rc = judge(lc->d, p, &k, &skip, why, sizeof why, err);
	if (rc)
		return rc;
	lc->annotated += skip != PD_KS_NOT_ANNOTATED && skip != PD_KS_INVALID;
	if (skip != PD_KS_TARGET) {
		report_skip(lc->d, p, skip, why);
		return 0;
	}
	if (pd_grow((void **)&lc->v, &lc->cap, lc->n + 1, sizeof *lc->v)) {
		kpod_free(&k);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	lc->v[lc->n++] = k;
	return 0;
}

static int kpod_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kpod *)a)->id, ((const struct kpod *)b)->id);
}

static const char *where(const struct pd_scrape_kube *d, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s%s%s", d->ns ? "namespace " : "all namespaces", d->ns ? d->ns : "",
	         d->sel ? " (selector " : "", d->sel ? d->sel : "", d->sel ? ")" : "");
	return buf;
}

/* List every pod (paged), replace the selection, push it. */
static int do_list(struct pd_scrape_kube *d, struct pd_err *err)
{
	/* SIGTERM ends a list at once, not after its last page (40 pages of 500 pods) */
	struct pd_kube_pod_query q = {d->ns, d->sel, NULL, KUBE_LIST_LIMIT, &d->stop};
	struct listctx lc = {.d = d};
	char *rv = NULL;
	int rc = pd_kube_list_pods(d->c, &q, on_list_pod, &lc, &rv, err);
	if (rc == PD_KUBE_EGONE && !atomic_load(&d->stop)) {
		/* a continue token expired between pages: start over, once */
		count_error(d, rc, err->msg);
		klog(d, "info", "%s; listing again", err->msg);
		pods_clear(lc.v, lc.n);
		free(rv);
		lc = (struct listctx){.d = d};
		rv = NULL;
		rc = pd_kube_list_pods(d->c, &q, on_list_pod, &lc, &rv, err);
	}
	if (rc) {
		pods_clear(lc.v, lc.n);
		free(rv);
		return rc;
	}
	if (lc.n)
		qsort(lc.v, lc.n, sizeof *lc.v, kpod_cmp);
	/* a pod twice (pages of an inconsistent list): keep the later one */
	size_t w = 0;
	for (size_t i = 0; i < lc.n; i++) {
		if (w && !strcmp(lc.v[w - 1].id, lc.v[i].id)) {
			kpod_free(&lc.v[w - 1]);
			lc.v[w - 1] = lc.v[i];
		} else {
			lc.v[w++] = lc.v[i];
		}
	}
	lc.n = w;
	pthread_mutex_lock(&d->pmu);
	struct kpod *old = d->pods;
	size_t nold = d->npods;
	d->pods = lc.v;
	d->npods = d->cap = lc.n;
	pthread_mutex_unlock(&d->pmu);
	pods_clear(old, nold);
	free(d->rv);
	d->rv = rv;
	atomic_fetch_add(&d->lists, 1);
	atomic_store(&d->api_up, 1);
	char wh[600];
	klog(d, "info", "listed %zu pod(s) in %s: %zu annotated profefe.com/enable=true, %zu target(s)", lc.listed,
	     where(d, wh, sizeof wh), lc.annotated, lc.n);
	return publish(d, err);
}

static void remove_at(struct pd_scrape_kube *d, size_t at)
{
	pthread_mutex_lock(&d->pmu);
	struct kpod k = d->pods[at];
	memmove(&d->pods[at], &d->pods[at + 1], (d->npods - at - 1) * sizeof *d->pods);
	d->npods--;
	pthread_mutex_unlock(&d->pmu);
	kpod_free(&k);
}

/* One ADDED, MODIFIED or DELETED event: the selection and the scraper's list. */
static int apply_event(struct pd_scrape_kube *d, const struct pd_kube_event *ev, struct pd_err *err)
{
	const struct pd_kube_pod *p = ev->pod;
	char *id = NULL;
	if (asprintf(&id, "%s/%s", p->namespace ? p->namespace : "", p->name ? p->name : "") < 0)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	bool found;
	size_t at = find(d, id, &found);
	int rc = 0;
	if (ev->type == PD_KUBE_DELETED) {
		/* a DELETED of an older pod of the same name does not remove the new one */
		if (found && (!p->uid || !*p->uid || !strcmp(p->uid, d->pods[at].uid))) {
			klog(d, "info", "pod %s deleted: no longer a target", id);
			remove_at(d, at);
			rc = publish(d, err);
		}
		free(id);
		return rc;
	}
	struct kpod k;
	int skip;
	char why[300];
	if ((rc = judge(d, p, &k, &skip, why, sizeof why, err))) {
		free(id);
		return rc;
	}
	if (skip == PD_KS_TARGET) {
		if (found && same_target(&d->pods[at], &k)) {
			kpod_free(&k);
		} else {
			const struct pd_scrape_target *t = &k.t.v[0];
			klog(d, "info", "pod %s: %s target (service %s, %s)", id, found ? "changed" : "new", t->service,
			     t->url);
			pthread_mutex_lock(&d->pmu);
			struct kpod old = {0};
			bool oom = false;
			if (found) {
				old = d->pods[at];
				d->pods[at] = k;
			} else if (pd_grow((void **)&d->pods, &d->cap, d->npods + 1, sizeof *d->pods)) {
				oom = true;
			} else {
				memmove(&d->pods[at + 1], &d->pods[at], (d->npods - at) * sizeof *d->pods);
				d->pods[at] = k;
				d->npods++;
			}
			pthread_mutex_unlock(&d->pmu);
			if (oom) {
				kpod_free(&k);
				free(id);
				return pd_errf(err, PD_ENOMEM, "out of memory");
			}
			kpod_free(&old);
			rc = publish(d, err);
		}
	} else if (found) {
		klog(d, skip == PD_KS_BAD_ANNOTATION || skip == PD_KS_INVALID ? "warn" : "info",
		     "pod %s: no longer a target: %s%s", id, skip == PD_KS_INVALID ? "cannot be read: " : "",
		     skip == PD_KS_NOT_ANNOTATED && !*why ? "profefe.com/enable is not \"true\" any more" : why);
		if (skip == PD_KS_BAD_ANNOTATION)
			atomic_fetch_add(&d->errors[KR_ANNOTATION], 1);
		if (skip == PD_KS_INVALID)
			atomic_fetch_add(&d->errors[KR_INVALID], 1);
		remove_at(d, at);
		rc = publish(d, err);
	} else if (ev->type == PD_KUBE_ADDED) {
		report_skip(d, p, skip, why);
	}
	free(id);
	return rc;
}

static int on_event(void *ctx, const struct pd_kube_event *ev, struct pd_err *err)
{
	struct pd_scrape_kube *d = ctx;
	atomic_fetch_add(&d->events, 1);
	atomic_store(&d->api_up, 1);
	int rc = 0;
	if (ev->type != PD_KUBE_BOOKMARK && ev->pod)
		rc = apply_event(d, ev, err);
	if (!rc && !d->async && d->dirty)
		rc = push(d, err); /* an earlier push failed (the pusher thread retries its own) */
	/* resume after this event only once it is applied */
	if (!rc && ev->resource_version && *ev->resource_version) {
		char *rv = strdup(ev->resource_version);
		if (!rv)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		free(d->rv);
		d->rv = rv;
	}
	return rc;
}


/* Sleep ns, or until stopped. */
static void nap(struct pd_scrape_kube *d, int64_t ns)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	int64_t t = (int64_t)until.tv_sec * 1000000000 + until.tv_nsec + ns;
	until.tv_sec = (time_t)(t / 1000000000);
	until.tv_nsec = (long)(t % 1000000000);
	pthread_mutex_lock(&d->mu);
	while (!atomic_load(&d->stop) && pthread_cond_timedwait(&d->cv, &d->mu, &until) == 0)
		;
	pthread_mutex_unlock(&d->mu);
}

static int64_t next_backoff(int64_t b)
{
	if (!b)
		return 1000000000LL;
	return b >= PD_SCRAPE_KUBE_BACKOFF_MAX_NS / 2 ? PD_SCRAPE_KUBE_BACKOFF_MAX_NS : 2 * b;
}

static void *run(void *arg)
{
	struct pd_scrape_kube *d = arg;
	struct pd_kube_pod_query q = {d->ns, d->sel, NULL, KUBE_LIST_LIMIT, NULL};
	int timeout_s = d->o.watch_timeout_s > 0 ? d->o.watch_timeout_s : PD_SCRAPE_KUBE_WATCH_S;
	int64_t backoff = 0;
	bool need_list = true, watched = false;
	while (!atomic_load(&d->stop)) {
		struct pd_err err = {0};
		int rc;
		if (need_list) {
			if ((rc = do_list(d, &err))) {
				if (atomic_load(&d->stop))
					break;
				atomic_store(&d->api_up, 0);
				count_error(d, rc, err.msg);
				backoff = next_backoff(backoff);
				klog(d, "warn",
				     "listing pods failed (%s): %s; again in %.1fs, scraping the %zu known target(s) "
				     "meanwhile",
				     pd_scrape_kube_reason(rc, err.msg), err.msg, (double)backoff / 1e9, d->npods);
				nap(d, backoff);
				continue;
			}
			need_list = false;
			backoff = 0;
		}
		if (watched)
			atomic_fetch_add(&d->restarts, 1);
		watched = true;
		uint64_t ev0 = atomic_load(&d->events);
		int64_t t0 = pd_mono_ns();
		rc = pd_kube_watch_pods(d->c, &q, d->rv, timeout_s, on_event, d, &d->stop, &err);
		if (atomic_load(&d->stop))
			break;
		if (!rc) {
			/* ended normally: resume from the last version seen; a server that
			 * ends watches at once gets a pause */
			if (atomic_load(&d->events) == ev0 && pd_mono_ns() - t0 < 1000000000LL)
				nap(d, next_backoff(0));
			backoff = 0;
			continue;
		}
		if (rc != PD_KUBE_EGONE)
			atomic_store(&d->api_up, 0);
		count_error(d, rc, err.msg);
		if (rc == PD_KUBE_EGONE) {
			klog(d, "info", "watch: resourceVersion %s is gone (410): listing again", d->rv ? d->rv : "");
			need_list = true;
			watched = false;
			atomic_fetch_add(&d->restarts, 1);
			continue;
		}
		/* a stream that was up (events or bookmarks came) and then broke (a load balancer's
		 * idle cut, an API server gone) starts a new series: 1 s, not the old failures' 30 s */
		if (atomic_load(&d->events) != ev0)
			backoff = 0;
		backoff = next_backoff(backoff);
		klog(d, "warn",
		     "watching pods failed (%s): %s; again in %.1fs, scraping the %zu known target(s) meanwhile",
		     pd_scrape_kube_reason(rc, err.msg), err.msg, (double)backoff / 1e9, d->npods);
		nap(d, backoff);
	}
	return NULL;
}

int pd_scrape_kube_new(struct pd_scraper *s, struct pd_kube_client *c, const struct pd_scrape_kube_opts *o,
                       const struct pd_scrape_targets *statics, struct pd_scrape_kube **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_scrape_kube *d = calloc(1, sizeof *d);
	if (!d)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	d->s = s;
	d->c = c;
	d->o = *o;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->pmu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv, &ca);
	pthread_cond_init(&d->pcv, &ca);
	pthread_condattr_destroy(&ca);
	bool ok = true;
	if (o->namespace && *o->namespace)
		ok &= (d->ns = strdup(o->namespace)) != NULL;
	if (o->selector && *o->selector)
		ok &= (d->sel = strdup(o->selector)) != NULL;
	d->o.namespace = d->ns;
	d->o.selector = d->sel;
	d->pod_labels = o->npod_labels ? calloc(o->npod_labels, sizeof *d->pod_labels) : NULL;
	ok &= !o->npod_labels || d->pod_labels;
	for (size_t i = 0; ok && i < o->npod_labels; i++)
		ok &= (d->pod_labels[i] = strdup(o->pod_labels[i])) != NULL;
	d->o.pod_labels = (const char *const *)d->pod_labels;
	d->labels = o->nlabels ? calloc(o->nlabels, sizeof *d->labels) : NULL;
	ok &= !o->nlabels || d->labels;
	for (size_t i = 0; ok && i < o->nlabels; i++) {
		ok &= (d->labels[i].key = strdup(o->labels[i].key)) != NULL;
		ok &= (d->labels[i].value = strdup(o->labels[i].value ? o->labels[i].value : "")) != NULL;
	}
	d->o.labels = d->labels;
	if (!ok) {
		pd_scrape_kube_free(d);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	for (size_t i = 0; statics && i < statics->n; i++) {
		int rc = pd_scrape_targets_copy(&d->statics, &statics->v[i], err);
		if (rc) {
			pd_scrape_kube_free(d);
			return rc;
		}
	}
	pd_scraper_set_metrics_hook(s, pd_scrape_kube_metrics, d);
	*out = d;
	return 0;
}

int pd_scrape_kube_sync(struct pd_scrape_kube *d, size_t *ntargets, struct pd_err *err)
{
	int rc = do_list(d, err);
	if (rc) {
		count_error(d, rc, err->msg);
		atomic_store(&d->api_up, 0);
	}
	if (ntargets)
		*ntargets = d->npods;
	return rc;
}

int pd_scrape_kube_start(struct pd_scrape_kube *d, struct pd_err *err)
{
	if (d->started)
		return 0;
	d->async = true;
	if (pthread_create(&d->pth, NULL, pusher, d)) {
		d->async = false;
		return pd_errf(err, PD_EIO, "cannot start the Kubernetes discovery thread");
	}
	d->pstarted = true;
	if (pthread_create(&d->th, NULL, run, d))
		return pd_errf(err, PD_EIO, "cannot start the Kubernetes discovery thread");
	d->started = true;
	return 0;
}

void pd_scrape_kube_stop(struct pd_scrape_kube *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	atomic_store(&d->stop, 1);
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_mutex_lock(&d->pmu);
	pthread_cond_broadcast(&d->pcv);
	pthread_mutex_unlock(&d->pmu);
}

void pd_scrape_kube_free(struct pd_scrape_kube *d)
{
	if (!d)
		return;
	pd_scrape_kube_stop(d);
	if (d->started)
		pthread_join(d->th, NULL);
	if (d->pstarted)
		pthread_join(d->pth, NULL);
	if (d->s)
		pd_scraper_set_metrics_hook(d->s, NULL, NULL);
	pods_clear(d->pods, d->npods);
	pd_scrape_targets_free(&d->statics);
	free(d->rv);
	free(d->ns);
	free(d->sel);
	for (size_t i = 0; d->pod_labels && i < d->o.npod_labels; i++)
		free(d->pod_labels[i]);
	free(d->pod_labels);
	for (size_t i = 0; d->labels && i < d->o.nlabels; i++) {
		free(d->labels[i].key);
		free(d->labels[i].value);
	}
	free(d->labels);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->pcv);
	pthread_mutex_destroy(&d->pmu);
	free(d);
}

int pd_scrape_kube_metrics(void *ctx, struct pd_buf *b)
{
	struct pd_scrape_kube *d = ctx;
	int rc = 0;
#define HEAD(n, t, h) rc |= pd_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", n, h, n, t)
#define LD(x)         ((unsigned long long)atomic_load(&(x)))
	HEAD("profd_scrape_kube_targets", "gauge", "Pods selected as targets by Kubernetes discovery.");
	rc |= pd_buf_appendf(b, "profd_scrape_kube_targets %llu\n", LD(d->ntargets));
	HEAD("profd_scrape_kube_api_up", "gauge",
	     "1 if the last request to the Kubernetes API succeeded (list or watch), 0 while it fails.");
	rc |= pd_buf_appendf(b, "profd_scrape_kube_api_up %d\n", atomic_load(&d->api_up));
	HEAD("profd_scrape_kube_list_total", "counter",
	     "Complete pod lists (the first one, and again after 410 Gone).");
	rc |= pd_buf_appendf(b, "profd_scrape_kube_list_total %llu\n", LD(d->lists));
	HEAD("profd_scrape_kube_watch_restarts_total", "counter",
	     "Pod watches started again after one ended (server timeout, closed), failed or expired (410).");
	rc |= pd_buf_appendf(b, "profd_scrape_kube_watch_restarts_total %llu\n", LD(d->restarts));
	HEAD("profd_scrape_kube_watch_events_total", "counter", "Watch events received (bookmarks included).");
	rc |= pd_buf_appendf(b, "profd_scrape_kube_watch_events_total %llu\n", LD(d->events));
	HEAD("profd_scrape_kube_errors_total", "counter",
	     "Kubernetes discovery errors by reason: API answers (unauthorized, forbidden, gone, not_found, "
	     "http_4xx, http_5xx), network, invalid_response, unusable pod annotations, internal.");
	for (int r = 0; r < KR_N; r++)
		rc |=
		    pd_buf_appendf(b, "profd_scrape_kube_errors_total{reason=\"%s\"} %llu\n", reason_names[r], LD(d->errors[r]));
#undef LD
#undef HEAD
	return rc ? PD_ENOMEM : 0;
}
