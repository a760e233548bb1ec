/*
 * test_pprof.c — the profile.proto decoder and encoder (lib/pprof/decode.c,
 * encode.c) against profiles written by hand with testutil.h's protobuf
 * writer, and pprof's rules (reference/pprof.md §1-2).
 */
#include "testutil.h"

#include <sys/types.h>
#include <unistd.h>

/* ---- a profile with every field set ----------------------------------------- */

enum {
	F_EMPTY, F_SAMPLES, F_COUNT, F_CPU, F_NS, F_MAIN, F_MAIN_GO, F_INL, F_SYS, F_BIN, F_BUILDID, F_C1, F_C2,
	F_DOC, F_DROP, F_KEEP, F_KEY, F_VAL, F_BYTES, F_NUMKEY, F_LIB, F_N
};
static const char *const full_strings[F_N] = {
	"", "samples", "count", "cpu", "nanoseconds", "main", "main.go", "runtime.inlined", "sys_main",
	"/bin/app", "buildid123", "comment one", "comment two", "https://example.com/doc", "drop.*", "keep.*",
	"key1", "val1", "bytes", "numkey", "/lib/libc.so"};

#define FULL_TIME 1700000000123456789LL

/* Unknown fields of wire types 0, 1, 2, 5 (numbers field..field+4), and the
 * largest legal field number, when on. */
static void unk(struct tb *b, bool on, uint32_t field)
{
	if (!on)
		return;
	tb_uint(b, field, 12345);
	tb_fixed64(b, field + 1, 0x1122334455667788ULL);
	tb_str(b, field + 2, "unknown bytes");
	tb_fixed32(b, field + 3, 0xdeadbeefu);
	tb_int(b, field + 4, -1);
	tb_bytes(b, 0x1fffffff, "", 0);
}

/* Every field of every message; with u, unknown fields at every level. */
static void build_full(struct tb *b, bool u)
{
	struct tb s, t;
	tb_int(b, PF_TIME_NANOS, FULL_TIME);
	unk(b, u, 100);
	/* sample types */
	tb_init(&s);
	tb_int(&s, 1, F_SAMPLES);
	unk(&s, u, 9);
	tb_int(&s, 2, F_COUNT);
	tb_msg(b, PF_SAMPLE_TYPE, &s);
	tb_free(&s);
	tb_vtype(b, PF_SAMPLE_TYPE, F_CPU, F_NS);
	/* sample 0: packed location ids, unpacked values, a string and a numeric label */
	tb_init(&s);
	uint64_t locs[3] = {1, 2, 3};
	tb_packed(&s, 1, locs, 3);
	unk(&s, u, 20);
	tb_int(&s, 2, 3);
	tb_int(&s, 2, 30000000);
	tb_init(&t);
	tb_int(&t, 1, F_KEY);
	unk(&t, u, 10);
	tb_int(&t, 2, F_VAL);
	tb_msg(&s, 3, &t);
	tb_free(&t);
	tb_init(&t);
	tb_int(&t, 1, F_NUMKEY);
	tb_int(&t, 3, 42);
	tb_int(&t, 4, F_BYTES);
	tb_msg(&s, 3, &t);
	tb_free(&t);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
	/* sample 1: one unpacked location id, packed negative values, negative numeric label */
	tb_init(&s);
	tb_uint(&s, 1, 2);
	int64_t v2[2] = {-1, -5000};
	tb_packed_i64(&s, 2, v2, 2);
	tb_init(&t);
	tb_int(&t, 1, F_NUMKEY);
	tb_int(&t, 3, -7);
	tb_msg(&s, 3, &t);
	tb_free(&t);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
	/* mappings */
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_uint(&s, 2, 0x400000);
	tb_uint(&s, 3, 0x500000);
	tb_uint(&s, 4, 0x1000);
	tb_int(&s, 5, F_BIN);
	unk(&s, u, 30);
	tb_int(&s, 6, F_BUILDID);
	tb_uint(&s, 7, 1);
	tb_uint(&s, 9, 1);
	tb_msg(b, PF_MAPPING, &s);
	tb_free(&s);
	tb_mapping(b, 2, 0x7f0000000000ULL, 0x7f0000010000ULL, 0, F_LIB, 0, TB_HAS_FILENAMES | TB_HAS_INLINE_FRAMES);
	/* locations: 1 has two lines (inlined) with columns and is folded */
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_uint(&s, 2, 1);
	tb_uint(&s, 3, 0x401234);
	tb_init(&t);
	tb_uint(&t, 1, 2);
	tb_int(&t, 2, 22);
	unk(&t, u, 8);
	tb_int(&t, 3, 5);
	tb_msg(&s, 4, &t);
	tb_free(&t);
	tb_init(&t);
	tb_uint(&t, 1, 1);
	tb_int(&t, 2, 10);
	tb_int(&t, 3, 7);
	tb_msg(&s, 4, &t);
	tb_free(&t);
	unk(&s, u, 9);
	tb_uint(&s, 5, 1);
	tb_msg(b, PF_LOCATION, &s);
	tb_free(&s);
	struct tb_line l2 = {1, 12, 0};
	tb_location(b, 2, 2, 0x7f0000000100ULL, &l2, 1, false);
	tb_location(b, 3, 0, 0x999, NULL, 0, false);
	/* functions */
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_int(&s, 2, F_MAIN);
	tb_int(&s, 3, F_SYS);
	unk(&s, u, 9);
	tb_int(&s, 4, F_MAIN_GO);
	tb_int(&s, 5, 3);
	tb_msg(b, PF_FUNCTION, &s);
	tb_free(&s);
	tb_function(b, 2, F_INL, 0, F_MAIN_GO, 20);
	unk(b, u, 200);
	/* the rest of the header */
	tb_int(b, PF_DROP_FRAMES, F_DROP);
	tb_int(b, PF_KEEP_FRAMES, F_KEEP);
	tb_int(b, PF_DURATION_NANOS, 10000000000LL);
	tb_init(&s);
	tb_int(&s, 1, F_CPU);
	tb_int(&s, 2, F_NS);
	unk(&s, u, 3);
	tb_msg(b, PF_PERIOD_TYPE, &s);
	tb_free(&s);
	tb_int(b, PF_PERIOD, 10000000);
	tb_int(b, PF_COMMENT, F_C1);
	uint64_t c2 = F_C2;
	tb_packed(b, PF_COMMENT, &c2, 1);
	tb_int(b, PF_DEFAULT_SAMPLE_TYPE, F_CPU);
	tb_int(b, PF_DOC_URL, F_DOC);
	tb_strings(b, full_strings, F_N);
	unk(b, u, 300);
}

static void check_full(const struct pd_profile *p)
{
	assert_int_equal(p->nstrings, F_N);
	for (uint32_t i = 0; i < F_N; i++)
		tu_assert_str(p, i, full_strings[i]);
	/* header */
	assert_int_equal(p->time_nanos, FULL_TIME);
	assert_int_equal(p->duration_nanos, 10000000000LL);
	assert_int_equal(p->period, 10000000);
	assert_int_equal(p->period_type.type, F_CPU);
	assert_int_equal(p->period_type.unit, F_NS);
	assert_int_equal(p->drop_frames, F_DROP);
	assert_int_equal(p->keep_frames, F_KEEP);
	assert_int_equal(p->default_sample_type, F_CPU);
	assert_int_equal(p->doc_url, F_DOC);
	assert_int_equal(p->ncomments, 2);
	assert_int_equal(p->comments[0], F_C1);
	assert_int_equal(p->comments[1], F_C2);
	/* sample types */
	assert_int_equal(p->nsample_types, 2);
	assert_int_equal(p->sample_types[0].type, F_SAMPLES);
	assert_int_equal(p->sample_types[0].unit, F_COUNT);
	assert_int_equal(p->sample_types[1].type, F_CPU);
	assert_int_equal(p->sample_types[1].unit, F_NS);
	assert_int_equal(pd_profile_default_index(p), 1);
	/* mappings */
	assert_int_equal(p->nmappings, 2);
	const struct pd_mapping *m = &p->mappings[0];
	assert_int_equal(m->id, 1);
	assert_int_equal(m->start, 0x400000);
	assert_int_equal(m->limit, 0x500000);
	assert_int_equal(m->offset, 0x1000);
	assert_int_equal(m->filename, F_BIN);
	assert_int_equal(m->build_id, F_BUILDID);
	assert_true(m->has_functions);
	assert_false(m->has_filenames);
	assert_true(m->has_line_numbers);
	assert_false(m->has_inline_frames);
	m = &p->mappings[1];
	assert_int_equal(m->id, 2);
	assert_int_equal(m->start, 0x7f0000000000ULL);
	assert_int_equal(m->limit, 0x7f0000010000ULL);
	assert_int_equal(m->offset, 0);
	assert_int_equal(m->filename, F_LIB);
	assert_int_equal(m->build_id, 0);
	assert_false(m->has_functions);
	assert_true(m->has_filenames);
	assert_false(m->has_line_numbers);
	assert_true(m->has_inline_frames);
	/* functions */
	assert_int_equal(p->nfunctions, 2);
	assert_int_equal(p->functions[0].id, 1);
	assert_int_equal(p->functions[0].name, F_MAIN);
	assert_int_equal(p->functions[0].system_name, F_SYS);
	assert_int_equal(p->functions[0].filename, F_MAIN_GO);
	assert_int_equal(p->functions[0].start_line, 3);
	assert_int_equal(p->functions[1].id, 2);
	assert_int_equal(p->functions[1].name, F_INL);
	assert_int_equal(p->functions[1].system_name, 0);
	assert_int_equal(p->functions[1].filename, F_MAIN_GO);
	assert_int_equal(p->functions[1].start_line, 20);
	/* locations */
	assert_int_equal(p->nlocations, 3);
	const struct pd_location *l = &p->locations[0];
	assert_int_equal(l->id, 1);
	assert_int_equal(l->mapping, 0);
	assert_int_equal(l->address, 0x401234);
	assert_true(l->is_folded);
	assert_int_equal(l->nlines, 2);
	assert_int_equal(l->lines[0].function, 1); /* function id 2 -> index 1 */
	assert_int_equal(l->lines[0].line, 22);
	assert_int_equal(l->lines[0].column, 5);
	assert_int_equal(l->lines[1].function, 0);
	assert_int_equal(l->lines[1].line, 10);
	assert_int_equal(l->lines[1].column, 7);
	tu_assert_str(p, p->functions[l->lines[0].function].name, "runtime.inlined");
	l = &p->locations[1];
	assert_int_equal(l->id, 2);
	assert_int_equal(l->mapping, 1);
	assert_int_equal(l->address, 0x7f0000000100ULL);
	assert_false(l->is_folded);
	assert_int_equal(l->nlines, 1);
	assert_int_equal(l->lines[0].function, 0);
	assert_int_equal(l->lines[0].line, 12);
	assert_int_equal(l->lines[0].column, 0);
	l = &p->locations[2];
	assert_int_equal(l->id, 3);
	assert_int_equal(l->mapping, PD_NONE);
	assert_int_equal(l->address, 0x999);
	assert_int_equal(l->nlines, 0);
	/* samples */
	assert_int_equal(p->nsamples, 2);
	const struct pd_sample *s = &p->samples[0];
	assert_int_equal(s->nlocs, 3);
	assert_int_equal(s->locs[0], 0);
	assert_int_equal(s->locs[1], 1);
	assert_int_equal(s->locs[2], 2);
	assert_int_equal(s->values[0], 3);
	assert_int_equal(s->values[1], 30000000);
	assert_int_equal(s->nlabels, 2);
	assert_int_equal(s->labels[0].key, F_KEY);
	assert_int_equal(s->labels[0].str, F_VAL);
	assert_int_equal(s->labels[0].num, 0);
	assert_int_equal(s->labels[0].num_unit, 0);
	assert_int_equal(s->labels[1].key, F_NUMKEY);
	assert_int_equal(s->labels[1].str, 0);
	assert_int_equal(s->labels[1].num, 42);
	assert_int_equal(s->labels[1].num_unit, F_BYTES);
	s = &p->samples[1];
	assert_int_equal(s->nlocs, 1);
	assert_int_equal(s->locs[0], 1);
	assert_int_equal(s->values[0], -1);
	assert_int_equal(s->values[1], -5000);
	assert_int_equal(s->nlabels, 1);
	assert_int_equal(s->labels[0].key, F_NUMKEY);
	assert_int_equal(s->labels[0].num, -7);
	assert_int_equal(s->labels[0].num_unit, 0);
}

/* ---- a tiny protobuf reader for checking the encoder's bytes ----------------- */

struct rd {
	uint32_t num, wt;
	uint64_t v;
	const uint8_t *d;
	size_t n;
};

static bool rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int i = 0; i < 10 && *p < end; i++) {
		uint8_t c = *(*p)++;
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (c < 0x80) {
			*v = x;
			return true;
		}
	}
	return false;
}

static bool rd_next(const uint8_t **p, const uint8_t *end, struct rd *f)
{
	uint64_t tag;
	if (*p >= end || !rd_varint(p, end, &tag))
		return false;
	f->num = (uint32_t)(tag >> 3);
	f->wt = (uint32_t)(tag & 7);
	f->d = NULL;
	f->n = 0;
	switch (f->wt) {
	case 0: return rd_varint(p, end, &f->v);
	case 1: if (end - *p < 8) return false; *p += 8; return true;
	case 5: if (end - *p < 4) return false; *p += 4; return true;
	case 2:
		if (!rd_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p))
			return false;
		f->d = *p;
		f->n = (size_t)f->v;
		*p += f->n;
		return true;
	}
	return false;
}

/* ---- decoding: the model ---------------------------------------------------------- */

static void test_decode_minimal(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	struct pd_profile *p = tu_decode(&b);
	assert_int_equal(p->nstrings, S_NMIN);
	for (uint32_t i = 0; i < S_NMIN; i++)
		tu_assert_str(p, i, tu_min_strings[i]);
	assert_int_equal(p->nsample_types, 2);
	assert_int_equal(p->sample_types[0].type, S_SAMPLES);
	assert_int_equal(p->sample_types[0].unit, S_COUNT);
	assert_int_equal(p->sample_types[1].type, S_CPU);
	assert_int_equal(p->sample_types[1].unit, S_NANOSECONDS);
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->samples[0].nlocs, 1);
	assert_int_equal(p->samples[0].locs[0], 0);
	assert_int_equal(p->samples[0].values[0], 1);
	assert_int_equal(p->samples[0].values[1], 10000000);
	assert_int_equal(p->samples[0].nlabels, 0);
	assert_int_equal(p->nlocations, 1);
	assert_int_equal(p->locations[0].id, 1);
	assert_int_equal(p->locations[0].mapping, PD_NONE);
	assert_int_equal(p->locations[0].address, 0);
	assert_false(p->locations[0].is_folded);
	assert_int_equal(p->locations[0].nlines, 1);
	assert_int_equal(p->locations[0].lines[0].function, 0);
	assert_int_equal(p->locations[0].lines[0].line, 10);
	assert_int_equal(p->locations[0].lines[0].column, 0);
	assert_int_equal(p->nfunctions, 1);
	assert_int_equal(p->functions[0].id, 1);
	tu_assert_str(p, p->functions[0].name, "main");
	tu_assert_str(p, p->functions[0].filename, "main.go");
	assert_int_equal(p->functions[0].system_name, 0);
	assert_int_equal(p->functions[0].start_line, 0);
	assert_int_equal(p->nmappings, 0);
	assert_int_equal(p->period_type.type, S_CPU);
	assert_int_equal(p->period_type.unit, S_NANOSECONDS);
	assert_int_equal(p->period, 10000000);
	assert_int_equal(p->time_nanos, 0);
	assert_int_equal(p->duration_nanos, 0);
	assert_int_equal(p->ncomments, 0);
	assert_int_equal(p->default_sample_type, 0);
	assert_int_equal(p->doc_url, 0);
	assert_int_equal(p->drop_frames, 0);
	assert_int_equal(p->keep_frames, 0);
	assert_int_equal(pd_profile_default_index(p), 1); /* the last */
	assert_string_equal(pd_profile_kind(p), "cpu");
	pd_profile_free(p);
	tb_free(&b);
}

static void test_decode_every_field(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	build_full(&b, false);
	struct pd_profile *p = tu_decode(&b);
	/* the input may be freed right away: the profile owns its strings */
	memset(b.p, 0xee, b.len);
	tb_free(&b);
	check_full(p);
	pd_profile_free(p);
}

static void test_unknown_fields_skipped(void **state)
{
	(void)state;
	struct tb a, b;
	tb_init(&a);
	tb_init(&b);
	build_full(&a, false);
	build_full(&b, true);
	assert_true(b.len > a.len + 100);
	struct pd_profile *pa = tu_decode(&a), *pb = tu_decode(&b);
	check_full(pb);
	tu_assert_profiles_equal(pa, pb);
	pd_profile_free(pa);
	pd_profile_free(pb);
	tb_free(&a);
	tb_free(&b);
}

static void test_packed_unpacked_mixed(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	for (uint64_t i = 1; i <= 4; i++) {
		pb_function(&p, i, i == 1 ? "f1" : i == 2 ? "f2" : i == 3 ? "f3" : "f4", "x.go", 0);
		pb_location1(&p, i, 0, 0x1000 * i, i, (int64_t)i);
	}
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1);
	uint64_t two_three[2] = {2, 3};
	tb_packed(&s, 1, two_three, 2);
	tb_bytes(&s, 1, "", 0); /* empty packed run */
	int64_t five = 5;
	tb_packed_i64(&s, 2, &five, 1);
	tb_uint(&s, 1, 4);
	tb_int(&s, 2, -6);
	tb_msg(&p.b, PF_SAMPLE, &s);
	tb_free(&s);
	struct pd_profile *d = pb_decode(&p);
	assert_int_equal(d->nsamples, 1);
	const struct pd_sample *sm = &d->samples[0];
	assert_int_equal(sm->nlocs, 4);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(sm->locs[i], i);
		assert_int_equal(d->locations[sm->locs[i]].id, i + 1);
	}
	assert_int_equal(sm->values[0], 5);
	assert_int_equal(sm->values[1], -6);
	pd_profile_free(d);
	pb_free(&p);
}

static void test_group_wire_types_rejected(void **state)
{
	(void)state;
	for (uint32_t wt = 3; wt <= 7; wt++) {
		if (wt == 5)
			continue;
		/* top level */
		struct tb b;
		tb_init(&b);
		tu_minimal_body(&b);
		tb_tag(&b, 100, wt);
		tu_minimal_strings(&b);
		struct pd_err err;
		assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
		assert_contains(err.msg, "wire type");
		tb_free(&b);
		/* inside a function and inside a sample's label */
		tb_init(&b);
		tu_minimal_body(&b);
		struct tb s;
		tb_init(&s);
		tb_uint(&s, 1, 2);
		tb_tag(&s, 50, wt);
		tb_msg(&b, PF_FUNCTION, &s);
		tb_free(&s);
		tu_minimal_strings(&b);
		assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
		assert_contains(err.msg, "wire type");
		tb_free(&b);

		tb_init(&b);
		tu_minimal_body(&b);
		struct tb l;
		tb_init(&s);
		tb_init(&l);
		tb_uint(&s, 1, 1);
		tb_int(&s, 2, 1);
		tb_int(&s, 2, 2);
		tb_int(&l, 1, S_MAIN);
		tb_tag(&l, 9, wt);
		tb_msg(&s, 3, &l);
		tb_msg(&b, PF_SAMPLE, &s);
		tb_free(&s);
		tb_free(&l);
		tu_minimal_strings(&b);
		assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
		assert_contains(err.msg, "wire type");
		tb_free(&b);
	}
}

/* ---- wrong wire type for a known field ----------------------------------------- */

typedef void (*inject_fn)(struct tb *b);

/* minimal body + injected fields + string table */
static void build_injected(struct tb *b, inject_fn inj)
{
	tb_init(b);
	tu_minimal_body(b);
	inj(b);
	tu_minimal_strings(b);
}

static void inj_period_len(struct tb *b) { tb_str(b, PF_PERIOD, "x"); }
static void inj_sample_type_varint(struct tb *b) { tb_uint(b, PF_SAMPLE_TYPE, 1); }
static void inj_string_table_varint(struct tb *b) { tb_uint(b, PF_STRING_TABLE, 1); }
static void inj_comment_fixed32(struct tb *b) { tb_fixed32(b, PF_COMMENT, 1); }
static void inj_time_fixed64(struct tb *b) { tb_fixed64(b, PF_TIME_NANOS, 1); }
static void inj_mapping_start_fixed64(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_fixed64(&s, 2, 0x1000);
	tb_msg(b, PF_MAPPING, &s);
	tb_free(&s);
}
static void inj_mapping_bool_len(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_str(&s, 7, "y");
	tb_msg(b, PF_MAPPING, &s);
	tb_free(&s);
}
static void inj_function_name_len(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 2);
	tb_str(&s, 2, "main");
	tb_msg(b, PF_FUNCTION, &s);
	tb_free(&s);
}
static void inj_location_line_varint(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 2);
	tb_uint(&s, 4, 1);
	tb_msg(b, PF_LOCATION, &s);
	tb_free(&s);
}
static void inj_location_folded_fixed32(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 2);
	tb_fixed32(&s, 5, 1);
	tb_msg(b, PF_LOCATION, &s);
	tb_free(&s);
}
static void inj_line_function_fixed64(struct tb *b)
{
	struct tb s, l;
	tb_init(&s);
	tb_init(&l);
	tb_uint(&s, 1, 2);
	tb_fixed64(&l, 1, 1);
	tb_msg(&s, 4, &l);
	tb_msg(b, PF_LOCATION, &s);
	tb_free(&s);
	tb_free(&l);
}
static void inj_sample_location_fixed64(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_fixed64(&s, 1, 1);
	tb_int(&s, 2, 1);
	tb_int(&s, 2, 2);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
}
static void inj_sample_value_fixed32(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_int(&s, 2, 1);
	tb_fixed32(&s, 2, 2);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
}
static void inj_sample_label_varint(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_uint(&s, 1, 1);
	tb_int(&s, 2, 1);
	tb_int(&s, 2, 2);
	tb_uint(&s, 3, 5);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
}
static void inj_label_key_len(struct tb *b)
{
	struct tb s, l;
	tb_init(&s);
	tb_init(&l);
	tb_uint(&s, 1, 1);
	tb_int(&s, 2, 1);
	tb_int(&s, 2, 2);
	tb_str(&l, 1, "k");
	tb_msg(&s, 3, &l);
	tb_msg(b, PF_SAMPLE, &s);
	tb_free(&s);
	tb_free(&l);
}
static void inj_vtype_type_len(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_str(&s, 1, "cpu");
	tb_msg(b, PF_SAMPLE_TYPE, &s);
	tb_free(&s);
}
static void inj_period_type_unit_fixed64(struct tb *b)
{
	struct tb s;
	tb_init(&s);
	tb_fixed64(&s, 2, 1);
	tb_msg(b, PF_PERIOD_TYPE, &s);
	tb_free(&s);
}

static void test_wrong_wire_type_names_field(void **state)
{
	(void)state;
	static const struct {
		inject_fn inj;
		const char *name;
	} cases[] = {
		{inj_period_len, "period"},
		{inj_sample_type_varint, "sample_type"},
		{inj_string_table_varint, "string_table"},
		{inj_comment_fixed32, "comment"},
		{inj_time_fixed64, "time_nanos"},
		{inj_mapping_start_fixed64, "memory_start"},
		{inj_mapping_bool_len, "has_functions"},
		{inj_function_name_len, "function.name"},
		{inj_location_line_varint, "location.line"},
		{inj_location_folded_fixed32, "is_folded"},
		{inj_line_function_fixed64, "function_id"},
		{inj_sample_location_fixed64, "location_id"},
		{inj_sample_value_fixed32, "value"},
		{inj_sample_label_varint, "label"},
		{inj_label_key_len, "label.key"},
		{inj_vtype_type_len, "sample_type.type"},
		{inj_period_type_unit_fixed64, "period_type.unit"},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct tb b;
		struct pd_err err;
		build_injected(&b, cases[i].inj);
		int rc = tu_decode_err(b.p, b.len, NULL, &err);
		if (rc != PD_EINVAL || !strstr(err.msg, cases[i].name) || !strstr(err.msg, "wire type"))
			fail_msg("case %zu (%s): rc %d, message \"%s\"", i, cases[i].name, rc, err.msg);
		tb_free(&b);
	}
}

static void test_bad_varints_and_lengths(void **state)
{
	(void)state;
	struct pd_err err;
	/* 11-byte varint */
	uint8_t overlong[] = {0x60, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	assert_int_equal(tu_decode_err(overlong, sizeof overlong, NULL, &err), PD_EINVAL);
	/* length running past the end */
	uint8_t pastend[] = {0x32, 0x10, 'a'};
	assert_int_equal(tu_decode_err(pastend, sizeof pastend, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "length");
	/* field number 0 */
	uint8_t zero[] = {0x00, 0x01};
	assert_int_equal(tu_decode_err(zero, sizeof zero, NULL, &err), PD_EINVAL);
	/* bad varint inside a packed location id run */
	struct tb b, s;
	tb_init(&b);
	tu_minimal_body(&b);
	tb_init(&s);
	uint8_t badpacked[] = {0x01, 0x80};
	tb_bytes(&s, 1, badpacked, 2);
	tb_int(&s, 2, 1);
	tb_int(&s, 2, 1);
	tb_msg(&b, PF_SAMPLE, &s);
	tb_free(&s);
	tu_minimal_strings(&b);
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	tb_free(&b);
}

/* ---- ids ----------------------------------------------------------------------------- */

static void test_sparse_ids(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 1000, 0x400000, 0x500000, 0, "/bin/a", NULL);
	pb_mapping(&p, 7, 0x600000, 0x700000, 0, "/bin/b", NULL);
	pb_function(&p, 42, "f42", "a.go", 0);
	pb_function(&p, 7, "f7", "a.go", 0);
	pb_function(&p, 1000, "f1000", "a.go", 0);
	pb_location1(&p, 1000, 7, 0x600010, 42, 1);
	pb_location1(&p, 7, 1000, 0x400010, 1000, 2);
	pb_location1(&p, 42, 0, 0x10, 7, 3);
	uint64_t locs[3] = {42, 1000, 7};
	int64_t vals[2] = {1, 2};
	pb_sample(&p, locs, 3, vals, 2, NULL, 0);
	struct pd_profile *d = pb_decode(&p);
	const struct pd_sample *s = &d->samples[0];
	assert_int_equal(s->nlocs, 3);
	assert_int_equal(s->locs[0], 2);
	assert_int_equal(s->locs[1], 0);
	assert_int_equal(s->locs[2], 1);
	assert_int_equal(d->locations[0].id, 1000);
	assert_int_equal(d->locations[0].mapping, 1);
	assert_int_equal(d->mappings[1].id, 7);
	tu_assert_str(d, d->functions[d->locations[0].lines[0].function].name, "f42");
	assert_int_equal(d->locations[1].mapping, 0);
	tu_assert_str(d, d->functions[d->locations[1].lines[0].function].name, "f1000");
	assert_int_equal(d->locations[2].mapping, PD_NONE);
	tu_assert_str(d, d->functions[d->locations[2].lines[0].function].name, "f7");
	pd_profile_free(d);
	pb_free(&p);
}

/* Profile with entities given as (kind, id) and one sample on location sample_loc. */
static void check_bad_ids(char kind, const uint64_t *ids, size_t n, const char *want)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_function(&p, 1, "f", "a.go", 0);
	if (kind != 'l')
		pb_location1(&p, 1, 0, 0x10, 1, 1);
	for (size_t i = 0; i < n; i++) {
		if (kind == 'm')
			pb_mapping(&p, ids[i], 0x1000 * (i + 1), 0x1000 * (i + 2), 0, "/x", NULL);
		else if (kind == 'f')
			pb_function(&p, ids[i], "g", "b.go", (int64_t)i);
		else
			pb_location1(&p, ids[i], 0, 0x100 * (i + 1), 1, 1);
	}
	uint64_t loc = kind == 'l' ? ids[n - 1] : 1;
	int64_t vals[2] = {1, 1};
	pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
	pb_finish(&p);
	struct pd_err err;
	int rc = tu_decode_err(p.b.p, p.b.len, NULL, &err);
	if (rc != PD_EINVAL || !strstr(err.msg, want))
		fail_msg("kind %c: rc %d, message \"%s\" (want \"%s\")", kind, rc, err.msg, want);
	pb_free(&p);
}

static void test_duplicate_and_zero_ids(void **state)
{
	(void)state;
	uint64_t dup[3] = {5, 9, 5};
	uint64_t zero[2] = {3, 0};
	uint64_t dense_dup[2] = {1, 1};
	check_bad_ids('m', dup, 3, "same id 5");
	check_bad_ids('m', zero, 2, "id 0");
	uint64_t fdup[2] = {1, 8}; /* function 1 exists already */
	check_bad_ids('f', fdup, 2, "same id 1");
	check_bad_ids('f', zero, 2, "id 0");
	check_bad_ids('l', dup, 3, "same id 5");
	check_bad_ids('l', zero, 2, "id 0");
	check_bad_ids('m', dense_dup, 2, "same id 1");
	uint64_t one_zero[1] = {0};
	check_bad_ids('m', one_zero, 1, "id 0");
}

static void test_unknown_function_id(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	tu_minimal_body(&b);
	struct tb_line ln = {99, 1, 0};
	tb_location(&b, 2, 0, 0x20, &ln, 1, false);
	tu_minimal_strings(&b);
	struct pd_err err;
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "function id 99");
	assert_contains(err.msg, "location");
	tb_free(&b);
	/* a line without function id */
	tb_init(&b);
	tu_minimal_body(&b);
	struct tb_line ln0 = {0, 1, 0};
	tb_location(&b, 2, 0, 0x20, &ln0, 1, false);
	tu_minimal_strings(&b);
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	tb_free(&b);
}

/* Packed location ids of every length, in fields of every length: the
 * decoder reads whole 8-byte blocks of 1- and 2-byte ids at once (SSSE3),
 * and the rest one byte at a time; both must give the ids written. 20,000
 * locations: ids of 1, 2 and 3 bytes. */
static void pk_profile(struct pb *p, uint64_t nloc)
{
	pb_init(p);
	pb_cpu_header(p, 10);
	for (uint64_t i = 1; i <= nloc; i++)
		pb_location1(p, i, 0, 0x1000 + i, 0, 0);
}

static uint64_t pk_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void test_packed_ids_every_length(void **state)
{
	(void)state;
	enum { NLOC = 20000, NS = 600, MAXD = 90 };
	struct pb p;
	pk_profile(&p, NLOC);
	static uint64_t want[NS][MAXD];
	size_t n[NS];
	uint64_t x = 88172645463325252ULL;
	for (size_t s = 0; s < NS; s++) {
		n[s] = s < MAXD ? s + 1 : 1 + pk_rand(&x) % MAXD; /* every depth 1..90, then random */
		unsigned mix = (unsigned)(s % 4); /* 1-byte only, 1 and 2, 2 only, with 3-byte ids */
		for (size_t j = 0; j < n[s]; j++) {
			uint64_t r = pk_rand(&x);
			uint64_t id = mix == 0 ? 1 + r % 127
				      : mix == 1 ? 1 + r % 16383
				      : mix == 2 ? 128 + r % (16383 - 127)
						 : (r % 16 == 0 ? 16384 + r % (NLOC - 16383) : 1 + r % 200);
			want[s][j] = id;
		}
		int64_t v[2] = {1, 10};
		tb_sample(&p.b, want[s], n[s], v, 2, NULL, 0, true);
	}
	struct pd_profile *d = pb_decode(&p);
	assert_int_equal(d->nsamples, NS);
	for (size_t s = 0; s < NS; s++) {
		assert_int_equal(d->samples[s].nlocs, n[s]);
		for (size_t j = 0; j < n[s]; j++)
			if (d->locations[d->samples[s].locs[j]].id != want[s][j])
				fail_msg("sample %zu frame %zu: id %llu, want %llu", s, j,
					 (unsigned long long)d->locations[d->samples[s].locs[j]].id,
					 (unsigned long long)want[s][j]);
	}
	pd_profile_free(d);
	pb_free(&p);
}

/* A bad id anywhere in a long packed field is named, wherever it falls
 * among the 8-byte blocks: 0, one past the last location, truncated. */
static void test_packed_ids_bad(void **state)
{
	(void)state;
	for (int kind = 0; kind < 3; kind++)
		for (size_t at = 0; at < 40; at++) {
			struct pb p;
			pk_profile(&p, 300);
			uint64_t ids[40];
			for (size_t j = 0; j < 40; j++)
				ids[j] = j % 3 ? 1 + (j * 37) % 300 : 1 + j;
			struct tb s;
			tb_init(&s);
			if (kind == 2) { /* the field ends inside the id at `at` */
				struct tb pk;
				tb_init(&pk);
				for (size_t j = 0; j < at; j++)
					tb_varint(&pk, ids[j]);
				tb_byte(&pk, 0x85);
				tb_bytes(&s, 1, pk.p, pk.len);
				tb_free(&pk);
			} else {
				ids[at] = kind == 0 ? 0 : 301;
				tb_packed(&s, 1, ids, 40);
			}
			tb_int(&s, 2, 1);
			tb_int(&s, 2, 1);
			tb_msg(&p.b, PF_SAMPLE, &s);
			tb_free(&s);
			pb_finish(&p);
			struct pd_err err;
			assert_int_equal(tu_decode_err(p.b.p, p.b.len, NULL, &err), PD_EINVAL);
			assert_contains(err.msg, "sample #0");
			assert_contains(err.msg, kind == 0 ? "location id 0 not found"
						 : kind == 1 ? "location id 301 not found"
							     : "bad packed varint");
			pb_free(&p);
		}
}

static void test_unknown_location_id(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	tu_minimal_body(&b);
	uint64_t locs[2] = {1, 99};
	int64_t vals[2] = {1, 2};
	tb_sample(&b, locs, 2, vals, 2, NULL, 0, false);
	tu_minimal_strings(&b);
	struct pd_err err;
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "sample #1");
	assert_contains(err.msg, "location id 99");
	tb_free(&b);
}

static void test_unknown_mapping_id_is_none(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_mapping(&p, 1, 0x1000, 0x2000, 0, "/bin/x", NULL);
	pb_function(&p, 1, "f", "a.go", 0);
	pb_location1(&p, 1, 77, 0x1010, 1, 1);
	pb_location1(&p, 2, 1, 0x1020, 1, 2);
	uint64_t locs[2] = {1, 2};
	int64_t vals[2] = {1, 1};
	pb_sample(&p, locs, 2, vals, 2, NULL, 0);
	struct pd_profile *d = pb_decode(&p);
	assert_int_equal(d->locations[0].mapping, PD_NONE);
	assert_int_equal(d->locations[1].mapping, 0);
	pd_profile_free(d);
	pb_free(&p);
}

/* ---- strings -------------------------------------------------------------------------- */

static void inj_fn_name_big(struct tb *b) { tb_function(b, 2, S_NMIN, 0, 0, 0); }
static void inj_fn_name_neg(struct tb *b) { tb_function(b, 2, -1, 0, 0, 0); }
static void inj_fn_file_big(struct tb *b) { tb_function(b, 2, S_MAIN, 0, 1000, 0); }
static void inj_fn_sys_neg(struct tb *b) { tb_function(b, 2, S_MAIN, -3, 0, 0); }
static void label_sample(struct tb *b, struct tb_label l)
{
	uint64_t loc = 1;
	int64_t vals[2] = {1, 1};
	tb_sample(b, &loc, 1, vals, 2, &l, 1, false);
}
static void inj_label_key_big(struct tb *b) { label_sample(b, (struct tb_label){100, S_MAIN, 0, 0}); }
static void inj_label_key_neg(struct tb *b) { label_sample(b, (struct tb_label){-1, S_MAIN, 0, 0}); }
static void inj_label_str_big(struct tb *b) { label_sample(b, (struct tb_label){S_MAIN, S_NMIN, 0, 0}); }
static void inj_label_unit_big(struct tb *b) { label_sample(b, (struct tb_label){S_MAIN, 0, 5, S_NMIN}); }
static void inj_stype_big(struct tb *b) { tb_vtype(b, PF_SAMPLE_TYPE, S_NMIN, S_COUNT); }
static void inj_stype_unit_neg(struct tb *b) { tb_vtype(b, PF_SAMPLE_TYPE, S_CPU, -1); }
static void inj_ptype_big(struct tb *b) { tb_vtype(b, PF_PERIOD_TYPE, 300, 0); }
static void inj_drop_big(struct tb *b) { tb_int(b, PF_DROP_FRAMES, S_NMIN); }
static void inj_drop_neg(struct tb *b) { tb_int(b, PF_DROP_FRAMES, -5); }
static void inj_keep_big(struct tb *b) { tb_int(b, PF_KEEP_FRAMES, 1LL << 40); }
static void inj_comment_big(struct tb *b) { tb_int(b, PF_COMMENT, S_NMIN); }
static void inj_comment_packed_neg(struct tb *b)
{
	int64_t c[3] = {1, 2, -1};
	tb_packed_i64(b, PF_COMMENT, c, 3);
}
static void inj_default_big(struct tb *b) { tb_int(b, PF_DEFAULT_SAMPLE_TYPE, S_NMIN); }
static void inj_doc_url_big(struct tb *b) { tb_int(b, PF_DOC_URL, S_NMIN); }
static void inj_mapping_file_big(struct tb *b) { tb_mapping(b, 1, 0x1000, 0x2000, 0, S_NMIN, 0, 0); }
static void inj_mapping_buildid_neg(struct tb *b) { tb_mapping(b, 1, 0x1000, 0x2000, 0, 0, -2, 0); }

static void test_string_index_out_of_range(void **state)
{
	(void)state;
	static const struct {
		inject_fn inj;
		const char *what;
	} cases[] = {
		{inj_fn_name_big, "name"},       {inj_fn_name_neg, "name"},
		{inj_fn_file_big, "filename"},   {inj_fn_sys_neg, "system_name"},
		{inj_label_key_big, "key"},      {inj_label_key_neg, "key"},
		{inj_label_str_big, "str"},      {inj_label_unit_big, "num_unit"},
		{inj_stype_big, "type"},         {inj_stype_unit_neg, "unit"},
		{inj_ptype_big, "type"},         {inj_drop_big, "drop_frames"},
		{inj_drop_neg, "drop_frames"},   {inj_keep_big, "keep_frames"},
		{inj_comment_big, "comment"},    {inj_comment_packed_neg, "comment"},
		{inj_default_big, "default_sample_type"}, {inj_doc_url_big, "doc_url"},
		{inj_mapping_file_big, "filename"}, {inj_mapping_buildid_neg, "build_id"},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct tb b;
		struct pd_err err;
		build_injected(&b, cases[i].inj);
		int rc = tu_decode_err(b.p, b.len, NULL, &err);
		if (rc != PD_EINVAL || !strstr(err.msg, "string index") || !strstr(err.msg, "out of range") ||
		    !strstr(err.msg, cases[i].what))
			fail_msg("case %zu (%s): rc %d, message \"%s\"", i, cases[i].what, rc, err.msg);
		tb_free(&b);
	}
}

static void test_string_table_rules(void **state)
{
	(void)state;
	struct pd_err err;
	/* string_table[0] not empty */
	struct tb b;
	tb_init(&b);
	tu_minimal_body(&b);
	tb_str(&b, PF_STRING_TABLE, "x");
	for (int i = 1; i < S_NMIN; i++)
		tb_str(&b, PF_STRING_TABLE, tu_min_strings[i]);
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "string_table[0]");
	tb_free(&b);
	/* no string table at all */
	tb_init(&b);
	tu_minimal_body(&b);
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "string_table");
	tb_free(&b);
	/* a header-only profile with just "" is fine */
	tb_init(&b);
	tb_str(&b, PF_STRING_TABLE, "");
	struct pd_profile *p = tu_decode(&b);
	assert_int_equal(p->nstrings, 1);
	assert_int_equal(p->nsamples, 0);
	pd_profile_free(p);
	tb_free(&b);
	/* empty input, raw and gzip'd */
	assert_int_equal(tu_decode_err((const uint8_t *)"", 0, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "empty input");
	struct pd_buf gz = PD_BUF_INIT(0);
	assert_int_equal(pd_gzip((const uint8_t *)"", 0, 6, &gz, &err), 0);
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "empty input");
	pd_buf_free(&gz);
	/* strings may contain NULs and are not NUL-terminated */
	tb_init(&b);
	tb_str(&b, PF_STRING_TABLE, "");
	tb_bytes(&b, PF_STRING_TABLE, "a\0b", 3);
	tb_int(&b, PF_COMMENT, 1);
	p = tu_decode(&b);
	assert_int_equal(p->strings[1].len, 3);
	assert_memory_equal(p->strings[1].ptr, "a\0b", 3);
	pd_profile_free(p);
	tb_free(&b);
}

/* ---- labels and values ------------------------------------------------------------------ */

static void test_label_rules(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10);
	pb_function(&p, 1, "f", "a.go", 0);
	pb_location1(&p, 1, 0, 0, 1, 1);
	struct pb_label lb[] = {
		{"span", "abc", 0, NULL},      /* string label */
		{"bytes", NULL, 4096, "bytes"}, /* numeric with unit */
		{"empty", NULL, 0, NULL},       /* neither: dropped */
		{"zero", NULL, 0, "count"},     /* num 0 with a unit: numeric, kept */
		{"n", NULL, -3, NULL},          /* numeric without unit */
		{"both", "s", 9, NULL},         /* str wins */
	};
	uint64_t loc = 1;
	int64_t vals[2] = {1, 1};
	pb_sample(&p, &loc, 1, vals, 2, lb, ARRAY_LEN(lb));
	struct pd_profile *d = pb_decode(&p);
	const struct pd_sample *s = &d->samples[0];
	assert_int_equal(s->nlabels, 5);
	tu_assert_str(d, s->labels[0].key, "span");
	tu_assert_str(d, s->labels[0].str, "abc");
	tu_assert_str(d, s->labels[1].key, "bytes");
	assert_int_equal(s->labels[1].str, 0);
	assert_int_equal(s->labels[1].num, 4096);
	tu_assert_str(d, s->labels[1].num_unit, "bytes");
	tu_assert_str(d, s->labels[2].key, "zero");
	assert_int_equal(s->labels[2].str, 0);
	assert_int_equal(s->labels[2].num, 0);
	tu_assert_str(d, s->labels[2].num_unit, "count");
	tu_assert_str(d, s->labels[3].key, "n");
	assert_int_equal(s->labels[3].num, -3);
	assert_int_equal(s->labels[3].num_unit, 0);
	tu_assert_str(d, s->labels[4].key, "both");
	tu_assert_str(d, s->labels[4].str, "s");
	pd_profile_free(d);
	pb_free(&p);
}

/* profile.Parse reads the unit of a numeric label only: a string label's
 * num_unit, even out of range, is accepted (Go 1.19 parses such a profile;
 * profd refused it) and ignored. A numeric label's is still checked (the
 * inj_label_unit_big case of test_string_index_out_of_range). */
static void inj_label_str_unit_big(struct tb *b) { label_sample(b, (struct tb_label){S_MAIN, S_MAIN, 7, S_NMIN}); }

static void test_string_label_unit_not_read(void **state)
{
	(void)state;
	struct tb b;
	build_injected(&b, inj_label_str_unit_big);
	struct pd_profile *d = tu_decode(&b);
	const struct pd_sample *s = &d->samples[d->nsamples - 1];
	assert_int_equal(s->nlabels, 1);
	tu_assert_str(d, s->labels[0].key, "main");
	tu_assert_str(d, s->labels[0].str, "main");
	assert_int_equal(s->labels[0].num_unit, 0);
	pd_profile_free(d);
	tb_free(&b);
}

static void test_values_vs_sample_types(void **state)
{
	(void)state;
	struct pd_err err;
	for (size_t nv = 0; nv <= 3; nv++) {
		if (nv == 2)
			continue;
		struct tb b;
		tb_init(&b);
		tu_minimal_body(&b);
		uint64_t loc = 1;
		int64_t vals[3] = {1, 2, 3};
		tb_sample(&b, &loc, 1, vals, nv, NULL, 0, nv == 3);
		tu_minimal_strings(&b);
		assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
		assert_contains(err.msg, "sample #1");
		assert_contains(err.msg, "values");
		assert_contains(err.msg, "sample types");
		tb_free(&b);
	}
	/* samples with values but no sample types */
	struct tb b;
	tb_init(&b);
	uint64_t loc = 1;
	int64_t v = 5;
	tb_sample(&b, &loc, 1, &v, 1, NULL, 0, false);
	struct tb_line ln = {1, 1, 0};
	tb_location(&b, 1, 0, 0, &ln, 1, false);
	tb_function(&b, 1, S_MAIN, 0, 0, 0);
	tu_minimal_strings(&b);
	assert_int_equal(tu_decode_err(b.p, b.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "sample type");
	tb_free(&b);
}

/* pprof's CheckValid: "missing sample type information" whenever there are
 * samples and no sample types, even if those samples carry no values. */
static void test_samples_without_sample_types_no_values(void **state)
{
	(void)state;
	struct pd_err err;
	struct tb b;
	tb_init(&b);
	uint64_t loc = 1;
	tb_sample(&b, &loc, 1, NULL, 0, NULL, 0, false);
	struct tb_line ln = {1, 1, 0};
	tb_location(&b, 1, 0, 0, &ln, 1, false);
	tb_function(&b, 1, S_MAIN, 0, 0, 0);
	tu_minimal_strings(&b);
	struct pd_profile *p = (struct pd_profile *)1;
	memset(&err, 0, sizeof err);
	int rc = pd_pprof_decode(b.p, b.len, NULL, &p, &err);
	if (rc == 0)
		pd_profile_free(p);
	tb_free(&b);
	assert_int_equal(rc, PD_EINVAL);
	assert_contains(err.msg, "sample type");
}

/* ---- concatenation -------------------------------------------------------------------- */

static void test_concatenated_profiles(void **state)
{
	(void)state;
	struct tb a;
	tb_init(&a);
	tu_minimal(&a);
	tb_int(&a, PF_TIME_NANOS, 1000);
	struct tb two;
	tb_init(&two);
	tb_raw(&two, a.p, a.len);
	tb_raw(&two, a.p, a.len);
	struct pd_err err;
	assert_int_equal(tu_decode_err(two.p, two.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "concatenated");
	/* one of them alone is fine */
	struct pd_profile *p = tu_decode(&a);
	assert_int_equal(p->time_nanos, 1000);
	pd_profile_free(p);
	/* the full profile appended to itself */
	struct tb f;
	tb_init(&f);
	build_full(&f, false);
	tb_free(&two);
	tb_init(&two);
	tb_raw(&two, f.p, f.len);
	tb_raw(&two, f.p, f.len);
	assert_int_equal(tu_decode_err(two.p, two.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "concatenated");
	/* gzip'd concatenation too */
	struct pd_buf gz = PD_BUF_INIT(0);
	assert_int_equal(pd_gzip(two.p, two.len, 6, &gz, &err), 0);
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "concatenated");
	pd_buf_free(&gz);
	tb_free(&f);
	tb_free(&two);
	tb_free(&a);
}

/* Upstream (profile/encode.go) rejects a second time_nanos field whenever
 * the first was non-zero, whatever the second value is. */
static void test_concatenated_second_time_zero(void **state)
{
	(void)state;
	struct tb a;
	tb_init(&a);
	tu_minimal(&a);
	tb_int(&a, PF_TIME_NANOS, 1000);
	tb_int(&a, PF_TIME_NANOS, 0);
	struct pd_profile *p = (struct pd_profile *)1;
	struct pd_err err;
	memset(&err, 0, sizeof err);
	int rc = pd_pprof_decode(a.p, a.len, NULL, &p, &err);
	if (rc == 0)
		pd_profile_free(p);
	tb_free(&a);
	assert_int_equal(rc, PD_EINVAL);
	assert_contains(err.msg, "concatenated");
}

/* ---- robustness ---------------------------------------------------------------------- */

static void test_truncated_every_prefix(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	build_full(&b, true);
	size_t ok = 0;
	for (size_t n = 0; n <= b.len; n++) {
		/* a fresh exact-size copy so ASan sees any read past the prefix */
		uint8_t *c = malloc(n ? n : 1);
		assert_non_null(c);
		memcpy(c, b.p, n);
		struct pd_profile *p = NULL;
		struct pd_err err = {0, ""};
		int rc = pd_pprof_decode(c, n, NULL, &p, &err);
		if (rc == 0) {
			assert_non_null(p);
			ok++;
			pd_profile_free(p);
		} else {
			assert_null(p);
			assert_true(err.msg[0] != 0);
		}
		free(c);
	}
	assert_true(ok >= 1); /* at least the whole thing */
	/* gzip'd: every strict prefix (with the magic) is an error */
	struct pd_buf gz = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_gzip(b.p, b.len, 6, &gz, &err), 0);
	for (size_t n = 2; n < gz.len; n++) {
		uint8_t *c = malloc(n);
		assert_non_null(c);
		memcpy(c, gz.ptr, n);
		struct pd_profile *p = NULL;
		int rc = pd_pprof_decode(c, n, NULL, &p, &err);
		if (rc != PD_EINVAL)
			fail_msg("gzip prefix of %zu/%zu bytes: rc %d (%s)", n, gz.len, rc, rc ? err.msg : "ok");
		assert_null(p);
		free(c);
	}
	pd_buf_free(&gz);
	tb_free(&b);
}

static void flip_all_bits(const uint8_t *d, size_t len, size_t *nok)
{
	uint8_t *c = malloc(len);
	assert_non_null(c);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(c, d, len);
			c[i] ^= (uint8_t)(1u << bit);
			struct pd_profile *p = NULL;
			struct pd_err err = {0, ""};
			int rc = pd_pprof_decode(c, len, NULL, &p, &err);
			if (rc == 0) {
				/* whatever decodes must be a valid model: walk it */
				for (size_t s = 0; s < p->nsamples; s++)
					for (uint32_t k = 0; k < p->samples[s].nlocs; k++)
						assert_true(p->samples[s].locs[k] < p->nlocations);
				for (uint32_t l = 0; l < p->nlocations; l++) {
					const struct pd_location *lo = &p->locations[l];
					assert_true(lo->mapping == PD_NONE || lo->mapping < p->nmappings);
					for (uint32_t j = 0; j < lo->nlines; j++)
						assert_true(lo->lines[j].function < p->nfunctions);
				}
				for (uint32_t f = 0; f < p->nfunctions; f++)
					assert_true(p->functions[f].name < p->nstrings);
				(*nok)++;
				pd_profile_free(p);
			} else {
				assert_null(p);
				assert_true(rc == PD_EINVAL || rc == PD_ELIMIT);
			}
		}
	}
	free(c);
}

static void test_bit_flips(void **state)
{
	(void)state;
	size_t nok = 0;
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	flip_all_bits(b.p, b.len, &nok);
	tb_free(&b);
	tb_init(&b);
	build_full(&b, false);
	flip_all_bits(b.p, b.len, &nok);
	tb_free(&b);
	assert_true(nok > 0); /* some flips (e.g. in values) stay valid */
}

/* ---- limits -------------------------------------------------------------------------- */

static void test_limits(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	build_full(&b, false); /* 2 samples, depth 3, 2 labels, 21 strings, 3 locs, 2 fns, 2 maps */
	struct pd_pprof_limits none = {0};
	struct pd_profile *p = tu_decode_lim(b.p, b.len, &none);
	pd_profile_free(p);
	static const struct {
		size_t off, val;
		const char *word;
	} cases[] = {
		{offsetof(struct pd_pprof_limits, max_samples), 1, "samples"},
		{offsetof(struct pd_pprof_limits, max_stack_depth), 2, "stack depth"},
		{offsetof(struct pd_pprof_limits, max_labels), 1, "labels"},
		{offsetof(struct pd_pprof_limits, max_strings), 3, "strings"},
		{offsetof(struct pd_pprof_limits, max_locations), 2, "locations"},
		{offsetof(struct pd_pprof_limits, max_functions), 1, "functions"},
		{offsetof(struct pd_pprof_limits, max_mappings), 1, "mappings"},
		{offsetof(struct pd_pprof_limits, max_lines), 1, "lines"},
		{offsetof(struct pd_pprof_limits, max_sample_types), 1, "sample types"},
		{offsetof(struct pd_pprof_limits, max_string_bytes), 16, "bytes of strings"},
		{offsetof(struct pd_pprof_limits, max_compressed), 100, "limit"},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct pd_pprof_limits lim = {0};
		memcpy((char *)&lim + cases[i].off, &cases[i].val, sizeof(size_t));
		struct pd_err err;
		int rc = tu_decode_err(b.p, b.len, &lim, &err);
		char num[32];
		snprintf(num, sizeof num, "%zu", cases[i].val);
		if (rc != PD_ELIMIT || !strstr(err.msg, cases[i].word) || !strstr(err.msg, num))
			fail_msg("limit case %zu (%s=%zu): rc %d, message \"%s\"", i, cases[i].word, cases[i].val, rc,
				 err.msg);
		/* one more than needed passes */
		struct pd_pprof_limits at = {0};
		size_t exact[] = {2, 3, 2, F_N, 3, 2, 2, 2, 2, 4096, b.len};
		memcpy((char *)&at + cases[i].off, &exact[i], sizeof(size_t));
		p = tu_decode_lim(b.p, b.len, &at);
		pd_profile_free(p);
	}
	/* max_decompressed on gzip input */
	struct pd_buf gz = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_gzip(b.p, b.len, 6, &gz, &err), 0);
	struct pd_pprof_limits lim = {0};
	lim.max_decompressed = 64;
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, &lim, &err), PD_ELIMIT);
	assert_contains(err.msg, "64-byte limit");
	lim.max_decompressed = b.len;
	p = tu_decode_lim(gz.ptr, gz.len, &lim);
	pd_profile_free(p);
	lim.max_decompressed = b.len - 1;
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, &lim, &err), PD_ELIMIT);
	pd_buf_free(&gz);
	tb_free(&b);
}

/* ---- gzip ---------------------------------------------------------------------------- */

static void test_gzip_same_as_raw(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	build_full(&b, true);
	struct pd_profile *raw = tu_decode(&b);
	for (int level = 1; level <= 12; level += 5) {
		struct pd_buf gz = PD_BUF_INIT(0);
		struct pd_err err;
		assert_int_equal(pd_gzip(b.p, b.len, level, &gz, &err), 0);
		assert_true(pd_is_gzip(gz.ptr, gz.len));
		struct pd_profile *z = tu_decode_lim(gz.ptr, gz.len, NULL);
		tu_assert_profiles_equal(raw, z);
		pd_profile_free(z);
		pd_buf_free(&gz);
	}
	pd_profile_free(raw);
	tb_free(&b);
}

static void gz_of_minimal(struct pd_buf *gz)
{
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	struct pd_err err;
	assert_int_equal(pd_gzip(b.p, b.len, 6, gz, &err), 0);
	tb_free(&b);
}

static void test_gzip_corrupt(void **state)
{
	(void)state;
	struct pd_err err;
	/* trailing garbage */
	struct pd_buf gz = PD_BUF_INIT(0);
	gz_of_minimal(&gz);
	assert_int_equal(pd_buf_append(&gz, "garbage", 7), 0);
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "decompressing profile");
	assert_contains(err.msg, "trailing garbage");
	pd_buf_free(&gz);
	/* corrupted deflate: reserved block type 3 */
	gz_of_minimal(&gz);
	gz.ptr[10] |= 0x06;
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "decompressing profile");
	assert_contains(err.msg, "gzip");
	pd_buf_free(&gz);
	/* corrupted CRC */
	gz_of_minimal(&gz);
	gz.ptr[gz.len - 8] ^= 0xff;
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "gzip");
	pd_buf_free(&gz);
	/* truncated */
	gz_of_minimal(&gz);
	assert_int_equal(tu_decode_err(gz.ptr, gz.len - 5, NULL, &err), PD_EINVAL);
	assert_contains(err.msg, "gzip");
	assert_int_equal(tu_decode_err(gz.ptr, 2, NULL, &err), PD_EINVAL);
	assert_int_equal(tu_decode_err(gz.ptr, gz.len / 2, NULL, &err), PD_EINVAL);
	pd_buf_free(&gz);
	/* bad header (unsupported compression method) */
	gz_of_minimal(&gz);
	gz.ptr[2] = 7;
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, NULL, &err), PD_EINVAL);
	pd_buf_free(&gz);
}

static void test_gzip_bomb(void **state)
{
	(void)state;
	size_t n = 64u << 20;
	uint8_t *zeros = calloc(1, n);
	assert_non_null(zeros);
	struct pd_buf gz = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_gzip(zeros, n, 1, &gz, &err), 0);
	free(zeros);
	assert_true(gz.len < n / 100);
	struct pd_pprof_limits lim = {0};
	lim.max_decompressed = 1u << 20;
	double t0 = pd_now();
	assert_int_equal(tu_decode_err(gz.ptr, gz.len, &lim, &err), PD_ELIMIT);
	assert_contains(err.msg, "1048576-byte limit");
	/* lying ISIZE trailers: 1 byte, and 4 GiB - 1 */
	static const uint8_t lies[2][4] = {{1, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}};
	for (int i = 0; i < 2; i++) {
		memcpy(gz.ptr + gz.len - 4, lies[i], 4);
		assert_int_equal(tu_decode_err(gz.ptr, gz.len, &lim, &err), PD_ELIMIT);
		uint8_t *out = NULL;
		size_t outlen = 0;
		assert_int_equal(pd_gunzip(gz.ptr, gz.len, 1u << 20, &out, &outlen, &err), PD_ELIMIT);
		assert_null(out);
	}
	double dt = pd_now() - t0;
	if (dt > 10)
		fail_msg("gzip bomb took %.1fs to reject", dt);
	pd_buf_free(&gz);
}

/* ---- encode ---------------------------------------------------------------------------- */

static struct pd_profile *reencode(const struct pd_profile *p, int level, struct pd_buf *keep)
{
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err = {0, ""};
	int rc = pd_pprof_encode(p, level, &out, &err);
	if (rc)
		fail_msg("encode failed: %s", err.msg);
	struct pd_profile *q = tu_decode_lim(out.ptr, out.len, NULL);
	if (keep)
		*keep = out;
	else
		pd_buf_free(&out);
	return q;
}

static void test_encode_round_trip(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	build_full(&b, true);
	struct pd_profile *p = tu_decode(&b);
	struct pd_buf raw;
	struct pd_profile *q = reencode(p, 0, &raw);
	tu_assert_profiles_equal(p, q);
	check_full(q);
	assert_false(pd_is_gzip(raw.ptr, raw.len));
	assert_true(raw.len < b.len); /* unknown fields are gone */
	/* encoding is a fixed point */
	struct pd_buf raw2;
	struct pd_profile *r = reencode(q, 0, &raw2);
	assert_int_equal(raw.len, raw2.len);
	assert_memory_equal(raw.ptr, raw2.ptr, raw.len);
	tu_assert_profiles_equal(q, r);
	pd_profile_free(r);
	/* gzip levels */
	for (int level = 1; level <= 12; level += 11) {
		struct pd_buf gz;
		r = reencode(p, level, &gz);
		assert_true(pd_is_gzip(gz.ptr, gz.len));
		tu_assert_profiles_equal(p, r);
		pd_profile_free(r);
		pd_buf_free(&gz);
	}
	/* encode appends to what the buffer holds */
	struct pd_buf app = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_buf_append(&app, "XY", 2), 0);
	assert_int_equal(pd_pprof_encode(p, 0, &app, &err), 0);
	assert_int_equal(app.len, raw.len + 2);
	assert_memory_equal(app.ptr + 2, raw.ptr, raw.len);
	pd_buf_free(&app);
	/* a capped output buffer: PD_ELIMIT, not a crash */
	struct pd_buf small = PD_BUF_INIT(16);
	assert_int_equal(pd_pprof_encode(p, 0, &small, &err), PD_ELIMIT);
	pd_buf_free(&small);
	pd_buf_free(&raw);
	pd_buf_free(&raw2);
	pd_profile_free(q);
	pd_profile_free(p);
	tb_free(&b);
}

/* Sample with 4 sample types (packed values), extreme values, many labels. */
static void test_encode_round_trip_extremes(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "alloc_objects", "count");
	pb_sample_type(&p, "alloc_space", "bytes");
	pb_sample_type(&p, "inuse_objects", "count");
	pb_sample_type(&p, "inuse_space", "bytes");
	pb_period_type(&p, "space", "bytes", 524288);
	tb_int(&p.b, PF_TIME_NANOS, -1);
	tb_int(&p.b, PF_DURATION_NANOS, INT64_MIN);
	pb_mapping(&p, UINT64_MAX, 0, UINT64_MAX, UINT64_MAX - 1, "/huge", "bid");
	tb_function(&p.b, 3, pb_s(&p, "neg"), pb_s(&p, "neg_sys"), pb_s(&p, "n.go"), -42);
	struct tb_line lines[3] = {{3, -1, -2}, {3, INT64_MAX, INT64_MIN}, {3, 1, 1}};
	tb_location(&p.b, 1ULL << 63, UINT64_MAX, UINT64_MAX, lines, 3, true);
	uint64_t locs[4] = {1ULL << 63, 1ULL << 63, 1ULL << 63, 1ULL << 63};
	int64_t vals[4] = {INT64_MIN, -1, INT64_MAX, 0};
	struct pb_label lb[6] = {{"z", "1", 0, NULL},         {"a", "2", 0, NULL},
				 {"n", NULL, INT64_MIN, "bytes"}, {"n", NULL, -1, NULL},
				 {"a", "3", 0, NULL},         {"u", NULL, 0, "ms"}};
	pb_sample(&p, locs, 4, vals, 4, lb, 6);
	int64_t vals2[4] = {1, 2, 3, 4};
	pb_sample(&p, locs, 1, vals2, 4, NULL, 0);
	pb_sample(&p, NULL, 0, vals2, 4, NULL, 0); /* no locations */
	const char *c[3] = {"c1", "c2", "c3"};
	for (int i = 0; i < 3; i++)
		tb_int(&p.b, PF_COMMENT, pb_s(&p, c[i]));
	tb_int(&p.b, PF_DOC_URL, pb_s(&p, "https://x"));
	struct pd_profile *d = pb_decode(&p);
	assert_int_equal(d->samples[0].values[0], INT64_MIN);
	assert_int_equal(d->samples[0].nlabels, 6);
	assert_int_equal(d->locations[0].lines[1].column, INT64_MIN);
	assert_int_equal(d->functions[0].start_line, -42);
	struct pd_profile *q = reencode(d, 0, NULL);
	tu_assert_profiles_equal(d, q);
	pd_profile_free(q);
	pd_profile_free(d);
	pb_free(&p);
}

/* Find the nth occurrence of field num at the top level of an encoding. */
static bool top_field(const struct pd_buf *b, uint32_t num, int nth, struct rd *out)
{
	const uint8_t *p = b->ptr, *end = b->ptr + b->len;
	struct rd f;
	while (rd_next(&p, end, &f))
		if (f.num == num && nth-- == 0) {
			*out = f;
			return true;
		}
	return false;
}

/* Wire types used for field num inside a message: bit wt set. */
static unsigned field_wts(const uint8_t *d, size_t n, uint32_t num)
{
	const uint8_t *p = d, *end = d + n;
	struct rd f;
	unsigned wts = 0;
	while (rd_next(&p, end, &f))
		if (f.num == num)
			wts |= 1u << f.wt;
	return wts;
}

/* Upstream's encoder packs repeated scalars with more than 2 elements and
 * always writes default_sample_type. */
static void test_encode_packing_rule(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "a", "count");
	pb_sample_type(&p, "b", "count");
	pb_sample_type(&p, "c", "count");
	pb_function(&p, 1, "f", "f.go", 0);
	for (uint64_t i = 1; i <= 3; i++)
		pb_location1(&p, i, 0, i, 1, (int64_t)i);
	uint64_t locs[3] = {1, 2, 3};
	int64_t vals[3] = {1, 2, 3};
	tb_sample(&p.b, locs, 2, vals, 3, NULL, 0, false); /* 2 locations, 3 values, unpacked on input */
	tb_sample(&p.b, locs, 3, vals, 3, NULL, 0, true);
	struct pd_profile *d = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(d, 0, &out, &err), 0);
	struct rd s0, s1, dst;
	memset(&s0, 0, sizeof s0);
	memset(&s1, 0, sizeof s1);
	memset(&dst, 0, sizeof dst);
	assert_true(top_field(&out, PF_SAMPLE, 0, &s0));
	assert_true(top_field(&out, PF_SAMPLE, 1, &s1));
	assert_int_equal(field_wts(s0.d, s0.n, 1), 1u << 0); /* 2 location ids: unpacked */
	assert_int_equal(field_wts(s0.d, s0.n, 2), 1u << 2); /* 3 values: packed */
	assert_int_equal(field_wts(s1.d, s1.n, 1), 1u << 2);
	assert_true(top_field(&out, PF_DEFAULT_SAMPLE_TYPE, 0, &dst));
	assert_int_equal(dst.wt, 0);
	assert_int_equal(dst.v, 0);
	/* Go writes the string table after the entities */
	struct rd st;
	memset(&st, 0, sizeof st);
	assert_true(top_field(&out, PF_STRING_TABLE, 0, &st));
	assert_true(st.d > s1.d);
	pd_buf_free(&out);
	pd_profile_free(d);
	pb_free(&p);
}

/* encodeInt64s(b, 13, p.commentX) packs comments too when there are > 2. */
static void test_encode_packs_many_comments(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	const char *c[3] = {"c1", "c2", "c3"};
	for (int i = 0; i < 3; i++)
		tb_int(&p.b, PF_COMMENT, pb_s(&p, c[i]));
	struct pd_profile *d = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(d, 0, &out, &err), 0);
	unsigned wts = field_wts(out.ptr, out.len, PF_COMMENT);
	pd_buf_free(&out);
	pd_profile_free(d);
	pb_free(&p);
	assert_int_equal(wts, 1u << 2);
}

/* ---- sample index ------------------------------------------------------------------------ */

static void test_sample_index(void **state)
{
	(void)state;
	struct pb p;
	pb_init(&p);
	pb_sample_type(&p, "alloc_objects", "count");
	pb_sample_type(&p, "alloc_space", "bytes");
	pb_sample_type(&p, "inuse_objects", "count");
	pb_sample_type(&p, "inuse_space", "bytes");
	pb_period_type(&p, "space", "bytes", 524288);
	struct pd_profile *d = pb_decode(&p);
	assert_int_equal(pd_profile_default_index(d), 3);
	assert_int_equal(pd_profile_sample_index(d, ""), 3);
	assert_int_equal(pd_profile_sample_index(d, NULL), 3);
	assert_int_equal(pd_profile_sample_index(d, "alloc_space"), 1);
	assert_int_equal(pd_profile_sample_index(d, "inuse_objects"), 2);
	assert_int_equal(pd_profile_sample_index(d, "0"), 0);
	assert_int_equal(pd_profile_sample_index(d, "3"), 3);
	assert_int_equal(pd_profile_sample_index(d, "4"), -1);
	assert_int_equal(pd_profile_sample_index(d, "-1"), -1);
	assert_int_equal(pd_profile_sample_index(d, "nope"), -1);
	assert_int_equal(pd_profile_sample_index(d, "alloc_spac"), -1);
	assert_string_equal(pd_profile_kind(d), "heap");
	pd_profile_free(d);
	pb_free(&p);

	/* default_sample_type names a type */
	pb_init(&p);
	pb_sample_type(&p, "alloc_objects", "count");
	pb_sample_type(&p, "alloc_space", "bytes");
	pb_sample_type(&p, "inuse_objects", "count");
	pb_sample_type(&p, "inuse_space", "bytes");
	pb_period_type(&p, "space", "bytes", 524288);
	tb_int(&p.b, PF_DEFAULT_SAMPLE_TYPE, pb_s(&p, "alloc_space"));
	d = pb_decode(&p);
	assert_int_equal(pd_profile_default_index(d), 1);
	assert_int_equal(pd_profile_sample_index(d, ""), 1);
	assert_int_equal(pd_profile_sample_index(d, "inuse_space"), 3);
	assert_string_equal(pd_profile_kind(d), "allocs");
	pd_profile_free(d);
	pb_free(&p);

	/* legacy "space"/"objects" types: "inuse_space" strips to "space";
	 * a default naming no type falls back to the last */
	pb_init(&p);
	pb_sample_type(&p, "objects", "count");
	pb_sample_type(&p, "space", "bytes");
	pb_sample_type(&p, "other", "count");
	tb_int(&p.b, PF_DEFAULT_SAMPLE_TYPE, pb_s(&p, "missing"));
	d = pb_decode(&p);
	assert_int_equal(pd_profile_default_index(d), 2);
	assert_int_equal(pd_profile_sample_index(d, "inuse_space"), 1);
	assert_int_equal(pd_profile_sample_index(d, "inuse_objects"), 0);
	assert_int_equal(pd_profile_sample_index(d, "space"), 1);
	pd_profile_free(d);
	pb_free(&p);
}

static void test_describe_types(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	struct pd_profile *p = tu_decode(&b);
	char buf[256];
	pd_profile_describe_types(p, buf, sizeof buf);
	assert_string_equal(buf, "[samples/count cpu/nanoseconds] period cpu/nanoseconds");
	char tiny[8];
	pd_profile_describe_types(p, tiny, sizeof tiny);
	assert_int_equal(strlen(tiny), 7);
	pd_profile_free(p);
	tb_free(&b);
}

static void test_decode_file(void **state)
{
	(void)state;
	char path[] = "/tmp/profd_test_pprof_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	FILE *f = fdopen(fd, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b.p, 1, b.len, f), b.len);
	fclose(f);
	struct pd_profile *p = NULL;
	struct pd_err err;
	assert_int_equal(pd_pprof_decode_file(path, NULL, &p, &err), 0);
	assert_int_equal(p->nsamples, 1);
	pd_profile_free(p);
	/* over max_compressed: ELIMIT, message prefixed with the path */
	struct pd_pprof_limits lim = {0};
	lim.max_compressed = 10;
	assert_int_equal(pd_pprof_decode_file(path, &lim, &p, &err), PD_ELIMIT);
	assert_contains(err.msg, path);
	/* truncated file: message prefixed with the path */
	assert_int_equal(truncate(path, (off_t)(b.len - 3)), 0);
	assert_int_equal(pd_pprof_decode_file(path, NULL, &p, &err), PD_EINVAL);
	assert_contains(err.msg, path);
	unlink(path);
	assert_int_equal(pd_pprof_decode_file(path, NULL, &p, &err), PD_EIO);
	tb_free(&b);
}

/* A file of exactly max_compressed bytes is within the limit. */
static void test_decode_file_exact_limit(void **state)
{
	(void)state;
	char path[] = "/tmp/profd_test_pprof_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct tb b;
	tb_init(&b);
	tu_minimal(&b);
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	close(fd);
	struct pd_pprof_limits lim = {0};
	lim.max_compressed = b.len;
	struct pd_profile *p = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_pprof_decode_file(path, &lim, &p, &err);
	pd_profile_free(p);
	unlink(path);
	tb_free(&b);
	if (rc != 0)
		fail_msg("file of exactly max_compressed bytes: rc %d (%s)", rc, err.msg);
}

/* max_decompressed is honoured for caps under 64 bytes too. */
static void test_small_max_decompressed(void **state)
{
	(void)state;
	struct tb b;
	tb_init(&b);
	tb_vtype(&b, PF_PERIOD_TYPE, 1, 2);
	tb_str(&b, PF_STRING_TABLE, "");
	tb_str(&b, PF_STRING_TABLE, "cpu");
	tb_str(&b, PF_STRING_TABLE, "nanoseconds");
	assert_true(b.len > 16 && b.len < 64);
	struct pd_buf gz = PD_BUF_INIT(0);
	struct pd_err gerr;
	assert_int_equal(pd_gzip(b.p, b.len, 6, &gz, &gerr), 0);
	tb_free(&b);
	struct pd_pprof_limits lim = {0};
	lim.max_decompressed = 16;
	struct pd_profile *p = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_pprof_decode(gz.ptr, gz.len, &lim, &p, &err);
	pd_profile_free(p);
	pd_buf_free(&gz);
	assert_int_equal(rc, PD_ELIMIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_minimal),
		cmocka_unit_test(test_decode_every_field),
		cmocka_unit_test(test_unknown_fields_skipped),
		cmocka_unit_test(test_packed_unpacked_mixed),
		cmocka_unit_test(test_group_wire_types_rejected),
		cmocka_unit_test(test_wrong_wire_type_names_field),
		cmocka_unit_test(test_bad_varints_and_lengths),
		cmocka_unit_test(test_sparse_ids),
		cmocka_unit_test(test_duplicate_and_zero_ids),
		cmocka_unit_test(test_unknown_function_id),
		cmocka_unit_test(test_unknown_location_id),
		cmocka_unit_test(test_packed_ids_every_length),
		cmocka_unit_test(test_packed_ids_bad),
		cmocka_unit_test(test_unknown_mapping_id_is_none),
		cmocka_unit_test(test_string_index_out_of_range),
		cmocka_unit_test(test_string_table_rules),
		cmocka_unit_test(test_label_rules),
		cmocka_unit_test(test_string_label_unit_not_read),
		cmocka_unit_test(test_values_vs_sample_types),
		cmocka_unit_test(test_samples_without_sample_types_no_values),
		cmocka_unit_test(test_concatenated_profiles),
		cmocka_unit_test(test_concatenated_second_time_zero),
		cmocka_unit_test(test_truncated_every_prefix),
		cmocka_unit_test(test_bit_flips),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_gzip_same_as_raw),
		cmocka_unit_test(test_gzip_corrupt),
		cmocka_unit_test(test_gzip_bomb),
		cmocka_unit_test(test_encode_round_trip),
		cmocka_unit_test(test_encode_round_trip_extremes),
		cmocka_unit_test(test_encode_packing_rule),
		cmocka_unit_test(test_encode_packs_many_comments),
		cmocka_unit_test(test_sample_index),
		cmocka_unit_test(test_describe_types),
		cmocka_unit_test(test_decode_file),
		cmocka_unit_test(test_decode_file_exact_limit),
		cmocka_unit_test(test_small_max_decompressed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
