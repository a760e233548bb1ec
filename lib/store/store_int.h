/*
 * store_int.h — shared by the backends, not part of the interface: the
 * accumulator of per-function totals (struct pd_fn_totals) that range
 * queries and rollup builds add profiles and rollup tables into.
 */
#ifndef PD_STORE_INT_H
#define PD_STORE_INT_H

#include "store.h"

struct pd_fnt_acc {
	struct pd_fn_totals t; /* grows; t.arena holds names and types */
	size_t cap;            /* functions allocated in t.names, t.flat, t.cum */
	struct pd_hidx idx;    /* name -> function index */
	bool typed;            /* t.nv, types, units, dflt set */
	struct pd_str key;     /* the name being looked up */
};

int pd_fnt_init(struct pd_fnt_acc *a, struct pd_err *err) PD_WUR;
void pd_fnt_free(struct pd_fnt_acc *a);
/* The sample types of what is added next: the first call sets them, later
 * ones must name the same types (else PD_EINCOMPAT naming `what`). */
int pd_fnt_types(struct pd_fnt_acc *a, uint32_t nv, const struct pd_str *types, const struct pd_str *units,
		 struct pd_str dflt, const char *what, struct pd_err *err) PD_WUR;
/* Add flat[nv] and cum[nv] to function name (copied); NULL = zeros. */
int pd_fnt_add(struct pd_fnt_acc *a, struct pd_str name, const int64_t *flat, const int64_t *cum,
	       struct pd_err *err) PD_WUR;
void pd_fnt_add_total(struct pd_fnt_acc *a, const int64_t *total);
/* Add one profile's totals: pd_top_compute for every sample index. */
int pd_fnt_add_profile(struct pd_fnt_acc *a, const struct pd_profile *p, const char *what, struct pd_err *err) PD_WUR;
/* Add finished totals t (another accumulator's) to a. */
int pd_fnt_add_totals(struct pd_fnt_acc *a, const struct pd_fn_totals *t, const char *what, struct pd_err *err) PD_WUR;
/* Move the totals to out (the accumulator is then empty). */
void pd_fnt_finish(struct pd_fnt_acc *a, struct pd_fn_totals *out);

#endif
