/*
 * series.c — profiles as time series (contract in series.h).
 *
 * pd_series_compute groups the selected profiles by (type, by labels),
 * orders each group's profiles by step, merges each (group, step) run in
 * the store and hands the merge to pd_series_step, the per-step
 * computation. Values are collected
 * sparsely (a function appears in some steps only), ranked, cut to the top
 * n, and made dense over each group's steps at the end (0 where a step had
 * profiles but not the function). Memory: the distinct (group, function)
 * pairs seen and their points; one merged profile at a time.
 *
 * pd_series_compute_range (the range path) fills the same points per
 * (service, step) from the store: function tables (pd_store_fn_totals:
 * per-function flat and cum as pd_top_compute counts them, which is what
 * pd_series_step counts too, additive over disjoint profiles) where a step
 * holds a whole hour whose rollup is current, else a range merge into
 * step_part (which still takes rolled-up hours from rollups). Exact for
 * groups by service or none (a group's step is the sum of its services' parts:
 * samples of different services are different samples) and for totals; a
 * regex summed without by=function is exact from the tables only while at
 * most one function of the table matches (flat adds up, cum does not: a
 * sample with two matching frames counts once), else that part is merged.
 */
#define _GNU_SOURCE /* qsort_r */
#include "series.h"
#include "plan.h"

#include <math.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- step math --------------------------------------------------------------------- */

int64_t pd_series_step_start(int64_t t, int64_t step)
{
	int64_t q = t / step;
	if (t % step < 0)
		q--;
	return q * step;
}

int64_t pd_series_nsteps(int64_t from, int64_t to, int64_t step)
{
	if (step < 1 || to < from)
		return 0;
	return (pd_series_step_start(to, step) - pd_series_step_start(from, step)) / step + 1;
}

/* ---- one step ---------------------------------------------------------------------- */

/* A function name seen in this step: matched or not, and its sums. */
struct sfn {
	struct pd_str name;
	bool match;
	int64_t flat, cum;
	size_t stamp; /* last sample counted in cum, + 1 */
};

struct sfns {
	struct sfn *v;
	size_t n, cap;
	struct pd_hidx idx;
	struct pd_str key;
};

static bool sfn_eq(void *ctx, uint32_t i)
{
	struct sfns *f = ctx;
	return f->v[i].name.len == f->key.len && !memcmp(f->v[i].name.ptr, f->key.ptr, f->key.len);
}

static bool fn_re_match(const struct pd_regex *re, struct pd_str s)
{
	/* a regex that hit its match bound matches nothing (pd_regex_match) */
	return pd_regex_match(re, s.ptr, s.len) == 1;
}

/* The slot of name (created, and matched against re, if new); UINT32_MAX on OOM. */
static uint32_t sfn_get(struct sfns *f, struct pd_str name, const struct pd_regex *re)
{
	uint64_t h = pd_hash(name.ptr, name.len, 5);
	f->key = name;
	uint32_t i = pd_hidx_find(&f->idx, h, sfn_eq, f);
	if (i != UINT32_MAX)
		return i;
	if (f->n >= UINT32_MAX - 1 || pd_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v) ||
	    pd_hidx_insert(&f->idx, h, (uint32_t)f->n))
		return UINT32_MAX;
	f->v[f->n] = (struct sfn){name, !re || fn_re_match(re, name), 0, 0, 0};
	return (uint32_t)f->n++;
}

int pd_series_step(const struct pd_profile *p, uint32_t si, const struct pd_regex *re, bool by_function, int64_t *total,
		   pd_series_row_fn fn, void *ctx, struct pd_err *err)
{
	*total = 0;
	if (si >= p->nsample_types && p->nsamples)
		return pd_errf(err, PD_EINVAL, "sample index %u out of range (%u sample types)", si, p->nsample_types);
	if (!by_function && !re) {
		for (size_t i = 0; i < p->nsamples; i++)
			*total = pd_wadd(*total, p->samples[i].values[si]);
		return 0;
	}
	/* per location: the slot of each of its frames (innermost first), computed once */
	struct sfns f = {0};
	uint32_t *loff = calloc((size_t)p->nlocations + 1, sizeof *loff); /* offset into slots + 1; 0 = not yet */
	uint32_t *slots = NULL;
	size_t nslots = 0, cslots = 0;
	struct pd_arena *a = pd_arena_new(16 * 1024);
	int64_t gflat = 0, gcum = 0; /* !by_function: the group sums */
	struct pd_prune pr = {0}; /* drop_frames: what pd_top_compute cuts, cut here too */
	int rc = PD_ENOMEM;
	if (!loff || !a || pd_hidx_init(&f.idx, 1024) || pd_prune_init(p, &pr, a, err))
		goto out;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		int64_t v = s->values[si];
		*total = pd_wadd(*total, v);
		if (v == 0)
			continue;
		bool any = false;
		uint32_t k0 = pd_prune_leaf(&pr, s);
		for (uint32_t k = k0; k < s->nlocs; k++) {
			uint32_t li = s->locs[k];
			const struct pd_location *l = &p->locations[li];
			uint32_t nf = l->nlines ? l->nlines : 1;
			if (!loff[li]) {
				if (nslots + nf >= UINT32_MAX || pd_grow((void **)&slots, &cslots, nslots + nf, sizeof *slots))
					goto out;
				for (uint32_t j = 0; j < nf; j++) {
					uint32_t x = sfn_get(&f, pd_frame_name(p, &pr, l, j, a, true), re);
					if (x == UINT32_MAX)
						goto out;
					slots[nslots + j] = x;
				}
				loff[li] = (uint32_t)nslots + 1;
				nslots += nf;
			}
			const uint32_t *ls = slots + loff[li] - 1;
			uint32_t j0 = pd_prune_line0(&pr, li);
			for (uint32_t j = j0; j < nf; j++) {
				struct sfn *e = &f.v[ls[j]];
				if (!e->match)
					continue;
				if (k == k0 && j == j0) {
					e->flat = pd_wadd(e->flat, v);
					gflat = pd_wadd(gflat, v);
				}
				if (e->stamp != i + 1) {
					e->stamp = i + 1;
					e->cum = pd_wadd(e->cum, v);
				}
				any = true;
			}
		}
		if (any)
			gcum = pd_wadd(gcum, v);
	}
	rc = 0;
	if (!by_function)
		rc = fn(ctx, (struct pd_str){NULL, 0}, gflat, gcum);
	for (size_t i = 0; by_function && !rc && i < f.n; i++)
		if (f.v[i].match && f.v[i].stamp) /* stamp: in a sample, not only in lines drop_frames cut */
			rc = fn(ctx, f.v[i].name, f.v[i].flat, f.v[i].cum);
out:
	pd_prune_free(&pr);
	free(loff);
	free(slots);
	free(f.v);
	pd_hidx_free(&f.idx);
	pd_arena_free(a);
	if (rc == PD_ENOMEM)
		return pd_errf(err, rc, "series: out of memory");
	return rc;
}

/* ---- compute ----------------------------------------------------------------------- */

struct group {
	const char *key;       /* type \0 label values \0-separated (arena) */
	size_t keylen;
	const char **labels;
	const char *type;
	const char *sample_type, *unit; /* of the first step */
	int64_t *steps;        /* the steps with profiles, ascending */
	double *cores;         /* spec->cores: per step, cores per unit of value (sources / wall ns) */
	size_t nsteps, csteps, ccores;
	size_t profiles;
	uint32_t total;        /* the total series, or UINT32_MAX */
	bool bad;              /* spec->skip_bad_groups: left out */
};

struct spoint {
	uint32_t step; /* index into the group's steps */
	int64_t value; /* weight-1 parts, exact */
	double dv;     /* weighted parts (normalisation: a gauge source's 1/snapshots) */
};

struct ser {
	uint32_t group;
	struct pd_str function; /* ptr NULL: no function */
	struct spoint *pts;
	size_t n, cap;
	int64_t sum;
	bool kept;
};

struct comp {
	const struct pd_series_spec *spec;
	struct pd_arena *a;
	struct group *g;
	size_t ng, cg;
	struct pd_hidx gidx;
	struct ser *s;
	size_t ns, cs;
	struct pd_hidx sidx;
	/* lookup keys */
	const char *gkey;
	size_t gkeylen;
	uint32_t kgroup;
	struct pd_str kfn;
	/* the step being added */
	uint32_t cur_group, cur_step;
	double cur_w;   /* the weight of the part being added */
	int64_t cur_t;  /* the step's start */
	size_t merges_done; /* parts read by normalised steps */
	int64_t cur_wall; /* sum of its SUM parts' duration_nanos */
	struct pd_err *err;
	/* normalisation: the latest snapshot of each (group, cumulative source) so far */
	struct pd_buf bkeys;  /* keys: group (4 bytes) + source key */
	size_t *boff;         /* key i = bkeys[boff[i] .. boff[i + 1]) */
	char (*bid)[PD_STORE_ID_LEN + 1];
	size_t nb, cb, cbid;
	struct pd_hidx bidx;
	size_t bstart;        /* the key being looked up: bkeys[bstart .. len) */
	/* range path: function names already matched against spec->re */
	struct mcache *mv;
	size_t nm, cm;
	struct pd_hidx midx;
	struct pd_arena *ma;  /* their names */
	struct pd_str mkey;
	struct pd_plan_budget budget; /* profiles merged from their own sample blocks (of the parts used) */
	bool rollups;         /* some hour came from a rollup */
};

struct mcache {
	struct pd_str name;
	bool match;
};

static bool group_eq(void *ctx, uint32_t i)
{
	struct comp *c = ctx;
	return c->g[i].keylen == c->gkeylen && !memcmp(c->g[i].key, c->gkey, c->gkeylen);
}

static bool ser_eq(void *ctx, uint32_t i)
{
	struct comp *c = ctx;
	const struct ser *s = &c->s[i];
	if (s->group != c->kgroup || (s->function.ptr == NULL) != (c->kfn.ptr == NULL))
		return false;
	return s->function.len == c->kfn.len && (!s->function.len || !memcmp(s->function.ptr, c->kfn.ptr, c->kfn.len));
}

static const char *label_value(const struct pd_profile_meta *m, const char *name)
{
	if (!strcmp(name, "service"))
		return m->service;
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, name))
			return m->labels[i].value;
	return "";
}

/* The group key of m into *buf (malloc'd, grown): type \0 v1 \0 v2 ... */
static int group_key(const struct pd_series_spec *spec, const struct pd_profile_meta *m, char **buf, size_t *cap,
		     size_t *len)
{
	size_t n = strlen(m->type) + 1;
	for (size_t i = 0; i < spec->nby; i++)
		n += strlen(label_value(m, spec->by[i])) + 1;
	if (pd_grow((void **)buf, cap, n, 1))
		return PD_ENOMEM;
	size_t o = 0;
	size_t l = strlen(m->type) + 1;
	memcpy(*buf, m->type, l);
	o = l;
	for (size_t i = 0; i < spec->nby; i++) {
		const char *v = label_value(m, spec->by[i]);
		l = strlen(v) + 1;
		memcpy(*buf + o, v, l);
		o += l;
	}
	*len = o;
	return 0;
}

static uint32_t group_get(struct comp *c, const char *key, size_t len)
{
	uint64_t h = pd_hash(key, len, 3);
	c->gkey = key;
	c->gkeylen = len;
	uint32_t i = pd_hidx_find(&c->gidx, h, group_eq, c);
	if (i != UINT32_MAX)
		return i;
	if (pd_grow((void **)&c->g, &c->cg, c->ng + 1, sizeof *c->g) || pd_hidx_insert(&c->gidx, h, (uint32_t)c->ng))
		return UINT32_MAX;
	struct group *g = &c->g[c->ng];
	memset(g, 0, sizeof *g);
	g->total = UINT32_MAX;
	char *k = pd_arena_dup(c->a, key, len);
	g->labels = pd_arena_calloc(c->a, c->spec->nby + 1, sizeof *g->labels);
	if (!k || !g->labels)
		return UINT32_MAX;
	g->key = k;
	g->keylen = len;
	g->type = k;
	const char *p = k + strlen(k) + 1;
	for (size_t k2 = 0; k2 < c->spec->nby; k2++) {
		g->labels[k2] = p;
		p += strlen(p) + 1;
	}
	return (uint32_t)c->ng++;
}

/* The series of (group, function) (created if new); UINT32_MAX on OOM or over the cap. */
static uint32_t ser_get(struct comp *c, uint32_t group, struct pd_str fn)
{
	uint64_t h = pd_hash(fn.ptr ? fn.ptr : "", fn.len, 0x5e51e5 + group + (fn.ptr ? 0 : 7));
	c->kgroup = group;
	c->kfn = fn;
	uint32_t i = pd_hidx_find(&c->sidx, h, ser_eq, c);
	if (i != UINT32_MAX)
		return i;
	if (c->ns >= PD_SERIES_MAX_FUNCTIONS) {
		pd_errf(c->err, PD_EINVAL,
			"more than %d (group, function) pairs: over the limit of series a query may consider; narrow "
			"\"function\", \"by\" or the selection",
			PD_SERIES_MAX_FUNCTIONS);
		return UINT32_MAX;
	}
	if (pd_grow((void **)&c->s, &c->cs, c->ns + 1, sizeof *c->s) || pd_hidx_insert(&c->sidx, h, (uint32_t)c->ns)) {
		pd_errf(c->err, PD_ENOMEM, "series: out of memory");
		return UINT32_MAX;
	}
	struct pd_str name = fn;
	if (fn.ptr) {
		char *d = pd_arena_alloc(c->a, (size_t)fn.len + 1);
		if (!d) {
			pd_errf(c->err, PD_ENOMEM, "series: out of memory");
			return UINT32_MAX;
		}
		memcpy(d, fn.ptr, fn.len);
		d[fn.len] = 0;
		name.ptr = d;
	}
	c->s[c->ns] = (struct ser){group, name, NULL, 0, 0, 0, false};
	return (uint32_t)c->ns++;
}

/* Add v x w to the series' point of the current step (several parts of a
 * normalised step add to the same point). */
static int ser_add(struct comp *c, uint32_t si, int64_t v, double w)
{
	struct ser *s = &c->s[si];
	if (!s->n || s->pts[s->n - 1].step != c->cur_step) {
		if (pd_grow((void **)&s->pts, &s->cap, s->n + 1, sizeof *s->pts))
			return pd_errf(c->err, PD_ENOMEM, "series: out of memory");
		s->pts[s->n++] = (struct spoint){c->cur_step, 0, 0};
	}
	if (w == 1)
		s->pts[s->n - 1].value = pd_wadd(s->pts[s->n - 1].value, v);
	else
		s->pts[s->n - 1].dv += w * (double)v;
	return 0;
}

static int64_t pt_value(const struct spoint *p) { return p->value + (int64_t)llround(p->dv); }

static int on_row(void *ctx, struct pd_str function, int64_t flat, int64_t cum)
{
	struct comp *c = ctx;
	uint32_t si = ser_get(c, c->cur_group, function);
	if (si == UINT32_MAX)
		return c->err->code ? c->err->code : PD_ENOMEM;
	return ser_add(c, si, c->spec->cum ? cum : flat, c->cur_w);
}

struct ord {
	uint32_t group;
	int64_t step;
	size_t meta;
};

static int ord_cmp(const void *x, const void *y, void *metas)
{
	const struct ord *a = x, *b = y;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	const struct pd_profile_meta *v = metas;
	const struct pd_profile_meta *m = &v[a->meta], *n = &v[b->meta];
	if (m->created_ns != n->created_ns)
		return m->created_ns < n->created_ns ? -1 : 1;
	int r = strcmp(m->service, n->service);
	return r ? r : strcmp(m->id, n->id);
}

/* Rank: sum desc, then type, labels, function (the total first). */
static int ser_cmp(const void *x, const void *y, void *comp)
{
	const struct comp *c = comp;
	const struct ser *a = *(const struct ser *const *)x, *b = *(const struct ser *const *)y;
	if (a->sum != b->sum)
		return a->sum > b->sum ? -1 : 1;
	if (a->group != b->group) {
		const struct group *g = &c->g[a->group], *h = &c->g[b->group];
		size_t n = g->keylen < h->keylen ? g->keylen : h->keylen;
		int r = memcmp(g->key, h->key, n);
		if (r)
			return r;
		return g->keylen < h->keylen ? -1 : 1;
	}
	if (!a->function.ptr || !b->function.ptr)
		return a->function.ptr ? 1 : b->function.ptr ? -1 : 0;
	return pd_str_cmp(a->function, b->function);
}

void pd_series_set_free(struct pd_series_set *s)
{
	pd_arena_free(s->arena);
	memset(s, 0, sizeof *s);
}

static const char *types_of(const struct pd_profile *p, char *buf, size_t n)
{
	pd_profile_describe_types(p, buf, n);
	return buf;
}

static int group_types(struct comp *c, struct group *g, struct pd_str ty, struct pd_str un, struct pd_err *err);

/* One part of a (group, step): the whole step merged, or (normalised) its
 * SUM profiles merged, a gauge source's average, a cumulative source's
 * delta. Its sample index and type are checked against the group's, its
 * rows and total added with weight num/den. A pd_norm_fn. */
static int step_part(void *ctx, uint32_t service, int kind, struct pd_profile **pp, int64_t num, int64_t den,
		     struct pd_err *err)
{
	(void)service;
	struct comp *c = ctx;
	const struct pd_series_spec *spec = c->spec;
	const struct pd_profile *p = *pp;
	struct group *g = &c->g[c->cur_group];
	uint32_t si = pd_profile_default_index(p);
	if (spec->sample_index) {
		int x = pd_profile_sample_index(p, spec->sample_index);
		if (x < 0) {
			char t[256];
			return pd_errf(err, PD_EINVAL,
				       "bad \"sample_index\" \"%.64s\": the %s profiles have sample types %s (give a "
				       "name or an index from 0)",
				       spec->sample_index, g->type, types_of(p, t, sizeof t));
		}
		si = (uint32_t)x;
	}
	struct pd_str ty = p->nsample_types ? p->strings[p->sample_types[si].type] : p->strings[0];
	struct pd_str un = p->nsample_types ? p->strings[p->sample_types[si].unit] : p->strings[0];
	int rc = group_types(c, g, ty, un, err);
	if (rc)
		return rc;
	if (kind == PD_NORM_SUM)
		c->cur_wall += p->duration_nanos;
	c->cur_w = (double)num / (double)den;
	int64_t total;
	bool fn_rows = spec->by_function || spec->re;
	if ((!fn_rows || spec->with_total) && g->total == UINT32_MAX &&
	    (g->total = ser_get(c, c->cur_group, (struct pd_str){NULL, 0})) == UINT32_MAX)
		return err->code ? err->code : PD_ENOMEM;
	rc = pd_series_step(p, si, spec->re, spec->by_function, &total, on_row, c, err);
	if (!rc && g->total != UINT32_MAX)
		rc = ser_add(c, g->total, total, c->cur_w);
	return rc;
}

/* The sample type and unit of group g's part: the first part sets them
 * (unit=cores: cpu in nanoseconds only), every other must have the same. */
static int group_types(struct comp *c, struct group *g, struct pd_str ty, struct pd_str un, struct pd_err *err)
{
	const struct pd_series_spec *spec = c->spec;
	long long step_s = (long long)(c->cur_t / 1000000000LL);
	if (!g->sample_type) {
		char *a = pd_arena_alloc(c->a, (size_t)ty.len + 1), *b = pd_arena_alloc(c->a, (size_t)un.len + 1);
		if (!a || !b)
			return pd_errf(err, PD_ENOMEM, "series: out of memory");
		memcpy(a, ty.ptr, ty.len);
		a[ty.len] = 0;
		memcpy(b, un.ptr, un.len);
		b[un.len] = 0;
		g->sample_type = a;
		g->unit = b;
		if (spec->cores && (strcmp(g->type, "cpu") || strcmp(b, "nanoseconds")))
			return pd_errf(err, PD_EINVAL,
				       "bad \"unit\" \"cores\": the %s profiles' sample type is %s/%s; cores are CPU time "
				       "per second: select cpu profiles (query=cpu{...}) and a sample type in nanoseconds",
				       g->type, a, b);
	} else if (!pd_str_eq(ty, g->sample_type) || !pd_str_eq(un, g->unit)) {
		return pd_errf(err, PD_EINCOMPAT,
			       "the %s profiles of one series have different sample types (%s/%s, then %.*s/%.*s "
			       "from step %lld): choose one with \"sample_index\"",
			       g->type, g->sample_type, g->unit, (int)ty.len, ty.ptr, (int)un.len, un.ptr, step_s);
	}
	return 0;
}

/* Lookup of (group, cumulative source) in c->b*: its slot or UINT32_MAX;
 * the key is bkeys[bstart .. len). */
static bool base_eq(void *ctx, uint32_t i)
{
	struct comp *c = ctx;
	size_t la = c->boff[i + 1] - c->boff[i], lb = c->bkeys.len - c->bstart;
	return la == lb && !memcmp(c->bkeys.ptr + c->boff[i], c->bkeys.ptr + c->bstart, la);
}

static uint32_t base_find(struct comp *c, const struct pd_profile_meta *m, uint64_t *h, struct pd_err *err)
{
	c->bstart = c->bkeys.len;
	uint32_t grp = c->cur_group;
	if (pd_buf_append(&c->bkeys, &grp, sizeof grp) || pd_norm_source_key(m, &c->bkeys)) {
		pd_errf(err, PD_ENOMEM, "series: out of memory");
		return UINT32_MAX - 1;
	}
	*h = pd_hash(c->bkeys.ptr + c->bstart, c->bkeys.len - c->bstart, 29);
	return pd_hidx_find(&c->bidx, *h, base_eq, c);
}

/* pd_norm_base_fn: the latest snapshot of the source in an earlier step. */
static const char *base_of(void *ctx, const struct pd_norm_plan *plan, size_t src)
{
	struct comp *c = ctx;
	uint64_t h;
	uint32_t i = base_find(c, &plan->v[plan->src[src].first], &h, NULL);
	c->bkeys.len = c->bstart;
	return i < UINT32_MAX - 1 ? c->bid[i] : NULL;
}

/* Remember the latest snapshot of every cumulative source of this step. */
static int base_remember(struct comp *c, const struct pd_norm_plan *plan, struct pd_err *err)
{
	for (size_t s = 0; s < plan->nsrc; s++) {
		if (plan->src[s].kind != PD_NORM_CUMULATIVE)
			continue;
		const struct pd_profile_meta *last = &plan->v[plan->src[s].first + plan->src[s].n - 1];
		uint64_t h;
		uint32_t i = base_find(c, last, &h, err);
		if (i == UINT32_MAX - 1)
			return PD_ENOMEM;
		if (i == UINT32_MAX) {
			if (pd_grow((void **)&c->boff, &c->cb, c->nb + 2, sizeof *c->boff) ||
			    pd_grow((void **)&c->bid, &c->cbid, c->nb + 1, sizeof *c->bid) ||
			    pd_hidx_insert(&c->bidx, h, (uint32_t)c->nb))
				return pd_errf(err, PD_ENOMEM, "series: out of memory");
			c->boff[c->nb] = c->bstart;
			c->boff[c->nb + 1] = c->bkeys.len;
			i = (uint32_t)c->nb++;
		} else {
			c->bkeys.len = c->bstart;
		}
		memcpy(c->bid[i], last->id, sizeof c->bid[i]);
	}
	return 0;
}

/* A (group, step) with normalisation (or cores): its profiles planned by
 * source and walked by pd_norm_each into step_part; cumulative sources
 * differenced against their latest snapshot of an earlier step. */
static int step_normalized(struct comp *c, struct pd_store *st, const struct pd_profile_meta *v,
			   const struct ord *ord, size_t n, struct pd_norm_info *info, struct pd_err *err)
{
	const struct pd_series_spec *spec = c->spec;
	struct group *g = &c->g[c->cur_group];
	struct pd_profile_meta *tmp = malloc(n * sizeof *tmp); /* shallow copies: never cleared */
	struct pd_norm_plan plan = {0};
	if (!tmp)
		return pd_errf(err, PD_ENOMEM, "series: out of memory");
	for (size_t k = 0; k < n; k++)
		tmp[k] = v[ord[k].meta];
	int rc = pd_norm_plan(tmp, n, &plan, err);
	if (!rc && !c->bidx.slots && pd_hidx_init(&c->bidx, 64))
		rc = pd_errf(err, PD_ENOMEM, "series: out of memory");
	if (!rc && (rc = pd_norm_each(st, &plan, 0, plan.nsvc, spec->normalize, step_part, c,
				      spec->normalize ? base_of : NULL, c, info, err)))
		pd_err_prefix(err, "the %s profiles of the step at %lld (unix seconds)", g->type,
			      (long long)(c->cur_t / 1000000000LL));
	if (!rc && spec->normalize)
		rc = base_remember(c, &plan, err);
	if (!rc && spec->cores) {
		if (pd_grow((void **)&g->cores, &g->ccores, g->nsteps, sizeof *g->cores))
			rc = pd_errf(err, PD_ENOMEM, "series: out of memory");
		else
			g->cores[c->cur_step] = c->cur_wall > 0 ? (double)plan.nsrc / (double)c->cur_wall : 0;
	}
	c->merges_done += plan.nsrc;
	pd_norm_plan_free(&plan);
	free(tmp);
	return rc;
}

/* The caps that need no data. */
static int spec_check(const struct pd_series_spec *spec, struct pd_err *err)
{
	if (spec->step_ns < PD_SERIES_MIN_STEP_NS)
		return pd_errf(err, PD_EINVAL, "bad \"step\": at least 1s");
	int64_t nsteps = pd_series_nsteps(spec->from_ns, spec->to_ns, spec->step_ns);
	if (nsteps > PD_SERIES_MAX_POINTS)
		return pd_errf(err, PD_EINVAL,
			       "%lld steps of %llds in [from, to]: over the limit of %d points per series; "
			       "use a larger \"step\" or a shorter range",
			       (long long)nsteps, (long long)(spec->step_ns / 1000000000LL), PD_SERIES_MAX_POINTS);
	return 0;
}

/* c's arena (out->arena: it owns what the answer keeps) and indexes. */
static int comp_init(struct comp *c, const struct pd_series_spec *spec, struct pd_series_set *out,
		     struct pd_err *err)
{
	c->spec = spec;
	c->err = err;
	out->arena = c->a = pd_arena_new(64 * 1024);
	if (!c->a || pd_hidx_init(&c->gidx, 64) || pd_hidx_init(&c->sidx, 1024))
		return pd_errf(err, PD_ENOMEM, "series: out of memory");
	return 0;
}

static void comp_free(struct comp *c)
{
	for (size_t i = 0; i < c->ns; i++)
		free(c->s[i].pts);
	free(c->s);
	for (size_t i = 0; i < c->ng; i++) {
		free(c->g[i].steps);
		free(c->g[i].cores);
	}
	free(c->g);
	pd_buf_free(&c->bkeys);
	free(c->boff);
	free(c->bid);
	pd_hidx_free(&c->bidx);
	pd_hidx_free(&c->gidx);
	pd_hidx_free(&c->sidx);
	free(c->mv);
	pd_hidx_free(&c->midx);
	pd_arena_free(c->ma);
}

/* spec->skip_bad_groups: a (group, step) that failed with rc (a data error:
 * err says which) leaves g out and the answer goes on (true), else the
 * answer fails (false). */
static bool skip_group(struct comp *c, struct group *g, int rc, struct pd_series_set *out, struct pd_err *err)
{
	if (!c->spec->skip_bad_groups || (rc != PD_EINVAL && rc != PD_EINCOMPAT))
		return false;
	g->bad = true;
	out->skipped++;
	if (!out->skipped_why && err) { /* the group, as a selector names it, and the error */
		struct pd_buf b = PD_BUF_INIT(0);
		int bad = pd_buf_appendf(&b, "%s{", g->type);
		for (size_t k = 0; k < c->spec->nby; k++)
			bad = bad || pd_buf_appendf(&b, "%s%s=\"%s\"", k ? "," : "", c->spec->by[k], g->labels[k]);
		bad = bad || pd_buf_appendf(&b, "}: %s", err->msg) || pd_buf_append(&b, "", 1);
		char *why = bad ? NULL : pd_arena_dup(c->a, b.ptr, b.len);
		out->skipped_why = why;
		pd_buf_free(&b);
	}
	if (err) {
		err->code = 0;
		err->msg[0] = 0;
	}
	return true;
}

/* Rank, top, caps, and the dense points over each group's steps: both paths. */
static int series_finish(struct comp *c, struct pd_series_set *out, struct pd_err *err)
{
	const struct pd_series_spec *spec = c->spec;
	struct ser **rank = NULL;
	int rc = PD_ENOMEM;
	for (size_t i = 0; i < c->ns; i++)
		for (size_t k = 0; k < c->s[i].n; k++)
			c->s[i].sum = pd_wadd(c->s[i].sum, pd_wabs(pt_value(&c->s[i].pts[k])));
	rank = malloc((c->ns ? c->ns : 1) * sizeof *rank);
	if (!rank)
		goto oom;
	size_t nrank = 0; /* the series of the groups not left out */
	for (size_t i = 0; i < c->ns; i++)
		if (!c->g[c->s[i].group].bad)
			rank[nrank++] = &c->s[i];
	if (nrank > 1)
		qsort_r(rank, nrank, sizeof *rank, ser_cmp, c);
	out->matched = nrank;
	size_t max = spec->max_series ? spec->max_series : PD_SERIES_MAX_SERIES;
	size_t keep = 0;
	if (spec->top && spec->top_per_group) {
		size_t *per = calloc(c->ng ? c->ng : 1, sizeof *per);
		if (!per)
			goto oom;
		for (size_t i = 0; i < nrank; i++) {
			struct ser *s = rank[i];
			if (!s->function.ptr || per[s->group] < spec->top) { /* totals always */
				if (s->function.ptr)
					per[s->group]++;
				s->kept = true;
				keep++;
			}
		}
		free(per);
	} else {
		keep = spec->top && spec->top < nrank ? spec->top : nrank;
		for (size_t i = 0; i < keep; i++)
			rank[i]->kept = true;
	}
	if (keep > max) {
		rc = pd_errf(err, PD_EINVAL,
			     "%zu series match: over the limit of %zu series per query; narrow \"function\" or \"by\", "
			     "or ask for the top ones with \"n\"",
			     keep, max);
		goto out;
	}
	size_t points = 0;
	for (size_t i = 0; i < nrank; i++)
		if (rank[i]->kept)
			points += c->g[rank[i]->group].nsteps;
	if (points > PD_SERIES_MAX_TOTAL_POINTS) {
		rc = pd_errf(err, PD_EINVAL,
			     "%zu points in %zu series: over the limit of %d points per query; use a larger \"step\", a "
			     "shorter range or fewer series (\"n\")",
			     points, keep, PD_SERIES_MAX_TOTAL_POINTS);
		goto out;
	}
	out->v = pd_arena_calloc(c->a, keep ? keep : 1, sizeof *out->v);
	if (!out->v)
		goto oom;
	for (size_t i = 0; i < nrank; i++) {
		const struct ser *s = rank[i];
		if (!s->kept)
			continue;
		const struct group *g = &c->g[s->group];
		struct pd_series *o = &out->v[out->n++];
		o->labels = g->labels;
		o->type = g->type;
		o->function = s->function.ptr;
		o->sample_type = g->sample_type;
		o->unit = g->unit;
		o->sum = s->sum;
		o->profiles = g->profiles;
		o->points = pd_arena_calloc(c->a, g->nsteps ? g->nsteps : 1, sizeof *o->points);
		if (!o->points)
			goto oom;
		size_t k = 0;
		for (size_t t = 0; t < g->nsteps; t++) {
			int64_t val = 0;
			double exact = 0;
			if (k < s->n && s->pts[k].step == t) {
				val = pt_value(&s->pts[k]);
				exact = (double)s->pts[k].value + s->pts[k].dv;
				k++;
			}
			o->points[t] = (struct pd_series_point){g->steps[t], val, g->cores ? exact * g->cores[t] : 0};
		}
		o->npoints = g->nsteps;
	}
	rc = 0;
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "series: out of memory");
out:
	free(rank);
	return rc;
}

int pd_series_compute(struct pd_store *st, const struct pd_profile_meta *v, size_t n,
		      const struct pd_series_spec *spec, struct pd_series_set *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct comp c = {0};
	struct ord *ord = NULL;
	const struct pd_profile_meta **ids = NULL;
	char *kbuf = NULL;
	size_t kcap = 0;
	struct pd_profile *p = NULL;
	int rc = spec_check(spec, err);
	if (rc)
		return rc;
	if ((rc = comp_init(&c, spec, out, err)))
		goto out;
	ord = malloc((n ? n : 1) * sizeof *ord);
	ids = malloc((n ? n : 1) * sizeof *ids);
	if (!ord || !ids)
		goto oom;
	/* 1. groups and steps */
	for (size_t i = 0; i < n; i++) {
		size_t klen;
		if (group_key(spec, &v[i], &kbuf, &kcap, &klen))
			goto oom;
		uint32_t g = group_get(&c, kbuf, klen);
		if (g == UINT32_MAX)
			goto oom;
		c.g[g].profiles++;
		ord[i] = (struct ord){g, pd_series_step_start(v[i].created_ns, spec->step_ns), i};
	}
	if (n > 1)
		qsort_r(ord, n, sizeof *ord, ord_cmp, (void *)v);
	/* 2. one merge per (group, step) */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && ord[j].group == ord[i].group && ord[j].step == ord[i].step) {
			ids[j - i] = &v[ord[j].meta];
			j++;
		}
		struct group *g = &c.g[ord[i].group];
		if (g->bad) {
			i = j;
			continue;
		}
		if (pd_grow((void **)&g->steps, &g->csteps, g->nsteps + 1, sizeof *g->steps))
			goto oom;
		g->steps[g->nsteps] = ord[i].step;
		c.cur_group = ord[i].group;
		c.cur_step = (uint32_t)g->nsteps++;
		c.cur_t = ord[i].step;
		c.cur_wall = 0;
		out->profiles += j - i;
		if (!spec->normalize && !spec->cores) { /* the step's profiles merged, summed */
			if ((rc = pd_store_merge_metas(st, ids, j - i, &p, err))) {
				pd_err_prefix(err, "the %s profiles of the step at %lld (unix seconds)", g->type,
					      (long long)(ord[i].step / 1000000000LL));
			} else {
				out->merges++;
				rc = step_part(&c, 0, PD_NORM_SUM, &p, 1, 1, err);
				pd_profile_free(p);
				p = NULL;
			}
		} else {
			rc = step_normalized(&c, st, v, ord + i, j - i, &out->norm, err);
		}
		if (rc && !skip_group(&c, g, rc, out, err))
			goto out;
		rc = 0;
		i = j;
	}
	out->merges += c.merges_done;
	/* 3. rank, top, caps; 4. dense points */
	rc = series_finish(&c, out, err);
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "series: out of memory");
out:
	pd_profile_free(p);
	comp_free(&c);
	free(kbuf);
	free(ord);
	free(ids);
	if (rc) {
		pd_series_set_free(out);
		return rc;
	}
	return 0;
}

/* ---- the range path ---------------------------------------------------------------- */

static bool mc_eq(void *ctx, uint32_t i)
{
	struct comp *c = ctx;
	return !pd_str_cmp(c->mv[i].name, c->mkey);
}

/* 1 if spec->re matches name (always without re), 0 if not, -1 on OOM.
 * Cached: every (service, step) table names mostly the same functions. */
static int name_match(struct comp *c, struct pd_str name)
{
	if (!c->spec->re)
		return 1;
	if (!c->ma && (!(c->ma = pd_arena_new(16 * 1024)) || pd_hidx_init(&c->midx, 1024)))
		return -1;
	uint64_t h = pd_hash(name.ptr, name.len, 11);
	c->mkey = name;
	uint32_t i = pd_hidx_find(&c->midx, h, mc_eq, c);
	if (i != UINT32_MAX)
		return c->mv[i].match;
	if (c->nm >= UINT32_MAX - 1 || pd_grow((void **)&c->mv, &c->cm, c->nm + 1, sizeof *c->mv))
		return -1;
	char *d = pd_arena_alloc(c->ma, (size_t)name.len + 1);
	if (!d || pd_hidx_insert(&c->midx, h, (uint32_t)c->nm))
		return -1;
	memcpy(d, name.ptr, name.len);
	d[name.len] = 0;
	c->mv[c->nm] = (struct mcache){{d, name.len}, fn_re_match(c->spec->re, name)};
	return c->mv[c->nm++].match;
}

static struct pd_str trim_inuse(struct pd_str s)
{
	if (s.len >= 6 && !memcmp(s.ptr, "inuse_", 6))
		return (struct pd_str){s.ptr + 6, s.len - 6};
	return s;
}

/* pd_profile_sample_index on a function table (NULL: the default); -1 if
 * it has no such sample type. */
static int fnt_sample_index(const struct pd_fn_totals *t, const char *name)
{
	if (!t->nv)
		return -1;
	if (!name || !*name)
		return (int)pd_fn_totals_default_index(t);
	if ((*name >= '0' && *name <= '9') || (*name == '-' && name[1])) {
		char *end;
		long v = strtol(name, &end, 10);
		if (*end == 0)
			return v >= 0 && v < (long)t->nv ? (int)v : -1;
	}
	struct pd_str want = trim_inuse((struct pd_str){name, (uint32_t)strlen(name)});
	for (uint32_t i = 0; i < t->nv; i++)
		if (!pd_str_cmp(trim_inuse(t->types[i]), want))
			return (int)i;
	return -1;
}

/* One service's part of the current step from its function table t: what
 * step_part computes from the merged profile, read from per-function sums.
 * *ok = false, nothing added, when the table cannot say: a sample_index it
 * lacks or other sample types than the group's (the merge reports both as
 * the selection path does), a regex summed over two matching functions or
 * more (their cum is not additive). A function whose flat and cum are 0 at
 * the sample index has no row, as in pd_series_step (no sample of it has a
 * value there: the table has it for another sample type). */
static int fnt_part(struct comp *c, const struct pd_fn_totals *t, bool *ok, struct pd_err *err)
{
	const struct pd_series_spec *spec = c->spec;
	struct group *g = &c->g[c->cur_group];
	*ok = false;
	int x = fnt_sample_index(t, spec->sample_index);
	if (x < 0)
		return 0;
	uint32_t si = (uint32_t)x, nv = t->nv;
	if (g->sample_type && (!pd_str_eq(t->types[si], g->sample_type) || !pd_str_eq(t->units[si], g->unit)))
		return 0;
	bool fn_rows = spec->by_function || spec->re;
	int64_t gflat = 0, gcum = 0;
	size_t nmatch = 0;
	for (size_t i = 0; fn_rows && !spec->by_function && i < t->n; i++) {
		int m = name_match(c, t->names[i]);
		if (m < 0)
			return pd_errf(err, PD_ENOMEM, "series: out of memory");
		if (m) {
			nmatch++;
			gflat = pd_wadd(gflat, t->flat[i * nv + si]);
			gcum = pd_wadd(gcum, t->cum[i * nv + si]); /* exact while nmatch <= 1 */
		}
	}
	if (nmatch > 1)
		return 0;
	int rc = group_types(c, g, t->types[si], t->units[si], err);
	if (rc)
		return rc;
	*ok = true;
	c->cur_w = 1;
	if ((!fn_rows || spec->with_total) && g->total == UINT32_MAX &&
	    (g->total = ser_get(c, c->cur_group, (struct pd_str){NULL, 0})) == UINT32_MAX)
		return err->code ? err->code : PD_ENOMEM;
	if (spec->by_function) {
		for (size_t i = 0; !rc && i < t->n; i++) {
			int64_t flat = t->flat[i * nv + si], cum = t->cum[i * nv + si];
			if (!flat && !cum)
				continue;
			int m = name_match(c, t->names[i]);
			if (m < 0)
				return pd_errf(err, PD_ENOMEM, "series: out of memory");
			if (m)
				rc = on_row(c, t->names[i], flat, cum);
		}
	} else if (fn_rows) {
		rc = on_row(c, (struct pd_str){NULL, 0}, gflat, gcum);
	}
	if (!rc && g->total != UINT32_MAX)
		rc = ser_add(c, g->total, t->total[si], 1);
	return rc;
}

/* The start of the first whole UTC hour at or after t. */
static int64_t hour_ceil(int64_t t)
{
	return pd_series_step_start(t, PD_ROLLUP_NS) + (t % PD_ROLLUP_NS ? PD_ROLLUP_NS : 0);
}

/* The part of service svc in the current step, [lo, hi] (the step within
 * [from, to]), of which `edge` profiles (by the metadata) lie outside the
 * whole hours: from its function table if the step holds a whole UTC hour
 * (without cores: the wall time is in the profile), else, or if the table
 * cannot say, from its range merge. The table is asked for with at most
 * edge + 1 profiles merged from their blocks: more means an hour without a
 * current rollup (not built yet, or stale), and computing a function table
 * from profiles costs twice pd_series_step (pd_top_compute per sample
 * type); the merge then does it, the probe having read one profile. */
static int range_part(struct comp *c, struct pd_store *st, const char *svc, const char *type, int64_t lo, int64_t hi,
		      size_t edge, size_t max_raw, struct pd_err *err)
{
	const struct pd_series_spec *spec = c->spec;
	struct pd_merge_range r = {svc, type, lo, hi, max_raw, false};
	struct pd_merge_info info = {0};
	bool done = false, store_err = false;
	int rc = 0;
	if (!spec->cores && hour_ceil(lo) <= hi - PD_ROLLUP_NS + 1) {
		struct pd_fn_totals t;
		c->merges_done++;
		r.max_raw = max_raw && max_raw < edge + 1 ? max_raw : edge + 1;
		rc = pd_store_fn_totals(st, &r, &t, &info, err);
		r.max_raw = max_raw;
		if (rc == PD_ELIMIT) {
			rc = 0; /* hours without a rollup: merged below */
		} else if (!rc && !info.profiles) {
			done = true; /* gone since the metadata scan */
		} else if (!rc) {
			rc = fnt_part(c, &t, &done, err);
		} else {
			store_err = true;
		}
		pd_fn_totals_free(&t);
	}
	if (!rc && !done) {
		struct pd_profile *p = NULL;
		c->merges_done++;
		rc = pd_store_merge_range(st, &r, &p, &info, err);
		store_err = rc != 0;
		if (!rc && p)
			rc = step_part(c, 0, PD_NORM_SUM, &p, 1, 1, err);
		pd_profile_free(p);
	}
	if (!rc) {
		c->rollups = c->rollups || info.rollup_hours > 0;
		rc = pd_plan_charge(&c->budget, info.raw, err);
	} else if (rc == PD_ELIMIT) {
		rc = pd_plan_over(&c->budget, err);
	}
	if (rc == PD_ELIMIT)
		return rc;
	if (rc && (store_err || spec->normalize))
		pd_err_prefix(err, "the %s profiles of the step at %lld (unix seconds)", type,
			      (long long)(c->cur_t / 1000000000LL));
	return rc;
}

bool pd_series_range_ok(const struct pd_selector *sel, const struct pd_series_spec *spec)
{
	bool finer = spec->nby > 1 || (spec->nby == 1 && strcmp(spec->by[0], "service"));
	struct pd_plan_in in = {sel, true, spec->normalize, spec->step_ns > 0 ? spec->step_ns : 1, finer};
	return pd_plan_path(&in) == PD_PLAN_RANGE;
}

/* A (service, step) with profiles, from the metadata. */
struct cell {
	uint32_t svc, group;
	int64_t step;
	size_t profiles, sources;
	size_t edge; /* profiles outside the whole hours of the step within [from, to] */
};

/* The metadata scan: services, cells, distinct (cell, source) keys. */
struct scan {
	int64_t step_ns, from_ns, to_ns;
	bool sources;   /* count sources (normalisation) */
	unsigned kinds; /* 1 << pd_norm_kind of every profile */
	size_t profiles;
	struct pd_arena *a;
	const char **svc;
	size_t nsvc, csvc;
	struct pd_hidx sidx;
	const char *skey;
	struct cell *cell;
	size_t ncell, ccell;
	struct pd_hidx cidx;
	uint32_t ksvc;
	int64_t kstep;
	struct pd_buf keys;
	size_t *off; /* key i = keys[off[i] .. off[i + 1]) */
	size_t nk, ck, kstart;
	struct pd_hidx kidx;
};

static bool scan_svc_eq(void *ctx, uint32_t i)
{
	struct scan *s = ctx;
	return !strcmp(s->svc[i], s->skey);
}

static bool scan_cell_eq(void *ctx, uint32_t i)
{
	struct scan *s = ctx;
	return s->cell[i].svc == s->ksvc && s->cell[i].step == s->kstep;
}

static bool scan_key_eq(void *ctx, uint32_t i)
{
	struct scan *s = ctx;
	size_t la = s->off[i + 1] - s->off[i], lb = s->keys.len - s->kstart;
	return la == lb && !memcmp(s->keys.ptr + s->off[i], s->keys.ptr + s->kstart, la);
}

static int scan_one(void *ctx, const struct pd_profile_meta *m)
{
	struct scan *s = ctx;
	s->profiles++;
	s->kinds |= 1u << pd_norm_kind(m);
	uint64_t h = pd_hash(m->service, strlen(m->service), 13);
	s->skey = m->service;
	uint32_t sv = pd_hidx_find(&s->sidx, h, scan_svc_eq, s);
	if (sv == UINT32_MAX) {
		char *d = pd_arena_dup(s->a, m->service, strlen(m->service) + 1);
		if (!d || s->nsvc >= UINT32_MAX - 1 || pd_grow((void **)&s->svc, &s->csvc, s->nsvc + 1, sizeof *s->svc) ||
		    pd_hidx_insert(&s->sidx, h, (uint32_t)s->nsvc))
			return PD_ENOMEM;
		s->svc[s->nsvc] = d;
		sv = (uint32_t)s->nsvc++;
	}
	s->ksvc = sv;
	s->kstep = pd_series_step_start(m->created_ns, s->step_ns);
	h = pd_hash(&s->kstep, sizeof s->kstep, 0x5e5 + sv);
	uint32_t ci = pd_hidx_find(&s->cidx, h, scan_cell_eq, s);
	if (ci == UINT32_MAX) {
		if (s->ncell >= UINT32_MAX - 1 || pd_grow((void **)&s->cell, &s->ccell, s->ncell + 1, sizeof *s->cell) ||
		    pd_hidx_insert(&s->cidx, h, (uint32_t)s->ncell))
			return PD_ENOMEM;
		s->cell[s->ncell] = (struct cell){sv, 0, s->kstep, 0, 0, 0};
		ci = (uint32_t)s->ncell++;
	}
	s->cell[ci].profiles++;
	int64_t lo = s->kstep > s->from_ns ? s->kstep : s->from_ns;
	int64_t hi = s->to_ns - s->kstep < s->step_ns ? s->to_ns : s->kstep + s->step_ns - 1;
	int64_t h0 = hour_ceil(lo), h1 = pd_series_step_start(hi - PD_ROLLUP_NS + 1, PD_ROLLUP_NS) + PD_ROLLUP_NS;
	/* the whole hours: [h0, h1) */
	if (m->created_ns < h0 || m->created_ns >= h1)
		s->cell[ci].edge++;
	if (!s->sources)
		return 0;
	s->kstart = s->keys.len;
	if (pd_buf_append(&s->keys, &ci, sizeof ci) || pd_norm_source_key(m, &s->keys))
		return PD_ENOMEM;
	h = pd_hash(s->keys.ptr + s->kstart, s->keys.len - s->kstart, 17);
	if (pd_hidx_find(&s->kidx, h, scan_key_eq, s) != UINT32_MAX) {
		s->keys.len = s->kstart; /* seen */
		return 0;
	}
	if (pd_grow((void **)&s->off, &s->ck, s->nk + 2, sizeof *s->off) || pd_hidx_insert(&s->kidx, h, (uint32_t)s->nk))
		return PD_ENOMEM;
	s->off[s->nk] = s->kstart;
	s->off[++s->nk] = s->keys.len;
	s->cell[ci].sources++;
	return 0;
}

static void scan_free(struct scan *s)
{
	pd_arena_free(s->a);
	free(s->svc);
	free(s->cell);
	free(s->off);
	pd_buf_free(&s->keys);
	pd_hidx_free(&s->sidx);
	pd_hidx_free(&s->cidx);
	pd_hidx_free(&s->kidx);
}

/* Cells by step, then group, then service: a (group, step) is a run. */
static int cell_cmp(const void *x, const void *y)
{
	const struct cell *a = x, *b = y;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	return a->svc < b->svc ? -1 : a->svc > b->svc;
}

int pd_series_compute_range(struct pd_store *st, const struct pd_selector *sel, const struct pd_series_spec *spec,
			    size_t max_raw, struct pd_series_set *out, bool *done, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	*done = false;
	if (!pd_series_range_ok(sel, spec))
		return 0;
	int rc = spec_check(spec, err);
	if (rc)
		return rc;
	struct comp c = {0};
	c.budget.max = max_raw;
	struct scan s;
	memset(&s, 0, sizeof s);
	s.step_ns = spec->step_ns;
	s.from_ns = spec->from_ns;
	s.to_ns = spec->to_ns;
	s.sources = spec->normalize;
	s.keys = (struct pd_buf)PD_BUF_INIT(0);
	uint32_t *sgroup = NULL;
	char *kbuf = NULL;
	size_t kcap = 0;
	if (!(s.a = pd_arena_new(4096)) || pd_hidx_init(&s.sidx, 64) || pd_hidx_init(&s.cidx, 1024) ||
	    pd_hidx_init(&s.kidx, 1024))
		goto oom;
	/* 1. the metadata: cells, their profiles and sources */
	rc = pd_query_each(st, sel, spec->from_ns, spec->to_ns, scan_one, &s, err);
	if (rc == PD_ENOMEM)
		goto oom;
	if (rc)
		goto out;
	if (spec->normalize && (s.kinds & ~(1u << PD_NORM_SUM)))
		goto out; /* gauges, cumulative=true snapshots: per source, from the profiles */
	*done = true;
	if ((rc = comp_init(&c, spec, out, err)))
		goto out;
	/* 2. groups: one per service (by=service) or one */
	if (!(sgroup = malloc((s.nsvc ? s.nsvc : 1) * sizeof *sgroup)))
		goto oom;
	for (size_t i = 0; i < s.nsvc; i++) {
		size_t tl = strlen(sel->type) + 1, sl = spec->nby ? strlen(s.svc[i]) + 1 : 0;
		if (pd_grow((void **)&kbuf, &kcap, tl + sl, 1))
			goto oom;
		memcpy(kbuf, sel->type, tl);
		memcpy(kbuf + tl, s.svc[i], sl);
		if ((sgroup[i] = group_get(&c, kbuf, tl + sl)) == UINT32_MAX)
			goto oom;
	}
	for (size_t i = 0; i < s.ncell; i++) {
		s.cell[i].group = sgroup[s.cell[i].svc];
		c.g[s.cell[i].group].profiles += s.cell[i].profiles;
	}
	if (s.ncell > 1)
		qsort(s.cell, s.ncell, sizeof *s.cell, cell_cmp);
	/* 3. per (group, step), its services' parts */
	for (size_t i = 0; i < s.ncell;) {
		const struct cell *ce = &s.cell[i];
		size_t j = i + 1;
		while (j < s.ncell && s.cell[j].step == ce->step && s.cell[j].group == ce->group)
			j++;
		struct group *g = &c.g[ce->group];
		if (pd_grow((void **)&g->steps, &g->csteps, g->nsteps + 1, sizeof *g->steps))
			goto oom;
		g->steps[g->nsteps] = ce->step;
		c.cur_group = ce->group;
		c.cur_step = (uint32_t)g->nsteps++;
		c.cur_t = ce->step;
		c.cur_wall = 0;
		int64_t lo = ce->step > spec->from_ns ? ce->step : spec->from_ns;
		int64_t hi = spec->to_ns - ce->step < spec->step_ns ? spec->to_ns : ce->step + spec->step_ns - 1;
		size_t np = 0, nsrc = 0;
		for (size_t k = i; k < j; k++) {
			if ((rc = range_part(&c, st, s.svc[s.cell[k].svc], sel->type, lo, hi, s.cell[k].edge, max_raw,
					     err)))
				goto out;
			np += s.cell[k].profiles;
			nsrc += s.cell[k].sources;
		}
		out->profiles += np;
		if (spec->normalize) { /* as pd_norm_each counts a step of SUM sources */
			struct pd_norm_info ni = {.on = true, .kinds = 1u << PD_NORM_SUM, .profiles = np, .sources = nsrc};
			pd_norm_info_add(&out->norm, &ni);
		}
		if (spec->cores) {
			if (pd_grow((void **)&g->cores, &g->ccores, g->nsteps, sizeof *g->cores))
				goto oom;
			g->cores[c.cur_step] = c.cur_wall > 0 ? (double)nsrc / (double)c.cur_wall : 0;
		}
		i = j;
	}
	out->merges = c.merges_done;
	out->raw = c.budget.raw;
	out->rollups = c.rollups;
	rc = series_finish(&c, out, err);
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "series: out of memory");
out:
	comp_free(&c);
	scan_free(&s);
	free(sgroup);
	free(kbuf);
	if (rc || !*done) {
		pd_series_set_free(out);
		*done = *done && !rc;
	}
	return rc;
}

/* ---- the function regex ------------------------------------------------------------ */

int pd_series_compile_re(const char *param, const char *re_text, struct pd_selector *holder, const struct pd_regex **re,
			 struct pd_err *err)
{
	*re = NULL;
	memset(holder, 0, sizeof *holder);
	size_t len = strlen(re_text);
	if (len > PD_QUERY_MAX_REGEX)
		return pd_errf(err, PD_ELIMIT, "bad \"%s\": regex of %zu bytes, over the limit of %d", param, len,
			       PD_QUERY_MAX_REGEX);
	/* as the selector {f=~"<re>"}: the selector parser's checks and compilation */
	char *s = malloc(2 * len + 16);
	if (!s)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t o = 0;
	memcpy(s, "{f=~\"", 5);
	o = 5;
	for (const char *c = re_text; *c; c++) {
		if (*c == '\\' || *c == '"')
			s[o++] = '\\';
		s[o++] = *c;
	}
	memcpy(s + o, "\"}", 3);
	struct pd_err e = {0};
	int rc = pd_selector_parse(s, holder, &e);
	free(s);
	if (rc) {
		const char *why = strstr(e.msg, ": regex \"");
		why = why ? why + 2 : strstr(e.msg, ": at ");
		return pd_errf(err, rc == PD_ENOMEM ? PD_ENOMEM : PD_EINVAL, "bad \"%s\" \"%.100s\": %s", param, re_text,
			       why ? why : e.msg);
	}
	PD_ASSERT(holder->n == 1 && holder->m[0].has_re);
	*re = holder->m[0].re;
	return 0;
}

/* ---- text forms -------------------------------------------------------------------- */

static int put(struct pd_buf *b, const char *s) { return pd_buf_append(b, s, strlen(s)); }

static int prom_escape(struct pd_buf *out, const char *s, size_t n, const char *special)
{
	(void)special;
	size_t i = 0, from = 0;
	int rc = 0;
	for (; i < n && !rc; i++) {
		const char *e = s[i] == '\\' ? "\\\\" : s[i] == '"' ? "\\\"" : s[i] == '\n' ? "\\n" : NULL;
		if (!e)
			continue;
		rc = pd_buf_append(out, s + from, i - from);
		if (!rc)
			rc = put(out, e);
		from = i + 1;
	}
	return rc ? rc : pd_buf_append(out, s + from, n - from);
}

static int influx_escape(struct pd_buf *out, const char *s, size_t n, const char *special)
{
	size_t i = 0, from = 0;
	int rc = 0;
	for (; i < n && !rc; i++) {
		char c = s[i];
		char e[3] = {'\\', c, 0};
		if (c == 0)
			continue;
		if (c == '\n')
			e[1] = 'n';
		else if (c == '\r')
			e[1] = 'r';
		else if (c == '\\' ? i + 1 < n && s[i + 1] != '\\' && !strchr(special, s[i + 1]) : !strchr(special, c))
			continue; /* a backslash before an ordinary byte is itself: both line protocol parsers agree */
		rc = pd_buf_append(out, s + from, i - from);
		if (!rc)
			rc = pd_buf_append(out, e, 2);
		from = i + 1;
	}
	return rc ? rc : pd_buf_append(out, s + from, n - from);
}

typedef int escape_fn(struct pd_buf *out, const char *s, size_t n, const char *special);

/* Prometheus' and InfluxDB's parsers refuse a whole scrape or batch for
 * one invalid UTF-8 byte, and function names come from profiles, which
 * nobody validates (Go's pprof does not either): each bad byte is written
 * as U+FFFD, as Go reads it (utf8.DecodeRune, encoding/json). */
static int escape_valid(escape_fn *esc, struct pd_buf *out, const char *s, size_t n, const char *special)
{
	size_t bad;
	int rc = 0;
	while (!rc && !pd_utf8_valid(s, n, &bad)) {
		rc = esc(out, s, bad, special);
		if (!rc)
			rc = put(out, "\xef\xbf\xbd");
		s += bad + 1;
		n -= bad + 1;
	}
	return rc ? rc : esc(out, s, n, special);
}

int pd_prom_escape_value(struct pd_buf *out, const char *s, size_t n) { return escape_valid(prom_escape, out, s, n, ""); }
int pd_influx_escape_tag(struct pd_buf *out, const char *s, size_t n)
{
	return escape_valid(influx_escape, out, s, n, ", =");
}
int pd_influx_escape_measurement(struct pd_buf *out, const char *s, size_t n)
{
	return escape_valid(influx_escape, out, s, n, ", ");
}

static bool name_ok_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

int pd_series_label_names(const struct pd_series_spec *spec, struct pd_arena *a, const char ***names)
{
	static const char *const fixed[] = {"type", "sample_type", "unit", "function"};
	const char **v = pd_arena_calloc(a, spec->nby + 1, sizeof *v);
	if (!v)
		return PD_ENOMEM;
	for (size_t i = 0; i < spec->nby; i++) {
		const char *in = spec->by[i];
		size_t len = strlen(in);
		char *o = pd_arena_alloc(a, len + 32);
		if (!o)
			return PD_ENOMEM;
		size_t k = 0;
		bool prefix = !len || !name_ok_char(in[0], true) || !strncmp(in, "__", 2);
		for (size_t f = 0; f < sizeof fixed / sizeof *fixed; f++)
			prefix = prefix || !strcmp(in, fixed[f]);
		if (prefix) {
			memcpy(o, "label_", 6);
			k = 6;
		}
		for (size_t j = 0; j < len; j++)
			o[k++] = name_ok_char(in[j], false) ? in[j] : '_';
		o[k] = 0;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(v[j], o)) {
				snprintf(o + k, 24, "_%zu", i);
				break;
			}
		v[i] = o;
	}
	*names = v;
	return 0;
}

/* The labels of series s, as (name, value) pairs: by labels, type,
 * sample_type, unit, function. Returns the count. */
struct lab {
	const char *name, *value;
};
static size_t series_labels(const struct pd_series *s, const struct pd_series_spec *spec, const char **names,
			    struct lab *l)
{
	size_t n = 0;
	for (size_t i = 0; i < spec->nby; i++)
		l[n++] = (struct lab){names[i], s->labels[i]};
	l[n++] = (struct lab){"type", s->type};
	l[n++] = (struct lab){"sample_type", s->sample_type};
	l[n++] = (struct lab){"unit", spec->cores ? "cores" : s->unit};
	if (s->function)
		l[n++] = (struct lab){"function", s->function};
	return n;
}

int pd_series_prometheus(const struct pd_series_set *s, const struct pd_series_spec *spec, struct pd_buf *out)
{
	struct pd_arena *a = pd_arena_new(4096);
	const char **names;
	struct lab l[PD_SERIES_MAX_BY + 4];
	struct pd_buf key = PD_BUF_INIT(0);
	int rc = PD_ENOMEM;
	if (!a || spec->nby > PD_SERIES_MAX_BY || pd_series_label_names(spec, a, &names))
		goto out;
	rc = put(out, "# HELP " PD_SERIES_METRIC " The cost of a function (or the total) in the profiles of each "
		      "step, in the sample type's unit (profd /api/1/series).\n# TYPE " PD_SERIES_METRIC " gauge\n");
	for (size_t i = 0; !rc && i < s->n; i++) {
		const struct pd_series *x = &s->v[i];
		size_t nl = series_labels(x, spec, names, l);
		key.len = 0;
		rc = put(&key, PD_SERIES_METRIC "{");
		for (size_t k = 0; !rc && k < nl; k++) {
			rc = put(&key, k ? "," : "");
			if (!rc)
				rc = put(&key, l[k].name);
			if (!rc)
				rc = put(&key, "=\"");
			if (!rc)
				rc = pd_prom_escape_value(&key, l[k].value, strlen(l[k].value));
			if (!rc)
				rc = put(&key, "\"");
		}
		if (!rc)
			rc = put(&key, "} ");
		for (size_t k = 0; !rc && k < x->npoints; k++) {
			char num[64];
			/* milliseconds: floor, so a step's start never moves into the next step */
			int64_t ms = pd_series_step_start(x->points[k].t_ns, 1000000) / 1000000;
			if (spec->cores)
				snprintf(num, sizeof num, "%.9g %" PRId64 "\n", x->points[k].cores, ms);
			else
				snprintf(num, sizeof num, "%" PRId64 " %" PRId64 "\n", x->points[k].value, ms);
			rc = pd_buf_append(out, key.ptr, key.len);
			if (!rc)
				rc = put(out, num);
		}
	}
out:
	pd_buf_free(&key);
	pd_arena_free(a);
	return rc;
}

static int lab_cmp(const void *x, const void *y)
{
	return strcmp(((const struct lab *)x)->name, ((const struct lab *)y)->name);
}

int pd_series_influx(const struct pd_series_set *s, const struct pd_series_spec *spec, struct pd_buf *out)
{
	struct pd_arena *a = pd_arena_new(4096);
	const char **names;
	struct lab l[PD_SERIES_MAX_BY + 4];
	struct pd_buf key = PD_BUF_INIT(0);
	int rc = PD_ENOMEM;
	if (!a || spec->nby > PD_SERIES_MAX_BY || pd_series_label_names(spec, a, &names))
		goto out;
	rc = 0;
	for (size_t i = 0; !rc && i < s->n; i++) {
		const struct pd_series *x = &s->v[i];
		size_t nl = series_labels(x, spec, names, l);
		qsort(l, nl, sizeof *l, lab_cmp);
		key.len = 0;
		rc = pd_influx_escape_measurement(&key, PD_SERIES_MEASUREMENT, strlen(PD_SERIES_MEASUREMENT));
		for (size_t k = 0; !rc && k < nl; k++) {
			if (!*l[k].value)
				continue; /* line protocol has no empty tag values */
			rc = put(&key, ",");
			if (!rc)
				rc = pd_influx_escape_tag(&key, l[k].name, strlen(l[k].name));
			if (!rc)
				rc = put(&key, "=");
			if (!rc)
				rc = pd_influx_escape_tag(&key, l[k].value, strlen(l[k].value));
		}
		if (!rc)
			rc = put(&key, spec->cores ? " cores=" : " value=");
		for (size_t k = 0; !rc && k < x->npoints; k++) {
			char num[64];
			if (spec->cores) /* a float field of its own: InfluxDB fixes a field's type */
				snprintf(num, sizeof num, "%.9g %" PRId64 "\n", x->points[k].cores, x->points[k].t_ns);
			else
				snprintf(num, sizeof num, "%" PRId64 "i %" PRId64 "\n", x->points[k].value, x->points[k].t_ns);
			rc = pd_buf_append(out, key.ptr, key.len);
			if (!rc)
				rc = put(out, num);
		}
	}
out:
	pd_buf_free(&key);
	pd_arena_free(a);
	return rc;
}

void pd_series_spec_window(struct pd_series_spec *spec, int64_t start_ns, int64_t win_ns, size_t top)
{
	static const char *const by[] = {"service"};
	memset(spec, 0, sizeof *spec);
	spec->from_ns = start_ns;
	spec->to_ns = start_ns + win_ns - 1;
	spec->step_ns = win_ns;
	spec->by = by;
	spec->nby = 1;
	spec->by_function = true;
	spec->top = top;
	spec->top_per_group = true;
	spec->with_total = true;
	spec->max_series = SIZE_MAX;
	spec->normalize = true; /* as /api/1/series (docs/api.md "Normalisation") */
	spec->skip_bad_groups = true;
}
