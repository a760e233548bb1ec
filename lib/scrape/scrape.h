/*
 * scrape.h — the scraper: pull Go net/http/pprof endpoints on a schedule and
 * deliver the profiles to a collector (profefe's API v0) or to a store.
 *
 * Pieces, each usable alone (and unit-tested alone):
 *   - profile types and target URLs (the seven Go types, BASE/<type>,
 *     BASE/profile?seconds=N for cpu);
 *   - targets: {key, base URL, service, labels, types}. A *discovery source*
 *     (static flags and a config file today, Kubernetes later) builds a
 *     struct pd_scrape_targets and hands it to pd_scraper_set_targets; the
 *     scheduler keeps its state (delta bases, backoff, health) for targets
 *     whose key stays and drops it for targets that left;
 *   - profefe's label escaping and the POST URL (exactly as profefe's agent);
 *   - the delivery queue: bounded in bytes, FIFO, drops the oldest;
 *   - schedule math: per-target phase (jitter) from a hash of the key,
 *     next due time, retry backoff bounded by the next regular due time;
 *   - the delta step for cumulative types (allocs, block, mutex);
 *   - the scraper itself (scraper.c): one thread, one libcurl multi handle
 *     for fetches and posts (bounded concurrency, per-request timeouts,
 *     keep-alive), every body validated by decoding it; health counters;
 *   - a small HTTP server for /metrics, /healthz and /targets (http.c).
 * docs/scraping.md explains the choices (deltas, gauges, queue, retries).
 */
#ifndef PD_SCRAPE_H
#define PD_SCRAPE_H

#include <stdio.h>

#include "../store/store.h"

/* ---- profile types ------------------------------------------------------------------------ */

enum pd_scrape_type {
	PD_ST_CPU,
	PD_ST_HEAP,
	PD_ST_ALLOCS,
	PD_ST_BLOCK,
	PD_ST_MUTEX,
	PD_ST_GOROUTINE,
	PD_ST_THREADCREATE,
	PD_ST_N
};
#define PD_ST_ALL ((1u << PD_ST_N) - 1)

/* "cpu", "heap", ... (the API v0 type names); NULL out of range. */
const char *pd_scrape_type_name(int t);
/* What pd_profile_kind says about a valid profile of this type. */
const char *pd_scrape_type_kind(int t);
/* allocs, block, mutex: counters since the process started. */
bool pd_scrape_type_cumulative(int t);
/* "cpu,heap, allocs" or "all" -> bit mask (1 << PD_ST_*). Empty elements
 * are skipped, white space trimmed; an unknown name or an empty list is
 * PD_EUSAGE naming the valid ones. */
int pd_scrape_parse_types(const char *s, unsigned *mask, struct pd_err *err) PD_WUR;
/* "cpu,heap,..." of a mask into buf. */
const char *pd_scrape_types_str(unsigned mask, char *buf, size_t n);

/* ---- targets ------------------------------------------------------------------------------ */

struct pd_scrape_target {
	char *key;       /* unique id of the target (static: its URL; kube: namespace/pod/uid) */
	char *name;      /* shown in the table, logs and metrics (kube: namespace/pod); NULL = the key */
	char *url;       /* base URL of the pprof endpoint, no trailing '/', e.g. http://10.0.0.7:6060/debug/pprof */
	char *service;
	struct pd_kv *labels; /* sent with every profile, in this order */
	size_t nlabels;
	unsigned types;  /* 1 << PD_ST_*; 0 = the scraper's --types */
};

/* A list a discovery source fills. Everything in it is owned by the list. */
struct pd_scrape_targets {
	struct pd_scrape_target *v;
	size_t n, cap;
};
/* Copy a target into the list. A key already in the list is PD_EINVAL. */
int pd_scrape_targets_add(struct pd_scrape_targets *l, const char *key, const char *url, const char *service,
			  const struct pd_kv *labels, size_t nlabels, unsigned types, struct pd_err *err) PD_WUR;
void pd_scrape_targets_free(struct pd_scrape_targets *l);
/* Set the display name of target i (copied; NULL = show the key). */
int pd_scrape_targets_set_name(struct pd_scrape_targets *l, size_t i, const char *name, struct pd_err *err) PD_WUR;
/* The name a target is shown by: its name, else its key. */
const char *pd_scrape_target_name(const struct pd_scrape_target *t);

/*
 * A user's target to a base URL (malloc'd into *out): "host:port" gets
 * "http://"; a URL without a path gets "/debug/pprof"; a trailing '/' is
 * dropped. Only http and https. PD_EUSAGE with a reason otherwise.
 */
int pd_scrape_normalize_url(const char *in, char **out, struct pd_err *err) PD_WUR;
/* The "host:port" part of a URL into buf ("" if none). */
const char *pd_scrape_url_hostport(const char *url, char *buf, size_t n);
/* BASE/profile?seconds=N for cpu, BASE/<type> for the others (malloc'd). */
char *pd_scrape_type_url(const char *base, int type, long cpu_seconds);

/*
 * Static targets in a file, one per line ('#' starts a comment):
 *   URL [service=NAME] [types=cpu,heap] [key=value]...
 * Other key=value words are labels (after default_labels); a label
 * instance=HOST:PORT is added unless one is given. A line without service=
 * takes default_service (NULL: an error). Lines are added to *l (keys = the
 * normalised URLs). Errors name the file (name) and the line.
 */
int pd_scrape_parse_config(const char *text, const char *name, const char *default_service,
			   const struct pd_kv *default_labels, size_t ndefault, struct pd_scrape_targets *l,
			   struct pd_err *err) PD_WUR;

/* ---- profefe's URL escaping ----------------------------------------------------------------- */

/* Append Go's url.QueryEscape(s): [A-Za-z0-9-_.~] kept, ' ' -> '+', the rest %XX. */
int pd_scrape_query_escape(const char *s, struct pd_buf *out) PD_WUR;
/* Append the value of profefe's "labels" parameter before the query
 * escaping: QueryEscape(k)=QueryEscape(v) joined by ','. */
int pd_scrape_labels_value(const struct pd_kv *labels, size_t n, struct pd_buf *out) PD_WUR;
/*
 * The ingest URL, as profefe's agent builds it (malloc'd, NUL-terminated):
 * COLLECTOR/api/0/profiles?service=S&type=T&labels=L&created_at=C with
 * every value QueryEscape'd (so the labels are escaped twice) and C the
 * time in profefe's layout with nanoseconds, UTC
 * (2006-01-02T15:04:05.000000000: profefe parses only that layout; profd
 * reads it as UTC too). labels= is left out when there are none.
 */
char *pd_scrape_post_url(const char *collector, const char *service, const char *type, const struct pd_kv *labels,
			 size_t nlabels, int64_t created_ns);

/* ---- Go's one CPU profile at a time -------------------------------------------------------- */

/* Go's net/http/pprof answers a second concurrent CPU profile with a 500
 * "Could not enable CPU profiling: cpu profiling already in use". */
bool pd_scrape_cpu_in_use(long http_status, const uint8_t *body, size_t n);

/* ---- schedule math (ns, monotonic clock) ------------------------------------------------------ */

/* The target's phase in [0, interval): a hash of its key, so targets spread
 * over the interval and a target keeps its slot across restarts. */
int64_t pd_sched_phase(const char *key, int64_t interval_ns);
/* The first time > after that is phase + k * interval. */
int64_t pd_sched_next(int64_t after, int64_t phase, int64_t interval_ns);
/* Retry time after the fails-th consecutive failure: now + 1s * 2^(fails-1),
 * capped at PD_SCRAPE_RETRY_MAX_NS; next_due if that is not earlier. */
int64_t pd_sched_retry(int64_t now, unsigned fails, int64_t next_due);
#define PD_SCRAPE_RETRY_MIN_NS 1000000000LL
#define PD_SCRAPE_RETRY_MAX_NS 30000000000LL
/* Collector backoff after the fails-th failed post: 1s * 2^(fails-1), max 30 s. */
int64_t pd_sched_backoff(unsigned fails);

/* ---- the delivery queue -------------------------------------------------------------------- */

/* One profile waiting for the collector. */
struct pd_queue_item {
	struct pd_queue_item *prev, *next;
	uint64_t seq;     /* FIFO order, set by the queue */
	size_t cost;      /* bytes accounted: body + URL + this struct */
	char *url;        /* the POST URL (malloc'd) */
	uint8_t *body;    /* gzip'd pprof (malloc'd) */
	size_t len;
	unsigned attempts;
	void *owner;      /* the scraper's, opaque here */
	int type;
};

/*
 * FIFO bounded in bytes. The sender pops the oldest item, posts it, and
 * either frees it (delivered or refused for good) or requeues it, which puts
 * it back at its place (by seq) so that the order survives failed posts.
 * When an item does not fit, the oldest items are evicted until it does
 * (an item larger than the whole queue evicts everything, itself included).
 * Evicted items are handed back as a list (linked by next) for the caller
 * to count and free. Not thread-safe: the scraper's loop owns it.
 */
struct pd_queue {
	struct pd_queue_item *head, *tail;
	size_t n, bytes, max_bytes;
	uint64_t next_seq;
	uint64_t dropped, dropped_bytes; /* evicted so far */
};
void pd_queue_init(struct pd_queue *q, size_t max_bytes);
/* Takes ownership of it (cost is computed here). Returns the evicted items. */
struct pd_queue_item *pd_queue_push(struct pd_queue *q, struct pd_queue_item *it);
/* Oldest item, removed from the queue (NULL if empty). */
struct pd_queue_item *pd_queue_pop(struct pd_queue *q);
/* Put a popped item back at its place; returns the evicted items. */
struct pd_queue_item *pd_queue_requeue(struct pd_queue *q, struct pd_queue_item *it);
void pd_queue_item_free(struct pd_queue_item *it);
/* Free every item still queued. */
void pd_queue_clear(struct pd_queue *q);

/* ---- results ---------------------------------------------------------------------------------- */

/* What became of one scrape of one (target, type); label "result" in the metrics. */
enum pd_scrape_result {
	PD_SR_NONE,       /* not scraped (yet) */
	PD_SR_OK,         /* stored (or queued for the collector) */
	PD_SR_BASE,       /* first snapshot of a cumulative type: kept as the delta base, nothing stored */
	PD_SR_RESET,      /* counters went down (restart): the snapshot stored as it is */
	PD_SR_UNCHANGED,  /* cumulative, nothing happened since the last scrape: nothing stored */
	PD_SR_EMPTY,      /* a valid profile without samples: nothing stored */
	PD_SR_CPU_IN_USE, /* someone else is taking a CPU profile: retried later, the target is up */
	PD_SR_CONNECT,    /* connection refused, unreachable, DNS: the target is down */
	PD_SR_TIMEOUT,    /* no complete answer within the timeout: the target is down */
	PD_SR_NETWORK,    /* other transport errors: the target is down */
	PD_SR_HTTP_4XX,   /* e.g. 404: the endpoint is not there */
	PD_SR_HTTP_5XX,   /* the target is down */
	PD_SR_NOT_PPROF,  /* HTML, text or garbage */
	PD_SR_WRONG_KIND, /* a valid profile of another kind */
	PD_SR_TOO_LARGE,  /* body over the cap */
	PD_SR_INTERNAL,   /* our side: out of memory, state dir, store */
	PD_SR_N
};
const char *pd_scrape_result_name(int r);
/* OK, BASE, RESET, UNCHANGED, EMPTY: the scrape did what it should. */
bool pd_scrape_result_ok(int r);
/* CONNECT, TIMEOUT, NETWORK, HTTP_5XX: counts as the target being down. */
bool pd_scrape_result_down(int r);

/*
 * The delta step of a cumulative type. prev NULL (first scrape): BASE.
 * Counters went down (restart) or the sample types changed: RESET (cur is
 * what happened since the restart: store it as it is). Otherwise *out =
 * cur - prev (as go tool pprof -base prev cur) and OK, or UNCHANGED when
 * nothing is left. *out is NULL unless OK; the caller frees it.
 */
int pd_scrape_delta_step(const struct pd_profile *cur, const struct pd_profile *prev, int *result,
			 struct pd_profile **out, struct pd_err *err) PD_WUR;

/* ---- the in-process sink ------------------------------------------------------------------ */

struct pd_scrape_item {
	const char *service, *type;
	const struct pd_kv *labels;
	size_t nlabels;
	int64_t created_ns; /* scrape time */
	const uint8_t *data; /* gzip'd or raw pprof */
	size_t len;
	/* refuse (PD_EEXPIRED) a profile created before this, as POST does
	 * under --retention; 0 = no bound */
	int64_t min_created_ns;
};
/* Store one scraped profile directly (for `profd serve --scrape`). */
int pd_scrape_store_ingest(struct pd_store *st, const struct pd_scrape_item *it, struct pd_profile_meta *out,
			   struct pd_err *err) PD_WUR;

/* ---- the scraper -------------------------------------------------------------------------- */

#define PD_SCRAPE_COLLECTOR      "http://localhost:10100"
#define PD_SCRAPE_INTERVAL_NS    60000000000LL /* --interval 60s */
#define PD_SCRAPE_CPU_NS         10000000000LL /* --cpu-duration 10s */
#define PD_SCRAPE_TIMEOUT_NS     10000000000LL /* --timeout 10s (cpu: duration + timeout) */
#define PD_SCRAPE_FLUSH_NS       10000000000LL /* --flush-timeout 10s */
#define PD_SCRAPE_POST_TIMEOUT_NS 30000000000LL /* one POST to the collector */
#define PD_SCRAPE_CONCURRENCY    64            /* fetches in flight */
#define PD_SCRAPE_POSTS          4             /* posts in flight */
#define PD_SCRAPE_QUEUE_BYTES    (64u << 20)   /* --queue-size */
#define PD_SCRAPE_MAX_BODY       (64u << 20)   /* --max-body: one fetched profile */
#define PD_SCRAPE_CPU_TRIES      3             /* --once: cpu attempts when "already in use" */

struct pd_scrape_config {
	const char *collector;    /* base URL of the collector (API v0) */
	struct pd_store *store;   /* if set: store directly instead of posting (collector unused) */
	int64_t retention_ns;     /* with store: the collector's --retention (0 = forever); profiles
				   * older than the window are refused like POST refuses them */
	unsigned types;           /* default types of targets that do not say */
	int64_t interval_ns, cpu_ns, timeout_ns, flush_ns;
	unsigned concurrency;
	size_t queue_bytes, max_body;
	const char *state_dir;    /* last snapshot of each cumulative (target, type), between runs */
	const char *save_raw_dir; /* keep every fetched body as it came */
	bool once;                /* one pass, then flush and return */
	FILE *log;                /* ts=... level=... lines; NULL = none */
	bool quiet;               /* only warnings and errors */
	const char *user_agent;
};
void pd_scrape_config_default(struct pd_scrape_config *c);

struct pd_scraper;
/* Checks the config (dirs are created), starts nothing yet. */
int pd_scraper_new(const struct pd_scrape_config *c, struct pd_scraper **out, struct pd_err *err) PD_WUR;
/* Replace the target list (copied). Thread-safe: a discovery source may call
 * it any time; the loop applies it before its next scheduling step. */
int pd_scraper_set_targets(struct pd_scraper *s, const struct pd_scrape_targets *l, struct pd_err *err) PD_WUR;
/* Run the loop in this thread. once: every target once, then deliver (up to
 * flush_ns) and return. Otherwise until pd_scraper_stop, then deliver what
 * is queued for up to flush_ns. Returns 0, or an error that stopped it. */
int pd_scraper_run(struct pd_scraper *s, struct pd_err *err) PD_WUR;
/* Ask the loop to stop (any thread, not from a signal handler). */
void pd_scraper_stop(struct pd_scraper *s);
void pd_scraper_free(struct pd_scraper *s);

/* The per-target table (--once prints it; /targets serves it): target,
 * service, one column per type (ok or the error reason), bytes, duration;
 * then one line per error. Returns the number of targets with a failure
 * (a scrape error or a profile that was not delivered). */
size_t pd_scraper_summary(struct pd_scraper *s, struct pd_buf *out);
/* Prometheus text exposition of the scraper's counters (then the extra
 * series of pd_scraper_set_metrics_hook). */
int pd_scraper_metrics(struct pd_scraper *s, struct pd_buf *out) PD_WUR;
/* A discovery source's own series, appended to /metrics (one hook; NULL
 * removes it). Set it before /metrics is served, remove it (or stop the
 * server) before ctx goes away. */
typedef int (*pd_scrape_metrics_fn)(void *ctx, struct pd_buf *out);
void pd_scraper_set_metrics_hook(struct pd_scraper *s, pd_scrape_metrics_fn fn, void *ctx);

/* Totals, for tests and the command's last log line. */
struct pd_scrape_totals {
	uint64_t scrapes[PD_SR_N];
	uint64_t fetched_bytes, enqueued, posts_ok, posts_failed, posts_refused, queue_dropped;
	uint64_t stored, store_failed;
	size_t queue_len, queue_bytes;
};
void pd_scraper_totals(struct pd_scraper *s, struct pd_scrape_totals *t);

/* ---- /metrics, /healthz, /targets ---------------------------------------------------------- */

struct pd_scrape_http;
/* Listen on addr ("host:port", ":port", port 0 = any) in a thread of its own. */
int pd_scrape_http_start(struct pd_scraper *s, const char *addr, struct pd_scrape_http **out,
			 struct pd_err *err) PD_WUR;
unsigned pd_scrape_http_port(const struct pd_scrape_http *h);
void pd_scrape_http_stop(struct pd_scrape_http *h);

/* ---- Kubernetes discovery (kube.c) ------------------------------------------------------------ */

/*
 * Zero-config discovery of pods through the Kubernetes API (lib/kube):
 * a pod is a target when it is annotated profefe.com/enable: "true", is in
 * phase Running, has a pod IP and is not being deleted. Annotations:
 *   profefe.com/port     pprof port (default 6060): a number, or the name of
 *                        one of the pod's container ports
 *   profefe.com/path     path of the pprof handlers (default /debug/pprof)
 *   profefe.com/service  service (default: the owning workload's name,
 *                        pd_kube_pod_workload: Deployment, StatefulSet, ...)
 * Target: key namespace/pod/uid (a pod recreated with the same name is a new
 * target), name namespace/pod, URL http://PODIP:PORT/PATH, labels namespace,
 * pod, container (the one whose ports hold the port, else the first), node,
 * then the kept pod labels, then the extra labels.
 */
struct pd_kube_client;
struct pd_kube_pod;

#define PD_SCRAPE_KUBE_PORT       6060
#define PD_SCRAPE_KUBE_PATH       "/debug/pprof"
#define PD_SCRAPE_KUBE_POD_LABELS "app,version,app.kubernetes.io/name,app.kubernetes.io/version"
#define PD_SCRAPE_KUBE_WATCH_S    300   /* one watch request, then resumed */
#define PD_SCRAPE_KUBE_BACKOFF_MAX_NS 30000000000LL /* API errors: 1 s, 2 s, ... 30 s */

struct pd_scrape_kube_opts {
	const char *namespace;          /* NULL or "" = all namespaces */
	const char *selector;           /* label selector (the server applies it); NULL = none */
	const char *const *pod_labels;  /* pod labels copied to the profiles when present */
	size_t npod_labels;
	const struct pd_kv *labels;     /* extra labels on every target (-L); built-ins win */
	size_t nlabels;
	FILE *log;                      /* ts=... level=... component=kube lines; NULL = none */
	bool quiet;                     /* warnings and errors only */
	int watch_timeout_s;            /* 0 = PD_SCRAPE_KUBE_WATCH_S */
};

/* Why a pod is not a target. */
enum pd_scrape_kube_skip {
	PD_KS_TARGET = 0,      /* it is one */
	PD_KS_NOT_ANNOTATED,   /* no profefe.com/enable: "true" */
	PD_KS_DELETING,        /* deletionTimestamp set */
	PD_KS_NOT_RUNNING,     /* phase other than Running */
	PD_KS_NO_IP,           /* no status.podIP yet */
	PD_KS_BAD_ANNOTATION,  /* port or path unusable (why says which) */
};

/*
 * Decide whether pod p is a target; if it is, add it to l (with its name
 * set). *skip gets the verdict, why (may be NULL) a one-line reason for a
 * pod that is annotated but skipped. Errors: PD_ENOMEM, PD_EINVAL (the key
 * is already in l).
 */
int pd_scrape_kube_target(const struct pd_kube_pod *p, const struct pd_scrape_kube_opts *o,
			  struct pd_scrape_targets *l, int *skip, char *why, size_t whycap, struct pd_err *err) PD_WUR;

/*
 * The discovery source: holds the selected pods and hands the scraper the
 * static targets (copied) followed by them, sorted by namespace/pod, on
 * every change. Registers its series on the scraper's /metrics
 * (profd_scrape_kube_*). The client and the scraper are borrowed.
 */
struct pd_scrape_kube;
int pd_scrape_kube_new(struct pd_scraper *s, struct pd_kube_client *c, const struct pd_scrape_kube_opts *o,
		       const struct pd_scrape_targets *statics, struct pd_scrape_kube **out, struct pd_err *err) PD_WUR;
/* One paged list (limit 500) -> the scraper's targets (--once). *ntargets
 * (may be NULL): pods selected. An API error is returned (and counted). */
int pd_scrape_kube_sync(struct pd_scrape_kube *d, size_t *ntargets, struct pd_err *err) PD_WUR;
/*
 * Continuous discovery in a thread of its own: list, then watch from the
 * list's resourceVersion (bookmarks on; resumed from the last version seen
 * when a watch ends); 410 Gone = list again; other errors: back off 1 s ..
 * 30 s and go on, the scraper keeping the last known targets. Every change
 * of the selection is handed to the scraper at once.
 */
int pd_scrape_kube_start(struct pd_scrape_kube *d, struct pd_err *err) PD_WUR;
/* Ask the thread to stop (returns at once; pd_scrape_kube_free joins it,
 * within about a second, or the client's timeout while a list is running). */
void pd_scrape_kube_stop(struct pd_scrape_kube *d);
/* Stops, joins, removes the metrics hook, frees. */
void pd_scrape_kube_free(struct pd_scrape_kube *d);
/* profd_scrape_kube_* series (the metrics hook). */
int pd_scrape_kube_metrics(void *d, struct pd_buf *out);
/* Error reason names (label "reason" of profd_scrape_kube_errors_total) of
 * a lib/kube error code (with its message, to tell 4xx from 5xx). */
const char *pd_scrape_kube_reason(int code, const char *msg);

#endif
