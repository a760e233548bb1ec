/*
 * testutil.h — helpers shared by the cmocka unit tests.
 *
 * A tiny protobuf WRITER, independent of lib/pprof/encode.c, so the decoder
 * is tested against bytes built by hand (not by our own encoder):
 *   - struct tb: a growable byte buffer (aborts on OOM; tests only);
 *   - tb_varint / tb_uint / tb_int: varint fields (always written, even 0,
 *     so tests can put explicit zeros on the wire);
 *   - tb_bytes / tb_str / tb_msg: length-delimited fields, tb_msg appends a
 *     sub-message built in its own buffer;
 *   - tb_packed / tb_packed_i64: packed repeated varints;
 *   - tb_fixed64 / tb_fixed32 / tb_tag: the rest of the wire types.
 * On top of it, struct pb builds a profile field by field with strings
 * named by value (interned in order, "" first) and the string table written
 * LAST, as Go does. tu_minimal() writes the minimal valid profile.
 *
 * Also: tu_decode (decode or fail the test), tu_assert_profiles_equal (deep
 * comparison of two models), tu_str (string-table entry as a C string).
 */
#ifndef PD_TESTUTIL_H
#define PD_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../lib/util/util.h"
#include "../../lib/util/gz.h"
#include "../../lib/pprof/pprof.h"

/* ---- byte buffer ---------------------------------------------------------- */

struct tb {
	uint8_t *p;
	size_t len, cap;
};

static inline void tb_init(struct tb *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
}

static inline void tb_free(struct tb *b)
{
	free(b->p);
	tb_init(b);
}

static inline void tb_raw(struct tb *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap : 64;
		while (nc < b->len + n)
			nc *= 2;
		uint8_t *np = realloc(b->p, nc);
		if (!np) {
			fprintf(stderr, "testutil: out of memory\n");
			abort();
		}
		b->p = np;
		b->cap = nc;
	}
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static inline void tb_byte(struct tb *b, uint8_t c) { tb_raw(b, &c, 1); }

/* Raw varint (no tag). */
static inline void tb_varint(struct tb *b, uint64_t v)
{
	while (v >= 0x80) {
		tb_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	tb_byte(b, (uint8_t)v);
}

enum { TB_VARINT = 0, TB_I64 = 1, TB_LEN = 2, TB_SGROUP = 3, TB_EGROUP = 4, TB_I32 = 5 };

static inline void tb_tag(struct tb *b, uint32_t field, uint32_t wt) { tb_varint(b, (uint64_t)field << 3 | wt); }

/* Varint field, written even when zero. */
static inline void tb_uint(struct tb *b, uint32_t field, uint64_t v)
{
	tb_tag(b, field, TB_VARINT);
	tb_varint(b, v);
}
/* int64 field: plain two's complement varint (10 bytes when negative). */
static inline void tb_int(struct tb *b, uint32_t field, int64_t v) { tb_uint(b, field, (uint64_t)v); }

static inline void tb_fixed64(struct tb *b, uint32_t field, uint64_t v)
{
	tb_tag(b, field, TB_I64);
	for (int i = 0; i < 8; i++)
		tb_byte(b, (uint8_t)(v >> (8 * i)));
}

static inline void tb_fixed32(struct tb *b, uint32_t field, uint32_t v)
{
	tb_tag(b, field, TB_I32);
	for (int i = 0; i < 4; i++)
		tb_byte(b, (uint8_t)(v >> (8 * i)));
}

static inline void tb_bytes(struct tb *b, uint32_t field, const void *d, size_t n)
{
	tb_tag(b, field, TB_LEN);
	tb_varint(b, n);
	tb_raw(b, d, n);
}

static inline void tb_str(struct tb *b, uint32_t field, const char *s) { tb_bytes(b, field, s, strlen(s)); }

/* Append a sub-message built in its own buffer. */
static inline void tb_msg(struct tb *b, uint32_t field, const struct tb *sub) { tb_bytes(b, field, sub->p, sub->len); }

/* Packed repeated varints. */
static inline void tb_packed(struct tb *b, uint32_t field, const uint64_t *v, size_t n)
{
	struct tb s;
	tb_init(&s);
	for (size_t i = 0; i < n; i++)
		tb_varint(&s, v[i]);
	tb_bytes(b, field, s.p, s.len);
	tb_free(&s);
}

static inline void tb_packed_i64(struct tb *b, uint32_t field, const int64_t *v, size_t n)
{
	struct tb s;
	tb_init(&s);
	for (size_t i = 0; i < n; i++)
		tb_varint(&s, (uint64_t)v[i]);
	tb_bytes(b, field, s.p, s.len);
	tb_free(&s);
}

/* ---- profile.proto messages ---------------------------------------------------- */

/* Profile field numbers. */
enum {
	PF_SAMPLE_TYPE = 1, PF_SAMPLE = 2, PF_MAPPING = 3, PF_LOCATION = 4, PF_FUNCTION = 5,
	PF_STRING_TABLE = 6, PF_DROP_FRAMES = 7, PF_KEEP_FRAMES = 8, PF_TIME_NANOS = 9,
	PF_DURATION_NANOS = 10, PF_PERIOD_TYPE = 11, PF_PERIOD = 12, PF_COMMENT = 13,
	PF_DEFAULT_SAMPLE_TYPE = 14, PF_DOC_URL = 15,
};

/* Mapping flag bits for tb_mapping. */
enum { TB_HAS_FUNCTIONS = 1, TB_HAS_FILENAMES = 2, TB_HAS_LINE_NUMBERS = 4, TB_HAS_INLINE_FRAMES = 8 };

struct tb_line {
	uint64_t function_id;
	int64_t line, column;
};

/* String indexes; a label is dropped by pprof when str, num and unit are 0. */
struct tb_label {
	int64_t key, str, num, unit;
};

/* ValueType message as field `field` (sample_type or period_type). */
static inline void tb_vtype(struct tb *b, uint32_t field, int64_t type, int64_t unit)
{
	struct tb s;
	tb_init(&s);
	if (type)
		tb_int(&s, 1, type);
	if (unit)
		tb_int(&s, 2, unit);
	tb_msg(b, field, &s);
	tb_free(&s);
}

static inline void tb_function(struct tb *b, uint64_t id, int64_t name, int64_t system_name, int64_t filename,
			       int64_t start_line)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, id);
	if (name)
		tb_int(&s, 2, name);
	if (system_name)
		tb_int(&s, 3, system_name);
	if (filename)
		tb_int(&s, 4, filename);
	if (start_line)
		tb_int(&s, 5, start_line);
	tb_msg(b, PF_FUNCTION, &s);
	tb_free(&s);
}

static inline void tb_mapping(struct tb *b, uint64_t id, uint64_t start, uint64_t limit, uint64_t offset,
			      int64_t filename, int64_t build_id, unsigned flags)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, id);
	if (start)
		tb_uint(&s, 2, start);
	if (limit)
		tb_uint(&s, 3, limit);
	if (offset)
		tb_uint(&s, 4, offset);
	if (filename)
		tb_int(&s, 5, filename);
	if (build_id)
		tb_int(&s, 6, build_id);
	if (flags & TB_HAS_FUNCTIONS)
		tb_uint(&s, 7, 1);
	if (flags & TB_HAS_FILENAMES)
		tb_uint(&s, 8, 1);
	if (flags & TB_HAS_LINE_NUMBERS)
		tb_uint(&s, 9, 1);
	if (flags & TB_HAS_INLINE_FRAMES)
		tb_uint(&s, 10, 1);
	tb_msg(b, PF_MAPPING, &s);
	tb_free(&s);
}

static inline void tb_line_msg(struct tb *b, const struct tb_line *ln)
{
	struct tb s;
	tb_init(&s);
	if (ln->function_id)
		tb_uint(&s, 1, ln->function_id);
	if (ln->line)
		tb_int(&s, 2, ln->line);
	if (ln->column)
		tb_int(&s, 3, ln->column);
	tb_msg(b, 4, &s);
	tb_free(&s);
}

static inline void tb_location(struct tb *b, uint64_t id, uint64_t mapping_id, uint64_t address,
			       const struct tb_line *lines, size_t nlines, bool is_folded)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, id);
	if (mapping_id)
		tb_uint(&s, 2, mapping_id);
	if (address)
		tb_uint(&s, 3, address);
	for (size_t i = 0; i < nlines; i++)
		tb_line_msg(&s, &lines[i]);
	if (is_folded)
		tb_uint(&s, 5, 1);
	tb_msg(b, PF_LOCATION, &s);
	tb_free(&s);
}

static inline void tb_label_msg(struct tb *b, const struct tb_label *l)
{
	struct tb s;
	tb_init(&s);
	if (l->key)
		tb_int(&s, 1, l->key);
	if (l->str)
		tb_int(&s, 2, l->str);
	if (l->num)
		tb_int(&s, 3, l->num);
	if (l->unit)
		tb_int(&s, 4, l->unit);
	tb_msg(b, 3, &s);
	tb_free(&s);
}

/* Sample; packed: location ids and values packed (else one field each). */
static inline void tb_sample(struct tb *b, const uint64_t *locs, size_t nlocs, const int64_t *vals, size_t nvals,
			     const struct tb_label *labels, size_t nlabels, bool packed)
{
	struct tb s;
	tb_init(&s);
	if (packed) {
		if (nlocs)
			tb_packed(&s, 1, locs, nlocs);
		if (nvals)
			tb_packed_i64(&s, 2, vals, nvals);
	} else {
		for (size_t i = 0; i < nlocs; i++)
			tb_uint(&s, 1, locs[i]);
		for (size_t i = 0; i < nvals; i++)
			tb_int(&s, 2, vals[i]);
	}
	for (size_t i = 0; i < nlabels; i++)
		tb_label_msg(&s, &labels[i]);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
}

static inline void tb_strings(struct tb *b, const char *const *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tb_str(b, PF_STRING_TABLE, s[i]);
}

/* ---- the minimal valid profile ----------------------------------------------- */

/* String table of the minimal profile. */
enum { S_EMPTY = 0, S_SAMPLES = 1, S_COUNT = 2, S_CPU = 3, S_NANOSECONDS = 4, S_MAIN = 5, S_MAIN_GO = 6, S_NMIN = 7 };
static const char *const tu_min_strings[S_NMIN] = {"", "samples", "count", "cpu", "nanoseconds", "main", "main.go"};

/* Everything but the string table: sample types samples/count and
 * cpu/nanoseconds, one sample (location 1, values 1 and 10000000), location 1
 * -> function 1 "main" (main.go) line 10, period type cpu/nanoseconds,
 * period 10000000. */
static inline void tu_minimal_body(struct tb *b)
{
	tb_vtype(b, PF_SAMPLE_TYPE, S_SAMPLES, S_COUNT);
	tb_vtype(b, PF_SAMPLE_TYPE, S_CPU, S_NANOSECONDS);
	uint64_t loc = 1;
	int64_t vals[2] = {1, 10000000};
	tb_sample(b, &loc, 1, vals, 2, NULL, 0, false);
	struct tb_line ln = {1, 10, 0};
	tb_location(b, 1, 0, 0, &ln, 1, false);
	tb_function(b, 1, S_MAIN, 0, S_MAIN_GO, 0);
	tb_vtype(b, PF_PERIOD_TYPE, S_CPU, S_NANOSECONDS);
	tb_int(b, PF_PERIOD, 10000000);
}

static inline void tu_minimal_strings(struct tb *b) { tb_strings(b, tu_min_strings, S_NMIN); }

/* The minimal valid profile, string table last (as Go writes it). */
static inline void tu_minimal(struct tb *b)
{
	tu_minimal_body(b);
	tu_minimal_strings(b);
}

/* ---- profile builder with strings by value ------------------------------------- */

#define PB_MAX_STRINGS 1024

struct pb {
	struct tb b;
	const char *strs[PB_MAX_STRINGS];
	size_t nstrs;
};

static inline void pb_init(struct pb *p)
{
	tb_init(&p->b);
	p->strs[0] = "";
	p->nstrs = 1;
}

static inline void pb_free(struct pb *p) { tb_free(&p->b); }

/* Index of s in the string table (added on first use); NULL or "" = 0. */
static inline int64_t pb_s(struct pb *p, const char *s)
{
	if (!s || !*s)
		return 0;
	for (size_t i = 1; i < p->nstrs; i++)
		if (strcmp(p->strs[i], s) == 0)
			return (int64_t)i;
	assert_true(p->nstrs < PB_MAX_STRINGS);
	p->strs[p->nstrs] = s;
	return (int64_t)p->nstrs++;
}

static inline void pb_sample_type(struct pb *p, const char *type, const char *unit)
{
	tb_vtype(&p->b, PF_SAMPLE_TYPE, pb_s(p, type), pb_s(p, unit));
}

static inline void pb_period_type(struct pb *p, const char *type, const char *unit, int64_t period)
{
	tb_vtype(&p->b, PF_PERIOD_TYPE, pb_s(p, type), pb_s(p, unit));
	if (period)
		tb_int(&p->b, PF_PERIOD, period);
}

/* The CPU header: samples/count, cpu/nanoseconds, period cpu/nanoseconds. */
static inline void pb_cpu_header(struct pb *p, int64_t period)
{
	pb_sample_type(p, "samples", "count");
	pb_sample_type(p, "cpu", "nanoseconds");
	pb_period_type(p, "cpu", "nanoseconds", period);
}

/* A Go heap profile's (alloc_objects, alloc_space; period 512 KiB) or a
 * CPU profile's (period 10 ms) sample and period types. */
static inline void pb_heap_or_cpu_header(struct pb *p, bool heap)
{
	if (heap) {
		pb_sample_type(p, "alloc_objects", "count");
		pb_sample_type(p, "alloc_space", "bytes");
		pb_period_type(p, "space", "bytes", 524288);
	} else {
		pb_cpu_header(p, 10000000);
	}
}

static inline void pb_function(struct pb *p, uint64_t id, const char *name, const char *file, int64_t start_line)
{
	tb_function(&p->b, id, pb_s(p, name), 0, pb_s(p, file), start_line);
}

static inline void pb_mapping(struct pb *p, uint64_t id, uint64_t start, uint64_t limit, uint64_t offset,
			      const char *file, const char *build_id)
{
	tb_mapping(&p->b, id, start, limit, offset, pb_s(p, file), pb_s(p, build_id), TB_HAS_FUNCTIONS);
}

/* Location with one line (function_id 0 = no line). */
static inline void pb_location1(struct pb *p, uint64_t id, uint64_t mapping_id, uint64_t address,
				uint64_t function_id, int64_t line)
{
	struct tb_line ln = {function_id, line, 0};
	tb_location(&p->b, id, mapping_id, address, &ln, function_id ? 1 : 0, false);
}

struct pb_label {
	const char *key, *str;
	int64_t num;
	const char *unit;
};

/* An app's mapping (1, /bin/app), functions main.main (1), runtime.x (2)
 * and "<prefix>.f0".."<prefix>.f4" (3..7, named in names), and locations
 * 1..7, one a function. */
#define TU_APP_NFN 5
static inline void tu_app_functions(struct pb *p, const char *prefix, char names[TU_APP_NFN][64])
{
	pb_mapping(p, 1, 0x400000, 0x500000, 0, "/bin/app", "b1d");
	pb_function(p, 1, "main.main", "main.go", 1);
	pb_function(p, 2, "runtime.x", "rt.go", 1);
	for (int f = 0; f < TU_APP_NFN; f++) {
		snprintf(names[f], sizeof names[f], "%s.f%d", prefix, f);
		pb_function(p, (uint64_t)f + 3, names[f], "app.go", 0);
	}
	for (uint64_t l = 1; l <= 7; l++)
		pb_location1(p, l, 1, 0x400000 + 0x100 * l, l, (int64_t)l);
}

static inline void pb_sample(struct pb *p, const uint64_t *locs, size_t nlocs, const int64_t *vals, size_t nvals,
			     const struct pb_label *labels, size_t nlabels)
{
	struct tb_label lb[16];
	memset(lb, 0, sizeof lb);
	assert_true(nlabels <= 16);
	for (size_t i = 0; i < nlabels; i++) {
		lb[i].key = pb_s(p, labels[i].key);
		lb[i].str = pb_s(p, labels[i].str);
		lb[i].num = labels[i].num;
		lb[i].unit = pb_s(p, labels[i].unit);
	}
	tb_sample(&p->b, locs, nlocs, vals, nvals, lb, nlabels, nlocs > 2 || nvals > 2);
}

/* Append the string table; the bytes are in p->b. */
static inline void pb_finish(struct pb *p) { tb_strings(&p->b, p->strs, p->nstrs); }

/* ---- decoding and comparing ------------------------------------------------------ */

/* A cmocka fixture's scratch directory: dir (n bytes) becomes a fresh
 * /tmp/profd-<what>-test.XXXXXX (0), and tu_rmdir removes it with all in it
 * (0, else -1). */
static inline int tu_mkdtemp(char *dir, size_t n, const char *what)
{
	snprintf(dir, n, "/tmp/profd-%s-test.XXXXXX", what);
	assert_non_null(mkdtemp(dir));
	return 0;
}

static inline int tu_rmdir(const char *dir)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* static setup() and teardown() for cmocka: the array dir as above. */
#define TU_TMPDIR_FIXTURES(dir, what)                                                                     \
	static int setup(void **state)                                                                    \
	{                                                                                                 \
		(void)state;                                                                              \
		return tu_mkdtemp(dir, sizeof dir, what);                                                 \
	}                                                                                                 \
	static int teardown(void **state)                                                                 \
	{                                                                                                 \
		(void)state;                                                                              \
		return tu_rmdir(dir);                                                                     \
	}

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* xorshift64: reproducible pseudo-random test data from a caller's state. */
static inline uint64_t tu_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Decode or fail the test with the decoder's message. */
static inline struct pd_profile *tu_decode_lim(const uint8_t *d, size_t n, const struct pd_pprof_limits *lim)
{
	struct pd_profile *p = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_pprof_decode(d, n, lim, &p, &err);
	if (rc)
		fail_msg("decode failed (%d): %s", rc, err.msg);
	assert_non_null(p);
	return p;
}

static inline struct pd_profile *tu_decode(const struct tb *b) { return tu_decode_lim(b->p, b->len, NULL); }

/* Decode expecting an error; returns the code, the message is in *err. */
static inline int tu_decode_err(const uint8_t *d, size_t n, const struct pd_pprof_limits *lim, struct pd_err *err)
{
	struct pd_profile *p = (struct pd_profile *)1;
	memset(err, 0, sizeof *err);
	int rc = pd_pprof_decode(d, n, lim, &p, err);
	if (rc == 0) {
		pd_profile_free(p);
		fail_msg("decode unexpectedly succeeded");
	}
	assert_null(p);
	assert_int_equal(err->code, rc);
	assert_true(err->msg[0] != 0);
	return rc;
}

/* Decode a struct pb (string table appended) or fail. */
static inline struct pd_profile *pb_decode(struct pb *p)
{
	pb_finish(p);
	return tu_decode(&p->b);
}

/* String-table entry i as a NUL-terminated string (static buffer, rotating). */
static inline const char *tu_str(const struct pd_profile *p, uint32_t i)
{
	static char bufs[8][512];
	static unsigned k;
	char *b = bufs[k++ % 8];
	assert_true(i < p->nstrings);
	struct pd_str s = p->strings[i];
	size_t n = s.len < 511 ? s.len : 511;
	if (n)
		memcpy(b, s.ptr, n);
	b[n] = 0;
	return b;
}

static inline void tu_assert_str(const struct pd_profile *p, uint32_t i, const char *want)
{
	assert_string_equal(tu_str(p, i), want);
}

/* Substring check with a readable failure. */
#define assert_contains(hay, needle)                                                                       \
	do {                                                                                                   \
		const char *h_ = (hay), *n_ = (needle);                                                        \
		if (!strstr(h_, n_))                                                                           \
			fail_msg("expected \"%s\" in \"%s\"", n_, h_);                                         \
	} while (0)

/* Deep equality of two models, comparing string indexes and contents. */
static inline void tu_assert_profiles_equal(const struct pd_profile *a, const struct pd_profile *b)
{
	assert_int_equal(a->nstrings, b->nstrings);
	for (uint32_t i = 0; i < a->nstrings; i++) {
		assert_int_equal(a->strings[i].len, b->strings[i].len);
		if (a->strings[i].len)
			assert_memory_equal(a->strings[i].ptr, b->strings[i].ptr, a->strings[i].len);
	}
	assert_int_equal(a->nsample_types, b->nsample_types);
	for (uint32_t i = 0; i < a->nsample_types; i++) {
		assert_int_equal(a->sample_types[i].type, b->sample_types[i].type);
		assert_int_equal(a->sample_types[i].unit, b->sample_types[i].unit);
	}
	assert_int_equal(a->nmappings, b->nmappings);
	for (uint32_t i = 0; i < a->nmappings; i++) {
		const struct pd_mapping *x = &a->mappings[i], *y = &b->mappings[i];
		assert_int_equal(x->id, y->id);
		assert_int_equal(x->start, y->start);
		assert_int_equal(x->limit, y->limit);
		assert_int_equal(x->offset, y->offset);
		assert_int_equal(x->filename, y->filename);
		assert_int_equal(x->build_id, y->build_id);
		assert_int_equal(x->has_functions, y->has_functions);
		assert_int_equal(x->has_filenames, y->has_filenames);
		assert_int_equal(x->has_line_numbers, y->has_line_numbers);
		assert_int_equal(x->has_inline_frames, y->has_inline_frames);
	}
	assert_int_equal(a->nfunctions, b->nfunctions);
	for (uint32_t i = 0; i < a->nfunctions; i++) {
		const struct pd_function *x = &a->functions[i], *y = &b->functions[i];
		assert_int_equal(x->id, y->id);
		assert_int_equal(x->name, y->name);
		assert_int_equal(x->system_name, y->system_name);
		assert_int_equal(x->filename, y->filename);
		assert_int_equal(x->start_line, y->start_line);
	}
	assert_int_equal(a->nlocations, b->nlocations);
	for (uint32_t i = 0; i < a->nlocations; i++) {
		const struct pd_location *x = &a->locations[i], *y = &b->locations[i];
		assert_int_equal(x->id, y->id);
		assert_int_equal(x->address, y->address);
		assert_int_equal(x->mapping, y->mapping);
		assert_int_equal(x->is_folded, y->is_folded);
		assert_int_equal(x->nlines, y->nlines);
		for (uint32_t j = 0; j < x->nlines; j++) {
			assert_int_equal(x->lines[j].function, y->lines[j].function);
			assert_int_equal(x->lines[j].line, y->lines[j].line);
			assert_int_equal(x->lines[j].column, y->lines[j].column);
		}
	}
	assert_int_equal(a->nsamples, b->nsamples);
	for (size_t i = 0; i < a->nsamples; i++) {
		const struct pd_sample *x = &a->samples[i], *y = &b->samples[i];
		assert_int_equal(x->nlocs, y->nlocs);
		for (uint32_t j = 0; j < x->nlocs; j++)
			assert_int_equal(x->locs[j], y->locs[j]);
		for (uint32_t j = 0; j < a->nsample_types; j++)
			assert_int_equal(x->values[j], y->values[j]);
		assert_int_equal(x->nlabels, y->nlabels);
		for (uint32_t j = 0; j < x->nlabels; j++) {
			assert_int_equal(x->labels[j].key, y->labels[j].key);
			assert_int_equal(x->labels[j].str, y->labels[j].str);
			assert_int_equal(x->labels[j].num, y->labels[j].num);
			assert_int_equal(x->labels[j].num_unit, y->labels[j].num_unit);
		}
	}
	assert_int_equal(a->ncomments, b->ncomments);
	for (uint32_t i = 0; i < a->ncomments; i++)
		assert_int_equal(a->comments[i], b->comments[i]);
	assert_int_equal(a->drop_frames, b->drop_frames);
	assert_int_equal(a->keep_frames, b->keep_frames);
	assert_int_equal(a->default_sample_type, b->default_sample_type);
	assert_int_equal(a->doc_url, b->doc_url);
	assert_int_equal(a->time_nanos, b->time_nanos);
	assert_int_equal(a->duration_nanos, b->duration_nanos);
	assert_int_equal(a->period, b->period);
	assert_int_equal(a->period_type.type, b->period_type.type);
	assert_int_equal(a->period_type.unit, b->period_type.unit);
}

#endif
