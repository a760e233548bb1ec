/*
 * http.c — the scraper's own small HTTP server (libmicrohttpd, one polling
 * thread): /metrics (Prometheus text 0.0.4), /healthz ("ok") and /targets
 * (the per-target table of pd_scraper_summary, for people). Read-only: it
 * only reads the scraper's counters and, under its lock, the targets.
 */
#define _GNU_SOURCE
#include "scrape.h"
#include "../http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include "../util/pdmhd.h"
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct pd_scrape_http {
	struct MHD_Daemon *d;
	struct pd_scraper *s;
	unsigned port;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, struct pd_buf *b, const char *ctype)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->ptr, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		pd_buf_free(b);
		return MHD_NO;
	}
	b->ptr = NULL;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	(void)upload;
	static int marker;
	struct pd_scrape_http *h = cls;
	if (!*con_cls) {
		*con_cls = &marker;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* ignore request bodies */
		return MHD_YES;
	}
	struct pd_buf b = PD_BUF_INIT(0);
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		if (pd_buf_append(&b, "method not allowed\n", 19))
			return MHD_NO;
		return answer(c, 405, &b, "text/plain; charset=utf-8");
	}
	if (!strcmp(url, "/metrics")) {
		if (pd_scraper_metrics(h->s, &b)) {
			pd_buf_free(&b);
			return MHD_NO;
		}
		return answer(c, 200, &b, "text/plain; version=0.0.4; charset=utf-8");
	}
	if (!strcmp(url, "/healthz")) {
		if (pd_buf_append(&b, "ok\n", 3))
			return MHD_NO;
		return answer(c, 200, &b, "text/plain; charset=utf-8");
	}
	if (!strcmp(url, "/targets")) {
		pd_scraper_summary(h->s, &b);
		return answer(c, 200, &b, "text/plain; charset=utf-8");
	}
	if (pd_buf_append(&b, "not found: try /metrics, /healthz or /targets\n", 46))
		return MHD_NO;
	return answer(c, 404, &b, "text/plain; charset=utf-8");
}

int pd_scrape_http_start(struct pd_scraper *s, const char *addr, struct pd_scrape_http **out, struct pd_err *err)
{
	*out = NULL;
	struct sockaddr_storage ss;
	bool any;
	int rc = pd_http_parse_addr(addr, &ss, &any, err);
	if (rc)
		return rc;
	struct pd_scrape_http *h = calloc(1, sizeof *h);
	if (!h)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	h->s = s;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
	if (ss.ss_family == AF_INET6)
		flags |= any ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
	uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	h->d = MHD_start_daemon(flags, port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_LIMIT, 32u, MHD_OPTION_END);
	if (!h->d) {
		int e = errno;
		free(h);
		return pd_errf(err, PD_EIO, "cannot listen on %s: %s", addr, e ? strerror(e) : "libmicrohttpd refused to start");
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di ? di->port : port;
	*out = h;
	return 0;
}

unsigned pd_scrape_http_port(const struct pd_scrape_http *h) { return h->port; }

void pd_scrape_http_stop(struct pd_scrape_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
