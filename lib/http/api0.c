/*
 * api0.c — API v0, profefe's (docs/api.md; ../shared/reference/profefe.md
 * is its contract, bugs fixed): the route table and its handlers.
 *
 *   POST   /api/0/profiles               ingest one profile
 *   GET    /api/0/profiles               list (service, type, labels, from, to, limit)
 *   GET    /api/0/profiles/merge         merge what the list would find
 *   GET    /api/0/profiles/{id}[+{id}]   one profile, or the merge of several
 *   DELETE /api/0/profiles/{id}          remove one (admin scope)
 *   GET    /api/0/services               the services
 *   GET    /api/0/version                the build
 *
 * Every answer goes through server.c's responses (server_int.h).
 */
#define _GNU_SOURCE
#include "server_int.h"
#include "params.h"
#include "api1.h"

#include <stdlib.h>
#include <string.h>

static struct pd_kv *to_kv(const struct pd_api_label *l, size_t n)
{
	struct pd_kv *kv = calloc(n + 1, sizeof *kv);
	for (size_t i = 0; kv && i < n; i++) {
		kv[i].key = (char *)l[i].key;
		kv[i].value = (char *)l[i].value;
	}
	return kv;
}

/* The metric an ingest refusal counts under. Typed, never read from the
 * message; times out of range, bad service names and an ambiguous type
 * count as malformed, as they always have. */
static int refusal_metric(enum pd_refusal why)
{
	switch (why) {
	case PD_REFUSE_EMPTY:
		return PD_REJ_EMPTY;
	case PD_REFUSE_TYPE_MISMATCH:
		return PD_REJ_BAD_REQUEST;
	case PD_REFUSE_TOO_LARGE:
		return PD_REJ_TOO_LARGE;
	case PD_REFUSE_TOO_OLD:
		return PD_REJ_TOO_OLD;
	case PD_REFUSE_BUSY:
		return PD_REJ_BUSY;
	case PD_REFUSE_SERVICE:
	case PD_REFUSE_UNKNOWN_TYPE:
	case PD_REFUSE_MALFORMED:
	case PD_REFUSE_AMBIGUOUS_TYPE:
	case PD_REFUSE_TIME_RANGE:
	case PD_REFUSE_TOO_NEW:
		return PD_REJ_MALFORMED;
	case PD_REFUSE_NONE:
		break;
	}
	return PD_REJ_INTERNAL;
}

/* An upload's store work (srv_offload) and what it leaves for the answer. */
struct post_job {
	struct pd_api_post p;
	struct pd_kv *kv; /* p's labels, for the store */
	struct pd_ingest in;
	struct pd_profile_meta meta;
	enum pd_refusal why;
	struct pd_err err;
	int rc;
};

static void post_work(struct req *r)
{
	struct post_job *j = r->off_ctx;
	j->why = PD_REFUSE_NONE;
	j->rc = j->kv ? pd_store_ingest_why(r->s->st, &j->in, r->body.ptr, r->body.len, &j->meta, &j->why, &j->err)
		      : pd_errf(&j->err, PD_ENOMEM, "out of memory");
}

/* Also what finish never came to use (its connection closed: shutdown). */
static void post_drop(struct req *r)
{
	struct post_job *j = r->off_ctx;
	r->off_ctx = NULL;
	free(j->kv);
	pd_api_post_free(&j->p);
	pd_meta_clear(&j->meta);
	free(j);
}

static enum MHD_Result post_answer(struct MHD_Connection *c, struct req *r, struct post_job *j)
{
	struct pd_server *s = r->s;
	struct pd_metrics *m = &s->m;
	if (j->rc) {
		atomic_fetch_add(&m->rejected[refusal_metric(j->why)], 1);
		if (j->why == PD_REFUSE_TOO_OLD) {
			char msg[sizeof j->err.msg + 64];
			snprintf(msg, sizeof msg, "bad request: %s (--retention %lldh)", j->err.msg,
				 (long long)(s->cfg.retention_ns / 3600000000000LL));
			return srv_reply_error(c, r, 400, msg);
		}
		if (j->why == PD_REFUSE_SERVICE) /* the service parameter's fault, as "missing \"service\"" */
			pd_err_prefix(&j->err, "bad request");
		return srv_reply_err(c, r, j->rc, &j->err);
	}
	pd_metrics_ingested(m, j->meta.type, j->meta.stored_bytes);
	json_t *body = pd_api1_meta_json(&j->meta);
	if (!body)
		return srv_reply_error(c, r, 500, "out of memory");
	return srv_reply_body(c, r, body);
}

static enum MHD_Result post_finish(struct MHD_Connection *c, struct req *r)
{
	pd_buf_free(&r->body);
	enum MHD_Result res = post_answer(c, r, r->off_ctx);
	post_drop(r);
	return res;
}

static enum MHD_Result h_post(struct MHD_Connection *c, struct req *r, const char *arg)
{
	(void)arg;
	struct pd_server *s = r->s;
	struct pd_metrics *m = &s->m;
	struct pd_api_post p;
	struct pd_err err;
	int rc;
	if (r->early) { /* before the body (server.c): a bad parameter is answered now */
		if ((rc = pd_api_parse_post(srv_qget, c, pd_wall_ns(), &p, &err))) {
			atomic_fetch_add(&m->rejected[PD_REJ_BAD_REQUEST], 1);
			return srv_reply_err(c, r, rc, &err);
		}
		pd_api_post_free(&p);
		return MHD_YES; /* read the body, then come back */
	}
	atomic_fetch_add(&m->bytes_in, r->body.len + r->discarded);
	if (r->busy) {
		atomic_fetch_add(&m->rejected[PD_REJ_BUSY], 1);
		return srv_reply_error(c, r, 503,
				   "too much profile data being received at once (--max-ingest-memory): try again");
	}
	if (r->too_large) {
		atomic_fetch_add(&m->rejected[PD_REJ_TOO_LARGE], 1);
		char msg[160];
		snprintf(msg, sizeof msg, "request body is over the limit of %zu bytes (--max-body)", s->cfg.max_body);
		return srv_reply_error(c, r, 413, msg);
	}
	int64_t now = pd_wall_ns();
	rc = pd_api_parse_post(srv_qget, c, now, &p, &err);
	if (rc) {
		atomic_fetch_add(&m->rejected[PD_REJ_BAD_REQUEST], 1);
		return srv_reply_err(c, r, rc, &err);
	}
	if (r->body.len == 0) {
		pd_api_post_free(&p);
		atomic_fetch_add(&m->rejected[PD_REJ_EMPTY], 1);
		return srv_reply_error(c, r, 400, "malformed profile: the request body is empty (send the pprof as the body)");
	}
	struct post_job *job = calloc(1, sizeof *job);
	if (!job) {
		pd_api_post_free(&p);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	job->p = p;
	job->kv = to_kv(job->p.labels, job->p.nlabels);
	int64_t cut = srv_cutoff_ns(s, now);
	job->in = (struct pd_ingest){.service = job->p.service,
				     .type = job->p.type == PD_API_TYPE_ANY ? NULL : pd_api_type_name(job->p.type),
				     .labels = job->kv,
				     .nlabels = job->p.nlabels,
				     .created_ns = job->p.has_created_at ? job->p.created_at_ns : 0,
				     .min_created_ns = cut == INT64_MIN ? 0 : cut,
				     .max_created_ns = s->cfg.max_future_skew_ns ? now + s->cfg.max_future_skew_ns : 0,
				     .reserve = srv_req_reserve,
				     .reserve_ctx = r};
	/* the store's work (decode, commit: a ClickHouse that does not answer
	 * holds it for the store's timeout) on an offload thread */
	r->off_drop = post_drop;
	if (srv_offload(c, r, post_work, post_finish, job) == 0)
		return MHD_YES;
	r->off_ctx = job;
	post_work(r);
	return post_finish(c, r);
}

/* Collect matching ids (list and merge). */
struct found {
	char (*ids)[PD_STORE_ID_LEN + 1];
	size_t n, cap;
	json_t *arr; /* list: metadata objects */
};

static int found_add(void *ctx, const struct pd_profile_meta *m)
{
	struct found *f = ctx;
	if (f->arr) {
		json_t *j = pd_api1_meta_json(m);
		if (!j || json_array_append_new(f->arr, j))
			return PD_ENOMEM;
		return 0;
	}
	if (pd_grow((void **)&f->ids, &f->cap, f->n + 1, sizeof *f->ids))
		return PD_ENOMEM;
	memcpy(f->ids[f->n++], m->id, PD_STORE_ID_LEN + 1);
	return 0;
}

/* Parse the list/merge query and run it. */
static int run_query(struct MHD_Connection *c, struct req *r, struct pd_api_query *q, struct found *f,
		     size_t limit_cap, struct pd_err *err)
{
	int64_t now = pd_wall_ns();
	int rc = pd_api_parse_query(srv_qget, c, now, q, err);
	if (rc)
		return rc;
	int64_t from = q->from_ns, cut = srv_cutoff_ns(r->s, now);
	if (from < cut)
		from = cut; /* past the retention window: already gone, or about to be */
	struct pd_kv *kv = to_kv(q->labels, q->nlabels);
	if (!kv)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t limit = (size_t)q->limit;
	if (limit_cap && (limit == 0 || limit > limit_cap))
		limit = limit_cap;
	struct pd_store_query sq = {q->service, pd_api_type_name(q->type), kv, q->nlabels, from, q->to_ns, limit};
	if (from > q->to_ns) /* the whole window is past retention */
		rc = 0;
	else if ((rc = pd_store_find_partial(r->s->st, &sq, found_add, f, &r->skipped, err)) == PD_ENOMEM)
		pd_errf(err, PD_ENOMEM, "out of memory");
	r->ranged = from <= q->to_ns, r->range_from = from, r->range_to = q->to_ns;
	free(kv);
	return rc;
}

static enum MHD_Result h_list(struct MHD_Connection *c, struct req *r, const char *arg)
{
	(void)arg;
	struct pd_api_query q;
	struct pd_err err;
	struct found f = {0};
	f.arr = json_array();
	if (!f.arr)
		return srv_reply_error(c, r, 500, "out of memory");
	int rc = run_query(c, r, &q, &f, 0, &err);
	pd_api_query_free(&q);
	if (rc) {
		json_decref(f.arr);
		return srv_reply_err(c, r, rc, &err);
	}
	if (json_array_size(f.arr) == 0) {
		json_decref(f.arr);
		return srv_reply_error(c, r, 404, "nothing found");
	}
	return srv_reply_body(c, r, f.arr);
}

static enum MHD_Result merge_and_reply(struct MHD_Connection *c, struct req *r, const char *const *ids, size_t n,
				       const char *filename)
{
	int64_t t0 = pd_wall_ns();
	struct pd_profile *p = NULL;
	struct pd_err err;
	int rc = n == 1 ? pd_store_get(r->s->st, ids[0], &p, &err) : pd_store_merge(r->s->st, ids, n, &p, &err);
	for (size_t i = 0; n > 1 && i < n; i++) { /* a damaged day's ids are left out of a merge: say so */
		int64_t t = pd_xid_time(ids[i]);
		if (t >= 0 && (!r->ranged || t < r->range_from))
			r->range_from = t;
		if (t >= 0 && (!r->ranged || t > r->range_to))
			r->range_to = t;
		r->ranged = r->ranged || t >= 0;
	}
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	enum MHD_Result ok = srv_reply_pprof(c, r, p, filename);
	pd_profile_free(p);
	if (n > 1)
		pd_metrics_merge(&r->s->m, n, pd_wall_ns() - t0);
	return ok;
}

static enum MHD_Result too_many(struct MHD_Connection *c, struct req *r, size_t cap, bool limited)
{
	char msg[256];
	snprintf(msg, sizeof msg,
		 "more than %zu profiles match: over the limit of profiles per merge (--max-merge-profiles); "
		 "narrow the time range or pass a smaller \"limit\"%s",
		 cap, limited ? "" : " (limit=N merges the newest N)");
	return srv_reply_error(c, r, 413, msg);
}

/* A merge of one service and type over a time range, without labels or
 * limit: the store's range merge (pd_store_merge_range), which reads the
 * profiles of the range in one scan (no id lookups, no labels read:
 * server CPU for a merge of 200 large profiles 30 -> 28 ms, measured) and
 * whole hours from their rollups. --max-merge-profiles caps the profiles
 * read one by one. */
static enum MHD_Result merge_range(struct MHD_Connection *c, struct req *r, const struct pd_api_query *q,
				   const char *fname)
{
	int64_t now = pd_wall_ns(), t0 = now;
	int64_t from = q->from_ns, cut = srv_cutoff_ns(r->s, now);
	if (from < cut)
		from = cut;
	r->ranged = from <= q->to_ns, r->range_from = from, r->range_to = q->to_ns;
	if (from > q->to_ns)
		return srv_reply_error(c, r, 404, "nothing found");
	size_t cap = r->s->cfg.max_merge;
	struct pd_merge_range mr = {q->service, pd_api_type_name(q->type), from, q->to_ns, cap, false};
	struct pd_profile *p = NULL;
	struct pd_merge_info info;
	struct pd_err err;
	int rc = pd_store_merge_range(r->s->st, &mr, &p, &info, &err);
	pd_store_skipped_merge(&r->skipped, &info.skipped);
	if (rc == PD_ELIMIT)
		return too_many(c, r, cap, false);
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	if (!p)
		return srv_reply_error(c, r, 404, "nothing found");
	enum MHD_Result ok = srv_reply_pprof(c, r, p, fname);
	pd_profile_free(p);
	pd_metrics_merge(&r->s->m, info.profiles, pd_wall_ns() - t0);
	return ok;
}

static enum MHD_Result h_merge(struct MHD_Connection *c, struct req *r, const char *arg)
{
	(void)arg;
	struct pd_api_query q;
	struct pd_err err;
	struct found f = {0};
	size_t cap = r->s->cfg.max_merge;
	int rc = pd_api_parse_query(srv_qget, c, pd_wall_ns(), &q, &err);
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	if (q.nlabels == 0 && q.limit == 0 && q.type != PD_API_TYPE_ANY) {
		char fname[32];
		snprintf(fname, sizeof fname, "%s", pd_api_type_name(q.type));
		enum MHD_Result ok = merge_range(c, r, &q, fname);
		pd_api_query_free(&q);
		return ok;
	}
	pd_api_query_free(&q);
	rc = run_query(c, r, &q, &f, cap + 1, &err);
	char fname[32];
	snprintf(fname, sizeof fname, "%s", q.type ? pd_api_type_name(q.type) : "merge");
	bool limited = q.limit > 0;
	pd_api_query_free(&q);
	if (rc) {
		free(f.ids);
		return srv_reply_err(c, r, rc, &err);
	}
	if (f.n == 0) {
		free(f.ids);
		return srv_reply_error(c, r, 404, "nothing found");
	}
	if (f.n > cap) {
		free(f.ids);
		return too_many(c, r, cap, limited);
	}
	const char **ids = malloc(f.n * sizeof *ids);
	if (!ids) {
		free(f.ids);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	for (size_t i = 0; i < f.n; i++)
		ids[i] = f.ids[i];
	enum MHD_Result ok = merge_and_reply(c, r, ids, f.n, fname);
	free(ids);
	free(f.ids);
	return ok;
}

static bool valid_id(const char *s, size_t n)
{
	if (n != PD_STORE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'v')))
			return false;
	return true;
}

/* Split "id1+id2+..." into ids; errors are answered here (returns false). */
static bool split_ids(struct MHD_Connection *c, struct req *r, const char *spec, char ***out, size_t *n,
		      enum MHD_Result *res)
{
	*out = NULL;
	*n = 0;
	size_t cap = 1;
	for (const char *p = spec; *p; p++)
		cap += *p == '+';
	if (cap > r->s->cfg.max_merge) {
		char msg[200];
		snprintf(msg, sizeof msg, "%zu ids: over the limit of profiles per merge (%zu, --max-merge-profiles)",
			 cap, r->s->cfg.max_merge);
		*res = srv_reply_error(c, r, 413, msg);
		return false;
	}
	char **ids = calloc(cap, sizeof *ids);
	if (!ids) {
		*res = srv_reply_error(c, r, 500, "out of memory");
		return false;
	}
	const char *p = spec;
	for (size_t i = 0; i < cap; i++) {
		const char *e = strchr(p, '+');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char msg[320];
		if (len == 0) {
			snprintf(msg, sizeof msg, "bad request: empty profile id in \"%.200s\"", spec);
			*res = srv_reply_error(c, r, 400, msg);
		} else if (!valid_id(p, len)) {
			snprintf(msg, sizeof msg,
				 "profile id \"%.*s\" not found (ids are 20 characters of 0-9a-v, as returned by "
				 "POST /api/0/profiles)",
				 (int)(len > 64 ? 64 : len), p);
			*res = srv_reply_error(c, r, 404, msg);
		} else {
			ids[i] = strndup(p, len);
			if (!ids[i])
				*res = srv_reply_error(c, r, 500, "out of memory");
		}
		if (!ids[i]) {
			for (size_t j = 0; j < i; j++)
				free(ids[j]);
			free(ids);
			return false;
		}
		(*n)++;
		p = e ? e + 1 : p + len;
	}
	*out = ids;
	return true;
}

static void free_ids(char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

static enum MHD_Result h_get_ids(struct MHD_Connection *c, struct req *r, const char *spec)
{
	char **ids;
	size_t n;
	enum MHD_Result res;
	if (!split_ids(c, r, spec, &ids, &n, &res))
		return res;
	enum MHD_Result ok;
	int64_t cut = srv_cutoff_ns(r->s, pd_wall_ns());
	size_t i = 0;
	/* xids have second resolution: compare in seconds */
	while (i < n && (cut == INT64_MIN || pd_xid_time(ids[i]) / 1000000000 >= cut / 1000000000 - 1))
		i++;
	if (i < n) {
		char msg[128];
		snprintf(msg, sizeof msg, "profile id \"%s\" not found (older than the retention window)", ids[i]);
		ok = srv_reply_error(c, r, 404, msg);
	} else {
		char fname[160];
		snprintf(fname, sizeof fname, "%.150s", spec);
		ok = merge_and_reply(c, r, (const char *const *)ids, n, fname);
	}
	free_ids(ids, n);
	return ok;
}

static enum MHD_Result h_delete(struct MHD_Connection *c, struct req *r, const char *spec)
{
	char **ids;
	size_t n;
	enum MHD_Result res;
	if (!split_ids(c, r, spec, &ids, &n, &res))
		return res;
	if (n != 1) {
		free_ids(ids, n);
		return srv_reply_error(c, r, 400, "bad request: DELETE takes one profile id");
	}
	struct pd_err err;
	int rc = pd_store_remove(r->s->st, ids[0], &err);
	free_ids(ids, n);
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	return srv_reply_owned(c, r, 200, pd_api_ok_json(NULL), "application/json");
}

static enum MHD_Result h_services(struct MHD_Connection *c, struct req *r, const char *arg)
{
	(void)arg;
	char **v;
	size_t n;
	struct pd_err err;
	int rc = pd_store_services(r->s->st, &v, &n, &err);
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	r->ranged = true, r->range_from = INT64_MIN, r->range_to = INT64_MAX; /* damaged days: partial */
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		if (arr && json_array_append_new(arr, json_string_nocheck(v[i]))) {
			json_decref(arr);
			arr = NULL;
		}
		free(v[i]);
	}
	free(v);
	if (!arr)
		return srv_reply_error(c, r, 500, "out of memory");
	if (n == 0) {
		json_decref(arr);
		return srv_reply_error(c, r, 404, "nothing found");
	}
	return srv_reply_body(c, r, arr);
}

static enum MHD_Result h_version(struct MHD_Connection *c, struct req *r, const char *arg)
{
	(void)arg;
	const struct pd_server_config *k = &r->s->cfg;
	json_t *o = json_object();
	if (!o || json_object_set_new(o, "version", json_string(k->version)) ||
	    json_object_set_new(o, "commit", json_string(k->commit)) ||
	    json_object_set_new(o, "build_time", json_string(k->build_time))) {
		json_decref(o);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	return srv_reply_body(c, r, o);
}

/* ---- the routes ------------------------------------------------------------------ */

typedef enum MHD_Result (*handler)(struct MHD_Connection *c, struct req *r, const char *arg);

/* path: exact, or with ids, a prefix whose rest (one path segment, the
 * argument) is "id" or "id+id+...": a GET of several ids is a merge. The
 * metric's route is rt for GET (and methods not allowed), rt_post and
 * rt_del for those methods. */
static const struct route {
	const char *path;
	bool ids;
	const char *allow; /* the 405's Allow */
	int rt, rt_post, rt_del;
	handler get, post, del;
	bool merges; /* a GET counts against --max-concurrent-merges */
} routes[] = {
	{"/api/0/profiles", false, "GET, HEAD, POST", PD_RT_LIST, PD_RT_POST_PROFILE, PD_RT_LIST, h_list, h_post, NULL,
	 false},
	{"/api/0/profiles/merge", false, "GET, HEAD", PD_RT_MERGE, PD_RT_MERGE, PD_RT_MERGE, h_merge, NULL, NULL, true},
	{"/api/0/profiles/", true, "GET, HEAD, DELETE", PD_RT_GET, PD_RT_GET, PD_RT_DELETE, h_get_ids, NULL, h_delete,
	 false},
	{"/api/0/services", false, "GET, HEAD", PD_RT_SERVICES, PD_RT_SERVICES, PD_RT_SERVICES, h_services, NULL, NULL,
	 false},
	{"/api/0/version", false, "GET, HEAD", PD_RT_VERSION, PD_RT_VERSION, PD_RT_VERSION, h_version, NULL, NULL,
	 false},
};

bool pd_api0_dispatch(struct MHD_Connection *c, struct req *r, const char *path, const char *method,
		      enum MHD_Result *res)
{
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	bool post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
	for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
		const struct route *rt = &routes[i];
		size_t n = strlen(rt->path);
		if (rt->ids ? strncmp(path, rt->path, n) : strcmp(path, rt->path))
			continue;
		const char *arg = rt->ids ? path + n : "";
		bool merges = rt->merges;
		r->route = post ? rt->rt_post : del ? rt->rt_del : rt->rt;
		if (rt->ids && strchr(arg, '+')) { /* several ids: a merge */
			merges = true;
			if (!del)
				r->route = PD_RT_MERGE;
		}
		if (rt->ids && strchr(arg, '/')) {
			r->route = PD_RT_OTHER;
			*res = srv_reply_error(c, r, 404, "nothing found");
			return true;
		}
		handler h = get ? rt->get : post ? rt->post : del ? rt->del : NULL;
		if (!h) {
			*res = srv_method_not_allowed(c, r, rt->allow);
			return true;
		}
		if (!get || !merges) {
			*res = h(c, r, arg);
			return true;
		}
		if (!srv_merge_take(r->s)) {
			*res = srv_too_many_merges(c, r);
			return true;
		}
		*res = h(c, r, arg);
		srv_merge_give(r->s);
		return true;
	}
	return false;
}
