/*
 * api1_top.c — GET /api/1/top: the hottest functions across every service
 * the query selects. Per service, the selection is normalised
 * (pd_norm_each, lib/query/normalize.h: its cpu and delta profiles merged in
 * the store in one merge, each gauge source merged and weighted 1/snapshots,
 * each cumulative source differenced; normalize=false: one merge, summed),
 * the sample index is picked (sample_index/si, else the profile's default)
 * and every part's `pprof -top` table is folded into the fleet accumulator
 * (lib/query/top.c) and freed: memory is the functions, never every
 * service's profile at once. Parts whose chosen sample types differ cannot
 * be added up: 400 naming them. CPU answers also carry cores (CPU time /
 * profiled wall time x sources, per service). docs/api.md "API v1" is the
 * contract.
 *
 * Rollups: a selector with a type and no matcher but on the service (what
 * an hourly rollup can stand for) is answered per service by
 * pd_store_merge_range (whole hours from the store's rollups, the rest from
 * the profiles; the same merge); the answer's "rollups" says whether any
 * hour came from one. rollups=false forces the selection path. With
 * normalisation, gauge types never take it (a rollup sums snapshots), nor a
 * range holding cumulative=true snapshots; the sources (for cores and the
 * "normalization" counts) then come from the metadata alone.
 */
#include "api1.h"
#include "../query/plan.h"

#include <stdlib.h>
#include <string.h>

#define TOP_DEFAULT_N 10
#define TOP_MAX_N     1000

enum { BY_FUNCTION, BY_SERVICE, BY_PAIR };

struct svc {
	const char *name;
	size_t n;        /* profiles selected */
	size_t sources;  /* distinct sources (normalisation) */
	int64_t wall_ns; /* sum of the cpu profiles' duration_nanos (cores) */
};

static json_t *str_json(struct pd_str s) { return json_stringn_nocheck(s.ptr, s.len); }
static double pct(int64_t v, int64_t total) { return total ? (double)v * 100.0 / (double)total : 0; }

/* Add "flat","flat_pct","cum","cum_pct" to o (and, with cores, "flat_cores", "cum_cores"). */
static bool put_vals(json_t *o, int64_t flat, int64_t cum, int64_t total)
{
	return !json_object_set_new(o, "flat", json_integer(flat)) &&
	       !json_object_set_new(o, "flat_pct", json_real(pct(flat, total))) &&
	       !json_object_set_new(o, "cum", json_integer(cum)) &&
	       !json_object_set_new(o, "cum_pct", json_real(pct(cum, total)));
}

static bool put_cores(json_t *o, double flat, double cum)
{
	return !json_object_set_new(o, "flat_cores", json_real(flat)) &&
	       !json_object_set_new(o, "cum_cores", json_real(cum));
}

static double cell_cores(const struct svc *sv, uint32_t s, int64_t v)
{
	return pd_norm_cores(v, sv[s].wall_ns, sv[s].sources);
}

struct pair {
	const struct pd_fleet_fn *fn;
	const struct pd_fleet_cell *c;
};


static int pair_cmp_impl(const struct pair *a, const struct pair *b, bool by_cum, const struct svc *sv)
{
	int64_t x = pd_wabs(by_cum ? a->c->cum : a->c->flat), y = pd_wabs(by_cum ? b->c->cum : b->c->flat);
	if (x != y)
		return x > y ? -1 : 1;
	int c = pd_str_cmp(a->fn->name, b->fn->name);
	if (c)
		return c;
	return strcmp(sv[a->c->service].name, sv[b->c->service].name);
}

struct pair_ctx {
	bool by_cum;
	const struct svc *sv;
};

static void sort_pairs(struct pair *v, size_t n, const struct pair_ctx *ctx)
{
	/* merge sort (stable, no global state: the server is multi-threaded) */
	if (n < 2)
		return;
	struct pair *tmp = malloc(n * sizeof *tmp);
	if (!tmp) { /* insertion sort fallback */
		for (size_t i = 1; i < n; i++)
			for (size_t j = i; j > 0 && pair_cmp_impl(&v[j], &v[j - 1], ctx->by_cum, ctx->sv) < 0; j--) {
				struct pair t = v[j];
				v[j] = v[j - 1];
				v[j - 1] = t;
			}
		return;
	}
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = pair_cmp_impl(&v[j], &v[i], ctx->by_cum, ctx->sv) < 0 ? v[j++] : v[i++];
			while (i < mid)
				tmp[k++] = v[i++];
			while (j < hi)
				tmp[k++] = v[j++];
		}
		memcpy(v, tmp, n * sizeof *v);
	}
	free(tmp);
}

static json_t *rows_json(int by, bool by_cum, size_t n, const struct pd_fleet_top *ft, const struct svc *sv,
			 size_t nsv, bool cores)
{
	json_t *rows = json_array();
	if (!rows)
		return NULL;
	bool bad = false;
	if (by == BY_FUNCTION) {
		for (size_t i = 0; !bad && i < ft->nfns && i < n; i++) {
			const struct pd_fleet_fn *f = &ft->fns[i];
			json_t *row = json_object(), *by_s = json_array();
			static const char *const inl[] = {NULL, "inline", "partial-inline"};
			bad = !row || !by_s || json_object_set_new(row, "name", str_json(f->name)) ||
			      !put_vals(row, f->flat, f->cum, ft->total) ||
			      (inl[f->inlined] && json_object_set_new(row, "inline", json_string(inl[f->inlined])));
			double fc = 0, cc = 0;
			for (uint32_t k = 0; !bad && k < f->nby; k++) {
				const struct pd_fleet_cell *e = &f->by[k];
				json_t *c = json_object();
				double a = cell_cores(sv, e->service, e->flat), b = cell_cores(sv, e->service, e->cum);
				fc += a;
				cc += b;
				/* no cores per cell (2 reals x services x rows: the answer's cost): a cell's
				 * cores are its value x the service's cores / total */
				bad = !c ||
				      json_object_set_new(c, "service", json_string_nocheck(sv[e->service].name)) ||
				      !put_vals(c, e->flat, e->cum, ft->total) || json_array_append_new(by_s, c);
			}
			bad = bad || (cores && !put_cores(row, fc, cc));
			if (bad) {
				json_decref(by_s);
				json_decref(row);
				break;
			}
			bad = json_object_set_new(row, "services", by_s) || json_array_append_new(rows, row);
		}
	} else if (by == BY_SERVICE) {
		/* services ranked by total (|total| desc, then name) */
		size_t *ord = malloc((nsv ? nsv : 1) * sizeof *ord);
		bad = !ord;
		for (size_t i = 0; !bad && i < nsv; i++) {
			size_t j = i;
			for (; j > 0; j--) {
				int64_t a = pd_wabs(ft->totals[ord[j - 1]]), b = pd_wabs(ft->totals[i]);
				if (a > b || (a == b && strcmp(sv[ord[j - 1]].name, sv[i].name) <= 0))
					break;
				ord[j] = ord[j - 1];
			}
			ord[j] = i;
		}
		for (size_t i = 0; !bad && i < nsv && i < n; i++) {
			const struct svc *s = &sv[ord[i]];
			json_t *row = json_object();
			bad = !row || json_object_set_new(row, "service", json_string_nocheck(s->name)) ||
			      json_object_set_new(row, "total", json_integer(ft->totals[ord[i]])) ||
			      json_object_set_new(row, "pct", json_real(pct(ft->totals[ord[i]], ft->total))) ||
			      json_object_set_new(row, "profiles", json_integer((json_int_t)s->n)) ||
			      (cores && json_object_set_new(row, "cores", json_real(cell_cores(sv, (uint32_t)ord[i],
												   ft->totals[ord[i]])))) ||
			      json_array_append_new(rows, row);
		}
		free(ord);
	} else {
		size_t np = 0;
		for (size_t i = 0; i < ft->nfns; i++)
			np += ft->fns[i].nby;
		struct pair *pv = malloc((np ? np : 1) * sizeof *pv);
		bad = !pv;
		np = 0;
		for (size_t i = 0; !bad && i < ft->nfns; i++)
			for (uint32_t k = 0; k < ft->fns[i].nby; k++)
				pv[np++] = (struct pair){&ft->fns[i], &ft->fns[i].by[k]};
		struct pair_ctx ctx = {by_cum, sv};
		if (!bad)
			sort_pairs(pv, np, &ctx);
		for (size_t i = 0; !bad && i < np && i < n; i++) {
			const struct pd_fleet_cell *e = pv[i].c;
			json_t *row = json_object();
			bad = !row || json_object_set_new(row, "name", str_json(pv[i].fn->name)) ||
			      json_object_set_new(row, "service", json_string_nocheck(sv[e->service].name)) ||
			      !put_vals(row, e->flat, e->cum, ft->total) ||
			      (cores && !put_cores(row, cell_cores(sv, e->service, e->flat),
						   cell_cores(sv, e->service, e->cum))) ||
			      json_array_append_new(rows, row);
		}
		free(pv);
	}
	if (bad) {
		json_decref(rows);
		return NULL;
	}
	return rows;
}

/* What the parts of every service are folded into. */
struct acc_ctx {
	struct pd_api1_req *q;
	struct pd_fleet_acc *acc;
	struct svc *sv;
	size_t nsv;  /* the group being added is sv[nsv - 1] */
	bool have;   /* t0/u0 set (copies: the part they came from is freed) */
	size_t svc0; /* the service that set them */
	struct pd_str t0, u0;
	char tbuf[128], ubuf[128];
	bool nanos;  /* every part's sample unit is nanoseconds */
	bool across; /* the error is about two services: it names both, no prefix of one */
};

/* One part (a service's merge, a gauge source's average, a cumulative
 * source's delta): its sample index, checked against the others', folded
 * into group sv[nsv - 1]. */
static int add_part(void *ctx, uint32_t service, int kind, struct pd_profile **pp, int64_t num, int64_t den,
		    struct pd_err *err)
{
	(void)service;
	struct acc_ctx *c = ctx;
	const struct pd_profile *p = *pp;
	size_t s = c->nsv - 1;
	uint32_t si;
	int rc = pd_api1_sample_index(c->q, p, &si, err);
	if (rc)
		return rc;
	struct pd_str t = p->nsample_types ? p->strings[p->sample_types[si].type] : p->strings[0];
	struct pd_str u = p->nsample_types ? p->strings[p->sample_types[si].unit] : p->strings[0];
	if (!c->have) {
		snprintf(c->tbuf, sizeof c->tbuf, "%.*s", (int)t.len, t.ptr);
		snprintf(c->ubuf, sizeof c->ubuf, "%.*s", (int)u.len, u.ptr);
		c->t0 = (struct pd_str){c->tbuf, (uint32_t)strlen(c->tbuf)};
		c->u0 = (struct pd_str){c->ubuf, (uint32_t)strlen(c->ubuf)};
		c->svc0 = s;
		c->have = true;
	} else if (pd_str_cmp(t, c->t0) || pd_str_cmp(u, c->u0)) {
		if (c->svc0 == s)
			return pd_errf(err, PD_EINCOMPAT,
				       "incompatible profiles: %.*s/%.*s and %.*s/%.*s cannot be added up; select one "
				       "profile type (e.g. query=cpu{...}) or one sample_index present in both",
				       (int)c->t0.len, c->t0.ptr, (int)c->u0.len, c->u0.ptr, (int)t.len, t.ptr, (int)u.len,
				       u.ptr);
		c->across = true;
		return pd_errf(err, PD_EINCOMPAT,
			       "services \"%s\" (%.*s/%.*s) and \"%s\" (%.*s/%.*s) have different sample types: "
			       "they cannot be added up; select one profile type (e.g. query=cpu{...}) or one "
			       "sample_index present in both",
			       c->sv[c->svc0].name, (int)c->t0.len, c->t0.ptr, (int)c->u0.len, c->u0.ptr, c->sv[s].name,
			       (int)t.len, t.ptr, (int)u.len, u.ptr);
	}
	c->nanos = c->nanos && pd_str_eq(u, "nanoseconds");
	if (kind == PD_NORM_SUM)
		c->sv[s].wall_ns += p->duration_nanos;
	return pd_fleet_acc_add(c->acc, (uint32_t)s, p, si, (double)num / (double)den, err);
}

/* Every service the selector allows, merged over [from, to] with
 * pd_store_merge_range and folded at once (names owned by *names).
 * --max-merge-profiles bounds the profiles merged from their own blocks
 * (not those of rolled-up hours). */
static int merge_ranges(struct pd_api1_req *q, struct acc_ctx *c, char **names, size_t nnames,
			const size_t *sources, size_t *nv, bool *used, struct pd_err *err)
{
	struct pd_plan_budget budget = {q->cfg->max_profiles, 0};
	int rc = 0;
	if (q->from_ns > q->to_ns) /* the whole window is past retention (from was moved): nothing */
		return 0;
	for (size_t i = 0; !rc && i < nnames; i++) {
		const char *name = names[i];
		if (!pd_selector_match_service(&q->sel, name))
			continue;
		struct pd_merge_range r = {name, q->sel.type, q->from_ns, q->to_ns, q->cfg->max_profiles, false};
		struct pd_merge_info info;
		struct pd_profile *p;
		if ((rc = pd_store_merge_range(q->cfg->st, &r, &p, &info, err))) {
			if (rc == PD_ELIMIT)
				rc = pd_plan_over(&budget, err);
			break;
		}
		if ((rc = pd_plan_charge(&budget, info.raw, err))) {
			pd_profile_free(p);
			break;
		}
		if (!p)
			continue;
		c->sv[c->nsv++] = (struct svc){name, info.profiles, sources ? sources[i] : 0, 0};
		*nv += info.profiles;
		*used = *used || info.rollup_hours > 0;
		rc = add_part(c, (uint32_t)(c->nsv - 1), PD_NORM_SUM, &p, 1, 1, err);
		pd_profile_free(p);
		if (rc && !c->across)
			pd_err_prefix(err, "service \"%s\"", name);
	}
	if (!rc) /* a service regex that hit its match limit skipped services: say so */
		rc = pd_selector_check(&q->sel, err);
	return rc;
}

int pd_api1_h_top(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	int64_t n;
	int rc = pd_api1_param_int(q, "n", TOP_DEFAULT_N, 1, TOP_MAX_N, &n, err);
	if (rc)
		return rc;
	const char *bys = pd_api1_param(q, "by"), *vs = pd_api1_param(q, "value");
	int by = !bys || !strcmp(bys, "function") ? BY_FUNCTION
		 : !strcmp(bys, "service")	  ? BY_SERVICE
		 : !strcmp(bys, "function,service") || !strcmp(bys, "service,function") ? BY_PAIR
											   : -1;
	if (by < 0)
		return pd_errf(err, PD_EINVAL, "bad \"by\" \"%.64s\": want function, service or function,service", bys);
	if (vs && strcmp(vs, "flat") && strcmp(vs, "cum"))
		return pd_errf(err, PD_EINVAL, "bad \"value\" \"%.64s\": want flat or cum", vs);
	bool by_cum = vs && !strcmp(vs, "cum");
	bool allow, norm;
	if ((rc = pd_plan_parse_rollups(pd_api1_param(q, "rollups"), &allow, err)) ||
	    (rc = pd_api1_normalize(q, &norm, err)))
		return rc;

	struct pd_profile_meta *v = NULL;
	size_t nv = 0, nnames = 0;
	char **names = NULL;
	size_t *sources = NULL;
	bool used = false, all_cpu = q->sel.type && !strcmp(q->sel.type, "cpu");
	struct pd_norm_plan plan = {0};
	struct pd_norm_info ni = {0};
	struct acc_ctx cx;
	memset(&cx, 0, sizeof cx);
	struct acc_ctx *c = &cx;
	c->q = q;
	c->nanos = true;
	struct pd_fleet_top ft = {0};
	struct pd_plan_in pin = {&q->sel, allow, norm, 0, false};
	bool rollups = pd_plan_path(&pin) == PD_PLAN_RANGE;
	if (rollups) {
		if ((rc = pd_store_services(q->cfg->st, &names, &nnames, err)))
			goto out;
		if (norm) { /* sources from the metadata; cumulative snapshots need the selection path */
			bool cumulative = false;
			size_t profiles = 0;
			if (!(sources = calloc(nnames ? nnames : 1, sizeof *sources))) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
			if ((rc = pd_norm_count_sources(q->cfg->st, &q->sel, q->from_ns, q->to_ns, names, nnames,
							sources, &profiles, &cumulative, err)))
				goto out;
			rollups = !cumulative;
			ni.on = true;
			ni.kinds = profiles ? 1u << PD_NORM_SUM : 0;
			ni.profiles = profiles;
			for (size_t i = 0; i < nnames; i++)
				ni.sources += sources[i];
		}
	}
	if (rollups) {
		if (!(c->sv = calloc(nnames ? nnames : 1, sizeof *c->sv)) || pd_fleet_acc_new(nnames, &c->acc)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		if ((rc = merge_ranges(q, c, names, nnames, sources, &nv, &used, err)))
			goto out;
		if (!norm)
			ni.profiles = nv;
	} else {
		memset(&ni, 0, sizeof ni);
		if ((rc = pd_api1_select(q, &v, &nv, err)) || (rc = pd_norm_plan(v, nv, &plan, err)))
			goto out;
		if (!(c->sv = calloc(plan.nsvc ? plan.nsvc : 1, sizeof *c->sv)) ||
		    pd_fleet_acc_new(plan.nsvc, &c->acc)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		all_cpu = nv > 0;
		for (size_t i = 0; i < nv; i++)
			all_cpu = all_cpu && !strcmp(v[i].type, "cpu");
		for (size_t s = 0; s < plan.nsvc; s++) {
			c->sv[c->nsv++] = (struct svc){plan.svc[s].name, plan.svc[s].n, plan.svc[s].nsrc, 0};
			if ((rc = pd_norm_each(q->cfg->st, &plan, s, 1, norm, add_part, c, NULL, NULL, &ni, err))) {
				if (!c->across)
					pd_err_prefix(err, "service \"%s\"", plan.svc[s].name);
				goto out;
			}
		}
	}
	if ((rc = pd_fleet_acc_finish(c->acc, by_cum, &ft, err)))
		goto out;
	/* cores: cpu time in nanoseconds, normalised, every service with a profiled wall time */
	bool cores = norm && all_cpu && c->have && c->nanos && c->nsv > 0;
	for (size_t s = 0; cores && s < c->nsv; s++)
		cores = c->sv[s].wall_ns > 0 && c->sv[s].sources > 0;
	double total_cores = 0;
	for (size_t s = 0; cores && s < c->nsv; s++)
		total_cores += cell_cores(c->sv, (uint32_t)s, ft.totals[s]);
	out->merged = nv;
	json_t *o = json_object(), *svcs = json_array();
	json_t *rows = rows_json(by, by_cum, (size_t)n, &ft, c->sv, c->nsv, cores);
	bool bad = !o || !svcs || !rows;
	for (size_t s = 0; !bad && s < c->nsv; s++) {
		const struct svc *e = &c->sv[s];
		json_t *j = json_object();
		bad = !j || json_object_set_new(j, "service", json_string_nocheck(e->name)) ||
		      json_object_set_new(j, "total", json_integer(ft.totals[s])) ||
		      json_object_set_new(j, "pct", json_real(pct(ft.totals[s], ft.total))) ||
		      json_object_set_new(j, "profiles", json_integer((json_int_t)e->n)) ||
		      (norm && json_object_set_new(j, "sources", json_integer((json_int_t)e->sources))) ||
		      (cores && json_object_set_new(j, "wall_seconds", json_real((double)e->wall_ns / 1e9))) ||
		      (cores &&
		       json_object_set_new(j, "cores", json_real(cell_cores(c->sv, (uint32_t)s, ft.totals[s])))) ||
		      json_array_append_new(svcs, j);
	}
	static const char *const by_names[] = {"function", "service", "function,service"};
	struct pd_str t0 = c->have ? c->t0 : (struct pd_str){"", 0}, u0 = c->have ? c->u0 : (struct pd_str){"", 0};
	bad = bad || json_object_set_new(o, "sample_type", str_json(t0)) || json_object_set_new(o, "unit", str_json(u0)) ||
	      json_object_set_new(o, "total", json_integer(ft.total)) ||
	      (cores && json_object_set_new(o, "cores", json_real(total_cores))) ||
	      json_object_set_new(o, "profiles", json_integer((json_int_t)nv)) ||
	      json_object_set_new(o, "functions", json_integer((json_int_t)ft.nfns)) ||
	      json_object_set_new(o, "rollups", json_boolean(used)) ||
	      json_object_set_new(o, "by", json_string(by_names[by])) ||
	      json_object_set_new(o, "value", json_string(by_cum ? "cum" : "flat")) ||
	      json_object_set_new(o, "normalization", pd_api1_norm_json(&ni));
	if (!bad) {
		bad = json_object_set_new(o, "services", svcs) != 0;
		svcs = NULL;
	}
	if (!bad) {
		bad = json_object_set_new(o, "rows", rows) != 0;
		rows = NULL;
	}
	json_decref(svcs);
	json_decref(rows);
	if (bad) {
		json_decref(o);
		o = NULL;
	}
	rc = pd_api1_reply_json(out, o, err);
out:
	pd_fleet_top_free(&ft);
	pd_fleet_acc_free(c->acc);
	free(c->sv);
	pd_norm_plan_free(&plan);
	pd_query_metas_free(v, v ? nv : 0);
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(sources);
	return rc;
}
