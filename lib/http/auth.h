/*
 * auth.h — the collector's tokens (`profd serve --tokens FILE`).
 *
 * The file has one token per line, `TOKEN SCOPE[,SCOPE...] [NAME]`; `#`
 * starts a comment, blank lines are skipped. Scopes: read (every GET),
 * write (POST: uploads), admin (DELETE and whatever changes the store;
 * admin implies nothing else: give "read,write,admin" for all three).
 * NAME (default "line N") is what logs and errors call the token; the
 * token itself is never logged or echoed. A token is 16..256 printable
 * ASCII characters without spaces; the file must not be readable by group
 * or others (like ssh's keys), since it holds secrets.
 *
 * A request presents its token as `Authorization: Bearer TOKEN` or as the
 * password of HTTP basic auth (`Authorization: Basic base64(user:TOKEN)`,
 * the user is ignored), for clients that can only put credentials in a URL
 * (profefe's agent, kube-profefe: http://profd:TOKEN@host:10100).
 * Comparison is constant-time: each presented token is hashed with a
 * per-process random key and the digest compared with every entry's without
 * an early exit, so neither the time nor the order of entries says how much
 * of a guess was right.
 */
#ifndef PD_HTTP_AUTH_H
#define PD_HTTP_AUTH_H

#include "../util/util.h"

enum {
	PD_SCOPE_READ = 1,
	PD_SCOPE_WRITE = 2,
	PD_SCOPE_ADMIN = 4,
};

#define PD_TOKEN_MIN 16
#define PD_TOKEN_MAX 256
#define PD_TOKENS_MAX 4096 /* entries in one file */

struct pd_tokens;

/* Load a tokens file; PD_EINVAL / PD_EIO with FILE:LINE and the reason
 * (never the token). At least one token is required. */
int pd_tokens_load(const char *path, struct pd_tokens **out, struct pd_err *err) PD_WUR;
/* The same from the file's text (len bytes; path names it in messages). */
int pd_tokens_parse(const char *text, size_t len, const char *path, struct pd_tokens **out,
		    struct pd_err *err) PD_WUR;
void pd_tokens_free(struct pd_tokens *t);
size_t pd_tokens_count(const struct pd_tokens *t);

/* The scopes of the credentials in an Authorization header value (NULL =
 * none): 0 if none or unknown. *name (may be NULL) = the token's name, valid
 * while t is. */
unsigned pd_tokens_check(const struct pd_tokens *t, const char *authorization, const char **name);

/* A client's token: the first line of file (--token-file; trailing white
 * space dropped), else env ($PROFD_TOKEN), else *out = NULL (none). The
 * file may not be empty; a token with white space or a control byte inside
 * is refused. *out is malloc'd (caller frees). */
int pd_token_read(const char *file, const char *env, char **out, struct pd_err *err) PD_WUR;

/* "read", "read,write", ... of a scope set, into buf. */
const char *pd_scopes_str(unsigned scopes, char *buf, size_t n);

#endif
