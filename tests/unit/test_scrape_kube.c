/*
 * test_scrape_kube.c — lib/scrape/kube.c, Kubernetes discovery: which pods
 * are targets (annotation, phase, pod IP, deletion), their URL (port number
 * or named container port, profefe.com/path honoured, IPv6), service (the
 * annotation, else the owning workload, never the pod for a ReplicaSet pod),
 * key (uid-aware) and name, labels (namespace, pod, container, node, kept pod
 * labels, extra labels, no duplicates, at most 64), the error reasons, and
 * the config file's kubernetes entries (which pods, their settings, label_keep).
 * The list+watch source runs against the test API server in
 * tests/e2e/test_scrape_kube.sh.
 */
#include "testutil.h"
#include "../../lib/kube/kube.h"
#include "../../lib/scrape/scrape.h"

static const char *const keep[] = {"app", "version", "app.kubernetes.io/name", "app.kubernetes.io/version"};

static struct pd_scrape_kube_opts opts(void)
{
	struct pd_scrape_kube_opts o = {.pod_labels = keep, .npod_labels = 4};
	return o;
}

/* Judge the pod in json; returns the verdict, fills l (when a target) and why. */
static int judge(const char *json, const struct pd_scrape_kube_opts *o, struct pd_scrape_targets *l, char *why,
                 size_t cap)
{
	struct pd_arena *a = pd_arena_new(4096);
	struct pd_kube_pod p;
	struct pd_err err;
	if (pd_kube_pod_parse(json, strlen(json), a, &p, &err))
		fail_msg("pod JSON: %s", err.msg);
	int skip = -1;
	assert_int_equal(pd_scrape_kube_target(&p, o, l, &skip, why, cap, &err), 0);
	pd_arena_free(a);
	return skip;
}

static const char *label(const struct pd_scrape_target *t, const char *k)
{
	for (size_t i = 0; i < t->nlabels; i++)
		if (!strcmp(t->labels[i].key, k))
			return t->labels[i].value;
	return NULL;
}

static void labels_str(const struct pd_scrape_target *t, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < t->nlabels && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%s=%s", i ? "," : "", t->labels[i].key, t->labels[i].value);
}

#define RUNNING "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.1.2.3\"}"

static void test_deployment_pod(void **state)
{
	(void)state;
	const char *json =
	    "{\"metadata\":{\"name\":\"web-7d4b9c8f6-x2x9k\",\"namespace\":\"shop\",\"uid\":\"u-1\","
	    "\"labels\":{\"team\":\"a\",\"version\":\"1.4.2\",\"app\":\"web\",\"pod-template-hash\":\"7d4b9c8f6\","
	    "\"app.kubernetes.io/name\":\"webapp\"},"
	    "\"annotations\":{\"profefe.com/enable\":\"true\",\"profefe.com/port\":\"8080\"},"
	    "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9c8f6\",\"controller\":true}]},"
	    "\"spec\":{\"nodeName\":\"node-7\",\"containers\":[{\"name\":\"istio-proxy\",\"ports\":[{\"containerPort\":"
	    "15090}]},"
	    "{\"name\":\"web\",\"ports\":[{\"containerPort\":8080}]}]}," RUNNING "}";
	struct pd_scrape_targets l = {0};
	struct pd_kv extra[] = {{(char *)"cluster", (char *)"prod"}, {(char *)"pod", (char *)"ignored"}};
	struct pd_scrape_kube_opts o = opts();
	o.labels = extra;
	o.nlabels = 2;
	assert_int_equal(judge(json, &o, &l, NULL, 0), PD_KS_TARGET);
	assert_int_equal(l.n, 1);
	const struct pd_scrape_target *t = &l.v[0];
	assert_string_equal(t->key, "shop/web-7d4b9c8f6-x2x9k/u-1");
	assert_string_equal(t->name, "shop/web-7d4b9c8f6-x2x9k");
	assert_string_equal(pd_scrape_target_name(t), "shop/web-7d4b9c8f6-x2x9k");
	assert_string_equal(t->url, "http://10.1.2.3:8080/debug/pprof");
	assert_string_equal(t->service, "web"); /* the Deployment, not the pod or the ReplicaSet */
	char b[600];
	labels_str(t, b, sizeof b);
	/* built-ins, then the kept pod labels in the keep-list's order, then the
	 * extra labels that do not collide; team and pod-template-hash are not kept */
	assert_string_equal(b, "namespace=shop,pod=web-7d4b9c8f6-x2x9k,container=web,node=node-7,app=web,version=1.4.2,"
	                       "app.kubernetes.io/name=webapp,cluster=prod");
	assert_int_equal(t->types, 0);

	/* the same pod again in one list: its key is taken */
	struct pd_arena *a = pd_arena_new(4096);
	struct pd_kube_pod p;
	struct pd_err err;
	assert_int_equal(pd_kube_pod_parse(json, strlen(json), a, &p, &err), 0);
	int skip;
	assert_int_equal(pd_scrape_kube_target(&p, &o, &l, &skip, NULL, 0, &err), PD_EINVAL);
	pd_arena_free(a);
	pd_scrape_targets_free(&l);

	/* recreated with the same name: another uid, another target key */
	const char *again = "{\"metadata\":{\"name\":\"db-0\",\"namespace\":\"shop\",\"uid\":\"u-2\","
	                    "\"annotations\":{\"profefe.com/enable\":\"true\"},"
	                    "\"ownerReferences\":[{\"kind\":\"StatefulSet\",\"name\":\"db\"}]}," RUNNING "}";
	assert_int_equal(judge(again, &o, &l, NULL, 0), PD_KS_TARGET);
	assert_string_equal(l.v[0].key, "shop/db-0/u-2");
	assert_string_equal(l.v[0].service, "db");
	assert_string_equal(l.v[0].url, "http://10.1.2.3:6060/debug/pprof"); /* the defaults */
	assert_null(label(&l.v[0], "container"));                            /* no containers */
	assert_null(label(&l.v[0], "node"));
	pd_scrape_targets_free(&l);
}

static void test_selection(void **state)
{
	(void)state;
	struct pd_scrape_kube_opts o = opts();
	struct pd_scrape_targets l = {0};
	char why[300];
	/* not annotated, or not exactly "true" */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"}," RUNNING "}", &o, &l, why, sizeof why),
	    PD_KS_NOT_ANNOTATED);
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"True\"}}," RUNNING "}",
	          &o, &l, why, sizeof why),
	    PD_KS_NOT_ANNOTATED);
	/* ... said why when it surely meant "true" (the log warns), silent for "false" */
	assert_string_equal(why, "profefe.com/enable is \"True\": only \"true\" (lower case) turns profiling on");
	static const char *const meant[] = {"TRUE", "yes", "Yes", "on", "1", "y"};
	for (size_t i = 0; i < sizeof meant / sizeof *meant; i++) {
		char json[300];
		snprintf(json, sizeof json,
		         "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
		         "\"%s\"}}," RUNNING "}",
		         meant[i]);
		assert_int_equal(judge(json, &o, &l, why, sizeof why), PD_KS_NOT_ANNOTATED);
		assert_contains(why, "only \"true\"");
	}
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"false\"}}," RUNNING "}",
	          &o, &l, why, sizeof why),
	    PD_KS_NOT_ANNOTATED);
	assert_string_equal(why, "");
	/* not Running */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"true\"}},\"status\":{\"phase\":\"Pending\"}}",
	          &o, &l, why, sizeof why),
	    PD_KS_NOT_RUNNING);
	assert_contains(why, "phase Pending");
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"true\"}},\"status\":{\"phase\":\"Succeeded\",\"podIP\":\"10.0.0.1\"}}",
	          &o, &l, why, sizeof why),
	    PD_KS_NOT_RUNNING);
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"true\"}}}",
	          &o, &l, why, sizeof why),
	    PD_KS_NOT_RUNNING);
	assert_contains(why, "phase unknown");
	/* Running without an IP */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/enable\":"
	          "\"true\"}},\"status\":{\"phase\":\"Running\"}}",
	          &o, &l, why, sizeof why),
	    PD_KS_NO_IP);
	/* being deleted */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"deletionTimestamp\":\"2025-01-01T00:00:00Z\","
	          "\"annotations\":{\"profefe.com/enable\":\"true\"}}," RUNNING "}",
	          &o, &l, why, sizeof why),
	    PD_KS_DELETING);
	assert_int_equal(l.n, 0);
}

static void test_port_path_service(void **state)
{
	(void)state;
	struct pd_scrape_kube_opts o = opts();
	struct pd_scrape_targets l = {0};
	char why[300];
	/* a named container port: its number, its container */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"agent-x\",\"namespace\":\"ops\",\"annotations\":{"
	          "\"profefe.com/enable\":\"true\",\"profefe.com/port\":\"pprof\",\"profefe.com/path\":\"/custom/pprof/"
	          "\","
	          "\"profefe.com/service\":\"node-agent\"},"
	          "\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"name\":\"agent\"}]},"
	          "\"spec\":{\"containers\":[{\"name\":\"main\",\"ports\":[{\"name\":\"http\",\"containerPort\":80}]},"
	          "{\"name\":\"debug\",\"ports\":[{\"name\":\"pprof\",\"containerPort\":6061}]}]},"
	          "\"status\":{\"phase\":\"Running\",\"podIP\":\"fd00::7\"}}",
	          &o, &l, why, sizeof why),
	    PD_KS_TARGET);
	assert_string_equal(l.v[0].url, "http://[fd00::7]:6061/custom/pprof"); /* IPv6 in brackets, path kept */
	assert_string_equal(l.v[0].service, "node-agent");                     /* the annotation wins */
	assert_string_equal(label(&l.v[0], "container"), "debug");
	pd_scrape_targets_free(&l);
	/* a port declared by no container: the first container; path "/" = the root */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"solo\",\"namespace\":\"n\",\"annotations\":{"
	          "\"profefe.com/enable\":\"true\",\"profefe.com/port\":\"7070\",\"profefe.com/path\":\"/\"}},"
	          "\"spec\":{\"containers\":[{\"name\":\"one\"},{\"name\":\"two\"}]}," RUNNING "}",
	          &o, &l, why, sizeof why),
	    PD_KS_TARGET);
	assert_string_equal(l.v[0].url, "http://10.1.2.3:7070");
	assert_string_equal(l.v[0].service, "solo"); /* a bare pod is its own workload */
	assert_string_equal(label(&l.v[0], "container"), "one");
	pd_scrape_targets_free(&l);
	/* unusable annotations: reported, not guessed (kube-profefe silently used 6060) */
	static const char *const bad_ports[] = {"0", "65536", "99999999", "-1", "80a", "", "pprof"};
	for (size_t i = 0; i < sizeof bad_ports / sizeof *bad_ports; i++) {
		char json[600];
		snprintf(json, sizeof json,
		         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/"
		         "enable\":\"true\","
		         "\"profefe.com/port\":\"%s\"}}," RUNNING "}",
		         bad_ports[i]);
		assert_int_equal(judge(json, &o, &l, why, sizeof why), PD_KS_BAD_ANNOTATION);
		assert_contains(why, "profefe.com/port");
	}
	static const char *const bad_paths[] = {"debug/pprof", "/a b", "/x?y=1", "/x#f", "/a\\\\b"};
	for (size_t i = 0; i < sizeof bad_paths / sizeof *bad_paths; i++) {
		char json[600];
		snprintf(json, sizeof json,
		         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/"
		         "enable\":\"true\","
		         "\"profefe.com/path\":\"%s\"}}," RUNNING "}",
		         bad_paths[i]);
		assert_int_equal(judge(json, &o, &l, why, sizeof why), PD_KS_BAD_ANNOTATION);
		assert_contains(why, "profefe.com/path");
	}
	/* a service that would corrupt the table or be cut short: reported, not used */
	char longsvc[300];
	memset(longsvc, 's', 256);
	longsvc[256] = 0;
	const char *const bad_services[] = {"evil\\nTARGET x", "a\\u001b[31mred", "del\\u007f", longsvc};
	for (size_t i = 0; i < sizeof bad_services / sizeof *bad_services; i++) {
		char json[900];
		snprintf(json, sizeof json,
		         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"annotations\":{\"profefe.com/"
		         "enable\":\"true\","
		         "\"profefe.com/service\":\"%s\"}}," RUNNING "}",
		         bad_services[i]);
		assert_int_equal(judge(json, &o, &l, why, sizeof why), PD_KS_BAD_ANNOTATION);
		assert_contains(why, "profefe.com/service");
	}
	assert_int_equal(l.n, 0);
	/* a CronJob's pod: the CronJob */
	assert_int_equal(
	    judge("{\"metadata\":{\"name\":\"report-28912345-abcde\",\"namespace\":\"n\",\"annotations\":{"
	          "\"profefe.com/"
	          "enable\":\"true\"},\"ownerReferences\":[{\"kind\":\"Job\",\"name\":\"report-28912345\"}]}," RUNNING
	          "}",
	          &o, &l, why, sizeof why),
	    PD_KS_TARGET);
	assert_string_equal(l.v[0].service, "report");
	pd_scrape_targets_free(&l);
}

static void test_label_cap(void **state)
{
	(void)state;
	/* 100 kept labels present on the pod: at most 64 labels in all */
	char *names[100];
	char json[8192];
	size_t n =
	    (size_t)snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"labels\":{");
	for (int i = 0; i < 100; i++) {
		names[i] = malloc(8);
		snprintf(names[i], 8, "l%d", i);
		n += (size_t)snprintf(json + n, sizeof json - n, "%s\"l%d\":\"v\"", i ? "," : "", i);
	}
	snprintf(json + n, sizeof json - n, "},\"annotations\":{\"profefe.com/enable\":\"true\"}}," RUNNING "}");
	struct pd_scrape_kube_opts o = {.pod_labels = (const char *const *)names, .npod_labels = 100};
	struct pd_scrape_targets l = {0};
	assert_int_equal(judge(json, &o, &l, NULL, 0), PD_KS_TARGET);
	assert_int_equal(l.v[0].nlabels, 64);
	assert_string_equal(l.v[0].labels[0].key, "namespace");
	pd_scrape_targets_free(&l);
	for (int i = 0; i < 100; i++)
		free(names[i]);
}

static void test_reasons(void **state)
{
	(void)state;
	assert_string_equal(pd_scrape_kube_reason(PD_KUBE_EUNAUTH, ""), "unauthorized");
	assert_string_equal(pd_scrape_kube_reason(PD_KUBE_EFORBIDDEN, ""), "forbidden");
	assert_string_equal(pd_scrape_kube_reason(PD_KUBE_EGONE, ""), "gone");
	assert_string_equal(pd_scrape_kube_reason(PD_ENOTFOUND, ""), "not_found");
	assert_string_equal(
	    pd_scrape_kube_reason(PD_KUBE_EHTTP, "GET https://h/api/v1/pods: HTTP 503 Service Unavailable: x"),
	    "http_5xx");
	assert_string_equal(
	    pd_scrape_kube_reason(PD_KUBE_EHTTP, "GET https://h/api/v1/pods: HTTP 429 Too Many Requests: x"),
	    "http_4xx");
	assert_string_equal(pd_scrape_kube_reason(PD_KUBE_EHTTP, "watch: ERROR event: 500 InternalError: boom"),
	                    "http_5xx");
	assert_string_equal(pd_scrape_kube_reason(PD_EIO, "connect"), "network");
	assert_string_equal(pd_scrape_kube_reason(PD_EINVAL, "bad JSON"), "invalid_response");
	assert_string_equal(pd_scrape_kube_reason(PD_ELIMIT, "too big"), "invalid_response");
	assert_string_equal(pd_scrape_kube_reason(PD_ENOMEM, ""), "internal");
}

/* The config file's kubernetes entries: the first that matches a pod gives
 * its types, schedule, labels and label_keep; no match, no target. */
static void test_config_rules(void **state)
{
	(void)state;
	const char *y = "global: {labels: {cluster: prod}}\n"
	                "scrape_configs:\n"
	                "  - kubernetes: {namespaces: [shop], selector: 'app=web,tier notin (db)'}\n"
	                "    types: [cpu, heap]\n"
	                "    interval: 30s\n"
	                "    cpu_duration: 5s\n"
	                "    labels: {team: web}\n"
	                "    label_keep: [namespace, pod, team, pod-template-hash, cluster]\n"
	                "  - kubernetes: {namespaces: [pay]}\n"
	                "    labels: {pod: mine}\n"
	                "    params: {debug: 1, x: [a b, c]}\n";
	struct pd_scrape_cfg_flags fl = {.types = PD_ST_ALL, .interval_ns = 60000000000LL, .cpu_ns = 10000000000LL,
	                                 .timeout_ns = 10000000000LL};
	struct pd_scrape_file f;
	struct pd_err err;
	if (pd_scrape_parse_yaml("k.yaml", y, strlen(y), &fl, &f, &err))
		fail_msg("%s", err.msg);
	struct pd_scrape_kube_opts o = opts();
	o.rules = f.rules;
	o.nrules = f.nrules;
	const char *web = "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"shop\",\"uid\":\"u\","
	                  "\"labels\":{\"team\":\"a\",\"app\":\"web\",\"pod-template-hash\":\"h1\"},"
	                  "\"annotations\":{\"profefe.com/enable\":\"true\"}},"
	                  "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]}," RUNNING "}";
	struct pd_scrape_targets l = {0};
	assert_int_equal(judge(web, &o, &l, NULL, 0), PD_KS_TARGET);
	const struct pd_scrape_target *t = &l.v[0];
	assert_int_equal(t->types, (1u << PD_ST_CPU) | (1u << PD_ST_HEAP));
	assert_int_equal(t->interval_ns, 30000000000LL);
	assert_int_equal(t->cpu_ns, 5000000000LL);
	assert_int_equal(t->timeout_ns, 10000000000LL);
	assert_string_equal(t->url, "http://10.1.2.3:6060/debug/pprof"); /* no params: no query */
	char b[600];
	labels_str(t, b, sizeof b);
	/* label_keep: the built-ins it names, the pod labels it names (not
	 * --pod-labels), the pod's team before the entry's, global:'s cluster */
	assert_string_equal(b, "namespace=shop,pod=web-1,team=a,pod-template-hash=h1,cluster=prod");
	pd_scrape_targets_free(&l);
	/* shop, but not app=web: no entry, no target */
	const char *db = "{\"metadata\":{\"name\":\"db-1\",\"namespace\":\"shop\","
	                 "\"labels\":{\"app\":\"web\",\"tier\":\"db\"},"
	                 "\"annotations\":{\"profefe.com/enable\":\"true\"}}," RUNNING "}";
	char why[200];
	assert_int_equal(judge(db, &o, &l, why, sizeof why), PD_KS_NO_RULE);
	assert_string_equal(why, "matches none of the config file's kubernetes entries");
	assert_int_equal(l.n, 0);
	/* pay: the second entry, the defaults (scraper's: 0), its labels after the built-ins */
	const char *pay = "{\"metadata\":{\"name\":\"p-1\",\"namespace\":\"pay\",\"labels\":{\"app\":\"pay\"},"
	                  "\"annotations\":{\"profefe.com/enable\":\"true\"}}," RUNNING "}";
	assert_int_equal(judge(pay, &o, &l, NULL, 0), PD_KS_TARGET);
	assert_int_equal(l.v[0].types, PD_ST_ALL);
	assert_int_equal(l.v[0].interval_ns, 60000000000LL);
	/* its params: a query on every request (Go's ?debug=1 text formats) */
	assert_string_equal(l.v[0].url, "http://10.1.2.3:6060/debug/pprof?debug=1&x=a+b&x=c");
	labels_str(&l.v[0], b, sizeof b);
	assert_string_equal(b, "namespace=pay,pod=p-1,app=pay,cluster=prod");
	pd_scrape_targets_free(&l);
	/* not annotated stays not annotated */
	const char *plain = "{\"metadata\":{\"name\":\"x\",\"namespace\":\"pay\"}," RUNNING "}";
	assert_int_equal(judge(plain, &o, &l, NULL, 0), PD_KS_NOT_ANNOTATED);
	/* no entries: global's label_keep through the options */
	char *only[] = {(char *)"pod", (char *)"app"};
	o = opts();
	o.label_keep = only;
	o.nlabel_keep = 2;
	o.has_keep = true;
	assert_int_equal(judge(pay, &o, &l, NULL, 0), PD_KS_TARGET);
	labels_str(&l.v[0], b, sizeof b);
	assert_string_equal(b, "pod=p-1,app=pay");
	assert_int_equal(l.v[0].types, 0);
	assert_int_equal(l.v[0].interval_ns, 0);
	pd_scrape_targets_free(&l);
	/* a pod label named service is not copied, even when label_keep names
	 * it: a selector's service= is the profiles' service */
	const char *svc = "{\"metadata\":{\"name\":\"s-1\",\"namespace\":\"pay\","
	                  "\"labels\":{\"app\":\"pay\",\"service\":\"checkout\"},"
	                  "\"annotations\":{\"profefe.com/enable\":\"true\"}}," RUNNING "}";
	char *with_svc[] = {(char *)"pod", (char *)"service", (char *)"app"};
	o.label_keep = with_svc;
	o.nlabel_keep = 3;
	assert_int_equal(judge(svc, &o, &l, NULL, 0), PD_KS_TARGET);
	labels_str(&l.v[0], b, sizeof b);
	assert_string_equal(b, "pod=s-1,app=pay");
	pd_scrape_targets_free(&l);
	pd_scrape_file_free(&f);
}

static void test_target_names(void **state)
{
	(void)state;
	struct pd_scrape_targets l = {0};
	struct pd_err err;
	assert_int_equal(pd_scrape_targets_add(&l, "k", "http://h/debug/pprof", "s", NULL, 0, 0, &err), 0);
	assert_string_equal(pd_scrape_target_name(&l.v[0]), "k");
	assert_int_equal(pd_scrape_targets_set_name(&l, 0, "ns/pod", &err), 0);
	assert_string_equal(pd_scrape_target_name(&l.v[0]), "ns/pod");
	assert_int_equal(pd_scrape_targets_set_name(&l, 0, NULL, &err), 0);
	assert_string_equal(pd_scrape_target_name(&l.v[0]), "k");
	assert_int_equal(pd_scrape_targets_set_name(&l, 1, "x", &err), PD_EINVAL);
	pd_scrape_targets_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_deployment_pod),    cmocka_unit_test(test_selection),
	    cmocka_unit_test(test_port_path_service), cmocka_unit_test(test_label_cap),
	    cmocka_unit_test(test_reasons),           cmocka_unit_test(test_target_names),
	    cmocka_unit_test(test_config_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
