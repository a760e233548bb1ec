/*
 * collector.h — a small blocking client of a collector's HTTP API v0 (profd
 * serve, or profefe), for the command-line tools (profd get, merge, load,
 * top) and anything else that talks to a collector.
 *
 * One libcurl easy handle per client, one request at a time, keep-alive
 * between requests. Every answer body is capped. Errors are one line a user
 * can act on: a request that got no answer is PD_EIO naming the collector
 * and the cause ("cannot reach the collector at http://localhost:10100
 * (connection refused)") with resp->fail saying which kind, so that a tool
 * can add its own hint; an answer with any HTTP status is success here, and
 * pd_client_error() gives the server's JSON error message for a non-2xx.
 * Query strings are built as profefe's agent builds them (Go's
 * QueryEscape; label keys and values escaped twice), so profefe's collector
 * reads them as profd does.
 */
#ifndef PD_REMOTE_COLLECTOR_H
#define PD_REMOTE_COLLECTOR_H

#include <jansson.h>

#include "../store/store.h" /* struct pd_kv */
#include "../util/util.h"

#define PD_CLIENT_DEFAULT_COLLECTOR "http://localhost:10100"
#define PD_CLIENT_MAX_JSON   (64u << 20) /* a JSON answer (lists of metadata) */
#define PD_CLIENT_MAX_PPROF  (1u << 30)  /* a merged profile */

/*
 * The collector's base URL: flag if set, else env (the value of
 * $PROFD_COLLECTOR, may be NULL), else PD_CLIENT_DEFAULT_COLLECTOR.
 * "host:port" gets "http://"; trailing '/' are dropped; a path is kept (a
 * collector behind a proxy prefix). Only http and https; no query, no
 * white space. *out is malloc'd (caller frees). PD_EUSAGE with the reason.
 */
int pd_client_resolve_url(const char *flag, const char *env, char **out, struct pd_err *err) PD_WUR;

struct pd_client;
/* timeout_ns: the whole request (connect is capped at 10 s of it);
 * user_agent e.g. "profd/0.1.0". */
int pd_client_new(const char *base, int64_t timeout_ns, const char *user_agent, struct pd_client **out,
		  struct pd_err *err) PD_WUR;
void pd_client_free(struct pd_client *c);
/* HTTPS: verify the collector against the PEM CA file cacert (NULL: the
 * system's CAs); insecure = verify nothing (only when a user asks). */
void pd_client_set_tls(struct pd_client *c, const char *cacert, bool insecure);
/* Send "Authorization: Bearer TOKEN" with every request (NULL: none). */
int pd_client_set_token(struct pd_client *c, const char *token, struct pd_err *err) PD_WUR;
const char *pd_client_base(const struct pd_client *c);

/* Why a request got no HTTP answer. */
enum pd_client_fail {
	PD_CLIENT_OK = 0,
	PD_CLIENT_CONNECT,   /* refused, unreachable, unknown host */
	PD_CLIENT_TIMEOUT,   /* no complete answer within the timeout */
	PD_CLIENT_NETWORK,   /* any other transport error (reset, TLS, ...) */
	PD_CLIENT_TOO_LARGE, /* the answer was over max_body */
};

struct pd_client_resp {
	long status;      /* HTTP status; 0 when there was no answer */
	struct pd_buf body;
	bool json;        /* Content-Type application/json */
	bool text;        /* Content-Type text/plain */
	int fail;         /* enum pd_client_fail */
};

/*
 * GET base + path_query (starts with '/', already escaped), keeping up to
 * max_body bytes of the answer. 0 when an HTTP answer came, whatever its
 * status; PD_EIO (resp->fail CONNECT, TIMEOUT, NETWORK) or PD_ELIMIT
 * (TOO_LARGE) when not. resp is reset first; free it with
 * pd_client_resp_free.
 */
int pd_client_get(struct pd_client *c, const char *path_query, size_t max_body, struct pd_client_resp *resp,
		  struct pd_err *err) PD_WUR;
/* POST body (application/octet-stream) to base + path_query. */
int pd_client_post(struct pd_client *c, const char *path_query, const void *body, size_t len, size_t max_body,
		   struct pd_client_resp *resp, struct pd_err *err) PD_WUR;
void pd_client_resp_free(struct pd_client_resp *r);

/* The "body" of a JSON envelope {"code":..,"body":..} (new reference;
 * NULL body = JSON null). PD_EINVAL naming what is wrong otherwise. */
int pd_client_json_body(const struct pd_client_resp *r, json_t **body, struct pd_err *err) PD_WUR;
/* For a terminal: every string of v (object keys too) that holds a
 * control character (C0 with newline and tab, DEL, C1) gets it written as
 * \n, \t, \xHH or \uHHHH. A function name or label value comes from
 * whoever uploaded the profile: printed raw into a table, ESC sequences
 * would retitle, clear or rewrite the reader's terminal, and a newline
 * would forge rows. Tables only: JSON output escapes them already. */
void pd_client_term_safe(json_t *v);
/* Text (lines) for a terminal: as pd_client_term_safe, newlines kept. */
void pd_client_term_write(FILE *f, const char *s, size_t n);
/* One line for a non-2xx answer: the envelope's "error" if the answer is
 * JSON, else the first line of the body (control bytes dropped, at most
 * 200 bytes), else "no message". */
void pd_client_error(const struct pd_client_resp *r, char *buf, size_t n);
/* API v0's empty result: 404 {"code":404,"error":"nothing found"}. */
bool pd_client_nothing_found(const struct pd_client_resp *r);

/* A query of GET /api/0/profiles and /api/0/profiles/merge. */
struct pd_client_query {
	const char *service;         /* required */
	const char *type;            /* NULL = every type */
	const struct pd_kv *labels;  /* all must match; literal keys and values */
	size_t nlabels;
	int64_t from_ns, to_ns;      /* inclusive */
	long limit;                  /* 0 = no limit */
};
/*
 * path + "?service=..&type=..&from=..&to=..&labels=..&limit=.." (malloc'd,
 * NULL on OOM); path e.g. "/api/0/profiles/merge". Times are written in
 * profefe's layout with nanoseconds, UTC (pd_client_format_time): profefe
 * reads only that layout, profd reads it too.
 */
char *pd_client_query_path(const char *path, const struct pd_client_query *q);
/* "/api/0/profiles?service=..&type=..&labels=..[&created_at=..]" for a
 * POST (malloc'd, NULL on OOM); created_ns NULL = let the collector decide
 * (the profile's time_nanos, else the time of the upload). */
char *pd_client_post_path(const char *service, const char *type, const struct pd_kv *labels, size_t nlabels,
			  const int64_t *created_ns);
/* "2006-01-02T15:04:05.000000000" in UTC; buf >= 40 bytes. */
const char *pd_client_format_time(int64_t ns, char *buf, size_t n);

#endif
