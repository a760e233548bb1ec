/*
 * codec.c — the store's stored formats (see codec.h): checksum framing,
 * the header blob, the sample block, the rollup function table. Pure: no
 * I/O, no locks; the SQLite backend, `profd store check` and the fuzzer
 * call the same code.
 */
#include "codec.h"

#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef ZSTD_LEVEL
#define ZSTD_LEVEL 3
#endif

/* ---- framing ------------------------------------------------------------ */

uint64_t pd_blob_seed(const void *key, size_t n, enum pd_blob_role role)
{
	return XXH3_64bits_withSeed(key, n, 0x70726f6664ULL + (uint64_t)role);
}

uint64_t pd_blob_rollup_seed(const char *service, const char *type, int64_t hour, enum pd_blob_role role)
{
	uint8_t k[128 + 16 + 8 + 2];
	size_t a = strnlen(service, 128), b = strnlen(type, 16);
	memcpy(k, service, a);
	k[a] = 0;
	memcpy(k + a + 1, type, b);
	k[a + 1 + b] = 0;
	memcpy(k + a + b + 2, &hour, 8);
	return pd_blob_seed(k, a + b + 10, role);
}

int pd_blob_begin(struct pd_buf *out)
{
	if (pd_buf_reserve(out, PD_BLOB_FRAME))
		return PD_ENOMEM;
	out->len += PD_BLOB_FRAME;
	return 0;
}

void pd_blob_seal(struct pd_buf *out, size_t start, uint64_t seed)
{
	const uint8_t *p = out->ptr + start + PD_BLOB_FRAME;
	uint64_t h = XXH3_64bits_withSeed(p, out->len - start - PD_BLOB_FRAME, seed);
	out->ptr[start] = PD_BLOB_MAGIC;
	for (int i = 0; i < 8; i++)
		out->ptr[start + 1 + i] = (uint8_t)(h >> (8 * i));
}

int pd_blob_open(const void *b, size_t n, uint64_t seed, const uint8_t **payload, size_t *pn, bool *checked,
		 struct pd_err *err)
{
	const uint8_t *p = b ? b : (const uint8_t *)"";
	*checked = false;
	if (n == 0 || p[0] != PD_BLOB_MAGIC) { /* written before checksums */
		*payload = p;
		*pn = n;
		return 0;
	}
	if (n < PD_BLOB_FRAME)
		return pd_errf(err, PD_EIO, "truncated checksum frame (%zu bytes)", n);
	uint64_t want = 0;
	for (int i = 0; i < 8; i++)
		want |= (uint64_t)p[1 + i] << (8 * i);
	uint64_t got = XXH3_64bits_withSeed(p + PD_BLOB_FRAME, n - PD_BLOB_FRAME, seed);
	if (got != want)
		return pd_errf(err, PD_EIO, "checksum mismatch (stored %016llx, computed %016llx over %zu bytes)",
			       (unsigned long long)want, (unsigned long long)got, n - PD_BLOB_FRAME);
	*payload = p + PD_BLOB_FRAME;
	*pn = n - PD_BLOB_FRAME;
	*checked = true;
	return 0;
}

/* ---- header ------------------------------------------------------------- */

void pd_shdr_free(struct pd_shdr *h)
{
	free(h->stypes);
	free(h->comments);
	free(h->maps);
	free(h->inst);
	memset(h, 0, sizeof *h);
}

int pd_dec_header(const uint8_t *b, size_t n, struct pd_shdr *h, struct pd_err *err)
{
	struct pd_rd r = {b, b + n, false};
	memset(h, 0, sizeof *h);
	h->nst = (uint32_t)pd_rd_v(&r);
	if (r.bad || h->nst > PD_DEFAULT_MAX_SAMPLE_TYPES)
		goto bad;
	h->stypes = malloc((2 * h->nst + 1) * sizeof *h->stypes);
	if (!h->stypes)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < 2 * h->nst; i++)
		h->stypes[i] = (int64_t)pd_rd_v(&r);
	h->ptype = (int64_t)pd_rd_v(&r);
	h->punit = (int64_t)pd_rd_v(&r);
	h->drop = (int64_t)pd_rd_v(&r);
	h->keep = (int64_t)pd_rd_v(&r);
	h->dflt = (int64_t)pd_rd_v(&r);
	h->doc = (int64_t)pd_rd_v(&r);
	h->period = pd_unzz(pd_rd_v(&r));
	h->time = pd_unzz(pd_rd_v(&r));
	h->duration = pd_unzz(pd_rd_v(&r));
	uint64_t nc = pd_rd_v(&r);
	if (r.bad || nc > (uint64_t)(r.end - r.p))
		goto bad;
	h->ncomments = (uint32_t)nc;
	h->comments = malloc((h->ncomments + 1) * sizeof *h->comments);
	if (!h->comments) {
		pd_shdr_free(h);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < h->ncomments; i++)
		h->comments[i] = (int64_t)pd_rd_v(&r);
	uint64_t nm = pd_rd_v(&r);
	if (r.bad || nm > (uint64_t)(r.end - r.p))
		goto bad;
	h->nmaps = (uint32_t)nm;
	h->maps = malloc((h->nmaps + 1) * sizeof *h->maps);
	if (!h->maps) {
		pd_shdr_free(h);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < h->nmaps; i++)
		h->maps[i] = (int64_t)pd_rd_v(&r);
	/* then, since headers carry them, 1 and the mappings' own copies */
	if (!r.bad && r.p < r.end && pd_rd_v(&r) == 1 && !r.bad) {
		if (h->nmaps > (uint64_t)(r.end - r.p))
			goto bad;
		h->inst = malloc((h->nmaps + 1) * sizeof *h->inst);
		if (!h->inst) {
			pd_shdr_free(h);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		for (uint32_t i = 0; i < h->nmaps; i++) {
			struct pd_smap *x = &h->inst[i];
			x->start = pd_rd_v(&r);
			x->limit = pd_rd_v(&r);
			x->file = (int64_t)pd_rd_v(&r);
			x->build = (int64_t)pd_rd_v(&r);
			x->flags = pd_rd_v(&r);
		}
	}
	if (!r.bad)
		return 0;
bad:
	pd_shdr_free(h);
	return pd_errf(err, PD_EIO, "store: corrupt profile header");
}

int pd_enc_header(const struct pd_shdr *h, struct pd_buf *out, struct pd_err *err)
{
	size_t n = 14 + 2 * (size_t)h->nst + h->ncomments + 6 * (size_t)h->nmaps;
	if (pd_buf_reserve(out, 10 * n))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	uint8_t *e = out->ptr + out->len;
	PD_PV(e, h->nst);
	for (uint32_t i = 0; i < 2 * h->nst; i++)
		PD_PV(e, h->stypes[i]);
	int64_t strs[] = {h->ptype, h->punit, h->drop, h->keep, h->dflt, h->doc};
	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
		PD_PV(e, strs[i]);
	PD_PV(e, pd_zz(h->period));
	PD_PV(e, pd_zz(h->time));
	PD_PV(e, pd_zz(h->duration));
	PD_PV(e, h->ncomments);
	for (uint32_t i = 0; i < h->ncomments; i++)
		PD_PV(e, h->comments[i]);
	PD_PV(e, h->nmaps);
	for (uint32_t i = 0; i < h->nmaps; i++)
		PD_PV(e, h->maps[i]);
	if (h->inst && h->nmaps) {
		PD_PV(e, 1);
		for (uint32_t i = 0; i < h->nmaps; i++) {
			const struct pd_smap *x = &h->inst[i];
			PD_PV(e, x->start);
			PD_PV(e, x->limit);
			PD_PV(e, (uint64_t)x->file);
			PD_PV(e, (uint64_t)x->build);
			PD_PV(e, x->flags);
		}
	}
	out->len = (size_t)(e - out->ptr);
	return 0;
}

/* ---- sample block --------------------------------------------------------- */

int pd_enc_zstd(ZSTD_CCtx *z, const struct pd_buf *raw, struct pd_buf *out, struct pd_err *err)
{
	if (raw->len > PD_STORE_MAX_BLOCK)
		return pd_errf(err, PD_ELIMIT, "store: block over %u bytes", PD_STORE_MAX_BLOCK);
	size_t bound = ZSTD_compressBound(raw->len);
	if (pd_buf_reserve(out, bound))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t zn = ZSTD_compressCCtx(z, out->ptr + out->len, bound, raw->ptr ? raw->ptr : (const uint8_t *)"", raw->len,
				      ZSTD_LEVEL);
	if (ZSTD_isError(zn))
		return pd_errf(err, PD_EIO, "store: zstd: %s", ZSTD_getErrorName(zn));
	out->len += zn;
	return 0;
}

/* Decompressed payload of a zstd frame (caller frees), at most the cap. */
static int unz(ZSTD_DCtx *dctx, const void *z, size_t zn, uint8_t **out, size_t *n)
{
	unsigned long long raw = ZSTD_getFrameContentSize(z, zn);
	if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN || raw > PD_STORE_MAX_BLOCK)
		return PD_EIO;
	uint8_t *b = malloc(raw + 1);
	if (!b)
		return PD_ENOMEM;
	size_t got = ZSTD_decompressDCtx(dctx, b, raw, z, zn);
	if (ZSTD_isError(got) || got != raw) {
		free(b);
		return PD_EIO;
	}
	*out = b;
	*n = raw;
	return 0;
}

int pd_block_base(const void *payload, size_t n, int64_t *pk, uint64_t *hash, struct pd_err *err)
{
	const uint8_t *p = payload;
	*pk = 0;
	*hash = 0;
	if (n == 0 || (p[0] != PD_BLOCK_V2 && p[0] != PD_BLOCK_V3))
		return 0; /* version 1: a bare zstd frame */
	const uint8_t *q = p + 1, *end = p + n;
	uint64_t v;
	if (pd_varint(&q, end, &v) || v > INT64_MAX)
		return pd_errf(err, PD_EIO, "store: corrupt sample block (base)");
	if (v) {
		if (end - q < 8)
			return pd_errf(err, PD_EIO, "store: corrupt sample block (base)");
		for (int i = 0; i < 8; i++)
			*hash |= (uint64_t)q[i] << (8 * i);
	}
	*pk = (int64_t)v;
	return 0;
}

int pd_block_raw(ZSTD_DCtx *dctx, const void *payload, size_t n, const void *base, size_t bn, uint8_t **raw,
		 size_t *rn, int *ver, struct pd_err *err)
{
	const uint8_t *p = payload, *z = p;
	size_t zn = n;
	*raw = NULL;
	*ver = 1;
	if (n && (p[0] == PD_BLOCK_V2 || p[0] == PD_BLOCK_V3)) {
		*ver = p[0];
		const uint8_t *q = p + 1, *end = p + n;
		uint64_t v;
		if (pd_varint(&q, end, &v) || (v && end - q < 8))
			return pd_errf(err, PD_EIO, "store: corrupt sample block (base)");
		if (v)
			q += 8;
		else
			base = NULL, bn = 0;
		if (v && !base)
			return pd_errf(err, PD_EIO, "store: sample block without its base");
		z = q, zn = (size_t)(end - q);
	} else
		base = NULL, bn = 0;
	unsigned long long want = ZSTD_getFrameContentSize(z, zn);
	if (want == ZSTD_CONTENTSIZE_ERROR || want == ZSTD_CONTENTSIZE_UNKNOWN || want > PD_STORE_MAX_BLOCK)
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	uint8_t *b = malloc(want + 1);
	if (!b)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (base)
		ZSTD_DCtx_refPrefix(dctx, base, bn);
	size_t got = ZSTD_decompressDCtx(dctx, b, want, z, zn);
	if (ZSTD_isError(got) || got != want) {
		ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
		free(b);
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	}
	*raw = b;
	*rn = (size_t)want;
	return 0;
}

int pd_block_header(const uint8_t *raw, size_t n, int ver, const uint8_t **hp, size_t *hn, struct pd_err *err)
{
	struct pd_rd r = {raw, raw + n, false};
	struct pd_str h = ver == 3 ? pd_rd_s(&r) : (struct pd_str){"", 0};
	if (ver != 3 || r.bad || h.len == 0)
		return pd_errf(err, PD_EIO, "store: corrupt profile header (not in its sample block)");
	*hp = (const uint8_t *)h.ptr;
	*hn = h.len;
	return 0;
}

int pd_block_rows(const uint8_t *b, size_t raw, int ver, int64_t **out, size_t *nrows, uint32_t *nv,
		  struct pd_err *err)
{
	*out = NULL;
	struct pd_rd r = {b, b + raw, false};
	if (ver == 3) { /* the header first (pd_block_header), then as version 2 */
		pd_rd_s(&r);
		ver = 2;
	}
	uint64_t n = pd_rd_v(&r);
	uint64_t v = pd_rd_v(&r);
	int64_t mul[PD_DEFAULT_MAX_SAMPLE_TYPES + 1] = {0};
	if (!r.bad && ver == 2 && v <= PD_DEFAULT_MAX_SAMPLE_TYPES)
		for (uint64_t j = 1; j < v; j++)
			mul[j] = pd_unzz(pd_rd_v(&r));
	/* a row takes at least 2 bytes, plus one per stored value */
	size_t stored = 0;
	for (uint64_t j = 0; j < v && j <= PD_DEFAULT_MAX_SAMPLE_TYPES; j++)
		stored += ver == 1 || j == 0 || !mul[j];
	if (r.bad || v > PD_DEFAULT_MAX_SAMPLE_TYPES || n > (size_t)(r.end - r.p) / (2 + stored))
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	size_t w = 2 + (size_t)v;
	int64_t *rows = malloc(((size_t)n * w + 1) * sizeof *rows);
	if (!rows)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int64_t prev = 0;
	bool bad = false;
	if (ver == 1)
		for (size_t i = 0; i < n; i++) {
			int64_t *row = rows + i * w;
			prev = (int64_t)((uint64_t)prev + pd_rd_v(&r));
			row[0] = prev;
			row[1] = (int64_t)pd_rd_v(&r);
			for (uint32_t j = 0; j < v; j++)
				row[2 + j] = pd_unzz(pd_rd_v(&r));
		}
	else {
		for (size_t i = 0; i < n; i++)
			rows[i * w] = prev = (int64_t)((uint64_t)prev + pd_rd_v(&r));
		for (size_t i = 0; i < n; i++)
			rows[i * w + 1] = (int64_t)pd_rd_v(&r);
		for (uint32_t j = 0; j < v; j++)
			if (j == 0 || !mul[j])
				for (size_t i = 0; i < n; i++)
					rows[i * w + 2 + j] = pd_unzz(pd_rd_v(&r));
		for (uint32_t j = 1; j < v; j++)
			if (mul[j])
				for (size_t i = 0; i < n; i++)
					bad |= __builtin_mul_overflow(rows[i * w + 2], mul[j], &rows[i * w + 2 + j]);
	}
	if (bad || r.bad || r.p != r.end) {
		free(rows);
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	}
	*out = rows;
	*nrows = (size_t)n;
	*nv = (uint32_t)v;
	return 0;
}

int pd_dec_block(ZSTD_DCtx *dctx, const void *z, size_t zn, int64_t **out, size_t *nrows, uint32_t *nv,
		 struct pd_err *err)
{
	*out = NULL;
	uint8_t *b;
	size_t raw;
	int ver, rc = pd_block_raw(dctx, z, zn, NULL, 0, &b, &raw, &ver, err);
	if (rc)
		return rc;
	rc = pd_block_rows(b, raw, ver, out, nrows, nv, err);
	free(b);
	return rc;
}

/* ---- chains of blocks ------------------------------------------------------------ */

void pd_rawcache_free(struct pd_rawcache *c)
{
	for (size_t i = 0; c->e && i < 2 * PD_RAWCACHE_SETS; i++)
		free(c->e[i].raw);
	free(c->e);
	memset(c, 0, sizeof *c);
}

static struct pd_rawent *rawcache_set(struct pd_rawcache *c, uint64_t hash)
{
	return &c->e[2 * (hash % PD_RAWCACHE_SETS)];
}

static void rawent_drop(struct pd_rawcache *c, struct pd_rawent *x)
{
	c->bytes -= x->n;
	free(x->raw);
	memset(x, 0, sizeof *x);
}

bool pd_rawcache_put(struct pd_rawcache *c, uint64_t hash, uint8_t *raw, size_t n)
{
	if (!c->e && !(c->e = calloc(2 * PD_RAWCACHE_SETS, sizeof *c->e))) {
		free(raw);
		return false;
	}
	struct pd_rawent *set = rawcache_set(c, hash);
	for (int w = 0; w < 2; w++)
		if (set[w].raw && set[w].hash == hash) {
			set[w].used = ++c->tick;
			free(raw);
			return true;
		}
	struct pd_rawent *x = !set[0].raw ? &set[0] : !set[1].raw ? &set[1] : set[0].used <= set[1].used ? &set[0] : &set[1];
	if (x->raw)
		rawent_drop(c, x);
	/* over the budget: empty sets in turn, from one the hash picks, until it fits */
	for (size_t i = (size_t)(hash >> 32) % PD_RAWCACHE_SETS, k = 0; c->bytes + n > PD_RAWCACHE_BYTES && k < PD_RAWCACHE_SETS;
	     i = (i + 1) % PD_RAWCACHE_SETS, k++)
		for (int w = 0; w < 2; w++)
			if (c->e[2 * i + w].raw && &c->e[2 * i + w] != x)
				rawent_drop(c, &c->e[2 * i + w]);
	*x = (struct pd_rawent){hash, raw, n, ++c->tick};
	c->bytes += n;
	return true;
}

static const uint8_t *rawcache_get(struct pd_rawcache *c, uint64_t hash, size_t *n)
{
	if (!c->e)
		return NULL;
	struct pd_rawent *set = rawcache_set(c, hash);
	for (int w = 0; w < 2; w++)
		if (set[w].raw && set[w].hash == hash) {
			set[w].used = ++c->tick;
			*n = set[w].n;
			return set[w].raw;
		}
	return NULL;
}

struct chain {
	ZSTD_DCtx *dctx;
	struct pd_rawcache *c;
	pd_block_fetch fetch;
	void *fctx;
	int budget; /* fetches left: damage cannot make a search long */
};

/* The raw bytes of row pk's block that hash to hash, in the cache (the
 * pointer is the cache's, valid until its next put). A row may have
 * several candidates (a removed profile's pk given to a later one): each
 * is tried, and only the one whose raw bytes have the hash is it. */
static int base_raw(struct chain *ch, int64_t pk, uint64_t hash, int depth, const uint8_t **out, size_t *on,
		    struct pd_err *err)
{
	if ((*out = rawcache_get(ch->c, hash, on)))
		return 0;
	if (depth > PD_CHAIN_MAX)
		return pd_errf(err, PD_EIO, "store: corrupt sample block (a chain of over %d bases)", PD_CHAIN_MAX);
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err last = {0};
	int rc = 0, k;
	for (k = 0; !rc; k++) {
		if (ch->budget-- <= 0) {
			rc = pd_errf(err, PD_EIO, "store: corrupt sample block (its bases cannot be resolved)");
			break;
		}
		int got = ch->fetch(ch->fctx, pk, k, &b, &last);
		if (got == 0)
			break;
		if (got < 0) {
			if (got == PD_ENOMEM)
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			continue; /* a damaged candidate: the next one may be it */
		}
		int64_t bpk;
		uint64_t bh;
		const uint8_t *braw = NULL;
		size_t bn = 0;
		uint8_t *raw;
		size_t rn;
		int ver;
		if (pd_block_base(b.ptr, b.len, &bpk, &bh, &last) || (bpk == pk && bh == hash) /* not its own base */)
			continue;
		if (bpk && (got = base_raw(ch, bpk, bh, depth + 1, &braw, &bn, &last))) {
			if (got == PD_ENOMEM)
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			continue;
		}
		if ((got = pd_block_raw(ch->dctx, b.ptr, b.len, braw, bn, &raw, &rn, &ver, &last))) {
			if (got == PD_ENOMEM)
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			continue;
		}
		if (ver >= 2 && pd_block_raw_hash(raw, rn) == hash) {
			pd_buf_free(&b);
			if (!pd_rawcache_put(ch->c, hash, raw, rn))
				return pd_errf(err, PD_ENOMEM, "out of memory");
			*out = rawcache_get(ch->c, hash, on);
			return 0;
		}
		free(raw);
	}
	pd_buf_free(&b);
	if (rc)
		return rc;
	if (last.msg[0])
		return pd_errf(err, PD_EIO, "store: the base of a sample block (row %lld): %s", (long long)pk, last.msg);
	return pd_errf(err, PD_EIO, "store: the base of a sample block (row %lld) is %s", (long long)pk,
		       k > 0 ? "not the one it was written against" : "missing");
}

int pd_block_resolve(ZSTD_DCtx *dctx, struct pd_rawcache *c, const void *payload, size_t n, pd_block_fetch fetch,
		     void *fctx, uint8_t **raw, size_t *rn, int *ver, struct pd_err *err)
{
	struct chain ch = {dctx, c, fetch, fctx, 4 * PD_CHAIN_MAX};
	int64_t pk;
	uint64_t h;
	const uint8_t *braw = NULL;
	size_t bn = 0;
	*raw = NULL;
	int rc = pd_block_base(payload, n, &pk, &h, err);
	if (!rc && pk)
		rc = base_raw(&ch, pk, h, 1, &braw, &bn, err);
	if (!rc)
		rc = pd_block_raw(dctx, payload, n, braw, bn, raw, rn, ver, err);
	return rc;
}

int pd_row_decode(ZSTD_DCtx *dctx, struct pd_rawcache *c, const uint8_t *hp, size_t hn, const uint8_t *bp,
		  size_t bn, pd_block_fetch fetch, void *fctx, struct pd_shdr *h, int64_t **rows, size_t *nrows,
		  uint32_t *nv, struct pd_err *err)
{
	uint8_t *raw;
	size_t rn;
	int ver;
	*rows = NULL;
	memset(h, 0, sizeof *h);
	int rc = pd_block_resolve(dctx, c, bp, bn, fetch, fctx, &raw, &rn, &ver, err);
	if (rc)
		return rc;
	/* the header in its column, or (the column empty) in a version 3
	 * block: never both */
	if (hn == 0)
		rc = pd_block_header(raw, rn, ver, &hp, &hn, err);
	else if (ver == 3)
		rc = pd_errf(err, PD_EIO, "store: corrupt profile header (in its column and in its block)");
	if (!rc)
		rc = pd_dec_header(hp, hn, h, err);
	if (!rc && (rc = pd_block_rows(raw, rn, ver, rows, nrows, nv, err)))
		pd_shdr_free(h);
	if (!rc && ver >= 2) /* after the header's last use: hp may point into raw */
		pd_rawcache_put(c, pd_block_raw_hash(raw, rn), raw, rn);
	else
		free(raw);
	return rc;
}

/* ---- function table ----------------------------------------------------------- */

/* zstd of
 *   nv; per sample type: type, unit; default type; per type: total;
 *   n; per function: name, per type: flat, cum
 * (strings as length + bytes, integers zig-zag varints). */
int pd_enc_fns(ZSTD_CCtx *z, const struct pd_fn_totals *t, struct pd_buf *out, struct pd_err *err)
{
	size_t room = 40 + 30 * (size_t)t->nv + t->dflt.len;
	for (uint32_t j = 0; j < t->nv; j++)
		room += t->types[j].len + t->units[j].len;
	for (size_t i = 0; i < t->n; i++)
		room += 10 + t->names[i].len + 20 * (size_t)t->nv;
	struct pd_buf raw = PD_BUF_INIT(0);
	if (pd_buf_reserve(&raw, room))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	uint8_t *e = raw.ptr;
#define PS(str) (PD_PV(e, (str).len), memcpy(e, (str).ptr, (str).len), e += (str).len)
	PD_PV(e, t->nv);
	for (uint32_t j = 0; j < t->nv; j++) {
		PS(t->types[j]);
		PS(t->units[j]);
	}
	PS(t->dflt);
	for (uint32_t j = 0; j < t->nv; j++)
		PD_PV(e, pd_zz(t->total[j]));
	PD_PV(e, t->n);
	for (size_t i = 0; i < t->n; i++) {
		PS(t->names[i]);
		for (uint32_t j = 0; j < t->nv; j++) {
			PD_PV(e, pd_zz(t->flat[i * t->nv + j]));
			PD_PV(e, pd_zz(t->cum[i * t->nv + j]));
		}
	}
#undef PS
	raw.len = (size_t)(e - raw.ptr);
	int rc = pd_enc_zstd(z, &raw, out, err);
	pd_buf_free(&raw);
	return rc;
}

int pd_dec_fns(ZSTD_DCtx *dctx, const void *z, size_t zn, struct pd_fnt_acc *a, const char *what, struct pd_err *err)
{
	uint8_t *b;
	size_t raw;
	struct pd_str *tu = NULL;
	int64_t *v = NULL;
	int rc = unz(dctx, z, zn, &b, &raw);
	if (rc)
		return rc == PD_ENOMEM ? pd_errf(err, PD_ENOMEM, "out of memory")
				       : pd_errf(err, PD_EIO, "store: corrupt rollup function table");
	struct pd_rd r = {b, b + raw, false};
	uint32_t nv = (uint32_t)pd_rd_v(&r);
	if (r.bad || nv > PD_DEFAULT_MAX_SAMPLE_TYPES)
		goto bad;
	if (!(tu = calloc(2 * (size_t)nv + 1, sizeof *tu)) || !(v = calloc(2 * (size_t)nv + 1, sizeof *v))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t j = 0; j < nv; j++) {
		tu[j] = pd_rd_s(&r);
		tu[nv + j] = pd_rd_s(&r);
	}
	struct pd_str dflt = pd_rd_s(&r);
	for (uint32_t j = 0; j < nv; j++)
		v[j] = pd_unzz(pd_rd_v(&r));
	if (r.bad)
		goto bad;
	if ((rc = pd_fnt_types(a, nv, tu, tu + nv, dflt, what, err)))
		goto out;
	pd_fnt_add_total(a, v);
	uint64_t n = pd_rd_v(&r);
	if (!r.bad && n > raw)
		goto bad;
	for (uint64_t i = 0; i < n && !r.bad && !rc; i++) {
		struct pd_str name = pd_rd_s(&r);
		for (uint32_t j = 0; j < nv; j++) {
			v[j] = pd_unzz(pd_rd_v(&r));
			v[nv + j] = pd_unzz(pd_rd_v(&r));
		}
		if (!r.bad)
			rc = pd_fnt_add(a, name, v, v + nv, err);
	}
	if (!r.bad)
		goto out;
bad:
	rc = pd_errf(err, PD_EIO, "store: corrupt rollup function table");
out:
	free(b);
	free(tu);
	free(v);
	return rc;
}

/* ---- sample block: the encoder ---- */

/* A row being sorted (cmp_row: by stack, then label set). */
struct row {
	int64_t stack, lset;
	uint32_t i; /* sample index */
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->lset < y->lset ? -1 : x->lset > y->lset;
}

struct skey {
	uint64_t k; /* stack << 32 | label set */
	uint64_t i; /* sample index */
};

/* Stable LSD radix sort of a[0..n) on k (tmp: room for n), skipping the
 * bytes that are the same in every key. */
static void sort_keys(struct skey *a, struct skey *tmp, size_t n)
{
	if (n < 48) {
		for (size_t i = 1; i < n; i++) {
			struct skey x = a[i];
			size_t j = i;
			for (; j > 0 && a[j - 1].k > x.k; j--)
				a[j] = a[j - 1];
			a[j] = x;
		}
		return;
	}
	uint32_t cnt[8][256];
	memset(cnt, 0, sizeof cnt);
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 8; d++)
			cnt[d][(a[i].k >> (8 * d)) & 0xff]++;
	struct skey *src = a, *dst = tmp;
	for (int d = 0; d < 8; d++) {
		uint32_t *c = cnt[d];
		if (c[(a[0].k >> (8 * d)) & 0xff] == n)
			continue; /* one value in this byte */
		uint32_t sum = 0;
		for (int b = 0; b < 256; b++) {
			uint32_t t = c[b];
			c[b] = sum;
			sum += t;
		}
		for (size_t i = 0; i < n; i++)
			dst[c[(src[i].k >> (8 * d)) & 0xff]++] = src[i];
		struct skey *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof *a);
}

/* Column j > 0 of a v2 block is derived when v_j == m * v_0 in every row
 * (a CPU profile's nanoseconds are its sample count times the period):
 * the multiplier m (!= 0) is stored once instead of the column. 0: not. */
static int64_t derived_mul(size_t n, const uint32_t *order, uint32_t j,
			   const int64_t *(*vals)(const void *ctx, size_t i), const void *ctx)
{
	int64_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const int64_t *v = vals(ctx, order[i]);
		if (v[0] != 0) {
			if ((v[0] == -1 && v[j] == INT64_MIN) || v[j] % v[0] != 0) /* the one % that overflows, first */
				return 0;
			m = v[j] / v[0];
			break;
		}
	}
	if (m == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const int64_t *v = vals(ctx, order[i]);
		int64_t y;
		if (__builtin_mul_overflow(v[0], m, &y) || y != v[j])
			return 0;
	}
	return m;
}

/* The rows (stack, label set, values) sorted by stack and label set,
 * stacks delta-encoded, varints, zstd: version 1 (o NULL) row by row,
 * version 2 column by column with derived columns, against o->base's raw
 * bytes as a zstd prefix when there is one. */
int pd_enc_rows(ZSTD_CCtx *z, size_t n, uint32_t nv, const int64_t *stk, const int64_t *lset,
		const int64_t *(*vals)(const void *ctx, size_t i), const void *ctx, const struct pd_blkopt *o,
		struct pd_buf *out, struct pd_err *err)
{
	uint32_t *order = malloc((n + 1) * sizeof *order);
	int64_t *mul = NULL;
	struct pd_buf raw = PD_BUF_INIT(0);
	int rc = 0;
	if (!order || n > UINT32_MAX)
		goto oom;
	bool fits = true; /* both seqs < 2^32: sort 64-bit keys */
	for (size_t i = 0; i < n && fits; i++)
		fits = (uint64_t)stk[i] >> 32 == 0 && (uint64_t)lset[i] >> 32 == 0;
	if (fits) {
		struct skey *k = malloc(2 * n * sizeof *k + 1);
		if (!k)
			goto oom;
		for (size_t i = 0; i < n; i++)
			k[i] = (struct skey){(uint64_t)stk[i] << 32 | (uint64_t)lset[i], i};
		sort_keys(k, k + n, n);
		for (size_t i = 0; i < n; i++)
			order[i] = (uint32_t)k[i].i;
		free(k);
	} else {
		struct row *r = malloc(n * sizeof *r + 1);
		if (!r)
			goto oom;
		for (size_t i = 0; i < n; i++)
			r[i] = (struct row){stk[i], lset[i], (uint32_t)i};
		qsort(r, n, sizeof *r, cmp_row);
		for (size_t i = 0; i < n; i++)
			order[i] = r[i].i;
		free(r);
	}
	const struct pd_buf *hdr = o && o->hdr ? o->hdr : NULL;
	if (pd_buf_reserve(&raw, 30 + 10 * n * (2 + (size_t)nv) + 10 * (size_t)nv + (hdr ? hdr->len : 0)))
		goto oom;
	uint8_t *e = raw.ptr;
	if (hdr) { /* version 3: the header first */
		PD_PV(e, hdr->len);
		if (hdr->len)
			memcpy(e, hdr->ptr, hdr->len);
		e += hdr->len;
	}
	PD_PV(e, n);
	PD_PV(e, nv);
	int64_t prev = 0;
	if (!o) {
		for (size_t i = 0; i < n; i++) {
			uint32_t r = order[i];
			PD_PV(e, stk[r] - prev);
			PD_PV(e, lset[r]);
			prev = stk[r];
			const int64_t *v = vals(ctx, r);
			for (uint32_t j = 0; j < nv; j++)
				PD_PV(e, pd_zz(v[j]));
		}
	} else {
		if (!(mul = calloc((size_t)nv + 1, sizeof *mul)))
			goto oom;
		for (uint32_t j = 1; j < nv; j++) {
			mul[j] = derived_mul(n, order, j, vals, ctx);
			PD_PV(e, pd_zz(mul[j]));
		}
		for (size_t i = 0; i < n; i++) {
			PD_PV(e, stk[order[i]] - prev);
			prev = stk[order[i]];
		}
		for (size_t i = 0; i < n; i++)
			PD_PV(e, lset[order[i]]);
		for (uint32_t j = 0; j < nv; j++)
			if (j == 0 || !mul[j])
				for (size_t i = 0; i < n; i++)
					PD_PV(e, pd_zz(vals(ctx, order[i])[j]));
	}
	raw.len = (size_t)(e - raw.ptr);
	if (raw.len > PD_STORE_MAX_BLOCK) {
		rc = pd_errf(err, PD_ELIMIT, "store: sample block over %u bytes", PD_STORE_MAX_BLOCK);
		goto out;
	}
	if (!o) {
		rc = pd_enc_zstd(z, &raw, out, err);
		goto out;
	}
	/* v2, v3: version, base (0 = none; else its pk and the XXH3 of its raw
	 * bytes), the zstd frame */
	const struct pd_blkbase *b = o->base && o->base->pk > 0 ? o->base : NULL;
	if (pd_buf_reserve(out, 1 + 10 + 8))
		goto oom;
	out->ptr[out->len++] = hdr ? PD_BLOCK_V3 : PD_BLOCK_V2;
	out->len = (size_t)(pd_put_varint(out->ptr + out->len, b ? (uint64_t)b->pk : 0) - out->ptr);
	if (b)
		for (int i = 0; i < 8; i++)
			out->ptr[out->len++] = (uint8_t)(b->hash >> (8 * i));
	size_t bound = ZSTD_compressBound(raw.len);
	if (pd_buf_reserve(out, bound))
		goto oom;
	ZSTD_CCtx_reset(z, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, ZSTD_LEVEL);
	if (b)
		ZSTD_CCtx_refPrefix(z, b->raw, b->rawlen);
	size_t zn = ZSTD_compress2(z, out->ptr + out->len, bound, raw.ptr, raw.len);
	if (ZSTD_isError(zn)) {
		rc = pd_errf(err, PD_EIO, "store: zstd: %s", ZSTD_getErrorName(zn));
		goto out;
	}
	out->len += zn;
	if (o->keep) { /* the raw bytes, for this block to be the next one's base (kept a while:
			  the room reserved for varints of 10 bytes given back) */
		pd_buf_free(o->keep);
		uint8_t *t = raw.len ? realloc(raw.ptr, raw.len) : NULL;
		if (t)
			raw.ptr = t, raw.cap = raw.len;
		*o->keep = raw;
		raw = (struct pd_buf)PD_BUF_INIT(0);
	}
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "out of memory");
out:
	free(order);
	free(mul);
	pd_buf_free(&raw);
	return rc;
}

uint64_t pd_block_raw_hash(const void *raw, size_t n) { return XXH3_64bits(raw, n); }

static const int64_t *sample_vals(const void *ctx, size_t i)
{
	return ((const struct pd_profile *)ctx)->samples[i].values;
}

int pd_enc_block(ZSTD_CCtx *z, const struct pd_profile *p, const int64_t *stk, const int64_t *lset,
		 const struct pd_blkopt *o, struct pd_buf *out, struct pd_err *err)
{
	return pd_enc_rows(z, p->nsamples, p->nsample_types, stk, lset, sample_vals, p, o, out, err);
}

/* ---- symbol packs ------------------------------------------------------- */

/* zstd's level for packs: see docs/benchmarks.md, "Symbol packs" */
#define PACK_LEVEL 3

uint64_t pd_pack_seed(int kind, int64_t first)
{
	uint8_t k[9] = {(uint8_t)kind};
	memcpy(k + 1, &first, 8);
	return pd_blob_seed(k, sizeof k, PD_BLOB_PACK);
}

int pd_pack_enc(ZSTD_CCtx *z, int kind, int64_t first, uint32_t n, const uint8_t *const *c, const uint32_t *n1,
		struct pd_buf *out, struct pd_err *err)
{
	if (n < 1 || n > PD_PACK_MAX)
		return pd_errf(err, PD_EINVAL, "store: a symbol pack of %u symbols", n);
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += n1[i] ? n1[i] - 1 : 0;
	if (total > PD_STORE_MAX_BLOCK)
		return pd_errf(err, PD_ELIMIT, "store: a symbol pack over %u bytes", PD_STORE_MAX_BLOCK);
	struct pd_buf raw = PD_BUF_INIT(0);
	if (pd_buf_reserve(&raw, 10 * ((size_t)n + 1) + total))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	uint8_t *e = raw.ptr;
	PD_PV(e, n);
	for (uint32_t i = 0; i < n; i++)
		PD_PV(e, n1[i]);
	for (uint32_t i = 0; i < n; i++)
		if (n1[i] > 1) {
			memcpy(e, c[i], n1[i] - 1);
			e += n1[i] - 1;
		}
	raw.len = (size_t)(e - raw.ptr);
	size_t start = out->len, bound = ZSTD_compressBound(raw.len);
	int rc = 0;
	if (pd_blob_begin(out) || pd_buf_reserve(out, 1 + bound)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	out->ptr[out->len++] = PD_PACK_V1;
	size_t zn = ZSTD_compressCCtx(z, out->ptr + out->len, bound, raw.ptr, raw.len, PACK_LEVEL);
	if (ZSTD_isError(zn)) {
		rc = pd_errf(err, PD_EIO, "store: zstd: %s", ZSTD_getErrorName(zn));
		goto out;
	}
	out->len += zn;
	pd_blob_seal(out, start, pd_pack_seed(kind, first));
out:
	if (rc)
		out->len = start;
	pd_buf_free(&raw);
	return rc;
}

void pd_pack_free(struct pd_pack *p)
{
	free(p->raw);
	free(p->off);
	memset(p, 0, sizeof *p);
}

int pd_pack_dec(ZSTD_DCtx *dctx, int kind, int64_t first, const void *b, size_t n, struct pd_pack *out,
		struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	const uint8_t *p;
	size_t pn;
	bool checked;
	int rc = pd_blob_open(b, n, pd_pack_seed(kind, first), &p, &pn, &checked, err);
	if (rc)
		return rc;
	if (!checked || pn < 1 || p[0] != PD_PACK_V1)
		return pd_errf(err, PD_EIO, "corrupt symbol pack (%s)", !checked ? "no frame" : "version");
	uint8_t *raw = NULL;
	size_t rn = 0;
	if ((rc = unz(dctx, p + 1, pn - 1, &raw, &rn)))
		return rc == PD_ENOMEM ? pd_errf(err, rc, "out of memory") : pd_errf(err, PD_EIO, "corrupt symbol pack (zstd)");
	struct pd_rd r = {raw, raw + rn, false};
	uint64_t cnt = pd_rd_v(&r);
	const char *why = NULL;
	if (r.bad || cnt < 1 || cnt > PD_PACK_MAX || cnt > rn)
		why = "count";
	else if (!(out->off = malloc(2 * cnt * sizeof *out->off)))
		rc = PD_ENOMEM;
	if (!why && !rc) {
		out->n1 = out->off + cnt;
		for (uint64_t i = 0; i < cnt; i++) {
			uint64_t v = pd_rd_v(&r);
			r.bad = r.bad || v > rn + 1;
			out->n1[i] = r.bad ? 0 : (uint32_t)v;
		}
		size_t at = (size_t)(r.p - raw);
		for (uint64_t i = 0; i < cnt && !r.bad; i++) {
			size_t len = out->n1[i] ? out->n1[i] - 1 : 0;
			r.bad = len > rn - at;
			out->off[i] = (uint32_t)at;
			at += r.bad ? 0 : len;
		}
		why = r.bad ? "lengths" : at != rn ? "trailing bytes" : NULL;
	}
	if (why || rc) {
		free(raw);
		pd_pack_free(out);
		return rc ? pd_errf(err, rc, "out of memory") : pd_errf(err, PD_EIO, "corrupt symbol pack (%s)", why);
	}
	out->first = first;
	out->n = (uint32_t)cnt;
	out->raw = raw;
	return 0;
}

/* ---- profile label sets ------------------------------------------------- */

struct lset_ord {
	const struct pd_kv *kv;
	size_t i; /* given order: ties keep it (a stable sort) */
};

static int cmp_lset_ord(const void *a, const void *b)
{
	const struct lset_ord *x = a, *y = b;
	int c = strcmp(x->kv->key, y->kv->key);
	return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

static uint64_t lset_seed(void) { return pd_blob_seed("", 0, PD_BLOB_LSET); }

int pd_lset_enc(const struct pd_kv *kv, size_t n, struct pd_buf *out, struct pd_err *err)
{
	if (n < 1 || n > PD_LSET_MAX)
		return pd_errf(err, PD_EINVAL, "a label set of %zu labels (1 to %d)", n, PD_LSET_MAX);
	for (size_t i = 0; i < n; i++)
		if (!kv[i].key || !kv[i].value)
			return pd_errf(err, PD_EINVAL, "insert label %s: no value", kv[i].key ? kv[i].key : "(null)");
	struct lset_ord *o = malloc(n * sizeof *o);
	if (!o)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		o[i] = (struct lset_ord){&kv[i], i};
	qsort(o, n, sizeof *o, cmp_lset_ord);
	size_t start = out->len;
	int rc = pd_blob_begin(out) ? PD_ENOMEM : 0;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *s[2] = {o[i].kv->key, o[i].kv->value};
		for (int j = 0; j < 2 && !rc; j++) {
			size_t len = strlen(s[j]);
			uint8_t v[10], *e = pd_put_varint(v, len);
			if (pd_buf_append(out, v, (size_t)(e - v)) || pd_buf_append(out, s[j], len))
				rc = PD_ENOMEM;
		}
	}
	free(o);
	if (rc) {
		out->len = start;
		return pd_errf(err, rc, "out of memory");
	}
	pd_blob_seal(out, start, lset_seed());
	return 0;
}

void pd_lset_free(struct pd_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

int pd_lset_dec(const void *b, size_t n, struct pd_kv **out, size_t *nout, struct pd_err *err)
{
	*out = NULL;
	*nout = 0;
	const uint8_t *p;
	size_t pn;
	bool checked;
	if (pd_blob_open(b, n, lset_seed(), &p, &pn, &checked, err))
		return PD_EIO;
	if (!checked) /* every set was written framed */
		return pd_errf(err, PD_EIO, "corrupt label set (no checksum frame)");
	struct pd_rd r = {p, p + pn, false};
	struct pd_kv *kv = NULL;
	size_t nkv = 0, cap = 0;
	const char *why = NULL;
	struct pd_str s[2], last = {"", 0};
	while (!why && r.p < r.end) {
		for (int j = 0; j < 2; j++) {
			s[j] = pd_rd_s(&r);
			if (!r.bad && memchr(s[j].ptr, 0, s[j].len))
				why = "a NUL in a key or value";
		}
		if (r.bad) {
			why = "lengths";
			break;
		}
		/* in key order, as the encoder writes it: bytewise, shorter first */
		int c = nkv ? memcmp(last.ptr, s[0].ptr, last.len < s[0].len ? last.len : s[0].len) : 0;
		if (nkv && (c > 0 || (c == 0 && last.len > s[0].len)))
			why = "keys out of order";
		else if (nkv == PD_LSET_MAX)
			why = "too many labels";
		if (why)
			break;
		if (pd_grow((void **)&kv, &cap, nkv + 1, sizeof *kv) || !(kv[nkv].key = strndup(s[0].ptr, s[0].len))) {
			pd_lset_free(kv, nkv);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		if (!(kv[nkv].value = strndup(s[1].ptr, s[1].len))) {
			free(kv[nkv].key);
			pd_lset_free(kv, nkv);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		nkv++;
		last = s[0];
	}
	if (!why && nkv == 0)
		why = "empty";
	if (why) {
		pd_lset_free(kv, nkv);
		return pd_errf(err, PD_EIO, "corrupt label set (%s)", why);
	}
	*out = kv;
	*nout = nkv;
	return 0;
}
