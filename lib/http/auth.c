/*
 * auth.c — tokens file, Authorization header, constant-time check (auth.h).
 */
#define _GNU_SOURCE
#include "auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct tok {
	XXH128_hash_t digest;
	unsigned scopes;
	char name[64];
};

struct pd_tokens {
	struct tok *v;
	size_t n;
	uint8_t key[192]; /* per-load random key of the digests */
};

static XXH128_hash_t digest(const struct pd_tokens *t, const char *s, size_t n)
{
	return XXH3_128bits_withSecret(s, n, t->key, sizeof t->key);
}

void pd_tokens_free(struct pd_tokens *t)
{
	if (!t)
		return;
	if (t->v)
		memset(t->v, 0, t->n * sizeof *t->v);
	free(t->v);
	memset(t, 0, sizeof *t);
	free(t);
}

size_t pd_tokens_count(const struct pd_tokens *t) { return t ? t->n : 0; }

const char *pd_scopes_str(unsigned scopes, char *buf, size_t n)
{
	static const char *const names[] = {"read", "write", "admin"};
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < 3; i++)
		if (scopes & (1u << i))
			o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%s", o ? "," : "", names[i]);
	if (!o)
		snprintf(buf, n, "none");
	return buf;
}

static int parse_scopes(const char *s, unsigned *out)
{
	*out = 0;
	while (*s) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 4 && !strncmp(s, "read", 4))
			*out |= PD_SCOPE_READ;
		else if (n == 5 && !strncmp(s, "write", 5))
			*out |= PD_SCOPE_WRITE;
		else if (n == 5 && !strncmp(s, "admin", 5))
			*out |= PD_SCOPE_ADMIN;
		else
			return -1;
		s += n + (e ? 1 : 0);
		if (e && !*s)
			return -1; /* a trailing comma */
	}
	return *out ? 0 : -1;
}

int pd_tokens_parse(const char *text, size_t len, const char *path, struct pd_tokens **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_tokens *t = calloc(1, sizeof *t);
	size_t cap = 0;
	int rc = 0;
	char line[1024];
	unsigned lineno = 0;
	if (!t || getrandom(t->key, sizeof t->key, 0) != (ssize_t)sizeof t->key) {
		rc = pd_errf(err, t ? PD_EIO : PD_ENOMEM, "tokens: %s", t ? "no randomness for the key" : "out of memory");
		goto out;
	}
	for (size_t off = 0; off < len;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t ll = nl ? (size_t)(nl - text - off) : len - off;
		lineno++;
		if (ll >= sizeof line) {
			rc = pd_errf(err, PD_EINVAL, "%s:%u: line over %zu bytes", path, lineno, sizeof line - 1);
			goto out;
		}
		memcpy(line, text + off, ll);
		line[ll] = 0;
		off += ll + (nl ? 1 : 0);
		if (strlen(line) != ll) {
			rc = pd_errf(err, PD_EINVAL, "%s:%u: a NUL byte", path, lineno);
			goto out;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *save = NULL, *tok = strtok_r(line, " \t\r", &save);
		if (!tok)
			continue;
		char *scopes = strtok_r(NULL, " \t\r", &save), *name = strtok_r(NULL, " \t\r", &save);
		char *extra = strtok_r(NULL, " \t\r", &save);
		size_t tn = strlen(tok);
		if (!scopes) {
			rc = pd_errf(err, PD_EINVAL, "%s:%u: want TOKEN SCOPE[,SCOPE] [NAME]: no scope", path, lineno);
			goto out;
		}
		if (extra) {
			rc = pd_errf(err, PD_EINVAL, "%s:%u: want TOKEN SCOPE[,SCOPE] [NAME]: more than 3 fields", path,
				     lineno);
			goto out;
		}
		if (tn < PD_TOKEN_MIN || tn > PD_TOKEN_MAX) {
			rc = pd_errf(err, PD_EINVAL,
				     "%s:%u: the token is %zu characters: want %d..%d (e.g. openssl rand -hex 32)", path,
				     lineno, tn, PD_TOKEN_MIN, PD_TOKEN_MAX);
			goto out;
		}
		for (size_t i = 0; i < tn; i++)
			if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f || tok[i] == ':') {
				rc = pd_errf(err, PD_EINVAL,
					     "%s:%u: the token has a character that is not printable ASCII (or ':'), at %zu",
					     path, lineno, i);
				goto out;
			}
		unsigned sc;
		if (parse_scopes(scopes, &sc)) {
			/* quoted only if shorter than any token: "NAME TOKEN read" must not
			 * put the token in the log */
			if (strlen(scopes) < PD_TOKEN_MIN)
				rc = pd_errf(err, PD_EINVAL, "%s:%u: bad scope list \"%s\": want read, write, admin, comma-separated",
					     path, lineno, scopes);
			else
				rc = pd_errf(err, PD_EINVAL,
					     "%s:%u: bad scope list (%zu characters, not shown: a token in its place?): want "
					     "read, write, admin, comma-separated",
					     path, lineno, strlen(scopes));
			goto out;
		}
		if (t->n >= PD_TOKENS_MAX) {
			rc = pd_errf(err, PD_ELIMIT, "%s: more than %d tokens", path, PD_TOKENS_MAX);
			goto out;
		}
		if (pd_grow((void **)&t->v, &cap, t->n + 1, sizeof *t->v)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		struct tok *e = &t->v[t->n];
		e->digest = digest(t, tok, tn);
		for (size_t i = 0; i < t->n; i++)
			if (XXH128_isEqual(t->v[i].digest, e->digest)) {
				rc = pd_errf(err, PD_EINVAL, "%s:%u: the same token as \"%s\"", path, lineno, t->v[i].name);
				goto out;
			}
		e->scopes = sc;
		if (name)
			snprintf(e->name, sizeof e->name, "%s", name);
		else
			snprintf(e->name, sizeof e->name, "line %u", lineno);
		t->n++;
	}
	if (!t->n)
		rc = pd_errf(err, PD_EINVAL, "tokens file %s holds no token", path);
out:
	memset(line, 0, sizeof line);
	if (rc)
		pd_tokens_free(t);
	else
		*out = t;
	return rc;
}

int pd_tokens_load(const char *path, struct pd_tokens **out, struct pd_err *err)
{
	*out = NULL;
	struct stat st;
	FILE *f = fopen(path, "r");
	if (!f && errno == EACCES)
		return pd_errf(err, PD_EIO,
			       "tokens file %s: %s: it must be readable by the user profd runs as (uid %u), mode 600: "
			       "chown it to that user; under systemd's DynamicUser=yes give it with "
			       "LoadCredential=tokens:%s and --tokens /run/credentials/profd.service/tokens "
			       "(docs/operations.md)",
			       path, strerror(EACCES), (unsigned)geteuid(), path);
	if (!f)
		return pd_errf(err, PD_EIO, "tokens file %s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077)) {
		fclose(f);
		return pd_errf(err, PD_EINVAL,
			       "tokens file %s is readable by group or others (mode %04o): it holds secrets; chmod 600 %s",
			       path, (unsigned)(st.st_mode & 07777), path);
	}
	struct pd_buf b = PD_BUF_INIT(1u << 20);
	char chunk[4096];
	size_t n;
	int rc = 0;
	while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (pd_buf_append(&b, chunk, n))
			rc = pd_errf(err, PD_ELIMIT, "tokens file %s is over 1 MiB", path);
	if (!rc && ferror(f))
		rc = pd_errf(err, PD_EIO, "tokens file %s: read error", path);
	fclose(f);
	if (!rc)
		rc = pd_tokens_parse((const char *)b.ptr, b.len, path, out, err);
	if (b.ptr)
		memset(b.ptr, 0, b.len);
	memset(chunk, 0, sizeof chunk);
	pd_buf_free(&b);
	return rc;
}

int pd_token_read(const char *file, const char *env, char **out, struct pd_err *err)
{
	*out = NULL;
	char buf[PD_TOKEN_MAX + 64];
	const char *src = file ? file : "$PROFD_TOKEN";
	size_t n = 0;
	if (file) {
		FILE *f = fopen(file, "r");
		if (!f)
			return pd_errf(err, PD_EUSAGE, "--token-file %s: %s", file, strerror(errno));
		if (!fgets(buf, sizeof buf, f))
			buf[0] = 0;
		fclose(f);
	} else if (env && *env) {
		snprintf(buf, sizeof buf, "%s", env);
	} else {
		return 0;
	}
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = 0;
	int rc = 0;
	if (!n)
		rc = pd_errf(err, PD_EUSAGE, "%s: empty token", src);
	else if (n > PD_TOKEN_MAX)
		rc = pd_errf(err, PD_EUSAGE, "%s: the token is over %d characters", src, PD_TOKEN_MAX);
	for (size_t i = 0; !rc && i < n; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] == 0x7f)
			rc = pd_errf(err, PD_EUSAGE, "%s: the token has white space or a control byte at %zu", src, i);
	if (!rc && !(*out = strdup(buf)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	memset(buf, 0, sizeof buf);
	return rc;
}

/* base64 (RFC 4648, padding optional) into out; -1 if malformed or too long. */
static ssize_t b64dec(const char *s, size_t n, char *out, size_t cap)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i], v;
		if (c >= 'A' && c <= 'Z')
			v = c - 'A';
		else if (c >= 'a' && c <= 'z')
			v = c - 'a' + 26;
		else if (c >= '0' && c <= '9')
			v = c - '0' + 52;
		else if (c == '+')
			v = 62;
		else if (c == '/')
			v = 63;
		else if (c == '=')
			break;
		else
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= cap)
				return -1;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	return (ssize_t)o;
}

unsigned pd_tokens_check(const struct pd_tokens *t, const char *h, const char **name)
{
	if (name)
		*name = NULL;
	if (!t || !h)
		return 0;
	while (*h == ' ')
		h++;
	const char *cred = NULL;
	size_t n = 0;
	char buf[PD_TOKEN_MAX * 2 + 8];
	if (!strncasecmp(h, "Bearer ", 7)) {
		cred = h + 7;
		while (*cred == ' ')
			cred++;
		n = strlen(cred);
		while (n && cred[n - 1] == ' ')
			n--;
	} else if (!strncasecmp(h, "Basic ", 6)) {
		const char *b = h + 6;
		while (*b == ' ')
			b++;
		size_t bn = strlen(b);
		while (bn && b[bn - 1] == ' ')
			bn--;
		ssize_t dn = b64dec(b, bn, buf, sizeof buf);
		if (dn <= 0)
			return 0;
		char *colon = memchr(buf, ':', (size_t)dn);
		if (!colon)
			return 0;
		cred = colon + 1;
		n = (size_t)dn - (size_t)(cred - buf);
	}
	if (!cred || n < PD_TOKEN_MIN || n > PD_TOKEN_MAX) {
		memset(buf, 0, sizeof buf);
		return 0;
	}
	XXH128_hash_t d = digest(t, cred, n);
	memset(buf, 0, sizeof buf);
	unsigned scopes = 0;
	const char *who = NULL;
	for (size_t i = 0; i < t->n; i++) { /* no early exit */
		uint64_t diff = (d.low64 ^ t->v[i].digest.low64) | (d.high64 ^ t->v[i].digest.high64);
		unsigned match = (unsigned)((diff | (~diff + 1)) >> 63) ^ 1u; /* 1 iff diff == 0 */
		scopes |= t->v[i].scopes & (0u - match);
		if (match)
			who = t->v[i].name;
	}
	if (name)
		*name = who;
	return scopes;
}
