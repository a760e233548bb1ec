/*
 * test_capture.c — the pure pieces of `profd capture`: kubectl's resource
 * type names, a workload's spec.selector as a label selector string
 * (sorting, every operator, rejections: empty, bad operator, selector
 * syntax smuggled into a key or value), the pod port/service rules shared
 * with the scraper, the file names, and pd_capture_select's usage errors.
 * The fetching is tested end to end (tests/e2e/test_capture.sh).
 */
#include "testutil.h"
#include "../../lib/kube/kube.h"
#include "../../lib/scrape/scrape.h"

static void test_resource_names(void **state)
{
	(void)state;
	assert_string_equal(pd_kube_resource("deployment"), "deployments");
	assert_string_equal(pd_kube_resource("deploy"), "deployments");
	assert_string_equal(pd_kube_resource("Deployment"), "deployments");
	assert_string_equal(pd_kube_resource("deployments.apps"), "deployments");
	assert_string_equal(pd_kube_resource("sts"), "statefulsets");
	assert_string_equal(pd_kube_resource("statefulset"), "statefulsets");
	assert_string_equal(pd_kube_resource("ds"), "daemonsets");
	assert_string_equal(pd_kube_resource("rs"), "replicasets");
	assert_string_equal(pd_kube_resource("po"), "pods");
	assert_string_equal(pd_kube_resource("pod"), "pods");
	assert_null(pd_kube_resource("svc"));
	assert_null(pd_kube_resource("deployments.batch"));
	assert_null(pd_kube_resource(""));
	assert_null(pd_kube_resource(NULL));
	assert_string_equal(pd_kube_resource_kind("statefulsets"), "statefulset");
	assert_null(pd_kube_resource_kind("services"));
}

static int sel(const char *json, char **out, struct pd_err *err)
{
	return pd_kube_workload_selector_parse(json, strlen(json), out, err);
}

static void expect_sel(const char *json, const char *want)
{
	char *s = NULL;
	struct pd_err err = {0, ""};
	int rc = sel(json, &s, &err);
	if (rc)
		fail_msg("%s: %s", json, err.msg);
	assert_string_equal(s, want);
	free(s);
}

static void expect_bad(const char *json, int code, const char *msg)
{
	char *s = (char *)"x";
	struct pd_err err = {0, ""};
	assert_int_equal(sel(json, &s, &err), code);
	assert_null(s);
	if (!strstr(err.msg, msg))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg);
}

static void test_selector(void **state)
{
	(void)state;
	expect_sel("{\"kind\":\"Deployment\",\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}", "app=web");
	/* sorted by key, as apimachinery prints a selector */
	expect_sel("{\"spec\":{\"selector\":{\"matchLabels\":{\"tier\":\"front\",\"app.kubernetes.io/name\":\"web\"}}}}",
		   "app.kubernetes.io/name=web,tier=front");
	expect_sel("{\"spec\":{\"selector\":{\"matchExpressions\":["
		   "{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"qa\",\"dev\"]},"
		   "{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"web\",\"api\"]},"
		   "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"},"
		   "{\"key\":\"tier\",\"operator\":\"Exists\",\"values\":null}]}}}",
		   "app in (api,web),!canary,env notin (dev,qa),tier");
	expect_sel("{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"\"},\"matchExpressions\":[]}}}", "app=");
	expect_sel("{\"spec\":{\"selector\":{\"matchLabels\":{\"b\":\"1\"},"
		   "\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"}]}}}",
		   "a,b=1");

	expect_bad("{\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"selector\":{}}}", PD_EINVAL,
		   "Deployment web has an empty selector");
	expect_bad("{\"spec\":{}}", PD_EINVAL, "no spec.selector");
	expect_bad("[]", PD_EINVAL, "no spec.selector");
	expect_bad("{\"spec\":", PD_EINVAL, "workload JSON: line 1");
	expect_bad("{\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}}}",
		   PD_EINVAL, "operator \"Gt\"");
	expect_bad("{\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}}}", PD_EINVAL,
		   "operator In needs values");
	expect_bad("{\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}}}",
		   PD_EINVAL, "takes no values");
	/* selector syntax cannot be smuggled in */
	expect_bad("{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web,tier!=x\"}}}}", PD_EINVAL, "invalid label");
	expect_bad("{\"spec\":{\"selector\":{\"matchLabels\":{\"a b\":\"web\"}}}}", PD_EINVAL, "invalid label");
	expect_bad("{\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"x)\"]}]}}}",
		   PD_EINVAL, "values[0]: invalid");
	expect_bad("{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":1}}}}", PD_EINVAL, "invalid label");
	expect_bad("{\"spec\":{\"selector\":{\"matchLabels\":[]}}}", PD_EINVAL, "expected an object");
}

static struct pd_kube_pod *pod(struct pd_arena *a, const char *json)
{
	struct pd_kube_pod *p = pd_arena_calloc(a, 1, sizeof *p);
	struct pd_err err;
	if (pd_kube_pod_parse(json, strlen(json), a, p, &err))
		fail_msg("%s", err.msg);
	return p;
}

static void test_port_service(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod *p = pod(a, "{\"metadata\":{\"name\":\"web-7d9f8c6b5-x2x9k\",\"namespace\":\"shop\","
				       "\"labels\":{\"pod-template-hash\":\"7d9f8c6b5\"},"
				       "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"web-7d9f8c6b5\",\"controller\":true}]},"
				       "\"spec\":{\"containers\":[{\"name\":\"proxy\",\"ports\":[{\"containerPort\":15090}]},"
				       "{\"name\":\"web\",\"ports\":[{\"name\":\"debug\",\"containerPort\":6061}]}]}}");
	const char *cn = NULL;
	assert_int_equal(pd_scrape_kube_port(p, "debug", &cn), 6061);
	assert_string_equal(cn, "web");
	assert_int_equal(pd_scrape_kube_port(p, "15090", &cn), 15090);
	assert_string_equal(cn, "proxy");
	assert_int_equal(pd_scrape_kube_port(p, "7000", &cn), 7000);
	assert_string_equal(cn, "proxy"); /* no container declares it: the first */
	assert_int_equal(pd_scrape_kube_port(p, "nope", &cn), 0);
	assert_null(cn);
	assert_int_equal(pd_scrape_kube_port(p, "0", NULL), 0);
	assert_int_equal(pd_scrape_kube_port(p, "65536", NULL), 0);
	assert_int_equal(pd_scrape_kube_port(p, "", NULL), 0);
	char b[64];
	assert_string_equal(pd_scrape_kube_service(p, b, sizeof b), "web");
	struct pd_kube_pod *q = pod(a, "{\"metadata\":{\"name\":\"x-1\",\"namespace\":\"a\",\"annotations\":{\"profefe.com/service\":\"svc\"}}}");
	assert_string_equal(pd_scrape_kube_service(q, b, sizeof b), "svc");
	struct pd_kube_pod *r = pod(a, "{\"metadata\":{\"name\":\"lonely\",\"namespace\":\"a\"}}");
	assert_string_equal(pd_scrape_kube_service(r, b, sizeof b), "lonely");
	assert_true(pd_scrape_kube_path_ok("/debug/pprof"));
	assert_false(pd_scrape_kube_path_ok("debug/pprof"));
	assert_false(pd_scrape_kube_path_ok("/a?b"));
	assert_false(pd_scrape_kube_path_ok("/a b"));
	pd_arena_free(a);
}

static void test_file_name(void **state)
{
	(void)state;
	char b[256];
	int64_t t = 1714557600LL * 1000000000LL + 123; /* 2024-05-01T10:00:00Z */
	assert_string_equal(pd_capture_file_name(b, sizeof b, "web", "web-1", PD_ST_CPU, t),
			    "web-web-1-cpu-20240501T100000Z.pb.gz");
	assert_string_equal(pd_capture_file_name(b, sizeof b, "a/b c:d", "db-0", PD_ST_THREADCREATE, t),
			    "a_b_c_d-db-0-threadcreate-20240501T100000Z.pb.gz");
	assert_string_equal(pd_capture_file_name(b, sizeof b, "..", "p", PD_ST_HEAP, t), "unknown-p-heap-20240501T100000Z.pb.gz");
	assert_string_equal(pd_capture_file_name(b, sizeof b, "", "p", PD_ST_HEAP, t), "unknown-p-heap-20240501T100000Z.pb.gz");
	pd_capture_file_name(b, 10, "web", "web-1", PD_ST_CPU, t); /* truncated, terminated */
	assert_int_equal(strlen(b), 9);
}

static void test_select_usage(void **state)
{
	(void)state;
	struct pd_capture *c = NULL;
	struct pd_err err;
	struct pd_capture_opts o = {0};
	assert_int_equal(pd_capture_new(&o, &c, &err), PD_EUSAGE); /* no client */
	assert_null(c);
	o.client = (struct pd_kube_client *)&o; /* never used below */
	assert_int_equal(pd_capture_new(&o, &c, &err), 0);
	const char *names[] = {"web"};
	assert_int_equal(pd_capture_select(c, names, 1, NULL, &err), PD_EUSAGE); /* a name, no namespace */
	assert_int_equal(pd_capture_select(c, NULL, 0, NULL, &err), PD_EUSAGE);  /* nothing */
	struct pd_capture_view v;
	pd_capture_view(c, &v);
	assert_int_equal(v.npods + v.njobs + v.nproblems, 0);
	assert_int_equal(pd_capture_run(c, &err), 0); /* no jobs: nothing to do */
	pd_capture_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resource_names), cmocka_unit_test(test_selector),
	    cmocka_unit_test(test_port_service),   cmocka_unit_test(test_file_name),
	    cmocka_unit_test(test_select_usage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
