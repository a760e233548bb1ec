/*
 * bench_blocks.c — what the embedded store's sample blocks cost, against a
 * prototype of a model-coded block (issue 18: storage of CPU profiles).
 *
 *   bench_blocks [-r ROUNDS] FILE...
 *
 * The FILEs are one series (one target's scrapes of one type, in time
 * order). Their samples become rows as the store makes them: stacks and
 * label sets numbered in order of first sight (a stack is its locations'
 * addresses, a label set its labels), rows sorted by stack and label set.
 * Each profile's rows are then written two ways, each against the
 * series' previous profile, a fresh start every PD_CHAIN_WRITE:
 *
 *   stored  the store's own encoder (lib/store/codec.c, pd_enc_rows:
 *           version 2, zstd with the previous block's raw bytes as
 *           prefix), decoded with its own decoder (pd_block_raw +
 *           pd_block_rows);
 *   model   a binary adaptive range coder (LZMA's) whose contexts come
 *           from the previous block alone: for each stack of the previous
 *           block whether it is here again (context: how much it weighed
 *           there), the stacks that are new as gaps, per row its label set
 *           (the previous block's for the stack, or given) and its values
 *           (context: the stack's weight in the previous block). Decoded
 *           back and checked row for row against the input.
 *
 * Prints bytes per block (the store's: its payload, with the version
 * byte and, with a base, the base's pk and hash, ~10 bytes; the model's:
 * the coded rows alone, which would need those too; the store adds a
 * 9-byte checksum frame to either) and the decode time of
 * the whole series (best of ROUNDS), so the two can be weighed: a smaller
 * block that decodes slower makes every merge slower.
 */
#include "../lib/pprof/pprof.h"
#include "../lib/store/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* ---- rows ---- */
struct row {
	int64_t s, l, v[2];
};
struct series {
	struct row **rows;
	size_t *n;
	int nf;
	uint32_t nv;
	int64_t mul; /* v1 = mul * v0 in every row, 0 = not so */
};

/* Numbers in order of first sight, by content hash (the hash stands for
 * the content: a probe, not the store's compare of the bytes). */
struct ids {
	struct pd_hidx h;
	uint32_t next;
};
static bool same_hash(void *ctx, uint32_t val)
{
	(void)ctx, (void)val;
	return true;
}
static int64_t id_of(struct ids *t, uint64_t hash)
{
	uint32_t v = pd_hidx_find(&t->h, hash, same_hash, NULL);
	if (v != UINT32_MAX)
		return v;
	if (pd_hidx_insert(&t->h, hash, ++t->next)) {
		fprintf(stderr, "bench_blocks: out of memory\n");
		exit(1);
	}
	return t->next;
}

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return (x->l > y->l) - (x->l < y->l);
}

static int load(struct series *se, int n, char **files)
{
	struct ids stacks = {0}, lsets = {0};
	XXH3_state_t *st = XXH3_createState();
	if (pd_hidx_init(&stacks.h, 4096) || pd_hidx_init(&lsets.h, 64) || !st) {
		fprintf(stderr, "bench_blocks: out of memory\n");
		return 1;
	}
	se->rows = calloc((size_t)n, sizeof *se->rows);
	se->n = calloc((size_t)n, sizeof *se->n);
	se->nf = n;
	se->nv = 2;
	se->mul = -1;
	for (int f = 0; f < n; f++) {
		struct pd_profile *p;
		struct pd_err err = {0};
		if (pd_pprof_decode_file(files[f], NULL, &p, &err)) {
			fprintf(stderr, "bench_blocks: %s\n", err.msg);
			return 1;
		}
		if (p->nsample_types != 2) {
			fprintf(stderr, "bench_blocks: %s: %u sample types (this probe takes 2)\n", files[f],
				p->nsample_types);
			return 1;
		}
		struct row *r = malloc((p->nsamples + 1) * sizeof *r);
		for (size_t i = 0; i < p->nsamples; i++) {
			const struct pd_sample *s = &p->samples[i];
			XXH3_64bits_reset(st);
			for (uint32_t k = 0; k < s->nlocs; k++)
				XXH3_64bits_update(st, &p->locations[s->locs[k]].address, 8);
			uint64_t sh = XXH3_64bits_digest(st);
			XXH3_64bits_reset(st);
			for (uint32_t k = 0; k < s->nlabels; k++) {
				const struct pd_label *lb = &s->labels[k];
				struct pd_str ks = p->strings[lb->key], vs = p->strings[lb->str];
				XXH3_64bits_update(st, ks.ptr, ks.len);
				XXH3_64bits_update(st, "=", 1);
				XXH3_64bits_update(st, vs.ptr, vs.len);
				XXH3_64bits_update(st, &lb->num, sizeof lb->num);
			}
			uint64_t lh = XXH3_64bits_digest(st);
			r[i] = (struct row){id_of(&stacks, sh), s->nlabels ? id_of(&lsets, lh) : 0,
					    {s->values[0], s->values[1]}};
			if (r[i].v[0] && r[i].v[1] % r[i].v[0] == 0) {
				int64_t m = r[i].v[1] / r[i].v[0];
				se->mul = se->mul == -1 || se->mul == m ? m : 0;
			} else
				se->mul = 0;
		}
		/* rows of one (stack, label set) summed, as the store's ingest does */
		qsort(r, p->nsamples, sizeof *r, cmp_row);
		size_t m = 0;
		for (size_t i = 0; i < p->nsamples; i++) {
			if (m && r[m - 1].s == r[i].s && r[m - 1].l == r[i].l)
				r[m - 1].v[0] += r[i].v[0], r[m - 1].v[1] += r[i].v[1];
			else
				r[m++] = r[i];
		}
		se->rows[f] = r;
		se->n[f] = m;
		pd_profile_free(p);
	}
	if (se->mul < 0)
		se->mul = 0;
	pd_hidx_free(&stacks.h), pd_hidx_free(&lsets.h);
	XXH3_freeState(st);
	return 0;
}

/* ---- LZMA's binary range coder ---- */
#define PB 11
#define PSHIFT 4
typedef uint16_t prob;
struct rce {
	uint8_t *p;
	uint64_t low;
	uint32_t range;
	uint8_t cache;
	uint64_t csize;
};
static void rce_shift(struct rce *e)
{
	if ((uint32_t)e->low < 0xFF000000u || (e->low >> 32)) {
		uint8_t t = e->cache;
		do {
			*e->p++ = (uint8_t)(t + (uint8_t)(e->low >> 32));
			t = 0xFF;
		} while (--e->csize);
		e->cache = (uint8_t)((uint32_t)e->low >> 24);
	}
	e->csize++;
	e->low = (uint32_t)e->low << 8;
}
static void rce_bit(struct rce *e, prob *pr, int bit)
{
	uint32_t bound = (e->range >> PB) * *pr;
	if (!bit) {
		e->range = bound;
		*pr = (prob)(*pr + (((1u << PB) - *pr) >> PSHIFT));
	} else {
		e->low += bound;
		e->range -= bound;
		*pr = (prob)(*pr - (*pr >> PSHIFT));
	}
	while (e->range < (1u << 24)) {
		e->range <<= 8;
		rce_shift(e);
	}
}
static void rce_flush(struct rce *e)
{
	for (int i = 0; i < 5; i++)
		rce_shift(e);
}
struct rcd {
	const uint8_t *p, *end;
	uint32_t range, code;
};
static uint8_t rcd_byte(struct rcd *d) { return d->p < d->end ? *d->p++ : 0; }
static void rcd_init(struct rcd *d, const uint8_t *p, size_t n)
{
	*d = (struct rcd){p, p + n, 0xFFFFFFFFu, 0};
	for (int i = 0; i < 5; i++)
		d->code = d->code << 8 | rcd_byte(d);
}
static int rcd_bit(struct rcd *d, prob *pr)
{
	uint32_t bound = (d->range >> PB) * *pr;
	int bit;
	if (d->code < bound) {
		d->range = bound;
		*pr = (prob)(*pr + (((1u << PB) - *pr) >> PSHIFT));
		bit = 0;
	} else {
		d->code -= bound;
		d->range -= bound;
		*pr = (prob)(*pr - (*pr >> PSHIFT));
		bit = 1;
	}
	while (d->range < (1u << 24)) {
		d->range <<= 8;
		d->code = d->code << 8 | rcd_byte(d);
	}
	return bit;
}

/* integers >= 0 as Elias gamma of v + 1, every bit adaptive: the length
 * in unary (a context per position), then the bits below the top one (a
 * context per length and position, the low ones of long numbers shared) */
#define IE 24 /* length contexts; longer lengths share the last */
#define IM 6  /* mantissa positions with their own context, from the top */
struct ictx {
	prob e[IE], m[IE][IM + 1];
};
static void ictx_init(struct ictx *c)
{
	static struct ictx t;
	if (!t.e[0])
		for (size_t i = 0; i < sizeof t / sizeof(prob); i++)
			((prob *)&t)[i] = 1u << (PB - 1);
	*c = t;
}
static void rce_int(struct rce *e, struct ictx *c, uint64_t v)
{
	v++;
	int k = 63 - __builtin_clzll(v);
	for (int i = 0; i < k; i++)
		rce_bit(e, &c->e[i < IE - 1 ? i : IE - 1], 1);
	rce_bit(e, &c->e[k < IE - 1 ? k : IE - 1], 0);
	prob *m = c->m[k < IE - 1 ? k : IE - 1];
	for (int i = k - 1, at = 0; i >= 0; i--, at++)
		rce_bit(e, &m[at < IM ? at : IM], (int)(v >> i & 1));
}
static uint64_t rcd_int(struct rcd *d, struct ictx *c)
{
	int k = 0;
	while (k < 63 && rcd_bit(d, &c->e[k < IE - 1 ? k : IE - 1]))
		k++;
	prob *m = c->m[k < IE - 1 ? k : IE - 1];
	uint64_t v = 1;
	for (int i = k - 1, at = 0; i >= 0; i--, at++)
		v = v << 1 | (uint64_t)rcd_bit(d, &m[at < IM ? at : IM]);
	return v - 1;
}

/* ---- the model-coded block ---- */
#define NB 8 /* weight buckets of a stack in the previous block; 0 = not there */
static int bucket(int64_t w)
{
	int b = 1;
	while (b < NB - 1 && w > (1 << (2 * (b - 1))))
		b++;
	return b;
}
struct model {
	prob here[NB], same[2], more[NB];
	struct ictx gap, nrows, lset, val[NB];
};
static void model_init(struct model *m)
{
	for (int i = 0; i < NB; i++)
		m->here[i] = m->more[i] = 1u << (PB - 1);
	m->same[0] = m->same[1] = 1u << (PB - 1);
	ictx_init(&m->gap), ictx_init(&m->nrows), ictx_init(&m->lset);
	for (int i = 0; i < NB; i++)
		ictx_init(&m->val[i]);
}

/* The distinct stacks of rows, each with its weight (sum of v0), its
 * first row and its row count. */
struct sk {
	int64_t s, w;
	size_t at, n;
};
static size_t stacks_of(const struct row *r, size_t n, struct sk *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!k || out[k - 1].s != r[i].s)
			out[k++] = (struct sk){r[i].s, 0, i, 0};
		out[k - 1].w += r[i].v[0];
		out[k - 1].n++;
	}
	return k;
}

static size_t model_enc(const struct row *b, size_t bn, const struct row *r, size_t n, int64_t mul, uint8_t *out)
{
	static struct model m;
	static struct sk bs[1 << 20], rs[1 << 20];
	model_init(&m);
	struct rce e = {out, 0, 0xFFFFFFFFu, 0, 1};
	size_t nbs = stacks_of(b, bn, bs), nrs = stacks_of(r, n, rs);
	/* for each stack of the base: here again? */
	size_t j = 0;
	for (size_t i = 0; i < nbs; i++) {
		while (j < nrs && rs[j].s < bs[i].s)
			j++;
		rce_bit(&e, &m.here[bucket(bs[i].w)], j < nrs && rs[j].s == bs[i].s);
	}
	/* the new ones: how many, then their gaps */
	size_t nnew = 0;
	j = 0;
	for (size_t i = 0; i < nrs; i++) {
		while (j < nbs && bs[j].s < rs[i].s)
			j++;
		nnew += !(j < nbs && bs[j].s == rs[i].s);
	}
	rce_int(&e, &m.nrows, nnew);
	int64_t prev = 0;
	j = 0;
	for (size_t i = 0; i < nrs; i++) {
		while (j < nbs && bs[j].s < rs[i].s)
			j++;
		if (!(j < nbs && bs[j].s == rs[i].s)) {
			rce_int(&e, &m.gap, (uint64_t)(rs[i].s - prev - 1));
			prev = rs[i].s;
		}
	}
	/* per stack: its rows (label sets), then each row's values */
	j = 0;
	for (size_t i = 0; i < nrs; i++) {
		while (j < nbs && bs[j].s < rs[i].s)
			j++;
		const struct sk *in = j < nbs && bs[j].s == rs[i].s ? &bs[j] : NULL;
		int c = in ? bucket(in->w) : 0;
		/* more than one row? */
		rce_bit(&e, &m.more[c], rs[i].n > 1);
		if (rs[i].n > 1)
			rce_int(&e, &m.nrows, rs[i].n - 2);
		for (size_t k = 0; k < rs[i].n; k++) {
			const struct row *x = &r[rs[i].at + k];
			int64_t want = in && k < in->n ? b[in->at + k].l : 0;
			rce_bit(&e, &m.same[in != NULL], x->l == want);
			if (x->l != want)
				rce_int(&e, &m.lset, (uint64_t)x->l);
			rce_int(&e, &m.val[c], pd_zz(x->v[0]));
			if (!mul)
				rce_int(&e, &m.val[0], pd_zz(x->v[1]));
		}
	}
	rce_flush(&e);
	return (size_t)(e.p - out);
}

static size_t model_dec(const struct row *b, size_t bn, const uint8_t *z, size_t zn, int64_t mul, struct row *r)
{
	static struct model m;
	static struct sk bs[1 << 20];
	static int64_t here[1 << 20];
	model_init(&m);
	struct rcd d;
	rcd_init(&d, z, zn);
	size_t nbs = stacks_of(b, bn, bs), nh = 0;
	for (size_t i = 0; i < nbs; i++)
		if (rcd_bit(&d, &m.here[bucket(bs[i].w)]))
			here[nh++] = (int64_t)i;
	size_t nnew = (size_t)rcd_int(&d, &m.nrows);
	static int64_t news[1 << 20];
	int64_t prev = 0;
	for (size_t i = 0; i < nnew; i++)
		news[i] = prev = prev + 1 + (int64_t)rcd_int(&d, &m.gap);
	/* merge the two ascending lists of stacks */
	size_t a = 0, c2 = 0, n = 0;
	while (a < nh || c2 < nnew) {
		const struct sk *in = NULL;
		int64_t s;
		if (c2 >= nnew || (a < nh && bs[here[a]].s < news[c2]))
			in = &bs[here[a++]], s = in->s;
		else
			s = news[c2++];
		int c = in ? bucket(in->w) : 0;
		size_t rows = 1;
		if (rcd_bit(&d, &m.more[c]))
			rows = 2 + (size_t)rcd_int(&d, &m.nrows);
		for (size_t k = 0; k < rows; k++) {
			struct row *x = &r[n++];
			int64_t want = in && k < in->n ? b[in->at + k].l : 0;
			x->s = s;
			x->l = rcd_bit(&d, &m.same[in != NULL]) ? want : (int64_t)rcd_int(&d, &m.lset);
			x->v[0] = pd_unzz(rcd_int(&d, &m.val[c]));
			x->v[1] = mul ? x->v[0] * mul : pd_unzz(rcd_int(&d, &m.val[0]));
		}
	}
	return n;
}

/* ---- the store's own ---- */
static const struct row *g_rows;
static const int64_t *row_vals(const void *ctx, size_t i)
{
	(void)ctx;
	return g_rows[i].v;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int rounds = 5, first = 1;
	if (argc > 2 && !strcmp(argv[1], "-r"))
		rounds = atoi(argv[2]), first = 3;
	int nf = argc - first;
	if (nf < 2 || rounds <= 0) {
		fprintf(stderr, "usage: bench_blocks [-r ROUNDS] FILE... (one series, in time order)\n");
		return 2;
	}
	struct series se;
	if (load(&se, nf, argv + first))
		return 1;
	ZSTD_CCtx *z = ZSTD_createCCtx();
	ZSTD_DCtx *dz = ZSTD_createDCtx();
	struct pd_buf *blk = calloc((size_t)nf, sizeof *blk), *raws = calloc((size_t)nf, sizeof *raws);
	uint8_t **mb = calloc((size_t)nf, sizeof *mb);
	size_t *mn = calloc((size_t)nf, sizeof *mn), sbytes = 0, mbytes = 0, nrows = 0;
	double enc_s = 0;
	struct pd_err err;
	/* encode both ways, each block against the previous (a fresh start
	 * every PD_CHAIN_WRITE, as the store) */
	for (int f = 0; f < nf; f++) {
		size_t n = se.n[f];
		int64_t *stk = malloc((n + 1) * sizeof *stk), *ls = malloc((n + 1) * sizeof *ls);
		for (size_t i = 0; i < n; i++)
			stk[i] = se.rows[f][i].s, ls[i] = se.rows[f][i].l;
		g_rows = se.rows[f];
		bool based = f % PD_CHAIN_WRITE != 0;
		struct pd_blkbase base = {0};
		if (based)
			base = (struct pd_blkbase){f, pd_block_raw_hash(raws[f - 1].ptr, raws[f - 1].len),
						   raws[f - 1].ptr, raws[f - 1].len};
		struct pd_blkopt o = {based ? &base : NULL, &raws[f], NULL};
		double e0 = now();
		int erc = pd_enc_rows(z, n, se.nv, stk, ls, row_vals, NULL, &o, &blk[f], &err);
		enc_s += now() - e0;
		if (erc) {
			fprintf(stderr, "bench_blocks: %s\n", err.msg);
			return 1;
		}
		/* room: a decision costs at most ~6 bits (probabilities stay
		 * >= 31/2048), a row at most ~400 decisions, a base stack one */
		mb[f] = malloc(64 + 400 * n + (based ? se.n[f - 1] : 0));
		static const struct row none[1];
		mn[f] = based ? model_enc(se.rows[f - 1], se.n[f - 1], se.rows[f], n, se.mul, mb[f])
			      : model_enc(none, 0, se.rows[f], n, se.mul, mb[f]);
		sbytes += blk[f].len, mbytes += mn[f], nrows += n;
		free(stk), free(ls);
	}
	/* decode both ways, the series in order (each block's base is the
	 * previous one's raw bytes / rows, as a merge reads a chain) */
	double best_s = 1e9, best_m = 1e9;
	struct row *out = malloc(sizeof *out * (1 << 20));
	for (int r = 0; r < rounds; r++) {
		double t0 = now();
		uint8_t *prevraw = NULL;
		size_t prevn = 0;
		for (int f = 0; f < nf; f++) {
			uint8_t *raw;
			size_t rn, nr;
			int ver;
			int64_t *rows;
			uint32_t nv;
			if (pd_block_raw(dz, blk[f].ptr, blk[f].len, prevraw, prevn, &raw, &rn, &ver, &err) ||
			    pd_block_rows(raw, rn, ver, &rows, &nr, &nv, &err)) {
				fprintf(stderr, "bench_blocks: block %d: %s\n", f, err.msg);
				return 1;
			}
			free(rows);
			free(prevraw);
			prevraw = raw, prevn = rn;
		}
		free(prevraw);
		double t1 = now();
		for (int f = 0; f < nf; f++) {
			static const struct row none[1];
			bool based = f % PD_CHAIN_WRITE != 0;
			size_t n = based ? model_dec(se.rows[f - 1], se.n[f - 1], mb[f], mn[f], se.mul, out)
					 : model_dec(none, 0, mb[f], mn[f], se.mul, out);
			if (r == 0 && (n != se.n[f] || memcmp(out, se.rows[f], n * sizeof *out))) {
				fprintf(stderr, "bench_blocks: block %d: the model's decoder read other rows\n", f);
				return 1;
			}
		}
		double t2 = now();
		if (t1 - t0 < best_s)
			best_s = t1 - t0;
		if (t2 - t1 < best_m)
			best_m = t2 - t1;
	}
	printf("blocks %d rows %zu (%.1f a block)\n", nf, nrows, (double)nrows / nf);
	printf("stored bytes_per_block %.1f decode_series_ms %.2f encode_series_ms %.2f\n", (double)sbytes / nf,
	       best_s * 1e3, enc_s * 1e3);
	printf("model bytes_per_block %.1f decode_series_ms %.2f (%.2fx the bytes, %.2fx the decode time)\n",
	       (double)mbytes / nf, best_m * 1e3, (double)mbytes / (double)sbytes, best_m / best_s);
	return 0;
}
