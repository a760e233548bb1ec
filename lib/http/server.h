/*
 * server.h — the collector's HTTP server (libmicrohttpd): API v0
 * (profefe-compatible, docs/api.md), /healthz, /readyz, /metrics.
 *
 * One thread per connection (MHD's internal polling thread accepts): a
 * long merge never stalls an upload on another connection, and the
 * connection limit bounds the threads. Every request is logged as one line
 * when it completes. Shutdown is graceful: stop accepting, let in-flight
 * requests finish (up to a timeout), then stop.
 */
#ifndef PD_HTTP_SERVER_H
#define PD_HTTP_SERVER_H

#include <stdio.h>
#include <sys/socket.h>

#include "../store/store.h"
#include "metrics.h"
#include "web.h"

/* Named defaults of the limits (flags of `profd serve`). */
#define PD_SERVE_ADDR            ":10100"
#define PD_SERVE_MAX_BODY        (32u << 20) /* bytes of one upload, as sent */
#define PD_SERVE_MAX_MERGE       10000       /* profiles in one merge */
#define PD_SERVE_TIMEOUT_S       60          /* idle seconds before a connection is dropped */
#define PD_SERVE_MAX_CONNECTIONS 1024        /* all clients; an idle one costs a socket, no thread */
#define PD_SERVE_MAX_PER_IP      64          /* --max-connections-per-ip */
#define PD_SERVE_THREADS         16          /* --threads: workers of the epoll pool */
#define PD_SERVE_OFFLOAD_THREADS 16          /* at least: threads for uploads' store work */
#define PD_SERVE_MAX_MERGES      4           /* --max-concurrent-merges; over it = 503 */
#define PD_SERVE_GZIP_LEVEL      1           /* libdeflate level of pprof responses */
#define PD_SERVE_MAX_UPLOAD_MEMORY ((size_t)64 << 20)  /* what decoding + storing one upload may take */
#define PD_SERVE_MAX_INGEST_MEMORY ((size_t)1 << 30)   /* uploads' bodies + decodes + pprof answers in flight */
#define PD_SERVE_MAX_URI           (16u << 10)         /* bytes of path + query; over it = 414 */
#define PD_SERVE_MAX_HEADERS       (32u << 10)         /* bytes of all request headers; over it = 431 */
#define PD_SERVE_MAX_PARAMS        512u                /* query parameters of one request; over it = 413 */

struct pd_server_config {
	const char *addr;         /* "host:port", ":port", "[v6]:port"; port 0 = any free port */
	size_t max_body;          /* bytes; over it = 413 */
	size_t max_merge;         /* profiles per merge; over it = 413 */
	unsigned timeout_s;       /* connection idle timeout */
	unsigned max_connections;
	unsigned max_per_ip;      /* connections of one client address; 0 = no cap */
	unsigned threads;         /* worker threads (epoll pool) */
	unsigned max_merges;      /* merges, tops, series and diffs at once; over it = 503 */
	int64_t retention_ns;     /* 0 = keep forever; older profiles are invisible and refused */
	int64_t max_future_skew_ns; /* refuse profiles timed further ahead of now (400); 0 = no bound */
	int gzip_level;           /* 1..12 */
	int64_t max_query_range_ns; /* API v1: most to - from; 0 = PD_API1_MAX_RANGE_NS (31 days) */
	FILE *log;                /* request log (one line per request); NULL = none */
	FILE *errlog;             /* errors and warnings, also with log = NULL (-q); NULL = none */
	size_t max_ingest_memory; /* bytes held by uploads and pprof answers at once; over it = 503 */
	const char *tokens_path;  /* --tokens FILE (lib/http/auth.h); NULL = no authentication */
	bool metrics_open;        /* /metrics without a token (default: read scope) */
	const char *allowed_origins; /* comma-separated Origins that may POST/DELETE besides our own */
	const char *tls_cert, *tls_key; /* PEM files: serve HTTPS (TLS 1.2+); NULL = plain HTTP */
	const char *tls_client_ca;      /* PEM CA file: require client certificates it signed */
	const char *version, *commit, *build_time;
	/* the web UI (lib/http/web.h): served at PREFIX/ and PREFIX/ui/FILE, GET
	 * and HEAD without a token (the page holds no data; its API calls need
	 * one); NULL = no UI (GET / is a 404). Borrowed: must outlive the server. */
	const struct pd_web *web;
	/* GET /metrics/profiles (lib/http/profmetrics.h); NULL = 404. Borrowed. */
	struct pd_profmetrics *profmetrics;
	/* optional: more series appended to /metrics (e.g. the in-process
	 * scraper's); ctx must outlive the server */
	int (*metrics_extra)(void *ctx, struct pd_buf *out);
	void *metrics_ctx;
};
void pd_server_config_default(struct pd_server_config *c);

struct pd_server;

/* "host:port", ":port" (any address, v4 and v6: *any = true), "[v6]:port" or
 * "port" to a socket address; PD_EUSAGE with the reason. */
int pd_http_parse_addr(const char *addr, struct sockaddr_storage *ss, bool *any, struct pd_err *err) PD_WUR;
/* Check an address's syntax (and resolve its host) without binding. */
int pd_server_check_addr(const char *addr, struct pd_err *err) PD_WUR;
/* Bind and start serving (the store is borrowed and must outlive the server).
 * The server starts not ready: call pd_server_set_ready once the store is. */
int pd_server_start(const struct pd_server_config *c, struct pd_store *st, struct pd_server **out,
		    struct pd_err *err) PD_WUR;
/* The bound port (useful with port 0) and a printable URL base. */
unsigned pd_server_port(const struct pd_server *s);
/* Re-read the tokens file (SIGHUP). On error the tokens in force are kept
 * and err says why; *n = the tokens now in force. */
int pd_server_reload_tokens(struct pd_server *s, size_t *n, struct pd_err *err) PD_WUR;
/* Re-read --tls-cert and --tls-key (SIGHUP): new handshakes use them; on
 * error the pair in force is kept. desc gets the new certificate's subject
 * and expiry. 0 and desc "" without TLS. */
int pd_server_reload_tls(struct pd_server *s, char *desc, size_t n, struct pd_err *err) PD_WUR;
void pd_server_set_ready(struct pd_server *s, bool ready);
struct pd_metrics *pd_server_metrics(struct pd_server *s);
/* Stop accepting, wait up to timeout_s for in-flight requests, stop, free.
 * Returns the number of requests still in flight when it gave up waiting. */
unsigned pd_server_stop(struct pd_server *s, unsigned timeout_s);

#endif
