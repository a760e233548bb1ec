/*
 * api1_diff.c — GET /api/1/diff: two selections compared as
 * `go tool pprof -diff_base` compares two profiles (lib/query/diff.h).
 * The target is "target" (or "query") over [from, to]; the base is "base"
 * over [base_from, base_to] (default: the target's range). Each is merged
 * in the store after normalisation (pd_norm_merge, as /api/1/merge; raw=true:
 * summed as they are; "normalize" keeps pprof's -normalize meaning here); the answer is format=top (JSON rows: base, target and delta
 * flat/cum per function, ranked by |delta|), pprof (the diff profile, base
 * negated and labelled pprof::base, for go tool pprof) or flamegraph (a
 * tree of deltas with base and target beside each node).
 * docs/api.md "API v1" is the contract.
 */
#include "api1.h"
#include "../query/diff.h"

#include <stdlib.h>
#include <string.h>

#define DIFF_TOP_DEFAULT_N 100
#define DIFF_TOP_MAX_N     100000

static json_t *str_json(struct pd_str s) { return json_stringn_nocheck(s.ptr, s.len); }
static double pct(int64_t v, int64_t total) { return total ? (double)v * 100.0 / (double)total : 0; }

/* A time parameter of the base, checked as the common from/to are. */
static int base_range(const struct pd_api1_req *q, int64_t *from, int64_t *to, struct pd_err *err)
{
	const char *f = pd_api1_param(q, "base_from"), *t = pd_api1_param(q, "base_to");
	*from = q->from_ns;
	*to = q->to_ns;
	if (!f && !t) /* the target's range: checked, and moved past retention (then from > to: nothing) */
		return 0;
	int rc;
	if (f && (rc = pd_api_parse_stored_time("base_from", f, q->now_ns, from, err)))
		return rc;
	if (t && (rc = pd_api_parse_stored_time("base_to", t, q->now_ns, to, err)))
		return rc;
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	if (*from > *to)
		return pd_errf(err, PD_EINVAL, "\"base_from\" after \"base_to\" (base_from %s, base_to %s)",
			       pd_api_format_time(*from, a, sizeof a), pd_api_format_time(*to, b, sizeof b));
	int64_t max = q->cfg->max_range_ns ? q->cfg->max_range_ns : PD_API1_MAX_RANGE_NS;
	if ((*from < 0 && *to > INT64_MAX + *from) || *to - *from > max)
		return pd_errf(err, PD_EINVAL,
			       "range over the limit: base_from %s to base_to %s is more than %lldh (--max-query-range); "
			       "narrow \"base_from\"/\"base_to\"",
			       pd_api_format_time(*from, a, sizeof a), pd_api_format_time(*to, b, sizeof b),
			       (long long)(max / 3600000000000LL));
	if (q->cfg->retention_ns && *from < q->now_ns - q->cfg->retention_ns)
		*from = q->now_ns - q->cfg->retention_ns;
	return 0;
}

/* One side: select and merge, normalised as /api/1/merge does unless raw
 * (gauges averaged per source, cumulative snapshots differenced). side =
 * "base" / "target" for messages. */
static int side_merge(const struct pd_api1_req *s, const char *side, bool raw, size_t *nprof, struct pd_profile **p,
		      struct pd_norm_info *ni, struct pd_err *err)
{
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	*p = NULL;
	memset(ni, 0, sizeof *ni);
	int rc = pd_api1_select(s, &v, &n, err);
	if (!rc && n == 0)
		rc = pd_api1_nothing(s, err);
	if (!rc)
		rc = pd_norm_merge(s->cfg->st, v, n, !raw, p, ni, err);
	if (rc)
		pd_err_prefix(err, "%s", side);
	pd_query_metas_free(v, n);
	*nprof = n;
	return rc;
}

static json_t *side_json(const struct pd_api1_req *s, size_t n, int64_t total, const struct pd_norm_info *ni)
{
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	return json_pack("{sssssssIsIso}", "query", s->has_query ? s->query_text : "{}", "from",
			 pd_api_format_time(s->from_ns, a, sizeof a), "to", pd_api_format_time(s->to_ns, b, sizeof b),
			 "profiles", (json_int_t)n, "total", (json_int_t)total, "normalization", pd_api1_norm_json(ni));
}

static bool put_vals(json_t *o, const char *k, int64_t v) { return !json_object_set_new(o, k, json_integer(v)); }

static json_t *top_rows(const struct pd_diff_top *t, size_t n)
{
	json_t *rows = json_array();
	bool bad = !rows;
	static const char *const inl[] = {NULL, "inline", "partial-inline"};
	for (size_t i = 0; !bad && i < t->n && i < n; i++) {
		const struct pd_diff_row *r = &t->rows[i];
		json_t *row = json_object();
		bad = !row || json_object_set_new(row, "name", str_json(r->name)) || !put_vals(row, "delta_flat", r->flat) ||
		      json_object_set_new(row, "delta_flat_pct", json_real(pct(r->flat, t->total))) ||
		      !put_vals(row, "delta_cum", r->cum) ||
		      json_object_set_new(row, "delta_cum_pct", json_real(pct(r->cum, t->total))) ||
		      !put_vals(row, "base_flat", r->base_flat) || !put_vals(row, "base_cum", r->base_cum) ||
		      !put_vals(row, "target_flat", r->target_flat) || !put_vals(row, "target_cum", r->target_cum) ||
		      (inl[r->inlined] && json_object_set_new(row, "inline", json_string(inl[r->inlined])));
		if (bad)
			json_decref(row);
		else
			bad = json_array_append_new(rows, row) != 0;
	}
	if (bad) {
		json_decref(rows);
		return NULL;
	}
	return rows;
}

/* A diff flame node's own fields after name, value and self. */
static bool diff_fill(json_t *o, uint32_t i, const void *ctx)
{
	const struct pd_diff_flame *df = ctx;
	return put_vals(o, "base", df->base[i]) && put_vals(o, "base_self", df->base_self[i]) &&
	       put_vals(o, "target", df->target[i]) && put_vals(o, "target_self", df->target_self[i]);
}

int pd_api1_h_diff(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	static const char *const keys[] = {"target", "base", "base_from", "base_to", "normalize", "raw"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const char *v = pd_api1_param(q, keys[i]);
		if (v && strlen(v) > PD_API_MAX_PARAM_LEN)
			return pd_errf(err, PD_ELIMIT, "parameter \"%s\" is over the limit of %d bytes", keys[i],
				       PD_API_MAX_PARAM_LEN);
	}
	const char *format = pd_api1_param(q, "format");
	int fmt = !format || !strcmp(format, "top") ? 0 : !strcmp(format, "pprof") ? 1 : !strcmp(format, "flamegraph") ? 2 : -1;
	if (fmt < 0)
		return pd_errf(err, PD_EINVAL, "bad \"format\" \"%.64s\": want top, pprof or flamegraph", format);
	const char *ns = pd_api1_param(q, "normalize");
	bool normalize = ns && (!strcmp(ns, "true") || !strcmp(ns, "1"));
	if (ns && !normalize && strcmp(ns, "false") && strcmp(ns, "0"))
		return pd_errf(err, PD_EINVAL, "bad \"normalize\" \"%.64s\": want true or false", ns);
	const char *raws = pd_api1_param(q, "raw");
	bool raw = raws && (!strcmp(raws, "true") || !strcmp(raws, "1"));
	if (raws && !raw && strcmp(raws, "false") && strcmp(raws, "0"))
		return pd_errf(err, PD_EINVAL, "bad \"raw\" \"%.64s\": want true or false", raws);
	const char *vs = pd_api1_param(q, "value");
	if (vs && strcmp(vs, "flat") && strcmp(vs, "cum"))
		return pd_errf(err, PD_EINVAL, "bad \"value\" \"%.64s\": want flat or cum", vs);
	bool by_cum = vs && !strcmp(vs, "cum");
	int64_t n = 0, max_nodes = 0;
	int rc;
	if ((rc = pd_api1_param_int(q, "n", DIFF_TOP_DEFAULT_N, 1, DIFF_TOP_MAX_N, &n, err)) ||
	    (rc = pd_api1_param_int(q, "max_nodes", PD_FLAME_DEFAULT_NODES, 1, PD_FLAME_MAX_NODES, &max_nodes, err)))
		return rc;

	/* the target: "target", else "query" (parsed by the common code) */
	const char *tt = pd_api1_param(q, "target");
	if (tt) {
		pd_selector_free(&q->sel);
		q->has_query = false;
		if ((rc = pd_selector_parse(tt, &q->sel, err))) {
			pd_err_prefix(err, "bad \"target\"");
			return rc;
		}
		q->has_query = true;
		snprintf(q->query_text, sizeof q->query_text, "%s", tt);
	} else if (!q->has_query) {
		return pd_errf(err, PD_EINVAL,
			       "missing \"target\" (a selector, e.g. target=cpu{version=\"1.1\"}; base=cpu{version=\"1.0\"})");
	}
	const char *bs = pd_api1_param(q, "base");
	if (!bs)
		return pd_errf(err, PD_EINVAL, "missing \"base\" (a selector, e.g. base=cpu{version=\"1.0\"})");
	struct pd_api1_req bq = *q; /* the base: same request, its own selector and range */
	memset(&bq.sel, 0, sizeof bq.sel);
	if ((rc = pd_selector_parse(bs, &bq.sel, err))) {
		pd_err_prefix(err, "bad \"base\"");
		return rc;
	}
	bq.has_query = true;
	snprintf(bq.query_text, sizeof bq.query_text, "%s", bs);
	struct pd_profile *pb = NULL, *pt = NULL, *d = NULL;
	struct pd_norm_info nib, nit;
	size_t nb = 0, nt = 0;
	struct pd_diff_top dt = {0};
	struct pd_diff_flame df = {0};
	if ((rc = base_range(q, &bq.from_ns, &bq.to_ns, err)))
		goto out;
	if ((rc = side_merge(&bq, "base", raw, &nb, &pb, &nib, err)) ||
	    (rc = side_merge(q, "target", raw, &nt, &pt, &nit, err)))
		goto out;
	out->merged = nb + nt;
	if ((rc = pd_diff_profile(pb, pt, normalize, &d, err)))
		goto out;
	if (fmt == 1) {
		pd_api1_reply_pprof(out, d, "diff.pb.gz");
		d = NULL;
		goto out;
	}
	uint32_t si;
	if ((rc = pd_api1_sample_index(q, d, &si, err)))
		goto out;
	/* the totals of both sides (a diff top even in flamegraph form: it is cheap next to the tree) */
	if ((rc = pd_diff_top(d, si, by_cum, &dt, err)))
		goto out;
	struct pd_str type = d->nsample_types ? d->strings[d->sample_types[si].type] : d->strings[0];
	struct pd_str unit = d->nsample_types ? d->strings[d->sample_types[si].unit] : d->strings[0];
	json_t *o = json_object();
	bool bad = !o || json_object_set_new(o, "sample_type", str_json(type)) ||
		   json_object_set_new(o, "unit", str_json(unit)) || json_object_set_new(o, "total", json_integer(dt.total)) ||
		   json_object_set_new(o, "normalized", json_boolean(normalize)) ||
		   json_object_set_new(o, "base", side_json(&bq, nb, dt.base_total, &nib)) ||
		   json_object_set_new(o, "target", side_json(q, nt, dt.target_total, &nit));
	if (!bad && fmt == 0) {
		bad = json_object_set_new(o, "value", json_string(by_cum ? "cum" : "flat")) ||
		      json_object_set_new(o, "functions", json_integer((json_int_t)dt.n)) ||
		      json_object_set_new(o, "rows", top_rows(&dt, (size_t)n));
	} else if (!bad) {
		if ((rc = pd_diff_flame(d, si, (size_t)max_nodes, &df, err))) {
			json_decref(o);
			goto out;
		}
		bad = json_object_set_new(o, "max_nodes", json_integer(max_nodes)) ||
		      json_object_set_new(o, "nodes", json_integer((json_int_t)df.f.n)) ||
		      json_object_set_new(o, "frames", json_integer((json_int_t)df.f.frames)) ||
		      json_object_set_new(o, "truncated", json_boolean(df.f.truncated)) ||
		      json_object_set_new(o, "root", pd_api1_flame_json(&df.f, 0, 0, diff_fill, &df));
	}
	if (bad) {
		json_decref(o);
		o = NULL;
	}
	rc = pd_api1_reply_json(out, o, err);
out:
	pd_diff_flame_free(&df);
	pd_diff_top_free(&dt);
	pd_profile_free(d);
	pd_profile_free(pb);
	pd_profile_free(pt);
	pd_selector_free(&bq.sel);
	return rc;
}
