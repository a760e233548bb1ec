/*
 * sqlite_read.c — the SQLite backend's symbols as a symbol source of
 * mat.h (see sqlite.c): a partition's rows by seq.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- reading: header, block, materialisation ------------------------------------ */

/* Read back a symbol's stored content into buf. A materialisation asks
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

static int sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
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
		if (r != SQLITE_DONE && !sq_corrupt(p->db))
			return sq_err(err, p->db, "symbol");
		return sq_damaged(p, err, "%s #%lld missing", sq_ktable[k], (long long)seq);
	}
	int rc = sym_from(g, 0, buf, err);
	sqlite3_reset(g);
	return rc;
}

static int src_get(void *ctx, int kind, int64_t seq, struct pd_buf *out, struct pd_err *err)
{
	return sym_get(ctx, kind, seq, out, err);
}

static int src_damaged(void *ctx, struct pd_err *err, const char *msg) { return sq_damaged(ctx, err, "%s", msg); }

struct pd_symsrc sq_symsrc(struct part *pt) { return (struct pd_symsrc){src_get, src_damaged, pt}; }
