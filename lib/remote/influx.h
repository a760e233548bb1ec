/*
 * influx.h — `profd serve --export-influx URL`: push the top functions of
 * the profiles as time series to InfluxDB (or anything that takes line
 * protocol: Telegraf's http listener, VictoriaMetrics, QuestDB...), next to
 * the CPU and memory metrics they should be correlated with.
 *
 * Time is cut in windows of `every`, aligned to the Unix epoch (as the
 * steps of GET /api/1/series). A window [t, t + every) is pushed `delay`
 * after it ends (profiles are created at the start of their collection and
 * arrive later): per (service, type) of the profiles the selector matches,
 * the window's total and its `top` functions by flat, as the lines
 * /api/1/series?format=influx&step=<every>&by=service,function writes
 * (measurement profd_profile, integer field value, timestamp t in ns). A
 * window without profiles sends nothing.
 *
 * One thread, its own HTTP client: a slow or failing endpoint never blocks
 * the server. Failures are logged (one line each) and counted in /metrics
 * (profd_export_*); a failed window is not retried (the next one is pushed
 * on time).
 */
#ifndef PD_REMOTE_INFLUX_H
#define PD_REMOTE_INFLUX_H

#include <stdio.h>

#include "../query/query.h"

#define PD_EXPORT_DEFAULT_EVERY_NS   (60LL * 1000000000LL)
#define PD_EXPORT_DEFAULT_DELAY_NS   (30LL * 1000000000LL)
#define PD_EXPORT_DEFAULT_TOP        10
#define PD_EXPORT_MAX_TOP            1000
#define PD_EXPORT_DEFAULT_TIMEOUT_NS (10LL * 1000000000LL)
#define PD_EXPORT_DEFAULT_QUERY      "cpu"

struct pd_export_config {
	const char *url;     /* the write URL, used as given (e.g. .../api/v2/write?org=o&bucket=b&precision=ns) */
	int64_t every_ns;    /* window; >= 1s, whole seconds */
	int64_t delay_ns;    /* push a window this long after it ends; >= 0 */
	size_t top;          /* functions per (service, type) */
	const char *query;   /* which profiles (a selector); NULL = PD_EXPORT_DEFAULT_QUERY */
	const char *token;   /* sent as "Authorization: Token <token>" (InfluxDB 2); NULL = none */
	int64_t timeout_ns;  /* per push */
	size_t max_profiles; /* per window (--max-merge-profiles); 0 = no cap */
	FILE *log;           /* one logfmt line per failure (and per push when verbose); NULL = none */
	bool verbose;        /* log successful pushes too */
};
/* Defaults in every field but url. */
void pd_export_config_default(struct pd_export_config *c);
/* Check a configuration without starting (URL scheme, selector, numbers):
 * PD_EUSAGE with the reason, naming the flag. */
int pd_export_check(const struct pd_export_config *c, struct pd_err *err) PD_WUR;

/* The lines of one window [start, start + every) into out; *lines = how many
 * (0: no profiles, nothing appended). A service (and type) whose profiles
 * cannot give a series (sample types that differ, ...) is left out, the others
 * exported: then err->msg says which and why, with err->code 0. */
int pd_export_window(struct pd_store *st, const struct pd_selector *sel, int64_t start_ns, int64_t every_ns,
		     size_t top, size_t max_profiles, struct pd_buf *out, size_t *lines, struct pd_err *err) PD_WUR;

struct pd_exporter;
/* Start the thread (st is borrowed and must outlive the exporter). */
int pd_exporter_start(const struct pd_export_config *c, struct pd_store *st, struct pd_exporter **out,
		      struct pd_err *err) PD_WUR;
/* Stop (an HTTP request in flight is abandoned), join, free. NULL is fine. */
void pd_exporter_free(struct pd_exporter *e);
/* The profd_export_* series, appended to out (a metrics_extra hook). */
int pd_exporter_metrics(void *e, struct pd_buf *out);

#endif
