/*
 * sqlite_int.h — private to the SQLite backend (sqlite*.c; the design is
 * at the top of sqlite.c): its structures (the store, a partition, a job
 * of the group commit, the caches), the remap and the materialiser that
 * reading, merges and rollups share, and what one file of the backend
 * calls in another (prefixed sq_). Not for the rest of lib/store, which
 * sees the backend through struct pd_store_ops only.
 *
 *   sqlite.c         design; open, close, remove, services, retention, stats, health
 *   sqlite_part.c    errors, disk full, quarantine, partition state, opening day files, the LRU
 *   sqlite_ingest.c  ingest of a prepared profile: resolve through the caches, encode
 *   sqlite_commit.c  the group commit (the one writer of every partition)
 *   sqlite_read.c    symbols to profiles (materialisation)
 *   sqlite_query.c   find, get, reading stored rows
 *   sqlite_merge.c   merge by ids: per-partition aggregates
 *   sqlite_rollup.c  rollups, range merges, per-function totals
 */
#ifndef PD_STORE_SQLITE_INT_H
#define PD_STORE_SQLITE_INT_H

#include "codec.h"
#include "prepare.h"
#include "mat.h"
#include "../pprof/agg.h"

#include <pthread.h>
#include "../util/pdsqlite.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include "../util/pdzstd.h"

/* the symbol tables, one per kind of symbol (prepare.h) */
enum { K_STR = PD_SYM_STR, K_FN = PD_SYM_FN, K_MAP = PD_SYM_MAP, K_LOC = PD_SYM_LOC, K_STACK = PD_SYM_STACK,
       K_LSET = PD_SYM_LSET, NKINDS = PD_SYM_NKINDS };
extern const char *const sq_ktable[NKINDS]; /* their names */

#define DAY_NS (86400LL * 1000000000LL)
#define HOUR_NS PD_ROLLUP_NS
#define MAX_BLOCK PD_STORE_MAX_BLOCK

#define EMFILE_HINT "too many open files (raise the process's limit, ulimit -n, or lower --max-open-partitions)"

static inline int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0); }

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

/* probe (h) -> seq of every row of a symbol table without an index on h
 * (day files of schema 3 on: the index cost ~18 bytes a symbol, a third
 * of a real CPU series' day file), read from the table when a lookup
 * first needs it (sqlite_ingest.c): the rows this process commits after
 * are in its cache and uset. seq 0 is the empty slot. */
struct pslot {
	uint64_t probe;
	int64_t seq;
};
struct pmap {
	struct pslot *s; /* NULL: not read yet */
	size_t mask;
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

/* A partition's symbols of one kind as read back, by seq (seqs are dense
 * from 1): v[seq].n1 = length + 1 of its content at bytes + v[seq].off,
 * 0 = not kept. A committed symbol never changes (a replaced day file is
 * another struct part). Under the store mutex. */
struct rsym {
	uint32_t off, n1;
};
struct rcache {
	struct rsym *v;
	size_t cap;
	struct pd_buf bytes;
};
#define SQ_RCACHE_BYTES ((size_t)64 << 20) /* the default bound of all partitions' read caches (rc_max) */

struct part {
	int64_t day; /* days since the epoch */
	/* reads and ingest lookups (under the store mutex) */
	sqlite3 *db;
	sqlite3_stmt *find[NKINDS], *get[NKINDS], *get_prof, *get_labels, *get_lset;
	/* files before schema 6 hold one row per profile and label in
	 * profile_labels (read and deleted still; new profiles name a
	 * label_sets row) */
	bool plabels;
	/* symbols read in (mostly) ascending seqs: a cursor walks the table's
	 * leaves instead of a seek from the root per symbol (sqlite_read.c);
	 * scan_at[k] = the seq it is on, 0 = not positioned */
	sqlite3_stmt *scan[NKINDS];
	int64_t scan_at[NKINDS];
	/* writes (the committer only) */
	sqlite3 *wdb;
	sqlite3_stmt *ins[NKINDS], *ins_prof, *del_prof, *del_labels, *keep_base;
	sqlite3_stmt *lset_ins, *lset_find, *lset_kv; /* label_sets, set_labels */
	sqlite3_stmt *base_get; /* db: the blocks that may be row pk's (codec.h: chains) */
	sqlite3_stmt *begin, *commit, *rollback, *savepoint, *release, *rollback_to;
	/* rollups: reads (db), writes (wdb, the committer) */
	sqlite3_stmt *gen_get, *range_get, *rollups_get, *rollups_fget, *stale_get;
	sqlite3_stmt *gen_bump, *gen_wget, *ins_rollup;
	/* under the store mutex */
	struct rcache rc[NKINDS]; /* symbols read back (sqlite_read.c) */
	struct cache cache[NKINDS];
	struct uset used[NKINDS];
	int64_t next[NKINDS]; /* the seq of the next new symbol */
	bool fresh[NKINDS];   /* every row of the table is in the cache: a miss is a new symbol */
	bool hidx[NKINDS];    /* the table has an index on h (schema 2 and before), else pm */
	struct pmap pm[NKINDS];
	/* symbol packs (codec.h; schema 4 on): seqs 1 .. packed[k] of kind k
	 * are in packs, not rows (for a reader whose snapshot is older or
	 * newer than packed[k], either place is looked in); tables with an
	 * index on h and mappings are never packed. Set by the committer after
	 * its commit, under the store mutex. */
	int64_t packed[NKINDS];
	uint32_t pack_bps[NKINDS]; /* the committer's: bytes a symbol took in its last pack, x16 */
	sqlite3_stmt *pack_get, *pack_scan; /* db: the pack of (k, seq); every pack of k */
	sqlite3_stmt *pack_ins, *pack_rows[NKINDS], *pack_del[NKINDS]; /* wdb: the committer's */
	struct pd_pack grp[NKINDS]; /* the pack of k last decoded (n 0: none); under the store mutex */
	struct pendq pend;
	uint64_t gen; /* bumped when pending symbols are lost (a failed commit) */
	bool rtx;     /* db inside a read transaction (see sq_part_read) */
	uint64_t rtx_no; /* read transactions begun */
	/* finding a profile by its id (sq_locate): files before schema 5 have
	 * an index on xid (xidx); in the others it is looked for under the
	 * service of the last one found (svc_last), then under each of the
	 * day's services as listed in read transaction svc_at (svc_ok), listed
	 * again if that was an earlier one and the id was not found */
	bool xidx, svc_ok;
	bool xid_int; /* xid an integer (codec.h, sq_xid_key), a file made since schema 7 */
	sqlite3_stmt *svc_first, *svc_next;
	char **svc, *svc_last;
	size_t nsvc;
	uint64_t svc_at;
	atomic_int refs; /* queued jobs: retention does not drop the partition */
	/* the open-partition LRU (under the store mutex) */
	struct sq *s;
	uint64_t last_use; /* tick of its last sq_part_get */
	uint64_t op;       /* the operation (s->opno) holding it, never closed meanwhile */
	uint64_t inst;     /* which opening of the day file this is (s->ninst): a series' base is
			      taken from the same one (a file replaced meanwhile has other rows) */
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
	uint64_t xtail; /* ingest: id's tail (pd_xid_new), what a file of schema 7 keeps */
	int64_t created, nsamples;
	struct pd_buf hdr, blk;
	int64_t pk;      /* removal: the row; ingest: set by the commit */
	uint64_t series; /* ingest: sq_series_key */
	struct pd_buf raw; /* ingest: the block's raw bytes, the series' next base */
	int depth;         /* bases below this block */
	struct pd_err *err;
	int rc;
	bool handled, done;
	pthread_cond_t cv; /* sq_submit: its waiter's (under qmu) */
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
	struct job *qhead, **qtail;
	bool committing;
	size_t rc_bytes, rc_max; /* in the partitions' read caches (struct rcache), its bound; under mu */
	struct dayinfo *dinfo;    /* what stats and services read of each day file, by day (sqlite.c); under mu */
	size_t ndinfo, cdinfo;
	atomic_uint_fast64_t sym_reads, sym_cached; /* pd_store_stats */
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
	/* chains of blocks (under mu) */
	struct sq_series *series; /* SQ_SERIES_N */
	uint64_t ninst;           /* partitions opened so far */
	size_t series_bytes;
	struct pd_rawcache rawcache; /* decoded raw bytes, for the blocks based on them */
};

/* The last block committed of a series (one target's scrapes of one
 * type: service, type, labels) in a day: the base of its next block
 * (codec.h, chains). A direct-mapped table; a collision or a full budget
 * only costs a block written without a base. Under the store mutex. */
#define SQ_SERIES_N 2048
#define SQ_SERIES_BYTES (64u << 20) /* raw bytes kept at most */
#define SQ_SERIES_RAW_MAX (1u << 20) /* a larger block is nobody's base */
struct sq_series {
	uint64_t key, inst; /* inst: the partition's (struct part) */
	int64_t day, pk;
	uint64_t hash;
	struct pd_buf raw;
	int depth;
};

/* A quarantined day: what was wrong, and the file as it was then (a file
 * removed, replaced or changed since is tried again). */
struct quar {
	int64_t day;
	char reason[256];
	bool damaged; /* else a file of a newer profd (not read, not damaged) */
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime; /* ctime: a chmod of a file that could not be opened */
};


/* Whether kind k of partition p goes into packs: its table has no index
 * on h and its identity is its whole content (a mapping's is a prefix).
 * Its map (struct pmap) is then keyed by sq_ckey of the content, not by
 * h, which packs do not keep. */
static inline bool sq_packable(const struct part *p, int k) { return k != K_MAP && !p->hidx[k]; }
static inline uint64_t sq_ckey(int k, const void *c, size_t n) { return pd_hash(c, n, 0x7061636bu + (uint64_t)k); }

/* ---- sqlite_part.c ---- */
int sq_err(struct pd_err *err, sqlite3 *db, const char *what);
bool sq_corrupt(sqlite3 *db);
void sq_day_file(int64_t day, char *buf, size_t n);
void sq_day_path(const struct sq *s, int64_t day, char *buf, size_t n);
void sq_reserve_make(struct sq *s);
void sq_nospace_relief(struct sq *s, struct part *pt);
struct quar *sq_quar_find(struct sq *s, int64_t day);
void sq_quar_drop(struct sq *s, struct quar *q);
bool sq_quar_current(struct sq *s, struct quar *q);
int sq_damaged(struct part *pt, struct pd_err *err, const char *fmt, ...) PD_PRINTF(3, 4);
int sq_qerr(struct part *pt, sqlite3 *db, const char *what, struct pd_err *err);
ZSTD_CCtx *sq_cctx_get(struct sq *s);
void sq_cctx_put(struct sq *s, ZSTD_CCtx *c);
void sq_pendq_free(struct pendq *q);
void sq_part_reset(struct part *pt);
void sq_part_read(struct part *p);
void sq_store_lock(struct sq *s);
void sq_store_unlock(struct sq *s);
void sq_parts_trim(struct sq *s, size_t keep);
void sq_part_done(struct part *p);
void sq_part_close(struct part *p);
/* Free a read cache (sqlite_read.c), its bytes off s->rc_bytes. */
void sq_rcache_free(struct sq *s, struct rcache *c);
/* Empty every partition's read cache. Under mu. */
void sq_rcache_clear_all(struct sq *s);
/* Read partition p's symbols into its read cache (pd_store_warm), while
 * the budget allows; false once it is full. In a read transaction of p. */
bool sq_rcache_warm(struct part *p);
int sq_part_get(struct sq *s, int64_t day, bool create, struct part **out, struct pd_err *err);

/* ---- sqlite.c ---- */
/* Forget what stats and services read of day (a commit changed it). Under mu. */
void sq_dayinfo_forget(struct sq *s, int64_t day);
/* Whether the rollup pass found nothing to build in day's file, which has
 * not changed since (its identity read now); marked by set_rolled after a
 * look under the same mutex. Under mu. */
bool sq_dayinfo_rolled(struct sq *s, int64_t day);
void sq_dayinfo_set_rolled(struct sq *s, int64_t day);

/* ---- sqlite_ingest.c ---- */
int sq_ingest(struct pd_store *base, const struct pd_ingest *in, const uint8_t *data, size_t len,
	      struct pd_profile_meta *out, enum pd_refusal *why, struct pd_err *err);
/* Read table k's map (struct pmap) into p: once it is needed (a lookup
 * that missed the cache of a table without an index on h), or ahead (the
 * newest day at start: pd_store_warm). Under the store mutex. */
int sq_pmap_read(struct part *p, int k, struct pd_err *err);

/* ---- sqlite_commit.c ---- */
void sq_submit(struct sq *s, struct job *j);

/* ---- sqlite_read.c ---- */
/* The partition's symbols as mat.h's source. */
struct pd_symsrc sq_symsrc(struct part *pt);
/* Symbol seq of kind k's content into buf (the read cache, packs, rows).
 * Under the store mutex, in a read transaction of p. */
int sq_sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err);
/* The pack that holds seq of kind k decoded into p->grp[k], unless it is
 * there: 1, or 0 if the snapshot has none, or an error. Same conditions. */
int sq_pack_load(struct part *p, int k, int64_t seq, struct pd_err *err);
/* The pack of kind k with the greatest first seq <= seq decoded into
 * p->grp[k]: 1, or 0 if there is none, or an error. Same conditions. */
int sq_pack_floor(struct part *p, int k, int64_t seq, struct pd_err *err);
/* fn(ctx, pack) for every pack of kind k the snapshot has, in order, until
 * it returns other than 0 (returned), or an error. Same conditions. */
int sq_packs_each(struct part *p, int k, int (*fn)(void *ctx, const struct pd_pack *pk), void *ctx,
		  struct pd_err *err);
/* The largest seq a pack's key holds (column kg of packs: kind * 2^40 +
 * its first seq). */
#define SQ_PACK_SEQ_MAX (((int64_t)1 << 40) - 1)

/* ---- sqlite_query.c ---- */
int sq_days_in(struct sq *s, int64_t from, int64_t to, int64_t **out, size_t *n, struct pd_err *err);
int sq_part_q(struct sq *s, int64_t day, struct part **pt, struct pd_store_skipped *sk, struct pd_err *err);
int sq_part_skip(struct part *pt, int rc, struct pd_store_skipped *sk);
int sq_locate(struct sq *s, const char *id, struct part **pt, struct pd_err *err);
void sq_svc_forget(struct part *p); /* the services sq_locate listed */
int sq_blob_col(struct part *pt, sqlite3_stmt *st, int col, uint64_t seed, const char *row, const char *what,
		const uint8_t **p, size_t *n, struct pd_err *err);
int sq_dec_row(struct sq *s, struct part *pt, sqlite3_stmt *st, int hcol, int bcol, const char *row,
	       uint64_t hseed, uint64_t bseed, struct pd_shdr *h, int64_t **rows, size_t *nrows, uint32_t *nv,
	       struct pd_err *err);
int sq_load_profile(struct sq *s, const char *id, struct part **pt, struct pd_shdr *h, int64_t **rows,
		    size_t *nrows, uint32_t *nv, struct pd_err *err);
int sq_find(struct pd_store *base, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
	    struct pd_store_skipped *skipped, struct pd_err *err);
int sq_get(struct pd_store *base, const char *id, struct pd_profile **out, struct pd_err *err);

/* ---- sqlite_merge.c ---- */
int sq_merge(struct pd_store *base, const char *const *ids, size_t n, struct pd_profile **out,
	     struct pd_err *err);

/* ---- sqlite_rollup.c ---- */
int sq_merge_range(struct pd_store *base, const struct pd_merge_range *q, struct pd_profile **out,
		   struct pd_merge_info *info, struct pd_err *err);
int sq_rollup(struct pd_store *base, int64_t cutoff, size_t max_hours, size_t *built, struct pd_err *err);
int sq_fn_totals(struct pd_store *base, const struct pd_merge_range *q, struct pd_fn_totals *out,
		 struct pd_merge_info *info, struct pd_err *err);

#endif
