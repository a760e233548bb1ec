/*
 * test_scrape.c — lib/scrape: profile type lists, target URLs and the config
 * file (the line format; the YAML format: values, precedence, every error
 * class with its FILE:LINE:COLUMN, caps, format detection, label selectors,
 * examples/scrape.yaml), profefe's label escaping (checked by parsing it back with the
 * collector's own parameter code), the delivery queue (bounded, oldest
 * dropped, order kept through requeues), schedule math (phase, jitter
 * spread, next due, backoff), Go's "cpu profiling already in use", the
 * delta step, the in-process store sink, and the scraper itself against an
 * in-test HTTP server (good, HTML, busy-CPU and down targets; target list
 * replaced while it runs; a target's own interval and CPU duration).
 */
#include "testutil.h"
#include "../../lib/scrape/scrape.h"
#include "../../lib/http/params.h"

#include <arpa/inet.h>
#include "../../lib/util/pdmhd.h"
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* ---- types ---------------------------------------------------------------------------------- */

static void test_parse_types(void **state)
{
	(void)state;
	unsigned m;
	struct pd_err err;
	char buf[128];
	assert_int_equal(pd_scrape_parse_types("cpu,heap", &m, &err), 0);
	assert_int_equal(m, (1u << PD_ST_CPU) | (1u << PD_ST_HEAP));
	assert_int_equal(pd_scrape_parse_types("all", &m, &err), 0);
	assert_int_equal(m, PD_ST_ALL);
	assert_int_equal(pd_scrape_parse_types(" mutex , cpu ,,cpu,", &m, &err), 0);
	assert_int_equal(m, (1u << PD_ST_CPU) | (1u << PD_ST_MUTEX));
	assert_string_equal(pd_scrape_types_str(m, buf, sizeof buf), "cpu,mutex");
	assert_int_equal(pd_scrape_parse_types("allocs,block,goroutine,threadcreate", &m, &err), 0);
	assert_string_equal(pd_scrape_types_str(m, buf, sizeof buf), "allocs,block,goroutine,threadcreate");
	assert_int_equal(pd_scrape_parse_types("cpu,bogus", &m, &err), PD_EUSAGE);
	assert_contains(err.msg, "unknown profile type \"bogus\"");
	assert_contains(err.msg, "threadcreate");
	assert_int_equal(pd_scrape_parse_types("CPU", &m, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_parse_types("", &m, &err), PD_EUSAGE);
	assert_contains(err.msg, "no profile type");
	assert_int_equal(pd_scrape_parse_types(" , ", &m, &err), PD_EUSAGE);
	for (int t = 0; t < PD_ST_N; t++) {
		assert_non_null(pd_scrape_type_name(t));
		assert_non_null(pd_scrape_type_kind(t));
	}
	assert_null(pd_scrape_type_name(PD_ST_N));
	assert_true(pd_scrape_type_cumulative(PD_ST_ALLOCS) && pd_scrape_type_cumulative(PD_ST_BLOCK) &&
		    pd_scrape_type_cumulative(PD_ST_MUTEX));
	assert_false(pd_scrape_type_cumulative(PD_ST_HEAP) || pd_scrape_type_cumulative(PD_ST_CPU) ||
		     pd_scrape_type_cumulative(PD_ST_GOROUTINE));
}

/* ---- URLs and targets ---------------------------------------------------------------------- */

static void expect_url(const char *in, const char *want)
{
	char *out = NULL;
	struct pd_err err;
	if (pd_scrape_normalize_url(in, &out, &err))
		fail_msg("%s: %s", in, err.msg);
	assert_string_equal(out, want);
	free(out);
}

static void test_urls(void **state)
{
	(void)state;
	expect_url("127.0.0.1:6060", "http://127.0.0.1:6060/debug/pprof");
	expect_url("http://h:1", "http://h:1/debug/pprof");
	expect_url("http://h:1/", "http://h:1/debug/pprof");
	expect_url(" HTTPS://h/x/debug/pprof// ", "https://h/x/debug/pprof");
	expect_url("http://[::1]:6060/debug/pprof/", "http://[::1]:6060/debug/pprof");
	char *out = NULL;
	struct pd_err err;
	assert_int_equal(pd_scrape_normalize_url("ftp://h", &out, &err), PD_EUSAGE);
	assert_contains(err.msg, "only http:// and https://");
	assert_int_equal(pd_scrape_normalize_url("", &out, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_normalize_url("http:///x", &out, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_normalize_url("http://h/debug/pprof#x", &out, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_normalize_url("http://h/debug/pprof?seconds=5", &out, &err), PD_EUSAGE);
	assert_contains(err.msg, "seconds= is the scraper's own");
	assert_int_equal(pd_scrape_normalize_url("http://h/debug/pprof?debug=1&seconds", &out, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_normalize_url("http://h /x", &out, &err), PD_EUSAGE);
	assert_null(out);
	char hp[64];
	assert_string_equal(pd_scrape_url_hostport("http://10.0.0.7:6060/debug/pprof", hp, sizeof hp), "10.0.0.7:6060");
	assert_string_equal(pd_scrape_url_hostport("https://u:p@h:1/x", hp, sizeof hp), "h:1");
	char *u = pd_scrape_type_url("http://h:1/debug/pprof", PD_ST_CPU, 10);
	assert_string_equal(u, "http://h:1/debug/pprof/profile?seconds=10");
	free(u);
	u = pd_scrape_type_url("http://h:1/debug/pprof", PD_ST_THREADCREATE, 10);
	assert_string_equal(u, "http://h:1/debug/pprof/threadcreate");
	free(u);
	u = pd_scrape_type_url("http://h:1/debug/pprof", PD_ST_ALLOCS, 10);
	assert_string_equal(u, "http://h:1/debug/pprof/allocs");
	free(u);
	/* a query (?debug=1) is kept and goes with every type, after seconds= for cpu */
	expect_url("http://h:1/debug/pprof?debug=1", "http://h:1/debug/pprof?debug=1");
	expect_url("http://h:1/debug/pprof/?debug=1", "http://h:1/debug/pprof?debug=1");
	expect_url("h:1?debug=1", "http://h:1/debug/pprof?debug=1");
	expect_url("https://h:1?debug=1&x=/y", "https://h:1/debug/pprof?debug=1&x=/y");
	expect_url("http://h:1/debug/pprof?", "http://h:1/debug/pprof");
	expect_url("http://h:1/debug/pprof?myseconds=2", "http://h:1/debug/pprof?myseconds=2");
	assert_string_equal(pd_scrape_url_hostport("http://h:1?debug=1", hp, sizeof hp), "h:1");
	u = pd_scrape_type_url("http://h:1/debug/pprof?debug=1", PD_ST_HEAP, 10);
	assert_string_equal(u, "http://h:1/debug/pprof/heap?debug=1");
	free(u);
	u = pd_scrape_type_url("http://h:1/debug/pprof?debug=1&a=b", PD_ST_CPU, 7);
	assert_string_equal(u, "http://h:1/debug/pprof/profile?seconds=7&debug=1&a=b");
	free(u);
	/* legacy text heap and allocs are one format: an allocs target may serve it */
	assert_true(pd_scrape_kind_ok(PD_ST_ALLOCS, "allocs") && pd_scrape_kind_ok(PD_ST_ALLOCS, "heap"));
	assert_true(pd_scrape_kind_ok(PD_ST_MUTEX, "block/mutex") && pd_scrape_kind_ok(PD_ST_HEAP, "heap"));
	assert_false(pd_scrape_kind_ok(PD_ST_HEAP, "allocs") || pd_scrape_kind_ok(PD_ST_CPU, "heap") ||
		     pd_scrape_kind_ok(PD_ST_ALLOCS, "cpu"));
}

/* A target's bytes are described, never quoted (issue 12). */
static void test_body_messages(void **state)
{
	(void)state;
	static const char *const bodies[] = {
		"<!DOCTYPE html><html><body>SECRET-MARKER-123</body></html>",
		"{\"token\": \"SECRET-MARKER-123\"}",
		"SECRET-MARKER-123 is not a profile\n",
		"heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [SECRET-MARKER-123] @ 0x1\n",
		"--- mutex:\ncycles/second=1\n1 99999999999999999999999 @ 0x1 SECRET-MARKER-123\n",
		"goroutine profile: total 1\nSECRET-MARKER-123 @ 0x1\n",
		"goroutine 1 [running]:\nmain.SECRET-MARKER-123()\n",
		"\x01\x02SECRET-MARKER-123\x00\x00",
	};
	static const char *const want[] = {
		"(got text/html): the body is an HTML page (58 bytes) — a login",
		"(got text/html): the body is JSON (30 bytes)",
		"(got text/html): the body is text (35 bytes) in none of the profile formats",
		"(got text/html): the body is text (72 bytes): heap profile, line 2: malformed (Go's profile.Parse refuses it too",
		"(got text/html): the body is text (77 bytes): contention profile, line 3: malformed (Go's profile.Parse refuses it too",
		"(got text/html): the body is text (51 bytes): goroutine profile, line 2: malformed (Go's profile.Parse refuses it too",
		"(got text/html): the body is a goroutine dump (debug=2",
		"(got text/html): the body is binary data (21 bytes) that is neither",
	};
	struct pd_pprof_limits lim = {.no_quotes = true};
	for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
		const uint8_t *b = (const uint8_t *)bodies[i];
		size_t n = strlen(bodies[i]) + (i == 7 ? 2 : 0);
		struct pd_profile *p = NULL;
		struct pd_err err;
		assert_int_not_equal(pd_pprof_decode(b, n, &lim, &p, &err), 0);
		char msg[400];
		pd_scrape_not_profile(msg, sizeof msg, "text/html", b, n, &err);
		if (!strstr(msg, want[i]) || strstr(msg, "SECRET"))
			fail_msg("body %zu: %s", i, msg);
		pd_scrape_http_error(msg, sizeof msg, 404, "http://h/x", b, n);
		if (strstr(msg, "SECRET") || !strstr(msg, "HTTP 404 from http://h/x, with "))
			fail_msg("body %zu: %s", i, msg);
	}
	char msg[200];
	pd_scrape_http_error(msg, sizeof msg, 500, "u", (const uint8_t *)"", 0);
	assert_string_equal(msg, "HTTP 500 from u, with an empty body");
	/* without no_quotes (an upload's own bytes), the decoder still shows them */
	struct pd_err err;
	struct pd_profile *p = NULL;
	assert_int_not_equal(pd_pprof_decode((const uint8_t *)bodies[2], strlen(bodies[2]), NULL, &p, &err), 0);
	assert_contains(err.msg, "SECRET-MARKER-123");
}

static const char *label(const struct pd_scrape_target *t, const char *k)
{
	for (size_t i = 0; i < t->nlabels; i++)
		if (!strcmp(t->labels[i].key, k))
			return t->labels[i].value;
	return NULL;
}

static void test_targets_and_config(void **state)
{
	(void)state;
	struct pd_scrape_targets l = {0};
	struct pd_err err;
	struct pd_kv dl[] = {{(char *)"env", (char *)"prod"}};
	const char *text = "# static targets\n"
			   "\n"
			   "10.0.0.7:6060 service=auth zone=a   # a comment\n"
			   "http://10.0.0.8:6060/debug/pprof types=cpu,heap instance=web-1\n"
			   "  http://10.0.0.9:7070/x/ service=search\n";
	assert_int_equal(pd_scrape_parse_config(text, "t.txt", "dflt", dl, 1, &l, &err), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.v[0].key, "http://10.0.0.7:6060/debug/pprof");
	assert_string_equal(l.v[0].url, "http://10.0.0.7:6060/debug/pprof");
	assert_string_equal(l.v[0].service, "auth");
	assert_int_equal(l.v[0].types, 0);
	assert_int_equal(l.v[0].nlabels, 3);
	assert_string_equal(label(&l.v[0], "env"), "prod");
	assert_string_equal(label(&l.v[0], "zone"), "a");
	assert_string_equal(label(&l.v[0], "instance"), "10.0.0.7:6060");
	assert_string_equal(l.v[1].service, "dflt");
	assert_int_equal(l.v[1].types, (1u << PD_ST_CPU) | (1u << PD_ST_HEAP));
	assert_int_equal(l.v[1].nlabels, 2);
	assert_string_equal(label(&l.v[1], "instance"), "web-1");
	assert_string_equal(l.v[2].url, "http://10.0.0.9:7070/x");
	/* the same target again: an error naming the line */
	assert_int_equal(pd_scrape_parse_config("10.0.0.7:6060 service=x\n", "t.txt", NULL, NULL, 0, &l, &err),
			 PD_EINVAL);
	assert_contains(err.msg, "t.txt:1");
	assert_contains(err.msg, "given twice");
	assert_int_equal(pd_scrape_parse_config("\n\nh:1\n", "t.txt", NULL, NULL, 0, &l, &err), PD_EUSAGE);
	assert_contains(err.msg, "t.txt:3");
	assert_contains(err.msg, "no service");
	assert_int_equal(pd_scrape_parse_config("h:2 service=a oops\n", "t.txt", NULL, NULL, 0, &l, &err), PD_EUSAGE);
	assert_contains(err.msg, "\"oops\"");
	assert_int_equal(pd_scrape_parse_config("h:2 service=a types=cpu,nope\n", "f", NULL, NULL, 0, &l, &err),
			 PD_EUSAGE);
	assert_contains(err.msg, "f:1");
	assert_contains(err.msg, "nope");
	assert_int_equal(pd_scrape_parse_config("ftp://h:2 service=a\n", "f", NULL, NULL, 0, &l, &err), PD_EUSAGE);
	/* a key once per line: which one would win is not said */
	static const char *const twice[] = {"h:2 service=a service=b\n", "h:2 service=a types=cpu types=heap\n",
					    "h:2 service=a zone=x zone=y\n"};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(pd_scrape_parse_config(twice[i], "f", NULL, NULL, 0, &l, &err), PD_EUSAGE);
		assert_contains(err.msg, "f:1: ");
		assert_contains(err.msg, "= given twice");
	}
	assert_int_equal(l.n, 3);
	/* a line's label replaces -L's of the same name (one env, not env=prod and env=dev) */
	struct pd_scrape_targets l2 = {0};
	assert_int_equal(pd_scrape_parse_config("h:5 service=a env=dev\n", "f", NULL, dl, 1, &l2, &err), 0);
	assert_int_equal(l2.v[0].nlabels, 2);
	assert_string_equal(label(&l2.v[0], "env"), "dev");
	pd_scrape_targets_free(&l2);
	assert_int_equal(pd_scrape_targets_add(&l, "k", "http://h/debug/pprof", "s", NULL, 0, 0, &err), 0);
	assert_int_equal(pd_scrape_targets_add(&l, "k", "http://h2/debug/pprof", "s", NULL, 0, 0, &err), PD_EINVAL);
	assert_int_equal(l.n, 4);
	/* append does not look (O(1)); check_unique finds the duplicate in O(n) */
	assert_int_equal(pd_scrape_targets_check_unique(&l, &err), 0);
	struct pd_scrape_targets m = {0};
	for (size_t i = 0; i < l.n; i++)
		assert_int_equal(pd_scrape_targets_append(&m, &l.v[i], &err), 0);
	assert_int_equal(pd_scrape_targets_check_unique(&m, &err), 0);
	assert_int_equal(pd_scrape_targets_append(&m, &l.v[3], &err), 0);
	assert_int_equal(m.n, 5);
	assert_int_equal(pd_scrape_targets_check_unique(&m, &err), PD_EINVAL);
	assert_contains(err.msg, "target \"k\" given twice");
	pd_scrape_targets_free(&m);
	pd_scrape_targets_free(&l);
	assert_int_equal(l.n, 0);
}

/* ---- the YAML config file -------------------------------------------------------------------- */

#define SEC 1000000000LL

/* The command line's defaults: nothing given. */
static struct pd_scrape_cfg_flags no_flags(void)
{
	struct pd_scrape_cfg_flags fl = {.types = PD_ST_ALL,
					 .interval_ns = PD_SCRAPE_INTERVAL_NS,
					 .cpu_ns = PD_SCRAPE_CPU_NS,
					 .timeout_ns = PD_SCRAPE_TIMEOUT_NS};
	return fl;
}

static const char *labels_of(const struct pd_scrape_target *t, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < t->nlabels && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%s=%s", i ? "," : "", t->labels[i].key, t->labels[i].value);
	return buf;
}

static const char *const yaml_ok =
	"# a config\n"
	"global:\n"
	"  interval: 2m\n"
	"  types: cpu,heap\n"
	"  labels: {env: prod, team: core}\n"
	"scrape_configs:\n"
	"  - service: auth\n"
	"    interval: 30s\n"
	"    cpu_duration: 5s\n"
	"    timeout: 3s\n"
	"    types: [heap, allocs]\n"
	"    path: /x/pprof/\n"
	"    labels: {team: id}\n"
	"    static_configs:\n"
	"      - targets: ['10.0.0.7:6060', 'http://10.0.0.8:6060/debug/pprof', 'https://h:1']\n"
	"        labels: {zone: a}\n"
	"      - targets: [10.0.0.9:6060]\n"
	"        labels:\n"
	"          instance: web-9\n"
	"          empty:\n"
	"  - job_name: search\n"
	"    label_keep: [env, instance]\n"
	"    static_configs:\n"
	"      - targets: ['10.0.1.1:7070']\n"
	"        labels: {zone: b}\n"
	"  - kubernetes:\n"
	"      namespaces: [shop]\n"
	"      selector: app=web,tier!=db\n"
	"    types: [cpu]\n"
	"    interval: 3m\n"
	"    label_keep: [namespace, pod, app]\n"
	"  - kubernetes:\n";

/* A target's query (?debug=1) in the YAML config: kept, after the group's path. */
static void test_yaml_query(void **state)
{
	(void)state;
	static const char y[] = "scrape_configs:\n"
				"  - service: s\n"
				"    path: /x/pprof\n"
				"    params: {gc: 1}\n"
				"    static_configs:\n"
				"      - targets: ['h:1?debug=1', 'http://h:2?debug=1&x=/y', 'http://h:3/debug/pprof?debug=1']\n"
				"  - service: t\n"
				"    params: {debug: '1'}\n"
				"    static_configs: [{targets: ['h:4']}]\n";
	struct pd_scrape_file f;
	struct pd_err err;
	struct pd_scrape_cfg_flags fl = no_flags();
	if (pd_scrape_parse_yaml("q.yaml", y, strlen(y), &fl, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.targets.n, 4);
	assert_string_equal(f.targets.v[0].url, "http://h:1/x/pprof?debug=1&gc=1");
	assert_string_equal(f.targets.v[1].url, "http://h:2/x/pprof?debug=1&x=/y&gc=1");
	assert_string_equal(f.targets.v[2].url, "http://h:3/debug/pprof?debug=1&gc=1");
	assert_string_equal(f.targets.v[3].url, "http://h:4/debug/pprof?debug=1");
	assert_string_equal(label(&f.targets.v[0], "instance"), "h:1");
	pd_scrape_file_free(&f);
	static const char bad[] = "scrape_configs:\n"
				  "  - service: s\n"
				  "    static_configs: [{targets: ['h:1?seconds=30']}]\n";
	assert_int_equal(pd_scrape_parse_yaml("b.yaml", bad, strlen(bad), &fl, &f, &err), PD_EUSAGE);
	assert_contains(err.msg, "b.yaml:3:");
	assert_contains(err.msg, "seconds= is the scraper's own");
	pd_scrape_file_free(&f);
	static const char bad2[] = "scrape_configs:\n"
				   "  - kubernetes: {}\n"
				   "    params: {seconds: 30}\n";
	assert_int_equal(pd_scrape_parse_yaml("b.yaml", bad2, strlen(bad2), &fl, &f, &err), PD_EUSAGE);
	assert_contains(err.msg, "b.yaml:3:14: scrape_configs[0].params.seconds: seconds is the scraper's own");
	pd_scrape_file_free(&f);
}

static void test_yaml_config(void **state)
{
	(void)state;
	struct pd_scrape_file f;
	struct pd_err err;
	char b[512];
	struct pd_kv fl_labels[] = {{(char *)"cluster", (char *)"c1"}, {(char *)"team", (char *)"flag"}};
	struct pd_scrape_cfg_flags fl = no_flags();
	fl.labels = fl_labels;
	fl.nlabels = 2;
	/* an empty document after it (a trailing ---) is nothing, as Prometheus reads it */
	static const char *const trailing[] = {"global: {interval: 2m}\n---\n", "global: {interval: 2m}\n...\n---\n# end\n"};
	for (size_t i = 0; i < 2; i++) {
		if (pd_scrape_parse_yaml("t.yaml", trailing[i], strlen(trailing[i]), &fl, &f, &err))
			fail_msg("%s", err.msg);
		assert_int_equal(f.global.interval_ns, 120 * SEC);
		pd_scrape_file_free(&f);
	}
	if (pd_scrape_parse_yaml("t.yaml", yaml_ok, strlen(yaml_ok), &fl, &f, &err))
		fail_msg("%s", err.msg);
	/* global: its own keys, the flags' defaults, -L over its labels */
	assert_int_equal(f.global.types, (1u << PD_ST_CPU) | (1u << PD_ST_HEAP));
	assert_int_equal(f.global.interval_ns, 120 * SEC);
	assert_int_equal(f.global.cpu_ns, PD_SCRAPE_CPU_NS);
	assert_int_equal(f.global.timeout_ns, PD_SCRAPE_TIMEOUT_NS);
	assert_int_equal(f.global.nlabels, 3);
	assert_string_equal(f.global.labels[0].key, "env");
	assert_string_equal(f.global.labels[1].value, "flag"); /* a flag wins over global: */
	assert_false(f.global.has_keep);
	/* group auth: its own schedule, types, path and labels */
	assert_int_equal(f.targets.n, 5);
	const struct pd_scrape_target *t = &f.targets.v[0];
	assert_string_equal(t->key, "http://10.0.0.7:6060/x/pprof");
	assert_string_equal(t->url, "http://10.0.0.7:6060/x/pprof");
	assert_string_equal(t->service, "auth");
	assert_int_equal(t->types, (1u << PD_ST_HEAP) | (1u << PD_ST_ALLOCS));
	assert_int_equal(t->interval_ns, 30 * SEC);
	assert_int_equal(t->cpu_ns, 5 * SEC);
	assert_int_equal(t->timeout_ns, 3 * SEC);
	assert_string_equal(labels_of(t, b, sizeof b), "env=prod,team=id,cluster=c1,zone=a,instance=10.0.0.7:6060");
	assert_string_equal(f.targets.v[1].url, "http://10.0.0.8:6060/debug/pprof"); /* has a path: kept */
	assert_string_equal(f.targets.v[2].url, "https://h:1/x/pprof");
	assert_string_equal(labels_of(&f.targets.v[3], b, sizeof b), "env=prod,team=id,cluster=c1,instance=web-9,empty=");
	/* group search: global:'s schedule and types, label_keep */
	t = &f.targets.v[4];
	assert_string_equal(t->url, "http://10.0.1.1:7070/debug/pprof");
	assert_string_equal(t->service, "search");
	assert_int_equal(t->types, f.global.types);
	assert_int_equal(t->interval_ns, 120 * SEC);
	assert_int_equal(t->cpu_ns, PD_SCRAPE_CPU_NS);
	assert_string_equal(labels_of(t, b, sizeof b), "env=prod,instance=10.0.1.1:7070");
	/* the kubernetes entries */
	assert_int_equal(f.nrules, 2);
	const struct pd_scrape_kube_rule *r = &f.rules[0];
	assert_string_equal(r->where, "t.yaml:26:5");
	assert_int_equal(r->nnamespaces, 1);
	assert_string_equal(r->namespaces[0], "shop");
	assert_string_equal(r->selector_text, "app=web,tier!=db");
	assert_int_equal(r->set.types, 1u << PD_ST_CPU);
	assert_int_equal(r->set.interval_ns, 180 * SEC);
	assert_true(r->set.has_keep);
	assert_int_equal(r->set.nkeep, 3);
	assert_string_equal(r->set.keep[2], "app");
	assert_int_equal(r->set.nlabels, 3);
	r = &f.rules[1];
	assert_int_equal(r->nnamespaces, 0);
	assert_null(r->selector);
	assert_int_equal(r->set.types, f.global.types);
	assert_false(r->set.has_keep);
	/* the scope they ask for */
	assert_false(f.kube_all);
	assert_string_equal(f.kube_namespace, "shop");
	pd_scrape_file_free(&f);

	/* precedence: flags given beat global:, a group's own keys beat flags */
	fl = no_flags();
	fl.types = 1u << PD_ST_GOROUTINE;
	fl.interval_ns = 90 * SEC;
	fl.given = PD_SCF_TYPES | PD_SCF_INTERVAL;
	fl.service = "dflt";
	const char *y = "global: {interval: 2m, cpu_duration: 20s, types: [cpu]}\n"
			"scrape_configs:\n"
			"  - static_configs: [{targets: ['h:1']}]\n"
			"  - {service: own, interval: 5m, types: all, static_configs: [{targets: ['h:2']}]}\n"
			"  - kubernetes: {all_namespaces: true}\n";
	if (pd_scrape_parse_yaml("p.yml", y, strlen(y), &fl, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.global.types, 1u << PD_ST_GOROUTINE);
	assert_int_equal(f.global.interval_ns, 90 * SEC);
	assert_int_equal(f.global.cpu_ns, 20 * SEC); /* not a flag: global: */
	assert_string_equal(f.targets.v[0].service, "dflt"); /* --service */
	assert_int_equal(f.targets.v[0].types, 1u << PD_ST_GOROUTINE);
	assert_int_equal(f.targets.v[0].interval_ns, 90 * SEC);
	assert_int_equal(f.targets.v[1].types, PD_ST_ALL);
	assert_int_equal(f.targets.v[1].interval_ns, 300 * SEC);
	assert_true(f.kube_all);
	assert_null(f.kube_namespace);
	pd_scrape_file_free(&f);

	/* an empty file, comments only: nothing, no error */
	assert_int_equal(pd_scrape_parse_yaml("e.yaml", "# nothing\n", 10, &fl, &f, &err), 0);
	assert_int_equal(f.targets.n + f.nrules, 0);
	assert_int_equal(f.global.types, 1u << PD_ST_GOROUTINE);
	pd_scrape_file_free(&f);
	/* namespaces of two entries: all namespaces watched */
	y = "scrape_configs:\n  - kubernetes: {namespaces: [a]}\n  - kubernetes: {namespaces: [b], selector: x}\n";
	assert_int_equal(pd_scrape_parse_yaml("n.yaml", y, strlen(y), &fl, &f, &err), 0);
	assert_true(f.kube_all);
	pd_scrape_file_free(&f);
}

/* The example in examples/scrape.yaml parses, and says what its comments say. */
static void test_yaml_example(void **state)
{
	(void)state;
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	if (pd_buf_read_file(&b, "examples/scrape.yaml", &err))
		fail_msg("%s (run from the repository root)", err.msg);
	assert_true(pd_scrape_config_is_yaml("examples/scrape.yaml", (const char *)b.ptr, b.len));
	struct pd_scrape_cfg_flags fl = no_flags();
	struct pd_scrape_file f;
	if (pd_scrape_parse_yaml("examples/scrape.yaml", b.ptr, b.len, &fl, &f, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(f.targets.n, 5);
	assert_string_equal(f.targets.v[0].service, "auth");
	assert_int_equal(f.targets.v[0].interval_ns, 30 * SEC);
	assert_int_equal(f.targets.v[0].cpu_ns, 5 * SEC);
	assert_int_equal(f.targets.v[3].types, PD_ST_ALL);
	assert_string_equal(f.targets.v[3].url, "http://10.0.0.9:7070/internal/pprof");
	char buf[300];
	assert_string_equal(labels_of(&f.targets.v[3], buf, sizeof buf), "env=prod,instance=10.0.0.9:7070");
	assert_int_equal(f.global.interval_ns, 60 * SEC);
	assert_false(f.global.types & (1u << PD_ST_THREADCREATE));
	assert_int_equal(f.nrules, 2);
	assert_string_equal(f.kube_namespace, "shop");
	pd_scrape_file_free(&f);
	pd_buf_free(&b);
}

static void test_yaml_detect(void **state)
{
	(void)state;
	static const struct {
		const char *name, *text;
		bool yaml;
	} cases[] = {
		{"t.yaml", "10.0.0.7:6060 service=a\n", true}, /* the name says so */
		{"T.YML", "", true},
		{"t.txt", "# targets\n\n10.0.0.7:6060 service=a\n", false},
		{"t", "http://h:6060/debug/pprof service=a\n", false},
		{"t", "  localhost:6060 service=a\n", false},
		{"t", "[::1]:6060 service=a\n", false},
		{"t", "", false},
		{"t", "# only\n# comments\n", false},
		{"t", "# c\n\nglobal:\n  interval: 1m\n", true},
		{"t", "scrape_configs: []\n", true},
		{"t", "scrape_configs:", true},
		{"t", "---\nglobal: {}\n", true},
		{"t", "%YAML 1.1\n---\n", true},
		{"t", "{global: {}}\n", true},
		{"t", "- a\n", true},
		{"t", "\xef\xbb\xbfglobal:\n", true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		if (pd_scrape_config_is_yaml(cases[i].name, cases[i].text, strlen(cases[i].text)) != cases[i].yaml)
			fail_msg("case %zu (%s: %s): want %s", i, cases[i].name, cases[i].text, cases[i].yaml ? "YAML" : "lines");
}

static void test_yaml_errors(void **state)
{
	(void)state;
	static const struct {
		const char *yaml;
		int code;
		const char *want; /* the message starts with it */
		const char *also; /* and holds this */
	} cases[] = {
		{"scrape_configs:\n  - service: a\n    typez: [cpu]\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"typez\" (valid: types, interval,", "kubernetes, params)"},
		{"globals: {}\n", PD_EUSAGE, "t.yaml:1:1: unknown key \"globals\" (valid: global, scrape_configs)", NULL},
		{"global:\n  types: [cpu, cpux]\n", PD_EUSAGE,
		 "t.yaml:2:16: global.types[1]: unknown profile type \"cpux\" (valid: cpu, heap,", NULL},
		{"global:\n  types: []\n", PD_EUSAGE, "t.yaml:2:10: global.types: no profile type given", NULL},
		{"global:\n  types: {cpu: 1}\n", PD_EUSAGE, "t.yaml:2:10: global.types: expected a list of profile types, got a mapping", NULL},
		{"global:\n  interval: 5x\n", PD_EUSAGE, "t.yaml:2:13: global.interval: time: unknown unit", NULL},
		{"global:\n  interval: 60\n", PD_EUSAGE, "t.yaml:2:13: global.interval: time: missing unit", NULL},
		{"global:\n  interval: 500ms\n", PD_EUSAGE, "t.yaml:2:13: global.interval: must be at least 1s", NULL},
		{"global:\n  timeout: -1s\n", PD_EUSAGE, "t.yaml:2:12: global.timeout: must be positive", NULL},
		{"global:\n  cpu_duration: 1500ms\n", PD_EUSAGE, "t.yaml:2:17: global.cpu_duration: must be whole seconds", NULL},
		{"global:\n  interval: 5s\n  cpu_duration: 5s\n", PD_EUSAGE,
		 "t.yaml:2:3: global: cpu_duration (5s) must be shorter than interval (5s)", NULL},
		{"global:\n  interval: 1m\n  interval: 2m\n", PD_EUSAGE, "t.yaml:3:3: global: key \"interval\" given twice", NULL},
		{"global:\n  labels: [a]\n", PD_EUSAGE, "t.yaml:2:11: global.labels: expected a mapping of label names", NULL},
		{"global:\n  labels: {a: 1, a: 2}\n", PD_EUSAGE, "t.yaml:2:18: global.labels: label \"a\" given twice", NULL},
		{"global:\n  labels: {a: [1]}\n", PD_EUSAGE, "t.yaml:2:15: global.labels.a: expected a label value", NULL},
		{"global:\n  label_keep: [a, '']\n", PD_EUSAGE, "t.yaml:2:19: global.label_keep[1]: a label name must not be empty",
		 NULL},
		{"global: [\n", PD_EUSAGE, "t.yaml:2:1: invalid YAML: ", NULL},
		{"- a\n", PD_EUSAGE, "t.yaml:1:1: expected a mapping (global:, scrape_configs:) at the top level, got a list",
		 NULL},
		{"global: {}\n---\nglobal: {}\n", PD_EUSAGE, "t.yaml:3:1: a second YAML document", NULL},
		{"global: {}\n---\n---\nglobal: {}\n", PD_EUSAGE, "t.yaml:4:1: a second YAML document", NULL},
		{"scrape_configs: {a: 1}\n", PD_EUSAGE, "t.yaml:1:17: scrape_configs: expected a list, got a mapping", NULL},
		{"scrape_configs:\n  - service: a\n", PD_EUSAGE,
		 "t.yaml:2:5: scrape_configs[0]: want static_configs (static targets) or kubernetes (pods)", NULL},
		{"scrape_configs:\n  - static_configs:\n      - targets: [h:1]\n", PD_EUSAGE,
		 "t.yaml:2:5: scrape_configs[0]: service is required for static targets", NULL},
		{"scrape_configs:\n  - service: ''\n    static_configs: [{targets: [h:1]}]\n", PD_EUSAGE,
		 "t.yaml:2:14: scrape_configs[0].service: must not be empty", NULL},
		{"scrape_configs:\n  - {service: a, job_name: b, static_configs: [{targets: [h:1]}]}\n", PD_EUSAGE,
		 "t.yaml:2:28: scrape_configs[0].job_name: service and job_name are the same key", NULL},
		{"scrape_configs:\n  - service: a\n    static_configs:\n      - targets: ['ftp://h:1']\n", PD_EUSAGE,
		 "t.yaml:4:19: scrape_configs[0].static_configs[0].targets[0]: target URL \"ftp://h:1\": only http:// and "
		 "https://",
		 NULL},
		{"scrape_configs:\n  - service: a\n    static_configs:\n      - targets: []\n", PD_EUSAGE,
		 "t.yaml:4:18: scrape_configs[0].static_configs[0].targets: no targets", NULL},
		{"scrape_configs:\n  - service: a\n    static_configs:\n      - labels: {a: b}\n", PD_EUSAGE,
		 "t.yaml:4:9: scrape_configs[0].static_configs[0]: targets: missing", NULL},
		{"scrape_configs:\n  - service: a\n    static_configs: []\n", PD_EUSAGE,
		 "t.yaml:3:21: scrape_configs[0].static_configs: empty", NULL},
		{"scrape_configs:\n  - service: a\n    static_configs:\n      - targets: ['h:1']\n"
		 "  - service: b\n    static_configs:\n      - targets: ['http://h:1/debug/pprof/']\n",
		 PD_EUSAGE,
		 "t.yaml:7:19: scrape_configs[1].static_configs[0].targets[0]: target http://h:1/debug/pprof given twice "
		 "(first at t.yaml:4:19)",
		 NULL},
		{"scrape_configs:\n  - service: a\n    path: debug\n    static_configs: [{targets: [h:1]}]\n", PD_EUSAGE,
		 "t.yaml:3:11: scrape_configs[0].path: \"debug\" is not an absolute URL path", NULL},
		{"scrape_configs:\n  - service: a\n    interval: 5s\n    static_configs: [{targets: [h:1]}]\n", PD_EUSAGE,
		 "t.yaml:2:5: scrape_configs[0]: cpu_duration (10s) must be shorter than interval (5s)", NULL},
		{"scrape_configs:\n  - kubernetes: {}\n    service: x\n", PD_EUSAGE,
		 "t.yaml:3:14: scrape_configs[0].service: not in a kubernetes entry (a pod's service is its "
		 "profefe.com/service annotation",
		 NULL},
		{"scrape_configs:\n  - kubernetes: {}\n    static_configs: []\n", PD_EUSAGE,
		 "t.yaml:3:21: scrape_configs[0].static_configs: not in a kubernetes entry", NULL},
		{"scrape_configs:\n  - kubernetes: {namespace: [a]}\n", PD_EUSAGE,
		 "t.yaml:2:18: scrape_configs[0].kubernetes: unknown key \"namespace\" (valid: namespaces, all_namespaces, "
		 "selector)",
		 NULL},
		{"scrape_configs:\n  - kubernetes: {namespaces: [Shop]}\n", PD_EUSAGE,
		 "t.yaml:2:31: scrape_configs[0].kubernetes.namespaces[0]: \"Shop\" is not a namespace name", NULL},
		{"scrape_configs:\n  - kubernetes: {namespaces: [a], all_namespaces: true}\n", PD_EUSAGE,
		 "t.yaml:2:51: scrape_configs[0].kubernetes.all_namespaces: give namespaces or all_namespaces, not both", NULL},
		{"scrape_configs:\n  - kubernetes: {all_namespaces: yes}\n", PD_EUSAGE,
		 "t.yaml:2:34: scrape_configs[0].kubernetes.all_namespaces: expected true or false", NULL},
		{"scrape_configs:\n  - kubernetes: {selector: 'app in (a'}\n", PD_EUSAGE,
		 "t.yaml:2:28: scrape_configs[0].kubernetes.selector: selector \"app in (a\": expected ',' or ')' in a value "
		 "set at position 10",
		 NULL},
		{"global:\n  labels: {\"a\\0b\": c}\n", PD_EUSAGE, "t.yaml:2:12: global.labels: contains a NUL byte", NULL},
		/* Prometheus' keys: what to write instead */
		{"global:\n  scrape_interval: 30s\n", PD_EUSAGE,
		 "t.yaml:2:3: global: unknown key \"scrape_interval\" (a Prometheus key): write interval", NULL},
		{"scrape_configs:\n  - job_name: a\n    scrape_timeout: 5s\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"scrape_timeout\" (a Prometheus key): write timeout", NULL},
		{"scrape_configs:\n  - job_name: a\n    metrics_path: /debug/pprof\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"metrics_path\" (a Prometheus key): write path", NULL},
		{"scrape_configs:\n  - job_name: a\n    scheme: https\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"scheme\" (a Prometheus key): write the scheme in the target",
		 NULL},
		{"scrape_configs:\n  - job_name: a\n    relabel_configs: []\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"relabel_configs\" (a Prometheus key): no relabelling", NULL},
		{"scrape_configs:\n  - job_name: a\n    kubernetes_sd_configs: [{role: pod}]\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"kubernetes_sd_configs\" (a Prometheus key): write an entry of "
		 "its own: - kubernetes:",
		 NULL},
		{"scrape_configs:\n  - job_name: a\n    consul_sd_configs: []\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"consul_sd_configs\" (a Prometheus key): profd's targets are "
		 "static_configs and kubernetes entries",
		 NULL},
		{"scrape_configs:\n  - job_name: a\n    tls_config: {ca_file: x}\n", PD_EUSAGE,
		 "t.yaml:3:5: scrape_configs[0]: unknown key \"tls_config\" (a Prometheus key): ", "--target-ca FILE"},
		{"scrape_configs:\n  - kubernetes: {role: pod}\n", PD_EUSAGE,
		 "t.yaml:2:18: scrape_configs[0].kubernetes: unknown key \"role\" (a Prometheus key): profd discovers pods only",
		 NULL},
		{"scrape_configs:\n  - kubernetes: {namespaces: {names: [a]}}\n", PD_EUSAGE,
		 "t.yaml:2:30: scrape_configs[0].kubernetes.namespaces: expected a list of namespaces: namespaces: [shop, web] "
		 "(not Prometheus' {names: [...]})",
		 NULL},
		{"global:\n  interval: 1d\n", PD_EUSAGE,
		 "t.yaml:2:13: global.interval: time: unknown unit \"d\" in duration \"1d\" (units: ns, us, ms, s, m, h; 1d is "
		 "24h)",
		 NULL},
		{"global:\n  <<: {interval: 1m}\n", PD_EUSAGE, "t.yaml:2:3: global: YAML merge keys (<<) are not supported",
		 NULL},
		{"global:\n  label_keep: [env, \"team_.*\"]\n", PD_EUSAGE,
		 "t.yaml:2:21: global.label_keep[1]: \"team_.*\": label_keep names labels exactly, it is not a regex", NULL},
		{"scrape_configs:\n  - job_name: a\n    params: {debug: 1, debug: 2}\n    static_configs: [{targets: [h:1]}]\n",
		 PD_EUSAGE, "t.yaml:3:24: scrape_configs[0].params: parameter \"debug\" given twice", NULL},
		/* label names a selector or Prometheus reads otherwise */
		{"global:\n  labels: {env: a, service: b}\n", PD_EUSAGE,
		 "t.yaml:2:20: global.labels: \"service\" is not a label: the group's service", NULL},
		{"scrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: [h:1]\n        labels: {__param_debug: 1}\n",
		 PD_EUSAGE,
		 "t.yaml:5:18: scrape_configs[0].static_configs[0].labels: label \"__param_debug\": names starting with __ are "
		 "reserved",
		 NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct pd_scrape_file f;
		struct pd_err err = {0, ""};
		struct pd_scrape_cfg_flags fl = no_flags();
		int rc = pd_scrape_parse_yaml("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &fl, &f, &err);
		if (rc != cases[i].code || strncmp(err.msg, cases[i].want, strlen(cases[i].want)) ||
		    (cases[i].also && !strstr(err.msg, cases[i].also)))
			fail_msg("case %zu: got %d \"%s\",\n want %d \"%s...\"", i, rc, err.msg, cases[i].code, cases[i].want);
		assert_int_equal(f.targets.n + f.nrules, 0); /* freed */
	}
	/* caps: 65 labels; an alias-heavy document */
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&b, "global:\n  labels: {", 19), 0);
	for (int i = 0; i < 65; i++) {
		char kv[32];
		int n = snprintf(kv, sizeof kv, "%sl%d: v", i ? ", " : "", i);
		assert_int_equal(pd_buf_append(&b, kv, (size_t)n), 0);
	}
	assert_int_equal(pd_buf_append(&b, "}\n", 2), 0);
	struct pd_scrape_file f;
	struct pd_err err;
	struct pd_scrape_cfg_flags fl = no_flags();
	assert_int_equal(pd_scrape_parse_yaml("t.yaml", b.ptr, b.len, &fl, &f, &err), PD_EUSAGE);
	assert_contains(err.msg, "65 labels, over the collector's limit of 64");
	b.len = 0;
	const char *head = "scrape_configs:\n  - &k\n    kubernetes: {}\n    label_keep: [";
	assert_int_equal(pd_buf_append(&b, head, strlen(head)), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(pd_buf_append(&b, i ? ",a" : "a", i ? 2 : 1), 0);
	assert_int_equal(pd_buf_append(&b, "]\n", 2), 0);
	for (int i = 0; i < 999; i++)
		assert_int_equal(pd_buf_append(&b, "  - *k\n", 7), 0);
	assert_int_equal(pd_scrape_parse_yaml("t.yaml", b.ptr, b.len, &fl, &f, &err), PD_ELIMIT);
	assert_contains(err.msg, "t.yaml: document too complex");
	pd_buf_free(&b);
}

/* Kubernetes label selectors, as the API server reads them. */
static const char *const sel_labels[][2] = {{"app", "web"}, {"tier", "api"}, {"env", "prod"}, {"app.kubernetes.io/name", "x"}};
static const char *sel_get(void *ctx, const char *key)
{
	(void)ctx;
	for (size_t i = 0; i < sizeof sel_labels / sizeof *sel_labels; i++)
		if (!strcmp(sel_labels[i][0], key))
			return sel_labels[i][1];
	return NULL;
}

static void test_selector(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		bool match;
	} ok[] = {
		{"", true},
		{"app=web", true},
		{"app==web", true},
		{"app = web , tier != db", true},
		{"app=api", false},
		{"canary!=true", true},
		{"app!=web", false},
		{"env in (prod, staging)", true},
		{"env in(staging)", false},
		{"env notin (prod)", false},
		{"canary notin (x)", true},
		{"app", true},
		{"canary", false},
		{"!canary", true},
		{"!app", false},
		{"app.kubernetes.io/name=x,app=web,!canary", true},
		{"missing=", false},
		{"app=web,tier=db", false},
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		struct pd_scrape_selector *sel;
		struct pd_err err;
		if (pd_scrape_selector_parse(ok[i].s, &sel, &err))
			fail_msg("\"%s\": %s", ok[i].s, err.msg);
		if (pd_scrape_selector_match(sel, sel_get, NULL) != ok[i].match)
			fail_msg("\"%s\": want %s", ok[i].s, ok[i].match ? "a match" : "no match");
		pd_scrape_selector_free(sel);
	}
	static const char *const bad[] = {"=web", "app=web,", "app web", "!app=x", "app in (a", "app in a", ",", "app=w b"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct pd_scrape_selector *sel = NULL;
		struct pd_err err;
		if (pd_scrape_selector_parse(bad[i], &sel, &err) != PD_EUSAGE)
			fail_msg("\"%s\": accepted", bad[i]);
		assert_null(sel);
		assert_contains(err.msg, "at position");
	}
	/* rules: the first whose namespaces and selector match */
	struct pd_scrape_file f;
	struct pd_err err;
	struct pd_scrape_cfg_flags fl = no_flags();
	const char *y = "scrape_configs:\n"
			"  - kubernetes: {namespaces: [shop], selector: 'app=db'}\n"
			"  - kubernetes: {namespaces: [shop, pay], selector: 'app=web'}\n"
			"  - kubernetes: {namespaces: [pay]}\n";
	assert_int_equal(pd_scrape_parse_yaml("r.yaml", y, strlen(y), &fl, &f, &err), 0);
	assert_ptr_equal(pd_scrape_kube_rule_match(f.rules, f.nrules, "shop", sel_get, NULL), &f.rules[1]);
	assert_ptr_equal(pd_scrape_kube_rule_match(f.rules, f.nrules, "pay", sel_get, NULL), &f.rules[1]);
	assert_null(pd_scrape_kube_rule_match(f.rules, f.nrules, "other", sel_get, NULL));
	assert_ptr_equal(pd_scrape_kube_rule_match(f.rules + 2, 1, "pay", sel_get, NULL), &f.rules[2]);
	pd_scrape_file_free(&f);
	/* label_keep on a plain list */
	struct pd_kv v[] = {{(char *)"a", (char *)"1"}, {(char *)"b", (char *)"2"}, {(char *)"c", (char *)"3"}};
	char *keep[] = {(char *)"c", (char *)"a", (char *)"zz"};
	assert_int_equal(pd_scrape_labels_keep(v, 3, keep, 3), 2);
	assert_string_equal(v[0].key, "a");
	assert_string_equal(v[1].key, "c");
	assert_int_equal(pd_scrape_labels_keep(v, 2, keep, 0), 0);
}

/* Targets' own schedule: set, checked, copied. */
static void test_target_sched(void **state)
{
	(void)state;
	struct pd_scrape_targets l = {0}, c = {0};
	struct pd_err err;
	struct pd_kv lab = {(char *)"k", (char *)"v"};
	assert_int_equal(pd_scrape_targets_add(&l, "k", "http://h/debug/pprof", "s", &lab, 1, 1u << PD_ST_CPU, &err), 0);
	assert_int_equal(pd_scrape_targets_set_sched(&l, 0, 5 * SEC, 2 * SEC, SEC / 2, &err), 0);
	assert_int_equal(pd_scrape_targets_set_sched(&l, 0, SEC / 2, 0, 0, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_targets_set_sched(&l, 0, 0, SEC + 1, 0, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_targets_set_sched(&l, 0, 0, 0, 1000, &err), PD_EUSAGE);
	assert_int_equal(pd_scrape_targets_set_sched(&l, 1, 0, 0, 0, &err), PD_EINVAL);
	assert_int_equal(pd_scrape_targets_set_name(&l, 0, "nice", &err), 0);
	assert_int_equal(pd_scrape_targets_copy(&c, &l.v[0], &err), 0);
	assert_int_equal(pd_scrape_targets_copy(&c, &l.v[0], &err), PD_EINVAL);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.v[0].name, "nice");
	assert_int_equal(c.v[0].interval_ns, 5 * SEC);
	assert_int_equal(c.v[0].cpu_ns, 2 * SEC);
	assert_int_equal(c.v[0].timeout_ns, SEC / 2);
	assert_int_equal(c.v[0].types, 1u << PD_ST_CPU);
	assert_string_equal(c.v[0].labels[0].value, "v");
	pd_scrape_targets_free(&l);
	pd_scrape_targets_free(&c);
}

/* ---- escaping ----------------------------------------------------------------------------- */

static char *escape(const char *s)
{
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_scrape_query_escape(s, &b), 0);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	return (char *)b.ptr;
}

/* Value of parameter k in a URL's query, decoded once (as the server does). */
static char *param(const char *url, const char *k)
{
	const char *q = strchr(url, '?');
	assert_non_null(q);
	size_t kl = strlen(k);
	for (const char *p = q + 1; p && *p;) {
		const char *e = strchr(p, '&');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n > kl && !strncmp(p, k, kl) && p[kl] == '=') {
			char *out = malloc(n + 1);
			size_t dl;
			struct pd_err err;
			if (pd_api_query_unescape(p + kl + 1, n - kl - 1, out, &dl, &err))
				fail_msg("%s: %s", k, err.msg);
			return out;
		}
		p = e ? e + 1 : NULL;
	}
	return NULL;
}

static void test_escaping(void **state)
{
	(void)state;
	char *e = escape("a b+c/d=e,f&g?h%i~j._-K\xc3\xa9");
	/* Go: url.QueryEscape("a b+c/d=e,f&g?h%i~j._-Ké") */
	assert_string_equal(e, "a+b%2Bc%2Fd%3De%2Cf%26g%3Fh%25i~j._-K%C3%A9");
	free(e);
	struct pd_kv l[] = {
		{(char *)"version", (char *)"1.0.0+build"},
		{(char *)"dc", (char *)"fra"},
	};
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_scrape_labels_value(l, 2, &b), 0);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	assert_string_equal((char *)b.ptr, "version=1.0.0%2Bbuild,dc=fra");
	pd_buf_free(&b);
	/* the example of docs/api.md: version=1.0.0+build travels as version%3D1.0.0%252Bbuild */
	int64_t t = 1559216942123456789LL;
	char *u = pd_scrape_post_url("http://c:10100/", "api backend", "cpu", l, 2, t);
	assert_non_null(u);
	assert_string_equal(u, "http://c:10100/api/0/profiles?service=api+backend&type=cpu"
			       "&labels=version%3D1.0.0%252Bbuild%2Cdc%3Dfra&created_at=2019-05-30T11%3A49%3A02.123456789");
	free(u);
	u = pd_scrape_post_url("http://c", "s", "heap", NULL, 0, 0);
	assert_string_equal(u, "http://c/api/0/profiles?service=s&type=heap&created_at=1970-01-01T00%3A00%3A00.000000000");
	free(u);

	/* round trip through the collector's own parameter code, with every awkward byte */
	struct pd_kv hard[] = {
		{(char *)"k,1", (char *)"a=b,c"},  {(char *)"pod", (char *)"x+y z"}, {(char *)"pct", (char *)"100%"},
		{(char *)"amp", (char *)"&?#/;"},  {(char *)"uni", (char *)"\xc3\xa9t\xc3\xa9"}, {(char *)"e", (char *)""},
	};
	u = pd_scrape_post_url("http://c", "s/1", "block", hard, ARRAY_LEN(hard), t);
	char *svc = param(u, "service"), *typ = param(u, "type"), *lab = param(u, "labels"), *ca = param(u, "created_at");
	assert_string_equal(svc, "s/1");
	assert_string_equal(typ, "block");
	struct pd_api_label *pl;
	size_t n;
	struct pd_err err;
	if (pd_api_parse_labels(lab, &pl, &n, &err))
		fail_msg("labels: %s", err.msg);
	assert_int_equal(n, ARRAY_LEN(hard));
	for (size_t i = 0; i < ARRAY_LEN(hard); i++) {
		bool found = false;
		for (size_t j = 0; j < n; j++)
			found |= !strcmp(pl[j].key, hard[i].key) && !strcmp(pl[j].value, hard[i].value);
		if (!found)
			fail_msg("label %s=%s lost in %s", hard[i].key, hard[i].value, lab);
	}
	pd_api_labels_free(pl);
	int64_t back;
	assert_int_equal(pd_api_parse_time("created_at", ca, 0, &back, &err), 0);
	assert_int_equal(back, t);
	free(svc);
	free(typ);
	free(lab);
	free(ca);
	free(u);
}

/* ---- queue ------------------------------------------------------------------------------------ */

static struct pd_queue_item *item(int tag, size_t len)
{
	struct pd_queue_item *it = calloc(1, sizeof *it);
	it->body = malloc(len ? len : 1);
	it->len = len;
	it->type = tag;
	return it;
}

static size_t free_list(struct pd_queue_item *ev, int *tags)
{
	size_t n = 0;
	while (ev) {
		struct pd_queue_item *next = ev->next;
		if (tags)
			tags[n] = ev->type;
		n++;
		pd_queue_item_free(ev);
		ev = next;
	}
	return n;
}

static void test_queue(void **state)
{
	(void)state;
	const size_t unit = 100 + sizeof(struct pd_queue_item);
	struct pd_queue q;
	pd_queue_init(&q, 3 * unit);
	int tags[8];
	for (int i = 0; i < 3; i++)
		assert_null(pd_queue_push(&q, item(i, 100)));
	assert_int_equal(q.n, 3);
	assert_int_equal(q.bytes, 3 * unit);
	/* full: the 4th and 5th push out the two oldest, in order */
	assert_int_equal(free_list(pd_queue_push(&q, item(3, 100)), tags), 1);
	assert_int_equal(tags[0], 0);
	assert_int_equal(free_list(pd_queue_push(&q, item(4, 100)), tags), 1);
	assert_int_equal(tags[0], 1);
	assert_int_equal(q.dropped, 2);
	assert_int_equal(q.dropped_bytes, 2 * unit);
	assert_true(q.bytes <= q.max_bytes);
	/* FIFO; a failed post goes back to its place: 2 3 4 -> pop 2, pop 3, requeue 3, requeue 2 */
	struct pd_queue_item *a = pd_queue_pop(&q), *b = pd_queue_pop(&q);
	assert_int_equal(a->type, 2);
	assert_int_equal(b->type, 3);
	assert_int_equal(q.n, 1);
	assert_null(pd_queue_requeue(&q, b));
	assert_null(pd_queue_requeue(&q, a));
	for (int want = 2; want <= 4; want++) {
		struct pd_queue_item *it = pd_queue_pop(&q);
		assert_int_equal(it->type, want);
		assert_null(pd_queue_requeue(&q, it)); /* back it goes, still first */
		it = pd_queue_pop(&q);
		assert_int_equal(it->type, want);
		pd_queue_item_free(it);
	}
	assert_null(pd_queue_pop(&q));
	assert_int_equal(q.n, 0);
	assert_int_equal(q.bytes, 0);
	/* a requeue into a queue that filled up meanwhile: the requeued item is the oldest, it goes */
	for (int i = 10; i < 13; i++)
		assert_null(pd_queue_push(&q, item(i, 100)));
	a = pd_queue_pop(&q); /* 10 in flight */
	assert_null(pd_queue_push(&q, item(13, 100)));
	assert_int_equal(free_list(pd_queue_requeue(&q, a), tags), 1);
	assert_int_equal(tags[0], 10);
	/* an item larger than the whole queue evicts everything, itself included */
	assert_int_equal(free_list(pd_queue_push(&q, item(99, 4 * unit)), tags), 4);
	assert_int_equal(tags[0], 11);
	assert_int_equal(tags[3], 99);
	assert_int_equal(q.n, 0);
	assert_int_equal(q.bytes, 0);
	/* mixed sizes: a big item pushes out as many old ones as it needs */
	for (int i = 20; i < 23; i++)
		assert_null(pd_queue_push(&q, item(i, 100)));
	assert_int_equal(free_list(pd_queue_push(&q, item(23, 200 + sizeof(struct pd_queue_item))), tags), 2);
	assert_int_equal(tags[0], 20);
	assert_int_equal(tags[1], 21);
	a = pd_queue_pop(&q);
	assert_int_equal(a->type, 22);
	pd_queue_item_free(a);
	pd_queue_clear(&q);
	assert_int_equal(q.n, 0);
	assert_int_equal(q.bytes, 0);
}

/* ---- schedule ---------------------------------------------------------------------------------- */

static void test_schedule(void **state)
{
	(void)state;
	const int64_t S = 1000000000LL, I = 60 * S;
	/* phase: stable, in range, spread over the interval */
	assert_int_equal(pd_sched_phase("http://a:1/debug/pprof", I), pd_sched_phase("http://a:1/debug/pprof", I));
	int buckets[10] = {0};
	char key[64];
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof key, "http://10.0.%d.%d:6060/debug/pprof", i / 250, i % 250);
		int64_t p = pd_sched_phase(key, I);
		assert_true(p >= 0 && p < I);
		buckets[p / (I / 10)]++;
	}
	for (int b = 0; b < 10; b++)
		if (buckets[b] < 60 || buckets[b] > 140)
			fail_msg("bucket %d has %d of 1000 targets: jitter is not spread", b, buckets[b]);
	/* next: the first phase + k*interval strictly after */
	assert_int_equal(pd_sched_next(0, 5 * S, I), 5 * S);
	assert_int_equal(pd_sched_next(5 * S, 5 * S, I), 65 * S);
	assert_int_equal(pd_sched_next(5 * S - 1, 5 * S, I), 5 * S);
	assert_int_equal(pd_sched_next(100 * S, 5 * S, I), 125 * S);
	assert_int_equal(pd_sched_next(-7 * S, 5 * S, I), 5 * S);
	assert_int_equal(pd_sched_next(1000 * I + 3, 0, I), 1001 * I);
	for (int64_t t = 0; t < 3 * I; t += 7 * S + 13) {
		int64_t n = pd_sched_next(t, 17 * S, I);
		assert_true(n > t && n <= t + I);
		assert_int_equal((n - 17 * S) % I, 0);
	}
	/* backoff: 1s doubling, capped at 30s */
	assert_int_equal(pd_sched_backoff(0), 0);
	assert_int_equal(pd_sched_backoff(1), 1 * S);
	assert_int_equal(pd_sched_backoff(2), 2 * S);
	assert_int_equal(pd_sched_backoff(5), 16 * S);
	assert_int_equal(pd_sched_backoff(6), 30 * S);
	assert_int_equal(pd_sched_backoff(1000), 30 * S);
	/* retries never go past the next regular scrape */
	assert_int_equal(pd_sched_retry(100 * S, 1, 160 * S), 101 * S);
	assert_int_equal(pd_sched_retry(100 * S, 3, 160 * S), 104 * S);
	assert_int_equal(pd_sched_retry(100 * S, 3, 102 * S), 102 * S);
	assert_int_equal(pd_sched_retry(100 * S, 40, 1000 * S), 130 * S);
	/* CPU slots by default: ceil(1.25 x load) + 4, at least the floor */
	assert_int_equal(pd_scrape_cpu_slots(1000 * 10.0 / 60.0, 64), 213); /* the case */
	assert_int_equal(pd_scrape_cpu_slots(0, 64), 64);
	assert_int_equal(pd_scrape_cpu_slots(0, 1), 4);
	assert_int_equal(pd_scrape_cpu_slots(8.0, 1), 14);
	assert_int_equal(pd_scrape_cpu_slots(1e12, 64), 1000000);
}

static void test_cpu_in_use(void **state)
{
	(void)state;
	/* what Go's net/http/pprof writes (serveError) */
	const char *go = "Could not enable CPU profiling: cpu profiling already in use\n";
	assert_true(pd_scrape_cpu_in_use(500, (const uint8_t *)go, strlen(go)));
	assert_false(pd_scrape_cpu_in_use(200, (const uint8_t *)go, strlen(go)));
	assert_false(pd_scrape_cpu_in_use(503, (const uint8_t *)go, strlen(go)));
	const char *other = "Internal Server Error\n";
	assert_false(pd_scrape_cpu_in_use(500, (const uint8_t *)other, strlen(other)));
	assert_false(pd_scrape_cpu_in_use(500, NULL, 0));
	assert_false(pd_scrape_cpu_in_use(500, (const uint8_t *)go, 20)); /* cut short */
	assert_true(pd_scrape_result_down(PD_SR_TIMEOUT) && pd_scrape_result_down(PD_SR_CONNECT));
	assert_false(pd_scrape_result_down(PD_SR_CPU_IN_USE) || pd_scrape_result_ok(PD_SR_CPU_IN_USE));
	assert_string_equal(pd_scrape_result_name(PD_SR_NOT_PPROF), "not_pprof");
}

/* ---- profiles --------------------------------------------------------------------------------- */

/* A Go heap-style profile (allocs if allocs): one sample per function,
 * values alloc_objects, alloc_space, inuse_objects, inuse_space. */
static void heap_pb(struct pb *p, bool allocs, const int64_t (*vals)[4], size_t n, int64_t time_ns)
{
	static const char *const names[] = {"main.a", "main.b", "main.c", "main.d"};
	pb_init(p);
	pb_sample_type(p, "alloc_objects", "count");
	pb_sample_type(p, "alloc_space", "bytes");
	pb_sample_type(p, "inuse_objects", "count");
	pb_sample_type(p, "inuse_space", "bytes");
	pb_period_type(p, "space", "bytes", 524288);
	for (size_t i = 0; i < n; i++) {
		pb_function(p, i + 1, names[i], "main.go", 1);
		pb_location1(p, i + 1, 0, 0x1000 + i, i + 1, (int64_t)(10 + i));
		uint64_t loc = i + 1;
		pb_sample(p, &loc, 1, vals[i], 4, NULL, 0);
	}
	if (time_ns)
		tb_int(&p->b, PF_TIME_NANOS, time_ns);
	if (allocs)
		tb_int(&p->b, PF_DEFAULT_SAMPLE_TYPE, pb_s(p, "alloc_space"));
	pb_finish(p);
}

static struct pd_profile *heap_profile(bool allocs, const int64_t (*vals)[4], size_t n, int64_t time_ns)
{
	struct pb p;
	heap_pb(&p, allocs, vals, n, time_ns);
	struct pd_profile *r = pb_decode(&p);
	pb_free(&p);
	return r;
}

static int64_t value_of(const struct pd_profile *p, const char *fn, int t)
{
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_location *l = &p->locations[p->samples[i].locs[0]];
		if (!strcmp(tu_str(p, p->functions[l->lines[0].function].name), fn))
			return p->samples[i].values[t];
	}
	return 0;
}

static void test_delta_step(void **state)
{
	(void)state;
	const int64_t S = 1000000000LL;
	int64_t v1[][4] = {{10, 1000, 1, 100}, {5, 500, 5, 500}};
	int64_t v2[][4] = {{15, 1600, 2, 200}, {5, 500, 1, 100}, {3, 30, 3, 30}};
	struct pd_profile *a = heap_profile(true, v1, 2, 100 * S), *b = heap_profile(true, v2, 3, 160 * S);
	assert_string_equal(pd_profile_kind(a), "allocs");
	struct pd_profile *d = NULL;
	int r = -1;
	struct pd_err err;
	assert_int_equal(pd_scrape_delta_step(a, NULL, &r, &d, &err), 0);
	assert_int_equal(r, PD_SR_BASE);
	assert_null(d);
	assert_int_equal(pd_scrape_delta_step(b, a, &r, &d, &err), 0);
	assert_int_equal(r, PD_SR_OK);
	assert_non_null(d);
	assert_int_equal(value_of(d, "main.a", 0), 5);
	assert_int_equal(value_of(d, "main.a", 1), 600);
	assert_int_equal(value_of(d, "main.b", 0), 0); /* b's counters did not move... */
	assert_int_equal(value_of(d, "main.b", 3), -400); /* ...but its in-use bytes went down (as -base shows) */
	assert_int_equal(value_of(d, "main.c", 1), 30);
	assert_int_equal(d->time_nanos, 160 * S);
	assert_int_equal(d->duration_nanos, 60 * S);
	pd_profile_free(d);
	/* nothing happened */
	assert_int_equal(pd_scrape_delta_step(b, b, &r, &d, &err), 0);
	assert_int_equal(r, PD_SR_UNCHANGED);
	assert_null(d);
	/* a restart: counters went down */
	assert_int_equal(pd_scrape_delta_step(a, b, &r, &d, &err), 0);
	assert_int_equal(r, PD_SR_RESET);
	assert_null(d);
	/* another kind of profile answers now: a restart too */
	struct tb t;
	tb_init(&t);
	tu_minimal(&t);
	struct pd_profile *cpu = tu_decode(&t);
	tb_free(&t);
	assert_int_equal(pd_scrape_delta_step(cpu, a, &r, &d, &err), 0);
	assert_int_equal(r, PD_SR_RESET);
	pd_profile_free(cpu);
	pd_profile_free(a);
	pd_profile_free(b);
}

/* ---- the in-process sink ---------------------------------------------------------------------- */

static char tmpdir[256];

static int collect(void *ctx, const struct pd_profile_meta *m)
{
	struct pd_profile_meta *out = ctx;
	*out = *m;
	out->labels = NULL;
	out->nlabels = m->nlabels;
	return 0;
}

static void test_store_sink(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/profd-scrape-test.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	int64_t v[][4] = {{1, 2, 3, 4}};
	struct pb p;
	heap_pb(&p, false, v, 1, 0);
	struct pd_kv l[] = {{(char *)"instance", (char *)"h:1"}, {(char *)"env", (char *)"a b"}};
	const int64_t t = 1700000000123456789LL;
	struct pd_scrape_item it = {"auth", "heap", l, 2, t, p.b.p, p.b.len, 0};
	struct pd_profile_meta m;
	memset(&m, 0, sizeof m);
	if (pd_scrape_store_ingest(st, &it, &m, &err))
		fail_msg("ingest: %s", err.msg);
	assert_string_equal(m.service, "auth");
	assert_string_equal(m.type, "heap");
	assert_int_equal(m.created_ns, t);
	assert_int_equal(m.nlabels, 2);
	pd_meta_clear(&m);
	struct pd_store_query q = {"auth", "heap", l, 2, 0, INT64_MAX, 0};
	struct pd_profile_meta found;
	memset(&found, 0, sizeof found);
	assert_int_equal(pd_store_find(st, &q, collect, &found, &err), 0);
	assert_int_equal(found.created_ns, t);
	assert_int_equal(found.nlabels, 2);
	/* without a meta out, and a refused profile */
	assert_int_equal(pd_scrape_store_ingest(st, &it, NULL, &err), 0);
	struct pd_scrape_item bad = {"auth", "heap", NULL, 0, t, (const uint8_t *)"<html>", 6, 0};
	assert_int_not_equal(pd_scrape_store_ingest(st, &bad, NULL, &err), 0);
	/* older than the retention window: refused as a POST would be */
	it.min_created_ns = t + 1;
	assert_int_equal(pd_scrape_store_ingest(st, &it, NULL, &err), PD_EEXPIRED);
	pb_free(&p);
	pd_store_close(st);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
}

/* ---- the scraper against an in-test HTTP server ------------------------------------------------ */

struct srv {
	struct MHD_Daemon *d;
	unsigned port;
	struct pd_buf heap, cpu;
	atomic_int busy_left; /* CPU answers "already in use" this many times */
	atomic_int requests;
	atomic_int cpu_seconds; /* ?seconds= of the last CPU profile asked for */
};

static enum MHD_Result srv_answer(struct MHD_Connection *c, unsigned status, const void *p, size_t n,
				  const char *ctype)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result srv_req(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)method;
	(void)version;
	(void)upload;
	(void)upload_size;
	static int marker;
	struct srv *s = cls;
	if (!*con_cls) {
		*con_cls = &marker;
		return MHD_YES;
	}
	atomic_fetch_add(&s->requests, 1);
	if (!strncmp(url, "/good/", 6)) {
		if (strstr(url, "/profile")) {
			const char *sec = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
			atomic_store(&s->cpu_seconds, sec ? atoi(sec) : -1);
			return srv_answer(c, 200, s->cpu.ptr, s->cpu.len, "application/octet-stream");
		}
		if (strstr(url, "/heap"))
			return srv_answer(c, 200, s->heap.ptr, s->heap.len, "application/octet-stream");
		return srv_answer(c, 404, "404 page not found\n", 19, "text/plain; charset=utf-8");
	}
	if (!strncmp(url, "/html/", 6))
		return srv_answer(c, 200, "<!DOCTYPE html><html><body>hello</body></html>", 46, "text/html; charset=utf-8");
	if (!strncmp(url, "/busy/", 6)) {
		if (atomic_fetch_sub(&s->busy_left, 1) > 0) {
			const char *m = "Could not enable CPU profiling: cpu profiling already in use\n";
			return srv_answer(c, 500, m, strlen(m), "text/plain; charset=utf-8");
		}
		return srv_answer(c, 200, s->cpu.ptr, s->cpu.len, "application/octet-stream");
	}
	if (!strncmp(url, "/wrong/", 7)) /* a cpu profile where a heap profile should be */
		return srv_answer(c, 200, s->cpu.ptr, s->cpu.len, "application/octet-stream");
	return srv_answer(c, 404, "404 page not found\n", 19, "text/plain; charset=utf-8");
}

static void srv_start(struct srv *s)
{
	memset(s, 0, sizeof *s);
	int64_t v[][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
	struct pb p;
	heap_pb(&p, false, v, 2, 0);
	s->heap = (struct pd_buf)PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&s->heap, p.b.p, p.b.len), 0);
	pb_free(&p);
	struct tb t;
	tb_init(&t);
	tu_minimal(&t);
	s->cpu = (struct pd_buf)PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&s->cpu, t.p, t.len), 0);
	tb_free(&t);
	struct sockaddr_in sa = {0};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(0x7f000001);
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC, 0, NULL, NULL, srv_req, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	assert_non_null(s->d);
	s->port = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void srv_stop(struct srv *s)
{
	MHD_stop_daemon(s->d);
	pd_buf_free(&s->heap);
	pd_buf_free(&s->cpu);
}

static void add_target(struct pd_scrape_targets *l, const struct srv *s, const char *path, const char *service,
		       unsigned types)
{
	char url[128];
	struct pd_err err;
	if (strchr(path, ':'))
		snprintf(url, sizeof url, "%s", path);
	else
		snprintf(url, sizeof url, "http://127.0.0.1:%u/%s/debug/pprof", s->port, path);
	struct pd_kv lab = {(char *)"tag", (char *)path};
	assert_int_equal(pd_scrape_targets_add(l, url, url, service, &lab, 1, types, &err), 0);
}

static struct pd_store *open_tmp_store(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/profd-scrape-test.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	return st;
}

static void close_tmp_store(struct pd_store *st)
{
	pd_store_close(st);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
}

static int count_one(void *ctx, const struct pd_profile_meta *m)
{
	(void)m;
	(*(size_t *)ctx)++;
	return 0;
}

static size_t count(struct pd_store *st, const char *svc, const char *type)
{
	struct pd_store_query q = {svc, type, NULL, 0, 0, INT64_MAX, 0};
	size_t n = 0;
	struct pd_err err;
	assert_int_equal(pd_store_find(st, &q, count_one, &n, &err), 0);
	return n;
}

static void test_scraper_once(void **state)
{
	(void)state;
	struct srv srv;
	srv_start(&srv);
	atomic_store(&srv.busy_left, 1);
	struct pd_store *st = open_tmp_store();
	struct pd_scrape_config c;
	pd_scrape_config_default(&c);
	c.store = st;
	c.once = true;
	c.cpu_ns = 1000000000LL;
	c.timeout_ns = 2000000000LL;
	c.log = NULL;
	struct pd_scrape_targets l = {0};
	unsigned ch = (1u << PD_ST_CPU) | (1u << PD_ST_HEAP);
	add_target(&l, &srv, "good", "good", ch | (1u << PD_ST_GOROUTINE));
	add_target(&l, &srv, "html", "html", 1u << PD_ST_HEAP);
	add_target(&l, &srv, "busy", "busy", 1u << PD_ST_CPU);
	add_target(&l, &srv, "wrong", "wrong", 1u << PD_ST_HEAP);
	add_target(&l, &srv, "http://127.0.0.1:1/debug/pprof", "down", ch);
	struct pd_scraper *s;
	struct pd_err err;
	assert_int_equal(pd_scraper_new(&c, &s, &err), 0);
	assert_int_equal(pd_scraper_set_targets(s, &l, &err), 0);
	double t0 = pd_now();
	assert_int_equal(pd_scraper_run(s, &err), 0);
	double took = pd_now() - t0;
	assert_true(took >= 0.9 && took < 10); /* one CPU retry after --cpu-duration */
	struct pd_buf sum = PD_BUF_INIT(0);
	size_t failed = pd_scraper_summary(s, &sum);
	assert_int_equal(pd_buf_append(&sum, "", 1), 0);
	const char *txt = (const char *)sum.ptr;
	assert_int_equal(failed, 4); /* good: goroutine 404; html; wrong; down */
	assert_contains(txt, "TARGET");
	assert_contains(txt, "GOROUTINE");
	assert_contains(txt, "type heap: not a pprof profile (got text/html; charset=utf-8): the body is an HTML page (46 bytes)");
	assert_null(strstr(txt, "hello")); /* the page's text is not shown */
	assert_contains(txt, "type heap: got a cpu profile");
	assert_contains(txt, "type goroutine: HTTP 404");
	assert_contains(txt, "http://127.0.0.1:1/debug/pprof type cpu: target down");
	assert_true(strstr(txt, "busy") && !strstr(txt, "busy/debug/pprof type cpu")); /* retried, then ok */
	pd_buf_free(&sum);
	struct pd_scrape_totals t;
	pd_scraper_totals(s, &t);
	assert_int_equal(t.scrapes[PD_SR_OK], 3); /* good cpu + heap, busy cpu */
	assert_int_equal(t.scrapes[PD_SR_CPU_IN_USE], 1);
	assert_int_equal(t.scrapes[PD_SR_NOT_PPROF], 1);
	assert_int_equal(t.scrapes[PD_SR_WRONG_KIND], 1);
	assert_int_equal(t.scrapes[PD_SR_HTTP_4XX], 1);
	assert_int_equal(t.scrapes[PD_SR_CONNECT], 2);
	assert_int_equal(t.stored, 3);
	assert_int_equal(count(st, "good", "heap"), 1);
	assert_int_equal(count(st, "good", "cpu"), 1);
	assert_int_equal(count(st, "busy", "cpu"), 1);
	assert_int_equal(count(st, "html", NULL), 0);
	struct pd_buf m = PD_BUF_INIT(0);
	assert_int_equal(pd_scraper_metrics(s, &m), 0);
	assert_int_equal(pd_buf_append(&m, "", 1), 0);
	const char *mt = (const char *)m.ptr;
	assert_contains(mt, "profd_scrape_targets 5\n");
	assert_contains(mt, "profd_scrape_scrapes_total{type=\"cpu\",result=\"cpu_in_use\"} 1\n");
	assert_contains(mt, "profd_scrape_scrapes_total{type=\"heap\",result=\"not_pprof\"} 1\n");
	assert_contains(mt, "profd_scrape_target_up{target=\"http://127.0.0.1:1/debug/pprof\",service=\"down\"} 0\n");
	assert_contains(mt, "profd_scrape_target_last_error{target=\"http://127.0.0.1:1/debug/pprof\",service=\"down\","
			    "reason=\"connect\"} 1\n");
	assert_contains(mt, "profd_scrape_stored_total{result=\"ok\"} 3\n");
	char want[200];
	snprintf(want, sizeof want, "profd_scrape_target_up{target=\"http://127.0.0.1:%u/busy/debug/pprof\",service=\"busy\"} 1\n",
		 srv.port);
	assert_contains(mt, want); /* cpu in use is not down */
	pd_buf_free(&m);
	pd_scraper_free(s);
	pd_scrape_targets_free(&l);
	close_tmp_store(st);
	srv_stop(&srv);
}

struct runner {
	struct pd_scraper *s;
	int rc;
};
static void *run(void *arg)
{
	struct runner *r = arg;
	struct pd_err err;
	r->rc = pd_scraper_run(r->s, &err);
	return NULL;
}

static size_t summary_has(struct pd_scraper *s, const char *needle)
{
	struct pd_buf b = PD_BUF_INIT(0);
	pd_scraper_summary(s, &b);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	bool r = strstr((const char *)b.ptr, needle) != NULL;
	pd_buf_free(&b);
	return r;
}

/* The value of the first /metrics series that starts with prefix, -1 if none. */
static long metric(struct pd_scraper *s, const char *prefix)
{
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_scraper_metrics(s, &b), 0);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	long v = -1;
	for (const char *l = (const char *)b.ptr; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, prefix, strlen(prefix))) {
			const char *sp = strchr(l, ' ');
			v = sp ? strtol(sp + 1, NULL, 10) : -1;
			break;
		}
	pd_buf_free(&b);
	return v;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void test_scraper_targets_change(void **state)
{
	(void)state;
	struct srv srv;
	srv_start(&srv);
	struct pd_store *st = open_tmp_store();
	struct pd_scrape_config c;
	pd_scrape_config_default(&c);
	c.store = st;
	c.interval_ns = 1000000000LL;
	c.cpu_ns = 1000000000LL;
	c.types = 1u << PD_ST_HEAP;
	c.log = NULL;
	struct pd_scrape_targets l = {0};
	add_target(&l, &srv, "good", "one", 0);
	add_target(&l, &srv, "html", "two", 0);
	struct pd_scraper *s;
	struct pd_err err;
	assert_int_equal(pd_scraper_new(&c, &s, &err), 0);
	assert_int_equal(pd_scraper_set_targets(s, &l, &err), 0);
	pd_scrape_targets_free(&l);
	struct runner r = {s, -1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, run, &r), 0);
	/* within one interval (+ slack) both are scraped, each at its own phase */
	for (int i = 0; i < 200 && !(summary_has(s, "not_pprof") && count(st, "one", "heap") >= 1); i++)
		sleep_ms(50);
	assert_true(summary_has(s, "not_pprof"));
	assert_true(count(st, "one", "heap") >= 1);
	char ok_one[200];
	snprintf(ok_one, sizeof ok_one,
		 "profd_scrape_target_scrapes_total{target=\"http://127.0.0.1:%u/good/debug/pprof\",service=\"one\","
		 "outcome=\"ok\"}",
		 srv.port);
	for (int i = 0; i < 200 && metric(s, ok_one) < 2; i++)
		sleep_ms(50);
	long ok_before = metric(s, ok_one);
	assert_true(ok_before >= 2);
	/* replace the list: "one" stays (state kept), "two" goes, "three" comes */
	add_target(&l, &srv, "good", "one", 0);
	add_target(&l, &srv, "wrong", "three", 0);
	assert_int_equal(pd_scraper_set_targets(s, &l, &err), 0);
	pd_scrape_targets_free(&l);
	for (int i = 0; i < 200 && !summary_has(s, "wrong_kind"); i++)
		sleep_ms(50);
	assert_true(summary_has(s, "wrong_kind"));
	assert_false(summary_has(s, "/html/"));
	assert_false(summary_has(s, "not_pprof"));
	assert_true(summary_has(s, "/good/"));
	assert_true(metric(s, ok_one) >= ok_before); /* its counters went on: the same state */
	size_t before = count(st, "one", "heap");
	/* "one" kept its slot and is scraped again within an interval or so */
	for (int i = 0; i < 200 && count(st, "one", "heap") <= before; i++)
		sleep_ms(50);
	assert_true(count(st, "one", "heap") > before);
	struct pd_buf m = PD_BUF_INIT(0);
	assert_int_equal(pd_scraper_metrics(s, &m), 0);
	assert_int_equal(pd_buf_append(&m, "", 1), 0);
	assert_contains((const char *)m.ptr, "profd_scrape_targets 2\n");
	pd_buf_free(&m);
	pd_scraper_stop(s);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, 0);
	pd_scraper_free(s);
	close_tmp_store(st);
	srv_stop(&srv);
}

/* A target's own interval and CPU duration (a config group's) win over the
 * scraper's; a new interval for a kept target reschedules it. */
static void test_scraper_target_schedule(void **state)
{
	(void)state;
	struct srv srv;
	srv_start(&srv);
	struct pd_store *st = open_tmp_store();
	struct pd_scrape_config c;
	pd_scrape_config_default(&c);
	c.store = st;
	c.interval_ns = 3600 * SEC; /* the default: never within this test */
	c.types = 1u << PD_ST_HEAP;
	c.log = NULL;
	struct pd_scrape_targets l = {0};
	struct pd_err err;
	add_target(&l, &srv, "good/fast", "fast", (1u << PD_ST_HEAP) | (1u << PD_ST_CPU));
	assert_int_equal(pd_scrape_targets_set_sched(&l, 0, SEC, 2 * SEC, 0, &err), 0);
	add_target(&l, &srv, "good/slow", "slow", 0);
	struct pd_scraper *s;
	assert_int_equal(pd_scraper_new(&c, &s, &err), 0);
	assert_int_equal(pd_scraper_set_targets(s, &l, &err), 0);
	struct runner r = {s, -1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, run, &r), 0);
	for (int i = 0; i < 100 && count(st, "fast", "heap") < 3; i++)
		sleep_ms(50);
	assert_true(count(st, "fast", "heap") >= 3); /* every second */
	assert_true(count(st, "fast", "cpu") >= 1);
	assert_int_equal(atomic_load(&srv.cpu_seconds), 2); /* its cpu_duration, not --cpu-duration */
	assert_true(count(st, "slow", "heap") <= 1);    /* at most once an hour */
	/* the slow one gets a 1 s interval: a new phase, scraped every second */
	size_t before = count(st, "slow", "heap");
	assert_int_equal(pd_scrape_targets_set_sched(&l, 1, SEC, 0, 0, &err), 0);
	assert_int_equal(pd_scraper_set_targets(s, &l, &err), 0);
	for (int i = 0; i < 100 && count(st, "slow", "heap") < before + 2; i++)
		sleep_ms(50);
	assert_true(count(st, "slow", "heap") >= before + 2);
	pd_scraper_stop(s);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, 0);
	pd_scraper_free(s);
	pd_scrape_targets_free(&l);
	close_tmp_store(st);
	srv_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_types),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_body_messages),
		cmocka_unit_test(test_targets_and_config),
		cmocka_unit_test(test_yaml_config),
		cmocka_unit_test(test_yaml_query),
		cmocka_unit_test(test_yaml_example),
		cmocka_unit_test(test_yaml_detect),
		cmocka_unit_test(test_yaml_errors),
		cmocka_unit_test(test_selector),
		cmocka_unit_test(test_target_sched),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_queue),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_cpu_in_use),
		cmocka_unit_test(test_delta_step),
		cmocka_unit_test(test_store_sink),
		cmocka_unit_test(test_scraper_once),
		cmocka_unit_test(test_scraper_targets_change),
		cmocka_unit_test(test_scraper_target_schedule),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
