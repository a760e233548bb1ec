/*
 * check.c — `profd store check`: verify a data directory offline. Each
 * day file is opened read-only on its own (not through the store: a
 * damaged file must not stop the others), then: SQLite's integrity_check,
 * every profile's and rollup's blobs against their checksums and through
 * their decoders (codec.c), every symbol table readable. Reports one line
 * per damaged thing through a callback; the caller prints and counts.
 */
#include "codec.h"
#include "prepare.h"
#include "../util/pdsqlite.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct chk {
	void (*report)(void *ctx, const char *file, const char *what);
	void *ctx;
	const char *file;
	struct pd_store_check *out;
	size_t problems; /* in this file */
	ZSTD_DCtx *dctx;
	sqlite3_stmt *base_get; /* the blocks that may be row pk's (codec.h: chains) */
	struct pd_rawcache raws;
};

int pd_block_fetch_stmt(sqlite3_stmt *st, int64_t pk, int k, struct pd_buf *out, bool *frame, struct pd_err *err)
{
	*frame = false;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, pk);
	int r = SQLITE_ROW;
	for (int i = 0; i <= k && r == SQLITE_ROW; i++)
		r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		int rc = r == SQLITE_DONE ? 0
					  : pd_errf(err, PD_EIO, "base block: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
		sqlite3_reset(st);
		return rc;
	}
	const char *xid = (const char *)sqlite3_column_text(st, 0);
	const uint8_t *p;
	size_t n;
	bool checked;
	int rc = pd_blob_open(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
			      pd_blob_seed(xid ? xid : "", xid ? strlen(xid) : 0, PD_BLOB_BLOCK), &p, &n, &checked, err);
	*frame = rc != 0;
	out->len = 0;
	if (!rc && pd_buf_append(out, p, n))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	sqlite3_reset(st);
	return rc ? rc : 1;
}

/* pd_block_fetch over the file being checked */
static int fetch_base(void *ctx, int64_t pk, int k, struct pd_buf *out, struct pd_err *err)
{
	struct chk *c = ctx;
	bool frame;
	return c->base_get ? pd_block_fetch_stmt(c->base_get, pk, k, out, &frame, err) : 0;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }

/* SQLite's WAL checksum over n bytes (n a multiple of 8), words big- or
 * little-endian as the log's magic says, on from s[2]. */
static void wal_sum(bool big, const uint8_t *p, size_t n, uint32_t s[2])
{
	uint32_t (*word)(const uint8_t *) = big ? be32 : le32;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		s[0] += word(p + i) + s[1];
		s[1] += word(p + i + 4) + s[0];
	}
}

int pd_wal_damaged(const char *wal, char *why, size_t n)
{
	FILE *f = fopen(wal, "rb");
	if (!f)
		return 0;
	uint8_t h[32], fh[24];
	uint8_t *page = NULL;
	int found = 0;
	if (fread(h, 1, 32, f) != 32 || (be32(h) & 0xfffffffe) != 0x377f0682)
		goto out;
	bool big = be32(h) & 1;
	uint32_t psz = be32(h + 8), s[2] = {0, 0};
	if (psz < 512 || psz > 65536 || (psz & (psz - 1)) || !(page = malloc(psz)))
		goto out;
	wal_sum(big, h, 24, s);
	if (s[0] != be32(h + 24) || s[1] != be32(h + 28))
		goto out; /* no valid header: SQLite ignores the log (nothing was committed in it) */
	uint64_t bad = 0; /* the first frame of this generation that fails its checksum */
	uint64_t first = 0; /* the first commit after it */
	for (uint64_t fr = 1; fread(fh, 1, 24, f) == 24 && fread(page, 1, psz, f) == psz; fr++) {
		if (memcmp(fh + 8, h + 16, 8))
			continue; /* another generation's (the log restarts from its start) */
		if (bad) {
			if (!be32(fh + 4))
				continue;
			/* a commit after the bad frame. The first may be the
			 * transaction a crash interrupted (its frames were not yet
			 * synced, so any may be torn, its commit frame written
			 * first: never acknowledged, rightly dropped); a second
			 * one means a synced, acknowledged commit is lost. */
			if (!first) {
				first = fr;
				continue;
			}
			snprintf(why, n,
				 "its -wal is damaged: frame %llu fails its checksum, so SQLite would drop "
				 "the commits after it (they end at frames %llu, %llu, ...)",
				 (unsigned long long)bad, (unsigned long long)first, (unsigned long long)fr);
			found = 1;
			break;
		}
		uint32_t t[2] = {s[0], s[1]};
		wal_sum(big, fh, 8, t);
		wal_sum(big, page, psz, t);
		if (t[0] != be32(fh + 16) || t[1] != be32(fh + 20))
			bad = fr;
		else
			s[0] = t[0], s[1] = t[1];
	}
	/* a log restarted while it was read (a collector writing it: a
	 * backup while serving) mixes two generations: not damage */
	uint8_t h2[32];
	if (found && (fseek(f, 0, SEEK_SET) || fread(h2, 1, 32, f) != 32 || memcmp(h, h2, 32)))
		found = 0;
out:
	free(page);
	fclose(f);
	return found;
}

static void say(struct chk *c, const char *fmt, ...) PD_PRINTF(2, 3);
static void say(struct chk *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->problems++;
	c->out->problems++;
	c->report(c->ctx, c->file, msg);
}

/* A rollup's function table: frame, then its decoder. */
static void fns_blob(struct chk *c, const char *row, const void *b, size_t n, uint64_t seed)
{
	const uint8_t *p;
	size_t pn;
	bool checked;
	struct pd_err e;
	struct pd_fnt_acc a;
	if (pd_blob_open(b, n, seed, &p, &pn, &checked, &e)) {
		say(c, "%s: function table: %s", row, e.msg);
		return;
	}
	c->out->unchecked += !checked;
	int rc = pd_fnt_init(&a, &e);
	if (!rc) {
		rc = pd_dec_fns(c->dctx, p, pn, &a, row, &e);
		pd_fnt_free(&a);
	}
	if (rc)
		say(c, "%s: function table: %s", row, e.msg);
}

/* A profile's (or rollup's) header and block, their seeds hs and bs:
 * frames, then both decoded as a read would (pd_row_decode: the header
 * may be in the block). */
static void row_blobs(struct chk *c, const char *row, const void *hb, size_t hbn, uint64_t hs, const void *bb,
		      size_t bbn, uint64_t bs)
{
	const uint8_t *hp, *bp;
	size_t hn, bn;
	bool hc, bc;
	struct pd_err e;
	if (pd_blob_open(hb, hbn, hs, &hp, &hn, &hc, &e)) {
		say(c, "%s: header: %s", row, e.msg);
		return;
	}
	if (pd_blob_open(bb, bbn, bs, &bp, &bn, &bc, &e)) {
		say(c, "%s: sample block: %s", row, e.msg);
		return;
	}
	/* an empty header column is no blob of its own (version 3 blocks) */
	c->out->unchecked += (hn && !hc) + !bc;
	struct pd_shdr h;
	int64_t *rows;
	size_t nr;
	uint32_t nv;
	if (pd_row_decode(c->dctx, &c->raws, hp, hn, bp, bn, fetch_base, c, &h, &rows, &nr, &nv, &e)) {
		say(c, "%s: %s", row, e.msg);
		return;
	}
	pd_shdr_free(&h);
	free(rows);
}

static void check_file(struct chk *c, const char *path)
{
	struct stat sb;
	if (stat(path, &sb)) {
		say(c, "cannot stat: %s", strerror(errno));
		return;
	}
	if (!S_ISREG(sb.st_mode)) {
		say(c, "not a regular file (a directory, or another non-file, where the day file goes)");
		return;
	}
	if (sb.st_size == 0) {
		say(c, "zero-length file (the day's data is gone)");
		return;
	}
	char wal[4200], why[300];
	snprintf(wal, sizeof wal, "%s-wal", path);
	if (pd_wal_damaged(wal, why, sizeof why))
		say(c, "%s", why);
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		say(c, "cannot open: %s", db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return;
	}
	if (sq_xid_fn(db)) { /* ids are read through pd_xid (codec.h) */
		say(c, "cannot open: %s", sqlite3_errmsg(db));
		sqlite3_close(db);
		return;
	}
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check(20)", -1, &st, NULL) != SQLITE_OK) {
		say(c, "not a profd day file: %s", sqlite3_errmsg(db));
		goto out;
	}
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(st, 0);
		if (m && strcmp(m, "ok"))
			say(c, "integrity_check: %s", m);
	}
	if (r != SQLITE_DONE)
		say(c, "integrity_check: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	st = NULL;
	/* a file of a newer profd holds blobs this one cannot read: said (it is
	 * not vouched for), and not read as damage */
	int version = 0;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	if (version > PD_DAYFILE_SCHEMA) {
		say(c, "written by a newer profd (schema %d, this one knows up to %d): its rows are not checked", version,
		    PD_DAYFILE_SCHEMA);
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;
	/* profiles (in order: a block's base comes before it) */
	if (sqlite3_prepare_v2(db,
			       "SELECT pd_xid(created, xid), block FROM profiles WHERE pk = ?1 UNION ALL"
			       " SELECT xid, block FROM bases WHERE pk = ?1",
			       -1, &c->base_get, NULL) != SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT pd_xid(created, xid), block FROM profiles WHERE pk = ?1", -1, &c->base_get,
			       NULL) != SQLITE_OK)
		c->base_get = NULL; /* reported below */
	if (sqlite3_prepare_v2(db, "SELECT pd_xid(created, xid), header, block, created FROM profiles ORDER BY pk", -1,
			       &st, NULL) !=
	    SQLITE_OK) {
		say(c, "profiles: %s", sqlite3_errmsg(db));
		goto out;
	}
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *xid = (const char *)sqlite3_column_text(st, 0);
		char row[64];
		snprintf(row, sizeof row, "profile %s", xid ? xid : "?");
		size_t xn = xid ? strlen(xid) : 0;
		row_blobs(c, row, sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
			  pd_blob_seed(xid ? xid : "", xn, PD_BLOB_HEADER), sqlite3_column_blob(st, 2),
			  (size_t)sqlite3_column_bytes(st, 2), pd_blob_seed(xid ? xid : "", xn, PD_BLOB_BLOCK));
		/* a profile is found by its id's second (schema 5: no xid index) */
		int64_t created = sqlite3_column_int64(st, 3), t = pd_xid_time(xid);
		if (t < 0 || created / 1000000000 != t / 1000000000)
			say(c, "%s: its id does not hold its time (created %lld): it cannot be found by its id", row,
			    (long long)created);
		c->out->profiles++;
	}
	if (r != SQLITE_DONE)
		say(c, "profiles: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	st = NULL;
	/* label sets (schema 6): each decodes, each profile's is there. A
	 * file before schema 6 that no profd opened since has none. */
	if (sqlite3_prepare_v2(db, "SELECT seq, c FROM label_sets", -1, &st, NULL) == SQLITE_OK) {
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			struct pd_kv *kv;
			size_t n;
			struct pd_err e;
			if (pd_lset_dec(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &kv, &n, &e))
				say(c, "label set #%lld: %s", (long long)sqlite3_column_int64(st, 0), e.msg);
			pd_lset_free(kv, n);
		}
		if (r != SQLITE_DONE)
			say(c, "label_sets: %s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		st = NULL;
		if (sqlite3_prepare_v2(db,
				       "SELECT pd_xid(created, xid), lset FROM profiles p WHERE lset != 0 AND NOT EXISTS"
				       " (SELECT 1 FROM label_sets s WHERE s.seq = p.lset)",
				       -1, &st, NULL) != SQLITE_OK) {
			say(c, "profiles: %s", sqlite3_errmsg(db));
			goto out;
		}
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			const char *xid = (const char *)sqlite3_column_text(st, 0);
			say(c, "profile %s: its label set #%lld is missing", xid ? xid : "?",
			    (long long)sqlite3_column_int64(st, 1));
		}
		if (r != SQLITE_DONE)
			say(c, "profiles: %s", sqlite3_errmsg(db));
	}
	sqlite3_finalize(st);
	st = NULL;
	/* rollups (a marker or an empty hour has empty blobs) */
	if (sqlite3_prepare_v2(db, "SELECT service, type, hour, profiles, header, block, fns FROM rollups", -1, &st,
			       NULL) != SQLITE_OK) {
		say(c, "rollups: %s", sqlite3_errmsg(db));
		goto out;
	}
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *svc = (const char *)sqlite3_column_text(st, 0), *typ = (const char *)sqlite3_column_text(st, 1);
		int64_t hour = sqlite3_column_int64(st, 2), np = sqlite3_column_int64(st, 3);
		svc = svc ? svc : "";
		typ = typ ? typ : "";
		char row[256];
		snprintf(row, sizeof row, "rollup %s/%s hour %lld", svc, typ, (long long)hour);
		c->out->rollups++;
		if (np <= 0)
			continue;
		row_blobs(c, row, sqlite3_column_blob(st, 4), (size_t)sqlite3_column_bytes(st, 4),
			  pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_HEADER), sqlite3_column_blob(st, 5),
			  (size_t)sqlite3_column_bytes(st, 5), pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_BLOCK));
		if (sqlite3_column_type(st, 6) != SQLITE_NULL)
			fns_blob(c, row, sqlite3_column_blob(st, 6), (size_t)sqlite3_column_bytes(st, 6),
				 pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_FNS));
	}
	if (r != SQLITE_DONE)
		say(c, "rollups: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	st = NULL;
	/* symbol packs (schema 4 on; codec.h): each through its checksum and
	 * decoder, a kind's from seq 1 on without a gap */
	static const char *const tables[PD_SYM_NKINDS] = {"strings", "functions", "mappings", "locations", "stacks",
							  "labelsets"};
	int64_t packed[PD_SYM_NKINDS] = {0}; /* the last seq packed */
	if (sqlite3_prepare_v2(db, "SELECT kg >> 40, kg & 1099511627775, c FROM packs ORDER BY kg", -1, &st, NULL) ==
	    SQLITE_OK) {
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t k = sqlite3_column_int64(st, 0), first = sqlite3_column_int64(st, 1);
			if (k < 0 || k >= PD_SYM_NKINDS || k == PD_SYM_MAP || first < 1) {
				say(c, "packs: a pack of kind %lld from #%lld", (long long)k, (long long)first);
				continue;
			}
			struct pd_pack pk;
			struct pd_err e;
			if (pd_pack_dec(c->dctx, (int)k, first, sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
					&pk, &e)) {
				say(c, "%s: the pack from #%lld: %s", tables[k], (long long)first, e.msg);
				packed[k] = -1; /* its end unknown: the next one is not held against it */
				continue;
			}
			if (packed[k] >= 0 && first != packed[k] + 1)
				say(c, "%s: no pack holds #%lld to #%lld", tables[k], (long long)packed[k] + 1,
				    (long long)first - 1);
			packed[k] = first + pk.n - 1;
			for (uint32_t i = 0; i < pk.n; i++)
				c->out->symbols += pk.n1[i] != 0;
			pd_pack_free(&pk);
		}
		if (r != SQLITE_DONE)
			say(c, "packs: %s", sqlite3_errmsg(db));
	} else if (version >= 4) /* before schema 4 there are none */
		say(c, "packs: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	st = NULL;
	/* symbols: every row readable, none of a seq that is packed */
	for (size_t i = 0; i < PD_SYM_NKINDS; i++) {
		char sql[96];
		snprintf(sql, sizeof sql, "SELECT seq, length(c) FROM %s", tables[i]);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
			say(c, "%s: %s", tables[i], sqlite3_errmsg(db));
			continue;
		}
		int64_t twice = 0;
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			c->out->symbols++;
			twice += sqlite3_column_int64(st, 0) <= packed[i];
		}
		if (r != SQLITE_DONE)
			say(c, "%s: %s", tables[i], sqlite3_errmsg(db));
		if (twice)
			say(c, "%s: %lld rows of seqs that are packed", tables[i], (long long)twice);
		sqlite3_finalize(st);
		st = NULL;
	}
out:
	sqlite3_finalize(st);
	sqlite3_finalize(c->base_get);
	c->base_get = NULL;
	pd_rawcache_free(&c->raws);
	sqlite3_close(db);
}


int pd_store_check_dir(const char *dir, void (*report)(void *ctx, const char *file, const char *what), void *ctx,
		       struct pd_store_check *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	char **names = NULL;
	size_t n = 0;
	int rc = pd_store_day_files(dir, &names, &n, err);
	if (rc)
		return rc;
	struct chk c = {.report = report, .ctx = ctx, .out = out, .dctx = ZSTD_createDCtx()};
	if (!rc && !c.dctx)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		c.file = names[i];
		c.problems = 0;
		check_file(&c, path);
		out->files++;
		if (c.problems)
			out->damaged_files++;
	}
	ZSTD_freeDCtx(c.dctx);
	pd_store_names_free(names, n);
	return rc;
}
