/*
 * test_legacy.c — the legacy profile parsers (lib/pprof/legacy.c) and the
 * decoder's fallback to them: each format's sample types, units, periods,
 * values (with Go's scaling), locations and mappings as profile.Parse makes
 * them (the e2e test test_legacy.sh compares whole files with Go itself),
 * hostile inputs, and the messages for bytes that are not profiles.
 */
#include "testutil.h"
#include "../../lib/pprof/legacy.h"

#include <math.h>

static struct pd_profile *parse_ok(const char *text, size_t len)
{
	struct pd_profile *p = NULL;
	struct pd_err err = {0};
	int rc = pd_pprof_decode((const uint8_t *)text, len, NULL, &p, &err);
	if (rc)
		fail_msg("decode failed: %s", err.msg);
	return p;
}
#define PARSE(s) parse_ok((s), strlen(s))

/* decode must fail with code; the message must contain want */
static void parse_fails(const char *text, size_t len, const struct pd_pprof_limits *lim, int code, const char *want)
{
	struct pd_profile *p = NULL;
	struct pd_err err = {0};
	int rc = pd_pprof_decode((const uint8_t *)text, len, lim, &p, &err);
	if (rc != code || !strstr(err.msg, want))
		fail_msg("want %d \"%s\", got %d \"%s\"", code, want, rc, err.msg);
	assert_null(p);
	/* never a protobuf field error for something that is not protobuf */
	if (strstr(want, "field") == NULL)
		assert_null(strstr(err.msg, "wire type"));
}

static void assert_type(const struct pd_profile *p, uint32_t i, const char *type, const char *unit)
{
	assert_string_equal(tu_str(p, p->sample_types[i].type), type);
	assert_string_equal(tu_str(p, p->sample_types[i].unit), unit);
}

static int64_t scaled(int64_t v, int64_t count, int64_t size, int64_t rate)
{
	double avg = (double)size / (double)count;
	return (int64_t)((double)v * (1 / (1 - exp(-avg / (double)rate))));
}

static void test_go_heap(void **state)
{
	(void)state;
	const char *t = "heap profile: 3: 6144 [10: 20480] @ heap/1048576\n"
			"1: 2048 [5: 10240] @ 0x4a1b2d 0x4a1c01\n"
			"#\t0x4a1b2c\tmain.foo+0x2c\t/src/main.go:12\n"
			"\n"
			"0: 0 [3: 6144] @ 0x4a1d01 0x4a1c01\n"
			"\n"
			"# runtime.MemStats\n# Alloc = 123456\n";
	struct pd_profile *p = PARSE(t);
	assert_int_equal(p->nsample_types, 4);
	assert_type(p, 0, "alloc_objects", "count");
	assert_type(p, 1, "alloc_space", "bytes");
	assert_type(p, 2, "inuse_objects", "count");
	assert_type(p, 3, "inuse_space", "bytes");
	assert_string_equal(tu_str(p, p->period_type.type), "space");
	assert_string_equal(tu_str(p, p->period_type.unit), "bytes");
	assert_int_equal(p->period, 524288); /* heap/N: N is 2*MemProfileRate */
	assert_int_equal(p->nsamples, 2);
	const struct pd_sample *s = &p->samples[0];
	assert_int_equal(s->values[0], scaled(5, 5, 10240, 524288));
	assert_int_equal(s->values[1], scaled(10240, 5, 10240, 524288));
	assert_int_equal(s->values[2], scaled(1, 1, 2048, 524288));
	assert_int_equal(s->values[3], scaled(2048, 1, 2048, 524288));
	assert_int_equal(s->nlabels, 1);
	assert_string_equal(tu_str(p, s->labels[0].key), "bytes");
	assert_int_equal(s->labels[0].num, 2048);
	assert_int_equal(p->samples[1].values[2], 0);
	/* addresses -1, shared locations, the # lines ignored (Go does) */
	assert_int_equal(p->nlocations, 3);
	assert_int_equal(p->locations[s->locs[0]].address, 0x4a1b2c);
	assert_int_equal(p->locations[s->locs[1]].address, 0x4a1c00);
	assert_int_equal(p->samples[1].locs[1], s->locs[1]);
	assert_int_equal(p->nfunctions, 0);
	/* no memory map: one fake mapping covering everything */
	assert_int_equal(p->nmappings, 1);
	assert_int_equal(p->mappings[0].start, 0);
	assert_int_equal(p->mappings[0].limit, UINT64_MAX);
	assert_int_equal(p->locations[0].mapping, 0);
	assert_true(strstr(tu_str(p, p->drop_frames), "runtime\\..*") != NULL);
	assert_string_equal(pd_profile_kind(p), "heap");
	assert_string_equal(pd_profile_go_type(p), "heap");
	pd_profile_free(p);

	/* in-use = allocated: two types, as Go */
	p = PARSE("heap profile: 1: 64 [1: 64] @ heapprofile\n1: 64 [1: 64] @ 0x10\n");
	assert_int_equal(p->nsample_types, 2);
	assert_type(p, 0, "objects", "count");
	assert_type(p, 1, "space", "bytes");
	assert_int_equal(p->period, 1);
	assert_int_equal(p->samples[0].values[1], 64); /* heapprofile: not scaled */
	pd_profile_free(p);
}

static void test_go_contention(void **state)
{
	(void)state;
	struct pd_profile *p = PARSE("--- contention:\ncycles/second=2000000000\n"
				     "3000 2 @ 0x44a0e1 0x46ef01\n#\t0x44a0e0\tsync.(*Mutex).Lock+0x40\n");
	assert_int_equal(p->nsample_types, 2);
	assert_type(p, 0, "contentions", "count");
	assert_type(p, 1, "delay", "nanoseconds");
	assert_string_equal(tu_str(p, p->period_type.type), "contentions");
	assert_int_equal(p->period, 1);
	assert_int_equal(p->samples[0].values[0], 2);
	assert_int_equal(p->samples[0].values[1], 1500); /* cycles at 2 GHz */
	assert_string_equal(pd_profile_go_type(p), "block");
	const char *t;
	struct pd_err err;
	assert_int_equal(pd_profile_check_type(p, NULL, &t, &err), 0);
	assert_string_equal(t, "block");
	pd_profile_free(p);
	p = PARSE("--- mutex:\ncycles/second=1000000000\nsampling period=5\n100 3 @ 0x44a2a1\n");
	assert_int_equal(p->period, 5);
	assert_int_equal(p->samples[0].values[0], 15);
	assert_int_equal(p->samples[0].values[1], 500);
	assert_string_equal(pd_profile_go_type(p), "mutex");
	pd_profile_free(p);
	/* base-0 numbers as Go's strconv: 0x, octal */
	p = PARSE("--- contention:\ncycles/second=0x3b9aca00\nsampling period=010\nms since reset=2\n10 1 @ 0x10\n");
	assert_int_equal(p->period, 8);
	assert_int_equal(p->duration_nanos, 2000000);
	assert_int_equal(p->samples[0].values[1], 80);
	pd_profile_free(p);
	/* "123 @": the regexp's backtracking splits the digits as Go's does */
	p = PARSE("--- contention:\n123 @ 0x10\n");
	assert_int_equal(p->samples[0].values[0], 3);
	assert_int_equal(p->samples[0].values[1], 12);
	pd_profile_free(p);
}

static void test_go_count(void **state)
{
	(void)state;
	struct pd_profile *p = PARSE("goroutine profile: total 4\n3 @ 0x43a5c6 0x40743b\n"
				     "#\t0x43a5c5\truntime.gopark+0xe5\n\n010 @ 0x40743b\n");
	assert_type(p, 0, "goroutine", "count");
	assert_string_equal(tu_str(p, p->period_type.type), "goroutine");
	assert_int_equal(p->period, 1);
	assert_int_equal(p->nsamples, 2);
	assert_int_equal(p->samples[1].values[0], 8); /* ParseInt(s, 0, 64): octal */
	assert_int_equal(p->nlocations, 2);
	assert_string_equal(pd_profile_go_type(p), "goroutine");
	assert_true(strstr(tu_str(p, p->drop_frames), "ProfileData::Add") != NULL);
	pd_profile_free(p);
	p = PARSE("threadcreate profile: total 1\n1 @ 0x43c2e1\n");
	assert_string_equal(pd_profile_go_type(p), "threadcreate");
	pd_profile_free(p);
	/* Go 1.19's threadcreate?debug=1 "N @" without addresses: Go refuses it */
	const char *t = "threadcreate profile: total 10\n9 @\n#\t0x0\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "threadcreate profile, line 2: malformed");
}

/* A legacy binary CPU profile: 64-bit little-endian or 32-bit big-endian words. */
static void put_word(struct tb *b, uint64_t v, int size, bool big)
{
	for (int i = 0; i < size; i++) {
		int sh = big ? 8 * (size - 1 - i) : 8 * i;
		uint8_t c = (uint8_t)(v >> sh);
		tb_raw(b, &c, 1);
	}
}

static void cpu_profile(struct tb *b, int size, bool big, const char *maps)
{
	uint64_t w[] = {0, 3, 0, 10000, 0, /* header: period 10000 us */
			5, 2, 0x401000, 0x402001, 7, 1, 0x401000, 0, 1, 0};
	tb_init(b);
	for (size_t i = 0; i < sizeof w / sizeof *w; i++)
		put_word(b, w[i], size, big);
	tb_raw(b, maps, strlen(maps));
}

static void test_binary_cpu(void **state)
{
	(void)state;
	const char *maps = "00400000-00500000 r-xp 00000000 fc:01 123 /bin/app\n"
			   "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 [heap]\n";
	for (int f = 0; f < 2; f++) {
		struct tb b;
		cpu_profile(&b, f ? 4 : 8, f == 1, maps);
		struct pd_profile *p = parse_ok((const char *)b.p, b.len);
		assert_int_equal(p->nsample_types, 2);
		assert_type(p, 0, "samples", "count");
		assert_type(p, 1, "cpu", "nanoseconds");
		assert_int_equal(p->period, 10000000);
		assert_int_equal(p->nsamples, 2);
		assert_int_equal(p->samples[0].values[0], 5);
		assert_int_equal(p->samples[0].values[1], 50000000);
		assert_int_equal(p->samples[0].nlocs, 2);
		/* leaf kept, callers -1 */
		assert_int_equal(p->locations[p->samples[0].locs[0]].address, 0x401000);
		assert_int_equal(p->locations[p->samples[0].locs[1]].address, 0x402000);
		assert_int_equal(p->nmappings, 1); /* the rw-p line is not executable */
		assert_string_equal(tu_str(p, p->mappings[0].filename), "/bin/app");
		assert_int_equal(p->mappings[0].start, 0x400000);
		assert_int_equal(p->locations[0].mapping, 0);
		assert_string_equal(pd_profile_go_type(p), "cpu");
		pd_profile_free(p);
		tb_free(&b);
	}
	/* truncated: refused with the offset */
	struct tb b;
	tb_init(&b);
	uint64_t w[] = {0, 3, 0, 100, 0, 1, 1000};
	for (size_t i = 0; i < 7; i++)
		put_word(&b, w[i], 8, false);
	parse_fails((const char *)b.p, b.len, NULL, PD_EINVAL, "legacy CPU profile, offset 40: truncated");
	tb_free(&b);
}

/* A CPU record longer than the bytes left is Go's errUnrecognized, so its
 * text parsers read the input next: here a heap header in the first "line"
 * (the binary header's bytes), for a C++ header and a Java one. */
static void test_cpu_falls_to_text(void **state)
{
	(void)state;
	const char *heap = "heap profile: 1: 64 [1: 64] @ heapprofile\n1: 64 [1: 64] @ 0x10\n";
	for (uint64_t java = 0; java < 2; java++) {
		struct tb b;
		tb_init(&b);
		uint64_t w[] = {0, 3, java, 100, 0};
		for (size_t i = 0; i < 5; i++)
			put_word(&b, w[i], 8, false);
		tb_raw(&b, heap, strlen(heap));
		struct pd_profile *p = parse_ok((const char *)b.p, b.len);
		assert_string_equal(pd_profile_go_type(p), "heap");
		assert_int_equal(p->nsamples, 1);
		assert_int_equal(p->samples[0].values[1], 64);
		pd_profile_free(p);
		tb_free(&b);
	}
}

static void test_hostile(void **state)
{
	(void)state;
	const char *t;
	/* numbers over int64 / uint64 */
	t = "heap profile: 1: 1 [1: 1] @ heap/2\n99999999999999999999: 1 [1: 1] @ 0x10\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "heap profile, line 2: malformed sample");
	t = "heap profile: 1: 1 [1: 1] @ heap/2\n1: 1 [1: 1] @ 0x1ffffffffffffffff\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "line 2: malformed sample: failed to parse 0x1ffffffffffffffff");
	t = "goroutine profile: total 1\n99999999999999999999 @ 0x10\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "goroutine profile, line 2: malformed count");
	t = "heap profile: 1: 1 [1: 1] @ heap/2\n0: 5 [1: 1] @ 0x10\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "inuse count was 0 but inuse bytes was 5");
	/* MinInt64 / -1 and huge scaled values: Go's wrapping and float rules, no UB */
	struct pd_profile *p =
		PARSE("heap profile: 1: 1 [1: 1] @ heap_v2/1\n-1: -9223372036854775808 [1: 9223372036854775807] @ 0x10\n");
	assert_int_equal(p->samples[0].labels[0].num, INT64_MIN);
	pd_profile_free(p);
	p = PARSE("--- contention:\ncycles/second=1\nsampling period=9223372036854775807\n"
		  "9223372036854775807 9223372036854775807 @ 0x10\n");
	assert_int_equal(p->samples[0].values[1], INT64_MIN); /* int64(+Inf-ish float) on amd64 */
	pd_profile_free(p);
	/* 10^6 frames on a line: over the 64 KiB line Go's scanner takes */
	size_t n = 1000000;
	char *big = malloc(40 + n * 6);
	assert_non_null(big);
	size_t o = (size_t)sprintf(big, "goroutine profile: total 1\n1 @");
	for (size_t i = 0; i < n; i++)
		o += (size_t)sprintf(big + o, " 0x%x", (unsigned)(i & 0xff) + 16);
	parse_fails(big, o, NULL, PD_EINVAL, "line 2: longer than 65535 bytes");
	/* under the line limit, over a stack depth cap */
	struct pd_pprof_limits lim = {0};
	lim.max_stack_depth = 100;
	size_t o2 = (size_t)sprintf(big, "goroutine profile: total 1\n1 @");
	for (size_t i = 0; i < 1000; i++)
		o2 += (size_t)sprintf(big + o2, " 0x%x", (unsigned)i + 16);
	parse_fails(big, o2, &lim, PD_ELIMIT, "stack depth limit");
	/* sample, location and memory caps */
	o = (size_t)sprintf(big, "goroutine profile: total 1\n");
	for (size_t i = 0; i < 2000; i++)
		o += (size_t)sprintf(big + o, "1 @ 0x%zx\n", i + 16);
	memset(&lim, 0, sizeof lim);
	lim.max_samples = 1000;
	parse_fails(big, o, &lim, PD_ELIMIT, "more than 1000 samples");
	memset(&lim, 0, sizeof lim);
	lim.max_locations = 1000;
	parse_fails(big, o, &lim, PD_ELIMIT, "more than 1000 locations");
	memset(&lim, 0, sizeof lim);
	lim.max_memory = 100000;
	parse_fails(big, o, &lim, PD_ELIMIT, "memory");
	free(big);
	/* missing header: not a profile, and said so */
	t = "1: 2048 [5: 10240] @ 0x4a1b2d\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "text that is not a profile (first line: \"1: 2048");
	/* a bad sample line after a good header: the line number */
	t = "--- mutex:\ncycles/second=1\n\nxyz @ 0x10\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "contention profile, line 4: not a contention sample");
	/* memory map $attr expansion is bounded */
	o = (size_t)sprintf(big = malloc(200000), "heap profile: 1: 1 [1: 1] @ heap/2\n--- Memory map: ---\na=");
	memset(big + o, 'x', 60000);
	o += 60000;
	o += (size_t)sprintf(big + o, "\n");
	for (int i = 0; i < 30; i++)
		o += (size_t)sprintf(big + o, "$a");
	parse_fails(big, o, NULL, PD_ELIMIT, "after $attr substitution");
	free(big);
}

/* procMapsRE/briefMapsRE's `(?:0x)?` before the limit: when the start's
 * digits run into "0x" ("fcdc20x7efb..."), Go's backtracking gives the 0 to
 * that 0x, and the limit is the number after it (not 0). */
static void test_maps_0x_split(void **state)
{
	(void)state;
	struct pd_profile *p = PARSE("heap profile: 1: 64 [1: 64] @ heapprofile\n1: 64 [1: 64] @ 0x401001 0xfcdc3\n"
				     "--- Memory map: ---\n"
				     "4000000x4100000 r-xp 00000000 fc:01 123 /bin/app\n"
				     "fcdc20x7efb05b6d14e: start_thread\n");
	assert_int_equal(p->nmappings, 2);
	assert_int_equal(p->mappings[0].start, 0x400000);
	assert_int_equal(p->mappings[0].limit, 0x4100000);
	assert_string_equal(tu_str(p, p->mappings[0].filename), "/bin/app");
	assert_int_equal(p->mappings[1].start, 0xfcdc2);
	assert_int_equal(p->mappings[1].limit, 0x7efb05b6d14e);
	assert_string_equal(tu_str(p, p->mappings[1].filename), "start_thread");
	assert_int_equal(p->locations[0].mapping, 0);
	assert_int_equal(p->locations[1].mapping, 1);
	pd_profile_free(p);
	/* a split mapping "1"-"bccc97" continues "2432"-"1" (adjacent): one mapping */
	p = PARSE("heap profile: 1: 64 [1: 64] @ heapprofile\n1: 64 [1: 64] @ 0x3001\n--- Memory map: ---\n"
		  "2432 1 @\n10xbccc97\n");
	assert_int_equal(p->nmappings, 1);
	assert_int_equal(p->mappings[0].start, 0x2432);
	assert_int_equal(p->mappings[0].limit, 0xbccc97);
	pd_profile_free(p);
}

/* strings.TrimSpace trims every Unicode white space: lines of U+3000 are
 * blank, U+2003 before # makes a comment, NBSP or U+205F around a value or
 * after the addresses is not part of them. */
static void test_unicode_space(void **state)
{
	(void)state;
	struct pd_profile *p = PARSE("heap profile: 1: 64 [1: 64] @ heapprofile\n\u3000\n\u2003# x\n"
				     "1: 64 [1: 64] @ 0x10\u205f\n");
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->samples[0].values[1], 64);
	pd_profile_free(p);
	p = PARSE("--- mutex:\ncycles/second =\u3000100\u00a0\n\u1680\u2028\n1 2 @ 0x10\n");
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->samples[0].values[1], 10000000); /* 1 cycle at 100 Hz */
	pd_profile_free(p);
	/* U+200B is not white space (and a cut U+3000 is not one) */
	const char *t = "--- mutex:\ncycles/second = 100\n\u200b\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "line 3: not a contention sample");
	t = "--- mutex:\ncycles/second = 100\n\xe3\x80\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "line 3: not a contention sample");
}

/* A line that is not a contention sample makes a contention profile
 * unrecognized (parseContentionSample's errUnrecognized), so Go's next
 * parser reads it: `--- contentionz 1 ---` is then a Java profile. */
static void test_contention_falls_to_java(void **state)
{
	(void)state;
	/* Go: an empty Java contention profile, no sample types, the CPU
	 * profiler's frames to drop (addLegacyFrameInfo's default) */
	struct pd_profile *p = PARSE("--- contentionz 1 ---\nxyz\n");
	assert_string_equal(p->legacy_format, "Java contention profile");
	assert_int_equal(p->nsample_types, 0);
	assert_int_equal(p->nsamples, 0);
	assert_string_equal(tu_str(p, p->period_type.type), "");
	assert_non_null(strstr(tu_str(p, p->drop_frames), "ProfileData::Add"));
	pd_profile_free(p);
	/* Go: refused by its Java parser too ("second", before the '=', is no
	 * Java attribute) */
	const char *t = "--- contentionz 1 ---\ncycles/second = 100\n1 2 @ 0x10\n\n  102  40]   243\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL,
		    "Java contention profile, line 2: \"second\" is not an attribute of a Java contentionz profile");
	/* any other header: nothing else reads it; the line is named */
	t = "--- contentionz 2 ---\n1 2 @ 0x10\nxyz\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "contention profile, line 3: not a contention sample");
}

/* The string of a location's function (its only line) and that line. */
static const char *loc_fn(const struct pd_profile *p, uint32_t loc, const char **file, int64_t *line)
{
	const struct pd_location *l = &p->locations[loc];
	assert_int_equal(l->nlines, 1);
	const struct pd_function *f = &p->functions[l->lines[0].function];
	assert_int_equal(f->name, f->system_name);
	*file = tu_str(p, f->filename);
	*line = l->lines[0].line;
	return tu_str(p, f->name);
}

/* Java heapz: "bytes count @ addresses" with Go's 512 KiB sampling scale,
 * a "bytes" label, addresses as they are (no -1), and symbol lines that
 * name the function, file and line of each location; p.Aggregate clears
 * the addresses, and only unsymbolized locations get the fake mapping. */
static void test_java_heap(void **state)
{
	(void)state;
	const char *file;
	int64_t line;
	struct pd_profile *p = PARSE("--- heapz 1 ---\n"
				     "format = java\n"
				     "resolution = bytes\n"
				     "          7048     1 @ 0x00000003 0x00000004\n"
				     "          4752     9 @ 0x00000004 0x00000005\n"
				     "\n"
				     " 0x0000003 com.example.A.alloc (A.java:12)\n"
				     " 0x0000004 com.example.B.run (B.java:0)\n"
				     " 0x0000009 com.example.Unused.f (U.java:1)\n");
	assert_string_equal(p->legacy_format, "Java heap profile");
	assert_int_equal(p->nsample_types, 2);
	assert_type(p, 0, "inuse_objects", "count");
	assert_type(p, 1, "inuse_space", "bytes");
	assert_string_equal(tu_str(p, p->period_type.type), "");
	assert_string_equal(tu_str(p, p->period_type.unit), "");
	assert_int_equal(p->period, 0);
	assert_int_equal(p->nsamples, 2);
	const struct pd_sample *s = &p->samples[0];
	assert_int_equal(s->values[0], scaled(1, 1, 7048, 524288));
	assert_int_equal(s->values[1], scaled(7048, 1, 7048, 524288));
	assert_int_equal(s->nlabels, 1);
	assert_string_equal(tu_str(p, s->labels[0].key), "bytes");
	assert_int_equal(s->labels[0].num, 7048);
	assert_int_equal(p->samples[1].labels[0].num, 528); /* 4752 / 9 */
	assert_int_equal(p->samples[1].values[0], scaled(9, 9, 4752, 524288));
	/* 3 locations, 2 functions (the unused symbol makes none) */
	assert_int_equal(p->nlocations, 3);
	assert_int_equal(p->nfunctions, 2);
	assert_string_equal(loc_fn(p, 0, &file, &line), "com.example.A.alloc");
	assert_string_equal(file, "A.java");
	assert_int_equal(line, 12);
	assert_string_equal(loc_fn(p, 1, &file, &line), "com.example.B.run");
	assert_int_equal(line, 0);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(p->locations[i].address, 0);
	assert_int_equal(p->locations[0].mapping, PD_NONE);
	assert_int_equal(p->locations[2].nlines, 0); /* 0x5 has no symbol */
	assert_int_equal(p->nmappings, 1);
	assert_int_equal(p->locations[2].mapping, 0);
	assert_int_equal(p->mappings[0].limit, UINT64_MAX);
	/* addLegacyFrameInfo: heapz sample types */
	assert_non_null(strstr(tu_str(p, p->drop_frames), "tc_malloc"));
	assert_string_equal(tu_str(p, p->keep_frames), "runtime\\.panic|runtime\\.reflectcall|runtime\\.call[0-9]*");
	pd_profile_free(p);
	/* no samples and no resolution: an empty profile without sample types */
	p = PARSE("--- heapz 1 ---\nformat = java\n");
	assert_int_equal(p->nsample_types, 0);
	assert_int_equal(p->nsamples, 0);
	pd_profile_free(p);
}

/* Java contentionz: "delay count @ addresses", both times the sampling
 * period; numbers are base 0 (010 is 8), line numbers base 10 (03 is 3). */
static void test_java_contention(void **state)
{
	(void)state;
	const char *file;
	int64_t line;
	struct pd_profile *p = PARSE("--- contentionz 1 ---\n"
				     "format = java\n"
				     "resolution = microseconds\n"
				     "sampling period = 100\n"
				     "ms since reset = 6019923\n"
				     "   14     2 @ 0x00000003 0x00000004\n"
				     "  010     1 @ 0x00000003\n"
				     "\n"
				     " 0x0000003 com.example.Lock.acquire (Lock.java:03)\n"
				     " 0x0000004 com.example.Main.main (Main.java:7)\n");
	assert_string_equal(p->legacy_format, "Java contention profile");
	assert_type(p, 0, "contentions", "count");
	assert_type(p, 1, "delay", "microseconds");
	assert_string_equal(tu_str(p, p->period_type.type), "contentions");
	assert_string_equal(tu_str(p, p->period_type.unit), "count");
	assert_int_equal(p->period, 100);
	assert_int_equal(p->duration_nanos, (int64_t)6019923 * 1000000);
	assert_int_equal(p->nsamples, 2);
	assert_int_equal(p->samples[0].values[0], 200);
	assert_int_equal(p->samples[0].values[1], 1400);
	assert_int_equal(p->samples[1].values[0], 100);
	assert_int_equal(p->samples[1].values[1], 800);
	assert_int_equal(p->samples[0].nlabels, 0);
	assert_string_equal(loc_fn(p, 0, &file, &line), "com.example.Lock.acquire");
	assert_string_equal(file, "Lock.java");
	assert_int_equal(line, 3);
	assert_int_equal(p->nmappings, 0);
	assert_non_null(strstr(tu_str(p, p->drop_frames), "RecordLockProfileData"));
	assert_string_equal(pd_profile_kind(p), "block/mutex");
	pd_profile_free(p);
	/* a bad number is an error, not "unrecognized" */
	const char *t = "--- contentionz 1 ---\nformat = java\nresolution = microseconds\n 09 1 @ 0x3\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "Java contention profile, line 4: parsing sample 09 1 @ 0x3");
	t = "--- contentionz 1 ---\nsampling period = 1x\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "failed to parse attribute sampling period = 1x");
}

static void put_words(struct tb *b, const uint64_t *w, size_t n, int size, bool big)
{
	for (size_t i = 0; i < n; i++)
		put_word(b, w[i], size, big);
}

/* The legacy binary CPU format with a Java header (third word 1): samples
 * with their addresses as they are (no -1, no duplicate-leaf cleanup, no
 * stripping of a shared second frame), then symbol lines, no memory map. */
static void test_java_cpu(void **state)
{
	(void)state;
	const char *file, *syms = " 0x10 com.example.Main.work (Main.java:5)\n"
				  " 0x20 VM\n"
				  " 0x30 <generated stub/JIT code>\n"
				  " 0x21 com.example.Lib.call (/opt/lib/libfoo.so)\n";
	int64_t line;
	uint64_t w[] = {0, 3, 1, 10000, 0, /* Java, period 10000 us */
			2, 2, 0x10, 0x20, 1, 2, 0x21, 0x20, 4, 1, 0x30, 0, 1, 0};
	for (int f = 0; f < 2; f++) {
		struct tb b;
		tb_init(&b);
		put_words(&b, w, sizeof w / sizeof *w, f ? 4 : 8, f == 1);
		tb_raw(&b, syms, strlen(syms));
		struct pd_profile *p = parse_ok((const char *)b.p, b.len);
		assert_string_equal(p->legacy_format, "legacy Java CPU profile");
		assert_type(p, 0, "samples", "count");
		assert_type(p, 1, "cpu", "nanoseconds");
		assert_string_equal(tu_str(p, p->period_type.type), "cpu");
		assert_int_equal(p->period, 10000000);
		assert_int_equal(p->nsamples, 3);
		assert_int_equal(p->samples[0].values[0], 2);
		assert_int_equal(p->samples[0].values[1], 20000000);
		assert_int_equal(p->samples[0].nlocs, 2);
		assert_int_equal(p->samples[1].nlocs, 2);
		assert_int_equal(p->nlocations, 4);
		assert_string_equal(loc_fn(p, 0, &file, &line), "com.example.Main.work");
		assert_string_equal(file, "Main.java");
		assert_int_equal(line, 5);
		assert_string_equal(loc_fn(p, 1, &file, &line), "VM"); /* 0x20, not 0x1f */
		assert_string_equal(file, "");
		assert_string_equal(loc_fn(p, 2, &file, &line), "com.example.Lib.call");
		assert_string_equal(file, "libfoo.so");
		assert_string_equal(loc_fn(p, 3, &file, &line), "STUB");
		assert_int_equal(p->nmappings, 0);
		assert_string_equal(pd_profile_go_type(p), "cpu");
		pd_profile_free(p);
		tb_free(&b);
	}
}

/* The symbol regular expressions' answers (checked against Go's), and
 * what Go refuses. */
static void test_java_symbols(void **state)
{
	(void)state;
	const char *file;
	int64_t line;
	struct pd_profile *p = PARSE("--- heapz 1 ---\nresolution = bytes\n"
				     "1 1 @ 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8\n"
				     "0x1 f  (A.java:1)\n"        /* (.*) keeps all but one space */
				     "0x2 g (a:b:12)\n"           /* the number after the last ':' */
				     "0x3 h (x.java:-3)\n"        /* a line <= 0 is 0 */
				     "0x4 i (/opt/dir/)\n"        /* filepath.Base */
				     "0x5 j ()\n"                 /* filepath.Base("") */
				     "0x6 f (B.java:2)\n"         /* "f", not "f " */
				     "0x7 k (a:1) (b:x)\n"        /* the last "\s(" */
				     "0x8 first (a.java:1)\n"
				     "0x8 second (b.java:2)\n");  /* the last line for an address wins */
	assert_string_equal(loc_fn(p, 0, &file, &line), "f ");
	assert_string_equal(file, "A.java");
	assert_string_equal(loc_fn(p, 1, &file, &line), "g");
	assert_string_equal(file, "a:b");
	assert_int_equal(line, 12);
	assert_string_equal(loc_fn(p, 2, &file, &line), "h");
	assert_int_equal(line, 0);
	assert_string_equal(loc_fn(p, 3, &file, &line), "i");
	assert_string_equal(file, "dir");
	assert_string_equal(loc_fn(p, 4, &file, &line), "j");
	assert_string_equal(file, ".");
	assert_string_equal(loc_fn(p, 5, &file, &line), "f");
	assert_string_equal(file, "B.java");
	assert_int_equal(line, 2);
	assert_string_equal(loc_fn(p, 6, &file, &line), "k (a:1)");
	assert_string_equal(file, "b:x");
	assert_string_equal(loc_fn(p, 7, &file, &line), "second");
	/* "f ", g, h, i, j, f, k, second: "first" lost its only location */
	assert_int_equal(p->nfunctions, 8);
	pd_profile_free(p);
	/* a function keeps the file it was first seen with */
	p = PARSE("--- heapz 1 ---\nresolution = bytes\n1 1 @ 0x1 0x2\n0x1 f (B.java:2)\n0x2 f (C.java:3)\n");
	assert_int_equal(p->nfunctions, 1);
	assert_string_equal(loc_fn(p, 1, &file, &line), "f");
	assert_string_equal(file, "B.java");
	assert_int_equal(line, 3);
	pd_profile_free(p);
	/* refusals: a symbol address over 64 bits (used or not), a count of 0,
	 * samples without sample types, an attribute neither format has */
	const char *t = "--- heapz 1 ---\nresolution = bytes\n1 1 @ 0x1\n0x1ffffffffffffffff f\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "Java heap profile, line 4: parsing symbol 0x1ffffffffffffffff");
	t = "--- heapz 1 ---\nresolution = bytes\n5 0 @ 0x1\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "line 3: parsing sample 5 0 @ 0x1: second value must be non-zero");
	t = "--- heapz 1 ---\nformat = java\n1 1 @ 0x1\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "missing sample type information");
	t = "--- heapz 1 ---\nsampling period = 100\n1 1 @ 0x1\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "Java heap profile, line 2: \"sampling period\" is not an attribute");
	t = "--- heapz 1 ---\nformat = cpp\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "format \"cpp\": not a Java profile");
	/* caps hold: functions */
	struct pd_pprof_limits lim = {0};
	lim.max_functions = 1;
	t = "--- heapz 1 ---\nresolution = bytes\n1 1 @ 0x1 0x2\n0x1 f\n0x2 g\n";
	parse_fails(t, strlen(t), &lim, PD_ELIMIT, "more than 1 functions");
}

/* Go's Java parser reads lines of any length; the C++ contention parser
 * before it fails at one (bufio.Scanner) if it gets that far. */
static void test_java_long_lines(void **state)
{
	(void)state;
	size_t n = 70000;
	char *big = malloc(n + 200);
	assert_non_null(big);
	size_t o = (size_t)sprintf(big, "--- heapz 1 ---\nresolution = bytes\n1 1 @ 0x1\n0x1 ");
	memset(big + o, 'f', n);
	o += n;
	o += (size_t)sprintf(big + o, " (A.java:1)\n");
	struct pd_profile *p = parse_ok(big, o);
	assert_int_equal(p->nfunctions, 1);
	assert_int_equal(p->strings[p->functions[0].name].len, n);
	pd_profile_free(p);
	o = (size_t)sprintf(big, "--- contentionz 1 ---\nsampling period = 100\n1 1 @ 0x1\n");
	memset(big + o, 'x', n);
	o += n;
	parse_fails(big, o, NULL, PD_EINVAL, "contention profile, line 4: longer than 65535 bytes");
	free(big);
}

static void test_refusals(void **state)
{
	(void)state;
	const char *t = "<!DOCTYPE html>\n<html><body>login</body></html>";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "an HTML page");
	t = "  {\"error\": \"unauthorized\"}";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "is JSON");
	t = "goroutine 1 [running]:\nmain.main()\n";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "goroutine dump (debug=2");
	static const uint8_t bin[] = {0xff, 0xfe, 0x00, 0x01, 0x02};
	parse_fails((const char *)bin, sizeof bin, NULL, PD_EINVAL, "5 bytes of binary data that is neither protobuf");
	/* a Java header alone, without a newline: no parser takes it (Go's
	 * SplitAfterN finds one part) */
	t = "--- heapz 1 ---";
	parse_fails(t, strlen(t), NULL, PD_EINVAL, "text that is not a profile (first line: \"--- heapz 1 ---");
	/* protobuf keeps decoding, and a damaged one keeps its protobuf error */
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	struct pd_profile *p = parse_ok((const char *)b.p, b.len);
	pd_profile_free(p);
	parse_fails((const char *)b.p, b.len - 1, NULL, PD_EINVAL, "offset");
	tb_free(&b);
}

static void test_stream_and_merge(void **state)
{
	(void)state;
	const char *t = "goroutine profile: total 4\n3 @ 0x10 0x20\n1 @ 0x20\n";
	struct pd_merger *m = pd_merger_new();
	struct pd_err err;
	assert_int_equal(pd_merger_add_encoded(m, (const uint8_t *)t, strlen(t), NULL, &err), 0);
	assert_int_equal(pd_merger_add_encoded(m, (const uint8_t *)t, strlen(t), NULL, &err), 0);
	struct pd_profile *p = NULL;
	assert_int_equal(pd_merger_finish(m, &p, &err), 0);
	assert_int_equal(p->nsamples, 2);
	assert_int_equal(p->samples[0].values[0], 6);
	pd_profile_free(p);
	pd_merger_free(m);
	/* the parser alone */
	assert_int_equal(pd_legacy_parse((const uint8_t *)"hello", 5, NULL, &p, &err), PD_LEGACY_UNRECOGNIZED);
	assert_null(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_go_heap),	       cmocka_unit_test(test_go_contention), cmocka_unit_test(test_go_count),
		cmocka_unit_test(test_binary_cpu),     cmocka_unit_test(test_hostile),	     cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_stream_and_merge),
		cmocka_unit_test(test_maps_0x_split),
		cmocka_unit_test(test_unicode_space),
		cmocka_unit_test(test_contention_falls_to_java),
		cmocka_unit_test(test_cpu_falls_to_text),
		cmocka_unit_test(test_java_heap),
		cmocka_unit_test(test_java_contention),
		cmocka_unit_test(test_java_cpu),
		cmocka_unit_test(test_java_symbols),
		cmocka_unit_test(test_java_long_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
