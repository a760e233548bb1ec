/*
 * scraper.c — the scrape loop: one thread, one libcurl multi handle for the
 * fetches and the posts to the collector (at most PD_SCRAPE_POSTS), so a
 * slow target or a dead collector never blocks anything else. The loop
 * waits in epoll_wait on curl's sockets (curl_multi_socket_action), so its
 * cost follows what happens, not the requests in flight (1,000 targets: ~170
 * CPU profiles in flight at any time).
 *
 * State: one struct tstate per target (kept across target-list updates while
 * its key stays), with one struct job per (target, type): its due time
 * (monotonic ns; phase from the key's hash + k * interval), retry count,
 * delta base (the last raw snapshot of a cumulative type, also written to
 * --state-dir), and its last result. A tstate that leaves the list is
 * retired and freed when nothing refers to it (running fetches, queued
 * profiles: refs).
 *
 * A job is in exactly one place: the timer heap (waiting for its due time),
 * a ready FIFO (due, waiting for a slot: cpu and the other types have limits
 * of their own), parked on its target (waiting for the target's running
 * instant fetch: they share its connection), running, or nowhere (not
 * scheduled). A round that comes while the job is still queued or running
 * is missed, and counted.
 *
 * Flow of one fetch: body into a capped buffer -> status checks (Go's "cpu
 * profiling already in use" is retried after the cpu duration) -> decode
 * (every body is validated) -> kind check -> delta step for allocs, block,
 * mutex -> queue (collector) or store (in-process sink). Posts: oldest
 * first; 200 = delivered; 4xx but 408/429 = refused for good (logged,
 * counted); anything else = requeued at its place, collector backoff
 * 1 s .. 30 s.
 *
 * Threads: the loop owns everything; s->mu guards the target array and
 * the health fields that /metrics, /targets and the summary read from
 * other threads, and the pending target list a discovery source sets.
 */
#define _GNU_SOURCE
#include "scrape.h"

#include <ctype.h>
#include "../util/pdcurl.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { D_NONE, D_PENDING, D_OK, D_REFUSED, D_DROPPED, D_UNSENT, D_FAILED };

struct tstate;

#define EASY_POOL 128 /* idle easy handles kept */

struct job {
	struct tstate *ts;
	int type;
	int64_t due; /* monotonic ns; INT64_MAX = not scheduled */
	int64_t next_regular;
	unsigned fails, cpu_busy;
	bool ready, running;
	size_t hpos;       /* 1-based place in s->heap (waiting for its due time); 0 = not there */
	struct job *rnext; /* ready FIFO */
	/* delta base of a cumulative type: the last raw snapshot */
	uint8_t *prev;
	size_t prev_len;
	bool prev_loaded;
	int last_logged;
	/* the last result; written under s->mu */
	int result, delivery;
	size_t bytes;
	double secs;
	bool as_is; /* cumulative type stored as it is (--once without --state-dir) */
	char msg[400];
	char dmsg[240];
};

struct tstate {
	struct pd_scrape_target t;
	char *stem; /* file-name-safe key: state and raw files */
	int64_t phase;
	unsigned types;
	int refs;
	bool retired, base_logged;
	struct job jobs[PD_ST_N];
	/* Its instant types (all but cpu) go one at a time, so they share one
	 * keep-alive connection: the others wait parked (still ready) while one
	 * runs. After the target looked down they go in parallel (parallel), so a
	 * hanging target costs two --timeout, not six. */
	struct job *phead, *ptail; /* parked */
	unsigned inst_running, inst_ready; /* instant fetches running; queued or parked */
	bool parallel;
	/* health; under s->mu */
	int up; /* -1 unknown */
	int last_reason;
	char last_error[400];
	double last_duration;
	uint64_t bytes, scrapes_ok, scrapes_failed;
	int64_t round_start;
	unsigned round_pending;
	struct tstate *rnext; /* retired list */
};

struct xfer {
	struct xfer *prev, *next; /* active transfers */
	bool post;
	struct job *job;
	struct pd_queue_item *item;
	CURL *h;
	struct curl_slist *hdrs;
	struct pd_buf body;
	bool too_large;
	int64_t t0, t0_real;
	char *url;
	char errbuf[CURL_ERROR_SIZE];
};

struct pd_scraper {
	struct pd_scrape_config c;
	char *collector, *state_dir, *raw_dir, *ua, *target_ca;
	char *auth; /* "Authorization: Bearer ..." or NULL */
	CURLM *multi;
	pthread_mutex_t mu;
	struct tstate **ts;
	size_t nts, capts;
	struct tstate *retired;
	struct pd_scrape_targets pending;
	bool has_pending;
	/* jobs waiting for their due time: a min-heap on due (idle jobs of live
	 * targets whose due is not INT64_MAX) */
	struct job **heap;
	size_t nheap, capheap;
	/* due jobs waiting for a slot: [0] the instant types, [1] cpu */
	struct job *rhead[2], *rtail[2];
	size_t nready;
	unsigned running, running_cpu, posting;
	unsigned cpu_limit; /* CPU profiles in flight: --cpu-concurrency, or pd_scrape_cpu_slots() */
	_Atomic unsigned cpu_slots; /* its copy for /metrics */
	/* easy handles of finished transfers, reset, for the next ones (not
	 * allocated and initialised again per transfer) */
	CURL *pool[EASY_POOL];
	size_t npool;
	/* the event loop: curl's sockets and a wake-up eventfd in an epoll set */
	int epfd, evfd;
	int64_t curl_due; /* curl's timer (monotonic ns); -1 = none */
	/* rounds missed: [0] still waiting for a slot, [1] still running at the next due time */
	_Atomic uint64_t missed[2];
	int64_t missed_log_at[2]; /* last warning, per reason */
	struct xfer *xfers;
	struct pd_queue q;
	int64_t post_backoff_until;
	unsigned post_fails;
	bool collector_down;
	uint64_t drops_logged;
	atomic_bool stop;
	struct pd_pprof_limits lim;
	_Atomic uint64_t scrapes[PD_ST_N][PD_SR_N];
	_Atomic uint64_t fetched_bytes, enqueued, posts_ok, posts_failed, posts_refused, queue_dropped, stored,
		store_failed;
	_Atomic uint64_t q_len, q_bytes, posts_in_flight, ntargets;
	int64_t start_real;
	pd_scrape_metrics_fn metrics_hook;
	void *metrics_ctx;
};

#define TN(ts) pd_scrape_target_name(&(ts)->t)


static int64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* snprintf for messages, where cutting a long message short is fine. */
static void sfmt(char *buf, size_t n, const char *fmt, ...) PD_PRINTF(3, 4);
static void sfmt(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
}

/* ---- logging ------------------------------------------------------------------------------ */

static void slog(struct pd_scraper *s, const char *level, const char *fmt, ...) PD_PRINTF(3, 4);
static void slog(struct pd_scraper *s, const char *level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pd_log_vf(s->c.log, s->c.quiet, level, "scrape", fmt, ap);
	va_end(ap);
}

/* ---- the event loop's plumbing: epoll and curl's socket interface ------------------------ */

/*
 * curl tells which sockets to watch for what (CURLMOPT_SOCKETFUNCTION) and
 * when to call it back (CURLMOPT_TIMERFUNCTION); the loop waits in
 * epoll_wait and hands curl only the sockets that are ready
 * (curl_multi_socket_action), so a wake-up costs what happened, not the
 * number of transfers in flight (curl_multi_perform + curl_multi_poll walk
 * all of them: ~170 CPU profiles waiting for their seconds made that the
 * scraper's main cost).
 */
static int sock_cb(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp)
{
	(void)e;
	struct pd_scraper *s = ud;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL); /* ENOENT, EBADF: already gone */
		return 0;
	}
	struct epoll_event ev = {0};
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
	ev.data.fd = fd;
	/* sockp (curl_multi_assign) marks a socket already in the set; a socket
	 * closed behind curl's back leaves the set by itself, hence the retries */
	int op = sockp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(s->epfd, op, fd, &ev))
		epoll_ctl(s->epfd, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
	if (!sockp)
		curl_multi_assign(s->multi, fd, s);
	return 0; /* a socket that could not be watched times out: --timeout */
}

static int timer_cb(CURLM *m, long ms, void *ud)
{
	(void)m;
	struct pd_scraper *s = ud;
	s->curl_due = ms < 0 ? -1 : pd_mono_ns() + (int64_t)ms * 1000000;
	return 0;
}

/* Wake the loop from another thread. */
static void loop_wakeup(struct pd_scraper *s)
{
	uint64_t one = 1;
	if (write(s->evfd, &one, sizeof one) < 0) {
		/* EAGAIN: the counter is full, the loop wakes anyway */
	}
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* curl's connection cache counts the connections in use too, and closes the
 * oldest idle one as soon as it holds more than this: below the requests in
 * flight, a connection is closed the moment its transfer ends and nothing is
 * ever reused (not even the collector's). */
static void set_maxconnects(struct pd_scraper *s)
{
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS,
			  (long)s->c.concurrency + (long)s->cpu_limit + PD_SCRAPE_POSTS + 16);
}

unsigned pd_scrape_cpu_slots(double load, unsigned min)
{
	double n = 1.25 * load;
	unsigned slots = n >= 1e6 ? 1000000u : (unsigned)n + (n > (double)(unsigned)n) + 4;
	return slots > min ? slots : min;
}

void pd_scrape_config_default(struct pd_scrape_config *c)
{
	memset(c, 0, sizeof *c);
	c->collector = PD_SCRAPE_COLLECTOR;
	c->types = PD_ST_ALL;
	c->interval_ns = PD_SCRAPE_INTERVAL_NS;
	c->cpu_ns = PD_SCRAPE_CPU_NS;
	c->timeout_ns = PD_SCRAPE_TIMEOUT_NS;
	c->flush_ns = PD_SCRAPE_FLUSH_NS;
	c->concurrency = PD_SCRAPE_CONCURRENCY;
	c->queue_bytes = PD_SCRAPE_QUEUE_BYTES;
	c->max_body = PD_SCRAPE_MAX_BODY;
	c->user_agent = "profd-scrape";
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int mkdir_p(const char *dir, struct pd_err *err)
{
	char *d = strdup(dir);
	if (!d)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (char *p = d + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = 0;
			if (mkdir(d, 0755) && errno != EEXIST) {
				int rc = pd_errf(err, PD_EIO, "cannot create directory %s: %s", d, strerror(errno));
				free(d);
				return rc;
			}
			*p = c;
			if (!c)
				break;
		}
	}
	free(d);
	struct stat st;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return pd_errf(err, PD_EIO, "%s is not a directory", dir);
	return 0;
}

int pd_scraper_new(const struct pd_scrape_config *c, struct pd_scraper **out, struct pd_err *err)
{
	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc)
		return pd_errf(err, PD_EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	if (!c->store && (!c->collector || !*c->collector))
		return pd_errf(err, PD_EUSAGE, "no collector URL");
	if (c->interval_ns <= 0 || c->timeout_ns <= 0 || c->cpu_ns < 1000000000LL || !c->concurrency ||
	    !c->max_body || !(c->types & PD_ST_ALL))
		return pd_errf(err, PD_EUSAGE, "bad scrape configuration (interval, timeout, cpu duration >= 1s, "
					       "concurrency, max body and types must be set)");
	int rc;
	if (c->state_dir && (rc = mkdir_p(c->state_dir, err)))
		return pd_err_prefix(err, "--state-dir"), rc;
	if (c->save_raw_dir && (rc = mkdir_p(c->save_raw_dir, err)))
		return pd_err_prefix(err, "--save-raw"), rc;
	struct pd_scraper *s = calloc(1, sizeof *s);
	if (!s)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	s->epfd = s->evfd = -1;
	s->c = *c;
	s->collector = c->collector ? strdup(c->collector) : NULL;
	s->state_dir = c->state_dir ? strdup(c->state_dir) : NULL;
	s->raw_dir = c->save_raw_dir ? strdup(c->save_raw_dir) : NULL;
	s->ua = strdup(c->user_agent ? c->user_agent : "profd-scrape");
	s->target_ca = c->target_ca ? strdup(c->target_ca) : NULL;
	if (c->token && asprintf(&s->auth, "Authorization: Bearer %s", c->token) < 0)
		s->auth = NULL;
	s->c.token = NULL; /* only s->auth holds it */
	s->c.collector = s->collector;
	s->c.state_dir = s->state_dir;
	s->c.save_raw_dir = s->raw_dir;
	s->c.user_agent = s->ua;
	s->c.target_ca = s->target_ca;
	s->multi = curl_multi_init();
	pthread_mutex_init(&s->mu, NULL);
	pd_queue_init(&s->q, c->queue_bytes);
	pd_pprof_limits_default(&s->lim);
	s->lim.max_compressed = c->max_body;
	/* a fetch may not cost more memory than an upload to the collector does
	 * (a 16 M-sample target cost 1.5 GB before the sample cap refused it) */
	s->lim.max_memory = PD_SCRAPE_MAX_MEMORY;
	s->lim.no_quotes = true; /* a target's bytes never reach a message */
	s->start_real = real_ns();
	s->curl_due = -1;
	s->cpu_limit = c->cpu_concurrency ? c->cpu_concurrency : pd_scrape_cpu_slots(0, c->concurrency);
	atomic_store(&s->cpu_slots, s->cpu_limit);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->evfd < 0) {
		int e = errno;
		pd_scraper_free(s);
		return pd_errf(err, PD_EIO, "epoll: %s", strerror(e));
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = s->evfd};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev)) {
		int e = errno;
		pd_scraper_free(s);
		return pd_errf(err, PD_EIO, "epoll: %s", strerror(e));
	}
	if (!s->multi || !s->ua || (c->collector && !s->collector) || (c->state_dir && !s->state_dir) ||
	    (c->token && !s->auth) || (c->target_ca && !s->target_ca) ||
	    (c->save_raw_dir && !s->raw_dir)) {
		pd_scraper_free(s);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	set_maxconnects(s);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
	*out = s;
	return 0;
}

/* ---- targets -------------------------------------------------------------------------------- */

static char *make_stem(const char *key)
{
	char b[96];
	size_t o = 0;
	for (const char *p = key; *p && o < 72; p++)
		b[o++] = isalnum((unsigned char)*p) || *p == '.' || *p == '-' ? *p : '_';
	b[o] = 0;
	char *s = NULL;
	if (asprintf(&s, "%s-%016llx", b, (unsigned long long)pd_hash(key, strlen(key), 7)) < 0)
		return NULL;
	return s;
}

static void job_drop_base(struct job *j)
{
	free(j->prev);
	j->prev = NULL;
	j->prev_len = 0;
	j->prev_loaded = false;
}

static void tstate_free(struct tstate *ts)
{
	free(ts->t.key);
	free(ts->t.name);
	free(ts->t.url);
	free(ts->t.service);
	for (size_t i = 0; i < ts->t.nlabels; i++) {
		free(ts->t.labels[i].key);
		free(ts->t.labels[i].value);
	}
	free(ts->t.labels);
	for (int t = 0; t < PD_ST_N; t++)
		job_drop_base(&ts->jobs[t]);
	free(ts->stem);
	free(ts);
}

/* ---- the timer heap: jobs waiting for their due time ---------------------------------------- */

/* A binary min-heap on due, with each job's place in it (hpos, 1-based), so
 * that the loop finds the due jobs and its next wake-up without walking
 * every (target, type). Its capacity is reserved when targets are applied
 * (heap_reserve), so putting a job in never fails. */
static void heap_put(struct pd_scraper *s, size_t i, struct job *j)
{
	s->heap[i] = j;
	j->hpos = i + 1;
}

static void heap_up(struct pd_scraper *s, size_t i)
{
	struct job *j = s->heap[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (s->heap[p]->due <= j->due)
			break;
		heap_put(s, i, s->heap[p]);
		i = p;
	}
	heap_put(s, i, j);
}

static void heap_down(struct pd_scraper *s, size_t i)
{
	struct job *j = s->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= s->nheap)
			break;
		if (c + 1 < s->nheap && s->heap[c + 1]->due < s->heap[c]->due)
			c++;
		if (j->due <= s->heap[c]->due)
			break;
		heap_put(s, i, s->heap[c]);
		i = c;
	}
	heap_put(s, i, j);
}

static void heap_remove(struct pd_scraper *s, struct job *j)
{
	if (!j->hpos)
		return;
	size_t i = j->hpos - 1;
	j->hpos = 0;
	struct job *last = s->heap[--s->nheap];
	if (i == s->nheap)
		return;
	heap_put(s, i, last);
	heap_up(s, i);
	heap_down(s, last->hpos - 1);
}

static int heap_reserve(struct pd_scraper *s, size_t n)
{
	return n <= s->capheap ? 0 : pd_grow((void **)&s->heap, &s->capheap, n, sizeof *s->heap);
}

/* After j->due changed: the job waits in the heap for it (or leaves the heap
 * if it is not to run: INT64_MAX, running, queued, its target retired). */
static void sched_job(struct pd_scraper *s, struct job *j)
{
	if (j->due == INT64_MAX || j->running || j->ready || j->ts->retired) {
		heap_remove(s, j);
		return;
	}
	if (j->hpos) {
		heap_up(s, j->hpos - 1);
		heap_down(s, j->hpos - 1);
		return;
	}
	PD_ASSERT(s->nheap < s->capheap);
	s->heap[s->nheap++] = j;
	heap_up(s, s->nheap - 1);
}

/* The earliest due time of the waiting jobs. */
static int64_t next_due(const struct pd_scraper *s) { return s->nheap ? s->heap[0]->due : INT64_MAX; }

static void unref(struct pd_scraper *s, struct tstate *ts)
{
	PD_ASSERT(ts->refs > 0);
	if (--ts->refs || !ts->retired)
		return;
	for (struct tstate **pp = &s->retired; *pp; pp = &(*pp)->rnext)
		if (*pp == ts) {
			*pp = ts->rnext;
			break;
		}
	tstate_free(ts);
}

static void retire(struct pd_scraper *s, struct tstate *ts)
{
	ts->retired = true;
	for (int t = 0; t < PD_ST_N; t++)
		heap_remove(s, &ts->jobs[t]);
	if (!ts->refs) {
		tstate_free(ts);
		return;
	}
	ts->rnext = s->retired;
	s->retired = ts;
}

/* A target's own schedule (a config file group's), else the scraper's. */
static int64_t t_interval(const struct pd_scraper *s, const struct tstate *ts)
{
	return ts->t.interval_ns > 0 ? ts->t.interval_ns : s->c.interval_ns;
}
static int64_t t_cpu(const struct pd_scraper *s, const struct tstate *ts)
{
	return ts->t.cpu_ns > 0 ? ts->t.cpu_ns : s->c.cpu_ns;
}
static int64_t t_timeout(const struct pd_scraper *s, const struct tstate *ts)
{
	return ts->t.timeout_ns > 0 ? ts->t.timeout_ns : s->c.timeout_ns;
}

/* Move a target's fields (the list entry is emptied). */
static void take_target(struct pd_scrape_target *dst, struct pd_scrape_target *src)
{
	*dst = *src;
	memset(src, 0, sizeof *src);
}

static void schedule_new(struct pd_scraper *s, struct job *j, int64_t now)
{
	j->due = s->c.once ? now : pd_sched_next(now - 1, j->ts->phase, t_interval(s, j->ts));
	j->next_regular = 0;
	j->fails = j->cpu_busy = 0;
	sched_job(s, j);
}

static bool same_labels(const struct pd_scrape_target *a, const struct pd_scrape_target *b)
{
	if (a->nlabels != b->nlabels || strcmp(a->service, b->service))
		return false;
	for (size_t i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i].key, b->labels[i].key) || strcmp(a->labels[i].value, b->labels[i].value))
			return false;
	return true;
}

struct keyctx {
	struct tstate **v;
	const char *key;
};
static bool key_eq(void *ctx, uint32_t i)
{
	struct keyctx *k = ctx;
	return k->v[i] && !strcmp(k->v[i]->t.key, k->key);
}

/* Apply a pending target list, if any (loop thread). */
static int apply_targets(struct pd_scraper *s, struct pd_err *err)
{
	pthread_mutex_lock(&s->mu);
	if (!s->has_pending) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	struct pd_scrape_targets l = s->pending;
	memset(&s->pending, 0, sizeof s->pending);
	s->has_pending = false;
	int rc = 0;
	int64_t now = pd_mono_ns();
	struct pd_hidx idx = {0};
	struct tstate **nv = calloc(l.n + 1, sizeof *nv);
	/* the heap holds the jobs of the old and the new targets until the old retire */
	if (!nv || pd_hidx_init(&idx, s->nts + 1) || heap_reserve(s, (s->nts + l.n + 1) * PD_ST_N)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->nts; i++)
		if (pd_hidx_insert(&idx, pd_hash(s->ts[i]->t.key, strlen(s->ts[i]->t.key), 0), (uint32_t)i)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
	size_t added = 0, kept = 0;
	for (size_t i = 0; i < l.n; i++) {
		struct pd_scrape_target *nt = &l.v[i];
		struct keyctx kc = {s->ts, nt->key};
		uint32_t at = pd_hidx_find(&idx, pd_hash(nt->key, strlen(nt->key), 0), key_eq, &kc);
		unsigned types = (nt->types ? nt->types : s->c.types) & PD_ST_ALL;
		struct tstate *ts;
		if (at != UINT32_MAX) {
			ts = s->ts[at];
			s->ts[at] = NULL; /* taken */
			kept++;
			bool url_changed = strcmp(ts->t.url, nt->url) != 0;
			bool labels_changed = !same_labels(&ts->t, nt);
			/* a new URL is another process: its counters are not the old ones */
			if (url_changed)
				for (int t = 0; t < PD_ST_N; t++)
					job_drop_base(&ts->jobs[t]);
			(void)labels_changed;
			int64_t iv0 = t_interval(s, ts);
			struct pd_scrape_target old = ts->t;
			take_target(&ts->t, nt);
			take_target(nt, &old); /* freed with the list */
			/* another interval: another phase, every type scheduled again */
			bool resched = t_interval(s, ts) != iv0;
			if (resched)
				ts->phase = pd_sched_phase(ts->t.key, t_interval(s, ts));
			for (int t = 0; t < PD_ST_N; t++)
				if ((types & (1u << t)) && (resched || !(ts->types & (1u << t))))
					schedule_new(s, &ts->jobs[t], now);
			ts->types = types;
		} else {
			ts = calloc(1, sizeof *ts);
			if (!ts || !(ts->stem = make_stem(nt->key))) {
				free(ts);
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
			take_target(&ts->t, nt);
			ts->phase = pd_sched_phase(ts->t.key, t_interval(s, ts));
			ts->types = types;
			ts->up = -1;
			for (int t = 0; t < PD_ST_N; t++) {
				ts->jobs[t].ts = ts;
				ts->jobs[t].type = t;
				schedule_new(s, &ts->jobs[t], now);
			}
			added++;
		}
		nv[i] = ts;
	}
	size_t removed = 0;
	for (size_t i = 0; i < s->nts; i++)
		if (s->ts[i]) {
			retire(s, s->ts[i]);
			removed++;
		}
	free(s->ts);
	s->ts = nv;
	nv = NULL;
	s->nts = s->capts = l.n;
	atomic_store(&s->ntargets, s->nts);
	if (!s->c.cpu_concurrency) {
		double load = 0;
		for (size_t i = 0; i < s->nts; i++) {
			const struct tstate *t = s->ts[i];
			if (t->types & (1u << PD_ST_CPU))
				load += (double)t_cpu(s, t) / (double)t_interval(s, t);
		}
		s->cpu_limit = pd_scrape_cpu_slots(load, s->c.concurrency);
		atomic_store(&s->cpu_slots, s->cpu_limit);
		set_maxconnects(s);
	}
	if (s->c.log && (added || removed) && !s->c.once)
		slog(s, "info", "targets: %zu (%zu new, %zu kept, %zu gone); up to %u cpu profiles in flight", s->nts,
		     added, kept, removed, s->cpu_limit);
out:
	pthread_mutex_unlock(&s->mu);
	pd_hidx_free(&idx);
	free(nv);
	pd_scrape_targets_free(&l);
	return rc;
}

int pd_scraper_set_targets(struct pd_scraper *s, const struct pd_scrape_targets *l, struct pd_err *err)
{
	struct pd_scrape_targets copy = {0};
	int rc0 = pd_scrape_targets_check_unique(l, err);
	if (rc0)
		return rc0;
	for (size_t i = 0; i < l->n; i++) {
		const struct pd_scrape_target *t = &l->v[i];
		int rc = pd_scrape_targets_append(&copy, t, err);
		if (rc) {
			pd_scrape_targets_free(&copy);
			return rc;
		}
	}
	pthread_mutex_lock(&s->mu);
	pd_scrape_targets_free(&s->pending);
	s->pending = copy;
	s->has_pending = true;
	pthread_mutex_unlock(&s->mu);
	loop_wakeup(s);
	return 0;
}

/* ---- recording results ------------------------------------------------------------------ */

static void record(struct pd_scraper *s, struct job *j, int r, const char *msg, size_t bytes, double secs,
		   int64_t now)
{
	struct tstate *ts = j->ts;
	const char *tn = pd_scrape_type_name(j->type);
	pthread_mutex_lock(&s->mu);
	j->result = r;
	j->bytes = bytes;
	j->secs = secs;
	sfmt(j->msg, sizeof j->msg, "%s", msg ? msg : "");
	ts->bytes += bytes;
	if (pd_scrape_result_ok(r)) {
		ts->scrapes_ok++;
	} else if (r != PD_SR_CPU_IN_USE) {
		ts->scrapes_failed++;
		ts->last_reason = r;
		sfmt(ts->last_error, sizeof ts->last_error, "%s: %s", tn, j->msg);
	}
	if (pd_scrape_result_down(r))
		ts->up = 0;
	else if (r != PD_SR_INTERNAL)
		ts->up = 1;
	if (ts->round_pending && !--ts->round_pending)
		ts->last_duration = (double)(now - ts->round_start) / 1e9;
	pthread_mutex_unlock(&s->mu);
	atomic_fetch_add(&s->scrapes[j->type][r], 1);

	bool err = !pd_scrape_result_ok(r) && r != PD_SR_CPU_IN_USE;
	if (err && (s->c.once || j->last_logged != r))
		slog(s, "warn", "target %s type %s: %s", TN(ts), tn, j->msg);
	else if (!err && j->last_logged > PD_SR_EMPTY && j->last_logged != PD_SR_CPU_IN_USE && r != PD_SR_CPU_IN_USE)
		slog(s, "info", "target %s type %s: ok again", TN(ts), tn);
	j->last_logged = r;
}

static void set_delivery(struct pd_scraper *s, struct job *j, int d, const char *msg)
{
	pthread_mutex_lock(&s->mu);
	j->delivery = d;
	sfmt(j->dmsg, sizeof j->dmsg, "%s", msg ? msg : "");
	pthread_mutex_unlock(&s->mu);
}

static void update_queue_gauges(struct pd_scraper *s)
{
	atomic_store(&s->q_len, s->q.n);
	atomic_store(&s->q_bytes, s->q.bytes);
	atomic_store(&s->posts_in_flight, s->posting);
}

static void drop_evicted(struct pd_scraper *s, struct pd_queue_item *ev)
{
	while (ev) {
		struct pd_queue_item *next = ev->next;
		struct tstate *ts = ev->owner;
		atomic_fetch_add(&s->queue_dropped, 1);
		if (s->drops_logged++ % 100 == 0)
			slog(s, "warn",
			     "delivery queue full (--queue-size %zu bytes): dropped the oldest profile (target %s type %s); "
			     "%llu dropped so far",
			     s->q.max_bytes, TN(ts), pd_scrape_type_name(ev->type),
			     (unsigned long long)atomic_load(&s->queue_dropped));
		set_delivery(s, &ts->jobs[ev->type], D_DROPPED, "dropped from the full delivery queue (--queue-size)");
		pd_queue_item_free(ev);
		unref(s, ts);
		ev = next;
	}
	update_queue_gauges(s);
}

/* ---- files -------------------------------------------------------------------------------- */

static char *state_path(struct pd_scraper *s, struct tstate *ts, int type)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s.%s.pb.gz", s->state_dir, ts->stem, pd_scrape_type_name(type)) < 0)
		return NULL;
	return p;
}

static void save_raw(struct pd_scraper *s, struct tstate *ts, int type, int64_t t_real, const uint8_t *p, size_t n)
{
	char *path = NULL;
	if (asprintf(&path, "%s/%s.%s.%020lld.pb.gz", s->raw_dir, ts->stem, pd_scrape_type_name(type),
		     (long long)t_real) < 0)
		return;
	struct pd_err err;
	if (pd_write_file(path, p, n, &err))
		slog(s, "error", "--save-raw: %s", err.msg);
	free(path);
}

/* The delta base of a job: in memory, else (first time) from --state-dir. */
static void load_base(struct pd_scraper *s, struct job *j)
{
	if (j->prev || j->prev_loaded || !s->state_dir)
		return;
	j->prev_loaded = true;
	char *path = state_path(s, j->ts, j->type);
	if (!path)
		return;
	struct pd_buf b = PD_BUF_INIT(s->c.max_body);
	struct pd_err err;
	struct stat st;
	if (stat(path, &st) == 0) {
		if (pd_buf_read_file(&b, path, &err)) {
			slog(s, "warn", "--state-dir: %s: cannot read, starting a new delta base: %s", path, err.msg);
			pd_buf_free(&b);
		} else {
			j->prev = b.ptr;
			j->prev_len = b.len;
		}
	}
	free(path);
}

/* Keep body as the new delta base (takes ownership) and write it to --state-dir. */
static void keep_base(struct pd_scraper *s, struct job *j, uint8_t *body, size_t len)
{
	free(j->prev);
	j->prev = body;
	j->prev_len = len;
	j->prev_loaded = true;
	if (!s->state_dir)
		return;
	char *path = state_path(s, j->ts, j->type);
	struct pd_err err;
	if (path && pd_write_file(path, body, len, &err))
		slog(s, "error", "--state-dir: %s", err.msg);
	free(path);
}

/* ---- delivering a good profile ---------------------------------------------------------------- */

/* Hand data to the sink (takes ownership of data). */
static int output(struct pd_scraper *s, struct job *j, uint8_t *data, size_t len, int64_t created, bool as_is,
		  char *msg, size_t msz)
{
	struct tstate *ts = j->ts;
	const char *tn = pd_scrape_type_name(j->type);
	struct pd_kv *labels = ts->t.labels;
	size_t nl = ts->t.nlabels;
	struct pd_kv *tmp = NULL;
	if (as_is) {
		tmp = malloc((nl + 1) * sizeof *tmp);
		if (!tmp) {
			free(data);
			sfmt(msg, msz, "out of memory");
			return PD_SR_INTERNAL;
		}
		memcpy(tmp, labels, nl * sizeof *tmp);
		tmp[nl].key = (char *)"cumulative";
		tmp[nl].value = (char *)"true";
		labels = tmp;
		nl++;
	}
	int r = PD_SR_OK;
	if (s->c.store) {
		struct pd_scrape_item it = {ts->t.service, tn, labels, nl, created, data, len, 0};
		if (s->c.retention_ns > 0)
			it.min_created_ns = real_ns() - s->c.retention_ns;
		struct pd_err err;
		if (pd_scrape_store_ingest(s->c.store, &it, NULL, &err)) {
			atomic_fetch_add(&s->store_failed, 1);
			set_delivery(s, j, D_FAILED, err.msg);
			sfmt(msg, msz, "store: %s", err.msg);
			r = PD_SR_INTERNAL;
		} else {
			atomic_fetch_add(&s->stored, 1);
			set_delivery(s, j, D_OK, NULL);
		}
		free(data);
	} else {
		struct pd_queue_item *it = calloc(1, sizeof *it);
		char *url = pd_scrape_post_url(s->collector, ts->t.service, tn, labels, nl, created);
		if (!it || !url) {
			free(it);
			free(url);
			free(data);
			free(tmp);
			sfmt(msg, msz, "out of memory");
			return PD_SR_INTERNAL;
		}
		it->url = url;
		it->body = data;
		it->len = len;
		it->owner = ts;
		it->type = j->type;
		ts->refs++;
		set_delivery(s, j, D_PENDING, NULL);
		atomic_fetch_add(&s->enqueued, 1);
		drop_evicted(s, pd_queue_push(&s->q, it));
	}
	free(tmp);
	return r;
}

/* A valid profile p of the right kind arrived in x->body: delta, sink. */
static int deliver(struct pd_scraper *s, struct job *j, struct xfer *x, const struct pd_profile *p, char *msg,
		   size_t msz)
{
	struct tstate *ts = j->ts;
	const char *tn = pd_scrape_type_name(j->type);
	bool cumulative = pd_scrape_type_cumulative(j->type);
	bool delta = cumulative && (!s->c.once || s->state_dir);
	pthread_mutex_lock(&s->mu);
	j->as_is = cumulative && !delta;
	pthread_mutex_unlock(&s->mu);
	if (!delta) {
		if (!p->nsamples)
			return PD_SR_EMPTY;
		uint8_t *data = x->body.ptr;
		size_t len = x->body.len;
		x->body.ptr = NULL;
		x->body.len = x->body.cap = 0;
		return output(s, j, data, len, x->t0_real, cumulative, msg, msz);
	}
	load_base(s, j);
	struct pd_profile *prev = NULL, *d = NULL;
	struct pd_err err;
	if (j->prev && pd_pprof_decode(j->prev, j->prev_len, &s->lim, &prev, &err)) {
		slog(s, "warn", "target %s type %s: the saved delta base is not readable (%s): starting a new one",
		     TN(ts), tn, err.msg);
		prev = NULL;
	}
	int r = PD_SR_INTERNAL;
	int rc = pd_scrape_delta_step(p, prev, &r, &d, &err);
	pd_profile_free(prev);
	uint8_t *cur = x->body.ptr;
	size_t curlen = x->body.len;
	x->body.ptr = NULL;
	x->body.len = x->body.cap = 0;
	if (rc) {
		sfmt(msg, msz, "delta: %s", err.msg);
		keep_base(s, j, cur, curlen);
		return PD_SR_INTERNAL;
	}
	if (r == PD_SR_BASE) {
		if (!ts->base_logged)
			slog(s, "info",
			     "target %s: first scrape of its cumulative types (allocs, block, mutex): kept as the base, "
			     "deltas are stored from the next scrape on",
			     TN(ts));
		ts->base_logged = true;
		keep_base(s, j, cur, curlen);
		return r;
	}
	if (r == PD_SR_UNCHANGED) {
		keep_base(s, j, cur, curlen);
		return r;
	}
	if (r == PD_SR_RESET) {
		slog(s, "info",
		     "target %s type %s: counters went down (the process restarted): storing the snapshot as it is "
		     "(what happened since the restart)",
		     TN(ts), tn);
		if (!p->nsamples) {
			keep_base(s, j, cur, curlen);
			return PD_SR_EMPTY;
		}
		uint8_t *copy = malloc(curlen ? curlen : 1);
		if (!copy) {
			keep_base(s, j, cur, curlen);
			sfmt(msg, msz, "out of memory");
			return PD_SR_INTERNAL;
		}
		memcpy(copy, cur, curlen);
		keep_base(s, j, cur, curlen);
		int o = output(s, j, copy, curlen, x->t0_real, false, msg, msz);
		return o == PD_SR_OK ? PD_SR_RESET : o;
	}
	/* OK: the delta */
	keep_base(s, j, cur, curlen);
	struct pd_buf enc = PD_BUF_INIT(0);
	/* gzip level 1, as Go's runtime/pprof writes profiles: the collector
	 * decodes it anyway (profd re-encodes it), and level 6 made gzip the
	 * largest part of a delta's cost for ~5 % fewer bytes */
	rc = pd_pprof_encode(d, 1, &enc, &err);
	pd_profile_free(d);
	if (rc) {
		pd_buf_free(&enc);
		sfmt(msg, msz, "encoding the delta: %s", err.msg);
		return PD_SR_INTERNAL;
	}
	return output(s, j, enc.ptr, enc.len, x->t0_real, false, msg, msz);
}

/* ---- transfers ---------------------------------------------------------------------------- */

static size_t write_cb(char *p, size_t sz, size_t nm, void *ud)
{
	struct xfer *x = ud;
	size_t n = sz * nm;
	if (x->post) { /* the collector's answer: only its start is looked at */
		size_t room = x->body.max - x->body.len;
		if (pd_buf_append(&x->body, p, n < room ? n : room))
			return 0;
		return n;
	}
	if (pd_buf_append(&x->body, p, n)) {
		x->too_large = true;
		return 0;
	}
	return n;
}

static void xfer_link(struct pd_scraper *s, struct xfer *x)
{
	x->prev = NULL;
	x->next = s->xfers;
	if (s->xfers)
		s->xfers->prev = x;
	s->xfers = x;
}

static void xfer_free(struct pd_scraper *s, struct xfer *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else if (s->xfers == x)
		s->xfers = x->next;
	if (x->next)
		x->next->prev = x->prev;
	if (x->h) {
		curl_multi_remove_handle(s->multi, x->h);
		if (s->npool < EASY_POOL) {
			curl_easy_reset(x->h);
			s->pool[s->npool++] = x->h;
		} else {
			curl_easy_cleanup(x->h);
		}
	}
	curl_slist_free_all(x->hdrs);
	pd_buf_free(&x->body);
	free(x->url);
	free(x);
}

static CURL *easy_new(struct pd_scraper *s, struct xfer *x, const char *url, int64_t timeout_ns)
{
	CURL *h = s->npool ? s->pool[--s->npool] : curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ns / 1000000));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ns / 1000000));
	curl_easy_setopt(h, CURLOPT_USERAGENT, s->ua);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	return h;
}

/* ---- missed rounds ------------------------------------------------------------------------ */

/* A (target, type) misses a round when its job is still waiting for a slot
 * (queued) or still running at its next due time: the round is folded into
 * the one in progress, i.e. lost. Counted (profd_scrape_missed_total) and
 * logged at most once a minute per reason (the remedies differ). */
enum { MISS_QUEUED, MISS_RUNNING };
#define MISS_LOG_NS 60000000000LL

static void count_missed(struct pd_scraper *s, struct job *j, int why, uint64_t n, int64_t now)
{
	uint64_t total = atomic_fetch_add(&s->missed[why], n) + n;
	total += atomic_load(&s->missed[!why]);
	if (s->missed_log_at[why] && now - s->missed_log_at[why] < MISS_LOG_NS)
		return;
	char lim[80];
	if (j->type == PD_ST_CPU)
		sfmt(lim, sizeof lim, "%u CPU profiles in flight (--cpu-concurrency)", s->cpu_limit);
	else
		sfmt(lim, sizeof lim, "%u requests in flight (--concurrency)", s->c.concurrency);
	if (why == MISS_QUEUED)
		slog(s, "warn",
		     "target %s type %s: missed %llu round(s): still waiting for a free slot at its next due time "
		     "(limit: %s): raise the limit. %llu round(s) missed in all",
		     TN(j->ts), pd_scrape_type_name(j->type), (unsigned long long)n, lim, (unsigned long long)total);
	else
		slog(s, "warn",
		     "target %s type %s: missed %llu round(s): the last scrape was still running at its next due time "
		     "(a slow target, or --timeout%s longer than --interval). %llu round(s) missed in all",
		     TN(j->ts), pd_scrape_type_name(j->type), (unsigned long long)n,
		     j->type == PD_ST_CPU ? " + --cpu-duration" : "", (unsigned long long)total);
	s->missed_log_at[why] = now;
}

/* At the start of a fetch: the regular rounds that went by while it waited. */
static void missed_queued(struct pd_scraper *s, struct job *j, int64_t now)
{
	if (s->c.once)
		return;
	int64_t ref = j->next_regular ? j->next_regular : j->due, iv = t_interval(s, j->ts);
	if (now >= ref && now - ref >= iv)
		count_missed(s, j, MISS_QUEUED, (uint64_t)((now - ref) / iv), now);
}

/* The target's parked instant jobs (all, or the first) to the front of the
 * ready FIFO: they start before anything else, on the connection the last
 * one left idle. */
static void unpark(struct pd_scraper *s, struct tstate *ts, bool all)
{
	struct job *first = ts->phead, *last = all ? ts->ptail : first;
	if (!first)
		return;
	ts->phead = last->rnext;
	if (!ts->phead)
		ts->ptail = NULL;
	last->rnext = s->rhead[0];
	s->rhead[0] = first;
	if (!s->rtail[0])
		s->rtail[0] = last;
}

static void start_fetch(struct pd_scraper *s, struct job *j, int64_t now)
{
	struct tstate *ts = j->ts;
	long cpu_s = (long)(t_cpu(s, ts) / 1000000000LL);
	struct xfer *x = calloc(1, sizeof *x);
	if (x) {
		x->body = (struct pd_buf)PD_BUF_INIT(s->c.max_body);
		x->job = j;
		x->url = pd_scrape_type_url(ts->t.url, j->type, cpu_s);
	}
	int64_t tmo = t_timeout(s, ts) + (j->type == PD_ST_CPU ? t_cpu(s, ts) : 0);
	if (!x || !x->url || !(x->h = easy_new(s, x, x->url, tmo))) {
		if (x)
			xfer_free(s, x);
		record(s, j, PD_SR_INTERNAL, "out of memory", 0, 0, now);
		j->due = s->c.once ? INT64_MAX : pd_sched_next(now, ts->phase, t_interval(s, ts));
		sched_job(s, j);
		unref(s, ts);
		return;
	}
	/* no redirect is followed: a target that redirects elsewhere (the
	 * collector's own API, a metadata service) must not get that answer
	 * stored; a 3xx is reported with where it pointed */
	curl_easy_setopt(x->h, CURLOPT_FOLLOWLOCATION, 0L);
	/* curl walks its whole DNS cache after every transfer (prune), and keys it
	 * by host:port: 1,000 targets were 1,000 entries walked 14,000 times a
	 * minute. A target is scraped once an interval and its requests share one
	 * connection, so the cache saved next to nothing: entries live for 0 s. */
	curl_easy_setopt(x->h, CURLOPT_DNS_CACHE_TIMEOUT, 0L);
	/* Close the connection when nothing of this target follows on it (a cpu
	 * profile; the last instant type queued): an idle connection kept until
	 * the next round (an interval later) is never reused, and a full
	 * connection cache is walked on every transfer. */
	if (j->type == PD_ST_CPU || !ts->inst_ready)
		curl_easy_setopt(x->h, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(x->h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->c.max_body);
	/* https:// targets: verified against --target-ca, else the system's CAs */
	if (s->c.target_ca)
		curl_easy_setopt(x->h, CURLOPT_CAINFO, s->c.target_ca);
	if (s->c.target_insecure) {
		curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	x->t0 = now;
	x->t0_real = real_ns();
	missed_queued(s, j, now);
	if (now >= j->next_regular)
		j->next_regular = pd_sched_next(now, ts->phase, t_interval(s, ts));
	j->running = true;
	s->running++;
	s->running_cpu += j->type == PD_ST_CPU;
	ts->inst_running += j->type != PD_ST_CPU;
	pthread_mutex_lock(&s->mu);
	if (!ts->round_pending++)
		ts->round_start = now;
	pthread_mutex_unlock(&s->mu);
	xfer_link(s, x);
	curl_multi_add_handle(s->multi, x->h);
}

static void fetch_done(struct pd_scraper *s, struct xfer *x, CURLcode code, long status, const char *ctype)
{
	struct job *j = x->job;
	struct tstate *ts = j->ts;
	int64_t now = pd_mono_ns();
	double secs = (double)(now - x->t0) / 1e9;
	char msg[400] = "";
	size_t got = x->body.len;
	int r;
	j->running = false;
	s->running--;
	s->running_cpu -= j->type == PD_ST_CPU;
	ts->inst_running -= j->type != PD_ST_CPU;
	atomic_fetch_add(&s->fetched_bytes, got);
	if (code != CURLE_OK) {
		const char *e = x->errbuf[0] ? x->errbuf : curl_easy_strerror(code);
		if (x->too_large || code == CURLE_FILESIZE_EXCEEDED) {
			r = PD_SR_TOO_LARGE;
			sfmt(msg, sizeof msg, "the profile is over the limit of %zu bytes (--max-body)", s->c.max_body);
		} else if (code == CURLE_OPERATION_TIMEDOUT) {
			r = PD_SR_TIMEOUT;
			sfmt(msg, sizeof msg, "no answer within %.0fs (%s): %s",
				 (double)(t_timeout(s, ts) + (j->type == PD_ST_CPU ? t_cpu(s, ts) : 0)) / 1e9,
				 j->type == PD_ST_CPU ? "--cpu-duration + --timeout" : "--timeout", e);
		} else if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
			   code == CURLE_COULDNT_RESOLVE_PROXY) {
			r = PD_SR_CONNECT;
			sfmt(msg, sizeof msg, "target down: %s", e);
		} else if (code == CURLE_PEER_FAILED_VERIFICATION) {
			r = PD_SR_NETWORK;
			sfmt(msg, sizeof msg, "TLS: the target's certificate is not trusted: %s (%s)", e,
			     strstr(e, "host name") ? "it is not for this host name: use a name it holds"
			     : s->c.target_ca       ? "is it signed by the CA of --target-ca?"
						    : "--target-ca FILE names the CA that signed it");
		} else if (code == CURLE_SSL_CACERT_BADFILE) {
			r = PD_SR_NETWORK;
			sfmt(msg, sizeof msg, "TLS: --target-ca %s is not a usable PEM CA bundle: %s",
			     s->c.target_ca ? s->c.target_ca : "(none)", e);
		} else {
			r = PD_SR_NETWORK;
			sfmt(msg, sizeof msg, "%s", e);
		}
	} else if (status >= 300 && status < 400) {
		char *loc = NULL;
		curl_easy_getinfo(x->h, CURLINFO_REDIRECT_URL, &loc);
		r = PD_SR_HTTP_4XX;
		sfmt(msg, sizeof msg, "HTTP %ld from %s: a redirect%s%.200s, not followed (point the target at the pprof "
				      "endpoint itself)",
		     status, x->url, loc ? " to " : "", loc ? loc : "");
	} else if (status != 200) {
		if (j->type == PD_ST_CPU && pd_scrape_cpu_in_use(status, x->body.ptr, x->body.len)) {
			r = PD_SR_CPU_IN_USE;
			sfmt(msg, sizeof msg, "cpu profiling already in use (another CPU profile is being taken): retrying in %.0fs",
				 (double)t_cpu(s, ts) / 1e9);
			slog(s, "info", "target %s type cpu: %s", TN(ts), msg);
		} else {
			r = status >= 500 ? PD_SR_HTTP_5XX : PD_SR_HTTP_4XX;
			pd_scrape_http_error(msg, sizeof msg, status, x->url, x->body.ptr, x->body.len);
		}
	} else {
		struct pd_profile *p = NULL;
		struct pd_err err;
		if (pd_pprof_decode(x->body.ptr, x->body.len, &s->lim, &p, &err)) {
			if (err.code == PD_ELIMIT) {
				r = PD_SR_TOO_LARGE;
				sfmt(msg, sizeof msg, "profile over a limit: %s", err.msg);
			} else {
				r = PD_SR_NOT_PPROF;
				pd_scrape_not_profile(msg, sizeof msg, ctype, x->body.ptr, x->body.len, &err);
			}
		} else {
			const char *kind = pd_profile_kind(p);
			if (!pd_scrape_kind_ok(j->type, kind)) {
				r = PD_SR_WRONG_KIND;
				pd_scrape_wrong_kind(msg, sizeof msg, p, j->type);
			} else {
				if (s->raw_dir)
					save_raw(s, ts, j->type, x->t0_real, x->body.ptr, x->body.len);
				r = deliver(s, j, x, p, msg, sizeof msg);
			}
			pd_profile_free(p);
		}
	}
	record(s, j, r, msg, got, secs, now);
	/* when next */
	if (r == PD_SR_CPU_IN_USE) {
		j->cpu_busy++;
		if (s->c.once)
			j->due = j->cpu_busy < PD_SCRAPE_CPU_TRIES ? now + t_cpu(s, ts) : INT64_MAX;
		else
			j->due = now + t_cpu(s, ts) < j->next_regular ? now + t_cpu(s, ts) : j->next_regular;
	} else {
		j->cpu_busy = 0;
		if (s->c.once) {
			j->due = INT64_MAX;
		} else if (pd_scrape_result_down(r)) {
			j->fails++;
			j->due = pd_sched_retry(now, j->fails, j->next_regular);
		} else {
			j->fails = 0;
			j->due = j->next_regular;
		}
	}
	/* the regular rounds that came while it ran are lost */
	bool late = !s->c.once && j->next_regular && j->next_regular <= now;
	if (late)
		count_missed(s, j, MISS_RUNNING, (uint64_t)((now - j->next_regular) / t_interval(s, j->ts)) + 1, now);
	if (!s->c.once && j->due <= now)
		j->due = pd_sched_next(now, ts->phase, t_interval(s, ts));
	if (late) /* the next round is the next due time, not a late one */
		j->next_regular = j->due;
	sched_job(s, j);
	if (j->type != PD_ST_CPU) { /* the next instant type of the target, on this connection */
		ts->parallel = pd_scrape_result_down(r);
		unpark(s, ts, ts->parallel);
	}
	unref(s, ts);
}

static void start_posts(struct pd_scraper *s, int64_t now)
{
	while (s->posting < PD_SCRAPE_POSTS && now >= s->post_backoff_until && s->q.n) {
		struct pd_queue_item *it = pd_queue_pop(&s->q);
		struct xfer *x = calloc(1, sizeof *x);
		if (!x || !(x->h = easy_new(s, x, it->url, PD_SCRAPE_POST_TIMEOUT_NS))) {
			free(x);
			drop_evicted(s, pd_queue_requeue(&s->q, it));
			break;
		}
		x->post = true;
		x->item = it;
		x->body = (struct pd_buf)PD_BUF_INIT(64 << 10);
		x->t0 = now;
		x->hdrs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
		x->hdrs = x->hdrs ? curl_slist_append(x->hdrs, "Expect:") : NULL;
		if (x->hdrs && s->auth)
			x->hdrs = curl_slist_append(x->hdrs, s->auth);
		if (s->c.cacert)
			curl_easy_setopt(x->h, CURLOPT_CAINFO, s->c.cacert);
		if (s->c.insecure) {
			curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYPEER, 0L);
			curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYHOST, 0L);
		}
		curl_easy_setopt(x->h, CURLOPT_POST, 1L);
		curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, it->body);
		curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
		curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
		it->attempts++;
		s->posting++;
		xfer_link(s, x);
		curl_multi_add_handle(s->multi, x->h);
	}
	update_queue_gauges(s);
}

/* The collector's JSON error ("error":"...") or the body's first line. */
static void collector_error(const struct pd_buf *b, char *out, size_t cap)
{
	const char *k = b->len ? memmem(b->ptr, b->len, "\"error\":\"", 9) : NULL;
	if (k) {
		const char *p = k + 9, *end = (const char *)b->ptr + b->len;
		size_t o = 0;
		for (; p < end && *p != '"' && o + 1 < cap; p++) {
			if (*p == '\\' && p + 1 < end)
				p++;
			out[o++] = *p;
		}
		out[o] = 0;
		return;
	}
	pd_scrape_first_line(b->ptr, b->len, out, cap);
}

static void post_done(struct pd_scraper *s, struct xfer *x, CURLcode code, long status)
{
	struct pd_queue_item *it = x->item;
	x->item = NULL;
	struct tstate *ts = it->owner;
	struct job *j = &ts->jobs[it->type];
	const char *tn = pd_scrape_type_name(it->type);
	int64_t now = pd_mono_ns();
	s->posting--;
	if (code == CURLE_OK && status >= 200 && status < 300) { /* stored: a 201 or 204 sent again is a duplicate */
		atomic_fetch_add(&s->posts_ok, 1);
		if (s->collector_down)
			slog(s, "info", "collector %s is back: delivering %zu queued profile(s)", s->collector, s->q.n);
		s->collector_down = false;
		s->post_fails = 0;
		set_delivery(s, j, D_OK, NULL);
		pd_queue_item_free(it);
		unref(s, ts);
	} else if (code == CURLE_OK && status >= 400 && status < 500 && status != 408 && status != 429) {
		char e[200], m[240];
		collector_error(&x->body, e, sizeof e);
		sfmt(m, sizeof m, "collector refused it: HTTP %ld: %s", status, e);
		atomic_fetch_add(&s->posts_refused, 1);
		slog(s, "warn", "target %s type %s: the collector refused the profile (dropped): HTTP %ld: %s", TN(ts),
		     tn, status, e);
		set_delivery(s, j, D_REFUSED, m);
		pd_queue_item_free(it);
		unref(s, ts);
	} else {
		char e[200];
		if (code != CURLE_OK)
			sfmt(e, sizeof e, "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
		else {
			char b[160];
			collector_error(&x->body, b, sizeof b);
			sfmt(e, sizeof e, "HTTP %ld: %s", status, b);
		}
		atomic_fetch_add(&s->posts_failed, 1);
		if (now >= s->post_backoff_until) {
			s->post_fails++;
			s->post_backoff_until = now + pd_sched_backoff(s->post_fails);
		}
		if (!s->collector_down)
			slog(s, "warn",
			     "collector %s: %s: keeping profiles queued (up to %zu bytes, --queue-size), retrying with "
			     "backoff",
			     s->collector, e, s->q.max_bytes);
		s->collector_down = true;
		drop_evicted(s, pd_queue_requeue(&s->q, it));
	}
	update_queue_gauges(s);
}

static void drain_messages(struct pd_scraper *s)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(s->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct xfer *x = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		CURLcode code = m->data.result;
		long status = 0;
		char *ct = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(m->easy_handle, CURLINFO_CONTENT_TYPE, &ct);
		char ctype[128];
		sfmt(ctype, sizeof ctype, "%s", ct ? ct : "");
		if (x->post)
			post_done(s, x, code, status);
		else
			fetch_done(s, x, code, status, ctype);
		xfer_free(s, x);
	}
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* Make the due jobs ready: into the FIFO of their limit ([1] cpu, [0] the others). */
static void schedule(struct pd_scraper *s, int64_t now)
{
	while (s->nheap && s->heap[0]->due <= now) {
		struct job *j = s->heap[0];
		heap_remove(s, j);
		if (!(j->ts->types & (1u << j->type)))
			continue; /* the type was taken off the target */
		int q = j->type == PD_ST_CPU;
		j->ready = true;
		j->rnext = NULL;
		if (s->rtail[q])
			s->rtail[q]->rnext = j;
		else
			s->rhead[q] = j;
		s->rtail[q] = j;
		s->nready++;
		j->ts->inst_ready += !q;
		j->ts->refs++;
	}
}

static struct job *ready_pop(struct pd_scraper *s, int q)
{
	struct job *j = s->rhead[q];
	s->rhead[q] = j->rnext;
	if (!s->rhead[q])
		s->rtail[q] = NULL;
	s->nready--;
	j->ready = false;
	j->ts->inst_ready -= !q;
	return j;
}

/* A free slot for a fetch of FIFO q: CPU profiles and the other types have
 * limits of their own, since a CPU profile holds its slot for its seconds. */
static bool slot_free(const struct pd_scraper *s, int q)
{
	return q ? s->running_cpu < s->cpu_limit : s->running - s->running_cpu < s->c.concurrency;
}

static void start_fetches(struct pd_scraper *s, int64_t now)
{
	for (int q = 0; q < 2; q++)
		while (s->rhead[q] && slot_free(s, q)) {
			struct job *j = ready_pop(s, q);
			struct tstate *ts = j->ts;
			if (ts->retired || !(ts->types & (1u << j->type))) {
				unref(s, ts);
				continue;
			}
			if (!q && ts->inst_running && !ts->parallel) { /* park it: it follows on that connection */
				j->ready = true;
				j->rnext = NULL;
				if (ts->ptail)
					ts->ptail->rnext = j;
				else
					ts->phead = j;
				ts->ptail = j;
				s->nready++;
				ts->inst_ready++;
				continue;
			}
			start_fetch(s, j, now);
		}
}

/* On stop: abandon fetches in flight and the ready lists. */
static void cancel_fetches(struct pd_scraper *s)
{
	for (int q = 0; q < 2; q++)
		while (s->rhead[q]) {
			struct job *j = ready_pop(s, q);
			unref(s, j->ts);
		}
	for (struct xfer *x = s->xfers, *next; x; x = next) {
		next = x->next;
		if (x->post)
			continue;
		struct tstate *ts = x->job->ts;
		while (ts->phead) { /* parked behind this fetch (their refs are not x's: ts lives on) */
			struct job *j = ts->phead;
			ts->phead = j->rnext;
			j->ready = false;
			s->nready--;
			ts->inst_ready--;
			ts->refs--;
		}
		ts->ptail = NULL;
		x->job->running = false;
		s->running--;
		s->running_cpu -= x->job->type == PD_ST_CPU;
		ts->inst_running -= x->job->type != PD_ST_CPU;
		pthread_mutex_lock(&s->mu);
		if (ts->round_pending)
			ts->round_pending--;
		pthread_mutex_unlock(&s->mu);
		xfer_free(s, x);
		unref(s, ts);
	}
}

/* At the end: posts in flight go back to the queue, the queue is counted as
 * not delivered. */
static size_t abandon_queue(struct pd_scraper *s)
{
	for (struct xfer *x = s->xfers, *next; x; x = next) {
		next = x->next;
		if (!x->post)
			continue;
		struct pd_queue_item *it = x->item;
		x->item = NULL;
		s->posting--;
		xfer_free(s, x);
		drop_evicted(s, pd_queue_requeue(&s->q, it));
	}
	size_t n = s->q.n;
	struct pd_queue_item *it;
	while ((it = pd_queue_pop(&s->q))) {
		struct tstate *ts = it->owner;
		set_delivery(s, &ts->jobs[it->type], D_UNSENT, "not delivered: the collector did not take it in time");
		pd_queue_item_free(it);
		unref(s, ts);
	}
	update_queue_gauges(s);
	return n;
}

/* Wait until a socket is ready, curl's timer or wake is due, or another
 * thread calls loop_wakeup (at most a second); then let curl act on what
 * happened. Completed transfers are left for drain_messages. */
static void wait_and_act(struct pd_scraper *s, int64_t now, int64_t wake)
{
	if (s->curl_due >= 0 && s->curl_due < wake)
		wake = s->curl_due;
	int64_t ms = wake <= now ? 0 : (wake - now + 999999) / 1000000;
	if (ms > 1000)
		ms = 1000;
	struct epoll_event ev[64];
	int n = epoll_wait(s->epfd, ev, 64, (int)ms), still = 0;
	for (int i = 0; i < n; i++) {
		if (ev[i].data.fd == s->evfd) {
			uint64_t v;
			if (read(s->evfd, &v, sizeof v) < 0) {
				/* EAGAIN: already read */
			}
			continue;
		}
		int mask = 0;
		if (ev[i].events & (EPOLLIN | EPOLLHUP))
			mask |= CURL_CSELECT_IN;
		if (ev[i].events & EPOLLOUT)
			mask |= CURL_CSELECT_OUT;
		if (ev[i].events & EPOLLERR)
			mask |= CURL_CSELECT_ERR;
		curl_multi_socket_action(s->multi, ev[i].data.fd, mask, &still);
	}
	if (s->curl_due >= 0 && pd_mono_ns() >= s->curl_due) {
		s->curl_due = -1; /* the callback may set it again */
		curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &still);
	}
}

int pd_scraper_run(struct pd_scraper *s, struct pd_err *err)
{
	int rc = apply_targets(s, err);
	if (rc)
		return rc;
	char types[128];
	pd_scrape_types_str(s->c.types, types, sizeof types);
	if (s->c.once)
		slog(s, "info", "scraping %zu target(s) once (types %s, cpu %llds, timeout %llds) -> %s", s->nts, types,
		     (long long)(s->c.cpu_ns / 1000000000LL), (long long)(s->c.timeout_ns / 1000000000LL),
		     s->c.store ? "the store" : s->collector);
	else
		slog(s, "info",
		     "scraping %zu target(s) every %.0fs, spread over the interval (types %s, cpu %llds, timeout %llds, "
		     "concurrency %u, up to %u cpu profiles in flight) -> %s",
		     s->nts, (double)s->c.interval_ns / 1e9, types, (long long)(s->c.cpu_ns / 1000000000LL),
		     (long long)(s->c.timeout_ns / 1000000000LL), s->c.concurrency, s->cpu_limit,
		     s->c.store ? "the store" : s->collector);
	bool flushing = false;
	int64_t deadline = 0;
	for (;;) {
		int64_t now = pd_mono_ns();
		if (!flushing) {
			if ((rc = apply_targets(s, err)))
				break;
			if (atomic_load(&s->stop)) {
				cancel_fetches(s);
				flushing = true;
				deadline = now + s->c.flush_ns;
				if (s->q.n || s->posting)
					slog(s, "info", "stopping: delivering %zu queued profile(s) for up to %.0fs", s->q.n + s->posting,
					     (double)s->c.flush_ns / 1e9);
			} else {
				schedule(s, now);
				start_fetches(s, now);
				if (s->c.once && !s->running && !s->nready && next_due(s) == INT64_MAX) {
					flushing = true;
					deadline = now + s->c.flush_ns;
				}
			}
		}
		start_posts(s, now);
		if (flushing) {
			if (!s->posting && !s->q.n)
				break;
			if (now >= deadline || (s->c.once && atomic_load(&s->stop) && !s->posting))
				break;
		}
		int64_t wake = flushing ? deadline : next_due(s);
		if (s->q.n && s->posting < PD_SCRAPE_POSTS && s->post_backoff_until < wake)
			wake = s->post_backoff_until;
		wait_and_act(s, now, wake);
		drain_messages(s);
	}
	cancel_fetches(s);
	size_t left = abandon_queue(s);
	if (left)
		slog(s, "warn", "%zu profile(s) were not delivered: the collector %s did not take them within %.0fs", left,
		     s->collector, (double)s->c.flush_ns / 1e9);
	return rc;
}

void pd_scraper_stop(struct pd_scraper *s)
{
	atomic_store(&s->stop, true);
	loop_wakeup(s);
}

void pd_scraper_free(struct pd_scraper *s)
{
	if (!s)
		return;
	if (s->multi) {
		cancel_fetches(s);
		abandon_queue(s);
		curl_multi_cleanup(s->multi); /* may still call sock_cb: epfd is closed after */
	}
	while (s->npool)
		curl_easy_cleanup(s->pool[--s->npool]);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	free(s->heap);
	for (size_t i = 0; i < s->nts; i++)
		if (s->ts[i])
			tstate_free(s->ts[i]);
	while (s->retired) {
		struct tstate *n = s->retired->rnext;
		tstate_free(s->retired);
		s->retired = n;
	}
	free(s->ts);
	pd_scrape_targets_free(&s->pending);
	pthread_mutex_destroy(&s->mu);
	free(s->collector);
	if (s->auth)
		memset(s->auth, 0, strlen(s->auth));
	free(s->auth);
	free(s->state_dir);
	free(s->raw_dir);
	free(s->ua);
	free(s->target_ca);
	free(s);
}

/* ---- reports ------------------------------------------------------------------------------- */

void pd_scraper_totals(struct pd_scraper *s, struct pd_scrape_totals *t)
{
	memset(t, 0, sizeof *t);
	for (int ty = 0; ty < PD_ST_N; ty++)
		for (int r = 0; r < PD_SR_N; r++)
			t->scrapes[r] += atomic_load(&s->scrapes[ty][r]);
	t->fetched_bytes = atomic_load(&s->fetched_bytes);
	t->enqueued = atomic_load(&s->enqueued);
	t->posts_ok = atomic_load(&s->posts_ok);
	t->posts_failed = atomic_load(&s->posts_failed);
	t->posts_refused = atomic_load(&s->posts_refused);
	t->queue_dropped = atomic_load(&s->queue_dropped);
	t->stored = atomic_load(&s->stored);
	t->store_failed = atomic_load(&s->store_failed);
	t->missed_queued = atomic_load(&s->missed[MISS_QUEUED]);
	t->missed_running = atomic_load(&s->missed[MISS_RUNNING]);
	t->queue_len = atomic_load(&s->q_len);
	t->queue_bytes = atomic_load(&s->q_bytes);
}

static bool delivery_failed(int d) { return d == D_REFUSED || d == D_DROPPED || d == D_UNSENT || d == D_FAILED; }

static const char *cell(const struct job *j)
{
	if (j->result == PD_SR_NONE)
		return "-";
	if (pd_scrape_result_ok(j->result)) {
		if (j->delivery == D_REFUSED)
			return "refused";
		if (j->delivery == D_DROPPED)
			return "dropped";
		if (j->delivery == D_UNSENT || j->delivery == D_FAILED)
			return "unsent";
		if (j->delivery == D_PENDING)
			return "queued";
		if (j->result == PD_SR_OK && j->as_is)
			return "ok*";
	}
	return pd_scrape_result_name(j->result);
}

size_t pd_scraper_summary(struct pd_scraper *s, struct pd_buf *out)
{
	static const char *const heads[PD_ST_N] = {"CPU", "HEAP", "ALLOCS", "BLOCK", "MUTEX", "GOROUTINE", "THREADCREATE"};
	pthread_mutex_lock(&s->mu);
	unsigned used = 0;
	size_t wt = strlen("TARGET"), ws = strlen("SERVICE"), wc[PD_ST_N];
	for (int t = 0; t < PD_ST_N; t++)
		wc[t] = strlen(heads[t]);
	for (size_t i = 0; i < s->nts; i++) {
		struct tstate *ts = s->ts[i];
		used |= ts->types;
		wt = strlen(TN(ts)) > wt ? strlen(TN(ts)) : wt;
		ws = strlen(ts->t.service) > ws ? strlen(ts->t.service) : ws;
		for (int t = 0; t < PD_ST_N; t++)
			if (ts->types & (1u << t))
				wc[t] = strlen(cell(&ts->jobs[t])) > wc[t] ? strlen(cell(&ts->jobs[t])) : wc[t];
	}
	int rc = pd_buf_appendf(out, "%-*s  %-*s", (int)wt, "TARGET", (int)ws, "SERVICE");
	for (int t = 0; t < PD_ST_N; t++)
		if (used & (1u << t))
			rc |= pd_buf_appendf(out, "  %-*s", (int)wc[t], heads[t]);
	rc |= pd_buf_appendf(out, "  %10s  %8s\n", "BYTES", "DURATION");
	size_t failed = 0;
	bool as_is = false, base = false;
	for (size_t i = 0; i < s->nts; i++) {
		struct tstate *ts = s->ts[i];
		bool bad = false;
		rc |= pd_buf_appendf(out, "%-*s  %-*s", (int)wt, TN(ts), (int)ws, ts->t.service);
		for (int t = 0; t < PD_ST_N; t++) {
			if (!(used & (1u << t)))
				continue;
			const struct job *j = &ts->jobs[t];
			if (!(ts->types & (1u << t))) {
				rc |= pd_buf_appendf(out, "  %-*s", (int)wc[t], "");
				continue;
			}
			rc |= pd_buf_appendf(out, "  %-*s", (int)wc[t], cell(j));
			bad |= !pd_scrape_result_ok(j->result) || delivery_failed(j->delivery);
			as_is |= !strcmp(cell(j), "ok*");
			base |= j->result == PD_SR_BASE;
		}
		char b[32];
		rc |= pd_buf_appendf(out, "  %10s  %7.2fs\n", pd_fmt_bytes(b, sizeof b, (double)ts->bytes), ts->last_duration);
		failed += bad;
	}
	bool head = false;
	for (size_t i = 0; i < s->nts; i++) {
		struct tstate *ts = s->ts[i];
		for (int t = 0; t < PD_ST_N; t++) {
			const struct job *j = &ts->jobs[t];
			if (!(ts->types & (1u << t)))
				continue;
			bool e = !pd_scrape_result_ok(j->result) && j->result != PD_SR_NONE;
			bool d = pd_scrape_result_ok(j->result) && delivery_failed(j->delivery);
			if ((e || d) && !head) {
				rc |= pd_buf_appendf(out, "\nErrors:\n");
				head = true;
			}
			if (e)
				rc |= pd_buf_appendf(out, "  target %s type %s: %s\n", TN(ts), pd_scrape_type_name(t), j->msg);
			if (d)
				rc |= pd_buf_appendf(out, "  target %s type %s: %s\n", TN(ts), pd_scrape_type_name(t), j->dmsg);
		}
	}
	if (as_is)
		rc |= pd_buf_appendf(out, "\nok* = stored as it is, with the label cumulative=true: Go's allocs, block and mutex "
				   "count since the process\nstarted, so these are totals, not the last interval (merging "
				   "them double counts). Run with\n--state-dir DIR to store deltas between runs.\n");
	if (base)
		rc |= pd_buf_appendf(out, "\nbase = first snapshot of a cumulative type, kept in the state as the base: nothing "
				   "stored this time;\nthe next run stores what happened in between.\n");
	pthread_mutex_unlock(&s->mu);
	(void)rc;
	return failed;
}

static int put_lv(struct pd_buf *b, const char *v)
{
	int rc = 0;
	for (const char *p = v; *p && !rc; p++) {
		if (*p == '\\')
			rc = pd_buf_append(b, "\\\\", 2);
		else if (*p == '"')
			rc = pd_buf_append(b, "\\\"", 2);
		else if (*p == '\n')
			rc = pd_buf_append(b, "\\n", 2);
		else
			rc = pd_buf_append(b, p, 1);
	}
	return rc;
}

static int target_series(struct pd_buf *b, const char *name, const struct tstate *ts, const char *extra_k,
			 const char *extra_v, const char *value)
{
	int rc = pd_buf_appendf(b, "%s{target=\"", name);
	rc = rc ? rc : put_lv(b, TN(ts));
	rc = rc ? rc : pd_buf_append(b, "\",service=\"", 11);
	rc = rc ? rc : put_lv(b, ts->t.service);
	if (extra_k && !rc) {
		rc = pd_buf_appendf(b, "\",%s=\"", extra_k);
		rc = rc ? rc : put_lv(b, extra_v);
	}
	return rc ? rc : pd_buf_appendf(b, "\"} %s\n", value);
}

#define LD(x) ((unsigned long long)atomic_load(&(x)))

int pd_scraper_metrics(struct pd_scraper *s, struct pd_buf *b)
{
	int rc = 0;
#define HEAD(n, t, h) rc |= pd_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", n, h, n, t)
	HEAD("profd_scrape_targets", "gauge", "Targets in the scrape list.");
	rc |= pd_buf_appendf(b, "profd_scrape_targets %llu\n", LD(s->ntargets));
	pthread_mutex_lock(&s->mu);
	char v[64];
	HEAD("profd_scrape_target_up", "gauge",
	     "1 if the last scrape of the target got an answer, 0 if it was down (connect, timeout, 5xx).");
	for (size_t i = 0; i < s->nts; i++)
		if (s->ts[i]->up >= 0)
			rc |= target_series(b, "profd_scrape_target_up", s->ts[i], NULL, NULL, s->ts[i]->up ? "1" : "0");
	HEAD("profd_scrape_target_duration_seconds", "gauge", "Wall time of the target's last round of scrapes.");
	for (size_t i = 0; i < s->nts; i++) {
		sfmt(v, sizeof v, "%.6f", s->ts[i]->last_duration);
		rc |= target_series(b, "profd_scrape_target_duration_seconds", s->ts[i], NULL, NULL, v);
	}
	HEAD("profd_scrape_target_bytes_total", "counter", "Bytes fetched from the target.");
	for (size_t i = 0; i < s->nts; i++) {
		sfmt(v, sizeof v, "%llu", (unsigned long long)s->ts[i]->bytes);
		rc |= target_series(b, "profd_scrape_target_bytes_total", s->ts[i], NULL, NULL, v);
	}
	HEAD("profd_scrape_target_scrapes_total", "counter", "Scrapes of the target, by outcome (ok or failed).");
	for (size_t i = 0; i < s->nts; i++) {
		sfmt(v, sizeof v, "%llu", (unsigned long long)s->ts[i]->scrapes_ok);
		rc |= target_series(b, "profd_scrape_target_scrapes_total", s->ts[i], "outcome", "ok", v);
		sfmt(v, sizeof v, "%llu", (unsigned long long)s->ts[i]->scrapes_failed);
		rc |= target_series(b, "profd_scrape_target_scrapes_total", s->ts[i], "outcome", "failed", v);
	}
	HEAD("profd_scrape_target_last_error", "gauge",
	     "1 with the reason of the target's last failed scrape (the message is on /targets).");
	for (size_t i = 0; i < s->nts; i++)
		if (s->ts[i]->scrapes_failed)
			rc |= target_series(b, "profd_scrape_target_last_error", s->ts[i], "reason",
					    pd_scrape_result_name(s->ts[i]->last_reason), "1");
	pthread_mutex_unlock(&s->mu);
	HEAD("profd_scrape_scrapes_total", "counter", "Scrapes by profile type and result.");
	for (int t = 0; t < PD_ST_N; t++)
		for (int r = 1; r < PD_SR_N; r++) {
			unsigned long long n = LD(s->scrapes[t][r]);
			if (n)
				rc |= pd_buf_appendf(b, "profd_scrape_scrapes_total{type=\"%s\",result=\"%s\"} %llu\n",
					      pd_scrape_type_name(t), pd_scrape_result_name(r), n);
		}
	HEAD("profd_scrape_missed_total", "counter",
	     "Scheduled rounds of a (target, type) that did not happen: the job was still waiting for a slot "
	     "(queued: raise --concurrency or --cpu-concurrency) or still running (running: a slow target) at its "
	     "next due time.");
	rc |= pd_buf_appendf(b, "profd_scrape_missed_total{reason=\"queued\"} %llu\n", LD(s->missed[MISS_QUEUED]));
	rc |= pd_buf_appendf(b, "profd_scrape_missed_total{reason=\"running\"} %llu\n", LD(s->missed[MISS_RUNNING]));
	HEAD("profd_scrape_cpu_slots", "gauge",
	     "CPU profiles allowed in flight (--cpu-concurrency, or derived from the targets).");
	rc |= pd_buf_appendf(b, "profd_scrape_cpu_slots %u\n", atomic_load(&s->cpu_slots));
	HEAD("profd_scrape_fetched_bytes_total", "counter", "Bytes of profiles fetched from targets.");
	rc |= pd_buf_appendf(b, "profd_scrape_fetched_bytes_total %llu\n", LD(s->fetched_bytes));
	HEAD("profd_scrape_enqueued_total", "counter", "Profiles queued for the collector.");
	rc |= pd_buf_appendf(b, "profd_scrape_enqueued_total %llu\n", LD(s->enqueued));
	HEAD("profd_scrape_queue_length", "gauge", "Profiles waiting for the collector (not counting posts in flight).");
	rc |= pd_buf_appendf(b, "profd_scrape_queue_length %llu\n", LD(s->q_len));
	HEAD("profd_scrape_queue_bytes", "gauge", "Bytes waiting for the collector.");
	rc |= pd_buf_appendf(b, "profd_scrape_queue_bytes %llu\n", LD(s->q_bytes));
	HEAD("profd_scrape_queue_max_bytes", "gauge", "Capacity of the delivery queue (--queue-size).");
	rc |= pd_buf_appendf(b, "profd_scrape_queue_max_bytes %zu\n", s->q.max_bytes);
	HEAD("profd_scrape_queue_dropped_total", "counter", "Oldest profiles dropped because the queue was full.");
	rc |= pd_buf_appendf(b, "profd_scrape_queue_dropped_total %llu\n", LD(s->queue_dropped));
	HEAD("profd_scrape_posts_total", "counter",
	     "POSTs to the collector: ok (200), failed (retried: 5xx, 408, 429, connection errors), refused (other "
	     "4xx, dropped).");
	rc |= pd_buf_appendf(b, "profd_scrape_posts_total{result=\"ok\"} %llu\n", LD(s->posts_ok));
	rc |= pd_buf_appendf(b, "profd_scrape_posts_total{result=\"failed\"} %llu\n", LD(s->posts_failed));
	rc |= pd_buf_appendf(b, "profd_scrape_posts_total{result=\"refused\"} %llu\n", LD(s->posts_refused));
	HEAD("profd_scrape_posts_in_flight", "gauge", "POSTs to the collector in flight.");
	rc |= pd_buf_appendf(b, "profd_scrape_posts_in_flight %llu\n", LD(s->posts_in_flight));
	if (s->c.store) {
		HEAD("profd_scrape_stored_total", "counter", "Profiles written to the store by the in-process sink.");
		rc |= pd_buf_appendf(b, "profd_scrape_stored_total{result=\"ok\"} %llu\n", LD(s->stored));
		rc |= pd_buf_appendf(b, "profd_scrape_stored_total{result=\"failed\"} %llu\n", LD(s->store_failed));
	}
	HEAD("profd_scrape_start_time_seconds", "gauge", "Start time of the scraper, unix seconds.");
	rc |= pd_buf_appendf(b, "profd_scrape_start_time_seconds %.3f\n", (double)s->start_real / 1e9);
#undef HEAD
	pthread_mutex_lock(&s->mu);
	pd_scrape_metrics_fn fn = s->metrics_hook;
	void *ctx = s->metrics_ctx;
	pthread_mutex_unlock(&s->mu);
	if (fn && !rc)
		rc = fn(ctx, b);
	return rc ? PD_ENOMEM : 0;
}

void pd_scraper_set_metrics_hook(struct pd_scraper *s, pd_scrape_metrics_fn fn, void *ctx)
{
	pthread_mutex_lock(&s->mu);
	s->metrics_hook = fn;
	s->metrics_ctx = ctx;
	pthread_mutex_unlock(&s->mu);
}
