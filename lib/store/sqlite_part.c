/*
 * sqlite_part.c — the SQLite backend's partitions (see sqlite.c): error
 * codes of failed SQLite calls, the disk-full ballast, quarantined days,
 * the partitions' in-memory state (caches reset, pending symbols), the
 * open-partition LRU and the store mutex's operations, opening a day file
 * (schema, migration, statements).
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char *const sq_ktable[NKINDS] = {"strings", "functions", "mappings", "locations", "stacks", "labelsets"};

/* ---- helpers ------------------------------------------------------------ */

/* A failed SQLite call as a PD_E* code: a full disk is PD_ENOSPC (507),
 * running out of file descriptors PD_EBUSY (503), the rest PD_EIO. */
static int sqcode(sqlite3 *db)
{
	int e = db ? sqlite3_errcode(db) & 0xff : SQLITE_CANTOPEN;
	int se = db ? sqlite3_system_errno(db) : errno;
	if (e == SQLITE_FULL || ((e == SQLITE_IOERR || e == SQLITE_CANTOPEN) && se == ENOSPC))
		return PD_ENOSPC;
	if ((e == SQLITE_CANTOPEN || e == SQLITE_IOERR) && (se == EMFILE || se == ENFILE))
		return PD_EBUSY;
	return PD_EIO;
}

int sq_err(struct pd_err *err, sqlite3 *db, const char *what)
{
	int c = sqcode(db);
	const char *m = db ? sqlite3_errmsg(db) : "cannot open";
	if (c == PD_ENOSPC)
		return pd_errf(err, c, "store: %s: the disk is full: %s", what, m);
	if (c == PD_EBUSY)
		return pd_errf(err, c, "store: %s: " EMFILE_HINT, what);
	return pd_errf(err, PD_EIO, "store: %s: %s", what, m);
}

bool sq_corrupt(sqlite3 *db)
{
	int e = sqlite3_errcode(db) & 0xff;
	return e == SQLITE_CORRUPT || e == SQLITE_NOTADB;
}

/* "profd-20261130.db" */
void sq_day_file(int64_t day, char *buf, size_t n)
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, n, "profd-%04d%02d%02d.db", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

void sq_day_path(const struct sq *s, int64_t day, char *buf, size_t n)
{
	char f[64];
	sq_day_file(day, f, sizeof f);
	snprintf(buf, n, "%s/%s", s->dir, f);
}

/* ---- disk full ------------------------------------------------------------- */

/* Make the ballast file if the file system has room for it and more. */
void sq_reserve_make(struct sq *s)
{
	struct statvfs vs;
	if (!s->reserve_path || atomic_load(&s->reserve_held) || statvfs(s->dir, &vs))
		return;
	uint64_t total = (uint64_t)vs.f_blocks * vs.f_frsize, avail = (uint64_t)vs.f_bavail * vs.f_frsize;
	size_t want = total / 16 < (4u << 20) ? (size_t)(total / 16) : (4u << 20);
	if (want < 65536 || avail < 3 * (uint64_t)want)
		return;
	int fd = open(s->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	bool ok = posix_fallocate(fd, 0, (off_t)want) == 0 && fsync(fd) == 0;
	close(fd);
	if (!ok) {
		unlink(s->reserve_path);
		return;
	}
	s->reserve_bytes = want;
	atomic_store(&s->reserve_held, true);
}

/* The disk filled during a commit of pt (committer, outside mu): give the
 * ballast back and move the WAL into the database (truncating it), so that
 * the space is usable: by deletions first, and by writes once the
 * failing client retries. */
void sq_nospace_relief(struct sq *s, struct part *pt)
{
	if (atomic_exchange(&s->reserve_held, false))
		unlink(s->reserve_path);
	sqlite3_exec(pt->wdb, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
}

/* ---- quarantine ------------------------------------------------------------ */

struct quar *sq_quar_find(struct sq *s, int64_t day)
{
	for (size_t i = 0; i < s->nquar; i++)
		if (s->quar[i].day == day)
			return &s->quar[i];
	return NULL;
}

void sq_quar_drop(struct sq *s, struct quar *q) { *q = s->quar[--s->nquar]; }

/* Is day's quarantine still about the file that is there? A file removed
 * (by an operator, or retention) or replaced ends it. Under mu. */
bool sq_quar_current(struct sq *s, struct quar *q)
{
	char path[4096];
	struct stat sb;
	sq_day_path(s, q->day, path, sizeof path);
	bool exists = stat(path, &sb) == 0;
	if (exists == q->exists && (!exists || (sb.st_dev == q->dev && sb.st_ino == q->ino && sb.st_size == q->size &&
						sb.st_mtim.tv_sec == q->mtime.tv_sec &&
						sb.st_mtim.tv_nsec == q->mtime.tv_nsec &&
						sb.st_ctim.tv_sec == q->ctime.tv_sec &&
						sb.st_ctim.tv_nsec == q->ctime.tv_nsec)))
		return true;
	sq_quar_drop(s, q);
	return false;
}

/* Quarantine day (under mu): logged once, counted; an open partition of it
 * is marked bad (closed once idle). !damaged: a file of a newer profd,
 * skipped the same way but not called damaged. */
static void quarantine_as(struct sq *s, int64_t day, const char *reason, bool damaged)
{
	for (size_t i = 0; i < s->nparts; i++)
		if (s->parts[i]->day == day)
			s->parts[i]->bad = true;
	if (sq_quar_find(s, day) || pd_grow((void **)&s->quar, &s->cquar, s->nquar + 1, sizeof *s->quar))
		return;
	struct quar *q = &s->quar[s->nquar++];
	memset(q, 0, sizeof *q);
	q->day = day;
	q->damaged = damaged;
	snprintf(q->reason, sizeof q->reason, "%s", reason);
	char path[4096];
	struct stat sb;
	sq_day_path(s, day, path, sizeof path);
	if ((q->exists = stat(path, &sb) == 0)) {
		q->dev = sb.st_dev;
		q->ino = sb.st_ino;
		q->size = sb.st_size;
		q->mtime = sb.st_mtim;
		q->ctime = sb.st_ctim;
	}
	char msg[4600];
	if (damaged)
		snprintf(msg, sizeof msg,
			 "%s is damaged: %s; the day is quarantined: queries skip it (answers say \"partial\"), "
			 "writes to it are refused; see `profd store check --data-dir %s`",
			 path, reason, s->dir);
	else
		snprintf(msg, sizeof msg,
			 "%s was %s: not read; the day is quarantined: queries skip it (answers say \"partial\"), "
			 "writes to it are refused",
			 path, reason);
	pd_log_line(stderr, "error", "store", msg);
}

static void quarantine(struct sq *s, int64_t day, const char *reason) { quarantine_as(s, day, reason, true); }

/* Quarantine day's file f (its name) for reason, and the error that says so. */
static int refuse_damaged(struct sq *s, int64_t day, const char *f, const char *reason, struct pd_err *err)
{
	quarantine(s, day, reason);
	return pd_errf(err, PD_EIO, "store: %s is damaged (%s): quarantined, see `profd store check`", f, reason);
}

/* Damage found in partition pt (a checksum, a decode, SQLite's own
 * checks): quarantine it and fail with a message naming the file. */
int sq_damaged(struct part *pt, struct pd_err *err, const char *fmt, ...)
{
	char what[600], f[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	sq_day_file(pt->day, f, sizeof f);
	quarantine(pt->s, pt->day, what);
	return pd_errf(err, PD_EIO, "store: %s: %s (damaged day file: quarantined)", f, what);
}

/* A failed query statement on pt: damage (quarantined) or sq_err. */
int sq_qerr(struct part *pt, sqlite3 *db, const char *what, struct pd_err *err)
{
	if (sq_corrupt(db))
		return sq_damaged(pt, err, "%s: %s", what, sqlite3_errmsg(db));
	return sq_err(err, db, what);
}

ZSTD_CCtx *sq_cctx_get(struct sq *s)
{
	ZSTD_CCtx *c = NULL;
	pthread_mutex_lock(&s->zmu);
	if (s->nzfree)
		c = s->zfree[--s->nzfree];
	pthread_mutex_unlock(&s->zmu);
	return c ? c : ZSTD_createCCtx();
}

void sq_cctx_put(struct sq *s, ZSTD_CCtx *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&s->zmu);
	if (s->nzfree < (int)(sizeof s->zfree / sizeof *s->zfree)) {
		s->zfree[s->nzfree++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s->zmu);
	ZSTD_freeCCtx(c);
}

/* ---- caches ------------------------------------------------------------------ */

/* Their making and resetting; the lookups and inserts are in
 * sqlite_ingest.c, their one user. */

static int cache_init(struct cache *c)
{
	c->n = 0;
	c->mask = 1023;
	c->s = calloc(c->mask + 1, sizeof *c->s);
	return c->s ? 0 : PD_ENOMEM;
}

static int uset_init(struct uset *u)
{
	u->n = 0;
	u->zero = false;
	u->mask = 255;
	u->v = calloc(u->mask + 1, sizeof *u->v);
	return u->v ? 0 : PD_ENOMEM;
}

void sq_pendq_free(struct pendq *q)
{
	free(q->v);
	pd_buf_free(&q->bytes);
	memset(q, 0, sizeof *q);
}

/* Forget the symbols this process created in pt and did not commit: after
 * a failed commit. Jobs resolved before fail at their commit (gen). */
void sq_part_reset(struct part *pt)
{
	pt->gen++;
	for (int k = 0; k < NKINDS; k++) {
		memset(pt->cache[k].s, 0, (pt->cache[k].mask + 1) * sizeof *pt->cache[k].s);
		pt->cache[k].n = 0;
		memset(pt->used[k].v, 0, (pt->used[k].mask + 1) * sizeof *pt->used[k].v);
		pt->used[k].n = 0;
		pt->used[k].zero = false;
		pt->fresh[k] = false; /* what was committed is no longer cached */
		free(pt->pm[k].s);    /* nor in the map: read again when needed */
		pt->pm[k] = (struct pmap){0};
	}
	sq_pendq_free(&pt->pend);
	/* pt->next stays: seqs only grow, the lost ones are gaps */
}

/* ---- partitions ------------------------------------------------------------ */

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=FULL;"
	/* symbols: h is unique (the writer sees to it: sqlite_ingest.c, sym_new),
	 * not indexed (files before schema 3 have h UNIQUE, an index) */
	"CREATE TABLE IF NOT EXISTS strings(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS functions(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mappings(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS locations(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS stacks(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS labelsets(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, c BLOB NOT NULL);"
	/* symbol packs (codec.h; schema 4): kg = k * 2^40 + first holds kind
	 * k's (enum pd_sym_kind) seqs from first on, taken out of their table
	 * (sqlite_commit.c, pack_kind). A rowid table: in a WITHOUT ROWID one,
	 * a row over ~1 KB spills into overflow pages, and packs of ~2 KB took
	 * 2.2 times their bytes (measured, dbstat) */
	"CREATE TABLE IF NOT EXISTS packs(kg INTEGER PRIMARY KEY, c BLOB NOT NULL);"
	/* xid: unique by how it is made (xid.c), not indexed: a profile is
	 * found by its service and time (the xid's second; get_prof), so a
	 * profile costs one index entry where it cost two (~37 bytes each,
	 * measured with dbstat). Files before schema 5 keep xid UNIQUE, an
	 * index their lookups still use. Since schema 7 an integer, the xid
	 * without its seconds (codec.h, sq_xid_key): 9 bytes of a row where
	 * the 20 characters took 21. Files before keep xid TEXT (part.xid_int). */
	"CREATE TABLE IF NOT EXISTS profiles(pk INTEGER PRIMARY KEY, xid INTEGER NOT NULL, service TEXT NOT NULL,"
	" type TEXT NOT NULL, created INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
	" nsamples INTEGER NOT NULL, lset INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX IF NOT EXISTS profiles_svc ON profiles(service, created);"
	/* a profile's labels (schema 6): lset names its set, 0 = none. A set
	 * is stored once (c: codec.h, pd_lset_enc; unique), and each of its
	 * labels once more as a key of set_labels, which label matchers seek
	 * (EXISTS ... k = ? AND v = ? AND s = lset). Sets are not deleted
	 * with their profiles: a day holds about as many as it has series.
	 * Files before schema 6 keep profile_labels (pk, k, v) for the
	 * profiles they had (sq_part_get adds lset to their profiles: upgrade_v6). */
	"CREATE TABLE IF NOT EXISTS label_sets(seq INTEGER PRIMARY KEY, c BLOB NOT NULL UNIQUE);"
	"CREATE TABLE IF NOT EXISTS set_labels(k TEXT NOT NULL, v TEXT NOT NULL, s INTEGER NOT NULL,"
	" PRIMARY KEY(k, v, s)) WITHOUT ROWID;"
	/* rollups (see the top of the file); hour = floor(created / 1 h) */
	"CREATE TABLE IF NOT EXISTS hour_gen(service TEXT NOT NULL, type TEXT NOT NULL, hour INTEGER NOT NULL,"
	" gen INTEGER NOT NULL, PRIMARY KEY(service, type, hour)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS rollups(service TEXT NOT NULL, type TEXT NOT NULL, hour INTEGER NOT NULL,"
	" gen INTEGER NOT NULL, profiles INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
	" fns BLOB, UNIQUE(service, type, hour));"
	/* the blocks of removed profiles that others may be based on (codec.h:
	 * chains); pk is not unique (SQLite may give a removed last row's pk
	 * to the next one) */
	/* xid: the 20 characters in every file (pd_xid) */
	"CREATE TABLE IF NOT EXISTS bases(pk INTEGER NOT NULL, xid TEXT NOT NULL, block BLOB NOT NULL);"
	"CREATE INDEX IF NOT EXISTS bases_pk ON bases(pk);";

/* Version 1 added the rollup tables: hour_gen gets a row (generation 0)
 * for every hour that already holds profiles, so that the rollup pass
 * finds them. One transaction; user_version says it is done. */
static const char migrate_v1[] =
	"BEGIN IMMEDIATE;"
	"INSERT OR IGNORE INTO hour_gen(service, type, hour, gen)"
	" SELECT service, type, (created - ((created % 3600000000000) + 3600000000000) % 3600000000000)"
	" / 3600000000000, 0 FROM profiles GROUP BY 1, 2, 3;"
	"PRAGMA user_version = 1;"
	"COMMIT;";

/* Reads of one operation share one read transaction per partition: an
 * autocommit statement takes and drops SQLite's file locks each time
 * (measured: a third of a merge's time in fcntl). parts_read_end ends them;
 * every operation that reads calls it before releasing the store mutex. */
void sq_part_read(struct part *p)
{
	if (!p->rtx && sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK) {
		p->rtx = true;
		p->rtx_no++;
	}
}

static void part_read_end(struct part *p)
{
	for (int k = 0; k < NKINDS; k++) /* the symbol scans hold the read transaction */
		if (p->scan_at[k]) {
			sqlite3_reset(p->scan[k]);
			p->scan_at[k] = 0;
		}
	if (p->rtx) {
		sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL);
		p->rtx = false;
	}
}

/* Every operation on partitions runs between sq_store_lock and sq_store_unlock:
 * a partition sq_part_get returned during the operation (p->op == s->opno)
 * stays open until it ends (or sq_part_done releases it), so the LRU never
 * closes one the operation still points at. */
void sq_store_lock(struct sq *s)
{
	pthread_mutex_lock(&s->mu);
	s->opno++;
}

/* Idle: no operation holds it, no queued job (commit, rollup, removal)
 * refers to it. Symbols still pending in an idle partition are orphans of
 * an ingest that failed before its commit (a job holds refs from its
 * resolve to the end of its commit, and a commit takes every pending
 * symbol): no profile refers to them, closing loses nothing. */
static bool part_idle(const struct sq *s, const struct part *p)
{
	return atomic_load(&p->refs) == 0 && p->op != s->opno;
}

/* Close idle partitions, damaged ones first, then the least recently
 * used, until at most keep are open. Under mu. */
void sq_parts_trim(struct sq *s, size_t keep)
{
	for (size_t i = 0; i < s->nparts;) {
		struct part *p = s->parts[i];
		if (p->bad && part_idle(s, p)) {
			s->parts[i] = s->parts[--s->nparts];
			sq_part_close(p);
		} else {
			i++;
		}
	}
	while (s->nparts > keep) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < s->nparts; i++)
			if (part_idle(s, s->parts[i]) && (best == SIZE_MAX || s->parts[i]->last_use < s->parts[best]->last_use))
				best = i;
		if (best == SIZE_MAX)
			return; /* all in use: over the cap until they are released */
		struct part *p = s->parts[best];
		s->parts[best] = s->parts[--s->nparts];
		sq_part_close(p);
	}
}

/* The operation is done with p (it may be closed from now on). */
void sq_part_done(struct part *p)
{
	if (!p)
		return;
	part_read_end(p);
	p->op = 0;
}

void sq_store_unlock(struct sq *s)
{
	for (size_t i = 0; i < s->nparts; i++)
		part_read_end(s->parts[i]);
	pd_rawcache_free(&s->rawcache); /* the blocks' bases of this operation: not held idle */
	s->opno++; /* the operation holds nothing any more */
	sq_parts_trim(s, s->max_open);
	pthread_mutex_unlock(&s->mu);
}

void sq_part_close(struct part *p)
{
	if (!p)
		return;
	part_read_end(p);
	for (int k = 0; k < NKINDS; k++) {
		sqlite3_finalize(p->find[k]);
		sqlite3_finalize(p->ins[k]);
		sqlite3_finalize(p->get[k]);
		sqlite3_finalize(p->scan[k]);
		sqlite3_finalize(p->pack_rows[k]);
		sqlite3_finalize(p->pack_del[k]);
		pd_pack_free(&p->grp[k]);
		free(p->cache[k].s);
		free(p->used[k].v);
		free(p->pm[k].s);
		sq_rcache_free(p->s, &p->rc[k]);
	}
	sq_svc_forget(p); /* before svc_next is finalized: it clears its bindings */
	sqlite3_stmt *st[] = {p->ins_prof,    p->lset_ins,    p->lset_find,    p->lset_kv,   p->get_lset,
			      p->get_prof,    p->del_prof,    p->del_labels,
			      p->get_labels,  p->begin,       p->commit,       p->rollback,  p->savepoint,
			      p->release,     p->rollback_to, p->gen_get,      p->range_get, p->rollups_get,
			      p->rollups_fget, p->stale_get,  p->gen_bump,     p->gen_wget,  p->ins_rollup,
			      p->keep_base,   p->base_get,    p->pack_get,     p->pack_scan, p->pack_ins,
			      p->svc_first,   p->svc_next};
	for (size_t i = 0; i < sizeof st / sizeof *st; i++)
		sqlite3_finalize(st[i]);
	sq_pendq_free(&p->pend);
	free(p->svc_last);
	sqlite3_close(p->db);
	sqlite3_close(p->wdb); /* the last connection: checkpoints and removes the WAL */
	free(p);
}

/* pd_xid(created, xid): the 20 characters of a profile's id, from either
 * form (codec.h): an integer with created's second, text as it is. */
static void xid_sql(sqlite3_context *cx, int argc, sqlite3_value **v)
{
	(void)argc;
	if (sqlite3_value_type(v[1]) != SQLITE_INTEGER) {
		sqlite3_result_value(cx, v[1]);
		return;
	}
	char id[PD_STORE_ID_LEN + 1];
	pd_xid_make(sqlite3_value_int64(v[0]), (uint64_t)sq_xid_key((uint64_t)sqlite3_value_int64(v[1])), id);
	sqlite3_result_text(cx, id, PD_STORE_ID_LEN, SQLITE_TRANSIENT);
}

int sq_xid_fn(sqlite3 *db)
{
	return sqlite3_create_function_v2(db, "pd_xid", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
					  xid_sql, NULL, NULL, NULL) == SQLITE_OK
		       ? 0
		       : PD_ENOMEM;
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st, struct pd_err *err)
{
	if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return sq_err(err, db, sql);
	return 0;
}

static int open_db(const char *path, bool create, sqlite3 **db, struct pd_err *err)
{
	errno = 0;
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		return sq_err(err, *db, path);
	sqlite3_busy_timeout(*db, 5000);
	return 0;
}

/* count(*) of sql on db: *n, or an error (0) */
static int count_of(sqlite3 *db, const char *sql, int64_t *n, struct pd_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(db, sql, &st, err);
	if (rc)
		return rc;
	int r = sqlite3_step(st);
	*n = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	return r == SQLITE_ROW ? 0 : sq_err(err, db, "schema");
}

/* A file before schema 6: its profiles get lset (0: their labels are in
 * profile_labels), so that new ones name label sets. Checked, not
 * assumed: a crash may have come between this and user_version. */
static int upgrade_v6(struct part *p, const char *path, struct pd_err *err)
{
	int64_t n;
	int rc = count_of(p->wdb, "SELECT count(*) FROM pragma_table_info('profiles') WHERE name = 'lset'", &n, err);
	if (rc || n)
		return rc;
	char *msg = NULL;
	if (sqlite3_exec(p->wdb, "ALTER TABLE profiles ADD COLUMN lset INTEGER NOT NULL DEFAULT 0", NULL, NULL, &msg) !=
	    SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: upgrading for label sets: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
	}
	return rc;
}

/* A new day file: made under a temporary name (path.new) with its schema,
 * synced, then renamed into place. SQLite creates a file as it opens it,
 * empty until the first commit: a crash (kill -9) right after an open of
 * the final name left a zero-length day file, which the next start must
 * quarantine (an emptied day file looks the same), refusing the day. */
static int day_make(const char *path, struct pd_err *err)
{
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
	char tmp[4200], aux[4300];
	snprintf(tmp, sizeof tmp, "%s.new", path);
	for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) { /* a crashed attempt's */
		snprintf(aux, sizeof aux, "%s%s", tmp, sfx[i]);
		unlink(aux);
	}
	sqlite3 *db = NULL;
	char setv[48];
	snprintf(setv, sizeof setv, "PRAGMA user_version = %d", PD_DAYFILE_SCHEMA);
	int rc = open_db(tmp, true, &db, err);
	/* 2 KiB pages: every table and index costs at least a page (a day
	 * file's fixed cost, ~80 KB at 4 KiB), and a row too big for its page
	 * ends in an overflow page whose unused part is half a page on
	 * average (the large generated CPU profiles: 26 % less on disk). Rows
	 * of 0.5..2 KB overflow at 2 KiB where they fit in a 4 KiB page: see
	 * docs/benchmarks.md, "2 KiB pages". A file made before keeps its own.
	 * A new file gives freed pages back at each commit: packing a kind's
	 * rows frees pages that later rows reuse only in part (7 of the 131
	 * pages of 1,000 real CPU scrapes were free). Set before the first
	 * table, and only then: on a file made before, the pragma writes its
	 * header (a quarantined file would change under its quarantine). */
	if (!rc && (sqlite3_exec(db, "PRAGMA page_size=2048", NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, "PRAGMA auto_vacuum=FULL", NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, schema, NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, setv, NULL, NULL, NULL) != SQLITE_OK)) {
		char what[4300];
		snprintf(what, sizeof what, "%s: creating", path);
		rc = sq_err(err, db, what);
	}
	if (sqlite3_close(db) != SQLITE_OK && !rc) /* the last connection: checkpoints (synced), removes the WAL */
		rc = pd_errf(err, PD_EIO, "store: %s: closing", tmp);
	for (size_t i = 1; !rc && i < 3; i++) { /* a removed file's -wal would be replayed into this one */
		snprintf(aux, sizeof aux, "%s%s", path, sfx[i]);
		unlink(aux);
	}
	if (!rc && rename(tmp, path))
		rc = pd_errf(err, PD_EIO, "store: %s: %s", path, strerror(errno));
	/* the name durable before the first upload into the file is acknowledged */
	if (!rc && pd_fsync_parent(path))
		rc = pd_errf(err, PD_EIO, "store: %s: syncing its directory: %s", path, strerror(errno));
	if (rc)
		for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
			snprintf(aux, sizeof aux, "%s%s", tmp, sfx[i]);
			unlink(aux);
		}
	return rc;
}

/* The partition of day `day`; created if `create`, else NULL if absent. */
int sq_part_get(struct sq *s, int64_t day, bool create, struct part **out, struct pd_err *err)
{
	*out = NULL;
	s->tick++;
	char path[4096], f[64];
	sq_day_path(s, day, path, sizeof path);
	sq_day_file(day, f, sizeof f);
	struct quar *qr = sq_quar_find(s, day);
	if (qr && sq_quar_current(s, qr)) {
		if (!qr->damaged)
			return pd_errf(err, PD_EIO, "store: %s was %s: not read (quarantined)", f, qr->reason);
		return pd_errf(err, PD_EIO, "store: %s is damaged (%s): quarantined, see `profd store check`", f, qr->reason);
	}
	for (size_t i = 0; i < s->nparts; i++)
		if (s->parts[i]->day == day) {
			struct part *p = s->parts[i];
			if (p->bad) /* its quarantine ended (the file was replaced): reopen once idle */
				return pd_errf(err, PD_EIO, "store: %s was damaged and is still in use: try again", f);
			p->last_use = s->tick;
			p->op = s->opno;
			*out = p;
			return 0;
		}
	struct stat sb;
	bool existed = stat(path, &sb) == 0;
	if (!create && !existed)
		return 0;
	if (existed && !S_ISREG(sb.st_mode)) {
		/* a directory (or another non-file) where the day file goes:
		 * SQLite cannot open it, and a query over the day would fail
		 * (every query over all days: services, stats, rollups) */
		return refuse_damaged(s, day, f, "not a regular file", err);
	}
	if (existed && sb.st_size == 0) {
		/* SQLite would take an empty file for an empty database: a day
		 * truncated to nothing would silently vanish (and be written
		 * over). A new partition is never empty once created (its
		 * schema is written before any profile). */
		return refuse_damaged(s, day, f, "zero-length file", err);
	}
	char wal[4200], wdmg[300];
	snprintf(wal, sizeof wal, "%s-wal", path);
	if (existed && pd_wal_damaged(wal, wdmg, sizeof wdmg)) {
		/* not opened: SQLite would drop the commits after the damage
		 * silently, and overwrite them at its next checkpoint */
		return refuse_damaged(s, day, f, wdmg, err);
	}
	sq_parts_trim(s, s->max_open > 1 ? s->max_open - 1 : 1);
	struct part *p = calloc(1, sizeof *p);
	if (!p)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	p->day = day;
	p->s = s;
	p->inst = ++s->ninst;
	atomic_init(&p->refs, 0);
	int rc = 0;
	if (!existed && (rc = day_make(path, err)) == PD_EBUSY && s->nparts) {
		sq_parts_trim(s, 0); /* out of descriptors: as below */
		rc = day_make(path, err);
	}
	if (!rc && (rc = open_db(path, true, &p->wdb, err)) == PD_EBUSY && s->nparts) {
		/* out of descriptors: close every idle partition, then once more */
		sqlite3_close(p->wdb);
		p->wdb = NULL;
		sq_parts_trim(s, 0);
		rc = open_db(path, true, &p->wdb, err);
	}
	int se = rc && p->wdb ? sqlite3_system_errno(p->wdb) : 0;
	if (rc == PD_EIO && existed && (se == EACCES || se == EPERM)) {
		/* a day file this process may not open: skipped as a damaged
		 * one is, the other days answer (a chmod ends it: ctime) */
		char why[300];
		snprintf(why, sizeof why, "cannot open: %s", strerror(se));
		rc = refuse_damaged(s, day, f, why, err);
	}
	if (!rc && sq_xid_fn(p->wdb))
		rc = sq_err(err, p->wdb, "pd_xid");
	if (rc)
		goto fail;
	char *msg = NULL;
	if (sqlite3_exec(p->wdb, schema, NULL, NULL, &msg) != SQLITE_OK) {
		if (existed && sq_corrupt(p->wdb)) {
			rc = refuse_damaged(s, day, f, msg ? msg : "not a database", err);
		} else {
			char what[4200];
			snprintf(what, sizeof what, "%s: opening", path);
			rc = sq_err(err, p->wdb, what);
		}
		sqlite3_free(msg);
		goto fail;
	}
	sqlite3_stmt *uv;
	if ((rc = prep(p->wdb, "PRAGMA user_version", &uv, err)))
		goto fail;
	int version = sqlite3_step(uv) == SQLITE_ROW ? sqlite3_column_int(uv, 0) : -1;
	sqlite3_finalize(uv);
	if (version < 0) {
		rc = existed && sq_corrupt(p->wdb) ? sq_damaged(p, err, "user_version: %s", sqlite3_errmsg(p->wdb))
						   : sq_err(err, p->wdb, "user_version");
		goto fail;
	}
	if (version > PD_DAYFILE_SCHEMA) { /* user_version (codec.h): a newer file is refused */
		/* and skipped as a damaged one is: every query over its day (over
		 * all days: services, stats, rollups) failed */
		char why[128];
		snprintf(why, sizeof why, "written by a newer profd (schema %d, this one knows up to %d)", version,
			 PD_DAYFILE_SCHEMA);
		quarantine_as(s, day, why, false);
		rc = pd_errf(err, PD_EIO, "store: %s was %s", path, why);
		goto fail;
	}
	if (version < 1 && sqlite3_exec(p->wdb, migrate_v1, NULL, NULL, &msg) != SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: upgrading for rollups: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_exec(p->wdb, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	if (version < 6 && (rc = upgrade_v6(p, path, err)))
		goto fail;
	char setv[48];
	snprintf(setv, sizeof setv, "PRAGMA user_version = %d", PD_DAYFILE_SCHEMA);
	if (version < PD_DAYFILE_SCHEMA && sqlite3_exec(p->wdb, setv, NULL, NULL, &msg) != SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: upgrading: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		goto fail;
	}
	if ((rc = open_db(path, false, &p->db, err)))
		goto fail;
	if (sq_xid_fn(p->db)) {
		rc = sq_err(err, p->db, "pd_xid");
		goto fail;
	}
	sqlite3_exec(p->db, "PRAGMA query_only=1", NULL, NULL, NULL);
	/* packs: kg = k * 2^40 + first (the schema above) */
	if ((rc = prep(p->db,
		       "SELECT kg & 1099511627775, c FROM packs WHERE kg BETWEEN ?1 * 1099511627776 + 1"
		       " AND ?1 * 1099511627776 + ?2 ORDER BY kg DESC LIMIT 1",
		       &p->pack_get, err)) ||
	    (rc = prep(p->db,
		       "SELECT kg & 1099511627775, c FROM packs WHERE kg BETWEEN ?1 * 1099511627776 + 1"
		       " AND ?1 * 1099511627776 + 1099511627775 ORDER BY kg",
		       &p->pack_scan, err)) ||
	    (rc = prep(p->wdb, "INSERT INTO packs(kg, c) VALUES(?1 * 1099511627776 + ?2, ?3)", &p->pack_ins, err)))
		goto fail;
	for (int k = 0; k < NKINDS; k++) {
		char sql[160];
		snprintf(sql, sizeof sql, "SELECT seq, c FROM %s WHERE h = ?", sq_ktable[k]);
		if ((rc = prep(p->db, sql, &p->find[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "INSERT INTO %s(seq, h, c) VALUES(?, ?, ?)", sq_ktable[k]);
		if ((rc = prep(p->wdb, sql, &p->ins[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "SELECT c FROM %s WHERE seq = ?", sq_ktable[k]);
		if ((rc = prep(p->db, sql, &p->get[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "SELECT seq, c FROM %s WHERE seq >= ? ORDER BY seq", sq_ktable[k]);
		if ((rc = prep(p->db, sql, &p->scan[k], err)))
			goto fail;
		if (cache_init(&p->cache[k]) || uset_init(&p->used[k])) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto fail;
		}
		/* seqs of new symbols are assigned here (one writer per data dir) */
		sqlite3_stmt *mx;
		snprintf(sql, sizeof sql, "SELECT max(seq) FROM %s", sq_ktable[k]);
		if ((rc = prep(p->db, sql, &mx, err)))
			goto fail;
		int r = sqlite3_step(mx);
		int64_t max = r == SQLITE_ROW ? sqlite3_column_int64(mx, 0) : 0;
		sqlite3_finalize(mx);
		if (r != SQLITE_ROW) {
			rc = existed && sq_corrupt(p->db) ? sq_damaged(p, err, "max(seq): %s", sqlite3_errmsg(p->db))
							 : sq_err(err, p->db, "max(seq)");
			goto fail;
		}
		/* the packs go on from the last: the rows below it are packed */
		if ((rc = sq_pack_floor(p, k, SQ_PACK_SEQ_MAX, err)) < 0)
			goto fail;
		p->packed[k] = rc ? p->grp[k].first + p->grp[k].n - 1 : 0;
		rc = 0;
		if (max < p->packed[k])
			max = p->packed[k];
		p->next[k] = max + 1;
		p->fresh[k] = max == 0;
		/* the table's only index, if any, is h's */
		snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = '%s'",
			 sq_ktable[k]);
		if ((rc = prep(p->db, sql, &mx, err)))
			goto fail;
		r = sqlite3_step(mx);
		p->hidx[k] = r == SQLITE_ROW && sqlite3_column_int64(mx, 0) > 0;
		sqlite3_finalize(mx);
		if (r != SQLITE_ROW) {
			rc = existed && sq_corrupt(p->db) ? sq_damaged(p, err, "schema: %s", sqlite3_errmsg(p->db))
							 : sq_err(err, p->db, "schema");
			goto fail;
		}
		snprintf(sql, sizeof sql, "SELECT seq, c FROM %s WHERE seq BETWEEN ? AND ? ORDER BY seq", sq_ktable[k]);
		if ((rc = prep(p->wdb, sql, &p->pack_rows[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "DELETE FROM %s WHERE seq BETWEEN ? AND ?", sq_ktable[k]);
		if ((rc = prep(p->wdb, sql, &p->pack_del[k], err)))
			goto fail;
	}
	{ /* an index led by xid: the UNIQUE of files before schema 5 */
		sqlite3_stmt *mx;
		if ((rc = prep(p->db,
			       "SELECT count(*) FROM pragma_index_list('profiles') l, pragma_index_info(l.name) i"
			       " WHERE i.name = 'xid' AND i.seqno = 0",
			       &mx, err)))
			goto fail;
		int r = sqlite3_step(mx);
		p->xidx = r == SQLITE_ROW && sqlite3_column_int64(mx, 0) > 0;
		sqlite3_finalize(mx);
		if (r != SQLITE_ROW) {
			rc = sq_err(err, p->db, "schema");
			goto fail;
		}
	}
	{ /* the xid column's type: INTEGER in a file made since schema 7 */
		int64_t n;
		if ((rc = count_of(p->db, "SELECT count(*) FROM pragma_table_info('profiles')"
					  " WHERE name = 'xid' AND upper(type) = 'INTEGER'",
				   &n, err)))
			goto fail;
		p->xid_int = n > 0;
	}
	{ /* profile_labels: a file before schema 6 */
		int64_t n;
		if ((rc = count_of(p->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'profile_labels'",
				   &n, err)))
			goto fail;
		p->plabels = n > 0;
	}
	if ((rc = prep(p->wdb,
		       "INSERT INTO profiles(xid, service, type, created, header, block, nsamples, lset)"
		       " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
		       &p->ins_prof, err)) ||
	    (rc = prep(p->wdb, "INSERT OR IGNORE INTO label_sets(c) VALUES(?)", &p->lset_ins, err)) ||
	    (rc = prep(p->wdb, "SELECT seq FROM label_sets WHERE c = ?", &p->lset_find, err)) ||
	    (rc = prep(p->wdb, "INSERT OR IGNORE INTO set_labels(k, v, s) VALUES(?, ?, ?)", &p->lset_kv, err)) ||
	    (rc = prep(p->db, "SELECT c FROM label_sets WHERE seq = ?", &p->get_lset, err)) ||
	    /* ?1 an xid, ?2..?3 its second, ?4 a service: one seek into
	     * profiles_svc (sq_locate); files before schema 5 by their xid
	     * index */
	    (rc = prep(p->db,
		       p->xidx ? "SELECT pk, service, type, created, header, block, nsamples FROM profiles WHERE xid = ?1"
			       : "SELECT pk, service, type, created, header, block, nsamples FROM profiles"
				 " WHERE service = ?4 AND created BETWEEN ?2 AND ?3 AND xid = ?1",
		       &p->get_prof, err)) ||
	    (rc = prep(p->db, "SELECT min(service) FROM profiles", &p->svc_first, err)) ||
	    (rc = prep(p->db, "SELECT min(service) FROM profiles WHERE service > ?", &p->svc_next, err)) ||
	    (rc = prep(p->wdb, "DELETE FROM profiles WHERE pk = ?", &p->del_prof, err)) ||
	    (rc = prep(p->wdb,
		       "INSERT INTO bases(pk, xid, block) SELECT pk, pd_xid(created, xid), block FROM profiles"
		       " WHERE pk = ? AND substr(block, 10, 1) IN (x'02', x'03')",
		       &p->keep_base, err)) ||
	    (rc = prep(p->db,
		       "SELECT pd_xid(created, xid), block FROM profiles WHERE pk = ?1"
		       " UNION ALL SELECT xid, block FROM bases WHERE pk = ?1",
		       &p->base_get, err)) ||
	    (p->plabels && (rc = prep(p->wdb, "DELETE FROM profile_labels WHERE pk = ?", &p->del_labels, err))) ||
	    (p->plabels &&
	     (rc = prep(p->db, "SELECT k, v FROM profile_labels WHERE pk = ? ORDER BY k, rowid", &p->get_labels, err))) ||
	    (rc = prep(p->wdb, "BEGIN IMMEDIATE", &p->begin, err)) || (rc = prep(p->wdb, "COMMIT", &p->commit, err)) ||
	    (rc = prep(p->wdb, "ROLLBACK", &p->rollback, err)) ||
	    (rc = prep(p->wdb, "SAVEPOINT job", &p->savepoint, err)) ||
	    (rc = prep(p->wdb, "RELEASE job", &p->release, err)) ||
	    (rc = prep(p->wdb, "ROLLBACK TO job", &p->rollback_to, err)) ||
	    (rc = prep(p->db, "SELECT gen FROM hour_gen WHERE service = ?1 AND type = ?2 AND hour = ?3", &p->gen_get,
		       err)) ||
	    (rc = prep(p->wdb, "SELECT gen FROM hour_gen WHERE service = ?1 AND type = ?2 AND hour = ?3", &p->gen_wget,
		       err)) ||
	    (rc = prep(p->db,
		       "SELECT pd_xid(created, xid), header, block FROM profiles WHERE service = ?1 AND type = ?2"
		       " AND created BETWEEN ?3 AND ?4 ORDER BY created, xid",
		       &p->range_get, err)) ||
	    (rc = prep(p->db,
		       "SELECT r.hour, r.profiles, r.header, r.block FROM rollups r LEFT JOIN hour_gen g"
		       " ON g.service = r.service AND g.type = r.type AND g.hour = r.hour"
		       " WHERE r.service = ?1 AND r.type = ?2 AND r.hour BETWEEN ?3 AND ?4"
		       " AND r.gen = coalesce(g.gen, 0) AND r.profiles >= 0 ORDER BY r.hour",
		       &p->rollups_get, err)) ||
	    (rc = prep(p->db,
		       "SELECT r.hour, r.profiles, r.fns FROM rollups r LEFT JOIN hour_gen g"
		       " ON g.service = r.service AND g.type = r.type AND g.hour = r.hour"
		       " WHERE r.service = ?1 AND r.type = ?2 AND r.hour BETWEEN ?3 AND ?4"
		       " AND r.gen = coalesce(g.gen, 0) AND r.profiles >= 0 AND r.fns IS NOT NULL ORDER BY r.hour",
		       &p->rollups_fget, err)) ||
	    (rc = prep(p->db,
		       "SELECT g.service, g.type, g.hour FROM hour_gen g LEFT JOIN rollups r"
		       " ON r.service = g.service AND r.type = g.type AND r.hour = g.hour"
		       " WHERE g.hour < ?1 AND (r.gen IS NULL OR r.gen != g.gen) ORDER BY g.hour, g.service, g.type",
		       &p->stale_get, err)) ||
	    (rc = prep(p->wdb,
		       "INSERT INTO hour_gen(service, type, hour, gen) VALUES(?1, ?2, ?3, 1)"
		       " ON CONFLICT(service, type, hour) DO UPDATE SET gen = gen + 1",
		       &p->gen_bump, err)) ||
	    (rc = prep(p->wdb,
		       "INSERT OR REPLACE INTO rollups(service, type, hour, gen, profiles, header, block, fns)"
		       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
		       &p->ins_rollup, err)))
		goto fail;
	if (pd_grow((void **)&s->parts, &s->cap, s->nparts + 1, sizeof *s->parts)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto fail;
	}
	p->last_use = s->tick;
	p->op = s->opno;
	s->parts[s->nparts++] = p;
	*out = p;
	return 0;
fail:
	sq_part_close(p);
	if (!existed) { /* nothing of it is worth keeping: no half-created day file (disk full) */
		char aux[4200];
		unlink(path);
		snprintf(aux, sizeof aux, "%s-wal", path);
		unlink(aux);
		snprintf(aux, sizeof aux, "%s-shm", path);
		unlink(aux);
	}
	if (rc == PD_ENOSPC) {
		atomic_store(&s->nospace, true);
		snprintf(s->nospace_msg, sizeof s->nospace_msg, "%s", err->msg);
	}
	return rc;
}

