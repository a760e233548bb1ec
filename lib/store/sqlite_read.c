/*
 * sqlite_read.c — the SQLite backend's symbols as a symbol source of
 * mat.h (see sqlite.c): a partition's rows by seq.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- reading: header, block, materialisation ------------------------------------ */

/* Read back a symbol's stored content into buf: from the partition's
 * read cache (struct rcache: what was read before, and what
 * pd_store_warm read at start), else from SQLite, then kept. Measured on
 * 200 large profiles: an API merge 26.6 -> 22.6 ms warm, and 29.9 -> 25.1
 * ms first after a start (the symbols of a day of these are ~0.7 MB).
 *
 * From SQLite: a materialisation asks
 * for most of a partition's symbols, mostly in ascending seqs (a merge of
 * 200 profiles: 22,460 lookups, 63-90 % of them within 8 of the one
 * before): when seq is a little ahead of the kind's cursor, the cursor
 * steps there along the leaves (a seek from the root per symbol was a
 * quarter of an API merge); otherwise it seeks, and walks from there. */
#define SCAN_AHEAD 16

static int sym_from(sqlite3_stmt *g, int col, struct pd_buf *buf, struct pd_err *err)
{
	buf->len = 0;
	int rc = pd_buf_append(buf, sqlite3_column_blob(g, col), (size_t)sqlite3_column_bytes(g, col));
	return rc ? pd_errf(err, rc, "out of memory") : 0;
}

static size_t rcache_size(const struct rcache *c) { return c->bytes.cap + c->cap * sizeof *c->v; }

/* Empty every partition's read cache (over the budget: it fills again). */
void sq_rcache_clear_all(struct sq *s)
{
	for (size_t i = 0; i < s->nparts; i++)
		for (int k = 0; k < NKINDS; k++)
			sq_rcache_free(s, &s->parts[i]->rc[k]);
}

void sq_rcache_free(struct sq *s, struct rcache *c)
{
	if (s)
		s->rc_bytes -= rcache_size(c);
	free(c->v);
	pd_buf_free(&c->bytes);
	memset(c, 0, sizeof *c);
}

/* Keep seq's content (nothing if it does not fit or memory is short);
 * past rc_max every partition's cache is emptied first. */
static void rcache_put(struct part *p, int k, int64_t seq, const uint8_t *d, size_t n)
{
	struct rcache *c = &p->rc[k];
	struct sq *s = p->s;
	if (!s || seq < 1 || (size_t)seq > s->rc_max / (4 * sizeof *c->v) || n > s->rc_max / 64)
		return;
	if (s->rc_bytes + n + 64 > s->rc_max)
		sq_rcache_clear_all(s);
	size_t before = rcache_size(c);
	bool ok = true;
	if ((size_t)seq >= c->cap) {
		size_t nc = c->cap ? c->cap : 1024;
		while (nc <= (size_t)seq)
			nc *= 2;
		struct rsym *v = realloc(c->v, nc * sizeof *v);
		if ((ok = v != NULL)) {
			memset(v + c->cap, 0, (nc - c->cap) * sizeof *v);
			c->v = v;
			c->cap = nc;
		}
	}
	ok = ok && c->bytes.len + n < UINT32_MAX && !pd_buf_append(&c->bytes, d, n);
	if (ok)
		c->v[seq] = (struct rsym){(uint32_t)(c->bytes.len - n), (uint32_t)n + 1};
	s->rc_bytes += rcache_size(c) - before;
}

/* Decode stored pack of kind k from seq first into p->grp[k]. */
static int pack_take(struct part *p, int k, int64_t first, const void *b, size_t n, struct pd_err *err)
{
	pd_pack_free(&p->grp[k]);
	int rc = pd_pack_dec(p->s->dctx, k, first, b, n, &p->grp[k], err);
	if (rc == PD_EIO) {
		char what[sizeof err->msg];
		snprintf(what, sizeof what, "%s", err->msg);
		return sq_damaged(p, err, "%s: the pack from #%lld: %s", sq_ktable[k], (long long)first, what);
	}
	return rc;
}

int sq_pack_floor(struct part *p, int k, int64_t seq, struct pd_err *err)
{
	sqlite3_stmt *st = p->pack_get;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, k);
	sqlite3_bind_int64(st, 2, seq);
	int r = sqlite3_step(st), rc = 0;
	if (r == SQLITE_ROW)
		rc = pack_take(p, k, sqlite3_column_int64(st, 0), sqlite3_column_blob(st, 1),
			       (size_t)sqlite3_column_bytes(st, 1), err);
	else if (r != SQLITE_DONE)
		rc = sq_qerr(p, p->db, "packs", err);
	sqlite3_reset(st);
	return rc ? rc : r == SQLITE_ROW;
}

static bool pack_has(const struct pd_pack *pk, int64_t seq) { return pk->n && seq >= pk->first && seq - pk->first < pk->n; }

int sq_pack_load(struct part *p, int k, int64_t seq, struct pd_err *err)
{
	if (pack_has(&p->grp[k], seq))
		return 1;
	int rc = sq_pack_floor(p, k, seq, err);
	return rc <= 0 ? rc : pack_has(&p->grp[k], seq);
}

int sq_packs_each(struct part *p, int k, int (*fn)(void *ctx, const struct pd_pack *pk), void *ctx,
		  struct pd_err *err)
{
	sqlite3_stmt *st = p->pack_scan;
	int r, rc = 0;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, k);
	while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW)
		if (!(rc = pack_take(p, k, sqlite3_column_int64(st, 0), sqlite3_column_blob(st, 1),
				     (size_t)sqlite3_column_bytes(st, 1), err)))
			rc = fn(ctx, &p->grp[k]);
	if (!rc && r != SQLITE_DONE)
		rc = sq_qerr(p, p->db, "packs", err);
	sqlite3_reset(st);
	return rc;
}

/* Keep every symbol of a pack (the budget allowing: else 1, stop). */
static int warm_pack(void *ctx, const struct pd_pack *pk)
{
	struct part *p = ctx;
	int k = (int)(pk - p->grp);
	for (uint32_t i = 0; i < pk->n; i++) {
		size_t n = pk->n1[i] ? pk->n1[i] - 1 : 0;
		if (p->s->rc_bytes + n + 64 > p->s->rc_max)
			return 1;
		if (pk->n1[i])
			rcache_put(p, k, pk->first + i, pk->raw + pk->off[i], n);
	}
	return 0;
}

bool sq_rcache_warm(struct part *p)
{
	sq_part_read(p);
	for (int k = 0; k < NKINDS; k++) {
		struct pd_err e;
		if (p->packed[k] && sq_packs_each(p, k, warm_pack, p, &e) == 1)
			return false; /* else done, or damage (pack_take quarantined the day) */
		sqlite3_stmt *sc = p->scan[k];
		sqlite3_reset(sc);
		p->scan_at[k] = 0;
		sqlite3_bind_int64(sc, 1, 1);
		while (sqlite3_step(sc) == SQLITE_ROW) {
			size_t n = (size_t)sqlite3_column_bytes(sc, 1);
			if (p->s->rc_bytes + n + 64 > p->s->rc_max) {
				sqlite3_reset(sc);
				return false;
			}
			rcache_put(p, k, sqlite3_column_int64(sc, 0), sqlite3_column_blob(sc, 1), n);
		}
		sqlite3_reset(sc);
	}
	return true;
}

#define NOT_THERE 1 /* sym_packed, sym_row: no such symbol where they look */

/* Symbol seq from its pack: 0, NOT_THERE, or an error. */
static int sym_packed(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	int rc = sq_pack_load(p, k, seq, err);
	if (rc <= 0)
		return rc < 0 ? rc : NOT_THERE;
	const struct pd_pack *pk = &p->grp[k];
	size_t i = (size_t)(seq - pk->first);
	if (!pk->n1[i])
		return NOT_THERE;
	buf->len = 0;
	if (pd_buf_append(buf, pk->raw + pk->off[i], pk->n1[i] - 1))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

/* Symbol seq from its row: 0, NOT_THERE, or an error. */
static int sym_row(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	sqlite3_stmt *sc = p->scan[k];
	int64_t at = p->scan_at[k];
	if (!(at && seq >= at && seq - at <= SCAN_AHEAD)) {
		sqlite3_reset(sc);
		sqlite3_bind_int64(sc, 1, seq);
		at = p->scan_at[k] = 0;
		if (sqlite3_step(sc) == SQLITE_ROW)
			at = p->scan_at[k] = sqlite3_column_int64(sc, 0);
	}
	while (at && at < seq)
		at = p->scan_at[k] = sqlite3_step(sc) == SQLITE_ROW ? sqlite3_column_int64(sc, 0) : 0;
	if (at == seq)
		return sym_from(sc, 1, buf, err);
	if (!at)
		sqlite3_reset(sc);
	/* not there (or an error): the point lookup says which */
	sqlite3_stmt *g = p->get[k];
	sqlite3_reset(g);
	sqlite3_bind_int64(g, 1, seq);
	int r = sqlite3_step(g);
	if (r != SQLITE_ROW) {
		sqlite3_reset(g);
		if (r != SQLITE_DONE)
			return sq_qerr(p, p->db, "symbol", err);
		return NOT_THERE;
	}
	int rc = sym_from(g, 0, buf, err);
	sqlite3_reset(g);
	return rc;
}

/* From its pack or its row: where packed[k] says first, then the other
 * (for a read transaction older or newer than the commit that packed it). */
static int sym_read(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	bool packed = seq <= p->packed[k];
	int rc = packed ? sym_packed(p, k, seq, buf, err) : sym_row(p, k, seq, buf, err);
	if (rc == NOT_THERE && sq_packable(p, k))
		rc = packed ? sym_row(p, k, seq, buf, err) : sym_packed(p, k, seq, buf, err);
	if (rc == NOT_THERE)
		return sq_damaged(p, err, "%s #%lld missing", sq_ktable[k], (long long)seq);
	return rc;
}

int sq_sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	const struct rcache *c = &p->rc[k];
	if (seq > 0 && (size_t)seq < c->cap && c->v[seq].n1) {
		buf->len = 0;
		size_t n = c->v[seq].n1 - 1;
		int rc = n ? pd_buf_append(buf, c->bytes.ptr + c->v[seq].off, n) : 0;
		atomic_fetch_add_explicit(&p->s->sym_cached, 1, memory_order_relaxed);
		return rc ? pd_errf(err, rc, "out of memory") : 0;
	}
	atomic_fetch_add_explicit(&p->s->sym_reads, 1, memory_order_relaxed);
	int rc = sym_read(p, k, seq, buf, err);
	if (!rc)
		rcache_put(p, k, seq, buf->ptr, buf->len);
	return rc;
}

static int src_get(void *ctx, int kind, int64_t seq, struct pd_buf *out, struct pd_err *err)
{
	return sq_sym_get(ctx, kind, seq, out, err);
}

static int src_damaged(void *ctx, struct pd_err *err, const char *msg) { return sq_damaged(ctx, err, "%s", msg); }

struct pd_symsrc sq_symsrc(struct part *pt) { return (struct pd_symsrc){src_get, src_damaged, pt}; }
