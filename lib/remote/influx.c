/*
 * influx.c — the --export-influx pusher (contract in influx.h): one thread
 * that wakes when a window is due, computes its lines with the series code
 * (lib/query/series.c, the same lines /api/1/series?format=influx writes)
 * and POSTs them with libcurl. The thread owns its curl handle; the server
 * only reads the atomic counters (/metrics). Stopping wakes the thread and
 * aborts a request in flight through curl's progress callback.
 */
#define _GNU_SOURCE
#include "influx.h"
#include "../http/params.h"
#include "../query/series.h"

#include "../util/pdcurl.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT_MAX_ANSWER 4096 /* bytes of an answer kept for the log */

void pd_export_config_default(struct pd_export_config *c)
{
	memset(c, 0, sizeof *c);
	c->every_ns = PD_EXPORT_DEFAULT_EVERY_NS;
	c->delay_ns = PD_EXPORT_DEFAULT_DELAY_NS;
	c->top = PD_EXPORT_DEFAULT_TOP;
	c->query = PD_EXPORT_DEFAULT_QUERY;
	c->timeout_ns = PD_EXPORT_DEFAULT_TIMEOUT_NS;
}

int pd_export_check(const struct pd_export_config *c, struct pd_err *err)
{
	if (!c->url || (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8)) || strlen(c->url) < 9)
		return pd_errf(err, PD_EUSAGE, "--export-influx: want an http:// or https:// URL (e.g. "
					       "http://influxdb:8086/api/v2/write?org=o&bucket=b&precision=ns), got '%s'",
			       c->url ? c->url : "");
	for (const char *p = c->url; *p; p++)
		if ((unsigned char)*p <= ' ')
			return pd_errf(err, PD_EUSAGE, "--export-influx: the URL has white space or control bytes");
	if (c->every_ns < PD_SERIES_MIN_STEP_NS || c->every_ns % 1000000000LL)
		return pd_errf(err, PD_EUSAGE, "--export-every: want whole seconds, at least 1s");
	if (c->delay_ns < 0)
		return pd_errf(err, PD_EUSAGE, "--export-delay must not be negative");
	if (c->top < 1 || c->top > PD_EXPORT_MAX_TOP)
		return pd_errf(err, PD_EUSAGE, "--export-top: want 1..%d", PD_EXPORT_MAX_TOP);
	struct pd_selector sel;
	struct pd_err e = {0};
	if (pd_selector_parse(c->query ? c->query : PD_EXPORT_DEFAULT_QUERY, &sel, &e))
		return pd_errf(err, PD_EUSAGE, "--export-query: %s", e.msg);
	pd_selector_free(&sel);
	return 0;
}

int pd_export_window(struct pd_store *st, const struct pd_selector *sel, int64_t start_ns, int64_t every_ns,
		     size_t top, size_t max_profiles, struct pd_buf *out, size_t *lines, struct pd_err *err)
{
	*lines = 0;
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	int rc = pd_query_select(st, sel, start_ns, start_ns + every_ns - 1, max_profiles, &v, &n, err);
	if (rc || n == 0) {
		pd_query_metas_free(v, n);
		return rc;
	}
	struct pd_series_spec spec;
	pd_series_spec_window(&spec, start_ns, every_ns, top);
	struct pd_series_set set;
	rc = pd_series_compute(st, v, n, &spec, &set, err);
	pd_query_metas_free(v, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < set.n; i++)
		*lines += set.v[i].npoints;
	if (set.skipped && err)
		snprintf(err->msg, sizeof err->msg, "%zu series group(s) left out: %s", set.skipped,
			 set.skipped_why ? set.skipped_why : "out of memory");
	if ((rc = pd_series_influx(&set, &spec, out)))
		rc = pd_errf(err, rc, "export: out of memory");
	pd_series_set_free(&set);
	return rc;
}

/* ---- the thread -------------------------------------------------------------------- */

struct pd_exporter {
	struct pd_export_config c;
	char *url, *query, *auth;
	struct pd_store *st;
	struct pd_selector sel;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool stop;
	/* counters (read by /metrics) */
	_Atomic uint64_t ok, empty, failed, lines, bytes;
	_Atomic int64_t last_ok_ns; /* wall time of the last successful push */
};


static void logf_(struct pd_exporter *e, const char *level, const char *fmt, ...) PD_PRINTF(3, 4);
static void logf_(struct pd_exporter *e, const char *level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pd_log_vf(e->c.log, false, level, "export", fmt, ap);
	va_end(ap);
}

static size_t write_cb(char *p, size_t sz, size_t n, void *ctx)
{
	struct pd_buf *b = ctx;
	size_t len = sz * n, room = EXPORT_MAX_ANSWER > b->len ? EXPORT_MAX_ANSWER - b->len : 0;
	if (pd_buf_append(b, p, len < room ? len : room))
		return 0;
	return len;
}

static int progress_cb(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct pd_exporter *e = ctx;
	return atomic_load(&e->stop) ? 1 : 0;
}

/* POST body; 0 on a 2xx answer, else err says what happened. */
static int push(struct pd_exporter *e, CURL *h, struct curl_slist *hdrs, const struct pd_buf *body, struct pd_err *err)
{
	struct pd_buf ans = PD_BUF_INIT(0);
	char errbuf[CURL_ERROR_SIZE] = "";
	long tmo = (long)(e->c.timeout_ns / 1000000);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, e->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, tmo);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "profd-export");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)body->ptr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &ans);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, e);
	CURLcode cc = curl_easy_perform(h);
	int rc = 0;
	if (cc != CURLE_OK) {
		rc = pd_errf(err, PD_EIO, "POST %s: %s", e->url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else {
		long status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (status < 200 || status > 299) {
			/* the answer's first line, printable bytes only */
			char first[240];
			size_t k = 0;
			for (size_t i = 0; i < ans.len && k + 1 < sizeof first && ans.ptr[i] != '\n'; i++)
				if (ans.ptr[i] >= ' ' && ans.ptr[i] < 0x7f)
					first[k++] = (char)ans.ptr[i];
			first[k] = 0;
			rc = pd_errf(err, PD_EIO, "POST %s: answered %ld%s%s", e->url, status, k ? ": " : "", first);
		}
	}
	pd_buf_free(&ans);
	return rc;
}

/* Sleep until wall time t (or stop); false when stopping. */
static bool sleep_until(struct pd_exporter *e, int64_t t)
{
	pthread_mutex_lock(&e->mu);
	while (!atomic_load(&e->stop)) {
		int64_t now = pd_wall_ns();
		if (now >= t)
			break;
		struct timespec ts = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
		pthread_cond_timedwait(&e->cv, &e->mu, &ts);
	}
	pthread_mutex_unlock(&e->mu);
	return !atomic_load(&e->stop);
}

static void *run(void *arg)
{
	struct pd_exporter *e = arg;
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: text/plain; charset=utf-8");
	struct curl_slist *h2 = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
	if (h2)
		hdrs = h2;
	if (h2 && e->auth && (h2 = curl_slist_append(hdrs, e->auth)))
		hdrs = h2;
	if (!h || !h2) {
		logf_(e, "error", "cannot start: out of memory (libcurl)");
		goto out;
	}
	int64_t every = e->c.every_ns;
	/* the first window: the one open now (minus the delay) */
	int64_t start = pd_series_step_start(pd_wall_ns() - e->c.delay_ns, every);
	while (sleep_until(e, start + every + e->c.delay_ns)) {
		struct pd_buf body = PD_BUF_INIT(0);
		struct pd_err err = {0};
		size_t lines = 0;
		int64_t t0 = pd_wall_ns();
		int rc = pd_export_window(e->st, &e->sel, start, every, e->c.top, e->c.max_profiles, &body, &lines, &err);
		char a[PD_API_TIME_BUFSZ];
		pd_api_format_time(start, a, sizeof a);
		if (!rc && err.msg[0])
			logf_(e, "warn", "window %s: %s", a, err.msg);
		if (rc) {
			atomic_fetch_add(&e->failed, 1);
			logf_(e, "error", "window %s: %s", a, err.msg);
		} else if (!lines) {
			atomic_fetch_add(&e->empty, 1);
		} else if ((rc = push(e, h, hdrs, &body, &err))) {
			if (!atomic_load(&e->stop)) {
				atomic_fetch_add(&e->failed, 1);
				logf_(e, "error", "window %s: %zu lines not delivered: %s", a, lines, err.msg);
			}
		} else {
			atomic_fetch_add(&e->ok, 1);
			atomic_fetch_add(&e->lines, lines);
			atomic_fetch_add(&e->bytes, body.len);
			atomic_store(&e->last_ok_ns, pd_wall_ns());
			if (e->c.verbose)
				logf_(e, "info", "window %s: %zu lines pushed in %.3fs", a, lines,
				      (double)(pd_wall_ns() - t0) / 1e9);
		}
		pd_buf_free(&body);
		/* next window; if pushing fell behind by more than a window, skip to the latest due one */
		start += every;
		int64_t latest = pd_series_step_start(pd_wall_ns() - e->c.delay_ns, every) - every;
		if (latest > start) {
			logf_(e, "warn", "%lld window(s) skipped: the exporter fell behind",
			      (long long)((latest - start) / every));
			atomic_fetch_add(&e->failed, (uint64_t)((latest - start) / every));
			start = latest;
		}
	}
out:
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int pd_exporter_start(const struct pd_export_config *c, struct pd_store *st, struct pd_exporter **out,
		      struct pd_err *err)
{
	*out = NULL;
	int rc = pd_export_check(c, err);
	if (rc)
		return rc;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return pd_errf(err, PD_EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	struct pd_exporter *e = calloc(1, sizeof *e);
	if (!e)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	e->c = *c;
	e->st = st;
	e->url = strdup(c->url);
	e->query = strdup(c->query ? c->query : PD_EXPORT_DEFAULT_QUERY);
	if (c->token) {
		size_t n = strlen(c->token) + 32;
		if ((e->auth = malloc(n)))
			snprintf(e->auth, n, "Authorization: Token %s", c->token);
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if (!e->url || !e->query || (c->token && !e->auth)) {
		pd_exporter_free(e);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	e->c.url = e->url;
	e->c.query = e->query;
	e->c.token = NULL; /* only in e->auth */
	if ((rc = pd_selector_parse(e->query, &e->sel, err))) {
		pd_exporter_free(e);
		return rc;
	}
	if (pthread_create(&e->th, NULL, run, e)) {
		pd_exporter_free(e);
		return pd_errf(err, PD_EIO, "export: cannot start a thread");
	}
	e->started = true;
	*out = e;
	return 0;
}

void pd_exporter_free(struct pd_exporter *e)
{
	if (!e)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->mu);
		atomic_store(&e->stop, true);
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->th, NULL);
	}
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	pd_selector_free(&e->sel);
	free(e->url);
	free(e->query);
	if (e->auth) {
		memset(e->auth, 0, strlen(e->auth));
		free(e->auth);
	}
	free(e);
}

int pd_exporter_metrics(void *ctx, struct pd_buf *out)
{
	struct pd_exporter *e = ctx;
	char b[2048];
	int64_t last = atomic_load(&e->last_ok_ns);
	int n = snprintf(b, sizeof b,
			 "# HELP profd_export_windows_total Windows of --export-influx by result: ok (pushed), empty "
			 "(no profiles), error (not computed or not delivered).\n"
			 "# TYPE profd_export_windows_total counter\n"
			 "profd_export_windows_total{result=\"ok\"} %" PRIu64 "\n"
			 "profd_export_windows_total{result=\"empty\"} %" PRIu64 "\n"
			 "profd_export_windows_total{result=\"error\"} %" PRIu64 "\n"
			 "# HELP profd_export_lines_total Lines of line protocol delivered.\n"
			 "# TYPE profd_export_lines_total counter\n"
			 "profd_export_lines_total %" PRIu64 "\n"
			 "# HELP profd_export_bytes_total Bytes of line protocol delivered.\n"
			 "# TYPE profd_export_bytes_total counter\n"
			 "profd_export_bytes_total %" PRIu64 "\n"
			 "# HELP profd_export_last_success_timestamp_seconds When the last push succeeded (0: never).\n"
			 "# TYPE profd_export_last_success_timestamp_seconds gauge\n"
			 "profd_export_last_success_timestamp_seconds %.3f\n",
			 atomic_load(&e->ok), atomic_load(&e->empty), atomic_load(&e->failed), atomic_load(&e->lines),
			 atomic_load(&e->bytes), (double)last / 1e9);
	if (n < 0 || (size_t)n >= sizeof b)
		return PD_ENOMEM;
	return pd_buf_append(out, b, (size_t)n);
}
