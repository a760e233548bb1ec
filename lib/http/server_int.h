/*
 * server_int.h — private to the HTTP server's files (server.c, api0.c): the
 * server and a request, and the responses every route sends. Not for the
 * rest of lib/http (API v1 returns struct pd_api1_resp and server.c sends
 * it) or for callers of server.h.
 */
#ifndef PD_HTTP_SERVER_INT_H
#define PD_HTTP_SERVER_INT_H

#include "server.h"
#include "metrics.h"
#include "../store/store.h"

#include <jansson.h>
#include "../util/pdmhd.h"
#include <pthread.h>
#include <stdatomic.h>

struct pd_server {
	struct pd_server_config cfg;
	struct pd_store *st;
	struct MHD_Daemon *d;
	unsigned port;
	atomic_bool ready;
	struct pd_metrics m;
	pthread_mutex_t log_mu;
	_Atomic size_t mem; /* bytes reserved by requests (struct req.reserved, gzstream.reserved) */
	pthread_rwlock_t auth_mu; /* tokens: read by requests, swapped by a reload */
	atomic_uint merges;       /* merge-like requests running (cfg.max_merges) */
	char *client_ca;          /* --tls-client-ca's PEM, NUL-terminated, for MHD */
	struct pd_tokens *tokens; /* NULL = open */
	/* offload threads (srv_offload): a request's slow work off the
	 * libmicrohttpd worker, whose other connections it would hold */
	pthread_mutex_t off_mu;
	struct req *off_head, *off_tail; /* work no thread was idle for */
	struct off_thread *off_idle;     /* idle threads, the last to finish on top */
	bool off_stop;
	struct off_thread *off_th;
	size_t off_n;
};

#define DISCARD_MAX (1ULL << 30)
/* A client without credentials has up to this much of its body read (and
 * dropped) before its 401/403, so that it reads the answer (server.c) */
#define AUTH_DRAIN_MAX (4ULL << 20)

struct req {
	int64_t t0_ns;
	int route;
	int status;
	uint64_t bytes_out;
	struct pd_buf body;
	bool too_large, started;
	uint64_t discarded; /* body bytes dropped after the cap */
	char method[16];
	char rid[40];
	char *uri; /* path?query as received (the first 2 KiB), for the log */
	size_t uri_len;
	char err_detail[600]; /* logged for 5xx */
	size_t reserved;      /* bytes of s->mem this request holds (body, decode) */
	size_t peak;          /* most it held: a big one gives memory back to the system */
	bool busy;            /* the body did not fit in the memory budget: 503 */
	bool bad_framing;     /* refused before the body (framing, sizes, credentials): drain it */
	/* a refusal from the headers, answered once the body is drained (up to
	 * AUTH_DRAIN_MAX): its status, and refuse_early's message (NULL: a
	 * missing or refused credential, reply_auth's 401 or 403) */
	int late_st;
	char *late_msg;
	bool nul_path;        /* the raw path has a %00 (MHD's decoded one ends there) */
	bool early;           /* on_request's first call, before the body: h_post checks the parameters only */
	size_t nparams;       /* query parameters, over PD_SERVE_MAX_PARAMS (else 0) */
	char who[64];         /* the name of the request's token, for the log */
	struct pd_server *s;
	struct conn *conn; /* its connection's slot (server.c), or NULL */
	/* the time range the answer covers: damaged days in it that the store
	 * skipped make it partial (X-Profd-Partial, "partial" in JSON) */
	bool ranged, partial_done;
	int64_t range_from, range_to;
	struct pd_store_skipped skipped;
	/* srv_offload: the work, its connection (suspended meanwhile), the
	 * queue's link, and what answers once the work is done */
	void (*off_work)(struct req *r);
	enum MHD_Result (*off_finish)(struct MHD_Connection *c, struct req *r);
	struct MHD_Connection *off_conn;
	struct req *off_next;
	void *off_ctx; /* the work's own state */
	void (*off_drop)(struct req *r); /* frees off_ctx if finish never runs (shutdown) */
	/* a read dispatched on an offload thread (server.c, read_work): its
	 * URL and method, and the answer queue() kept for the worker to send */
	const char *off_url, *off_method;
	bool off_defer;
	unsigned def_status;
	struct MHD_Response *def_resp;
	enum MHD_Result def_res;
};

/* Run work(r) on an offload thread while r's connection is suspended (its
 * libmicrohttpd worker goes on serving its other connections: a store
 * that hangs, ClickHouse not answering, held every connection of each
 * worker an upload was on); then, on the connection's worker, finish(c, r)
 * answers. 0, or PD_ENOMEM/PD_EBUSY if it could not be offloaded (the
 * caller then does the work itself). Called from a route handler only. */
int srv_offload(struct MHD_Connection *c, struct req *r, void (*work)(struct req *r),
		enum MHD_Result (*finish)(struct MHD_Connection *c, struct req *r), void *ctx);

/* ---- responses (server.c) ---- */
/* Takes ownership of text (malloc'd, NUL-terminated). */
enum MHD_Result srv_reply_owned(struct MHD_Connection *c, struct req *r, int status, char *text, const char *ctype);
/* A JSON error {"code":status,"error":msg}; 5xx logged, 500's detail kept for the log only. */
enum MHD_Result srv_reply_error(struct MHD_Connection *c, struct req *r, int status, const char *msg);
/* The status of a store/library error code and its message. */
enum MHD_Result srv_reply_err(struct MHD_Connection *c, struct req *r, int rc, const struct pd_err *err);
/* {"code":200,"body":body} (takes body), "partial" when damaged days were skipped. */
enum MHD_Result srv_reply_body(struct MHD_Connection *c, struct req *r, json_t *body);
enum MHD_Result srv_method_not_allowed(struct MHD_Connection *c, struct req *r, const char *allow);
/* A profile, encoded, gzip'd as it is sent. */
enum MHD_Result srv_reply_pprof(struct MHD_Connection *c, struct req *r, const struct pd_profile *p,
				const char *filename);
/* --max-concurrent-merges: take a slot (false: none free, answer srv_too_many_merges), give it back. */
bool srv_merge_take(struct pd_server *s);
void srv_merge_give(struct pd_server *s);
enum MHD_Result srv_too_many_merges(struct MHD_Connection *c, struct req *r);

/* ---- for the handlers ---- */
/* A query parameter of the request (conn: its MHD_Connection). */
const char *srv_qget(void *conn, const char *key);
/* The start of the retention window at now (INT64_MIN: none). */
int64_t srv_cutoff_ns(const struct pd_server *s, int64_t now);
/* struct pd_ingest.reserve over the request's share of --max-ingest-memory. */
int srv_req_reserve(void *ctx, size_t n);

/* ---- api0.c ---- */
/* API v0 (profefe's, docs/api.md): answers path (trailing slashes gone)
 * if it is one of its routes (*res: the answer); false if not. */
bool pd_api0_dispatch(struct MHD_Connection *c, struct req *r, const char *path, const char *method,
		      enum MHD_Result *res);

#endif
