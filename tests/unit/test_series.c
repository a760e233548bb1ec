/*
 * test_series.c — lib/query/series (profiles as time series and their text
 * forms), lib/query/diff (pprof's -diff_base) and lib/remote/influx's window:
 *   - step math (epoch alignment, negative times, step counts);
 *   - escaping: Prometheus label values, InfluxDB tags and measurement,
 *     label names made valid and unique;
 *   - pd_series_step = pd_top_compute per function; the summed form (a
 *     sample counted once in cum); the total;
 *   - pd_series_compute over a real store: points per step = the step's
 *     profiles merged, 0 where the function is absent, no point without
 *     profiles; groups by label; top n (overall, per group); the caps;
 *   - pd_series_compute_range (rollups' function tables, range merges) =
 *     pd_series_compute of the selection, series by series and point by
 *     point: by service/function/none, totals, regexes summed, partial
 *     hours, hours without a rollup, stale rollups, sample_index, cores,
 *     normalisation; what it refuses; its cap on profiles from blocks;
 *   - the Prometheus and InfluxDB writers, byte for byte;
 *   - diff: delta = target - base per function, pprof::base labels,
 *     -normalize, incompatible types, the flame graph's sums;
 *   - the exporter's window lines.
 * The end-to-end counterpart (real collector, go tool pprof, promtool,
 * InfluxDB's parser) is tests/e2e/test_api1_series.sh.
 */
#include "testutil.h"
#include "../../lib/query/series.h"
#include "../../lib/query/diff.h"
#include "../../lib/remote/influx.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000LL
#define T0 (1764374400LL * SEC) /* 2025-11-29T00:00:00Z */

/* ---- step math --------------------------------------------------------------------- */

static void test_step_math(void **state)
{
	(void)state;
	assert_int_equal(pd_series_step_start(0, 60 * SEC), 0);
	assert_int_equal(pd_series_step_start(59 * SEC, 60 * SEC), 0);
	assert_int_equal(pd_series_step_start(60 * SEC, 60 * SEC), 60 * SEC);
	assert_int_equal(pd_series_step_start(-1, 60 * SEC), -60 * SEC);
	assert_int_equal(pd_series_step_start(-60 * SEC, 60 * SEC), -60 * SEC);
	assert_int_equal(pd_series_step_start(T0 + 299 * SEC, 300 * SEC), T0 + 0);
	assert_int_equal(pd_series_nsteps(T0, T0, 300 * SEC), 1);
	assert_int_equal(pd_series_nsteps(T0 + 10 * SEC, T0 + 310 * SEC, 300 * SEC), 2);
	assert_int_equal(pd_series_nsteps(T0, T0 + 3600 * SEC, 300 * SEC), 13); /* both ends inclusive */
	assert_int_equal(pd_series_nsteps(T0 + 3600 * SEC, T0, 300 * SEC), 0);
	assert_int_equal(pd_series_nsteps(T0, T0 + 86400 * SEC, SEC), 86401);
	assert_int_equal(pd_series_nsteps(-5 * SEC, 5 * SEC, 10 * SEC), 2);
}

/* ---- escaping ---------------------------------------------------------------------- */

typedef int (*esc_fn)(struct pd_buf *, const char *, size_t);

static void esc_is(esc_fn f, const char *in, const char *want)
{
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(f(&b, in, strlen(in)), 0);
	if (b.len != strlen(want) || (b.len && memcmp(b.ptr, want, b.len)))
		fail_msg("escape(%s) = '%.*s', want '%s'", in, (int)b.len, (const char *)b.ptr, want);
	pd_buf_free(&b);
}

static void test_escape(void **state)
{
	(void)state;
	/* Prometheus: \ " newline; nothing else */
	esc_is(pd_prom_escape_value, "main.(*T).f", "main.(*T).f");
	esc_is(pd_prom_escape_value, "a\"b\\c\nd, e=f{}", "a\\\"b\\\\c\\nd, e=f{}");
	esc_is(pd_prom_escape_value, "", "");
	/* Influx tags: comma, equals, space; backslash only where it would escape the next byte */
	esc_is(pd_influx_escape_tag, "main.(*T).f", "main.(*T).f");
	esc_is(pd_influx_escape_tag, "a b,c=d", "a\\ b\\,c\\=d");
	esc_is(pd_influx_escape_tag, "C:\\x", "C:\\x");
	esc_is(pd_influx_escape_tag, "end\\", "end\\\\");
	esc_is(pd_influx_escape_tag, "a\\ b", "a\\\\\\ b");
	esc_is(pd_influx_escape_tag, "a\\\\b", "a\\\\\\b");
	esc_is(pd_influx_escape_tag, "q\"u", "q\"u");
	esc_is(pd_influx_escape_tag, "l1\nl2\r", "l1\\nl2\\r");
	/* measurement: comma and space only */
	esc_is(pd_influx_escape_measurement, "a b,c=d", "a\\ b\\,c=d");
	/* invalid UTF-8 (a profile's function name): each bad byte U+FFFD, as Go
	 * reads it; a valid multi-byte character kept; both parsers refuse the rest */
	esc_is(pd_prom_escape_value, "a\xff\xfe\"b\xc3", "a\xef\xbf\xbd\xef\xbf\xbd\\\"b\xef\xbf\xbd");
	esc_is(pd_prom_escape_value, "f\xc3\xa9\xe2\x82", "f\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");
	esc_is(pd_influx_escape_tag, "a \xed\xa0\x80,", "a\\ \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\,");
	esc_is(pd_influx_escape_measurement, "\x80", "\xef\xbf\xbd");
}

static void test_label_names(void **state)
{
	(void)state;
	const char *by[] = {"service", "version", "k8s.io/app-name", "9x", "__meta", "unit", "type", "k8s_io_app_name"};
	struct pd_series_spec spec = {0};
	spec.by = by;
	spec.nby = 8;
	struct pd_arena *a = pd_arena_new(1024);
	const char **n;
	assert_int_equal(pd_series_label_names(&spec, a, &n), 0);
	assert_string_equal(n[0], "service");
	assert_string_equal(n[1], "version");
	assert_string_equal(n[2], "k8s_io_app_name");
	assert_string_equal(n[3], "label_9x");
	assert_string_equal(n[4], "label___meta");
	assert_string_equal(n[5], "label_unit");
	assert_string_equal(n[6], "label_type");
	assert_string_equal(n[7], "k8s_io_app_name_7"); /* clashes with by[2] */
	pd_arena_free(a);
}

/* ---- one step ---------------------------------------------------------------------- */

/* A CPU profile: main.main -> a.f0..f4 / b.g (inlined into a.f1) / runtime.x; values from seed. */
static struct pd_buf make_profile(const char *prefix, bool heap, int seed)
{
	char names[TU_APP_NFN][64];
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, heap);
	tu_app_functions(&p, prefix, names);
	pb_location1(&p, 8, 1, 0x400900, 0, 0); /* no function: "[app]" */
	uint64_t rs = 99991 + (uint64_t)seed;
	for (int i = 0; i < 14; i++) {
		uint64_t locs[6];
		size_t n = 1 + tu_xorshift(&rs) % 3;
		for (size_t j = 0; j < n; j++)
			locs[j] = 3 + tu_xorshift(&rs) % 6; /* 3..8: may repeat (recursion) */
		locs[n++] = (i % 3) ? 1 : 2;
		int64_t vals[2] = {1 + (int64_t)(tu_xorshift(&rs) % 5), 10000000 * (1 + (int64_t)(tu_xorshift(&rs) % 7))};
		pb_sample(&p, locs, n, vals, 2, NULL, 0);
	}
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 1, &out, &err), 0);
	pd_profile_free(q);
	pb_free(&p);
	return out;
}

static struct pd_profile *decode_buf(struct pd_buf b)
{
	struct pd_profile *p = tu_decode_lim(b.ptr, b.len, NULL);
	pd_buf_free(&b);
	return p;
}

struct rows {
	char name[32][64];
	int64_t flat[32], cum[32];
	size_t n;
	bool unnamed;
};

static int collect(void *ctx, struct pd_str fn, int64_t flat, int64_t cum)
{
	struct rows *r = ctx;
	assert_true(r->n < 32);
	if (!fn.ptr)
		r->unnamed = true;
	snprintf(r->name[r->n], sizeof r->name[r->n], "%.*s", (int)fn.len, fn.ptr ? fn.ptr : "");
	r->flat[r->n] = flat;
	r->cum[r->n] = cum;
	r->n++;
	return 0;
}

static const struct pd_regex *compile(const char *re, struct pd_selector *h)
{
	const struct pd_regex *r;
	struct pd_err err;
	if (pd_series_compile_re("function", re, h, &r, &err))
		fail_msg("compile %s: %s", re, err.msg);
	return r;
}

static void test_series_step(void **state)
{
	(void)state;
	struct pd_profile *p = decode_buf(make_profile("a", false, 3));
	struct pd_top t;
	struct pd_err err;
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	/* every function = pd_top_compute */
	struct rows r = {0};
	int64_t total = 0;
	assert_int_equal(pd_series_step(p, 1, NULL, true, &total, collect, &r, &err), 0);
	assert_int_equal(total, t.total);
	assert_int_equal(r.n, t.n);
	for (size_t i = 0; i < t.n; i++) {
		size_t k = 0;
		while (k < r.n && !pd_str_eq(t.rows[i].name, r.name[k]))
			k++;
		if (k == r.n)
			fail_msg("%.*s missing", (int)t.rows[i].name.len, t.rows[i].name.ptr);
		assert_int_equal(r.flat[k], t.rows[i].flat);
		assert_int_equal(r.cum[k], t.rows[i].cum);
	}
	/* a regex: only the matches (anchored) */
	struct pd_selector h;
	const struct pd_regex *re = compile("a\\.f[12]", &h);
	memset(&r, 0, sizeof r);
	assert_int_equal(pd_series_step(p, 1, re, true, &total, collect, &r, &err), 0);
	assert_int_equal(r.n, 2);
	for (size_t k = 0; k < r.n; k++)
		assert_true(!strcmp(r.name[k], "a.f1") || !strcmp(r.name[k], "a.f2"));
	/* summed: flat = sum of the flats; cum = samples with any match, once each */
	struct rows s = {0};
	assert_int_equal(pd_series_step(p, 1, re, false, &total, collect, &s, &err), 0);
	assert_int_equal(s.n, 1);
	assert_true(s.unnamed);
	assert_int_equal(s.flat[0], r.flat[0] + r.flat[1]);
	int64_t cum = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		bool any = false;
		for (uint32_t k = 0; k < p->samples[i].nlocs; k++) {
			const struct pd_location *l = &p->locations[p->samples[i].locs[k]];
			struct pd_str nm = l->nlines ? p->strings[p->functions[l->lines[0].function].name] : p->strings[0];
			any = any || pd_str_eq(nm, "a.f1") || pd_str_eq(nm, "a.f2");
		}
		if (any)
			cum += p->samples[i].values[1];
	}
	assert_int_equal(s.cum[0], cum);
	assert_true(s.cum[0] <= r.cum[0] + r.cum[1]);
	/* the frame without a function is named as pprof names it */
	struct pd_selector h2;
	const struct pd_regex *re2 = compile("\\[app\\]", &h2);
	memset(&r, 0, sizeof r);
	assert_int_equal(pd_series_step(p, 1, re2, true, &total, collect, &r, &err), 0);
	assert_true(r.n <= 1);
	/* no regex, no function: the total only */
	memset(&r, 0, sizeof r);
	assert_int_equal(pd_series_step(p, 0, NULL, false, &total, collect, &r, &err), 0);
	assert_int_equal(r.n, 0);
	int64_t cnt = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		cnt += p->samples[i].values[0];
	assert_int_equal(total, cnt);
	pd_selector_free(&h);
	pd_selector_free(&h2);
	pd_top_free(&t);
	pd_profile_free(p);
}

static void test_compile_re(void **state)
{
	(void)state;
	struct pd_selector h;
	const struct pd_regex *re;
	struct pd_err err = {0};
	assert_int_equal(pd_series_compile_re("function", "main\\.(", &h, &re, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "bad \"function\" \"main\\.(\": regex \"main\\.(\" does not compile"));
	assert_int_equal(pd_series_compile_re("function", "(a)\\1", &h, &re, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "unsupported in RE2/Prometheus selector syntax: back-reference"));
	assert_int_equal(pd_series_compile_re("function", "(((a{99}){99}){99}){99}", &h, &re, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "invalid repeat count"));
	/* quotes and backslashes reach the regex unchanged */
	assert_int_equal(pd_series_compile_re("function", "a\"b\\.c", &h, &re, &err), 0);
	assert_int_equal(pd_regex_match(re, "a\"b.c", 5), 1);
	assert_int_equal(pd_regex_match(re, "xa\"b.c", 6), 0); /* anchored */
	pd_selector_free(&h);
}

/* ---- over a store -------------------------------------------------------------------- */

static char tmpdir[256];

TU_TMPDIR_FIXTURES(tmpdir, "series")

struct prof {
	const char *svc, *version;
	int64_t t;
	int seed;
};

/* auth: 10s and 20s (step 0 of 60s) and 70s (step 1), 200s (step 3; v1.1);
 * search: 15s, 130s (step 2) */
static const struct prof profs[] = {
	{"auth", "1.0", 10, 1}, {"auth", "1.0", 20, 2}, {"search", "2.0", 15, 3},
	{"auth", "1.0", 70, 4}, {"search", "2.0", 130, 5}, {"auth", "1.1", 200, 6},
};

static struct pd_store *store_with_profiles(void)
{
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	for (size_t i = 0; i < ARRAY_LEN(profs); i++) {
		struct pd_kv kv[] = {{"version", (char *)profs[i].version}};
		struct pd_ingest in = {.service = profs[i].svc, .type = "cpu", .labels = kv, .nlabels = 1, .created_ns = T0 + profs[i].t * SEC, .min_created_ns = 0};
		struct pd_buf b = make_profile(profs[i].svc, false, profs[i].seed);
		struct pd_profile_meta m;
		if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
			fail_msg("ingest: %s", err.msg);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	return st;
}

static void select_all(struct pd_store *st, struct pd_profile_meta **v, size_t *n)
{
	struct pd_selector sel;
	struct pd_err err;
	assert_int_equal(pd_selector_parse("cpu", &sel, &err), 0);
	assert_int_equal(pd_query_select(st, &sel, T0, T0 + 3600 * SEC, 0, v, n, &err), 0);
	pd_selector_free(&sel);
}

/* The flat (or total, fn NULL) of the profiles of service svc created in [t, t+step). */
static int64_t expect(const char *svc, int64_t t, int64_t step, const char *fn)
{
	struct pd_profile *ps[8];
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_LEN(profs); i++)
		if (!strcmp(profs[i].svc, svc) && T0 + profs[i].t * SEC >= t && T0 + profs[i].t * SEC < t + step)
			ps[n++] = decode_buf(make_profile(profs[i].svc, false, profs[i].seed));
	assert_true(n > 0);
	struct pd_profile *m;
	struct pd_err err;
	assert_int_equal(pd_pprof_merge(ps, n, &m, &err), 0);
	struct pd_top t2;
	assert_int_equal(pd_top_compute(m, 1, false, &t2, &err), 0);
	int64_t v = fn ? 0 : t2.total;
	for (size_t i = 0; fn && i < t2.n; i++)
		if (pd_str_eq(t2.rows[i].name, fn))
			v = t2.rows[i].flat;
	pd_top_free(&t2);
	pd_profile_free(m);
	for (size_t i = 0; i < n; i++)
		pd_profile_free(ps[i]);
	return v;
}

static const struct pd_series *find(const struct pd_series_set *s, const char *label0, const char *fn)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].labels[0], label0) && (fn ? s->v[i].function && !strcmp(s->v[i].function, fn)
							       : !s->v[i].function))
			return &s->v[i];
	fail_msg("no series %s %s", label0, fn ? fn : "(total)");
	return NULL;
}

static void test_series_compute(void **state)
{
	(void)state;
	struct pd_store *st = store_with_profiles();
	struct pd_profile_meta *v;
	size_t n;
	select_all(st, &v, &n);
	assert_int_equal(n, 6);
	const char *by[] = {"service"};
	struct pd_series_spec spec = {0};
	spec.from_ns = T0;
	spec.to_ns = T0 + 3600 * SEC;
	spec.step_ns = 60 * SEC;
	spec.by = by;
	spec.nby = 1;
	struct pd_series_set s;
	struct pd_err err;
	/* totals per service: auth has steps 0, 1, 3; search 0, 2 */
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.profiles, 6);
	assert_int_equal(s.merges, 5);
	const struct pd_series *a = find(&s, "auth", NULL);
	assert_int_equal(a->npoints, 3);
	assert_string_equal(a->type, "cpu");
	assert_string_equal(a->sample_type, "cpu");
	assert_string_equal(a->unit, "nanoseconds");
	assert_int_equal(a->profiles, 4);
	int64_t steps[] = {0, 60, 180};
	for (size_t k = 0; k < 3; k++) {
		assert_int_equal(a->points[k].t_ns, T0 + steps[k] * SEC);
		assert_int_equal(a->points[k].value, expect("auth", T0 + steps[k] * SEC, 60 * SEC, NULL));
	}
	const struct pd_series *b = find(&s, "search", NULL);
	assert_int_equal(b->npoints, 2);
	assert_int_equal(b->points[1].t_ns, T0 + 120 * SEC);
	assert_int_equal(b->points[1].value, expect("search", T0 + 120 * SEC, 60 * SEC, NULL));
	assert_true(s.v[0].sum >= s.v[1].sum); /* ranked */
	pd_series_set_free(&s);

	/* per function: a function absent from a step with profiles is 0 there */
	struct pd_selector h;
	spec.re = compile("auth\\.f[0-4]|search\\.f0", &h);
	spec.by_function = true;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	for (size_t i = 0; i < s.n; i++) {
		const struct pd_series *x = &s.v[i];
		assert_non_null(x->function);
		assert_int_equal(x->npoints, !strcmp(x->labels[0], "auth") ? 3 : 2);
		for (size_t k = 0; k < x->npoints; k++)
			assert_int_equal(x->points[k].value, expect(x->labels[0], x->points[k].t_ns, 60 * SEC, x->function));
	}
	size_t all = s.n;
	pd_series_set_free(&s);
	/* top 2 overall, top 1 per group (+ the totals) */
	spec.top = 2;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.matched, all);
	pd_series_set_free(&s);
	spec.top = 1;
	spec.top_per_group = true;
	spec.with_total = true;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	assert_int_equal(s.n, 4); /* 2 totals + 1 function per service */
	pd_series_set_free(&s);
	/* the series cap */
	spec.top = 0;
	spec.top_per_group = false;
	spec.with_total = false;
	spec.max_series = 2;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "over the limit of 2 series per query"));
	spec.max_series = 0;
	/* the points cap */
	spec.step_ns = SEC;
	spec.to_ns = T0 + 20000 * SEC;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "over the limit of 11000 points per series"));
	spec.to_ns = T0 + 3600 * SEC;
	spec.step_ns = 60 * SEC;
	/* a sample index the profiles do not have */
	spec.sample_index = "alloc_space";
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "bad \"sample_index\" \"alloc_space\": the cpu profiles have sample types"));
	spec.sample_index = "samples";
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	assert_string_equal(s.v[0].sample_type, "samples");
	assert_string_equal(s.v[0].unit, "count");
	pd_series_set_free(&s);
	spec.sample_index = NULL;

	/* by a label: versions split auth */
	const char *by2[] = {"service", "version"};
	spec.by = by2;
	spec.nby = 2;
	spec.re = NULL;
	spec.by_function = false;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &s, &err), 0);
	assert_int_equal(s.n, 3);
	size_t v11 = 0;
	for (size_t i = 0; i < s.n; i++)
		if (!strcmp(s.v[i].labels[1], "1.1")) {
			v11++;
			assert_int_equal(s.v[i].npoints, 1);
			assert_int_equal(s.v[i].points[0].t_ns, T0 + 180 * SEC);
		}
	assert_int_equal(v11, 1);

	/* the text forms, line by line */
	struct pd_buf pb = PD_BUF_INIT(0), ib = PD_BUF_INIT(0);
	assert_int_equal(pd_series_prometheus(&s, &spec, &pb), 0);
	assert_int_equal(pd_series_influx(&s, &spec, &ib), 0);
	assert_int_equal(pd_buf_append(&pb, "", 1), 0);
	assert_int_equal(pd_buf_append(&ib, "", 1), 0);
	const char *pt = (const char *)pb.ptr, *it = (const char *)ib.ptr;
	assert_non_null(strstr(pt, "# HELP profd_profile_value "));
	assert_non_null(strstr(pt, "\n# TYPE profd_profile_value gauge\n"));
	char want[300];
	snprintf(want, sizeof want,
		 "\nprofd_profile_value{service=\"auth\",version=\"1.1\",type=\"cpu\",sample_type=\"cpu\","
		 "unit=\"nanoseconds\"} %lld %lld\n",
		 (long long)expect("auth", T0 + 180 * SEC, 60 * SEC, NULL), (long long)((T0 + 180 * SEC) / 1000000));
	if (!strstr(pt, want))
		fail_msg("no line %s in %s", want, pt);
	snprintf(want, sizeof want,
		 "profd_profile,sample_type=cpu,service=auth,type=cpu,unit=nanoseconds,version=1.1 value=%lldi %lld\n",
		 (long long)expect("auth", T0 + 180 * SEC, 60 * SEC, NULL), (long long)(T0 + 180 * SEC));
	if (!strstr(it, want))
		fail_msg("no line %s in %s", want, it);
	size_t lines = 0, pts = 0;
	for (const char *c = it; *c; c++)
		lines += *c == '\n';
	for (size_t i = 0; i < s.n; i++)
		pts += s.v[i].npoints;
	assert_int_equal(lines, pts);
	pd_buf_free(&pb);
	pd_buf_free(&ib);
	pd_series_set_free(&s);

	/* no profiles: no series */
	assert_int_equal(pd_series_compute(st, v, 0, &spec, &s, &err), 0);
	assert_int_equal(s.n, 0);
	pd_series_set_free(&s);
	pd_selector_free(&h);
	pd_query_metas_free(v, n);
	pd_store_close(st);
}

/* ---- the range path ------------------------------------------------------------------ */

#define HOUR (3600 * SEC)

static void same_sets(const struct pd_series_set *a, const struct pd_series_set *b, size_t nby)
{
	assert_int_equal(a->n, b->n);
	assert_int_equal(a->matched, b->matched);
	assert_int_equal(a->profiles, b->profiles);
	assert_int_equal(a->norm.on, b->norm.on);
	assert_int_equal(a->norm.kinds, b->norm.kinds);
	assert_int_equal(a->norm.profiles, b->norm.profiles);
	assert_int_equal(a->norm.sources, b->norm.sources);
	for (size_t i = 0; i < a->n; i++) {
		const struct pd_series *x = &a->v[i], *y = &b->v[i];
		for (size_t k = 0; k < nby; k++)
			assert_string_equal(x->labels[k], y->labels[k]);
		assert_string_equal(x->type, y->type);
		assert_true(!x->function == !y->function);
		if (x->function)
			assert_string_equal(x->function, y->function);
		assert_string_equal(x->sample_type, y->sample_type);
		assert_string_equal(x->unit, y->unit);
		assert_int_equal(x->profiles, y->profiles);
		assert_int_equal(x->sum, y->sum);
		assert_int_equal(x->npoints, y->npoints);
		for (size_t k = 0; k < x->npoints; k++) {
			assert_int_equal(x->points[k].t_ns, y->points[k].t_ns);
			assert_int_equal(x->points[k].value, y->points[k].value);
			assert_true(x->points[k].cores == y->points[k].cores);
		}
	}
}

/* The range path's answer = the selection path's; its "rollups" = want. */
static void range_vs_select(struct pd_store *st, const char *selector, const struct pd_series_spec *spec, bool want)
{
	struct pd_selector sel;
	struct pd_series_set a, b;
	struct pd_profile_meta *v;
	size_t n;
	bool done;
	struct pd_err err;
	assert_int_equal(pd_selector_parse(selector, &sel, &err), 0);
	assert_true(pd_series_range_ok(&sel, spec));
	if (pd_series_compute_range(st, &sel, spec, 0, &a, &done, &err))
		fail_msg("range path: %s", err.msg);
	assert_true(done);
	assert_int_equal(a.rollups, want);
	assert_true(a.n > 0);
	assert_int_equal(pd_query_select(st, &sel, spec->from_ns, spec->to_ns, 0, &v, &n, &err), 0);
	if (pd_series_compute(st, v, n, spec, &b, &err))
		fail_msg("selection path: %s", err.msg);
	same_sets(&a, &b, spec->nby);
	pd_series_set_free(&a);
	pd_series_set_free(&b);
	pd_query_metas_free(v, n);
	pd_selector_free(&sel);
}

static void ingest_at(struct pd_store *st, const char *svc, const char *type, const char *inst, bool cumulative,
		      int64_t t, int seed)
{
	struct pd_kv kv[] = {{"cumulative", "true"}, {"instance", (char *)inst}};
	struct pd_ingest in = {.service = svc, .type = type, .labels = cumulative ? kv : kv + 1, .nlabels = cumulative ? 2 : 1, .created_ns = t, .min_created_ns = 0};
	struct pd_buf b = make_profile(svc, !strcmp(type, "allocs"), seed);
	struct pd_profile_meta m;
	struct pd_err err;
	if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
		fail_msg("ingest: %s", err.msg);
	pd_meta_clear(&m);
	pd_buf_free(&b);
}

static void test_series_range(void **state)
{
	(void)state;
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	/* hours 0-2 rolled up, hour 3 not: per service two instances, 3 profiles an hour */
	static const char *const svcs[] = {"auth", "search"};
	int seed = 1;
	for (int h = 0; h < 4; h++)
		for (size_t i = 0; i < 2; i++)
			for (int k = 0; k < 3; k++)
				ingest_at(st, svcs[i], "cpu", k % 2 ? "a" : "b", false,
					  T0 + h * HOUR + (5 + 20 * k + (int)i) * 60 * SEC, seed++);
	size_t built;
	assert_int_equal(pd_store_rollup(st, T0 + 3 * HOUR, 0, &built, &err), 0);
	assert_int_equal(built, 6);

	const char *by[] = {"service"};
	struct pd_selector h1, h2, h3;
	struct pd_series_spec spec = {0};
	spec.from_ns = T0;
	spec.to_ns = T0 + 4 * HOUR;
	spec.step_ns = HOUR;
	spec.by = by;
	spec.nby = 1;
	spec.normalize = true;
	range_vs_select(st, "cpu", &spec, true); /* totals by service */
	spec.by_function = true;
	spec.re = compile("auth\\.f[0-4]|search\\.f.|runtime\\.x", &h1);
	range_vs_select(st, "cpu", &spec, true);
	spec.with_total = true;
	range_vs_select(st, "cpu{service=~\"a.*\"}", &spec, true);
	spec.with_total = false;
	spec.by_function = false; /* summed: several functions match (merged), one (from the tables) */
	range_vs_select(st, "cpu", &spec, true);
	spec.cum = true;
	range_vs_select(st, "cpu", &spec, true);
	spec.re = compile("main\\.main", &h2);
	range_vs_select(st, "cpu", &spec, true);
	spec.re = compile("search\\.f1", &h3);
	range_vs_select(st, "cpu", &spec, true);
	spec.cum = false;
	spec.nby = 0; /* the fleet: every function, the total */
	spec.re = NULL;
	spec.by_function = true;
	range_vs_select(st, "cpu", &spec, true);
	spec.by_function = false;
	range_vs_select(st, "cpu", &spec, true);
	spec.nby = 1;
	/* partial hours at the edges, steps of 2h and 90m, hours without a rollup */
	spec.re = h1.m[0].has_re ? h1.m[0].re : NULL;
	spec.by_function = true;
	spec.from_ns = T0 + 30 * 60 * SEC;
	spec.to_ns = T0 + 3 * HOUR + 50 * 60 * SEC;
	range_vs_select(st, "cpu", &spec, true);
	spec.step_ns = 2 * HOUR;
	range_vs_select(st, "cpu", &spec, true);
	spec.step_ns = 90 * 60 * SEC;
	range_vs_select(st, "cpu", &spec, true);
	spec.step_ns = HOUR;
	spec.from_ns = T0 + 3 * HOUR; /* no rollup at all */
	spec.to_ns = T0 + 4 * HOUR;
	range_vs_select(st, "cpu", &spec, false);
	spec.from_ns = T0;
	/* sample_index, cores, normalize=false */
	spec.sample_index = "samples";
	range_vs_select(st, "cpu", &spec, true);
	spec.sample_index = "0";
	range_vs_select(st, "cpu", &spec, true);
	spec.sample_index = NULL;
	spec.cores = true;
	range_vs_select(st, "cpu", &spec, true);
	spec.cores = false;
	spec.normalize = false;
	range_vs_select(st, "cpu", &spec, true);
	spec.normalize = true;
	/* a late profile: hour 1's rollup is stale, its profiles are read */
	ingest_at(st, "auth", "cpu", "c", false, T0 + HOUR + 59 * 60 * SEC, seed++);
	range_vs_select(st, "cpu", &spec, true);
	/* the cap on profiles merged from their blocks */
	struct pd_selector sel;
	struct pd_series_set s;
	bool done;
	assert_int_equal(pd_selector_parse("cpu", &sel, &err), 0);
	assert_int_equal(pd_series_compute_range(st, &sel, &spec, 3, &s, &done, &err), PD_ELIMIT);
	assert_non_null(strstr(err.msg, "--max-merge-profiles"));
	assert_int_equal(pd_series_compute_range(st, &sel, &spec, 100, &s, &done, &err), 0);
	assert_true(done && s.rollups);
	assert_int_equal(s.raw, 10); /* auth's stale hour 1 (3 + the late one), hour 3 (3 + 3) */
	pd_series_set_free(&s);
	/* what it does not answer */
	spec.step_ns = 30 * 60 * SEC;
	assert_false(pd_series_range_ok(&sel, &spec));
	assert_int_equal(pd_series_compute_range(st, &sel, &spec, 0, &s, &done, &err), 0);
	assert_false(done);
	assert_null(s.v);
	spec.step_ns = HOUR;
	const char *by2[] = {"instance"};
	spec.by = by2;
	assert_false(pd_series_range_ok(&sel, &spec));
	spec.by = by;
	pd_selector_free(&sel);
	assert_int_equal(pd_selector_parse("cpu{instance=\"a\"}", &sel, &err), 0);
	assert_false(pd_series_range_ok(&sel, &spec));
	pd_selector_free(&sel);
	assert_int_equal(pd_selector_parse("heap", &sel, &err), 0);
	assert_false(pd_series_range_ok(&sel, &spec));
	spec.normalize = false;
	assert_true(pd_series_range_ok(&sel, &spec));
	spec.normalize = true;
	pd_selector_free(&sel);
	/* cumulative=true snapshots: normalised per source, so the selection path */
	ingest_at(st, "auth", "allocs", "a", true, T0 + 10 * 60 * SEC, seed++);
	ingest_at(st, "auth", "allocs", "a", true, T0 + 70 * 60 * SEC, seed++);
	assert_int_equal(pd_selector_parse("allocs", &sel, &err), 0);
	spec.re = NULL;
	spec.by_function = false;
	assert_true(pd_series_range_ok(&sel, &spec));
	assert_int_equal(pd_series_compute_range(st, &sel, &spec, 0, &s, &done, &err), 0);
	assert_false(done);
	pd_selector_free(&sel);
	spec.normalize = false; /* summed as they are: the range path */
	range_vs_select(st, "allocs", &spec, false);
	pd_selector_free(&h1);
	pd_selector_free(&h2);
	pd_selector_free(&h3);
	pd_store_close(st);
}

/* The exporter's window: per service the total and the top functions. */
static void test_export_window(void **state)
{
	(void)state;
	struct pd_store *st = store_with_profiles();
	struct pd_selector sel;
	struct pd_err err;
	assert_int_equal(pd_selector_parse("cpu", &sel, &err), 0);
	struct pd_buf b = PD_BUF_INIT(0);
	size_t lines;
	assert_int_equal(pd_export_window(st, &sel, T0, 60 * SEC, 3, 0, &b, &lines, &err), 0);
	assert_int_equal(lines, 2 + 3 + 3); /* auth and search: a total and 3 functions each */
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	char want[200];
	snprintf(want, sizeof want, "profd_profile,sample_type=cpu,service=auth,type=cpu,unit=nanoseconds value=%lldi %lld\n",
		 (long long)expect("auth", T0, 60 * SEC, NULL), (long long)T0);
	if (!strstr((const char *)b.ptr, want))
		fail_msg("no line %s in %s", want, (const char *)b.ptr);
	pd_buf_free(&b);
	/* an empty window: nothing */
	assert_int_equal(pd_export_window(st, &sel, T0 + 600 * SEC, 60 * SEC, 3, 0, &b, &lines, &err), 0);
	assert_int_equal(lines, 0);
	assert_int_equal(b.len, 0);
	/* the selection cap */
	assert_int_equal(pd_export_window(st, &sel, T0, 60 * SEC, 3, 2, &b, &lines, &err), PD_ELIMIT);
	pd_buf_free(&b);
	pd_selector_free(&sel);
	pd_store_close(st);
	/* configuration checks */
	struct pd_export_config c;
	pd_export_config_default(&c);
	c.url = "ftp://x";
	assert_int_equal(pd_export_check(&c, &err), PD_EUSAGE);
	c.url = "http://influx:8086/api/v2/write?org=o&bucket=b";
	assert_int_equal(pd_export_check(&c, &err), 0);
	c.every_ns = SEC / 2;
	assert_int_equal(pd_export_check(&c, &err), PD_EUSAGE);
	c.every_ns = 60 * SEC;
	c.query = "cpu{";
	assert_int_equal(pd_export_check(&c, &err), PD_EUSAGE);
	assert_non_null(strstr(err.msg, "--export-query"));
}

/* A cpu profile of samples/count only (a cpu period, but no CPU time: another producer's, or a
 * hostile client's), ingested for svc at t with label instance=inst. */
static void ingest_samples_only(struct pd_store *st, const char *svc, const char *inst, int64_t t)
{
	char names[TU_APP_NFN][64];
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "samples", "count");
	pb_period_type(&p, "cpu", "nanoseconds", 10000000);
	tu_app_functions(&p, svc, names);
	uint64_t locs[] = {3, 1};
	int64_t vals[] = {7};
	pb_sample(&p, locs, 2, vals, 1, NULL, 0);
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 1, &b, &err), 0);
	pd_profile_free(q);
	pb_free(&p);
	struct pd_kv kv[] = {{"instance", (char *)inst}};
	struct pd_ingest in = {.service = svc, .type = "cpu", .labels = kv, .nlabels = 1, .created_ns = t};
	struct pd_profile_meta m;
	if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
		fail_msg("ingest: %s", err.msg);
	pd_meta_clear(&m);
	pd_buf_free(&b);
}

/* The exporters' window (/metrics/profiles, --export-influx): a service whose
 * profiles cannot give its series (cpu not in nanoseconds for cores, sample
 * types that differ) is left out and said why; the other services answer. */
static void test_window_skips_bad_groups(void **state)
{
	(void)state;
	struct pd_store *st = store_with_profiles();
	ingest_at(st, "odd", "cpu", "a", false, T0 + 30 * SEC, 9); /* cpu/nanoseconds... */
	ingest_samples_only(st, "odd", "b", T0 + 40 * SEC);        /* ...and samples/count: no merge */
	ingest_samples_only(st, "odd2", "a", T0 + 40 * SEC);       /* no cores */
	struct pd_profile_meta *v;
	size_t n;
	select_all(st, &v, &n);
	struct pd_series_spec spec;
	pd_series_spec_window(&spec, T0, 60 * SEC, 3);
	struct pd_series_set set;
	struct pd_err err;
	for (int cores = 0; cores < 2; cores++) {
		spec.cores = cores;
		assert_int_equal(pd_series_compute(st, v, n, &spec, &set, &err), 0);
		assert_int_equal(set.skipped, 1 + cores); /* odd2 alone has one sample type: cores only */
		assert_non_null(set.skipped_why);
		assert_non_null(strstr(set.skipped_why, "cpu{service=\"odd"));
		assert_int_equal(find(&set, "auth", NULL)->points[0].value, expect("auth", T0, 60 * SEC, NULL));
		assert_non_null(find(&set, "search", NULL));
		for (size_t i = 0; i < set.n; i++)
			assert_true(strcmp(set.v[i].labels[0], "odd") && (!cores || strcmp(set.v[i].labels[0], "odd2")));
		pd_series_set_free(&set);
	}
	/* without skip_bad_groups (/api/1/series): the answer fails, saying why */
	spec.skip_bad_groups = false;
	assert_int_equal(pd_series_compute(st, v, n, &spec, &set, &err), PD_EINCOMPAT);
	assert_non_null(strstr(err.msg, "incompatible profiles"));
	pd_query_metas_free(v, n);
	/* the InfluxDB exporter: the other services pushed, the one left out in err */
	struct pd_selector sel;
	assert_int_equal(pd_selector_parse("cpu", &sel, &err), 0);
	struct pd_buf b = PD_BUF_INIT(0);
	size_t lines;
	assert_int_equal(pd_export_window(st, &sel, T0, 60 * SEC, 3, 0, &b, &lines, &err), 0);
	assert_int_equal(lines, 2 + 3 + 3 + 1 + 2); /* auth, search; odd2 (samples/count: odd2.f0, main.main) */
	assert_non_null(strstr(err.msg, "1 series group(s) left out: cpu{service=\"odd\"}"));
	pd_buf_free(&b);
	pd_selector_free(&sel);
	pd_store_close(st);
}

/* ---- diff ------------------------------------------------------------------------------ */

static int64_t top_of(const struct pd_top *t, const char *fn, bool cum)
{
	for (size_t i = 0; i < t->n; i++)
		if (pd_str_eq(t->rows[i].name, fn))
			return cum ? t->rows[i].cum : t->rows[i].flat;
	return 0;
}

/* A profile whose every sample has the value v (both sample types). */
static struct pd_profile *const_profile(int64_t v)
{
	char names[TU_APP_NFN][64];
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, false);
	tu_app_functions(&p, "w", names);
	for (uint64_t l = 3; l <= 4; l++) {
		uint64_t locs[2] = {l, 1};
		int64_t vals[2] = {v, v};
		pb_sample(&p, locs, 2, vals, 2, NULL, 0);
	}
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	pb_free(&p);
	return q;
}

/* A base of INT64_MIN values is negated as Go negates them (-INT64_MIN
 * wraps to itself; undefined behaviour in C, so SANITIZE=1 aborts on a
 * plain minus), and the diff's sums wrap the same way. */
static void test_diff_extreme_values(void **state)
{
	(void)state;
	struct pd_profile *base = const_profile(INT64_MIN), *target = const_profile(INT64_MAX);
	struct pd_profile *d;
	struct pd_err err;
	assert_int_equal(pd_diff_profile(base, target, false, &d, &err), 0);
	struct pd_diff_top dt;
	assert_int_equal(pd_diff_top(d, 1, false, &dt, &err), 0);
	assert_int_equal(dt.base_total, 0);   /* 2 x INT64_MIN wraps to 0 */
	assert_int_equal(dt.target_total, -2); /* 2 x INT64_MAX wraps to -2 */
	bool seen = false;
	for (size_t i = 0; i < dt.n; i++)
		if (pd_str_eq(dt.rows[i].name, "w.f0")) {
			seen = true;
			assert_int_equal(dt.rows[i].base_flat, INT64_MIN);
			assert_int_equal(dt.rows[i].target_flat, INT64_MAX);
			assert_int_equal(dt.rows[i].flat, -1); /* INT64_MAX - INT64_MIN, wrapped */
		}
	assert_true(seen);
	pd_diff_top_free(&dt);
	struct pd_diff_flame df;
	assert_int_equal(pd_diff_flame(d, 1, 6, &df, &err), 0);
	assert_int_equal(df.base[0], 0);
	assert_int_equal(df.target[0], -2);
	pd_diff_flame_free(&df);
	pd_profile_free(d);
	pd_profile_free(base);
	pd_profile_free(target);
}

static void test_diff(void **state)
{
	(void)state;
	struct pd_profile *base = decode_buf(make_profile("a", false, 1));
	struct pd_profile *target = decode_buf(make_profile("a", false, 2));
	struct pd_profile *d;
	struct pd_err err;
	assert_int_equal(pd_diff_profile(base, target, false, &d, &err), 0);
	struct pd_top tb, tt;
	assert_int_equal(pd_top_compute(base, 1, false, &tb, &err), 0);
	assert_int_equal(pd_top_compute(target, 1, false, &tt, &err), 0);
	struct pd_diff_top dt;
	assert_int_equal(pd_diff_top(d, 1, false, &dt, &err), 0);
	assert_int_equal(dt.base_total, tb.total);
	assert_int_equal(dt.target_total, tt.total);
	assert_int_equal(dt.total, tb.total); /* pprof's 100%: the base */
	assert_int_equal(dt.top.total, tb.total);
	for (size_t i = 0; i < dt.n; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "%.*s", (int)dt.rows[i].name.len, dt.rows[i].name.ptr);
		assert_int_equal(dt.rows[i].base_flat, top_of(&tb, nm, false));
		assert_int_equal(dt.rows[i].target_cum, top_of(&tt, nm, true));
		assert_int_equal(dt.rows[i].flat, dt.rows[i].target_flat - dt.rows[i].base_flat);
		assert_int_equal(dt.rows[i].cum, dt.rows[i].target_cum - dt.rows[i].base_cum);
		assert_true(dt.rows[i].flat || dt.rows[i].cum); /* unchanged functions left out */
		assert_true(pd_str_eq(dt.top.rows[i].name, nm));
		if (i)
			assert_true(llabs(dt.rows[i - 1].flat) >= llabs(dt.rows[i].flat));
	}
	/* every base sample is labelled and negated */
	struct pd_diff_marks mk;
	pd_diff_marks(d, &mk);
	assert_int_not_equal(mk.key, PD_NONE);
	int64_t bsum = 0, tsum = 0;
	for (size_t i = 0; i < d->nsamples; i++) {
		if (pd_diff_is_base(&mk, &d->samples[i]))
			bsum += d->samples[i].values[1];
		else
			tsum += d->samples[i].values[1];
	}
	assert_int_equal(bsum, -tb.total);
	assert_int_equal(tsum, tt.total);
	/* the flame graph of the deltas, base and target beside */
	struct pd_diff_flame df;
	assert_int_equal(pd_diff_flame(d, 1, 6, &df, &err), 0);
	assert_int_equal(df.base[0], tb.total);
	assert_int_equal(df.target[0], tt.total);
	for (size_t i = 0; i < df.f.n; i++) {
		const struct pd_flame_node *x = &df.f.v[i];
		int64_t sb = df.base_self[i], st2 = df.target_self[i];
		for (uint32_t k = 0; k < x->nkids; k++) {
			sb += df.base[df.f.kids[x->kids + k]];
			st2 += df.target[df.f.kids[x->kids + k]];
		}
		assert_int_equal(sb, df.base[i]);
		assert_int_equal(st2, df.target[i]);
		assert_int_equal(x->value, df.target[i] - df.base[i]);
	}
	pd_diff_flame_free(&df);
	pd_diff_top_free(&dt);
	pd_profile_free(d);
	/* normalize: the target scaled to the base's total (each sample rounded) */
	assert_int_equal(pd_diff_profile(base, target, true, &d, &err), 0);
	assert_int_equal(pd_diff_top(d, 1, false, &dt, &err), 0);
	assert_true(llabs(dt.target_total - tb.total) <= (int64_t)target->nsamples);
	pd_diff_top_free(&dt);
	pd_profile_free(d);
	/* a profile against itself: nothing changed */
	assert_int_equal(pd_diff_profile(base, base, false, &d, &err), 0);
	assert_int_equal(pd_diff_top(d, 1, false, &dt, &err), 0);
	assert_int_equal(dt.n, 0);
	pd_diff_top_free(&dt);
	pd_profile_free(d);
	/* different sample types */
	struct pd_profile *heap = decode_buf(make_profile("a", true, 1));
	heap->sample_types[0] = heap->sample_types[1]; /* 2 types still, other names */
	assert_int_equal(pd_diff_profile(heap, target, false, &d, &err), PD_EINCOMPAT);
	assert_null(d);
	pd_profile_free(heap);
	pd_top_free(&tb);
	pd_top_free(&tt);
	pd_profile_free(base);
	pd_profile_free(target);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_math),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_label_names),
		cmocka_unit_test(test_series_step),
		cmocka_unit_test(test_compile_re),
		cmocka_unit_test_setup_teardown(test_series_compute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_series_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_window_skips_bad_groups, setup, teardown),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_diff_extreme_values),
	};
	return cmocka_run_group_tests_name("series", tests, NULL, NULL);
}
