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
 *     whose key stays and drops it for targets that left; a target may carry
 *     its own types and schedule (interval, CPU duration, timeout);
 *   - the YAML config file (scrape_config.c): groups of static targets and
 *     kubernetes entries with their own settings, Kubernetes label selectors;
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

#include <stdatomic.h>
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
/* Is a valid profile of this kind (pd_profile_kind) what type t asks for?
 * Its own kind; for allocs also heap (Go's legacy text, ?debug=1, is one
 * format for both and reads as heap). */
bool pd_scrape_kind_ok(int t, const char *kind);
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
	/* the target's own schedule (a config file group's); 0 = the scraper's
	 * --interval, --cpu-duration, --timeout */
	int64_t interval_ns, cpu_ns, timeout_ns;
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
/* Set the schedule of target i (0 = the scraper's default): interval at
 * least 1s, cpu whole seconds (at least 1s), timeout at least 1ms; else
 * PD_EUSAGE. */
int pd_scrape_targets_set_sched(struct pd_scrape_targets *l, size_t i, int64_t interval_ns, int64_t cpu_ns,
				int64_t timeout_ns, struct pd_err *err) PD_WUR;
/* Copy every field of t (name and schedule too) to the end of l; a key
 * already in l is PD_EINVAL. */
int pd_scrape_targets_copy(struct pd_scrape_targets *l, const struct pd_scrape_target *t, struct pd_err *err) PD_WUR;
/* The same without looking for t's key in l (that look is O(n), a list
 * built by copies O(n^2): seconds for 20000 pods): for lists whose keys are
 * unique by construction, or checked once by pd_scrape_targets_check_unique. */
int pd_scrape_targets_append(struct pd_scrape_targets *l, const struct pd_scrape_target *t, struct pd_err *err) PD_WUR;
/* PD_EINVAL ("target \"K\" given twice") if two targets of l share a key; O(n). */
int pd_scrape_targets_check_unique(const struct pd_scrape_targets *l, struct pd_err *err) PD_WUR;

/*
 * A user's target to a base URL (malloc'd into *out): "host:port" gets
 * "http://"; a URL without a path gets "/debug/pprof"; a trailing '/' is
 * dropped. Only http and https. A query is kept (http://h:6060/debug/pprof?debug=1:
 * sent with every type's request) but may not hold seconds= (the scraper's);
 * no fragment. PD_EUSAGE with a reason otherwise.
 */
int pd_scrape_normalize_url(const char *in, char **out, struct pd_err *err) PD_WUR;
/* The "host:port" part of a URL into buf ("" if none). */
const char *pd_scrape_url_hostport(const char *url, char *buf, size_t n);
/* BASE/profile?seconds=N for cpu, BASE/<type> for the others (malloc'd);
 * a query of BASE follows: BASE?debug=1 -> BASE/heap?debug=1,
 * BASE/profile?seconds=N&debug=1. */
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

/* ---- the YAML configuration file (scrape_config.c) ----------------------------------------------- */

/*
 * `--config FILE` in YAML, Prometheus scrape_configs in spirit (the schema:
 * docs/scraping.md "Configuration file"; examples/scrape.yaml):
 *   global:          types, interval, cpu_duration, timeout, labels, label_keep
 *   scrape_configs:  groups of static targets (service, path, the same keys,
 *                    static_configs: [{targets, labels}]), or kubernetes
 *                    entries (kubernetes: {namespaces | all_namespaces,
 *                    selector}, the same keys) that choose and tune pods.
 * Precedence: built-in defaults < global: < command-line flags < a group's
 * own keys. Every key is known (typos are errors); errors are
 * "FILE:LINE:COLUMN: PATH: what" (PATH like scrape_configs[1].types).
 */
#define PD_SCRAPE_CFG_MAX_BYTES   (16u << 20)
#define PD_SCRAPE_CFG_MAX_TARGETS 10000 /* static targets in one file */
#define PD_SCRAPE_CFG_MAX_RULES   1000  /* kubernetes entries */
#define PD_SCRAPE_MAX_LABELS      64    /* labels of one profile (the collector's cap) */

/* What a group resolves to (every field set, labels merged from global:,
 * -L and the group, later ones winning). Owned by its struct pd_scrape_file. */
struct pd_scrape_settings {
	unsigned types;
	int64_t interval_ns, cpu_ns, timeout_ns;
	struct pd_kv *labels; /* added to every profile, in this order */
	size_t nlabels;
	char **keep;          /* label_keep: only labels with these keys are sent */
	size_t nkeep;
	bool has_keep;        /* false: every label is sent */
	char *query;          /* a group's params ("debug=1"): sent with every request; NULL = none */
};

/* A parsed Kubernetes label selector (app=web,tier!=db,env in (a,b),!canary). */
struct pd_scrape_selector;
/* The value of a label, NULL if absent. */
typedef const char *(*pd_scrape_label_fn)(void *ctx, const char *key);

/* A kubernetes entry of scrape_configs: which pods (all must hold), and their settings. */
struct pd_scrape_kube_rule {
	char *where;        /* "FILE:LINE:COLUMN" of the entry */
	char **namespaces;  /* none: any namespace */
	size_t nnamespaces;
	bool all_namespaces;
	char *selector_text;
	struct pd_scrape_selector *selector; /* NULL: any pod */
	struct pd_scrape_settings set;
};

/* What the command line says: the file's defaults and which of them are flags
 * (a flag wins over global:, a group's own key wins over a flag). */
enum { PD_SCF_TYPES = 1, PD_SCF_INTERVAL = 2, PD_SCF_CPU = 4, PD_SCF_TIMEOUT = 8 };
struct pd_scrape_cfg_flags {
	const char *service;          /* --service before any --target; NULL: a group must name one */
	const struct pd_kv *labels;   /* -L before any --target */
	size_t nlabels;
	unsigned types;               /* the flag's value, else the built-in default */
	int64_t interval_ns, cpu_ns, timeout_ns;
	unsigned given;               /* PD_SCF_*: given as flags */
	bool once;                    /* --once: cpu_duration need not be shorter than interval */
};

struct pd_scrape_file {
	struct pd_scrape_settings global; /* resolved: built-in < global: < flags */
	struct pd_scrape_targets targets; /* static targets, types and schedule set on each */
	struct pd_scrape_kube_rule *rules; /* kubernetes entries, in file order */
	size_t nrules;
	/* the scope the kubernetes entries ask for (used when -n/-A do not say) */
	bool kube_all;        /* an entry with all_namespaces: true, or namespaces of more than one */
	char *kube_namespace; /* the one namespace the entries name; NULL: none or kube_all */
};

/* Is the file YAML? Name *.yaml / *.yml, or a first line that is not a
 * comment and looks like YAML ("key:" then a blank or the end of the line,
 * "---", "%", "{", "- ", a quote) rather than a target (URL or host:port). */
bool pd_scrape_config_is_yaml(const char *name, const char *text, size_t len);
/* A Kubernetes namespace name (RFC 1123 label: [a-z0-9-], at most 63, no
 * '-' at either end)? */
bool pd_scrape_dns_label(const char *s);
/* Parse a YAML config (name: for messages). *out is zeroed first; free it
 * with pd_scrape_file_free (also after an error). Errors: PD_EUSAGE (bad
 * config), PD_ELIMIT (over a cap), PD_ENOMEM. */
int pd_scrape_parse_yaml(const char *name, const void *text, size_t len, const struct pd_scrape_cfg_flags *fl,
			 struct pd_scrape_file *out, struct pd_err *err) PD_WUR;
void pd_scrape_file_free(struct pd_scrape_file *f);

/* Parse a selector ("" or NULL: matches everything); PD_EUSAGE with the
 * position otherwise. Free with pd_scrape_selector_free. */
int pd_scrape_selector_parse(const char *s, struct pd_scrape_selector **out, struct pd_err *err) PD_WUR;
bool pd_scrape_selector_match(const struct pd_scrape_selector *sel, pd_scrape_label_fn get, void *ctx);
void pd_scrape_selector_free(struct pd_scrape_selector *sel);
/* The first rule whose namespaces and selector match a pod, or NULL. */
const struct pd_scrape_kube_rule *pd_scrape_kube_rule_match(const struct pd_scrape_kube_rule *rules, size_t n,
							    const char *ns, pd_scrape_label_fn get, void *ctx);
/* Keep the labels whose key is in keep (in place, order kept); returns how many are left. */
size_t pd_scrape_labels_keep(struct pd_kv *v, size_t n, char *const *keep, size_t nkeep);

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

/* ---- what a target answered (body.c) ------------------------------------------------------- */

/* A target's bytes are never quoted in a message (issue 12): they are
 * described (pd_pprof_describe_body: an HTML page (93 bytes), JSON, text,
 * binary data), and decoded with pd_pprof_limits.no_quotes. */
/* A failed decode of a body (e: its error, from a no_quotes decode) as
 * "not a pprof profile (got CTYPE): the body is an HTML page (93 bytes) — ..." */
void pd_scrape_not_profile(char *out, size_t cap, const char *ctype, const uint8_t *body, size_t n,
			   const struct pd_err *e);
/* A non-200 answer: "HTTP 404 from URL, with text (19 bytes)". */
void pd_scrape_http_error(char *out, size_t cap, long status, const char *url, const uint8_t *body, size_t n);
/* A valid profile of another kind than type asks for: "got a heap profile
 * [alloc_objects/count ...] period space/bytes, not a cpu profile" (its
 * sample types, printable). */
void pd_scrape_wrong_kind(char *out, size_t cap, const struct pd_profile *p, int type);
/* The first line of a collector's answer (not a target's), printable, at
 * most 200 bytes. */
void pd_scrape_first_line(const uint8_t *p, size_t n, char *out, size_t cap);

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
#define PD_SCRAPE_CONCURRENCY    64            /* --concurrency: fetches in flight, cpu aside */
#define PD_SCRAPE_POSTS          4             /* posts in flight */
#define PD_SCRAPE_QUEUE_BYTES    (64u << 20)   /* --queue-size */
#define PD_SCRAPE_MAX_BODY       (64u << 20)   /* --max-body: one fetched profile */
#define PD_SCRAPE_MAX_MEMORY     ((size_t)64 << 20) /* decoding one fetched profile (pd_pprof_limits.max_memory) */
#define PD_SCRAPE_CPU_TRIES      3             /* --once: cpu attempts when "already in use" */

struct pd_scrape_config {
	const char *collector;    /* base URL of the collector (API v0) */
	const char *token;        /* sent as Authorization: Bearer to the collector; NULL = none */
	const char *cacert;       /* PEM CA of an https:// collector; NULL = the system's */
	bool insecure;            /* do not verify the collector's certificate */
	const char *target_ca;    /* PEM CA bundle that verifies https:// targets; NULL = the system's */
	bool target_insecure;     /* do not verify targets' certificates (tests only) */
	struct pd_store *store;   /* if set: store directly instead of posting (collector unused) */
	int64_t retention_ns;     /* with store: the collector's --retention (0 = forever); profiles
				   * older than the window are refused like POST refuses them */
	unsigned types;           /* default types of targets that do not say */
	int64_t interval_ns, cpu_ns, timeout_ns, flush_ns;
	unsigned concurrency;      /* fetches of the instant types (all but cpu) in flight */
	unsigned cpu_concurrency;  /* CPU profiles in flight (each holds its slot for the cpu
				    * duration); 0 = pd_scrape_cpu_slots() of the targets */
	size_t queue_bytes, max_body;
	const char *state_dir;    /* last snapshot of each cumulative (target, type), between runs */
	const char *save_raw_dir; /* keep every fetched body as it came */
	bool once;                /* one pass, then flush and return */
	FILE *log;                /* ts=... level=... lines; NULL = none */
	bool quiet;               /* only warnings and errors */
	const char *user_agent;
};
void pd_scrape_config_default(struct pd_scrape_config *c);
/*
 * The default number of CPU profiles in flight: enough for every target's
 * CPU profile to start on time. load = the sum over the targets that scrape
 * cpu of cpu duration / interval (the CPU profiles running at any moment on
 * average; 1,000 targets at 60 s / 10 s: 166.7); slots = ceil(1.25 x load) + 4
 * (the phases are a hash: the busiest moments are above the average), and
 * at least min (the scraper passes --concurrency). 1,000 targets: 213.
 */
unsigned pd_scrape_cpu_slots(double load, unsigned min);

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
	/* rounds of a (target, type) that did not happen: its job was still
	 * waiting for a slot (queued) or still running at its next due time */
	uint64_t missed_queued, missed_running;
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
 * then the kept pod labels (with a label_keep: the pod labels it names),
 * then the extra labels; then label_keep drops the others.
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
	/* the config file's kubernetes entries (borrowed: they must outlive the
	 * source). With any, a pod is a target only if one matches it (the first
	 * match gives its types, schedule, labels and label_keep; its labels
	 * replace the labels above); without, every annotated pod is, with the
	 * scraper's defaults, the labels above and label_keep below. */
	const struct pd_scrape_kube_rule *rules;
	size_t nrules;
	char *const *label_keep;        /* borrowed; has_keep false = keep every label */
	size_t nlabel_keep;
	bool has_keep;
};

/* Why a pod is not a target. */
enum pd_scrape_kube_skip {
	PD_KS_TARGET = 0,      /* it is one */
	PD_KS_NOT_ANNOTATED,   /* no profefe.com/enable: "true" */
	PD_KS_DELETING,        /* deletionTimestamp set */
	PD_KS_NOT_RUNNING,     /* phase other than Running */
	PD_KS_NO_IP,           /* no status.podIP yet */
	PD_KS_BAD_ANNOTATION,  /* port or path unusable (why says which) */
	PD_KS_NO_RULE,         /* matches none of the config file's kubernetes entries */
	PD_KS_INVALID,         /* the API's pod could not be read (pod->invalid; why says it) */
};

/*
 * Decide whether pod p is a target; if it is, add it to l (with its name
 * set). *skip gets the verdict, why (may be NULL) a one-line reason for a
 * pod that is annotated but skipped. Errors: PD_ENOMEM, PD_EINVAL (the key
 * is already in l).
 */
int pd_scrape_kube_target(const struct pd_kube_pod *p, const struct pd_scrape_kube_opts *o,
			  struct pd_scrape_targets *l, int *skip, char *why, size_t whycap, struct pd_err *err) PD_WUR;

/* A profefe.com/enable value other than "true" that surely meant it ("True",
 * "yes", "on", "1"...): not honoured (kube-profefe's rule), but said. */
bool pd_scrape_kube_enable_meant(const char *v);
/* The pieces of a pod's target, shared with `capture`:
 * port: spec is a port number or the name of one of the pod's container
 * ports -> the port, 0 if it is neither; *container (may be NULL) gets the
 * container that declares the port, else the first one (NULL: none). */
long pd_scrape_kube_port(const struct pd_kube_pod *p, const char *spec, const char **container);
/* A profefe.com/path value usable as the pprof base path: absolute, no
 * query or fragment, no blanks or control bytes, at most 1024 bytes. */
bool pd_scrape_kube_path_ok(const char *path);
/* The pod's service: profefe.com/service, else the owning workload's name
 * (pd_kube_pod_workload), else the pod's name; written to buf, returned. */
const char *pd_scrape_kube_service(const struct pd_kube_pod *p, char *buf, size_t cap);

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

/* ---- capture: profiles from pods now, through the API server (capture.c) ------------------ */

/*
 * `profd capture` (kubectl profd capture): the profiles of the chosen pods,
 * once, now, fetched through the API server's pod proxy
 * (/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH/TYPE), so that
 * kubectl's credentials are all it takes. Every (pod, type) runs at once on
 * a thread of its own (at most `threads` at a time; CPU profiles first, as
 * they take --duration). Each body must be a pprof of the requested kind;
 * it is then written to a file (atomically, never over an existing one) or
 * posted to a collector (API v0, labelled as the scraper labels pods).
 *
 * Use: pd_capture_new, pd_capture_select (the pods: names, TYPE/NAME,
 * -l), pd_capture_run, then pd_capture_view for what happened. Problems are
 * kept as one line each, for the user: an argument that found nothing, a
 * pod that cannot be captured, a (pod, type) that failed.
 */
#define PD_CAPTURE_CPU_NS     30000000000LL /* --duration 30s */
#define PD_CAPTURE_TIMEOUT_NS 30000000000LL /* --timeout 30s; a CPU profile gets --duration more */
#define PD_CAPTURE_THREADS    64            /* requests in flight */
#define PD_CAPTURE_POST_TIMEOUT_MS 30000L  /* one POST to the collector */

enum pd_capture_state {
	PD_CAP_WAITING,  /* job: not started */
	PD_CAP_RUNNING,  /* job: in flight; pod: captured (see its jobs) */
	PD_CAP_OK,       /* job: written or stored (msg may hold a note) */
	PD_CAP_FAILED,   /* job or pod: msg says what failed and what to try */
	PD_CAP_SKIPPED,  /* pod: chosen by a selector but not Running (msg says why) */
};

struct pd_capture;
struct pd_capture_job;
/* Called with the capture's lock held (do not call back into it): j is a
 * job that started or ended, NULL about once a second while jobs run. */
typedef void (*pd_capture_progress_fn)(void *ctx, const struct pd_capture *c, const struct pd_capture_job *j);

struct pd_capture_opts {
	struct pd_kube_client *client; /* borrowed */
	const char *namespace;  /* of pod and workload names, and of the selector; NULL or "" with a
				 * selector only: all namespaces */
	unsigned types;         /* 1 << PD_ST_*; 0 = all */
	int64_t cpu_ns;         /* CPU profile length, whole seconds; 0 = PD_CAPTURE_CPU_NS */
	int64_t timeout_ns;     /* per request (cpu: + cpu_ns); 0 = PD_CAPTURE_TIMEOUT_NS */
	const char *port;       /* --port: number or container port name, when the pod has no
				 * profefe.com/port; NULL = none (then profefe.com/enable: "true"
				 * means 6060, else the pod cannot be captured) */
	const char *path;       /* --path, when the pod has no profefe.com/path; NULL = /debug/pprof */
	const char *service;    /* --service: overrides profefe.com/service and the workload name */
	const char *output_dir; /* files go here (NULL = "."); with a collector, only the profiles
				 * that could not be posted */
	const char *collector;  /* base URL of a collector (API v0); NULL = write files */
	const char *token;      /* sent as Authorization: Bearer to the collector; NULL = none */
	size_t max_body;        /* one profile; 0 = PD_SCRAPE_MAX_BODY */
	unsigned threads;       /* 0 = PD_CAPTURE_THREADS */
	int64_t now_ns;         /* the time in the file names (wall clock); 0 = now */
	const atomic_int *stop; /* set: requests in flight end, waiting ones do not start */
	pd_capture_progress_fn progress;
	void *ctx;
};

/* One chosen pod. Strings live as long as the capture. */
struct pd_capture_pod {
	const struct pd_kube_pod *pod;
	const char *name;        /* namespace/name */
	const char *via;         /* the argument that chose it: "web-1", "deployment/web", "-l app=web" */
	const char *service, *container, *path; /* path without a trailing '/' */
	unsigned port;
	int state;               /* PD_CAP_RUNNING (captured), PD_CAP_SKIPPED, PD_CAP_FAILED */
	const char *msg;         /* skipped, failed: why ("" otherwise) */
	size_t first_job, njobs; /* its jobs: one per type, in type order */
};

struct pd_capture_job {
	size_t pod;              /* index of its pod */
	int type;                /* PD_ST_* */
	int state;               /* enum pd_capture_state */
	double t0, t1;           /* pd_now() at start and end */
	size_t bytes;            /* the profile as received */
	bool empty;              /* a valid profile without samples */
	char *where;             /* the file written, or the stored profile's URL; NULL if neither */
	char msg[640];           /* failed: what failed and what to try; ok: a note, or "" */
};

struct pd_capture_view {
	const struct pd_capture_pod *pods;
	size_t npods;
	const struct pd_capture_job *jobs;
	size_t njobs;
	const char *const *problems; /* arguments that found no pod, one line each */
	size_t nproblems;
};

/* o is copied (its strings are borrowed: they must outlive the capture). */
int pd_capture_new(const struct pd_capture_opts *o, struct pd_capture **out, struct pd_err *err) PD_WUR;
/*
 * Choose the pods: each argument is a pod name, TYPE/NAME (TYPE as kubectl
 * names it: pod, deployment/deploy, statefulset/sts, daemonset/ds,
 * replicaset/rs; a workload stands for the pods its spec.selector matches)
 * or a bare name that is not a pod, then tried as a deployment, a
 * statefulset and a daemonset; selector (may be NULL): the pods it matches.
 * A pod chosen twice counts once. Then every pod is planned: not Running
 * (chosen by name: failed; by a selector: skipped), port, path, service,
 * one job per type. An argument that finds nothing is a problem line, not
 * an error: errors are PD_ENOMEM and PD_EUSAGE (names without a namespace).
 */
int pd_capture_select(struct pd_capture *c, const char *const *args, size_t nargs, const char *selector,
		      struct pd_err *err) PD_WUR;
/* Run every job (blocks until all ended). Errors: PD_ENOMEM, or no thread. */
int pd_capture_run(struct pd_capture *c, struct pd_err *err) PD_WUR;
/* What was chosen and what happened (valid until the next call on c;
 * take the lock by reading it from the progress callback while running). */
void pd_capture_view(const struct pd_capture *c, struct pd_capture_view *v);
void pd_capture_free(struct pd_capture *c);

/* Is a collector there? GET COLLECTOR/api/0/version within timeout_ms:
 * 0, or PD_EIO with what failed. */
int pd_capture_ping_collector(const char *collector, const char *token, long timeout_ms, struct pd_err *err) PD_WUR;
/* "<service>-<pod>-<type>-<time>.pb.gz" (time: UTC 20060102T150405Z; the
 * service's characters outside [A-Za-z0-9._-] become '_') into buf. */
const char *pd_capture_file_name(char *buf, size_t cap, const char *service, const char *pod, int type,
				 int64_t time_ns);

#endif
