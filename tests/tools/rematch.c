/*
 * rematch.c — profd's selector regexes on the lines `oracle regex` reads
 * (tests/oracle/main.go): "HEX(regex) HEX(value)" per line on stdin, 1, 0
 * or ERR per line on stdout (pd_regex_compile / pd_regex_match, as a
 * matcher of an API v1 selector). tests/e2e/test_selector_re2.sh runs both
 * on the same lines: where both compile, they must agree. REMATCH_WHY=1
 * prints why a regex does not compile on stderr.
 */
#include "../../lib/query/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* hex digits at s up to a blank or the end into out; its length, or -1 */
static long unhex(const char *s, char *out, const char **end)
{
	long n = 0;
	while (hex(s[0]) >= 0 && hex(s[1]) >= 0) {
		out[n++] = (char)(hex(s[0]) << 4 | hex(s[1]));
		s += 2;
	}
	out[n] = 0;
	*end = s;
	return *s && *s != ' ' && *s != '\n' ? -1 : n;
}

int main(void)
{
	static char line[1 << 17], re[1 << 16], v[1 << 16];
	while (fgets(line, sizeof line, stdin)) {
		const char *e;
		long rl = unhex(line, re, &e), vl = 0;
		if (rl >= 0 && *e == ' ')
			vl = unhex(e + 1, v, &e);
		if (rl < 0 || vl < 0 || strlen(re) != (size_t)rl) {
			fprintf(stderr, "bad line: %s", line);
			return 2;
		}
		struct pd_regex *r;
		char why[300];
		if (pd_regex_compile(re, &r, why, sizeof why)) {
			if (getenv("REMATCH_WHY"))
				fprintf(stderr, "%s\n", why);
			puts("ERR");
			continue;
		}
		int m = pd_regex_match(r, v, (size_t)vl);
		puts(m == 1 ? "1" : m == 0 ? "0" : "LIMIT");
		pd_regex_free(r);
	}
	return 0;
}
