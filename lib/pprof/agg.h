/*
 * agg.h — the aggregation core of every merge: sums value rows keyed by
 * (stack id, label-set id), in first-seen order.
 *
 * It knows nothing of pprof: ids are whatever the caller interned (the pprof
 * merger's stacks, or a store's content-addressed stack ids), so a store
 * can merge stored sample blocks without re-parsing profiles.
 */
#ifndef PD_AGG_H
#define PD_AGG_H

#include "../util/util.h"

struct pd_agg_row {
	uint32_t stack, labels;
};

struct pd_agg {
	uint32_t nvalues;
	struct pd_hidx idx;
	struct pd_agg_row *rows;
	int64_t *vals; /* rows * nvalues */
	size_t n, cap, vcap; /* rows, allocated rows, allocated values */
	size_t max_rows; /* 0 = unlimited */
};

int pd_agg_init(struct pd_agg *a, uint32_t nvalues, size_t expected_rows) PD_WUR;
void pd_agg_free(struct pd_agg *a);
/* Add values to the row for (stack, labels); returns 0, PD_ENOMEM or
 * PD_ELIMIT (more than max_rows distinct rows). */
int pd_agg_add(struct pd_agg *a, uint32_t stack, uint32_t labels, const int64_t *values) PD_WUR;
/* The same, returning the row's index in *row (for pd_agg_add_row). */
int pd_agg_add2(struct pd_agg *a, uint32_t stack, uint32_t labels, const int64_t *values, uint32_t *row) PD_WUR;
/* The hash of (stack, labels) in the row index (pd_hidx_find_u64): a
 * caller may prefetch its slot. */
static inline uint64_t pd_agg_hash(uint32_t stack, uint32_t labels)
{
	return pd_hash_u64((uint64_t)stack << 32 | labels);
}
/* Add values to a row whose index the caller remembered. */
static inline void pd_agg_add_row(struct pd_agg *a, uint32_t row, const int64_t *values)
{
	int64_t *dst = a->vals + (size_t)row * a->nvalues;
	for (uint32_t i = 0; i < a->nvalues; i++)
		dst[i] = pd_wadd(dst[i], values[i]);
}
static inline const int64_t *pd_agg_values(const struct pd_agg *a, size_t row)
{
	return a->vals + row * a->nvalues;
}
/* True if every value of the row is zero. */
bool pd_agg_row_zero(const struct pd_agg *a, size_t row);

#endif
