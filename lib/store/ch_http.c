/*
 * ch_http.c — ClickHouse's HTTP interface over libcurl (ch.h).
 *
 * One easy handle per request in flight, taken from an idle pool and put
 * back afterwards (keep-alive connections are per handle); requests never
 * wait for each other here.
 */
#define _GNU_SOURCE
#include "ch.h"

#include "../util/pdcurl.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CH_MAX_POOL 64
#define CH_ERR_BODY 4096 /* bytes of an error answer kept */

struct pd_ch {
	char *base;  /* scheme://host:port/ */
	char *where; /* for messages */
	char *database;
	char *userpwd; /* "user:password" or NULL */
	struct pd_ch_opts o;
	char *cacert;
	pthread_mutex_t mu;
	CURL *idle[CH_MAX_POOL];
	size_t nidle;
};

void pd_ch_url_free(struct pd_ch_url *u)
{
	free(u->user), free(u->password), free(u->host), free(u->database), free(u->cluster);
	memset(u, 0, sizeof *u);
}

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* %XX decoding of a URL part into a new string; NULL on a bad escape or OOM */
static char *unescape(const char *s, size_t n, bool *bad)
{
	char *d = malloc(n + 1);
	size_t o = 0;
	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			d[o++] = s[i];
			continue;
		}
		char hx[3] = {0};
		if (i + 2 >= n) {
			*bad = true;
			free(d);
			return NULL;
		}
		hx[0] = s[i + 1], hx[1] = s[i + 2];
		char *e;
		long v = strtol(hx, &e, 16);
		if (*e || !hx[0] || !hx[1] || v == 0) {
			*bad = true;
			free(d);
			return NULL;
		}
		d[o++] = (char)v;
		i += 2;
	}
	d[o] = 0;
	return d;
}

static bool name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

int pd_ch_url_parse(const char *url, struct pd_ch_url *out, struct pd_err *err)
{
	static const char pre[] = "clickhouse://";
	memset(out, 0, sizeof *out);
	const char *want =
	    "want clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE[?cluster=NAME&insert_quorum=N&secure=1]";
	if (strncasecmp(url, pre, sizeof pre - 1))
		return pd_errf(err, PD_EUSAGE, "store URL: %s", want);
	const char *p = url + sizeof pre - 1;
	const char *slash = strchr(p, '/');
	if (!slash)
		return pd_errf(err, PD_EUSAGE, "store URL: no /DATABASE; %s", want);
	const char *at = memrchr(p, '@', (size_t)(slash - p));
	bool bad = false;
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		const char *ue = colon ? colon : at;
		out->user = unescape(p, (size_t)(ue - p), &bad);
		if (colon && !bad)
			out->password = unescape(colon + 1, (size_t)(at - colon - 1), &bad);
		if (bad || !out->user || (colon && !out->password)) {
			pd_ch_url_free(out);
			return pd_errf(err, bad ? PD_EUSAGE : PD_ENOMEM, "store URL: %s in the user or password",
			               bad ? "a bad %-escape" : "out of memory");
		}
		p = at + 1;
	}
	const char *hend = slash, *portp = NULL;
	if (*p == '[') { /* [IPv6]:port */
		const char *rb = memchr(p, ']', (size_t)(slash - p));
		if (!rb) {
			pd_ch_url_free(out);
			return pd_errf(err, PD_EUSAGE, "store URL: unclosed [ in the host");
		}
		if (rb + 1 < slash && rb[1] == ':')
			portp = rb + 2;
		else if (rb + 1 != slash) {
			pd_ch_url_free(out);
			return pd_errf(err, PD_EUSAGE, "store URL: bad host; %s", want);
		}
		hend = rb + 1;
	} else {
		const char *c = memchr(p, ':', (size_t)(slash - p));
		if (c)
			portp = c + 1, hend = c;
	}
	if (hend == p) {
		pd_ch_url_free(out);
		return pd_errf(err, PD_EUSAGE, "store URL: no host; %s", want);
	}
	out->host = dupn(p, (size_t)(hend - p));
	out->port = 0;
	if (portp) {
		long v = 0;
		const char *q = portp;
		while (q < slash && *q >= '0' && *q <= '9' && v <= 65535)
			v = v * 10 + (*q++ - '0');
		if (q != slash || q == portp || v < 1 || v > 65535) {
			pd_ch_url_free(out);
			return pd_errf(err, PD_EUSAGE, "store URL: the port must be 1..65535; %s", want);
		}
		out->port = (int)v;
	}
	const char *db = slash + 1, *qm = strchr(db, '?');
	size_t dn = qm ? (size_t)(qm - db) : strlen(db);
	out->database = dupn(db, dn);
	if (!out->host || !out->database) {
		pd_ch_url_free(out);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (!name_ok(out->database)) {
		pd_ch_url_free(out);
		return pd_errf(err, PD_EUSAGE, "store URL: the database must be a name of [A-Za-z0-9_]; %s", want);
	}
	for (const char *q = qm ? qm + 1 : NULL; q && *q;) {
		const char *amp = strchr(q, '&'), *e = amp ? amp : q + strlen(q);
		const char *eq = memchr(q, '=', (size_t)(e - q));
		size_t kn = eq ? (size_t)(eq - q) : (size_t)(e - q);
		char *v = eq ? dupn(eq + 1, (size_t)(e - eq - 1)) : dupn("", 0);
		if (!v) {
			pd_ch_url_free(out);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		if (kn == 7 && !strncmp(q, "cluster", 7) && name_ok(v)) {
			free(out->cluster);
			out->cluster = v;
		} else if (kn == 13 && !strncmp(q, "insert_quorum", 13) && v[0] >= '1' && v[0] <= '9' &&
		           (!v[1] || (v[0] == '1' && v[1] >= '0' && v[1] <= '6' && !v[2]))) {
			out->insert_quorum = atoi(v);
			free(v);
		} else if (kn == 6 && !strncmp(q, "secure", 6) &&
		           (!strcmp(v, "1") || !strcmp(v, "0") || !strcmp(v, "true") || !strcmp(v, "false"))) {
			out->secure = v[0] == '1' || v[0] == 't';
			free(v);
		} else {
			pd_errf(err, PD_EUSAGE,
			        "store URL: unknown or bad parameter \"%.*s\" (known: cluster=NAME of [A-Za-z0-9_], "
			        "insert_quorum=1..16, secure=1)",
			        (int)(e - q), q);
			free(v);
			pd_ch_url_free(out);
			return PD_EUSAGE;
		}
		q = amp ? amp + 1 : e;
	}
	if (!out->port)
		out->port = out->secure ? 8443 : 8123;
	return 0;
}

int pd_ch_open(const struct pd_ch_url *u, const struct pd_ch_opts *o, struct pd_ch **out, struct pd_err *err)
{
	*out = NULL;
	CURLcode g = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (g != CURLE_OK)
		return pd_errf(err, PD_EIO, "libcurl: %s", curl_easy_strerror(g));
	struct pd_ch *c = calloc(1, sizeof *c);
	if (!c)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->o = *o;
	if (!c->o.timeout_ms)
		c->o.timeout_ms = 30000;
	const char *sch = u->secure ? "https" : "http";
	bool ok = asprintf(&c->base, "%s://%s:%d/", sch, u->host, u->port) >= 0 &&
	          asprintf(&c->where, "%s://%s:%d/%s", sch, u->host, u->port, u->database) >= 0 &&
	          (c->database = strdup(u->database)) != NULL &&
	          (!u->user || asprintf(&c->userpwd, "%s:%s", u->user, u->password ? u->password : "") >= 0) &&
	          (!o->cacert || (c->cacert = strdup(o->cacert)) != NULL);
	if (!ok) {
		pd_ch_close(c);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	c->o.cacert = c->cacert;
	*out = c;
	return 0;
}

void pd_ch_close(struct pd_ch *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nidle; i++)
		curl_easy_cleanup(c->idle[i]);
	pthread_mutex_destroy(&c->mu);
	free(c->base), free(c->where), free(c->database), free(c->cacert);
	if (c->userpwd) {
		explicit_bzero(c->userpwd, strlen(c->userpwd));
		free(c->userpwd);
	}
	free(c);
}

const char *pd_ch_where(const struct pd_ch *c)
{
	return c->where;
}
const char *pd_ch_database(const struct pd_ch *c)
{
	return c->database;
}

static CURL *take(struct pd_ch *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->nidle)
		h = c->idle[--c->nidle];
	pthread_mutex_unlock(&c->mu);
	return h ? h : curl_easy_init();
}

static void give(struct pd_ch *c, CURL *h)
{
	pthread_mutex_lock(&c->mu);
	if (c->nidle < CH_MAX_POOL) {
		c->idle[c->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (h)
		curl_easy_cleanup(h);
}

struct sink {
	struct pd_buf *b;
	bool over;
	bool head; /* keep the first b->max bytes, read the rest: an answer only for its error text */
};

static size_t on_data(char *p, size_t sz, size_t nm, void *ctx)
{
	struct sink *s = ctx;
	size_t n = sz * nm;
	if (s->b->max && s->b->len + n > s->b->max) {
		if (s->head) { /* a proxy's error page of 10 KB is still its status, not an answer too large */
			size_t room = s->b->max - s->b->len;
			return !room || !pd_buf_append(s->b, p, room) ? n : 0;
		}
		s->over = true;
		return 0;
	}
	return pd_buf_append(s->b, p, n) ? 0 : n;
}

/* The first line of ClickHouse's error text, without the stack trace. */
static void err_text(const struct pd_buf *b, char *out, size_t cap)
{
	size_t n = b->len;
	const char *p = (const char *)b->ptr;
	const char *nl = p ? memchr(p, '\n', n) : NULL;
	if (nl)
		n = (size_t)(nl - p);
	const char *st = p ? memmem(p, n, ", Stack trace", 13) : NULL;
	if (st)
		n = (size_t)(st - p);
	if (n >= cap)
		n = cap - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = (p[i] >= ' ' && p[i] != 0x7f) ? p[i] : ' ';
	out[n] = 0;
}

/* What ClickHouse's exception code says of the error (else dflt): the
 * server's or the cluster's state, not the query's fault, is "try again"
 * (503: agents retry); a full disk is 507, as on the embedded store. */
static int code_error(int code, int dflt)
{
	switch (code) {
	case 159: /* TIMEOUT_EXCEEDED */
	case 202: /* TOO_MANY_SIMULTANEOUS_QUERIES */
	case 203: /* NO_FREE_CONNECTION */
	case 209: /* SOCKET_TIMEOUT */
	case 210: /* NETWORK_ERROR */
	case 236: /* ABORTED */
	case 241: /* MEMORY_LIMIT_EXCEEDED */
	case 242: /* TABLE_IS_READ_ONLY */
	case 252: /* TOO_MANY_PARTS */
	case 279: /* ALL_CONNECTION_TRIES_FAILED: a shard down */
	case 285: /* TOO_FEW_LIVE_REPLICAS */
	case 286: /* UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE */
	case 319: /* UNKNOWN_STATUS_OF_INSERT */
	case 394: /* QUERY_WAS_CANCELLED: a server shutting down */
	case 425: /* SYSTEM_ERROR */
	case 439: /* CANNOT_SCHEDULE_TASK */
	case 999: /* KEEPER_EXCEPTION */ return PD_EUNAVAIL;
	case 243: /* NOT_ENOUGH_SPACE */ return PD_ENOSPC;
	default: return dflt;
	}
}

int pd_ch_query(struct pd_ch *c, const char *sql, const void *data, size_t n, const char *settings, struct pd_buf *out,
                struct pd_err *err)
{
	return pd_ch_query_to(c, sql, data, n, settings, out, 0, err);
}

struct ext {
	const char *name, *structure;
	const void *data;
	size_t n;
};

static int run(struct pd_ch *c, const char *sql, const void *data, size_t n, const struct ext *x, const char *settings,
               struct pd_buf *out, long timeout_ms, struct pd_err *err);

int pd_ch_query_to(struct pd_ch *c, const char *sql, const void *data, size_t n, const char *settings,
                   struct pd_buf *out, long timeout_ms, struct pd_err *err)
{
	return run(c, sql, data, n, NULL, settings, out, timeout_ms, err);
}

int pd_ch_query_ext(struct pd_ch *c, const char *sql, const char *name, const char *structure, const void *data,
                    size_t n, const char *settings, struct pd_buf *out, struct pd_err *err)
{
	struct ext x = {name, structure, data, n};
	return run(c, sql, NULL, 0, &x, settings, out, 0, err);
}

static int run(struct pd_ch *c, const char *sql, const void *data, size_t n, const struct ext *x, const char *settings,
               struct pd_buf *out, long timeout_ms, struct pd_err *err)
{
	CURL *h = take(c);
	if (!h)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	curl_easy_reset(h);
	struct pd_buf url = PD_BUF_INIT(0), errb = PD_BUF_INIT(CH_ERR_BODY);
	int rc = pd_buf_appendf(&url, "%s?database=%s", c->base, c->database);
	if (!rc && settings && *settings)
		rc = pd_buf_appendf(&url, "&%s", settings);
	if (!rc && (data || x)) {
		char *q = curl_easy_escape(h, sql, (int)strlen(sql));
		rc = q ? pd_buf_appendf(&url, "&query=%s", q) : PD_ENOMEM;
		curl_free(q);
	}
	if (!rc && x) {
		char *st = curl_easy_escape(h, x->structure, (int)strlen(x->structure));
		rc =
		    st ? pd_buf_appendf(&url, "&%s_structure=%s&%s_format=RowBinary", x->name, st, x->name) : PD_ENOMEM;
		curl_free(st);
	}
	if (rc || pd_buf_append(&url, "", 1)) {
		pd_buf_free(&url);
		give(c, h);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (out)
		out->len = 0;
	struct pd_buf *dst = out ? out : &errb;
	struct sink sk = {dst, false, dst == &errb};
	char ebuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	hdrs = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
	curl_easy_setopt(h, CURLOPT_URL, (const char *)url.ptr);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_mime *mime = NULL;
	if (x) { /* the rows as a file part: ClickHouse's external data */
		curl_mimepart *part;
		if (!(mime = curl_mime_init(h)) || !(part = curl_mime_addpart(mime)) ||
		    curl_mime_name(part, x->name) != CURLE_OK || curl_mime_filename(part, x->name) != CURLE_OK ||
		    curl_mime_data(part, x->data, x->n) != CURLE_OK) {
			curl_mime_free(mime);
			curl_slist_free_all(hdrs);
			pd_buf_free(&url);
			give(c, h);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
	} else {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, data ? data : (const void *)sql);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(data ? n : strlen(sql)));
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sk);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	long tmo = timeout_ms ? timeout_ms : c->o.timeout_ms;
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, tmo < 5000 ? tmo : 5000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (c->userpwd) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
	}
	if (c->o.cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->o.cacert);
	if (c->o.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	CURLcode cc = hdrs ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_mime_free(mime);
	pd_buf_free(&url);
	if (cc != CURLE_OK) {
		if (sk.over)
			rc = pd_errf(err, PD_ELIMIT, "ClickHouse at %s: the answer is over %zu bytes", c->where,
			             dst->max);
		else
			rc = pd_errf(err, PD_EUNAVAIL, "ClickHouse at %s: %s", c->where,
			             ebuf[0] ? ebuf : curl_easy_strerror(cc));
		/* a handle whose transfer failed may hold a broken connection */
		curl_easy_cleanup(h);
		pd_buf_free(&errb);
		return rc;
	}
	give(c, h);
	if (status != 200) {
		char t[600];
		err_text(dst, t, sizeof t);
		/* 5xx other than a query's own exception (500 with "Code: ") is
		 * the server's state, not ours: try again later */
		bool sql_err = !strncmp(t, "Code: ", 6);
		rc = pd_errf(err,
		             sql_err && status < 502 ? PD_EIO
		             : status >= 500         ? PD_EUNAVAIL
		                                     : PD_EIO,
		             "ClickHouse at %s: HTTP %ld: %s", c->where, status, t[0] ? t : "(no text)");
		if (sql_err)
			err->code = rc = code_error(atoi(t + 6), rc);
	}
	if (out == NULL)
		pd_buf_free(&errb);
	return rc;
}

/* ---- SQL text ---- */

int pd_ch_lit(struct pd_buf *b, const void *s, size_t n)
{
	/* every byte as \xHH: one literal (not a function call: an IN list of
	 * them stays within max_ast_elements), nothing left to interpret */
	static const char hx[] = "0123456789ABCDEF";
	if (pd_buf_reserve(b, 4 * n + 2))
		return PD_ENOMEM;
	uint8_t *o = b->ptr + b->len;
	*o++ = '\'';
	for (size_t i = 0; i < n; i++) {
		uint8_t c = ((const uint8_t *)s)[i];
		*o++ = '\\', *o++ = 'x';
		*o++ = (uint8_t)hx[c >> 4];
		*o++ = (uint8_t)hx[c & 15];
	}
	*o++ = '\'';
	b->len = (size_t)(o - b->ptr);
	return 0;
}

int pd_ch_lit_s(struct pd_buf *b, const char *s)
{
	return pd_ch_lit(b, s, strlen(s));
}

/* ---- RowBinary ---- */

int pd_rb_u8(struct pd_buf *b, uint8_t v)
{
	return pd_buf_append(b, &v, 1);
}
int pd_rb_u16(struct pd_buf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	return pd_buf_append(b, x, 2);
}
int pd_rb_u64(struct pd_buf *b, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	return pd_buf_append(b, x, 8);
}
int pd_rb_len(struct pd_buf *b, uint64_t n)
{
	uint8_t x[10];
	size_t k = 0;
	do {
		x[k] = (uint8_t)(n & 0x7f);
		n >>= 7;
		if (n)
			x[k] |= 0x80;
		k++;
	} while (n);
	return pd_buf_append(b, x, k);
}
int pd_rb_str(struct pd_buf *b, const void *s, size_t n)
{
	return pd_rb_len(b, n) || pd_buf_append(b, s, n) ? PD_ENOMEM : 0;
}
int pd_rb_fixed(struct pd_buf *b, const void *s, size_t n)
{
	return pd_buf_append(b, s, n);
}

static bool need(struct pd_rb_rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}
uint8_t pd_rb_get_u8(struct pd_rb_rd *r)
{
	return need(r, 1) ? *r->p++ : 0;
}
uint16_t pd_rb_get_u16(struct pd_rb_rd *r)
{
	if (!need(r, 2))
		return 0;
	uint16_t v = (uint16_t)(r->p[0] | r->p[1] << 8);
	r->p += 2;
	return v;
}
uint64_t pd_rb_get_u64(struct pd_rb_rd *r)
{
	if (!need(r, 8))
		return 0;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | r->p[i];
	r->p += 8;
	return v;
}
uint64_t pd_rb_get_len(struct pd_rb_rd *r)
{
	uint64_t v = 0;
	for (int s = 0; s < 64; s += 7) {
		if (!need(r, 1))
			return 0;
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}
const uint8_t *pd_rb_get_str(struct pd_rb_rd *r, size_t *n)
{
	uint64_t len = pd_rb_get_len(r);
	if (!need(r, len)) {
		*n = 0;
		return (const uint8_t *)"";
	}
	const uint8_t *s = r->p;
	r->p += len;
	*n = (size_t)len;
	return s;
}
void pd_rb_get_fixed(struct pd_rb_rd *r, void *out, size_t n)
{
	if (!need(r, n)) {
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->p, n);
	r->p += n;
}
