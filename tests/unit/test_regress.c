/*
 * test_regress.c — lib/query/regress.c: rollouts from metadata (order,
 * first/last seen, counts, services apart, unlabelled profiles left out)
 * and the rates and noise of one function.
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
		cmocka_unit_test(test_rates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
