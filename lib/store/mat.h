/*
 * mat.h — what every backend's reading shares (store core): symbols to
 * profiles (materialisation) and a merge of stored rows aggregated on
 * symbol seqs, read through a symbol source.
 *
 * A backend's symbol source hands out a symbol's content in the embedded
 * store's layout, with its children as seqs of the same source (int64,
 * from 1; 0 = none):
 *
 *   string     the bytes
 *   function   name, system name, file name (string seqs), zig-zag start line
 *   mapping    key size, offset, key file (string seq), start, limit, file,
 *              build id (string seqs), flags (bit 0..3: has functions,
 *              filenames, line numbers, inline frames)
 *   location   mapping seq (0: none), address - mapping start, folded,
 *              line count, then per line: function seq, zig-zag line, column
 *   stack      location seqs, leaf first
 *   label set  per label: key, str (string seqs), zig-zag num, unit (string seq)
 *
 * all varints. The SQLite backend's seqs are its rowids; the ClickHouse
 * backend numbers the hashes a request meets. Internal to lib/store.
 */
#ifndef PD_STORE_MAT_H
#define PD_STORE_MAT_H

#include "codec.h"
#include "prepare.h"
#include "../pprof/agg.h"

#include <stdlib.h>
#include <string.h>

struct pd_symsrc {
	/* symbol (kind: enum pd_sym_kind, seq)'s content into out (reset) */
	int (*get)(void *ctx, int kind, int64_t seq, struct pd_buf *out, struct pd_err *err);
	/* a symbol that does not decode: the error to return (NULL: PD_EIO with msg) */
	int (*damaged)(void *ctx, struct pd_err *err, const char *msg);
	void *ctx;
};

struct part; /* the embedded backend's partition */

/* int64 -> dense index. Symbol seqs are small dense integers (SQLite
 * rowids from 1), so they index a table directly; anything else (never
 * seen in practice) goes through a hash index. The table is made of pages,
 * each allocated when a key first falls in it: a request that uses a few
 * thousand symbols of a day that holds millions touches a few pages. One
 * array as long as the largest key was zeroed whole by every request: a
 * regressions report of 492 comparisons over such a day (bench/soak.py's
 * hour of deploys) spent 8 % of its time zeroing it, and with big blocks
 * mapped (profd serve) 886,000 page faults. */
#define REMAP_DIRECT_MAX (1 << 26)
#define REMAP_PAGE_BITS 12 /* 4,096 entries, 16 KiB a page */
struct remap {
	struct pd_hidx idx;
	int64_t *keys;
	size_t n, cap;
	uint32_t **pages; /* pages[k >> REMAP_PAGE_BITS][k & mask] = index + 1, 0 = absent */
	size_t npages;
};

struct rkey {
	const struct remap *r;
	int64_t k;
};

static inline bool remap_eq(void *ctx, uint32_t v)
{
	const struct rkey *k = ctx;
	return k->r->keys[v] == k->k;
}

static inline int remap_new(struct remap *r, int64_t k, uint32_t *idx)
{
	if (r->n >= UINT32_MAX - 1 || pd_grow((void **)&r->keys, &r->cap, r->n + 1, sizeof *r->keys))
		return PD_ENOMEM;
	r->keys[r->n] = k;
	*idx = (uint32_t)r->n++;
	return 0;
}

/* Page p of r's table, made (zeroed) if it was not; NULL: out of memory. */
static __attribute__((noinline, unused)) uint32_t *remap_page(struct remap *r, size_t p)
{
	if (p >= r->npages) {
		size_t nc = r->npages ? r->npages : 16;
		while (nc <= p)
			nc *= 2;
		uint32_t **pg = realloc(r->pages, nc * sizeof *pg);
		if (!pg)
			return NULL;
		memset(pg + r->npages, 0, (nc - r->npages) * sizeof *pg);
		r->pages = pg;
		r->npages = nc;
	}
	if (!r->pages[p])
		r->pages[p] = calloc((size_t)1 << REMAP_PAGE_BITS, sizeof **r->pages);
	return r->pages[p];
}

/* Index of key k; *added = true if it is new (then index == n - 1). */
static inline int remap_get(struct remap *r, int64_t k, uint32_t *idx, bool *added)
{
	if (PD_LIKELY(k >= 0 && k < REMAP_DIRECT_MAX)) {
		size_t p = (size_t)k >> REMAP_PAGE_BITS;
		uint32_t *pg = PD_LIKELY(p < r->npages) ? r->pages[p] : NULL;
		if (PD_UNLIKELY(!pg) && !(pg = remap_page(r, p)))
			return PD_ENOMEM;
		uint32_t *slot = &pg[(size_t)k & (((size_t)1 << REMAP_PAGE_BITS) - 1)];
		uint32_t v = *slot;
		*added = v == 0;
		if (v) {
			*idx = v - 1;
			return 0;
		}
		if (remap_new(r, k, idx))
			return PD_ENOMEM;
		*slot = *idx + 1;
		return 0;
	}
	struct rkey rk = {r, k};
	uint64_t h = pd_hash_u64((uint64_t)k);
	uint32_t v = pd_hidx_find(&r->idx, h, remap_eq, &rk);
	*added = v == UINT32_MAX;
	if (*added) {
		if (remap_new(r, k, &v) || pd_hidx_insert(&r->idx, h, v))
			return PD_ENOMEM;
	}
	*idx = v;
	return 0;
}

static inline void remap_free(struct remap *r)
{
	pd_hidx_free(&r->idx);
	free(r->keys);
	for (size_t i = 0; i < r->npages; i++)
		free(r->pages[i]);
	free(r->pages);
}

/* Builds a pd_profile out of a backend's symbols (src), only those used. The
 * arrays grow while symbols are discovered and move into the profile's
 * arena at the end. */
struct pd_mat {
	struct pd_symsrc src;
	struct pd_err *err;
	struct pd_profile *p;
	struct remap rs, rf, rm, rl, rstk, rls;
	struct pd_str *strs;
	struct pd_function *fns;
	struct pd_mapping *maps;
	struct pd_location *locs;
	struct {
		uint32_t *locs, n;
	} * stacks;
	struct {
		struct pd_label *l;
		uint32_t n;
	} * lsets;
	size_t cs, cf, cm, cl, cstk, cls;
	struct pd_buf b;
	/* the mappings as the profile (or the merge's first profile with
	 * them) had them, over the partition's symbol (codec.h, pd_smap) */
	const int64_t *iseq;
	const struct pd_smap *inst;
	uint32_t ninst;
};

/* One partition's (day's) share of a merge: rows aggregated on (stack, label set)
 * seqs, headers combined as pprof's Merge does. */
struct pd_pmerge {
	struct part *pt;      /* the embedded backend's partition (NULL in others) */
	struct pd_symsrc src; /* where pd_pm_profile reads symbols */
	struct remap stk, ls;
	struct pd_agg agg;
	bool have;
	struct pd_shdr h; /* combined */
	int64_t *stypes0; /* the first profile's sample type seqs, to check the others against */
	/* default_sample_type and doc_url are pprof's first non-empty of the
	 * profiles; a seq does not say whether it is "", but "" has one seq in
	 * a partition, so of two distinct seqs one is not "": h has the
	 * first profile's, alt[] the first other one seen (pd_pm_settle) */
	int64_t alt[2];
	bool have_alt[2];
	/* the seqs of h's mappings and comments, so that each later profile
	 * adds only new ones in one probe each (a merge of profiles with
	 * thousands of them is not quadratic) */
	struct remap mseen, cseen;
	/* per dense stack index: the aggregate row (+1) of its first label set,
	 * so the common case (a stack recurs with the same labels) skips the
	 * aggregation hash (measured: ~20% of a merge) */
	uint32_t *row1, *ls1;
	size_t cap1;
};

int pd_mat_start(struct pd_mat *m, const struct pd_symsrc *src, const struct pd_shdr *h, size_t nrows,
                 struct pd_err *err) PD_WUR;
int pd_mat_sample(struct pd_mat *m, int64_t stack, int64_t lset, const int64_t *vals, uint32_t nv) PD_WUR;
int pd_mat_finish(struct pd_mat *m, struct pd_profile **out) PD_WUR;
void pd_mat_free(struct pd_mat *m);

void pd_pmerge_free(struct pd_pmerge *pm);
/* Add one stored profile's rows (stack seq, label-set seq, nv values) to
 * pm (or, keep_zero, a rollup's: their rows are sums of non-zero rows, kept
 * even when they sum to zero); h is consumed. PD_EINCOMPAT for other sample
 * types than the first profile's. */
int pd_pm_add(struct pd_pmerge *pm, const char *id, struct pd_shdr *h, const int64_t *rows, size_t nrows, uint32_t nv,
              bool keep_zero, struct pd_err *err) PD_WUR;
/* Settle pm->h's default_sample_type and doc_url (reads at most two
 * strings through pm->src): before pm->h is used; pd_pm_profile does it. */
int pd_pm_settle(struct pd_pmerge *pm, struct pd_err *err) PD_WUR;
/* Make the partial profile of one partition's aggregate (*p) the answer of
 * a merge: rows that summed to zero go, with what only they used, as
 * pprof's Merge drops them (the merge of several partitions' partials does
 * that in pd_merger_finish). *p is replaced (or kept when nothing is zero). */
int pd_pm_final(struct pd_profile **p, struct pd_err *err) PD_WUR;
/* Materialise pm's aggregate (through pm->src) as a partial profile. */
int pd_pm_profile(struct pd_pmerge *pm, struct pd_profile **out, struct pd_err *err) PD_WUR;

#endif
