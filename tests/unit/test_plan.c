/*
 * test_plan.c — lib/query/plan (the query planner): the rollups parameter,
 * which path each kind of query takes, and the budget of profiles merged
 * outside rollups with its one message.
 */
#include "testutil.h"
#include "../../lib/query/plan.h"

#include <string.h>

static struct pd_selector sel_of(const char *s)
{
	struct pd_selector sel;
	struct pd_err err = {0};
	if (pd_selector_parse(s, &sel, &err))
		fail_msg("parse(%s): %s", s, err.msg);
	return sel;
}

static void test_parse_rollups(void **state)
{
	(void)state;
	struct pd_err err = {0};
	bool on = false;
	assert_int_equal(pd_plan_parse_rollups(NULL, &on, &err), 0);
	assert_true(on);
	assert_int_equal(pd_plan_parse_rollups("1", &on, &err), 0);
	assert_true(on);
	assert_int_equal(pd_plan_parse_rollups("false", &on, &err), 0);
	assert_false(on);
	assert_int_equal(pd_plan_parse_rollups("0", &on, &err), 0);
	assert_false(on);
	assert_int_equal(pd_plan_parse_rollups("yes", &on, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "bad \"rollups\" \"yes\": want true or false"));
}

/* path(selector, rollups, normalize, step, finer) */
static enum pd_plan_path path(const char *s, bool rollups, bool norm, int64_t step, bool finer)
{
	struct pd_selector sel = sel_of(s);
	struct pd_plan_in in = {&sel, rollups, norm, step, finer};
	enum pd_plan_path p = pd_plan_path(&in);
	pd_selector_free(&sel);
	return p;
}

static void test_paths(void **state)
{
	(void)state;
	/* a type and service matchers only: the range path */
	assert_int_equal(path("cpu", true, true, 0, false), PD_PLAN_RANGE);
	assert_int_equal(path("cpu{service=\"a\"}", true, true, 0, false), PD_PLAN_RANGE);
	assert_int_equal(path("allocs{service=~\"a|b\",service!=\"c\"}", true, false, 0, false), PD_PLAN_RANGE);
	/* rollups=false, no type, a label matcher: the selection */
	assert_int_equal(path("cpu", false, true, 0, false), PD_PLAN_SELECT);
	assert_int_equal(path("{service=\"a\"}", true, true, 0, false), PD_PLAN_SELECT);
	assert_int_equal(path("cpu{service=\"a\",pod=\"p\"}", true, true, 0, false), PD_PLAN_SELECT);
	/* split finer than by service */
	assert_int_equal(path("cpu", true, true, 0, true), PD_PLAN_SELECT);
	/* a step under an hour cannot take an hour's rollup; an hour can */
	assert_int_equal(path("cpu", true, true, 60LL * 1000000000LL, false), PD_PLAN_SELECT);
	assert_int_equal(path("cpu", true, true, PD_ROLLUP_NS, false), PD_PLAN_RANGE);
	/* normalised gauges are averaged per source: not from a sum */
	assert_int_equal(path("heap", true, true, 0, false), PD_PLAN_SELECT);
	assert_int_equal(path("goroutine", true, true, 0, false), PD_PLAN_SELECT);
	assert_int_equal(path("heap", true, false, 0, false), PD_PLAN_RANGE);
	assert_int_equal(path("mutex", true, true, 0, false), PD_PLAN_RANGE);
	struct pd_selector a = sel_of("{service=\"x\"}"), b = sel_of("cpu{pod=\"x\"}");
	assert_true(pd_plan_service_only(&a));
	assert_false(pd_plan_rollup_selector(&a));
	assert_false(pd_plan_service_only(&b));
	pd_selector_free(&a);
	pd_selector_free(&b);
}

static void test_budget(void **state)
{
	(void)state;
	struct pd_err err = {0};
	struct pd_plan_budget b = {10, 0};
	assert_int_equal(pd_plan_charge(&b, 4, &err), 0);
	assert_int_equal(pd_plan_charge(&b, 6, &err), 0); /* 10: at the limit, not over */
	assert_int_equal(pd_plan_charge(&b, 1, &err), PD_ELIMIT);
	assert_non_null(strstr(err.msg, "more than 10 profiles to merge outside hourly rollups"));
	assert_non_null(strstr(err.msg, "--max-merge-profiles"));
	struct pd_plan_budget none = {0, 0};
	assert_int_equal(pd_plan_charge(&none, 1000000, &err), 0);
	assert_int_equal(none.raw, 1000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_rollups),
	    cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_budget),
	};
	return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
