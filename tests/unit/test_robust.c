/*
 * test_robust.c — answers that used to be wrong or 500s (issue 11), checked
 * below HTTP where they are decided:
 *   - flame graphs of deep stacks (30, 31, 64, 1024, 1100 frames) encode as
 *     JSON through the API's own encoder, merge and diff alike: one depth
 *     rule for the tree and the encoder;
 *   - the declared type is checked against the profile at ingest (a CPU
 *     profile sent as heap is refused naming both; no type = inferred);
 *   - times a profile id cannot hold are refused at ingest;
 *   - the decoder's memory budget: millions of tiny samples in a small
 *     gzip are refused before the memory is spent, quickly; the shared
 *     budget hook makes it PD_EBUSY;
 *   - UTF-8 validation (pd_utf8_valid) as Go's utf8.Valid.
 */
#include "testutil.h"
#include "../../lib/http/api1.h"
#include "../../lib/store/store.h"
#include "../../lib/util/gz.h"

#define SEC INT64_C(1000000000)
#define T0 (INT64_C(1764374400) * SEC) /* 2025-11-29T00:00:00Z */

static char tmpdir[256];

TU_TMPDIR_FIXTURES(tmpdir, "robust")

/* A CPU profile (or a heap one) whose one sample has a stack of `depth`
 * frames alternating between two functions, plus a 1-frame sample. */
static struct pd_buf deep_profile(size_t depth, bool heap)
{
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, heap);
	pb_mapping(&p, 1, 0x400000, 0x500000, 0, "/bin/app", "");
	pb_function(&p, 1, "main.recurse", "main.go", 10);
	pb_function(&p, 2, "main.helper", "main.go", 20);
	pb_location1(&p, 1, 1, 0x401000, 1, 11);
	pb_location1(&p, 2, 1, 0x402000, 2, 21);
	uint64_t *locs = malloc(depth * sizeof *locs);
	assert_non_null(locs);
	for (size_t i = 0; i < depth; i++)
		locs[i] = 1 + i % 2;
	int64_t v[2] = {3, 30000000};
	pb_sample(&p, locs, depth, v, 2, NULL, 0);
	int64_t w[2] = {1, 10000000};
	pb_sample(&p, locs, 1, w, 2, NULL, 0);
	free(locs);
	pb_finish(&p);
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&b, p.b.p, p.b.len), 0);
	pb_free(&p);
	return b;
}

static int ingest(struct pd_store *st, const char *svc, const char *type, int64_t t, const struct pd_buf *b,
		  struct pd_profile_meta *m, struct pd_err *err)
{
	struct pd_kv kv[] = {{"version", "1.0"}};
	struct pd_ingest in = {.service = svc, .type = type, .labels = kv, .nlabels = 1, .created_ns = t};
	struct pd_profile_meta mm;
	int rc = pd_store_ingest(st, &in, b->ptr, b->len, m ? m : &mm, err);
	if (!m && !rc)
		pd_meta_clear(&mm);
	return rc;
}

struct params {
	const char *kv[8][2];
};

static const char *pget(void *ctx, const char *key)
{
	struct params *p = ctx;
	for (int i = 0; i < 8 && p->kv[i][0]; i++)
		if (!strcmp(p->kv[i][0], key))
			return p->kv[i][1];
	return NULL;
}

/* Depth of the deepest path below node n of a flame graph JSON tree. */
static size_t json_depth(json_t *n)
{
	size_t d = 0;
	json_t *kids = json_object_get(n, "children");
	for (size_t i = 0; i < json_array_size(kids); i++) {
		size_t k = json_depth(json_array_get(kids, i));
		if (k > d)
			d = k;
	}
	return d + 1;
}

static void test_flame_depth(void **state)
{
	(void)state;
	static const size_t depths[] = {30, 31, 64, 1024, 1100};
	for (size_t k = 0; k < ARRAY_LEN(depths); k++) {
		char dir[300], svc[32];
		snprintf(dir, sizeof dir, "%s/%zu", tmpdir, depths[k]);
		snprintf(svc, sizeof svc, "deep%zu", depths[k]);
		struct pd_store *st;
		struct pd_err err;
		if (pd_store_open_sqlite(dir, NULL, &st, &err))
			fail_msg("open: %s", err.msg);
		struct pd_buf b = deep_profile(depths[k], false);
		if (ingest(st, svc, "cpu", T0 + SEC, &b, NULL, &err) || ingest(st, svc, "cpu", T0 + 2 * SEC, &b, NULL, &err))
			fail_msg("ingest: %s", err.msg);
		pd_buf_free(&b);
		struct pd_api1_config cfg = {st, 100, 0, 0};
		struct params merge = {{{"query", "cpu"}, {"from", "2025-11-29T00:00:00Z"}, {"to", "2025-11-29T00:01:00Z"},
					{"format", "flamegraph"}, {"max_nodes", "100000"}}};
		struct params diff = {{{"base", "cpu"}, {"target", "cpu"}, {"from", "2025-11-29T00:00:00Z"},
				       {"to", "2025-11-29T00:01:00Z"}, {"format", "flamegraph"}, {"max_nodes", "100000"}}};
		const char *routes[] = {"merge", "diff"};
		struct params *ps[] = {&merge, &diff};
		for (int r = 0; r < 2; r++) {
			struct pd_api1_resp resp;
			pd_api1_handle(&cfg, "GET", routes[r], pget, ps[r], T0 + 60 * SEC, &resp);
			if (resp.status != 200)
				fail_msg("%s of %zu frames: %d %s", routes[r], depths[k], resp.status, resp.error);
			assert_int_equal(resp.kind, PD_API1_JSON);
			/* what the server sends: the API's own encoder must take the tree */
			char *s = pd_api_ok_json(resp.json);
			if (!s)
				fail_msg("%s of %zu frames: the JSON encoder refused the flame graph", routes[r], depths[k]);
			json_t *root = json_object_get(resp.json, "root");
			if (!root)
				root = resp.json;
			/* root + every frame kept, down to PD_FLAME_MAX_DEPTH */
			size_t want = 1 + (depths[k] < PD_FLAME_MAX_DEPTH ? depths[k] : PD_FLAME_MAX_DEPTH);
			if (json_depth(root) != want)
				fail_msg("%s of %zu frames: tree depth %zu, want %zu", routes[r], depths[k], json_depth(root),
					 want);
			free(s);
			pd_api1_resp_free(&resp);
		}
		pd_store_close(st);
	}
}

static void test_declared_type(void **state)
{
	(void)state;
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	struct pd_buf cpu = deep_profile(3, false), heap = deep_profile(3, true);
	struct pd_profile_meta m;
	/* a CPU profile declared heap: refused, naming both */
	assert_int_equal(ingest(st, "auth", "heap", T0, &cpu, NULL, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "declared type \"heap\" but the profile is a cpu profile"));
	assert_non_null(strstr(err.msg, "cpu/nanoseconds"));
	assert_int_equal(ingest(st, "auth", "goroutine", T0, &heap, NULL, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "declared type \"goroutine\" but the profile is a heap profile"));
	assert_int_equal(ingest(st, "auth", "block", T0, &cpu, NULL, &err), PD_EINVAL);
	/* nothing of those was stored */
	char **svcs;
	size_t n;
	assert_int_equal(pd_store_services(st, &svcs, &n, &err), 0);
	assert_int_equal(n, 0);
	free(svcs);
	/* no type: inferred */
	assert_int_equal(ingest(st, "auth", NULL, T0, &cpu, &m, &err), 0);
	assert_string_equal(m.type, "cpu");
	pd_meta_clear(&m);
	assert_int_equal(ingest(st, "auth", NULL, T0, &heap, &m, &err), 0);
	assert_string_equal(m.type, "heap");
	pd_meta_clear(&m);
	/* heap and allocs are one profile with two defaults; other takes anything */
	assert_int_equal(ingest(st, "auth", "allocs", T0, &heap, NULL, &err), 0);
	assert_int_equal(ingest(st, "auth", "other", T0, &cpu, &m, &err), 0);
	assert_string_equal(m.type, "other");
	pd_meta_clear(&m);
	/* the fleet's heap merge works: no CPU profile got in as heap */
	struct pd_merge_range q = {"auth", "heap", T0 - SEC, T0 + SEC, 0, false};
	struct pd_merge_info info;
	struct pd_profile *p;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), 0);
	assert_int_equal(info.profiles, 1);
	pd_profile_free(p);
	/* times a profile id cannot hold */
	assert_int_equal(ingest(st, "auth", "cpu", (INT64_C(1) << 32) * SEC, &cpu, NULL, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "2106-02-07T06:28:15Z"));
	assert_int_equal(ingest(st, "auth", "cpu", -5 * SEC, &cpu, NULL, &err), PD_EINVAL);
	assert_int_equal(ingest(st, "auth", "cpu", (INT64_C(1) << 32) * SEC - SEC, &cpu, &m, &err), 0);
	struct pd_profile *back;
	assert_int_equal(pd_store_get(st, m.id, &back, &err), 0); /* acknowledged = found again */
	pd_profile_free(back);
	pd_meta_clear(&m);
	pd_buf_free(&cpu);
	pd_buf_free(&heap);
	pd_store_close(st);
}

/* n samples of one location and one value: ~6 bytes each on the wire. */
static struct pd_buf tiny_samples(size_t n)
{
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "samples", "count");
	pb_function(&p, 1, "main.f", "main.go", 1);
	pb_location1(&p, 1, 0, 0x1000, 1, 1);
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1); /* location_id: 1 (unpacked) */
	tb_uint(&s, 2, 1); /* value: 1 */
	for (size_t i = 0; i < n; i++)
		tb_msg(&p.b, 2, &s);
	tb_free(&s);
	pb_finish(&p);
	struct pd_buf b = PD_BUF_INIT(0), z = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_gzip(p.b.p, p.b.len, 6, &z, &err), 0);
	pb_free(&p);
	(void)b;
	return z;
}

static size_t reserved_total;
static int reserve_some(void *ctx, size_t n)
{
	size_t cap = *(size_t *)ctx;
	if (reserved_total + n > cap)
		return -1;
	reserved_total += n;
	return 0;
}

static void test_memory_budget(void **state)
{
	(void)state;
	struct pd_buf z = tiny_samples(8u << 20); /* 8 M samples */
	assert_true(z.len < (1u << 20));          /* a small upload... */
	struct pd_pprof_limits lim = {0};
	lim.max_memory = 64u << 20;
	lim.extra_per_sample = PD_INGEST_BYTES_PER_SAMPLE;
	struct pd_profile *p = NULL;
	struct pd_err err;
	int rc = pd_pprof_decode(z.ptr, z.len, &lim, &p, &err);
	pd_buf_free(&z);
	assert_int_equal(rc, PD_ELIMIT);
	assert_null(p);
	if (!strstr(err.msg, "memory") || !strstr(err.msg, "64 MiB"))
		fail_msg("message: %s", err.msg);
	/* refused on the way, not after building an 8 M-sample model: the
	 * budget is checked while the field list grows, so the refusal names
	 * the fields seen so far, a fraction of the 8 M (this was a bound of 2 s
	 * on the refusal's wall time, which a sanitizer build on a slow
	 * machine overran: 3.47 s) */
	const char *at = strstr(err.msg, "bytes of protobuf, ");
	unsigned long long seen = at ? strtoull(at + strlen("bytes of protobuf, "), NULL, 10) : 0;
	if (!at || !strstr(at, " fields seen") || !seen || seen >= (8u << 20) / 2)
		fail_msg("not refused while the field list grew (%llu fields seen): %s", seen, err.msg);
	/* the same profile within a big enough budget decodes (so the refusal
	 * was the budget's) */
	struct pd_buf small = tiny_samples(1000);
	lim.max_memory = 1u << 20;
	assert_int_equal(pd_pprof_decode(small.ptr, small.len, &lim, &p, &err), 0);
	assert_int_equal(p->nsamples, 1000);
	pd_profile_free(p);
	/* the shared budget: a reservation that fails is PD_EBUSY */
	size_t cap = 1000;
	reserved_total = 0;
	lim.reserve = reserve_some;
	lim.reserve_ctx = &cap;
	assert_int_equal(pd_pprof_decode(small.ptr, small.len, &lim, &p, &err), PD_EBUSY);
	assert_non_null(strstr(err.msg, "too much profile data"));
	cap = 1u << 20;
	reserved_total = 0;
	assert_int_equal(pd_pprof_decode(small.ptr, small.len, &lim, &p, &err), 0);
	assert_true(reserved_total > 1000 * sizeof(struct pd_sample));
	pd_profile_free(p);
	pd_buf_free(&small);
}

static void test_utf8(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		bool ok;
		size_t bad;
	} cases[] = {
		{"", true, 0},
		{"auth-service", true, 0},
		{"caf\xc3\xa9", true, 0},
		{"\xe2\x82\xac 1", true, 0},
		{"\xf0\x9f\x94\xa5", true, 0},
		{"a\xff", false, 1},
		{"\xc0\xaf", false, 0},         /* overlong '/' */
		{"\xe0\x80\xaf", false, 0},     /* overlong */
		{"\xed\xa0\x80", false, 0},     /* surrogate U+D800 */
		{"\xf4\x90\x80\x80", false, 0}, /* past U+10FFFF */
		{"ab\xe2\x82", false, 2},       /* truncated */
		{"\x80", false, 0},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		size_t bad = 99;
		bool ok = pd_utf8_valid(cases[i].s, strlen(cases[i].s), &bad);
		if (ok != cases[i].ok || (!ok && bad != cases[i].bad))
			fail_msg("case %zu: ok %d bad %zu", i, ok, bad);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_flame_depth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_declared_type, setup, teardown),
		cmocka_unit_test(test_memory_budget),
		cmocka_unit_test(test_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
