/*
 * regress.h — the fleet regression report (GET /api/1/rollouts,
 * /api/1/regressions, `profd regressions`; docs/api.md "API v1: rollouts and
 * regressions").
 *
 * Rollouts come from the data: per service, the values of a version label
 * (default "version") in the selected profiles, each with when it was first
 * and last seen; a value first seen after another one is a rollout of it,
 * from the value first seen just before.
 *
 * A comparison (one rollout of one service, or a service in two given
 * selections) merges each side as /api/1/diff does (normalised), then puts
 * every function's flat and cum on a common scale, the side's **rate**:
  *   cpu (nanoseconds)   per CPU-second of the side's profiled CPU time: the
 *                       function's share of the CPU the version used (robust
 *                       to how much traffic or CPU each version got);
 *   sum kinds (deltas)  per profile: each delta profile is one window;
 *   gauges, cumulative  per source (the normalised merge sums the sources'
 *                       averages or differences: / sources).
 * The change is target rate - base rate. The noise estimate comes from the
 * sample counts behind each side (the profile's count sample type: cpu
 * "samples", heap/allocs "*_objects", block/mutex "contentions"): a
 * function seen in n samples has a Poisson relative error of 1/sqrt(n) on
 * its rate, so noise = 2 sqrt(sb^2 + st^2) with s = rate/sqrt(n) (n = 0: the
 * rate of one mean-weight sample); |change| <= noise is "within noise".
 */
#ifndef PD_QUERY_REGRESS_H
#define PD_QUERY_REGRESS_H

#include "query.h"

/* One value of the version label in one service. */
struct pd_version {
	char *service, *value;
	int64_t first_ns, last_ns;
	size_t profiles;
};
/* A rollout: versions[to] first seen at at_ns, after versions[from]. */
struct pd_rollout {
	size_t from, to;
	int64_t at_ns;
};
struct pd_rollouts {
	struct pd_version *v; /* by service, then first seen, then value */
	size_t nv;
	struct pd_rollout *r; /* by service, then time */
	size_t nr;
};
/* From the metadata of the selected profiles (profiles without the label, or
 * with it empty, are not counted). */
int pd_rollouts_find(const struct pd_profile_meta *m, size_t n, const char *label, struct pd_rollouts *out,
                     struct pd_err *err) PD_WUR;
void pd_rollouts_free(struct pd_rollouts *r);

/* The value of label key in m ("" if absent). */
const char *pd_meta_label(const struct pd_profile_meta *m, const char *key);

/* One side's figures for one function and one value (flat or cum). */
struct pd_rate {
	double base, target, change, relative; /* relative: change / base (INFINITY when base is 0) */
	double noise;                          /* < 0: unknown (no count sample type) */
	int64_t base_samples, target_samples;  /* -1: unknown */
	bool within_noise;
};
/* rate of a side's value v with exposure e (> 0); counts nb/nt (or -1),
 * mean weights wb/wt of one sample on each side (value per sample count). */
void pd_rate_compute(int64_t vb, int64_t vt, double eb, double et, int64_t nb, int64_t nt, double wb, double wt,
                     struct pd_rate *out);

#endif
