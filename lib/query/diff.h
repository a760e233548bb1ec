/*
 * diff.h — two selections compared (GET /api/1/diff, `profd diff`), with
 * the semantics of `go tool pprof -diff_base BASE TARGET`:
 *   1. with -normalize, TARGET's values are scaled per sample type by
 *      sum(BASE)/sum(TARGET) (pprof's Profile.Normalize: rounded per sample,
 *      samples left all-zero dropped);
 *   2. every BASE sample gets the label pprof::base=true and its values
 *      negated (Scale(-1));
 *   3. profile.Merge of [TARGET, BASE].
 * pprof's reports then take the base's total (the sum of |values| of the
 * labelled samples) as 100%, and a function's flat and cum are target minus
 * base. The merged profile is what format=pprof serves: `go tool pprof -top`
 * of it prints what `go tool pprof -top -diff_base` prints.
 */
#ifndef PD_QUERY_DIFF_H
#define PD_QUERY_DIFF_H

#include "query.h"

#define PD_DIFF_BASE_KEY   "pprof::base"
#define PD_DIFF_BASE_VALUE "true"

/* The diff profile (caller frees). PD_EINCOMPAT when the two profiles'
 * sample types (or period types) differ. */
int pd_diff_profile(const struct pd_profile *base, const struct pd_profile *target, bool normalize,
		    struct pd_profile **out, struct pd_err *err) PD_WUR;

/* Which samples of a diff profile are the base's. */
struct pd_diff_marks {
	uint32_t key, value; /* string indexes of "pprof::base" and "true"; PD_NONE if absent */
};
void pd_diff_marks(const struct pd_profile *d, struct pd_diff_marks *m);
bool pd_diff_is_base(const struct pd_diff_marks *m, const struct pd_sample *s);

struct pd_diff_row {
	struct pd_str name;
	int64_t flat, cum;               /* target - base: what pprof -top -diff_base shows */
	int64_t base_flat, base_cum;     /* the base's own values (positive for a cost) */
	int64_t target_flat, target_cum; /* the target's (normalized if asked) */
	int inlined;                     /* PD_TOP_* as pprof marks the diff's rows */
};

/*
 * Per function of diff profile d (sample index si): rows ranked as
 * `pprof -top -diff_base` (|delta flat|, name, |delta cum|) or, with by_cum,
 * as `-top -cum`; functions whose delta flat and cum are both 0 are left out,
 * as pprof's graph leaves them out. top is the same table as a struct pd_top (rows = deltas,
 * total = pprof's 100%) for pd_top_text; rows[i] and top.rows[i] are the
 * same function.
 */
struct pd_diff_top {
	struct pd_diff_row *rows;
	size_t n;
	int64_t base_total, target_total; /* sums of the values (the base's as a cost) */
	int64_t total;                    /* pprof's 100%: sum of |base values|, else of all |values| */
	struct pd_top top;                /* owns the names */
	struct pd_arena *arena;
};
int pd_diff_top(const struct pd_profile *d, uint32_t si, bool by_cum, struct pd_diff_top *out,
		struct pd_err *err) PD_WUR;
void pd_diff_top_free(struct pd_diff_top *t);

/*
 * The flame graph of the deltas (pd_flame_build on d: value and self are
 * target - base; nodes kept by |delta|) with each node's base and target
 * values beside it, summed over the same paths (an "other" node gets what
 * its dropped siblings had). Arrays are indexed like f.v.
 */
struct pd_diff_flame {
	struct pd_flame f;
	int64_t *base, *base_self, *target, *target_self;
};
int pd_diff_flame(const struct pd_profile *d, uint32_t si, size_t max_nodes, struct pd_diff_flame *out,
		  struct pd_err *err) PD_WUR;
void pd_diff_flame_free(struct pd_diff_flame *f);

#endif
