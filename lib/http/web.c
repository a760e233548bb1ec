/*
 * web.c — the web UI's files: lookup in the embedded table (or a directory,
 * --web-dir), Content-Type by name, and index.html's <base> under a prefix.
 */
#include "web.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <xxhash.h>

struct pd_web {
	const struct pd_web_asset *a;
	size_t n;
	char *prefix; /* "" or "/x" */
	char *dir;    /* NULL = embedded */
	/* index.html with <base href="PREFIX/">, when there is a prefix */
	unsigned char *index, *index_gz;
	size_t index_len, index_gzlen;
	char index_etag[24];
};

const char *pd_web_ctype(const char *name)
{
	static const struct {
		const char *ext, *type;
	} t[] = {
	    {".html", "text/html; charset=utf-8"},
	    {".js", "text/javascript; charset=utf-8"},
	    {".mjs", "text/javascript; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},
	    {".svg", "image/svg+xml"},
	    {".png", "image/png"},
	    {".json", "application/json"},
	    {".txt", "text/plain; charset=utf-8"},
	    {".ico", "image/x-icon"},
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof t / sizeof t[0]; i++)
		if (!strcasecmp(dot, t[i].ext))
			return t[i].type;
	return "application/octet-stream";
}

/* A file name that stays in the directory: [A-Za-z0-9._-] parts joined by
 * '/', none empty, none starting with '.' (no "..", no hidden files). */
static bool safe_rel(const char *rel)
{
	if (!rel || !*rel || strlen(rel) > 200)
		return false;
	for (const char *p = rel; *p; p++) {
		if (*p == '/')
			continue;
		bool part_start = p == rel || p[-1] == '/';
		if (part_start && *p == '.')
			return false;
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return false;
	}
	return rel[strlen(rel) - 1] != '/' && !strstr(rel, "//");
}

static bool safe_prefix(const char *p)
{
	if (p[0] != '/' || !p[1] || p[strlen(p) - 1] == '/' || strstr(p, "//") || strstr(p, "/.") || strlen(p) > 200)
		return false;
	for (const char *q = p; *q; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
		      strchr("._~/-", *q)))
			return false;
	return true;
}

/* index.html with <base href="PREFIX/"> right after <head ...> (or at the
 * start when there is no <head>): malloc'd. */
static unsigned char *with_base(const unsigned char *d, size_t n, const char *prefix, size_t *out_n)
{
	char base[256];
	int bn = snprintf(base, sizeof base, "<base href=\"%s/\">", prefix);
	size_t at = 0;
	for (size_t i = 0; i + 5 <= n; i++)
		if (!strncasecmp((const char *)d + i, "<head", 5) && (d[i + 5] == '>' || d[i + 5] == ' ')) {
			const unsigned char *gt = memchr(d + i, '>', n - i);
			at = gt ? (size_t)(gt - d) + 1 : 0;
			break;
		}
	unsigned char *o = malloc(n + (size_t)bn);
	if (!o)
		return NULL;
	memcpy(o, d, at);
	memcpy(o + at, base, (size_t)bn);
	memcpy(o + at + bn, d + at, n - at);
	*out_n = n + (size_t)bn;
	return o;
}

static void etag_of(const unsigned char *d, size_t n, char out[24])
{
	snprintf(out, 24, "\"%016llx\"", (unsigned long long)XXH64(d, n, 0));
}

void pd_web_free(struct pd_web *w)
{
	if (!w)
		return;
	free(w->prefix);
	free(w->dir);
	free(w->index);
	free(w->index_gz);
	free(w);
}

const char *pd_web_prefix(const struct pd_web *w)
{
	return w->prefix;
}

int pd_web_open(const struct pd_web_asset *a, size_t n, const char *prefix, const char *dir, struct pd_web **out,
                struct pd_err *err)
{
	*out = NULL;
	if (prefix && *prefix && !safe_prefix(prefix))
		return pd_errf(err, PD_EUSAGE,
		               "--web-prefix: want a path like /profd (a leading '/', no trailing '/', letters, digits "
		               "and ._~-/), got '%.100s'",
		               prefix);
	if (dir) {
		struct stat st;
		if (stat(dir, &st))
			return pd_errf(err, PD_EUSAGE, "--web-dir %.200s: %s", dir, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return pd_errf(err, PD_EUSAGE, "--web-dir %.200s: not a directory", dir);
	}
	struct pd_web *w = calloc(1, sizeof *w);
	if (!w || !(w->prefix = strdup(prefix ? prefix : "")) || (dir && !(w->dir = strdup(dir)))) {
		pd_web_free(w);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	w->a = a;
	w->n = n;
	for (size_t i = 0; *w->prefix && !dir && i < n; i++) {
		if (strcmp(a[i].path, "index.html"))
			continue;
		struct libdeflate_compressor *z = libdeflate_alloc_compressor(9);
		w->index = with_base(a[i].data, a[i].len, w->prefix, &w->index_len);
		size_t cap = w->index ? libdeflate_gzip_compress_bound(z, w->index_len) : 0;
		w->index_gz = z && cap ? malloc(cap) : NULL;
		w->index_gzlen =
		    w->index_gz ? libdeflate_gzip_compress(z, w->index, w->index_len, w->index_gz, cap) : 0;
		libdeflate_free_compressor(z);
		if (!w->index_gzlen) {
			pd_web_free(w);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		etag_of(w->index, w->index_len, w->index_etag);
	}
	*out = w;
	return 0;
}

static int from_dir(const struct pd_web *w, const char *rel, struct pd_web_file *f, struct pd_err *err)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", w->dir, rel);
	FILE *fp = fopen(path, "rb");
	struct stat st;
	if (!fp || fstat(fileno(fp), &st) || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
		int e = errno;
		if (fp)
			fclose(fp);
		return pd_errf(err, PD_ENOTFOUND, "nothing found: no UI file %s (--web-dir: %s)", rel,
		               fp ? "not a regular file" : strerror(e));
	}
	size_t n = (size_t)st.st_size;
	unsigned char *d = malloc(n ? n : 1);
	size_t got = d ? fread(d, 1, n, fp) : 0;
	fclose(fp);
	if (!d || got != n) {
		free(d);
		return pd_errf(err, d ? PD_EIO : PD_ENOMEM, "reading %s failed", path);
	}
	if (*w->prefix && !strcmp(rel, "index.html")) {
		size_t bn;
		unsigned char *b = with_base(d, n, w->prefix, &bn);
		free(d);
		if (!b)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		d = b;
		n = bn;
	}
	f->data = d;
	f->len = n;
	f->owned = true;
	etag_of(d, n, f->etag);
	return 0;
}

int pd_web_get(const struct pd_web *w, const char *rel, struct pd_web_file *f, struct pd_err *err)
{
	memset(f, 0, sizeof *f);
	if (!safe_rel(rel))
		return pd_errf(err, PD_ENOTFOUND, "nothing found");
	f->ctype = pd_web_ctype(rel);
	if (w->dir)
		return from_dir(w, rel, f, err);
	if (w->index && !strcmp(rel, "index.html")) {
		f->data = w->index;
		f->len = w->index_len;
		f->gz = w->index_gz;
		f->gzlen = w->index_gzlen;
		snprintf(f->etag, sizeof f->etag, "%s", w->index_etag);
		return 0;
	}
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->a[i].path, rel)) {
			f->data = w->a[i].data;
			f->len = w->a[i].len;
			f->gz = w->a[i].gz;
			f->gzlen = w->a[i].gzlen;
			snprintf(f->etag, sizeof f->etag, "%s", w->a[i].etag);
			return 0;
		}
	return pd_errf(err, PD_ENOTFOUND, "nothing found: no UI file %s", rel);
}
