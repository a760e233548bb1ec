/*
 * collector.c — the collector client of collector.h: URL resolution, GET/POST
 * over one libcurl easy handle with a capped body, the JSON envelope, and
 * API v0 query strings.
 *
 * Invariants: a resp always ends either with status > 0 (an answer, body
 * holds at most max_body bytes) or with status 0 and fail set; the
 * message of a failed request names the collector's base URL, never the
 * whole URL with its query (which says nothing more and can be long).
 */
#define _GNU_SOURCE
#include "collector.h"
#include "../scrape/scrape.h" /* pd_scrape_query_escape, pd_scrape_labels_value: profefe's escaping */

#include <ctype.h>
#include "../util/pdcurl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pd_client {
	CURL *h;
	char *base;
	char *ua;
	int64_t timeout_ns;
	struct curl_slist *post_hdrs, *get_hdrs; /* get_hdrs: NULL unless a token is set */
	const char *cacert; /* borrowed */
	bool insecure;
	char errbuf[CURL_ERROR_SIZE];
};

int pd_client_resolve_url(const char *flag, const char *env, char **out, struct pd_err *err)
{
	*out = NULL;
	const char *src = flag ? "--collector" : env && *env ? "$PROFD_COLLECTOR" : "the default";
	const char *in = flag ? flag : env && *env ? env : PD_CLIENT_DEFAULT_COLLECTOR;
	size_t n = strlen(in);
	while (n && in[n - 1] == '/')
		n--;
	if (!n)
		return pd_errf(err, PD_EUSAGE, "%s: empty collector URL", src);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)in[i] <= ' ' || in[i] == 0x7f || in[i] == '?' || in[i] == '#')
			return pd_errf(err, PD_EUSAGE,
				       "%s: bad collector URL \"%s\": want http://HOST:PORT (no white space, query or fragment)",
				       src, in);
	const char *sep = strstr(in, "://");
	const char *scheme = "";
	if (sep) {
		size_t sl = (size_t)(sep - in);
		if (!(sl == 4 && !strncasecmp(in, "http", 4)) && !(sl == 5 && !strncasecmp(in, "https", 5)))
			return pd_errf(err, PD_EUSAGE,
				       "%s: bad collector URL \"%s\": only http:// and https:// are supported", src, in);
		if (sep[3] == '/' || (size_t)(sep + 3 - in) >= n)
			return pd_errf(err, PD_EUSAGE, "%s: bad collector URL \"%s\": no host", src, in);
	} else {
		scheme = "http://";
	}
	size_t sl = strlen(scheme);
	char *u = malloc(sl + n + 1);
	if (!u)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	memcpy(u, scheme, sl);
	memcpy(u + sl, in, n);
	u[sl + n] = 0;
	*out = u;
	return 0;
}

int pd_client_new(const char *base, int64_t timeout_ns, const char *user_agent, struct pd_client **out,
		  struct pd_err *err)
{
	*out = NULL;
	CURLcode g = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (g != CURLE_OK)
		return pd_errf(err, PD_EIO, "libcurl: %s", curl_easy_strerror(g));
	struct pd_client *c = calloc(1, sizeof *c);
	if (!c)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->base = strdup(base);
	c->ua = strdup(user_agent ? user_agent : "profd");
	c->h = curl_easy_init();
	c->post_hdrs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	struct curl_slist *h2 = c->post_hdrs ? curl_slist_append(c->post_hdrs, "Expect:") : NULL;
	if (!c->base || !c->ua || !c->h || !h2) {
		pd_client_free(c);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	c->post_hdrs = h2;
	c->timeout_ns = timeout_ns > 0 ? timeout_ns : 60000000000LL;
	*out = c;
	return 0;
}

void pd_client_free(struct pd_client *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	curl_slist_free_all(c->post_hdrs);
	curl_slist_free_all(c->get_hdrs);
	free(c->base);
	free(c->ua);
	free(c);
}

const char *pd_client_base(const struct pd_client *c) { return c->base; }

void pd_client_set_tls(struct pd_client *c, const char *cacert, bool insecure)
{
	c->cacert = cacert;
	c->insecure = insecure;
}

int pd_client_set_token(struct pd_client *c, const char *token, struct pd_err *err)
{
	if (!token)
		return 0;
	size_t n = strlen(token) + 32;
	char *h = malloc(n);
	if (!h)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	snprintf(h, n, "Authorization: Bearer %s", token);
	struct curl_slist *p = curl_slist_append(c->post_hdrs, h), *g = p ? curl_slist_append(c->get_hdrs, h) : NULL;
	memset(h, 0, n);
	free(h);
	if (!p || !g)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	c->post_hdrs = p;
	c->get_hdrs = g;
	return 0;
}

void pd_client_resp_free(struct pd_client_resp *r)
{
	pd_buf_free(&r->body);
	memset(r, 0, sizeof *r);
}

struct sink {
	struct pd_buf *b;
	bool over;
};

static size_t write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	size_t n = size * nmemb;
	if (pd_buf_append(s->b, p, n)) {
		s->over = true;
		return 0; /* CURLE_WRITE_ERROR */
	}
	return n;
}

static void fmt_dur(char *buf, size_t n, int64_t ns)
{
	if (ns % 1000000000 == 0)
		snprintf(buf, n, "%llds", (long long)(ns / 1000000000));
	else
		snprintf(buf, n, "%.3gs", (double)ns / 1e9);
}

static int perform(struct pd_client *c, const char *path_query, const void *body, size_t len, size_t max_body,
		   struct pd_client_resp *r, struct pd_err *err)
{
	memset(r, 0, sizeof *r);
	r->body = (struct pd_buf)PD_BUF_INIT(max_body);
	size_t bl = strlen(c->base), pl = strlen(path_query);
	char *url = malloc(bl + pl + 1);
	if (!url)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	memcpy(url, c->base, bl);
	memcpy(url + bl, path_query, pl + 1);
	struct sink s = {&r->body, false};
	CURL *h = c->h;
	curl_easy_reset(h);
	c->errbuf[0] = 0;
	long tmo = (long)(c->timeout_ns / 1000000);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, tmo < 10000 ? tmo : 10000L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->ua);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	if (c->cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (max_body)
		curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_body);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->post_hdrs);
	} else {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
		if (c->get_hdrs)
			curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->get_hdrs);
	}
	CURLcode rc = curl_easy_perform(h);
	free(url);
	char mb[32];
	if (rc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		char *ct = NULL;
		curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
		r->json = ct && !strncasecmp(ct, "application/json", 16);
		r->text = ct && !strncasecmp(ct, "text/plain", 10);
		return 0;
	}
	if (s.over || rc == CURLE_FILESIZE_EXCEEDED) {
		r->fail = PD_CLIENT_TOO_LARGE;
		return pd_errf(err, PD_ELIMIT, "the answer of the collector at %s is over the limit of %s", c->base,
			       pd_fmt_bytes(mb, sizeof mb, (double)max_body));
	}
	const char *detail = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
	switch (rc) {
	case CURLE_COULDNT_CONNECT: {
		long oserr = 0;
		curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
		r->fail = PD_CLIENT_CONNECT;
		char why[CURL_ERROR_SIZE];
		if (oserr) {
			snprintf(why, sizeof why, "%s", strerror((int)oserr));
			why[0] = (char)tolower((unsigned char)why[0]);
		} else {
			snprintf(why, sizeof why, "%s", detail);
		}
		return pd_errf(err, PD_EIO, "cannot reach the collector at %s (%s)", c->base, why);
	}
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		r->fail = PD_CLIENT_CONNECT;
		return pd_errf(err, PD_EIO, "cannot reach the collector at %s (%s)", c->base, detail);
	case CURLE_OPERATION_TIMEDOUT:
		r->fail = PD_CLIENT_TIMEOUT;
		fmt_dur(mb, sizeof mb, c->timeout_ns);
		return pd_errf(err, PD_EIO, "the collector at %s did not answer within %s", c->base, mb);
	default:
		r->fail = PD_CLIENT_NETWORK;
		return pd_errf(err, PD_EIO, "request to the collector at %s failed: %s", c->base, detail);
	}
}

int pd_client_get(struct pd_client *c, const char *path_query, size_t max_body, struct pd_client_resp *resp,
		  struct pd_err *err)
{
	return perform(c, path_query, NULL, 0, max_body, resp, err);
}

int pd_client_post(struct pd_client *c, const char *path_query, const void *body, size_t len, size_t max_body,
		   struct pd_client_resp *resp, struct pd_err *err)
{
	return perform(c, path_query, body ? body : "", len, max_body, resp, err);
}

static json_t *parse_json(const struct pd_client_resp *r)
{
	if (!r->body.len)
		return NULL;
	return json_loadb((const char *)r->body.ptr, r->body.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

int pd_client_json_body(const struct pd_client_resp *r, json_t **body, struct pd_err *err)
{
	*body = NULL;
	json_t *j = parse_json(r);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		size_t n = r->body.len < 120 ? r->body.len : 120;
		char *e = pd_term_escaped((const char *)r->body.ptr, n, false); /* the server's bytes, on a terminal */
		int rc = pd_errf(err, PD_EINVAL, "the collector's answer (HTTP %ld) is not API v0 JSON: %.*s", r->status,
				 e ? (int)strlen(e) : (int)n, e ? e : r->body.ptr ? (const char *)r->body.ptr : "");
		free(e);
		return rc;
	}
	json_t *b = json_object_get(j, "body");
	*body = b ? json_incref(b) : json_null();
	json_decref(j);
	return 0;
}

void pd_client_term_safe(json_t *v)
{
	if (json_is_string(v)) {
		char *e = pd_term_escaped(json_string_value(v), json_string_length(v), false);
		if (e)
			json_string_set(v, e);
		free(e);
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
			pd_client_term_safe(x);
	} else if (json_is_object(v)) {
		const char *k;
		json_t *x;
		void *tmp;
		json_object_foreach_safe(v, tmp, k, x)
		{
			pd_client_term_safe(x);
			char *e = pd_term_escaped(k, strlen(k), false);
			if (e) { /* the escaped key in its place (a key the same once escaped: the later one kept) */
				json_object_set(v, e, x);
				json_object_del(v, k);
			}
			free(e);
		}
	}
}

void pd_client_term_write(FILE *f, const char *s, size_t n)
{
	if (!n)
		return;
	char *e = pd_term_escaped(s, n, true);
	fwrite(e ? e : s, 1, e ? strlen(e) : n, f);
	free(e);
}

void pd_client_error(const struct pd_client_resp *r, char *buf, size_t n)
{
	json_t *j = r->json ? parse_json(r) : NULL;
	json_t *ej = j ? json_object_get(j, "error") : NULL;
	const char *e = json_string_value(ej);
	if (e && *e) { /* the server's text, printed on a terminal: escaped (an ESC, a forged line) */
		char *x = pd_term_escaped(e, json_string_length(ej), false);
		snprintf(buf, n, "%s", x ? x : e);
		free(x);
		json_decref(j);
		return;
	}
	json_decref(j);
	size_t o = 0;
	for (size_t i = 0; i < r->body.len && o + 1 < n && o < 200; i++) {
		unsigned char c = r->body.ptr[i];
		if (c == '\n' || c == '\r') {
			if (o)
				break;
			continue;
		}
		if (c < ' ' || c == 0x7f)
			continue;
		buf[o++] = (char)c;
	}
	if (n)
		buf[o < n ? o : n - 1] = 0;
	if (!o)
		snprintf(buf, n, "no message");
	char *x = n ? pd_term_escaped(buf, strlen(buf), false) : NULL; /* C1 controls, as UTF-8 */
	if (x)
		snprintf(buf, n, "%s", x);
	free(x);
}

bool pd_client_nothing_found(const struct pd_client_resp *r)
{
	if (r->status != 404)
		return false;
	json_t *j = parse_json(r);
	const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;
	bool nf = e && !strcmp(e, "nothing found");
	json_decref(j);
	return nf;
}

const char *pd_client_format_time(int64_t ns, char *buf, size_t n)
{
	int64_t sec = ns / 1000000000;
	long nsec = (long)(ns % 1000000000);
	if (nsec < 0) {
		nsec += 1000000000;
		sec--;
	}
	time_t t = (time_t)sec;
	struct tm tm;
	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, n, "%lld", (long long)sec);
		return buf;
	}
	char ts[40];
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, n, "%s.%09ld", ts, nsec);
	return buf;
}

static int param(struct pd_buf *b, const char *key, const char *val)
{
	return pd_buf_append(b, b->len && memchr(b->ptr, '?', b->len) ? "&" : "?", 1) ||
	       pd_buf_append(b, key, strlen(key)) || pd_buf_append(b, "=", 1) || pd_scrape_query_escape(val, b);
}

/* "labels=k=v,k2=v2" (nothing without labels) */
static int labels_param(struct pd_buf *b, const struct pd_kv *labels, size_t nlabels)
{
	if (!nlabels)
		return 0;
	struct pd_buf lv = PD_BUF_INIT(0);
	int rc = pd_scrape_labels_value(labels, nlabels, &lv) || pd_buf_append(&lv, "", 1) ||
		 param(b, "labels", (const char *)lv.ptr);
	pd_buf_free(&lv);
	return rc;
}

/* The path in b, NUL-terminated, or (rc set or out of memory) NULL and b freed. */
static char *path_done(struct pd_buf *b, int rc)
{
	if (rc || pd_buf_append(b, "", 1)) {
		pd_buf_free(b);
		return NULL;
	}
	return (char *)b->ptr;
}

char *pd_client_query_path(const char *path, const struct pd_client_query *q)
{
	struct pd_buf b = PD_BUF_INIT(0);
	char from[48], to[48], lim[32];
	pd_client_format_time(q->from_ns, from, sizeof from);
	pd_client_format_time(q->to_ns, to, sizeof to);
	int rc = pd_buf_append(&b, path, strlen(path)) || param(&b, "service", q->service ? q->service : "");
	if (!rc && q->type)
		rc = param(&b, "type", q->type);
	if (!rc)
		rc = param(&b, "from", from) || param(&b, "to", to);
	if (!rc)
		rc = labels_param(&b, q->labels, q->nlabels);
	if (!rc && q->limit > 0) {
		snprintf(lim, sizeof lim, "%ld", q->limit);
		rc = param(&b, "limit", lim);
	}
	return path_done(&b, rc);
}

char *pd_client_post_path(const char *service, const char *type, const struct pd_kv *labels, size_t nlabels,
			  const int64_t *created_ns)
{
	struct pd_buf b = PD_BUF_INIT(0);
	char at[48];
	int rc = pd_buf_append(&b, "/api/0/profiles", 15) || param(&b, "service", service) || param(&b, "type", type) ||
		 labels_param(&b, labels, nlabels);
	if (!rc && created_ns)
		rc = param(&b, "created_at", pd_client_format_time(*created_ns, at, sizeof at));
	return path_done(&b, rc);
}
