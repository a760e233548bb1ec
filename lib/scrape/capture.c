/*
 * capture.c — `profd capture`: profiles from chosen pods, once, now,
 * through the API server's pod proxy (lib/kube), so that it works from a
 * laptop with kubectl's credentials and no route to the pod network.
 *
 * Three steps. select: arguments (pod names, TYPE/NAME workloads, bare
 * names tried as pod then workload, a label selector) become pods, copied
 * into the capture's arena, each planned (Running? port, path, service from
 * the profefe.com annotations, else the options) with one job per type.
 * run: a small thread pool (each job is one blocking pd_kube_get, and the
 * client is thread-safe), CPU jobs first since they take --duration; every
 * body is decoded and its kind checked before anything is written; then a
 * file (temp file, fsync, link() to a name nobody has: never overwrites) or
 * a POST to the collector — and when that POST fails, the file, so a
 * 30-second CPU profile is not lost to a wrong --collector. view: the
 * results, read by the command for its table, lines and exit code.
 *
 * Locking: c->mu guards the job states and messages; a worker holds it
 * only to take a job and to publish its result (and the progress callback
 * runs under it). The pods are read-only once run starts.
 */
#define _GNU_SOURCE
#include "scrape.h"
#include "../kube/kube.h"
#include "../pprof/pprof.h"
#include "../util/gz.h"

#include "../util/pdcurl.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LABELS   16
#define MAX_PROBLEMS 1024
#define MSG          640

struct pd_capture {
	struct pd_capture_opts o;
	struct pd_arena *a;         /* pods, their strings, problem lines */
	struct pd_capture_pod *pods;
	size_t npods, cappods;
	bool *named;                /* per pod: chosen by its name (not by a selector) */
	struct pd_capture_job *jobs;
	size_t njobs;
	const char **problems;
	size_t nproblems, capproblems;
	struct pd_pprof_limits lim;
	/* run */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t next, ended;         /* next job to start (in `order`), jobs ended */
	size_t *order;              /* job indexes, cpu first */
};

static const char *adup(struct pd_capture *c, const char *s)
{
	return s ? pd_arena_dup(c->a, s, strlen(s) + 1) : NULL;
}

static const char *afmt(struct pd_capture *c, const char *fmt, ...) PD_PRINTF(2, 3);
static const char *afmt(struct pd_capture *c, const char *fmt, ...)
{
	char buf[MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return adup(c, buf);
}

static int problem(struct pd_capture *c, struct pd_err *err, const char *fmt, ...) PD_PRINTF(3, 4);
static int problem(struct pd_capture *c, struct pd_err *err, const char *fmt, ...)
{
	if (c->nproblems >= MAX_PROBLEMS)
		return 0;
	char buf[MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	const char *s = adup(c, buf);
	if (!s || pd_grow((void **)&c->problems, &c->capproblems, c->nproblems + 1, sizeof *c->problems))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->problems[c->nproblems++] = s;
	return 0;
}

int pd_capture_new(const struct pd_capture_opts *o, struct pd_capture **out, struct pd_err *err)
{
	*out = NULL;
	if (!o->client)
		return pd_errf(err, PD_EUSAGE, "capture: no Kubernetes client");
	struct pd_capture *c = calloc(1, sizeof *c);
	if (!c || !(c->a = pd_arena_new(65536))) {
		free(c);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	c->o = *o;
	if (!c->o.types)
		c->o.types = PD_ST_ALL;
	if (c->o.cpu_ns <= 0)
		c->o.cpu_ns = PD_CAPTURE_CPU_NS;
	if (c->o.timeout_ns <= 0)
		c->o.timeout_ns = PD_CAPTURE_TIMEOUT_NS;
	if (!c->o.output_dir || !*c->o.output_dir)
		c->o.output_dir = ".";
	if (c->o.collector && !*c->o.collector)
		c->o.collector = NULL;
	if (!c->o.max_body)
		c->o.max_body = PD_SCRAPE_MAX_BODY;
	if (!c->o.threads)
		c->o.threads = PD_CAPTURE_THREADS;
	if (!c->o.now_ns) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		c->o.now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	}
	if (c->o.namespace && !*c->o.namespace)
		c->o.namespace = NULL;
	pd_pprof_limits_default(&c->lim);
	c->lim.max_compressed = c->o.max_body;
	c->lim.no_quotes = true; /* a pod's bytes never reach a message */
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	*out = c;
	return 0;
}

void pd_capture_free(struct pd_capture *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->njobs; i++)
		free(c->jobs[i].where);
	free(c->jobs);
	free(c->order);
	free(c->pods);
	free(c->named);
	free(c->problems);
	pd_arena_free(c->a);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void pd_capture_view(const struct pd_capture *c, struct pd_capture_view *v)
{
	v->pods = c->pods;
	v->npods = c->npods;
	v->jobs = c->jobs;
	v->njobs = c->njobs;
	v->problems = c->problems;
	v->nproblems = c->nproblems;
}

/* ---- choosing pods ------------------------------------------------------------------------- */

/* Add a copy of p (unless already there). */
static int add_pod(struct pd_capture *c, const struct pd_kube_pod *p, const char *via, bool named, struct pd_err *err)
{
	for (size_t i = 0; i < c->npods; i++)
		if (!strcmp(c->pods[i].pod->namespace, p->namespace) && !strcmp(c->pods[i].pod->name, p->name)) {
			c->named[i] |= named;
			return 0;
		}
	size_t cap = c->cappods;
	if (pd_grow((void **)&c->pods, &c->cappods, c->npods + 1, sizeof *c->pods))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (c->cappods != cap) {
		bool *n = realloc(c->named, c->cappods * sizeof *n);
		if (!n)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		c->named = n;
	}
	struct pd_kube_pod *copy = pd_arena_calloc(c->a, 1, sizeof *copy);
	if (!copy || pd_kube_pod_copy(c->a, p, copy))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	struct pd_capture_pod *cp = &c->pods[c->npods];
	memset(cp, 0, sizeof *cp);
	cp->pod = copy;
	cp->name = afmt(c, "%s/%s", p->namespace, p->name);
	cp->via = adup(c, via);
	cp->msg = "";
	if (!cp->name || !cp->via)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->named[c->npods++] = named;
	return 0;
}

/* What to try after an API error (the message says what failed). */
static const char *api_hint(int code)
{
	switch (code) {
	case PD_KUBE_EUNAUTH: return " (credentials missing or expired: does `kubectl get pods` work?)";
	case PD_KUBE_EFORBIDDEN: return " (RBAC: capture needs get and list on pods, get on pods/proxy and on the workloads)";
	case PD_EIO: return " (is the API server reachable? check --kubeconfig and --context)";
	default: return "";
	}
}

/* The pods matching selector in namespace ns (NULL: all) -> add_pod. *n gets how many. */
static int add_selected(struct pd_capture *c, const char *ns, const char *selector, const char *via, size_t *n,
			struct pd_err *err)
{
	struct pd_kube_pod_query q = {.namespace = ns, .label_selector = selector};
	struct pd_kube_pod_list *l = NULL;
	struct pd_err e;
	*n = 0;
	int rc = pd_kube_list_pods_all(c->o.client, &q, &l, &e);
	if (rc == PD_ENOMEM)
		return pd_errf(err, rc, "%s", e.msg);
	if (rc)
		return problem(c, err, "%s: listing pods failed: %s%s", via, e.msg, api_hint(rc)) ? PD_ENOMEM : 1;
	for (size_t i = 0; i < l->n && !rc; i++)
		rc = add_pod(c, &l->items[i], via, false, err);
	*n = l->n;
	pd_kube_pod_list_free(l);
	return rc;
}

/* A workload's pods; 0 (added or a problem line), 1 when it does not exist
 * (and quiet: no line), or PD_ENOMEM. */
static int add_workload(struct pd_capture *c, const char *resource, const char *name, const char *via, bool quiet,
			struct pd_err *err)
{
	const char *ns = c->o.namespace, *kind = pd_kube_resource_kind(resource);
	char *sel = NULL;
	struct pd_err e;
	int rc = pd_kube_get_workload_selector(c->o.client, ns, resource, name, &sel, &e);
	if (rc == PD_ENOMEM)
		return pd_errf(err, rc, "%s", e.msg);
	if (rc == PD_ENOTFOUND) {
		if (quiet)
			return 1;
		return problem(c, err, "%s: %s \"%s\" not found in namespace %s (kubectl get %ss -n %s lists them)", via,
			       kind, name, ns, kind, ns);
	}
	if (rc)
		return problem(c, err, "%s: %s%s", via, e.msg, api_hint(rc));
	size_t n = 0;
	rc = add_selected(c, ns, sel, via, &n, err);
	if (rc == 0 && n == 0)
		rc = problem(c, err, "%s: no pods match its selector %s in namespace %s (scaled to zero?)", via, sel, ns);
	free(sel);
	return rc < 0 ? rc : 0;
}

static int select_arg(struct pd_capture *c, const char *arg, struct pd_err *err)
{
	const char *ns = c->o.namespace;
	const char *slash = strchr(arg, '/');
	char type[64] = "";
	const char *name = arg, *resource = NULL;
	if (slash) {
		size_t tl = (size_t)(slash - arg);
		name = slash + 1;
		if (tl < sizeof type) {
			memcpy(type, arg, tl);
			type[tl] = 0;
			resource = pd_kube_resource(type);
		}
		if (!resource)
			return problem(c, err,
				       "%s: unknown resource type \"%.*s\" (give a pod name, or deployment/NAME, "
				       "statefulset/NAME, daemonset/NAME, replicaset/NAME)",
				       arg, (int)(tl > 64 ? 64 : tl), arg);
		if (!*name)
			return problem(c, err, "%s: no name after the '/'", arg);
	}
	if (resource && strcmp(resource, "pods"))
		return add_workload(c, resource, name, arg, false, err);

	/* a pod, or (a bare name) a workload */
	struct pd_kube_pod p;
	struct pd_err e;
	struct pd_arena *a = pd_arena_new(16384);
	if (!a)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = pd_kube_get_pod(c->o.client, ns, name, a, &p, &e);
	if (rc == 0)
		rc = add_pod(c, &p, arg, true, err);
	pd_arena_free(a);
	if (rc == 0 || rc == PD_ENOMEM)
		return rc;
	if (rc == PD_EUSAGE) /* not asked: e says whether the name or the namespace */
		return problem(c, err, "%s: %s (lower case letters, digits, '-' and '.')", arg, e.msg);
	if (rc != PD_ENOTFOUND)
		return problem(c, err, "%s: %s%s", arg, e.msg, api_hint(rc));
	if (resource)
		return problem(c, err, "%s: pod \"%s\" not found in namespace %s (kubectl get pods -n %s lists them)", arg,
			       name, ns, ns);
	static const char *const kinds[] = {"deployments", "statefulsets", "daemonsets"};
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
		rc = add_workload(c, kinds[i], name, arg, true, err);
		if (rc != 1)
			return rc;
	}
	return problem(c, err,
		       "%s: no pod, deployment, statefulset or daemonset \"%s\" in namespace %s (kubectl get "
		       "pods,deployments,statefulsets,daemonsets -n %s lists them; another namespace: -n NS)",
		       arg, name, ns, ns);
}

/* Plan one pod: captured (with a port, path, service), skipped or failed. */
static int plan(struct pd_capture *c, size_t i, struct pd_err *err)
{
	struct pd_capture_pod *cp = &c->pods[i];
	const struct pd_kube_pod *p = cp->pod;
	bool named = c->named[i];
	const char *why = NULL;
	if (p->invalid)
		why = afmt(c, "the API's pod cannot be read (%.200s)", p->invalid);
	else if (p->deleting)
		why = "being deleted";
	else if (!p->phase || strcmp(p->phase, "Running"))
		why = afmt(c, "phase %s, not Running", p->phase ? p->phase : "unknown");
	else if (!p->pod_ip || !*p->pod_ip)
		why = "no pod IP yet";
	if (why) {
		cp->state = named ? PD_CAP_FAILED : PD_CAP_SKIPPED;
		cp->msg = named ? afmt(c, "%s: nothing to capture", why) : why;
		return cp->msg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	}
	/* port: the annotation, else --port, else 6060 for an enabled pod */
	const char *pa = pd_kube_pod_annotation(p, "profefe.com/port");
	const char *en = pd_kube_pod_annotation(p, "profefe.com/enable");
	const char *container = NULL;
	long port = 0;
	if (pa) {
		if (!(port = pd_scrape_kube_port(p, pa, &container)))
			cp->msg = afmt(c,
				       "its annotation profefe.com/port \"%.64s\" is neither a port number nor the name of one of "
				       "its container ports (fix the annotation)",
				       pa);
	} else if (c->o.port) {
		if (!(port = pd_scrape_kube_port(p, c->o.port, &container)))
			cp->msg = afmt(c, "--port %.64s is neither a port number nor the name of one of its container ports",
				       c->o.port);
	} else if (en && !strcmp(en, "true")) {
		char def[16];
		snprintf(def, sizeof def, "%d", PD_SCRAPE_KUBE_PORT);
		port = pd_scrape_kube_port(p, def, &container);
	} else if (pd_scrape_kube_enable_meant(en)) {
		cp->msg = afmt(c,
			       "not annotated with its pprof port (profefe.com/port), no --port given, and its "
			       "profefe.com/enable is \"%.16s\", not \"true\" (only \"true\" means the default port "
			       "6060): give --port PORT (e.g. --port 6060), or fix the annotations",
			       en);
	} else {
		cp->msg = "not annotated with its pprof port (profefe.com/port) and no --port given: give --port "
			  "PORT (e.g. --port 6060), or annotate the pod";
	}
	if (!port) {
		cp->state = PD_CAP_FAILED;
		return cp->msg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	}
	const char *path = pd_kube_pod_annotation(p, "profefe.com/path");
	if (!path || !*path)
		path = c->o.path && *c->o.path ? c->o.path : PD_SCRAPE_KUBE_PATH;
	if (!pd_scrape_kube_path_ok(path)) {
		cp->state = PD_CAP_FAILED;
		cp->msg = afmt(c, "pprof path \"%.64s\" (profefe.com/path or --path) is not an absolute URL path like /debug/pprof",
			       path);
		return cp->msg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	}
	size_t plen = strlen(path);
	while (plen && path[plen - 1] == '/')
		plen--;
	char svc[256];
	cp->service = c->o.service ? c->o.service : adup(c, pd_scrape_kube_service(p, svc, sizeof svc));
	cp->path = afmt(c, "%.*s", (int)plen, path);
	cp->container = container;
	cp->port = (unsigned)port;
	cp->state = PD_CAP_RUNNING;
	if (!cp->service || !cp->path)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

int pd_capture_select(struct pd_capture *c, const char *const *args, size_t nargs, const char *selector,
		      struct pd_err *err)
{
	if (nargs && !c->o.namespace)
		return pd_errf(err, PD_EUSAGE, "pods and workloads are named within one namespace (not with all namespaces)");
	if (!nargs && !selector)
		return pd_errf(err, PD_EUSAGE, "no pods chosen: give a pod, a workload (deployment/NAME) or a selector");
	int rc = 0;
	for (size_t i = 0; i < nargs && rc >= 0; i++)
		rc = select_arg(c, args[i], err);
	if (rc >= 0 && selector) {
		char via[600];
		snprintf(via, sizeof via, "-l %s", selector);
		size_t n = 0;
		rc = add_selected(c, c->o.namespace, selector, via, &n, err);
		if (rc == 0 && n == 0)
			rc = problem(c, err, "-l %s: no pods match in %s%s (%s)", selector,
				     c->o.namespace ? "namespace " : "any namespace", c->o.namespace ? c->o.namespace : "",
				     c->o.namespace ? "try another -n, or -A"
						    : "kubectl get pods -A --show-labels lists their labels");
	}
	if (rc < 0)
		return rc;
	/* plan the pods, then one job per type */
	size_t njobs = 0, ntypes = 0;
	for (int t = 0; t < PD_ST_N; t++)
		ntypes += (c->o.types >> t) & 1;
	for (size_t i = 0; i < c->npods; i++) {
		if ((rc = plan(c, i, err)))
			return rc;
		njobs += c->pods[i].state == PD_CAP_RUNNING ? ntypes : 0;
	}
	free(c->jobs);
	c->jobs = njobs ? calloc(njobs, sizeof *c->jobs) : NULL;
	if (njobs && !c->jobs)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->njobs = 0;
	for (size_t i = 0; i < c->npods; i++) {
		struct pd_capture_pod *cp = &c->pods[i];
		cp->first_job = c->njobs;
		for (int t = 0; cp->state == PD_CAP_RUNNING && t < PD_ST_N; t++)
			if (c->o.types & (1u << t)) {
				struct pd_capture_job *j = &c->jobs[c->njobs++];
				j->pod = i;
				j->type = t;
				j->state = PD_CAP_WAITING;
			}
		cp->njobs = c->njobs - cp->first_job;
	}
	return 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

const char *pd_capture_file_name(char *buf, size_t cap, const char *service, const char *pod, int type,
				 int64_t time_ns)
{
	char svc[128];
	size_t n = 0;
	for (const char *s = service; s && *s && n + 1 < sizeof svc; s++)
		svc[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
				   *s == '-' || *s == '_'
			       ? *s
			       : '_';
	svc[n] = 0;
	if (!n || !strcmp(svc, ".") || !strcmp(svc, ".."))
		snprintf(svc, sizeof svc, "unknown");
	time_t t = (time_t)(time_ns / 1000000000LL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char ts[32];
	strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
	const char *tn = pd_scrape_type_name(type);
	snprintf(buf, cap, "%s-%s-%s-%s.pb.gz", svc, pod, tn ? tn : "unknown", ts);
	return buf;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Write data to DIR/NAME, or DIR/NAME-2, -3... if taken: a temp file,
 * fsync, link() (which never replaces), the directory fsync'd. *out gets
 * the path (malloc'd). */
static int write_new_file(const char *dir, const char *name, const uint8_t *data, size_t len, char **out,
			  struct pd_err *err)
{
	*out = NULL;
	char tmp[4096], path[4096];
	static atomic_uint seq;
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld.%u", dir, name, (long)getpid(), atomic_fetch_add(&seq, 1));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return pd_errf(err, PD_EIO, "cannot write in %s: %s (check --output-dir)", dir, strerror(errno));
	if (write_all(fd, data, len) || fsync(fd)) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return pd_errf(err, PD_EIO, "writing %s/%s: %s", dir, name, strerror(e));
	}
	close(fd);
	size_t nl = strlen(name), base = nl > 6 && !strcmp(name + nl - 6, ".pb.gz") ? nl - 6 : nl;
	int rc = -1;
	for (int k = 1; k < 1000; k++) {
		if (k == 1)
			snprintf(path, sizeof path, "%s/%s", dir, name);
		else
			snprintf(path, sizeof path, "%s/%.*s-%d%s", dir, (int)base, name, k, name + base);
		if ((rc = link(tmp, path)) == 0 || errno != EEXIST)
			break;
	}
	int e = errno;
	unlink(tmp);
	if (rc)
		return pd_errf(err, PD_EIO, "writing %s: %s", path, strerror(e));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	/* "./x" -> "x": what the user would type */
	const char *shown = !strcmp(dir, ".") ? path + 2 : path;
	if (!(*out = strdup(shown)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

/* ---- the collector ---------------------------------------------------------------------------- */

struct body {
	struct pd_buf b;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct body *b = ud;
	size_t len = size * n;
	size_t room = b->b.max - b->b.len;
	if (room && pd_buf_append(&b->b, p, len < room ? len : room))
		return 0;
	return len; /* the rest of an over-long answer is dropped */
}

static CURL *easy(const char *url, long timeout_ms, struct body *b, char *errbuf)
{
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "profd-capture");
	return h;
}

int pd_capture_ping_collector(const char *collector, const char *token, long timeout_ms, struct pd_err *err)
{
	char url[2048], errbuf[CURL_ERROR_SIZE] = "";
	size_t n = strlen(collector);
	while (n && collector[n - 1] == '/')
		n--;
	snprintf(url, sizeof url, "%.*s/api/0/version", (int)n, collector);
	struct body b = {PD_BUF_INIT(4096)};
	CURL *h = easy(url, timeout_ms, &b, errbuf);
	if (!h)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	char auth[320] = "";
	struct curl_slist *hdrs = NULL;
	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		hdrs = curl_slist_append(NULL, auth);
		memset(auth, 0, sizeof auth);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	}
	CURLcode cc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	int rc = 0;
	if (cc != CURLE_OK) {
		rc = pd_errf(err, PD_EIO, "GET %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else if (status == 401) {
		rc = pd_errf(err, PD_EIO, "GET %s: HTTP 401: the collector needs a token (--token-file FILE or $PROFD_TOKEN)%s",
			     url, token ? ": it does not know the one given" : "");
	} else if (status == 403) {
		rc = 0; /* a collector that knows the token (a write-only one may not read the version) */
	} else if (status != 200) {
		char line[220];
		pd_scrape_first_line(b.b.ptr, b.b.len, line, sizeof line);
		rc = pd_errf(err, PD_EIO, "GET %s: HTTP %ld%s%s (not a profd or profefe collector?)", url, status,
			     line[0] ? ": " : "", line);
	}
	pd_buf_free(&b.b);
	return rc;
}

/* POST one profile; *where gets COLLECTOR/api/0/profiles/ID. */
static int post(struct pd_capture *c, const struct pd_capture_pod *cp, const struct pd_capture_job *j,
		const struct pd_kube_response *r, int64_t created_ns, char **where, struct pd_err *err)
{
	const struct pd_kube_pod *p = cp->pod;
	struct pd_kv lab[MAX_LABELS];
	size_t n = 0;
	lab[n++] = (struct pd_kv){(char *)"namespace", (char *)p->namespace};
	lab[n++] = (struct pd_kv){(char *)"pod", (char *)p->name};
	if (cp->container && *cp->container)
		lab[n++] = (struct pd_kv){(char *)"container", (char *)cp->container};
	if (p->node_name && *p->node_name)
		lab[n++] = (struct pd_kv){(char *)"node", (char *)p->node_name};
	static const char *const keep[] = {"app", "version", "app.kubernetes.io/name", "app.kubernetes.io/version"};
	for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
		const char *v = pd_kube_pod_label(p, keep[i]);
		if (v)
			lab[n++] = (struct pd_kv){(char *)keep[i], (char *)v};
	}
	if (pd_scrape_type_cumulative(j->type))
		lab[n++] = (struct pd_kv){(char *)"cumulative", (char *)"true"};
	char *url = pd_scrape_post_url(c->o.collector, cp->service, pd_scrape_type_name(j->type), lab, n, created_ns);
	if (!url)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	char errbuf[CURL_ERROR_SIZE] = "";
	struct body b = {PD_BUF_INIT(65536)};
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	hdrs = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
	char auth[320] = ""; /* a token is at most 256 bytes (lib/http/auth.h) */
	if (hdrs && c->o.token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->o.token);
		hdrs = curl_slist_append(hdrs, auth);
		memset(auth, 0, sizeof auth);
	}
	CURL *h = hdrs ? easy(url, PD_CAPTURE_POST_TIMEOUT_MS, &b, errbuf) : NULL;
	int rc = 0;
	if (!h) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body.ptr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	CURLcode cc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	/* the collector's base, without the query, for messages */
	size_t bl = strlen(c->o.collector);
	while (bl && c->o.collector[bl - 1] == '/')
		bl--;
	if (cc != CURLE_OK) {
		rc = pd_errf(err, PD_EIO, "collector %.*s: %s (is it running? check --collector)", (int)bl, c->o.collector,
			     errbuf[0] ? errbuf : curl_easy_strerror(cc));
		goto out;
	}
	json_t *o = b.b.len ? json_loadb((const char *)b.b.ptr, b.b.len, 0, NULL) : NULL;
	json_t *body = json_object_get(o, "body"), *id = json_object_get(body, "id"), *e = json_object_get(o, "error");
	/* the collector's strings go to a terminal: escaped (pd_term_escaped) */
	if (status == 200 && json_is_string(id)) {
		char *x = pd_term_escaped(json_string_value(id), json_string_length(id), false);
		if (asprintf(where, "%.*s/api/0/profiles/%s", (int)bl, c->o.collector, x ? x : json_string_value(id)) < 0) {
			*where = NULL;
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
		}
		free(x);
	} else {
		char line[220];
		pd_scrape_first_line(b.b.ptr, b.b.len, line, sizeof line);
		char *x = json_is_string(e) ? pd_term_escaped(json_string_value(e), json_string_length(e), false) : NULL;
		rc = pd_errf(err, PD_EIO, "collector %.*s refused the profile: HTTP %ld: %s", (int)bl, c->o.collector,
			     status, x ? x : json_is_string(e) ? json_string_value(e) : line[0] ? line : "(empty answer)");
		free(x);
	}
	json_decref(o);
out:
	if (h)
		curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	pd_buf_free(&b.b);
	free(url);
	return rc;
}

/* ---- one job ---------------------------------------------------------------------------------- */

static void jmsg(struct pd_capture_job *j, const char *fmt, ...) PD_PRINTF(2, 3);
static void jmsg(struct pd_capture_job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof j->msg, fmt, ap);
	va_end(ap);
}

/* Is an error answer of the pod proxy a Kubernetes Status (the API
 * server's: RBAC, a closed port), rather than the pod's own body? */
static bool kube_status(const struct pd_kube_response *r)
{
	json_t *o = r->body.len ? json_loadb((const char *)r->body.ptr, r->body.len, 0, NULL) : NULL;
	const char *kind = json_string_value(json_object_get(o, "kind"));
	bool yes = kind && !strcmp(kind, "Status") && json_is_string(json_object_get(o, "apiVersion"));
	json_decref(o);
	return yes;
}

/* Fetch, check and deliver; fills j (state, msg, bytes, where) and *result
 * (what to publish). Runs without the lock. */
static void run_job(struct pd_capture *c, struct pd_capture_job *j, struct pd_capture_job *res)
{
	const struct pd_capture_pod *cp = &c->pods[j->pod];
	const struct pd_kube_pod *p = cp->pod;
	const char *tn = pd_scrape_type_name(j->type);
	bool cpu = j->type == PD_ST_CPU;
	long secs = (long)(c->o.cpu_ns / 1000000000LL);
	long timeout_ms = (long)((c->o.timeout_ns + (cpu ? c->o.cpu_ns : 0)) / 1000000LL);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t created_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	struct pd_kube_response r;
	struct pd_profile *prof = NULL;
	struct pd_err e;
	char ppath[3000];
	res->state = PD_CAP_FAILED;
	char *rel = pd_scrape_type_url(cp->path, j->type, secs);
	if (!rel) {
		jmsg(res, "out of memory");
		return;
	}
	int rc = pd_kube_pod_proxy_path(ppath, sizeof ppath, p->namespace, p->name, cp->port, rel, &e);
	free(rel);
	if (rc) {
		jmsg(res, "%s", e.msg);
		return;
	}
	struct pd_kube_get_opts go = {.timeout_ms = timeout_ms, .max_body = c->o.max_body, .stop = c->o.stop};
	/* Go takes one CPU profile at a time: while someone else's runs (a
	 * scraper's, a colleague's capture), ask again every second, for up
	 * to --timeout */
	double busy_until = pd_now() + (double)c->o.timeout_ns / 1e9;
	for (;;) {
		rc = pd_kube_get(c->o.client, ppath, &go, &r, &e);
		if (rc || !cpu || !pd_scrape_cpu_in_use(r.status, r.body.ptr, r.body.len) || pd_now() + 1 > busy_until)
			break;
		pd_kube_response_free(&r);
		for (int k = 0; k < 10 && !(c->o.stop && atomic_load(c->o.stop)); k++)
			usleep(100000);
	}
	if (rc) {
		if (c->o.stop && atomic_load(c->o.stop))
			jmsg(res, "interrupted");
		else if (r.timed_out)
		{
			char dur[40] = "";
			if (cpu)
				snprintf(dur, sizeof dur, "--duration %lds + ", secs);
			jmsg(res, "no answer within %.3gs (%s--timeout %.3gs): the pod is slow or hanging (try a longer --timeout)",
			     (double)timeout_ms / 1000, dur, (double)c->o.timeout_ns / 1e9);
		}
		else if (rc == PD_ELIMIT)
			jmsg(res, "the profile is over the limit of %zu bytes (--max-body)", c->o.max_body);
		else
			jmsg(res, "%s%s", e.msg, api_hint(rc));
		return;
	}
	res->bytes = r.body.len;
	if (r.status != 200) {
		if (cpu && pd_scrape_cpu_in_use(r.status, r.body.ptr, r.body.len)) {
			jmsg(res, "cpu profiling already in use: someone else kept taking CPU profiles of this process for "
				  "--timeout %.3gs (try again later, or a longer --timeout)",
			     (double)c->o.timeout_ns / 1e9);
		} else {
			const char *hint = "";
			char hb[200];
			if (r.status == 401 || r.status == 403) {
				hint = api_hint(r.status == 401 ? PD_KUBE_EUNAUTH : PD_KUBE_EFORBIDDEN);
			} else if (r.status == 404) {
				snprintf(hb, sizeof hb, " (no pprof handler at %s/%s on port %u? check profefe.com/path or --path)",
					 cp->path, cpu ? "profile" : tn, cp->port);
				hint = hb;
			} else if (r.status == 502 || r.status == 503) {
				snprintf(hb, sizeof hb,
					 " (is the pod serving pprof on port %u? check profefe.com/port or --port)", cp->port);
				hint = hb;
			}
			char what[80];
			snprintf(what, sizeof what, "pod proxy (port %u)", cp->port);
			if (kube_status(&r)) { /* the API server's own answer: its message is shown */
				pd_kube_http_error(what, r.status, r.body.ptr, r.body.len, &e);
				jmsg(res, "%s%s", e.msg, hint);
			} else { /* the pod's: described, never quoted */
				char d[80];
				jmsg(res, "%s: HTTP %ld from the pod, with %s%s", what, r.status,
				     pd_pprof_describe_body(r.body.ptr, r.body.len, d, sizeof d), hint);
			}
		}
		goto out;
	}
	if (pd_pprof_decode(r.body.ptr, r.body.len, &c->lim, &prof, &e)) {
		if (e.code == PD_ELIMIT) {
			jmsg(res, "profile over a limit: %s", e.msg);
		} else {
			char m[sizeof res->msg - 100];
			pd_scrape_not_profile(m, sizeof m, r.content_type, r.body.ptr, r.body.len, &e);
			jmsg(res, "%s (is port %u the pprof port? check profefe.com/port or --port)", m, cp->port);
		}
		goto out;
	}
	const char *kind = pd_profile_kind(prof);
	if (!pd_scrape_kind_ok(j->type, kind)) {
		char m[sizeof res->msg - 60];
		pd_scrape_wrong_kind(m, sizeof m, prof, j->type);
		jmsg(res, "%s (check profefe.com/path or --path)", m);
		goto out;
	}
	res->empty = prof->nsamples == 0;
	/* deliver */
	char name[600];
	pd_capture_file_name(name, sizeof name, cp->service, p->name, j->type, c->o.now_ns);
	if (c->o.collector && res->empty) {
		res->state = PD_CAP_OK;
		jmsg(res, "no samples: nothing to store");
		goto out;
	}
	if (c->o.collector) {
		if (post(c, cp, j, &r, created_ns, &res->where, &e) == 0) {
			res->state = PD_CAP_OK;
			goto out;
		}
		char first[sizeof e.msg];
		memcpy(first, e.msg, sizeof first);
		/* keep it anyway */
		const uint8_t *data = r.body.ptr;
		size_t len = r.body.len;
		struct pd_buf gz = PD_BUF_INIT(0);
		if (!pd_is_gzip(data, len) && pd_gzip(data, len, 6, &gz, &e) == 0)
			data = gz.ptr, len = gz.len;
		if (write_new_file(c->o.output_dir, name, data, len, &res->where, &e) == 0)
			jmsg(res, "%s; saved to %s instead", first, res->where);
		else
			jmsg(res, "%s; could not save it either: %s", first, e.msg);
		pd_buf_free(&gz);
		goto out;
	}
	const uint8_t *data = r.body.ptr;
	size_t len = r.body.len;
	struct pd_buf gz = PD_BUF_INIT(0);
	if (!pd_is_gzip(data, len)) {
		if (pd_gzip(data, len, 6, &gz, &e)) {
			jmsg(res, "%s", e.msg);
			goto out;
		}
		data = gz.ptr, len = gz.len;
	}
	if (write_new_file(c->o.output_dir, name, data, len, &res->where, &e) == 0) {
		res->state = PD_CAP_OK;
		if (res->empty)
			jmsg(res, "no samples");
	} else {
		jmsg(res, "%s", e.msg);
	}
	pd_buf_free(&gz);
out:
	pd_profile_free(prof);
	pd_kube_response_free(&r);
}

static void *worker(void *arg)
{
	struct pd_capture *c = arg;
	pthread_mutex_lock(&c->mu);
	while (c->next < c->njobs) {
		struct pd_capture_job *j = &c->jobs[c->order[c->next++]];
		j->t0 = pd_now();
		if (c->o.stop && atomic_load(c->o.stop)) {
			j->t1 = j->t0;
			j->state = PD_CAP_FAILED;
			jmsg(j, "interrupted before it started");
			c->ended++;
			if (c->o.progress)
				c->o.progress(c->o.ctx, c, j);
			continue;
		}
		j->state = PD_CAP_RUNNING;
		if (c->o.progress)
			c->o.progress(c->o.ctx, c, j);
		pthread_mutex_unlock(&c->mu);
		struct pd_capture_job res;
		memset(&res, 0, sizeof res);
		run_job(c, j, &res);
		pthread_mutex_lock(&c->mu);
		j->state = res.state;
		j->bytes = res.bytes;
		j->empty = res.empty;
		j->where = res.where;
		memcpy(j->msg, res.msg, sizeof j->msg);
		j->t1 = pd_now();
		c->ended++;
		if (c->o.progress)
			c->o.progress(c->o.ctx, c, j);
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int pd_capture_run(struct pd_capture *c, struct pd_err *err)
{
	if (!c->njobs)
		return 0;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	free(c->order);
	if (!(c->order = malloc(c->njobs * sizeof *c->order)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < c->njobs; i++) /* CPU profiles take --duration: start them first */
		if (c->jobs[i].type == PD_ST_CPU)
			c->order[k++] = i;
	for (size_t i = 0; i < c->njobs; i++)
		if (c->jobs[i].type != PD_ST_CPU)
			c->order[k++] = i;
	c->next = c->ended = 0;
	size_t nt = c->njobs < c->o.threads ? c->njobs : c->o.threads;
	pthread_t *th = calloc(nt, sizeof *th);
	if (!th)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t started = 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1u << 20);
	for (; started < nt; started++)
		if (pthread_create(&th[started], &attr, worker, c))
			break;
	pthread_attr_destroy(&attr);
	int rc = 0;
	if (!started) {
		/* no thread at all: mark every job failed rather than hang */
		pthread_mutex_lock(&c->mu);
		for (size_t i = 0; i < c->njobs; i++) {
			c->jobs[i].state = PD_CAP_FAILED;
			jmsg(&c->jobs[i], "cannot start a thread");
		}
		c->ended = c->njobs;
		pthread_mutex_unlock(&c->mu);
		rc = pd_errf(err, PD_ENOMEM, "cannot start a thread");
	}
	pthread_mutex_lock(&c->mu);
	while (c->ended < c->njobs) {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 1;
		if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT && c->o.progress)
			c->o.progress(c->o.ctx, c, NULL);
	}
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	return rc;
}
