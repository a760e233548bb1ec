/*
 * test_params.c — lib/http/params: API v0 request parameters and the JSON
 * envelope. Expected values for the Go re-implementations (QueryUnescape,
 * ParseDuration, time.Parse, strconv.Atoi, json.Encoder) were produced by Go
 * 1.19's standard library and are pasted here verbatim; profefe's examples
 * come from the reference (§1.3, §1.5, §1.8).
 */
#include "testutil.h"
#include "../../lib/http/params.h"

#include <inttypes.h>

#define S INT64_C(1000000000)
/* 2019-05-30T11:49:02Z, the reference's created_at */
#define T0 (INT64_C(1559216942) * S)
/* "now" in every test: 2019-05-30T12:00:00Z */
#define NOW (INT64_C(1559217600) * S)

#define assert_err(err, want) assert_string_equal((err).msg, (want))

/* ---- helpers ---------------------------------------------------------------- */

static int64_t tparse(const char *v, int64_t now)
{
	int64_t ns = -42;
	struct pd_err err = {0, ""};
	int rc = pd_api_parse_time("from", v, now, &ns, &err);
	if (rc)
		fail_msg("parse_time(\"%s\") failed: %s", v, err.msg);
	return ns;
}

/* Expect a time error; the message must start with prefix. */
static void tparse_err(const char *name, const char *v, const char *prefix)
{
	int64_t ns = -42;
	struct pd_err err = {0, ""};
	int rc = pd_api_parse_time(name, v, NOW, &ns, &err);
	if (rc == 0)
		fail_msg("parse_time(\"%s\") = %" PRId64 ", want error \"%s\"", v, ns, prefix);
	assert_int_equal(rc, PD_EINVAL);
	assert_int_equal(err.code, PD_EINVAL);
	assert_int_equal(ns, 0);
	if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
		fail_msg("parse_time(\"%s\"): got \"%s\", want prefix \"%s\"", v, err.msg, prefix);
}

/* Query/POST parameters as parallel arrays, NULL-terminated keys. */
#define MAXKV 16
struct kvs {
	const char *keys[MAXKV], *vals[MAXKV];
	struct pd_api_kv kv;
};

static struct pd_api_kv *mkkv(struct kvs *k, const char *const *pairs)
{
	size_t n = 0;
	for (; pairs[2 * n]; n++) {
		assert_true(n < MAXKV);
		k->keys[n] = pairs[2 * n];
		k->vals[n] = pairs[2 * n + 1];
	}
	k->kv.keys = k->keys;
	k->kv.vals = k->vals;
	k->kv.n = n;
	return &k->kv;
}

static int query(const char *const *pairs, struct pd_api_query *q, struct pd_err *err)
{
	struct kvs k;
	memset(err, 0, sizeof *err);
	return pd_api_parse_query(pd_api_kv_get, mkkv(&k, pairs), NOW, q, err);
}

/* Expect the query to fail with exactly msg; the struct must come back zeroed. */
static void query_err(const char *const *pairs, int code, const char *msg)
{
	struct pd_api_query q;
	struct pd_err err;
	memset(&q, 0x5a, sizeof q);
	int rc = query(pairs, &q, &err);
	if (rc == 0)
		fail_msg("query unexpectedly succeeded, want \"%s\"", msg);
	assert_int_equal(rc, code);
	assert_err(err, msg);
	assert_null(q.service);
	assert_null(q.labels);
	assert_int_equal(q.nlabels, 0);
	assert_int_equal(pd_api_http_status(rc), code == PD_ELIMIT ? 413 : 400);
}

static int post(const char *const *pairs, struct pd_api_post *p, struct pd_err *err)
{
	struct kvs k;
	memset(err, 0, sizeof *err);
	return pd_api_parse_post(pd_api_kv_get, mkkv(&k, pairs), NOW, p, err);
}

static void post_err(const char *const *pairs, const char *msg)
{
	struct pd_api_post p;
	struct pd_err err;
	memset(&p, 0x5a, sizeof p);
	int rc = post(pairs, &p, &err);
	if (rc == 0)
		fail_msg("post unexpectedly succeeded, want \"%s\"", msg);
	assert_int_equal(rc, PD_EINVAL);
	assert_err(err, msg);
	assert_null(p.service);
	assert_null(p.labels);
	assert_false(p.has_created_at);
}

static void check_json(char *got, const char *want)
{
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* ---- profile types ----------------------------------------------------------- */

static void test_types(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int t;
	} ok[] = {
		{"cpu", PD_API_TYPE_CPU}, {"heap", PD_API_TYPE_HEAP}, {"block", PD_API_TYPE_BLOCK},
		{"mutex", PD_API_TYPE_MUTEX}, {"goroutine", PD_API_TYPE_GOROUTINE},
		{"threadcreate", PD_API_TYPE_THREADCREATE}, {"other", PD_API_TYPE_OTHER},
		{"trace", PD_API_TYPE_TRACE}, {"allocs", PD_API_TYPE_ALLOCS},
	};
	for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
		int t = -1;
		struct pd_err err = {0, ""};
		assert_int_equal(pd_api_parse_type(ok[i].s, &t, &err), 0);
		assert_int_equal(t, ok[i].t);
		assert_string_equal(pd_api_type_name(t), ok[i].s);
	}
	/* profefe's numbers: the store may persist them */
	assert_int_equal(PD_API_TYPE_CPU, 1);
	assert_int_equal(PD_API_TYPE_THREADCREATE, 6);
	assert_int_equal(PD_API_TYPE_OTHER, 127);
	assert_int_equal(PD_API_TYPE_TRACE, 128);
	assert_null(pd_api_type_name(PD_API_TYPE_ANY));
	assert_null(pd_api_type_name(8));
	assert_null(pd_api_type_name(-1));

	/* Go's TrimSpace, Unicode spaces included (NBSP, ideographic space) */
	int t = -1;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_parse_type(" \tcpu\r\n", &t, &err), 0);
	assert_int_equal(t, PD_API_TYPE_CPU);
	assert_int_equal(pd_api_parse_type("\xc2\xa0heap\xe3\x80\x80", &t, &err), 0);
	assert_int_equal(t, PD_API_TYPE_HEAP);
	assert_int_equal(pd_api_parse_type("\xe2\x80\x83mutex\xe2\x80\x8a\xc2\x85", &t, &err), 0);
	assert_int_equal(t, PD_API_TYPE_MUTEX);
	/* an invalid UTF-8 tail is not space: trimming stops there */
	assert_int_equal(pd_api_parse_type("cpu \xe2\x80", &t, &err), PD_EINVAL);

	/* case-sensitive; unknown and empty are errors naming the valid types */
	assert_int_equal(pd_api_parse_type("CPU", &t, &err), PD_EINVAL);
	assert_int_equal(t, PD_API_TYPE_ANY);
	assert_err(err, "unknown profile type \"CPU\" (valid: cpu, heap, block, mutex, goroutine, threadcreate, "
			"allocs, other)");
	assert_int_equal(pd_api_parse_type("unknown", &t, &err), PD_EINVAL);
	assert_int_equal(pd_api_parse_type("", &t, &err), PD_EINVAL);
	assert_int_equal(pd_api_parse_type(NULL, &t, &err), PD_EINVAL);
	assert_int_equal(pd_api_parse_type("cpu x", &t, &err), PD_EINVAL);
	assert_int_equal(pd_api_parse_type("\x01<heap>\xff", &t, &err), PD_EINVAL);
	assert_contains(err.msg, "unknown profile type \"\\x01<heap>\\xff\" (valid: ");
}

/* ---- url.QueryUnescape --------------------------------------------------------- */

static void test_query_unescape(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out, *err; /* Go 1.19 url.QueryUnescape */
	} cases[] = {
		{"%zz", NULL, "invalid URL escape \"%zz\""},
		{"%", NULL, "invalid URL escape \"%\""},
		{"%a", NULL, "invalid URL escape \"%a\""},
		{"a%2", NULL, "invalid URL escape \"%2\""},
		{"%%41", NULL, "invalid URL escape \"%%4\""},
		{"x%G1", NULL, "invalid URL escape \"%G1\""},
		{"a%41%zz%", NULL, "invalid URL escape \"%zz\""},
		{"+", " ", NULL},
		{"a+b%20c", "a b c", NULL},
		{"%41%2b", "A+", NULL},
		{"%e2%82%ac", "\xe2\x82\xac", NULL},
		{"%E2%82%AC", "\xe2\x82\xac", NULL},
		{"ok", "ok", NULL},
		{"", "", NULL},
		{"%ff", "\xff", NULL},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char out[64];
		size_t n = 999;
		struct pd_err err = {0, ""};
		int rc = pd_api_query_unescape(cases[i].in, strlen(cases[i].in), out, &n, &err);
		if (cases[i].err) {
			if (rc != PD_EINVAL)
				fail_msg("\"%s\": rc %d, want error", cases[i].in, rc);
			assert_err(err, cases[i].err);
		} else {
			if (rc)
				fail_msg("\"%s\": %s", cases[i].in, err.msg);
			assert_string_equal(out, cases[i].out);
			assert_int_equal(n, strlen(cases[i].out));
		}
	}
	/* A decoded NUL would cut a C string: refused. */
	char out[8];
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_query_unescape("a%00b", 5, out, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "NUL");
	/* n bounds the input: "%4" of "%41" is a bad escape */
	assert_int_equal(pd_api_query_unescape("%41", 2, out, NULL, &err), PD_EINVAL);
	assert_err(err, "invalid URL escape \"%4\"");
}

/* ---- labels ------------------------------------------------------------------------ */

static void expect_labels(const char *in, const char *const *want /* k, v, ..., NULL */)
{
	struct pd_api_label *l = (struct pd_api_label *)1;
	size_t n = 999, nw = 0;
	struct pd_err err = {0, ""};
	int rc = pd_api_parse_labels(in, &l, &n, &err);
	if (rc)
		fail_msg("labels \"%s\": %s", in ? in : "(null)", err.msg);
	while (want[2 * nw])
		nw++;
	if (n != nw)
		fail_msg("labels \"%s\": %zu labels, want %zu", in ? in : "(null)", n, nw);
	if (nw == 0)
		assert_null(l);
	for (size_t i = 0; i < nw; i++) {
		assert_string_equal(l[i].key, want[2 * i]);
		assert_string_equal(l[i].value, want[2 * i + 1]);
	}
	pd_api_labels_free(l);
}

static void test_labels(void **state)
{
	(void)state;
	/* the reference's example, either order: sorted by key */
	expect_labels("dc=fra,region=europe-west3", (const char *[]){"dc", "fra", "region", "europe-west3", NULL});
	expect_labels("region=europe-west3,dc=fra", (const char *[]){"dc", "fra", "region", "europe-west3", NULL});
	/* stable sort, duplicates kept in input order */
	expect_labels("b=2,a=1,b=1,a=0,a=9",
		      (const char *[]){"a", "1", "a", "0", "a", "9", "b", "2", "b", "1", NULL});
	/* bytewise order: uppercase before lowercase, UTF-8 after ASCII */
	expect_labels("\xc3\xa9=1,z=2,Z=3", (const char *[]){"Z", "3", "z", "2", "\xc3\xa9", "1", NULL});
	/* TrimSpace both sides, then the second decode */
	expect_labels("  k  =  v  ", (const char *[]){"k", "v", NULL});
	expect_labels("k= %20x ", (const char *[]){"k", " x", NULL});
	expect_labels("a+b=c+d,%6B=%76", (const char *[]){"a b", "c d", "k", "v", NULL});
	/* the agent double-encodes: "1.0.0+build" arrives as 1.0.0%2Bbuild */
	expect_labels("version=1.0.0%2Bbuild", (const char *[]){"version", "1.0.0+build", NULL});
	/* split on the first '=' only; no '=' = empty value */
	expect_labels("a=b=c,flag", (const char *[]){"a", "b=c", "flag", "", NULL});
	/* empty keys skipped (their value is not even decoded); empty chunks skipped */
	expect_labels("=v,,=%zz, ,k=v,", (const char *[]){"k", "v", NULL});
	/* kube-profefe's leading comma */
	expect_labels(",namespace=ops,from=kube-profefe,pod=influxdb-0",
		      (const char *[]){"from", "kube-profefe", "namespace", "ops", "pod", "influxdb-0", NULL});
	/* nothing */
	expect_labels(NULL, (const char *[]){NULL});
	expect_labels("", (const char *[]){NULL});
	expect_labels(",,,", (const char *[]){NULL});
	expect_labels("=x", (const char *[]){NULL});
}

static void test_labels_errors(void **state)
{
	(void)state;
	struct pd_api_label *l = (struct pd_api_label *)1;
	size_t n = 999;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_parse_labels("a=1,k=%zz", &l, &n, &err), PD_EINVAL);
	assert_null(l);
	assert_int_equal(n, 0);
	assert_err(err, "bad \"labels\" \"a=1,k=%zz\": invalid URL escape \"%zz\"");
	assert_int_equal(pd_api_parse_labels("k%=v", &l, &n, &err), PD_EINVAL);
	assert_err(err, "bad \"labels\" \"k%=v\": invalid URL escape \"%\"");
	assert_int_equal(pd_api_parse_labels("k=v%", &l, &n, &err), PD_EINVAL);
	assert_err(err, "bad \"labels\" \"k=v%\": invalid URL escape \"%\"");
	assert_int_equal(pd_api_parse_labels("k=%4", &l, &n, &err), PD_EINVAL);
	assert_err(err, "bad \"labels\" \"k=%4\": invalid URL escape \"%4\"");
	/* the second decode must give UTF-8, as the first must (server.c) */
	assert_int_equal(pd_api_parse_labels("a=1,k=x%ff", &l, &n, &err), PD_EINVAL);
	assert_null(l);
	assert_err(err, "bad \"labels\" \"a=1,k=x%ff\": a label value is not valid UTF-8 once decoded (byte 1 of it)");
	assert_int_equal(pd_api_parse_labels("%c3=v", &l, &n, &err), PD_EINVAL);
	assert_err(err, "bad \"labels\" \"%c3=v\": a label key is not valid UTF-8 once decoded (byte 0 of it)");
	assert_int_equal(pd_api_parse_labels("%c3%a9=%e2%82%ac", &l, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(l[0].key, "\xc3\xa9");
	assert_string_equal(l[0].value, "\xe2\x82\xac");
	pd_api_labels_free(l);

	/* caps: 64 labels pass, 65 do not; nor a value over 8 KiB */
	char buf[2 * PD_API_MAX_PARAM_LEN];
	size_t o = 0;
	for (int i = 0; i < PD_API_MAX_LABELS; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%sk%d=v", i ? "," : "", i);
	assert_int_equal(pd_api_parse_labels(buf, &l, &n, &err), 0);
	assert_int_equal(n, PD_API_MAX_LABELS);
	pd_api_labels_free(l);
	snprintf(buf + o, sizeof buf - o, ",one=more");
	assert_int_equal(pd_api_parse_labels(buf, &l, &n, &err), PD_ELIMIT);
	assert_null(l);
	assert_contains(err.msg, "more than 64 labels");
	memset(buf, 'x', PD_API_MAX_PARAM_LEN + 1);
	buf[PD_API_MAX_PARAM_LEN + 1] = 0;
	assert_int_equal(pd_api_parse_labels(buf, &l, &n, &err), PD_ELIMIT);
	assert_contains(err.msg, "over the 8192-byte limit");
	buf[PD_API_MAX_PARAM_LEN] = 0; /* exactly at the cap: fine */
	assert_int_equal(pd_api_parse_labels(buf, &l, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(strlen(l[0].key), PD_API_MAX_PARAM_LEN);
	pd_api_labels_free(l);
}

/* ---- durations ------------------------------------------------------------------------ */

static void test_durations(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		int64_t ns;
		const char *err; /* Go 1.19 time.ParseDuration */
	} cases[] = {
		{"1h", INT64_C(3600000000000), NULL},
		{"-30m", INT64_C(-1800000000000), NULL},
		{"2h30m", INT64_C(9000000000000), NULL},
		{"1.5h", INT64_C(5400000000000), NULL},
		{"1h1.5m", INT64_C(3690000000000), NULL},
		{".5s", 500000000, NULL},
		{"1.s", 1000000000, NULL},
		{"0", 0, NULL},
		{"-0", 0, NULL},
		{"+5m", INT64_C(300000000000), NULL},
		{"1\xc2\xb5s", 1000, NULL},
		{"1\xce\xbcs", 1000, NULL},
		{"1us", 1000, NULL},
		{"3ms", 3000000, NULL},
		{"7ns", 7, NULL},
		{"9223372036854775807ns", INT64_MAX, NULL},
		{"-9223372036854775808ns", INT64_MIN, NULL},
		{"2562047h", INT64_C(9223369200000000000), NULL},
		{"0.333333333333333333333h", INT64_C(1200000000000), NULL},
		{"0.99999999999999999999999h", INT64_C(3600000000000), NULL},
		{"1.0000000000000000000001h", INT64_C(3600000000000), NULL},
		{"1", 0, "time: missing unit in duration \"1\""},
		{"", 0, "time: invalid duration \"\""},
		{"-", 0, "time: invalid duration \"-\""},
		{"1x", 0, "time: unknown unit \"x\" in duration \"1x\""},
		{"1hm", 0, "time: unknown unit \"hm\" in duration \"1hm\""},
		{"9223372036854775808ns", 0, "time: invalid duration \"9223372036854775808ns\""},
		{"2562048h", 0, "time: invalid duration \"2562048h\""},
		{".s", 0, "time: invalid duration \".s\""},
		{"1..5s", 0, "time: missing unit in duration \"1..5s\""},
		{"5m-3s", 0, "time: unknown unit \"m-\" in duration \"5m-3s\""},
		{"h", 0, "time: invalid duration \"h\""},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		int64_t ns = -42;
		struct pd_err err = {0, ""};
		int rc = pd_api_parse_duration(cases[i].in, strlen(cases[i].in), &ns, &err);
		if (cases[i].err) {
			if (rc != PD_EINVAL)
				fail_msg("\"%s\": rc %d, want \"%s\"", cases[i].in, rc, cases[i].err);
			assert_err(err, cases[i].err);
			assert_int_equal(ns, 0);
		} else {
			if (rc)
				fail_msg("\"%s\": %s", cases[i].in, err.msg);
			if (ns != cases[i].ns)
				fail_msg("\"%s\": %" PRId64 ", want %" PRId64, cases[i].in, ns, cases[i].ns);
		}
	}
}

/* ---- times ---------------------------------------------------------------------------- */

static void test_time_profefe_layout(void **state)
{
	(void)state;
	/* profefe's layout must keep working exactly as Go's time.Parse read it */
	assert_int_equal(tparse("2019-05-30T11:49:02", NOW), T0);
	assert_int_equal(tparse("2019-05-30T11:49:00", NOW), T0 - 2 * S);
	assert_int_equal(tparse("2019-05-30T1:49:02", NOW), INT64_C(1559180942) * S); /* "15" takes 1 digit */
	assert_int_equal(tparse("2019-05-30T11:49:02.5", NOW), T0 + 500000000);
	assert_int_equal(tparse("2019-05-30T11:49:02.1234567891", NOW), T0 + 123456789);
	assert_int_equal(tparse("2020-02-29T00:00:00", NOW), INT64_C(1582934400) * S);
	assert_int_equal(tparse("1970-01-01T00:00:00", NOW), 0);
	assert_int_equal(tparse("1969-12-31T23:59:59", NOW), -S);
	assert_int_equal(tparse("2000-03-01T00:00:00", NOW), INT64_C(951868800) * S);
	assert_int_equal(tparse("1677-09-21T00:12:44", NOW), INT64_C(-9223372036000000000));
	assert_int_equal(tparse("2262-04-11T23:47:16", NOW), INT64_C(9223372036000000000));
	assert_int_equal(tparse("2262-04-11T23:47:16.854775807", NOW), INT64_MAX);
	/* surrounding spaces are trimmed */
	assert_int_equal(tparse(" 2019-05-30T11:49:02\t", NOW), T0);

	/* Go's range errors, in profefe's words */
	tparse_err("from", "2019-02-29T00:00:00",
		   "bad \"from\" timestamp \"2019-02-29T00:00:00\": time in unsupported format "
		   "\"2019-02-29T00:00:00\": day out of range");
	tparse_err("from", "2019-13-01T00:00:00", "bad \"from\" timestamp \"2019-13-01T00:00:00\": time in unsupported "
						  "format \"2019-13-01T00:00:00\": month out of range");
	tparse_err("from", "2019-00-01T00:00:00", "bad \"from\" timestamp \"2019-00-01T00:00:00\": time in unsupported "
						  "format \"2019-00-01T00:00:00\": month out of range");
	tparse_err("from", "2019-05-30T24:00:00", "bad \"from\" timestamp \"2019-05-30T24:00:00\": time in unsupported "
						  "format \"2019-05-30T24:00:00\": hour out of range");
	tparse_err("to", "2019-05-30T11:60:00", "bad \"to\" timestamp \"2019-05-30T11:60:00\": time in unsupported "
						"format \"2019-05-30T11:60:00\": minute out of range");
	tparse_err("to", "2019-05-30T11:49:60", "bad \"to\" timestamp \"2019-05-30T11:49:60\": time in unsupported "
						"format \"2019-05-30T11:49:60\": second out of range");
	tparse_err("to", "2019-04-31T00:00:00", "bad \"to\" timestamp \"2019-04-31T00:00:00\": time in unsupported "
						"format \"2019-04-31T00:00:00\": day out of range");
	tparse_err("to", "2019-05-30T11:49:02x", "bad \"to\" timestamp \"2019-05-30T11:49:02x\": time in unsupported "
						 "format \"2019-05-30T11:49:02x\": extra text");
	tparse_err("to", "2019-05-30T11:49:02.", "bad \"to\" timestamp \"2019-05-30T11:49:02.\": time in unsupported "
						 "format \"2019-05-30T11:49:02.\": extra text");
	/* structural failures: exactly profefe's message, then a hint */
	tparse_err("from", "2019-05-30 11:49:02",
		   "bad \"from\" timestamp \"2019-05-30 11:49:02\": time in unsupported format "
		   "\"2019-05-30 11:49:02\"");
	tparse_err("from", "2019-05-30", "bad \"from\" timestamp \"2019-05-30\": time in unsupported format "
					 "\"2019-05-30\"");
	tparse_err("from", "2019-5-30T11:49:02", "bad \"from\" timestamp \"2019-5-30T11:49:02\": time in unsupported "
						 "format \"2019-5-30T11:49:02\"");
	tparse_err("from", "2019-05-30T11:4:02", "bad \"from\" timestamp \"2019-05-30T11:4:02\": time in unsupported "
						 "format \"2019-05-30T11:4:02\"");
	/* outside what int64 nanoseconds can hold */
	tparse_err("from", "1677-09-21T00:12:43", "bad \"from\" timestamp \"1677-09-21T00:12:43\": out of range");
	tparse_err("from", "2262-04-11T23:47:17", "bad \"from\" timestamp \"2262-04-11T23:47:17\": out of range");
	tparse_err("from", "0001-01-01T00:00:00", "bad \"from\" timestamp \"0001-01-01T00:00:00\": out of range");
	tparse_err("from", "9999-12-31T23:59:59", "bad \"from\" timestamp \"9999-12-31T23:59:59\": out of range");
}

static void test_time_rfc3339(void **state)
{
	(void)state;
	assert_int_equal(tparse("2019-05-30T11:49:02Z", NOW), T0);
	assert_int_equal(tparse("2019-05-30T13:49:02+02:00", NOW), T0);
	assert_int_equal(tparse("2019-05-30T06:19:02-05:30", NOW), T0);
	assert_int_equal(tparse("2019-05-30T11:49:02-00:00", NOW), T0);
	assert_int_equal(tparse("2019-05-30T11:49:02.123456789Z", NOW), T0 + 123456789);
	assert_int_equal(tparse("2019-05-30T11:49:02.1Z", NOW), T0 + 100000000);
	assert_int_equal(tparse("2019-05-31T00:30:00+12:41", NOW), T0 - 2 * S);
	/* crossing the epoch and a day boundary with an offset */
	assert_int_equal(tparse("1970-01-01T00:00:00+01:00", NOW), -3600 * S);

	tparse_err("from", "2019-05-30T11:49:02z", "bad \"from\" timestamp \"2019-05-30T11:49:02z\": time in "
						   "unsupported format \"2019-05-30T11:49:02z\": extra text");
	tparse_err("from", "2019-05-30T11:49:02+2:00", "bad \"from\" timestamp \"2019-05-30T11:49:02+2:00\": time in "
						       "unsupported format \"2019-05-30T11:49:02+2:00\"");
	tparse_err("from", "2019-05-30T11:49:02+0200", "bad \"from\" timestamp \"2019-05-30T11:49:02+0200\": time in "
						       "unsupported format \"2019-05-30T11:49:02+0200\"");
	tparse_err("from", "2019-05-30T11:49:02+24:00", "bad \"from\" timestamp \"2019-05-30T11:49:02+24:00\": time "
							"in unsupported format \"2019-05-30T11:49:02+24:00\": time "
							"zone offset out of range");
	/* curl 'created_at=2019-05-30T13:49:02+02:00': the '+' arrives as a space */
	tparse_err("from", "2019-05-30T13:49:02 02:00", "bad \"from\" timestamp \"2019-05-30T13:49:02 02:00\": time "
							"in unsupported format \"2019-05-30T13:49:02 02:00\": extra "
							"text (a '+' in a URL means a space: write the offset's '+' as "
							"%2B)");
	tparse_err("from", "2019-05-30T11:49:02Z+01:00", "bad \"from\" timestamp \"2019-05-30T11:49:02Z+01:00\": "
							 "time in unsupported format \"2019-05-30T11:49:02Z+01:00\": "
							 "extra text");
}

static void test_time_unix(void **state)
{
	(void)state;
	assert_int_equal(tparse("1559216942", NOW), T0);
	assert_int_equal(tparse("1559216942.5", NOW), T0 + 500000000);
	assert_int_equal(tparse("1559216942.000000001", NOW), T0 + 1);
	assert_int_equal(tparse("1559216942.0000000019", NOW), T0 + 1); /* truncated, as Go */
	assert_int_equal(tparse("0", NOW), 0);
	assert_int_equal(tparse("0000000012", NOW), 12 * S);
	assert_int_equal(tparse("9223372036", NOW), INT64_C(9223372036000000000));
	assert_int_equal(tparse("9223372036.854775807", NOW), INT64_MAX);
	/* milliseconds are refused with a hint, not misread as a far future */
	tparse_err("from", "1559216942123", "bad \"from\" timestamp \"1559216942123\": unix time out of range");
	tparse_err("from", "9223372036.854775808", "bad \"from\" timestamp \"9223372036.854775808\": unix time out");
	tparse_err("from", "99999999999999999999999", "bad \"from\" timestamp \"99999999999999999999999\": unix time");
	struct pd_err err = {0, ""};
	int64_t ns;
	assert_int_equal(pd_api_parse_time("from", "1559216942123", NOW, &ns, &err), PD_EINVAL);
	assert_contains(err.msg, "send seconds, not milliseconds");
	tparse_err("from", "1559216942.", "bad \"from\" timestamp \"1559216942.\": time in unsupported format");
	tparse_err("from", "1559216942.5.5", "bad \"from\" timestamp \"1559216942.5.5\": time in unsupported format");
	tparse_err("from", "1e9", "bad \"from\" timestamp \"1e9\": time in unsupported format");
}

static void test_time_relative(void **state)
{
	(void)state;
	const int64_t H = 3600 * S;
	assert_int_equal(tparse("now", NOW), NOW);
	assert_int_equal(tparse("now-1h", NOW), NOW - H);
	assert_int_equal(tparse("now-2h30m", NOW), NOW - 2 * H - 30 * 60 * S);
	assert_int_equal(tparse("-30m", NOW), NOW - 30 * 60 * S);
	assert_int_equal(tparse("now+1h", NOW), NOW + H);
	assert_int_equal(tparse("+1h", NOW), NOW + H);
	assert_int_equal(tparse("now-1.5h", NOW), NOW - H - H / 2);
	assert_int_equal(tparse("now-0", NOW), NOW);
	assert_int_equal(tparse("now-90s", NOW), NOW - 90 * S);
	assert_int_equal(tparse("now-1500ms", NOW), NOW - 1500000000);
	assert_int_equal(tparse("now", 12345), 12345); /* "now" is the parameter */
	assert_int_equal(tparse(" now-1h ", NOW), NOW - H);

	/* '+' arrives as a space after the query-string decode */
	tparse_err("to", "now 1h", "bad \"to\" timestamp \"now 1h\": time in unsupported format \"now 1h\" ('+' in a "
				   "URL means a space: write now%2B1h)");
	/* a bare duration is ambiguous: ask for a sign */
	tparse_err("from", "1h", "bad \"from\" timestamp \"1h\": a relative time needs \"now\" or a sign: write "
				 "now-1h (past) or now%2B1h (future)");
	tparse_err("from", "now-1x", "bad \"from\" timestamp \"now-1x\": time: unknown unit \"x\" in duration \"-1x\"");
	tparse_err("from", "-5", "bad \"from\" timestamp \"-5\": time: missing unit in duration \"-5\"");
	tparse_err("from", "now-", "bad \"from\" timestamp \"now-\": time: invalid duration \"-\"");
	tparse_err("from", "now--1h", "bad \"from\" timestamp \"now--1h\": time: invalid duration \"--1h\"");
	tparse_err("from", "nowish", "bad \"from\" timestamp \"nowish\": time in unsupported format \"nowish\"");
	tparse_err("from", "NOW", "bad \"from\" timestamp \"NOW\": time in unsupported format \"NOW\"");
	tparse_err("from", "-2562048h", "bad \"from\" timestamp \"-2562048h\": time: invalid duration \"-2562048h\"");
	/* now + duration overflowing int64 */
	int64_t ns = 7;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_parse_time("to", "now+1h", INT64_MAX - 10, &ns, &err), PD_EINVAL);
	assert_int_equal(ns, 0);
	assert_contains(err.msg, "bad \"to\" timestamp \"now+1h\": out of range");
	assert_int_equal(pd_api_parse_time("to", "-2562047h", INT64_MIN + 10, &ns, &err), PD_EINVAL);
}

static void test_time_misc(void **state)
{
	(void)state;
	/* the full message for text we do not recognise at all */
	int64_t ns = 1;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_parse_time("to", "yesterday", NOW, &ns, &err), PD_EINVAL);
	assert_err(err, "bad \"to\" timestamp \"yesterday\": time in unsupported format \"yesterday\" (want "
			"2006-01-02T15:04:05 in UTC, RFC3339, unix seconds or now-1h)");
	tparse_err("created_at", "", "bad \"created_at\" timestamp \"\": time in unsupported format \"\"");
	tparse_err("from", "   ", "bad \"from\" timestamp \"   \": time in unsupported format \"   \"");
	tparse_err("from", "\"><\n", "bad \"from\" timestamp \"\\\"><\\n\": time in unsupported format");
	assert_int_equal(pd_api_parse_time("from", NULL, NOW, &ns, &err), PD_EINVAL);
	/* long input: quoted truncated, the message stays whole */
	char big[PD_API_MAX_PARAM_LEN + 2];
	memset(big, '7', 200);
	big[200] = 'x';
	big[201] = 0;
	assert_int_equal(pd_api_parse_time("from", big, NOW, &ns, &err), PD_EINVAL);
	assert_contains(err.msg, "7777\"... (want 2006-01-02T15:04:05");
	memset(big, '1', sizeof big - 1);
	big[sizeof big - 1] = 0;
	assert_int_equal(pd_api_parse_time("from", big, NOW, &ns, &err), PD_ELIMIT);
	assert_contains(err.msg, "over the 8192-byte limit");
}

static void test_format_time(void **state)
{
	(void)state;
	char b[PD_API_TIME_BUFSZ];
	/* Go: time.Unix(0, ns).UTC().Truncate(time.Second) in JSON */
	assert_string_equal(pd_api_format_time(INT64_C(1559216942999999999), b, sizeof b), "2019-05-30T11:49:02Z");
	assert_string_equal(pd_api_format_time(T0, b, sizeof b), "2019-05-30T11:49:02Z");
	assert_string_equal(pd_api_format_time(-1, b, sizeof b), "1969-12-31T23:59:59Z");
	assert_string_equal(pd_api_format_time(0, b, sizeof b), "1970-01-01T00:00:00Z");
	assert_string_equal(pd_api_format_time(INT64_C(-1000000001), b, sizeof b), "1969-12-31T23:59:58Z");
	assert_string_equal(pd_api_format_time(INT64_C(1582934400) * S, b, sizeof b), "2020-02-29T00:00:00Z");
	assert_string_equal(pd_api_format_time(INT64_MAX, b, sizeof b), "2262-04-11T23:47:16Z");
	assert_string_equal(pd_api_format_time(INT64_MIN, b, sizeof b), "1677-09-21T00:12:43Z");
	/* parse(format(t)) == t truncated, over a spread of instants */
	for (int64_t t = INT64_MIN / 2; t < INT64_MAX / 2; t += INT64_MAX / 997) {
		pd_api_format_time(t, b, sizeof b);
		int64_t back = tparse(b, NOW);
		int64_t want = t / S * S - (t % S < 0 ? S : 0);
		if (back != want)
			fail_msg("%" PRId64 " -> %s -> %" PRId64, t, b, back);
	}
}

/* ---- list/merge query ------------------------------------------------------------------- */

#define FROM_TO_2019 "from", "2019-05-30T11:49:00", "to", "2019-05-30T12:49:00"

static void test_query_ok(void **state)
{
	(void)state;
	struct pd_api_query q;
	struct pd_err err;
	/* the reference's go tool pprof example (§1.8) */
	assert_int_equal(query((const char *[]){"service", "hotapp-service", "type", "cpu", "from",
						 "2019-05-30T11:49:00", "to", "2019-05-30T12:49:00", "labels",
						 "version=1.0.0", NULL},
			       &q, &err),
			 0);
	assert_string_equal(q.service, "hotapp-service");
	assert_int_equal(q.type, PD_API_TYPE_CPU);
	assert_int_equal(q.nlabels, 1);
	assert_string_equal(q.labels[0].key, "version");
	assert_string_equal(q.labels[0].value, "1.0.0");
	assert_int_equal(q.from_ns, INT64_C(1559216940) * S);
	assert_int_equal(q.to_ns, INT64_C(1559220540) * S);
	assert_int_equal(q.limit, 0);
	pd_api_query_free(&q);
	assert_null(q.service);

	/* type absent or blank = every type; extra parameters ignored; first value wins */
	assert_int_equal(query((const char *[]){"instance_id", "10.0.0.1", "seconds", "30", "service", "svc", "service",
						 "other", "type", " ", "from", "now-1h", "to", "now", "limit", "+10",
						 "from", "garbage", NULL},
			       &q, &err),
			 0);
	assert_string_equal(q.service, "svc");
	assert_int_equal(q.type, PD_API_TYPE_ANY);
	assert_null(q.labels);
	assert_int_equal(q.from_ns, NOW - 3600 * S);
	assert_int_equal(q.to_ns, NOW);
	assert_int_equal(q.limit, 10);
	pd_api_query_free(&q);

	/* "unknown" is profefe's name of no type: kube-profefe's client sends
	 * it (kubectl profefe get profiles --profile-type unknown, or a type it
	 * does not know) for every type */
	assert_int_equal(query((const char *[]){"service", "s", "type", " unknown ", FROM_TO_2019, NULL}, &q, &err), 0);
	assert_int_equal(q.type, PD_API_TYPE_ANY);
	pd_api_query_free(&q);
	query_err((const char *[]){"service", "s", "type", "Unknown", FROM_TO_2019, NULL}, PD_EINVAL,
		  "bad request: unknown profile type \"Unknown\" (valid: cpu, heap, block, mutex, goroutine, "
		  "threadcreate, allocs, other)");

	/* from == to is a valid (inclusive) window; limit=0 = no limit; allocs ok;
	 * service is taken as is (no trim); empty labels = none */
	assert_int_equal(query((const char *[]){"service", " a b ", "type", "allocs", "from", "1559216942", "to",
						 "2019-05-30T11:49:02Z", "limit", "0", "labels", "", NULL},
			       &q, &err),
			 0);
	assert_string_equal(q.service, " a b ");
	assert_int_equal(q.type, PD_API_TYPE_ALLOCS);
	assert_int_equal(q.from_ns, T0);
	assert_int_equal(q.to_ns, T0);
	assert_int_equal(q.limit, 0);
	assert_int_equal(q.nlabels, 0);
	pd_api_query_free(&q);
	pd_api_query_free(&q); /* idempotent */
	pd_api_query_free(NULL);

	/* a key without value (vals[i] NULL) reads as "" = absent */
	struct kvs k;
	memset(&err, 0, sizeof err);
	struct pd_api_kv *kv = mkkv(&k, (const char *[]){"service", "s", "from", "0", "to", "1", "labels", NULL, NULL});
	k.vals[3] = NULL;
	kv->n = 4;
	assert_string_equal(pd_api_kv_get(kv, "labels"), "");
	assert_null(pd_api_kv_get(kv, "type"));
	assert_int_equal(pd_api_parse_query(pd_api_kv_get, kv, NOW, &q, &err), 0);
	assert_int_equal(q.to_ns, S);
	pd_api_query_free(&q);
}

#define FROM "from", "2019-05-30T11:49:00"
#define TO   "to", "2019-05-30T12:49:00"

static void test_query_errors(void **state)
{
	(void)state;
	query_err((const char *[]){FROM, TO, NULL}, PD_EINVAL, "bad request: missing \"service\"");
	query_err((const char *[]){"service", "", FROM, TO, NULL}, PD_EINVAL, "bad request: missing \"service\"");
	/* profefe mapped an unknown type to "all types" on GET: we refuse it */
	query_err((const char *[]){"service", "s", "type", "cpux", FROM, TO, NULL}, PD_EINVAL,
		  "bad request: unknown profile type \"cpux\" (valid: cpu, heap, block, mutex, goroutine, "
		  "threadcreate, allocs, other)");
	query_err((const char *[]){"service", "s", "type", "trace", FROM, TO, NULL}, PD_EINVAL,
		  "bad request: profile type \"trace\" is not supported: profd stores pprof profiles only, not Go "
		  "execution traces (valid: cpu, heap, block, mutex, goroutine, threadcreate, allocs, other)");
	query_err((const char *[]){"service", "s", "labels", "a=%zz", FROM, TO, NULL}, PD_EINVAL,
		  "bad request: bad \"labels\" \"a=%zz\": invalid URL escape \"%zz\"");
	query_err((const char *[]){"service", "s", TO, NULL}, PD_EINVAL, "bad request: missing \"from\"");
	query_err((const char *[]){"service", "s", "from", "", TO, NULL}, PD_EINVAL, "bad request: missing \"from\"");
	query_err((const char *[]){"service", "s", FROM, NULL}, PD_EINVAL, "bad request: missing \"to\"");
	query_err((const char *[]){"service", "s", "from", "2019-05-30 11:49:00", TO, NULL}, PD_EINVAL,
		  "bad request: bad \"from\" timestamp \"2019-05-30 11:49:00\": time in unsupported format "
		  "\"2019-05-30 11:49:00\" (want 2006-01-02T15:04:05 in UTC, RFC3339, unix seconds or now-1h)");
	query_err((const char *[]){"service", "s", FROM, "to", "2019-05-30T12:49", NULL}, PD_EINVAL,
		  "bad request: bad \"to\" timestamp \"2019-05-30T12:49\": time in unsupported format "
		  "\"2019-05-30T12:49\" (want 2006-01-02T15:04:05 in UTC, RFC3339, unix seconds or now-1h)");
	/* from > to, by one nanosecond */
	query_err((const char *[]){"service", "s", "from", "2019-05-30T12:49:00.000000001", "to",
				   "2019-05-30T12:49:00", NULL},
		  PD_EINVAL,
		  "bad request: \"from\" after \"to\" (from 2019-05-30T12:49:00Z, to 2019-05-30T12:49:00Z)");
	query_err((const char *[]){"service", "s", "from", "now", "to", "now-1h", NULL}, PD_EINVAL,
		  "bad request: \"from\" after \"to\" (from 2019-05-30T12:00:00Z, to 2019-05-30T11:00:00Z)");
	/* limit: Go's strconv.Atoi words, and >= 0 */
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "abc", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"abc\": strconv.Atoi: parsing \"abc\": invalid syntax");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", " 5", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \" 5\": strconv.Atoi: parsing \" 5\": invalid syntax");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "1_000", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"1_000\": strconv.Atoi: parsing \"1_000\": invalid syntax");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "-", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"-\": strconv.Atoi: parsing \"-\": invalid syntax");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "9223372036854775808", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"9223372036854775808\": strconv.Atoi: parsing \"9223372036854775808\": "
		  "value out of range");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "99999999999999999999x", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"99999999999999999999x\": strconv.Atoi: parsing "
		  "\"99999999999999999999x\": value out of range");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "90000000000000000000x", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"90000000000000000000x\": strconv.Atoi: parsing "
		  "\"90000000000000000000x\": value out of range");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "18446744073709551615x", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"18446744073709551615x\": strconv.Atoi: parsing "
		  "\"18446744073709551615x\": invalid syntax");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "-1", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"-1\": must be >= 0 (0 = no limit)");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", "-9223372036854775808", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"-9223372036854775808\": must be >= 0 (0 = no limit)");
	/* the order of checks is profefe's: service, type, labels, from, to, limit, from > to */
	query_err((const char *[]){"type", "x", "labels", "%", NULL}, PD_EINVAL, "bad request: missing \"service\"");
	query_err((const char *[]){"service", "s", "type", "x", "labels", "%", NULL}, PD_EINVAL,
		  "bad request: unknown profile type \"x\" (valid: cpu, heap, block, mutex, goroutine, threadcreate, "
		  "allocs, other)");
	query_err((const char *[]){"service", "s", "labels", "%", "limit", "x", NULL}, PD_EINVAL,
		  "bad request: bad \"labels\" \"%\": invalid URL escape \"%\"");
	query_err((const char *[]){"service", "s", "from", "now", "to", "now-1h", "limit", "x", NULL}, PD_EINVAL,
		  "bad request: bad \"limit\" \"x\": strconv.Atoi: parsing \"x\": invalid syntax");

	/* limits */
	char big[PD_API_MAX_PARAM_LEN + 2];
	memset(big, 's', sizeof big - 1);
	big[sizeof big - 1] = 0;
	query_err((const char *[]){"service", big, FROM, TO, NULL}, PD_ELIMIT,
		  "bad request: \"service\" is 8193 bytes, over the 8192-byte limit");
	query_err((const char *[]){"service", "s", FROM, TO, "limit", big, NULL}, PD_ELIMIT,
		  "bad request: \"limit\" is 8193 bytes, over the 8192-byte limit");
}

/* ---- POST parameters ------------------------------------------------------------------------ */

static void test_post(void **state)
{
	(void)state;
	struct pd_api_post p;
	struct pd_err err;
	/* the agent: labels= sent even when empty */
	assert_int_equal(post((const char *[]){"labels", "", "service", "api-backend", "type", "cpu", NULL}, &p, &err),
			 0);
	assert_string_equal(p.service, "api-backend");
	assert_int_equal(p.type, PD_API_TYPE_CPU);
	assert_null(p.labels);
	assert_false(p.has_created_at);
	pd_api_post_free(&p);
	/* kube-profefe: instance_id ignored, leading comma in labels, allocs is a type now */
	assert_int_equal(post((const char *[]){"instance_id", "10.1.2.3", "labels",
						"namespace=ops,from=kube-profefe,pod=influxdb-0", "service", "influxdb",
						"type", "allocs", NULL},
			      &p, &err),
			 0);
	assert_int_equal(p.type, PD_API_TYPE_ALLOCS);
	assert_int_equal(p.nlabels, 3);
	assert_string_equal(p.labels[0].key, "from");
	assert_string_equal(p.labels[2].value, "influxdb-0");
	pd_api_post_free(&p);
	/* created_at: profefe's layout and the new formats */
	assert_int_equal(post((const char *[]){"service", "s", "type", "heap", "created_at", "2019-05-30T11:49:02",
						"labels", "dc=fra,region=europe-west3", NULL},
			      &p, &err),
			 0);
	assert_true(p.has_created_at);
	assert_int_equal(p.created_at_ns, T0);
	assert_int_equal(p.nlabels, 2);
	pd_api_post_free(&p);
	assert_int_equal(post((const char *[]){"service", "s", "type", " other ", "created_at", "now-5m", NULL}, &p,
			      &err),
			 0);
	assert_int_equal(p.type, PD_API_TYPE_OTHER);
	assert_int_equal(p.created_at_ns, NOW - 300 * S);
	pd_api_post_free(&p);
	pd_api_post_free(&p);
	pd_api_post_free(NULL);

	post_err((const char *[]){"type", "cpu", NULL}, "bad request: missing \"service\"");
	/* no type (or a blank one): the store infers it from the profile */
	assert_int_equal(post((const char *[]){"service", "s", NULL}, &p, &err), 0);
	assert_int_equal(p.type, PD_API_TYPE_ANY);
	pd_api_post_free(&p);
	assert_int_equal(post((const char *[]){"service", "s", "type", " \t", NULL}, &p, &err), 0);
	assert_int_equal(p.type, PD_API_TYPE_ANY);
	pd_api_post_free(&p);
	/* a time a profile id cannot hold (32 bits of seconds) */
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "2106-02-07T06:28:16Z", NULL},
		 "bad request: bad \"created_at\" timestamp \"2106-02-07T06:28:16Z\": after 2106-02-07T06:28:15Z: profd "
		 "stores times from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)");
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "2262-01-01T00:00:00Z", NULL},
		 "bad request: bad \"created_at\" timestamp \"2262-01-01T00:00:00Z\": after 2106-02-07T06:28:15Z: profd "
		 "stores times from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)");
	/* beyond int64 nanoseconds too: the span said is the one the collector stores */
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "0001-01-01T00:00:00", NULL},
		 "bad request: bad \"created_at\" timestamp \"0001-01-01T00:00:00\": out of range: profd stores times "
		 "from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)");
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "1559216942000", NULL},
		 "bad request: bad \"created_at\" timestamp \"1559216942000\": unix time out of range: profd stores "
		 "times from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds); send "
		 "seconds, not milliseconds");
	query_err((const char *[]){"service", "s", "from", "9999-12-31T23:59:59", "to", "now", NULL}, PD_EINVAL,
		  "bad request: bad \"from\" timestamp \"9999-12-31T23:59:59\": out of range: profd stores times from "
		  "1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)");
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "1969-12-31T23:59:59Z", NULL},
		 "bad request: bad \"created_at\" timestamp \"1969-12-31T23:59:59Z\": before 1970-01-01T00:00:00Z: profd "
		 "stores times from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)");
	assert_int_equal(post((const char *[]){"service", "s", "created_at", "2106-02-07T06:28:15Z", NULL}, &p, &err),
			 0);
	pd_api_post_free(&p);
	post_err((const char *[]){"service", "s", "type", "unknown", NULL},
		 "bad request: unknown profile type \"unknown\" (valid: cpu, heap, block, mutex, goroutine, "
		 "threadcreate, allocs, other)");
	post_err((const char *[]){"service", "s", "type", "trace", NULL},
		 "bad request: profile type \"trace\" is not supported: profd stores pprof profiles only, not Go "
		 "execution traces (valid: cpu, heap, block, mutex, goroutine, threadcreate, allocs, other)");
	post_err((const char *[]){"service", "s", "type", "cpu", "labels", "k=%", NULL},
		 "bad request: bad \"labels\" \"k=%\": invalid URL escape \"%\"");
	post_err((const char *[]){"service", "s", "type", "cpu", "created_at", "2019-05-30T11:49:02+01", NULL},
		 "bad request: bad \"created_at\" timestamp \"2019-05-30T11:49:02+01\": time in unsupported format "
		 "\"2019-05-30T11:49:02+01\" (want 2006-01-02T15:04:05 in UTC, RFC3339, unix seconds or now-1h)");
}

static void test_http_status(void **state)
{
	(void)state;
	assert_int_equal(pd_api_http_status(PD_OK), 200);
	assert_int_equal(pd_api_http_status(PD_EINVAL), 400);
	assert_int_equal(pd_api_http_status(PD_ELIMIT), 413);
	assert_int_equal(pd_api_http_status(PD_EUSAGE), 400);
	assert_int_equal(pd_api_http_status(PD_EINCOMPAT), 400);
	assert_int_equal(pd_api_http_status(PD_ENOTFOUND), 404);
	assert_int_equal(pd_api_http_status(PD_ENOMEM), 500);
	assert_int_equal(pd_api_http_status(PD_EIO), 500);
	assert_int_equal(pd_api_http_status(-99), 500);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void test_error_json(void **state)
{
	(void)state;
	/* profefe's predefined errors */
	check_json(pd_api_error_json(404, "nothing found"), "{\"code\":404,\"error\":\"nothing found\"}\n");
	check_json(pd_api_error_json(500, "internal server error"),
		   "{\"code\":500,\"error\":\"internal server error\"}\n");
	check_json(pd_api_error_json(400, "bad request: missing \"service\""),
		   "{\"code\":400,\"error\":\"bad request: missing \\\"service\\\"\"}\n");
	/* byte-for-byte what Go 1.19's json.Encoder writes (SetEscapeHTML default) */
	check_json(pd_api_error_json(400, "bad <script>&\"x\"\\"),
		   "{\"code\":400,\"error\":\"bad \\u003cscript\\u003e\\u0026\\\"x\\\"\\\\\"}\n");
	check_json(pd_api_error_json(400, "a\x01\x1f\x7f\b\f\n\r\t"),
		   "{\"code\":400,\"error\":\"a\\u0001\\u001f\x7f\\u0008\\u000c\\n\\r\\t\"}\n");
	check_json(pd_api_error_json(400, "inv\xff\xe2\x82" "end"),
		   "{\"code\":400,\"error\":\"inv\\ufffd\\ufffd\\ufffdend\"}\n");
	check_json(pd_api_error_json(400, "ls\xe2\x80\xa8ps\xe2\x80\xa9"),
		   "{\"code\":400,\"error\":\"ls\\u2028ps\\u2029\"}\n");
	check_json(pd_api_error_json(400, "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd"),
		   "{\"code\":400,\"error\":\"\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd\"}\n");
	/* overlong, surrogate and beyond-U+10FFFF encodings are invalid UTF-8 for Go */
	check_json(pd_api_error_json(400, "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80"),
		   "{\"code\":400,\"error\":\"\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd\"}\n");
	/* omitempty */
	check_json(pd_api_error_json(400, ""), "{\"code\":400}\n");
	check_json(pd_api_error_json(405, NULL), "{\"code\":405}\n");
}

static void test_ok_json(void **state)
{
	(void)state;
	check_json(pd_api_ok_json(NULL), "{\"code\":200}\n");
	/* GET /api/0/services */
	json_t *v = json_pack("[ss]", "svc-a", "svc-b");
	check_json(pd_api_ok_json(v), "{\"code\":200,\"body\":[\"svc-a\",\"svc-b\"]}\n");
	json_decref(v);
	/* GET /api/0/version: insertion order, not sorted */
	v = json_object();
	json_object_set_new(v, "version", json_string("git-abc"));
	json_object_set_new(v, "commit", json_string("abc"));
	json_object_set_new(v, "build_time", json_string("2020-01-01T00:00:00Z"));
	check_json(pd_api_ok_json(v),
		   "{\"code\":200,\"body\":{\"version\":\"git-abc\",\"commit\":\"abc\",\"build_time\":"
		   "\"2020-01-01T00:00:00Z\"}}\n");
	json_decref(v);
	/* scalars; floats as Go's encoder formats them */
	v = json_pack("[iIbbnfffffffffffs{}[]]", -7, (json_int_t)INT64_MIN, 1, 0, 1.5, 100.0, 1e20, 1e21, 1e-6, 1e-7,
		      1.5e-7, 0.1, 123456789.125, -2.5e-10, 3.0000000000000004, "a&b");
	assert_non_null(v);
	check_json(pd_api_json_encode(v), "[-7,-9223372036854775808,true,false,null,1.5,100,100000000000000000000,"
					  "1e+21,0.000001,1e-7,1.5e-7,0.1,123456789.125,-2.5e-10,"
					  "3.0000000000000004,\"a\\u0026b\",{},[]]\n");
	json_decref(v);
	v = json_pack("[ff]", 0.0, -0.0);
	check_json(pd_api_json_encode(v), "[0,-0]\n");
	json_decref(v);
	/* keys are escaped like strings */
	v = json_pack("{s:i}", "<k>", 1);
	check_json(pd_api_json_encode(v), "{\"\\u003ck\\u003e\":1}\n");
	json_decref(v);
	/* nesting deeper than the cap is refused, not recursed into */
	v = json_array();
	json_t *inner = v;
	for (int i = 0; i < PD_JSON_MAX_DEPTH + 1; i++) {
		json_t *a = json_array();
		json_array_append_new(inner, a);
		inner = a;
	}
	assert_null(pd_api_json_encode(v));
	assert_null(pd_api_ok_json(v));
	json_decref(v);
}

/* Where jansson and Go agree (no character either escapes), our bytes equal
 * json_dumps(JSON_COMPACT | JSON_PRESERVE_ORDER) plus the newline. */
static void test_json_matches_jansson(void **state)
{
	(void)state;
	json_t *v = json_pack("{s:s,s:i,s:[s,{s:s,s:b,s:n}],s:{}}", "zeta", "plain text, \xc3\xbc", "alpha", 42, "list",
			      "x", "k", "v", "t", 1, "n", "empty");
	assert_non_null(v);
	char *ours = pd_api_json_encode(v);
	char *theirs = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_non_null(ours);
	assert_non_null(theirs);
	size_t n = strlen(theirs);
	assert_int_equal(strlen(ours), n + 1);
	assert_memory_equal(ours, theirs, n);
	assert_int_equal(ours[n], '\n');
	free(ours);
	free(theirs);
	json_decref(v);
}

static void test_profile_json(void **state)
{
	(void)state;
	/* the reference's POST success body (§1.5), byte for byte; labels parsed
	 * out of order and created_at with nanoseconds (truncated to seconds) */
	struct pd_api_label *l;
	size_t n;
	struct pd_err err = {0, ""};
	assert_int_equal(pd_api_parse_labels("region=europe-west3,dc=fra", &l, &n, &err), 0);
	json_t *p = pd_api_profile_json("bpc00mript33iv4net00", PD_API_TYPE_CPU, "api-backend", l, n,
					T0 + 999999999);
	assert_non_null(p);
	check_json(pd_api_ok_json(p),
		   "{\"code\":200,\"body\":{\"id\":\"bpc00mript33iv4net00\",\"type\":\"cpu\",\"service\":"
		   "\"api-backend\","
		   "\"labels\":[{\"key\":\"dc\",\"value\":\"fra\"},{\"key\":\"region\",\"value\":\"europe-west3\"}],"
		   "\"created_at\":\"2019-05-30T11:49:02Z\"}}\n");
	/* GET /api/0/profiles: a list; no labels = the field is omitted */
	json_t *list = json_array();
	json_array_append_new(list, p);
	json_array_append_new(list, pd_api_profile_json("c1", PD_API_TYPE_ALLOCS, "api-backend", NULL, 0, T0 + S));
	check_json(pd_api_ok_json(list),
		   "{\"code\":200,\"body\":[{\"id\":\"bpc00mript33iv4net00\",\"type\":\"cpu\",\"service\":"
		   "\"api-backend\",\"labels\":[{\"key\":\"dc\",\"value\":\"fra\"},{\"key\":\"region\",\"value\":"
		   "\"europe-west3\"}],\"created_at\":\"2019-05-30T11:49:02Z\"},{\"id\":\"c1\",\"type\":\"allocs\","
		   "\"service\":\"api-backend\",\"created_at\":\"2019-05-30T11:49:03Z\"}]}\n");
	json_decref(list);
	pd_api_labels_free(l);
	/* user bytes: escaped as Go would, invalid UTF-8 kept as \ufffd */
	struct pd_api_label odd[] = {{"a<b", "\xff"}};
	p = pd_api_profile_json("id&", PD_API_TYPE_OTHER, "s\"vc", odd, 1, -1);
	check_json(pd_api_json_encode(p), "{\"id\":\"id\\u0026\",\"type\":\"other\",\"service\":\"s\\\"vc\",\"labels\":"
					  "[{\"key\":\"a\\u003cb\",\"value\":\"\\ufffd\"}],\"created_at\":"
					  "\"1969-12-31T23:59:59Z\"}\n");
	json_decref(p);
	/* a type is required */
	assert_null(pd_api_profile_json("x", PD_API_TYPE_ANY, "s", NULL, 0, 0));
	assert_null(pd_api_profile_json("x", 99, "s", NULL, 0, 0));
}

/* ---- robustness -------------------------------------------------------------------------------- */

/* Pseudo-random short strings from an alphabet rich in syntax: every call
 * returns 0 or a negative code with a message; ASan/UBSan watch the rest. */
static void test_random_inputs(void **state)
{
	(void)state;
	static const char alpha[] = "0123456789-+:.,=%TZzaAfFnowhmsuµ \t\xff\xc3";
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	char s[48];
	for (int it = 0; it < 200000; it++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t n = x % (sizeof s - 1);
		uint64_t y = x;
		for (size_t i = 0; i < n; i++) {
			y = y * 6364136223846793005ULL + 1442695040888963407ULL;
			s[i] = alpha[(y >> 33) % (sizeof alpha - 1)];
		}
		s[n] = 0;
		struct pd_err err = {0, ""};
		int64_t ns;
		int rc = pd_api_parse_time("from", s, NOW, &ns, &err);
		assert_true(rc == 0 || (rc < 0 && err.msg[0] && err.code == rc));
		struct pd_api_label *l;
		size_t nl;
		err.msg[0] = 0;
		rc = pd_api_parse_labels(s, &l, &nl, &err);
		assert_true(rc == 0 || (rc < 0 && err.msg[0]));
		for (size_t i = 0; i < nl; i++) {
			assert_true(l[i].key[0] != 0);
			if (i)
				assert_true(strcmp(l[i - 1].key, l[i].key) <= 0);
		}
		pd_api_labels_free(l);
		int t;
		rc = pd_api_parse_type(s, &t, &err);
		assert_true(rc == 0 || rc == PD_EINVAL);
		char *j = pd_api_error_json(400, s);
		assert_non_null(j);
		json_error_t jerr;
		json_t *back = json_loads(j, 0, &jerr); /* always valid JSON */
		if (!back)
			fail_msg("invalid JSON for \"%s\": %s: %s", s, j, jerr.text);
		json_decref(back);
		free(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_query_unescape),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_labels_errors),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_time_profefe_layout),
		cmocka_unit_test(test_time_rfc3339),
		cmocka_unit_test(test_time_unix),
		cmocka_unit_test(test_time_relative),
		cmocka_unit_test(test_time_misc),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_query_ok),
		cmocka_unit_test(test_query_errors),
		cmocka_unit_test(test_post),
		cmocka_unit_test(test_http_status),
		cmocka_unit_test(test_error_json),
		cmocka_unit_test(test_ok_json),
		cmocka_unit_test(test_json_matches_jansson),
		cmocka_unit_test(test_profile_json),
		cmocka_unit_test(test_random_inputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
