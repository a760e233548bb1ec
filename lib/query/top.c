/*
 * top.c — fleet top: the hottest functions across services (contract in
 * query.h). Each input profile goes through pd_top_compute (the tested
 * `go tool pprof -top` semantics); its rows are folded at once into sums
 * per function name and per (function, group) — a group is a service — and
 * the profile can be freed: memory is the distinct functions and (function,
 * group) cells, never every service's profile at once.
 *
 * Flat is additive; so is cum, because pd_top_compute counts a function
 * once per sample and samples of different inputs are different samples
 * (or, if pprof's merge would fold them together, their values add).
 * Weighted inputs (normalisation: a gauge source's merge weighs 1/snapshots)
 * are summed in double beside the exact int64 sums of weight-1 inputs, and
 * rounded once per row, cell and total at the end: an average is never
 * rounded per sample or per source.
 */
#define _GNU_SOURCE /* qsort_r */
#include "query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct acc_fn {
	struct pd_str name; /* in the arena */
	int64_t iflat, icum;
	double dflat, dcum;
	uint32_t ncells;
	bool in_inline, in_call; /* OR of the rows' in-edges: pprof's markers */
};

struct acc_cell {
	uint32_t fn, group;
	int64_t iflat, icum;
	double dflat, dcum;
};

struct pd_fleet_acc {
	struct pd_arena *arena; /* names; handed to the result */
	struct acc_fn *fns;
	size_t nf, cf;
	struct acc_cell *cells;
	size_t nc, cc;
	struct pd_hidx fidx, cidx;
	size_t ngroups;
	int64_t *itot;
	double *dtot;
	/* lookup keys */
	struct pd_str kname;
	uint32_t kfn, kgroup;
};

static bool fn_eq(void *ctx, uint32_t i)
{
	struct pd_fleet_acc *a = ctx;
	return a->fns[i].name.len == a->kname.len && !memcmp(a->fns[i].name.ptr, a->kname.ptr, a->kname.len);
}

static bool cell_eq(void *ctx, uint32_t i)
{
	struct pd_fleet_acc *a = ctx;
	return a->cells[i].fn == a->kfn && a->cells[i].group == a->kgroup;
}

/* a bijection of (fn, group): pd_hidx_find_u64 */
static uint64_t cell_hash(uint32_t fn, uint32_t group) { return pd_hash_u64(((uint64_t)fn << 32 | group) + 0x9e37); }

void pd_fleet_acc_free(struct pd_fleet_acc *a)
{
	if (!a)
		return;
	pd_arena_free(a->arena);
	free(a->fns);
	free(a->cells);
	pd_hidx_free(&a->fidx);
	pd_hidx_free(&a->cidx);
	free(a->itot);
	free(a->dtot);
	free(a);
}

int pd_fleet_acc_new(size_t ngroups, struct pd_fleet_acc **out)
{
	struct pd_fleet_acc *a = calloc(1, sizeof *a);
	*out = NULL;
	if (!a)
		return PD_ENOMEM;
	a->ngroups = ngroups;
	a->arena = pd_arena_new(64 * 1024);
	a->itot = calloc(ngroups ? ngroups : 1, sizeof *a->itot);
	a->dtot = calloc(ngroups ? ngroups : 1, sizeof *a->dtot);
	if (!a->arena || !a->itot || !a->dtot || pd_hidx_init(&a->fidx, 1024) || pd_hidx_init(&a->cidx, 1024)) {
		pd_fleet_acc_free(a);
		return PD_ENOMEM;
	}
	*out = a;
	return 0;
}

/* Add one row (weight 1: exact int64 sums; else weighted double sums). */
static int acc_row(struct pd_fleet_acc *a, uint32_t group, const struct pd_top_row *row, double weight)
{
	struct pd_str name = row->name;
	int64_t flat = row->flat, cum = row->cum;
	uint64_t h = pd_hash(name.ptr, name.len, 11);
	a->kname = name;
	uint32_t i = pd_hidx_find(&a->fidx, h, fn_eq, a);
	if (i == UINT32_MAX) {
		if (a->nf >= UINT32_MAX - 1 || pd_grow((void **)&a->fns, &a->cf, a->nf + 1, sizeof *a->fns) ||
		    pd_hidx_insert(&a->fidx, h, (uint32_t)a->nf))
			return PD_ENOMEM;
		char *nm = pd_arena_dup(a->arena, name.len ? name.ptr : "", name.len);
		if (!nm && name.len)
			return PD_ENOMEM;
		a->fns[a->nf] = (struct acc_fn){{nm ? nm : "", name.len}, 0, 0, 0, 0, 0, false, false};
		i = (uint32_t)a->nf++;
	}
	a->kfn = i;
	a->kgroup = group;
	uint64_t ch = cell_hash(i, group);
	uint32_t c = pd_hidx_find_u64(&a->cidx, ch, cell_eq, a);
	if (c == UINT32_MAX) {
		if (a->nc >= UINT32_MAX - 1 || pd_grow((void **)&a->cells, &a->cc, a->nc + 1, sizeof *a->cells) ||
		    pd_hidx_insert(&a->cidx, ch, (uint32_t)a->nc))
			return PD_ENOMEM;
		a->cells[a->nc] = (struct acc_cell){i, group, 0, 0, 0, 0};
		c = (uint32_t)a->nc++;
		a->fns[i].ncells++;
	}
	struct acc_fn *f = &a->fns[i];
	struct acc_cell *e = &a->cells[c];
	f->in_inline = f->in_inline || row->inlined != PD_TOP_NOT_INLINED;
	f->in_call = f->in_call || row->called;
	if (weight == 1) {
		f->iflat = pd_wadd(f->iflat, flat);
		f->icum = pd_wadd(f->icum, cum);
		e->iflat = pd_wadd(e->iflat, flat);
		e->icum = pd_wadd(e->icum, cum);
	} else {
		f->dflat += weight * (double)flat;
		f->dcum += weight * (double)cum;
		e->dflat += weight * (double)flat;
		e->dcum += weight * (double)cum;
	}
	return 0;
}

int pd_fleet_acc_add(struct pd_fleet_acc *a, uint32_t group, const struct pd_profile *p, uint32_t si, double weight,
		     struct pd_err *err)
{
	PD_ASSERT(group < a->ngroups);
	struct pd_top t;
	int rc = pd_top_compute_opt(p, si, PD_TOP_BY_NAME, &t, err);
	if (rc)
		return rc;
	/* the total the percentages are of: pprof's (the sum of the values'
	 * magnitudes, or of the diff base's), not the signed sum of t */
	int64_t total = pd_report_total(p, si);
	if (weight == 1)
		a->itot[group] = pd_wadd(a->itot[group], total);
	else
		a->dtot[group] += weight * (double)total;
	for (size_t r = 0; r < t.n && !rc; r++)
		rc = acc_row(a, group, &t.rows[r], weight);
	pd_top_free(&t);
	if (rc)
		return pd_errf(err, rc, "fleet top: out of memory");
	return 0;
}

static int64_t round_sum(int64_t i, double d) { return pd_wadd(i, (int64_t)llround(d)); }

/* pprof -top order (by_cum: -top -cum). */
static int rank(int64_t flat_a, int64_t cum_a, int64_t flat_b, int64_t cum_b, bool by_cum)
{
	int64_t a1 = pd_wabs(by_cum ? cum_a : flat_a), b1 = pd_wabs(by_cum ? cum_b : flat_b);
	if (a1 != b1)
		return a1 > b1 ? -1 : 1;
	return 0;
}

static int fn_cmp(const void *x, const void *y, void *by_cum)
{
	const struct pd_fleet_fn *a = x, *b = y;
	bool bc = *(bool *)by_cum;
	int c = rank(a->flat, a->cum, b->flat, b->cum, bc);
	if (c)
		return c;
	if ((c = pd_str_cmp(a->name, b->name)))
		return c;
	return rank(a->flat, a->cum, b->flat, b->cum, !bc);
}

static int cell_cmp(const void *x, const void *y, void *by_cum)
{
	const struct pd_fleet_cell *a = x, *b = y;
	bool bc = *(bool *)by_cum;
	int c = rank(a->flat, a->cum, b->flat, b->cum, bc);
	if (c)
		return c;
	if ((c = rank(a->flat, a->cum, b->flat, b->cum, !bc)))
		return c;
	return a->service < b->service ? -1 : a->service > b->service;
}

void pd_fleet_top_free(struct pd_fleet_top *t)
{
	pd_arena_free(t->arena);
	memset(t, 0, sizeof *t);
}

int pd_fleet_acc_finish(struct pd_fleet_acc *a, bool by_cum, struct pd_fleet_top *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	int rc = PD_ENOMEM;
	out->arena = a->arena; /* the names live there */
	a->arena = NULL;
	size_t ng = a->ngroups ? a->ngroups : 1;
	if (!(out->totals = pd_arena_calloc(out->arena, ng, sizeof *out->totals)))
		goto out;
	int64_t itot = 0;
	double dtot = 0;
	for (size_t g = 0; g < a->ngroups; g++) {
		out->totals[g] = round_sum(a->itot[g], a->dtot[g]);
		itot = pd_wadd(itot, a->itot[g]);
		dtot += a->dtot[g];
	}
	out->total = round_sum(itot, dtot);
	struct pd_fleet_fn *fns = a->nf ? pd_arena_calloc(out->arena, a->nf, sizeof *fns) : NULL;
	if (a->nf && !fns)
		goto out;
	for (size_t i = 0; i < a->nf; i++) {
		const struct acc_fn *f = &a->fns[i];
		int inl = !f->in_inline ? PD_TOP_NOT_INLINED : f->in_call ? PD_TOP_PARTIAL_INLINE : PD_TOP_INLINED;
		fns[i] = (struct pd_fleet_fn){
		    f->name, round_sum(f->iflat, f->dflat), round_sum(f->icum, f->dcum), NULL, 0, inl};
		if (!(fns[i].by = pd_arena_calloc(out->arena, f->ncells, sizeof *fns[i].by)))
			goto out;
	}
	for (size_t c = 0; c < a->nc; c++) { /* cells in first-seen order: input (group) order */
		const struct acc_cell *e = &a->cells[c];
		struct pd_fleet_fn *f = &fns[e->fn];
		f->by[f->nby++] =
		    (struct pd_fleet_cell){e->group, round_sum(e->iflat, e->dflat), round_sum(e->icum, e->dcum)};
	}
	for (size_t i = 0; i < a->nf; i++)
		qsort_r(fns[i].by, fns[i].nby, sizeof *fns[i].by, cell_cmp, &by_cum);
	if (a->nf)
		qsort_r(fns, a->nf, sizeof *fns, fn_cmp, &by_cum);
	out->fns = fns;
	out->nfns = a->nf;
	rc = 0;
out:
	if (rc) {
		pd_fleet_top_free(out);
		pd_errf(err, rc, "fleet top: out of memory");
	}
	return rc;
}

int pd_fleet_top(const struct pd_fleet_input *in, size_t n, bool by_cum, struct pd_fleet_top *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct pd_fleet_acc *a;
	if (pd_fleet_acc_new(n, &a))
		return pd_errf(err, PD_ENOMEM, "fleet top: out of memory");
	int rc = 0;
	for (size_t s = 0; s < n && !rc; s++)
		if ((rc = pd_fleet_acc_add(a, (uint32_t)s, in[s].p, in[s].si, 1, err)))
			pd_err_prefix(err, "service \"%s\"", in[s].service);
	if (!rc)
		rc = pd_fleet_acc_finish(a, by_cum, out, err);
	pd_fleet_acc_free(a);
	return rc;
}
