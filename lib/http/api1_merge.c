/*
 * api1_merge.c — GET /api/1/merge: the selected profiles (every service the
 * query allows) merged in the store with pprof's Merge semantics, after
 * normalisation (pd_norm_merge: gauges averaged per source, cumulative
 * snapshots differenced; normalize=false: summed as they are), answered
 * as (format=) pprof (gzip'd profile.proto, streamed), folded (collapsed
 * stacks, text), top (JSON rows as `go tool pprof -top`) or flamegraph
 * (JSON call tree capped at max_nodes with explicit "other" nodes).
 * docs/api.md "API v1" is the contract.
 */
#include "api1.h"

#include <stdlib.h>
#include <string.h>

#define MERGE_TOP_DEFAULT_N 100
#define MERGE_TOP_MAX_N     100000

/* [{"type":"cpu","unit":"nanoseconds"}, ...]: what sample_index may name. */
static json_t *types_json(const struct pd_profile *p)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < p->nsample_types; i++)
		if (json_array_append_new(a, json_pack("{s:s%,s:s%}", "type", p->strings[p->sample_types[i].type].ptr,
						       (size_t)p->strings[p->sample_types[i].type].len, "unit",
						       p->strings[p->sample_types[i].unit].ptr,
						       (size_t)p->strings[p->sample_types[i].unit].len))) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

/* One depth rule: every flame graph the API builds (2 JSON levels per frame
 * below the envelope) can be encoded. */
_Static_assert(2 * (PD_FLAME_MAX_DEPTH + 2) + 8 <= PD_JSON_MAX_DEPTH, "a flame graph nests deeper than JSON may");

static json_t *str_json(struct pd_str s) { return json_stringn_nocheck(s.ptr, s.len); }

static double pct(int64_t v, int64_t total) { return total ? (double)v * 100.0 / (double)total : 0; }

json_t *pd_api1_flame_json(const struct pd_flame *f, uint32_t i, int depth, pd_api1_flame_fill *fill,
			   const void *ctx)
{
	const struct pd_flame_node *n = &f->v[i];
	json_t *o = json_object(), *kids = json_array();
	if (!o || !kids || json_object_set_new(o, "name", str_json(n->name)) ||
	    json_object_set_new(o, "value", json_integer(n->value)) ||
	    json_object_set_new(o, "self", json_integer(n->self)) || (fill && !fill(o, i, ctx)) ||
	    (n->other && json_object_set_new(o, "other", json_true())))
		goto fail;
	for (uint32_t k = 0; k < n->nkids; k++) {
		json_t *c = depth < PD_FLAME_MAX_DEPTH + 2
				    ? pd_api1_flame_json(f, f->kids[n->kids + k], depth + 1, fill, ctx)
				    : NULL;
		if (!c || json_array_append_new(kids, c))
			goto fail;
	}
	if (json_object_set_new(o, "children", kids))
		goto fail2;
	return o;
fail:
	json_decref(kids);
fail2:
	json_decref(o);
	return NULL;
}

static bool by_cum_param(const struct pd_api1_req *q, bool *by_cum, struct pd_err *err)
{
	const char *v = pd_api1_param(q, "value");
	*by_cum = v && !strcmp(v, "cum");
	if (v && !*by_cum && strcmp(v, "flat")) {
		pd_errf(err, PD_EINVAL, "bad \"value\" \"%.64s\": want flat or cum", v);
		return false;
	}
	return true;
}

static int merge_top(struct pd_api1_req *q, const struct pd_profile *p, uint32_t si, size_t nprof,
		     const struct pd_norm_info *ni, struct pd_api1_resp *out, struct pd_err *err)
{
	int64_t n;
	bool by_cum;
	int rc = pd_api1_param_int(q, "n", MERGE_TOP_DEFAULT_N, 1, MERGE_TOP_MAX_N, &n, err);
	if (rc)
		return rc;
	if (!by_cum_param(q, &by_cum, err))
		return PD_EINVAL;
	struct pd_top t;
	if ((rc = pd_top_compute(p, si, by_cum, &t, err)))
		return rc;
	/* pprof's 100 %: the sum of |v| (report.go's computeTotal), which is
	 * the sum of the values unless some are negative (pushed deltas) */
	t.total = pd_report_total(p, si);
	struct pd_str type = p->nsample_types ? p->strings[p->sample_types[si].type] : p->strings[0];
	struct pd_str unit = p->nsample_types ? p->strings[p->sample_types[si].unit] : p->strings[0];
	json_t *rows = json_array();
	json_t *o = json_object();
	bool bad = !rows || !o;
	for (size_t i = 0; !bad && i < t.n && i < (size_t)n; i++) {
		const struct pd_top_row *r = &t.rows[i];
		json_t *row = json_object();
		bad = !row || json_object_set_new(row, "name", str_json(r->name)) ||
		      json_object_set_new(row, "flat", json_integer(r->flat)) ||
		      json_object_set_new(row, "flat_pct", json_real(pct(r->flat, t.total))) ||
		      json_object_set_new(row, "cum", json_integer(r->cum)) ||
		      json_object_set_new(row, "cum_pct", json_real(pct(r->cum, t.total))) ||
		      json_object_set_new(row, "unit", str_json(unit)) || json_array_append_new(rows, row);
	}
	bad = bad || json_object_set_new(o, "sample_type", str_json(type)) ||
	      json_object_set_new(o, "unit", str_json(unit)) || json_object_set_new(o, "total", json_integer(t.total)) ||
	      json_object_set_new(o, "profiles", json_integer((json_int_t)nprof)) ||
	      json_object_set_new(o, "functions", json_integer((json_int_t)t.n)) ||
	      json_object_set_new(o, "normalization", pd_api1_norm_json(ni)) ||
	      json_object_set_new(o, "sample_types", types_json(p));
	if (!bad) {
		bad = json_object_set_new(o, "rows", rows) != 0; /* steals rows, also on failure */
		rows = NULL;
	}
	pd_top_free(&t);
	json_decref(rows);
	if (bad) {
		json_decref(o);
		o = NULL;
	}
	return pd_api1_reply_json(out, o, err);
}

static int merge_flame(struct pd_api1_req *q, const struct pd_profile *p, uint32_t si, size_t nprof,
		       const struct pd_norm_info *ni, struct pd_api1_resp *out, struct pd_err *err)
{
	int64_t max;
	int rc = pd_api1_param_int(q, "max_nodes", PD_FLAME_DEFAULT_NODES, 1, PD_FLAME_MAX_NODES, &max, err);
	if (rc)
		return rc;
	struct pd_flame f;
	if ((rc = pd_flame_build(p, si, (size_t)max, &f, err)))
		return rc;
	struct pd_str type = p->nsample_types ? p->strings[p->sample_types[si].type] : p->strings[0];
	struct pd_str unit = p->nsample_types ? p->strings[p->sample_types[si].unit] : p->strings[0];
	json_t *o = json_object(), *root = pd_api1_flame_json(&f, 0, 0, NULL, NULL);
	if (!o || !root || json_object_set_new(o, "sample_type", str_json(type)) ||
	    json_object_set_new(o, "unit", str_json(unit)) || json_object_set_new(o, "total", json_integer(f.v[0].value)) ||
	    json_object_set_new(o, "profiles", json_integer((json_int_t)nprof)) ||
	    json_object_set_new(o, "max_nodes", json_integer(max)) ||
	    json_object_set_new(o, "nodes", json_integer((json_int_t)f.n)) ||
	    json_object_set_new(o, "frames", json_integer((json_int_t)f.frames)) ||
	    json_object_set_new(o, "truncated", json_boolean(f.truncated)) ||
	    json_object_set_new(o, "normalization", pd_api1_norm_json(ni)) ||
	    json_object_set_new(o, "sample_types", types_json(p)) || json_object_set_new(o, "root", root)) {
		json_decref(o);
		o = NULL;
	}
	pd_flame_free(&f);
	return pd_api1_reply_json(out, o, err);
}

int pd_api1_h_merge(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	const char *format = pd_api1_param(q, "format");
	if (!format)
		format = "pprof";
	int fmt = !strcmp(format, "pprof") ? 0 : !strcmp(format, "folded") ? 1 : !strcmp(format, "top") ? 2
		: !strcmp(format, "flamegraph") ? 3 : -1;
	if (fmt < 0)
		return pd_errf(err, PD_EINVAL, "bad \"format\" \"%.64s\": want pprof, folded, top or flamegraph", format);
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	struct pd_profile *p = NULL;
	struct pd_norm_info ni;
	bool norm;
	int rc = pd_api1_normalize(q, &norm, err);
	if (rc || (rc = pd_api1_select(q, &v, &n, err)))
		return rc;
	if (n == 0) {
		rc = pd_api1_nothing(q, err);
		goto out;
	}
	if ((rc = pd_norm_merge(q->cfg->st, v, n, norm, &p, &ni, err)))
		goto out;
	out->merged = n;
	if (fmt == 0) {
		char fname[64];
		snprintf(fname, sizeof fname, "%s.pb.gz", q->sel.type ? q->sel.type : "merge");
		pd_api1_reply_pprof(out, p, fname);
		p = NULL;
		goto out;
	}
	uint32_t si;
	if ((rc = pd_api1_sample_index(q, p, &si, err)))
		goto out;
	if (fmt == 1) {
		struct pd_buf b = PD_BUF_INIT(0);
		if ((rc = pd_folded(p, si, &b, err))) {
			pd_buf_free(&b);
			goto out;
		}
		pd_api1_reply_text(out, &b, "text/plain; charset=utf-8");
	} else if (fmt == 2) {
		rc = merge_top(q, p, si, n, &ni, out, err);
	} else {
		rc = merge_flame(q, p, si, n, &ni, out, err);
	}
out:
	pd_profile_free(p);
	pd_query_metas_free(v, n);
	return rc;
}
