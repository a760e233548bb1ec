/*
 * normalize.h — what a fleet number means (docs/api.md "Normalisation"):
 * the one place where API v1's merge, top, series and diff decide how the
 * selected profiles add up, instead of summing everything.
 *
 * Every profile has a kind (pd_norm_kind) and comes from a source (one
 * process: pd_norm_source_key):
 *  - SUM: cpu (a window of samples), the scraper's allocs/block/mutex deltas
 *    (what happened between two scrapes), other: summed, as pprof's Merge;
 *  - GAUGE: heap, goroutine, threadcreate: snapshots of a state. Per source,
 *    its snapshots in the range are merged and divided by their count (the
 *    source's average); the sources' averages are summed (the fleet's
 *    average in-use memory = the sum of each process's average);
 *  - CUMULATIVE: allocs/block/mutex labelled cumulative=true (raw counters
 *    since the process started: `profd scrape --once` without --state-dir,
 *    `profd capture --collector`). Per source, what happened in the range is
 *    the latest snapshot minus the earliest (pd_pprof_delta; after a counter
 *    reset the latest alone); a source with a single snapshot has nothing to
 *    subtract and is left out (counted in `excluded`).
 *
 * A source is one process: (service, type, kind) and the `instance` label
 * if the profile has one (the scraper adds instance=HOST:PORT to static
 * targets), else the `namespace` and `pod` labels if it has `pod`
 * (Kubernetes discovery, capture), else its whole label set.
 *
 * CPU cores (pd_norm_cores): per service, CPU time / profiled wall time x
 * sources: the pooled average number of cores a process used while it was
 * profiled, times the processes seen; summed over services.
 */
#ifndef PD_QUERY_NORMALIZE_H
#define PD_QUERY_NORMALIZE_H

#include "query.h"

enum pd_norm_kind { PD_NORM_SUM, PD_NORM_GAUGE, PD_NORM_CUMULATIVE, PD_NORM_NKINDS };

#define PD_NORM_CUMULATIVE_LABEL "cumulative" /* = "true" on raw cumulative snapshots */

/* The kind of a stored profile (from its type and labels). */
int pd_norm_kind(const struct pd_profile_meta *m);
/* True if every profile of this type (a selector's type; NULL = any) is
 * PD_NORM_SUM whatever its labels: cpu, other. */
bool pd_norm_type_sums(const char *type);
/* True if profiles of this type may be GAUGE: heap, goroutine,
 * threadcreate, or NULL (any type). */
bool pd_norm_type_gauge(const char *type);

/* Append m's source key to out (service, type, kind, identity; NUL
 * separated): equal keys = the same source. */
int pd_norm_source_key(const struct pd_profile_meta *m, struct pd_buf *out) PD_WUR;

/* A selection grouped by service, then source. */
struct pd_norm_source {
	size_t first, n;  /* the metas v[first .. first + n): ascending creation time */
	uint32_t service; /* index into svc */
	int kind;         /* enum pd_norm_kind */
};
struct pd_norm_service {
	const char *name; /* the service (points into a meta) */
	size_t first, n;  /* its metas */
	size_t src, nsrc; /* its sources: src[src .. src + nsrc) */
};
struct pd_norm_plan {
	struct pd_profile_meta *v; /* borrowed, sorted by pd_norm_plan */
	size_t n;
	struct pd_norm_service *svc;
	size_t nsvc;
	struct pd_norm_source *src;
	size_t nsrc;
};
/* Sort v in place (service, kind, source, creation time, id) and group it.
 * Free with pd_norm_plan_free (v stays the caller's). */
int pd_norm_plan(struct pd_profile_meta *v, size_t n, struct pd_norm_plan *out, struct pd_err *err) PD_WUR;
void pd_norm_plan_free(struct pd_norm_plan *p);

/* What a normalised aggregation did: the answers' "normalization". */
struct pd_norm_info {
	bool on;         /* normalisation asked for (normalize=true) */
	unsigned kinds;  /* 1 << kind for every kind seen */
	size_t profiles; /* selected */
	size_t sources;  /* distinct sources among them */
	size_t excluded; /* profiles left out: single cumulative snapshots */
	size_t resets;   /* cumulative sources whose counters went down (latest alone) */
};
/* "none" (off), "sum", "gauge_average", "cumulative_delta", or several
 * joined by '+' ("sum+cumulative_delta"). */
const char *pd_norm_mode(const struct pd_norm_info *i, char *buf, size_t n);
void pd_norm_info_add(struct pd_norm_info *to, const struct pd_norm_info *from);

/*
 * One part of a normalised aggregation: *p (owned by the walker: set *p =
 * NULL to keep it) of service `service`, to be counted num/den times
 * (gauge: 1/snapshots; others 1/1). kind is the part's kind.
 */
typedef int (*pd_norm_fn)(void *ctx, uint32_t service, int kind, struct pd_profile **p, int64_t num, int64_t den,
			  struct pd_err *err);
/* For a walk over one step of a series: the id of the snapshot that
 * CUMULATIVE source plan->src[src] had before the plan's profiles (its
 * latest in an earlier step), or NULL. */
typedef const char *(*pd_norm_base_fn)(void *ctx, const struct pd_norm_plan *plan, size_t src);

/*
 * Walk services [first, first + nsvc) of plan: the SUM profiles of all of
 * them in one store merge (fn's service = first), then every GAUGE source
 * (its profiles merged, 1/count) and every CUMULATIVE source with two
 * snapshots or more (latest - earliest, or latest after a reset; with
 * base, latest - the base it returns when not NULL). normalize false: every
 * profile of those services in one store merge. info is added to. Store
 * errors are returned (PD_EINCOMPAT for profiles that cannot be merged).
 */
int pd_norm_each(struct pd_store *st, const struct pd_norm_plan *plan, size_t first, size_t nsvc, bool normalize,
		 pd_norm_fn fn, void *ctx, pd_norm_base_fn base, void *bctx, struct pd_norm_info *info,
		 struct pd_err *err) PD_WUR;

/*
 * The selection v[0..n) (n >= 1) merged with normalisation, as one profile
 * (GET /api/1/merge, the sides of /api/1/diff): the parts of pd_norm_each,
 * each scaled by num/den with pd_profile_scale (rounded per sample, as
 * pprof's Scale), merged with pprof's Merge. normalize false: one store
 * merge, as before. v is sorted in place. Every profile excluded:
 * PD_ENOTFOUND saying why. *info is filled.
 */
int pd_norm_merge(struct pd_store *st, struct pd_profile_meta *v, size_t n, bool normalize, struct pd_profile **out,
		  struct pd_norm_info *info, struct pd_err *err) PD_WUR;

/* What happened between two snapshots of one cumulative source: latest -
 * earliest (pd_pprof_delta), or latest alone if its counters went down or
 * its sample types changed (*reset = true). */
int pd_norm_delta(struct pd_store *st, const char *earliest_id, const char *latest_id, struct pd_profile **out,
		  bool *reset, struct pd_err *err) PD_WUR;

/* Cores of CPU time v (ns) of a service whose profiles cover wall_ns of
 * profiled wall time (the sum of their duration_nanos) over `sources`
 * processes: v / wall x sources. 0 if wall_ns <= 0. */
static inline double pd_norm_cores(int64_t v, int64_t wall_ns, size_t sources)
{
	return wall_ns > 0 ? (double)v * (double)sources / (double)wall_ns : 0;
}

/*
 * Count the sources of the profiles sel selects in [from, to], per service
 * (metadata only: no profile is read), and whether any is CUMULATIVE: what
 * the rollup path of /api/1/top needs. services[0..n) sorted (as
 * pd_store_services); counts[i] for services[i].
 */
int pd_norm_count_sources(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns,
			  char *const *services, size_t n, size_t *counts, size_t *profiles, bool *cumulative,
			  struct pd_err *err) PD_WUR;

#endif
