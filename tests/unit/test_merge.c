/*
 * test_merge.c — pprof's profile.Merge semantics (lib/pprof/merge.c), one rule
 * per test, on profiles written by hand with testutil.h; the aggregation
 * core (agg.h); and the report views (report.h: top, folded).
 */
#include "testutil.h"
#include "../../lib/pprof/agg.h"
#include "../../lib/pprof/report.h"

#include <inttypes.h>

/* ---- a simple CPU profile builder: one location per function ---------------- */

#define SP_MAX_FN 64

struct sp {
	struct pb pb;
	char *fn[SP_MAX_FN]; /* function i+1 / location i+1 */
	size_t nfn;
};

static void sp_init(struct sp *s, int64_t period)
{
	pb_init(&s->pb);
	s->nfn = 0;
	pb_cpu_header(&s->pb, period);
}

static void sp_free(struct sp *s)
{
	for (size_t i = 0; i < s->nfn; i++)
		free(s->fn[i]);
	pb_free(&s->pb);
}

/* Location id of the function named name (created on first use). */
static uint64_t sp_loc(struct sp *s, const char *name, size_t len)
{
	for (size_t i = 0; i < s->nfn; i++)
		if (strlen(s->fn[i]) == len && memcmp(s->fn[i], name, len) == 0)
			return i + 1;
	assert_true(s->nfn < SP_MAX_FN);
	char *c = malloc(len + 1);
	assert_non_null(c);
	memcpy(c, name, len);
	c[len] = 0;
	s->fn[s->nfn++] = c;
	uint64_t id = s->nfn;
	pb_function(&s->pb, id, c, "main.go", 0);
	pb_location1(&s->pb, id, 0, 0, id, 1); /* same key in every profile */
	return id;
}

/* Sample on "leaf;...;root" with values v0, v1. */
static void sp_sample(struct sp *s, const char *stack, int64_t v0, int64_t v1, const struct pb_label *l, size_t nl)
{
	uint64_t locs[32];
	size_t n = 0;
	for (const char *p = stack; *p;) {
		const char *e = strchr(p, ';');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		assert_true(n < 32);
		locs[n++] = sp_loc(s, p, len);
		p += len + (e ? 1 : 0);
	}
	int64_t vals[2] = {v0, v1};
	pb_sample(&s->pb, locs, n, vals, 2, l, nl);
}

static struct pd_profile *sp_decode(struct sp *s)
{
	struct pd_profile *p = pb_decode(&s->pb);
	sp_free(s);
	return p;
}

/* One-sample CPU profile on stack with values (v, v) and labels. */
static struct pd_profile *sp1(const char *stack, int64_t v, const struct pb_label *l, size_t nl)
{
	struct sp s;
	sp_init(&s, 10000000);
	sp_sample(&s, stack, v, v, l, nl);
	return sp_decode(&s);
}

/* ---- checking merged profiles ----------------------------------------------------- */

/* Frames of a sample, leaf first, ';'-separated; then labels; then values. */
static void describe_sample(const struct pd_profile *p, const struct pd_sample *s, char *buf, size_t n)
{
	size_t o = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < n ? n - o : 0, __VA_ARGS__)
	bool first = true;
	for (uint32_t k = 0; k < s->nlocs; k++) {
		const struct pd_location *l = &p->locations[s->locs[k]];
		if (l->nlines == 0) {
			PUT("%s0x%" PRIx64, first ? "" : ";", l->address);
			first = false;
		}
		for (uint32_t j = 0; j < l->nlines; j++) {
			PUT("%s%s", first ? "" : ";", tu_str(p, p->functions[l->lines[j].function].name));
			first = false;
		}
	}
	if (s->nlabels) {
		PUT(" {");
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pd_label *lb = &s->labels[j];
			if (lb->str)
				PUT("%s%s=%s", j ? "," : "", tu_str(p, lb->key), tu_str(p, lb->str));
			else
				PUT("%s%s=%" PRId64 "%s%s", j ? "," : "", tu_str(p, lb->key), lb->num,
				    lb->num_unit ? " " : "", tu_str(p, lb->num_unit));
		}
		PUT("}");
	}
	for (uint32_t j = 0; j < p->nsample_types; j++)
		PUT(" %" PRId64, s->values[j]);
	PUT("\n");
#undef PUT
	assert_true(o < n);
}

static char describe_buf[16384];

/* All samples, one line each, in order. */
static const char *describe(const struct pd_profile *p)
{
	size_t o = 0;
	describe_buf[0] = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		describe_sample(p, &p->samples[i], describe_buf + o, sizeof describe_buf - o);
		o += strlen(describe_buf + o);
	}
	return describe_buf;
}

/* A merged profile must be valid on its own: dense ids 1..n, references in
 * range, "" first, strings unique, and it must survive encode -> decode. */
static void check_merged(const struct pd_profile *p)
{
	assert_true(p->nstrings >= 1);
	assert_int_equal(p->strings[0].len, 0);
	for (uint32_t i = 0; i < p->nstrings; i++)
		for (uint32_t j = i + 1; j < p->nstrings; j++)
			assert_false(p->strings[i].len == p->strings[j].len &&
				     (p->strings[i].len == 0 || memcmp(p->strings[i].ptr, p->strings[j].ptr, p->strings[i].len) == 0));
	for (uint32_t i = 0; i < p->nmappings; i++) {
		assert_int_equal(p->mappings[i].id, i + 1);
		assert_true(p->mappings[i].filename < p->nstrings);
	}
	for (uint32_t i = 0; i < p->nfunctions; i++) {
		assert_int_equal(p->functions[i].id, i + 1);
		assert_true(p->functions[i].name < p->nstrings);
	}
	for (uint32_t i = 0; i < p->nlocations; i++) {
		const struct pd_location *l = &p->locations[i];
		assert_int_equal(l->id, i + 1);
		assert_true(l->mapping == PD_NONE || l->mapping < p->nmappings);
		for (uint32_t j = 0; j < l->nlines; j++)
			assert_true(l->lines[j].function < p->nfunctions);
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		bool zero = true;
		for (uint32_t j = 0; j < p->nsample_types; j++)
			zero = zero && s->values[j] == 0;
		assert_false(zero);
		for (uint32_t j = 0; j < s->nlocs; j++)
			assert_true(s->locs[j] < p->nlocations);
		for (uint32_t j = 0; j < s->nlabels; j++)
			assert_true(s->labels[j].key < p->nstrings && s->labels[j].str < p->nstrings &&
				    s->labels[j].num_unit < p->nstrings);
	}
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(p, 0, &out, &err), 0);
	struct pd_profile *q = tu_decode_lim(out.ptr, out.len, NULL);
	tu_assert_profiles_equal(p, q);
	pd_profile_free(q);
	pd_buf_free(&out);
}

static bool has_string(const struct pd_profile *p, const char *s)
{
	for (uint32_t i = 0; i < p->nstrings; i++)
		if (pd_str_eq(p->strings[i], s))
			return true;
	return false;
}

/* Merge n profiles (freeing them), check the result. */
static struct pd_profile *merge_free(struct pd_profile **ps, size_t n)
{
	struct pd_profile *out = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_pprof_merge(ps, n, &out, &err);
	if (rc)
		fail_msg("merge failed (%d): %s", rc, err.msg);
	for (size_t i = 0; i < n; i++)
		pd_profile_free(ps[i]);
	check_merged(out);
	return out;
}

/* ---- samples ------------------------------------------------------------------------ */

static void test_same_stack_and_labels_summed(void **state)
{
	(void)state;
	struct pb_label kv = {"k", "v", 0, NULL};
	struct pd_profile *ps[2];
	ps[0] = sp1("a;main", 1, &kv, 1);
	/* the second profile numbers its functions the other way round */
	struct sp s;
	sp_init(&s, 10000000);
	sp_loc(&s, "main", 4);
	sp_loc(&s, "x", 1);
	sp_sample(&s, "a;main", 2, 20, &kv, 1);
	ps[1] = sp_decode(&s);
	assert_int_equal(ps[1]->functions[0].id, 1);
	struct pd_profile *m = merge_free(ps, 2);
	assert_string_equal(describe(m), "a;main {k=v} 3 21\n");
	assert_int_equal(m->nfunctions, 2);
	assert_int_equal(m->nlocations, 2);
	assert_false(has_string(m, "x"));
	pd_profile_free(m);
}

static void test_different_labels_kept_apart(void **state)
{
	(void)state;
	struct pb_label v1 = {"k", "v1", 0, NULL}, v2 = {"k", "v2", 0, NULL};
	struct pb_label n5b = {"n", NULL, 5, "bytes"}, n5c = {"n", NULL, 5, "count"}, n6b = {"n", NULL, 6, "bytes"};
	struct pd_profile *ps[7] = {
		sp1("a;main", 1, &v1, 1), sp1("a;main", 2, &v2, 1),  sp1("a;main", 4, NULL, 0),
		sp1("a;main", 8, &v1, 1), sp1("a;main", 16, &n5b, 1), sp1("a;main", 32, &n5c, 1),
		sp1("a;main", 64, &n6b, 1),
	};
	struct pd_profile *m = merge_free(ps, 7);
	assert_string_equal(describe(m), "a;main {k=v1} 9 9\n"
					 "a;main {k=v2} 2 2\n"
					 "a;main 4 4\n"
					 "a;main {n=5 bytes} 16 16\n"
					 "a;main {n=5 count} 32 32\n"
					 "a;main {n=6 bytes} 64 64\n");
	assert_int_equal(m->nlocations, 2);
	pd_profile_free(m);
}

static void test_label_order_canonical(void **state)
{
	(void)state;
	struct pb_label l1[] = {{"b", "2", 0, NULL}, {"n", NULL, 5, "bytes"}, {"a", "1", 0, NULL}, {"s", "x", 0, NULL}};
	struct pb_label l2[] = {{"n", NULL, 5, "bytes"}, {"s", "x", 0, NULL}, {"a", "1", 0, NULL}, {"b", "2", 0, NULL}};
	/* several values for one key, not adjacent: same label set */
	struct pb_label l3[] = {{"a", "1", 0, NULL}, {"b", "2", 0, NULL}, {"a", "3", 0, NULL}};
	struct pb_label l4[] = {{"a", "1", 0, NULL}, {"a", "3", 0, NULL}, {"b", "2", 0, NULL}};
	/* values of one key keep their order: a different label set */
	struct pb_label l5[] = {{"a", "3", 0, NULL}, {"a", "1", 0, NULL}, {"b", "2", 0, NULL}};
	struct pd_profile *ps[5] = {
		sp1("f;main", 1, l1, 4), sp1("f;main", 2, l2, 4), sp1("f;main", 4, l3, 3),
		sp1("f;main", 8, l4, 3), sp1("f;main", 16, l5, 3),
	};
	struct pd_profile *m = merge_free(ps, 5);
	assert_string_equal(describe(m), "f;main {a=1,b=2,s=x,n=5 bytes} 3 3\n"
					 "f;main {a=1,a=3,b=2} 12 12\n"
					 "f;main {a=3,a=1,b=2} 16 16\n");
	pd_profile_free(m);
}

static void test_zero_samples_skipped(void **state)
{
	(void)state;
	struct sp s;
	sp_init(&s, 10);
	sp_sample(&s, "z;main", 0, 0, NULL, 0);
	sp_sample(&s, "a;main", 1, 1, NULL, 0);
	sp_sample(&s, "b;main", 0, 7, NULL, 0); /* one non-zero value: kept */
	struct pd_profile *ps[1] = {sp_decode(&s)};
	struct pd_profile *m = merge_free(ps, 1);
	assert_string_equal(describe(m), "a;main 1 1\nb;main 0 7\n");
	assert_int_equal(m->nfunctions, 3);
	assert_int_equal(m->nlocations, 3);
	assert_false(has_string(m, "z"));
	pd_profile_free(m);
}

static void test_zero_sum_dropped_with_entities(void **state)
{
	(void)state;
	struct sp s;
	sp_init(&s, 10);
	sp_sample(&s, "x;y;main", 1, 10, NULL, 0);
	sp_sample(&s, "a;main", 1, 1, NULL, 0);
	struct pd_profile *ps[2];
	ps[0] = sp_decode(&s);
	sp_init(&s, 10);
	sp_sample(&s, "x;y;main", -1, -10, NULL, 0);
	ps[1] = sp_decode(&s);
	struct pd_profile *m = merge_free(ps, 2);
	assert_string_equal(describe(m), "a;main 1 1\n");
	assert_int_equal(m->nsamples, 1);
	assert_int_equal(m->nfunctions, 2);
	assert_int_equal(m->nlocations, 2);
	tu_assert_str(m, m->functions[0].name, "a");
	tu_assert_str(m, m->functions[1].name, "main");
	assert_false(has_string(m, "x"));
	assert_false(has_string(m, "y"));
	pd_profile_free(m);

	/* everything cancels: an empty (but valid) profile */
	ps[0] = sp1("f;main", 3, NULL, 0);
	ps[1] = sp1("f;main", -3, NULL, 0);
	m = merge_free(ps, 2);
	assert_int_equal(m->nsamples, 0);
	assert_int_equal(m->nlocations, 0);
	assert_int_equal(m->nfunctions, 0);
	assert_int_equal(m->nsample_types, 2);
	pd_profile_free(m);
}

/* ---- header -------------------------------------------------------------------------- */

struct hdr {
	int64_t time, duration, period;
	const char *comments[3];
	const char *default_type, *doc_url, *drop, *keep;
};

static struct pd_profile *with_header(const struct hdr *h)
{
	struct sp s;
	sp_init(&s, h->period);
	sp_sample(&s, "f;main", 1, 1, NULL, 0);
	if (h->time)
		tb_int(&s.pb.b, PF_TIME_NANOS, h->time);
	if (h->duration)
		tb_int(&s.pb.b, PF_DURATION_NANOS, h->duration);
	for (int i = 0; i < 3 && h->comments[i]; i++)
		tb_int(&s.pb.b, PF_COMMENT, pb_s(&s.pb, h->comments[i]));
	if (h->default_type)
		tb_int(&s.pb.b, PF_DEFAULT_SAMPLE_TYPE, pb_s(&s.pb, h->default_type));
	if (h->doc_url)
		tb_int(&s.pb.b, PF_DOC_URL, pb_s(&s.pb, h->doc_url));
	if (h->drop)
		tb_int(&s.pb.b, PF_DROP_FRAMES, pb_s(&s.pb, h->drop));
	if (h->keep)
		tb_int(&s.pb.b, PF_KEEP_FRAMES, pb_s(&s.pb, h->keep));
	return sp_decode(&s);
}

static void test_header_combination(void **state)
{
	(void)state;
	struct hdr h[3] = {
		{5, 100, 10, {"c1", "c2", NULL}, NULL, NULL, "d1", "k1"},
		{0, 200, 30, {"c2", "c3", "c2"}, "cpu", "https://u2", "d2", "k2"},
		{7, 300, 20, {"c1", NULL, NULL}, "samples", "https://u3", NULL, NULL},
	};
	struct pd_profile *ps[3] = {with_header(&h[0]), with_header(&h[1]), with_header(&h[2])};
	struct pd_profile *m = merge_free(ps, 3);
	assert_int_equal(m->time_nanos, 5);
	assert_int_equal(m->duration_nanos, 600);
	assert_int_equal(m->period, 30);
	assert_int_equal(m->ncomments, 3);
	tu_assert_str(m, m->comments[0], "c1");
	tu_assert_str(m, m->comments[1], "c2");
	tu_assert_str(m, m->comments[2], "c3");
	tu_assert_str(m, m->default_sample_type, "cpu");
	tu_assert_str(m, m->doc_url, "https://u2");
	tu_assert_str(m, m->drop_frames, "d1");
	tu_assert_str(m, m->keep_frames, "k1");
	tu_assert_str(m, m->period_type.type, "cpu");
	tu_assert_str(m, m->period_type.unit, "nanoseconds");
	assert_int_equal(m->nsamples, 1);
	assert_int_equal(m->samples[0].values[0], 3);
	assert_int_equal(pd_profile_default_index(m), 1);
	pd_profile_free(m);

	/* time: minimum of the non-zero ones, whatever the order */
	static const int64_t times[][3] = {{5, 0, 7}, {0, 7, 5}, {7, 5, 0}, {0, 0, 0}, {9, 0, 0}};
	static const int64_t want[] = {5, 5, 5, 0, 9};
	for (size_t i = 0; i < ARRAY_LEN(times); i++) {
		struct pd_profile *qs[3];
		for (int j = 0; j < 3; j++) {
			struct hdr x = {times[i][j], 0, 10, {NULL, NULL, NULL}, NULL, NULL, NULL, NULL};
			qs[j] = with_header(&x);
		}
		m = merge_free(qs, 3);
		assert_int_equal(m->time_nanos, want[i]);
		pd_profile_free(m);
	}
}

/* ---- compatibility --------------------------------------------------------------------- */

static struct pd_profile *heap_profile(void)
{
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "alloc_objects", "count");
	pb_sample_type(&p, "alloc_space", "bytes");
	pb_period_type(&p, "space", "bytes", 524288);
	pb_function(&p, 1, "f", "f.go", 0);
	pb_location1(&p, 1, 0, 0, 1, 1);
	uint64_t loc = 1;
	int64_t vals[2] = {1, 1};
	pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static struct pd_profile *typed_profile(const char *t0, const char *u0, const char *t1, const char *u1,
					const char *pt, const char *pu)
{
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, t0, u0);
	if (t1)
		pb_sample_type(&p, t1, u1);
	pb_period_type(&p, pt, pu, 1);
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void expect_incompatible(struct pd_profile *a, struct pd_profile *b, const char *w1, const char *w2)
{
	struct pd_merger *m = pd_merger_new();
	assert_non_null(m);
	struct pd_err err = {0, ""};
	assert_int_equal(pd_merger_add(m, a, &err), 0);
	memset(&err, 0, sizeof err);
	int rc = pd_merger_add(m, b, &err);
	if (rc != PD_EINCOMPAT || !strstr(err.msg, w1) || !strstr(err.msg, w2))
		fail_msg("rc %d, message \"%s\", want \"%s\" and \"%s\"", rc, err.msg, w1, w2);
	assert_int_equal(err.code, PD_EINCOMPAT);
	/* the merger is still usable: the failed add changed nothing */
	assert_int_equal(pd_merger_count(m), 1);
	struct pd_profile *out = NULL;
	assert_int_equal(pd_merger_finish(m, &out, &err), 0);
	assert_int_equal(out->nsamples, a->nsamples);
	check_merged(out);
	pd_profile_free(out);
	pd_merger_free(m);
	pd_profile_free(a);
	pd_profile_free(b);
}

static void test_incompatible_types(void **state)
{
	(void)state;
	expect_incompatible(sp1("f;main", 1, NULL, 0), heap_profile(),
			    "[samples/count cpu/nanoseconds] period cpu/nanoseconds",
			    "[alloc_objects/count alloc_space/bytes] period space/bytes");
	/* period type only */
	expect_incompatible(sp1("f;main", 1, NULL, 0),
			    typed_profile("samples", "count", "cpu", "nanoseconds", "wall", "nanoseconds"),
			    "period cpu/nanoseconds", "period wall/nanoseconds");
	/* period unit only */
	expect_incompatible(sp1("f;main", 1, NULL, 0),
			    typed_profile("samples", "count", "cpu", "nanoseconds", "cpu", "milliseconds"),
			    "period cpu/nanoseconds", "period cpu/milliseconds");
	/* a sample type's unit */
	expect_incompatible(sp1("f;main", 1, NULL, 0),
			    typed_profile("samples", "count", "cpu", "milliseconds", "cpu", "nanoseconds"),
			    "cpu/nanoseconds]", "cpu/milliseconds]");
	/* fewer sample types */
	expect_incompatible(sp1("f;main", 1, NULL, 0), typed_profile("samples", "count", NULL, NULL, "cpu", "nanoseconds"),
			    "[samples/count cpu/nanoseconds]", "[samples/count]");
	/* same types in another order */
	expect_incompatible(sp1("f;main", 1, NULL, 0),
			    typed_profile("cpu", "nanoseconds", "samples", "count", "cpu", "nanoseconds"),
			    "[samples/count cpu/nanoseconds]", "[cpu/nanoseconds samples/count]");
	/* a different period value is fine (max is taken) */
	struct pd_profile *ps[2] = {sp1("f;main", 1, NULL, 0), NULL};
	struct sp s;
	sp_init(&s, 99999999);
	sp_sample(&s, "f;main", 1, 1, NULL, 0);
	ps[1] = sp_decode(&s);
	struct pd_profile *m = merge_free(ps, 2);
	assert_int_equal(m->period, 99999999);
	pd_profile_free(m);
}

/* ---- entity keys ---------------------------------------------------------------------- */

static struct pd_profile *fn_profile(const char *name, const char *sys, const char *file, int64_t start_line,
				     int64_t line)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	tb_function(&p.b, 1, pb_s(&p, name), pb_s(&p, sys), pb_s(&p, file), start_line);
	pb_location1(&p, 1, 0, 0, 1, line);
	uint64_t loc = 1;
	int64_t vals[2] = {1, 1};
	pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void test_function_key(void **state)
{
	(void)state;
	struct pd_profile *ps[6] = {
		fn_profile("f", NULL, "a.go", 0, 1),
		fn_profile("f", NULL, "b.go", 0, 1),    /* other file: another function */
		fn_profile("f", NULL, "a.go", 5, 1),    /* other start line */
		fn_profile("f", "f_sys", "a.go", 0, 1), /* other system name */
		fn_profile("f", NULL, "a.go", 0, 1),    /* same as the first */
		fn_profile("f", NULL, "a.go", 0, 2),    /* same function, other line: another location */
	};
	struct pd_profile *m = merge_free(ps, 6);
	assert_int_equal(m->nfunctions, 4);
	assert_int_equal(m->nlocations, 5);
	assert_int_equal(m->nsamples, 5);
	assert_int_equal(m->samples[0].values[0], 2);
	tu_assert_str(m, m->functions[1].filename, "b.go");
	assert_int_equal(m->functions[2].start_line, 5);
	tu_assert_str(m, m->functions[3].system_name, "f_sys");
	assert_int_equal(m->locations[4].lines[0].function, 0);
	assert_int_equal(m->locations[4].lines[0].line, 2);
	pd_profile_free(m);
}

/* The names go tool pprof shows (its symbolizer's Demangle, default mode,
 * Go 1.19): a set name that differs from the system name is kept; else the
 * system name, (...) and <...> removed from what looks like demangled C++;
 * Java's ".<" and Go's "])." are left alone; a close without its open stops
 * the removal where it is. */
static void test_func_name_as_pprof(void **state)
{
	(void)state;
	static const struct {
		const char *name, *sys, *want;
	} c[] = {
		{"", "main.f", "main.f"},
		{"std::vector<int>::push_back(int const&)", "std::vector<int>::push_back(int const&)",
		 "std::vector::push_back"},
		{"", "ns::f(std::map<int, std::pair<a, b> >)", "ns::f"},
		{"foo<int>(int)", "_Z3fooIiEvi", "foo<int>(int)"},
		{"_Z3fooIiEvi", "_Z3fooIiEvi", "_Z3fooIiEvi"},
		{"java.util.Foo.<init>(I)V", "java.util.Foo.<init>(I)V", "java.util.Foo.<init>(I)V"},
		{"pkg.(*T[...]).M", "pkg.(*T[...]).M", "pkg.(*T[...]).M"},
		{"main.Map[...]", "main.Map[...]", "main.Map[...]"},
		{"main.(*T).M", "", "main.(*T).M"},
		{"a::b(c(d)e)f)g", "a::b(c(d)e)f)g", "a::bf)g"},
		{"x<y", "x<y", "x<y"},
		{"", "", ""},
	};
	for (size_t i = 0; i < ARRAY_LEN(c); i++) {
		struct pd_profile *p = fn_profile(c[i].name, c[i].sys, "a.go", 0, 1);
		struct pd_arena *a = NULL;
		int rc = 0;
		struct pd_str got = pd_func_name(p, 0, &a, &rc);
		assert_int_equal(rc, 0);
		if (got.len != strlen(c[i].want) || memcmp(got.ptr, c[i].want, got.len))
			fail_msg("case %zu (%s / %s): got \"%.*s\", want \"%s\"", i, c[i].name, c[i].sys, (int)got.len,
				 got.ptr, c[i].want);
		pd_arena_free(a);
		pd_profile_free(p);
	}
}

/* Profile with one mapping and samples at the given addresses (function per address). */
static struct pd_profile *mapped_profile(uint64_t start, uint64_t limit, uint64_t offset, const char *file,
					 const char *build_id, const uint64_t *addrs, const char *const *fns,
					 const int64_t *vals, size_t n)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 1, start, limit, offset, file, build_id);
	for (size_t i = 0; i < n; i++) {
		pb_function(&p, i + 1, fns[i], "m.go", 0);
		pb_location1(&p, i + 1, 1, addrs[i], i + 1, 1);
		uint64_t loc = i + 1;
		int64_t v[2] = {vals[i], vals[i]};
		pb_sample(&p, &loc, 1, v, 2, NULL, 0);
	}
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void test_mapping_aslr(void **state)
{
	(void)state;
	const char *fg[2] = {"f", "g"}, *fh[2] = {"f", "h"}, *f[1] = {"f"};
	uint64_t a1[2] = {0x401000, 0x402000};
	uint64_t a2[2] = {0x801000, 0x803000};
	uint64_t a3[1] = {0xa01000};
	uint64_t a4[1] = {0xc01000};
	int64_t v1[2] = {1, 1}, v2[2] = {2, 5}, v3[1] = {7}, v4[1] = {11};
	struct pd_profile *ps[4] = {
		mapped_profile(0x400000, 0x500000, 0, "/bin/app", NULL, a1, fg, v1, 2),
		/* same file, size 0xff800 rounds up to the same 0x100000 */
		mapped_profile(0x800000, 0x8ff800, 0, "/bin/app", NULL, a2, fh, v2, 2),
		/* another file: another mapping, another location */
		mapped_profile(0xa00000, 0xb00000, 0, "/bin/other", NULL, a3, f, v3, 1),
		/* same file, size 0x100800 rounds up to 0x101000: another mapping */
		mapped_profile(0xc00000, 0xd00800, 0, "/bin/app", NULL, a4, f, v4, 1),
	};
	struct pd_profile *m = merge_free(ps, 4);
	assert_int_equal(m->nmappings, 3);
	assert_int_equal(m->mappings[0].start, 0x400000);
	assert_int_equal(m->mappings[0].limit, 0x500000);
	tu_assert_str(m, m->mappings[0].filename, "/bin/app");
	tu_assert_str(m, m->mappings[1].filename, "/bin/other");
	assert_int_equal(m->mappings[2].start, 0xc00000);
	assert_int_equal(m->nlocations, 5);
	assert_int_equal(m->locations[0].address, 0x401000);
	assert_int_equal(m->locations[1].address, 0x402000);
	assert_int_equal(m->locations[2].address, 0x403000); /* relocated from 0x803000 */
	assert_int_equal(m->locations[2].mapping, 0);
	assert_int_equal(m->locations[3].address, 0xa01000);
	assert_int_equal(m->locations[3].mapping, 1);
	assert_int_equal(m->locations[4].address, 0xc01000);
	assert_int_equal(m->locations[4].mapping, 2);
	assert_string_equal(describe(m), "f 3 3\ng 1 1\nh 5 5\nf 7 7\nf 11 11\n");
	pd_profile_free(m);

	/* build id wins over the file name; offsets are part of the key */
	const char *ff[1] = {"f"};
	uint64_t b1[1] = {0x401000}, b2[1] = {0x901000}, b3[1] = {0x501000}, b4[1] = {0x601000};
	int64_t w[1] = {1};
	struct pd_profile *qs[4] = {
		mapped_profile(0x400000, 0x500000, 0, "/bin/app", "bid", b1, ff, w, 1),
		mapped_profile(0x900000, 0xa00000, 0, "/renamed", "bid", b2, ff, w, 1),
		mapped_profile(0x500000, 0x600000, 0, "/bin/app", "other-bid", b3, ff, w, 1),
		mapped_profile(0x600000, 0x700000, 0x1000, "/bin/app", "bid", b4, ff, w, 1),
	};
	m = merge_free(qs, 4);
	assert_int_equal(m->nmappings, 3);
	tu_assert_str(m, m->mappings[0].build_id, "bid");
	tu_assert_str(m, m->mappings[1].build_id, "other-bid");
	assert_int_equal(m->mappings[2].offset, 0x1000);
	assert_string_equal(describe(m), "f 2 2\nf 1 1\nf 1 1\n");
	pd_profile_free(m);

	/* address-only locations (no lines) relocate the same way */
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 1, 0x10000, 0x20000, 0, "/bin/s", NULL);
	pb_location1(&p, 1, 1, 0x10123, 0, 0);
	uint64_t loc = 1;
	int64_t vv[2] = {1, 1};
	pb_sample(&p, &loc, 1, vv, 2, NULL, 0);
	struct pd_profile *r[2];
	r[0] = pb_decode(&p);
	pb_free(&p);
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 1, 0x70000, 0x80000, 0, "/bin/s", NULL);
	pb_location1(&p, 1, 1, 0x70123, 0, 0);
	pb_sample(&p, &loc, 1, vv, 2, NULL, 0);
	r[1] = pb_decode(&p);
	pb_free(&p);
	m = merge_free(r, 2);
	assert_string_equal(describe(m), "0x10123 2 2\n");
	pd_profile_free(m);
}

static void test_first_mapping_is_id_1(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 5, 0x400000, 0x500000, 0, "/bin/main", NULL);
	pb_mapping(&p, 9, 0x7f000000, 0x7f100000, 0, "/lib/libc.so", NULL);
	pb_mapping(&p, 11, 0x7e000000, 0x7e100000, 0, "/lib/unused.so", NULL);
	pb_function(&p, 1, "memcpy", "libc.c", 0);
	pb_location1(&p, 1, 9, 0x7f000100, 1, 1);
	uint64_t loc = 1;
	int64_t v[2] = {1, 1};
	pb_sample(&p, &loc, 1, v, 2, NULL, 0);
	struct pd_profile *ps[1] = {pb_decode(&p)};
	pb_free(&p);
	struct pd_profile *m = merge_free(ps, 1);
	assert_int_equal(m->nmappings, 2);
	tu_assert_str(m, m->mappings[0].filename, "/bin/main");
	tu_assert_str(m, m->mappings[1].filename, "/lib/libc.so");
	assert_int_equal(m->locations[0].mapping, 1);
	assert_false(has_string(m, "/lib/unused.so"));
	pd_profile_free(m);

	/* the first profile has no mappings: the second's first mapping is id 1 */
	struct pd_profile *qs[2] = {sp1("f;main", 1, NULL, 0), NULL};
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 3, 0x400000, 0x500000, 0, "/bin/main2", NULL);
	pb_mapping(&p, 4, 0x7f000000, 0x7f100000, 0, "/lib/libc.so", NULL);
	pb_function(&p, 1, "memcpy", "libc.c", 0);
	pb_location1(&p, 1, 4, 0x7f000100, 1, 1);
	pb_sample(&p, &loc, 1, v, 2, NULL, 0);
	qs[1] = pb_decode(&p);
	pb_free(&p);
	m = merge_free(qs, 2);
	assert_int_equal(m->nmappings, 2);
	tu_assert_str(m, m->mappings[0].filename, "/bin/main2");
	assert_int_equal(m->mappings[0].id, 1);
	tu_assert_str(m, m->mappings[1].filename, "/lib/libc.so");
	pd_profile_free(m);
}

static void test_ids_renumbered_first_seen(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_function(&p, 99, "unused", "u.go", 0);
	pb_function(&p, 7, "g", "g.go", 0);
	pb_function(&p, 42, "f", "f.go", 0);
	pb_location1(&p, 555, 0, 0x555, 99, 1);
	pb_location1(&p, 1000, 0, 0x1000, 7, 1);
	pb_location1(&p, 3, 0, 0x3, 42, 1);
	uint64_t s1[2] = {3, 1000}, s2[1] = {1000};
	int64_t v[2] = {1, 1};
	pb_sample(&p, s1, 2, v, 2, NULL, 0);
	pb_sample(&p, s2, 1, v, 2, NULL, 0);
	struct pd_profile *ps[1] = {pb_decode(&p)};
	pb_free(&p);
	struct pd_profile *m = merge_free(ps, 1);
	assert_int_equal(m->nlocations, 2);
	assert_int_equal(m->locations[0].address, 0x3);
	assert_int_equal(m->locations[1].address, 0x1000);
	assert_int_equal(m->nfunctions, 2);
	tu_assert_str(m, m->functions[0].name, "f");
	tu_assert_str(m, m->functions[1].name, "g");
	assert_false(has_string(m, "unused"));
	assert_string_equal(describe(m), "f;g 1 1\ng 1 1\n");
	pd_profile_free(m);
}

static void test_compact(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	tb_int(&p.b, PF_TIME_NANOS, 77);
	pb_mapping(&p, 1, 0x1000, 0x2000, 0, "/bin/x", NULL);
	pb_mapping(&p, 2, 0x3000, 0x4000, 0, "/bin/unref", NULL);
	pb_function(&p, 1, "a", "a.go", 0);
	pb_function(&p, 2, "dead", "d.go", 0);
	pb_function(&p, 3, "main", "m.go", 0);
	pb_location1(&p, 10, 1, 0x1010, 1, 1);
	pb_location1(&p, 20, 2, 0x3010, 2, 1);
	pb_location1(&p, 30, 1, 0x1030, 3, 1);
	pb_location1(&p, 40, 1, 0x1040, 1, 1); /* same key as 10? no: other address */
	uint64_t st[2] = {10, 30}, st2[2] = {40, 30}, dead[2] = {20, 30};
	int64_t one[2] = {1, 100}, zero[2] = {0, 0}, neg[2] = {-1, -100};
	struct pb_label lb = {"k", "v", 0, NULL};
	pb_sample(&p, st, 2, one, 2, NULL, 0);
	pb_sample(&p, dead, 2, zero, 2, NULL, 0);
	pb_sample(&p, st, 2, one, 2, &lb, 1);
	pb_sample(&p, st, 2, one, 2, NULL, 0);
	pb_sample(&p, st2, 2, one, 2, NULL, 0);
	pb_sample(&p, st2, 2, neg, 2, NULL, 0);
	struct pd_profile *in = pb_decode(&p);
	pb_free(&p);
	struct pd_profile *c = NULL;
	struct pd_err err;
	assert_int_equal(pd_pprof_compact(in, &c, &err), 0);
	check_merged(c);
	assert_string_equal(describe(c), "a;main 2 200\na;main {k=v} 1 100\n");
	assert_int_equal(c->nmappings, 1);
	assert_int_equal(c->nfunctions, 2);
	assert_int_equal(c->nlocations, 2);
	assert_int_equal(c->time_nanos, 77);
	assert_false(has_string(c, "dead"));
	assert_false(has_string(c, "/bin/unref"));
	/* the input is untouched */
	assert_int_equal(in->nsamples, 6);
	assert_int_equal(in->nfunctions, 3);
	/* compacting twice changes nothing */
	struct pd_profile *c2 = NULL;
	assert_int_equal(pd_pprof_compact(c, &c2, &err), 0);
	tu_assert_profiles_equal(c, c2);
	pd_profile_free(c2);
	pd_profile_free(c);
	pd_profile_free(in);
}

static void test_merger_empty(void **state)
{
	(void)state;
	struct pd_merger *m = pd_merger_new();
	assert_non_null(m);
	assert_int_equal(pd_merger_count(m), 0);
	struct pd_profile *out = (struct pd_profile *)1;
	struct pd_err err = {0, ""};
	assert_int_not_equal(pd_merger_finish(m, &out, &err), 0);
	assert_null(out);
	assert_true(err.msg[0] != 0);
	pd_merger_free(m);
	pd_merger_free(NULL);
	out = (struct pd_profile *)1;
	assert_int_not_equal(pd_pprof_merge(NULL, 0, &out, &err), 0);
	assert_null(out);
}

static void test_merge_1000_streamed(void **state)
{
	(void)state;
	struct pd_merger *m = pd_merger_new();
	assert_non_null(m);
	struct pd_err err = {0, ""};
	for (int i = 0; i < 1000; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, 10000000 + i % 7);
		tb_int(&p.b, PF_TIME_NANOS, 5000 - i);
		tb_int(&p.b, PF_DURATION_NANOS, 10);
		uint64_t base = 0x400000 + (uint64_t)i * 0x10000000;
		pb_mapping(&p, 1, base, base + 0x100000, 0, "/bin/app", NULL);
		pb_function(&p, 1, "work", "w.go", 0);
		pb_function(&p, 2, "main", "m.go", 0);
		pb_location1(&p, 1, 1, base + 0x1000, 1, 5);
		pb_location1(&p, 2, 1, base + 0x2000, 2, 9);
		uint64_t st[2] = {1, 2};
		int64_t v[2] = {1, i};
		struct pb_label lb = {"parity", i % 2 ? "odd" : "even", 0, NULL};
		pb_sample(&p, st, 2, v, 2, &lb, 1);
		struct pd_profile *d = pb_decode(&p);
		pb_free(&p);
		int rc = pd_merger_add(m, d, &err);
		if (rc)
			fail_msg("add #%d: %s", i, err.msg);
		/* poison and free right away: the merger must not keep pointers */
		memset(d->owned, 0xa5, 8);
		pd_profile_free(d);
	}
	assert_int_equal(pd_merger_count(m), 1000);
	struct pd_profile *out = NULL;
	assert_int_equal(pd_merger_finish(m, &out, &err), 0);
	pd_merger_free(m);
	check_merged(out);
	assert_string_equal(describe(out), "work;main {parity=even} 500 249500\n"
					   "work;main {parity=odd} 500 250000\n");
	assert_int_equal(out->nmappings, 1);
	assert_int_equal(out->mappings[0].start, 0x400000);
	assert_int_equal(out->locations[0].address, 0x401000);
	assert_int_equal(out->nlocations, 2);
	assert_int_equal(out->nfunctions, 2);
	assert_int_equal(out->time_nanos, 4001);
	assert_int_equal(out->duration_nanos, 10000);
	assert_int_equal(out->period, 10000006);
	pd_profile_free(out);
}

static void test_merge_associative(void **state)
{
	(void)state;
	struct pb_label l1 = {"k", "v", 0, NULL};
	struct pd_profile *a[3] = {sp1("a;b;main", 1, &l1, 1), sp1("c;b;main", 2, NULL, 0), sp1("a;b;main", 3, &l1, 1)};
	struct pd_profile *b[3] = {sp1("a;b;main", 1, &l1, 1), sp1("c;b;main", 2, NULL, 0), sp1("a;b;main", 3, &l1, 1)};
	struct pd_profile *all = merge_free(a, 3);
	struct pd_profile *ab = merge_free(b, 2);
	struct pd_profile *pair[2] = {ab, b[2]};
	struct pd_profile *abc = merge_free(pair, 2);
	tu_assert_profiles_equal(all, abc);
	assert_string_equal(describe(all), "a;b;main {k=v} 4 4\nc;b;main 2 2\n");
	pd_profile_free(all);
	pd_profile_free(abc);
}

/* The per-profile memo tables are reset on every add: the same profile
 * twice, and profiles of different sizes whose indexes overlap. */
static void test_merger_memo_reuse(void **state)
{
	(void)state;
	struct sp s;
	sp_init(&s, 10);
	sp_sample(&s, "a;b;c;d;e;f;g;h;main", 1, 1, NULL, 0);
	struct pd_profile *big = sp_decode(&s);
	sp_init(&s, 10);
	sp_sample(&s, "z;main", 2, 2, NULL, 0); /* z is function/location 1, where "a" was */
	struct pd_profile *small = sp_decode(&s);
	struct pd_merger *m = pd_merger_new();
	assert_non_null(m);
	struct pd_err err = {0, ""};
	assert_int_equal(pd_merger_add(m, big, &err), 0);
	assert_int_equal(pd_merger_add(m, big, &err), 0);
	assert_int_equal(pd_merger_add(m, small, &err), 0);
	assert_int_equal(pd_merger_add(m, big, &err), 0);
	assert_int_equal(pd_merger_add(m, small, &err), 0);
	struct pd_profile *out = NULL;
	assert_int_equal(pd_merger_finish(m, &out, &err), 0);
	pd_merger_free(m);
	check_merged(out);
	assert_string_equal(describe(out), "a;b;c;d;e;f;g;h;main 3 3\nz;main 4 4\n");
	assert_int_equal(out->nfunctions, 10);
	assert_int_equal(out->nlocations, 10);
	pd_profile_free(out);
	pd_profile_free(big);
	pd_profile_free(small);
}

/* Multi-line locations: the key covers every line (function, line, column). */
static void test_location_key_lines(void **state)
{
	(void)state;
	struct pd_profile *ps[3];
	for (int i = 0; i < 3; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, 10);
		pb_function(&p, 1, "inl", "i.go", 0);
		pb_function(&p, 2, "outer", "o.go", 0);
		struct tb_line ln[2] = {{1, 3, i == 2 ? 9 : 4}, {2, 7, 1}};
		tb_location(&p.b, 1, 0, 0x10, ln, 2, false);
		uint64_t loc = 1;
		int64_t v[2] = {1, 1};
		pb_sample(&p, &loc, 1, v, 2, NULL, 0);
		ps[i] = pb_decode(&p);
		pb_free(&p);
	}
	struct pd_profile *m = merge_free(ps, 3);
	assert_string_equal(describe(m), "inl;outer 2 2\ninl;outer 1 1\n");
	assert_int_equal(m->nlocations, 2);
	assert_int_equal(m->locations[1].lines[0].column, 9);
	pd_profile_free(m);

	/* is_folded is part of the key */
	for (int i = 0; i < 2; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, 10);
		pb_function(&p, 1, "f", "f.go", 0);
		struct tb_line ln = {1, 3, 0};
		tb_location(&p.b, 1, 0, 0x10, &ln, 1, i == 1);
		uint64_t loc = 1;
		int64_t v[2] = {1, 1};
		pb_sample(&p, &loc, 1, v, 2, NULL, 0);
		ps[i] = pb_decode(&p);
		pb_free(&p);
	}
	m = merge_free(ps, 2);
	assert_int_equal(m->nlocations, 2);
	assert_false(m->locations[0].is_folded);
	assert_true(m->locations[1].is_folded);
	pd_profile_free(m);
}

/* ---- agg ------------------------------------------------------------------------------ */

static void test_agg_sums(void **state)
{
	(void)state;
	struct pd_agg a;
	assert_int_equal(pd_agg_init(&a, 2, 0), 0);
	int64_t v1[2] = {1, 2}, v2[2] = {3, 4}, v3[2] = {10, 20}, v4[2] = {-11, -22};
	assert_int_equal(pd_agg_add(&a, 1, 0, v1), 0);
	assert_int_equal(pd_agg_add(&a, 2, 0, v2), 0);
	assert_int_equal(pd_agg_add(&a, 1, 0, v3), 0);
	assert_int_equal(pd_agg_add(&a, 1, 1, v2), 0); /* other label set */
	assert_int_equal(pd_agg_add(&a, 0, 1, v1), 0); /* stack/labels swapped is another key */
	assert_int_equal(a.n, 4);
	assert_int_equal(a.rows[0].stack, 1);
	assert_int_equal(a.rows[0].labels, 0);
	assert_int_equal(pd_agg_values(&a, 0)[0], 11);
	assert_int_equal(pd_agg_values(&a, 0)[1], 22);
	assert_int_equal(pd_agg_values(&a, 1)[0], 3);
	assert_int_equal(pd_agg_values(&a, 2)[1], 4);
	assert_int_equal(pd_agg_values(&a, 3)[0], 1);
	assert_false(pd_agg_row_zero(&a, 0));
	assert_int_equal(pd_agg_add(&a, 1, 0, v4), 0);
	assert_true(pd_agg_row_zero(&a, 0));
	assert_int_equal(a.n, 4); /* a zero row stays a row */
	pd_agg_free(&a);
}

static void test_agg_first_seen_order_many(void **state)
{
	(void)state;
	struct pd_agg a;
	assert_int_equal(pd_agg_init(&a, 3, 4), 0);
	const uint32_t n = 50000;
	for (int round = 0; round < 2; round++)
		for (uint32_t i = 0; i < n; i++) {
			/* a scrambled key order */
			uint32_t k = (i * 7919u) % n;
			int64_t v[3] = {1, (int64_t)k, -(int64_t)k};
			assert_int_equal(pd_agg_add(&a, k, k % 3, v), 0);
		}
	assert_int_equal(a.n, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = (i * 7919u) % n;
		assert_int_equal(a.rows[i].stack, k);
		assert_int_equal(a.rows[i].labels, k % 3);
		const int64_t *v = pd_agg_values(&a, i);
		assert_int_equal(v[0], 2);
		assert_int_equal(v[1], 2 * (int64_t)k);
		assert_int_equal(v[2], -2 * (int64_t)k);
	}
	pd_agg_free(&a);
}

static void test_agg_max_rows(void **state)
{
	(void)state;
	struct pd_agg a;
	assert_int_equal(pd_agg_init(&a, 1, 0), 0);
	a.max_rows = 3;
	int64_t v[1] = {5};
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(pd_agg_add(&a, i, 0, v), 0);
	assert_int_equal(pd_agg_add(&a, 3, 0, v), PD_ELIMIT);
	assert_int_equal(pd_agg_add(&a, 0, 1, v), PD_ELIMIT);
	assert_int_equal(a.n, 3);
	/* existing rows still add */
	assert_int_equal(pd_agg_add(&a, 2, 0, v), 0);
	assert_int_equal(pd_agg_values(&a, 2)[0], 10);
	pd_agg_free(&a);
}

static void test_agg_zero_values(void **state)
{
	(void)state;
	struct pd_agg a;
	assert_int_equal(pd_agg_init(&a, 0, 0), 0);
	assert_int_equal(pd_agg_add(&a, 1, 2, NULL), 0);
	assert_int_equal(pd_agg_add(&a, 1, 2, NULL), 0);
	assert_int_equal(a.n, 1);
	assert_true(pd_agg_row_zero(&a, 0));
	pd_agg_free(&a);
}

/* ---- report ------------------------------------------------------------------------------ */

/* functions main, a, b, c; locations: 1 main, 2 a, 3 b, 4 = [c inlined into a], 5 = address 0x1234 */
static struct pd_profile *report_profile(void)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_function(&p, 1, "main", "m.go", 0);
	pb_function(&p, 2, "a", "a.go", 0);
	pb_function(&p, 3, "b", "b.go", 0);
	pb_function(&p, 4, "c", "c.go", 0);
	pb_location1(&p, 1, 0, 0x100, 1, 1);
	pb_location1(&p, 2, 0, 0x200, 2, 1);
	pb_location1(&p, 3, 0, 0x300, 3, 1);
	struct tb_line inl[2] = {{4, 5, 0}, {2, 8, 0}};
	tb_location(&p.b, 4, 0, 0x400, inl, 2, false);
	tb_location(&p.b, 5, 0, 0x1234, NULL, 0, false);
	static const struct {
		uint64_t locs[4];
		size_t n;
		int64_t v;
	} s[] = {
		{{3, 2, 1}, 3, 10},   /* main;a;b */
		{{2, 3, 2, 1}, 4, 5}, /* main;a;b;a: recursion */
		{{4, 1}, 2, 3},       /* main;a;c: inlined */
		{{3, 2, 1}, 3, 2},    /* main;a;b again */
		{{5, 1}, 2, 4},       /* main;0x1234 */
		{{3, 1}, 2, 0},       /* zero */
		{{2, 1}, 2, 7},       /* main;a 7 ... */
		{{2, 1}, 2, -7},      /* ... cancelled */
	};
	for (size_t i = 0; i < ARRAY_LEN(s); i++) {
		int64_t v[2] = {s[i].v ? 1 : 0, s[i].v};
		pb_sample(&p, s[i].locs, s[i].n, v, 2, NULL, 0);
	}
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void expect_row(const struct pd_top *t, size_t i, const char *name, int64_t flat, int64_t cum)
{
	assert_true(i < t->n);
	char buf[64];
	snprintf(buf, sizeof buf, "%.*s", (int)t->rows[i].name.len, t->rows[i].name.ptr);
	if (strcmp(buf, name) || t->rows[i].flat != flat || t->rows[i].cum != cum)
		fail_msg("row %zu: got %s flat %" PRId64 " cum %" PRId64 ", want %s %" PRId64 " %" PRId64, i, buf,
			 t->rows[i].flat, t->rows[i].cum, name, flat, cum);
}

/* Sums wrap around as Go's int64 does: go tool pprof merges two samples of
 * INT64_MAX on one stack into -2 (checked with Go 1.19's pprof), and so
 * does profd, without undefined behaviour (SANITIZE=1 aborts on a signed
 * overflow; fuzzing found this one in the merge and in top). */
static void test_values_wrap_as_go(void **state)
{
	(void)state;
	struct pd_profile *ps[2] = {sp1("a;main", INT64_MAX, NULL, 0), sp1("a;main", INT64_MAX, NULL, 0)};
	struct pd_profile *m = merge_free(ps, 2);
	assert_string_equal(describe(m), "a;main -2 -2\n");
	struct pd_top t;
	struct pd_err err;
	assert_int_equal(pd_top_compute(m, 0, false, &t, &err), 0);
	assert_int_equal(t.total, -2);
	pd_top_free(&t);
	pd_profile_free(m);
	/* two samples of one profile that overflow only in top's sums */
	struct sp s;
	sp_init(&s, 10000000);
	sp_sample(&s, "a;main", INT64_MAX, INT64_MIN, NULL, 0);
	sp_sample(&s, "b;main", INT64_MAX, INT64_MIN, NULL, 0);
	struct pd_profile *p = sp_decode(&s);
	assert_int_equal(pd_top_compute(p, 0, false, &t, &err), 0);
	assert_int_equal(t.total, -2);
	expect_row(&t, 0, "a", INT64_MAX, INT64_MAX);
	expect_row(&t, 1, "b", INT64_MAX, INT64_MAX);
	expect_row(&t, 2, "main", 0, -2);
	pd_top_free(&t);
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	assert_int_equal(t.total, 0);
	pd_top_free(&t);
	pd_profile_free(p);
}

/* A profile with drop_frames/keep_frames (legacy C++ and Java heap, lock
 * and CPU profiles carry the allocator's or profiler's frames there, and so
 * do protobuf profiles made from them): go tool pprof prunes those frames
 * (RemoveUninteresting) before -top, -traces and every other view; profd's
 * top, folded stacks and flame graph counted them, so /api/1/top,
 * /api/1/series and the merge's top disagreed with go tool pprof -top on the
 * same file. Expected: go tool pprof -top and -traces (Go 1.19) of this
 * profile. */
static struct pd_profile *drop_frames_profile(void)
{
	static const char *const fn[] = {"main", "user.Alloc", "tcmalloc::Alloc", "malloc", "user.Other",
					 "operator new(unsigned long)", "user.Inl", "user.X", "runtime.panic", "user.P",
					 "runtime.mallocgc", "user.Q", ".malloc(unsigned long)", "user.R"};
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	tb_int(&p.b, PF_DROP_FRAMES, pb_s(&p, "malloc|tcmalloc::.*|operator new.*|runtime\\..*"));
	tb_int(&p.b, PF_KEEP_FRAMES, pb_s(&p, "runtime\\.panic"));
	for (uint64_t i = 1; i <= ARRAY_LEN(fn); i++) {
		pb_function(&p, i, fn[i - 1], "f.go", 0);
		if (i != 6)
			pb_location1(&p, i, 0, 0x100 * i, i, 1);
	}
	struct tb_line inl[2] = {{6, 1, 0}, {7, 2, 0}}; /* operator new inlined into user.Inl */
	tb_location(&p.b, 6, 0, 0x600, inl, 2, false);
	static const struct {
		uint64_t locs[4];
		size_t n;
		int64_t v;
	} s[] = {
		{{3, 4, 2, 1}, 4, 100}, /* main;user.Alloc;malloc;tcmalloc::Alloc: cut below user.Alloc */
		{{4, 5, 1}, 3, 50},
		{{4, 1}, 2, 10},        /* main;malloc: main's */
		{{6, 1}, 2, 7},         /* the inlined operator new cut from its location */
		{{4}, 1, 3},            /* nothing of the program's own above: kept */
		{{8, 4, 1}, 3, 5},      /* below a dropped frame: main's */
		{{9, 10, 1}, 3, 1000},  /* runtime.panic: kept (keep_frames) */
		{{11, 12, 1}, 3, 2000}, /* runtime.mallocgc: dropped */
		{{13, 14, 1}, 3, 4000}, /* ".malloc(unsigned long)" is "malloc" to drop_frames */
	};
	for (size_t i = 0; i < ARRAY_LEN(s); i++) {
		int64_t v[2] = {1, s[i].v};
		pb_sample(&p, s[i].locs, s[i].n, v, 2, NULL, 0);
	}
	struct pd_profile *d = pb_decode(&p);
	pb_free(&p);
	return d;
}

static void test_drop_frames_as_go(void **state)
{
	(void)state;
	struct pd_profile *p = drop_frames_profile();
	struct pd_top t;
	struct pd_err err;
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	assert_int_equal(t.n, 9);
	expect_row(&t, 0, "user.R", 4000, 4000);
	expect_row(&t, 1, "user.Q", 2000, 2000);
	expect_row(&t, 2, "runtime.panic", 1000, 1000);
	expect_row(&t, 3, "user.Alloc", 100, 100);
	expect_row(&t, 4, "user.Other", 50, 50);
	expect_row(&t, 5, "main", 15, 7172);
	expect_row(&t, 6, "user.Inl", 7, 7);
	expect_row(&t, 7, "malloc", 3, 3);
	expect_row(&t, 8, "user.P", 0, 1000);
	assert_int_equal(t.rows[6].inlined, PD_TOP_NOT_INLINED);
	pd_top_free(&t);
	struct pd_buf out = PD_BUF_INIT(0);
	assert_int_equal(pd_folded(p, 1, &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.ptr, "main 15\n"
						   "main;user.Alloc 100\n"
						   "main;user.Inl 7\n"
						   "main;user.Other 50\n"
						   "main;user.P;runtime.panic 1000\n"
						   "main;user.Q 2000\n"
						   "main;user.R 4000\n"
						   "malloc 3\n");
	pd_buf_free(&out);
	pd_profile_free(p);
	/* a drop_frames that does not compile prunes nothing, as in pprof */
	struct pb b;
	pb_init(&b);
	pb_cpu_header(&b, 10);
	tb_int(&b.b, PF_DROP_FRAMES, pb_s(&b, "malloc("));
	pb_function(&b, 1, "main", "f.go", 0);
	pb_function(&b, 2, "malloc", "f.go", 0);
	pb_location1(&b, 1, 0, 0x100, 1, 1);
	pb_location1(&b, 2, 0, 0x200, 2, 1);
	int64_t v[2] = {1, 5};
	pb_sample(&b, (const uint64_t[]){2, 1}, 2, v, 2, NULL, 0);
	p = pb_decode(&b);
	pb_free(&b);
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	expect_row(&t, 0, "malloc", 5, 5);
	pd_top_free(&t);
	pd_profile_free(p);
}

/* The total `go tool pprof -top` takes percentages of (report.go's
 * computeTotal) is the sum of |v|, not of v: a delta profile (heap inuse
 * after ?seconds=N, `profd pprof delta`) has negative values, and with
 * samples labelled pprof::base=true (-diff_base) only theirs count. Go
 * 1.19's pprof prints the first profile's rows as % of 100; profd printed
 * them as % of 20 (300%, 200%). */
static void test_report_total_as_go(void **state)
{
	(void)state;
	struct sp s;
	sp_init(&s, 10000000);
	sp_sample(&s, "a;main", 60, 6, NULL, 0);
	sp_sample(&s, "b;main", -40, -4, NULL, 0);
	struct pd_profile *p = sp_decode(&s);
	assert_int_equal(pd_report_total(p, 0), 100);
	assert_int_equal(pd_report_total(p, 1), 10);
	struct pd_top t;
	struct pd_err err;
	struct pd_buf out = PD_BUF_INIT(0);
	assert_int_equal(pd_top_compute(p, 0, false, &t, &err), 0);
	t.total = pd_report_total(p, 0);
	assert_int_equal(pd_top_text(&t, 0, p->strings[p->sample_types[0].unit], &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	/* the table of go tool pprof -top -sample_index=0 */
	assert_string_equal((const char *)out.ptr, "Showing 3 of 3 functions, accounting for 20, 20.00% of 100 total\n"
						   "      flat  flat%   sum%        cum   cum%\n"
						   "        60 60.00% 60.00%         60 60.00%  a\n"
						   "       -40 40.00% 20.00%        -40 40.00%  b\n"
						   "         0     0% 20.00%         20 20.00%  main\n");
	pd_buf_free(&out);
	pd_top_free(&t);
	pd_profile_free(p);
	/* -diff_base: the base samples' total, when positive */
	struct pb_label base = {"pprof::base", "true", 0, NULL}, other = {"pprof::base", "false", 0, NULL};
	sp_init(&s, 10000000);
	sp_sample(&s, "a;main", 7, 7, &base, 1);
	sp_sample(&s, "b;main", -3, -3, &base, 1);
	sp_sample(&s, "c;main", 100, 100, &other, 1);
	sp_sample(&s, "d;main", 50, 50, NULL, 0);
	p = sp_decode(&s);
	assert_int_equal(pd_report_total(p, 0), 10);
	pd_profile_free(p);
	sp_init(&s, 10000000);
	sp_sample(&s, "a;main", 0, 1, &base, 1);
	sp_sample(&s, "d;main", -50, 50, NULL, 0);
	p = sp_decode(&s);
	assert_int_equal(pd_report_total(p, 0), 50); /* base total 0: all samples */
	assert_int_equal(pd_report_total(p, 1), 1);
	pd_profile_free(p);
}

/* measurement.Percentage takes |v/total|, so a zero over a negative
 * (wrapped) total is "0%", never "-0%"; and a value over a small total
 * is printed in full (Go 1.19: "307445734561825816576.00%"), not cut at
 * 15 characters without its '%'. */
static void test_percent_as_go(void **state)
{
	(void)state;
	char buf[32];
	assert_string_equal(pd_fmt_percent(buf, sizeof buf, 0, -5), "    0%");
	assert_string_equal(pd_fmt_percent(buf, sizeof buf, 5, -10), "50.00%");
	struct pd_top_row row = {.name = {"main", 4}, .flat = INT64_MAX, .cum = INT64_MAX, .inlined = PD_TOP_NOT_INLINED};
	struct pd_top t = {&row, 1, 3, NULL};
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_top_text(&t, 0, (struct pd_str){"count", 5}, &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_non_null(strstr((const char *)out.ptr, " 307445734561825816576.00% 307445734561825816576.00% "));
	pd_buf_free(&out);
}

static void test_top_flat_cum(void **state)
{
	(void)state;
	struct pd_profile *p = report_profile();
	struct pd_top t;
	struct pd_err err;
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	assert_int_equal(t.total, 24);
	assert_int_equal(t.n, 5);
	expect_row(&t, 0, "b", 12, 17);
	expect_row(&t, 1, "a", 5, 20);
	/* pprof names a frame without function "<unknown>" (no mapping file) */
	expect_row(&t, 2, "<unknown>", 4, 4);
	expect_row(&t, 3, "c", 3, 3);
	expect_row(&t, 4, "main", 0, 24);
	/* c is only ever reached inlined into a; the others by calls */
	assert_int_equal(t.rows[3].inlined, PD_TOP_INLINED);
	assert_int_equal(t.rows[0].inlined, PD_TOP_NOT_INLINED);
	assert_int_equal(t.rows[4].inlined, PD_TOP_NOT_INLINED);
	pd_top_free(&t);
	assert_int_equal(pd_top_compute(p, 1, true, &t, &err), 0);
	expect_row(&t, 0, "main", 0, 24);
	expect_row(&t, 1, "a", 5, 20);
	expect_row(&t, 2, "b", 12, 17);
	expect_row(&t, 3, "<unknown>", 4, 4);
	expect_row(&t, 4, "c", 3, 3);
	pd_top_free(&t);
	/* sample index 0: counts */
	assert_int_equal(pd_top_compute(p, 0, false, &t, &err), 0);
	assert_int_equal(t.total, 7);
	expect_row(&t, 0, "a", 3, 6); /* recursion counted once per sample */
	expect_row(&t, 1, "b", 2, 3);
	pd_top_free(&t);
	assert_int_equal(pd_top_compute(p, 2, false, &t, &err), PD_EINVAL);
	assert_null(t.rows);
	pd_profile_free(p);
}

static void test_folded_exact(void **state)
{
	(void)state;
	struct pd_profile *p = report_profile();
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_buf_append(&out, "#", 1), 0); /* appends */
	assert_int_equal(pd_folded(p, 1, &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.ptr, "#main;0x1234 4\n"
						   "main;a;b 12\n"
						   "main;a;b;a 5\n"
						   "main;a;c 3\n");
	out.len = 0;
	assert_int_equal(pd_folded(p, 0, &out, &err), 0);
	assert_int_equal(pd_buf_append(&out, "", 1), 0);
	assert_string_equal((const char *)out.ptr, "main;0x1234 1\n"
						   "main;a 2\n"
						   "main;a;b 2\n"
						   "main;a;b;a 1\n"
						   "main;a;c 1\n");
	assert_int_equal(pd_folded(p, 5, &out, &err), PD_EINVAL);
	pd_buf_free(&out);
	pd_profile_free(p);

	/* no stack, and names with the separators in them */
	struct pb b;
	pb_init(&b);
	pb_cpu_header(&b, 10);
	pb_function(&b, 1, "x;y\nz", "m.go", 0);
	pb_location1(&b, 1, 0, 0, 1, 1);
	uint64_t loc = 1;
	int64_t v[2] = {1, 3};
	pb_sample(&b, NULL, 0, v, 2, NULL, 0);
	pb_sample(&b, &loc, 1, v, 2, NULL, 0);
	p = pb_decode(&b);
	pb_free(&b);
	struct pd_buf o2 = PD_BUF_INIT(0);
	assert_int_equal(pd_folded(p, 1, &o2, &err), 0);
	assert_int_equal(pd_buf_append(&o2, "", 1), 0);
	assert_string_equal((const char *)o2.ptr, "[no stack] 3\nx:y:z 3\n");
	pd_buf_free(&o2);
	pd_profile_free(p);
}

/* pprof's measurement.ScaledLabel: "%.2f" with only a trailing ".00" removed. */
static void test_fmt_value_like_pprof(void **state)
{
	(void)state;
	char buf[64];
	struct pd_str ns = {"nanoseconds", 11}, bytes = {"bytes", 5}, count = {"count", 5};
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 42, count), "42");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 500, ns), "500ns");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 10000000, ns), "10ms");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 2000000000, ns), "2s");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 512, bytes), "512B");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 1024, bytes), "1kB");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 3 << 20, bytes), "3MB");
	/* the examples of report.h: trailing zeros after a non-zero digit stay */
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 1200000000, ns), "1.20s");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 524800, bytes), "512.50kB");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, -1500000, ns), "-1.50ms");
}

/* pprof's time units are ns, us, ms, s, hrs: no minutes; zero is "0". */
static void test_fmt_value_units_like_pprof(void **state)
{
	(void)state;
	char buf[64];
	struct pd_str ns = {"nanoseconds", 11}, bytes = {"bytes", 5};
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 120000000000LL, ns), "120s");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 7200000000000LL, ns), "2hrs");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 0, ns), "0");
	assert_string_equal(pd_fmt_value(buf, sizeof buf, 0, bytes), "0");
}

/* ---- two-level (parallel) merge == sequential merge ------------------------- */

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void) { return tu_xorshift(&rnd_state); }

/* A random profile over a shared pool: 2 mappings loaded at a per-profile
 * address (ASLR), 12 functions, 30 locations, samples with labels and
 * values of both signs, so that some rows sum to zero across profiles. */
static struct pd_profile *random_profile(int k)
{
	static const char *const fn[] = {"main", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"};
	static const char *const lv[] = {"x", "y"};
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10000000 + k);
	uint64_t base = 0x400000 + (uint64_t)(k % 3) * 0x100000;
	pb_mapping(&p, 1, base, base + 0x80000, 0, "/bin/app", NULL);
	pb_mapping(&p, 2, base + 0x1000000, base + 0x1010000, 0, "/lib/libc.so", "abc");
	for (uint64_t f = 0; f < ARRAY_LEN(fn); f++)
		pb_function(&p, f + 1, fn[f], "x.go", 0);
	for (uint64_t l = 0; l < 30; l++) {
		uint64_t m = l % 7 == 0 ? 2 : 1;
		uint64_t addr = (m == 1 ? base : base + 0x1000000) + 0x100 * (l + 1);
		pb_location1(&p, l + 1, m, addr, l % ARRAY_LEN(fn) + 1, (int64_t)(l * 3));
	}
	int ns = 5 + (int)(rnd() % 8);
	for (int i = 0; i < ns; i++) {
		uint64_t locs[6];
		size_t n = 1 + rnd() % 6;
		for (size_t j = 0; j < n; j++)
			locs[j] = 1 + rnd() % 6; /* few distinct stacks: many repeats */
		int64_t v = (int64_t)(rnd() % 5) - 2;
		int64_t vals[2] = {v, v * 10};
		struct pb_label lb = {"handler", lv[rnd() % 2], 0, NULL};
		pb_sample(&p, locs, n, vals, 2, &lb, rnd() % 2);
	}
	tb_int(&p.b, PF_TIME_NANOS, 1000 + k);
	tb_int(&p.b, PF_DURATION_NANOS, 10);
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	pb_free(&p);
	return q;
}

static void test_partial_merge_equals_sequential(void **state)
{
	(void)state;
	enum { N = 12 };
	for (int round = 0; round < 20; round++) {
		struct pd_profile *ps[N];
		for (int i = 0; i < N; i++)
			ps[i] = random_profile(i + round);
		struct pd_err err;
		struct pd_profile *seq;
		assert_int_equal(pd_pprof_merge(ps, N, &seq, &err), 0);
		struct pd_buf want = PD_BUF_INIT(0);
		assert_int_equal(pd_pprof_encode(seq, 0, &want, &err), 0);
		for (int runs = 2; runs <= N; runs++) {
			struct pd_merger *fin = pd_merger_new();
			for (int r = 0, first = 0; r < runs; r++) {
				int n = N / runs + (r < N % runs);
				struct pd_merger *m = pd_merger_new();
				pd_merger_set_partial(m, true);
				for (int i = first; i < first + n; i++)
					assert_int_equal(pd_merger_add(m, ps[i], &err), 0);
				struct pd_profile *part;
				assert_int_equal(pd_merger_finish(m, &part, &err), 0);
				assert_int_equal(pd_merger_add_partial(fin, part, &err), 0);
				pd_profile_free(part);
				pd_merger_free(m);
				first += n;
			}
			struct pd_profile *got;
			assert_int_equal(pd_merger_finish(fin, &got, &err), 0);
			struct pd_buf b = PD_BUF_INIT(0);
			assert_int_equal(pd_pprof_encode(got, 0, &b, &err), 0);
			if (b.len != want.len || memcmp(b.ptr, want.ptr, b.len) != 0)
				fail_msg("round %d, %d runs: partial merge differs from the sequential one", round, runs);
			pd_buf_free(&b);
			pd_profile_free(got);
			pd_merger_free(fin);
		}
		/* the data must have exercised zero-sum rows */
		pd_buf_free(&want);
		pd_profile_free(seq);
		for (int i = 0; i < N; i++)
			pd_profile_free(ps[i]);
	}
}

/* Without the partial mode a zero-sum row would lose its place: check that
 * the test above can fail, i.e. that such rows occur in its data. */
static void test_partial_merge_data_has_zero_rows(void **state)
{
	(void)state;
	rnd_state = 88172645463325252ULL;
	enum { N = 12 };
	int zero_rows = 0;
	for (int round = 0; round < 20; round++) {
		struct pd_profile *ps[N];
		for (int i = 0; i < N; i++)
			ps[i] = random_profile(i + round);
		struct pd_merger *m = pd_merger_new();
		pd_merger_set_partial(m, true);
		struct pd_err err;
		for (int i = 0; i < N / 2; i++)
			assert_int_equal(pd_merger_add(m, ps[i], &err), 0);
		struct pd_profile *part;
		assert_int_equal(pd_merger_finish(m, &part, &err), 0);
		for (size_t s = 0; s < part->nsamples; s++)
			zero_rows += part->samples[s].values[0] == 0 && part->samples[s].values[1] == 0;
		pd_profile_free(part);
		pd_merger_free(m);
		for (int i = 0; i < N; i++)
			pd_profile_free(ps[i]);
	}
	assert_true(zero_rows > 0);
}

/* Looking a profile's locations up all at once (premap_locations, taken
 * from 64 locations on) must not change the merge: random profiles of one
 * binary and a library at shifting addresses (ASLR: locations relocated to
 * the first profile's mapping), a second library that only later profiles
 * have (a mapping met first through the lookup of a later profile), two
 * equal mappings in one profile (the first a sample uses decides), inlined
 * lines, locations without a mapping, labels; merged with and without the
 * lookup, streamed and decoded: byte-identical results. */
static const char *pm_names[40] = {
	"main.main", "main.serve", "main.handle", "net/http.(*conn).serve", "net/http.HandlerFunc.ServeHTTP",
	"runtime.mallocgc", "runtime.memmove", "runtime.mapassign", "runtime.growslice", "runtime.scanobject",
	"encoding/json.Marshal", "encoding/json.(*encodeState).reflectValue", "sort.Slice", "bytes.(*Buffer).Write",
	"app.(*Cache).Get", "app.(*Cache).Put", "app.parse", "app.render", "app.(*DB).Query", "app.hash",
	"lib.compress", "lib.decompress", "lib.crc32", "lib.inner", "lib.outer", "lib2.a", "lib2.b", "lib2.c",
	"syscall.Syscall", "internal/poll.(*FD).Read", "os.(*File).Write", "fmt.Sprintf", "strconv.Itoa",
	"strings.Builder.WriteString", "time.Now", "sync.(*Mutex).Lock", "sync.(*Mutex).Unlock", "io.Copy",
	"compress/gzip.(*Writer).Write", "hash/crc32.update"};

static uint64_t pm_rand(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

/* Profile k of the set, encoded into *out. */
static void pm_profile(int k, struct tb *out)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10000000);
	/* mappings: the binary and a library, shifted per profile; from profile
	 * 2 on a second library, which profile 2 has twice (equal keys, the
	 * second used first by the samples: it is the one merged); profile 3
	 * has the binary twice */
	uint64_t shift = (uint64_t)k * 0x1000000, start[5] = {0};
	start[1] = 0x400000 + shift;
	start[2] = 0x7f0000000000ULL + shift;
	pb_mapping(&p, 1, start[1], start[1] + 0x100000, 0, "/bin/app", "b1");
	pb_mapping(&p, 2, start[2], start[2] + 0x100000, 0, "/lib/libx.so", "bx");
	uint64_t nmap = 2;
	if (k >= 2) {
		start[3] = 0x7e0000000000ULL + shift;
		pb_mapping(&p, ++nmap, start[3], start[3] + 0x80000, 0, "/lib/liby.so", "by");
	}
	if (k == 2) {
		start[4] = 0x7d0000000000ULL;
		pb_mapping(&p, ++nmap, start[4], start[4] + 0x80000, 0, "/lib/liby.so", "by");
	}
	if (k == 3) {
		start[4] = 0x900000;
		pb_mapping(&p, ++nmap, start[4], start[4] + 0x100000, 0, "/bin/app", "b1");
	}
	for (uint64_t f = 0; f < 40; f++)
		pb_function(&p, f + 1, pm_names[f], f < 20 ? "app.go" : "lib.go", (int64_t)f);
	/* 120 locations: addresses drawn from 300 per mapping, so profiles
	 * share most of them; a few with no mapping, some inlined */
	enum { NL = 120 };
	for (uint64_t l = 1; l <= NL; l++) {
		uint64_t mi = 1 + pm_rand(&x) % nmap, slot = pm_rand(&x) % 300;
		if (k == 2 && l <= 2) /* location 1 on the first liby, 2 on the second */
			mi = 2 + l;
		uint64_t fn = 1 + (slot * 7) % 40;
		struct tb_line ln[2] = {{fn, (int64_t)(10 + slot), 0}, {1 + (fn + 3) % 40, (int64_t)slot, 0}};
		if (l % 17 == 0)
			tb_location(&p.b, l, 0, 0x10000 + slot * 16, ln, 1, false);
		else
			tb_location(&p.b, l, mi, start[mi] + 0x1000 + slot * 0x40, ln, slot % 5 == 0 ? 2 : 1, false);
	}
	for (int s = 0; s < 300; s++) {
		uint64_t locs[24];
		size_t n = 1 + pm_rand(&x) % 24;
		for (size_t j = 0; j < n; j++)
			locs[j] = 1 + pm_rand(&x) % NL;
		if (s == 0)
			locs[0] = 2;
		int64_t v[2] = {(int64_t)(1 + pm_rand(&x) % 5), 0};
		v[1] = v[0] * 10000000;
		struct pb_label lb = {"handler", s % 3 ? "/a" : "/b", 0, NULL};
		pb_sample(&p, locs, n, v, 2, &lb, s % 4 == 0 ? 1 : 0);
	}
	pb_finish(&p);
	tb_init(out);
	tb_raw(out, p.b.p, p.b.len);
	pb_free(&p);
}

static void pm_merge(struct tb *in, int n, bool premap, bool streamed, struct pd_buf *out)
{
	struct pd_merger *m = pd_merger_new();
	assert_non_null(m);
	pd_merger_set_premap(m, premap);
	struct pd_err err = {0};
	for (int k = 0; k < n; k++) {
		if (streamed) {
			assert_int_equal(pd_merger_add_encoded(m, in[k].p, in[k].len, NULL, &err), 0);
		} else {
			struct pd_profile *p;
			assert_int_equal(pd_pprof_decode(in[k].p, in[k].len, NULL, &p, &err), 0);
			assert_int_equal(pd_merger_add(m, p, &err), 0);
			pd_profile_free(p);
		}
	}
	struct pd_profile *r;
	assert_int_equal(pd_merger_finish(m, &r, &err), 0);
	pd_merger_free(m);
	*out = (struct pd_buf)PD_BUF_INIT(0);
	assert_int_equal(pd_pprof_encode(r, 0, out, &err), 0);
	pd_profile_free(r);
}

static void test_premap_locations_same_merge(void **state)
{
	(void)state;
	enum { N = 5 };
	struct tb in[N];
	for (int k = 0; k < N; k++)
		pm_profile(k, &in[k]);
	struct pd_buf ref;
	pm_merge(in, N, false, false, &ref);
	for (int v = 1; v < 4; v++) {
		struct pd_buf got;
		pm_merge(in, N, v & 1, v & 2, &got);
		assert_int_equal(got.len, ref.len);
		assert_memory_equal(got.ptr, ref.ptr, ref.len);
		pd_buf_free(&got);
	}
	/* the relocation happened: one mapping per file, at profile 0's start */
	struct pd_profile *r;
	struct pd_err err = {0};
	assert_int_equal(pd_pprof_decode(ref.ptr, ref.len, NULL, &r, &err), 0);
	assert_int_equal(r->nmappings, 3);
	for (uint32_t i = 0; i < r->nmappings; i++) {
		if (!strcmp(tu_str(r, r->mappings[i].filename), "/bin/app"))
			assert_int_equal(r->mappings[i].start, 0x400000);
		if (!strcmp(tu_str(r, r->mappings[i].filename), "/lib/liby.so"))
			assert_int_equal(r->mappings[i].start, 0x7d0000000000ULL);
	}
	pd_profile_free(r);
	pd_buf_free(&ref);
	for (int k = 0; k < N; k++)
		tb_free(&in[k]);
}

/* Streaming a profile's samples straight into the merger gives the same
 * result as decoding it first; a callback error stops the decode. */
static void test_add_encoded_equals_decode_add(void **state)
{
	(void)state;
	enum { N = 10 };
	struct pd_profile *ps[N];
	struct pd_buf enc[N];
	struct pd_err err;
	for (int i = 0; i < N; i++) {
		ps[i] = random_profile(i);
		enc[i] = (struct pd_buf)PD_BUF_INIT(0);
		assert_int_equal(pd_pprof_encode(ps[i], i % 2 ? 6 : 0, &enc[i], &err), 0); /* gzip and raw */
	}
	struct pd_merger *a = pd_merger_new(), *b = pd_merger_new();
	for (int i = 0; i < N; i++) {
		assert_int_equal(pd_merger_add(a, ps[i], &err), 0);
		assert_int_equal(pd_merger_add_encoded(b, enc[i].ptr, enc[i].len, NULL, &err), 0);
	}
	assert_int_equal(pd_merger_count(b), N);
	struct pd_profile *pa, *pb;
	assert_int_equal(pd_merger_finish(a, &pa, &err), 0);
	assert_int_equal(pd_merger_finish(b, &pb, &err), 0);
	struct pd_buf ba = PD_BUF_INIT(0), bb = PD_BUF_INIT(0);
	assert_int_equal(pd_pprof_encode(pa, 0, &ba, &err), 0);
	assert_int_equal(pd_pprof_encode(pb, 0, &bb, &err), 0);
	assert_int_equal(ba.len, bb.len);
	assert_memory_equal(ba.ptr, bb.ptr, ba.len);
	/* an incompatible profile is refused before any of its samples */
	struct pb h;
	pb_init(&h);
	pb_sample_type(&h, "inuse_space", "bytes");
	pb_period_type(&h, "space", "bytes", 524288);
	pb_finish(&h);
	assert_int_equal(pd_merger_add_encoded(b, h.b.p, h.b.len, NULL, &err), PD_EINCOMPAT);
	assert_contains(err.msg, "heap");
	pb_free(&h);
	/* garbage: the decoder's error */
	assert_int_equal(pd_merger_add_encoded(b, (const uint8_t *)"\x0b", 1, NULL, &err), PD_EINVAL);
	pd_buf_free(&ba);
	pd_buf_free(&bb);
	pd_profile_free(pa);
	pd_profile_free(pb);
	pd_merger_free(a);
	pd_merger_free(b);
	for (int i = 0; i < N; i++) {
		pd_buf_free(&enc[i]);
		pd_profile_free(ps[i]);
	}
}

static int count_samples(void *ctx, const struct pd_profile *p, const struct pd_sample *s, struct pd_err *err)
{
	(void)p;
	(void)s;
	int *n = ctx;
	if (++*n == 3)
		return pd_errf(err, PD_ELIMIT, "stop at the third sample");
	return 0;
}

static void test_decode_stream_callback_stops(void **state)
{
	(void)state;
	struct pd_profile *src = random_profile(3);
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(src, 0, &b, &err), 0);
	assert_true(src->nsamples >= 3);
	int n = 0;
	struct pd_profile *p = NULL;
	assert_int_equal(pd_pprof_decode_stream(b.ptr, b.len, NULL, NULL, count_samples, &n, &p, &err), PD_ELIMIT);
	assert_int_equal(n, 3);
	assert_null(p);
	assert_contains(err.msg, "third sample");
	pd_buf_free(&b);
	pd_profile_free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_stack_and_labels_summed),
		cmocka_unit_test(test_values_wrap_as_go),
		cmocka_unit_test(test_different_labels_kept_apart),
		cmocka_unit_test(test_label_order_canonical),
		cmocka_unit_test(test_zero_samples_skipped),
		cmocka_unit_test(test_zero_sum_dropped_with_entities),
		cmocka_unit_test(test_header_combination),
		cmocka_unit_test(test_incompatible_types),
		cmocka_unit_test(test_function_key),
		cmocka_unit_test(test_mapping_aslr),
		cmocka_unit_test(test_first_mapping_is_id_1),
		cmocka_unit_test(test_ids_renumbered_first_seen),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_merger_empty),
		cmocka_unit_test(test_merge_1000_streamed),
		cmocka_unit_test(test_merge_associative),
		cmocka_unit_test(test_merger_memo_reuse),
		cmocka_unit_test(test_location_key_lines),
		cmocka_unit_test(test_agg_sums),
		cmocka_unit_test(test_agg_first_seen_order_many),
		cmocka_unit_test(test_agg_max_rows),
		cmocka_unit_test(test_agg_zero_values),
		cmocka_unit_test(test_top_flat_cum),
		cmocka_unit_test(test_folded_exact),
		cmocka_unit_test(test_fmt_value_like_pprof),
		cmocka_unit_test(test_fmt_value_units_like_pprof),
		cmocka_unit_test(test_report_total_as_go),
		cmocka_unit_test(test_drop_frames_as_go),
		cmocka_unit_test(test_percent_as_go),
		cmocka_unit_test(test_func_name_as_pprof),
		cmocka_unit_test(test_partial_merge_equals_sequential),
		cmocka_unit_test(test_partial_merge_data_has_zero_rows),
		cmocka_unit_test(test_add_encoded_equals_decode_add),
		cmocka_unit_test(test_premap_locations_same_merge),
		cmocka_unit_test(test_decode_stream_callback_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
