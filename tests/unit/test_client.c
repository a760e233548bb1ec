/*
 * test_client.c — lib/remote/collector (the collector client of profd get,
 * merge, load, top) and the lib/pprof pieces those commands use:
 *   - collector URL resolution (flag, $PROFD_COLLECTOR, default);
 *   - query strings: built here, then URL-decoded once and parsed by the
 *     server's own parameter layer (lib/http/params), so that what a user
 *     typed (labels with ',' '=' '+' '%' ' ', any service name, ns times)
 *     arrives exactly;
 *   - error lines and API v0's "nothing found" from answers;
 *   - pd_profile_go_type: the seven Go types, block vs mutex by stacks;
 *   - pd_top_text: the text of `go tool pprof -top`.
 * The network side (libcurl) is exercised by tests/e2e/test_client.sh.
 */
#include "testutil.h"
#include "../../lib/remote/collector.h"
#include "../../lib/http/params.h"
#include "../../lib/pprof/report.h"

#define S INT64_C(1000000000)

/* ---- URL resolution ----------------------------------------------------------------- */

static void url_ok(const char *flag, const char *env, const char *want)
{
	char *u = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_client_resolve_url(flag, env, &u, &err);
	if (rc)
		fail_msg("resolve(%s, %s): %s", flag ? flag : "NULL", env ? env : "NULL", err.msg);
	assert_string_equal(u, want);
	free(u);
}

static void url_err(const char *flag, const char *env, const char *sub)
{
	char *u = (char *)1;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_client_resolve_url(flag, env, &u, &err), PD_EUSAGE);
	assert_null(u);
	if (!strstr(err.msg, sub))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, sub);
}

static void test_resolve_url(void **state)
{
	(void)state;
	url_ok(NULL, NULL, "http://localhost:10100");
	url_ok(NULL, "", "http://localhost:10100");
	url_ok(NULL, "http://profd.ops:10100", "http://profd.ops:10100");
	url_ok("http://a:1", "http://b:2", "http://a:1"); /* the flag wins */
	url_ok("profd:10100", NULL, "http://profd:10100");
	url_ok("https://x.example/profd///", NULL, "https://x.example/profd");
	url_ok("HTTP://X:1/", NULL, "HTTP://X:1");
	url_err("ftp://x", NULL, "--collector: bad collector URL \"ftp://x\": only http:// and https://");
	url_err(NULL, "gopher://x", "$PROFD_COLLECTOR: bad collector URL");
	url_err("http://", NULL, "no host");
	url_err("http:///x", NULL, "no host");
	url_err("http://a b", NULL, "no white space");
	url_err("http://a/?x=1", NULL, "no white space, query or fragment");
	url_err("/", NULL, "empty collector URL");
}

/* ---- query strings, through the server's parser ----------------------------------------- */

/* Split a query string and URL-decode each part once (as the server does
 * before the parameter layer), into kv arrays. */
struct qs {
	char *keys[16], *vals[16];
	size_t n;
};

static void qs_parse(const char *path_query, struct qs *q)
{
	memset(q, 0, sizeof *q);
	const char *p = strchr(path_query, '?');
	assert_non_null(p);
	char *s = strdup(p + 1);
	assert_non_null(s);
	for (char *save = NULL, *tok = strtok_r(s, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
		assert_true(q->n < 16);
		char *eq = strchr(tok, '=');
		assert_non_null(eq);
		*eq = 0;
		size_t kl, vl;
		struct pd_err err = {0, ""};
		q->keys[q->n] = malloc(strlen(tok) + 1);
		q->vals[q->n] = malloc(strlen(eq + 1) + 1);
		assert_int_equal(pd_api_query_unescape(tok, strlen(tok), q->keys[q->n], &kl, &err), 0);
		assert_int_equal(pd_api_query_unescape(eq + 1, strlen(eq + 1), q->vals[q->n], &vl, &err), 0);
		q->keys[q->n][kl] = 0;
		q->vals[q->n][vl] = 0;
		q->n++;
	}
	free(s);
}

static void qs_free(struct qs *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->keys[i]);
		free(q->vals[i]);
	}
}

static void test_query_round_trip(void **state)
{
	(void)state;
	struct pd_kv labels[] = {
		{"version", "1.0.0+build"}, {"k=ey", "v,a=l%ue"}, {"sp ace", " x "}, {"empty", ""},
	};
	struct pd_client_query q = {"auth & co/ü", "heap", labels, 4, INT64_C(1559216942) * S + 123456789,
				    INT64_C(1559220542) * S, 5};
	char *path = pd_client_query_path("/api/0/profiles/merge", &q);
	assert_non_null(path);
	assert_true(!strncmp(path, "/api/0/profiles/merge?service=auth+%26+co%2F%C3%BC&type=heap&from=", 66));
	assert_non_null(strstr(path, "&from=2019-05-30T11%3A49%3A02.123456789&to=2019-05-30T12%3A49%3A02.000000000"));
	assert_null(strchr(path, ' '));
	struct qs s;
	qs_parse(path, &s);
	struct pd_api_kv kv = {(const char *const *)s.keys, (const char *const *)s.vals, s.n};
	struct pd_api_query got;
	struct pd_err err = {0, ""};
	if (pd_api_parse_query(pd_api_kv_get, &kv, 0, &got, &err))
		fail_msg("the server refuses our query %s: %s", path, err.msg);
	assert_string_equal(got.service, "auth & co/ü");
	assert_int_equal(got.type, PD_API_TYPE_HEAP);
	assert_int_equal(got.from_ns, q.from_ns);
	assert_int_equal(got.to_ns, q.to_ns);
	assert_int_equal(got.limit, 5);
	/* the server sorts labels by key */
	assert_int_equal(got.nlabels, 4);
	assert_string_equal(got.labels[0].key, "empty");
	assert_string_equal(got.labels[0].value, "");
	assert_string_equal(got.labels[1].key, "k=ey"); /* only a '=' inside the escaped key survives */
	assert_string_equal(got.labels[1].value, "v,a=l%ue");
	assert_string_equal(got.labels[2].key, "sp ace");
	assert_string_equal(got.labels[2].value, " x ");
	assert_string_equal(got.labels[3].key, "version");
	assert_string_equal(got.labels[3].value, "1.0.0+build");
	pd_api_query_free(&got);
	qs_free(&s);
	free(path);

	/* no type, no labels, no limit: those parameters are left out */
	struct pd_client_query q2 = {"a", NULL, NULL, 0, 0, S, 0};
	path = pd_client_query_path("/api/0/profiles", &q2);
	assert_string_equal(path, "/api/0/profiles?service=a&from=1970-01-01T00%3A00%3A00.000000000"
				  "&to=1970-01-01T00%3A00%3A01.000000000");
	free(path);
}

static void test_post_path(void **state)
{
	(void)state;
	struct pd_kv labels[] = {{"pod", "auth-7d9f"}, {"v", "a+b"}};
	int64_t at = INT64_C(1559216942) * S + 5;
	char *path = pd_client_post_path("auth", "mutex", labels, 2, &at);
	assert_non_null(path);
	struct qs s;
	qs_parse(path, &s);
	struct pd_api_kv kv = {(const char *const *)s.keys, (const char *const *)s.vals, s.n};
	struct pd_api_post got;
	struct pd_err err = {0, ""};
	if (pd_api_parse_post(pd_api_kv_get, &kv, 0, &got, &err))
		fail_msg("the server refuses %s: %s", path, err.msg);
	assert_string_equal(got.service, "auth");
	assert_int_equal(got.type, PD_API_TYPE_MUTEX);
	assert_true(got.has_created_at);
	assert_int_equal(got.created_at_ns, at);
	assert_int_equal(got.nlabels, 2);
	assert_string_equal(got.labels[1].value, "a+b");
	pd_api_post_free(&got);
	qs_free(&s);
	free(path);
	path = pd_client_post_path("auth", "cpu", NULL, 0, NULL);
	assert_string_equal(path, "/api/0/profiles?service=auth&type=cpu");
	free(path);
}

static void test_format_time(void **state)
{
	(void)state;
	char b[48];
	assert_string_equal(pd_client_format_time(0, b, sizeof b), "1970-01-01T00:00:00.000000000");
	assert_string_equal(pd_client_format_time(-1, b, sizeof b), "1969-12-31T23:59:59.999999999");
	assert_string_equal(pd_client_format_time(INT64_C(1559216942) * S + 1, b, sizeof b),
			    "2019-05-30T11:49:02.000000001");
}

/* ---- answers -------------------------------------------------------------------------------- */

static struct pd_client_resp resp(long status, bool json, const char *body)
{
	struct pd_client_resp r = {.status = status, .body = PD_BUF_INIT(0), .json = json};
	if (body)
		assert_int_equal(pd_buf_append(&r.body, body, strlen(body)), 0);
	return r;
}

static void test_answers(void **state)
{
	(void)state;
	char m[256];
	struct pd_client_resp r = resp(400, true, "{\"code\":400,\"error\":\"bad request: missing \\\"service\\\"\"}\n");
	pd_client_error(&r, m, sizeof m);
	assert_string_equal(m, "bad request: missing \"service\"");
	assert_false(pd_client_nothing_found(&r));
	pd_client_resp_free(&r);
	r = resp(404, true, "{\"code\":404,\"error\":\"nothing found\"}\n");
	assert_true(pd_client_nothing_found(&r));
	pd_client_resp_free(&r);
	r = resp(404, false, "\n404 page not found\r\nmore\n");
	pd_client_error(&r, m, sizeof m);
	assert_string_equal(m, "404 page not found");
	assert_false(pd_client_nothing_found(&r));
	pd_client_resp_free(&r);
	r = resp(502, false, NULL);
	pd_client_error(&r, m, sizeof m);
	assert_string_equal(m, "no message");
	pd_client_resp_free(&r);
	/* the envelope's body */
	r = resp(200, true, "{\"code\":200,\"body\":[\"a\",\"b\"]}\n");
	json_t *b = NULL;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_client_json_body(&r, &b, &err), 0);
	assert_true(json_is_array(b) && json_array_size(b) == 2);
	json_decref(b);
	pd_client_resp_free(&r);
	r = resp(200, false, "<html>");
	assert_int_equal(pd_client_json_body(&r, &b, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "not API v0 JSON: <html>"));
	pd_client_resp_free(&r);
	/* a binary body (a gzip'd profile under an error status): its controls
	 * left out, its bytes that are not UTF-8 shown as \xNN */
	r = resp(400, false, "\x1f\x8b\x08 gz\x9b[2J \xc3\xa9t\xc3\xa9 \xe2\x82");
	pd_client_error(&r, m, sizeof m);
	assert_string_equal(m, "\\x8b gz\\x9b[2J \xc3\xa9t\xc3\xa9 \\xe2\\x82");
	pd_client_resp_free(&r);
}

/* What another party sent, made safe for a terminal: controls and bytes
 * that are not UTF-8 escaped, whole UTF-8 characters kept. */
static void test_term_escaped(void **state)
{
	(void)state;
	static const struct {
		const char *in, *want; /* want NULL: nothing to escape */
	} cases[] = {
	    {"plain text, ünïcödé, 日本, 🙂", NULL},
	    {"a\x1b[2Jb", "a\\x1b[2Jb"},
	    {"line\nforged", "line\\nforged"},
	    {"c1 \xc2\x9b" "31m", "c1 \\u009b31m"},
	    {"lone \x9b and \xff \xfe", "lone \\x9b and \\xff \\xfe"},
	    {"overlong \xc0\xaf, surrogate \xed\xa0\x80", "overlong \\xc0\\xaf, surrogate \\xed\\xa0\\x80"},
	    {"cut \xe6\x97", "cut \\xe6\\x97"},
	    {"past U+10FFFF \xf4\x90\x80\x80", "past U+10FFFF \\xf4\\x90\\x80\\x80"},
	    {"\xc3\xa9\xc3", "\xc3\xa9\\xc3"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *e = pd_term_escaped(cases[i].in, strlen(cases[i].in), false);
		if (!cases[i].want)
			assert_null(e);
		else if (!e || strcmp(e, cases[i].want))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, e ? e : "(NULL)", cases[i].want);
		free(e);
	}
	/* an empty answer writes nothing (and passes no NULL to fwrite) */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	pd_client_term_write(f, NULL, 0);
	pd_client_term_write(f, "ok \x9b\n", 5);
	fclose(f);
	assert_string_equal(buf, "ok \\x9b\n");
	free(buf);
}

/* ---- pd_profile_go_type ------------------------------------------------------------------------ */

/* A contentions/delay profile (Go's block and mutex) whose samples end in
 * the given leaf functions (one sample each, one frame). */
static struct pd_profile *contention_profile(const char *const *leaves, size_t n)
{
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "contentions", "count");
	pb_sample_type(&p, "delay", "nanoseconds");
	pb_period_type(&p, "contentions", "count", 1);
	for (size_t i = 0; i < n; i++) {
		pb_function(&p, i + 1, leaves[i], "x.go", 0);
		pb_location1(&p, i + 1, 0, 0, i + 1, 1);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t loc = i + 1;
		int64_t vals[2] = {1, 100};
		pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
	}
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void test_go_type(void **state)
{
	(void)state;
	static const char *const block[] = {"runtime.selectgo", "sync.(*Mutex).Lock", "runtime.chanrecv1",
					    "sync.(*WaitGroup).Wait"};
	static const char *const mutex[] = {"sync.(*Mutex).Unlock", "sync.(*RWMutex).RUnlock", "runtime.unlock"};
	static const char *const mostly_mutex[] = {"sync.(*Mutex).Unlock", "sync.(*RWMutex).Unlock", "main.f"};
	struct pd_profile *p = contention_profile(block, 4);
	assert_string_equal(pd_profile_go_type(p), "block");
	pd_profile_free(p);
	p = contention_profile(mutex, 3);
	assert_string_equal(pd_profile_go_type(p), "mutex");
	pd_profile_free(p);
	p = contention_profile(mostly_mutex, 3);
	assert_string_equal(pd_profile_go_type(p), "mutex");
	pd_profile_free(p);
	p = contention_profile(NULL, 0); /* no stacks: cannot tell */
	assert_null(pd_profile_go_type(p));
	pd_profile_free(p);

	struct pb b;
	pb_init(&b); /* cpu */
	pb_cpu_header(&b, 10000000);
	p = pb_decode(&b);
	assert_string_equal(pd_profile_go_type(p), "cpu");
	pd_profile_free(p);
	pb_free(&b);
	for (int allocs = 0; allocs < 2; allocs++) { /* heap vs allocs: the default sample type */
		pb_init(&b);
		pb_sample_type(&b, "alloc_objects", "count");
		pb_sample_type(&b, "alloc_space", "bytes");
		pb_sample_type(&b, "inuse_objects", "count");
		pb_sample_type(&b, "inuse_space", "bytes");
		pb_period_type(&b, "space", "bytes", 524288);
		if (allocs)
			tb_int(&b.b, PF_DEFAULT_SAMPLE_TYPE, pb_s(&b, "alloc_space"));
		p = pb_decode(&b);
		assert_string_equal(pd_profile_go_type(p), allocs ? "allocs" : "heap");
		pd_profile_free(p);
		pb_free(&b);
	}
	static const char *const single[][2] = {{"goroutine", "goroutine"}, {"threadcreate", "threadcreate"}};
	for (int i = 0; i < 2; i++) {
		pb_init(&b);
		pb_sample_type(&b, single[i][0], "count");
		pb_period_type(&b, single[i][0], "count", 1);
		p = pb_decode(&b);
		assert_string_equal(pd_profile_go_type(p), single[i][1]);
		pd_profile_free(p);
		pb_free(&b);
	}
	pb_init(&b); /* not a Go profile type */
	pb_sample_type(&b, "wall", "nanoseconds");
	pb_period_type(&b, "wall", "nanoseconds", 1);
	p = pb_decode(&b);
	assert_null(pd_profile_go_type(p));
	pd_profile_free(p);
	pb_free(&b);
}

/* ---- pd_top_text ------------------------------------------------------------------------------- */

static void test_top_text(void **state)
{
	(void)state;
	struct pb b;
	pb_init(&b);
	pb_cpu_header(&b, 10000000);
	pb_function(&b, 1, "main.leaf", "m.go", 0);
	pb_function(&b, 2, "main.main", "m.go", 0);
	pb_location1(&b, 1, 0, 0, 1, 1);
	pb_location1(&b, 2, 0, 0, 2, 1);
	uint64_t s1[] = {1, 2}, s2[] = {2};
	int64_t v1[] = {3, 30000000}, v2[] = {1, 10000000};
	pb_sample(&b, s1, 2, v1, 2, NULL, 0);
	pb_sample(&b, s2, 1, v2, 2, NULL, 0);
	struct pd_profile *p = pb_decode(&b);
	pb_free(&b);
	struct pd_top t;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	struct pd_buf out = PD_BUF_INIT(0);
	assert_int_equal(pd_top_text(&t, 0, p->strings[p->sample_types[1].unit], &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.ptr,
			    "Showing 2 of 2 functions, accounting for 40ms, 100% of 40ms total\n"
			    "      flat  flat%   sum%        cum   cum%\n"
			    "      30ms 75.00% 75.00%       30ms 75.00%  main.leaf\n"
			    "      10ms 25.00%   100%       40ms   100%  main.main\n");
	out.len = 0;
	assert_int_equal(pd_top_text(&t, 1, p->strings[p->sample_types[1].unit], &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_non_null(strstr((const char *)out.ptr, "Showing 1 of 2 functions, accounting for 30ms, 75.00% of 40ms total\n"));
	pd_buf_free(&out);
	pd_top_free(&t);
	pd_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve_url),   cmocka_unit_test(test_query_round_trip),
		cmocka_unit_test(test_post_path),     cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_answers),       cmocka_unit_test(test_go_type),
		cmocka_unit_test(test_top_text),      cmocka_unit_test(test_term_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
