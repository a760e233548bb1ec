/*
 * apiserver.c — requests to the API server with libcurl: list (paged), get and
 * watch pods, and raw GETs (the pod proxy).
 *
 * Every request takes a curl easy handle from a one-slot cache (so a paged
 * list or a series of GETs reuses the connection; concurrent requests get
 * their own handle), applies TLS and authentication, and runs. TLS material
 * goes in as in-memory blobs: CURLOPT_CAINFO_BLOB (and CAINFO/CAPATH set to
 * NULL so that only the cluster's CA is trusted, as client-go does),
 * CURLOPT_SSLCERT_BLOB / CURLOPT_SSLKEY_BLOB. tls-server-name is done by
 * putting that name in the URL (so curl verifies and sends SNI for it),
 * CURLOPT_CONNECT_TO to reach the real host, and a Host header naming it.
 *
 * Credentials are the only mutable state, under c->mu: the token file's
 * last contents (re-read when a minute old, or at once after a 401) and the
 * exec plugin's credential (re-run when expired or after a 401; the plugin
 * runs under the lock, so concurrent requests wait for one run). The handle
 * cache has its own lock. A 401 is retried once when something could be
 * refreshed. Nothing else is retried: the caller owns its retry policy.
 */
#define _GNU_SOURCE
#include "kube_int.h"

#include "../util/pdcurl.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN_REREAD_S 60.0
#define ERRBODY_MAX    65536 /* body of a failed watch, for its Status message */
#define DEFAULT_LIMIT  500

struct pd_kube_client {
	const struct pd_kube_config *cfg;
	struct pd_kube_client_opts o;
	char *base;                     /* URL prefix, no trailing '/' */
	struct curl_slist *connect_to;  /* tls-server-name: name:port -> host:port */
	char *host_hdr;                 /* "Host: host:port" then */
	struct pd_buf ca, cert, key;    /* files the config named but did not load */
	pthread_mutex_t hmu;            /* the handle cache */
	CURL *idle;                     /* one cached handle */
	pthread_mutex_t mu;             /* credentials (an exec plugin may run under it) */
	char *ftoken;                   /* token file: last good contents */
	double ftoken_at;               /* ... and when it was read (c->o.now) */
	struct kube_cred xcred;         /* exec plugin credential */
	bool have_xcred;
	uint64_t xgen;                  /* ... its generation: +1 per plugin run */
};

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *pd_kube_strerror(int code)
{
	switch (code) {
	case PD_KUBE_EGONE: return "resource version too old (410 Gone)";
	case PD_KUBE_EUNAUTH: return "unauthorized (401)";
	case PD_KUBE_EFORBIDDEN: return "forbidden (403)";
	case PD_KUBE_EHTTP: return "HTTP error";
	}
	return pd_strerror(code);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- credentials --------------------------------------------------------------- */

/* Re-read the token file into c->ftoken (under mu). */
static int read_token_file(struct pd_kube_client *c, struct pd_err *err)
{
	struct pd_buf b = PD_BUF_INIT(0);
	int rc = kube_read_secret(c->cfg->token_file, &b, err);
	if (rc) {
		pd_err_prefix(err, "%s: tokenFile", c->cfg->origin);
		kube_buf_wipe(&b);
		return rc;
	}
	size_t s, e;
	kube_trim(&b, &s, &e);
	if (!kube_token_ok((const char *)b.ptr + s, e - s)) {
		rc = pd_errf(err, PD_EINVAL, "%s: tokenFile %s: %s", c->cfg->origin, c->cfg->token_file,
			     e == s ? "empty" : "contains spaces or control characters");
		kube_buf_wipe(&b);
		return rc;
	}
	char *t = strndup((const char *)b.ptr + s, e - s);
	kube_buf_wipe(&b);
	if (!t)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (c->ftoken) {
		kube_wipe(c->ftoken, strlen(c->ftoken));
		free(c->ftoken);
	}
	c->ftoken = t;
	c->ftoken_at = c->o.now();
	return 0;
}

static bool refreshable(const struct pd_kube_client *c) { return c->cfg->exec || c->cfg->token_file; }

static void wipe_slist(struct curl_slist *l)
{
	for (struct curl_slist *p = l; p; p = p->next)
		kube_wipe(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

static int add_header(struct curl_slist **hdrs, const char *fmt, const char *v, struct pd_err *err)
{
	size_t n = strlen(fmt) + strlen(v) + 1;
	char *s = malloc(n);
	if (!s)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	snprintf(s, n, fmt, v);
	struct curl_slist *l = curl_slist_append(*hdrs, s);
	kube_wipe(s, n);
	free(s);
	if (!l)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	*hdrs = l;
	return 0;
}

/* Apply authentication to h; refresh: after a 401 to a request made with
 * the exec credential of generation *gen. *gen gets the generation used.
 * Only the first of the requests that failed with the same credential runs
 * the plugin again; the others take its new credential (client-go does the
 * same): 64 concurrent 401s are one plugin run, not 64 one after another. */
static int apply_auth(struct pd_kube_client *c, CURL *h, struct curl_slist **hdrs, bool refresh, uint64_t *gen,
		      struct pd_err *err)
{
	const struct pd_kube_config *cfg = c->cfg;
	int rc = 0;
	bool exec_cert = false;
	pthread_mutex_lock(&c->mu);
	double now = c->o.now();
	const char *token = NULL;
	if (cfg->exec) {
		bool stale = refresh && *gen == c->xgen; /* nobody ran the plugin since that request */
		if (!c->have_xcred || stale || (c->xcred.expiry && now >= c->xcred.expiry)) {
			kube_cred_clear(&c->xcred);
			c->have_xcred = false;
			c->xgen++;
			if ((rc = kube_exec_run(cfg, c->o.exec_timeout_ms, &c->xcred, err))) {
				pd_err_prefix(err, "%s: user \"%s\"", cfg->origin, cfg->user ? cfg->user : "");
				goto out;
			}
			c->have_xcred = true;
		}
		*gen = c->xgen;
		token = c->xcred.token;
		if (c->xcred.cert) {
			struct curl_blob cb = {c->xcred.cert, c->xcred.cert_len, CURL_BLOB_COPY};
			struct curl_blob kb = {c->xcred.key, c->xcred.key_len, CURL_BLOB_COPY};
			curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
			curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
			curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
			curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
			exec_cert = true;
		}
	}
	if (!token && cfg->token_file) {
		if (refresh || !c->ftoken || now - c->ftoken_at >= TOKEN_REREAD_S) {
			struct pd_err e2 = {0, ""};
			if ((rc = read_token_file(c, &e2))) {
				if (!c->ftoken && !cfg->token) {
					if (err)
						*err = e2;
					goto out;
				}
				/* keep the last good token; try the file again in a minute */
				c->ftoken_at = now;
				rc = 0;
			}
		}
		token = c->ftoken;
	}
	if (!token)
		token = cfg->token;
	if (token)
		rc = add_header(hdrs, "Authorization: Bearer %s", token, err);
out:
	pthread_mutex_unlock(&c->mu);
	if (rc)
		return rc;
	if (!token && cfg->username) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, cfg->username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
	}
	if (!exec_cert) {
		const struct pd_kube_blob cert = cfg->cert.len ? cfg->cert : (struct pd_kube_blob){c->cert.ptr, c->cert.len};
		const struct pd_kube_blob key = cfg->key.len ? cfg->key : (struct pd_kube_blob){c->key.ptr, c->key.len};
		if (cert.len && key.len) {
			struct curl_blob cb = {(void *)cert.ptr, cert.len, CURL_BLOB_NOCOPY};
			struct curl_blob kb = {(void *)key.ptr, key.len, CURL_BLOB_NOCOPY};
			curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
			curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
			curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
			curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
		}
	}
	if (cfg->impersonate_user && (rc = add_header(hdrs, "Impersonate-User: %s", cfg->impersonate_user, err)))
		return rc;
	for (size_t i = 0; i < cfg->nimpersonate_groups; i++)
		if ((rc = add_header(hdrs, "Impersonate-Group: %s", cfg->impersonate_groups[i], err)))
			return rc;
	return 0;
}

/* ---- client ----------------------------------------------------------------------- */

static int read_blob(struct pd_kube_client *c, const char *field, const char *path, struct pd_buf *b,
		     struct pd_err *err)
{
	int rc = kube_read_secret(path, b, err);
	if (rc) {
		pd_err_prefix(err, "%s: %s", c->cfg->origin, field);
		return rc;
	}
	if (!kube_is_pem(b->ptr, b->len))
		return pd_errf(err, PD_EINVAL, "%s: %s %s: not a PEM file (no \"-----BEGIN\" line)", c->cfg->origin,
			       field, path);
	return 0;
}

/* base URL, and the CONNECT_TO + Host header for tls-server-name. */
static int setup_url(struct pd_kube_client *c, struct pd_err *err)
{
	const struct pd_kube_config *cfg = c->cfg;
	CURLU *u = curl_url();
	char *url = NULL, *host = NULL, *port = NULL, *eport = NULL;
	int rc = 0;
	if (!u)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	CURLUcode uc = curl_url_set(u, CURLUPART_URL, cfg->server, 0);
	if (uc) {
		rc = pd_errf(err, PD_EINVAL, "%s: server \"%.200s\": %s", cfg->origin, cfg->server, curl_url_strerror(uc));
		goto out;
	}
	if (cfg->tls_server_name) {
		if (curl_url_get(u, CURLUPART_HOST, &host, 0) ||
		    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
			rc = pd_errf(err, PD_EINVAL, "%s: server \"%.200s\": no host or port", cfg->origin, cfg->server);
			goto out;
		}
		if (curl_url_get(u, CURLUPART_PORT, &eport, 0))
			eport = NULL; /* no explicit port */
		if ((uc = curl_url_set(u, CURLUPART_HOST, cfg->tls_server_name, 0))) {
			rc = pd_errf(err, PD_EINVAL, "%s: tls-server-name \"%.200s\": %s", cfg->origin, cfg->tls_server_name,
				     curl_url_strerror(uc));
			goto out;
		}
		size_t n = strlen(cfg->tls_server_name) + strlen(host) + 2 * strlen(port) + 4;
		char *ct = malloc(n);
		if (!ct) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(ct, n, "%s:%s:%s:%s", cfg->tls_server_name, port, host, port);
		c->connect_to = curl_slist_append(NULL, ct);
		free(ct);
		n = strlen(host) + (eport ? strlen(eport) : 0) + 16;
		if (!c->connect_to || !(c->host_hdr = malloc(n))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(c->host_hdr, n, "Host: %s%s%s", host, eport ? ":" : "", eport ? eport : "");
	}
	if (curl_url_get(u, CURLUPART_URL, &url, 0)) {
		rc = pd_errf(err, PD_EINVAL, "%s: server \"%.200s\": invalid URL", cfg->origin, cfg->server);
		goto out;
	}
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (!(c->base = strndup(url, n)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
out:
	curl_free(url);
	curl_free(host);
	curl_free(port);
	curl_free(eport);
	curl_url_cleanup(u);
	return rc;
}

int pd_kube_client_new(const struct pd_kube_config *cfg, const struct pd_kube_client_opts *o,
		       struct pd_kube_client **out, struct pd_err *err)
{
	*out = NULL;
	pthread_once(&curl_once, curl_init);
	struct pd_kube_client *c = calloc(1, sizeof *c);
	if (!c)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->cfg = cfg;
	if (o)
		c->o = *o;
	if (c->o.connect_timeout_ms <= 0)
		c->o.connect_timeout_ms = 10000;
	if (c->o.timeout_ms <= 0)
		c->o.timeout_ms = 60000;
	if (!c->o.max_response)
		c->o.max_response = PD_KUBE_MAX_LIST_BYTES;
	if (!c->o.max_event)
		c->o.max_event = PD_KUBE_MAX_EVENT_BYTES;
	if (c->o.exec_timeout_ms <= 0)
		c->o.exec_timeout_ms = 120000;
	if (!c->o.user_agent)
		c->o.user_agent = "profd";
	if (!c->o.now)
		c->o.now = wall;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->hmu, NULL);
	int rc = setup_url(c, err);
	if (!rc && cfg->ca_file && !cfg->ca.len)
		rc = read_blob(c, "certificate-authority", cfg->ca_file, &c->ca, err);
	if (!rc && cfg->cert_file && !cfg->cert.len)
		rc = read_blob(c, "client-certificate", cfg->cert_file, &c->cert, err);
	if (!rc && cfg->key_file && !cfg->key.len)
		rc = read_blob(c, "client-key", cfg->key_file, &c->key, err);
	if (!rc && cfg->token_file && !cfg->exec) {
		struct pd_err e2 = {0, ""};
		rc = read_token_file(c, &e2);
		if (rc && cfg->token)
			rc = 0; /* the static token stands in (client-go: the same) */
		else if (rc && err)
			*err = e2;
	}
	if (rc) {
		pd_kube_client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void pd_kube_client_free(struct pd_kube_client *c)
{
	if (!c)
		return;
	if (c->idle)
		curl_easy_cleanup(c->idle);
	curl_slist_free_all(c->connect_to);
	free(c->host_hdr);
	free(c->base);
	pd_buf_free(&c->ca);
	kube_buf_wipe(&c->cert);
	kube_buf_wipe(&c->key);
	if (c->ftoken) {
		kube_wipe(c->ftoken, strlen(c->ftoken));
		free(c->ftoken);
	}
	kube_cred_clear(&c->xcred);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->hmu);
	free(c);
}

/* ---- one request -------------------------------------------------------------------- */

struct req {
	const char *path;     /* with the query */
	long timeout_ms;
	size_t max_body;
	const char *accept;
	bool decode;          /* let curl ask for and undo gzip */
	struct pd_kube_watch_parser *wp; /* stream a 200's body into it */
	const atomic_int *stop;
};

struct res {
	long status;
	struct pd_buf body;
	char ctype[128];
	bool stopped;
	bool timed_out;
	char *url;            /* malloc'd, for messages */
};

static void res_free(struct res *r)
{
	pd_buf_free(&r->body);
	free(r->url);
	memset(r, 0, sizeof *r);
}

struct xfer {
	CURL *h;
	struct res *res;
	bool truncate;        /* over the cap: drop the rest (error bodies) instead of failing */
	struct pd_kube_watch_parser *wp;
	const atomic_int *stop;
	int rc;
	struct pd_err *err;
};

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	if (!x->res->status)
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->res->status);
	if (x->wp && x->res->status == 200) {
		int rc = pd_kube_watch_feed(x->wp, ptr, n, x->err);
		if (rc) {
			x->rc = rc;
			return 0;
		}
		return n;
	}
	struct pd_buf *b = &x->res->body;
	if (b->len + n > b->max) {
		if (x->truncate) {
			size_t room = b->max - b->len;
			if (room && pd_buf_append(b, ptr, room) == 0)
				return n;
			return n;
		}
		x->rc = pd_errf(x->err, PD_ELIMIT, "GET %s: the response is over the %zu-byte limit", x->res->url, b->max);
		return 0;
	}
	if (pd_buf_append(b, ptr, n)) {
		x->rc = pd_errf(x->err, PD_ENOMEM, "GET %s: out of memory", x->res->url);
		return 0;
	}
	return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	struct xfer *x = ud;
	if (x->stop && atomic_load(x->stop)) {
		x->res->stopped = true;
		return 1;
	}
	return 0;
}

static CURL *acquire(struct pd_kube_client *c)
{
	pthread_mutex_lock(&c->hmu);
	CURL *h = c->idle;
	c->idle = NULL;
	pthread_mutex_unlock(&c->hmu);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void release(struct pd_kube_client *c, CURL *h)
{
	pthread_mutex_lock(&c->hmu);
	if (!c->idle) {
		c->idle = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->hmu);
	if (h)
		curl_easy_cleanup(h);
}

static void set_tls(struct pd_kube_client *c, CURL *h)
{
	const struct pd_kube_config *cfg = c->cfg;
	const struct pd_kube_blob ca = cfg->ca.len ? cfg->ca : (struct pd_kube_blob){c->ca.ptr, c->ca.len};
	if (ca.len) {
		struct curl_blob b = {(void *)ca.ptr, ca.len, CURL_BLOB_NOCOPY};
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
		/* trust that CA only, not also the system's (Debian's curl has a default CApath) */
		curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	if (cfg->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->connect_to)
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
	if (cfg->proxy_url)
		curl_easy_setopt(h, CURLOPT_PROXY, cfg->proxy_url);
}

static int perform(struct pd_kube_client *c, const struct req *r, struct res *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	size_t n = strlen(c->base) + strlen(r->path) + 1;
	if (!(out->url = malloc(n)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	snprintf(out->url, n, "%s%s", c->base, r->path);
	int rc = 0;
	uint64_t gen = 0; /* the exec credential's generation the last attempt used */
	for (int attempt = 0; attempt < 2; attempt++) {
		CURL *h = acquire(c);
		if (!h)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		struct curl_slist *hdrs = NULL;
		char errbuf[CURL_ERROR_SIZE] = "";
		pd_buf_free(&out->body);
		out->status = 0;
		out->body.max = r->wp ? ERRBODY_MAX : r->max_body;
		struct xfer x = {h, out, r->wp != NULL, r->wp, r->stop, 0, err};
		curl_easy_setopt(h, CURLOPT_URL, out->url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, r->timeout_ms);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		curl_easy_setopt(h, CURLOPT_USERAGENT, c->o.user_agent);
		curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
		if (r->decode)
			curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
		if (r->stop) {
			curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
			curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
		}
		set_tls(c, h);
		rc = apply_auth(c, h, &hdrs, attempt > 0, &gen, err);
		if (!rc)
			rc = add_header(&hdrs, "Accept: %s", r->accept, err);
		if (!rc && c->host_hdr)
			rc = add_header(&hdrs, "%s", c->host_hdr, err);
		if (rc) {
			wipe_slist(hdrs);
			release(c, h);
			return rc;
		}
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		CURLcode cc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
		char *ct = NULL;
		if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
			snprintf(out->ctype, sizeof out->ctype, "%s", ct);
		/* the handle must not keep pointers to our stack or headers */
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
		release(c, h);
		wipe_slist(hdrs);
		if (x.rc)
			return x.rc;
		if (cc == CURLE_ABORTED_BY_CALLBACK && out->stopped)
			return 0;
		if (cc != CURLE_OK) {
			out->timed_out = cc == CURLE_OPERATION_TIMEDOUT;
			size_t el = strlen(errbuf);
			while (el && errbuf[el - 1] == '\n')
				errbuf[--el] = 0;
			return pd_errf(err, cc == CURLE_OUT_OF_MEMORY ? PD_ENOMEM : PD_EIO, "GET %s: %s", out->url,
				       el ? errbuf : curl_easy_strerror(cc));
		}
		if (out->status != 401 || attempt > 0 || !refreshable(c))
			break;
	}
	return 0;
}

/* ---- HTTP errors ------------------------------------------------------------------ */

static const char *phrase(long s)
{
	switch (s) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 413: return "Request Entity Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return NULL;
}

int pd_kube_http_error(const char *what, long status, const void *body, size_t len, struct pd_err *err)
{
	int code = status == 410   ? PD_KUBE_EGONE
		   : status == 401 ? PD_KUBE_EUNAUTH
		   : status == 403 ? PD_KUBE_EFORBIDDEN
		   : status == 404 ? PD_ENOTFOUND
				   : PD_KUBE_EHTTP;
	char msg[320] = "";
	const char *reason = phrase(status);
	json_t *o = len ? json_loadb(body, len, 0, NULL) : NULL;
	if (json_is_object(o)) {
		long sc;
		const char *sr, *sm;
		kube_status_fields(o, &sc, &sr, &sm);
		if (sm)
			snprintf(msg, sizeof msg, "%s", sm);
		if (!reason && sr)
			reason = sr;
	}
	json_decref(o);
	if (!msg[0] && len) {
		/* not a Status: the start of the body, on one line */
		size_t n = len < sizeof msg - 1 ? len : sizeof msg - 1, j = 0;
		const unsigned char *b = body;
		for (size_t i = 0; i < n; i++)
			msg[j++] = b[i] < 0x20 || b[i] == 0x7f ? ' ' : (char)b[i];
		while (j && msg[j - 1] == ' ')
			j--;
		msg[j] = 0;
	}
	return pd_errf(err, code, "%s: HTTP %ld%s%s: %s", what, status, reason ? " " : "", reason ? reason : "",
		       msg[0] ? msg : "(empty body)");
}

static int res_error(struct res *r, struct pd_err *err)
{
	char what[400];
	snprintf(what, sizeof what, "GET %s", r->url);
	return pd_kube_http_error(what, r->status, r->body.ptr, r->body.len, err);
}

/* ---- paths ---------------------------------------------------------------------- */

static int bput(struct pd_buf *b, const char *s) { return pd_buf_append(b, s, strlen(s)); }

/* Append s percent-encoded (everything but unreserved characters). */
static int bput_esc(struct pd_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char ch = *p;
		int rc;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		    ch == '_' || ch == '.' || ch == '~') {
			rc = pd_buf_append(b, p, 1);
		} else {
			char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
			rc = pd_buf_append(b, e, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int param(struct pd_buf *b, bool *first, const char *k, const char *v)
{
	if (!v || !*v)
		return 0;
	int rc = bput(b, *first ? "?" : "&");
	*first = false;
	if (!rc)
		rc = bput(b, k);
	if (!rc)
		rc = bput(b, "=");
	return rc ? rc : bput_esc(b, v);
}

/* "/api/v1[/namespaces/NS]/pods?..." NUL-terminated in b. */
static int pods_path(struct pd_buf *b, const struct pd_kube_pod_query *q, unsigned limit, const char *cont,
		     bool watch, const char *rv, int timeout_s, struct pd_err *err)
{
	b->max = 65536;
	const char *ns = q && q->namespace && *q->namespace ? q->namespace : NULL;
	if (ns && !kube_name_ok(ns))
		return pd_errf(err, PD_EINVAL, "invalid namespace \"%.64s\"", ns);
	char num[32];
	bool first = true;
	int rc = bput(b, "/api/v1/");
	if (!rc && ns)
		rc = bput(b, "namespaces/");
	if (!rc && ns)
		rc = bput(b, ns);
	if (!rc)
		rc = bput(b, ns ? "/pods" : "pods");
	if (!rc && watch) {
		snprintf(num, sizeof num, "%d", timeout_s);
		if (!(rc = param(b, &first, "watch", "1")) && !(rc = param(b, &first, "allowWatchBookmarks", "true")) &&
		    !(rc = param(b, &first, "timeoutSeconds", num)))
			rc = param(b, &first, "resourceVersion", rv);
	}
	if (!rc && limit) {
		snprintf(num, sizeof num, "%u", limit);
		rc = param(b, &first, "limit", num);
	}
	if (!rc && q)
		rc = param(b, &first, "labelSelector", q->label_selector);
	if (!rc && q)
		rc = param(b, &first, "fieldSelector", q->field_selector);
	if (!rc)
		rc = param(b, &first, "continue", cont);
	if (!rc)
		rc = pd_buf_append(b, "", 1);
	if (rc)
		return pd_errf(err, rc, "the request URL is over %zu bytes (selectors too long?)", b->max);
	return 0;
}

/* ---- pods ------------------------------------------------------------------------ */

/* List page by page: fn per pod, or (all != NULL) every pod into all's
 * arena. *gone_cont: a 410 answered a continue token. */
static int list_impl(struct pd_kube_client *c, const struct pd_kube_pod_query *q, unsigned limit, pd_kube_pod_fn fn,
		     void *ctx, struct pd_kube_pod_list *all, char **rvout, bool *gone_cont, struct pd_err *err)
{
	char *cont = NULL, *rv = NULL;
	size_t cap = 0;
	int rc = 0;
	*gone_cont = false;
	for (;;) {
		struct pd_buf path = PD_BUF_INIT(0);
		struct res res;
		if ((rc = pods_path(&path, q, limit, cont, false, NULL, 0, err))) {
			pd_buf_free(&path);
			break;
		}
		const atomic_int *stop = q ? q->stop : NULL;
		if (stop && atomic_load(stop)) {
			pd_buf_free(&path);
			rc = pd_errf(err, PD_EIO, "listing pods: stopped");
			break;
		}
		struct req r = {(const char *)path.ptr, c->o.timeout_ms, c->o.max_response, "application/json", true,
				NULL, stop};
		rc = perform(c, &r, &res, err);
		pd_buf_free(&path);
		if (rc == PD_ELIMIT && limit > 1) {
			/* a page over max_response (big pods: 500 of 130 kB are 64 MB): the same
			 * page in halves, down to one pod, rather than no list at all */
			res_free(&res);
			limit /= 2;
			continue;
		}
		if (!rc && res.stopped)
			rc = pd_errf(err, PD_EIO, "GET %s: stopped", res.url);
		if (!rc && res.status != 200) {
			rc = res_error(&res, err);
			if (rc == PD_KUBE_EGONE && cont) {
				*gone_cont = true;
				pd_err_prefix(err, "the list's continue token expired (list again)");
			}
		}
		if (rc) {
			res_free(&res);
			break;
		}
		struct pd_arena *a = all ? all->arena : pd_arena_new(65536);
		struct pd_kube_pod_page page;
		if (!a) {
			res_free(&res);
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		rc = pd_kube_pod_page_parse(res.body.ptr ? (const char *)res.body.ptr : "", res.body.len, a, &page, err);
		if (rc)
			pd_err_prefix(err, "GET %s", res.url);
		res_free(&res);
		for (size_t i = 0; !rc && fn && i < page.n; i++)
			rc = fn(ctx, &page.items[i], err);
		if (!rc && all && page.n) {
			if (pd_grow((void **)&all->items, &cap, all->n + page.n, sizeof *all->items)) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			} else {
				memcpy(all->items + all->n, page.items, page.n * sizeof *page.items);
				all->n += page.n;
			}
		}
		free(cont);
		cont = NULL;
		if (!rc) {
			free(rv);
			rv = strdup(page.resource_version);
			cont = page.continue_token ? strdup(page.continue_token) : NULL;
			if (!rv || (page.continue_token && !cont))
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
		}
		if (!all)
			pd_arena_free(a);
		if (rc || !cont)
			break;
	}
	free(cont);
	if (!rc && rvout)
		*rvout = rv;
	else
		free(rv);
	return rc;
}

int pd_kube_list_pods(struct pd_kube_client *c, const struct pd_kube_pod_query *q, pd_kube_pod_fn fn, void *ctx,
		      char **resource_version, struct pd_err *err)
{
	bool gone;
	if (resource_version)
		*resource_version = NULL;
	return list_impl(c, q, q && q->limit ? q->limit : DEFAULT_LIMIT, fn, ctx, NULL, resource_version, &gone, err);
}

void pd_kube_pod_list_free(struct pd_kube_pod_list *l)
{
	if (!l)
		return;
	free(l->items);
	pd_arena_free(l->arena);
	free(l);
}

int pd_kube_list_pods_all(struct pd_kube_client *c, const struct pd_kube_pod_query *q,
			  struct pd_kube_pod_list **out, struct pd_err *err)
{
	*out = NULL;
	unsigned limit = q && q->limit ? q->limit : DEFAULT_LIMIT;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct pd_kube_pod_list *l = calloc(1, sizeof *l);
		if (!l || !(l->arena = pd_arena_new(65536))) {
			free(l);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		char *rv = NULL;
		bool gone;
		int rc = list_impl(c, q, limit, NULL, NULL, l, &rv, &gone, err);
		if (!rc) {
			l->resource_version = pd_arena_dup(l->arena, rv, strlen(rv) + 1);
			free(rv);
			if (!l->resource_version) {
				pd_kube_pod_list_free(l);
				return pd_errf(err, PD_ENOMEM, "out of memory");
			}
			*out = l;
			return 0;
		}
		pd_kube_pod_list_free(l);
		if (!(rc == PD_KUBE_EGONE && gone && attempt == 0))
			return rc;
		limit = 0; /* the continue token expired: once more, unpaged (client-go's pager) */
	}
	return PD_KUBE_EGONE; /* not reached */
}

int pd_kube_get_pod(struct pd_kube_client *c, const char *ns, const char *name, struct pd_arena *a,
		    struct pd_kube_pod *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	if (!kube_name_ok(ns))
		return pd_errf(err, PD_EUSAGE, "invalid namespace \"%.64s\"", ns ? ns : "");
	if (!kube_name_ok(name))
		return pd_errf(err, PD_EUSAGE, "invalid pod name \"%.64s\"", name ? name : "");
	char path[600];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
	struct req r = {path, c->o.timeout_ms, c->o.max_response, "application/json", true, NULL, NULL};
	struct res res;
	int rc = perform(c, &r, &res, err);
	if (!rc && res.status != 200)
		rc = res_error(&res, err);
	if (!rc && (rc = pd_kube_pod_parse(res.body.ptr ? (const char *)res.body.ptr : "", res.body.len, a, out, err)))
		pd_err_prefix(err, "GET %s", res.url);
	res_free(&res);
	return rc;
}

int pd_kube_watch_pods(struct pd_kube_client *c, const struct pd_kube_pod_query *q, const char *resource_version,
		       int timeout_s, pd_kube_event_fn fn, void *ctx, const atomic_int *stop, struct pd_err *err)
{
	if (stop && atomic_load(stop))
		return 0;
	if (timeout_s <= 0)
		timeout_s = 300;
	struct pd_buf path = PD_BUF_INIT(0);
	struct pd_kube_watch_parser *wp = NULL;
	struct res res = {0};
	int rc = pods_path(&path, q, 0, NULL, true, resource_version, timeout_s, err);
	if (rc)
		goto out;
	if (pd_kube_watch_parser_new(c->o.max_event, fn, ctx, &wp)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	/* the server ends the watch after timeout_s; ours is a backstop */
	struct req r = {(const char *)path.ptr, (timeout_s + 60) * 1000L, 0, "application/json", true, wp, stop};
	if ((rc = perform(c, &r, &res, err)))
		goto out;
	if (res.stopped)
		goto out;
	if (res.status != 200)
		rc = res_error(&res, err);
	else if ((rc = pd_kube_watch_finish(wp, err)))
		pd_err_prefix(err, "GET %s", res.url);
out:
	res_free(&res);
	pd_kube_watch_parser_free(wp);
	pd_buf_free(&path);
	return rc;
}

/* ---- raw GETs ---------------------------------------------------------------------- */

int pd_kube_get(struct pd_kube_client *c, const char *path, const struct pd_kube_get_opts *o,
		struct pd_kube_response *resp, struct pd_err *err)
{
	static const struct pd_kube_get_opts defaults;
	if (!o)
		o = &defaults;
	memset(resp, 0, sizeof *resp);
	if (!path || path[0] != '/')
		return pd_errf(err, PD_EINVAL, "GET: the path must start with '/' (got \"%.64s\")", path ? path : "");
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return pd_errf(err, PD_EINVAL, "GET %.200s: the path has spaces or control characters (escape them)",
				       path);
	struct req r = {path, o->timeout_ms > 0 ? o->timeout_ms : 60000,
			o->max_body ? o->max_body : PD_KUBE_MAX_LIST_BYTES, o->accept ? o->accept : "*/*", false, NULL,
			o->stop};
	struct res res;
	int rc = perform(c, &r, &res, err);
	resp->timed_out = res.timed_out;
	if (!rc && res.stopped)
		rc = pd_errf(err, PD_EIO, "GET %s: stopped", res.url);
	if (!rc) {
		resp->status = res.status;
		resp->body = res.body;
		res.body = (struct pd_buf)PD_BUF_INIT(0);
		memcpy(resp->content_type, res.ctype, sizeof resp->content_type);
	}
	res_free(&res);
	return rc;
}

void pd_kube_response_free(struct pd_kube_response *r)
{
	pd_buf_free(&r->body);
	memset(r, 0, sizeof *r);
}
