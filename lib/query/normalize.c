/*
 * normalize.c — kinds, sources and the normalised aggregation of a
 * selection (contract in normalize.h; the rules in docs/api.md
 * "Normalisation"). Callers: lib/http/api1_merge.c, api1_top.c, api1_diff.c
 * and lib/query/series.c.
 *
 * Cost: a selection of SUM profiles (cpu, deltas) is one store merge, as
 * without normalisation. A GAUGE source is one store merge of its snapshots
 * (the same blocks read, in smaller merges); a CUMULATIVE source reads two
 * profiles (earliest, latest) whatever its number of snapshots.
 */
#define _GNU_SOURCE /* qsort_r */
#include "normalize.h"

#include <stdlib.h>
#include <string.h>

int pd_norm_kind(const struct pd_profile_meta *m)
{
	int t = pd_ptype_find(m->type);
	if (t >= 0 && pd_ptypes[t].gauge)
		return PD_NORM_GAUGE;
	if (t >= 0 && pd_ptypes[t].cumulative)
		for (size_t i = 0; i < m->nlabels; i++)
			if (!strcmp(m->labels[i].key, PD_NORM_CUMULATIVE_LABEL))
				return !strcmp(m->labels[i].value, "true") ? PD_NORM_CUMULATIVE : PD_NORM_SUM;
	return PD_NORM_SUM;
}

bool pd_norm_type_sums(const char *type)
{
	int t = pd_ptype_find(type);
	return t >= 0 && !pd_ptypes[t].gauge && !pd_ptypes[t].cumulative;
}

bool pd_norm_type_gauge(const char *type)
{
	int t = pd_ptype_find(type);
	return !type || (t >= 0 && pd_ptypes[t].gauge);
}

static const char *label(const struct pd_profile_meta *m, const char *key)
{
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, key))
			return m->labels[i].value;
	return NULL;
}

static int put0(struct pd_buf *b, const char *s) { return pd_buf_append(b, s, strlen(s) + 1); }

int pd_norm_source_key(const struct pd_profile_meta *m, struct pd_buf *out)
{
	char kind[2] = {(char)('0' + pd_norm_kind(m)), 0};
	int rc = put0(out, m->service);
	if (!rc)
		rc = put0(out, m->type);
	if (!rc)
		rc = put0(out, kind);
	const char *inst = label(m, "instance"), *pod = label(m, "pod");
	if (rc) {
	} else if (inst) {
		rc = put0(out, "i");
		if (!rc)
			rc = put0(out, inst);
	} else if (pod) {
		const char *ns = label(m, "namespace");
		rc = put0(out, "p");
		if (!rc)
			rc = put0(out, ns ? ns : "");
		if (!rc)
			rc = put0(out, pod);
	} else {
		rc = put0(out, "l");
		for (size_t i = 0; i < m->nlabels && !rc; i++)
			if (strcmp(m->labels[i].key, PD_NORM_CUMULATIVE_LABEL)) { /* in the kind already */
				rc = put0(out, m->labels[i].key);
				if (!rc)
					rc = put0(out, m->labels[i].value);
			}
	}
	return rc;
}

/* ---- plan ---------------------------------------------------------------------- */

struct keys {
	struct pd_buf b;
	size_t *off; /* key i = b.ptr[off[i] .. off[i + 1]) */
	const struct pd_profile_meta *v;
};

static int key_cmp(const struct keys *k, size_t a, size_t b)
{
	size_t la = k->off[a + 1] - k->off[a], lb = k->off[b + 1] - k->off[b];
	int c = memcmp(k->b.ptr + k->off[a], k->b.ptr + k->off[b], la < lb ? la : lb);
	return c ? c : la < lb ? -1 : la > lb;
}

static int ord_cmp(const void *x, const void *y, void *ctx)
{
	const struct keys *k = ctx;
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	int c = key_cmp(k, a, b);
	if (c)
		return c;
	const struct pd_profile_meta *m = &k->v[a], *n = &k->v[b];
	if (m->created_ns != n->created_ns)
		return m->created_ns < n->created_ns ? -1 : 1;
	return strcmp(m->id, n->id);
}

void pd_norm_plan_free(struct pd_norm_plan *p)
{
	free(p->svc);
	free(p->src);
	memset(p, 0, sizeof *p);
}

int pd_norm_plan(struct pd_profile_meta *v, size_t n, struct pd_norm_plan *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct keys k = {PD_BUF_INIT(0), NULL, v};
	size_t *ord = malloc((n ? n : 1) * sizeof *ord);
	struct pd_profile_meta *tmp = malloc((n ? n : 1) * sizeof *tmp);
	size_t csvc = 0, csrc = 0;
	int rc = PD_ENOMEM;
	k.off = malloc((n + 1) * sizeof *k.off);
	if (!ord || !tmp || !k.off)
		goto out;
	for (size_t i = 0; i < n; i++) {
		k.off[i] = k.b.len;
		if (pd_norm_source_key(&v[i], &k.b))
			goto out;
		ord[i] = i;
	}
	k.off[n] = k.b.len;
	if (n > 1)
		qsort_r(ord, n, sizeof *ord, ord_cmp, &k);
	for (size_t i = 0; i < n; i++) {
		size_t o = ord[i];
		bool new_src = i == 0 || key_cmp(&k, ord[i - 1], o) != 0;
		bool new_svc = i == 0 || strcmp(v[ord[i - 1]].service, v[o].service) != 0;
		if (new_svc) {
			if (pd_grow((void **)&out->svc, &csvc, out->nsvc + 1, sizeof *out->svc))
				goto out;
			out->svc[out->nsvc++] = (struct pd_norm_service){NULL, i, 0, out->nsrc, 0};
		}
		if (new_src) {
			if (pd_grow((void **)&out->src, &csrc, out->nsrc + 1, sizeof *out->src))
				goto out;
			out->src[out->nsrc++] =
			    (struct pd_norm_source){i, 0, (uint32_t)(out->nsvc - 1), pd_norm_kind(&v[o])};
			out->svc[out->nsvc - 1].nsrc++;
		}
		out->src[out->nsrc - 1].n++;
		out->svc[out->nsvc - 1].n++;
	}
	for (size_t i = 0; i < n; i++)
		tmp[i] = v[ord[i]];
	if (n)
		memcpy(v, tmp, n * sizeof *v);
	for (size_t s = 0; s < out->nsvc; s++)
		out->svc[s].name = v[out->svc[s].first].service;
	out->v = v;
	out->n = n;
	rc = 0;
out:
	free(ord);
	free(tmp);
	free(k.off);
	pd_buf_free(&k.b);
	if (rc) {
		pd_norm_plan_free(out);
		return pd_errf(err, rc, "normalisation: out of memory");
	}
	return 0;
}

/* ---- info ---------------------------------------------------------------------- */

const char *pd_norm_mode(const struct pd_norm_info *i, char *buf, size_t n)
{
	static const char *const names[] = {"sum", "gauge_average", "cumulative_delta"};
	if (!i->on) {
		snprintf(buf, n, "none");
		return buf;
	}
	size_t o = 0;
	buf[0] = 0;
	for (int k = 0; k < PD_NORM_NKINDS; k++)
		if (i->kinds & (1u << k) && o < n)
			o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "+" : "", names[k]);
	if (!o)
		snprintf(buf, n, "sum");
	return buf;
}

void pd_norm_info_add(struct pd_norm_info *to, const struct pd_norm_info *from)
{
	to->on = to->on || from->on;
	to->kinds |= from->kinds;
	to->profiles += from->profiles;
	to->sources += from->sources;
	to->excluded += from->excluded;
	to->resets += from->resets;
}

/* ---- the walk ------------------------------------------------------------------- */

static int merge_ids(struct pd_store *st, const struct pd_profile_meta *v, size_t first, size_t n,
		     struct pd_profile **out, struct pd_err *err)
{
	const struct pd_profile_meta **m = malloc((n ? n : 1) * sizeof *m);
	if (!m)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		m[i] = &v[first + i];
	int rc = pd_store_merge_metas(st, m, n, out, err);
	free(m);
	return rc;
}

static bool same_types(const struct pd_profile *a, const struct pd_profile *b)
{
	if (a->nsample_types != b->nsample_types)
		return false;
	for (uint32_t t = 0; t < a->nsample_types; t++)
		if (pd_str_cmp(a->strings[a->sample_types[t].type], b->strings[b->sample_types[t].type]) ||
		    pd_str_cmp(a->strings[a->sample_types[t].unit], b->strings[b->sample_types[t].unit]))
			return false;
	return true;
}

int pd_norm_delta(struct pd_store *st, const char *earliest_id, const char *latest_id, struct pd_profile **out,
		  bool *reset, struct pd_err *err)
{
	struct pd_profile *a = NULL, *b = NULL;
	*out = NULL;
	*reset = false;
	int rc = pd_store_get(st, earliest_id, &a, err);
	if (!rc)
		rc = pd_store_get(st, latest_id, &b, err);
	if (rc)
		goto out;
	if (!same_types(a, b) || pd_pprof_counter_reset(b, a)) {
		*reset = true; /* a restart: the latest counts from it */
		*out = b;
		b = NULL;
	} else {
		rc = pd_pprof_delta(b, a, out, err);
	}
out:
	pd_profile_free(a);
	pd_profile_free(b);
	return rc;
}

static int call(pd_norm_fn fn, void *ctx, uint32_t svc, int kind, struct pd_profile *p, int64_t num, int64_t den,
		struct pd_err *err)
{
	int rc = fn(ctx, svc, kind, &p, num, den, err);
	pd_profile_free(p);
	return rc;
}

int pd_norm_each(struct pd_store *st, const struct pd_norm_plan *plan, size_t first, size_t nsvc, bool normalize,
		 pd_norm_fn fn, void *ctx, pd_norm_base_fn base, void *bctx, struct pd_norm_info *info,
		 struct pd_err *err)
{
	PD_ASSERT(first + nsvc <= plan->nsvc);
	if (!nsvc)
		return 0;
	const struct pd_profile_meta *v = plan->v;
	size_t m0 = plan->svc[first].first, m1 = plan->svc[first + nsvc - 1].first + plan->svc[first + nsvc - 1].n;
	size_t s0 = plan->svc[first].src, s1 = plan->svc[first + nsvc - 1].src + plan->svc[first + nsvc - 1].nsrc;
	struct pd_profile *p = NULL;
	info->on = info->on || normalize;
	info->profiles += m1 - m0;
	info->sources += s1 - s0;
	for (size_t s = s0; s < s1; s++)
		info->kinds |= 1u << plan->src[s].kind;
	if (!normalize) {
		int rc = merge_ids(st, v, m0, m1 - m0, &p, err);
		return rc ? rc : call(fn, ctx, (uint32_t)first, PD_NORM_SUM, p, 1, 1, err);
	}
	for (size_t i = m0 + 1; i < m1; i++)
		if (strcmp(v[i].type, v[m0].type))
			return pd_errf(err, PD_EINCOMPAT,
				       "incompatible profiles: %s and %s profiles cannot be added up; select one type "
				       "(e.g. query=%s{...})",
				       v[m0].type, v[i].type, v[m0].type);
	/* SUM: one merge of every SUM source's profiles (sources are contiguous per
	 * kind within a service, not across services: gather the ids) */
	size_t nsum = 0;
	for (size_t s = s0; s < s1; s++)
		if (plan->src[s].kind == PD_NORM_SUM)
			nsum += plan->src[s].n;
	if (nsum) {
		const struct pd_profile_meta **m = malloc(nsum * sizeof *m);
		if (!m)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		size_t k = 0;
		for (size_t s = s0; s < s1; s++)
			for (size_t i = 0; plan->src[s].kind == PD_NORM_SUM && i < plan->src[s].n; i++)
				m[k++] = &v[plan->src[s].first + i];
		int rc = pd_store_merge_metas(st, m, nsum, &p, err);
		free(m);
		if (rc || (rc = call(fn, ctx, (uint32_t)first, PD_NORM_SUM, p, 1, 1, err)))
			return rc;
	}
	for (size_t s = s0; s < s1; s++) {
		const struct pd_norm_source *src = &plan->src[s];
		int rc = 0;
		if (src->kind == PD_NORM_GAUGE) {
			if (!(rc = merge_ids(st, v, src->first, src->n, &p, err)))
				rc = call(fn, ctx, src->service, src->kind, p, 1, (int64_t)src->n, err);
		} else if (src->kind == PD_NORM_CUMULATIVE) {
			const char *b = base ? base(bctx, plan, s) : NULL;
			if (!b && src->n < 2) {
				info->excluded += src->n;
				continue;
			}
			bool reset;
			rc =
			    pd_norm_delta(st, b ? b : v[src->first].id, v[src->first + src->n - 1].id, &p, &reset, err);
			if (!rc) {
				info->resets += reset;
				rc = call(fn, ctx, src->service, src->kind, p, 1, 1, err);
			}
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- one profile ------------------------------------------------------------------- */

struct merge_ctx {
	struct pd_profile *one; /* the first part */
	struct pd_merger *m;    /* from the second part on */
};

static int merge_part(void *ctx, uint32_t service, int kind, struct pd_profile **p, int64_t num, int64_t den,
		      struct pd_err *err)
{
	(void)service;
	(void)kind;
	struct merge_ctx *c = ctx;
	pd_profile_scale(*p, num, den);
	if (!c->one && !c->m) {
		c->one = *p;
		*p = NULL;
		return 0;
	}
	int rc;
	if (!c->m) {
		if (!(c->m = pd_merger_new()))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		rc = pd_merger_add(c->m, c->one, err);
		pd_profile_free(c->one);
		c->one = NULL;
		if (rc)
			return rc;
	}
	return pd_merger_add(c->m, *p, err);
}

int pd_norm_merge(struct pd_store *st, struct pd_profile_meta *v, size_t n, bool normalize, struct pd_profile **out,
		  struct pd_norm_info *info, struct pd_err *err)
{
	*out = NULL;
	memset(info, 0, sizeof *info);
	struct pd_norm_plan plan;
	struct merge_ctx c = {NULL, NULL};
	int rc = pd_norm_plan(v, n, &plan, err);
	if (rc)
		return rc;
	rc = pd_norm_each(st, &plan, 0, plan.nsvc, normalize, merge_part, &c, NULL, NULL, info, err);
	if (!rc && c.m) {
		rc = pd_merger_finish(c.m, out, err);
	} else if (!rc && c.one) {
		*out = c.one;
		c.one = NULL;
	} else if (!rc) {
		rc = pd_errf(
		    err, PD_ENOTFOUND,
		    "nothing to merge: each of the %zu sources has a single cumulative=true snapshot in the range "
		    "(counters since the process started: nothing to subtract); widen the range, or add "
		    "normalize=false to sum the snapshots as they are",
		    info->sources);
	}
	pd_merger_free(c.m);
	pd_profile_free(c.one);
	pd_norm_plan_free(&plan);
	return rc;
}

/* ---- sources from metadata ------------------------------------------------------------ */

struct count_ctx {
	struct keys k; /* the distinct keys seen (v unused) */
	size_t nk, ck;
	struct pd_hidx idx;
	size_t kstart; /* the key being looked up: b.ptr[kstart .. b.len) */
	char *const *services;
	size_t nsvc;
	size_t *counts, profiles;
	bool cumulative;
};

static bool count_eq(void *ctx, uint32_t i)
{
	struct count_ctx *c = ctx;
	size_t la = c->k.off[i + 1] - c->k.off[i], lb = c->k.b.len - c->kstart;
	return la == lb && !memcmp(c->k.b.ptr + c->k.off[i], c->k.b.ptr + c->kstart, la);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int count_one(void *ctx, const struct pd_profile_meta *m)
{
	struct count_ctx *c = ctx;
	c->profiles++;
	c->cumulative = c->cumulative || pd_norm_kind(m) == PD_NORM_CUMULATIVE;
	c->kstart = c->k.b.len;
	if (pd_norm_source_key(m, &c->k.b))
		return PD_ENOMEM;
	uint64_t h = pd_hash(c->k.b.ptr + c->kstart, c->k.b.len - c->kstart, 17);
	if (pd_hidx_find(&c->idx, h, count_eq, c) != UINT32_MAX) {
		c->k.b.len = c->kstart; /* seen: drop the copy */
		return 0;
	}
	if (pd_grow((void **)&c->k.off, &c->ck, c->nk + 2, sizeof *c->k.off) ||
	    pd_hidx_insert(&c->idx, h, (uint32_t)c->nk))
		return PD_ENOMEM;
	c->k.off[c->nk] = c->kstart;
	c->k.off[++c->nk] = c->k.b.len;
	const char *key = m->service;
	char *const *f = bsearch(&key, c->services, c->nsvc, sizeof *c->services, cmp_str);
	if (f)
		c->counts[f - c->services]++;
	return 0;
}

int pd_norm_count_sources(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns,
			  char *const *services, size_t n, size_t *counts, size_t *profiles, bool *cumulative,
			  struct pd_err *err)
{
	struct count_ctx c = {{PD_BUF_INIT(0), NULL, NULL}, 0, 0, {0}, 0, services, n, counts, 0, false};
	memset(counts, 0, n * sizeof *counts);
	int rc = pd_hidx_init(&c.idx, 256) ? PD_ENOMEM : 0;
	if (!rc)
		rc = pd_query_each(st, sel, from_ns, to_ns, count_one, &c, err);
	if (rc == PD_ENOMEM)
		pd_errf(err, rc, "normalisation: out of memory");
	*profiles = c.profiles;
	*cumulative = c.cumulative;
	pd_hidx_free(&c.idx);
	free(c.k.off);
	pd_buf_free(&c.k.b);
	return rc;
}
