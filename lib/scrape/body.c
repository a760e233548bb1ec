/*
 * body.c — what the scraper and `profd capture` say about a target's answer
 * that is not a profile. A target's bytes never reach a log, a table or an
 * error message (issue 12: a sign-in page, an internal API's JSON may hold
 * what the logs must not): they are described by lib/pprof's classifier
 * (an HTML page, JSON, text, binary data; n bytes), never quoted, and
 * profiles from targets are decoded with pd_pprof_limits.no_quotes so that
 * the decoder's own messages do not quote them either. A collector's
 * answers are profd's own (or profefe's) and are shown: pd_scrape_first_line.
 */
#include "scrape.h"

#include <stdio.h>
#include <string.h>

void pd_scrape_not_profile(char *out, size_t cap, const char *ctype, const uint8_t *body, size_t n,
			   const struct pd_err *e)
{
	const char *ct = ctype && *ctype ? ctype : "no Content-Type";
	size_t rl = strlen(PD_PPROF_REFUSED);
	if (!strncmp(e->msg, PD_PPROF_REFUSED, rl)) { /* the refusal says what the body is */
		snprintf(out, cap, "not a pprof profile (got %s): %s", ct, e->msg + rl);
		return;
	}
	char d[80];
	snprintf(out, cap, "not a pprof profile (got %s): the body is %s: %s", ct,
		 pd_pprof_describe_body(body, n, d, sizeof d), e->msg);
}

void pd_scrape_http_error(char *out, size_t cap, long status, const char *url, const uint8_t *body, size_t n)
{
	char d[80];
	snprintf(out, cap, "HTTP %ld from %s, with %s", status, url, pd_pprof_describe_body(body, n, d, sizeof d));
}

void pd_scrape_wrong_kind(char *out, size_t cap, const struct pd_profile *p, int type)
{
	char types[200];
	pd_profile_describe_types(p, types, sizeof types);
	/* a valid profile's own names, not a page's text; but printable, one line */
	for (char *c = types; *c; c++)
		if ((unsigned char)*c < ' ' || (unsigned char)*c >= 0x7f)
			*c = '?';
	snprintf(out, cap, "got a %s profile %s, not a %s profile", pd_profile_kind(p), types, pd_scrape_type_name(type));
}

void pd_scrape_first_line(const uint8_t *p, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < cap && o < 200; i++) {
		if (p[i] == '\n' || p[i] == '\r')
			break;
		out[o++] = p[i] >= ' ' && p[i] < 0x7f ? (char)p[i] : '?';
	}
	if (cap)
		out[o] = 0;
}
