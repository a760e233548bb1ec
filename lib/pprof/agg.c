/*
 * agg.c — hash aggregation of value rows on (stack id, label-set id).
 */
#include "agg.h"

#include <stdlib.h>
#include <string.h>

int pd_agg_init(struct pd_agg *a, uint32_t nvalues, size_t expected)
{
	memset(a, 0, sizeof *a);
	a->nvalues = nvalues;
	return pd_hidx_init(&a->idx, expected ? expected : 1024);
}

void pd_agg_free(struct pd_agg *a)
{
	pd_hidx_free(&a->idx);
	free(a->rows);
	free(a->vals);
	memset(a, 0, sizeof *a);
}

struct rowkey {
	const struct pd_agg *a;
	uint32_t stack, labels;
};

static bool row_eq(void *ctx, uint32_t v)
{
	const struct rowkey *k = ctx;
	return k->a->rows[v].stack == k->stack && k->a->rows[v].labels == k->labels;
}

int pd_agg_add(struct pd_agg *a, uint32_t stack, uint32_t labels, const int64_t *values)
{
	uint32_t row;
	return pd_agg_add2(a, stack, labels, values, &row);
}

int pd_agg_add2(struct pd_agg *a, uint32_t stack, uint32_t labels, const int64_t *values, uint32_t *row)
{
	uint64_t h = pd_agg_hash(stack, labels);
	struct rowkey k = {a, stack, labels};
	uint32_t r = pd_hidx_find_u64(&a->idx, h, row_eq, &k);
	uint32_t nv = a->nvalues;
	if (r != UINT32_MAX) {
		pd_agg_add_row(a, r, values);
		*row = r;
		return 0;
	}
	if ((a->max_rows && a->n >= a->max_rows) || a->n >= UINT32_MAX - 1)
		return PD_ELIMIT;
	if (pd_grow((void **)&a->rows, &a->cap, a->n + 1, sizeof *a->rows) ||
	    pd_grow((void **)&a->vals, &a->vcap, (a->n + 1) * nv, sizeof *a->vals))
		return PD_ENOMEM;
	a->rows[a->n].stack = stack;
	a->rows[a->n].labels = labels;
	if (nv)
		memcpy(a->vals + a->n * nv, values, nv * sizeof *values);
	if (pd_hidx_insert(&a->idx, h, (uint32_t)a->n))
		return PD_ENOMEM;
	*row = (uint32_t)a->n++;
	return 0;
}

bool pd_agg_row_zero(const struct pd_agg *a, size_t row)
{
	const int64_t *v = pd_agg_values(a, row);
	for (uint32_t i = 0; i < a->nvalues; i++)
		if (v[i])
			return false;
	return true;
}
