/*
 * fuzz_storeblob.c — libFuzzer driver for the store's own decoders
 * (lib/store/codec.c): the checksum frame, the header blob, the sample
 * block, the rollup function table, the symbol pack — what a damaged day
 * file feeds them.
 *
 * Input: byte 0 picks the decoder (% 5: header, sample block, function
 * table, a framed blob of any of the first three: frame checked with seed
 * 0, then byte 1 picks the decoder of the payload (% 4; 3: a profile
 * label set's payload, framed here with its seed); a symbol pack's
 * payload, framed here with its seed so that its decoder is reached);
 * the rest is the stored bytes.
 * Properties beyond "no crash, no leak, no UB":
 *   - a decoded header re-encodes (pd_enc_header) to bytes that decode to
 *     the same header;
 *   - a decoded block has nv <= the sample type cap and its rows fit, and
 *     rows an encoder could write encode (version 2, and version 3 with a
 *     header carried) and decode to the same rows (and header bytes); a
 *     version 3 block's header decodes or is refused like a header blob;
 *     a block that names a base is given itself as its only candidate (a
 *     cycle) and must be refused;
 *   - a decoded symbol pack has 1..PD_PACK_MAX symbols within its bytes,
 *     and encodes (pd_pack_enc) to a pack that decodes to the same;
 *   - a decoded label set has 1..PD_LSET_MAX labels and encodes to a set
 *     that decodes to the same labels in the same order;
 *   - every failure is PD_EIO (corrupt) or PD_ENOMEM with a message, or,
 *     for the function table, PD_EINCOMPAT is impossible (one table into
 *     an empty accumulator).
 * Seeds (tests/fuzz/corpus/storeblob) are real blobs of a store, written
 * by tests/unit/test_store.c when PD_WRITE_SEEDS=DIR is set
 * (tests/fuzz/make_seeds.sh storeblob).
 */
#include "../../lib/store/codec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const struct pd_err *err)
{
	if (rc != PD_EIO && rc != PD_ENOMEM)
		abort();
	if (!err->msg[0])
		abort();
}

/* pd_block_fetch of a block that names a base: the input itself is the
 * only candidate (a block that is its own base, a chain that never ends:
 * both must be refused, quickly) */
struct self {
	const uint8_t *p;
	size_t n;
};
static int fetch_self(void *ctx, int64_t pk, int k, struct pd_buf *out, struct pd_err *err)
{
	(void)pk;
	const struct self *s = ctx;
	if (k > 0)
		return 0;
	out->len = 0;
	if (pd_buf_append(out, s->p, s->n))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 1;
}

static const int64_t *row_vals(const void *ctx, size_t i)
{
	const int64_t *const *r = ctx;
	return r[0] + i * (size_t)r[1][0] + 2;
}

/* Rows the encoder could have written (seqs >= 0, sorted) encode in
 * version 2 (hdr NULL) or 3 (carrying hdr) to a block that decodes to the
 * same rows, derived columns and all, and the same header bytes. */
static void roundtrip(ZSTD_DCtx *dctx, const int64_t *rows, size_t nr, uint32_t nv, const struct pd_buf *hdr)
{
	static ZSTD_CCtx *z;
	if (!z && !(z = ZSTD_createCCtx()))
		return;
	int64_t w = 2 + nv;
	for (size_t i = 0; i < nr; i++) {
		const int64_t *r = rows + i * (size_t)w;
		if (r[0] < 0 || r[1] < 0 || (i && (r[0] < r[-w] || (r[0] == r[-w] && r[1] < r[1 - w]))))
			return;
	}
	int64_t *stk = malloc((nr + 1) * sizeof *stk), *ls = malloc((nr + 1) * sizeof *ls);
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err;
	if (!stk || !ls)
		goto out;
	for (size_t i = 0; i < nr; i++)
		stk[i] = rows[i * (size_t)w], ls[i] = rows[i * (size_t)w + 1];
	const int64_t *ctx[2] = {rows, &w};
	struct pd_blkopt o = {.hdr = hdr};
	if (pd_enc_rows(z, nr, nv, stk, ls, row_vals, ctx, &o, &b, &err))
		goto out; /* over the size cap, out of memory */
	int64_t *got;
	size_t gn, rn, hn;
	uint32_t gv;
	uint8_t *raw;
	int ver;
	const uint8_t *hp;
	if (pd_block_raw(dctx, b.ptr, b.len, NULL, 0, &raw, &rn, &ver, &err) || ver != (hdr ? 3 : 2))
		abort();
	if (hdr && (pd_block_header(raw, rn, ver, &hp, &hn, &err) || hn != hdr->len || memcmp(hp, hdr->ptr, hn)))
		abort();
	if (pd_block_rows(raw, rn, ver, &got, &gn, &gv, &err))
		abort();
	free(raw);
	if (gn != nr || gv != nv || memcmp(got, rows, nr * (size_t)w * sizeof *rows))
		abort();
	free(got);
out:
	free(stk);
	free(ls);
	pd_buf_free(&b);
}

static void decode(int which, const uint8_t *p, size_t n)
{
	static ZSTD_DCtx *dctx;
	if (!dctx && !(dctx = ZSTD_createDCtx()))
		return;
	struct pd_err err = {0};
	int rc;
	if (which == 0) {
		struct pd_shdr h, h2;
		if ((rc = pd_dec_header(p, n, &h, &err))) {
			check_err(rc, &err);
			return;
		}
		struct pd_buf b = PD_BUF_INIT(0);
		if (pd_enc_header(&h, &b, &err) == 0) {
			if (pd_dec_header(b.ptr, b.len, &h2, &err))
				abort();
			if (h2.nst != h.nst || h2.ncomments != h.ncomments || h2.nmaps != h.nmaps || h2.period != h.period ||
			    h2.time != h.time || h2.duration != h.duration || h2.dflt != h.dflt ||
			    memcmp(h2.stypes, h.stypes, 2 * h.nst * sizeof *h.stypes) ||
			    memcmp(h2.maps, h.maps, h.nmaps * sizeof *h.maps))
				abort();
			pd_shdr_free(&h2);
		}
		pd_buf_free(&b);
		pd_shdr_free(&h);
	} else if (which == 1) {
		int64_t *rows = NULL;
		size_t nr = 0, rn;
		uint32_t nv = 0;
		uint8_t *raw;
		int ver;
		struct self s = {p, n};
		struct pd_rawcache rcache = {0}; /* per input: runs stay deterministic */
		rc = pd_block_resolve(dctx, &rcache, p, n, fetch_self, &s, &raw, &rn, &ver, &err);
		pd_rawcache_free(&rcache);
		if (rc) {
			check_err(rc, &err);
			return;
		}
		/* version 3: the header it carries, decoded as a header blob is */
		struct pd_buf hdr = PD_BUF_INIT(0);
		const uint8_t *hp;
		size_t hn;
		struct pd_shdr h;
		if (ver == 3 && !(rc = pd_block_header(raw, rn, ver, &hp, &hn, &err))) {
			if ((rc = pd_dec_header(hp, hn, &h, &err)))
				check_err(rc, &err);
			else
				pd_shdr_free(&h);
			if (pd_buf_append(&hdr, hp, hn))
				hdr.len = 0;
		} else if (ver == 3)
			check_err(rc, &err);
		rc = pd_block_rows(raw, rn, ver, &rows, &nr, &nv, &err);
		free(raw);
		if (rc) {
			check_err(rc, &err);
			pd_buf_free(&hdr);
			return;
		}
		if (nv > PD_DEFAULT_MAX_SAMPLE_TYPES)
			abort();
		volatile uint64_t sum = 0; /* every row read (unsigned: values may be anything) */
		for (size_t i = 0; i < nr * (2 + (size_t)nv); i++)
			sum += (uint64_t)rows[i];
		roundtrip(dctx, rows, nr, nv, NULL);
		if (hdr.len)
			roundtrip(dctx, rows, nr, nv, &hdr);
		pd_buf_free(&hdr);
		free(rows);
	} else {
		struct pd_fnt_acc a;
		if (pd_fnt_init(&a, &err))
			return;
		if ((rc = pd_dec_fns(dctx, p, n, &a, "fuzz", &err)))
			check_err(rc, &err);
		pd_fnt_free(&a);
	}
}

/* A symbol pack's payload p[0..n): framed as the store frames pack
 * (kind 4, first seq 1), decoded, re-encoded, decoded again. */
static void pack(const uint8_t *p, size_t n)
{
	static ZSTD_DCtx *dctx;
	static ZSTD_CCtx *z;
	if ((!dctx && !(dctx = ZSTD_createDCtx())) || (!z && !(z = ZSTD_createCCtx())))
		return;
	struct pd_buf b = PD_BUF_INIT(0), e = PD_BUF_INIT(0);
	struct pd_err err = {0};
	struct pd_pack pk, again;
	if (pd_blob_begin(&b) || pd_buf_append(&b, p, n))
		goto out;
	pd_blob_seal(&b, 0, pd_pack_seed(4, 1));
	int rc = pd_pack_dec(dctx, 4, 1, b.ptr, b.len, &pk, &err);
	if (rc) {
		check_err(rc, &err);
		goto out;
	}
	if (pk.n < 1 || pk.n > PD_PACK_MAX || pk.first != 1)
		abort();
	const uint8_t **c = malloc(pk.n * sizeof *c);
	volatile uint64_t sum = 0; /* every content read */
	for (uint32_t i = 0; c && i < pk.n; i++) {
		c[i] = pk.n1[i] ? pk.raw + pk.off[i] : NULL;
		for (uint32_t j = 0; pk.n1[i] && j < pk.n1[i] - 1; j++)
			sum += c[i][j];
	}
	if (c && pd_pack_enc(z, 4, 1, pk.n, c, pk.n1, &e, &err) == 0) {
		if (pd_pack_dec(dctx, 4, 1, e.ptr, e.len, &again, &err) || again.n != pk.n ||
		    memcmp(again.n1, pk.n1, pk.n * sizeof *pk.n1))
			abort();
		for (uint32_t i = 0; i < pk.n; i++)
			if (pk.n1[i] > 1 && memcmp(again.raw + again.off[i], c[i], pk.n1[i] - 1))
				abort();
		pd_pack_free(&again);
	}
	free(c);
	pd_pack_free(&pk);
out:
	pd_buf_free(&b);
	pd_buf_free(&e);
}

/* A profile label set's payload p[0..n): framed as the store frames one,
 * decoded; what decodes encodes (pd_lset_enc) to a set that decodes to
 * the same labels (the bytes may differ: a varint may be overlong). */
static void lset(const uint8_t *p, size_t n)
{
	struct pd_buf b = PD_BUF_INIT(0), e = PD_BUF_INIT(0);
	struct pd_err err = {0};
	if (pd_blob_begin(&b) || pd_buf_append(&b, p, n))
		goto out;
	pd_blob_seal(&b, 0, pd_blob_seed("", 0, PD_BLOB_LSET));
	struct pd_kv *kv;
	size_t nkv;
	int rc = pd_lset_dec(b.ptr, b.len, &kv, &nkv, &err);
	if (rc) {
		check_err(rc, &err);
		goto out;
	}
	if (nkv < 1 || nkv > PD_LSET_MAX)
		abort();
	if (pd_lset_enc(kv, nkv, &e, &err) == 0) {
		struct pd_kv *again;
		size_t na;
		if (pd_lset_dec(e.ptr, e.len, &again, &na, &err) || na != nkv)
			abort();
		for (size_t i = 0; i < nkv; i++)
			if (strcmp(again[i].key, kv[i].key) || strcmp(again[i].value, kv[i].value))
				abort();
		pd_lset_free(again, na);
	}
	pd_lset_free(kv, nkv);
out:
	pd_buf_free(&b);
	pd_buf_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	int which = data[0] % 5;
	if (which == 4) {
		pack(data + 1, size - 1);
		return 0;
	}
	if (which < 3) {
		decode(which, data + 1, size - 1);
		return 0;
	}
	if (size < 2)
		return 0;
	if (data[1] % 4 == 3) {
		lset(data + 2, size - 2);
		return 0;
	}
	const uint8_t *p;
	size_t n;
	bool checked;
	struct pd_err err = {0};
	if (pd_blob_open(data + 2, size - 2, 0, &p, &n, &checked, &err)) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	decode(data[1] % 4, p, n);
	return 0;
}
