/*
 * store.h — where profiles are kept: the storage interface every backend
 * implements (a method table, like SQLite's VFS or Varnish's stevedores),
 * and the profile metadata the API speaks about.
 *
 * A stored profile is decomposed on ingest (DESIGN.md): content-addressed,
 * deduplicated strings, functions, mappings, locations, stacks and label
 * sets, plus one metadata row and a compact sample block per profile. Ids
 * of symbols are hashes of their content, so the same stack has the same id
 * in every partition and every backend; hash collisions are detected, never
 * trusted. Merges aggregate sample blocks on those ids and never re-parse
 * pprof.
 *
 * Profiles live in time partitions (one per UTC day): retention drops whole
 * partitions. Profile ids are 20-character xids (as profefe's) whose time
 * part is the profile's creation time, so an id names its partition.
 *
 * Rollups (optional ops, NULL in a backend without them): per (service,
 * type, hour) the aggregate of the hour's profiles, built by `rollup` once
 * the hour is over and rebuilt after a late ingest or a removal in it;
 * `merge_range` uses them for the whole hours of a range and merges the
 * stored profiles of the rest, with the same result as merging every
 * profile (pd_store_merge_range falls back to find + merge).
 *
 * The conformance suite (tests/unit/test_store.c) is written against this
 * interface only.
 */
#ifndef PD_STORE_H
#define PD_STORE_H

#include "../pprof/pprof.h"

#define PD_STORE_ID_LEN 20

struct pd_kv {
	char *key, *value;
};

/* What the API says about a profile (profefe's model). */
struct pd_profile_meta {
	char id[PD_STORE_ID_LEN + 1];
	char service[128];
	char type[16]; /* cpu, heap, allocs, block, mutex, goroutine, threadcreate, other */
	int64_t created_ns;
	struct pd_kv *labels; /* sorted by key; owned by the meta (pd_meta_clear) */
	size_t nlabels;
	size_t stored_bytes;  /* size of its sample block on disk */
};
void pd_meta_clear(struct pd_profile_meta *m);

/* What to ingest: the profile bytes (gzip or raw) and its series identity. */
struct pd_ingest {
	const char *service;
	const char *type; /* NULL = inferred from the profile; else checked against it */
	const struct pd_kv *labels;
	size_t nlabels;
	int64_t created_ns; /* 0 = the profile's time_nanos, else now */
	/* refuse (PD_EEXPIRED, nothing written) a profile created before this;
	 * 0 = no bound. The retention window's start. */
	int64_t min_created_ns;
	/* refuse (PD_EINVAL, nothing written) a profile created after this
	 * (a clock far ahead, or a made-up date: each day is a file); 0 = no
	 * bound. Now + --max-future-skew. */
	int64_t max_created_ns;
	/* Optional shared memory budget for the decode (struct
	 * pd_pprof_limits.reserve): PD_EBUSY when it is exhausted. */
	int (*reserve)(void *ctx, size_t bytes);
	void *reserve_ctx;
};
/* Bytes an ingest holds per sample and per symbol beyond the decoded model
 * (content hashes, ids, sort keys), counted in the per-upload memory cap. */
#define PD_INGEST_BYTES_PER_SAMPLE 96
#define PD_INGEST_BYTES_PER_SYMBOL 24

/* Why an ingest refused a profile: set with the error (pd_store_ingest_why),
 * so that callers decide on it, never on the message. The code that comes
 * with each is in parentheses. */
enum pd_refusal {
	PD_REFUSE_NONE = 0,       /* stored; or failed, not for what the profile is (I/O, memory, disk full) */
	PD_REFUSE_SERVICE,        /* in->service missing or too long (PD_EINVAL) */
	PD_REFUSE_UNKNOWN_TYPE,   /* in->type is not a profile type (PD_EINVAL) */
	PD_REFUSE_MALFORMED,      /* not a (gzipped) pprof profile (PD_EINVAL) */
	PD_REFUSE_TOO_LARGE,      /* over a decoder cap, or a block or symbol over the store's (PD_ELIMIT) */
	PD_REFUSE_EMPTY,          /* no samples (PD_EINVAL) */
	PD_REFUSE_TYPE_MISMATCH,  /* the declared type is not what the profile is (PD_EINVAL) */
	PD_REFUSE_AMBIGUOUS_TYPE, /* no type declared, none inferred (block or mutex?) (PD_EINVAL) */
	PD_REFUSE_TIME_RANGE,     /* its time is outside what an id holds (1970..2106) (PD_EINVAL) */
	PD_REFUSE_TOO_OLD,        /* created before in->min_created_ns (PD_EEXPIRED) */
	PD_REFUSE_TOO_NEW,        /* created after in->max_created_ns (PD_EINVAL) */
	PD_REFUSE_BUSY,           /* the memory budget (in->reserve) or the store's file descriptors are
				   * exhausted for now: try again (PD_EBUSY) */
};

/* Days a query skipped because their partition is damaged (quarantined:
 * see pd_store_health): the answer is partial. Filled by the store when
 * the caller passes one (NULL: not reported). */
#define PD_STORE_MAX_SKIPPED 32
struct pd_store_skipped {
	bool partial;                       /* some day was skipped */
	size_t n;                           /* days skipped (may be > the array) */
	int64_t days[PD_STORE_MAX_SKIPPED]; /* days since the epoch, ascending, the first n */
};
void pd_store_skipped_add(struct pd_store_skipped *sk, int64_t day);
void pd_store_skipped_merge(struct pd_store_skipped *dst, const struct pd_store_skipped *src);
/* "2026-11-30" (11 bytes with the NUL). */
void pd_store_day_name(int64_t day, char out[16]);

/* Which profiles: service (required), type (NULL = any), every label must
 * match exactly (AND), created in [from_ns, to_ns]; limit 0 = all, else the
 * newest `limit`. Results come in ascending creation time. */
struct pd_store_query {
	const char *service;
	const char *type;
	const struct pd_kv *labels;
	size_t nlabels;
	int64_t from_ns, to_ns;
	size_t limit;
};

/* What a store holds, for /metrics. */
struct pd_store_stats {
	uint64_t partitions; /* time partitions present */
	uint64_t profiles;   /* profiles stored */
	uint64_t disk_bytes; /* bytes on disk, all partitions (journal included) */
	uint64_t rollups;    /* valid (service, type, hour) rollups */
	uint64_t quarantined; /* damaged partitions skipped by queries (pd_store_health) */
	uint64_t open_partitions; /* partitions open now (at most --max-open-partitions when idle) */
	/* symbols the reads (merges, fetches, rollups) took from the store's
	 * tables / from its cache of read symbols (what reads and
	 * pd_store_warm kept), since the start; the cache's bytes now */
	uint64_t sym_reads, sym_cached;
	uint64_t read_cache_bytes;
};

/* What /readyz and /metrics say about the store's files. */
#define PD_STORE_MAX_QUARANTINED 16
struct pd_store_health {
	bool cannot_write;     /* the last commit failed for lack of disk space; cleared by the next one that works */
	char write_error[512]; /* its message */
	size_t nquarantined;   /* damaged partitions (may be > the array) */
	struct {
		int64_t day;
		char file[64];     /* its file name in the data dir */
		char reason[256];
	} quarantined[PD_STORE_MAX_QUARANTINED];
};

#define PD_ROLLUP_NS (3600LL * 1000000000LL) /* a rollup covers one UTC hour */

/* Every profile of one service and type created in [from_ns, to_ns], with
 * no label matchers: what a rollup can answer. */
struct pd_merge_range {
	const char *service; /* required */
	const char *type;    /* required (a rollup is per type) */
	int64_t from_ns, to_ns;
	size_t max_raw;  /* most profiles merged from their own sample blocks (those
			  * of hours without a valid rollup); 0 = no cap; over it:
			  * PD_ELIMIT, nothing returned. Rolled-up profiles do not count */
	bool no_rollups; /* merge every profile itself (tests, benchmarks) */
};

/* Per-function totals of a merge, as `go tool pprof -top` computes them
 * (pd_top_compute: frames named as -top names them, cum once per sample),
 * for every sample type, and each type's total (sum of the sample values):
 * what series and top need, without the profile. All of it is additive over
 * disjoint sets of profiles. */
struct pd_fn_totals {
	uint32_t nv;                  /* sample types */
	struct pd_str *types, *units; /* [nv] */
	struct pd_str dflt;           /* the profiles' default_sample_type; "" if none */
	int64_t *total;               /* [nv] */
	size_t n;                     /* functions */
	struct pd_str *names;         /* [n], in no particular order */
	int64_t *flat, *cum;          /* [n * nv]: function i, sample index j at [i * nv + j] */
	struct pd_arena *arena;       /* owns everything */
};
void pd_fn_totals_free(struct pd_fn_totals *t);
/* The sample index that pprof shows by default (default_sample_type if it
 * names one, else the last), as pd_profile_default_index. */
uint32_t pd_fn_totals_default_index(const struct pd_fn_totals *t);
/* The totals of one profile (as the merge-then-totals path computes them). */
int pd_fn_totals_of(const struct pd_profile *p, struct pd_fn_totals *out, struct pd_err *err) PD_WUR;

/* How a range merge was answered. */
struct pd_merge_info {
	size_t profiles;     /* profiles the result covers */
	size_t raw;          /* of which merged from their sample blocks */
	size_t rollup_hours; /* hours answered by a rollup (> 0: "rollups were used") */
	struct pd_store_skipped skipped; /* damaged days left out: the answer is partial */
};

/* Called per matching profile; non-zero stops the iteration and is returned. */
typedef int (*pd_meta_fn)(void *ctx, const struct pd_profile_meta *m);

struct pd_store;

struct pd_store_ops {
	const char *name;
	/* why (may be NULL): set on every return (PD_REFUSE_NONE on success). */
	int (*ingest)(struct pd_store *s, const struct pd_ingest *in, const uint8_t *data, size_t len,
		      struct pd_profile_meta *out, enum pd_refusal *why, struct pd_err *err);
	/* skipped (optional, NULL): the damaged days it could not search. */
	int (*find)(struct pd_store *s, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
		    struct pd_store_skipped *skipped, struct pd_err *err);
	/* Optional (NULL: find per service): find over each of services[0..n)
	 * (q->service unused, q->limit 0), the rows in (service, created_ns,
	 * id) order, which is the services' order when they are given sorted
	 * (pd_store_services'): pd_store_find_services. */
	int (*find_services)(struct pd_store *s, const char *const *services, size_t n,
			     const struct pd_store_query *q, pd_meta_fn fn, void *ctx, struct pd_err *err);
	/* Rebuild one stored profile (reads like the uploaded one in go tool pprof). */
	int (*get)(struct pd_store *s, const char *id, struct pd_profile **out, struct pd_err *err);
	/* Merge stored profiles by id, aggregating sample blocks (PD_EINCOMPAT
	 * for mixed sample types, PD_ENOTFOUND for an unknown id). */
	int (*merge)(struct pd_store *s, const char *const *ids, size_t n, struct pd_profile **out, struct pd_err *err);
	/* Optional (NULL: merge): merge, of ids that are all profiles of
	 * service and type (a store may find them faster): pd_store_merge_metas. */
	int (*merge_of)(struct pd_store *s, const char *service, const char *type, const char *const *ids, size_t n,
			struct pd_profile **out, struct pd_err *err);
	int (*remove)(struct pd_store *s, const char *id, struct pd_err *err);
	/* Distinct services, sorted; caller frees each and the array. */
	int (*services)(struct pd_store *s, char ***out, size_t *n, struct pd_err *err);
	/* Drop every partition that ends before cutoff_ns; *dropped = partitions removed. */
	int (*retain)(struct pd_store *s, int64_t cutoff_ns, size_t *dropped, struct pd_err *err);
	int (*stats)(struct pd_store *s, struct pd_store_stats *out, struct pd_err *err);
	void (*close)(struct pd_store *s);
	/* Optional (NULL: the wrappers below fall back). Merge what q selects
	 * (pd_merge_range); *out = NULL and info->profiles = 0 if nothing. */
	int (*merge_range)(struct pd_store *s, const struct pd_merge_range *q, struct pd_profile **out,
			   struct pd_merge_info *info, struct pd_err *err);
	/* Build or rebuild the missing or stale rollups of hours that ended at
	 * or before cutoff_ns, oldest first, at most max_hours (0 = all);
	 * *built = rollups written. */
	int (*rollup)(struct pd_store *s, int64_t cutoff_ns, size_t max_hours, size_t *built, struct pd_err *err);
	/* Optional: per-function totals of what q selects (struct pd_fn_totals);
	 * out->n = 0, nv = 0 and info->profiles = 0 if nothing. */
	int (*fn_totals)(struct pd_store *s, const struct pd_merge_range *q, struct pd_fn_totals *out,
			 struct pd_merge_info *info, struct pd_err *err);
	/* Optional: damaged (quarantined) partitions, the write state. */
	void (*health)(struct pd_store *s, struct pd_store_health *out);
	/* Optional: the quarantined days that intersect [from_ns, to_ns] into
	 * *out (added): what a query over that range skipped. */
	void (*skipped_in)(struct pd_store *s, int64_t from_ns, int64_t to_ns, struct pd_store_skipped *out);
	/* Optional: get ready for the first queries (pd_store_warm). */
	void (*warm)(struct pd_store *s, size_t days);
	/* Optional (NULL: stats): the stats for a caller that must not wait on
	 * a slow backend (/metrics, on an HTTP worker): a refresh's figures if
	 * it comes within the backend's bound, else the last refresh's. */
	int (*stats_quick)(struct pd_store *s, struct pd_store_stats *out, struct pd_err *err);
	/* How many reads one request may usefully have in flight at once
	 * (pd_store_read_ahead): more than 1 for a store whose reads wait on
	 * round trips to a server; 0 = 1, reads one after another. */
	unsigned read_ahead;
};

struct pd_store {
	const struct pd_store_ops *ops;
};

/* The embedded backend: SQLite (WAL) files under dir, one per UTC day.
 * A successful ingest is on disk (synchronous=FULL commit). */
int pd_store_open_sqlite(const char *dir, const struct pd_pprof_limits *lim, struct pd_store **out,
			 struct pd_err *err) PD_WUR;
/* Partitions kept open at most when idle (LRU; default 64, at least 2):
 * each costs ~5 file descriptors. One in use (a query, a queued commit)
 * is never closed. */
void pd_store_sqlite_set_max_open(struct pd_store *s, size_t n);
/* The bound of the cache of symbols read back, all partitions together
 * (default 64 MiB; 0 = no cache); the cache is emptied now. */
void pd_store_sqlite_set_read_cache(struct pd_store *s, size_t bytes);

/* The ClickHouse backend (clickhouse.c): many collectors share one store.
 * url: clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE[?cluster=NAME&insert_quorum=N&secure=1]; the
 * tables are created (or their schema version checked) here. Errors of an
 * unreachable or failing ClickHouse are PD_EUNAVAIL. */
struct pd_store_ch_opts {
	const char *password; /* overrides the URL's (--store-password-file) */
	const char *cacert;   /* PEM CA of an https ClickHouse (NULL: the system's) */
	bool insecure;        /* do not verify its certificate */
	long timeout_ms;      /* per request; 0 = 30 s */
};
int pd_store_open_clickhouse(const char *url, const struct pd_store_ch_opts *o, const struct pd_pprof_limits *lim,
			     struct pd_store **out, struct pd_err *err) PD_WUR;

/* The ClickHouse backend's parsers of ClickHouse's answers on arbitrary
 * bytes, without a server (tests/fuzz/fuzz_chstore.c). */
int pd_store_ch_fuzz(const uint8_t *data, size_t n);

/* Offline check of a data directory (`profd store check`): every day
 * file's SQLite integrity_check, every blob's checksum, every header,
 * block and function table decoded. report() is called per damaged thing
 * (file = its name in dir). 0 and *damaged = files with damage. */
struct pd_store_check {
	size_t files, damaged_files, profiles, rollups, symbols, problems;
	size_t unchecked; /* blobs written before checksums (decoded only) */
};
int pd_store_check_dir(const char *dir, void (*report)(void *ctx, const char *file, const char *what), void *ctx,
		       struct pd_store_check *out, struct pd_err *err) PD_WUR;

/* The day files of a data directory (profd-YYYYMMDD.db), sorted; free with
 * pd_store_names_free. */
int pd_store_day_files(const char *dir, char ***names, size_t *n, struct pd_err *err) PD_WUR;
void pd_store_names_free(char **names, size_t n);

/* Backups (`profd store backup` / `restore`, lib/store/backup.c): every day
 * file copied with SQLite's online backup API (a consistent snapshot of
 * each day, also while a collector writes it), synced, renamed in place.
 * backup: dst must be new or empty (made 0700), a BACKUP note is written.
 * restore: into dst (made if missing); a day file dst already has is a
 * PD_EUSAGE naming it unless force (then replaced, its -wal/-shm removed);
 * the collector must be stopped. fn (may be NULL) is called per file. */
struct pd_store_copy {
	size_t files, bytes;
};
typedef void (*pd_store_copied_fn)(void *ctx, const char *file, size_t bytes);
int pd_store_backup_dir(const char *src, const char *dst, pd_store_copied_fn fn, void *ctx,
			struct pd_store_copy *out, struct pd_err *err) PD_WUR;
int pd_store_restore_dir(const char *backup, const char *dst, bool force, pd_store_copied_fn fn, void *ctx,
			 struct pd_store_copy *out, struct pd_err *err) PD_WUR;

/* Thin wrappers over the ops. */
static inline int pd_store_ingest(struct pd_store *s, const struct pd_ingest *in, const uint8_t *data, size_t len,
				  struct pd_profile_meta *out, struct pd_err *err)
{
	return s->ops->ingest(s, in, data, len, out, NULL, err);
}
/* The same, and why a refused profile was refused in *why (enum
 * pd_refusal; PD_REFUSE_NONE when stored or when the store failed). */
static inline int pd_store_ingest_why(struct pd_store *s, const struct pd_ingest *in, const uint8_t *data,
				      size_t len, struct pd_profile_meta *out, enum pd_refusal *why,
				      struct pd_err *err)
{
	return s->ops->ingest(s, in, data, len, out, why, err);
}
static inline int pd_store_find(struct pd_store *s, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
				struct pd_err *err)
{
	return s->ops->find(s, q, fn, ctx, NULL, err);
}
/* pd_store_find over each of services[0..n) (sorted as pd_store_services
 * gives them; q->service unused, q->limit 0), in turn; at once on a store
 * whose reads wait on round trips (ClickHouse). */
int pd_store_find_services(struct pd_store *s, const char *const *services, size_t n, const struct pd_store_query *q,
			   pd_meta_fn fn, void *ctx, struct pd_err *err) PD_WUR;
/* The same, and the damaged days that were skipped added to *skipped. */
static inline int pd_store_find_partial(struct pd_store *s, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
					struct pd_store_skipped *skipped, struct pd_err *err)
{
	return s->ops->find(s, q, fn, ctx, skipped, err);
}
static inline int pd_store_get(struct pd_store *s, const char *id, struct pd_profile **out, struct pd_err *err)
{
	return s->ops->get(s, id, out, err);
}
static inline int pd_store_merge(struct pd_store *s, const char *const *ids, size_t n, struct pd_profile **out,
				 struct pd_err *err)
{
	return s->ops->merge(s, ids, n, out, err);
}
/* pd_store_merge of the profiles m[0..n) (their ids), told their service
 * and type when they all share them. */
int pd_store_merge_metas(struct pd_store *s, const struct pd_profile_meta *const *m, size_t n, struct pd_profile **out,
			 struct pd_err *err) PD_WUR;
static inline int pd_store_remove(struct pd_store *s, const char *id, struct pd_err *err)
{
	return s->ops->remove(s, id, err);
}
static inline int pd_store_services(struct pd_store *s, char ***out, size_t *n, struct pd_err *err)
{
	return s->ops->services(s, out, n, err);
}
static inline int pd_store_retain(struct pd_store *s, int64_t cutoff_ns, size_t *dropped, struct pd_err *err)
{
	return s->ops->retain(s, cutoff_ns, dropped, err);
}
static inline int pd_store_stats(struct pd_store *s, struct pd_store_stats *out, struct pd_err *err)
{
	return s->ops->stats(s, out, err);
}
static inline int pd_store_stats_quick(struct pd_store *s, struct pd_store_stats *out, struct pd_err *err)
{
	return (s->ops->stats_quick ? s->ops->stats_quick : s->ops->stats)(s, out, err);
}
static inline void pd_store_close(struct pd_store *s)
{
	if (s)
		s->ops->close(s);
}
/* Merge every profile of q->service and q->type in [from, to] (see struct
 * pd_merge_range): from rollups where whole hours have one, else from the
 * profiles. Same result as pd_store_find + pd_store_merge (semantically:
 * sample order may differ). *out = NULL, info->profiles = 0 if none match.
 * Backends without rollups: find + merge. */
int pd_store_merge_range(struct pd_store *s, const struct pd_merge_range *q, struct pd_profile **out,
			 struct pd_merge_info *info, struct pd_err *err) PD_WUR;
/* s->ops->read_ahead, at least 1; the environment's PROFD_READ_AHEAD
 * (1..64) if set. */
unsigned pd_store_read_ahead(const struct pd_store *s);
/* Per-function totals (struct pd_fn_totals) of what q selects: equal to
 * pd_fn_totals_of(pd_store_merge_range(q)), read from the rollups' function
 * tables for whole hours (no profile materialised: a series or a top over
 * rolled-up hours reads a few KB per hour and service). Nothing selected:
 * 0, out->nv = 0, out->n = 0, info->profiles = 0. */
int pd_store_fn_totals(struct pd_store *s, const struct pd_merge_range *q, struct pd_fn_totals *out,
		       struct pd_merge_info *info, struct pd_err *err) PD_WUR;
/* Damaged partitions and the write state (zeroed if the backend does not
 * tell). */
void pd_store_health(struct pd_store *s, struct pd_store_health *out);
/* The damaged days a query over [from_ns, to_ns] skipped, added to *out. */
void pd_store_skipped_in(struct pd_store *s, int64_t from_ns, int64_t to_ns, struct pd_store_skipped *out);
/* Before serving: open what the first queries and uploads will read, the
 * newest `days` days of the store (the embedded backend's day files: a
 * file's open, schema read and statements are ~1.7 ms, measured, which the
 * first query after a start paid; and their symbols, into its bounded cache
 * of symbols read). Errors are left for that query to meet. */
void pd_store_warm(struct pd_store *s, size_t days);
/* Build the rollups of hours ended by cutoff_ns (see the op); 0 and
 * *built = 0 in a backend without rollups. */
int pd_store_rollup(struct pd_store *s, int64_t cutoff_ns, size_t max_hours, size_t *built,
		    struct pd_err *err) PD_WUR;

/* ---- ids ---------------------------------------------------------------- */

/* A new xid for time t (ns): 4 bytes seconds, 3 machine, 2 pid, 3 counter,
 * base32hex lower-case, 20 characters (profefe's / rs/xid's format). */
uint64_t pd_xid_new(int64_t t_ns, char out[PD_STORE_ID_LEN + 1]); /* returns its tail (pd_xid_tail) */
/* The creation time (ns, second resolution) in an xid; -1 if malformed. */
int64_t pd_xid_time(const char *id);
/* The 8 bytes after an xid's seconds (machine, pid, counter) as a
 * big-endian integer: 0, or -1 if id is not an xid as pd_xid_new writes
 * them. pd_xid_make(t_ns, tail) is the xid of t_ns's second and tail. */
int pd_xid_tail(const char *id, uint64_t *tail);
void pd_xid_make(int64_t t_ns, uint64_t tail, char out[PD_STORE_ID_LEN + 1]);

#endif
