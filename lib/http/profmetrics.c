/*
 * profmetrics.c — GET /metrics/profiles (profmetrics.h): the latest window's
 * series (lib/query/series.c, as /api/1/series computes them) as Prometheus
 * gauges, cached per window.
 */
#include "profmetrics.h"
#include "../query/series.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pd_profmetrics {
	struct pd_profmetrics_config c;
	struct pd_selector sel;
	pthread_mutex_t mu;
	int64_t cached_start; /* the window the cache is of; INT64_MIN = none */
	struct pd_buf cache;
};

void pd_profmetrics_config_default(struct pd_profmetrics_config *c)
{
	memset(c, 0, sizeof *c);
	c->window_ns = PD_PROFMETRICS_WINDOW_NS;
	c->delay_ns = PD_PROFMETRICS_DELAY_NS;
	c->top = PD_PROFMETRICS_TOP;
	c->max_series = PD_PROFMETRICS_MAX_SERIES;
}

int pd_profmetrics_new(const struct pd_profmetrics_config *c, struct pd_profmetrics **out, struct pd_err *err)
{
	*out = NULL;
	if (c->window_ns < PD_SERIES_MIN_STEP_NS || c->window_ns % 1000000000LL)
		return pd_errf(err, PD_EUSAGE, "--profile-metrics-window: want whole seconds, at least 1s");
	if (c->delay_ns < 0 || c->top < 1 || c->top > 1000 || c->max_series < 1)
		return pd_errf(err, PD_EUSAGE,
		               "--profile-metrics-*: a delay >= 0, a top of 1..1000, a series cap >= 1");
	struct pd_profmetrics *p = calloc(1, sizeof *p);
	if (!p)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	p->c = *c;
	int rc = pd_selector_parse(c->query ? c->query : "{}", &p->sel, err);
	if (rc) {
		pd_err_prefix(err, "--profile-metrics-query");
		free(p);
		return PD_EUSAGE;
	}
	pthread_mutex_init(&p->mu, NULL);
	p->cached_start = INT64_MIN;
	p->cache = (struct pd_buf)PD_BUF_INIT(0);
	*out = p;
	return 0;
}

void pd_profmetrics_free(struct pd_profmetrics *p)
{
	if (!p)
		return;
	pd_selector_free(&p->sel);
	pd_buf_free(&p->cache);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

static int esc(struct pd_buf *b, const char *s)
{
	return pd_prom_escape_value(b, s ? s : "", s ? strlen(s) : 0);
}

/* One pass of the series code over v[0..n) (cores: cpu in cores). */
static int series_of(struct pd_store *st, struct pd_profile_meta *v, size_t n, int64_t start, int64_t win, size_t top,
                     bool cores, struct pd_series_set *set, struct pd_err *err)
{
	struct pd_series_spec spec;
	pd_series_spec_window(&spec, start, win, top);
	spec.cores = cores;
	return pd_series_compute(st, v, n, &spec, set, err);
}

/* One series set's lines (the largest first, while *left lasts; the others
 * counted in *dropped): cpu in cores, or the other types' values. */
static int gauges(struct pd_buf *b, const struct pd_series_set *set, bool cpu, size_t *left, size_t *dropped)
{
	int bad = 0;
	for (size_t i = 0; !bad && i < set->n; i++) {
		const struct pd_series *s = &set->v[i];
		if (!s->npoints)
			continue;
		if (!*left) {
			(*dropped)++;
			continue;
		}
		(*left)--;
		bad =
		    pd_buf_appendf(b, cpu ? "profd_profile_cpu_cores{service=\"" : "profd_profile_value{service=\"") ||
		    esc(b, s->labels[0]);
		if (!cpu)
			bad = bad || pd_buf_appendf(b, "\",type=\"") || esc(b, s->type) ||
			      pd_buf_appendf(b, "\",sample_type=\"") || esc(b, s->sample_type) ||
			      pd_buf_appendf(b, "\",unit=\"") || esc(b, s->unit);
		bad = bad || pd_buf_appendf(b, "\",function=\"") || esc(b, s->function);
		bad = bad || (cpu ? pd_buf_appendf(b, "\"} %.6g\n", s->points[0].cores)
		                  : pd_buf_appendf(b, "\"} %lld\n", (long long)s->points[0].value));
	}
	return bad;
}

static int compute(struct pd_profmetrics *p, struct pd_store *st, int64_t start, struct pd_buf *b, struct pd_err *err)
{
	int64_t win = p->c.window_ns;
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	int rc = pd_query_select(st, &p->sel, start, start + win - 1, p->c.max_profiles, &v, &n, err);
	if (rc)
		return rc;
	/* cpu in nanoseconds gets cores; the other types their values */
	size_t ncpu = 0, skipped = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].type, "cpu")) {
			struct pd_profile_meta t = v[ncpu];
			v[ncpu++] = v[i];
			v[i] = t;
		}
	struct pd_series_set cs = {0}, os = {0};
	if (ncpu && (rc = series_of(st, v, ncpu, start, win, p->c.top, true, &cs, err)))
		goto out;
	if (n > ncpu && (rc = series_of(st, v + ncpu, n - ncpu, start, win, p->c.top, false, &os, err)))
		goto out;
	for (int k = 0; k < 2; k++) {
		const struct pd_series_set *set = k ? &os : &cs;
		skipped += set->skipped;
		if (set->skipped && p->c.log) {
			char msg[768];
			snprintf(msg, sizeof msg,
			         "/metrics/profiles: the window at %lld (unix seconds): %zu %s series group(s) left out: %s",
			         (long long)(start / 1000000000LL), set->skipped, k ? "non-cpu" : "cpu",
			         set->skipped_why ? set->skipped_why : "out of memory");
			pd_log_line(p->c.log, "warn", "metrics", msg);
		}
	}
	size_t left = p->c.max_series, dropped = 0;
	int bad =
	    pd_buf_appendf(b, "# HELP profd_profile_cpu_cores CPU the profiled processes used, in cores, over the "
	                      "window: per service its total (function=\"\") and top functions by flat\n"
	                      "# TYPE profd_profile_cpu_cores gauge\n");
	bad = bad || gauges(b, &cs, true, &left, &dropped);
	bad = bad || pd_buf_appendf(b, "# HELP profd_profile_value The profiles' default sample type (heap: "
	                               "inuse_space, ...) over the window, normalised as API v1 (snapshots "
	                               "averaged per process): per service and type its total (function=\"\") and top "
	                               "functions by flat\n"
	                               "# TYPE profd_profile_value gauge\n");
	bad = bad || gauges(b, &os, false, &left, &dropped);
	bad = bad || pd_buf_appendf(
	                 b,
	                 "# HELP profd_profile_metrics_window_end_timestamp_seconds The end of the window the "
	                 "values are of (unix seconds).\n"
	                 "# TYPE profd_profile_metrics_window_end_timestamp_seconds gauge\n"
	                 "profd_profile_metrics_window_end_timestamp_seconds %lld\n"
	                 "# HELP profd_profile_metrics_window_seconds The window's length (--profile-metrics-window).\n"
	                 "# TYPE profd_profile_metrics_window_seconds gauge\n"
	                 "profd_profile_metrics_window_seconds %lld\n"
	                 "# HELP profd_profile_metrics_profiles Profiles the window's values come from.\n"
	                 "# TYPE profd_profile_metrics_profiles gauge\n"
	                 "profd_profile_metrics_profiles %zu\n"
	                 "# HELP profd_profile_metrics_dropped_series Series left out by the cap "
	                 "(--profile-metrics-max-series), the smallest first.\n"
	                 "# TYPE profd_profile_metrics_dropped_series gauge\n"
	                 "profd_profile_metrics_dropped_series %zu\n"
	                 "# HELP profd_profile_metrics_skipped_groups Services (per type) left out of the window: "
	                 "their profiles cannot give a series (a cpu profile without CPU time in nanoseconds, sample "
	                 "types that differ); logged with the reason.\n"
	                 "# TYPE profd_profile_metrics_skipped_groups gauge\n"
	                 "profd_profile_metrics_skipped_groups %zu\n",
	                 (long long)((start + win) / 1000000000LL), (long long)(win / 1000000000LL), n, dropped,
	                 skipped);
	if (bad)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
out:
	pd_series_set_free(&cs);
	pd_series_set_free(&os);
	pd_query_metas_free(v, n);
	return rc;
}

int pd_profmetrics_render(struct pd_profmetrics *p, struct pd_store *st, int64_t now_ns, struct pd_buf *out,
                          struct pd_err *err)
{
	int64_t win = p->c.window_ns;
	int64_t end = now_ns - p->c.delay_ns;
	int64_t start = (end / win) * win - win; /* the latest window that ended delay ago */
	pthread_mutex_lock(&p->mu);
	int rc = 0;
	if (p->cached_start != start) {
		struct pd_buf b = PD_BUF_INIT(0);
		rc = compute(p, st, start, &b, err);
		if (!rc) {
			pd_buf_free(&p->cache);
			p->cache = b;
			p->cached_start = start;
		} else {
			pd_buf_free(&b);
		}
	}
	if (!rc && pd_buf_append(out, p->cache.ptr ? (const char *)p->cache.ptr : "", p->cache.len))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	pthread_mutex_unlock(&p->mu);
	return rc;
}
