/*
 * fuzz_selector.c — libFuzzer driver for the selector parser and matcher
 * (lib/query/selector.c).
 *
 * Input: the selector text up to the first '\n'; each following line is a
 * profile to match, "service type k=v k=v ...". Properties beyond "no
 * crash, no leak, no UB":
 *   - an error message always names a byte offset inside the input ("at N"
 *     with N <= length) or a cap;
 *   - a parsed selector's canonical text (pd_selector_format) parses again
 *     and formats to the same text, and both selectors agree on every
 *     profile (the formatter escapes exactly what the parser unescapes);
 *   - a selector never matches a profile of another type;
 *   - the selector line compiled as a regex on its own (pd_regex_compile:
 *     the RE2-to-PCRE2 translation sees arbitrary bytes) either compiles
 *     or fails with PD_EINVAL/PD_ELIMIT and a message, and matching it
 *     against every profile line gives 1, 0 or PD_ELIMIT (bounded work);
 *     once PD_ELIMIT, it stays so.
 */
#include "../../lib/query/query.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXP 8
#define MAXL 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	char *nl = strchr(buf, '\n');
	char *rest = NULL;
	if (nl) {
		*nl = 0;
		rest = nl + 1;
	}
	size_t qlen = strlen(buf);
	/* the first line as a bare regex */
	struct pd_regex *re = NULL;
	char why[300];
	int rrc = pd_regex_compile(buf, &re, why, sizeof why);
	PD_ASSERT(rrc == 0 || rrc == PD_EINVAL || rrc == PD_ELIMIT || rrc == PD_ENOMEM);
	PD_ASSERT(rrc == 0 ? re != NULL : re == NULL && why[0]);
	if (re && rest) {
		const char *v = rest;
		for (int k = 0; k < MAXP && v; k++) {
			const char *e = strchr(v, '\n');
			size_t n = e ? (size_t)(e - v) : strlen(v);
			bool was = pd_regex_limited(re);
			int m = pd_regex_match(re, v, n);
			PD_ASSERT(m == 1 || m == 0 || m == PD_ELIMIT || m == PD_ENOMEM);
			PD_ASSERT(!was || m == PD_ELIMIT);
			v = e ? e + 1 : NULL;
		}
	}
	pd_regex_free(re);
	struct pd_selector sel;
	struct pd_err err;
	int rc = pd_selector_parse(buf, &sel, &err);
	if (rc) {
		PD_ASSERT(sel.m == NULL && sel.type == NULL && sel.n == 0);
		/* 'bad query "<first 200 bytes>[...]": at N: ...' */
		size_t echo = strlen("bad query \"") + (qlen > 200 ? 203 : qlen);
		if (rc == PD_EINVAL) {
			PD_ASSERT(strlen(err.msg) > echo + 6 && !memcmp(err.msg + echo, "\": at ", 6));
			PD_ASSERT(strtoull(err.msg + echo + 6, NULL, 10) <= qlen);
		} else {
			PD_ASSERT(rc == PD_ELIMIT || rc == PD_ENOMEM);
		}
		free(buf);
		return 0;
	}
	/* canonical text: parses back to the same selector */
	size_t fn = 4 * qlen + 64;
	char *f1 = malloc(fn), *f2 = malloc(fn);
	struct pd_selector sel2;
	bool two = false;
	if (f1 && f2) {
		pd_selector_format(&sel, f1, fn);
		int rc2 = pd_selector_parse(f1, &sel2, &err);
		/* the canonical form may only fail on a cap (escapes make it longer) */
		PD_ASSERT(rc2 == 0 || rc2 == PD_ELIMIT);
		if (rc2 == 0) {
			two = true;
			pd_selector_format(&sel2, f2, fn);
			PD_ASSERT(strcmp(f1, f2) == 0);
			PD_ASSERT(sel2.n == sel.n);
		}
	}
	/* profiles to match */
	for (int np = 0; rest && np < MAXP; np++) {
		char *e = strchr(rest, '\n');
		if (e)
			*e = 0;
		struct pd_profile_meta m = {0};
		struct pd_kv kv[MAXL];
		size_t nkv = 0;
		char *save = NULL;
		char *tok = strtok_r(rest, " ", &save);
		snprintf(m.service, sizeof m.service, "%s", tok ? tok : "");
		tok = strtok_r(NULL, " ", &save);
		snprintf(m.type, sizeof m.type, "%s", tok ? tok : "cpu");
		while ((tok = strtok_r(NULL, " ", &save)) && nkv < MAXL) {
			char *eq = strchr(tok, '=');
			kv[nkv].key = tok;
			kv[nkv].value = eq ? (*eq = 0, eq + 1) : tok + strlen(tok);
			nkv++;
		}
		m.labels = kv;
		m.nlabels = nkv;
		bool r1 = pd_selector_match(&sel, &m);
		if (two)
			PD_ASSERT(r1 == pd_selector_match(&sel2, &m));
		if (r1 && sel.type)
			PD_ASSERT(strcmp(sel.type, m.type) == 0);
		if (r1)
			PD_ASSERT(pd_selector_match_service(&sel, m.service));
		if (pd_selector_check(&sel, &err)) /* a regex hit its bound */
			PD_ASSERT(strstr(err.msg, "hit the match limit"));
		rest = e ? e + 1 : NULL;
	}
	if (two)
		pd_selector_free(&sel2);
	free(f1);
	free(f2);
	pd_selector_free(&sel);
	free(buf);
	return 0;
}
