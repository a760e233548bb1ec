/*
 * web.h — the web UI's files (web/), embedded in the binary at build time
 * (tools/embed.c writes the table the profd binary links) and served by the
 * collector at / and /ui/FILE (docs/ui.md).
 *
 * With a path prefix (--web-prefix /profd, for an ingress that does not strip
 * it), index.html gets <base href="/profd/"> so that its relative URLs (every
 * asset and API call is relative) resolve under the prefix. With a directory
 * (--web-dir, for development), files are read from it on every request.
 */
#ifndef PD_HTTP_WEB_H
#define PD_HTTP_WEB_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/util.h"

struct pd_web_asset {
	const char *path;          /* relative to web/: "index.html", "app.js", "views/flame.js" */
	const unsigned char *data; /* the file's bytes */
	size_t len;
	const unsigned char *gz; /* the same, gzip'd; NULL = none */
	size_t gzlen;
	const char *etag; /* quoted: "\"0123456789abcdef\"" */
};

/* What the profd binary links (generated: $(BUILD)/web_assets.c). */
extern const struct pd_web_asset pd_web_assets[];
extern const size_t pd_web_nassets;

struct pd_web;

/* The UI over the embedded table (borrowed: static), with prefix ("" or NULL:
 * none; else "/x" or "/x/y": a leading '/', no trailing '/', no '..', only
 * [A-Za-z0-9._~/-]) and dir (NULL: the embedded files). */
int pd_web_open(const struct pd_web_asset *a, size_t n, const char *prefix, const char *dir, struct pd_web **out,
                struct pd_err *err) PD_WUR;
void pd_web_free(struct pd_web *w);
const char *pd_web_prefix(const struct pd_web *w); /* "" when none */

/* One file to send: data/len (and gz/gzlen when a gzip'd copy exists). When
 * owned, data was malloc'd for this answer (--web-dir) and is the caller's. */
struct pd_web_file {
	const unsigned char *data, *gz;
	size_t len, gzlen;
	const char *ctype;
	char etag[24];
	bool owned;
};
/* rel: "index.html", "app.js" (the path after "/ui/"). PD_ENOTFOUND when no
 * such file (or a name that could leave the directory). */
int pd_web_get(const struct pd_web *w, const char *rel, struct pd_web_file *f, struct pd_err *err) PD_WUR;

/* The Content-Type for a file name: text/html, text/javascript, text/css,
 * image/svg+xml, image/png, application/json; else application/octet-stream. */
const char *pd_web_ctype(const char *name);

/* The Content-Security-Policy of UI answers: scripts, styles, images and
 * fetches from the collector only; no inline script, no eval, no framing. */
#define PD_WEB_CSP                                                                                                     \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "    \
	"font-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

#endif
