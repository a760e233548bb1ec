/*
 * api1.h — API v1 (docs/api.md "API v1"): the route table and the handler
 * contract, independent of libmicrohttpd (so unit tests call it directly).
 *
 * server.c hands every path under /api/1/ to pd_api1_handle, which
 *   1. finds the route in the table in api1.c (405 / 404 otherwise);
 *   2. parses the common parameters into struct pd_api1_req: `query` (a
 *      selector, lib/query/query.h; absent = every profile, or 400 on routes
 *      that require it), `from`/`to` (any pd_api_parse_time form; default
 *      now-1h .. now; from > to and to - from over the range cap are 400;
 *      from is then clamped to the retention window);
 *   3. calls the route's handler, which fills struct pd_api1_resp with a JSON
 *      value (sent as {"code":200,"body":<value>}), a text body, or a
 *      profile (sent gzip'd, streamed), via pd_api1_reply_*;
 *   4. turns a handler's error (PD_E* + message) into the JSON error
 *      {"code":<status>,"error":"<message>"} (status from pd_api_http_status;
 *      messages say which parameter and where).
 * server.c then sends the response and counts it (route "api1").
 *
 * Adding a route (e.g. series): write
 *     int pd_api1_h_series(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
 * in lib/http/api1_series.c, declare it below, and add one row to the table
 * in api1.c ({"series", pd_api1_h_series, flags}). Use the helpers below for
 * parameters, selection, merging and replies.
 */
#ifndef PD_HTTP_API1_H
#define PD_HTTP_API1_H

#include "params.h"
#include "../query/query.h"
#include "../query/normalize.h"

#define PD_API1_MAX_RANGE_NS (31LL * 24 * 3600 * 1000000000LL) /* to - from; --max-query-range */
#define PD_API1_DEFAULT_WINDOW_NS (3600LL * 1000000000LL)      /* from = now-1h by default */

/* What the server knows that handlers need; borrowed for one request. */
struct pd_api1_config {
	struct pd_store *st;
	size_t max_profiles;  /* profiles one query may select (--max-merge-profiles); 0 = no cap */
	int64_t max_range_ns; /* to - from; 0 = PD_API1_MAX_RANGE_NS */
	int64_t retention_ns; /* 0 = none; else from is clamped to now - retention */
};

struct pd_api1_req {
	const struct pd_api1_config *cfg;
	pd_api_get_fn get; /* query parameters (decoded once) */
	void *get_ctx;
	const char *path;  /* route path after "/api/1/", e.g. "labels/version/values" */
	const char *arg;   /* the {name} path segment (NUL-terminated copy), or NULL */
	int64_t now_ns;
	int64_t from_ns, to_ns; /* [from, to] inclusive, from clamped to retention */
	struct pd_selector sel; /* zeroed (= every profile) when "query" is absent */
	bool has_query;
	char query_text[256];   /* the selector as given (truncated), for messages */
};

enum pd_api1_kind { PD_API1_NONE, PD_API1_JSON, PD_API1_TEXT, PD_API1_PPROF };

struct pd_api1_resp {
	int status;                 /* HTTP status; 200 unless an error */
	int kind;                   /* enum pd_api1_kind */
	json_t *json;               /* JSON: owned; sent as the envelope's "body" */
	struct pd_buf text;         /* TEXT: owned bytes */
	const char *ctype;          /* TEXT: Content-Type */
	struct pd_profile *profile; /* PPROF: owned; sent gzip'd */
	char filename[64];          /* PPROF: Content-Disposition filename */
	size_t merged;              /* profiles merged (for /metrics), 0 if none */
	const char *allow;          /* 405: the Allow header */
	char error[600];            /* status != 200: the message */
	bool ranged;                /* [from_ns, to_ns] is what the answer covers (damaged days in it: partial) */
	int64_t from_ns, to_ns;
};

/* Run one request: method "GET"/"HEAD" (others: 405), path after
 * "/api/1/" without trailing slashes. Always fills *out (free it with
 * pd_api1_resp_free). */
void pd_api1_handle(const struct pd_api1_config *cfg, const char *method, const char *path, pd_api_get_fn get,
		    void *get_ctx, int64_t now_ns, struct pd_api1_resp *out);
void pd_api1_resp_free(struct pd_api1_resp *r);

/* ---- for handlers ------------------------------------------------------------------ */

typedef int (*pd_api1_fn)(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);

/* Replies (take ownership of what they are given, also on error). */
int pd_api1_reply_json(struct pd_api1_resp *out, json_t *v, struct pd_err *err) PD_WUR;
int pd_api1_reply_text(struct pd_api1_resp *out, struct pd_buf *text, const char *ctype);
int pd_api1_reply_pprof(struct pd_api1_resp *out, struct pd_profile *p, const char *filename);

/* A parameter's value; NULL when absent or empty. */
const char *pd_api1_param(const struct pd_api1_req *q, const char *key);
/* An integer parameter in [min, max]; absent = def. PD_EINVAL
 * 'bad "<key>" "<v>": want an integer in [min, max]'. */
int pd_api1_param_int(const struct pd_api1_req *q, const char *key, int64_t def, int64_t min, int64_t max,
		      int64_t *out, struct pd_err *err) PD_WUR;
/* The profiles the request selects (query, from, to), capped by
 * cfg->max_profiles (PD_ELIMIT naming --max-merge-profiles). */
int pd_api1_select(const struct pd_api1_req *q, struct pd_profile_meta **v, size_t *n, struct pd_err *err) PD_WUR;
/* Merge those profiles in the store (pprof Merge semantics; PD_EINCOMPAT
 * names the first profile whose sample types differ). n >= 1. */
int pd_api1_merge(const struct pd_api1_req *q, const struct pd_profile_meta *v, size_t n, struct pd_profile **out,
		  struct pd_err *err) PD_WUR;
/* The sample index of parameter "sample_index" (alias "si": a sample type
 * name as pprof's -sample_index, or a number); absent = the profile's
 * default type (pd_profile_default_index). PD_EINVAL lists the types. */
/* The value of "sample_index" (or its alias "si"; *key = which), or NULL. */
const char *pd_api1_si_param(const struct pd_api1_req *q, const char **key);
int pd_api1_sample_index(const struct pd_api1_req *q, const struct pd_profile *p, uint32_t *si,
			 struct pd_err *err) PD_WUR;
/* Parameter "normalize" (docs/api.md "Normalisation"): true (default) or
 * false (raw sums); PD_EINVAL otherwise. */
int pd_api1_normalize(const struct pd_api1_req *q, bool *on, struct pd_err *err) PD_WUR;
/* The answers' "normalization" object: {"mode","sources","profiles","used",
 * "excluded"[,"resets"][,"note"]}. NULL on OOM. */
json_t *pd_api1_norm_json(const struct pd_norm_info *i);
/* A stored profile's metadata as the API's profile object (NULL: out of
 * memory); shared by API v0 and v1. */
json_t *pd_api1_meta_json(const struct pd_profile_meta *m);
/* "no profiles match <query> in [from, to]" as PD_ENOTFOUND. */
int pd_api1_nothing(const struct pd_api1_req *q, struct pd_err *err);

/* The flame graph below node i of f as {"name","value","self",...,
 * "children":[...]} ("other":true on other nodes); fill (may be NULL) adds
 * node i's own fields after "self" (false: out of memory). NULL on OOM. */
typedef bool pd_api1_flame_fill(json_t *o, uint32_t i, const void *ctx);
json_t *pd_api1_flame_json(const struct pd_flame *f, uint32_t i, int depth, pd_api1_flame_fill *fill,
			   const void *ctx);

/* Handlers (one per route; the table is in api1.c). */
int pd_api1_h_profiles(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_merge(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_top(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_labels(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_label_values(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_types(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);
int pd_api1_h_series(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err); /* api1_series.c */
int pd_api1_h_diff(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);   /* api1_diff.c */
int pd_api1_h_rollouts(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err); /* api1_regress.c */
int pd_api1_h_regressions(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err);

#endif
