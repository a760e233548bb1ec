/*
 * test_regress.c — lib/query/regress.c: rollouts from metadata (order,
 * first/last seen, counts, services apart, unlabelled profiles left out)
 * and the rates and noise of one function; random selections against a
 * plain scan (many versions, services interleaved, ties in time).
 */
#include "testutil.h"

#include <math.h>

#include "../../lib/query/regress.h"

static struct pd_kv kv_10 = {"version", "1.0"}, kv_11 = {"version", "1.1"}, kv_12 = {"version", "1.2"};

static struct pd_profile_meta meta(const char *svc, int64_t t, struct pd_kv *kv)
{
	struct pd_profile_meta m = {0};
	snprintf(m.service, sizeof m.service, "%s", svc);
	snprintf(m.type, sizeof m.type, "cpu");
	m.created_ns = t;
	m.labels = kv;
	m.nlabels = kv ? 1 : 0;
	return m;
}

static void test_rollouts(void **state)
{
	(void)state;
	struct pd_profile_meta m[] = {
		meta("b", 50, &kv_11), meta("a", 30, &kv_11), meta("a", 10, &kv_10), meta("a", 20, &kv_10),
		meta("a", 35, NULL),   meta("b", 40, &kv_10), meta("a", 60, &kv_12), meta("a", 70, &kv_11),
	};
	struct pd_rollouts r;
	struct pd_err err;
	assert_int_equal(pd_rollouts_find(m, sizeof m / sizeof m[0], "version", &r, &err), 0);
	assert_int_equal(r.nv, 5);
	/* a: 1.0 [10,20] x2, 1.1 [30,70] x2, 1.2 [60] x1; b: 1.0 [40], 1.1 [50] */
	const char *want[][2] = {{"a", "1.0"}, {"a", "1.1"}, {"a", "1.2"}, {"b", "1.0"}, {"b", "1.1"}};
	int64_t first[] = {10, 30, 60, 40, 50}, last[] = {20, 70, 60, 40, 50};
	size_t count[] = {2, 2, 1, 1, 1};
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(r.v[i].service, want[i][0]);
		assert_string_equal(r.v[i].value, want[i][1]);
		assert_int_equal(r.v[i].first_ns, first[i]);
		assert_int_equal(r.v[i].last_ns, last[i]);
		assert_int_equal(r.v[i].profiles, count[i]);
	}
	assert_int_equal(r.nr, 3); /* a 1.0->1.1 at 30, a 1.1->1.2 at 60, b 1.0->1.1 at 50 */
	assert_int_equal(r.r[0].from, 0);
	assert_int_equal(r.r[0].to, 1);
	assert_int_equal(r.r[0].at_ns, 30);
	assert_int_equal(r.r[1].from, 1);
	assert_int_equal(r.r[1].to, 2);
	assert_int_equal(r.r[1].at_ns, 60);
	assert_int_equal(r.r[2].from, 3);
	assert_int_equal(r.r[2].at_ns, 50);
	pd_rollouts_free(&r);
	/* another label: none of the profiles has it */
	assert_int_equal(pd_rollouts_find(m, sizeof m / sizeof m[0], "env", &r, &err), 0);
	assert_int_equal(r.nv, 0);
	assert_int_equal(r.nr, 0);
	pd_rollouts_free(&r);
}

/* The versions of m by the definition: a scan of every labelled profile
 * for each (service, value) pair met; then what pd_rollouts_find must say
 * of each: first and last seen, how many. */
static void check_against_scan(const struct pd_profile_meta *m, size_t n, const struct pd_rollouts *r)
{
	size_t found = 0;
	for (size_t i = 0; i < n; i++) {
		const char *val = pd_meta_label(&m[i], "version");
		bool first = *val != 0;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(m[j].service, m[i].service) || strcmp(pd_meta_label(&m[j], "version"), val);
		if (!first)
			continue;
		int64_t lo = m[i].created_ns, hi = lo;
		size_t cnt = 0;
		for (size_t j = 0; j < n; j++)
			if (!strcmp(m[j].service, m[i].service) && !strcmp(pd_meta_label(&m[j], "version"), val)) {
				cnt++;
				lo = m[j].created_ns < lo ? m[j].created_ns : lo;
				hi = m[j].created_ns > hi ? m[j].created_ns : hi;
			}
		size_t k = 0;
		while (k < r->nv && (strcmp(r->v[k].service, m[i].service) || strcmp(r->v[k].value, val)))
			k++;
		assert_true(k < r->nv);
		assert_int_equal(r->v[k].first_ns, lo);
		assert_int_equal(r->v[k].last_ns, hi);
		assert_int_equal(r->v[k].profiles, cnt);
		found++;
	}
	assert_int_equal(r->nv, found);
	/* ordered by service, then first seen; a rollout between neighbours of one service */
	size_t nr = 0;
	for (size_t k = 1; k < r->nv; k++) {
		int c = strcmp(r->v[k - 1].service, r->v[k].service);
		assert_true(c < 0 || (c == 0 && r->v[k - 1].first_ns <= r->v[k].first_ns));
		if (c == 0) {
			assert_true(nr < r->nr);
			assert_int_equal(r->r[nr].from, k - 1);
			assert_int_equal(r->r[nr].to, k);
			assert_int_equal(r->r[nr].at_ns, r->v[k].first_ns);
			nr++;
		}
	}
	assert_int_equal(r->nr, nr);
}

static void test_rollouts_random(void **state)
{
	(void)state;
	enum { N = 600, VALS = 64 };
	static struct pd_kv kv[VALS];
	static char names[VALS][16];
	for (int v = 0; v < VALS; v++) {
		snprintf(names[v], sizeof names[v], "v%d", v);
		kv[v] = (struct pd_kv){"version", names[v]};
	}
	struct pd_profile_meta *m = calloc(N, sizeof *m);
	assert_non_null(m);
	uint64_t x = 0x9e3779b97f4a7c15u;
	for (int seed = 0; seed < 40; seed++) {
		/* from few versions (long runs) to a new value for nearly every profile */
		int nvals = 1 + seed * (VALS - 1) / 39;
		for (size_t i = 0; i < N; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			char svc[4] = {(char)('a' + x % 5), 0};
			int v = (int)((x >> 8) % (uint64_t)(nvals + 1)); /* nvals: unlabelled */
			m[i] = meta(svc, (int64_t)((x >> 20) % 50), v < nvals ? &kv[v] : NULL);
		}
		struct pd_rollouts r;
		struct pd_err err;
		assert_int_equal(pd_rollouts_find(m, N, "version", &r, &err), 0);
		check_against_scan(m, N, &r);
		pd_rollouts_free(&r);
	}
	free(m);
}

static void test_rates(void **state)
{
	(void)state;
	struct pd_rate r;
	/* 100 of 1000 samples -> 300 of 1000: share 0.1 -> 0.3, clearly beyond noise */
	pd_rate_compute(100, 300, 1000, 1000, 100, 300, 1, 1, &r);
	assert_true(fabs(r.base - 0.1) < 1e-12 && fabs(r.target - 0.3) < 1e-12);
	assert_true(fabs(r.change - 0.2) < 1e-12 && fabs(r.relative - 2.0) < 1e-12);
	double want = 2 * sqrt(0.1 * 0.1 / 100 + 0.3 * 0.3 / 300);
	assert_true(fabs(r.noise - want) < 1e-12);
	assert_false(r.within_noise);
	/* 10 -> 12 samples: within noise */
	pd_rate_compute(10, 12, 1000, 1000, 10, 12, 1, 1, &r);
	assert_true(r.within_noise);
	/* a new function: relative infinite; its base noise is one sample's worth */
	pd_rate_compute(0, 50, 1000, 1000, 0, 50, 1, 1, &r);
	assert_true(isinf(r.relative));
	want = 2 * sqrt(1e-6 + 0.05 * 0.05 / 50);
	assert_true(fabs(r.noise - want) < 1e-12);
	/* no count sample type: noise unknown, never "within noise" */
	pd_rate_compute(5, 6, 10, 10, -1, -1, 0, 0, &r);
	assert_true(r.noise < 0);
	assert_false(r.within_noise);
	assert_int_equal(r.base_samples, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rollouts),
		cmocka_unit_test(test_rollouts_random),
		cmocka_unit_test(test_rates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
