/*
 * sqlite.c — the embedded store: one SQLite database (WAL) per UTC day
 * under the data directory, so retention deletes whole files.
 *
 * Each partition holds six symbol tables (strings, functions, mappings,
 * locations, stacks, label sets) of the same shape:
 *     seq INTEGER PRIMARY KEY, h INTEGER UNIQUE, c BLOB
 * h is the low half of a 128-bit hash of the symbol's content in terms of
 * its children's content hashes, so it does not depend on the partition.
 * c is the content with children referred to by their seq (compact), which
 * is what an equal-h row is compared against: a hash collision is detected
 * and resolved by probing h+1, h+2, ..., never conflated. An in-memory cache
 * of (128-bit hash -> seq) per partition makes repeated symbols free.
 *
 * A profile is a row: xid, service, type, creation time, labels, a header
 * blob (sample types, period, time, duration, comments, mappings...) and a
 * zstd-compressed sample block of (stack seq, label-set seq, values) rows,
 * sorted by stack and delta-encoded.
 *
 * Ingest (sq_ingest) runs in four steps, only the third under the store
 * mutex and only the fourth in the database:
 *  1. decode the profile and validate it;
 *  2. hash: every symbol's 128-bit content hash, bottom up (strings,
 *     functions, mappings, locations, then each sample's stack and label
 *     set) — partition-independent, so no lock;
 *  3. resolve, under the store mutex: the seq of each sample's stack and
 *     label set and of the header's strings and mappings, top down through
 *     the partition's cache, so a known stack costs one probe and its
 *     locations, functions and strings are not even looked at. A symbol
 *     the cache does not know is looked up in the table (unless the table
 *     held nothing when the partition was opened: then every row is in the
 *     cache) and otherwise created: this process assigns its seq (the
 *     writer of a data dir is unique: flock) and queues the row as
 *     *pending* in the partition;
 *  4. encode the header blob and the sample block (no lock), then commit
 *     with GROUP COMMIT: the job joins the store's queue; a caller that
 *     finds no commit running becomes the committer and, on each
 *     partition's writer connection, runs one transaction (BEGIN
 *     IMMEDIATE; every pending symbol of the partition; each queued profile,
 *     in a SAVEPOINT if it takes several statements, so that a failing one
 *     fails alone; COMMIT with synchronous=FULL: one fsync for the batch),
 *     then wakes the callers of the batch with their results. Jobs that
 *     arrive meanwhile form the next batch. Every caller returns after its
 *     own profile is committed: acknowledged data survives kill -9.
 * A profile row only refers to symbols that are committed or pending in
 * its partition when its job is queued, and a commit writes all of the
 * partition's pending symbols, so a committed profile never refers to a
 * missing symbol. If a partition's transaction fails as a whole, its
 * pending symbols are lost: the partition's caches are reset and its
 * generation bumped, and every job resolved under the old generation fails
 * (PD_EIO, retry) rather than commit references to them.
 *
 * Each partition has two connections: `db` for reads and the lookups of
 * step 3 (under the store mutex) and `wdb`, used only by the committer, so
 * the fsync of a commit does not hold up readers or the other ingests.
 * Removals go through the same queue. Partitions in use by a queued job
 * are not dropped by retention (refs).
 *
 * Merges aggregate the rows of each partition on (stack seq, label-set seq)
 * with the aggregation core, materialise only the symbols the result uses,
 * and combine partitions with the pprof merger (content-keyed, so nothing
 * depends on seqs agreeing across partitions). One mutex serialises the
 * reads and the caches; SQLite runs single-threaded per connection.
 *
 * Rollups: a partition also holds, per (service, type, UTC hour), the
 * aggregate of the hour's profiles: a header and a sample block of the same
 * encoding as a profile's, whose rows are the hour's (stack, label set)
 * sums. Validity is a generation: hour_gen counts the commits that added or
 * removed a profile in the hour (bumped in the same transaction), a rollup
 * records the generation it was built from, and only a rollup whose
 * generation is current is used. A rollup is built from one read snapshot
 * (generation and profiles together) and written by the committer only if
 * the generation is still the same, so a profile committed meanwhile is
 * never lost from it. A range merge takes whole hours from valid rollups
 * and the rest (edges, hours without one) from the profiles, in time order
 * into the same per-partition aggregate: the result is the merge of every
 * profile. Sample labels are kept (rows stay keyed by label set), so a
 * rollup answers any query without profile-label matchers. Each rollup
 * also holds the hour's per-function totals (pprof -top's flat and cum for
 * every sample type), from which series and tops add up hours without
 * materialising any profile. An hour whose profiles cannot be merged
 * (different sample types) gets a marker (profiles = -1) that is never
 * used, so passes do not retry it.
 */
#define _GNU_SOURCE
#include "codec.h"
#include "../pprof/agg.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL /* the one-shot hashes of small keys inline: no call, no dispatch */
#include <xxhash.h>
#include <zstd.h>

enum { K_STR, K_FN, K_MAP, K_LOC, K_STACK, K_LSET, NKINDS };
static const char *const ktable[NKINDS] = {"strings", "functions", "mappings", "locations", "stacks", "labelsets"};

#define DAY_NS (86400LL * 1000000000LL)
#define HOUR_NS PD_ROLLUP_NS
#define MAX_BLOCK PD_STORE_MAX_BLOCK

/* 128-bit content hash -> seq, open addressing with linear probing. A slot
 * holds the whole key next to the value, so a lookup touches one cache
 * line. seq 0 marks an empty slot (seqs are rowids, from 1). */
struct cslot {
	uint64_t lo, hi;
	int64_t seq;
};
struct cache {
	struct cslot *s;
	size_t mask, n;
};

/* A set of probe values (h) taken by the symbols this process created in a
 * partition (pending, being committed or committed). 0 is the empty slot. */
struct uset {
	uint64_t *v;
	size_t mask, n;
	bool zero; /* 0 is in the set */
};

/* A symbol row to insert at the next commit of its partition. */
struct pend {
	int64_t seq;
	uint64_t probe; /* its h */
	size_t off;     /* content: bytes[off, off + len) */
	uint32_t len;
	uint8_t k;
};
struct pendq {
	struct pend *v;
	size_t n, cap;
	struct pd_buf bytes;
};

struct part {
	int64_t day; /* days since the epoch */
	/* reads and ingest lookups (under the store mutex) */
	sqlite3 *db;
	sqlite3_stmt *find[NKINDS], *get[NKINDS], *get_prof, *get_labels;
	/* writes (the committer only) */
	sqlite3 *wdb;
	sqlite3_stmt *ins[NKINDS], *ins_prof, *ins_label, *del_prof, *del_labels;
	sqlite3_stmt *begin, *commit, *rollback, *savepoint, *release, *rollback_to;
	/* rollups: reads (db), writes (wdb, the committer) */
	sqlite3_stmt *gen_get, *range_get, *rollups_get, *rollups_fget, *stale_get;
	sqlite3_stmt *gen_bump, *gen_wget, *ins_rollup;
	/* under the store mutex */
	struct cache cache[NKINDS];
	struct uset used[NKINDS];
	int64_t next[NKINDS]; /* the seq of the next new symbol */
	bool fresh[NKINDS];   /* every row of the table is in the cache: a miss is a new symbol */
	struct pendq pend;
	uint64_t gen; /* bumped when pending symbols are lost (a failed commit) */
	bool rtx;     /* db inside a read transaction (see part_read) */
	atomic_int refs; /* queued jobs: retention does not drop the partition */
	/* the open-partition LRU (under the store mutex) */
	struct sq *s;
	uint64_t last_use; /* tick of its last part_get */
	uint64_t op;       /* the operation (s->opno) holding it, never closed meanwhile */
	bool bad;          /* quarantined: closed once idle, never used again */
};

/* A rollup to write: (service, type, hour) built from generation gen. */
struct rjob {
	const char *service, *type;
	int64_t hour, gen, profiles;
	struct pd_buf hdr, blk, fns;
	bool written; /* false after the commit: the hour changed meanwhile */
};

/* One ingest (in != NULL), removal (pk) or rollup (ru) waiting for its
 * commit. */
struct job {
	struct job *next;
	struct part *pt;
	uint64_t gen;
	const struct pd_ingest *in;
	struct rjob *ru;
	char svc[128], typ[16]; /* removal: the profile's service and type; ingest: the type stored */
	char id[PD_STORE_ID_LEN + 1];
	int64_t created, nsamples;
	struct pd_buf hdr, blk;
	int64_t pk;
	struct pd_err *err;
	int rc;
	bool handled, done;
};

struct sq {
	struct pd_store base;
	char *dir;
	struct pd_pprof_limits lim;
	pthread_mutex_t mu; /* partitions, caches, pending symbols, every db */
	struct part **parts;
	size_t nparts, cap;
	ZSTD_DCtx *dctx; /* reused: ZSTD_decompress would allocate one per block */
	int lock_fd;     /* flock'd <dir>/.lock: one process per data dir */
	/* group commit: the queue, and whether a committer is at work */
	pthread_mutex_t qmu;
	pthread_cond_t qcv; /* a batch is done */
	struct job *qhead, **qtail;
	bool committing;
	/* compression contexts, reused (ZSTD_compress allocates one per call) */
	pthread_mutex_t zmu;
	ZSTD_CCtx *zfree[16];
	int nzfree;
	/* open partitions: at most max_open kept when idle (LRU) */
	size_t max_open;
	uint64_t tick, opno;
	/* damaged partitions (under mu): skipped by queries, refused to writes */
	struct quar *quar;
	size_t nquar, cquar;
	/* the last commit failed for lack of space (message under mu) */
	atomic_bool nospace;
	char nospace_msg[512];
	/* a ballast file (<dir>/.reserve): given back when the disk fills, so
	 * that the WAL can be checkpointed and truncated and deletions can be
	 * written (in WAL mode a full disk otherwise leaves no room to free
	 * any); made again once there is room */
	char *reserve_path;
	size_t reserve_bytes;
	atomic_bool reserve_held;
};

/* A quarantined day: what was wrong, and the file as it was then (a file
 * removed or replaced since is tried again). */
struct quar {
	int64_t day;
	char reason[256];
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

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

#define EMFILE_HINT "too many open files (raise the process's limit, ulimit -n, or lower --max-open-partitions)"

static int sqerr(struct pd_err *err, sqlite3 *db, const char *what)
{
	int c = sqcode(db);
	const char *m = db ? sqlite3_errmsg(db) : "cannot open";
	if (c == PD_ENOSPC)
		return pd_errf(err, c, "store: %s: the disk is full: %s", what, m);
	if (c == PD_EBUSY)
		return pd_errf(err, c, "store: %s: " EMFILE_HINT, what);
	return pd_errf(err, PD_EIO, "store: %s: %s", what, m);
}

static bool sqcorrupt(sqlite3 *db)
{
	int e = sqlite3_errcode(db) & 0xff;
	return e == SQLITE_CORRUPT || e == SQLITE_NOTADB;
}

/* "profd-20261130.db" */
static void day_file(int64_t day, char *buf, size_t n)
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, n, "profd-%04d%02d%02d.db", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

static void day_path(const struct sq *s, int64_t day, char *buf, size_t n)
{
	char f[64];
	day_file(day, f, sizeof f);
	snprintf(buf, n, "%s/%s", s->dir, f);
}

/* ---- disk full ------------------------------------------------------------- */

/* Make the ballast file if the file system has room for it and more. */
static void reserve_make(struct sq *s)
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
static void nospace_relief(struct sq *s, struct part *pt)
{
	if (atomic_exchange(&s->reserve_held, false))
		unlink(s->reserve_path);
	sqlite3_exec(pt->wdb, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
}

/* ---- quarantine ------------------------------------------------------------ */

static struct quar *quar_find(struct sq *s, int64_t day)
{
	for (size_t i = 0; i < s->nquar; i++)
		if (s->quar[i].day == day)
			return &s->quar[i];
	return NULL;
}

static void quar_drop(struct sq *s, struct quar *q) { *q = s->quar[--s->nquar]; }

/* Is day's quarantine still about the file that is there? A file removed
 * (by an operator, or retention) or replaced ends it. Under mu. */
static bool quar_current(struct sq *s, struct quar *q)
{
	char path[4096];
	struct stat sb;
	day_path(s, q->day, path, sizeof path);
	bool exists = stat(path, &sb) == 0;
	if (exists == q->exists && (!exists || (sb.st_dev == q->dev && sb.st_ino == q->ino && sb.st_size == q->size &&
						sb.st_mtim.tv_sec == q->mtime.tv_sec &&
						sb.st_mtim.tv_nsec == q->mtime.tv_nsec)))
		return true;
	quar_drop(s, q);
	return false;
}

/* Quarantine day (under mu): logged once, counted; an open partition of it
 * is marked bad (closed once idle). */
static void quarantine(struct sq *s, int64_t day, const char *reason)
{
	for (size_t i = 0; i < s->nparts; i++)
		if (s->parts[i]->day == day)
			s->parts[i]->bad = true;
	if (quar_find(s, day) || pd_grow((void **)&s->quar, &s->cquar, s->nquar + 1, sizeof *s->quar))
		return;
	struct quar *q = &s->quar[s->nquar++];
	memset(q, 0, sizeof *q);
	q->day = day;
	snprintf(q->reason, sizeof q->reason, "%s", reason);
	char path[4096];
	struct stat sb;
	day_path(s, day, path, sizeof path);
	if ((q->exists = stat(path, &sb) == 0)) {
		q->dev = sb.st_dev;
		q->ino = sb.st_ino;
		q->size = sb.st_size;
		q->mtime = sb.st_mtim;
	}
	char msg[4600];
	snprintf(msg, sizeof msg,
		 "%s is damaged: %s; the day is quarantined: queries skip it (answers say \"partial\"), "
		 "writes to it are refused; see `profd store check --data-dir %s`",
		 path, reason, s->dir);
	pd_log_line(stderr, "error", "store", msg);
}

/* Damage found in partition pt (a checksum, a decode, SQLite's own
 * checks): quarantine it and fail with a message naming the file. */
static int damaged(struct part *pt, struct pd_err *err, const char *fmt, ...) PD_PRINTF(3, 4);
static int damaged(struct part *pt, struct pd_err *err, const char *fmt, ...)
{
	char what[600], f[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	day_file(pt->day, f, sizeof f);
	quarantine(pt->s, pt->day, what);
	return pd_errf(err, PD_EIO, "store: %s: %s (damaged day file: quarantined)", f, what);
}

/* A failed query statement on pt: damage (quarantined) or sqerr. */
static int qerr(struct part *pt, sqlite3 *db, const char *what, struct pd_err *err)
{
	if (sqcorrupt(db))
		return damaged(pt, err, "%s: %s", what, sqlite3_errmsg(db));
	return sqerr(err, db, what);
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0); }

static ZSTD_CCtx *cctx_get(struct sq *s)
{
	ZSTD_CCtx *c = NULL;
	pthread_mutex_lock(&s->zmu);
	if (s->nzfree)
		c = s->zfree[--s->nzfree];
	pthread_mutex_unlock(&s->zmu);
	return c ? c : ZSTD_createCCtx();
}

static void cctx_put(struct sq *s, ZSTD_CCtx *c)
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

static int cache_init(struct cache *c)
{
	c->n = 0;
	c->mask = 1023;
	c->s = calloc(c->mask + 1, sizeof *c->s);
	return c->s ? 0 : PD_ENOMEM;
}

static inline int64_t cache_find(const struct cache *c, XXH128_hash_t h)
{
	for (size_t i = (size_t)h.low64 & c->mask;; i = (i + 1) & c->mask) {
		const struct cslot *s = &c->s[i];
		if (!s->seq)
			return 0;
		if (s->lo == h.low64 && s->hi == h.high64)
			return s->seq;
	}
}

static inline void cache_prefetch(const struct cache *c, XXH128_hash_t h)
{
	__builtin_prefetch(&c->s[(size_t)h.low64 & c->mask]);
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

static void cache_put(struct cache *c, XXH128_hash_t h, int64_t seq)
{
	cslot_put(c->s, c->mask, (struct cslot){h.low64, h.high64, seq});
	c->n++;
}

static int uset_init(struct uset *u)
{
	u->n = 0;
	u->zero = false;
	u->mask = 255;
	u->v = calloc(u->mask + 1, sizeof *u->v);
	return u->v ? 0 : PD_ENOMEM;
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

static void pendq_free(struct pendq *q)
{
	free(q->v);
	pd_buf_free(&q->bytes);
	memset(q, 0, sizeof *q);
}

/* Forget the symbols this process created in pt and did not commit: after
 * a failed commit. Jobs resolved before fail at their commit (gen). */
static void part_reset(struct part *pt)
{
	pt->gen++;
	for (int k = 0; k < NKINDS; k++) {
		memset(pt->cache[k].s, 0, (pt->cache[k].mask + 1) * sizeof *pt->cache[k].s);
		pt->cache[k].n = 0;
		memset(pt->used[k].v, 0, (pt->used[k].mask + 1) * sizeof *pt->used[k].v);
		pt->used[k].n = 0;
		pt->used[k].zero = false;
		pt->fresh[k] = false; /* what was committed is no longer cached */
	}
	pendq_free(&pt->pend);
	/* pt->next stays: seqs only grow, the lost ones are gaps */
}

/* ---- partitions ------------------------------------------------------------ */

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=FULL;"
	"CREATE TABLE IF NOT EXISTS strings(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS functions(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mappings(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS locations(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS stacks(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS labelsets(seq INTEGER PRIMARY KEY, h INTEGER NOT NULL UNIQUE, c BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS profiles(pk INTEGER PRIMARY KEY, xid TEXT NOT NULL UNIQUE, service TEXT NOT NULL,"
	" type TEXT NOT NULL, created INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
	" nsamples INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS profiles_svc ON profiles(service, created);"
	"CREATE TABLE IF NOT EXISTS profile_labels(pk INTEGER NOT NULL, k TEXT NOT NULL, v TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS profile_labels_pk ON profile_labels(pk);"
	"CREATE INDEX IF NOT EXISTS profile_labels_kv ON profile_labels(k, v, pk);"
	/* rollups (see the top of the file); hour = floor(created / 1 h) */
	"CREATE TABLE IF NOT EXISTS hour_gen(service TEXT NOT NULL, type TEXT NOT NULL, hour INTEGER NOT NULL,"
	" gen INTEGER NOT NULL, PRIMARY KEY(service, type, hour)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS rollups(service TEXT NOT NULL, type TEXT NOT NULL, hour INTEGER NOT NULL,"
	" gen INTEGER NOT NULL, profiles INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
	" fns BLOB, UNIQUE(service, type, hour));";

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
static void part_read(struct part *p)
{
	if (!p->rtx && sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK)
		p->rtx = true;
}

static void part_read_end(struct part *p)
{
	if (p->rtx) {
		sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL);
		p->rtx = false;
	}
}

static void part_close(struct part *p);

/* Every operation on partitions runs between store_lock and store_unlock:
 * a partition part_get returned during the operation (p->op == s->opno)
 * stays open until it ends (or part_done releases it), so the LRU never
 * closes one the operation still points at. */
static void store_lock(struct sq *s)
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
static void parts_trim(struct sq *s, size_t keep)
{
	for (size_t i = 0; i < s->nparts;) {
		struct part *p = s->parts[i];
		if (p->bad && part_idle(s, p)) {
			s->parts[i] = s->parts[--s->nparts];
			part_close(p);
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
		part_close(p);
	}
}

/* The operation is done with p (it may be closed from now on). */
static void part_done(struct part *p)
{
	if (!p)
		return;
	part_read_end(p);
	p->op = 0;
}

static void store_unlock(struct sq *s)
{
	for (size_t i = 0; i < s->nparts; i++)
		part_read_end(s->parts[i]);
	s->opno++; /* the operation holds nothing any more */
	parts_trim(s, s->max_open);
	pthread_mutex_unlock(&s->mu);
}

static void part_close(struct part *p)
{
	if (!p)
		return;
	part_read_end(p);
	for (int k = 0; k < NKINDS; k++) {
		sqlite3_finalize(p->find[k]);
		sqlite3_finalize(p->ins[k]);
		sqlite3_finalize(p->get[k]);
		free(p->cache[k].s);
		free(p->used[k].v);
	}
	sqlite3_stmt *st[] = {p->ins_prof,    p->ins_label,   p->get_prof,     p->del_prof,  p->del_labels,
			      p->get_labels,  p->begin,       p->commit,       p->rollback,  p->savepoint,
			      p->release,     p->rollback_to, p->gen_get,      p->range_get, p->rollups_get,
			      p->rollups_fget, p->stale_get,  p->gen_bump,     p->gen_wget,  p->ins_rollup};
	for (size_t i = 0; i < sizeof st / sizeof *st; i++)
		sqlite3_finalize(st[i]);
	pendq_free(&p->pend);
	sqlite3_close(p->db);
	sqlite3_close(p->wdb); /* the last connection: checkpoints and removes the WAL */
	free(p);
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st, struct pd_err *err)
{
	if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return sqerr(err, db, sql);
	return 0;
}

static int open_db(const char *path, bool create, sqlite3 **db, struct pd_err *err)
{
	errno = 0;
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		return sqerr(err, *db, path);
	sqlite3_busy_timeout(*db, 5000);
	return 0;
}

/* The partition of day `day`; created if `create`, else NULL if absent. */
static int part_get(struct sq *s, int64_t day, bool create, struct part **out, struct pd_err *err)
{
	*out = NULL;
	s->tick++;
	char path[4096], f[64];
	day_path(s, day, path, sizeof path);
	day_file(day, f, sizeof f);
	struct quar *qr = quar_find(s, day);
	if (qr && quar_current(s, qr))
		return pd_errf(err, PD_EIO, "store: %s is damaged (%s): quarantined, see `profd store check`", f, qr->reason);
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
	if (existed && sb.st_size == 0) {
		/* SQLite would take an empty file for an empty database: a day
		 * truncated to nothing would silently vanish (and be written
		 * over). A new partition is never empty once created (its
		 * schema is written before any profile). */
		quarantine(s, day, "zero-length file");
		return pd_errf(err, PD_EIO, "store: %s is damaged (zero-length file): quarantined, see `profd store check`",
			       f);
	}
	parts_trim(s, s->max_open > 1 ? s->max_open - 1 : 1);
	struct part *p = calloc(1, sizeof *p);
	if (!p)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	p->day = day;
	p->s = s;
	atomic_init(&p->refs, 0);
	int rc = 0;
	if ((rc = open_db(path, true, &p->wdb, err)) == PD_EBUSY && s->nparts) {
		/* out of descriptors: close every idle partition, then once more */
		sqlite3_close(p->wdb);
		p->wdb = NULL;
		parts_trim(s, 0);
		rc = open_db(path, true, &p->wdb, err);
	}
	if (rc)
		goto fail;
	char *msg = NULL;
	if (sqlite3_exec(p->wdb, schema, NULL, NULL, &msg) != SQLITE_OK) {
		if (existed && sqcorrupt(p->wdb)) {
			quarantine(s, day, msg ? msg : "not a database");
			rc = pd_errf(err, PD_EIO, "store: %s is damaged (%s): quarantined, see `profd store check`", f,
				     msg ? msg : "not a database");
		} else {
			char what[4200];
			snprintf(what, sizeof what, "%s: opening", path);
			rc = sqerr(err, p->wdb, what);
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
		rc = existed && sqcorrupt(p->wdb) ? damaged(p, err, "user_version: %s", sqlite3_errmsg(p->wdb))
						   : sqerr(err, p->wdb, "user_version");
		goto fail;
	}
	if (version < 1 && sqlite3_exec(p->wdb, migrate_v1, NULL, NULL, &msg) != SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: upgrading for rollups: %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_exec(p->wdb, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	if ((rc = open_db(path, false, &p->db, err)))
		goto fail;
	sqlite3_exec(p->db, "PRAGMA query_only=1", NULL, NULL, NULL);
	for (int k = 0; k < NKINDS; k++) {
		char sql[160];
		snprintf(sql, sizeof sql, "SELECT seq, c FROM %s WHERE h = ?", ktable[k]);
		if ((rc = prep(p->db, sql, &p->find[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "INSERT INTO %s(seq, h, c) VALUES(?, ?, ?)", ktable[k]);
		if ((rc = prep(p->wdb, sql, &p->ins[k], err)))
			goto fail;
		snprintf(sql, sizeof sql, "SELECT c FROM %s WHERE seq = ?", ktable[k]);
		if ((rc = prep(p->db, sql, &p->get[k], err)))
			goto fail;
		if (cache_init(&p->cache[k]) || uset_init(&p->used[k])) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto fail;
		}
		/* seqs of new symbols are assigned here (one writer per data dir) */
		sqlite3_stmt *mx;
		snprintf(sql, sizeof sql, "SELECT max(seq) FROM %s", ktable[k]);
		if ((rc = prep(p->db, sql, &mx, err)))
			goto fail;
		int r = sqlite3_step(mx);
		int64_t max = r == SQLITE_ROW ? sqlite3_column_int64(mx, 0) : 0;
		sqlite3_finalize(mx);
		if (r != SQLITE_ROW) {
			rc = existed && sqcorrupt(p->db) ? damaged(p, err, "max(seq): %s", sqlite3_errmsg(p->db))
							 : sqerr(err, p->db, "max(seq)");
			goto fail;
		}
		p->next[k] = max + 1;
		p->fresh[k] = max == 0;
	}
	if ((rc = prep(p->wdb,
		       "INSERT INTO profiles(xid, service, type, created, header, block, nsamples)"
		       " VALUES(?, ?, ?, ?, ?, ?, ?)",
		       &p->ins_prof, err)) ||
	    (rc = prep(p->wdb, "INSERT INTO profile_labels(pk, k, v) VALUES(?, ?, ?)", &p->ins_label, err)) ||
	    (rc = prep(p->db, "SELECT pk, service, type, created, header, block, nsamples FROM profiles WHERE xid = ?",
		       &p->get_prof, err)) ||
	    (rc = prep(p->wdb, "DELETE FROM profiles WHERE pk = ?", &p->del_prof, err)) ||
	    (rc = prep(p->wdb, "DELETE FROM profile_labels WHERE pk = ?", &p->del_labels, err)) ||
	    (rc = prep(p->db, "SELECT k, v FROM profile_labels WHERE pk = ? ORDER BY k, rowid", &p->get_labels, err)) ||
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
		       "SELECT xid, header, block FROM profiles WHERE service = ?1 AND type = ?2"
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
	part_close(p);
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

/* Read back a symbol's stored content into buf. */
static int sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	sqlite3_stmt *g = p->get[k];
	sqlite3_reset(g);
	sqlite3_bind_int64(g, 1, seq);
	int r = sqlite3_step(g);
	if (r != SQLITE_ROW) {
		sqlite3_reset(g);
		if (r != SQLITE_DONE && !sqcorrupt(p->db))
			return sqerr(err, p->db, "symbol");
		return damaged(p, err, "%s #%lld missing", ktable[k], (long long)seq);
	}
	buf->len = 0;
	int rc = pd_buf_append(buf, sqlite3_column_blob(g, 0), (size_t)sqlite3_column_bytes(g, 0));
	sqlite3_reset(g);
	return rc ? pd_errf(err, rc, "out of memory") : 0;
}

/* ---- ingest: hash, resolve, encode ------------------------------------------------ */

struct ing {
	struct part *pt;
	const struct pd_profile *p;
	struct pd_err *err;
	/* content hashes: per string, function, mapping, location; per sample
	 * its stack (kh) and label set (bh, if it has labels) */
	XXH128_hash_t *sh, *fh, *mh, *lh, *kh, *bh;
	/* seqs, 0 = not resolved yet; per sample: stack, label set (0 = none) */
	int64_t *ss, *fs, *ms, *ls, *stk, *lset;
	struct pd_buf tmp; /* content being hashed or encoded */
};

static XXH128_hash_t h128(const void *p, size_t n, uint64_t seed) { return XXH3_128bits_withSeed(p, n, seed); }

static int nomem(struct ing *g) { return pd_errf(g->err, PD_ENOMEM, "out of memory"); }

/* g->tmp emptied with room for n bytes (never NULL unless out of memory) */
static inline uint8_t *tmp_room(struct ing *g, size_t n)
{
	g->tmp.len = 0;
	if (PD_LIKELY(n < g->tmp.cap))
		return g->tmp.ptr;
	return pd_buf_reserve(&g->tmp, n + 1) ? NULL : g->tmp.ptr;
}

/*
 * Step 2: the content hash of every symbol. Each is the hash of its
 * children's hashes and its own fields, in a fixed layout (the h column
 * of existing partitions depends on it: never change it):
 *   string    its bytes                                       seed K_STR
 *   function  name, system name, file hashes; start line      seed K_FN
 *   mapping   size rounded up to 4 KiB, file offset, hash of
 *             build id (or file if none) — pprof's merge key  seed K_MAP
 *   location  mapping hash (0 if none), address relative to the mapping,
 *             folded byte; per line: function hash, line, column  K_LOC
 *   stack     its location hashes                             seed K_STACK
 *   label set per label: key hash, string hash, number, unit hash  K_LSET
 * (integers little-endian 8 bytes, hashes 16 bytes low half first).
 */
static int ing_hash(struct ing *g)
{
	const struct pd_profile *p = g->p;
	for (uint32_t i = 0; i < p->nstrings; i++)
		g->sh[i] = h128(p->strings[i].ptr, p->strings[i].len, K_STR);
	for (uint32_t i = 0; i < p->nfunctions; i++) {
		const struct pd_function *f = &p->functions[i];
		uint8_t hk[3 * sizeof(XXH128_hash_t) + 8];
		memcpy(hk, &g->sh[f->name], 16);
		memcpy(hk + 16, &g->sh[f->system_name], 16);
		memcpy(hk + 32, &g->sh[f->filename], 16);
		memcpy(hk + 48, &f->start_line, 8);
		g->fh[i] = h128(hk, sizeof hk, K_FN);
	}
	for (uint32_t i = 0; i < p->nmappings; i++) {
		const struct pd_mapping *m = &p->mappings[i];
		uint64_t size = m->limit - m->start;
		size = (size + 0xfff) - ((size + 0xfff) % 0x1000);
		uint32_t file = m->build_id ? m->build_id : m->filename;
		uint8_t hk[16 + sizeof(XXH128_hash_t)];
		memcpy(hk, &size, 8);
		memcpy(hk + 8, &m->offset, 8);
		memcpy(hk + 16, &g->sh[file], 16);
		g->mh[i] = h128(hk, sizeof hk, K_MAP);
	}
	for (uint32_t i = 0; i < p->nlocations; i++) {
		const struct pd_location *l = &p->locations[i];
		uint8_t *b = tmp_room(g, 25 + 32 * (size_t)l->nlines);
		if (!b)
			return nomem(g);
		XXH128_hash_t mh = {0, 0};
		uint64_t rel = l->address;
		if (l->mapping != PD_NONE) {
			mh = g->mh[l->mapping];
			rel = l->address - p->mappings[l->mapping].start;
		}
		memcpy(b, &mh, 16);
		memcpy(b + 16, &rel, 8);
		b[24] = l->is_folded;
		size_t o = 25;
		for (uint32_t j = 0; j < l->nlines; j++, o += 32) {
			const struct pd_line *ln = &l->lines[j];
			memcpy(b + o, &g->fh[ln->function], 16);
			memcpy(b + o + 16, &ln->line, 8);
			memcpy(b + o + 24, &ln->column, 8);
		}
		g->lh[i] = h128(b, o, K_LOC);
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		size_t n = 16 * (size_t)s->nlocs, nl = 56 * (size_t)s->nlabels;
		uint8_t *b = tmp_room(g, n > nl ? n : nl);
		if (!b)
			return nomem(g);
		for (uint32_t j = 0; j < s->nlocs; j++)
			memcpy(b + 16 * j, &g->lh[s->locs[j]], 16);
		g->kh[i] = h128(b, n, K_STACK);
		if (!s->nlabels)
			continue;
		/* labels in the order the sample has them: pprof reads them into maps */
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pd_label *l = &s->labels[j];
			memcpy(b + 56 * j, &g->sh[l->key], 16);
			memcpy(b + 56 * j + 16, &g->sh[l->str], 16);
			memcpy(b + 56 * j + 32, &l->num, 8);
			memcpy(b + 56 * j + 40, &g->sh[l->num_unit], 16);
		}
		g->bh[i] = h128(b, nl, K_LSET);
	}
	return 0;
}

/*
 * A symbol of kind k with hash h that the cache does not know, with stored
 * content c[0..n) (the first `key` bytes decide identity; mappings keep
 * first-seen fields after their key): its seq, from the table if it is
 * there, else a new pending one. Under the store mutex.
 */
static int sym_new(struct ing *g, int k, XXH128_hash_t h, const uint8_t *c, size_t n, size_t key, int64_t *seq)
{
	struct part *p = g->pt;
	struct pendq *q = &p->pend;
	/* room first: past here nothing fails half-way */
	if (n > UINT32_MAX)
		return pd_errf(g->err, PD_ELIMIT, "store: a %s symbol of %zu bytes", ktable[k], n);
	if (cache_reserve(&p->cache[k]) || uset_reserve(&p->used[k]) ||
	    pd_grow((void **)&q->v, &q->cap, q->n + 1, sizeof *q->v) || pd_buf_reserve(&q->bytes, n))
		return nomem(g);
	uint64_t probe = h.low64;
	for (int tries = 0; tries < 64; tries++, probe = pd_hash_u64(probe + 1)) {
		if (!p->fresh[k]) {
			part_read(p);
			sqlite3_stmt *f = p->find[k];
			sqlite3_reset(f);
			sqlite3_bind_int64(f, 1, (int64_t)probe);
			int r = sqlite3_step(f);
			if (r == SQLITE_ROW) {
				const void *oc = sqlite3_column_blob(f, 1);
				size_t on = (size_t)sqlite3_column_bytes(f, 1);
				bool same = on >= key && key <= n && (key == 0 || memcmp(oc, c, key) == 0) &&
					    (key != n || on == n);
				int64_t os = sqlite3_column_int64(f, 0);
				sqlite3_reset(f);
				if (same) {
					*seq = os;
					cache_put(&p->cache[k], h, os);
					return 0;
				}
				continue; /* a collision: probe the next hash */
			}
			sqlite3_reset(f);
			if (r != SQLITE_DONE)
				return sqerr(g->err, p->db, "symbol lookup");
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
	return pd_errf(g->err, PD_EIO, "store: 64 hash collisions in a row in %s (corrupt partition?)", ktable[k]);
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
	/* identity = pprof's merge key (see ing_hash) */
	uint64_t size = m->limit - m->start;
	size = (size + 0xfff) - ((size + 0xfff) % 0x1000);
	uint32_t file = m->build_id ? m->build_id : m->filename;
	uint64_t flags = (uint64_t)m->has_functions | (uint64_t)m->has_filenames << 1 |
			 (uint64_t)m->has_line_numbers << 2 | (uint64_t)m->has_inline_frames << 3;
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
		if ((rc = res_map(g, i)))
			return rc;
	return 0;
}

/* Step 4: header blob, everything of the profile that is not a sample. */
static int enc_header(struct ing *g, struct pd_buf *h)
{
	const struct pd_profile *p = g->p;
	size_t n = 13 + 2 * (size_t)p->nsample_types + p->ncomments + p->nmappings;
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
	h->len = (size_t)(e - h->ptr);
	return 0;
}

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

/* Step 4: the sample block: rows (stack, label set, values) sorted by
 * stack and label set, stacks delta-encoded, varints, zstd. */
static int enc_block(struct sq *s, struct ing *g, struct pd_buf *out)
{
	const struct pd_profile *p = g->p;
	size_t n = p->nsamples;
	uint32_t nv = p->nsample_types;
	uint32_t *order = malloc((n + 1) * sizeof *order);
	struct pd_buf raw = PD_BUF_INIT(0);
	int rc = 0;
	if (!order || n > UINT32_MAX)
		goto oom;
	bool fits = true; /* both seqs < 2^32: sort 64-bit keys */
	for (size_t i = 0; i < n && fits; i++)
		fits = (uint64_t)g->stk[i] >> 32 == 0 && (uint64_t)g->lset[i] >> 32 == 0;
	if (fits) {
		struct skey *k = malloc(2 * n * sizeof *k + 1);
		if (!k)
			goto oom;
		for (size_t i = 0; i < n; i++)
			k[i] = (struct skey){(uint64_t)g->stk[i] << 32 | (uint64_t)g->lset[i], i};
		sort_keys(k, k + n, n);
		for (size_t i = 0; i < n; i++)
			order[i] = (uint32_t)k[i].i;
		free(k);
	} else {
		struct row *r = malloc(n * sizeof *r + 1);
		if (!r)
			goto oom;
		for (size_t i = 0; i < n; i++)
			r[i] = (struct row){g->stk[i], g->lset[i], (uint32_t)i};
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
		PD_PV(e, g->stk[o] - prev);
		PD_PV(e, g->lset[o]);
		prev = g->stk[o];
		const int64_t *v = p->samples[o].values;
		for (uint32_t j = 0; j < nv; j++)
			PD_PV(e, pd_zz(v[j]));
	}
	raw.len = (size_t)(e - raw.ptr);
	if (raw.len > MAX_BLOCK) {
		rc = pd_errf(g->err, PD_ELIMIT, "store: sample block over %u bytes", MAX_BLOCK);
		goto out;
	}
	ZSTD_CCtx *z = cctx_get(s);
	if (!z)
		goto oom;
	rc = pd_enc_zstd(z, &raw, out, g->err);
	cctx_put(s, z);
	goto out;
oom:
	rc = nomem(g);
out:
	free(order);
	pd_buf_free(&raw);
	return rc;
}

/* ---- group commit ------------------------------------------------------------------ */

static int wstep(sqlite3_stmt *st)
{
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	return r == SQLITE_DONE || r == SQLITE_ROW ? SQLITE_OK : r;
}

/* A rollup job: written only if the hour's generation is still the one
 * it was built from (else r->written stays false; not an error). */
static int rollup_apply(struct part *pt, struct job *j)
{
	struct rjob *r = j->ru;
	sqlite3_stmt *g = pt->gen_wget;
	sqlite3_bind_text(g, 1, r->service, -1, SQLITE_STATIC);
	sqlite3_bind_text(g, 2, r->type, -1, SQLITE_STATIC);
	sqlite3_bind_int64(g, 3, r->hour);
	int step = sqlite3_step(g);
	int64_t gen = step == SQLITE_ROW ? sqlite3_column_int64(g, 0) : 0;
	sqlite3_reset(g);
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		return sqerr(j->err, pt->wdb, "rollup generation");
	if (gen != r->gen)
		return 0;
	sqlite3_stmt *st = pt->ins_rollup;
	sqlite3_bind_text(st, 1, r->service, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->type, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, r->hour);
	sqlite3_bind_int64(st, 4, r->gen);
	sqlite3_bind_int64(st, 5, r->profiles);
	sqlite3_bind_blob(st, 6, r->hdr.ptr ? (const void *)r->hdr.ptr : "", (int)r->hdr.len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 7, r->blk.ptr ? (const void *)r->blk.ptr : "", (int)r->blk.len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 8, r->fns.ptr ? (const void *)r->fns.ptr : "", (int)r->fns.len, SQLITE_STATIC);
	int rc = wstep(st);
	sqlite3_clear_bindings(st);
	if (rc)
		return sqerr(j->err, pt->wdb, "insert rollup");
	r->written = true;
	return 0;
}

/* One job's rows, inside the batch's transaction. */
static int job_apply(struct part *pt, struct job *j)
{
	sqlite3_stmt *st;
	if (j->ru)
		return rollup_apply(pt, j);
	if (!j->in) {
		sqlite3_bind_int64(pt->del_labels, 1, j->pk);
		sqlite3_bind_int64(pt->del_prof, 1, j->pk);
		if (wstep(pt->del_labels) || wstep(pt->del_prof))
			return sqerr(j->err, pt->wdb, "delete");
		return 0;
	}
	st = pt->ins_prof;
	sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, j->in->service, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, j->typ, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, j->created);
	sqlite3_bind_blob(st, 5, j->hdr.ptr ? (const void *)j->hdr.ptr : "", (int)j->hdr.len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 6, j->blk.ptr ? (const void *)j->blk.ptr : "", (int)j->blk.len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, j->nsamples);
	int r = wstep(st);
	sqlite3_clear_bindings(st);
	if (r)
		return sqerr(j->err, pt->wdb, "insert profile");
	int64_t pk = sqlite3_last_insert_rowid(pt->wdb);
	for (size_t i = 0; i < j->in->nlabels; i++) {
		st = pt->ins_label;
		sqlite3_bind_int64(st, 1, pk);
		sqlite3_bind_text(st, 2, j->in->labels[i].key, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, j->in->labels[i].value, -1, SQLITE_STATIC);
		if (wstep(st))
			return sqerr(j->err, pt->wdb, "insert label");
	}
	return 0;
}

/* Commit the jobs of batch that are for partition pt: one transaction
 * with every pending symbol of pt, each job in a savepoint. */
static void commit_part(struct sq *s, struct part *pt, struct job *batch)
{
	pthread_mutex_lock(&s->mu);
	struct pendq q = pt->pend; /* ours now: symbols resolved from here on are for the next commit */
	memset(&pt->pend, 0, sizeof pt->pend);
	uint64_t gen = pt->gen;
	size_t live = 0;
	for (struct job *j = batch; j; j = j->next) {
		if (j->pt != pt)
			continue;
		j->handled = true;
		if (j->in && j->gen != gen)
			j->rc = pd_errf(j->err, PD_EIO, "store: not stored: an earlier commit failed; retry");
		else
			live++;
	}
	pthread_mutex_unlock(&s->mu);
	if (!live && !q.n) {
		pendq_free(&q);
		return;
	}
	const char *what = "begin";
	if (wstep(pt->begin))
		goto fail;
	what = "insert symbol";
	for (size_t i = 0; i < q.n; i++) {
		const struct pend *e = &q.v[i];
		sqlite3_stmt *st = pt->ins[e->k];
		sqlite3_bind_int64(st, 1, e->seq);
		sqlite3_bind_int64(st, 2, (int64_t)e->probe);
		/* a NULL pointer would bind SQL NULL: the empty stack is a zero-length blob */
		sqlite3_bind_blob(st, 3, e->len ? (const void *)(q.bytes.ptr + e->off) : "", (int)e->len, SQLITE_STATIC);
		if (wstep(st))
			goto fail;
	}
	for (struct job *j = batch; j; j = j->next) {
		if (j->pt != pt || (j->in && j->gen != gen))
			continue;
		/* a job of one statement needs no savepoint: a statement that
		 * fails is undone alone */
		bool sp = !j->ru && (!j->in || j->in->nlabels);
		if (sp && wstep(pt->savepoint)) {
			what = "savepoint";
			goto fail;
		}
		j->rc = job_apply(pt, j);
		if (sqlite3_get_autocommit(pt->wdb)) { /* SQLite rolled it all back (I/O error, disk full) */
			what = "transaction";
			goto fail;
		}
		if (sp && j->rc && wstep(pt->rollback_to)) {
			what = "rollback to savepoint";
			goto fail;
		}
		if (sp && wstep(pt->release)) {
			what = "release savepoint";
			goto fail;
		}
	}
	/* the hours whose profiles changed: their rollups are stale now */
	what = "hour generation";
	for (struct job *j = batch; j; j = j->next) {
		if (j->pt != pt || j->ru || j->rc)
			continue;
		sqlite3_stmt *st = pt->gen_bump;
		sqlite3_bind_text(st, 1, j->in ? j->in->service : j->svc, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, j->typ, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, floor_div(j->created, HOUR_NS));
		if (wstep(st))
			goto fail;
	}
	what = "commit";
	if (wstep(pt->commit))
		goto fail;
	pendq_free(&q);
	bool full = false;
	for (struct job *j = batch; j; j = j->next)
		full = full || (j->pt == pt && j->rc == PD_ENOSPC);
	if (full) {
		pthread_mutex_lock(&s->mu);
		atomic_store(&s->nospace, true);
		snprintf(s->nospace_msg, sizeof s->nospace_msg, "store: the disk is full: a profile could not be written");
		pthread_mutex_unlock(&s->mu);
		nospace_relief(s, pt);
	} else if (atomic_load(&s->nospace)) {
		atomic_store(&s->nospace, false); /* space again: writes work */
		reserve_make(s);
	}
	return;
fail:;
	/* the transaction fails as a whole: every job of it, and the pending
	 * symbols are lost */
	struct pd_err e;
	char fw[128], f[64];
	day_file(pt->day, f, sizeof f);
	snprintf(fw, sizeof fw, "%s: %s", f, what);
	sqerr(&e, pt->wdb, fw);
	if (!sqlite3_get_autocommit(pt->wdb))
		wstep(pt->rollback);
	for (struct job *j = batch; j; j = j->next)
		if (j->pt == pt && (!j->in || j->gen == gen)) {
			*j->err = e;
			j->rc = e.code;
		}
	pthread_mutex_lock(&s->mu);
	if (pt->gen == gen)
		part_reset(pt);
	if (e.code == PD_ENOSPC) {
		atomic_store(&s->nospace, true);
		snprintf(s->nospace_msg, sizeof s->nospace_msg, "%s", e.msg);
	}
	pthread_mutex_unlock(&s->mu);
	if (e.code == PD_ENOSPC)
		nospace_relief(s, pt);
	pendq_free(&q);
}

static void commit_batch(struct sq *s, struct job *batch)
{
	for (struct job *j = batch; j; j = j->next)
		j->handled = false;
	for (struct job *j = batch; j; j = j->next)
		if (!j->handled)
			commit_part(s, j->pt, batch);
	for (struct job *j = batch; j; j = j->next)
		atomic_fetch_sub(&j->pt->refs, 1);
}

/* Queue job j (its partition referenced: refs) and return once it is
 * committed or has failed (j->rc). The first caller that finds no commit
 * at work becomes the committer: it commits everything queued (its own job
 * included) and wakes the others; the jobs that arrive meanwhile queue up
 * for the next batch. (A commit delay — the committer waiting a little for
 * more jobs — made no difference beyond the noise of bench/serve.sh.) */
static void submit(struct sq *s, struct job *j)
{
	pthread_mutex_lock(&s->qmu);
	j->next = NULL;
	j->done = false;
	*s->qtail = j;
	s->qtail = &j->next;
	while (!j->done) {
		if (s->committing) {
			pthread_cond_wait(&s->qcv, &s->qmu);
			continue;
		}
		s->committing = true;
		struct job *batch = s->qhead;
		s->qhead = NULL;
		s->qtail = &s->qhead;
		pthread_mutex_unlock(&s->qmu);
		commit_batch(s, batch);
		pthread_mutex_lock(&s->qmu);
		for (struct job *b = batch, *next; b; b = next) {
			next = b->next; /* b may be gone once done is seen */
			b->done = true;
		}
		s->committing = false;
		pthread_cond_broadcast(&s->qcv);
	}
	pthread_mutex_unlock(&s->qmu);
}

static const char *const known_types[] = {"cpu", "heap", "allocs", "block", "mutex", "goroutine", "threadcreate",
					  "other"};

static int sq_ingest(struct pd_store *base, const struct pd_ingest *in, const uint8_t *data, size_t len,
		     struct pd_profile_meta *out, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	memset(out, 0, sizeof *out);
	if (!in->service || !*in->service || strlen(in->service) >= sizeof out->service)
		return pd_errf(err, PD_EINVAL, "service must be 1..%zu bytes", sizeof out->service - 1);
	bool known = !in->type; /* NULL: inferred below */
	for (size_t i = 0; i < sizeof known_types / sizeof *known_types && in->type; i++)
		known = known || !strcmp(in->type, known_types[i]);
	if (!known)
		return pd_errf(err, PD_EINVAL, "unknown profile type \"%s\"", in->type ? in->type : "");
	/* 1. decode, within the memory budget (the model and this ingest's own
	 * per-sample and per-symbol arrays) */
	struct pd_profile *p = NULL;
	struct pd_pprof_limits lim = s->lim;
	lim.extra_per_sample = PD_INGEST_BYTES_PER_SAMPLE;
	lim.extra_per_symbol = PD_INGEST_BYTES_PER_SYMBOL;
	lim.reserve = in->reserve;
	lim.reserve_ctx = in->reserve_ctx;
	int rc = pd_pprof_decode(data, len, &lim, &p, err);
	if (rc) {
		if (rc != PD_EBUSY)
			pd_err_prefix(err, rc == PD_ELIMIT ? "profile over a limit" : "malformed profile");
		return rc;
	}
	if (p->nsamples == 0) {
		pd_profile_free(p);
		return pd_errf(err, PD_EINVAL, "malformed profile: profile is empty: no samples");
	}
	/* the declared type must be what the profile is (a CPU profile stored as
	 * heap would break every heap merge); none declared: inferred */
	const char *type;
	if ((rc = pd_profile_check_type(p, in->type, &type, err))) {
		pd_profile_free(p);
		return rc;
	}
	/* a label set's identity must not depend on the order a client wrote
	 * the labels in (pprof's merge keys them sorted) */
	pd_profile_sort_labels(p);
	int64_t created = in->created_ns ? in->created_ns : p->time_nanos;
	if (!created) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		created = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	/* the id holds 32 bits of unix seconds: a time it cannot hold would be
	 * acknowledged and never found again */
	if (created < 0 || created / 1000000000 > (int64_t)UINT32_MAX) {
		pd_profile_free(p);
		return pd_errf(err, PD_EINVAL,
			       "the profile's time (%s %lld ns since the epoch) is outside what profd stores: "
			       "1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z",
			       in->created_ns ? "created_at" : "time_nanos", (long long)created);
	}
	if (in->min_created_ns && created < in->min_created_ns) {
		pd_profile_free(p);
		struct tm tm;
		time_t sec = (time_t)(created / 1000000000 - (created % 1000000000 < 0));
		char ts[40];
		gmtime_r(&sec, &tm);
		strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
		return pd_errf(err, PD_EEXPIRED, "the profile's time %s is older than the retention window: not stored",
			       ts);
	}
	if (in->max_created_ns && created > in->max_created_ns) {
		pd_profile_free(p);
		struct tm tm;
		time_t sec = (time_t)(created / 1000000000);
		char ts[40];
		gmtime_r(&sec, &tm);
		strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
		return pd_errf(err, PD_EINVAL,
			       "the profile's time %s (%s) is too far in the future: more than the allowed clock skew "
			       "(--max-future-skew) ahead of the collector's clock: not stored",
			       ts, in->created_ns ? "created_at" : "time_nanos");
	}
	/* 2. hash */
	struct ing g = {.p = p, .err = err};
	struct job j = {.in = in, .err = err, .created = created, .nsamples = (int64_t)p->nsamples,
			.hdr = PD_BUF_INIT(0), .blk = PD_BUF_INIT(MAX_BLOCK)};
	size_t nh = (size_t)p->nstrings + p->nfunctions + p->nmappings + p->nlocations + 2 * p->nsamples;
	XXH128_hash_t *hs = malloc(nh * sizeof *hs + 1);
	int64_t *seqs = calloc(nh + 1, sizeof *seqs);
	if (!hs || !seqs) {
		rc = nomem(&g);
		goto out;
	}
	g.sh = hs, g.fh = g.sh + p->nstrings, g.mh = g.fh + p->nfunctions, g.lh = g.mh + p->nmappings;
	g.kh = g.lh + p->nlocations, g.bh = g.kh + p->nsamples;
	g.ss = seqs, g.fs = g.ss + p->nstrings, g.ms = g.fs + p->nfunctions, g.ls = g.ms + p->nmappings;
	g.stk = g.ls + p->nlocations, g.lset = g.stk + p->nsamples;
	if ((rc = ing_hash(&g)))
		goto out;
	/* 3. resolve */
	store_lock(s);
	struct part *pt;
	if (!(rc = part_get(s, floor_div(created, DAY_NS), true, &pt, err))) {
		g.pt = pt;
		if (!(rc = ing_resolve(&g))) {
			atomic_fetch_add(&pt->refs, 1);
			j.pt = pt;
			j.gen = pt->gen;
		}
	}
	store_unlock(s);
	if (rc)
		goto out;
	/* 4. encode (each blob checksummed, seeded by the profile's id), commit */
	pd_xid_new(created, j.id);
	if (pd_blob_begin(&j.hdr) || pd_blob_begin(&j.blk))
		rc = nomem(&g);
	if (rc || (rc = enc_header(&g, &j.hdr)) || (rc = enc_block(s, &g, &j.blk))) {
		atomic_fetch_sub(&pt->refs, 1);
		goto out;
	}
	pd_blob_seal(&j.hdr, 0, pd_blob_seed(j.id, PD_STORE_ID_LEN, PD_BLOB_HEADER));
	pd_blob_seal(&j.blk, 0, pd_blob_seed(j.id, PD_STORE_ID_LEN, PD_BLOB_BLOCK));
	free(hs), free(seqs), pd_buf_free(&g.tmp);
	hs = NULL, seqs = NULL;
	pd_profile_free(p);
	p = NULL;
	snprintf(j.typ, sizeof j.typ, "%s", type);
	submit(s, &j);
	if ((rc = j.rc))
		goto out;
	memcpy(out->id, j.id, sizeof out->id);
	snprintf(out->service, sizeof out->service, "%s", in->service);
	snprintf(out->type, sizeof out->type, "%s", type);
	out->created_ns = created;
	out->stored_bytes = j.hdr.len + j.blk.len;
	if (in->nlabels) {
		out->labels = calloc(in->nlabels, sizeof *out->labels);
		for (size_t i = 0; out->labels && i < in->nlabels; i++) {
			out->labels[i].key = strdup(in->labels[i].key);
			out->labels[i].value = strdup(in->labels[i].value);
			out->nlabels++;
		}
	}
out:
	free(hs);
	free(seqs);
	pd_buf_free(&g.tmp);
	pd_buf_free(&j.hdr);
	pd_buf_free(&j.blk);
	pd_profile_free(p);
	return rc;
}

/* ---- reading: header, block, materialisation ------------------------------------ */

/* int64 -> dense index. Symbol seqs are small dense integers (SQLite
 * rowids from 1), so they index an array directly; anything else (never
 * seen in practice) goes through a hash index. */
#define REMAP_DIRECT_MAX (1 << 26)
struct remap {
	struct pd_hidx idx;
	int64_t *keys;
	size_t n, cap;
	uint32_t *direct; /* direct[k] = index + 1, 0 = absent */
	size_t dcap;
};

struct rkey {
	const struct remap *r;
	int64_t k;
};

static bool remap_eq(void *ctx, uint32_t v)
{
	const struct rkey *k = ctx;
	return k->r->keys[v] == k->k;
}

static int remap_new(struct remap *r, int64_t k, uint32_t *idx)
{
	if (r->n >= UINT32_MAX - 1 || pd_grow((void **)&r->keys, &r->cap, r->n + 1, sizeof *r->keys))
		return PD_ENOMEM;
	r->keys[r->n] = k;
	*idx = (uint32_t)r->n++;
	return 0;
}

/* Index of key k; *added = true if it is new (then index == n - 1). */
static inline int remap_get(struct remap *r, int64_t k, uint32_t *idx, bool *added)
{
	if (PD_LIKELY(k >= 0 && k < REMAP_DIRECT_MAX)) {
		if (PD_UNLIKELY((size_t)k >= r->dcap)) {
			size_t nc = r->dcap ? r->dcap : 1024;
			while (nc <= (size_t)k)
				nc *= 2;
			uint32_t *d = realloc(r->direct, nc * sizeof *d);
			if (!d)
				return PD_ENOMEM;
			memset(d + r->dcap, 0, (nc - r->dcap) * sizeof *d);
			r->direct = d;
			r->dcap = nc;
		}
		uint32_t v = r->direct[k];
		*added = v == 0;
		if (v) {
			*idx = v - 1;
			return 0;
		}
		if (remap_new(r, k, idx))
			return PD_ENOMEM;
		r->direct[k] = *idx + 1;
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

static void remap_free(struct remap *r)
{
	pd_hidx_free(&r->idx);
	free(r->keys);
	free(r->direct);
}

/* Builds a pd_profile out of a partition's symbols, only those used. The
 * arrays grow while symbols are discovered and move into the profile's
 * arena at the end. */
struct mat {
	struct part *pt;
	struct pd_err *err;
	struct pd_profile *p;
	struct remap rs, rf, rm, rl, rstk, rls;
	struct pd_str *strs;
	struct pd_function *fns;
	struct pd_mapping *maps;
	struct pd_location *locs;
	struct {
		uint32_t *locs, n;
	} *stacks;
	struct {
		struct pd_label *l;
		uint32_t n;
	} *lsets;
	size_t cs, cf, cm, cl, cstk, cls;
	struct pd_buf b;
};

static int mat_init(struct mat *m, struct part *pt, struct pd_err *err)
{
	memset(m, 0, sizeof *m);
	m->pt = pt;
	m->err = err;
	m->p = calloc(1, sizeof *m->p);
	if (!m->p || !(m->p->arena = pd_arena_new(256 * 1024)) || pd_hidx_init(&m->rs.idx, 1024) ||
	    pd_hidx_init(&m->rf.idx, 1024) || pd_hidx_init(&m->rm.idx, 16) || pd_hidx_init(&m->rl.idx, 1024) ||
	    pd_hidx_init(&m->rstk.idx, 1024) || pd_hidx_init(&m->rls.idx, 64))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

static void mat_free(struct mat *m)
{
	remap_free(&m->rs), remap_free(&m->rf), remap_free(&m->rm), remap_free(&m->rl);
	remap_free(&m->rstk), remap_free(&m->rls);
	free(m->strs), free(m->fns), free(m->maps), free(m->locs), free(m->stacks), free(m->lsets);
	pd_buf_free(&m->b);
	pd_profile_free(m->p);
}

#define NOMEM(m) pd_errf((m)->err, PD_ENOMEM, "out of memory")

static int mat_str(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rs, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_STR, seq, &m->b, m->err);
	if (rc)
		return rc;
	if (pd_grow((void **)&m->strs, &m->cs, m->rs.n, sizeof *m->strs))
		return NOMEM(m);
	char *c = m->b.len ? pd_arena_dup(m->p->arena, m->b.ptr, m->b.len) : (char *)"";
	if (!c)
		return NOMEM(m);
	m->strs[*out] = (struct pd_str){c, (uint32_t)m->b.len};
	return 0;
}

static int mat_fn(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rf, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_FN, seq, &m->b, m->err);
	if (rc)
		return rc;
	struct pd_rd r = {m->b.ptr, m->b.ptr + m->b.len, false};
	int64_t name = (int64_t)pd_rd_v(&r), sys = (int64_t)pd_rd_v(&r), file = (int64_t)pd_rd_v(&r);
	int64_t sl = pd_unzz(pd_rd_v(&r));
	if (r.bad)
		return damaged(m->pt, m->err, "corrupt function #%lld", (long long)seq);
	struct pd_function f = {*out + 1, 0, 0, 0, sl};
	if ((rc = mat_str(m, name, &f.name)) || (rc = mat_str(m, sys, &f.system_name)) ||
	    (rc = mat_str(m, file, &f.filename)))
		return rc;
	if (pd_grow((void **)&m->fns, &m->cf, m->rf.n, sizeof *m->fns))
		return NOMEM(m);
	m->fns[*out] = f;
	return 0;
}

static int mat_map(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rm, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_MAP, seq, &m->b, m->err);
	if (rc)
		return rc;
	struct pd_rd r = {m->b.ptr, m->b.ptr + m->b.len, false};
	(void)pd_rd_v(&r); /* key: size, offset, build id or file */
	uint64_t offset = pd_rd_v(&r);
	(void)pd_rd_v(&r);
	uint64_t start = pd_rd_v(&r), limit = pd_rd_v(&r);
	int64_t file = (int64_t)pd_rd_v(&r), build = (int64_t)pd_rd_v(&r);
	uint64_t flags = pd_rd_v(&r);
	if (r.bad)
		return damaged(m->pt, m->err, "corrupt mapping #%lld", (long long)seq);
	struct pd_mapping mp = {*out + 1, start, limit, offset, 0, 0, flags & 1, flags >> 1 & 1, flags >> 2 & 1,
				flags >> 3 & 1};
	if ((rc = mat_str(m, file, &mp.filename)) || (rc = mat_str(m, build, &mp.build_id)))
		return rc;
	if (pd_grow((void **)&m->maps, &m->cm, m->rm.n, sizeof *m->maps))
		return NOMEM(m);
	m->maps[*out] = mp;
	return 0;
}

static int mat_loc(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rl, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	/* its own buffer: the children read below reuse m->b */
	struct pd_buf own = PD_BUF_INIT(0);
	int rc = sym_get(m->pt, K_LOC, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	int64_t mseq = (int64_t)pd_rd_v(&r);
	uint64_t rel = pd_rd_v(&r);
	bool folded = pd_rd_v(&r) != 0;
	uint32_t nl = (uint32_t)pd_rd_v(&r);
	struct pd_location l = {*out + 1, rel, PD_NONE, 0, NULL, folded};
	if (r.bad || nl > n) {
		pd_buf_free(&own);
		return damaged(m->pt, m->err, "corrupt location #%lld", (long long)seq);
	}
	if (mseq && (rc = mat_map(m, mseq, &l.mapping))) {
		pd_buf_free(&own);
		return rc;
	}
	if (l.mapping != PD_NONE)
		l.address = m->maps[l.mapping].start + rel;
	if (nl && !(l.lines = pd_arena_alloc(m->p->arena, nl * sizeof *l.lines))) {
		pd_buf_free(&own);
		return NOMEM(m);
	}
	for (uint32_t j = 0; j < nl; j++) {
		int64_t f = (int64_t)pd_rd_v(&r);
		l.lines[j].line = pd_unzz(pd_rd_v(&r));
		l.lines[j].column = pd_unzz(pd_rd_v(&r));
		if (r.bad) {
			pd_buf_free(&own);
			return damaged(m->pt, m->err, "corrupt location #%lld", (long long)seq);
		}
		if ((rc = mat_fn(m, f, &l.lines[j].function))) {
			pd_buf_free(&own);
			return rc;
		}
		l.nlines++;
	}
	pd_buf_free(&own);
	if (pd_grow((void **)&m->locs, &m->cl, m->rl.n, sizeof *m->locs))
		return NOMEM(m);
	m->locs[*out] = l;
	return 0;
}

static int mat_stack(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rstk, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	struct pd_buf own = PD_BUF_INIT(0); /* the locations read below reuse m->b */
	int rc = sym_get(m->pt, K_STACK, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	uint32_t *ids = pd_arena_alloc(m->p->arena, (n + 1) * sizeof *ids);
	uint32_t k = 0;
	while (ids && r.p < r.end && !r.bad) {
		int64_t ls = (int64_t)pd_rd_v(&r);
		if (!r.bad && (rc = mat_loc(m, ls, &ids[k++]))) {
			pd_buf_free(&own);
			return rc;
		}
	}
	pd_buf_free(&own);
	if (!ids)
		return NOMEM(m);
	if (r.bad)
		return damaged(m->pt, m->err, "corrupt stack #%lld", (long long)seq);
	if (pd_grow((void **)&m->stacks, &m->cstk, m->rstk.n, sizeof *m->stacks))
		return NOMEM(m);
	m->stacks[*out].locs = ids;
	m->stacks[*out].n = k;
	return 0;
}

static int mat_lset(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rls, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	if (pd_grow((void **)&m->lsets, &m->cls, m->rls.n, sizeof *m->lsets))
		return NOMEM(m);
	m->lsets[*out].l = NULL;
	m->lsets[*out].n = 0;
	if (seq == 0)
		return 0;
	struct pd_buf own = PD_BUF_INIT(0); /* the strings read below reuse m->b */
	int rc = sym_get(m->pt, K_LSET, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_label *l = pd_arena_alloc(m->p->arena, (n / 4 + 1) * sizeof *l);
	if (!l) {
		pd_buf_free(&own);
		return NOMEM(m);
	}
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	uint32_t k = 0;
	while (r.p < r.end && !r.bad) {
		int64_t key = (int64_t)pd_rd_v(&r), str = (int64_t)pd_rd_v(&r);
		int64_t num = pd_unzz(pd_rd_v(&r));
		int64_t unit = (int64_t)pd_rd_v(&r);
		if (r.bad)
			break;
		l[k].num = num;
		if ((rc = mat_str(m, key, &l[k].key)) || (rc = mat_str(m, str, &l[k].str)) ||
		    (rc = mat_str(m, unit, &l[k].num_unit))) {
			pd_buf_free(&own);
			return rc;
		}
		k++;
	}
	pd_buf_free(&own);
	if (r.bad)
		return damaged(m->pt, m->err, "corrupt label set #%lld", (long long)seq);
	m->lsets[*out].l = l;
	m->lsets[*out].n = k;
	return 0;
}

/* Header fields into the profile (strings through the partition). */
static int mat_header(struct mat *m, const struct pd_shdr *h)
{
	struct pd_profile *p = m->p;
	int rc;
	uint32_t e; /* "" first: string 0 must be empty */
	/* The header's seq of "": a string field that is empty (doc_url and
	 * default_sample_type are in Go's profiles, drop_frames is not in
	 * legacy ones, which carry pprof's drop_frames regexps). */
	int64_t empty = h->drop, cand[] = {h->drop, h->doc, h->dflt, h->keep};
	for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
		if ((rc = sym_get(m->pt, K_STR, cand[i], &m->b, m->err)))
			return rc;
		if (m->b.len == 0) {
			empty = cand[i];
			break;
		}
	}
	if ((rc = mat_str(m, empty, &e)))
		return rc;
	p->sample_types = pd_arena_alloc(p->arena, (h->nst + 1) * sizeof *p->sample_types);
	p->comments = pd_arena_alloc(p->arena, (h->ncomments + 1) * sizeof *p->comments);
	if (!p->sample_types || !p->comments)
		return NOMEM(m);
	for (uint32_t i = 0; i < h->nst; i++)
		if ((rc = mat_str(m, h->stypes[2 * i], &p->sample_types[i].type)) ||
		    (rc = mat_str(m, h->stypes[2 * i + 1], &p->sample_types[i].unit)))
			return rc;
	p->nsample_types = h->nst;
	for (uint32_t i = 0; i < h->ncomments; i++)
		if ((rc = mat_str(m, h->comments[i], &p->comments[i])))
			return rc;
	p->ncomments = h->ncomments;
	if ((rc = mat_str(m, h->ptype, &p->period_type.type)) || (rc = mat_str(m, h->punit, &p->period_type.unit)) ||
	    (rc = mat_str(m, h->drop, &p->drop_frames)) || (rc = mat_str(m, h->keep, &p->keep_frames)) ||
	    (rc = mat_str(m, h->dflt, &p->default_sample_type)) || (rc = mat_str(m, h->doc, &p->doc_url)))
		return rc;
	p->period = h->period;
	p->time_nanos = h->time;
	p->duration_nanos = h->duration;
	for (uint32_t i = 0; i < h->nmaps; i++) {
		uint32_t mi;
		if ((rc = mat_map(m, h->maps[i], &mi)))
			return rc;
	}
	return 0;
}

/* Copy n bytes into the arena; never NULL for n == 0 (NULL = out of memory). */
static void *dup0(struct pd_arena *a, const void *src, size_t n)
{
	void *q = pd_arena_alloc(a, n + 1);
	if (q && n)
		memcpy(q, src, n);
	return q;
}

/* Move the grown arrays into the arena; the profile is then complete. */
static int mat_finish(struct mat *m, struct pd_profile **out)
{
	struct pd_profile *p = m->p;
	struct pd_arena *a = p->arena;
	p->strings = dup0(a, m->strs, m->rs.n * sizeof *m->strs);
	p->functions = dup0(a, m->fns, m->rf.n * sizeof *m->fns);
	p->mappings = dup0(a, m->maps, m->rm.n * sizeof *m->maps);
	p->locations = dup0(a, m->locs, m->rl.n * sizeof *m->locs);
	if (!p->strings || !p->functions || !p->mappings || !p->locations)
		return NOMEM(m);
	p->nstrings = (uint32_t)m->rs.n;
	p->nfunctions = (uint32_t)m->rf.n;
	p->nmappings = (uint32_t)m->rm.n;
	p->nlocations = (uint32_t)m->rl.n;
	*out = p;
	m->p = NULL;
	return 0;
}

/* Start a profile of partition pt with header h and room for nrows samples. */
static int mat_start(struct mat *m, struct part *pt, const struct pd_shdr *h, size_t nrows, struct pd_err *err)
{
	int rc = mat_init(m, pt, err);
	if (!rc)
		rc = mat_header(m, h);
	if (!rc && !(m->p->samples = pd_arena_alloc(m->p->arena, (nrows + 1) * sizeof *m->p->samples)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	return rc;
}

/* Append a sample (stack and label-set seqs, values) to the profile being
 * built; samples must have been allocated for. */
static int mat_sample(struct mat *m, int64_t stack, int64_t lset, const int64_t *vals, uint32_t nv)
{
	uint32_t si, li;
	int rc;
	if ((rc = mat_stack(m, stack, &si)) || (rc = mat_lset(m, lset, &li)))
		return rc;
	struct pd_sample *s = &m->p->samples[m->p->nsamples++];
	s->locs = m->stacks[si].locs;
	s->nlocs = m->stacks[si].n;
	s->labels = m->lsets[li].l;
	s->nlabels = m->lsets[li].n;
	s->values = dup0(m->p->arena, vals, nv * sizeof *vals);
	return s->values ? 0 : NOMEM(m);
}

/* ---- queries ------------------------------------------------------------------------ */

/* The days of the partition files whose day intersects [from, to],
 * ascending, from the directory alone (nothing opened: an operation over
 * many days opens them one at a time, within the LRU's bound). */
static int days_in(struct sq *s, int64_t from, int64_t to, int64_t **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir(s->dir);
	if (!d)
		return errno == EMFILE || errno == ENFILE ? pd_errf(err, PD_EBUSY, "store: %s: " EMFILE_HINT, s->dir)
							  : pd_errf(err, PD_EIO, "store: %s: %s", s->dir, strerror(errno));
	int64_t *days = NULL;
	size_t nd = 0, cd = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		int y, mo, dd;
		char tail[8];
		if (sscanf(e->d_name, "profd-%4d%2d%2d.%7s", &y, &mo, &dd, tail) != 4 || strcmp(tail, "db"))
			continue;
		struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = dd};
		int64_t day = (int64_t)timegm(&tm) / 86400;
		if ((day + 1) * DAY_NS - 1 < from || day * DAY_NS > to)
			continue;
		if (pd_grow((void **)&days, &cd, nd + 1, sizeof *days)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		days[nd++] = day;
	}
	closedir(d);
	for (size_t i = 1; i < nd; i++)
		for (size_t k = i; k > 0 && days[k - 1] > days[k]; k--) {
			int64_t t = days[k];
			days[k] = days[k - 1];
			days[k - 1] = t;
		}
	if (rc) {
		free(days);
		return rc;
	}
	*out = days;
	*n = nd;
	return 0;
}

/* The partition of an existing day, for a query: a damaged one is skipped
 * (0, *pt = NULL, the day added to sk), a missing file too. */
static int part_q(struct sq *s, int64_t day, struct part **pt, struct pd_store_skipped *sk, struct pd_err *err)
{
	int rc = part_get(s, day, false, pt, err);
	if (rc && quar_find(s, day)) {
		if (sk)
			pd_store_skipped_add(sk, day);
		*pt = NULL;
		return 0;
	}
	return rc;
}

/* After an error while reading pt in a query: skip it (0) if the error was
 * damage (pt quarantined), else the error. */
static int part_skip(struct part *pt, int rc, struct pd_store_skipped *sk)
{
	if (rc && pt && pt->bad) {
		if (sk)
			pd_store_skipped_add(sk, pt->day);
		return 0;
	}
	return rc;
}

void pd_meta_clear(struct pd_profile_meta *m)
{
	for (size_t i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	m->labels = NULL;
	m->nlabels = 0;
}

static int load_labels(struct part *pt, int64_t pk, struct pd_profile_meta *m)
{
	sqlite3_stmt *st = pt->get_labels;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, pk);
	size_t cap = 0;
	int rc = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (pd_grow((void **)&m->labels, &cap, m->nlabels + 1, sizeof *m->labels)) {
			rc = PD_ENOMEM;
			break;
		}
		m->labels[m->nlabels].key = strdup((const char *)sqlite3_column_text(st, 0));
		m->labels[m->nlabels].value = strdup((const char *)sqlite3_column_text(st, 1));
		m->nlabels++;
	}
	sqlite3_reset(st);
	return rc;
}

struct hit {
	int64_t day;
	int64_t pk, created;
	char xid[PD_STORE_ID_LEN + 1];
	char service[128], type[16];
	size_t bytes;
};

static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->xid, y->xid);
}

static int sq_find(struct pd_store *base, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
		   struct pd_store_skipped *skipped, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	if (!q->service || !*q->service)
		return pd_errf(err, PD_EINVAL, "missing \"service\"");
	if (q->from_ns > q->to_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" is after \"to\"");
	store_lock(s);
	int64_t *days = NULL;
	size_t nd;
	struct hit *hits = NULL;
	size_t nh = 0, ch = 0;
	struct pd_buf sql = PD_BUF_INIT(0);
	int rc = days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	if (rc)
		goto out;
	const char *base_sql = "SELECT p.pk, p.xid, p.service, p.type, p.created, length(p.block) + length(p.header)"
			       " FROM profiles p WHERE p.service = ?1 AND p.created BETWEEN ?2 AND ?3"
			       " AND (?4 IS NULL OR p.type = ?4)";
	if (pd_buf_append(&sql, base_sql, strlen(base_sql)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < q->nlabels && !rc; i++) {
		const char *c = " AND EXISTS (SELECT 1 FROM profile_labels l WHERE l.pk = p.pk AND l.k = ? AND l.v = ?)";
		if (pd_buf_append(&sql, c, strlen(c)))
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (!rc && pd_buf_append(&sql, "", 1))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, skipped, err)) || !pt)
			continue;
		sqlite3_stmt *st;
		part_read(pt);
		if (sqlite3_prepare_v2(pt->db, (const char *)sql.ptr, -1, &st, NULL) != SQLITE_OK) {
			rc = part_skip(pt, qerr(pt, pt->db, "query", err), skipped);
			part_done(pt);
			continue;
		}
		sqlite3_bind_text(st, 1, q->service, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, q->from_ns);
		sqlite3_bind_int64(st, 3, q->to_ns);
		if (q->type)
			sqlite3_bind_text(st, 4, q->type, -1, SQLITE_STATIC);
		for (size_t l = 0; l < q->nlabels; l++) {
			sqlite3_bind_text(st, 5 + 2 * (int)l, q->labels[l].key, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 6 + 2 * (int)l, q->labels[l].value, -1, SQLITE_STATIC);
		}
		size_t nh0 = nh;
		int r;
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			if (pd_grow((void **)&hits, &ch, nh + 1, sizeof *hits)) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				break;
			}
			struct hit *h = &hits[nh++];
			h->day = pt->day;
			h->pk = sqlite3_column_int64(st, 0);
			snprintf(h->xid, sizeof h->xid, "%s", (const char *)sqlite3_column_text(st, 1));
			snprintf(h->service, sizeof h->service, "%s", (const char *)sqlite3_column_text(st, 2));
			snprintf(h->type, sizeof h->type, "%s", (const char *)sqlite3_column_text(st, 3));
			h->created = sqlite3_column_int64(st, 4);
			h->bytes = (size_t)sqlite3_column_int64(st, 5);
		}
		if (!rc && r != SQLITE_DONE) {
			rc = part_skip(pt, qerr(pt, pt->db, "query", err), skipped);
			nh = nh0; /* none of a damaged day */
		}
		sqlite3_finalize(st);
		part_done(pt);
	}
	if (nh)
		qsort(hits, nh, sizeof *hits, cmp_hit);
	size_t first = q->limit && nh > q->limit ? nh - q->limit : 0; /* the newest `limit` */
	struct part *pt = NULL;
	for (size_t i = first; i < nh && !rc; i++) {
		if (!pt || pt->day != hits[i].day) { /* ascending time: each day once */
			part_done(pt);
			if ((rc = part_q(s, hits[i].day, &pt, skipped, err)))
				break;
			if (!pt)
				continue; /* damaged meanwhile: skipped */
		}
		struct pd_profile_meta m = {0};
		memcpy(m.id, hits[i].xid, sizeof m.id);
		memcpy(m.service, hits[i].service, sizeof m.service);
		memcpy(m.type, hits[i].type, sizeof m.type);
		m.created_ns = hits[i].created;
		m.stored_bytes = hits[i].bytes;
		if (load_labels(pt, hits[i].pk, &m))
			rc = pd_errf(err, PD_EIO, "store: reading labels");
		if (!rc)
			rc = fn(ctx, &m);
		pd_meta_clear(&m);
	}
out:
	store_unlock(s);
	pd_buf_free(&sql);
	free(days);
	free(hits);
	return rc;
}

/* The partition and row of profile id; PD_ENOTFOUND if none. */
static int locate(struct sq *s, const char *id, struct part **pt, struct pd_err *err)
{
	int64_t t = pd_xid_time(id);
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found (not an id)", id);
	int rc = part_get(s, floor_div(t, DAY_NS), false, pt, err);
	if (rc)
		return rc;
	if (!*pt)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	part_read(*pt);
	sqlite3_stmt *g = (*pt)->get_prof;
	sqlite3_reset(g);
	sqlite3_bind_text(g, 1, id, -1, SQLITE_TRANSIENT);
	int r = sqlite3_step(g);
	if (r != SQLITE_ROW) {
		sqlite3_reset(g);
		if (r != SQLITE_DONE)
			return qerr(*pt, (*pt)->db, "profile", err);
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	}
	return 0; /* the row stays on get_prof until reset */
}

/* The payload of column col of st, a blob of row `row` checked against
 * seed: a mismatch is damage (pt quarantined), never a wrong answer. */
static int blob_col(struct part *pt, sqlite3_stmt *st, int col, uint64_t seed, const char *row, const char *what,
		    const uint8_t **p, size_t *n, struct pd_err *err)
{
	bool checked;
	struct pd_err e;
	if (pd_blob_open(sqlite3_column_blob(st, col), (size_t)sqlite3_column_bytes(st, col), seed, p, n, &checked, &e))
		return damaged(pt, err, "%s: %s: %s", row, what, e.msg);
	return 0;
}

/* Decode a profile's (or rollup's) header and block columns of st, row
 * `row`, seeds from key (its xid) or, key NULL, the rollup's identity. */
static int dec_row(struct sq *s, struct part *pt, sqlite3_stmt *st, int hcol, int bcol, const char *row,
		   uint64_t hseed, uint64_t bseed, struct pd_shdr *h, int64_t **rows, size_t *nrows, uint32_t *nv,
		   struct pd_err *err)
{
	const uint8_t *hp, *bp;
	size_t hn, bn;
	int rc;
	*rows = NULL;
	memset(h, 0, sizeof *h);
	if ((rc = blob_col(pt, st, hcol, hseed, row, "header", &hp, &hn, err)) ||
	    (rc = blob_col(pt, st, bcol, bseed, row, "sample block", &bp, &bn, err)))
		return rc;
	if ((rc = pd_dec_header(hp, hn, h, err)))
		return rc == PD_EIO ? damaged(pt, err, "%s: %s", row, err->msg) : rc;
	if ((rc = pd_dec_block(s->dctx, bp, bn, rows, nrows, nv, err))) {
		pd_shdr_free(h);
		return rc == PD_EIO ? damaged(pt, err, "%s: %s", row, err->msg) : rc;
	}
	return 0;
}

/* Header and sample rows of stored profile id. */
static int load_profile(struct sq *s, const char *id, struct part **pt, struct pd_shdr *h, int64_t **rows,
			size_t *nrows, uint32_t *nv, struct pd_err *err)
{
	*rows = NULL;
	memset(h, 0, sizeof *h);
	int rc = locate(s, id, pt, err);
	if (rc)
		return rc;
	sqlite3_stmt *g = (*pt)->get_prof;
	char row[64];
	snprintf(row, sizeof row, "profile %s", id);
	rc = dec_row(s, *pt, g, 4, 5, row, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER),
		     pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), h, rows, nrows, nv, err);
	sqlite3_reset(g);
	return rc;
}

static int sq_get(struct pd_store *base, const char *id, struct pd_profile **out, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	store_lock(s);
	struct part *pt = NULL;
	struct mat m;
	memset(&m, 0, sizeof m); /* so mat_free is safe on every path */
	struct pd_shdr h;
	int64_t *rows;
	size_t nrows = 0;
	uint32_t nv = 0;
	int rc = load_profile(s, id, &pt, &h, &rows, &nrows, &nv, err);
	if (!rc)
		rc = mat_start(&m, pt, &h, nrows, err);
	for (size_t i = 0; i < nrows && !rc; i++) {
		const int64_t *r = rows + i * (2 + nv);
		rc = mat_sample(&m, r[0], r[1], r + 2, nv);
	}
	if (!rc)
		rc = mat_finish(&m, out);
	mat_free(&m);
	store_unlock(s);
	pd_shdr_free(&h);
	free(rows);
	return rc;
}

/* ---- merge ---------------------------------------------------------------------------- */

/* One partition's share of a merge: rows aggregated on (stack, label set)
 * seqs, headers combined as pprof's Merge does. */
struct pmerge {
	struct part *pt;
	struct remap stk, ls;
	struct pd_agg agg;
	bool have;
	struct pd_shdr h; /* combined */
	int64_t *stypes0; /* the first profile's sample type seqs, to check the others against */
	/* per dense stack index: the aggregate row (+1) of its first label set,
	 * so the common case (a stack recurs with the same labels) skips the
	 * aggregation hash (measured: ~20% of a merge) */
	uint32_t *row1, *ls1;
	size_t cap1;
};

static void pmerge_free(struct pmerge *pm)
{
	remap_free(&pm->stk);
	remap_free(&pm->ls);
	free(pm->row1);
	free(pm->ls1);
	if (pm->have)
		pd_agg_free(&pm->agg);
	pd_shdr_free(&pm->h);
	free(pm->stypes0);
}

/* Add one stored profile's rows (or, keep_zero, a rollup's: their rows are
 * sums of non-zero rows, kept even when they sum to zero, as the merge of
 * the profiles keeps them) to pm; h is consumed. */
static int pm_add(struct pmerge *pm, const char *id, struct pd_shdr *h, const int64_t *rows, size_t nrows,
		  uint32_t nv, bool keep_zero, struct pd_err *err)
{
	int64_t time = h->time, duration = h->duration, period = h->period;
	if (!pm->have) {
		if (pd_agg_init(&pm->agg, nv, nrows * 2) || pd_hidx_init(&pm->stk.idx, nrows + 16) ||
		    pd_hidx_init(&pm->ls.idx, 64))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		pm->have = true;
		pm->h = *h; /* takes ownership of the first header's arrays */
		memset(h, 0, sizeof *h);
		pm->h.time = 0;
		pm->h.duration = 0;
		pm->h.period = 0;
		pm->stypes0 = malloc((2 * pm->h.nst + 1) * sizeof *pm->stypes0);
		if (!pm->stypes0)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		memcpy(pm->stypes0, pm->h.stypes, 2 * pm->h.nst * sizeof *pm->stypes0);
		h = &pm->h;
		/* fall through to combine the numbers of this first profile */
	} else {
		bool same = h->nst == pm->h.nst && h->ptype == pm->h.ptype && h->punit == pm->h.punit;
		for (uint32_t i = 0; same && i < 2 * h->nst; i++)
			same = h->stypes[i] == pm->stypes0[i];
		if (!same)
			return pd_errf(err, PD_EINCOMPAT,
				       "incompatible profiles: %s has other sample types than the first profile "
				       "(select one type, e.g. type=cpu)",
				       id);
		for (uint32_t i = 0; i < h->ncomments; i++) {
			bool seen = false;
			for (uint32_t j = 0; j < pm->h.ncomments && !seen; j++)
				seen = pm->h.comments[j] == h->comments[i];
			if (!seen) {
				int64_t *nc = realloc(pm->h.comments, (pm->h.ncomments + 1) * sizeof *nc);
				if (!nc)
					return pd_errf(err, PD_ENOMEM, "out of memory");
				pm->h.comments = nc;
				pm->h.comments[pm->h.ncomments++] = h->comments[i];
			}
		}
		if (!pm->h.dflt)
			pm->h.dflt = h->dflt;
		if (!pm->h.doc)
			pm->h.doc = h->doc;
	}
	if (time && (pm->h.time == 0 || time < pm->h.time))
		pm->h.time = time;
	pm->h.duration += duration;
	if (pm->h.period < period)
		pm->h.period = period;
	for (size_t i = 0; i < nrows; i++) {
		const int64_t *r = rows + i * (2 + nv);
		bool zero = !keep_zero;
		for (uint32_t j = 0; j < nv && zero; j++)
			zero = r[2 + j] == 0;
		if (zero) /* as pprof's Merge: zero samples are skipped */
			continue;
		uint32_t si, li;
		bool added;
		if (remap_get(&pm->stk, r[0], &si, &added) || remap_get(&pm->ls, r[1], &li, &added))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		if (si < pm->cap1 && pm->row1[si] && pm->ls1[si] == li) {
			pd_agg_add_row(&pm->agg, pm->row1[si] - 1, r + 2);
			continue;
		}
		uint32_t row;
		int rc = pd_agg_add2(&pm->agg, si, li, r + 2, &row);
		if (rc)
			return pd_errf(err, rc, "merge: out of memory");
		if (si >= pm->cap1) {
			size_t nc = pm->cap1 ? pm->cap1 : 1024;
			while (nc <= si)
				nc *= 2;
			uint32_t *a = realloc(pm->row1, nc * sizeof *a), *b = a ? realloc(pm->ls1, nc * sizeof *b) : NULL;
			if (a)
				pm->row1 = a;
			if (!b)
				return pd_errf(err, PD_ENOMEM, "out of memory");
			pm->ls1 = b;
			memset(pm->row1 + pm->cap1, 0, (nc - pm->cap1) * sizeof *a);
			pm->cap1 = nc;
		}
		if (!pm->row1[si]) {
			pm->row1[si] = row + 1;
			pm->ls1[si] = li;
		}
	}
	return 0;
}

/* Materialise a partition's aggregate as a partial profile. */
static int pm_profile(struct pmerge *pm, struct pd_profile **out, struct pd_err *err)
{
	struct mat m;
	int rc = mat_start(&m, pm->pt, &pm->h, pm->agg.n, err);
	for (size_t r = 0; r < pm->agg.n && !rc; r++)
		rc = mat_sample(&m, pm->stk.keys[pm->agg.rows[r].stack], pm->ls.keys[pm->agg.rows[r].labels],
				pd_agg_values(&pm->agg, r), pm->agg.nvalues);
	if (!rc)
		rc = mat_finish(&m, out);
	mat_free(&m);
	return rc;
}

/* The merge of the partitions' aggregates pms[0..npm) (those with rows),
 * partitions in time order. */
static int pms_finish(struct pmerge *pms, size_t npm, struct pd_profile **out, struct pd_err *err)
{
	size_t have = 0, last = 0;
	for (size_t k = 0; k < npm; k++)
		if (pms[k].have)
			have++, last = k;
	if (have == 0)
		return 0;
	if (have == 1) {
		/* one partition: its aggregate is the merge already (symbols are
		 * content-addressed, rows keyed by content-addressed stacks and
		 * label sets), so skip re-interning it (measured: ~20%) */
		return pm_profile(&pms[last], out, err);
	}
	struct pd_merger *mg = pd_merger_new();
	int rc = mg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t k = 0; k < npm && !rc; k++) {
		if (!pms[k].have)
			continue;
		struct pd_profile *part;
		if ((rc = pm_profile(&pms[k], &part, err)))
			break;
		rc = pd_merger_add_partial(mg, part, err);
		pd_profile_free(part);
	}
	if (!rc)
		rc = pd_merger_finish(mg, out, err);
	pd_merger_free(mg);
	return rc;
}

static int sq_merge(struct pd_store *base, const char *const *ids, size_t n, struct pd_profile **out,
		    struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	if (n == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	store_lock(s);
	struct pmerge *pms = NULL;
	size_t npm = 0, cpm = 0, skipped = 0;
	int rc = 0;
	struct pd_err first; /* the first damaged profile's error */
	for (size_t i = 0; i < n && !rc; i++) {
		struct part *pt = NULL;
		struct pd_shdr h;
		int64_t *rows;
		size_t nrows;
		uint32_t nv;
		if ((rc = load_profile(s, ids[i], &pt, &h, &rows, &nrows, &nv, err))) {
			/* a damaged day is left out (the caller sees it in
			 * pd_store_skipped_in), unless nothing else is left */
			int64_t t = pd_xid_time(ids[i]);
			if ((pt && pt->bad) || (t >= 0 && quar_find(s, floor_div(t, DAY_NS)))) {
				if (!skipped++)
					first = *err;
				for (size_t k = 0; k < npm; k++)
					if (pt && pms[k].pt == pt) {
						pmerge_free(&pms[k]);
						memset(&pms[k], 0, sizeof pms[k]);
						pms[k].pt = pt; /* stays, empty: its later ids fail the same way */
					}
				rc = 0;
				continue;
			}
			break;
		}
		size_t k = 0;
		while (k < npm && pms[k].pt != pt)
			k++;
		if (k == npm) {
			if (pd_grow((void **)&pms, &cpm, npm + 1, sizeof *pms)) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				pd_shdr_free(&h);
				free(rows);
				break;
			}
			memset(&pms[npm], 0, sizeof *pms);
			pms[npm++].pt = pt;
		}
		rc = pm_add(&pms[k], ids[i], &h, rows, nrows, nv, false, err);
		pd_shdr_free(&h);
		free(rows);
	}
	if (!rc)
		rc = pms_finish(pms, npm, out, err);
	if (!rc && !*out && skipped) {
		*err = first;
		rc = first.code;
	}
	for (size_t k = 0; k < npm; k++)
		pmerge_free(&pms[k]);
	free(pms);
	store_unlock(s);
	return rc;
}

/* ---- rollups ------------------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* zstd of raw appended to out. */
static int zput(struct sq *s, const struct pd_buf *raw, struct pd_buf *out, struct pd_err *err)
{
	ZSTD_CCtx *z = cctx_get(s);
	if (!z)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = pd_enc_zstd(z, raw, out, err);
	cctx_put(s, z);
	return rc;
}

static int enc_fns(struct sq *s, const struct pd_fn_totals *t, struct pd_buf *out, struct pd_err *err)
{
	ZSTD_CCtx *z = cctx_get(s);
	if (!z)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = pd_enc_fns(z, t, out, err);
	cctx_put(s, z);
	return rc;
}

/* A sample block (dec_block's layout) of an aggregate's rows. */
static int enc_agg(struct sq *s, const struct pmerge *pm, struct pd_buf *out, struct pd_err *err)
{
	size_t n = pm->agg.n;
	uint32_t nv = pm->agg.nvalues;
	struct row *r = malloc(n * sizeof *r + 1);
	struct pd_buf raw = PD_BUF_INIT(0);
	int rc = 0;
	if (!r || n > UINT32_MAX || pd_buf_reserve(&raw, 20 + 10 * n * (2 + (size_t)nv))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		r[i] = (struct row){pm->stk.keys[pm->agg.rows[i].stack], pm->ls.keys[pm->agg.rows[i].labels], (uint32_t)i};
	qsort(r, n, sizeof *r, cmp_row);
	uint8_t *e = raw.ptr;
	PD_PV(e, n);
	PD_PV(e, nv);
	int64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		PD_PV(e, r[i].stack - prev);
		PD_PV(e, r[i].lset);
		prev = r[i].stack;
		const int64_t *v = pd_agg_values(&pm->agg, r[i].i);
		for (uint32_t j = 0; j < nv; j++)
			PD_PV(e, pd_zz(v[j]));
	}
	raw.len = (size_t)(e - raw.ptr);
	rc = zput(s, &raw, out, err);
out:
	free(r);
	pd_buf_free(&raw);
	return rc;
}

/* Add the stored profiles of service/type created in [a, b] in pt (in
 * creation order) to pm; *n += their number; over max (0 = none): PD_ELIMIT.
 * Under the store mutex, in pt's read transaction. */
static int pm_add_range(struct sq *s, struct pmerge *pm, const char *svc, const char *typ, int64_t a, int64_t b,
			size_t *n, size_t max, struct pd_err *err)
{
	sqlite3_stmt *st = pm->pt->range_get;
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, svc, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, typ, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, a);
	sqlite3_bind_int64(st, 4, b);
	int r, rc = 0;
	while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
		if (max && *n >= max) {
			rc = pd_errf(err, PD_ELIMIT,
				     "more than %zu profiles of \"%s\" to merge without rollups: over the limit of profiles "
				     "per query",
				     max, svc);
			break;
		}
		struct pd_shdr h;
		int64_t *rows = NULL;
		size_t nrows;
		uint32_t nv;
		char id[PD_STORE_ID_LEN + 1], row[64];
		snprintf(id, sizeof id, "%s", (const char *)sqlite3_column_text(st, 0));
		snprintf(row, sizeof row, "profile %s", id);
		if (!(rc = dec_row(s, pm->pt, st, 1, 2, row, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER),
				   pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), &h, &rows, &nrows, &nv, err))) {
			rc = pm_add(pm, id, &h, rows, nrows, nv, false, err);
			pd_shdr_free(&h);
			free(rows);
		}
		(*n)++;
	}
	if (!rc && r != SQLITE_DONE)
		rc = qerr(pm->pt, pm->pt->db, "range", err);
	sqlite3_reset(st);
	return rc;
}

/* The hour's name for messages: "the rollup of 2026-01-01T05:00Z". */
static void hour_name(int64_t hour, char *buf, size_t n)
{
	time_t t = (time_t)(hour * 3600);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "the rollup of %Y-%m-%dT%H:00Z", &tm);
}

/* Build the rollup of (svc, typ, hour) of partition `day`: read its
 * generation and profiles in one snapshot under the store mutex, encode
 * outside it, write through the committer. *built += 1 if written. */
static int rollup_hour(struct sq *s, int64_t day, const char *svc, const char *typ, int64_t hour, size_t *built,
		       struct pd_err *err)
{
	struct pmerge pm;
	memset(&pm, 0, sizeof pm);
	struct rjob r = {svc, typ, hour, 0, 0, PD_BUF_INIT(0), PD_BUF_INIT(0), PD_BUF_INIT(0), false};
	struct pd_profile *p = NULL;
	struct pd_fn_totals ft = {0};
	size_t n = 0;
	store_lock(s);
	struct part *pt;
	int rc = part_q(s, day, &pt, NULL, err);
	if (rc || !pt) {
		store_unlock(s);
		return rc; /* dropped by retention meanwhile, or damaged: no rollup */
	}
	pm.pt = pt;
	part_read(pt);
	sqlite3_stmt *g = pt->gen_get;
	sqlite3_reset(g);
	sqlite3_bind_text(g, 1, svc, -1, SQLITE_STATIC);
	sqlite3_bind_text(g, 2, typ, -1, SQLITE_STATIC);
	sqlite3_bind_int64(g, 3, hour);
	int step = sqlite3_step(g);
	r.gen = step == SQLITE_ROW ? sqlite3_column_int64(g, 0) : 0;
	sqlite3_reset(g);
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = sqerr(err, pt->db, "rollup generation");
	if (!rc)
		rc = pm_add_range(s, &pm, svc, typ, hour * HOUR_NS, hour * HOUR_NS + HOUR_NS - 1, &n, 0, err);
	bool unusable = rc == PD_EINCOMPAT;
	if (unusable) { /* profiles that cannot be merged: a marker, so that passes do not retry it */
		rc = 0;
		pmerge_free(&pm);
		memset(&pm, 0, sizeof pm);
	}
	if (!rc && pm.have) /* for the function table (symbols are read under the mutex) */
		rc = pm_profile(&pm, &p, err);
	if (!rc)
		atomic_fetch_add(&pt->refs, 1); /* retention keeps pt until the commit */
	bool skip = rc && pt->bad; /* damaged: quarantined, the pass goes on */
	store_unlock(s);
	if (skip)
		rc = 0;
	if (rc || skip)
		goto out;
	r.profiles = unusable ? -1 : (int64_t)n;
	/* no profile left in the hour (all removed): an empty rollup, so the
	 * hour counts as answered */
	if (pm.have) {
		if (pd_blob_begin(&r.hdr) || pd_blob_begin(&r.blk) || pd_blob_begin(&r.fns))
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
		if (rc || (rc = pd_enc_header(&pm.h, &r.hdr, err)) || (rc = enc_agg(s, &pm, &r.blk, err)) ||
		    (rc = pd_fn_totals_of(p, &ft, err)) || (rc = enc_fns(s, &ft, &r.fns, err))) {
			atomic_fetch_sub(&pt->refs, 1);
			goto out;
		}
		pd_blob_seal(&r.hdr, 0, pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_HEADER));
		pd_blob_seal(&r.blk, 0, pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_BLOCK));
		pd_blob_seal(&r.fns, 0, pd_blob_rollup_seed(svc, typ, hour, PD_BLOB_FNS));
	}
	struct job j = {.pt = pt, .ru = &r, .err = err, .created = hour * HOUR_NS};
	submit(s, &j);
	if (!(rc = j.rc) && r.written)
		(*built)++;
out:
	pmerge_free(&pm);
	pd_profile_free(p);
	pd_fn_totals_free(&ft);
	pd_buf_free(&r.hdr);
	pd_buf_free(&r.blk);
	pd_buf_free(&r.fns);
	return rc;
}

struct stale {
	int64_t day, hour;
	char service[128], type[16];
};

static int sq_rollup(struct pd_store *base, int64_t cutoff, size_t max_hours, size_t *built, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*built = 0;
	int64_t end = floor_div(cutoff, HOUR_NS); /* hours before this one are over */
	struct stale *v = NULL;
	size_t n = 0, cap = 0;
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = days_in(s, INT64_MIN, cutoff, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc && (!max_hours || n < max_hours); i++) {
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, NULL, err)) || !pt)
			continue;
		sqlite3_stmt *st = pt->stale_get;
		part_read(pt);
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, end);
		int r = SQLITE_DONE;
		while ((!max_hours || n < max_hours) && (r = sqlite3_step(st)) == SQLITE_ROW) {
			if (pd_grow((void **)&v, &cap, n + 1, sizeof *v)) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				break;
			}
			v[n].day = pt->day;
			snprintf(v[n].service, sizeof v[n].service, "%s", (const char *)sqlite3_column_text(st, 0));
			snprintf(v[n].type, sizeof v[n].type, "%s", (const char *)sqlite3_column_text(st, 1));
			v[n++].hour = sqlite3_column_int64(st, 2);
		}
		if (!rc && r != SQLITE_DONE && r != SQLITE_ROW)
			rc = part_skip(pt, qerr(pt, pt->db, "stale rollups", err), NULL);
		sqlite3_reset(st);
		part_done(pt);
	}
	free(days);
	store_unlock(s);
	/* one hour at a time: the store mutex is free in between */
	for (size_t i = 0; i < n && !rc; i++)
		rc = rollup_hour(s, v[i].day, v[i].service, v[i].type, v[i].hour, built, err);
	free(v);
	return rc;
}

/* Add the valid rollups of service/type for hours [h0, h1] of pm's
 * partition, and the stored profiles of [lo, hi] outside them, in time
 * order, to pm; or, with acc, the rollups' function tables to acc (and the
 * profiles to pm). Under the store mutex, in the partition's read
 * transaction. */
static int pm_add_span(struct sq *s, struct pmerge *pm, struct pd_fnt_acc *acc, const struct pd_merge_range *q,
		       int64_t lo, int64_t hi, int64_t h0, int64_t h1, struct pd_merge_info *info, struct pd_err *err)
{
	int64_t t = lo;
	int rc = 0;
	if (h0 <= h1) {
		sqlite3_stmt *st = acc ? pm->pt->rollups_fget : pm->pt->rollups_get;
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, q->service, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, q->type, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, h0);
		sqlite3_bind_int64(st, 4, h1);
		int r;
		while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t hour = sqlite3_column_int64(st, 0), np = sqlite3_column_int64(st, 1);
			if (t < hour * HOUR_NS &&
			    (rc = pm_add_range(s, pm, q->service, q->type, t, hour * HOUR_NS - 1, &info->raw, q->max_raw, err)))
				break;
			t = (hour + 1) * HOUR_NS;
			info->rollup_hours++;
			info->profiles += (size_t)np;
			if (np <= 0)
				continue;
			struct pd_shdr h;
			int64_t *rows = NULL;
			size_t nrows;
			uint32_t nv;
			char id[64];
			hour_name(hour, id, sizeof id);
			if (acc) {
				const uint8_t *fp;
				size_t fn;
				if ((rc = blob_col(pm->pt, st, 2, pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_FNS), id,
						   "function table", &fp, &fn, err)))
					break;
				if ((rc = pd_dec_fns(s->dctx, fp, fn, acc, id, err)) == PD_EIO)
					rc = damaged(pm->pt, err, "%s: %s", id, err->msg);
				continue;
			}
			if ((rc = dec_row(s, pm->pt, st, 2, 3, id, pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_HEADER),
					  pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_BLOCK), &h, &rows, &nrows, &nv,
					  err)))
				break;
			rc = pm_add(pm, id, &h, rows, nrows, nv, true, err);
			pd_shdr_free(&h);
			free(rows);
		}
		if (!rc && r != SQLITE_DONE)
			rc = qerr(pm->pt, pm->pt->db, "rollups", err);
		sqlite3_reset(st);
	}
	if (!rc && t <= hi)
		rc = pm_add_range(s, pm, q->service, q->type, t, hi, &info->raw, q->max_raw, err);
	return rc;
}

/* The bounds of partition pt within q: [lo, hi] and the whole hours
 * [h0, h1] in it (none with no_rollups). */
static void span_of(const struct part *pt, const struct pd_merge_range *q, int64_t *lo, int64_t *hi, int64_t *h0,
		    int64_t *h1)
{
	*lo = q->from_ns > pt->day * DAY_NS ? q->from_ns : pt->day * DAY_NS;
	*hi = q->to_ns < (pt->day + 1) * DAY_NS - 1 ? q->to_ns : (pt->day + 1) * DAY_NS - 1;
	*h0 = ceil_div(*lo, HOUR_NS);
	*h1 = floor_div(*hi - HOUR_NS + 1, HOUR_NS);
	if (q->no_rollups)
		*h1 = *h0 - 1;
}

/*
 * Range merge, one partition at a time: each partition's aggregate is
 * built, then (once a second partition has rows) materialised into the
 * cross-partition merger and freed, so a merge over many days holds one
 * partition open at a time. A damaged partition is skipped whole (what it
 * added is dropped) and named in info->skipped. A single partition's
 * aggregate is materialised directly (no re-interning).
 */
static int sq_merge_range(struct pd_store *base, const struct pd_merge_range *q, struct pd_profile **out,
			  struct pd_merge_info *info, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	memset(info, 0, sizeof *info);
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	struct pmerge held; /* the one partition aggregate not yet in mg */
	memset(&held, 0, sizeof held);
	struct pd_merger *mg = NULL;
	int rc = days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, &info->skipped, err)) || !pt)
			continue;
		struct pmerge pm;
		memset(&pm, 0, sizeof pm);
		pm.pt = pt;
		int64_t lo, hi, h0, h1;
		span_of(pt, q, &lo, &hi, &h0, &h1);
		struct pd_merge_info pi = {0};
		part_read(pt);
		rc = pm_add_span(s, &pm, NULL, q, lo, hi, h0, h1, &pi, err);
		if (rc && (rc = part_skip(pt, rc, &info->skipped)) == 0) { /* damaged: none of it */
			pmerge_free(&pm);
			part_done(pt);
			continue;
		}
		info->raw += pi.raw;
		info->profiles += pi.profiles;
		info->rollup_hours += pi.rollup_hours;
		if (rc || !pm.have) {
			pmerge_free(&pm);
			part_done(pt);
			continue;
		}
		if (held.have) { /* a second partition with rows: the held one goes to the merger */
			struct pd_profile *part = NULL;
			if (!mg && !(mg = pd_merger_new()))
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			if (!rc && (rc = pm_profile(&held, &part, err)))
				rc = part_skip(held.pt, rc, &info->skipped); /* damaged symbols: skipped */
			else if (!rc)
				rc = pd_merger_add_partial(mg, part, err);
			pd_profile_free(part);
			part_done(held.pt);
			pmerge_free(&held);
		}
		held = pm;
	}
	info->profiles += info->raw;
	if (!rc && held.have) {
		struct pd_profile *part = NULL;
		if (!mg) {
			rc = pm_profile(&held, out, err);
		} else if (!(rc = pm_profile(&held, &part, err))) {
			rc = pd_merger_add_partial(mg, part, err);
		}
		pd_profile_free(part);
		if (rc && held.pt->bad) { /* damaged symbols: skip it */
			rc = part_skip(held.pt, rc, &info->skipped);
			pd_profile_free(*out);
			*out = NULL;
		}
	}
	if (!rc && mg && !*out)
		rc = pd_merger_finish(mg, out, err);
	pd_merger_free(mg);
	pmerge_free(&held);
	free(days);
	store_unlock(s);
	struct pd_store_skipped sk = info->skipped;
	if (rc || !*out) {
		memset(info, 0, sizeof *info);
		if (!rc)
			info->skipped = sk;
		return rc;
	}
	return 0;
}

static int sq_fn_totals(struct pd_store *base, const struct pd_merge_range *q, struct pd_fn_totals *out,
			struct pd_merge_info *info, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	struct pd_fnt_acc acc;
	memset(info, 0, sizeof *info);
	int rc = pd_fnt_init(&acc, err);
	if (rc)
		return rc;
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	rc = days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, &info->skipped, err)) || !pt)
			continue;
		/* the partition's totals on their own first, so that a damaged
		 * partition adds nothing */
		struct pd_fnt_acc pa;
		if ((rc = pd_fnt_init(&pa, err)))
			break;
		struct pmerge pm;
		memset(&pm, 0, sizeof pm);
		pm.pt = pt;
		int64_t lo, hi, h0, h1;
		span_of(pt, q, &lo, &hi, &h0, &h1);
		struct pd_merge_info pi = {0};
		part_read(pt);
		rc = pm_add_span(s, &pm, &pa, q, lo, hi, h0, h1, &pi, err);
		/* the profiles outside rolled-up hours: merged, then their totals */
		struct pd_profile *p = NULL;
		if (!rc && pm.have && !(rc = pm_profile(&pm, &p, err)))
			rc = pd_fnt_add_profile(&pa, p, "a profile", err);
		pd_profile_free(p);
		pmerge_free(&pm);
		if (rc && (rc = part_skip(pt, rc, &info->skipped)) == 0) {
			pd_fnt_free(&pa);
			part_done(pt);
			continue;
		}
		if (!rc) {
			struct pd_fn_totals t;
			pd_fnt_finish(&pa, &t);
			rc = pd_fnt_add_totals(&acc, &t, "a partition", err);
			pd_fn_totals_free(&t);
			info->raw += pi.raw;
			info->profiles += pi.profiles;
			info->rollup_hours += pi.rollup_hours;
		}
		pd_fnt_free(&pa);
		part_done(pt);
	}
	free(days);
	store_unlock(s);
	info->profiles += info->raw;
	if (!rc && info->profiles)
		pd_fnt_finish(&acc, out);
	pd_fnt_free(&acc);
	if (rc || !info->profiles) {
		struct pd_store_skipped sk = info->skipped;
		memset(info, 0, sizeof *info);
		if (!rc)
			info->skipped = sk;
	}
	return rc;
}

/* ---- the rest --------------------------------------------------------------------------- */

static int sq_remove(struct pd_store *base, const char *id, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	store_lock(s);
	struct part *pt = NULL;
	int rc = locate(s, id, &pt, err);
	struct job j = {.pt = pt, .err = err};
	if (!rc) {
		j.pk = sqlite3_column_int64(pt->get_prof, 0);
		snprintf(j.svc, sizeof j.svc, "%s", (const char *)sqlite3_column_text(pt->get_prof, 1));
		snprintf(j.typ, sizeof j.typ, "%s", (const char *)sqlite3_column_text(pt->get_prof, 2));
		j.created = sqlite3_column_int64(pt->get_prof, 3);
		sqlite3_reset(pt->get_prof);
		atomic_fetch_add(&pt->refs, 1);
	}
	store_unlock(s);
	if (rc)
		return rc;
	/* through the committer, which owns the writer connection; the
	 * profile's symbols stay until its partition is dropped */
	submit(s, &j);
	return j.rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Services of every partition, one partition open at a time (a day file
 * per day of a long retention must not mean that many open at once). */
static int sq_services(struct pd_store *base, char ***out, size_t *n, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	*n = 0;
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0, cap = 0;
	char **v = NULL;
	size_t nv = 0;
	int rc = days_in(s, INT64_MIN, INT64_MAX, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, NULL, err)) || !pt)
			continue;
		sqlite3_stmt *st;
		part_read(pt);
		if (sqlite3_prepare_v2(pt->db, "SELECT DISTINCT service FROM profiles", -1, &st, NULL) != SQLITE_OK) {
			rc = part_skip(pt, qerr(pt, pt->db, "services", err), NULL);
			part_done(pt);
			continue;
		}
		size_t nv0 = nv;
		int r;
		while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
			const char *svc = (const char *)sqlite3_column_text(st, 0);
			bool seen = false;
			for (size_t j = 0; j < nv && !seen; j++)
				seen = !strcmp(v[j], svc);
			if (seen)
				continue;
			if (pd_grow((void **)&v, &cap, nv + 1, sizeof *v) || !(v[nv] = strdup(svc)))
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			else
				nv++;
		}
		if (!rc && r != SQLITE_DONE) {
			rc = part_skip(pt, qerr(pt, pt->db, "services", err), NULL);
			while (nv > nv0) /* none of a damaged day */
				free(v[--nv]);
		}
		sqlite3_finalize(st);
		part_done(pt);
	}
	free(days);
	store_unlock(s);
	if (rc) {
		for (size_t j = 0; j < nv; j++)
			free(v[j]);
		free(v);
		return rc;
	}
	if (nv)
		qsort(v, nv, sizeof *v, cmp_str);
	*out = v;
	*n = nv;
	return 0;
}

/* Drops day files from the directory listing: damaged ones too (nothing to
 * open), never one with queued work. */
static int sq_retain(struct pd_store *base, int64_t cutoff, size_t *dropped, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*dropped = 0;
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = days_in(s, INT64_MIN, cutoff - DAY_NS, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		int64_t day = days[i];
		if ((day + 1) * DAY_NS > cutoff)
			continue;
		struct part *pt = NULL;
		size_t at = 0;
		for (size_t j = 0; j < s->nparts && !pt; j++)
			if (s->parts[j]->day == day)
				pt = s->parts[at = j];
		if (pt && atomic_load(&pt->refs) > 0)
			continue; /* a commit is pending: dropped next time */
		char path[4096], aux[4200];
		day_path(s, day, path, sizeof path);
		if (pt) {
			s->parts[at] = s->parts[--s->nparts];
			part_close(pt);
		}
		if (unlink(path) && errno != ENOENT) {
			rc = pd_errf(err, PD_EIO, "store: %s: %s", path, strerror(errno));
			break;
		}
		snprintf(aux, sizeof aux, "%s-wal", path);
		unlink(aux);
		snprintf(aux, sizeof aux, "%s-shm", path);
		unlink(aux);
		struct quar *q = quar_find(s, day);
		if (q)
			quar_drop(s, q);
		(*dropped)++;
	}
	free(days);
	store_unlock(s);
	return rc;
}

static int sq_stats(struct pd_store *base, struct pd_store_stats *st, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	memset(st, 0, sizeof *st);
	store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = days_in(s, INT64_MIN, INT64_MAX, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		char path[4096], aux[4200];
		struct stat sb;
		day_path(s, days[i], path, sizeof path);
		if (!stat(path, &sb))
			st->disk_bytes += (uint64_t)sb.st_size;
		snprintf(aux, sizeof aux, "%s-wal", path);
		if (!stat(aux, &sb))
			st->disk_bytes += (uint64_t)sb.st_size;
		st->partitions++;
		struct part *pt;
		if ((rc = part_q(s, days[i], &pt, NULL, err)) || !pt)
			continue;
		part_read(pt);
		sqlite3_stmt *q;
		if (sqlite3_prepare_v2(pt->db, "SELECT count(*) FROM profiles", -1, &q, NULL) != SQLITE_OK) {
			rc = part_skip(pt, qerr(pt, pt->db, "stats", err), NULL);
			part_done(pt);
			continue;
		}
		if (sqlite3_step(q) == SQLITE_ROW)
			st->profiles += (uint64_t)sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		if (sqlite3_prepare_v2(pt->db,
				       "SELECT count(*) FROM rollups r LEFT JOIN hour_gen g ON g.service = r.service"
				       " AND g.type = r.type AND g.hour = r.hour WHERE r.gen = coalesce(g.gen, 0)"
				       " AND r.profiles >= 0",
				       -1, &q, NULL) != SQLITE_OK) {
			rc = part_skip(pt, qerr(pt, pt->db, "stats", err), NULL);
			part_done(pt);
			continue;
		}
		if (sqlite3_step(q) == SQLITE_ROW)
			st->rollups += (uint64_t)sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		part_done(pt);
	}
	free(days);
	for (size_t i = 0; i < s->nquar;)
		if (quar_current(s, &s->quar[i]))
			i++;
	st->quarantined = s->nquar;
	store_unlock(s);
	pthread_mutex_lock(&s->mu);
	st->open_partitions = s->nparts;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void sq_health(struct pd_store *base, struct pd_store_health *out)
{
	struct sq *s = (struct sq *)base;
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nquar;)
		if (quar_current(s, &s->quar[i]))
			i++;
	out->nquarantined = s->nquar;
	for (size_t i = 0; i < s->nquar && i < PD_STORE_MAX_QUARANTINED; i++) {
		out->quarantined[i].day = s->quar[i].day;
		day_file(s->quar[i].day, out->quarantined[i].file, sizeof out->quarantined[i].file);
		snprintf(out->quarantined[i].reason, sizeof out->quarantined[i].reason, "%s", s->quar[i].reason);
	}
	out->cannot_write = atomic_load(&s->nospace);
	if (out->cannot_write)
		snprintf(out->write_error, sizeof out->write_error, "%s", s->nospace_msg);
	pthread_mutex_unlock(&s->mu);
}

static void sq_skipped_in(struct pd_store *base, int64_t from, int64_t to, struct pd_store_skipped *out)
{
	struct sq *s = (struct sq *)base;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nquar;) {
		struct quar *q = &s->quar[i];
		if (!quar_current(s, q))
			continue;
		if ((q->day + 1) * DAY_NS - 1 >= from && q->day * DAY_NS <= to)
			pd_store_skipped_add(out, q->day);
		i++;
	}
	pthread_mutex_unlock(&s->mu);
}

void pd_store_sqlite_set_max_open(struct pd_store *base, size_t n)
{
	struct sq *s = (struct sq *)base;
	pthread_mutex_lock(&s->mu);
	s->max_open = n < 2 ? 2 : n;
	parts_trim(s, s->max_open);
	pthread_mutex_unlock(&s->mu);
}

static void sq_close(struct pd_store *base)
{
	struct sq *s = (struct sq *)base;
	for (size_t i = 0; i < s->nparts; i++)
		part_close(s->parts[i]);
	free(s->parts);
	ZSTD_freeDCtx(s->dctx);
	for (int i = 0; i < s->nzfree; i++)
		ZSTD_freeCCtx(s->zfree[i]);
	close(s->lock_fd); /* releases the flock */
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->qmu);
	pthread_mutex_destroy(&s->zmu);
	pthread_cond_destroy(&s->qcv);
	free(s->quar);
	free(s->reserve_path);
	free(s->dir);
	free(s);
}

static const struct pd_store_ops sqlite_ops = {
	"sqlite",    sq_ingest, sq_find,  sq_get,   sq_merge,	    sq_remove,	  sq_services,
	sq_retain,   sq_stats,	sq_close, sq_merge_range, sq_rollup, sq_fn_totals, sq_health,
	sq_skipped_in,
};

int pd_store_open_sqlite(const char *dir, const struct pd_pprof_limits *lim, struct pd_store **out,
			 struct pd_err *err)
{
	*out = NULL;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return pd_errf(err, PD_EIO, "store: cannot create %s: %s", dir, strerror(errno));
	if (access(dir, R_OK | W_OK | X_OK))
		return pd_errf(err, PD_EIO, "store: %s is not a writable directory: %s", dir, strerror(errno));
	struct sq *s = calloc(1, sizeof *s);
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	s->base.ops = &sqlite_ops;
	/* The caches and the one mutex assume this process is the only writer:
	 * a second profd on the same directory is refused, not corrupted. */
	char lp[4096];
	snprintf(lp, sizeof lp, "%s/.lock", dir);
	s->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB)) {
		int e = errno;
		if (s->lock_fd >= 0)
			close(s->lock_fd);
		free(s->dir);
		free(s);
		return e == EWOULDBLOCK ? pd_errf(err, PD_EIO, "store: %s is in use by another profd process (%s is locked)",
						  dir, lp)
					: pd_errf(err, PD_EIO, "store: %s: %s", lp, strerror(e));
	}
	if (!(s->dctx = ZSTD_createDCtx())) {
		close(s->lock_fd);
		free(s->dir);
		free(s);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (lim)
		s->lim = *lim;
	pd_pprof_limits_default(&s->lim);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->qmu, NULL);
	pthread_mutex_init(&s->zmu, NULL);
	pthread_cond_init(&s->qcv, NULL);
	s->qtail = &s->qhead;
	s->max_open = 64;
	atomic_init(&s->nospace, false);
	atomic_init(&s->reserve_held, false);
	char rp[4096];
	snprintf(rp, sizeof rp, "%s/.reserve", dir);
	if ((s->reserve_path = strdup(rp))) {
		unlink(rp); /* a previous run's: sized again for this file system */
		reserve_make(s);
	}
	*out = &s->base;
	return 0;
}
