/*
 * codec.h — the store's own stored formats, one encoder and one decoder
 * each (issue 13: "one codec per stored format, fuzzed, checksummed"):
 *
 *   header blob   a profile's (or a rollup's) header: sample types, period,
 *                 time, duration, comments, mappings, as symbol seqs
 *   sample block  zstd of (stack seq, label-set seq, values) rows, sorted by
 *                 stack, stacks delta-encoded, varints
 *   fns blob      zstd of a rollup's per-function table (pd_fn_totals)
 *
 * Every blob the store writes is framed with a checksum:
 *     0xFE  XXH3-64(payload, seed) (8 bytes, little-endian)  payload
 * The seed names the row and the blob's role (pd_blob_seed: the profile's
 * xid or the rollup's service/type/hour, and header/block/fns), so a blob
 * read through a damaged b-tree from another row, or into another column,
 * fails its check instead of answering with another profile's values.
 * Rows written before checksums have no frame (a header starts with a
 * varint < 0x80, a zstd frame with 0x28): they are read unchecked.
 *
 * Decoders never trust their input: every count is checked against the
 * bytes left and the caps, errors are PD_EIO ("corrupt ...") or PD_ENOMEM.
 * Fuzzed by tests/fuzz/fuzz_storeblob.c. Internal to lib/store (and the
 * tests, the fuzzer and `profd store check`).
 */
#ifndef PD_STORE_CODEC_H
#define PD_STORE_CODEC_H

#include "store_int.h"
#include "../pprof/wire.h"

#include <zstd.h>

#define PD_STORE_MAX_BLOCK (256u << 20) /* decompressed bytes of a block or table */
#define PD_BLOB_MAGIC 0xFE              /* framing, version 1 */
#define PD_BLOB_FRAME 9                 /* magic + 8 bytes of checksum */

enum pd_blob_role { PD_BLOB_HEADER = 1, PD_BLOB_BLOCK = 2, PD_BLOB_FNS = 3 };

/* ---- varints, zig-zag ---- */
static inline uint64_t pd_zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t pd_unzz(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }
#define PD_PV(p, v) ((p) = pd_put_varint((p), (uint64_t)(v))) /* into room reserved beforehand (10 bytes a varint) */

struct pd_rd {
	const uint8_t *p, *end;
	bool bad;
};
static inline uint64_t pd_rd_v(struct pd_rd *r)
{
	uint64_t v = 0;
	if (!r->bad && pd_varint(&r->p, r->end, &v))
		r->bad = true;
	return r->bad ? 0 : v;
}
/* A length-prefixed string (points into the input). */
static inline struct pd_str pd_rd_s(struct pd_rd *r)
{
	uint64_t n = pd_rd_v(r);
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		return (struct pd_str){"", 0};
	}
	struct pd_str v = {(const char *)r->p, (size_t)n};
	r->p += n;
	return v;
}

/* ---- framing ---- */
/* The seed of a profile's blob (key = its xid) or a rollup's (key =
 * service, type, hour: pd_blob_rollup_seed). */
uint64_t pd_blob_seed(const void *key, size_t n, enum pd_blob_role role);
uint64_t pd_blob_rollup_seed(const char *service, const char *type, int64_t hour, enum pd_blob_role role);
/* Room for the frame at the end of out (call before writing the payload
 * there), then seal it once the payload is written: start = out->len
 * before pd_blob_begin. */
int pd_blob_begin(struct pd_buf *out) PD_WUR;
void pd_blob_seal(struct pd_buf *out, size_t start, uint64_t seed);
/* The payload of a stored blob: 0 (*checked says whether it had a frame),
 * or PD_EIO with err "checksum mismatch" / "truncated frame". */
int pd_blob_open(const void *b, size_t n, uint64_t seed, const uint8_t **payload, size_t *pn, bool *checked,
		 struct pd_err *err) PD_WUR;

/* ---- header blob ---- */
struct pd_shdr {
	int64_t *stypes; /* type seq, unit seq pairs */
	uint32_t nst;
	int64_t ptype, punit, drop, keep, dflt, doc;
	int64_t period, time, duration;
	int64_t *comments;
	uint32_t ncomments;
	int64_t *maps;
	uint32_t nmaps;
};
void pd_shdr_free(struct pd_shdr *h);
/* Decode a header payload (unframed); h is freed on error. */
int pd_dec_header(const uint8_t *b, size_t n, struct pd_shdr *h, struct pd_err *err) PD_WUR;
/* Append the payload of h to out. */
int pd_enc_header(const struct pd_shdr *h, struct pd_buf *out, struct pd_err *err) PD_WUR;

/* ---- sample block ---- */
/* The raw rows (n, nv, then per row: stack delta, label set, nv zig-zag
 * values) zstd-compressed onto out (ctx: a compression context). */
int pd_enc_zstd(ZSTD_CCtx *z, const struct pd_buf *raw, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* The one encoder of sample blocks: n rows of (stk[i], lset[i] (the
 * backend's numbers, >= 0), nv values vals(ctx, i)), sorted by stack and
 * label set, zstd'd onto out (PD_ELIMIT over PD_STORE_MAX_BLOCK raw). */
int pd_enc_rows(ZSTD_CCtx *z, size_t n, uint32_t nv, const int64_t *stk, const int64_t *lset,
		const int64_t *(*vals)(const void *ctx, size_t i), const void *ctx, struct pd_buf *out,
		struct pd_err *err) PD_WUR;
/* The sample block payload of p, sample i's stack and label set given as
 * stk[i], lset[i] (the backend's numbers, >= 0): rows sorted by stack and
 * label set, zstd'd onto out (PD_ELIMIT over PD_STORE_MAX_BLOCK raw). */
int pd_enc_block(ZSTD_CCtx *z, const struct pd_profile *p, const int64_t *stk, const int64_t *lset, struct pd_buf *out,
		 struct pd_err *err) PD_WUR;
/* Decompress and decode a sample block payload: rows of (stack, lset, nv
 * values), *out malloc'd (caller frees). */
int pd_dec_block(ZSTD_DCtx *dctx, const void *z, size_t zn, int64_t **out, size_t *nrows, uint32_t *nv,
		 struct pd_err *err) PD_WUR;

/* ---- fns blob ---- */
/* Append the zstd'd function table of t to out. */
int pd_enc_fns(ZSTD_CCtx *z, const struct pd_fn_totals *t, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* Add a function table payload to a (what names it in errors). */
int pd_dec_fns(ZSTD_DCtx *dctx, const void *z, size_t zn, struct pd_fnt_acc *a, const char *what,
	       struct pd_err *err) PD_WUR;

#endif
