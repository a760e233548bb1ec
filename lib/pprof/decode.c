/*
 * decode.c — profile.proto decoder into the arena-backed model of pprof.h.
 *
 * Go writes string_table last, and samples before the locations they
 * reference, so the decoder works in passes:
 *   1. one scan of the top level: counts every repeated field (arrays are
 *      sized exactly, caps enforced), validates framing, detects
 *      concatenated profiles, and records where each field is;
 *   2. strings, header fields, sample types, mappings, functions;
 *   3. locations (mapping and function ids resolved to indexes);
 *   4. samples (location ids resolved to indexes).
 * Passes 2-4 walk the recorded field list, not the bytes.
 * Every string index is range-checked and every id reference resolved, so a
 * decoded profile is valid by construction (the rules of pprof's
 * postDecode + CheckValid). Unknown fields are skipped; wire types 3/4 and a
 * known field with the wrong wire type are errors, as upstream.
 */
#include "pprof.h"
#include "wire.h"
#include "legacy.h"
#include "../util/gz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct topf;

struct dec {
	const uint8_t *base; /* start of the raw protobuf, for offsets in messages */
	struct pd_profile *p;
	struct pd_pprof_limits lim;
	struct pd_err *err;
	size_t nstrings; /* from pass 1 */
	size_t rawlen;   /* bytes of raw protobuf (held by the profile) */
	/* scratch for one sample, reused */
	uint32_t *sc_locs;
	struct pd_label *sc_labels;
	size_t sc_locs_cap, sc_labels_cap;
	int64_t sc_vals[PD_DEFAULT_MAX_SAMPLE_TYPES];
	struct topf *tops; /* top-level fields, from pass 1 */
	/* streaming decode: called before the samples, then for each sample */
	pd_header_fn on_header;
	pd_sample_fn on_sample;
	void *cb_ctx;
	size_t ntops, tops_cap;
	/* id -> index maps */
	struct idmap {
		bool dense; /* ids are 1..n in order: index = id - 1 */
		struct pd_hidx h;
		const uint8_t *arr; /* the entity array; id is the first field */
		size_t stride, n;
	} mmap, fmap, lmap;
};

static const char *const profile_field_names[] = {
	"?", "sample_type", "sample", "mapping", "location", "function", "string_table",
	"drop_frames", "keep_frames", "time_nanos", "duration_nanos", "period_type", "period",
	"comment", "default_sample_type", "doc_url"};

#define OFF(d, ptr) ((size_t)((const uint8_t *)(ptr) - (d)->base))

/* One protobuf field as read by next_field. */
struct field {
	uint32_t num, wt;
	uint64_t v;            /* varint / fixed value */
	const uint8_t *data;   /* WT_LEN payload */
	size_t len;
	const uint8_t *start;  /* where the tag began */
};

/* Read the next field at *pp; returns 0, or an error filled into d->err. */
static __attribute__((noinline)) int next_field_slow(struct dec *d, const uint8_t **pp, const uint8_t *end,
						    struct field *f, const char *msg)
{
	const uint8_t *p = *pp;
	uint64_t tag;
	f->start = p;
	if (pd_varint(&p, end, &tag))
		return pd_errf(d->err, PD_EINVAL, "%s at offset %zu: truncated or overlong field tag", msg,
			       OFF(d, f->start));
	f->num = (uint32_t)(tag >> 3);
	if (tag >> 3 > 0x1fffffff || f->num == 0)
		return pd_errf(d->err, PD_EINVAL, "%s at offset %zu: invalid field number %llu", msg,
			       OFF(d, f->start), (unsigned long long)(tag >> 3));
	f->wt = (uint32_t)(tag & 7);
	f->data = NULL;
	f->len = 0;
	f->v = 0;
	switch (f->wt) {
	case WT_VARINT:
		if (pd_varint(&p, end, &f->v))
			return pd_errf(d->err, PD_EINVAL, "%s field %u at offset %zu: bad varint", msg, f->num,
				       OFF(d, f->start));
		break;
	case WT_I64:
		if (end - p < 8)
			return pd_errf(d->err, PD_EINVAL, "%s field %u at offset %zu: truncated fixed64", msg,
				       f->num, OFF(d, f->start));
		memcpy(&f->v, p, 8);
		p += 8;
		break;
	case WT_I32: {
		uint32_t x;
		if (end - p < 4)
			return pd_errf(d->err, PD_EINVAL, "%s field %u at offset %zu: truncated fixed32", msg,
				       f->num, OFF(d, f->start));
		memcpy(&x, p, 4);
		f->v = x;
		p += 4;
		break;
	}
	case WT_LEN: {
		uint64_t n;
		if (pd_varint(&p, end, &n))
			return pd_errf(d->err, PD_EINVAL, "%s field %u at offset %zu: bad length varint", msg,
				       f->num, OFF(d, f->start));
		if (n > (uint64_t)(end - p))
			return pd_errf(d->err, PD_EINVAL,
				       "%s field %u at offset %zu: length %llu runs past the end of its message "
				       "(%zu bytes left; truncated file?)",
				       msg, f->num, OFF(d, f->start), (unsigned long long)n, (size_t)(end - p));
		f->data = p;
		f->len = (size_t)n;
		p += n;
		break;
	}
	default:
		return pd_errf(d->err, PD_EINVAL, "%s field %u at offset %zu: unknown wire type %u", msg, f->num,
			       OFF(d, f->start), f->wt);
	}
	*pp = p;
	return 0;
}

/* Fast path for the common case: one-byte tag, one-byte varint or length. */
static inline __attribute__((always_inline)) int next_field(struct dec *d, const uint8_t **pp, const uint8_t *end,
							   struct field *f, const char *msg)
{
	const uint8_t *p = *pp;
	if (PD_LIKELY(p < end && p[0] >= 8 && p[0] < 0x80)) {
		uint32_t wt = p[0] & 7;
		const uint8_t *q = p + 1;
		uint64_t v;
		if (PD_UNLIKELY(pd_varint(&q, end, &v)))
			goto slow;
		f->start = p;
		f->num = p[0] >> 3;
		f->wt = wt;
		if (wt == WT_VARINT) {
			f->v = v;
			f->data = NULL;
			f->len = 0;
			*pp = q;
			return 0;
		}
		if (wt == WT_LEN && v <= (uint64_t)(end - q)) {
			f->v = 0;
			f->data = q;
			f->len = (size_t)v;
			*pp = q + v;
			return 0;
		}
	}
slow:
	return next_field_slow(d, pp, end, f, msg);
}

static int want_wt(struct dec *d, const struct field *f, uint32_t wt, const char *msg, const char *name)
{
	if (f->wt == wt)
		return 0;
	return pd_errf(d->err, PD_EINVAL, "%s.%s (field %u) at offset %zu: wire type %u, expected %u", msg,
		       name, f->num, OFF(d, f->start), f->wt, wt);
}

/* A string index field: must be a varint within the string table. */
static int str_index(struct dec *d, const struct field *f, const char *msg, const char *name, uint32_t *out)
{
	int rc = want_wt(d, f, WT_VARINT, msg, name);
	if (rc)
		return rc;
	int64_t v = (int64_t)f->v;
	if (v < 0 || (uint64_t)v >= d->nstrings)
		return pd_errf(d->err, PD_EINVAL,
			       "%s.%s at offset %zu: string index %lld out of range (string_table has %zu entries)",
			       msg, name, OFF(d, f->start), (long long)v, d->nstrings);
	*out = (uint32_t)v;
	return 0;
}

static int check_cap(struct dec *d, size_t n, size_t cap, const char *what)
{
	if (n > cap)
		return pd_errf(d->err, PD_ELIMIT, "profile has more than %zu %s (limit)", cap, what);
	return 0;
}

/* ---- id maps ------------------------------------------------------------- */

struct idkey {
	const struct idmap *m;
	uint64_t id;
};

static bool id_eq(void *ctx, uint32_t val)
{
	const struct idkey *k = ctx;
	uint64_t id;
	memcpy(&id, k->m->arr + (size_t)val * k->m->stride, 8);
	return id == k->id;
}

/* Build the map for n entities whose uint64 id is the first field. Rejects
 * id 0 and duplicate ids as pprof's CheckValid does. */
static int idmap_build(struct dec *d, struct idmap *m, const void *arr, size_t stride, size_t n,
		       const char *what)
{
	m->arr = arr;
	m->stride = stride;
	m->n = n;
	m->dense = true;
	for (size_t i = 0; i < n; i++) {
		uint64_t id;
		memcpy(&id, m->arr + i * stride, 8);
		if (id != i + 1) {
			m->dense = false;
			break;
		}
	}
	if (m->dense)
		return 0;
	if (pd_hidx_init(&m->h, n))
		return pd_errf(d->err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct idkey k = {m, 0};
		memcpy(&k.id, m->arr + i * stride, 8);
		if (k.id == 0)
			return pd_errf(d->err, PD_EINVAL, "%s #%zu has the reserved id 0", what, i);
		uint64_t h = pd_hash_u64(k.id);
		if (pd_hidx_find_u64(&m->h, h, id_eq, &k) != UINT32_MAX)
			return pd_errf(d->err, PD_EINVAL, "multiple %ss with the same id %llu", what,
				       (unsigned long long)k.id);
		if (pd_hidx_insert(&m->h, h, (uint32_t)i))
			return pd_errf(d->err, PD_ENOMEM, "out of memory");
	}
	return 0;
}

static inline uint32_t idmap_find(const struct idmap *m, uint64_t id)
{
	if (m->dense)
		return id - 1 < m->n ? (uint32_t)(id - 1) : PD_NONE;
	if (m->n == 0)
		return PD_NONE;
	struct idkey k = {m, id};
	return pd_hidx_find_u64(&m->h, pd_hash_u64(id), id_eq, &k);
}

/* ---- sub-messages ---------------------------------------------------------- */

static int dec_vtype(struct dec *d, const uint8_t *p, size_t n, struct pd_vtype *vt, const char *msg)
{
	const uint8_t *end = p + n;
	struct field f;
	int rc;
	vt->type = vt->unit = 0;
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, msg)))
			return rc;
		if (f.num == 1 && (rc = str_index(d, &f, msg, "type", &vt->type)))
			return rc;
		if (f.num == 2 && (rc = str_index(d, &f, msg, "unit", &vt->unit)))
			return rc;
	}
	return 0;
}

static int dec_bool(struct dec *d, const struct field *f, const char *msg, const char *name, bool *out)
{
	int rc = want_wt(d, f, WT_VARINT, msg, name);
	if (!rc)
		*out = f->v != 0;
	return rc;
}

static int dec_u64(struct dec *d, const struct field *f, const char *msg, const char *name, uint64_t *out)
{
	int rc = want_wt(d, f, WT_VARINT, msg, name);
	if (!rc)
		*out = f->v;
	return rc;
}

static int dec_mapping(struct dec *d, const uint8_t *p, size_t n, struct pd_mapping *m)
{
	const uint8_t *end = p + n;
	const char *msg = "mapping";
	struct field f;
	int rc = 0;
	memset(m, 0, sizeof *m);
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, msg)))
			return rc;
		switch (f.num) {
		case 1: rc = dec_u64(d, &f, msg, "id", &m->id); break;
		case 2: rc = dec_u64(d, &f, msg, "memory_start", &m->start); break;
		case 3: rc = dec_u64(d, &f, msg, "memory_limit", &m->limit); break;
		case 4: rc = dec_u64(d, &f, msg, "file_offset", &m->offset); break;
		case 5: rc = str_index(d, &f, msg, "filename", &m->filename); break;
		case 6: rc = str_index(d, &f, msg, "build_id", &m->build_id); break;
		case 7: rc = dec_bool(d, &f, msg, "has_functions", &m->has_functions); break;
		case 8: rc = dec_bool(d, &f, msg, "has_filenames", &m->has_filenames); break;
		case 9: rc = dec_bool(d, &f, msg, "has_line_numbers", &m->has_line_numbers); break;
		case 10: rc = dec_bool(d, &f, msg, "has_inline_frames", &m->has_inline_frames); break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int dec_function(struct dec *d, const uint8_t *p, size_t n, struct pd_function *fn)
{
	const uint8_t *end = p + n;
	const char *msg = "function";
	struct field f;
	int rc = 0;
	uint64_t sl = 0;
	memset(fn, 0, sizeof *fn);
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, msg)))
			return rc;
		switch (f.num) {
		case 1: rc = dec_u64(d, &f, msg, "id", &fn->id); break;
		case 2: rc = str_index(d, &f, msg, "name", &fn->name); break;
		case 3: rc = str_index(d, &f, msg, "system_name", &fn->system_name); break;
		case 4: rc = str_index(d, &f, msg, "filename", &fn->filename); break;
		case 5: rc = dec_u64(d, &f, msg, "start_line", &sl); fn->start_line = (int64_t)sl; break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int dec_location(struct dec *d, const uint8_t *p, size_t n, struct pd_location *loc, size_t idx)
{
	const uint8_t *end = p + n, *q = p;
	const char *msg = "location";
	struct field f;
	int rc = 0;
	memset(loc, 0, sizeof *loc);
	/* count lines */
	size_t nlines = 0;
	while (q < end) {
		if ((rc = next_field(d, &q, end, &f, msg)))
			return rc;
		if (f.num == 4)
			nlines++;
	}
	if ((rc = check_cap(d, nlines, d->lim.max_lines, "lines in one location")))
		return rc;
	if (nlines) {
		loc->lines = pd_arena_alloc(d->p->arena, nlines * sizeof *loc->lines);
		if (!loc->lines)
			return pd_errf(d->err, PD_ENOMEM, "out of memory");
	}
	uint64_t mapping_id = 0;
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, msg)))
			return rc;
		switch (f.num) {
		case 1: rc = dec_u64(d, &f, msg, "id", &loc->id); break;
		case 2: rc = dec_u64(d, &f, msg, "mapping_id", &mapping_id); break;
		case 3: rc = dec_u64(d, &f, msg, "address", &loc->address); break;
		case 5: rc = dec_bool(d, &f, msg, "is_folded", &loc->is_folded); break;
		case 4: {
			if ((rc = want_wt(d, &f, WT_LEN, msg, "line")))
				return rc;
			struct pd_line *ln = &loc->lines[loc->nlines++];
			const uint8_t *lp = f.data, *le = f.data + f.len;
			struct field g;
			uint64_t fid = 0, v;
			ln->line = ln->column = 0;
			while (lp < le) {
				if ((rc = next_field(d, &lp, le, &g, "line")))
					return rc;
				if (g.num == 1)
					rc = dec_u64(d, &g, "line", "function_id", &fid);
				else if (g.num == 2 && !(rc = dec_u64(d, &g, "line", "line", &v)))
					ln->line = (int64_t)v;
				else if (g.num == 3 && !(rc = dec_u64(d, &g, "line", "column", &v)))
					ln->column = (int64_t)v;
				if (rc)
					return rc;
			}
			ln->function = fid ? idmap_find(&d->fmap, fid) : PD_NONE;
			if (ln->function == PD_NONE)
				return pd_errf(d->err, PD_EINVAL,
					       "location #%zu (id %llu), line %u: function id %llu not found", idx,
					       (unsigned long long)loc->id, loc->nlines - 1,
					       (unsigned long long)fid);
			break;
		}
		}
		if (rc)
			return rc;
	}
	/* As upstream: a mapping id that is absent from the table is no mapping. */
	loc->mapping = mapping_id ? idmap_find(&d->mmap, mapping_id) : PD_NONE;
	return 0;
}

/* Count varints in a packed payload (bytes that end a varint). */
static inline size_t count_packed(const uint8_t *p, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += p[i] < 0x80;
	return c;
}

static int too_deep(struct dec *d, size_t idx)
{
	return pd_errf(d->err, PD_ELIMIT, "sample #%zu has over %zu locations (stack depth limit)", idx,
		       d->lim.max_stack_depth);
}

static int loc_not_found(struct dec *d, size_t idx, uint64_t v)
{
	return pd_errf(d->err, PD_EINVAL, "sample #%zu: location id %llu not found (profile has %u locations)", idx,
		       (unsigned long long)v, d->p->nlocations);
}

/*
 * Packed location ids of 1 or 2 bytes, 8 bytes of payload at a time, with
 * SSSE3 (every x86-64 CPU since 2008; checked at run time). Each 8-byte
 * block emits the varints that end in it: which bytes those are depends only
 * on the block's 8 continuation bits and on whether the byte before it
 * continues (a varint straddling the two), so the blocks do not wait for
 * each other, and one byte shuffle per block gathers up to 8 varints into
 * 16-bit lanes. In a profile of over 127 locations the 1- and 2-byte ids
 * alternate at random: the byte-at-a-time loop mispredicted a branch on
 * the length of nearly every other frame.
 *
 * Any id longer than 2 bytes (over 16,383 locations), a truncated last id
 * or one out of range sends the whole field back to the byte-at-a-time loop,
 * which names the error; so this path only ever decodes what that loop would
 * have decoded the same way (tests/unit/test_pprof.c compares them).
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <pthread.h>
#define PD_IDS_SIMD 1

struct ids_block {
	uint8_t shuf[16]; /* lane k <- bytes (shuf[2k], shuf[2k+1]) of the 16 loaded; 0x80 = zero */
	uint8_t count;    /* varints ending in the block */
	uint8_t ok;       /* no varint of 3 bytes or more */
};
static struct ids_block ids_tab[2][256]; /* [byte before continues][continuation bits] */
static bool ids_have;
static pthread_once_t ids_once = PTHREAD_ONCE_INIT;

static void ids_init(void)
{
	for (int carry = 0; carry < 2; carry++)
		for (int m = 0; m < 256; m++) {
			struct ids_block *t = &ids_tab[carry][m];
			memset(t->shuf, 0x80, sizeof t->shuf);
			t->ok = 1;
			int k = 0, start = carry ? -1 : 0; /* first byte of the open varint */
			for (int b = 0; b < 8; b++) {
				if (m >> b & 1) { /* continues */
					if (b - start >= 1)
						t->ok = 0; /* a third byte */
					continue;
				}
				/* byte b ends a varint that began at start (b or b - 1);
				 * the 16 loaded bytes are the 8 before the block and the block */
				t->shuf[2 * k] = (uint8_t)(8 + start);
				if (start < b)
					t->shuf[2 * k + 1] = (uint8_t)(8 + b);
				k++;
				start = b + 1;
			}
			t->count = (uint8_t)k;
		}
	__builtin_cpu_init();
	ids_have = __builtin_cpu_supports("ssse3");
}

/* Decode the ids of the whole blocks of [vp, vp + len) into out (which has
 * room for len + 8); returns the ids written and sets *used to the bytes
 * consumed (the rest, under 9 bytes, is left to the caller), or returns
 * SIZE_MAX if the field needs the general loop. */
__attribute__((target("ssse3"))) static size_t ids_simd(const uint8_t *vp, size_t len, uint64_t cnt,
							    uint32_t *out, size_t *used)
{
	const __m128i lo7 = _mm_set1_epi16(0x7f), hi7 = _mm_set1_epi16(0x7f00), one = _mm_set1_epi16(1);
	const __m128i lanes = _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), zero = _mm_setzero_si128();
	const __m128i top = _mm_set1_epi16((short)(cnt < 32767 ? cnt : 32767));
	__m128i bad = zero;
	uint32_t *o = out;
	size_t nb = len / 8;
	int carry = 0;
	for (size_t i = 0; i < nb; i++) {
		/* the block and the 8 bytes before it; block 0 has nothing before */
		__m128i d = i ? _mm_loadu_si128((const __m128i *)(const void *)(vp + 8 * i - 8))
			      : _mm_slli_si128(_mm_loadl_epi64((const __m128i *)(const void *)vp), 8);
		unsigned m = (unsigned)_mm_movemask_epi8(d) >> 8;
		const struct ids_block *t = &ids_tab[carry][m];
		__m128i x = _mm_shuffle_epi8(d, _mm_loadu_si128((const __m128i *)(const void *)t->shuf));
		x = _mm_or_si128(_mm_and_si128(x, lo7), _mm_srli_epi16(_mm_and_si128(x, hi7), 1));
		__m128i live = _mm_cmpgt_epi16(_mm_set1_epi16(t->count), lanes);
		/* valid: 1 <= id <= cnt (ids here are under 16,384) */
		bad = _mm_or_si128(bad, _mm_and_si128(live, _mm_or_si128(_mm_cmplt_epi16(x, one), _mm_cmpgt_epi16(x, top))));
		if (!t->ok)
			return SIZE_MAX;
		x = _mm_sub_epi16(x, one);
		_mm_storeu_si128((__m128i *)(void *)o, _mm_unpacklo_epi16(x, zero));
		_mm_storeu_si128((__m128i *)(void *)(o + 4), _mm_unpackhi_epi16(x, zero));
		o += t->count;
		carry = (int)(m >> 7);
	}
	if (_mm_movemask_epi8(bad))
		return SIZE_MAX;
	/* the varint open at the end of the last block resumes the general loop */
	*used = nb * 8 - (size_t)carry;
	return (size_t)(o - out);
}
#endif

/* A packed location_id field, appended to the scratch stack at *nlocs in one
 * pass: the payload holds at most f->len ids, and no more than the depth
 * limit allows are room-reserved (a hostile length costs nothing). Ids that
 * are 1..n in order (as every Go profile has them) map by subtraction. */
static int dec_packed_locs(struct dec *d, const struct field *f, size_t *nlocs, size_t idx)
{
	if (f->len == 0)
		return 0;
	size_t n = *nlocs, room = d->lim.max_stack_depth >= n ? d->lim.max_stack_depth - n : 0;
	size_t want = f->len < room ? f->len : room + 1; /* + 1: "one too many" is detected, not stored */
	if (pd_grow((void **)&d->sc_locs, &d->sc_locs_cap, n + want + 8, sizeof *d->sc_locs))
		return pd_errf(d->err, PD_ENOMEM, "out of memory");
	const uint8_t *vp = f->data, *ve = f->data + f->len;
	uint32_t *out = d->sc_locs + n, *lim = d->sc_locs + n + want;
	uint64_t v;
	if (d->lmap.dense) {
		uint64_t cnt = d->lmap.n;
#ifdef PD_IDS_SIMD
		/* whole blocks at once, when the field cannot pass the depth limit */
		if (f->len >= 16 && want == f->len) {
			size_t used, k = ids_have ? ids_simd(vp, f->len, cnt, out, &used) : SIZE_MAX;
			if (k != SIZE_MAX) {
				out += k;
				vp += used;
			}
		}
#endif
		while (vp < ve) {
			if (PD_UNLIKELY(out == lim))
				return too_deep(d, idx);
			if (PD_UNLIKELY(pd_varint(&vp, ve, &v)))
				goto bad;
			if (PD_UNLIKELY(v - 1 >= cnt))
				return loc_not_found(d, idx, v);
			*out++ = (uint32_t)(v - 1);
		}
	} else {
		while (vp < ve) {
			if (PD_UNLIKELY(out == lim))
				return too_deep(d, idx);
			if (PD_UNLIKELY(pd_varint(&vp, ve, &v)))
				goto bad;
			uint32_t li = idmap_find(&d->lmap, v);
			if (PD_UNLIKELY(li == PD_NONE))
				return loc_not_found(d, idx, v);
			*out++ = li;
		}
	}
	if ((size_t)(out - d->sc_locs) > d->lim.max_stack_depth)
		return too_deep(d, idx);
	*nlocs = (size_t)(out - d->sc_locs);
	return 0;
bad:
	return pd_errf(d->err, PD_EINVAL, "sample #%zu at offset %zu: bad packed varint", idx, OFF(d, f->start));
}

/* Decode one Sample in a single scan into the decoder's scratch arrays, then
 * copy the exact sizes into the arena. */
static int dec_sample(struct dec *d, const uint8_t *p, size_t n, struct pd_sample *s, size_t idx)
{
	const uint8_t *end = p + n;
	const char *msg = "sample";
	struct field f;
	int rc;
	size_t nlocs = 0, nvals = 0, nlabels = 0;
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, msg)))
			return rc;
		if (f.num == 1 || f.num == 2) {
			bool packed = f.wt == WT_LEN;
			if (!packed && f.wt != WT_VARINT)
				return want_wt(d, &f, WT_VARINT, msg, f.num == 1 ? "location_id" : "value");
			if (f.num == 1 && packed) { /* the common case, in one pass */
				if ((rc = dec_packed_locs(d, &f, &nlocs, idx)))
					return rc;
				continue;
			}
			size_t c = packed ? count_packed(f.data, f.len) : 1;
			const uint8_t *vp = f.data, *ve = f.data ? f.data + f.len : NULL; /* unpacked: no payload */
			if (f.num == 1) {
				if (nlocs + c > d->lim.max_stack_depth)
					return too_deep(d, idx);
				if (pd_grow((void **)&d->sc_locs, &d->sc_locs_cap, nlocs + c, sizeof *d->sc_locs))
					return pd_errf(d->err, PD_ENOMEM, "out of memory");
				for (size_t i = 0; i < c; i++) {
					uint64_t v = f.v;
					if (packed && pd_varint(&vp, ve, &v))
						goto bad_packed;
					uint32_t li = idmap_find(&d->lmap, v);
					if (PD_UNLIKELY(li == PD_NONE))
						return loc_not_found(d, idx, v);
					d->sc_locs[nlocs++] = li;
				}
			} else {
				if (nvals + c > d->lim.max_sample_types)
					goto bad_values;
				for (size_t i = 0; i < c; i++) {
					uint64_t v = f.v;
					if (packed && pd_varint(&vp, ve, &v))
						goto bad_packed;
					d->sc_vals[nvals++] = (int64_t)v;
				}
			}
			if (packed && vp != ve)
				goto bad_packed;
		} else if (f.num == 3) {
			if ((rc = want_wt(d, &f, WT_LEN, msg, "label")))
				return rc;
			const uint8_t *lp = f.data, *le = f.data + f.len;
			struct field g;
			struct pd_label lb = {0, 0, 0, 0};
			struct field unit = {0};
			while (lp < le) {
				if ((rc = next_field(d, &lp, le, &g, "label")))
					return rc;
				switch (g.num) {
				case 1: rc = str_index(d, &g, "label", "key", &lb.key); break;
				case 2: rc = str_index(d, &g, "label", "str", &lb.str); break;
				case 3: {
					uint64_t v = 0;
					rc = dec_u64(d, &g, "label", "num", &v);
					lb.num = (int64_t)v;
					break;
				}
				case 4:
					rc = want_wt(d, &g, WT_VARINT, "label", "num_unit");
					unit = g;
					break;
				}
				if (rc)
					return rc;
			}
			/* As upstream: a string label's unit is never read (so never
			 * range-checked); a numeric label's must be a string index.
			 * A string label's unit in range is kept as it always was
			 * (the store's content ids of label sets include it; the
			 * merge and the reports ignore it, as Go does). */
			if (!lb.str && unit.v && (rc = str_index(d, &unit, "label", "num_unit", &lb.num_unit)))
				return rc;
			if (lb.str && unit.v < d->nstrings)
				lb.num_unit = (uint32_t)unit.v;
			/* As upstream: a label with neither a string nor a number is dropped. */
			if (!(lb.str || lb.num || lb.num_unit))
				continue;
			if (nlabels >= d->lim.max_labels)
				return pd_errf(d->err, PD_ELIMIT, "sample #%zu has over %zu labels (limit)", idx,
					       d->lim.max_labels);
			if (pd_grow((void **)&d->sc_labels, &d->sc_labels_cap, nlabels + 1, sizeof *d->sc_labels))
				return pd_errf(d->err, PD_ENOMEM, "out of memory");
			d->sc_labels[nlabels++] = lb;
		}
	}
	if (nvals != d->p->nsample_types) {
	bad_values:
		if (d->p->nsample_types == 0)
			return pd_errf(d->err, PD_EINVAL, "missing sample type information (sample #%zu has values)",
				       idx);
		return pd_errf(d->err, PD_EINVAL, "sample #%zu: has %zu values vs. %u sample types", idx, nvals,
			       d->p->nsample_types);
	}
	s->nlocs = (uint32_t)nlocs;
	s->nlabels = (uint32_t)nlabels;
	if (d->on_sample) { /* streaming: hand out the scratch arrays, store nothing */
		s->locs = d->sc_locs;
		s->values = d->sc_vals;
		s->labels = d->sc_labels;
		return d->on_sample(d->cb_ctx, d->p, s, d->err);
	}
	struct pd_arena *a = d->p->arena;
	s->locs = nlocs ? pd_arena_dup(a, d->sc_locs, nlocs * sizeof *s->locs) : NULL;
	s->values = nvals ? pd_arena_dup(a, d->sc_vals, nvals * sizeof *s->values) : NULL;
	s->labels = nlabels ? pd_arena_dup(a, d->sc_labels, nlabels * sizeof *s->labels) : NULL;
	if ((nlocs && !s->locs) || (nvals && !s->values) || (nlabels && !s->labels))
		return pd_errf(d->err, PD_ENOMEM, "out of memory");
	return 0;
bad_packed:
	return pd_errf(d->err, PD_EINVAL, "sample #%zu at offset %zu: bad packed varint", idx, OFF(d, f.start));
}

/* ---- passes ------------------------------------------------------------ */

/* A top-level field remembered by the scan: where its payload is. */
struct topf {
	uint32_t off, len; /* payload (WT_LEN) or tag start (varint) */
	uint32_t num;
	uint64_t v;
};

static int over_memory(struct dec *d, size_t need, size_t fields)
{
	return pd_errf(d->err, PD_ELIMIT,
		       "profile needs more than %zu MiB of memory to decode (%zu bytes of protobuf, %zu fields seen): "
		       "over the limit of %zu MiB per profile",
		       need >> 20, d->rawlen, fields, d->lim.max_memory >> 20);
}

/* What the decoded model (and the caller's per-sample and per-symbol
 * state) will take, from pass 1's counts. Per-sample arrays (location
 * ids, values, labels) are bounded by the samples' encoded bytes: a
 * location id or value takes >= 1 byte on the wire and 4 or 8 in memory;
 * 3 bytes per wire byte is what Go's profiles take (measured on every Go
 * profile type), the caps above bound the worst case. */
static size_t mem_estimate(const struct dec *d, const size_t cnt[16], size_t sample_bytes)
{
	const struct pd_pprof_limits *l = &d->lim;
	size_t nsym = cnt[3] + cnt[4] + cnt[5] + cnt[6];
	return d->rawlen + d->tops_cap * sizeof *d->tops + cnt[2] * (sizeof(struct pd_sample) + l->extra_per_sample) +
	       3 * sample_bytes + cnt[3] * sizeof(struct pd_mapping) + cnt[4] * (sizeof(struct pd_location) + 2 * sizeof(struct pd_line)) +
	       cnt[5] * sizeof(struct pd_function) + cnt[6] * sizeof(struct pd_str) + nsym * l->extra_per_symbol;
}

/* Pass 1: one scan of the top level. Validates framing and wire types,
 * counts repeated fields, detects concatenated profiles, and records every
 * known field so the later passes never re-parse the top level. */
static int scan_top(struct dec *d, const uint8_t *p, const uint8_t *end, size_t cnt[16], size_t *string_bytes,
		    size_t *sample_bytes)
{
	struct field f;
	int rc;
	bool have_time = false;
	while (p < end) {
		if ((rc = next_field(d, &p, end, &f, "profile")))
			return rc;
		/* num and wt as loaded once: gcc compared (num, wt) with one 8-byte
		 * load over the two 4-byte stores of next_field, a store-forwarding
		 * stall per top-level field (perf: 12 % of the decode of an upload) */
		uint32_t num = f.num, wt = f.wt;
		if (num >= 16)
			continue; /* unknown field: skipped */
		bool is_msg = num <= 6 || num == 11;
		bool packable = num == 13;
		if (is_msg ? wt != WT_LEN : (wt != WT_VARINT && !(packable && wt == WT_LEN)))
			return pd_errf(d->err, PD_EINVAL, "profile.%s (field %u) at offset %zu: wire type %u is wrong",
				       profile_field_names[num], num, OFF(d, f.start), wt);
		if (packable && wt == WT_LEN)
			cnt[13] += count_packed(f.data, f.len);
		else
			cnt[num]++;
		if (num == 6)
			*string_bytes += f.len;
		else if (num == 2)
			*sample_bytes += f.len;
		if (num == 9) {
			/* As upstream: time_nanos again once set = two profiles glued together. */
			if (have_time)
				return pd_errf(d->err, PD_EINVAL,
					       "concatenated profiles detected (second time_nanos at offset %zu)",
					       OFF(d, f.start));
			if (f.v != 0)
				have_time = true;
		}
		if (d->ntops == d->tops_cap) {
			/* the field list grows by doubling: refuse before it outgrows the budget */
			size_t want = (d->tops_cap ? d->tops_cap * 2 : 16) * sizeof *d->tops;
			if (d->rawlen + want > d->lim.max_memory)
				return over_memory(d, d->rawlen + want, d->ntops);
			if (pd_grow((void **)&d->tops, &d->tops_cap, d->ntops + 1, sizeof *d->tops))
				return pd_errf(d->err, PD_ENOMEM, "out of memory");
		}
		struct topf *t = &d->tops[d->ntops++];
		t->num = f.num;
		t->v = f.v;
		if (f.wt == WT_LEN) {
			t->off = (uint32_t)OFF(d, f.data);
			t->len = (uint32_t)f.len;
		} else {
			t->off = (uint32_t)OFF(d, f.start);
			t->len = UINT32_MAX; /* a varint */
		}
	}
	return 0;
}

/* A recorded string-index scalar, checked now that the table size is known. */
static int top_str(struct dec *d, const struct topf *t, const char *name, uint32_t *out)
{
	if (t->v >= d->nstrings)
		return pd_errf(d->err, PD_EINVAL,
			       "profile.%s at offset %u: string index %lld out of range (string_table has %zu entries)",
			       name, t->off, (long long)t->v, d->nstrings);
	*out = (uint32_t)t->v;
	return 0;
}

static int decode_raw(struct dec *d, const uint8_t *buf, size_t len)
{
	struct pd_profile *p = d->p;
	size_t cnt[16] = {0}, sbytes = 0, smbytes = 0;
	int rc = 0;

	d->base = buf;
	d->rawlen = len;
	if (len == 0)
		return pd_errf(d->err, PD_EINVAL, "empty input file");
	if (len > UINT32_MAX - 1)
		return pd_errf(d->err, PD_ELIMIT, "raw profile of %zu bytes is over 4 GiB", len);
	if ((rc = scan_top(d, buf, buf + len, cnt, &sbytes, &smbytes)))
		return rc;
	if ((rc = check_cap(d, cnt[1], d->lim.max_sample_types, "sample types")) ||
	    (rc = check_cap(d, cnt[2], d->lim.max_samples, "samples")) ||
	    (rc = check_cap(d, cnt[3], d->lim.max_mappings, "mappings")) ||
	    (rc = check_cap(d, cnt[4], d->lim.max_locations, "locations")) ||
	    (rc = check_cap(d, cnt[5], d->lim.max_functions, "functions")) ||
	    (rc = check_cap(d, cnt[6], d->lim.max_strings, "strings")) ||
	    (rc = check_cap(d, sbytes, d->lim.max_string_bytes, "bytes of strings")) ||
	    (rc = check_cap(d, cnt[13], d->lim.max_strings, "comments")))
		return rc;
	size_t need = mem_estimate(d, cnt, smbytes);
	if (need > d->lim.max_memory)
		return pd_errf(d->err, PD_ELIMIT,
			       "profile needs about %zu MiB of memory (%zu samples, %zu locations, %zu strings): over the "
			       "limit of %zu MiB per profile",
			       (need + (1u << 20) - 1) >> 20, cnt[2], cnt[4], cnt[6], d->lim.max_memory >> 20);
	if (d->lim.reserve && d->lim.reserve(d->lim.reserve_ctx, need - d->rawlen))
		return pd_errf(d->err, PD_EBUSY, "too much profile data being ingested at once (%zu MiB more needed)",
			       (need - d->rawlen + (1u << 20) - 1) >> 20);
	if (cnt[6] == 0)
		return pd_errf(d->err, PD_EINVAL, "malformed profile: no string_table (string_table[0] must be \"\")");
	if (cnt[1] == 0 && cnt[2] != 0)
		return pd_errf(d->err, PD_EINVAL, "missing sample type information (%zu samples, no sample_type)", cnt[2]);

	struct pd_arena *a = p->arena;
	d->nstrings = cnt[6];
	p->strings = pd_arena_alloc(a, cnt[6] * sizeof *p->strings);
	p->sample_types = pd_arena_calloc(a, cnt[1] + 1, sizeof *p->sample_types);
	p->samples = pd_arena_calloc(a, d->on_sample ? 1 : cnt[2] + 1, sizeof *p->samples);
	p->mappings = pd_arena_alloc(a, (cnt[3] + 1) * sizeof *p->mappings);
	p->locations = pd_arena_alloc(a, (cnt[4] + 1) * sizeof *p->locations);
	p->functions = pd_arena_alloc(a, (cnt[5] + 1) * sizeof *p->functions);
	p->comments = pd_arena_alloc(a, (cnt[13] + 1) * sizeof *p->comments);
	if (!p->strings || !p->sample_types || !p->samples || !p->mappings || !p->locations ||
	    !p->functions || !p->comments)
		return pd_errf(d->err, PD_ENOMEM, "out of memory");

	/* Pass 2: strings, header, sample types, mappings, functions. */
	for (size_t i = 0; i < d->ntops; i++) {
		const struct topf *t = &d->tops[i];
		const uint8_t *data = buf + t->off;
		switch (t->num) {
		case 1:
			rc = dec_vtype(d, data, t->len, &p->sample_types[p->nsample_types++], "sample_type");
			break;
		case 3: rc = dec_mapping(d, data, t->len, &p->mappings[p->nmappings++]); break;
		case 5: rc = dec_function(d, data, t->len, &p->functions[p->nfunctions++]); break;
		case 6:
			if (p->nstrings == 0 && t->len != 0)
				return pd_errf(d->err, PD_EINVAL, "string_table[0] must be '' (found %u bytes at offset %u)",
					       t->len, t->off);
			p->strings[p->nstrings].ptr = (const char *)data;
			p->strings[p->nstrings++].len = t->len;
			break;
		case 7: rc = top_str(d, t, "drop_frames", &p->drop_frames); break;
		case 8: rc = top_str(d, t, "keep_frames", &p->keep_frames); break;
		case 9: p->time_nanos = (int64_t)t->v; break;
		case 10: p->duration_nanos = (int64_t)t->v; break;
		case 11: rc = dec_vtype(d, data, t->len, &p->period_type, "period_type"); break;
		case 12: p->period = (int64_t)t->v; break;
		case 13:
			if (t->len != UINT32_MAX) {
				const uint8_t *cp = data, *ce = data + t->len;
				while (cp < ce) {
					uint64_t v;
					if (pd_varint(&cp, ce, &v))
						return pd_errf(d->err, PD_EINVAL, "profile.comment at offset %u: bad varint",
							       t->off);
					if (v >= d->nstrings)
						return pd_errf(d->err, PD_EINVAL,
							       "profile.comment at offset %u: string index %lld out of range",
							       t->off, (long long)v);
					p->comments[p->ncomments++] = (uint32_t)v;
				}
			} else {
				rc = top_str(d, t, "comment", &p->comments[p->ncomments++]);
			}
			break;
		case 14: rc = top_str(d, t, "default_sample_type", &p->default_sample_type); break;
		case 15: rc = top_str(d, t, "doc_url", &p->doc_url); break;
		}
		if (rc) {
			if (t->num == 3)
				pd_err_prefix(d->err, "mapping #%u", p->nmappings - 1);
			else if (t->num == 5)
				pd_err_prefix(d->err, "function #%u", p->nfunctions - 1);
			return rc;
		}
	}
	if ((rc = idmap_build(d, &d->mmap, p->mappings, sizeof *p->mappings, p->nmappings, "mapping")) ||
	    (rc = idmap_build(d, &d->fmap, p->functions, sizeof *p->functions, p->nfunctions, "function")))
		return rc;

	/* Pass 3: locations. */
	for (size_t i = 0; i < d->ntops; i++) {
		const struct topf *t = &d->tops[i];
		if (t->num != 4)
			continue;
		uint32_t li = p->nlocations++;
		if ((rc = dec_location(d, buf + t->off, t->len, &p->locations[li], li))) {
			if (rc != PD_ENOMEM && !strstr(d->err->msg, "location #"))
				pd_err_prefix(d->err, "location #%u", li);
			return rc;
		}
	}
	if ((rc = idmap_build(d, &d->lmap, p->locations, sizeof *p->locations, p->nlocations, "location")))
		return rc;

	if (d->on_header && (rc = d->on_header(d->cb_ctx, p, d->err)))
		return rc;

	/* Pass 4: samples (stored, or streamed to on_sample). */
	for (size_t i = 0, seen = 0; i < d->ntops; i++) {
		const struct topf *t = &d->tops[i];
		if (t->num != 2)
			continue;
		size_t si = d->on_sample ? seen++ : p->nsamples++;
		struct pd_sample one;
		if ((rc = dec_sample(d, buf + t->off, t->len, d->on_sample ? &one : &p->samples[si], si))) {
			if (rc != PD_ENOMEM && !strstr(d->err->msg, "sample #"))
				pd_err_prefix(d->err, "sample #%zu", si);
			return rc;
		}
	}
	return 0;
}

void pd_pprof_limits_default(struct pd_pprof_limits *l)
{
#define DEF(f, v) if (!l->f) l->f = (v)
	DEF(max_compressed, PD_DEFAULT_MAX_COMPRESSED);
	DEF(max_decompressed, PD_DEFAULT_MAX_DECOMPRESSED);
	DEF(max_samples, PD_DEFAULT_MAX_SAMPLES);
	DEF(max_locations, PD_DEFAULT_MAX_LOCATIONS);
	DEF(max_functions, PD_DEFAULT_MAX_FUNCTIONS);
	DEF(max_mappings, PD_DEFAULT_MAX_MAPPINGS);
	DEF(max_strings, PD_DEFAULT_MAX_STRINGS);
	DEF(max_string_bytes, PD_DEFAULT_MAX_STRING_BYTES);
	DEF(max_stack_depth, PD_DEFAULT_MAX_STACK_DEPTH);
	DEF(max_labels, PD_DEFAULT_MAX_LABELS);
	DEF(max_lines, PD_DEFAULT_MAX_LINES);
	DEF(max_sample_types, PD_DEFAULT_MAX_SAMPLE_TYPES);
	DEF(max_memory, PD_DEFAULT_MAX_MEMORY);
#undef DEF
}

static int label_key_cmp(const struct pd_profile *p, const struct pd_label *a, const struct pd_label *b)
{
	bool as = a->str != 0, bs = b->str != 0;
	if (as != bs)
		return as ? -1 : 1;
	const struct pd_str *x = &p->strings[a->key], *y = &p->strings[b->key];
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = n ? memcmp(x->ptr, y->ptr, n) : 0;
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

void pd_profile_sort_labels(struct pd_profile *p)
{
	for (size_t i = 0; i < p->nsamples; i++) {
		struct pd_label *l = p->samples[i].labels;
		uint32_t n = p->samples[i].nlabels;
		for (uint32_t k = 1; k < n; k++) { /* stable insertion sort: label lists are short */
			struct pd_label x = l[k];
			uint32_t j = k;
			while (j > 0 && label_key_cmp(p, &x, &l[j - 1]) < 0) {
				l[j] = l[j - 1];
				j--;
			}
			l[j] = x;
		}
	}
}

void pd_profile_free(struct pd_profile *p)
{
	if (!p)
		return;
	free(p->owned);
	pd_arena_free(p->arena);
	free(p);
}

int pd_pprof_decode(const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
		    struct pd_profile **out, struct pd_err *err)
{
	return pd_pprof_decode_stream(data, len, lim, NULL, NULL, NULL, out, err);
}

int pd_pprof_decode_stream(const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
			   pd_header_fn on_header, pd_sample_fn on_sample, void *ctx, struct pd_profile **out,
			   struct pd_err *err)
{
	struct dec d;
	memset(&d, 0, sizeof d);
#ifdef PD_IDS_SIMD
	pthread_once(&ids_once, ids_init); /* once per profile, not per packed field */
#endif
	d.on_header = on_header;
	d.on_sample = on_sample;
	d.cb_ctx = ctx;
	if (lim)
		d.lim = *lim;
	pd_pprof_limits_default(&d.lim);
	if (d.lim.max_sample_types > PD_DEFAULT_MAX_SAMPLE_TYPES)
		d.lim.max_sample_types = PD_DEFAULT_MAX_SAMPLE_TYPES; /* sc_vals is fixed */
	d.err = err;
	*out = NULL;
	int rc = 0;
	struct pd_profile *p = calloc(1, sizeof *p);
	if (!p)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	d.p = p;
	const uint8_t *raw = NULL;
	size_t rawlen = 0;

	if (len > d.lim.max_compressed) {
		rc = pd_errf(err, PD_ELIMIT, "input is %zu bytes, over the %zu-byte limit", len, d.lim.max_compressed);
		goto out;
	}
	size_t max_raw = d.lim.max_decompressed < d.lim.max_memory ? d.lim.max_decompressed : d.lim.max_memory;
	if (pd_is_gzip(data, len)) {
		uint8_t *buf;
		if ((rc = pd_gunzip(data, len, max_raw, &buf, &rawlen, err))) {
			if (rc == PD_ELIMIT && max_raw < d.lim.max_decompressed)
				pd_err_prefix(err, "decompressing profile (the memory limit of %zu MiB per profile caps it)",
					      d.lim.max_memory >> 20);
			else
				pd_err_prefix(err, "decompressing profile");
			goto out;
		}
		p->owned = buf;
		raw = buf;
	} else {
		if (len > max_raw) {
			rc = pd_errf(err, PD_ELIMIT, "raw profile is %zu bytes, over the %zu-byte limit", len, max_raw);
			goto out;
		}
		if (len) {
			p->owned = malloc(len);
			if (!p->owned) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
			memcpy(p->owned, data, len);
		}
		raw = p->owned;
		rawlen = len;
	}
	if (d.lim.reserve && rawlen && d.lim.reserve(d.lim.reserve_ctx, rawlen)) {
		rc = pd_errf(err, PD_EBUSY, "too much profile data being ingested at once (%zu MiB more needed)",
			     (rawlen + (1u << 20) - 1) >> 20);
		goto out;
	}
	/* Arena sized from the input: the model takes about 1-2x the protobuf. */
	p->arena = pd_arena_new(rawlen < 16384 ? 16384 : rawlen > (4u << 20) ? (4u << 20) : rawlen);
	if (!p->arena) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = decode_raw(&d, raw, rawlen))) {
		/* Not protobuf (refused by pass 1): Go's legacy formats, or a message
		 * saying what the bytes are (legacy.c). */
		if ((rc == PD_EINVAL || rc == PD_ELIMIT) && rawlen && !d.nstrings)
			rc = pd_legacy_fallback(raw, rawlen, &d.lim, on_header, on_sample, ctx, out, err);
		goto out;
	}
	*out = p;
	p = NULL;
out:
	pd_hidx_free(&d.mmap.h);
	pd_hidx_free(&d.fmap.h);
	pd_hidx_free(&d.lmap.h);
	free(d.sc_locs);
	free(d.sc_labels);
	free(d.tops);
	pd_profile_free(p);
	return rc;
}

int pd_pprof_decode_file(const char *path, const struct pd_pprof_limits *lim, struct pd_profile **out,
			 struct pd_err *err)
{
	struct pd_pprof_limits l = {0};
	if (lim)
		l = *lim;
	pd_pprof_limits_default(&l);
	struct pd_buf b = PD_BUF_INIT(l.max_compressed);
	int rc = pd_buf_read_file(&b, path, err);
	if (!rc) {
		rc = pd_pprof_decode(b.ptr, b.len, &l, out, err);
		if (rc)
			pd_err_prefix(err, "%s", path);
	}
	pd_buf_free(&b);
	return rc;
}

/* ---- accessors ------------------------------------------------------------ */

bool pd_str_eq(struct pd_str s, const char *c)
{
	size_t n = strlen(c);
	return s.len == n && memcmp(s.ptr, c, n) == 0;
}

int pd_str_cmp(struct pd_str a, struct pd_str b)
{
	uint32_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
	return c ? c : (a.len < b.len ? -1 : a.len > b.len);
}

uint32_t pd_profile_default_index(const struct pd_profile *p)
{
	if (p->nsample_types == 0)
		return 0;
	if (p->default_sample_type) {
		struct pd_str want = p->strings[p->default_sample_type];
		for (uint32_t i = 0; i < p->nsample_types; i++) {
			struct pd_str t = p->strings[p->sample_types[i].type];
			if (t.len == want.len && memcmp(t.ptr, want.ptr, t.len) == 0)
				return i;
		}
	}
	return p->nsample_types - 1;
}

static struct pd_str trim_inuse(struct pd_str s)
{
	if (s.len >= 6 && memcmp(s.ptr, "inuse_", 6) == 0)
		return (struct pd_str){s.ptr + 6, s.len - 6};
	return s;
}

/* As pprof's SampleIndexByName: "" = default, a number = that index, else
 * the type whose name equals the argument once both lose an "inuse_" prefix. */
int pd_profile_sample_index(const struct pd_profile *p, const char *name)
{
	if (!name || !*name)
		return (int)pd_profile_default_index(p);
	if ((*name >= '0' && *name <= '9') || (*name == '-' && name[1])) {
		char *end;
		long v = strtol(name, &end, 10);
		if (*end == 0)
			return v >= 0 && v < (long)p->nsample_types ? (int)v : -1;
	}
	struct pd_str want = trim_inuse((struct pd_str){name, (uint32_t)strlen(name)});
	for (uint32_t i = 0; i < p->nsample_types; i++) {
		struct pd_str t = trim_inuse(p->strings[p->sample_types[i].type]);
		if (t.len == want.len && memcmp(t.ptr, want.ptr, t.len) == 0)
			return (int)i;
	}
	return -1;
}

void pd_profile_describe_types(const struct pd_profile *p, char *buf, size_t n)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "[");
	for (uint32_t i = 0; i < p->nsample_types && o < n; i++) {
		struct pd_str t = p->strings[p->sample_types[i].type], u = p->strings[p->sample_types[i].unit];
		o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%.*s/%.*s", i ? " " : "", (int)t.len, t.ptr,
				      (int)u.len, u.ptr);
	}
	if (o < n) {
		struct pd_str t = p->strings[p->period_type.type], u = p->strings[p->period_type.unit];
		snprintf(buf + o, n - o, "] period %.*s/%.*s", (int)t.len, t.ptr, (int)u.len, u.ptr);
	}
}
