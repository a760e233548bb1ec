/*
 * store.c — what every backend gets for free: the wrappers of the optional
 * ops (rollups), with a fallback for backends that do not implement them.
 * A range merge without rollups is find + merge, the same answer slower.
 * Also the per-function totals (pd_fn_totals) and their accumulator, which
 * the backends use to build and read rollups' function tables.
 */
#include "store_int.h"
#include "../pprof/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ids {
	char (*v)[PD_STORE_ID_LEN + 1];
	size_t n, cap, max;
};

static int add_id(void *ctx, const struct pd_profile_meta *m)
{
	struct ids *ids = ctx;
	if (ids->max && ids->n >= ids->max)
		return PD_ELIMIT;
	if (pd_grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v))
		return PD_ENOMEM;
	memcpy(ids->v[ids->n++], m->id, sizeof *ids->v);
	return 0;
}

static int merge_range_fallback(struct pd_store *s, const struct pd_merge_range *q, struct pd_profile **out,
				struct pd_merge_info *info, struct pd_err *err)
{
	struct ids ids = {NULL, 0, 0, q->max_raw};
	struct pd_store_query fq = {q->service, q->type, NULL, 0, q->from_ns, q->to_ns, 0};
	const char **v = NULL;
	int rc = pd_store_find_partial(s, &fq, add_id, &ids, &info->skipped, err);
	if (rc == PD_ELIMIT)
		rc = pd_errf(err, PD_ELIMIT, "more than %zu profiles of \"%s\" match: over the limit of profiles per query",
			     q->max_raw, q->service);
	else if (rc == PD_ENOMEM)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	if (rc || !ids.n)
		goto out;
	if (!(v = malloc(ids.n * sizeof *v))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ids.n; i++)
		v[i] = ids.v[i];
	if (!(rc = pd_store_merge(s, v, ids.n, out, err)))
		info->profiles = info->raw = ids.n;
out:
	free(v);
	free(ids.v);
	return rc;
}

/* A range merge's query: a service, a type and from <= to. */
static int check_range(const struct pd_merge_range *q, struct pd_err *err)
{
	if (!q->service || !*q->service)
		return pd_errf(err, PD_EINVAL, "missing \"service\"");
	if (!q->type || !*q->type)
		return pd_errf(err, PD_EINVAL, "a range merge needs a profile type");
	if (q->from_ns > q->to_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" is after \"to\"");
	return 0;
}

int pd_store_merge_range(struct pd_store *s, const struct pd_merge_range *q, struct pd_profile **out,
			 struct pd_merge_info *info, struct pd_err *err)
{
	*out = NULL;
	memset(info, 0, sizeof *info);
	int rc = check_range(q, err);
	if (rc)
		return rc;
	if (s->ops->merge_range)
		return s->ops->merge_range(s, q, out, info, err);
	return merge_range_fallback(s, q, out, info, err);
}

/* ---- damaged partitions ---------------------------------------------------------- */

void pd_store_skipped_add(struct pd_store_skipped *sk, int64_t day)
{
	size_t have = sk->n < PD_STORE_MAX_SKIPPED ? sk->n : PD_STORE_MAX_SKIPPED;
	size_t i = 0;
	while (i < have && sk->days[i] < day)
		i++;
	if (i < have && sk->days[i] == day)
		return;
	sk->partial = true;
	if (i < PD_STORE_MAX_SKIPPED) {
		size_t move = (have < PD_STORE_MAX_SKIPPED ? have : PD_STORE_MAX_SKIPPED - 1) - i;
		memmove(&sk->days[i + 1], &sk->days[i], move * sizeof *sk->days);
		sk->days[i] = day;
	}
	sk->n++;
}

void pd_store_skipped_merge(struct pd_store_skipped *dst, const struct pd_store_skipped *src)
{
	for (size_t i = 0; i < src->n && i < PD_STORE_MAX_SKIPPED; i++)
		pd_store_skipped_add(dst, src->days[i]);
}

void pd_store_day_name(int64_t day, char out[16])
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;
	gmtime_r(&t, &tm);
	if (!strftime(out, 16, "%Y-%m-%d", &tm))
		out[0] = 0;
}

void pd_store_health(struct pd_store *s, struct pd_store_health *out)
{
	memset(out, 0, sizeof *out);
	if (s->ops->health)
		s->ops->health(s, out);
}

void pd_store_warm(struct pd_store *s, size_t days)
{
	if (s->ops->warm)
		s->ops->warm(s, days);
}

void pd_store_skipped_in(struct pd_store *s, int64_t from_ns, int64_t to_ns, struct pd_store_skipped *out)
{
	if (s->ops->skipped_in)
		s->ops->skipped_in(s, from_ns, to_ns, out);
}

int pd_store_rollup(struct pd_store *s, int64_t cutoff_ns, size_t max_hours, size_t *built, struct pd_err *err)
{
	*built = 0;
	return s->ops->rollup ? s->ops->rollup(s, cutoff_ns, max_hours, built, err) : 0;
}

/* ---- per-function totals ---------------------------------------------------------- */

void pd_fn_totals_free(struct pd_fn_totals *t)
{
	free(t->types);
	free(t->units);
	free(t->total);
	free(t->names);
	free(t->flat);
	free(t->cum);
	pd_arena_free(t->arena);
	memset(t, 0, sizeof *t);
}

uint32_t pd_fn_totals_default_index(const struct pd_fn_totals *t)
{
	for (uint32_t i = 0; t->dflt.len && i < t->nv; i++)
		if (!pd_str_cmp(t->types[i], t->dflt))
			return i;
	return t->nv ? t->nv - 1 : 0;
}

int pd_fnt_init(struct pd_fnt_acc *a, struct pd_err *err)
{
	memset(a, 0, sizeof *a);
	if (!(a->t.arena = pd_arena_new(64 * 1024)) || pd_hidx_init(&a->idx, 1024)) {
		pd_arena_free(a->t.arena);
		a->t.arena = NULL;
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	return 0;
}

void pd_fnt_free(struct pd_fnt_acc *a)
{
	pd_fn_totals_free(&a->t);
	pd_hidx_free(&a->idx);
}

static struct pd_str arena_str(struct pd_arena *ar, struct pd_str s)
{
	char *c = pd_arena_alloc(ar, s.len + 1);
	if (!c)
		return (struct pd_str){NULL, 0};
	memcpy(c, s.ptr, s.len);
	c[s.len] = 0;
	return (struct pd_str){c, s.len};
}

int pd_fnt_types(struct pd_fnt_acc *a, uint32_t nv, const struct pd_str *types, const struct pd_str *units,
		 struct pd_str dflt, const char *what, struct pd_err *err)
{
	struct pd_fn_totals *t = &a->t;
	if (a->typed) {
		bool same = nv == t->nv;
		for (uint32_t i = 0; same && i < nv; i++)
			same = !pd_str_cmp(types[i], t->types[i]) && !pd_str_cmp(units[i], t->units[i]);
		if (!same)
			return pd_errf(err, PD_EINCOMPAT,
				       "incompatible profiles: %s has other sample types than the first profile "
				       "(one type at a time, e.g. type=cpu; profiles of one type from different "
				       "producers: narrow by service or labels)",
				       what);
		if (!t->dflt.len && dflt.len && !(t->dflt = arena_str(t->arena, dflt)).ptr)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		return 0;
	}
	t->types = calloc(nv + 1, sizeof *t->types);
	t->units = calloc(nv + 1, sizeof *t->units);
	t->total = calloc(nv + 1, sizeof *t->total);
	if (!t->types || !t->units || !t->total)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < nv; i++)
		if (!(t->types[i] = arena_str(t->arena, types[i])).ptr || !(t->units[i] = arena_str(t->arena, units[i])).ptr)
			return pd_errf(err, PD_ENOMEM, "out of memory");
	if (!(t->dflt = arena_str(t->arena, dflt)).ptr)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	t->nv = nv;
	a->typed = true;
	return 0;
}

static bool name_eq(void *ctx, uint32_t i)
{
	struct pd_fnt_acc *a = ctx;
	return !pd_str_cmp(a->t.names[i], a->key);
}

int pd_fnt_add(struct pd_fnt_acc *a, struct pd_str name, const int64_t *flat, const int64_t *cum,
	       struct pd_err *err)
{
	struct pd_fn_totals *t = &a->t;
	uint64_t h = pd_hash(name.ptr, name.len, 0);
	a->key = name;
	uint32_t i = pd_hidx_find(&a->idx, h, name_eq, a);
	if (i == UINT32_MAX) {
		if (t->n >= UINT32_MAX - 1)
			return pd_errf(err, PD_ELIMIT, "too many functions");
		if (t->n == a->cap) {
			size_t nc = a->cap ? 2 * a->cap : 256, nv = t->nv ? t->nv : 1;
			struct pd_str *nn = realloc(t->names, nc * sizeof *nn);
			if (nn)
				t->names = nn;
			int64_t *nf = nn ? realloc(t->flat, nc * nv * sizeof *nf) : NULL;
			if (nf)
				t->flat = nf;
			int64_t *ncu = nf ? realloc(t->cum, nc * nv * sizeof *ncu) : NULL;
			if (!ncu)
				return pd_errf(err, PD_ENOMEM, "out of memory");
			t->cum = ncu;
			a->cap = nc;
		}
		i = (uint32_t)t->n;
		if (!(t->names[i] = arena_str(t->arena, name)).ptr || pd_hidx_insert(&a->idx, h, i))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		memset(t->flat + (size_t)i * t->nv, 0, t->nv * sizeof *t->flat);
		memset(t->cum + (size_t)i * t->nv, 0, t->nv * sizeof *t->cum);
		t->n++;
	}
	int64_t *tf = t->flat + (size_t)i * t->nv, *tc = t->cum + (size_t)i * t->nv;
	for (uint32_t j = 0; j < t->nv; j++) {
		if (flat)
			tf[j] = pd_wadd(tf[j], flat[j]);
		if (cum)
			tc[j] = pd_wadd(tc[j], cum[j]);
	}
	return 0;
}

void pd_fnt_add_total(struct pd_fnt_acc *a, const int64_t *total)
{
	for (uint32_t j = 0; j < a->t.nv; j++)
		a->t.total[j] += total[j];
}

int pd_fnt_add_profile(struct pd_fnt_acc *a, const struct pd_profile *p, const char *what, struct pd_err *err)
{
	uint32_t nv = p->nsample_types;
	struct pd_str *types = calloc(nv + 1, sizeof *types), *units = calloc(nv + 1, sizeof *units);
	int64_t *v = calloc(2 * (size_t)nv + 1, sizeof *v);
	int rc = 0;
	if (!types || !units || !v) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t j = 0; j < nv; j++) {
		types[j] = p->strings[p->sample_types[j].type];
		units[j] = p->strings[p->sample_types[j].unit];
	}
	if ((rc = pd_fnt_types(a, nv, types, units, p->strings[p->default_sample_type], what, err)))
		goto out;
	for (uint32_t j = 0; j < nv && !rc; j++) {
		struct pd_top top;
		if ((rc = pd_top_compute_opt(p, j, PD_TOP_BY_NAME, &top, err)))
			break;
		memset(v, 0, 2 * (size_t)nv * sizeof *v);
		for (size_t r = 0; r < top.n && !rc; r++) {
			v[j] = top.rows[r].flat;
			v[nv + j] = top.rows[r].cum;
			rc = pd_fnt_add(a, top.rows[r].name, v, v + nv, err);
		}
		a->t.total[j] += top.total;
		pd_top_free(&top);
	}
out:
	free(types);
	free(units);
	free(v);
	return rc;
}

void pd_fnt_finish(struct pd_fnt_acc *a, struct pd_fn_totals *out)
{
	*out = a->t;
	memset(&a->t, 0, sizeof a->t);
	pd_hidx_free(&a->idx);
	a->typed = false;
	a->cap = 0;
}

int pd_fn_totals_of(const struct pd_profile *p, struct pd_fn_totals *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct pd_fnt_acc a;
	int rc = pd_fnt_init(&a, err);
	if (!rc && !(rc = pd_fnt_add_profile(&a, p, "the profile", err)))
		pd_fnt_finish(&a, out);
	pd_fnt_free(&a);
	return rc;
}

int pd_store_merge_metas(struct pd_store *s, const struct pd_profile_meta *const *m, size_t n, struct pd_profile **out,
			 struct pd_err *err)
{
	*out = NULL;
	const char **ids = malloc((n ? n : 1) * sizeof *ids);
	if (!ids)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	bool shared = n > 0 && s->ops->merge_of;
	for (size_t i = 0; i < n; i++) {
		ids[i] = m[i]->id;
		shared = shared && !strcmp(m[i]->service, m[0]->service) && !strcmp(m[i]->type, m[0]->type);
	}
	int rc = shared ? s->ops->merge_of(s, m[0]->service, m[0]->type, ids, n, out, err)
			: pd_store_merge(s, ids, n, out, err);
	free(ids);
	return rc;
}

int pd_store_find_services(struct pd_store *s, const char *const *services, size_t n, const struct pd_store_query *q,
			   pd_meta_fn fn, void *ctx, struct pd_err *err)
{
	if (n > 1 && s->ops->find_services)
		return s->ops->find_services(s, services, n, q, fn, ctx, err);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct pd_store_query one = *q;
		one.service = services[i];
		rc = pd_store_find(s, &one, fn, ctx, err);
	}
	return rc;
}

unsigned pd_store_read_ahead(const struct pd_store *s)
{
	/* PROFD_READ_AHEAD=N (1..64) overrides the store's: the tests take
	 * both paths on the embedded store, and compare their answers */
	const char *e = getenv("PROFD_READ_AHEAD");
	char *end;
	unsigned long v = e && *e ? strtoul(e, &end, 10) : 0;
	if (v >= 1 && v <= 64 && !*end)
		return (unsigned)v;
	return s->ops->read_ahead ? s->ops->read_ahead : 1;
}

int pd_store_fn_totals(struct pd_store *s, const struct pd_merge_range *q, struct pd_fn_totals *out,
		       struct pd_merge_info *info, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	memset(info, 0, sizeof *info);
	if (s->ops->fn_totals) {
		int rc = check_range(q, err);
		return rc ? rc : s->ops->fn_totals(s, q, out, info, err);
	}
	struct pd_profile *p;
	int rc = pd_store_merge_range(s, q, &p, info, err);
	if (!rc && p)
		rc = pd_fn_totals_of(p, out, err);
	pd_profile_free(p);
	return rc;
}

int pd_fnt_add_totals(struct pd_fnt_acc *a, const struct pd_fn_totals *t, const char *what, struct pd_err *err)
{
	if (!t->nv)
		return 0;
	int rc = pd_fnt_types(a, t->nv, t->types, t->units, t->dflt, what, err);
	if (rc)
		return rc;
	pd_fnt_add_total(a, t->total);
	for (size_t i = 0; i < t->n && !rc; i++)
		rc = pd_fnt_add(a, t->names[i], t->flat + i * t->nv, t->cum + i * t->nv, err);
	return rc;
}
