/*
 * fuzz_params.c — libFuzzer driver for API v0's request-parameter parsers
 * (lib/http/params): labels, times, durations, URL unescaping, the list and
 * POST queries, and the Go-compatible JSON writer.
 *
 * Input: the first byte picks the "now" offset; the rest is split on '\n'
 * into key=value parameters (as a query string would give them, already
 * decoded once). Every parser runs on every value. Properties beyond "no
 * crash, no leak, no UB":
 *   - parsed labels are sorted by key and have non-empty keys;
 *   - a parsed time formats back without error;
 *   - unescaping never grows a string;
 *   - the JSON writer's output of any bytes (as an error message and as a
 *     label value) is valid JSON that jansson reads back.
 */
#include "../../lib/http/params.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXP 16

static void check_json(const char *s)
{
	if (!s)
		return; /* OOM only */
	json_error_t je;
	json_t *v = json_loads(s, JSON_DECODE_ANY, &je);
	PD_ASSERT(v != NULL);
	json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 16384)
		return 0;
	int64_t now = 1559216942000000000LL + (int64_t)data[0] * 3600000000000LL;
	char *buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;
	const char *keys[MAXP], *vals[MAXP];
	size_t n = 0;
	for (char *line = buf; line && n < MAXP;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *eq = strchr(line, '=');
		keys[n] = line;
		vals[n] = eq ? (*eq = 0, eq + 1) : NULL;
		n++;
		line = nl ? nl + 1 : NULL;
	}
	struct pd_err err;
	for (size_t i = 0; i < n; i++) {
		const char *v = vals[i] ? vals[i] : keys[i];
		size_t len = strlen(v);
		struct pd_api_label *l;
		size_t nl;
		if (!pd_api_parse_labels(v, &l, &nl, &err)) {
			for (size_t j = 0; j < nl; j++) {
				PD_ASSERT(l[j].key[0]);
				PD_ASSERT(j == 0 || strcmp(l[j - 1].key, l[j].key) <= 0);
			}
			json_t *pj = pd_api_profile_json("c6jddu000000000000a0", PD_API_TYPE_CPU, v, l, nl, now);
			char *js = pd_api_ok_json(pj);
			check_json(js);
			free(js);
			json_decref(pj);
			pd_api_labels_free(l);
		}
		int64_t t;
		if (!pd_api_parse_time("from", v, now, &t, &err)) {
			char tb[PD_API_TIME_BUFSZ];
			PD_ASSERT(pd_api_format_time(t, tb, sizeof tb) != NULL);
		}
		int64_t d;
		if (!pd_api_parse_duration(v, len, &d, &err))
			PD_ASSERT(d != INT64_MIN);
		char *dst = malloc(len + 1);
		size_t dl;
		if (dst && !pd_api_query_unescape(v, len, dst, &dl, &err))
			PD_ASSERT(dl <= len);
		free(dst);
		int ty;
		if (!pd_api_parse_type(v, &ty, &err))
			PD_ASSERT(pd_api_type_name(ty) != NULL);
		char *e = pd_api_error_json(400, v);
		check_json(e);
		free(e);
	}
	struct pd_api_kv kv = {keys, vals, n};
	struct pd_api_query q;
	if (!pd_api_parse_query(pd_api_kv_get, &kv, now, &q, &err)) {
		PD_ASSERT(q.from_ns <= q.to_ns && q.limit >= 0 && q.service && q.service[0]);
		pd_api_query_free(&q);
	} else {
		PD_ASSERT(err.msg[0]);
	}
	struct pd_api_post p;
	if (!pd_api_parse_post(pd_api_kv_get, &kv, now, &p, &err))
		pd_api_post_free(&p);
	free(buf);
	return 0;
}
