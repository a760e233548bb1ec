/*
 * diff.c — two profiles compared as `go tool pprof -diff_base` does
 * (contract in diff.h). The diff profile is built with the merger from
 * shallow copies of the inputs (only samples, values, labels and the
 * string table are new), so nothing is re-parsed. The per-function table
 * and the flame graph split the diff back into its base and target samples
 * by the pprof::base label.
 */
#include "diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- the diff profile -------------------------------------------------------------- */

/* pprof's ScaleN(ratios): v = round(v * r) per column whose r != 1; a sample
 * stays if one of those columns is non-zero. Into *o (shares p's tables;
 * samples and values are new, in *samples / *vals). */
static int scale(const struct pd_profile *p, const double *r, bool negate_only, struct pd_profile *o,
		 struct pd_sample **samples, int64_t **vals)
{
	size_t nv = p->nsample_types;
	*o = *p;
	*samples = malloc((p->nsamples + 1) * sizeof **samples);
	*vals = malloc((p->nsamples * nv + 1) * sizeof **vals);
	if (!*samples || !*vals)
		return PD_ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		int64_t *v = *vals + k * nv;
		bool keep = false;
		for (size_t j = 0; j < nv; j++) {
			if (negate_only) {
				v[j] = pd_wneg(s->values[j]);
				keep = keep || v[j] != 0;
			} else if (r[j] != 1) {
				v[j] = (int64_t)llround((double)s->values[j] * r[j]);
				keep = keep || v[j] != 0;
			} else {
				v[j] = s->values[j];
			}
		}
		if (!keep)
			continue;
		(*samples)[k] = *s;
		(*samples)[k].values = v;
		k++;
	}
	o->samples = *samples;
	o->nsamples = k;
	return 0;
}

int pd_diff_profile(const struct pd_profile *base, const struct pd_profile *target, bool normalize,
		    struct pd_profile **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_profile t = *target, b, *tc = NULL;
	struct pd_sample *ts = NULL, *bs = NULL;
	int64_t *tv = NULL, *bv = NULL;
	struct pd_str *strs = NULL;
	struct pd_label *labs = NULL;
	double *ratio = NULL;
	struct pd_merger *m = pd_merger_new();
	int rc = PD_ENOMEM;
	if (!m)
		goto out;
	if (base->nsample_types != target->nsample_types) {
		char a[256], c[256];
		pd_profile_describe_types(base, a, sizeof a);
		pd_profile_describe_types(target, c, sizeof c);
		rc = pd_errf(err, PD_EINCOMPAT, "the base has sample types %s, the target %s: they cannot be compared", a,
			     c);
		goto out;
	}
	size_t nv = base->nsample_types;
	if (normalize) { /* pprof's target.Normalize(base) */
		ratio = calloc(nv + 1, sizeof *ratio);
		int64_t *sums = calloc(2 * nv + 1, sizeof *sums);
		if (!ratio || !sums) {
			free(sums);
			goto out;
		}
		for (size_t i = 0; i < base->nsamples; i++)
			for (size_t j = 0; j < nv; j++)
				sums[j] = pd_wadd(sums[j], base->samples[i].values[j]);
		for (size_t i = 0; i < target->nsamples; i++)
			for (size_t j = 0; j < nv; j++)
				sums[nv + j] = pd_wadd(sums[nv + j], target->samples[i].values[j]);
		bool ones = true;
		for (size_t j = 0; j < nv; j++) {
			ratio[j] = sums[nv + j] == 0 ? 0.0 : (double)sums[j] / (double)sums[nv + j];
			ones = ones && ratio[j] == 1;
		}
		free(sums);
		/* rounding is per sample: first make the samples pprof's (a store's merge may keep
		 * apart what profile.Merge folds together, e.g. locations equal up to the mapping) */
		if (!ones && (rc = pd_pprof_compact(target, &tc, err)))
			goto out;
		rc = PD_ENOMEM;
		if (!ones && scale(tc, ratio, false, &t, &ts, &tv))
			goto out;
	}
	/* the base: negated, labelled pprof::base=true (replacing such a label if present) */
	if (scale(base, NULL, true, &b, &bs, &bv))
		goto out;
	strs = malloc(((size_t)base->nstrings + 2) * sizeof *strs);
	size_t nl = 0;
	for (size_t i = 0; i < b.nsamples; i++)
		nl += b.samples[i].nlabels + 1;
	labs = malloc((nl + 1) * sizeof *labs);
	if (!strs || !labs)
		goto out;
	memcpy(strs, base->strings, base->nstrings * sizeof *strs);
	uint32_t kk = base->nstrings, kv = base->nstrings + 1;
	strs[kk] = (struct pd_str){PD_DIFF_BASE_KEY, (uint32_t)strlen(PD_DIFF_BASE_KEY)};
	strs[kv] = (struct pd_str){PD_DIFF_BASE_VALUE, (uint32_t)strlen(PD_DIFF_BASE_VALUE)};
	b.strings = strs;
	b.nstrings = base->nstrings + 2;
	size_t o = 0;
	for (size_t i = 0; i < b.nsamples; i++) {
		struct pd_sample *s = &bs[i];
		struct pd_label *l = labs + o;
		uint32_t n = 0;
		for (uint32_t j = 0; j < s->nlabels; j++)
			if (!(s->labels[j].str && pd_str_eq(base->strings[s->labels[j].key], PD_DIFF_BASE_KEY)))
				l[n++] = s->labels[j];
		l[n++] = (struct pd_label){kk, kv, 0, 0};
		s->labels = l;
		s->nlabels = n;
		o += n;
	}
	if ((rc = pd_merger_add(m, &t, err)) || (rc = pd_merger_add(m, &b, err)) || (rc = pd_merger_finish(m, out, err)))
		goto out;
	rc = 0;
out:
	pd_merger_free(m);
	pd_profile_free(tc);
	free(ts);
	free(tv);
	free(bs);
	free(bv);
	free(strs);
	free(labs);
	free(ratio);
	if (rc == PD_ENOMEM)
		return pd_errf(err, rc, "diff: out of memory");
	return rc;
}

void pd_diff_marks(const struct pd_profile *d, struct pd_diff_marks *m)
{
	m->key = m->value = PD_NONE;
	for (uint32_t i = 1; i < d->nstrings; i++) {
		if (m->key == PD_NONE && pd_str_eq(d->strings[i], PD_DIFF_BASE_KEY))
			m->key = i;
		else if (m->value == PD_NONE && pd_str_eq(d->strings[i], PD_DIFF_BASE_VALUE))
			m->value = i;
	}
}

bool pd_diff_is_base(const struct pd_diff_marks *m, const struct pd_sample *s)
{
	if (m->key == PD_NONE || m->value == PD_NONE)
		return false;
	for (uint32_t j = 0; j < s->nlabels; j++)
		if (s->labels[j].key == m->key && s->labels[j].str == m->value)
			return true;
	return false;
}

/* ---- per function ------------------------------------------------------------------ */

struct rowkey {
	const struct pd_top *t;
	struct pd_str name;
};

static bool row_eq(void *ctx, uint32_t i)
{
	struct rowkey *k = ctx;
	struct pd_str n = k->t->rows[i].name;
	return n.len == k->name.len && !memcmp(n.ptr, k->name.ptr, n.len);
}

static int index_rows(const struct pd_top *t, struct pd_hidx *h)
{
	if (pd_hidx_init(h, t->n + 16))
		return PD_ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		if (pd_hidx_insert(h, pd_hash(t->rows[i].name.ptr, t->rows[i].name.len, 9), (uint32_t)i))
			return PD_ENOMEM;
	return 0;
}

static const struct pd_top_row *find_row(const struct pd_top *t, const struct pd_hidx *h, struct pd_str name)
{
	struct rowkey k = {t, name};
	uint32_t i = pd_hidx_find(h, pd_hash(name.ptr, name.len, 9), row_eq, &k);
	return i == UINT32_MAX ? NULL : &t->rows[i];
}

void pd_diff_top_free(struct pd_diff_top *t)
{
	pd_top_free(&t->top);
	pd_arena_free(t->arena);
	memset(t, 0, sizeof *t);
}

int pd_diff_top(const struct pd_profile *d, uint32_t si, bool by_cum, struct pd_diff_top *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	if (si >= d->nsample_types && d->nsamples)
		return pd_errf(err, PD_EINVAL, "sample index %u out of range (%u sample types)", si, d->nsample_types);
	struct pd_diff_marks mk;
	pd_diff_marks(d, &mk);
	struct pd_profile bp = *d, tp = *d;
	struct pd_sample *bs = malloc((d->nsamples + 1) * sizeof *bs), *ts = malloc((d->nsamples + 1) * sizeof *ts);
	struct pd_top bt = {0}, tt = {0};
	struct pd_hidx bh = {0}, th = {0};
	int rc = PD_ENOMEM;
	out->arena = pd_arena_new(16 * 1024);
	if (!bs || !ts || !out->arena)
		goto out;
	bp.samples = bs;
	tp.samples = ts;
	bp.nsamples = tp.nsamples = 0;
	int64_t abs_base = 0, abs_all = 0;
	for (size_t i = 0; i < d->nsamples; i++) {
		const struct pd_sample *s = &d->samples[i];
		int64_t v = s->values[si];
		abs_all = pd_wadd(abs_all, pd_wabs(v));
		if (pd_diff_is_base(&mk, s)) {
			bs[bp.nsamples++] = *s;
			abs_base = pd_wadd(abs_base, pd_wabs(v));
		} else {
			ts[tp.nsamples++] = *s;
		}
	}
	if ((rc = pd_top_compute_opt(&bp, si, PD_TOP_BY_NAME, &bt, err)) ||
	    (rc = pd_top_compute_opt(&tp, si, PD_TOP_BY_NAME, &tt, err)) ||
	    (rc = pd_top_compute_opt(d, si, PD_TOP_BY_NAME | (by_cum ? PD_TOP_BY_CUM : 0), &out->top, err)))
		goto out;
	rc = PD_ENOMEM;
	if (index_rows(&bt, &bh) || index_rows(&tt, &th))
		goto out;
	out->base_total = pd_wneg(bt.total);
	out->target_total = tt.total;
	out->total = abs_base > 0 ? abs_base : abs_all;
	out->top.total = out->total;
	out->n = out->top.n;
	out->rows = pd_arena_calloc(out->arena, out->n + 1, sizeof *out->rows);
	if (!out->rows)
		goto out;
	/* pprof's graph leaves out the functions whose flat and cum are both 0: those that did not change */
	size_t k = 0;
	for (size_t i = 0; i < out->n; i++) {
		const struct pd_top_row *r = &out->top.rows[i];
		if (r->flat == 0 && r->cum == 0)
			continue;
		const struct pd_top_row *b = find_row(&bt, &bh, r->name), *t = find_row(&tt, &th, r->name);
		out->rows[k] = (struct pd_diff_row){r->name,	    r->flat,	      r->cum,	  b ? pd_wneg(b->flat) : 0,
						    b ? pd_wneg(b->cum) : 0, t ? t->flat : 0, t ? t->cum : 0, r->inlined};
		out->top.rows[k++] = *r;
	}
	out->n = out->top.n = k;
	rc = 0;
out:
	pd_top_free(&bt);
	pd_top_free(&tt);
	pd_hidx_free(&bh);
	pd_hidx_free(&th);
	free(bs);
	free(ts);
	if (rc) {
		pd_diff_top_free(out);
		if (rc == PD_ENOMEM)
			return pd_errf(err, rc, "diff: out of memory");
	}
	return rc;
}

/* ---- flame graph ------------------------------------------------------------------- */

struct kidkey {
	const struct pd_flame *f;
	uint32_t parent;
	const uint32_t *parent_of;
	struct pd_str name;
};

static bool kid_eq(void *ctx, uint32_t i)
{
	struct kidkey *k = ctx;
	const struct pd_flame_node *n = &k->f->v[i];
	return k->parent_of[i] == k->parent && n->name.len == k->name.len && !memcmp(n->name.ptr, k->name.ptr, k->name.len);
}

void pd_diff_flame_free(struct pd_diff_flame *f)
{
	pd_flame_free(&f->f);
	memset(f, 0, sizeof *f);
}

int pd_diff_flame(const struct pd_profile *d, uint32_t si, size_t max_nodes, struct pd_diff_flame *out,
		  struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	int rc = pd_flame_build(d, si, max_nodes, &out->f, err);
	if (rc)
		return rc;
	struct pd_flame *f = &out->f;
	uint32_t *parent_of = malloc((f->n + 1) * sizeof *parent_of), *other_of = malloc((f->n + 1) * sizeof *other_of);
	struct pd_hidx h = {0};
	struct pd_arena *names = pd_arena_new(4096);
	struct pd_prune pr = {0}; /* as pd_flame_build cut the samples */
	rc = PD_ENOMEM;
	if (pd_prune_init(d, &pr, NULL, err))
		goto out;
	out->base = pd_arena_calloc(f->arena, f->n, sizeof *out->base);
	out->base_self = pd_arena_calloc(f->arena, f->n, sizeof *out->base);
	out->target = pd_arena_calloc(f->arena, f->n, sizeof *out->base);
	out->target_self = pd_arena_calloc(f->arena, f->n, sizeof *out->base);
	if (!parent_of || !other_of || !names || !out->base || !out->base_self || !out->target || !out->target_self ||
	    pd_hidx_init(&h, f->n + 16))
		goto out;
	/* (parent, name) -> node, for the real (not "other") nodes */
	for (size_t i = 0; i < f->n; i++)
		parent_of[i] = other_of[i] = PD_NONE;
	for (size_t i = 0; i < f->n; i++) {
		const struct pd_flame_node *n = &f->v[i];
		for (uint32_t k = 0; k < n->nkids; k++) {
			uint32_t c = f->kids[n->kids + k];
			parent_of[c] = (uint32_t)i;
			if (f->v[c].other) {
				other_of[i] = c;
				continue;
			}
			struct pd_str nm = f->v[c].name;
			if (pd_hidx_insert(&h, pd_hash(nm.ptr, nm.len, i), c))
				goto out;
		}
	}
	/* every sample down the kept tree, as pd_flame_build walked it */
	struct pd_diff_marks mk;
	pd_diff_marks(d, &mk);
	for (size_t i = 0; i < d->nsamples; i++) {
		const struct pd_sample *s = &d->samples[i];
		int64_t v = s->values[si];
		if (v == 0)
			continue;
		bool isb = pd_diff_is_base(&mk, s);
		int64_t *val = isb ? out->base : out->target, *self = isb ? out->base_self : out->target_self;
		if (isb)
			v = pd_wneg(v); /* the base's own value */
		uint32_t cur = 0, depth = 0;
		bool in_other = false;
		val[0] = pd_wadd(val[0], v);
		uint32_t k0 = pd_prune_leaf(&pr, s);
		for (uint32_t k = s->nlocs; k-- > k0 && depth < PD_FLAME_MAX_DEPTH && !in_other;) {
			const struct pd_location *l = &d->locations[s->locs[k]];
			uint32_t j0 = pd_prune_line0(&pr, s->locs[k]);
			for (uint32_t j = l->nlines ? l->nlines : 1; j-- > j0 && depth < PD_FLAME_MAX_DEPTH;) {
				struct kidkey kk = {f, cur, parent_of, pd_frame_name(d, &pr, l, j, names, true)};
				uint32_t c = pd_hidx_find(&h, pd_hash(kk.name.ptr, kk.name.len, cur), kid_eq, &kk);
				if (c == UINT32_MAX) {
					c = other_of[cur];
					PD_ASSERT(c != PD_NONE);
					val[c] = pd_wadd(val[c], v);
					self[c] = pd_wadd(self[c], v);
					in_other = true;
					break;
				}
				val[c] = pd_wadd(val[c], v);
				cur = c;
				depth++;
			}
		}
		if (!in_other)
			self[cur] = pd_wadd(self[cur], v);
	}
	rc = 0;
out:
	pd_prune_free(&pr);
	free(parent_of);
	free(other_of);
	pd_hidx_free(&h);
	pd_arena_free(names);
	if (rc) {
		pd_diff_flame_free(out);
		return pd_errf(err, rc, "diff flame graph: out of memory");
	}
	return 0;
}
