/*
 * target.c — what the scraper pulls and how it names it: the seven Go
 * profile types, target lists (the seam between discovery sources and the
 * scheduler), target URLs, the static config file in its line format (the
 * YAML format is scrape_config.c), profefe's URL escaping of the ingest request,
 * and Go's "cpu profiling already in use" answer. Pure functions, no I/O.
 */
#define _GNU_SOURCE
#include "scrape.h"
#include "../pprof/ptype.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define type_names pd_ptype_names /* the scraped types are the table's first PD_ST_N */
_Static_assert((int)PD_ST_N == (int)PD_PT_OTHER && (int)PD_ST_CPU == (int)PD_PT_CPU &&
		       (int)PD_ST_THREADCREATE == (int)PD_PT_THREADCREATE,
	       "the scraper's types are the profile type table's, in its order");
static const char *const type_kinds[PD_ST_N] = {"cpu",         "heap",      "allocs",      "block/mutex",
						"block/mutex", "goroutine", "threadcreate"};

const char *pd_scrape_type_name(int t) { return t >= 0 && t < PD_ST_N ? type_names[t] : NULL; }
const char *pd_scrape_type_kind(int t) { return t >= 0 && t < PD_ST_N ? type_kinds[t] : NULL; }
bool pd_scrape_type_cumulative(int t) { return t == PD_ST_ALLOCS || t == PD_ST_BLOCK || t == PD_ST_MUTEX; }

bool pd_scrape_kind_ok(int t, const char *kind)
{
	const char *want = pd_scrape_type_kind(t);
	if (!want || !kind)
		return false;
	if (!strcmp(kind, want))
		return true;
	/* Go's legacy text (?debug=1) is the same format for heap and allocs, and
	 * profile.Parse gives it no default sample type: it reads as heap */
	return t == PD_ST_ALLOCS && !strcmp(kind, "heap");
}

int pd_scrape_parse_types(const char *s, unsigned *mask, struct pd_err *err)
{
	*mask = 0;
	const char *p = s;
	while (*p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *e = p;
		while (*e && *e != ',')
			e++;
		size_t n = (size_t)(e - p);
		while (n && isspace((unsigned char)p[n - 1]))
			n--;
		int t = -1;
		for (int i = 0; i < PD_ST_N; i++)
			if (strlen(type_names[i]) == n && !memcmp(type_names[i], p, n))
				t = i;
		if (t >= 0)
			*mask |= 1u << t;
		else if (n == 3 && !memcmp(p, "all", 3))
			*mask |= PD_ST_ALL;
		else
			return pd_errf(err, PD_EUSAGE,
				       "unknown profile type \"%.*s\" (valid: cpu, heap, allocs, block, mutex, goroutine, "
				       "threadcreate, all)",
				       (int)(n > 64 ? 64 : n), p);
		p = e;
	}
	if (!*mask)
		return pd_errf(err, PD_EUSAGE,
			       "no profile type given (valid: cpu, heap, allocs, block, mutex, goroutine, threadcreate, all)");
	return 0;
}

const char *pd_scrape_types_str(unsigned mask, char *buf, size_t n)
{
	size_t o = 0;
	if (n)
		buf[0] = 0;
	for (int t = 0; t < PD_ST_N; t++)
		if (mask & (1u << t)) {
			int w = snprintf(buf + o, n - o, "%s%s", o ? "," : "", type_names[t]);
			if (w < 0 || (size_t)w >= n - o)
				break;
			o += (size_t)w;
		}
	return buf;
}

/* ---- targets ---------------------------------------------------------------------------- */

static void target_clear(struct pd_scrape_target *t)
{
	free(t->key);
	free(t->name);
	free(t->url);
	free(t->service);
	for (size_t i = 0; i < t->nlabels; i++) {
		free(t->labels[i].key);
		free(t->labels[i].value);
	}
	free(t->labels);
	memset(t, 0, sizeof *t);
}

/* Append a copy, the key unchecked. */
static int append(struct pd_scrape_targets *l, const char *key, const char *url, const char *service,
		  const struct pd_kv *labels, size_t nlabels, unsigned types, struct pd_err *err)
{
	if (pd_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	struct pd_scrape_target *t = &l->v[l->n];
	memset(t, 0, sizeof *t);
	t->key = strdup(key);
	t->url = strdup(url);
	t->service = strdup(service);
	t->labels = nlabels ? calloc(nlabels, sizeof *t->labels) : NULL;
	t->types = types & PD_ST_ALL;
	bool ok = t->key && t->url && t->service && (!nlabels || t->labels);
	for (size_t i = 0; ok && i < nlabels; i++) {
		t->labels[i].key = strdup(labels[i].key);
		t->labels[i].value = strdup(labels[i].value ? labels[i].value : "");
		t->nlabels = i + 1;
		ok = t->labels[i].key && t->labels[i].value;
	}
	if (!ok) {
		target_clear(t);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	l->n++;
	return 0;
}

int pd_scrape_targets_add(struct pd_scrape_targets *l, const char *key, const char *url, const char *service,
			  const struct pd_kv *labels, size_t nlabels, unsigned types, struct pd_err *err)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].key, key))
			return pd_errf(err, PD_EINVAL, "target \"%s\" given twice", key);
	return append(l, key, url, service, labels, nlabels, types, err);
}

int pd_scrape_targets_set_name(struct pd_scrape_targets *l, size_t i, const char *name, struct pd_err *err)
{
	if (i >= l->n)
		return pd_errf(err, PD_EINVAL, "no target %zu", i);
	char *n = NULL;
	if (name && !(n = strdup(name)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	free(l->v[i].name);
	l->v[i].name = n;
	return 0;
}

const char *pd_scrape_target_name(const struct pd_scrape_target *t) { return t->name ? t->name : t->key; }

int pd_scrape_targets_set_sched(struct pd_scrape_targets *l, size_t i, int64_t interval_ns, int64_t cpu_ns,
				int64_t timeout_ns, struct pd_err *err)
{
	if (i >= l->n)
		return pd_errf(err, PD_EINVAL, "no target %zu", i);
	if (interval_ns && interval_ns < 1000000000LL)
		return pd_errf(err, PD_EUSAGE, "interval must be at least 1s");
	if (cpu_ns && (cpu_ns < 1000000000LL || cpu_ns % 1000000000LL))
		return pd_errf(err, PD_EUSAGE, "cpu_duration must be whole seconds, at least 1s");
	if (timeout_ns && timeout_ns < 1000000LL)
		return pd_errf(err, PD_EUSAGE, "timeout must be at least 1ms");
	l->v[i].interval_ns = interval_ns;
	l->v[i].cpu_ns = cpu_ns;
	l->v[i].timeout_ns = timeout_ns;
	return 0;
}

static int copy(struct pd_scrape_targets *l, const struct pd_scrape_target *t, bool check, struct pd_err *err)
{
	int rc = check ? pd_scrape_targets_add(l, t->key, t->url, t->service, t->labels, t->nlabels, t->types, err)
		       : append(l, t->key, t->url, t->service, t->labels, t->nlabels, t->types, err);
	if (rc)
		return rc;
	struct pd_scrape_target *d = &l->v[l->n - 1];
	d->interval_ns = t->interval_ns;
	d->cpu_ns = t->cpu_ns;
	d->timeout_ns = t->timeout_ns;
	if (t->name && (rc = pd_scrape_targets_set_name(l, l->n - 1, t->name, err))) {
		target_clear(d);
		l->n--;
	}
	return rc;
}

int pd_scrape_targets_copy(struct pd_scrape_targets *l, const struct pd_scrape_target *t, struct pd_err *err)
{
	return copy(l, t, true, err);
}

int pd_scrape_targets_append(struct pd_scrape_targets *l, const struct pd_scrape_target *t, struct pd_err *err)
{
	return copy(l, t, false, err);
}

struct keyctx {
	const struct pd_scrape_targets *l;
	const char *key;
};
static bool key_eq(void *ctx, uint32_t i)
{
	const struct keyctx *k = ctx;
	return !strcmp(k->l->v[i].key, k->key);
}

int pd_scrape_targets_check_unique(const struct pd_scrape_targets *l, struct pd_err *err)
{
	struct pd_hidx idx = {0};
	int rc = 0;
	if (l->n > UINT32_MAX - 1)
		return pd_errf(err, PD_ELIMIT, "%zu targets, too many", l->n);
	if (pd_hidx_init(&idx, l->n + 1))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < l->n; i++) {
		const char *key = l->v[i].key;
		uint64_t h = pd_hash(key, strlen(key), 0);
		struct keyctx kc = {l, key};
		if (pd_hidx_find(&idx, h, key_eq, &kc) != UINT32_MAX)
			rc = pd_errf(err, PD_EINVAL, "target \"%s\" given twice", key);
		else if (pd_hidx_insert(&idx, h, (uint32_t)i))
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
	}
	pd_hidx_free(&idx);
	return rc;
}

size_t pd_scrape_labels_keep(struct pd_kv *v, size_t n, char *const *keep, size_t nkeep)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		bool kept = false;
		for (size_t k = 0; !kept && k < nkeep; k++)
			kept = !strcmp(v[i].key, keep[k]);
		if (kept)
			v[w++] = v[i];
	}
	return w;
}

void pd_scrape_targets_free(struct pd_scrape_targets *l)
{
	for (size_t i = 0; i < l->n; i++)
		target_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* A target's query: no seconds= (the scraper sets it for cpu, from
 * --cpu-duration; Go's other handlers would take it for a delta over that
 * many seconds, which the request's timeout does not allow for). */
static bool query_ok(const char *q, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t e = i;
		while (e < n && q[e] != '&')
			e++;
		if (e - i >= 8 && !memcmp(q + i, "seconds=", 8))
			return false;
		if (e - i == 7 && !memcmp(q + i, "seconds", 7))
			return false;
		i = e + 1;
	}
	return true;
}

int pd_scrape_normalize_url(const char *in, char **out, struct pd_err *err)
{
	*out = NULL;
	while (isspace((unsigned char)*in))
		in++;
	size_t n = strlen(in);
	while (n && isspace((unsigned char)in[n - 1]))
		n--;
	if (!n)
		return pd_errf(err, PD_EUSAGE, "empty target URL");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)in[i] <= ' ' || in[i] == 0x7f)
			return pd_errf(err, PD_EUSAGE, "target URL \"%.*s\" contains white space or a control byte", (int)n, in);
	const char *scheme = "http://";
	const char *rest = in;
	const char *sep = strstr(in, "://");
	if (sep && (size_t)(sep - in) < n) {
		size_t sl = (size_t)(sep - in);
		if (!(sl == 4 && !strncasecmp(in, "http", 4)) && !(sl == 5 && !strncasecmp(in, "https", 5)))
			return pd_errf(err, PD_EUSAGE, "target URL \"%.*s\": only http:// and https:// are supported", (int)n,
				       in);
		scheme = sl == 4 ? "http://" : "https://";
		rest = sep + 3;
	}
	size_t rn = n - (size_t)(rest - in);
	const char *slash = memchr(rest, '/', rn);
	size_t hostlen = slash ? (size_t)(slash - rest) : rn;
	if (!hostlen)
		return pd_errf(err, PD_EUSAGE, "target URL \"%.*s\" has no host", (int)n, in);
	if (memchr(rest, '#', rn))
		return pd_errf(err, PD_EUSAGE,
			       "target URL \"%.*s\": want the base of the pprof endpoints (e.g. "
			       "http://host:6060/debug/pprof), without a fragment (#)",
			       (int)n, in);
	/* a query (?debug=1) is kept and sent with every type's request */
	const char *q = memchr(rest, '?', rn);
	size_t qlen = q ? rn - (size_t)(q - rest) : 0;
	if (q && hostlen > (size_t)(q - rest))
		hostlen = (size_t)(q - rest); /* host:port?debug=1 */
	if (!hostlen)
		return pd_errf(err, PD_EUSAGE, "target URL \"%.*s\" has no host", (int)n, in);
	if (q && !query_ok(q + 1, qlen - 1))
		return pd_errf(err, PD_EUSAGE,
			       "target URL \"%.*s\": seconds= is the scraper's own parameter (--cpu-duration), not the "
			       "target's",
			       (int)n, in);
	size_t pathlen = rn - hostlen - qlen;
	if (qlen == 1)
		qlen = 0; /* a bare '?' */
	const char *path = rest + hostlen;
	while (pathlen && path[pathlen - 1] == '/')
		pathlen--;
	const char *dflt = pathlen ? "" : "/debug/pprof";
	size_t cap = strlen(scheme) + hostlen + pathlen + strlen(dflt) + qlen + 1;
	char *u = malloc(cap);
	if (!u)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	snprintf(u, cap, "%s%.*s%.*s%s%.*s", scheme, (int)hostlen, rest, (int)pathlen, path, dflt, (int)qlen,
		 qlen ? q : "");
	*out = u;
	return 0;
}

const char *pd_scrape_url_hostport(const char *url, char *buf, size_t n)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	size_t l = strcspn(p, "/?#");
	const char *at = memchr(p, '@', l); /* user:pass@ is not part of it */
	if (at) {
		l -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	snprintf(buf, n, "%.*s", (int)l, p);
	return buf;
}

char *pd_scrape_type_url(const char *base, int type, long cpu_seconds)
{
	char *u = NULL;
	/* BASE?QUERY: the query goes after the type's path, after seconds= for cpu */
	const char *q = strchr(base, '?');
	int bl = q ? (int)(q - base) : (int)strlen(base);
	const char *qs = q && q[1] ? q + 1 : "";
	int r = type == PD_ST_CPU ? asprintf(&u, "%.*s/profile?seconds=%ld%s%s", bl, base, cpu_seconds, *qs ? "&" : "", qs)
				  : asprintf(&u, "%.*s/%s%s%s", bl, base, pd_scrape_type_name(type), *qs ? "?" : "", qs);
	return r < 0 ? NULL : u;
}

/* ---- the static config file ------------------------------------------------------------- */

int pd_scrape_parse_config(const char *text, const char *name, const char *default_service,
			   const struct pd_kv *default_labels, size_t ndefault, struct pd_scrape_targets *l,
			   struct pd_err *err)
{
	int rc = 0;
	char *copy = strdup(text);
	struct pd_kv *labels = NULL;
	size_t cap = 0;
	if (!copy)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	unsigned lineno = 0;
	char *save = NULL;
	for (char *line = copy, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *url = strtok_r(line, " \t\r", &save);
		if (!url)
			continue;
		char *norm = NULL;
		if ((rc = pd_scrape_normalize_url(url, &norm, err))) {
			pd_err_prefix(err, "%s:%u", name, lineno);
			goto out;
		}
		const char *service = default_service;
		unsigned types = 0;
		size_t nl = 0;
		if (pd_grow((void **)&labels, &cap, ndefault + 1, sizeof *labels)) {
			free(norm);
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < ndefault; i++)
			labels[nl++] = default_labels[i];
		for (char *w; (w = strtok_r(NULL, " \t\r", &save));) {
			char *eq = strchr(w, '=');
			if (!eq || eq == w) {
				free(norm);
				rc = pd_errf(err, PD_EUSAGE, "%s:%u: \"%s\": want key=value (service=, types= or a label)",
					     name, lineno, w);
				goto out;
			}
			*eq = 0;
			/* a word's key once per line; a line's label replaces a default's (-L) */
			bool twice = (!strcmp(w, "service") && service != default_service) ||
				     (!strcmp(w, "types") && types);
			size_t at = nl;
			for (size_t i = 0; i < nl; i++)
				if (!strcmp(labels[i].key, w))
					at = i;
			if (twice || (at < nl && at >= ndefault)) {
				free(norm);
				rc = pd_errf(err, PD_EUSAGE, "%s:%u: %s= given twice", name, lineno, w);
				goto out;
			}
			if (!strcmp(w, "service")) {
				service = eq + 1;
			} else if (!strcmp(w, "types")) {
				if ((rc = pd_scrape_parse_types(eq + 1, &types, err))) {
					free(norm);
					pd_err_prefix(err, "%s:%u", name, lineno);
					goto out;
				}
			} else if (at < nl) { /* over -L's value, at its place */
				labels[at].value = eq + 1;
			} else {
				if (pd_grow((void **)&labels, &cap, nl + 1, sizeof *labels)) {
					free(norm);
					rc = pd_errf(err, PD_ENOMEM, "out of memory");
					goto out;
				}
				labels[nl].key = w;
				labels[nl++].value = eq + 1;
			}
		}
		bool has_instance = false;
		for (size_t i = 0; i < nl; i++)
			has_instance |= !strcmp(labels[i].key, "instance");
		char hp[256];
		if (!has_instance) {
			if (pd_grow((void **)&labels, &cap, nl + 1, sizeof *labels)) {
				free(norm);
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
			labels[nl].key = (char *)"instance";
			labels[nl++].value = (char *)pd_scrape_url_hostport(norm, hp, sizeof hp);
		}
		if (!service || !*service) {
			rc = pd_errf(err, PD_EUSAGE, "%s:%u: target %s has no service (add service=NAME)", name, lineno,
				     norm);
			free(norm);
			goto out;
		}
		rc = pd_scrape_targets_add(l, norm, norm, service, labels, nl, types, err);
		free(norm);
		if (rc) {
			pd_err_prefix(err, "%s:%u", name, lineno);
			goto out;
		}
	}
out:
	free(labels);
	free(copy);
	return rc;
}

/* ---- escaping ----------------------------------------------------------------------------- */

int pd_scrape_query_escape(const char *s, struct pd_buf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		int rc;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
			rc = pd_buf_append(out, p, 1);
		} else if (c == ' ') {
			rc = pd_buf_append(out, "+", 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			rc = pd_buf_append(out, e, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int pd_scrape_labels_value(const struct pd_kv *labels, size_t n, struct pd_buf *out)
{
	for (size_t i = 0; i < n; i++) {
		int rc;
		if ((i && (rc = pd_buf_append(out, ",", 1))) || (rc = pd_scrape_query_escape(labels[i].key, out)) ||
		    (rc = pd_buf_append(out, "=", 1)) ||
		    (rc = pd_scrape_query_escape(labels[i].value ? labels[i].value : "", out)))
			return rc;
	}
	return 0;
}

char *pd_scrape_post_url(const char *collector, const char *service, const char *type, const struct pd_kv *labels,
			 size_t nlabels, int64_t created_ns)
{
	struct pd_buf b = PD_BUF_INIT(0), lv = PD_BUF_INIT(0);
	size_t cl = strlen(collector);
	while (cl && collector[cl - 1] == '/')
		cl--;
	time_t sec = (time_t)(created_ns / 1000000000);
	long nsec = (long)(created_ns % 1000000000);
	if (nsec < 0) {
		nsec += 1000000000;
		sec--;
	}
	struct tm tm;
	gmtime_r(&sec, &tm);
	char ts[64], tsn[80];
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(tsn, sizeof tsn, "%s.%09ld", ts, nsec);
	int rc = pd_buf_append(&b, collector, cl) || pd_buf_append(&b, "/api/0/profiles?service=", 24) ||
		 pd_scrape_query_escape(service, &b) || pd_buf_append(&b, "&type=", 6) ||
		 pd_scrape_query_escape(type, &b);
	if (!rc && nlabels)
		rc = pd_scrape_labels_value(labels, nlabels, &lv) || pd_buf_append(&lv, "", 1) ||
		     pd_buf_append(&b, "&labels=", 8) || pd_scrape_query_escape((const char *)lv.ptr, &b);
	if (!rc)
		rc = pd_buf_append(&b, "&created_at=", 12) || pd_scrape_query_escape(tsn, &b) || pd_buf_append(&b, "", 1);
	pd_buf_free(&lv);
	if (rc) {
		pd_buf_free(&b);
		return NULL;
	}
	return (char *)b.ptr;
}

bool pd_scrape_cpu_in_use(long http_status, const uint8_t *body, size_t n)
{
	static const char needle[] = "cpu profiling already in use";
	if (http_status != 500 || !body)
		return false;
	return memmem(body, n, needle, sizeof needle - 1) != NULL;
}
