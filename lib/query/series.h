/*
 * series.h — profiles as time series (GET /api/1/series, docs/api.md) and
 * their text forms: Prometheus exposition and InfluxDB line protocol (also
 * what `profd serve --export-influx` pushes).
 *
 * A series is the cost of one function (or of the whole profile) per step:
 * the steps are the multiples of step_ns since the Unix epoch; a step's
 * value is computed on the merge of the profiles created in [t, t + step)
 * (within [from, to]) of one group: the profile type plus the values of the
 * `by` labels. Steps where a group has no profile have no point; a step
 * where it has profiles but not the function has the value 0.
 *
 * The per-step computation is pd_series_step: merged profile in,
 * per-function flat/cum out. pd_series_compute_range answers the same from
 * the store's range operations per (service, step) instead: the rollups'
 * function tables (pd_store_fn_totals) for steps holding a whole UTC hour,
 * a range merge (pd_store_merge_range) into pd_series_step otherwise.
 */
#ifndef PD_QUERY_SERIES_H
#define PD_QUERY_SERIES_H

#include "query.h"
#include "normalize.h"

#define PD_SERIES_MAX_POINTS       11000   /* points per series (Prometheus's resolution limit) */
#define PD_SERIES_MAX_SERIES       1000    /* series in one answer (more: ask for the top n) */
#define PD_SERIES_MAX_TOTAL_POINTS 500000  /* points in one answer, all series */
#define PD_SERIES_MAX_BY           8       /* grouping labels */
#define PD_SERIES_MAX_FUNCTIONS    1000000 /* distinct (group, function) pairs seen while computing */
#define PD_SERIES_DEFAULT_STEP_NS  (300LL * 1000000000LL)
#define PD_SERIES_MIN_STEP_NS      1000000000LL

/* The metric (Prometheus) and measurement (InfluxDB) names. */
#define PD_SERIES_METRIC      "profd_profile_value"
#define PD_SERIES_MEASUREMENT "profd_profile"

/*
 * One step: the total of sample index si of p (the sum of its values), and
 *  - by_function: fn once per distinct function name (frames named as
 *    `pprof -top` names them) that re matches (re NULL = every function),
 *    with the function's flat and cum exactly as pd_top_compute;
 *  - !by_function and re: fn once with name {NULL, 0}: flat = the samples
 *    whose leaf frame matches, cum = the samples with any frame matching
 *    (each sample counted once);
 *  - !by_function and no re: only the total.
 * A non-zero return of fn stops and is returned.
 */
typedef int (*pd_series_row_fn)(void *ctx, struct pd_str function, int64_t flat, int64_t cum);
int pd_series_step(const struct pd_profile *p, uint32_t si, const struct pd_regex *re, bool by_function, int64_t *total,
		   pd_series_row_fn fn, void *ctx, struct pd_err *err) PD_WUR;

/* What to compute. */
struct pd_series_spec {
	int64_t from_ns, to_ns, step_ns; /* [from, to] inclusive; step >= PD_SERIES_MIN_STEP_NS */
	const char *const *by;           /* grouping label names ("service" = the service); may be empty */
	size_t nby;
	bool by_function;        /* one series per function (that re matches) */
	const struct pd_regex *re;       /* NULL: every function (by_function) or the profile total */
	bool cum;                /* function values: cum instead of flat */
	const char *sample_index; /* pprof -sample_index (name or number); NULL = the profiles' default */
	size_t top;              /* 0 = every series (more than max_series: PD_EINVAL); else the top n by sum
				  * of |values| */
	bool top_per_group;      /* top applies per group (the exporter: top n functions per service) */
	bool with_total;         /* by_function: also each group's total (function NULL) */
	size_t max_series;       /* 0 = PD_SERIES_MAX_SERIES */
	bool normalize;          /* per (group, step), as normalize.h: gauges averaged per source, cumulative
				  * snapshots differenced (against the source's latest snapshot of an earlier
				  * step); false: the step's profiles summed */
	bool cores;              /* also each point in cores (cpu in nanoseconds only, else PD_EINVAL): value /
				  * the step's profiled wall time x its sources */
	bool skip_bad_groups;    /* a group whose profiles cannot give its series (PD_EINVAL, PD_EINCOMPAT: a
				  * sample type that does not fit, profiles that do not merge) is left out, counted
				  * in out->skipped, instead of failing the answer: the exporters, where one
				  * service's odd uploads must not take every other service's series away */
};

struct pd_series_point {
	int64_t t_ns; /* the step's start */
	int64_t value;
	double cores; /* spec->cores: the value in cores; else 0 */
};

struct pd_series {
	const char **labels;     /* values of spec->by, in order; "" for a profile without the label */
	const char *type;        /* the profiles' type: cpu, heap... */
	const char *function;    /* NULL: the total, or the sum over the matching functions */
	const char *sample_type, *unit;
	struct pd_series_point *points;
	size_t npoints;
	int64_t sum;             /* sum of |values|: the rank */
	size_t profiles;         /* profiles of the group */
};

struct pd_series_set {
	struct pd_series *v;     /* ranked: sum desc, then type, labels, function */
	size_t n;
	size_t matched;          /* series before top */
	size_t profiles;         /* profiles merged */
	size_t merges;           /* (group, step) merges done (normalised: parts); range path: store range calls */
	struct pd_norm_info norm; /* what normalisation did (spec->normalize) */
	bool rollups;            /* range path: some hour came from a rollup */
	size_t raw;              /* range path: profiles merged from their own sample blocks */
	size_t skipped;          /* spec->skip_bad_groups: groups left out */
	const char *skipped_why; /* the first one's error (arena), or NULL */
	struct pd_arena *arena;  /* owns everything */
};

/* Steps of [from, to] with step (aligned to the epoch); 0 if step < 1. */
int64_t pd_series_nsteps(int64_t from_ns, int64_t to_ns, int64_t step_ns);
/* The start of the step holding t (floor to a multiple of step). */
int64_t pd_series_step_start(int64_t t_ns, int64_t step_ns);

/*
 * The series of the profiles v[0..n) (a selection: pd_query_select), merged
 * per (group, step) in st. Errors: PD_EINVAL for the caps (points per
 * series, series, points) and a sample_index no profile has, with messages
 * naming the cap or the parameter; the store's (PD_EINCOMPAT for profiles
 * of one group and step that cannot be merged).
 */
/* The spec of one window [start, start + win) per service: its total and
 * its top functions by flat (top per service), normalised, a service whose
 * profiles cannot give a series left out (skip_bad_groups): what the
 * exporter pushes and /metrics/profiles shows. by must outlive the spec. */
void pd_series_spec_window(struct pd_series_spec *spec, int64_t start_ns, int64_t win_ns, size_t top);
int pd_series_compute(struct pd_store *st, const struct pd_profile_meta *v, size_t n,
		      const struct pd_series_spec *spec, struct pd_series_set *out, struct pd_err *err) PD_WUR;
void pd_series_set_free(struct pd_series_set *s);

/*
 * What pd_series_compute_range can answer exactly: a selector with a type
 * and matchers on the service only (a rollup is per service and type and
 * knows no profile label), groups by service or none (`by` empty or
 * "service"; by_function either way), steps of an hour or more, and with
 * normalisation a type that is never a gauge (a rollup sums snapshots).
 */
bool pd_series_range_ok(const struct pd_selector *sel, const struct pd_series_spec *spec);

/*
 * The series of the profiles sel selects (pd_series_range_ok) in [from,
 * to], equal to pd_series_compute of that selection, computed per
 * (service, step) from the store: a step holding a whole UTC hour from
 * pd_store_fn_totals (rolled-up hours from the rollups' function tables,
 * partial hours from the profiles), and from pd_store_merge_range through
 * pd_series_step when the function tables cannot say (no whole hour, a
 * whole hour without a current rollup, unit=cores: the wall time is in the
 * profile, a sample_index they lack, a regex summed over two functions or
 * more: cum counts a sample once).
 * Profile counts and sources come from a scan of the metadata (no cap).
 * *done = false, out empty: normalised and the range holds cumulative=true
 * snapshots (or gauges): select and call pd_series_compute. max_raw bounds
 * the profiles merged from their own blocks (0 = none; over it PD_ELIMIT
 * naming --max-merge-profiles); out->rollups says whether a rollup was read.
 */
int pd_series_compute_range(struct pd_store *st, const struct pd_selector *sel, const struct pd_series_spec *spec,
			    size_t max_raw, struct pd_series_set *out, bool *done, struct pd_err *err) PD_WUR;

/*
 * Compile a function regex as selectors do (RE2 syntax on PCRE2, fully
 * anchored, the same refusals and match bounds). *holder owns the compiled regex,
 * returned in *re; free it with pd_selector_free. PD_EINVAL/PD_ELIMIT
 * 'bad "<param>" "<re>": regex ... does not compile: ...'.
 */
int pd_series_compile_re(const char *param, const char *re_text, struct pd_selector *holder, const struct pd_regex **re,
			 struct pd_err *err) PD_WUR;

/* ---- text forms ------------------------------------------------------------------ */

/*
 * The label names the text forms use for spec->by: Prometheus label names
 * ([a-zA-Z_][a-zA-Z0-9_]*: other bytes become '_', a leading digit or "__"
 * gets the prefix "label_"), "label_<name>" for a name that would clash
 * with type, sample_type, unit or function, and a "_<i>" suffix for one
 * that clashes with an earlier by label. names[i] point into a (arena).
 */
int pd_series_label_names(const struct pd_series_spec *spec, struct pd_arena *a, const char ***names) PD_WUR;

/*
 * Prometheus text exposition (version 0.0.4): "# HELP" and "# TYPE
 * profd_profile_value gauge", then one line per point:
 *   profd_profile_value{<by labels>,type="cpu",sample_type="cpu",unit="nanoseconds"[,function="f"]} V T_MS
 * label values escaped as the format says (\\ \" \n).
 */
int pd_series_prometheus(const struct pd_series_set *s, const struct pd_series_spec *spec, struct pd_buf *out) PD_WUR;
/*
 * InfluxDB line protocol, one line per point, tags sorted by key, empty
 * tags left out, integer field, nanosecond timestamp:
 *   profd_profile,function=f,sample_type=cpu,service=a,type=cpu,unit=nanoseconds value=123i 1700000000000000000
 */
int pd_series_influx(const struct pd_series_set *s, const struct pd_series_spec *spec, struct pd_buf *out) PD_WUR;

/* Escapers (appending to out). Prometheus label value: \ " newline. Influx
 * tag key/value and field key: comma, equals sign and space escaped with a
 * backslash; a backslash too where it would otherwise escape what follows
 * (before one of those, before a backslash, at the end); newline and CR
 * written as \n, \r (line protocol cannot carry them). Influx
 * measurement: the same with comma and space. Invalid UTF-8 (both parsers
 * refuse it) is written as U+FFFD per bad byte, as Go reads it. */
int pd_prom_escape_value(struct pd_buf *out, const char *s, size_t n) PD_WUR;
int pd_influx_escape_tag(struct pd_buf *out, const char *s, size_t n) PD_WUR;
int pd_influx_escape_measurement(struct pd_buf *out, const char *s, size_t n) PD_WUR;

#endif
