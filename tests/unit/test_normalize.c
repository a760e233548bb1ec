/*
 * test_normalize.c — the arithmetic of normalisation (lib/query/normalize.h,
 * docs/api.md "Normalisation"):
 *   - pd_scale_value / pd_profile_scale: pprof's Scale rounding (half away
 *     from zero), exact on values float64 cannot hold, zero samples dropped;
 *   - kinds and source keys: which profiles are gauges, cumulative
 *     snapshots or sums; instance > namespace/pod > label set;
 *   - pd_norm_plan: grouping by service and source, time order;
 *   - the weighted fleet accumulator: an average is rounded once per row,
 *     never per source;
 *   - pd_norm_merge and pd_norm_each over a real SQLite store: gauge
 *     sources averaged, cumulative sources differenced (and a counter reset,
 *     a single snapshot left out), sums unchanged, normalize=false;
 *   - pd_norm_cores.
 */
#include "testutil.h"
#include "../../lib/query/normalize.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000LL
#define T0  (1764374400LL * SEC) /* 2025-11-29T00:00:00Z */

static void test_scale_value(void **state)
{
	(void)state;
	assert_int_equal(pd_scale_value(5, 1, 2), 3); /* 2.5 -> 3 */
	assert_int_equal(pd_scale_value(-5, 1, 2), -3);
	assert_int_equal(pd_scale_value(4, 1, 3), 1);
	assert_int_equal(pd_scale_value(5, 1, 3), 2);
	assert_int_equal(pd_scale_value(-5, 1, 3), -2);
	assert_int_equal(pd_scale_value(1, 1, 3), 0);
	assert_int_equal(pd_scale_value(7, 3, 2), 11); /* 10.5 -> 11 */
	assert_int_equal(pd_scale_value(0, 1, 7), 0);
	/* 2^53 + 1: float64 would round it; the ratio 3/3 keeps it exact */
	assert_int_equal(pd_scale_value(9007199254740993LL, 3, 3), 9007199254740993LL);
	assert_int_equal(pd_scale_value(9007199254740993LL, 1, 2), 4503599627370497LL);
	assert_int_equal(pd_scale_value(INT64_MAX, 2, 1), INT64_MAX); /* saturates */
	assert_int_equal(pd_scale_value(INT64_MIN, 2, 1), INT64_MIN);
}

/* A profile of n samples on one function each ("f<i>"), values v[i] (1 type). */
/* ptype (may be NULL): the period type, which makes the profile of a Go
 * kind ("cpu", "space" = heap) as the store's type check wants it. */
static struct pd_profile *prof_kind(const int64_t *v, size_t n, const char *type, const char *unit,
				    const char *ptype)
{
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, type, unit);
	if (ptype)
		pb_period_type(&p, ptype, unit, 1);
	pb_mapping(&p, 1, 0x1000, 0x2000, 0, "/bin/x", "");
	static char names[16][24];
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof names[i], "f%zu", i);
		pb_function(&p, i + 1, names[i], "x.go", 0);
		pb_location1(&p, i + 1, 1, 0x1000 + 16 * i, i + 1, 1);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t loc = i + 1;
		pb_sample(&p, &loc, 1, &v[i], 1, NULL, 0);
	}
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	pb_free(&p);
	return q;
}

static struct pd_profile *prof(const int64_t *v, size_t n, const char *type, const char *unit)
{
	return prof_kind(v, n, type, unit, NULL);
}

static void test_profile_scale(void **state)
{
	(void)state;
	int64_t v[] = {3, 1, -4, 10, 0};
	struct pd_profile *p = prof(v, 4, "inuse_space", "bytes");
	pd_profile_scale(p, 1, 1); /* no-op */
	assert_int_equal(p->nsamples, 4);
	pd_profile_scale(p, 1, 3); /* 1, 0 (dropped), -1, 3 */
	assert_int_equal(p->nsamples, 3);
	assert_int_equal(p->samples[0].values[0], 1);
	assert_int_equal(p->samples[1].values[0], -1);
	assert_int_equal(p->samples[2].values[0], 3);
	/* still encodes (locations of dropped samples stay) */
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(p, 1, &b, &err), 0);
	pd_buf_free(&b);
	pd_profile_free(p);
}

static struct pd_profile_meta meta(const char *svc, const char *type, struct pd_kv *l, size_t nl, int64_t t,
				   const char *id)
{
	struct pd_profile_meta m;
	memset(&m, 0, sizeof m);
	snprintf(m.service, sizeof m.service, "%s", svc);
	snprintf(m.type, sizeof m.type, "%s", type);
	snprintf(m.id, sizeof m.id, "%s", id);
	m.labels = l;
	m.nlabels = nl;
	m.created_ns = t;
	return m;
}

static char *key_of(const struct pd_profile_meta *m, size_t *len)
{
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_norm_source_key(m, &b), 0);
	*len = b.len;
	return (char *)b.ptr;
}

static bool same_source(const struct pd_profile_meta *a, const struct pd_profile_meta *b)
{
	size_t la, lb;
	char *x = key_of(a, &la), *y = key_of(b, &lb);
	bool eq = la == lb && !memcmp(x, y, la);
	free(x);
	free(y);
	return eq;
}

static void test_kinds_sources(void **state)
{
	(void)state;
	struct pd_kv cum[] = {{"cumulative", "true"}, {"instance", "h:1"}};
	struct pd_kv cumf[] = {{"cumulative", "false"}, {"instance", "h:1"}};
	struct pd_kv i1[] = {{"instance", "h:1"}, {"version", "1"}};
	struct pd_kv i1v2[] = {{"instance", "h:1"}, {"version", "2"}};
	struct pd_kv i2[] = {{"instance", "h:2"}, {"version", "1"}};
	struct pd_kv pod1[] = {{"namespace", "a"}, {"node", "n1"}, {"pod", "web-1"}};
	struct pd_kv pod1b[] = {{"namespace", "a"}, {"node", "n2"}, {"pod", "web-1"}};
	struct pd_kv pod1ns[] = {{"namespace", "b"}, {"node", "n1"}, {"pod", "web-1"}};
	struct pd_kv l1[] = {{"env", "prod"}, {"version", "1"}};
	struct pd_kv l2[] = {{"env", "prod"}, {"version", "2"}};
	struct pd_profile_meta m;
	const char *gauges[] = {"heap", "goroutine", "threadcreate"},
		   *sums[] = {"cpu", "other", "allocs", "block", "mutex"};
	for (size_t i = 0; i < 3; i++) {
		m = meta("s", gauges[i], cum, 2, 0, "a");
		assert_int_equal(pd_norm_kind(&m), PD_NORM_GAUGE);
	}
	for (size_t i = 0; i < 5; i++) {
		m = meta("s", sums[i], i1, 2, 0, "a");
		assert_int_equal(pd_norm_kind(&m), PD_NORM_SUM);
		m = meta("s", sums[i], cum, 2, 0, "a");
		assert_int_equal(pd_norm_kind(&m), i >= 2 ? PD_NORM_CUMULATIVE : PD_NORM_SUM);
		m = meta("s", sums[i], cumf, 2, 0, "a");
		assert_int_equal(pd_norm_kind(&m), PD_NORM_SUM);
	}
	assert_true(pd_norm_type_sums("cpu") && pd_norm_type_sums("other") && !pd_norm_type_sums("allocs") &&
		    !pd_norm_type_sums(NULL));
	assert_true(pd_norm_type_gauge("heap") && pd_norm_type_gauge(NULL) && !pd_norm_type_gauge("cpu"));
	/* instance wins: other labels do not split a source */
	struct pd_profile_meta a = meta("s", "heap", i1, 2, 0, "a"), b = meta("s", "heap", i1v2, 2, 0, "b");
	assert_true(same_source(&a, &b));
	b = meta("s", "heap", i2, 2, 0, "b");
	assert_false(same_source(&a, &b));
	b = meta("t", "heap", i1, 2, 0, "b"); /* another service */
	assert_false(same_source(&a, &b));
	b = meta("s", "goroutine", i1, 2, 0, "b"); /* another type */
	assert_false(same_source(&a, &b));
	/* namespace/pod */
	a = meta("s", "heap", pod1, 3, 0, "a");
	b = meta("s", "heap", pod1b, 3, 0, "b");
	assert_true(same_source(&a, &b));
	b = meta("s", "heap", pod1ns, 3, 0, "b");
	assert_false(same_source(&a, &b));
	/* else the label set */
	a = meta("s", "heap", l1, 2, 0, "a");
	b = meta("s", "heap", l1, 2, 0, "b");
	assert_true(same_source(&a, &b));
	b = meta("s", "heap", l2, 2, 0, "b");
	assert_false(same_source(&a, &b));
	/* cumulative snapshots and deltas of one instance are different sources */
	a = meta("s", "allocs", cum, 2, 0, "a");
	b = meta("s", "allocs", i1, 1, 0, "b");
	assert_false(same_source(&a, &b));
}

static void test_plan(void **state)
{
	(void)state;
	struct pd_kv x[] = {{"instance", "x"}}, y[] = {{"instance", "y"}};
	struct pd_profile_meta v[] = {
	    meta("web", "heap", y, 1, T0 + 3, "a3"), meta("db", "heap", x, 1, T0 + 2, "b2"),
	    meta("web", "heap", x, 1, T0 + 5, "a5"), meta("web", "heap", x, 1, T0 + 1, "a1"),
	    meta("db", "heap", x, 1, T0 + 1, "b1"),
	};
	struct pd_norm_plan p;
	struct pd_err err;
	assert_int_equal(pd_norm_plan(v, 5, &p, &err), 0);
	assert_int_equal(p.nsvc, 2);
	assert_string_equal(p.svc[0].name, "db");
	assert_string_equal(p.svc[1].name, "web");
	assert_int_equal(p.svc[0].n, 2);
	assert_int_equal(p.svc[1].n, 3);
	assert_int_equal(p.nsrc, 3);
	assert_int_equal(p.svc[1].nsrc, 2);
	const char *order[] = {"b1", "b2", "a1", "a5", "a3"};
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(v[i].id, order[i]);
	assert_int_equal(p.src[1].first, 2); /* web x: a1, a5 */
	assert_int_equal(p.src[1].n, 2);
	assert_int_equal(p.src[2].service, 1);
	pd_norm_plan_free(&p);
	assert_int_equal(pd_norm_plan(NULL, 0, &p, &err), 0); /* nothing selected */
	assert_int_equal(p.nsvc, 0);
	assert_int_equal(p.nsrc, 0);
	pd_norm_plan_free(&p);
	struct pd_norm_info i = {true, (1u << PD_NORM_SUM) | (1u << PD_NORM_CUMULATIVE), 0, 0, 0, 0};
	char buf[64];
	assert_string_equal(pd_norm_mode(&i, buf, sizeof buf), "sum+cumulative_delta");
	i.on = false;
	assert_string_equal(pd_norm_mode(&i, buf, sizeof buf), "none");
}

/* Three sources each with f0 = 1 in every snapshot, averaged (1/3 weight
 * on a merge of 3): the row is 3, not 0 (rounded once, not per source). */
static void test_weighted_acc(void **state)
{
	(void)state;
	int64_t v[] = {3, 2};
	struct pd_profile *p = prof(v, 2, "goroutine", "count");
	struct pd_fleet_acc *a;
	struct pd_err err;
	assert_int_equal(pd_fleet_acc_new(2, &a), 0);
	assert_int_equal(pd_fleet_acc_add(a, 0, p, 0, 1.0 / 9, &err), 0); /* 3/9, 2/9 */
	assert_int_equal(pd_fleet_acc_add(a, 0, p, 0, 1.0 / 9, &err), 0);
	assert_int_equal(pd_fleet_acc_add(a, 0, p, 0, 1.0 / 9, &err), 0); /* f0 1, f1 0.67 */
	assert_int_equal(pd_fleet_acc_add(a, 1, p, 0, 1, &err), 0);       /* exact: 3, 2 */
	struct pd_fleet_top t;
	assert_int_equal(pd_fleet_acc_finish(a, false, &t, &err), 0);
	pd_fleet_acc_free(a);
	assert_int_equal(t.nfns, 2);
	assert_true(pd_str_eq(t.fns[0].name, "f0"));
	assert_int_equal(t.fns[0].flat, 4); /* 3 + 1 */
	assert_int_equal(t.fns[1].flat, 3); /* 2 + round(0.67) */
	assert_int_equal(t.fns[0].nby, 2);
	assert_int_equal(t.fns[0].by[0].service, 1); /* ranked: 3 before 1 */
	assert_int_equal(t.fns[0].by[1].flat, 1);
	assert_int_equal(t.totals[0], 2); /* round(5/3) */
	assert_int_equal(t.totals[1], 5);
	assert_int_equal(t.total, 7); /* round(5 + 5/3) */
	pd_fleet_top_free(&t);
	pd_profile_free(p);
}

/* ---- over a store ---------------------------------------------------------------------- */

static char tmpdir[256];

TU_TMPDIR_FIXTURES(tmpdir, "norm")

static void ingest(struct pd_store *st, const char *type, const char *unit, const char *inst, bool cumulative,
		   int64_t t, const int64_t *v, size_t n)
{
	struct pd_kv kv[] = {{"cumulative", "true"}, {"instance", (char *)inst}};
	struct pd_ingest in = {.service = "web", .type = type, .labels = cumulative ? kv : kv + 1, .nlabels = cumulative ? 2 : 1, .created_ns = t, .min_created_ns = 0};
	const char *ptype = !strcmp(type, "cpu") ? "cpu" : !strcmp(type, "heap") || !strcmp(type, "allocs") ? "space" : NULL;
	struct pd_profile *p = prof_kind(v, n, type, unit ? unit : "count", ptype);
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	struct pd_profile_meta m;
	assert_int_equal(pd_pprof_encode(p, 1, &b, &err), 0);
	if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
		fail_msg("ingest: %s", err.msg);
	pd_meta_clear(&m);
	pd_buf_free(&b);
	pd_profile_free(p);
}

static struct pd_profile_meta *select_type(struct pd_store *st, const char *q, size_t *n)
{
	struct pd_selector s;
	struct pd_err err;
	struct pd_profile_meta *v;
	assert_int_equal(pd_selector_parse(q, &s, &err), 0);
	assert_int_equal(pd_query_select(st, &s, T0, T0 + 3600 * SEC, 0, &v, n, &err), 0);
	pd_selector_free(&s);
	return v;
}

static int64_t value_of(const struct pd_profile *p, const char *fn)
{
	int64_t sum = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_location *l = &p->locations[p->samples[i].locs[0]];
		if (l->nlines && pd_str_eq(p->strings[p->functions[l->lines[0].function].name], fn))
			sum += p->samples[i].values[0];
	}
	return sum;
}

static void test_store(void **state)
{
	(void)state;
	struct pd_store *st;
	struct pd_err err;
	assert_int_equal(pd_store_open_sqlite(tmpdir, NULL, &st, &err), 0);
	/* heap (gauge): x has 3 snapshots of f0 = 30, 60, 90 (avg 60); y 1 snapshot of f0 = 7 */
	int64_t h1[] = {30, 3}, h2[] = {60, 3}, h3[] = {90, 4}, h4[] = {7, 0};
	ingest(st, "heap", "bytes", "x", false, T0 + 1 * SEC, h1, 2);
	ingest(st, "heap", "bytes", "x", false, T0 + 2 * SEC, h2, 2);
	ingest(st, "heap", "bytes", "x", false, T0 + 3 * SEC, h3, 2);
	ingest(st, "heap", "bytes", "y", false, T0 + 4 * SEC, h4, 1);
	/* allocs cumulative: x 100 -> 150 -> 400 (f0), y only one snapshot, z resets (500 -> 20) */
	int64_t a1[] = {100, 10}, a2[] = {150, 10}, a3[] = {400, 30}, ay[] = {999, 999}, z1[] = {500, 500},
		z2[] = {20, 5};
	ingest(st, "allocs", "bytes", "x", true, T0 + 1 * SEC, a1, 2);
	ingest(st, "allocs", "bytes", "x", true, T0 + 2 * SEC, a2, 2);
	ingest(st, "allocs", "bytes", "x", true, T0 + 3 * SEC, a3, 2);
	ingest(st, "allocs", "bytes", "y", true, T0 + 3 * SEC, ay, 2);
	ingest(st, "allocs", "bytes", "z", true, T0 + 4 * SEC, z1, 2);
	ingest(st, "allocs", "bytes", "z", true, T0 + 5 * SEC, z2, 2);
	/* cpu: summed */
	int64_t c1[] = {10, 20}, c2[] = {5, 1};
	ingest(st, "cpu", "nanoseconds", "x", false, T0 + 1 * SEC, c1, 2);
	ingest(st, "cpu", "nanoseconds", "y", false, T0 + 2 * SEC, c2, 2);

	size_t n;
	struct pd_profile_meta *v = select_type(st, "heap", &n);
	struct pd_profile *p;
	struct pd_norm_info ni;
	assert_int_equal(pd_norm_merge(st, v, n, true, &p, &ni, &err), 0);
	assert_int_equal(value_of(p, "f0"), 60 + 7);
	assert_int_equal(value_of(p, "f1"), 3); /* round(10/3) */
	assert_true(ni.on);
	assert_int_equal(ni.sources, 2);
	assert_int_equal(ni.profiles, 4);
	assert_int_equal(ni.kinds, 1u << PD_NORM_GAUGE);
	pd_profile_free(p);
	assert_int_equal(pd_norm_merge(st, v, n, false, &p, &ni, &err), 0); /* raw */
	assert_int_equal(value_of(p, "f0"), 30 + 60 + 90 + 7);
	assert_false(ni.on);
	pd_profile_free(p);
	pd_query_metas_free(v, n);

	v = select_type(st, "allocs", &n);
	assert_int_equal(pd_norm_merge(st, v, n, true, &p, &ni, &err), 0);
	assert_int_equal(value_of(p, "f0"), (400 - 100) + 20); /* x: last - first; z: reset, the last alone */
	assert_int_equal(value_of(p, "f1"), (30 - 10) + 5);
	assert_int_equal(ni.sources, 3);
	assert_int_equal(ni.excluded, 1); /* y */
	assert_int_equal(ni.resets, 1);   /* z */
	pd_profile_free(p);
	pd_query_metas_free(v, n);
	v = select_type(st, "allocs{instance=\"y\"}", &n);
	assert_int_equal(pd_norm_merge(st, v, n, true, &p, &ni, &err), PD_ENOTFOUND);
	assert_non_null(strstr(err.msg, "single cumulative=true snapshot"));
	assert_int_equal(pd_norm_merge(st, v, n, false, &p, &ni, &err), 0); /* raw: the snapshot */
	assert_int_equal(value_of(p, "f0"), 999);
	pd_profile_free(p);
	pd_query_metas_free(v, n);

	v = select_type(st, "cpu", &n);
	assert_int_equal(pd_norm_merge(st, v, n, true, &p, &ni, &err), 0);
	assert_int_equal(value_of(p, "f0"), 15);
	assert_int_equal(ni.sources, 2);
	assert_int_equal(ni.kinds, 1u << PD_NORM_SUM);
	pd_profile_free(p);
	pd_query_metas_free(v, n);

	/* mixed types: a clear error */
	v = select_type(st, "{instance=\"x\"}", &n);
	assert_int_equal(pd_norm_merge(st, v, n, true, &p, &ni, &err), PD_EINCOMPAT);
	assert_non_null(strstr(err.msg, "incompatible profiles"));
	pd_query_metas_free(v, n);

	/* sources from the metadata alone */
	struct pd_selector s;
	assert_int_equal(pd_selector_parse("allocs", &s, &err), 0);
	char *svcs[] = {"web"};
	size_t counts[1], profiles;
	bool cumulative;
	assert_int_equal(
	    pd_norm_count_sources(st, &s, T0, T0 + 3600 * SEC, svcs, 1, counts, &profiles, &cumulative, &err), 0);
	assert_int_equal(counts[0], 3);
	assert_int_equal(profiles, 6);
	assert_true(cumulative);
	pd_selector_free(&s);
	pd_store_close(st);
}

static void test_cores(void **state)
{
	(void)state;
	/* 2 processes, 20 s of profiles in all, 15 s of CPU: 1.5 cores */
	assert_true(pd_norm_cores(15 * SEC, 20 * SEC, 2) == 1.5);
	assert_true(pd_norm_cores(15 * SEC, 0, 2) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scale_value),   cmocka_unit_test(test_profile_scale),
	    cmocka_unit_test(test_kinds_sources), cmocka_unit_test(test_plan),
	    cmocka_unit_test(test_weighted_acc),  cmocka_unit_test_setup_teardown(test_store, setup, teardown),
	    cmocka_unit_test(test_cores),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
