/*
 * sqlite_ingest.c — the SQLite backend's ingest (steps 3 and 4 at the top
 * of sqlite.c) of a profile the store core prepared (prepare.h): resolve
 * its content hashes to the partition's seqs through the caches (new
 * symbols become pending), encode the header and the sample block, and
 * hand the job to the group commit.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <stdio.h>

/* ---- caches: lookups and inserts ------------------------------------------- */

static inline int64_t cache_find(const struct cache *c, struct pd_h128 h)
{
	for (size_t i = (size_t)h.lo & c->mask;; i = (i + 1) & c->mask) {
		const struct cslot *s = &c->s[i];
		if (!s->seq)
			return 0;
		if (s->lo == h.lo && s->hi == h.hi)
			return s->seq;
	}
}

static inline void cache_prefetch(const struct cache *c, struct pd_h128 h)
{
	__builtin_prefetch(&c->s[(size_t)h.lo & c->mask]);
}

static void cslot_put(struct cslot *s, size_t mask, struct cslot v)
{
	size_t i = (size_t)v.lo & mask;
	while (s[i].seq)
		i = (i + 1) & mask;
	s[i] = v;
}

/* Room for one more entry (load <= 3/4), so that cache_put cannot fail. */
static int cache_reserve(struct cache *c)
{
	if ((c->n + 1) * 4 <= (c->mask + 1) * 3)
		return 0;
	size_t cap = (c->mask + 1) * 2;
	struct cslot *ns = calloc(cap, sizeof *ns);
	if (!ns)
		return PD_ENOMEM;
	for (size_t i = 0; i <= c->mask; i++)
		if (c->s[i].seq)
			cslot_put(ns, cap - 1, c->s[i]);
	free(c->s);
	c->s = ns;
	c->mask = cap - 1;
	return 0;
}

static void cache_put(struct cache *c, struct pd_h128 h, int64_t seq)
{
	cslot_put(c->s, c->mask, (struct cslot){h.lo, h.hi, seq});
	c->n++;
}

static bool uset_has(const struct uset *u, uint64_t v)
{
	if (!v)
		return u->zero;
	for (size_t i = (size_t)v & u->mask;; i = (i + 1) & u->mask) {
		if (u->v[i] == v)
			return true;
		if (!u->v[i])
			return false;
	}
}

static void uset_put1(uint64_t *t, size_t mask, uint64_t v)
{
	size_t i = (size_t)v & mask;
	while (t[i])
		i = (i + 1) & mask;
	t[i] = v;
}

static int uset_reserve(struct uset *u)
{
	if ((u->n + 1) * 4 <= (u->mask + 1) * 3)
		return 0;
	size_t cap = (u->mask + 1) * 2;
	uint64_t *nv = calloc(cap, sizeof *nv);
	if (!nv)
		return PD_ENOMEM;
	for (size_t i = 0; i <= u->mask; i++)
		if (u->v[i])
			uset_put1(nv, cap - 1, u->v[i]);
	free(u->v);
	u->v = nv;
	u->mask = cap - 1;
	return 0;
}

static void uset_put(struct uset *u, uint64_t v)
{
	if (!v) {
		u->zero = true;
		return;
	}
	uset_put1(u->v, u->mask, v);
	u->n++;
}

/* ---- ingest: resolve, encode ------------------------------------------------------ */

/* One ingest of a prepared profile (prepare.h: decoded, checked, content
 * hashes) into partition pt. */
struct ing {
	struct part *pt;
	const struct pd_profile *p;
	struct pd_err *err;
	/* content hashes (the prepared profile's): per string, function,
	 * mapping, location; per sample its stack (kh) and label set (bh) */
	const struct pd_h128 *sh, *fh, *mh, *lh, *kh, *bh;
	/* seqs, 0 = not resolved yet; per sample: stack, label set (0 = none) */
	int64_t *ss, *fs, *ms, *ls, *stk, *lset;
	struct pd_buf tmp; /* content being encoded */
	struct pd_buf cmp; /* a stored symbol's content, compared with tmp's */
};

static int nomem(struct ing *g) { return pd_errf(g->err, PD_ENOMEM, "out of memory"); }

/* g->tmp emptied with room for n bytes (never NULL unless out of memory) */
static inline uint8_t *tmp_room(struct ing *g, size_t n)
{
	g->tmp.len = 0;
	if (PD_LIKELY(n < g->tmp.cap))
		return g->tmp.ptr;
	return pd_buf_reserve(&g->tmp, n + 1) ? NULL : g->tmp.ptr;
}

/* Put (probe, seq) in map t of cap slots (a power of 2, more than the
 * seqs below next): false if seq is outside them or the map is full (a
 * seq both in a row and in a pack: damage). */
static bool pmap_put(struct pslot *t, size_t cap, int64_t next, uint64_t probe, int64_t seq)
{
	if (seq <= 0 || seq >= next)
		return false;
	size_t i = (size_t)probe & (cap - 1), m = 0;
	while (t[i].seq && m++ < cap)
		i = (i + 1) & (cap - 1);
	if (t[i].seq)
		return false;
	t[i] = (struct pslot){probe, seq};
	return true;
}

struct pmap_fill {
	struct pslot *t;
	size_t cap;
	int64_t next;
	int k;
};

static int pmap_pack(void *ctx, const struct pd_pack *pk)
{
	struct pmap_fill *f = ctx;
	for (uint32_t i = 0; i < pk->n; i++)
		if (pk->n1[i] &&
		    !pmap_put(f->t, f->cap, f->next, sq_ckey(f->k, pk->raw + pk->off[i], pk->n1[i] - 1), pk->first + i))
			return 1;
	return 0;
}

/* The map of a table without an index on h: every symbol's (h, seq), or
 * (sq_ckey of its content, seq) for a kind that is packed (sq_packable),
 * its packs included. Under the store mutex. */
int sq_pmap_read(struct part *p, int k, struct pd_err *err)
{
	bool ck = sq_packable(p, k);
	char sql[64];
	snprintf(sql, sizeof sql, ck ? "SELECT c, seq FROM %s" : "SELECT h, seq FROM %s", sq_ktable[k]);
	size_t cap = 1024;
	while (cap * 3 < (size_t)p->next[k] * 4)
		cap *= 2;
	struct pslot *t = calloc(cap, sizeof *t);
	sqlite3_stmt *st = NULL;
	if (!t)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	sq_part_read(p);
	if (sqlite3_prepare_v2(p->db, sql, -1, &st, NULL) != SQLITE_OK) {
		free(t);
		return sq_err(err, p->db, "symbol table");
	}
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t probe = ck ? sq_ckey(k, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0))
				    : (uint64_t)sqlite3_column_int64(st, 0);
		if (!pmap_put(t, cap, p->next[k], probe, sqlite3_column_int64(st, 1)))
			break;
	}
	sqlite3_finalize(st);
	if (r != SQLITE_DONE) {
		free(t);
		if (r == SQLITE_ROW)
			return sq_damaged(p, err, "%s: a row outside its seqs", sq_ktable[k]);
		return sq_corrupt(p->db) ? sq_damaged(p, err, "%s: %s", sq_ktable[k], sqlite3_errmsg(p->db))
					 : sq_err(err, p->db, "symbol table");
	}
	/* then the packs of the same snapshot: together they hold every
	 * symbol committed, whatever p->packed[k] says meanwhile */
	struct pmap_fill f = {t, cap, p->next[k], k};
	int rc = ck ? sq_packs_each(p, k, pmap_pack, &f, err) : 0;
	if (rc) {
		free(t);
		return rc < 0 ? rc : sq_damaged(p, err, "%s: a packed symbol outside its seqs", sq_ktable[k]);
	}
	p->pm[k] = (struct pmap){t, cap - 1};
	return 0;
}

/* The stored symbol of kind k whose h is probe, if any (*os, else 0), and
 * whether it is the one with content c[0..n) (key: sym_new). Through h's
 * index where the table has one, else through the partition's map: by h,
 * or by the content's key for a kind that is packed (which finds the
 * symbol with this content or none: *same then). Under the store mutex. */
static int stored(struct ing *g, int k, uint64_t probe, const uint8_t *c, size_t n, size_t key, int64_t *os,
		  bool *same)
{
	struct part *p = g->pt;
	int64_t seq = 0; /* the map's */
	int rc;
	*os = 0;
	*same = false;
	sq_part_read(p);
	if (!p->hidx[k]) {
		if (!p->pm[k].s && (rc = sq_pmap_read(p, k, g->err)))
			return rc;
		const struct pmap *m = &p->pm[k];
		if (sq_packable(p, k)) {
			uint64_t ck = sq_ckey(k, c, n);
			for (size_t i = (size_t)ck & m->mask; m->s[i].seq; i = (i + 1) & m->mask) {
				if (m->s[i].probe != ck)
					continue;
				if ((rc = sq_sym_get(p, k, m->s[i].seq, &g->cmp, g->err)))
					return rc;
				if (g->cmp.len == n && (n == 0 || memcmp(g->cmp.ptr, c, n) == 0)) {
					*os = m->s[i].seq;
					*same = true;
					return 0;
				}
			}
			return 0;
		}
		for (size_t i = (size_t)probe & m->mask; m->s[i].seq && !seq; i = (i + 1) & m->mask)
			if (m->s[i].probe == probe)
				seq = m->s[i].seq;
		if (!seq)
			return 0;
	}
	/* by the map's seq (get: c), else by h (find: seq, c) */
	sqlite3_stmt *f = seq ? p->get[k] : p->find[k];
	sqlite3_reset(f);
	sqlite3_bind_int64(f, 1, seq ? seq : (int64_t)probe);
	int r = sqlite3_step(f), col = seq ? 0 : 1;
	if (r == SQLITE_ROW) {
		const void *oc = sqlite3_column_blob(f, col);
		size_t on = (size_t)sqlite3_column_bytes(f, col);
		*same = on >= key && key <= n && (key == 0 || memcmp(oc, c, key) == 0) && (key != n || on == n);
		*os = seq ? seq : sqlite3_column_int64(f, 0);
	}
	sqlite3_reset(f);
	if (r == SQLITE_ROW || (r == SQLITE_DONE && !seq))
		return 0;
	if (r == SQLITE_DONE) /* the map names a row that is not there */
		return sq_damaged(p, g->err, "%s: row %lld is missing", sq_ktable[k], (long long)seq);
	return sq_err(g->err, p->db, "symbol lookup");
}

/*
 * A symbol of kind k with hash h that the cache does not know, with stored
 * content c[0..n) (the first `key` bytes decide identity; mappings keep
 * first-seen fields after their key): its seq, from the table if it is
 * there, else a new pending one. Under the store mutex.
 */
static int sym_new(struct ing *g, int k, struct pd_h128 h, const uint8_t *c, size_t n, size_t key, int64_t *seq)
{
	struct part *p = g->pt;
	struct pendq *q = &p->pend;
	/* room first: past here nothing fails half-way */
	if (n > UINT32_MAX)
		return pd_errf(g->err, PD_ELIMIT, "store: a %s symbol of %zu bytes", sq_ktable[k], n);
	if (cache_reserve(&p->cache[k]) || uset_reserve(&p->used[k]) ||
	    pd_grow((void **)&q->v, &q->cap, q->n + 1, sizeof *q->v) || pd_buf_reserve(&q->bytes, n))
		return nomem(g);
	uint64_t probe = h.lo;
	for (int tries = 0; tries < 64; tries++, probe = pd_hash_u64(probe + 1)) {
		if (!p->fresh[k]) {
			int64_t os;
			bool same;
			int rc = stored(g, k, probe, c, n, key, &os, &same);
			if (rc)
				return rc;
			if (os && same) {
				*seq = os;
				cache_put(&p->cache[k], h, os);
				return 0;
			}
			if (os)
				continue; /* a collision: probe the next hash */
		}
		/* not in the table; a symbol created here but not committed yet
		 * would have been in the cache (a different hash took this h) */
		if (uset_has(&p->used[k], probe))
			continue;
		*seq = p->next[k]++;
		q->v[q->n++] = (struct pend){*seq, probe, q->bytes.len, (uint32_t)n, (uint8_t)k};
		if (n)
			memcpy(q->bytes.ptr + q->bytes.len, c, n);
		q->bytes.len += n;
		uset_put(&p->used[k], probe);
		cache_put(&p->cache[k], h, *seq);
		return 0;
	}
	return pd_errf(g->err, PD_EIO, "store: 64 hash collisions in a row in %s (corrupt partition?)", sq_ktable[k]);
}

/* Step 3, top down: a symbol found in the cache ends the descent. */
static int res_str(struct ing *g, uint32_t i)
{
	if (g->ss[i])
		return 0;
	if ((g->ss[i] = cache_find(&g->pt->cache[K_STR], g->sh[i])))
		return 0;
	struct pd_str s = g->p->strings[i];
	return sym_new(g, K_STR, g->sh[i], (const uint8_t *)s.ptr, s.len, s.len, &g->ss[i]);
}

static int res_fn(struct ing *g, uint32_t i)
{
	if (g->fs[i])
		return 0;
	if ((g->fs[i] = cache_find(&g->pt->cache[K_FN], g->fh[i])))
		return 0;
	const struct pd_function *f = &g->p->functions[i];
	int rc;
	if ((rc = res_str(g, f->name)) || (rc = res_str(g, f->system_name)) || (rc = res_str(g, f->filename)))
		return rc;
	uint8_t *b = tmp_room(g, 40), *e = b;
	if (!b)
		return nomem(g);
	PD_PV(e, g->ss[f->name]);
	PD_PV(e, g->ss[f->system_name]);
	PD_PV(e, g->ss[f->filename]);
	PD_PV(e, pd_zz(f->start_line));
	return sym_new(g, K_FN, g->fh[i], b, (size_t)(e - b), (size_t)(e - b), &g->fs[i]);
}

static int res_map(struct ing *g, uint32_t i)
{
	if (g->ms[i])
		return 0;
	if ((g->ms[i] = cache_find(&g->pt->cache[K_MAP], g->mh[i])))
		return 0;
	const struct pd_mapping *m = &g->p->mappings[i];
	int rc;
	if ((rc = res_str(g, m->filename)) || (rc = res_str(g, m->build_id)))
		return rc;
	/* identity = pprof's merge key, as in its content hash (prepare.h) */
	uint64_t size = pd_mapping_key_size(m);
	uint32_t file = pd_mapping_key_file(m);
	uint64_t flags = pd_smap_flags(m);
	uint8_t *b = tmp_room(g, 80), *e = b;
	if (!b)
		return nomem(g);
	PD_PV(e, size);
	PD_PV(e, m->offset);
	PD_PV(e, g->ss[file]);
	size_t key = (size_t)(e - b);
	PD_PV(e, m->start);
	PD_PV(e, m->limit);
	PD_PV(e, g->ss[m->filename]);
	PD_PV(e, g->ss[m->build_id]);
	PD_PV(e, flags);
	return sym_new(g, K_MAP, g->mh[i], b, (size_t)(e - b), key, &g->ms[i]);
}

static int res_loc(struct ing *g, uint32_t i)
{
	if (g->ls[i])
		return 0;
	if ((g->ls[i] = cache_find(&g->pt->cache[K_LOC], g->lh[i])))
		return 0;
	const struct pd_location *l = &g->p->locations[i];
	int rc;
	uint64_t rel = l->address;
	if (l->mapping != PD_NONE) {
		if ((rc = res_map(g, l->mapping)))
			return rc;
		rel = l->address - g->p->mappings[l->mapping].start;
	}
	/* children first: they use g->tmp too */
	for (uint32_t j = 0; j < l->nlines; j++)
		if ((rc = res_fn(g, l->lines[j].function)))
			return rc;
	uint8_t *b = tmp_room(g, 40 + 30 * (size_t)l->nlines), *e = b;
	if (!b)
		return nomem(g);
	PD_PV(e, l->mapping == PD_NONE ? 0 : g->ms[l->mapping]);
	PD_PV(e, rel);
	PD_PV(e, l->is_folded);
	PD_PV(e, l->nlines);
	for (uint32_t j = 0; j < l->nlines; j++) {
		const struct pd_line *ln = &l->lines[j];
		PD_PV(e, g->fs[ln->function]);
		PD_PV(e, pd_zz(ln->line));
		PD_PV(e, pd_zz(ln->column));
	}
	return sym_new(g, K_LOC, g->lh[i], b, (size_t)(e - b), (size_t)(e - b), &g->ls[i]);
}

static int res_stack(struct ing *g, size_t i)
{
	const struct pd_sample *s = &g->p->samples[i];
	int rc;
	for (uint32_t j = 0; j < s->nlocs; j++) /* children first: they use g->tmp too */
		if ((rc = res_loc(g, s->locs[j])))
			return rc;
	uint8_t *b = tmp_room(g, 10 * (size_t)s->nlocs), *e = b;
	if (!b)
		return nomem(g);
	for (uint32_t j = 0; j < s->nlocs; j++)
		PD_PV(e, g->ls[s->locs[j]]);
	return sym_new(g, K_STACK, g->kh[i], b, (size_t)(e - b), (size_t)(e - b), &g->stk[i]);
}

static int res_lset(struct ing *g, size_t i)
{
	const struct pd_sample *s = &g->p->samples[i];
	int rc;
	for (uint32_t j = 0; j < s->nlabels; j++)
		if ((rc = res_str(g, s->labels[j].key)) || (rc = res_str(g, s->labels[j].str)) ||
		    (rc = res_str(g, s->labels[j].num_unit)))
			return rc;
	uint8_t *b = tmp_room(g, 40 * (size_t)s->nlabels), *e = b;
	if (!b)
		return nomem(g);
	for (uint32_t j = 0; j < s->nlabels; j++) {
		const struct pd_label *l = &s->labels[j];
		PD_PV(e, g->ss[l->key]);
		PD_PV(e, g->ss[l->str]);
		PD_PV(e, pd_zz(l->num));
		PD_PV(e, g->ss[l->num_unit]);
	}
	return sym_new(g, K_LSET, g->bh[i], b, (size_t)(e - b), (size_t)(e - b), &g->lset[i]);
}

static int ing_resolve(struct ing *g)
{
	const struct pd_profile *p = g->p;
	const struct cache *cs = &g->pt->cache[K_STACK], *cl = &g->pt->cache[K_LSET];
	enum { AHEAD = 8 }; /* prefetch the cache slots of the stacks AHEAD samples on */
	int rc;
	for (size_t i = 0; i < AHEAD && i < p->nsamples; i++)
		cache_prefetch(cs, g->kh[i]);
	for (size_t i = 0; i < p->nsamples; i++) {
		if (i + AHEAD < p->nsamples)
			cache_prefetch(cs, g->kh[i + AHEAD]);
		if (!(g->stk[i] = cache_find(cs, g->kh[i])) && (rc = res_stack(g, i)))
			return rc;
		if (p->samples[i].nlabels && !(g->lset[i] = cache_find(cl, g->bh[i])) && (rc = res_lset(g, i)))
			return rc;
	}
	/* the header's strings and mappings */
	uint32_t strs[] = {p->period_type.type, p->period_type.unit, p->drop_frames, p->keep_frames,
			   p->default_sample_type, p->doc_url};
	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
		if ((rc = res_str(g, strs[i])))
			return rc;
	for (uint32_t i = 0; i < p->nsample_types; i++)
		if ((rc = res_str(g, p->sample_types[i].type)) || (rc = res_str(g, p->sample_types[i].unit)))
			return rc;
	for (uint32_t i = 0; i < p->ncomments; i++)
		if ((rc = res_str(g, p->comments[i])))
			return rc;
	for (uint32_t i = 0; i < p->nmappings; i++)
		if ((rc = res_map(g, i)) || (rc = res_str(g, p->mappings[i].filename)) ||
		    (rc = res_str(g, p->mappings[i].build_id)))
			return rc;
	return 0;
}

/* Step 4: header blob, everything of the profile that is not a sample. */
static int enc_header(struct ing *g, struct pd_buf *h)
{
	const struct pd_profile *p = g->p;
	size_t n = 14 + 2 * (size_t)p->nsample_types + p->ncomments + 6 * (size_t)p->nmappings;
	if (pd_buf_reserve(h, 10 * n))
		return nomem(g);
	uint8_t *e = h->ptr + h->len;
	PD_PV(e, p->nsample_types);
	for (uint32_t i = 0; i < p->nsample_types; i++) {
		PD_PV(e, g->ss[p->sample_types[i].type]);
		PD_PV(e, g->ss[p->sample_types[i].unit]);
	}
	uint32_t strs[] = {p->period_type.type, p->period_type.unit, p->drop_frames, p->keep_frames,
			   p->default_sample_type, p->doc_url};
	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
		PD_PV(e, g->ss[strs[i]]);
	PD_PV(e, pd_zz(p->period));
	PD_PV(e, pd_zz(p->time_nanos));
	PD_PV(e, pd_zz(p->duration_nanos));
	PD_PV(e, p->ncomments);
	for (uint32_t i = 0; i < p->ncomments; i++)
		PD_PV(e, g->ss[p->comments[i]]);
	/* the profile's mappings in order (mapping 0 is the main binary) */
	PD_PV(e, p->nmappings);
	for (uint32_t i = 0; i < p->nmappings; i++)
		PD_PV(e, g->ms[i]);
	/* and the profile's own copies of them (codec.h, pd_smap): the symbol
	 * is the partition's first mapping of the key */
	if (p->nmappings) {
		PD_PV(e, 1);
		for (uint32_t i = 0; i < p->nmappings; i++) {
			const struct pd_mapping *m = &p->mappings[i];
			PD_PV(e, m->start);
			PD_PV(e, m->limit);
			PD_PV(e, g->ss[m->filename]);
			PD_PV(e, g->ss[m->build_id]);
			PD_PV(e, pd_smap_flags(m));
		}
	}
	h->len = (size_t)(e - h->ptr);
	return 0;
}

/* The series of an upload (codec.h, chains): service, type and its
 * labels in any order. */
static uint64_t series_key(const char *service, const char *type, const struct pd_kv *kv, size_t n)
{
	char b[128 + 16 + 2];
	size_t a = strnlen(service, 128), t = strnlen(type, 16);
	memcpy(b, service, a);
	b[a] = 0;
	memcpy(b + a + 1, type, t);
	b[a + 1 + t] = 0;
	uint64_t k = pd_block_raw_hash(b, a + t + 2);
	for (size_t i = 0; i < n; i++) { /* NULLs are refused later, by the commit */
		const char *lk = kv[i].key ? kv[i].key : "", *lv = kv[i].value ? kv[i].value : "";
		k += (pd_block_raw_hash(lk, strlen(lk)) * 0x9E3779B97F4A7C15ULL) ^ pd_block_raw_hash(lv, strlen(lv));
	}
	return k;
}

/* The base for the next block of series j->series in day pt->day, copied
 * (the table may change meanwhile): false if there is none. Under the
 * store mutex. */
static bool series_base(struct sq *s, struct part *pt, struct job *j, struct pd_blkbase *b, struct pd_buf *raw)
{
	struct sq_series *e = s->series ? &s->series[j->series % SQ_SERIES_N] : NULL;
	if (!e || !e->pk || e->key != j->series || e->inst != pt->inst || e->day != pt->day ||
	    e->depth + 1 >= PD_CHAIN_WRITE)
		return false;
	if (pd_buf_reserve(raw, e->raw.len + 1))
		return false;
	memcpy(raw->ptr, e->raw.ptr, e->raw.len);
	raw->len = e->raw.len;
	*b = (struct pd_blkbase){e->pk, e->hash, raw->ptr, raw->len};
	j->depth = e->depth + 1;
	return true;
}

/* Step 4: the sample block (codec.h: version 3, carrying the header hdr,
 * against the series' last block committed in this day when there is
 * one). */
static int enc_block(struct sq *s, struct ing *g, struct job *j, const struct pd_blkbase *base,
		     const struct pd_buf *hdr, struct pd_buf *out)
{
	ZSTD_CCtx *z = sq_cctx_get(s);
	if (!z)
		return nomem(g);
	struct pd_blkopt o = {base, &j->raw, hdr};
	int rc = pd_enc_block(z, g->p, g->stk, g->lset, &o, out, g->err);
	sq_cctx_put(s, z);
	return rc;
}

/* Ingest, in the four steps of the top of the file: the first two (decode
 * and check, hash) are the store core's (pd_prepare), the other two ours. */
int sq_ingest(struct pd_store *base, const struct pd_ingest *in, const uint8_t *data, size_t len,
		     struct pd_profile_meta *out, enum pd_refusal *why, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	enum pd_refusal unused;
	if (!why)
		why = &unused;
	memset(out, 0, sizeof *out);
	/* 1, 2. decode and check, hash */
	struct pd_prepared pp;
	int rc = pd_prepare(in, data, len, &s->lim, &pp, why, err);
	if (rc)
		return rc;
	const struct pd_profile *p = pp.p;
	int64_t created = pp.created_ns;
	struct ing g = {.p = p, .err = err, .sh = pp.sh, .fh = pp.fh, .mh = pp.mh, .lh = pp.lh, .kh = pp.kh,
			.bh = pp.bh};
	struct pd_blkbase bb;
	struct pd_buf braw = PD_BUF_INIT(0); /* the base's raw bytes */
	bool based = false;
	struct job j = {.in = in, .err = err, .created = created, .nsamples = (int64_t)p->nsamples,
			.hdr = PD_BUF_INIT(0), .blk = PD_BUF_INIT(MAX_BLOCK)};
	size_t nh = (size_t)p->nstrings + p->nfunctions + p->nmappings + p->nlocations + 2 * p->nsamples;
	int64_t *seqs = calloc(nh + 1, sizeof *seqs);
	if (!seqs) {
		rc = nomem(&g);
		goto out;
	}
	g.ss = seqs, g.fs = g.ss + p->nstrings, g.ms = g.fs + p->nfunctions, g.ls = g.ms + p->nmappings;
	g.stk = g.ls + p->nlocations, g.lset = g.stk + p->nsamples;
	/* 3. resolve */
	j.series = series_key(in->service, pp.type, in->labels, in->nlabels);
	sq_store_lock(s);
	struct part *pt;
	if (!(rc = sq_part_get(s, floor_div(created, DAY_NS), true, &pt, err))) {
		g.pt = pt;
		if (!(rc = ing_resolve(&g))) {
			atomic_fetch_add(&pt->refs, 1);
			j.pt = pt;
			j.gen = pt->gen;
			based = series_base(s, pt, &j, &bb, &braw);
		}
	}
	sq_store_unlock(s);
	if (rc)
		goto out;
	/* 4. encode (the block checksummed, seeded by the profile's id; the
	 * header in it: j.hdr, the header column, stays empty), commit */
	j.xtail = pd_xid_new(created, j.id);
	struct pd_buf hdr = PD_BUF_INIT(0);
	if (pd_blob_begin(&j.blk))
		rc = nomem(&g);
	if (rc || (rc = enc_header(&g, &hdr)) || (rc = enc_block(s, &g, &j, based ? &bb : NULL, &hdr, &j.blk))) {
		pd_buf_free(&hdr);
		atomic_fetch_sub(&pt->refs, 1);
		goto out;
	}
	pd_buf_free(&hdr);
	pd_buf_free(&braw);
	pd_blob_seal(&j.blk, 0, pd_blob_seed(j.id, PD_STORE_ID_LEN, PD_BLOB_BLOCK));
	free(seqs), pd_buf_free(&g.tmp), pd_buf_free(&g.cmp);
	seqs = NULL;
	pd_prepared_drop_profile(&pp); /* not needed while waiting for the commit */
	snprintf(j.typ, sizeof j.typ, "%s", pp.type);
	sq_submit(s, &j);
	if ((rc = j.rc))
		goto out;
	pd_prepared_meta(&pp, j.id, j.hdr.len + j.blk.len, out);
out:
	/* the store's own limits and resources */
	if (rc == PD_ELIMIT)
		*why = PD_REFUSE_TOO_LARGE;
	else if (rc == PD_EBUSY)
		*why = PD_REFUSE_BUSY;
	free(seqs);
	pd_buf_free(&g.tmp);
	pd_buf_free(&g.cmp);
	pd_buf_free(&j.hdr);
	pd_buf_free(&j.blk);
	pd_buf_free(&j.raw);
	pd_buf_free(&braw);
	pd_prepared_free(&pp);
	return rc;
}

