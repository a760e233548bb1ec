/*
 * sqlite_read.c — the SQLite backend's symbols as a symbol source of
 * mat.h (see sqlite.c): a partition's rows by seq.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- reading: header, block, materialisation ------------------------------------ */

/* Read back a symbol's stored content into buf. */
static int sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
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
	buf->len = 0;
	int rc = pd_buf_append(buf, sqlite3_column_blob(g, 0), (size_t)sqlite3_column_bytes(g, 0));
	sqlite3_reset(g);
	return rc ? pd_errf(err, rc, "out of memory") : 0;
}

static int src_get(void *ctx, int kind, int64_t seq, struct pd_buf *out, struct pd_err *err)
{
	return sym_get(ctx, kind, seq, out, err);
}

static int src_damaged(void *ctx, struct pd_err *err, const char *msg) { return sq_damaged(ctx, err, "%s", msg); }

struct pd_symsrc sq_symsrc(struct part *pt) { return (struct pd_symsrc){src_get, src_damaged, pt}; }
