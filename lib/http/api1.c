/*
 * api1.c — API v1's route table, common parameters, helpers for handlers,
 * and the metadata routes (profiles, labels, label values, types). The
 * contract is in api1.h; the user-facing description in docs/api.md.
 *
 * Every route is GET/HEAD. Every error is a JSON 4xx/5xx whose message
 * names the parameter (and, for selectors, the byte offset) at fault.
 * Empty results are 200 with an empty array (unlike API v0's 404), except
 * merge, which has nothing to return and answers 404.
 */
#include "api1.h"

#include <stdlib.h>
#include <string.h>

enum { NEED_QUERY = 1 };

struct route {
	const char *pattern; /* "{}" = one path argument (may contain '/') */
	pd_api1_fn fn;
	int flags;
};

/* The table: one row per route (docs/api.md "API v1" lists the same). */
static const struct route routes[] = {
	{"profiles", pd_api1_h_profiles, 0},
	{"merge", pd_api1_h_merge, NEED_QUERY},
	{"top", pd_api1_h_top, NEED_QUERY},
	{"labels", pd_api1_h_labels, 0},
	{"labels/{}/values", pd_api1_h_label_values, 0},
	{"types", pd_api1_h_types, 0},
	{"series", pd_api1_h_series, 0},
	{"diff", pd_api1_h_diff, 0},
	{"rollouts", pd_api1_h_rollouts, 0},
	{"regressions", pd_api1_h_regressions, 0},
};

/* Match path against pattern; on a match with an argument, *arg is a
 * malloc'd copy of it. */
static bool route_match(const char *pattern, const char *path, char **arg)
{
	*arg = NULL;
	const char *br = strstr(pattern, "{}");
	if (!br)
		return !strcmp(pattern, path);
	size_t pre = (size_t)(br - pattern), suf = strlen(br + 2), n = strlen(path);
	if (n <= pre + suf || strncmp(path, pattern, pre) || strcmp(path + n - suf, br + 2))
		return false;
	*arg = strndup(path + pre, n - pre - suf);
	return *arg != NULL;
}

/* ---- replies ---------------------------------------------------------------------- */

int pd_api1_reply_json(struct pd_api1_resp *out, json_t *v, struct pd_err *err)
{
	if (!v)
		return pd_errf(err, PD_ENOMEM, "out of memory building the answer");
	json_decref(out->json);
	out->json = v;
	out->kind = PD_API1_JSON;
	out->status = 200;
	return 0;
}

int pd_api1_reply_text(struct pd_api1_resp *out, struct pd_buf *text, const char *ctype)
{
	pd_buf_free(&out->text);
	out->text = *text;
	*text = (struct pd_buf)PD_BUF_INIT(0);
	out->ctype = ctype;
	out->kind = PD_API1_TEXT;
	out->status = 200;
	return 0;
}

int pd_api1_reply_pprof(struct pd_api1_resp *out, struct pd_profile *p, const char *filename)
{
	pd_profile_free(out->profile);
	out->profile = p;
	snprintf(out->filename, sizeof out->filename, "%s", filename);
	out->kind = PD_API1_PPROF;
	out->status = 200;
	return 0;
}

void pd_api1_resp_free(struct pd_api1_resp *r)
{
	json_decref(r->json);
	r->json = NULL;
	pd_buf_free(&r->text);
	pd_profile_free(r->profile);
	r->profile = NULL;
}

/* ---- parameters -------------------------------------------------------------------- */

const char *pd_api1_param(const struct pd_api1_req *q, const char *key)
{
	const char *v = q->get(q->get_ctx, key);
	return v && *v ? v : NULL;
}

int pd_api1_param_int(const struct pd_api1_req *q, const char *key, int64_t def, int64_t min, int64_t max,
		      int64_t *out, struct pd_err *err)
{
	const char *v = pd_api1_param(q, key);
	*out = def;
	if (!v)
		return 0;
	int64_t x = 0;
	const char *c = v;
	bool ok = *c != 0;
	for (; *c && ok; c++) {
		ok = *c >= '0' && *c <= '9' && x <= (INT64_MAX - 9) / 10;
		if (ok) /* not after the bound: 19 nines would overflow (UB) */
			x = x * 10 + (*c - '0');
	}
	if (!ok || x < min || x > max)
		return pd_errf(err, PD_EINVAL, "bad \"%s\" \"%.64s\": want an integer in [%lld, %lld]", key, v,
			       (long long)min, (long long)max);
	*out = x;
	return 0;
}

static int check_len(const char *key, const char *v, struct pd_err *err)
{
	if (v && strlen(v) > PD_API_MAX_PARAM_LEN)
		return pd_errf(err, PD_ELIMIT, "parameter \"%s\" is over the limit of %d bytes", key,
			       PD_API_MAX_PARAM_LEN);
	return 0;
}

/* query, from, to. */
static int parse_common(struct pd_api1_req *q, int flags, struct pd_err *err)
{
	static const char *const keys[] = {"query", "from", "to", "sample_index", "si", "by", "value", "n", "format",
					   "max_nodes", "normalize", "unit"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		int rc = check_len(keys[i], q->get(q->get_ctx, keys[i]), err);
		if (rc)
			return rc;
	}
	const char *s = pd_api1_param(q, "query");
	if (!s && (flags & NEED_QUERY) && !pd_api1_param(q, "id"))
		return pd_errf(err, PD_EINVAL, "missing \"query\" (a selector, e.g. query=cpu{service=\"auth\"}, or id=ID)");
	if (s) {
		int rc = pd_selector_parse(s, &q->sel, err);
		if (rc)
			return rc;
		q->has_query = true;
		snprintf(q->query_text, sizeof q->query_text, "%s", s);
	}
	const char *f = pd_api1_param(q, "from"), *t = pd_api1_param(q, "to");
	q->from_ns = q->now_ns - PD_API1_DEFAULT_WINDOW_NS;
	q->to_ns = q->now_ns;
	int rc;
	if (f && (rc = pd_api_parse_stored_time("from", f, q->now_ns, &q->from_ns, err)))
		return rc;
	if (t && (rc = pd_api_parse_stored_time("to", t, q->now_ns, &q->to_ns, err)))
		return rc;
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	if (q->from_ns > q->to_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" after \"to\" (from %s, to %s)",
			       pd_api_format_time(q->from_ns, a, sizeof a), pd_api_format_time(q->to_ns, b, sizeof b));
	int64_t max = q->cfg->max_range_ns ? q->cfg->max_range_ns : PD_API1_MAX_RANGE_NS;
	/* to - from without overflow: both are within int64 */
	if ((q->from_ns < 0 && q->to_ns > INT64_MAX + q->from_ns) || q->to_ns - q->from_ns > max)
		return pd_errf(err, PD_EINVAL,
			       "range over the limit: from %s to %s is more than %lldh (--max-query-range); "
			       "narrow \"from\"/\"to\"",
			       pd_api_format_time(q->from_ns, a, sizeof a), pd_api_format_time(q->to_ns, b, sizeof b),
			       (long long)(max / 3600000000000LL));
	if (q->cfg->retention_ns) {
		int64_t cut = q->now_ns - q->cfg->retention_ns;
		if (q->from_ns < cut)
			q->from_ns = cut; /* older profiles are gone or about to be */
	}
	return 0;
}

int pd_api1_normalize(const struct pd_api1_req *q, bool *on, struct pd_err *err)
{
	const char *v = pd_api1_param(q, "normalize");
	*on = !v || !strcmp(v, "true") || !strcmp(v, "1");
	if (v && !*on && strcmp(v, "false") && strcmp(v, "0"))
		return pd_errf(err, PD_EINVAL, "bad \"normalize\" \"%.64s\": want true or false", v);
	return 0;
}

json_t *pd_api1_norm_json(const struct pd_norm_info *i)
{
	char mode[64];
	json_t *o = json_pack("{sssIsIsIsI}", "mode", pd_norm_mode(i, mode, sizeof mode), "sources", (json_int_t)i->sources,
			      "profiles", (json_int_t)i->profiles, "used", (json_int_t)(i->profiles - i->excluded),
			      "excluded", (json_int_t)i->excluded);
	if (o && (i->kinds & (1u << PD_NORM_CUMULATIVE)) && json_object_set_new(o, "resets", json_integer((json_int_t)i->resets))) {
		json_decref(o);
		return NULL;
	}
	if (o && i->excluded) {
		char note[300];
		snprintf(note, sizeof note,
			 "%zu cumulative=true snapshots left out: each is its source's only one in the range (nothing to "
			 "subtract); normalize=false sums the snapshots as they are",
			 i->excluded);
		if (json_object_set_new(o, "note", json_string(note))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int pd_api1_nothing(const struct pd_api1_req *q, struct pd_err *err)
{
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	if (q->from_ns > q->to_ns) /* from was moved to the retention window's start, past to */
		return pd_errf(err, PD_ENOTFOUND, "no profiles match %s: \"to\" (%s) is older than the retention window",
			       q->has_query ? q->query_text : "{}", pd_api_format_time(q->to_ns, b, sizeof b));
	return pd_errf(err, PD_ENOTFOUND, "no profiles match %s in [%s, %s]", q->has_query ? q->query_text : "{}",
		       pd_api_format_time(q->from_ns, a, sizeof a), pd_api_format_time(q->to_ns, b, sizeof b));
}

#define API1_MAX_IDS 64

/* id=ID[,ID...]: exactly those profiles (that the query, if any, also
 * selects), whatever from and to say: each is looked for in the second its
 * xid names. An id that is not stored is a 404 naming it. */
static int select_ids(const struct pd_api1_req *q, const char *ids, struct pd_profile_meta **v, size_t *n,
		      struct pd_err *err)
{
	*v = NULL;
	*n = 0;
	size_t cap = 0;
	int rc = 0, k = 0;
	for (const char *p = ids; !rc && *p;) {
		size_t len = strcspn(p, ",");
		char id[PD_STORE_ID_LEN + 1];
		if (len != PD_STORE_ID_LEN || ++k > API1_MAX_IDS) {
			rc = k > API1_MAX_IDS ? pd_errf(err, PD_ELIMIT, "more than %d ids in \"id\"", API1_MAX_IDS)
					      : pd_errf(err, PD_EINVAL, "bad \"id\" \"%.*s\": want profile ids (20 characters of "
								    "0-9a-v) separated by ','",
						    (int)(len > 40 ? 40 : len), p);
			break;
		}
		memcpy(id, p, len);
		id[len] = 0;
		int64_t t = pd_xid_time(id);
		struct pd_profile_meta *w = NULL;
		size_t m = 0;
		if (t < 0) {
			rc = pd_errf(err, PD_EINVAL, "bad \"id\" \"%s\": not a profile id", id);
			break;
		}
		if ((rc = pd_query_select(q->cfg->st, &q->sel, t, t + 999999999LL, 0, &w, &m, err)))
			break;
		bool found = false;
		for (size_t i = 0; i < *n && !found; i++) /* named twice: once */
			found = !strcmp((*v)[i].id, id);
		for (size_t i = 0; i < m; i++) {
			if (!found && !strcmp(w[i].id, id)) {
				if (pd_grow((void **)v, &cap, *n + 1, sizeof **v)) {
					rc = pd_errf(err, PD_ENOMEM, "out of memory");
				} else {
					(*v)[(*n)++] = w[i];
					memset(&w[i], 0, sizeof w[i]); /* moved */
					found = true;
				}
			}
		}
		pd_query_metas_free(w, m);
		if (!rc && !found)
			rc = pd_errf(err, PD_ENOTFOUND, "nothing found: no profile %s%s%s", id, q->has_query ? " matching " : "",
				     q->has_query ? q->query_text : "");
		p += len;
		if (*p == ',')
			p++;
	}
	if (rc) {
		pd_query_metas_free(*v, *n);
		*v = NULL;
		*n = 0;
	}
	return rc;
}

int pd_api1_select(const struct pd_api1_req *q, struct pd_profile_meta **v, size_t *n, struct pd_err *err)
{
	const char *ids = pd_api1_param(q, "id");
	if (ids)
		return select_ids(q, ids, v, n, err);
	int rc = pd_query_select(q->cfg->st, &q->sel, q->from_ns, q->to_ns, q->cfg->max_profiles, v, n, err);
	if (rc == PD_ELIMIT)
		pd_errf(err, PD_ELIMIT,
			"more than %zu profiles match: over the limit of profiles per query (--max-merge-profiles); "
			"narrow the selector or the time range",
			q->cfg->max_profiles);
	return rc;
}

int pd_api1_merge(const struct pd_api1_req *q, const struct pd_profile_meta *v, size_t n, struct pd_profile **out,
		  struct pd_err *err)
{
	*out = NULL;
	const struct pd_profile_meta **m = malloc((n ? n : 1) * sizeof *m);
	if (!m)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		m[i] = &v[i];
	int rc = pd_store_merge_metas(q->cfg->st, m, n, out, err);
	free(m);
	return rc;
}

const char *pd_api1_si_param(const struct pd_api1_req *q, const char **key)
{
	const char *v = pd_api1_param(q, *key = "sample_index");
	return v ? v : pd_api1_param(q, *key = "si");
}

int pd_api1_sample_index(const struct pd_api1_req *q, const struct pd_profile *p, uint32_t *si, struct pd_err *err)
{
	const char *key, *v = pd_api1_si_param(q, &key);
	if (!v) {
		*si = pd_profile_default_index(p);
		return 0;
	}
	int i = pd_profile_sample_index(p, v);
	if (i < 0) {
		char types[256];
		pd_profile_describe_types(p, types, sizeof types);
		return pd_errf(err, PD_EINVAL, "bad \"%s\" \"%.64s\": the profiles have sample types %s (give a name or "
					       "an index from 0)",
			       key, v, types);
	}
	*si = (uint32_t)i;
	return 0;
}

/* ---- dispatch ----------------------------------------------------------------------- */

void pd_api1_handle(const struct pd_api1_config *cfg, const char *method, const char *path, pd_api_get_fn get,
		    void *get_ctx, int64_t now_ns, struct pd_api1_resp *out)
{
	memset(out, 0, sizeof *out);
	out->status = 200;
	struct pd_api1_req q = {0};
	q.cfg = cfg;
	q.get = get;
	q.get_ctx = get_ctx;
	q.path = path;
	q.now_ns = now_ns;
	struct pd_err err = {0};
	char *arg = NULL;
	const struct route *rt = NULL;
	for (size_t i = 0; i < sizeof routes / sizeof *routes && !rt; i++)
		if (route_match(routes[i].pattern, path, &arg))
			rt = &routes[i];
	int rc;
	if (!rt) {
		rc = pd_errf(&err, PD_ENOTFOUND, "nothing found: no API v1 route /api/1/%.200s", path);
		goto out;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		out->status = 405;
		out->allow = "GET, HEAD";
		snprintf(out->error, sizeof out->error, "method not allowed");
		free(arg);
		return;
	}
	q.arg = arg;
	if ((rc = parse_common(&q, rt->flags, &err)))
		goto out;
	out->ranged = true, out->from_ns = q.from_ns, out->to_ns = q.to_ns; /* damaged days in it: partial */
	rc = rt->fn(&q, out, &err);
out:
	pd_selector_free(&q.sel);
	free(arg);
	if (rc) {
		pd_api1_resp_free(out);
		out->kind = PD_API1_NONE;
		out->status = pd_api_http_status(rc);
		snprintf(out->error, sizeof out->error, "%s", err.msg[0] ? err.msg : pd_strerror(rc));
	}
}

/* ---- metadata routes ------------------------------------------------------------- */

json_t *pd_api1_meta_json(const struct pd_profile_meta *m)
{
	int type;
	struct pd_err err;
	if (pd_api_parse_type(m->type, &type, &err))
		type = PD_API_TYPE_OTHER;
	struct pd_api_label *l = calloc(m->nlabels + 1, sizeof *l);
	if (!l)
		return NULL;
	for (size_t i = 0; i < m->nlabels; i++) {
		l[i].key = m->labels[i].key;
		l[i].value = m->labels[i].value;
	}
	json_t *j = pd_api_profile_json(m->id, type, m->service, l, m->nlabels, m->created_ns);
	free(l);
	return j;
}

int pd_api1_h_profiles(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	struct pd_profile_meta *v;
	size_t n;
	int rc = pd_api1_select(q, &v, &n, err);
	if (rc)
		return rc;
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		json_t *m = pd_api1_meta_json(&v[i]); /* API v0's object, and (v1 only) the stored size */
		bool bad = !m || json_object_set_new(m, "size", json_integer((json_int_t)v[i].stored_bytes));
		if (bad)
			json_decref(m);
		if (bad || json_array_append_new(arr, m)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	pd_query_metas_free(v, n);
	return pd_api1_reply_json(out, arr, err);
}

/* Distinct strings with a count each, collected in a jansson object
 * (insertion order lost: sorted at the end). */
struct distinct {
	json_t *o;        /* name -> count (integer) */
	const char *name; /* label values: which label; NULL = label names */
	int type_mode;    /* types: name -> {profiles, services} */
	json_t *svcs;     /* types: "type\x01service" set */
};

static int count_key(json_t *o, const char *k)
{
	json_t *c = json_object_get(o, k);
	if (c)
		return json_integer_set(c, json_integer_value(c) + 1) ? PD_ENOMEM : 0;
	return json_object_set_new(o, k, json_integer(1)) ? PD_ENOMEM : 0;
}

static int distinct_add(void *ctx, const struct pd_profile_meta *m)
{
	struct distinct *d = ctx;
	if (d->type_mode) {
		json_t *t = json_object_get(d->o, m->type);
		if (!t) {
			t = json_pack("{sIsI}", "profiles", (json_int_t)0, "services", (json_int_t)0);
			if (!t || json_object_set_new(d->o, m->type, t))
				return PD_ENOMEM;
		}
		json_t *p = json_object_get(t, "profiles");
		if (json_integer_set(p, json_integer_value(p) + 1))
			return PD_ENOMEM;
		char key[sizeof m->type + sizeof m->service + 1];
		snprintf(key, sizeof key, "%s\x01%s", m->type, m->service);
		if (!json_object_get(d->svcs, key)) {
			if (json_object_set_new(d->svcs, key, json_true()))
				return PD_ENOMEM;
			json_t *s = json_object_get(t, "services");
			if (json_integer_set(s, json_integer_value(s) + 1))
				return PD_ENOMEM;
		}
		return 0;
	}
	if (!d->name) {
		int rc = count_key(d->o, "service");
		for (size_t i = 0; i < m->nlabels && !rc; i++)
			if (i == 0 || strcmp(m->labels[i].key, m->labels[i - 1].key)) /* once per profile */
				rc = count_key(d->o, m->labels[i].key);
		return rc;
	}
	if (!strcmp(d->name, "service"))
		return count_key(d->o, m->service);
	if (!strcmp(d->name, "__name__")) /* as a selector reads it: the type (Prometheus' metric names) */
		return count_key(d->o, m->type);
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, d->name))
			return count_key(d->o, m->labels[i].value);
	return 0;
}

static int strcmp_p(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The keys of o, sorted bytewise, as a JSON array of strings. */
static json_t *sorted_keys(json_t *o)
{
	size_t n = json_object_size(o), i = 0;
	const char **k = malloc((n ? n : 1) * sizeof *k);
	json_t *arr = json_array();
	if (!k || !arr) {
		free(k);
		json_decref(arr);
		return NULL;
	}
	const char *key;
	json_t *val;
	json_object_foreach(o, key, val) k[i++] = key;
	qsort(k, n, sizeof *k, strcmp_p);
	for (i = 0; i < n; i++)
		if (json_array_append_new(arr, json_string_nocheck(k[i]))) {
			json_decref(arr);
			arr = NULL;
			break;
		}
	free(k);
	return arr;
}

static int run_distinct(struct pd_api1_req *q, struct distinct *d, struct pd_err *err)
{
	d->o = json_object();
	d->svcs = json_object();
	if (!d->o || !d->svcs)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = pd_query_each(q->cfg->st, &q->sel, q->from_ns, q->to_ns, distinct_add, d, err);
	if (rc == PD_ENOMEM)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	return rc;
}

/* The label names (name NULL) or the values of label name, sorted. */
static int reply_distinct_keys(struct pd_api1_req *q, const char *name, struct pd_api1_resp *out, struct pd_err *err)
{
	struct distinct d = {0};
	d.name = name;
	int rc = run_distinct(q, &d, err);
	if (!rc)
		rc = pd_api1_reply_json(out, sorted_keys(d.o), err);
	json_decref(d.o);
	json_decref(d.svcs);
	return rc;
}

int pd_api1_h_labels(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	return reply_distinct_keys(q, NULL, out, err);
}

int pd_api1_h_label_values(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	return reply_distinct_keys(q, q->arg, out, err);
}

int pd_api1_h_types(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	struct distinct d = {0};
	d.type_mode = 1;
	int rc = run_distinct(q, &d, err);
	json_t *arr = rc ? NULL : json_array();
	for (size_t i = 0; arr && pd_query_types[i]; i++) {
		json_t *t = json_object_get(d.o, pd_query_types[i]);
		if (!t)
			continue;
		json_t *row = json_pack("{sssOsO}", "type", pd_query_types[i], "profiles", json_object_get(t, "profiles"),
					"services", json_object_get(t, "services"));
		if (!row || json_array_append_new(arr, row)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	if (!rc)
		rc = pd_api1_reply_json(out, arr, err);
	json_decref(d.o);
	json_decref(d.svcs);
	return rc;
}
