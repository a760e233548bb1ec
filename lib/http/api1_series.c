/*
 * api1_series.c — GET /api/1/series: a function's (or the profile total's)
 * cost per step over the profiles the query selects, as JSON, Prometheus
 * text exposition or InfluxDB line protocol (lib/query/series.h does the
 * work). docs/api.md "API v1" is the contract.
 *
 * Parameters (besides query, from, to): step (Go duration or seconds,
 * whole seconds, default 5m), function (POSIX ERE, anchored), by (comma
 * list: service, function, any label name; default "service" plus
 * "function" when function is given), value (flat|cum), sample_index/si,
 * n (the top n series), format (json|prometheus|influx), normalize (default
 * true: lib/query/normalize.h per step), unit (raw|cores: cpu in cores),
 * rollups (default true).
 *
 * Rollups: a query pd_series_range_ok accepts (a type, service matchers
 * only, by service and/or function, steps of 1h or more) is answered per
 * (service, step) by pd_series_compute_range (the rollups' function tables
 * for whole hours, the profiles for the rest; the same points), as
 * /api/1/top does: no selection, --max-merge-profiles bounds the profiles
 * merged from their own blocks. With normalisation a range holding
 * cumulative=true snapshots takes the selection path. rollups=false forces
 * the selection path; the JSON's "rollups" says whether a rollup was read.
 */
#include "api1.h"
#include "../query/plan.h"
#include "../query/series.h"

#include <stdlib.h>
#include <string.h>

#define BY_MAX_LEN 512

/* step: "5m", "1h30m", "300" (seconds); whole seconds >= 1s. */
static int parse_step(const char *s, int64_t *out, struct pd_err *err)
{
	*out = PD_SERIES_DEFAULT_STEP_NS;
	if (!s)
		return 0;
	bool digits = *s != 0;
	for (const char *c = s; *c; c++)
		digits = digits && *c >= '0' && *c <= '9';
	struct pd_err e = {0};
	if (digits && strlen(s) <= 12) {
		*out = (int64_t)strtoll(s, NULL, 10) * 1000000000LL;
	} else if (pd_api_parse_duration(s, strlen(s), out, &e)) {
		return pd_errf(err, PD_EINVAL, "bad \"step\" \"%.64s\": %s (want a duration like 30s, 5m, 1h, or seconds)",
			       s, e.msg);
	}
	if (*out < PD_SERIES_MIN_STEP_NS || *out % 1000000000LL)
		return pd_errf(err, PD_EINVAL, "bad \"step\" \"%.64s\": want whole seconds, at least 1s", s);
	return 0;
}

static bool label_name_ok(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("_.:/-", *s)))
			return false;
	return true;
}

/* by: split into names (in buf), "function" -> *by_function, "type" dropped
 * (every series is of one type anyway). */
static int parse_by(const char *s, bool has_function, char *buf, const char **names, size_t *n, bool *by_function,
		    struct pd_err *err)
{
	*n = 0;
	*by_function = false;
	if (!s)
		s = has_function ? "service,function" : "service";
	if (strlen(s) >= BY_MAX_LEN)
		return pd_errf(err, PD_EINVAL, "bad \"by\": over the limit of %d bytes", BY_MAX_LEN);
	strcpy(buf, s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		size_t l = strlen(t);
		while (l && t[l - 1] == ' ')
			t[--l] = 0;
		if (!label_name_ok(t))
			return pd_errf(err, PD_EINVAL,
				       "bad \"by\" \"%.64s\": \"%.64s\" is not a label name (want e.g. by=service or "
				       "by=service,version,function)",
				       s, t);
		if (!strcmp(t, "function")) {
			if (*by_function)
				return pd_errf(err, PD_EINVAL, "bad \"by\" \"%.64s\": \"function\" given twice", s);
			*by_function = true;
			continue;
		}
		if (!strcmp(t, "type"))
			continue;
		for (size_t i = 0; i < *n; i++)
			if (!strcmp(names[i], t))
				return pd_errf(err, PD_EINVAL, "bad \"by\" \"%.64s\": \"%.64s\" given twice", s, t);
		if (*n >= PD_SERIES_MAX_BY)
			return pd_errf(err, PD_EINVAL, "bad \"by\" \"%.64s\": over the limit of %d labels", s,
				       PD_SERIES_MAX_BY);
		names[(*n)++] = t;
	}
	return 0;
}

static json_t *series_json(const struct pd_series_set *set, const struct pd_series_spec *spec, const char *fn_text,
			   const struct pd_api1_req *q)
{
	json_t *o = json_object(), *arr = json_array(), *by = json_array();
	bool bad = !o || !arr || !by;
	for (size_t i = 0; !bad && i < spec->nby; i++)
		bad = json_array_append_new(by, json_string(spec->by[i])) != 0;
	if (!bad && spec->by_function)
		bad = json_array_append_new(by, json_string("function")) != 0;
	for (size_t i = 0; !bad && i < set->n; i++) {
		const struct pd_series *s = &set->v[i];
		json_t *e = json_object(), *labels = json_object(), *pts = json_array();
		bad = !e || !labels || !pts;
		for (size_t k = 0; !bad && k < spec->nby; k++)
			bad = json_object_set_new(labels, spec->by[k], json_string_nocheck(s->labels[k])) != 0;
		if (!bad && s->function)
			bad = json_object_set_new(labels, "function", json_string_nocheck(s->function)) != 0;
		for (size_t k = 0; !bad && k < s->npoints; k++)
			bad = json_array_append_new(pts, spec->cores ? json_pack("[If]", (json_int_t)(s->points[k].t_ns / 1000000000LL),
										 s->points[k].cores)
								     : json_pack("[II]", (json_int_t)(s->points[k].t_ns / 1000000000LL),
										 (json_int_t)s->points[k].value)) != 0;
		if (bad) {
			json_decref(e);
			json_decref(labels);
			json_decref(pts);
			break;
		}
		bad = json_object_set_new(e, "labels", labels) || json_object_set_new(e, "type", json_string(s->type)) ||
		      json_object_set_new(e, "sample_type", json_string_nocheck(s->sample_type)) ||
		      json_object_set_new(e, "unit", json_string_nocheck(spec->cores ? "cores" : s->unit)) ||
		      json_object_set_new(e, "profiles", json_integer((json_int_t)s->profiles)) ||
		      json_object_set_new(e, "points", pts) || json_array_append_new(arr, e);
	}
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	bad = bad || json_object_set_new(o, "step", json_integer(spec->step_ns / 1000000000LL)) ||
	      json_object_set_new(o, "from", json_string(pd_api_format_time(q->from_ns, a, sizeof a))) ||
	      json_object_set_new(o, "to", json_string(pd_api_format_time(q->to_ns, b, sizeof b))) ||
	      json_object_set_new(o, "by", by) ||
	      json_object_set_new(o, "function", fn_text ? json_string(fn_text) : json_null()) ||
	      json_object_set_new(o, "value", json_string(spec->cum ? "cum" : "flat")) ||
	      json_object_set_new(o, "unit", json_string(spec->cores ? "cores" : "raw")) ||
	      json_object_set_new(o, "normalization", pd_api1_norm_json(&set->norm)) ||
	      json_object_set_new(o, "rollups", json_boolean(set->rollups)) ||
	      json_object_set_new(o, "profiles", json_integer((json_int_t)set->profiles)) ||
	      json_object_set_new(o, "series_matched", json_integer((json_int_t)set->matched)) ||
	      json_object_set_new(o, "series", arr);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int pd_api1_h_series(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	static const char *const keys[] = {"step", "function"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const char *v = pd_api1_param(q, keys[i]);
		if (v && strlen(v) > PD_API_MAX_PARAM_LEN)
			return pd_errf(err, PD_ELIMIT, "parameter \"%s\" is over the limit of %d bytes", keys[i],
				       PD_API_MAX_PARAM_LEN);
	}
	struct pd_series_spec spec = {0};
	spec.from_ns = q->from_ns;
	spec.to_ns = q->to_ns;
	int rc = parse_step(pd_api1_param(q, "step"), &spec.step_ns, err);
	if (rc)
		return rc;
	const char *format = pd_api1_param(q, "format");
	int fmt = !format || !strcmp(format, "json") ? 0 : !strcmp(format, "prometheus") ? 1 : !strcmp(format, "influx") ? 2 : -1;
	if (fmt < 0)
		return pd_errf(err, PD_EINVAL, "bad \"format\" \"%.64s\": want json, prometheus or influx", format);
	const char *vs = pd_api1_param(q, "value");
	if (vs && strcmp(vs, "flat") && strcmp(vs, "cum"))
		return pd_errf(err, PD_EINVAL, "bad \"value\" \"%.64s\": want flat or cum", vs);
	spec.cum = vs && !strcmp(vs, "cum");
	const char *us = pd_api1_param(q, "unit");
	if (us && strcmp(us, "raw") && strcmp(us, "cores"))
		return pd_errf(err, PD_EINVAL, "bad \"unit\" \"%.64s\": want raw or cores", us);
	spec.cores = us && !strcmp(us, "cores");
	if ((rc = pd_api1_normalize(q, &spec.normalize, err)))
		return rc;
	bool rollups;
	if ((rc = pd_plan_parse_rollups(pd_api1_param(q, "rollups"), &rollups, err)))
		return rc;
	if (spec.cores && !spec.normalize)
		return pd_errf(err, PD_EINVAL, "\"unit\" \"cores\" needs normalisation: drop normalize=false");
	int64_t top;
	if ((rc = pd_api1_param_int(q, "n", 0, 1, PD_SERIES_MAX_SERIES, &top, err)))
		return rc;
	spec.top = (size_t)top;
	spec.sample_index = pd_api1_param(q, "sample_index");
	if (!spec.sample_index)
		spec.sample_index = pd_api1_param(q, "si");
	const char *fn_text = pd_api1_param(q, "function");
	char bybuf[BY_MAX_LEN];
	const char *by[PD_SERIES_MAX_BY];
	if ((rc = parse_by(pd_api1_param(q, "by"), fn_text != NULL, bybuf, by, &spec.nby, &spec.by_function, err)))
		return rc;
	spec.by = by;
	/* the caps that need no data: points per series */
	int64_t nsteps = pd_series_nsteps(spec.from_ns, spec.to_ns, spec.step_ns);
	if (nsteps > PD_SERIES_MAX_POINTS) {
		char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
		return pd_errf(err, PD_EINVAL,
			       "%lld steps of %llds from %s to %s: over the limit of %d points per series; use a larger "
			       "\"step\" or a shorter range",
			       (long long)nsteps, (long long)(spec.step_ns / 1000000000LL),
			       pd_api_format_time(q->from_ns, a, sizeof a), pd_api_format_time(q->to_ns, b, sizeof b),
			       PD_SERIES_MAX_POINTS);
	}
	struct pd_selector holder = {0};
	if (fn_text && (rc = pd_series_compile_re("function", fn_text, &holder, &spec.re, err)))
		return rc;
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	struct pd_series_set set = {0};
	bool done = false;
	if (rollups && pd_series_range_ok(&q->sel, &spec) &&
	    (rc = pd_series_compute_range(q->cfg->st, &q->sel, &spec, q->cfg->max_profiles, &set, &done, err)))
		goto out;
	if (!done && (rc = pd_api1_select(q, &v, &n, err)))
		goto out;
	if (!done && (rc = pd_series_compute(q->cfg->st, v, n, &spec, &set, err)))
		goto out;
	out->merged = set.profiles;
	if (fmt == 0) {
		rc = pd_api1_reply_json(out, series_json(&set, &spec, fn_text, q), err);
	} else {
		struct pd_buf b = PD_BUF_INIT(0);
		rc = fmt == 1 ? pd_series_prometheus(&set, &spec, &b) : pd_series_influx(&set, &spec, &b);
		if (rc) {
			pd_buf_free(&b);
			rc = pd_errf(err, rc, "series: out of memory");
			goto out;
		}
		pd_api1_reply_text(out, &b,
				   fmt == 1 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8");
	}
out:
	pd_series_set_free(&set);
	pd_query_metas_free(v, n);
	pd_selector_free(&holder);
	return rc;
}
