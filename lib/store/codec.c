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

#define ZSTD_LEVEL 3

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
	if (!r.bad)
		return 0;
bad:
	pd_shdr_free(h);
	return pd_errf(err, PD_EIO, "store: corrupt profile header");
}

int pd_enc_header(const struct pd_shdr *h, struct pd_buf *out, struct pd_err *err)
{
	size_t n = 13 + 2 * (size_t)h->nst + h->ncomments + h->nmaps;
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

int pd_dec_block(ZSTD_DCtx *dctx, const void *z, size_t zn, int64_t **out, size_t *nrows, uint32_t *nv,
		 struct pd_err *err)
{
	*out = NULL;
	uint8_t *b;
	size_t raw;
	int rc = unz(dctx, z, zn, &b, &raw);
	if (rc)
		return rc == PD_ENOMEM ? pd_errf(err, PD_ENOMEM, "out of memory")
				       : pd_errf(err, PD_EIO, "store: corrupt sample block");
	struct pd_rd r = {b, b + raw, false};
	uint64_t n = pd_rd_v(&r);
	uint64_t v = pd_rd_v(&r);
	/* a row takes at least 2 + v bytes */
	if (r.bad || v > PD_DEFAULT_MAX_SAMPLE_TYPES || n > raw / (2 + v)) {
		free(b);
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	}
	int64_t *rows = malloc(((size_t)n * (2 + (size_t)v) + 1) * sizeof *rows);
	if (!rows) {
		free(b);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	int64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t *row = rows + i * (2 + v);
		prev = (int64_t)((uint64_t)prev + pd_rd_v(&r));
		row[0] = prev;
		row[1] = (int64_t)pd_rd_v(&r);
		for (uint32_t j = 0; j < v; j++)
			row[2 + j] = pd_unzz(pd_rd_v(&r));
	}
	bool bad = r.bad || r.p != r.end;
	free(b);
	if (bad) {
		free(rows);
		return pd_errf(err, PD_EIO, "store: corrupt sample block");
	}
	*out = rows;
	*nrows = (size_t)n;
	*nv = (uint32_t)v;
	return 0;
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

/* The rows (stack, label set, values) sorted by stack and label set,
 * stacks delta-encoded, varints, zstd. */
int pd_enc_rows(ZSTD_CCtx *z, size_t n, uint32_t nv, const int64_t *stk, const int64_t *lset,
		const int64_t *(*vals)(const void *ctx, size_t i), const void *ctx, struct pd_buf *out, struct pd_err *err)
{
	uint32_t *order = malloc((n + 1) * sizeof *order);
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
	if (pd_buf_reserve(&raw, 20 + 10 * n * (2 + (size_t)nv)))
		goto oom;
	uint8_t *e = raw.ptr;
	PD_PV(e, n);
	PD_PV(e, nv);
	int64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t o = order[i];
		PD_PV(e, stk[o] - prev);
		PD_PV(e, lset[o]);
		prev = stk[o];
		const int64_t *v = vals(ctx, o);
		for (uint32_t j = 0; j < nv; j++)
			PD_PV(e, pd_zz(v[j]));
	}
	raw.len = (size_t)(e - raw.ptr);
	if (raw.len > PD_STORE_MAX_BLOCK) {
		rc = pd_errf(err, PD_ELIMIT, "store: sample block over %u bytes", PD_STORE_MAX_BLOCK);
		goto out;
	}
	rc = pd_enc_zstd(z, &raw, out, err);
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "out of memory");
out:
	free(order);
	pd_buf_free(&raw);
	return rc;
}


static const int64_t *sample_vals(const void *ctx, size_t i)
{
	return ((const struct pd_profile *)ctx)->samples[i].values;
}

int pd_enc_block(ZSTD_CCtx *z, const struct pd_profile *p, const int64_t *stk, const int64_t *lset, struct pd_buf *out,
		 struct pd_err *err)
{
	return pd_enc_rows(z, p->nsamples, p->nsample_types, stk, lset, sample_vals, p, out, err);
}
