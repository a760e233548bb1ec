/*
 * codec.h — the store's own stored formats, one encoder and one decoder
 * each (issue 13: "one codec per stored format, fuzzed, checksummed"):
 *
 *   header blob   a profile's (or a rollup's) header: sample types, period,
 *                 time, duration, comments, mappings, as symbol seqs
 *   sample block  zstd of (stack seq, label-set seq, values) rows, sorted by
 *                 stack, stacks delta-encoded, varints, column by column,
 *                 optionally against the series' previous block (below)
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

#include "../util/pdzstd.h"

#define PD_STORE_MAX_BLOCK (256u << 20) /* decompressed bytes of a block or table */
#define PD_BLOB_MAGIC 0xFE              /* framing, version 1 */
#define PD_BLOB_FRAME 9                 /* magic + 8 bytes of checksum */

enum pd_blob_role { PD_BLOB_HEADER = 1, PD_BLOB_BLOCK = 2, PD_BLOB_FNS = 3, PD_BLOB_PACK = 4, PD_BLOB_LSET = 5 };

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
/* A profile's own copy of one of its mappings: the mapping symbol is shared
 * by the mappings of one pprof merge key (size, offset, build id or file:
 * the same binary in every process and profile, wherever ASLR loaded it),
 * and holds the first one stored in the partition; this is where the
 * profile's was (start, limit) and what it named (file and build id string
 * seqs, flags: has_functions 1, filenames 2, line numbers 4, inline 8).
 * file = -1: none (a header written before these were). */
struct pd_smap {
	uint64_t start, limit;
	int64_t file, build;
	uint64_t flags;
};

static inline uint64_t pd_smap_flags(const struct pd_mapping *m)
{
	return (uint64_t)m->has_functions | (uint64_t)m->has_filenames << 1 | (uint64_t)m->has_line_numbers << 2 |
	       (uint64_t)m->has_inline_frames << 3;
}

struct pd_shdr {
	int64_t *stypes; /* type seq, unit seq pairs */
	uint32_t nst;
	int64_t ptype, punit, drop, keep, dflt, doc;
	int64_t period, time, duration;
	int64_t *comments;
	uint32_t ncomments;
	int64_t *maps;
	uint32_t nmaps;
	struct pd_smap *inst; /* NULL (written before) or one per maps[i] */
};
void pd_shdr_free(struct pd_shdr *h);
/* Decode a header payload (unframed); h is freed on error. */
int pd_dec_header(const uint8_t *b, size_t n, struct pd_shdr *h, struct pd_err *err) PD_WUR;
/* Append the payload of h to out. */
int pd_enc_header(const struct pd_shdr *h, struct pd_buf *out, struct pd_err *err) PD_WUR;

/* ---- sample block ---- */
/* A sample block's payload is, in version 1 (ClickHouse, rows written
 * before version 2), a bare zstd frame of the raw rows: n, nv, then per
 * row stack delta, label set, nv zig-zag values. Version 2 (the embedded
 * store) is
 *     0x02  base (varint: 0, or the pk of the row whose block is the
 *           base)  [XXH3-64 of the base's raw bytes, 8 bytes LE]  zstd
 * of the raw columns: n, nv, per value column j >= 1 its multiplier m
 * (zig-zag; v_j = m * v_0 in every row, the column is not stored; 0 = it
 * is), the stack deltas, the label sets, the stored value columns. A
 * block with a base is compressed with the base's raw bytes as zstd
 * prefix: consecutive scrapes of one target are nearly alike, so a block
 * costs what changed (measured: heap 1,168 -> ~150 bytes). The hash
 * proves that the base found is the one the block was written against. */
#define PD_BLOCK_V2 0x02
/* Version 3 (the embedded store's profiles, from schema 3 on) is version
 * 2 whose raw bytes start with the profile's header payload (varint
 * length, bytes), and the row's header column is empty. A series repeats
 * its header but for time and duration, so against the base's raw bytes
 * it costs a few bytes, where a header column of its own took ~47 (its
 * frame 9): measured, pd_row_decode. */
#define PD_BLOCK_V3 0x03
/* The embedded store's day files say in user_version what they may hold:
 * 1 rollups, 2 sample blocks of version 2, 3 of version 3, 4 symbol packs
 * (below; which an older profd cannot read: it refuses the file, naming
 * the schema), 5 profiles without an index on their xid (an older profd
 * would scan the table for an id), 6 a profile's labels as one row per
 * distinct set (label_sets, below) instead of one row per label and
 * profile (an older profd would list them without their labels), 7 a
 * profile's id as an integer in a file made since (sq_xid_fn: an older
 * profd would not find it by its id). */
#define PD_DAYFILE_SCHEMA 7

/* A day file made since schema 7 keeps a profile's xid without its
 * seconds (the created column holds them): the 8 bytes after them
 * (pd_xid_tail) as an integer, its sign bit flipped so that integer order
 * is the ids' order. A file made before keeps the 20 characters, and its
 * rows stay so. sq_xid_fn defines the SQL function pd_xid(created, xid)
 * on db, the 20 characters of either: every query reads an id through it. */
struct sqlite3;
int sq_xid_fn(struct sqlite3 *db);
static inline int64_t sq_xid_key(uint64_t tail) { return (int64_t)(tail ^ (UINT64_C(1) << 63)); }
struct pd_blkbase {
	int64_t pk;         /* > 0 */
	uint64_t hash;      /* pd_block_raw_hash(raw, rawlen) */
	const uint8_t *raw; /* its raw bytes */
	size_t rawlen;
};
struct pd_blkopt {          /* version 2, or 3 with hdr */
	const struct pd_blkbase *base; /* NULL: none */
	struct pd_buf *keep;           /* if set: gets the raw bytes written */
	const struct pd_buf *hdr;      /* if set: the header payload carried (version 3) */
};
uint64_t pd_block_raw_hash(const void *raw, size_t n);
/* Compress raw rows onto out (version 1). */
int pd_enc_zstd(ZSTD_CCtx *z, const struct pd_buf *raw, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* The one encoder of sample blocks: n rows of (stk[i], lset[i] (the
 * backend's numbers, >= 0), nv values vals(ctx, i)), sorted by stack and
 * label set, onto out: version 1 if o is NULL, else 2 (PD_ELIMIT over
 * PD_STORE_MAX_BLOCK raw). */
int pd_enc_rows(ZSTD_CCtx *z, size_t n, uint32_t nv, const int64_t *stk, const int64_t *lset,
		const int64_t *(*vals)(const void *ctx, size_t i), const void *ctx, const struct pd_blkopt *o,
		struct pd_buf *out, struct pd_err *err) PD_WUR;
/* The sample block of p, sample i's stack and label set given as stk[i],
 * lset[i]: pd_enc_rows. */
int pd_enc_block(ZSTD_CCtx *z, const struct pd_profile *p, const int64_t *stk, const int64_t *lset,
		 const struct pd_blkopt *o, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* The base a block payload needs: *pk = 0 if none, else its pk and the
 * hash its raw bytes must have. */
int pd_block_base(const void *payload, size_t n, int64_t *pk, uint64_t *hash, struct pd_err *err) PD_WUR;
/* A block payload's raw bytes (*raw malloc'd; base: the base's raw bytes
 * if pd_block_base named one, else NULL) and its version. */
int pd_block_raw(ZSTD_DCtx *dctx, const void *payload, size_t n, const void *base, size_t bn, uint8_t **raw,
		 size_t *rn, int *ver, struct pd_err *err) PD_WUR;
/* The rows (stack, lset, nv values) of raw bytes of version ver, *out
 * malloc'd (caller frees). */
int pd_block_rows(const uint8_t *raw, size_t n, int ver, int64_t **out, size_t *nrows, uint32_t *nv,
		  struct pd_err *err) PD_WUR;
/* The header payload that raw bytes of version 3 carry (*hp points into
 * raw); PD_EIO for any other version. */
int pd_block_header(const uint8_t *raw, size_t n, int ver, const uint8_t **hp, size_t *hn,
		    struct pd_err *err) PD_WUR;
/* A block payload that needs no base, decoded: pd_block_raw + rows. */
int pd_dec_block(ZSTD_DCtx *dctx, const void *z, size_t zn, int64_t **out, size_t *nrows, uint32_t *nv,
		 struct pd_err *err) PD_WUR;

/* ---- chains of blocks (version 2 with a base) ---- */
/* Raw bytes of recently decoded blocks by their hash: a merge reads the
 * blocks of a series in order, each one the next one's base, and reads
 * many series at once (a service's pods, interleaved in time): room for
 * one per series of a large service, 2-way set-associative, at most
 * PD_RAWCACHE_BYTES held (the owner empties it after each operation). */
#define PD_RAWCACHE_SETS 512
#define PD_RAWCACHE_BYTES (64u << 20)
#define PD_CHAIN_MAX 64 /* bases followed before a block is corrupt (writers make at most PD_CHAIN_WRITE) */
#define PD_CHAIN_WRITE 32
struct pd_rawcache {
	struct pd_rawent {
		uint64_t hash;
		uint8_t *raw;
		size_t n;
		uint64_t used; /* tick of its last use */
	} *e;            /* 2 * PD_RAWCACHE_SETS, NULL until the first put */
	size_t bytes;
	uint64_t tick;
};
void pd_rawcache_free(struct pd_rawcache *c);
/* Keep raw (malloc'd; the cache owns it from here on: freed if it holds
 * the hash already, or on false, out of memory) under hash. Others are
 * dropped to stay within PD_RAWCACHE_BYTES, never the one just put. */
bool pd_rawcache_put(struct pd_rawcache *c, uint64_t hash, uint8_t *raw, size_t n);
/* The k-th (0, 1, ...) stored block that could be row pk's: 1 with its
 * payload (checksum verified) copied into out, 0 when there is no k-th,
 * else an error (PD_EIO: damage). */
typedef int (*pd_block_fetch)(void *ctx, int64_t pk, int k, struct pd_buf *out, struct pd_err *err);
/* A pd_block_fetch over a statement whose rows are (xid, framed block)
 * for ?1 = pk (the SQLite backend's and `profd store check`'s): the k-th
 * row's payload, frame checked, into out. 1, 0 (no k-th row), or PD_EIO
 * with *frame set when the frame is the damage, clear for SQLite's error. */
struct sqlite3_stmt;
int pd_block_fetch_stmt(struct sqlite3_stmt *st, int64_t pk, int k, struct pd_buf *out, bool *frame,
			struct pd_err *err);

/* Whether the write-ahead log wal (a day file's -wal, left by a crash)
 * lost acknowledged commits to damage: a frame of the log's current
 * generation (its salts) fails its checksum and two or more later frames
 * of that generation end a commit. SQLite's recovery stops at the first
 * bad frame and drops every commit after it without a word; one commit
 * after it is the transaction a power loss interrupted (each commit is
 * synced before it is acknowledged, so only the last can be torn).
 * 1 with why set, 0 (no log, or none lost), never an error. check.c. */
int pd_wal_damaged(const char *wal, char *why, size_t n);
/* The raw bytes (*raw malloc'd) and version of a block payload, its bases
 * found through the cache or fetch (each candidate's raw bytes checked
 * against the hash its dependant recorded). A base missing or damaged is
 * PD_EIO naming it. */
int pd_block_resolve(ZSTD_DCtx *dctx, struct pd_rawcache *c, const void *payload, size_t n, pd_block_fetch fetch,
		     void *fctx, uint8_t **raw, size_t *rn, int *ver, struct pd_err *err) PD_WUR;

/* A stored profile's header and rows, from the payloads of its header
 * and block columns (an empty header: the block carries it, version 3),
 * bases resolved as pd_block_resolve does; the raw bytes of a version 2
 * or 3 block are put in c, for the next block of its series. h is left
 * clear on error. */
int pd_row_decode(ZSTD_DCtx *dctx, struct pd_rawcache *c, const uint8_t *hp, size_t hn, const uint8_t *bp,
		  size_t bn, pd_block_fetch fetch, void *fctx, struct pd_shdr *h, int64_t **rows, size_t *nrows,
		  uint32_t *nv, struct pd_err *err) PD_WUR;

/* ---- symbol packs (day files of schema 4) ---- */
/* The embedded store moves a kind's committed symbols (all but mappings)
 * out of their table into packs: a pack holds the seqs first .. first +
 * n - 1, n <= PD_PACK_MAX. Framed (role PD_BLOB_PACK, seed pd_pack_seed),
 * its payload is
 *     0x01  zstd of: n (varint), per seq a varint, its content's length
 *           + 1 (0: no symbol has that seq, lost with a failed commit),
 *           then the contents in seq order
 * A row of its own cost a symbol its content plus ~18 bytes (the seq, h
 * and SQLite's row); packed, neighbours compress against each other (a
 * stack is its parent's locations and one more): measured in
 * docs/benchmarks.md, "Symbol packs". */
#define PD_PACK_MAX 4096
#define PD_PACK_V1 0x01
struct pd_pack {
	int64_t first;     /* its first seq */
	uint32_t n;        /* seqs first .. first + n - 1 */
	uint32_t *off, *n1; /* seq first + i: n1[i] - 1 bytes at raw + off[i]; n1 0: none */
	uint8_t *raw;      /* decompressed (malloc'd, off and n1 with it) */
};
uint64_t pd_pack_seed(int kind, int64_t first);
/* Append the framed pack of kind's seqs first .. first + n - 1 to out:
 * seq first + i's content c[i], n1[i] - 1 bytes (n1[i] 0: none). */
int pd_pack_enc(ZSTD_CCtx *z, int kind, int64_t first, uint32_t n, const uint8_t *const *c, const uint32_t *n1,
		struct pd_buf *out, struct pd_err *err) PD_WUR;
/* A stored pack (framed) of kind from seq first, checked and decoded into
 * out (pd_pack_free; left empty on error: PD_EIO "corrupt ..." or
 * PD_ENOMEM). */
int pd_pack_dec(ZSTD_DCtx *dctx, int kind, int64_t first, const void *b, size_t n, struct pd_pack *out,
		struct pd_err *err) PD_WUR;
void pd_pack_free(struct pd_pack *p);

/* ---- profile label sets (day files of schema 6) ---- */
/* A scraper's series carries the same labels (namespace, pod, container,
 * node, the pod's own) on every profile: stored once per distinct set, a
 * row of label_sets(seq, c) that profiles name by seq. c is framed (role
 * PD_BLOB_LSET, one seed for all: c is also the row's unique key, so it is
 * a function of the labels alone); its payload is, per label in key order
 * (bytewise; equal keys in the order given, as the list API shows them),
 *     varint len, key, varint len, value
 * Per profile and label a row of (pk, k, v) and two indexes took ~80
 * bytes: 6 labels were 479 bytes a profile, more than its sample block
 * (docs/benchmarks.md, "Profile labels"). */
#define PD_LSET_MAX 1024 /* labels in one set (the API takes 64) */
/* Append the framed set of labels kv[0..n) to out (n >= 1). */
int pd_lset_enc(const struct pd_kv *kv, size_t n, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* A stored set (framed), checked and decoded: *out malloc'd, every key and
 * value strdup'd (free each, then the array); NULL and 0 on error (PD_EIO
 * "corrupt label set ...", or PD_ENOMEM). A key or value holding a NUL is
 * corrupt: the API does not take them. */
int pd_lset_dec(const void *b, size_t n, struct pd_kv **out, size_t *nout, struct pd_err *err) PD_WUR;
/* Free what pd_lset_dec made (kv NULL: nothing). */
void pd_lset_free(struct pd_kv *kv, size_t n);

/* ---- fns blob ---- */
/* Append the zstd'd function table of t to out. */
int pd_enc_fns(ZSTD_CCtx *z, const struct pd_fn_totals *t, struct pd_buf *out, struct pd_err *err) PD_WUR;
/* Add a function table payload to a (what names it in errors). */
int pd_dec_fns(ZSTD_DCtx *dctx, const void *z, size_t zn, struct pd_fnt_acc *a, const char *what,
	       struct pd_err *err) PD_WUR;

#endif
