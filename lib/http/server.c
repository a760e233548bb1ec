/*
 * server.c — libmicrohttpd glue, routing, the responses every API sends
 * (server_int.h); API v0's handlers are in api0.c, API v1's in api1*.c.
 *
 * Request life cycle (MHD's access handler is called several times per
 * request): the first call allocates a struct req and refuses an upload
 * whose Content-Length is over the cap before reading it; the following
 * calls collect the body into a capped buffer; the last call (no more body)
 * dispatches on method and path. MHD calls req_done when the response has
 * been sent (or the connection died): it logs the request line, counts it in
 * the metrics and frees the request.
 *
 * Every JSON answer is built by lib/http/params (Go's bytes); every error is
 * JSON with Content-Type application/json; binary headers are only sent with
 * a profile. pprof answers are encoded once, then gzip'd part by part (512 KiB
 * of protobuf per gzip member) while MHD sends them, so compressing overlaps
 * sending and the first byte leaves early.
 */
#define _GNU_SOURCE
#include "server_int.h"
#include "profmetrics.h"
#include "params.h"
#include "api1.h"
#include "auth.h"
#include "tls.h"
#include "../util/gz.h"

#include <arpa/inet.h>
#include <errno.h>
#include "../util/pdmhd.h"
#include <netdb.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The damaged days the answer's range skipped (once, at reply time: the
 * query may have found new damage). */
static const struct pd_store_skipped *partial_of(struct req *r)
{
	if (r->ranged && !r->partial_done && r->s && r->s->st) {
		pd_store_skipped_in(r->s->st, r->range_from, r->range_to, &r->skipped);
		r->partial_done = true;
	}
	return &r->skipped;
}

/* Take n bytes of the server's memory budget for r; false (nothing taken)
 * if that would pass --max-ingest-memory. */
static bool mem_take(struct pd_server *s, size_t *held, size_t n)
{
	size_t cap = s->cfg.max_ingest_memory;
	size_t prev = atomic_fetch_add(&s->mem, n);
	if (cap && prev + n > cap) {
		atomic_fetch_sub(&s->mem, n);
		return false;
	}
	*held += n;
	return true;
}

static void mem_give(struct pd_server *s, size_t *held)
{
	atomic_fetch_sub(&s->mem, *held);
	*held = 0;
}

/* struct pd_ingest.reserve: the decode's bytes, for the request. */
int srv_req_reserve(void *ctx, size_t n)
{
	struct req *r = ctx;
	if (!mem_take(r->s, &r->reserved, n))
		return PD_EBUSY;
	if (r->reserved > r->peak)
		r->peak = r->reserved;
	return 0;
}


void pd_server_config_default(struct pd_server_config *c)
{
	memset(c, 0, sizeof *c);
	c->addr = PD_SERVE_ADDR;
	c->max_body = PD_SERVE_MAX_BODY;
	c->max_merge = PD_SERVE_MAX_MERGE;
	c->timeout_s = PD_SERVE_TIMEOUT_S;
	c->max_connections = PD_SERVE_MAX_CONNECTIONS;
	c->max_per_ip = PD_SERVE_MAX_PER_IP;
	c->threads = PD_SERVE_THREADS;
	c->max_merges = PD_SERVE_MAX_MERGES;
	c->gzip_level = PD_SERVE_GZIP_LEVEL;
	c->max_ingest_memory = PD_SERVE_MAX_INGEST_MEMORY;
	c->version = "dev";
	c->commit = "";
	c->build_time = "";
}

/* ---- responses ------------------------------------------------------------------- */

static void set_status(struct req *r, int status, size_t bytes)
{
	r->status = status;
	r->bytes_out = bytes;
}

static enum MHD_Result queue(struct MHD_Connection *c, struct req *r, int status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "X-Request-Id", r->rid);
	const struct pd_store_skipped *sk = status == 200 ? partial_of(r) : NULL;
	if (sk && sk->partial) { /* X-Profd-Partial: 2026-11-30, 2026-12-01 */
		char h[PD_STORE_MAX_SKIPPED * 12 + 8] = "", d[16];
		for (size_t i = 0; i < sk->n && i < PD_STORE_MAX_SKIPPED; i++) {
			pd_store_day_name(sk->days[i], d);
			snprintf(h + strlen(h), sizeof h - strlen(h), "%s%s", i ? ", " : "", d);
		}
		MHD_add_response_header(resp, "X-Profd-Partial", h);
	}
	/* no answer is ever to be sniffed into something else, or framed */
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (!MHD_get_response_header(resp, "Content-Security-Policy"))
		MHD_add_response_header(resp, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
	/* what the API answers is data a token may have been needed for: no cache
	 * (a browser's, or an ingress's that keys on the URL alone) keeps it */
	if (!MHD_get_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (r->off_defer) { /* on an offload thread: its worker queues it (read_finish) */
		if (r->def_resp)
			MHD_destroy_response(r->def_resp);
		r->def_resp = resp;
		r->def_status = (unsigned)status;
		return MHD_YES;
	}
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ok;
}

/* Takes ownership of the malloc'd NUL-terminated text; hname (may be NULL):
 * one more header (Allow, Retry-After, WWW-Authenticate). */
static enum MHD_Result reply_owned_hdr(struct MHD_Connection *c, struct req *r, int status, char *text,
				       const char *ctype, const char *hname, const char *hvalue)
{
	if (!text)
		return MHD_NO;
	size_t n = strlen(text);
	struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (hname)
		MHD_add_response_header(resp, hname, hvalue);
	set_status(r, status, n);
	return queue(c, r, status, resp);
}

enum MHD_Result srv_reply_owned(struct MHD_Connection *c, struct req *r, int status, char *text,
				   const char *ctype)
{
	return reply_owned_hdr(c, r, status, text, ctype, NULL, NULL);
}

enum MHD_Result srv_reply_error(struct MHD_Connection *c, struct req *r, int status, const char *msg)
{
	if (status >= 500) /* always logged, with -q too */
		snprintf(r->err_detail, sizeof r->err_detail, "%s", msg);
	if (status == 500) /* an internal error's detail is for the log, not the client */
		msg = "internal server error";
	return reply_owned_hdr(c, r, status, pd_api_error_json(status, msg), "application/json",
			       status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, "1");
}

enum MHD_Result srv_reply_err(struct MHD_Connection *c, struct req *r, int rc, const struct pd_err *err)
{
	int status = pd_api_http_status(rc);
	if (rc == PD_ENOTFOUND && !err->msg[0])
		return srv_reply_error(c, r, 404, "nothing found");
	return srv_reply_error(c, r, status, err->msg);
}

enum MHD_Result srv_reply_body(struct MHD_Connection *c, struct req *r, json_t *body)
{
	char *s = pd_api_ok_json(body);
	json_decref(body);
	if (!s)
		return srv_reply_error(c, r, 500, "encoding the JSON answer failed");
	const struct pd_store_skipped *sk = partial_of(r);
	char *e = sk->partial ? strrchr(s, '}') : NULL;
	if (e) { /* {"code":200,"body":...,"partial":true,"skipped_days":["2026-11-30"]} */
		struct pd_buf b = PD_BUF_INIT(0);
		char d[16];
		int bad = pd_buf_append(&b, s, (size_t)(e - s)) || pd_buf_appendf(&b, ",\"partial\":true,\"skipped_days\":[");
		for (size_t i = 0; !bad && i < sk->n && i < PD_STORE_MAX_SKIPPED; i++) {
			pd_store_day_name(sk->days[i], d);
			bad = pd_buf_appendf(&b, "%s\"%s\"", i ? "," : "", d);
		}
		bad = bad || pd_buf_appendf(&b, "]%s", e) || pd_buf_append(&b, "", 1);
		free(s);
		s = bad ? NULL : (char *)b.ptr;
		if (bad)
			pd_buf_free(&b);
	}
	return srv_reply_owned(c, r, 200, s, "application/json");
}

static enum MHD_Result reply_text(struct MHD_Connection *c, struct req *r, int status, const char *text)
{
	char *t = strdup(text);
	return srv_reply_owned(c, r, status, t, "text/plain; charset=utf-8");
}

enum MHD_Result srv_method_not_allowed(struct MHD_Connection *c, struct req *r, const char *allow)
{
	return reply_owned_hdr(c, r, 405, pd_api_error_json(405, "method not allowed"), "application/json",
			       MHD_HTTP_HEADER_ALLOW, allow);
}

/* A pprof answer: the encoded protobuf, gzip'd one part at a time as MHD
 * asks; or, up to GZ_AT_ONCE, all of it at once on GZ_THREADS threads
 * before the first byte (a merge of 200 large profiles encodes to ~1.2 MB:
 * its gzip is then two parts at once, and the collector's other core is
 * otherwise idle while it is written). */
#define GZ_PART    (512u << 10)
#define GZ_AT_ONCE ((size_t)32 << 20)
#define GZ_THREADS 2
struct gzstream {
	struct pd_buf raw;
	size_t roff;
	struct pd_buf part;
	size_t poff;
	int level;
	struct req *r;
	struct pd_server *s;
	size_t reserved; /* of s->mem: the encoded profile, until the answer is sent */
};

static ssize_t gz_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct gzstream *g = cls;
	if (g->poff == g->part.len) {
		if (g->roff == g->raw.len)
			return MHD_CONTENT_READER_END_OF_STREAM;
		size_t n = g->raw.len - g->roff < GZ_PART ? g->raw.len - g->roff : GZ_PART;
		struct pd_err err;
		g->part.len = 0;
		g->poff = 0;
		if (pd_gzip(g->raw.ptr + g->roff, n, g->level, &g->part, &err))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		g->roff += n;
	}
	size_t n = g->part.len - g->poff < max ? g->part.len - g->poff : max;
	memcpy(buf, g->part.ptr + g->poff, n);
	g->poff += n;
	g->r->bytes_out += n;
	return (ssize_t)n;
}

static void gz_free(void *cls)
{
	struct gzstream *g = cls;
	if (g->s)
		mem_give(g->s, &g->reserved);
	pd_buf_free(&g->raw);
	pd_buf_free(&g->part);
	free(g);
}

enum MHD_Result srv_reply_pprof(struct MHD_Connection *c, struct req *r, const struct pd_profile *p,
				   const char *filename)
{
	struct gzstream *g = calloc(1, sizeof *g);
	if (!g)
		return srv_reply_error(c, r, 500, "out of memory");
	struct pd_err err;
	if (pd_pprof_encode(p, 0, &g->raw, &err)) {
		gz_free(g);
		return srv_reply_error(c, r, 500, err.msg);
	}
	g->level = r->s->cfg.gzip_level;
	g->r = r;
	g->s = r->s;
	/* a slow reader holds the encoded answer: it counts in the budget */
	if (!mem_take(r->s, &g->reserved, g->raw.cap)) {
		gz_free(g);
		return srv_reply_error(c, r, 503, "too many large answers being sent at once (--max-ingest-memory): try again");
	}
	if (g->raw.len >= 2 * GZ_PART && g->raw.len <= GZ_AT_ONCE) {
		if (pd_gzip_mt(g->raw.ptr, g->raw.len, g->level, GZ_THREADS, &g->part, &err)) {
			gz_free(g);
			return srv_reply_error(c, r, 500, err.msg);
		}
		pd_buf_free(&g->raw); /* all in part now: gz_read ends after it (the reservation stays) */
		g->roff = 0;
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 << 10, gz_read, g, gz_free);
	if (!resp) {
		gz_free(g);
		return MHD_NO;
	}
	char disp[256];
	snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", filename);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp);
	set_status(r, 200, 0);
	return queue(c, r, 200, resp);
}

/* ---- handlers -------------------------------------------------------------------- */

const char *srv_qget(void *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

int64_t srv_cutoff_ns(const struct pd_server *s, int64_t now)
{
	return s->cfg.retention_ns ? now - s->cfg.retention_ns : INT64_MIN;
}

static enum MHD_Result h_metrics(struct MHD_Connection *c, struct req *r)
{
	struct pd_store_stats st;
	struct pd_err err;
	bool have = pd_store_stats_quick(r->s->st, &st, &err) == 0;
	struct pd_buf b = PD_BUF_INIT(0);
	if (pd_metrics_render(&r->s->m, have ? &st : NULL, &b) ||
	    (r->s->cfg.metrics_extra && r->s->cfg.metrics_extra(r->s->cfg.metrics_ctx, &b)) ||
	    pd_buf_append(&b, "", 1)) {
		pd_buf_free(&b);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	return srv_reply_owned(c, r, 200, (char *)b.ptr, "text/plain; version=0.0.4; charset=utf-8");
}

/* GET /readyz?format=json: the same verdict (and status code) as /readyz,
 * with its detail as JSON for dashboards and scripts. */
static enum MHD_Result h_ready_json(struct MHD_Connection *c, struct req *r)
{
	struct pd_store_health h;
	memset(&h, 0, sizeof h);
	bool started = atomic_load(&r->s->ready);
	if (r->s->st)
		pd_store_health(r->s->st, &h);
	bool ready = started && !h.cannot_write;
	json_t *q = json_array(), *o = json_object();
	for (size_t i = 0; q && i < h.nquarantined && i < PD_STORE_MAX_QUARANTINED; i++)
		json_array_append_new(q, json_pack("{ssss}", "file", h.quarantined[i].file, "reason", h.quarantined[i].reason));
	if (!o || !q || json_object_set_new(o, "ready", json_boolean(ready)) ||
	    json_object_set_new(o, "started", json_boolean(started)) ||
	    json_object_set_new(o, "writable", json_boolean(!h.cannot_write)) ||
	    json_object_set_new(o, "write_error", h.cannot_write ? json_string(h.write_error) : json_null()) ||
	    json_object_set_new(o, "quarantined_count", json_integer((json_int_t)h.nquarantined)) ||
	    json_object_set_new(o, "quarantined", q)) {
		json_decref(o);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!t)
		return srv_reply_error(c, r, 500, "out of memory");
	size_t n = strlen(t);
	char *t2 = realloc(t, n + 2);
	if (!t2) {
		free(t);
		return srv_reply_error(c, r, 500, "out of memory");
	}
	memcpy(t2 + n, "\n", 2);
	return srv_reply_owned(c, r, ready ? 200 : 503, t2, "application/json");
}

/* GET /metrics/profiles: the latest window's profile-derived gauges. */
static enum MHD_Result h_metrics_profiles(struct MHD_Connection *c, struct req *r)
{
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err = {0};
	int rc = pd_profmetrics_render(r->s->cfg.profmetrics, r->s->st, pd_wall_ns(), &b, &err);
	if (rc || pd_buf_append(&b, "", 1)) {
		pd_buf_free(&b);
		return rc ? srv_reply_err(c, r, rc, &err) : srv_reply_error(c, r, 500, "out of memory");
	}
	return srv_reply_owned(c, r, 200, (char *)b.ptr, "text/plain; version=0.0.4; charset=utf-8");
}

/* API v1 (lib/http/api1.h): the handler fills a response, sent here. */
static enum MHD_Result h_api1(struct MHD_Connection *c, struct req *r, const char *path, const char *method)
{
	struct pd_server *s = r->s;
	struct pd_api1_config cfg = {s->st, s->cfg.max_merge, s->cfg.max_query_range_ns, s->cfg.retention_ns};
	struct pd_api1_resp resp;
	int64_t t0 = pd_wall_ns();
	pd_api1_handle(&cfg, method, path, srv_qget, c, t0, &resp);
	r->ranged = resp.ranged, r->range_from = resp.from_ns, r->range_to = resp.to_ns; /* partial if damaged days */
	enum MHD_Result ok;
	if (resp.status == 405)
		ok = srv_method_not_allowed(c, r, resp.allow);
	else if (resp.status != 200)
		ok = srv_reply_error(c, r, resp.status, resp.error);
	else if (resp.kind == PD_API1_PPROF)
		ok = srv_reply_pprof(c, r, resp.profile, resp.filename);
	else if (resp.kind == PD_API1_TEXT) {
		char *t = pd_buf_append(&resp.text, "", 1) ? NULL : (char *)resp.text.ptr;
		resp.text = (struct pd_buf)PD_BUF_INIT(0);
		ok = t ? srv_reply_owned(c, r, 200, t, resp.ctype) : srv_reply_error(c, r, 500, "out of memory");
	} else {
		json_t *j = resp.json;
		resp.json = NULL;
		ok = srv_reply_body(c, r, j ? j : json_null());
	}
	if (resp.merged)
		pd_metrics_merge(&s->m, resp.merged, pd_wall_ns() - t0);
	pd_api1_resp_free(&resp);
	return ok;
}

/* ---- authorisation ------------------------------------------------------------------- */

static void quote_key(const char *key, char *out, size_t n);

/* Whether origin ("scheme://host[:port]") is in the comma-separated list. */
static bool origin_listed(const char *list, const char *origin)
{
	size_t on = strlen(origin);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		while (n && p[0] == ' ')
			p++, n--;
		while (n && p[n - 1] == ' ')
			n--;
		if ((n == on && !strncasecmp(p, origin, n)) || (n == 1 && *p == '*'))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

/* NULL if the request may change things, else why not: a POST or DELETE
 * from a page of another origin than ours (the Host header's) or those of
 * --allowed-origins; without tokens also a body a cross-origin form can
 * send without a preflight (text/plain, multipart/form-data), which no
 * profile client uses. Requests without Origin (every non-browser client)
 * pass. */
static const char *cross_origin(struct MHD_Connection *c, struct req *r, const char *method)
{
	static _Thread_local char msg[400];
	if (strcmp(method, "POST") && strcmp(method, "DELETE") && strcmp(method, "PUT") && strcmp(method, "PATCH"))
		return NULL;
	const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	if (origin && strcmp(origin, "null")) {
		const char *h = strstr(origin, "://");
		bool same = h && host && !strcasecmp(h + 3, host);
		if (!same && !origin_listed(r->s->cfg.allowed_origins, origin)) {
			char q[200];
			quote_key(origin, q, sizeof q);
			snprintf(msg, sizeof msg,
				 "forbidden: a %s from a page of another origin (%s) is refused: add it to --allowed-origins "
				 "to allow it",
				 method, q);
			return msg;
		}
	} else if (origin) { /* "null": sandboxed frames, file:// pages, redirects */
		snprintf(msg, sizeof msg, "forbidden: a %s from a page of an opaque origin (\"null\") is refused", method);
		return msg;
	}
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (!r->s->cfg.tokens_path && ct &&
	    (!strncasecmp(ct, "text/plain", 10) || !strncasecmp(ct, "multipart/form-data", 19))) {
		snprintf(msg, sizeof msg,
			 "unsupported media type: a profile is sent as application/octet-stream (or with no type), not %.60s "
			 "(what a cross-origin web form sends)",
			 ct);
		return msg;
	}
	return NULL;
}

/* Whether path is p, trailing slashes ignored (as dispatch does). */
static bool path_is(const char *path, const char *p)
{
	size_t n = strlen(p);
	if (strncmp(path, p, n))
		return false;
	while (path[n] == '/')
		n++;
	return path[n] == 0;
}

/* The web UI's paths (after the prefix is taken off): /, /index.html, /ui/... */
static bool ui_path(const char *url)
{
	return !strcmp(url, "/") || !strcmp(url, "") || path_is(url, "/index.html") || !strncmp(url, "/ui/", 4);
}

/* url without --web-prefix (the ingress may or may not strip it: both
 * work); *bare = url is the prefix itself, without the '/' the page's
 * relative URLs need. */
static const char *unprefixed(const struct pd_server *s, const char *url, bool *bare)
{
	*bare = false;
	const char *p = s->cfg.web ? pd_web_prefix(s->cfg.web) : "";
	size_t n = strlen(p);
	if (!n || strncmp(url, p, n) || (url[n] && url[n] != '/'))
		return url;
	*bare = !url[n];
	return url[n] ? url + n : "/";
}

/* The path of a request line in absolute form (GET http://host/path
 * HTTP/1.1), which a server must accept (RFC 9112, 3.2.2): some clients
 * send it, and it was a 404 for every path. */
static const char *origin_form(const char *url)
{
	const char *p = !strncasecmp(url, "http://", 7) ? url + 7 : !strncasecmp(url, "https://", 8) ? url + 8 : NULL;
	if (!p)
		return url;
	p += strcspn(p, "/");
	return *p ? p : "/";
}

/* The scope a request needs: none for the probes (and /metrics with
 * --metrics-open), write for POST, admin for DELETE, read for the rest. */
static unsigned needed_scope(const struct pd_server *s, const char *url, const char *method)
{
	if (path_is(url, "/healthz") || path_is(url, "/readyz") || (s->cfg.metrics_open && path_is(url, "/metrics")))
		return 0;
	if (s->cfg.web && ui_path(url) && (!strcmp(method, "GET") || !strcmp(method, "HEAD")))
		return 0; /* the page and its files: public, like the probes (they hold no data) */
	if (!strcmp(method, "POST"))
		return PD_SCOPE_WRITE;
	if (!strcmp(method, "DELETE"))
		return PD_SCOPE_ADMIN;
	return PD_SCOPE_READ;
}

/* 0 if the request may go on, else 401 (no or unknown credentials) or 403
 * (a token without the scope: r->err_detail says which). */
static int authorize(struct MHD_Connection *c, struct req *r, const char *url, const char *method)
{
	struct pd_server *s = r->s;
	if (!s->cfg.tokens_path)
		return 0;
	unsigned need = needed_scope(s, url, method);
	if (!need)
		return 0;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *name = NULL;
	pthread_rwlock_rdlock(&s->auth_mu);
	unsigned have = pd_tokens_check(s->tokens, h, &name);
	if (name)
		snprintf(r->who, sizeof r->who, "%s", name);
	pthread_rwlock_unlock(&s->auth_mu);
	if (!have)
		return 401;
	if (!(have & need)) {
		char a[32], b[32];
		snprintf(r->err_detail, sizeof r->err_detail, "token \"%s\" has scope %s; %s %s needs %s", r->who,
			 pd_scopes_str(have, a, sizeof a), method, url, pd_scopes_str(need, b, sizeof b));
		return 403;
	}
	return 0;
}

static enum MHD_Result reply_auth(struct MHD_Connection *c, struct req *r, int status, const char *method)
{
	char msg[sizeof r->err_detail + 32];
	if (status == 403)
		snprintf(msg, sizeof msg, "forbidden: %s", r->err_detail);
	else
		snprintf(msg, sizeof msg,
			 "unauthorized: this collector needs a token (Authorization: Bearer TOKEN, or TOKEN as the "
			 "password of basic auth)%s",
			 MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)
				 ? ": the one given is not known"
				 : "");
	r->err_detail[0] = 0;
	(void)method;
	/* a page's fetch (Sec-Fetch-Mode cors or same-origin) is not offered
	 * Basic: the browser would pop up its own password dialog over the UI's
	 * token form; navigations and every other client still are */
	const char *mode = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Mode");
	bool fetch = mode && (!strcasecmp(mode, "cors") || !strcasecmp(mode, "same-origin"));
	return reply_owned_hdr(c, r, status, pd_api_error_json(status, msg), "application/json",
			       status == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL,
			       fetch ? "Bearer realm=\"profd\"" : "Bearer realm=\"profd\", Basic realm=\"profd\"");
}

int pd_server_reload_tls(struct pd_server *s, char *desc, size_t n, struct pd_err *err)
{
	if (n)
		desc[0] = 0; /* the caller logs it: without TLS, nothing */
	if (!s->cfg.tls_cert)
		return 0;
	int rc = pd_tls_load(s->cfg.tls_cert, s->cfg.tls_key, err);
	pd_tls_describe(desc, n);
	return rc;
}

int pd_server_reload_tokens(struct pd_server *s, size_t *n, struct pd_err *err)
{
	*n = 0;
	if (!s->cfg.tokens_path)
		return 0;
	struct pd_tokens *t;
	int rc = pd_tokens_load(s->cfg.tokens_path, &t, err);
	pthread_rwlock_wrlock(&s->auth_mu);
	if (!rc) {
		struct pd_tokens *old = s->tokens;
		s->tokens = t;
		t = old;
	}
	*n = pd_tokens_count(s->tokens);
	pthread_rwlock_unlock(&s->auth_mu);
	if (!rc)
		pd_tokens_free(t);
	return rc;
}

/* ---- routing ------------------------------------------------------------------------- */

/* Merges (and what merges: API v1's merge, top, series, diff) take CPU and
 * memory for as long as they run: at most cfg.max_merges at once, the
 * others get a 503 with Retry-After at once rather than a slot in a queue
 * that would hold their connection and memory. */
bool srv_merge_take(struct pd_server *s)
{
	unsigned cap = s->cfg.max_merges;
	if (!cap)
		return true;
	if (atomic_fetch_add(&s->merges, 1) >= cap) {
		atomic_fetch_sub(&s->merges, 1);
		return false;
	}
	return true;
}

void srv_merge_give(struct pd_server *s)
{
	if (s->cfg.max_merges)
		atomic_fetch_sub(&s->merges, 1);
}

enum MHD_Result srv_too_many_merges(struct MHD_Connection *c, struct req *r)
{
	char msg[160];
	snprintf(msg, sizeof msg, "%u merges are running, the limit (--max-concurrent-merges): try again",
		 r->s->cfg.max_merges);
	return srv_reply_error(c, r, 503, msg);
}

static bool api1_merges(const char *path)
{
	static const char *const heavy[] = {"merge", "top", "series", "diff", "regressions"};
	for (size_t i = 0; i < sizeof heavy / sizeof *heavy; i++) {
		size_t n = strlen(heavy[i]);
		if (!strncmp(path, heavy[i], n) && (path[n] == 0 || path[n] == '/'))
			return true;
	}
	return false;
}

/* Request checks before any route: the parameters (NUL bytes, UTF-8) and
 * the framing (one Content-Length, not with chunking; sizes). */
struct argcheck {
	char msg[300];
};

static void quote_key(const char *key, char *out, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; key[i] && o + 5 < n && i < 48; i++) {
		unsigned char ch = (unsigned char)key[i];
		o += (size_t)snprintf(out + o, n - o, ch < 0x20 || ch >= 0x7f || ch == '"' ? "\\x%02x" : "%c", ch);
	}
	out[o] = 0;
}

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				 const char *value, size_t value_size)
{
	(void)kind;
	struct argcheck *a = cls;
	char k[100];
	size_t bad;
	quote_key(key ? key : "", k, sizeof k);
	if (key && strlen(key) != key_size)
		snprintf(a->msg, sizeof a->msg, "bad request: a parameter name contains a NUL byte (%%00)");
	else if (value && strlen(value) != value_size)
		snprintf(a->msg, sizeof a->msg, "bad request: parameter \"%s\" contains a NUL byte (%%00)", k);
	else if (key && !pd_utf8_valid(key, key_size, &bad))
		snprintf(a->msg, sizeof a->msg, "bad request: a parameter name is not valid UTF-8 (byte %zu)", bad);
	else if (value && !pd_utf8_valid(value, value_size, &bad))
		snprintf(a->msg, sizeof a->msg, "bad request: parameter \"%s\" is not valid UTF-8 (byte %zu of its value)", k,
			 bad);
	else
		return MHD_YES;
	return MHD_NO;
}

struct hdrcheck {
	unsigned nlen;         /* Content-Length headers */
	unsigned nauth;        /* Authorization headers */
	const char *len;       /* the first one's value */
	bool differ, chunked;
	size_t bytes;
};

static enum MHD_Result count_hdr(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				 const char *value, size_t value_size)
{
	(void)kind;
	struct hdrcheck *h = cls;
	h->bytes += key_size + value_size + 4;
	if (key && !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		if (h->nlen++ && (!h->len || !value || strcmp(h->len, value)))
			h->differ = true;
		else if (!h->len)
			h->len = value;
	} else if (key && !strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		h->chunked = true;
	} else if (key && !strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION)) {
		h->nauth++;
	}
	return MHD_YES;
}

/* Whether Accept-Encoding allows gzip (a "gzip" entry whose q is not 0). */
static bool accepts_gzip(struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	while (h && *h) {
		while (*h == ' ' || *h == ',')
			h++;
		size_t n = strcspn(h, ",;");
		const char *e = h + n;
		while (n && h[n - 1] == ' ')
			n--;
		bool gz = (n == 4 && !strncasecmp(h, "gzip", 4)) || (n == 1 && *h == '*');
		double q = 1;
		const char *qs = *e == ';' ? strstr(e, "q=") : NULL;
		if (qs && qs < e + strcspn(e, ","))
			q = strtod(qs + 2, NULL);
		if (gz)
			return q > 0;
		h = e + strcspn(e, ",");
	}
	return false;
}

/* 308 from PREFIX[?query] to PREFIX/[?query]. */
static enum MHD_Result redirect_slash(struct MHD_Connection *c, struct req *r)
{
	r->route = PD_RT_UI;
	const char *q = strchr(r->uri, '?');
	const char *p = pd_web_prefix(r->s->cfg.web);
	struct pd_buf b = PD_BUF_INIT(0);
	if (pd_buf_appendf(&b, "%s/%s", p, q ? q : "") || pd_buf_append(&b, "", 1)) {
		pd_buf_free(&b);
		return MHD_NO;
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (resp)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, (const char *)b.ptr);
	pd_buf_free(&b);
	set_status(r, 308, 0);
	return queue(c, r, 308, resp);
}

/* If-None-Match lists the ETag (or is "*"). */
static bool etag_matches(const char *inm, const char *etag)
{
	size_t n = strlen(etag);
	for (const char *p = inm; p && *p; p++) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		if (!strncmp(p, "W/", 2))
			p += 2;
		if (!strncmp(p, etag, n) && (p[n] == 0 || p[n] == ',' || p[n] == ' '))
			return true;
		p = strchr(p, ',');
		if (!p)
			break;
	}
	return false;
}

/* GET PREFIX/ (index.html) and PREFIX/ui/FILE: the UI's embedded files,
 * gzip'd when the client takes it, revalidated by ETag (304). */
static enum MHD_Result h_ui(struct MHD_Connection *c, struct req *r, const char *rel)
{
	struct pd_web_file f;
	struct pd_err err = {0};
	int rc = pd_web_get(r->s->cfg.web, rel, &f, &err);
	if (rc)
		return srv_reply_err(c, r, rc, &err);
	const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	int status = inm && etag_matches(inm, f.etag) ? 304 : 200;
	bool gz = status == 200 && f.gz && accepts_gzip(c);
	size_t n = status == 304 ? 0 : gz ? f.gzlen : f.len;
	struct MHD_Response *resp;
	if (status == 200 && f.owned) {
		resp = MHD_create_response_from_buffer(n, (void *)f.data, MHD_RESPMEM_MUST_FREE);
		if (!resp)
			free((void *)f.data);
	} else {
		if (f.owned)
			free((void *)f.data);
		resp = MHD_create_response_from_buffer(n, status == 304 ? (void *)"" : (void *)(gz ? f.gz : f.data),
						       MHD_RESPMEM_PERSISTENT);
	}
	if (!resp)
		return MHD_NO;
	if (status == 200) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, f.ctype);
		if (gz)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, f.etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache"); /* revalidate: a new binary, new files */
	if (f.gz || f.owned)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	MHD_add_response_header(resp, "Content-Security-Policy", PD_WEB_CSP);
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	set_status(r, status, n);
	return queue(c, r, status, resp);
}

static enum MHD_Result dispatch(struct MHD_Connection *c, struct req *r, const char *url, const char *method)
{
	/* as long as a URI may be (on_request's 414): GET of ~100 ids joined
	 * by '+' is over 2 KiB, and was a 404 "nothing found" */
	char path[PD_SERVE_MAX_URI + 1];
	size_t n = strlen(url);
	if (n >= sizeof path) {
		char msg[120];
		snprintf(msg, sizeof msg, "request URI is over the limit of %u bytes", PD_SERVE_MAX_URI);
		return srv_reply_error(c, r, 414, msg);
	}
	memcpy(path, url, n + 1);
	while (n > 1 && path[n - 1] == '/') /* trailing slashes are ignored, as in profefe */
		path[--n] = 0;
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	bool post = !strcmp(method, "POST");

	struct argcheck ac = {""};
	if (r->nul_path)
		snprintf(ac.msg, sizeof ac.msg, "bad request: the path contains a NUL byte (%%00)");
	else
		MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, check_arg, &ac);
	if (ac.msg[0]) {
		if (post)
			atomic_fetch_add(&r->s->m.rejected[PD_REJ_BAD_REQUEST], 1);
		return srv_reply_error(c, r, 400, ac.msg);
	}

	enum MHD_Result res;
	if (pd_api0_dispatch(c, r, path, method, &res))
		return res;
	if (!strncmp(path, "/api/1/", 7)) {
		r->route = pd_route_api1(path + 7);
		if (!api1_merges(path + 7))
			return h_api1(c, r, path + 7, method);
		if (!srv_merge_take(r->s))
			return srv_too_many_merges(c, r);
		enum MHD_Result ok = h_api1(c, r, path + 7, method);
		srv_merge_give(r->s);
		return ok;
	}
	if (!strcmp(path, "/healthz") || !strcmp(path, "/readyz")) {
		r->route = PD_RT_HEALTH;
		if (!get)
			return srv_method_not_allowed(c, r, "GET, HEAD");
		const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
		if (path[1] == 'r' && fmt && !strcmp(fmt, "json"))
			return h_ready_json(c, r);
		if (path[1] == 'r' && !atomic_load(&r->s->ready))
			return reply_text(c, r, 503, "not ready\n");
		if (path[1] == 'r' && r->s->st) { /* the store's detail: cannot write (disk full), damaged days */
			struct pd_store_health h;
			pd_store_health(r->s->st, &h);
			if (h.cannot_write || h.nquarantined) {
				struct pd_buf b = PD_BUF_INIT(0);
				int bad = h.cannot_write ? pd_buf_appendf(&b, "not ready: cannot write: %s\n", h.write_error)
							 : pd_buf_appendf(&b, "ok\n");
				for (size_t i = 0; !bad && i < h.nquarantined && i < PD_STORE_MAX_QUARANTINED; i++)
					bad = pd_buf_appendf(&b, "quarantined: %s: %s\n", h.quarantined[i].file,
							     h.quarantined[i].reason);
				if (!bad && h.nquarantined > PD_STORE_MAX_QUARANTINED)
					bad = pd_buf_appendf(&b, "quarantined: %zu more\n", h.nquarantined - PD_STORE_MAX_QUARANTINED);
				char *t = bad || pd_buf_append(&b, "", 1) ? NULL : (char *)b.ptr;
				if (!t)
					pd_buf_free(&b);
				return t ? srv_reply_owned(c, r, h.cannot_write ? 503 : 200, t, "text/plain; charset=utf-8")
					 : srv_reply_error(c, r, 500, "out of memory");
			}
		}
		return reply_text(c, r, 200, "ok\n");
	}
	if (!strcmp(path, "/metrics")) {
		r->route = PD_RT_METRICS;
		return get ? h_metrics(c, r) : srv_method_not_allowed(c, r, "GET, HEAD");
	}
	if (!strcmp(path, "/metrics/profiles") && r->s->cfg.profmetrics) {
		r->route = PD_RT_METRICS_PROFILES;
		return get ? h_metrics_profiles(c, r) : srv_method_not_allowed(c, r, "GET, HEAD");
	}
	if (r->s->cfg.web && ui_path(path)) {
		r->route = PD_RT_UI;
		if (!get)
			return srv_method_not_allowed(c, r, "GET, HEAD");
		return h_ui(c, r, !strncmp(path, "/ui/", 4) ? path + 4 : "index.html");
	}
	r->route = PD_RT_OTHER;
	return srv_reply_error(c, r, 404, "nothing found");
}

static void make_rid(struct MHD_Connection *c, struct req *r)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
	size_t n = 0;
	if (h) /* keep a client's id if it is printable and short */
		while (h[n] && n < sizeof r->rid - 1 && h[n] > 0x20 && h[n] < 0x7f && h[n] != '"')
			n++;
	if (h && n > 0 && !h[n]) {
		memcpy(r->rid, h, n + 1);
		return;
	}
	/* 64 random bits: a per-thread splitmix64 seeded by getrandom once (a
	 * request id needs to be unique, not secret; it was a getrandom and
	 * eight snprintf per request) */
	static _Thread_local uint64_t st;
	static _Thread_local bool seeded;
	if (!seeded) {
		if (getrandom(&st, sizeof st, GRND_NONBLOCK) != (ssize_t)sizeof st)
			st = (uint64_t)pd_wall_ns() ^ (uint64_t)(uintptr_t)&st;
		seeded = true;
	}
	uint64_t x = st += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++)
		r->rid[i] = hex[(x >> (60 - 4 * i)) & 15];
	r->rid[16] = 0;
}

/* ---- offload threads (srv_offload) ---- */

/* Work goes to the thread that went idle last: its malloc arena and its
 * stack are warm (glibc gives each thread an arena; a merge on a thread
 * idle since the start faulted in a fresh one: ~1 ms of a 12 ms merge). */
struct off_thread {
	pthread_t th;
	pthread_cond_t cv;
	struct off_thread *next_idle;
	struct req *job;
	struct pd_server *s;
};

static void *offload_main(void *arg)
{
	struct off_thread *t = arg;
	struct pd_server *s = t->s;
	pthread_mutex_lock(&s->off_mu);
	for (;;) {
		struct req *r = t->job;
		t->job = NULL;
		if (!r && (r = s->off_head)) {
			s->off_head = r->off_next;
			if (!s->off_head)
				s->off_tail = NULL;
			atomic_fetch_sub(&s->m.offload_waiting, 1);
		}
		if (!r) {
			if (s->off_stop) /* nothing is left queued */
				break;
			t->next_idle = s->off_idle;
			s->off_idle = t;
			while (!t->job && !s->off_stop)
				pthread_cond_wait(&t->cv, &s->off_mu);
			continue;
		}
		pthread_mutex_unlock(&s->off_mu);
		atomic_fetch_add(&s->m.offload_busy, 1);
		r->off_work(r);
		atomic_fetch_sub(&s->m.offload_busy, 1);
		/* its worker calls on_request again, which calls r->off_finish
		 * (the resume's lock orders what the work wrote before it) */
		MHD_resume_connection(r->off_conn);
		pthread_mutex_lock(&s->off_mu);
	}
	pthread_mutex_unlock(&s->off_mu);
	return NULL;
}

static int offload_start(struct pd_server *s, size_t n)
{
	pthread_mutex_init(&s->off_mu, NULL);
	if (!(s->off_th = calloc(n, sizeof *s->off_th)))
		return PD_ENOMEM;
	for (; s->off_n < n; s->off_n++) {
		struct off_thread *t = &s->off_th[s->off_n];
		t->s = s;
		pthread_cond_init(&t->cv, NULL);
		if (pthread_create(&t->th, NULL, offload_main, t)) {
			pthread_cond_destroy(&t->cv);
			break;
		}
	}
	s->m.offload_threads = s->off_n;
	return s->off_n ? 0 : PD_ENOMEM;
}

/* Every queued work done (their connections resumed), the threads joined.
 * Workers still running may offload no more: they do the work themselves. */
static void offload_stop(struct pd_server *s)
{
	pthread_mutex_lock(&s->off_mu);
	s->off_stop = true;
	for (size_t i = 0; i < s->off_n; i++)
		pthread_cond_signal(&s->off_th[i].cv);
	pthread_mutex_unlock(&s->off_mu);
	for (size_t i = 0; i < s->off_n; i++)
		pthread_join(s->off_th[i].th, NULL);
}

/* After offload_stop, once no worker runs (MHD_stop_daemon). */
static void offload_free(struct pd_server *s)
{
	for (size_t i = 0; i < s->off_n; i++)
		pthread_cond_destroy(&s->off_th[i].cv);
	free(s->off_th);
	s->off_th = NULL;
	s->off_idle = NULL;
	s->off_n = 0;
	pthread_mutex_destroy(&s->off_mu);
}

int srv_offload(struct MHD_Connection *c, struct req *r, void (*work)(struct req *r),
		enum MHD_Result (*finish)(struct MHD_Connection *c, struct req *r), void *ctx)
{
	struct pd_server *s = r->s;
	if (!s->off_n)
		return PD_EBUSY;
	r->off_work = work;
	r->off_finish = finish;
	r->off_conn = c;
	r->off_ctx = ctx;
	r->off_next = NULL;
	pthread_mutex_lock(&s->off_mu);
	if (s->off_stop) { /* stopping: the threads are gone or going */
		pthread_mutex_unlock(&s->off_mu);
		r->off_finish = NULL;
		return PD_EBUSY;
	}
	MHD_suspend_connection(c);
	struct off_thread *t = s->off_idle;
	if (t) {
		s->off_idle = t->next_idle;
		t->job = r;
	} else {
		if (s->off_tail)
			s->off_tail->off_next = r;
		else
			s->off_head = r;
		s->off_tail = r;
		atomic_fetch_add(&s->m.offload_waiting, 1);
	}
	pthread_mutex_unlock(&s->off_mu);
	/* after the unlock: signalled under it, the thread woke only to block
	 * on off_mu until this unlock woke it again (t and its condition live
	 * until offload_free, after every worker has stopped) */
	if (t)
		pthread_cond_signal(&t->cv);
	return 0;
}

/* Reads run on the offload threads as uploads do: a list, merge or query
 * held by the store (ClickHouse not answering: its timeout) held every
 * other connection of its libmicrohttpd worker, /healthz and /metrics
 * included. The whole dispatch runs there while the connection is
 * suspended; queue() keeps the answer, which the worker queues once the
 * connection is resumed. /healthz, /readyz, /metrics and the UI's files
 * stay on the worker: they must answer when every offload thread is held
 * (what /readyz and /metrics ask ClickHouse is waited for 0.5 s at most:
 * clickhouse.c, struct bg). */
static bool read_offloads(const char *url, const char *method)
{
	if (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "DELETE"))
		return false; /* an upload offloads its own store work (api0.c) */
	return !strncmp(url, "/api/", 5) || path_is(url, "/metrics/profiles");
}

static void read_work(struct req *r)
{
	r->off_defer = true;
	r->def_res = dispatch(r->off_conn, r, r->off_url, r->off_method);
	r->off_defer = false;
}

static enum MHD_Result read_finish(struct MHD_Connection *c, struct req *r)
{
	struct MHD_Response *resp = r->def_resp;
	r->def_resp = NULL;
	if (!resp) /* MHD_NO: the connection is closed; MHD_YES without an answer cannot be */
		return r->def_res == MHD_NO ? MHD_NO : srv_reply_error(c, r, 500, "internal error: no answer");
	enum MHD_Result ok = MHD_queue_response(c, r->def_status, resp);
	MHD_destroy_response(resp);
	return r->def_res == MHD_NO ? MHD_NO : ok;
}

/* A refusal made from the headers alone (URI, parameters, headers over
 * their caps; a client certificate or an origin refused): now, or, to a
 * client already sending a body of at most AUTH_DRAIN_MAX (sending), once
 * that body is read and dropped, so that the client reads the answer
 * rather than a reset. */
static enum MHD_Result refuse_early(struct MHD_Connection *c, struct req *r, bool sending, int status,
				    const char *msg)
{
	r->bad_framing = true;
	if (sending && (r->late_msg = strdup(msg))) {
		r->late_st = status;
		return MHD_YES;
	}
	return srv_reply_error(c, r, status, msg);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct pd_server *s = cls;
	struct req *r = *con_cls;
	if (!r) /* the URI log callback failed to allocate */
		return MHD_NO;
	bool bare;
	url = unprefixed(s, origin_form(url), &bare);
	if (!r->started) {
		r->started = true;
		snprintf(r->method, sizeof r->method, "%s", method);
		make_rid(c, r);
		/* A refusal before the body goes to a client that waits for 100
		 * Continue: it then sends nothing. One already sending has its body
		 * read (and dropped) first, up to AUTH_DRAIN_MAX (refuse_early):
		 * answered earlier, the unread rest of the body resets the
		 * connection under the answer, which a Go client reports instead of
		 * it ("broken pipe", measured; the profefe agent retries such a
		 * transport error, where it drops a 4xx). */
		const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
		bool waits = expect && !strcasecmp(expect, "100-continue");
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		char *end = NULL;
		errno = 0;
		unsigned long long clen = cl ? strtoull(cl, &end, 10) : 0;
		bool cl_bad = cl && (errno || *end); /* not a plain number */
		const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
		bool sending = !waits && (te || (cl && !cl_bad && clen > 0 && clen <= AUTH_DRAIN_MAX));
		/* framing a proxy in front could read differently (request smuggling),
		 * and sizes answered as JSON rather than by the library */
		struct hdrcheck hc = {0};
		MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_hdr, &hc);
		const char *why = hc.differ	       ? "bad request: conflicting Content-Length headers"
				  : hc.nlen > 1	       ? "bad request: more than one Content-Length header"
				  : hc.nlen && hc.chunked ? "bad request: both Content-Length and Transfer-Encoding"
				  /* which one a proxy in front checked is anyone's guess: we would take the first */
				  : hc.nauth > 1 && s->cfg.tokens_path ? "bad request: more than one Authorization header"
							  : NULL;
		if (why) {
			r->bad_framing = true;
			r->route = PD_RT_OTHER;
			return srv_reply_error(c, r, 400, why);
		}
		if (r->uri_len > PD_SERVE_MAX_URI) {
			char msg[120];
			snprintf(msg, sizeof msg, "request URI is over the limit of %u bytes", PD_SERVE_MAX_URI);
			return refuse_early(c, r, sending, 414, msg);
		}
		if (r->nparams) {
			char msg[160];
			snprintf(msg, sizeof msg, "bad request: %zu query parameters: over the limit of %u", r->nparams,
				 PD_SERVE_MAX_PARAMS);
			return refuse_early(c, r, sending, 413, msg);
		}
		if (hc.bytes > PD_SERVE_MAX_HEADERS) {
			char msg[120];
			snprintf(msg, sizeof msg, "request headers are over the limit of %u bytes", PD_SERVE_MAX_HEADERS);
			return refuse_early(c, r, sending, 431, msg);
		}
		/* --tls-client-ca: a client certificate it signed, or nothing */
		if (s->client_ca) {
			const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
			char cwhy[300];
			if (!ci || !ci->tls_session || pd_tls_verify_client(ci->tls_session, cwhy, sizeof cwhy)) {
				if (!ci || !ci->tls_session)
					snprintf(cwhy, sizeof cwhy, "no TLS session");
				char msg[340];
				snprintf(msg, sizeof msg, "forbidden: %s", cwhy);
				return refuse_early(c, r, sending, 403, msg);
			}
		}
		if (bare) /* PREFIX -> PREFIX/, so that the page's relative URLs resolve under it */
			return redirect_slash(c, r);
		/* a browser page of another origin may not change anything here
		 * (a cross-origin form or fetch POST needs no preflight) */
		const char *why_origin = cross_origin(c, r, method);
		if (why_origin)
			return refuse_early(c, r, sending, strncmp(why_origin, "unsupported", 11) ? 403 : 415, why_origin);
		/* credentials before the body is read: a client without them
		 * uploads nothing if it waits for 100 Continue, and at most
		 * AUTH_DRAIN_MAX if it is already sending (a bigger body is
		 * answered at once: the client may see the reset, not the 401) */
		int st = authorize(c, r, url, method);
		if (st) {
			r->bad_framing = true;
			if (!sending)
				return reply_auth(c, r, st, method);
			r->late_st = st; /* late_msg NULL: reply_auth's answer */
			return MHD_YES; /* dropped as it comes, then the answer */
		}
		if (cl && !strcmp(method, "POST")) {
			if (cl_bad || clen > s->cfg.max_body) {
				r->too_large = true;
				if (waits || cl_bad || clen > DISCARD_MAX) /* no 100 Continue is sent */
					return dispatch(c, r, url, method);
				return MHD_YES; /* dropped as it comes, then the 413 */
			}
		}
		/* an upload's parameters before its body (a bad one: nothing is
		 * uploaded for a 400), to a client that waits */
		if (!strcmp(method, "POST") && waits && path_is(url, "/api/0/profiles")) {
			r->early = true;
			enum MHD_Result res = dispatch(c, r, url, method);
			r->early = false;
			if (r->status)
				r->bad_framing = true; /* answered: drop the body that may still come */
			return res;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (r->too_large || r->bad_framing) {
			/* a chunked body over the cap: read and drop the rest so the
			 * client gets its 413 (MHD cannot answer mid-upload), but not
			 * forever */
			r->discarded += n;
			return r->discarded > (r->late_st ? AUTH_DRAIN_MAX : DISCARD_MAX) ? MHD_NO : MHD_YES;
		}
		if (r->busy) {
			r->discarded += n;
			return r->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
		}
		size_t cap0 = r->body.cap;
		if (pd_buf_append(&r->body, upload, n)) {
			r->too_large = true;
			r->discarded = r->body.len + n;
			pd_buf_free(&r->body);
		} else if (r->body.cap > cap0 && srv_req_reserve(r, r->body.cap - cap0)) {
			/* over the memory budget: drop the body, answer 503 */
			r->busy = true;
			r->discarded = r->body.len;
			pd_buf_free(&r->body);
		}
		return MHD_YES;
	}
	if (r->off_finish) { /* resumed: its offloaded work is done */
		enum MHD_Result (*finish)(struct MHD_Connection *, struct req *) = r->off_finish;
		r->off_finish = NULL;
		return finish(c, r);
	}
	if (r->status) /* already answered (early 413, framing) */
		return MHD_YES;
	if (r->late_st) /* a refusal from the headers, its body drained */
		return r->late_msg ? srv_reply_error(c, r, r->late_st, r->late_msg) : reply_auth(c, r, r->late_st, method);
	if (read_offloads(url, method)) {
		r->off_url = url;
		r->off_method = method;
		if (srv_offload(c, r, read_work, read_finish, NULL) == 0)
			return MHD_YES;
	}
	return dispatch(c, r, url, method);
}

/* A connection's slot for the request on_uri made and on_done has not
 * finished: libmicrohttpd refuses some requests after the URI callback
 * (headers more than its per-connection memory holds) and never calls
 * the completion callback for them, so on_conn finishes them when the
 * connection closes. Each was a struct req and a count in
 * in_flight for ever: memory a client could grow at will, a gauge that only
 * rose and every shutdown waiting its whole --shutdown-timeout. */
struct conn {
	struct req *pending;
};

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);

static void on_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = calloc(1, sizeof(struct conn)); /* NULL: requests go untracked */
		return;
	}
	struct conn *k = *socket_context;
	*socket_context = NULL;
	if (k && k->pending) {
		void *cc = k->pending;
		if (!k->pending->started && !k->pending->status)
			k->pending->status = 431; /* what libmicrohttpd tried to answer */
		on_done(cls, c, &cc, MHD_REQUEST_TERMINATED_WITH_ERROR);
	}
	free(k);
}

/* First thing MHD calls for a request: the raw URI (path and query, as
 * sent); what we return becomes the request's context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct pd_server *s = cls;
	struct req *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context) { /* (a refused request's connection closes: no other is pending) */
		r->conn = ci->socket_context;
		r->conn->pending = r;
	}
	r->s = s;
	r->t0_ns = pd_wall_ns();
	r->route = PD_RT_OTHER;
	r->body.max = s->cfg.max_body;
	r->uri = strndup(uri ? uri : "", 2048);
	r->uri_len = uri ? strlen(uri) : 0;
	/* MHD hands the path over decoded and NUL-terminated: a %00 would end it
	 * early for every comparison (/api/0/services%00.png would be
	 * /api/0/services, whatever a proxy in front made of it); dispatch refuses it */
	const char *nul = uri ? strstr(uri, "%00") : NULL;
	r->nul_path = nul && nul < uri + strcspn(uri, "?");
	/* libmicrohttpd keeps every query parameter in the connection's 64 KiB,
	 * parsed from the request line after this callback: past ~950 it ran
	 * out before on_request, could not even write its own error and left
	 * the client without an answer. Over the cap the parameters are not
	 * wanted (on_request answers 413 from the count), so they are made one:
	 * every '&' of the query, in libmicrohttpd's own (writable) line buffer,
	 * becomes '_' before it splits them. The log keeps the URI as sent (r->uri) */
	char *qs = uri ? strchr(uri, '?') : NULL;
	size_t np = qs ? 1 : 0;
	for (const char *p = qs; p && *p; p++)
		np += *p == '&';
	if (np > PD_SERVE_MAX_PARAMS) {
		r->nparams = np;
		for (char *p = qs; *p; p++)
			if (*p == '&')
				*p = '_';
	}
	atomic_fetch_add(&s->m.in_flight, 1);
	return r;
}

/* A log value, quoted: escapes what would break a line or the quote. */
static int buf_quoted(struct pd_buf *b, const char *v)
{
	int bad = pd_buf_append(b, "\"", 1);
	for (; v && *v && !bad; v++) {
		unsigned char ch = (unsigned char)*v;
		if (ch == '"' || ch == '\\')
			bad = pd_buf_appendf(b, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			bad = pd_buf_appendf(b, "\\x%02x", ch);
		else
			bad = pd_buf_append(b, v, 1);
	}
	return bad || pd_buf_append(b, "\"", 1);
}


static void log_request(struct pd_server *s, struct MHD_Connection *c, struct req *r,
			enum MHD_RequestTerminationCode toe)
{
	char ip[INET6_ADDRSTRLEN] = "-";
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr) {
		const struct sockaddr *sa = ci->client_addr;
		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ip, sizeof ip);
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, ip, sizeof ip);
	}
	time_t sec = (time_t)(r->t0_ns / 1000000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	char ts[40];
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	int ms = (int)(r->t0_ns / 1000000 % 1000);
	FILE *f = s->cfg.log, *ef = s->cfg.errlog ? s->cfg.errlog : f;
	struct pd_buf b = PD_BUF_INIT(0);
	pthread_mutex_lock(&s->log_mu);
	if (f) { /* one line per request (pd_log_emit: logfmt or JSON) */
		char method[4 * sizeof r->method + 3]; /* the client's: any token, quoted if it is not a word */
		int bad = pd_buf_appendf(&b, "ts=%s.%03dZ rid=%s method=%s uri=", ts, ms, r->rid[0] ? r->rid : "-",
					 r->method[0] ? pd_log_val(method, sizeof method, r->method) : "-") ||
			  buf_quoted(&b, r->uri) ||
			  pd_buf_appendf(&b, " code=%d bytes=%llu rtime=%.3fms ip=%s", r->status,
					 (unsigned long long)r->bytes_out, (double)(pd_wall_ns() - r->t0_ns) / 1e6, ip) ||
			  (r->who[0] && (pd_buf_appendf(&b, " token=") || buf_quoted(&b, r->who))) ||
			  (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && pd_buf_appendf(&b, " aborted=true")) ||
			  pd_buf_append(&b, "", 1);
		if (!bad)
			pd_log_emit(f, (const char *)b.ptr);
		b.len = 0;
	}
	if (r->err_detail[0] && ef) { /* errors are logged with -q too */
		if (!pd_buf_appendf(&b, "ts=%s.%03dZ rid=%s level=error code=%d msg=", ts, ms, r->rid, r->status) &&
		    !buf_quoted(&b, r->err_detail) && !pd_buf_append(&b, "", 1))
			pd_log_emit(ef, (const char *)b.ptr);
	}
	pd_buf_free(&b);
	pthread_mutex_unlock(&s->log_mu);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct pd_server *s = cls;
	struct req *r = *con_cls;
	if (!r)
		return;
	*con_cls = NULL;
	if (r->conn && r->conn->pending == r)
		r->conn->pending = NULL;
	if (s->cfg.log || (r->err_detail[0] && s->cfg.errlog))
		log_request(s, c, r, toe);
	pd_metrics_request(&s->m, r->route, r->status ? r->status : 500, pd_wall_ns() - r->t0_ns);
	atomic_fetch_sub(&s->m.in_flight, 1);
	/* offloaded work done, its connection closed (shutdown) before the
	 * worker answered: what the answer would have used */
	if (r->off_finish && r->off_drop)
		r->off_drop(r);
	if (r->def_resp)
		MHD_destroy_response(r->def_resp);
	free(r->late_msg);
	pd_buf_free(&r->body);
	mem_give(s, &r->reserved);
	/* glibc keeps freed memory in its arenas: after a big request, give it
	 * back so one spike does not stay in the RSS */
	if (r->peak >= (16u << 20))
		malloc_trim(0);
	free(r->uri);
	free(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct pd_server *s = cls;
	FILE *f = s->cfg.errlog ? s->cfg.errlog : s->cfg.log;
	if (!f)
		return;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = 0;
	pd_log_line(f, "warn", "http", msg); /* with its ts=, as every line */
}

int pd_http_parse_addr(const char *addr, struct sockaddr_storage *ss, bool *any, struct pd_err *err)
{
	char host[256] = "";
	const char *port;
	*any = false;
	if (addr[0] == '[') {
		const char *e = strchr(addr, ']');
		if (!e || e[1] != ':' || (size_t)(e - addr - 1) >= sizeof host)
			return pd_errf(err, PD_EUSAGE, "bad address \"%s\": want [v6addr]:port", addr);
		memcpy(host, addr + 1, (size_t)(e - addr - 1));
		port = e + 2;
	} else {
		const char *colon = strrchr(addr, ':');
		if (colon) {
			if ((size_t)(colon - addr) >= sizeof host)
				return pd_errf(err, PD_EUSAGE, "bad address \"%s\": host too long", addr);
			memcpy(host, addr, (size_t)(colon - addr));
			host[colon - addr] = 0;
			port = colon + 1;
		} else {
			port = addr;
		}
	}
	char *end;
	long p = strtol(port, &end, 10);
	if (!*port || *end || p < 0 || p > 65535)
		return pd_errf(err, PD_EUSAGE, "bad address \"%s\": port must be 0..65535", addr);
	memset(ss, 0, sizeof *ss);
	if (!host[0]) {
		*any = true;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons((uint16_t)p);
		return 0;
	}
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g || !res)
		return pd_errf(err, PD_EUSAGE, "bad address \"%s\": %s", addr, gai_strerror(g));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int pd_server_check_addr(const char *addr, struct pd_err *err)
{
	struct sockaddr_storage ss;
	bool any;
	return pd_http_parse_addr(addr, &ss, &any, err);
}

int pd_server_start(const struct pd_server_config *cfg, struct pd_store *st, struct pd_server **out,
		    struct pd_err *err)
{
	*out = NULL;
	struct sockaddr_storage ss;
	bool any;
	int rc = pd_http_parse_addr(cfg->addr, &ss, &any, err);
	if (rc)
		return rc;
	struct pd_server *s = calloc(1, sizeof *s);
	if (!s)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->st = st;
	if (cfg->tokens_path && (rc = pd_tokens_load(cfg->tokens_path, &s->tokens, err))) {
		free(s);
		return rc;
	}
	if (cfg->tls_cert && (rc = pd_tls_load(cfg->tls_cert, cfg->tls_key, err))) {
		pd_tokens_free(s->tokens);
		free(s);
		return rc;
	}
	if (cfg->tls_client_ca) {
		struct pd_buf ca = PD_BUF_INIT(4u << 20);
		if ((rc = pd_buf_read_file(&ca, cfg->tls_client_ca, err)) || (rc = pd_buf_append(&ca, "", 1))) {
			pd_err_prefix(err, "--tls-client-ca");
			pd_buf_free(&ca);
			pd_tls_free_all();
			pd_tokens_free(s->tokens);
			free(s);
			return rc;
		}
		s->client_ca = (char *)ca.ptr;
	}
	pd_metrics_init(&s->m);
	s->m.version = s->cfg.version;
	s->m.commit = s->cfg.commit;
	s->m.build_time = s->cfg.build_time;
	pthread_mutex_init(&s->log_mu, NULL);
	pthread_rwlock_init(&s->auth_mu, NULL);
	/* event-driven: one epoll set served by a pool of workers, so idle or
	 * slow clients cost a socket each, not a thread (a thread per connection
	 * let 256 idle sockets take the collector offline) */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	if (ss.ss_family == AF_INET6)
		flags |= any ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
	uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL}};
	if (cfg->tls_cert) {
		flags |= MHD_USE_TLS;
		int k = 0;
		tls[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)pd_tls_retrieve};
		tls[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)PD_TLS_PRIORITIES};
		if (s->client_ca)
			tls[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->client_ca};
		tls[k] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	}
	/* uploads' store work runs as many at once as before (one per worker),
	 * and no fewer than PD_SERVE_OFFLOAD_THREADS: with --threads 1, uploads
	 * that ClickHouse holds each wait on the store, not behind each other */
	unsigned workers = cfg->threads ? cfg->threads : PD_SERVE_THREADS;
	bool off = offload_start(s, workers > PD_SERVE_OFFLOAD_THREADS ? workers : PD_SERVE_OFFLOAD_THREADS) == 0;
	s->d = !off ? NULL : MHD_start_daemon(flags, port, NULL, NULL, on_request, s,
				MHD_OPTION_ARRAY, tls,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
				MHD_OPTION_NOTIFY_CONNECTION, on_conn, s,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_per_ip,
				MHD_OPTION_THREAD_POOL_SIZE, workers,
				/* a URL with an 8 KiB parameter must reach us (our 413), not MHD's 414;
				 * MHD zeroes the pool between requests, so no bigger than needed */
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10),
				MHD_OPTION_END);
	if (!s->d) {
		int e = off ? errno : 0;
		offload_stop(s);
		offload_free(s);
		pthread_mutex_destroy(&s->log_mu);
		pthread_rwlock_destroy(&s->auth_mu);
		pd_tokens_free(s->tokens);
		pd_tls_free_all();
		free(s->client_ca);
		free(s);
		if (!off)
			return pd_errf(err, PD_ENOMEM, "cannot start the offload threads");
		return pd_errf(err, PD_EIO, "cannot listen on %s: %s", cfg->addr,
			       e ? strerror(e) : "libmicrohttpd refused to start");
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : port;
	*out = s;
	return 0;
}

unsigned pd_server_port(const struct pd_server *s) { return s->port; }
void pd_server_set_ready(struct pd_server *s, bool ready) { atomic_store(&s->ready, ready); }
struct pd_metrics *pd_server_metrics(struct pd_server *s) { return &s->m; }

unsigned pd_server_stop(struct pd_server *s, unsigned timeout_s)
{
	if (!s)
		return 0;
	atomic_store(&s->ready, false);
	/* stop accepting; connections already open keep being served */
	MHD_socket fd = MHD_quiesce_daemon(s->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	int64_t deadline = pd_wall_ns() + (int64_t)timeout_s * 1000000000;
	while (atomic_load(&s->m.in_flight) > 0 && pd_wall_ns() < deadline) {
		struct timespec ts = {0, 20 * 1000000};
		nanosleep(&ts, NULL);
	}
	unsigned left = (unsigned)atomic_load(&s->m.in_flight);
	/* the offloaded work still queued or running is done (as the daemon's
	 * stop waits for a handler that runs), its connection resumed, before
	 * the daemon frees the connections */
	offload_stop(s);
	MHD_stop_daemon(s->d);
	offload_free(s);
	pthread_mutex_destroy(&s->log_mu);
	pthread_rwlock_destroy(&s->auth_mu);
	pd_tokens_free(s->tokens);
	if (s->cfg.tls_cert)
		pd_tls_free_all();
	free(s->client_ca);
	free(s);
	return left;
}
