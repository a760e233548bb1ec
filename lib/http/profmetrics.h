/*
 * profmetrics.h — GET /metrics/profiles: what the profiles say, as gauges a
 * Prometheus scrapes next to the services' own metrics (docs/api.md
 * "/metrics/profiles"). Per service: the CPU it used in cores and its top
 * functions' share of it, and for the other types (heap, allocs, ...) their
 * default sample type's value, total and top functions — over the latest
 * complete window (the epoch-aligned steps of /api/1/series, a delay after
 * their end so late uploads are in), normalised as API v1 normalises.
 *
 * Computed once per window (cached: a scrape every 15 s costs nothing more)
 * and capped in series: at most `max_series`, the largest first; what is
 * cut is counted (profd_profile_metrics_dropped_series). A service whose
 * profiles cannot give its series (a cpu profile without CPU time in
 * nanoseconds, sample types that differ within the window) is left out,
 * counted (profd_profile_metrics_skipped_groups) and logged: the others are
 * still answered.
 */
#ifndef PD_HTTP_PROFMETRICS_H
#define PD_HTTP_PROFMETRICS_H

#include "../query/query.h"

#include <stdio.h>

#define PD_PROFMETRICS_WINDOW_NS  (300LL * 1000000000LL) /* 5m */
#define PD_PROFMETRICS_DELAY_NS   (30LL * 1000000000LL)
#define PD_PROFMETRICS_TOP        10
#define PD_PROFMETRICS_MAX_SERIES 2000

struct pd_profmetrics_config {
	int64_t window_ns;   /* >= 1s, whole seconds */
	int64_t delay_ns;    /* a window is final this long after it ends */
	size_t top;          /* functions per service and type */
	size_t max_series;   /* all series of the answer */
	size_t max_profiles; /* per window (--max-merge-profiles); 0 = no cap */
	const char *query;   /* which profiles (a selector); NULL = every profile */
	FILE *log;           /* a warning per window with services left out, and why; NULL = none */
};
void pd_profmetrics_config_default(struct pd_profmetrics_config *c);

struct pd_profmetrics;
int pd_profmetrics_new(const struct pd_profmetrics_config *c, struct pd_profmetrics **out, struct pd_err *err) PD_WUR;
void pd_profmetrics_free(struct pd_profmetrics *p);
/* The exposition text for now_ns into out (appended). */
int pd_profmetrics_render(struct pd_profmetrics *p, struct pd_store *st, int64_t now_ns, struct pd_buf *out,
                          struct pd_err *err) PD_WUR;

#endif
