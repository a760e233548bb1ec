/*
 * clickhouse.c — the ClickHouse store backend (issue 13): profd's store
 * model (store.h) on ClickHouse tables over its HTTP interface (ch.h), so
 * that any number of stateless `profd serve --store clickhouse://...`
 * share one store.
 *
 * Tables (schema version CH_SCHEMA, in the URL's database):
 *
 *   profd_schema  (version UInt32)                    which schema the tables have
 *   profiles      (day Date, service, type, created_ns Int64, id,
 *                  label_keys, label_values Array(String),
 *                  header, block, refs String, stored_bytes UInt64)
 *                 ReplacingMergeTree PARTITION BY day ORDER BY (service, type, created_ns, id)
 *   symbols       (day Date, kind UInt8, h FixedString(16), data String)
 *                 ReplacingMergeTree PARTITION BY day ORDER BY (kind, h)
 *   deleted       (day Date, id String)  ReplacingMergeTree PARTITION BY day ORDER BY id
 *   rollups       (day Date, service, type, hour Int64, profiles, fp UInt64,
 *                  built_ns Int64, header, block, refs String)
 *                 ReplacingMergeTree(built_ns) PARTITION BY day ORDER BY (service, type, hour)
 *
 * Rollups: an hour's profiles of one service and type aggregated, stored
 * as a profile row (refs into the day's symbols), valid while the hour's
 * live profiles are `profiles` many with the sum of their cityHash64(id)
 * `fp` (a late upload or a removal makes it stale: not used, rebuilt by
 * the next pass of any collector). Range merges read the valid rollups of
 * their whole hours and the profiles of the rest, by the sorting key's
 * (service, type, created_ns) prefix. profiles and rollups have small
 * index granules (their rows are KBs: refs hold 16 bytes per stack).
 *
 * A profile is stored as the embedded store stores it (DESIGN.md): its
 * strings, functions, mappings, locations, stacks and label sets are
 * symbols, content-addressed by the store core's 128-bit hashes
 * (prepare.h), so two collectors that store the same stack write the same
 * symbols row, which ReplacingMergeTree keeps once; the profile row holds
 * the codec's header and sample block (codec.h, checksummed and seeded with
 * the id as in the embedded store), whose string, mapping, stack and label
 * set numbers are indexes into the row's refs (their hashes). A symbol's
 * data is the embedded store's layout with 16-byte hashes where that one
 * has seqs. Reading turns hashes into per-request seqs and materialises
 * with the embedded store's code (mat.h).
 *
 * Every table is partitioned by the UTC day of the profile's creation
 * (symbols too: a day's symbols are those its profiles use), so retention
 * is ALTER TABLE ... DROP PARTITION and needs no other bookkeeping.
 *
 * Writes are batched (batch_submit): the rows of the uploads that arrive
 * while a batch's INSERTs are in flight (or within a few ms while others
 * are still being decoded) go in one symbols INSERT, then one profiles
 * INSERT; each upload is acknowledged only once ClickHouse acknowledged
 * both INSERTs of its batch, and a failed batch fails every upload in it
 * (a retry writes the same rows, which collapse). A profile row is never
 * visible before its symbols. DELETE writes a tombstone (deleted);
 * retention drops both.
 *
 * With ?cluster=NAME, each table T above is T_local on every server
 * (Replicated(Replacing)MergeTree, ZooKeeper path
 * /clickhouse/tables/{shard}/profd/NAME/DB/T, replica {replica}: the
 * servers' macros) plus T itself, a Distributed table over every shard's
 * T_local (profiles and deleted sharded by cityHash64(id), symbols by
 * cityHash64(h)), all created ON CLUSTER; queries name T as on one server
 * (IN (SELECT ... FROM deleted) becomes GLOBAL IN), INSERTs into T are
 * synchronous (insert_distributed_sync=1) and with ?insert_quorum=N wait
 * for N replicas; retention drops T_local's partitions ON CLUSTER.
 *
 * Only SQL that Debian's ClickHouse 18.16 runs: no TTL, codecs, query
 * parameters, LowCardinality or mutations; strings are sent as
 * '\xHH...' literals, so nothing a client sends is parsed as SQL.
 */
#define _GNU_SOURCE
#include "ch.h"
#include "codec.h"
#include "mat.h"
#include "prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../util/pdzstd.h"

#define CH_SCHEMA     1
#define DAY_NS        (86400LL * 1000000000LL)
#define HOUR_NS       PD_ROLLUP_NS
#define CH_MAX_ANSWER ((size_t)1 << 30)
#define CH_KNOWN_MAX  (1u << 20)  /* symbols remembered as written, before the set is cleared */
#define CH_SYMC_BYTES (64u << 20) /* symbol data kept from reads, before the cache is emptied */
#define CH_MAX_DAY    49710       /* 2106-02-07: the last day an id holds (32 bits of seconds) */
/* rollups: per (service, type, hour) the hour's profiles aggregated (a
 * profile row's header, block and refs), valid while the hour's live
 * profiles are still `profiles` many with these ids (fp: the sum of their
 * cityHash64(id)) */
#define CH_ROLLUP_COLS                                                                                                 \
	"(day Date, service String, type String, hour Int64, profiles UInt64, fp UInt64, built_ns Int64, header "      \
	"String, block String, refs String)"
/* the newest rollup of each (service, type, hour): rcnt, rfp, rok (has
 * a block), without reading the blobs (FINAL would) */
#define CH_ROLLUPS_NOW                                                                                                 \
	"SELECT service, type, hour, argMax(profiles, built_ns) AS rcnt, argMax(fp, built_ns) AS rfp, "                \
	"argMax(length(header) > 0, built_ns) AS rok FROM rollups GROUP BY service, type, hour"
#define CH_QUERY_SETTINGS "max_query_size=268435456&max_ast_elements=10000000&wait_end_of_query=1"
/* the batcher: uploads that arrive while a batch's INSERTs are in flight,
 * or within CH_BATCH_WINDOW_NS of the batch's first one while others are
 * still being decoded, share one symbols and one profiles INSERT; a batch
 * is closed at CH_BATCH_MAX bytes */
#define CH_BATCH_WINDOW_NS (5 * 1000000LL)
/* after a batch failed for want of ClickHouse, slowly (no answer for at
 * least this long: a request timeout), a batch about to be sent within
 * this time fails with it at once (503, Retry-After: 1): an upload's
 * handler holds its libmicrohttpd thread, so the uploads that thread took
 * meanwhile only start once the failed batch ended, and each would wait
 * another request timeout */
#define CH_DOWN_HOLD_NS    (1000 * 1000000LL)
#define CH_BATCH_MAX       ((size_t)32 << 20)

/* One group of uploads' rows, sent as one INSERT into symbols, then one
 * into profiles; every upload of it waits for the result. */
struct chbatch {
	struct pd_buf sym, prof; /* RowBinary rows */
	size_t nup;              /* uploads in it */
	size_t waiting;          /* uploads still to read the result (the last frees it) */
	int64_t opened_ns;       /* CLOCK_MONOTONIC */
	bool done;
	int rc;
	struct pd_err err;
};

/* A refresh that /metrics or /readyz asks for: one at a time, on a thread
 * of its own, waited for a while (bg_run). Those requests run on an HTTP
 * worker, whose other connections (/healthz among them) wait with them:
 * a ClickHouse that is slow or does not answer must not hold them for its
 * timeout. */
struct bg {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool running, joinable;
	uint64_t gen;   /* refreshes done */
	int64_t done_ns; /* CLOCK_MONOTONIC: when the last one ended */
	void *(*fn)(void *);
};

struct chs {
	struct pd_store base;
	struct pd_ch *ch;
	struct pd_pprof_limits lim;
	char *cluster;  /* ?cluster=NAME, or NULL: one server */
	const char *gl; /* "GLOBAL " with a cluster: IN (SELECT ... FROM deleted) of a Distributed table */
	char *on;       /* " ON CLUSTER NAME" or "" */
	/* the batcher (bmu, bcv): open gathers rows; busy: a batch was taken by
	 * its leader (window, then INSERTs); preparing: ingests still decoding */
	pthread_mutex_t bmu;
	pthread_cond_t bcv; /* CLOCK_MONOTONIC */
	struct chbatch *open;
	bool busy;
	size_t preparing;
	char *ins_settings;        /* URL settings of the INSERTs */
	uint64_t batches, batched; /* INSERT pairs sent, uploads they held */
	int64_t down_ns;        /* CLOCK_MONOTONIC: when a batch last failed for want of ClickHouse, 0 = it did not */
	bool down_slow;         /* after CH_DOWN_HOLD_NS or more without an answer */
	struct pd_err down_err; /* and why */
	/* symbols this process wrote (day, kind, hash): not sent again */
	pthread_mutex_t mu;
	uint64_t *known;
	size_t kmask, kn;
	/* symbols read (symc_*): kept as ClickHouse holds them, for the next reads */
	pthread_mutex_t cmu;
	struct pd_hidx cix;
	struct symc_e *ce;
	size_t cn, ccap;
	struct pd_buf cbytes;
	uint64_t sym_reads, sym_cached; /* pd_store_stats; under cmu */
	/* /metrics' stats (ch_stats) and /readyz's look (ch_health): each
	 * refreshed on a thread of its own (struct bg), with the last result */
	struct bg sbg, hbg;
	bool s_have;
	struct pd_store_stats s_st;
	struct pd_err s_err;
	int s_rc;
	bool health_bad;
	char health_msg[512];
};

static inline int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

/* A day in SQL: toDate(N), not 'YYYY-MM-DD': ClickHouse 18.16 parses no
 * date string after 2105-12-31 (toDate('2106-01-01') is 1970-01-01), and
 * ids go on to 2106-02-07; a number is no string to parse (and still
 * selects partitions: force_index_by_date accepts it). */
#define DAY_SQL_LEN 24
static const char *day_sql(int64_t day, char *out)
{
	snprintf(out, DAY_SQL_LEN, "toDate(%lld)", (long long)(day < 0 ? 0 : day > CH_MAX_DAY ? CH_MAX_DAY : day));
	return out;
}

static int nomem(struct pd_err *err)
{
	return pd_errf(err, PD_ENOMEM, "out of memory");
}

/* ---- the set of written symbols ---------------------------------------- */

static uint64_t known_key(int64_t day, int kind, struct pd_h128 h)
{
	uint64_t k = pd_hash_u64(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)day << 8 | (uint64_t)kind));
	return k ? k : 1;
}

static bool known_has(struct chs *s, uint64_t k)
{
	for (size_t i = k & s->kmask;; i = (i + 1) & s->kmask) {
		if (s->known[i] == k)
			return true;
		if (!s->known[i])
			return false;
	}
}

static void known_put(struct chs *s, uint64_t k)
{
	if (s->kn >= CH_KNOWN_MAX) {
		memset(s->known, 0, (s->kmask + 1) * sizeof *s->known);
		s->kn = 0;
	}
	size_t i = k & s->kmask;
	while (s->known[i] && s->known[i] != k)
		i = (i + 1) & s->kmask;
	if (!s->known[i]) {
		s->known[i] = k;
		s->kn++;
	}
}

/* ---- the cache of read symbols ------------------------------------------------ */

/* A symbol is content-addressed: (day, kind, hash) always has the same
 * data. What reads fetched is kept here, as ClickHouse holds it (children
 * as hashes), so that the next merge over the same day asks ClickHouse only
 * for the symbols it has not met yet (measured: the symbol rounds were ~45
 * of a merge's ~100 ms). At most CH_SYMC_BYTES of data: past it the cache
 * is emptied and fills again. Under cmu. */
struct symc_e {
	int64_t day;
	struct pd_h128 h;
	uint32_t off, len;
	uint8_t kind;
};

struct symc_key {
	const struct chs *s;
	int64_t day;
	int kind;
	struct pd_h128 h;
};

static bool symc_eq(void *ctx, uint32_t v)
{
	const struct symc_key *k = ctx;
	const struct symc_e *e = &k->s->ce[v];
	return e->day == k->day && e->kind == k->kind && e->h.lo == k->h.lo && e->h.hi == k->h.hi;
}

static const struct symc_e *symc_find(const struct chs *s, int64_t day, int kind, struct pd_h128 h)
{
	if (!s->cix.slots)
		return NULL;
	struct symc_key k = {s, day, kind, h};
	uint32_t v = pd_hidx_find(&s->cix, known_key(day, kind, h), symc_eq, &k);
	return v == PD_NONE ? NULL : &s->ce[v];
}

static void symc_clear(struct chs *s)
{
	pd_hidx_free(&s->cix);
	memset(&s->cix, 0, sizeof s->cix);
	s->cn = 0;
	s->cbytes.len = 0;
}

/* Keep (day, kind, h)'s data; out of memory or over the bound: not kept. */
static void symc_put(struct chs *s, int64_t day, int kind, struct pd_h128 h, const uint8_t *data, size_t len)
{
	if (symc_find(s, day, kind, h) || len > CH_SYMC_BYTES / 16)
		return;
	if (s->cbytes.len + len > CH_SYMC_BYTES)
		symc_clear(s);
	if ((!s->cix.slots && pd_hidx_init(&s->cix, 4096)) || s->cn >= UINT32_MAX - 1 ||
	    pd_grow((void **)&s->ce, &s->ccap, s->cn + 1, sizeof *s->ce) || pd_buf_append(&s->cbytes, data, len))
		return;
	if (pd_hidx_insert(&s->cix, known_key(day, kind, h), (uint32_t)s->cn)) {
		s->cbytes.len -= len;
		return;
	}
	s->ce[s->cn++] = (struct symc_e){day, h, (uint32_t)(s->cbytes.len - len), (uint32_t)len, (uint8_t)kind};
}

/* ---- SQL ------------------------------------------------------------------ */

static int q(struct chs *s, const char *sql, struct pd_buf *out, struct pd_err *err)
{
	return pd_ch_query(s->ch, sql, NULL, 0, CH_QUERY_SETTINGS, out, err);
}

/* The columns and engines of the tables (after the table's name). */
static const struct {
	const char *name, *cols, *engine, *order, *key, *ver; /* ver: a ReplacingMergeTree's version column */
} ch_tables[] = {
    {"profd_schema", "(version UInt32)", "MergeTree", "ORDER BY version", "version", NULL},
    {"profiles",
     "(day Date, service String, type String, created_ns Int64, id String, label_keys Array(String), "
     "label_values Array(String), header String, block String, refs String, stored_bytes UInt64)",
     "ReplacingMergeTree", "PARTITION BY day ORDER BY (service, type, created_ns, id) SETTINGS index_granularity = 256",
     "cityHash64(id)", NULL},
    {"symbols", "(day Date, kind UInt8, h FixedString(16), data String)", "ReplacingMergeTree",
     "PARTITION BY day ORDER BY (kind, h)", "cityHash64(h)", NULL},
    {"deleted", "(day Date, id String)", "ReplacingMergeTree", "PARTITION BY day ORDER BY id", "cityHash64(id)", NULL},
    {"rollups", CH_ROLLUP_COLS, "ReplacingMergeTree",
     "PARTITION BY day ORDER BY (service, type, hour) SETTINGS index_granularity = 32",
     "cityHash64(service, type, hour)", "built_ns"},
};
#define CH_NTABLES (sizeof ch_tables / sizeof *ch_tables)

/* With ?cluster=NAME: per table T, T_local on every server (Replicated*,
 * its ZooKeeper path per shard: the {shard} and {replica} macros of each
 * server's config) and T, a Distributed table over the T_local of every
 * shard, sharded by ch_tables' key, created ON CLUSTER (distributed DDL,
 * through ZooKeeper) unless this server has them all already (a start
 * with a replica down does not wait for it). */
static int create_cluster_tables(struct chs *s, struct pd_err *err)
{
	const char *db = pd_ch_database(s->ch);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(1 << 20);
	int rc = pd_buf_appendf(&sql, "SELECT name, engine FROM system.tables WHERE database = ") ||
	                 pd_ch_lit_s(&sql, db) || pd_buf_appendf(&sql, " FORMAT RowBinary") ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : q(s, (const char *)sql.ptr, &ans, err);
	size_t have = 0;
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		size_t nn, en;
		const char *nm = (const char *)pd_rb_get_str(&r, &nn), *en_ = (const char *)pd_rb_get_str(&r, &en);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse at %s: a malformed answer", pd_ch_where(s->ch));
			break;
		}
		for (size_t t = 0; t < CH_NTABLES && !rc; t++) {
			size_t tl = strlen(ch_tables[t].name);
			bool dist = nn == tl && !memcmp(nm, ch_tables[t].name, tl);
			bool local =
			    nn == tl + 6 && !memcmp(nm, ch_tables[t].name, tl) && !memcmp(nm + tl, "_local", 6);
			if (dist && (en != 11 || memcmp(en_, "Distributed", 11)))
				rc = pd_errf(
				    err, PD_EUSAGE,
				    "ClickHouse at %s: table %s is a %.*s, not a Distributed table: this database "
				    "was made for one server; use another database with ?cluster=",
				    pd_ch_where(s->ch), ch_tables[t].name, (int)en, en_);
			else if (local && (en < 10 || memcmp(en_, "Replicated", 10)))
				rc = pd_errf(err, PD_EUSAGE,
				             "ClickHouse at %s: table %s_local is a %.*s, not replicated",
				             pd_ch_where(s->ch), ch_tables[t].name, (int)en, en_);
			have += dist || local;
		}
	}
	for (size_t t = 0; t < CH_NTABLES && !rc && have < 2 * CH_NTABLES; t++) {
		const char *n = ch_tables[t].name;
		sql.len = 0;
		if (pd_buf_appendf(&sql,
		                   "CREATE TABLE IF NOT EXISTS %s.%s_local%s %s ENGINE = Replicated%s("
		                   "'/clickhouse/tables/{shard}/profd/%s/%s/%s', '{replica}'%s%s) %s",
		                   db, n, s->on, ch_tables[t].cols, ch_tables[t].engine, s->cluster, db, n,
		                   ch_tables[t].ver ? ", " : "", ch_tables[t].ver ? ch_tables[t].ver : "",
		                   ch_tables[t].order) ||
		    pd_buf_append(&sql, "", 1)) {
			rc = nomem(err);
			break;
		}
		if ((rc = q(s, (const char *)sql.ptr, NULL, err)))
			break;
		sql.len = 0;
		if (pd_buf_appendf(
		        &sql,
		        "CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s_local ENGINE = Distributed(%s, %s, %s_local, "
		        "%s)",
		        db, n, s->on, db, n, s->cluster, db, n, ch_tables[t].key) ||
		    pd_buf_append(&sql, "", 1)) {
			rc = nomem(err);
			break;
		}
		rc = q(s, (const char *)sql.ptr, NULL, err);
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	if (rc)
		pd_err_prefix(err, "creating the tables on cluster %s", s->cluster);
	return rc;
}

static int create_schema(struct chs *s, struct pd_err *err)
{
	static const char *const ddl[] = {
	    "CREATE TABLE IF NOT EXISTS profd_schema (version UInt32) ENGINE = MergeTree ORDER BY version",
	    "CREATE TABLE IF NOT EXISTS profiles (day Date, service String, type String, created_ns Int64, id String, "
	    "label_keys Array(String), label_values Array(String), header String, block String, refs String, "
	    "stored_bytes UInt64) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (service, type, created_ns, "
	    "id) SETTINGS index_granularity = 256",
	    "CREATE TABLE IF NOT EXISTS symbols (day Date, kind UInt8, h FixedString(16), data String) "
	    "ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (kind, h)",
	    "CREATE TABLE IF NOT EXISTS deleted (day Date, id String) ENGINE = ReplacingMergeTree PARTITION BY day "
	    "ORDER BY id",
	    "CREATE TABLE IF NOT EXISTS rollups " CH_ROLLUP_COLS " ENGINE = ReplacingMergeTree(built_ns) PARTITION BY "
	    "day ORDER BY (service, type, hour) SETTINGS index_granularity = 32",
	};
	struct pd_buf out = PD_BUF_INIT(1 << 20);
	int rc = 0;
	if (s->cluster)
		rc = create_cluster_tables(s, err);
	for (size_t i = 0; i < sizeof ddl / sizeof *ddl && !rc && !s->cluster; i++)
		rc = q(s, ddl[i], NULL, err);
	if (!rc)
		rc = q(s, "SELECT toUInt32(max(version)), toUInt64(count()) FROM profd_schema FORMAT RowBinary", &out,
		       err);
	if (!rc) {
		struct pd_rb_rd r = {out.ptr, out.ptr + out.len, false};
		uint32_t ver = pd_rb_get_u16(&r);
		ver |= (uint32_t)pd_rb_get_u16(&r) << 16; /* UInt32, little-endian */
		uint64_t n = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse at %s: unreadable answer about the schema version",
			             pd_ch_where(s->ch));
		else if (n && ver > CH_SCHEMA)
			rc = pd_errf(
			    err, PD_EUSAGE,
			    "ClickHouse at %s: the tables have schema version %u, newer than this profd knows (%d): "
			    "upgrade profd, or use another database",
			    pd_ch_where(s->ch), ver, CH_SCHEMA);
		else if (!n)
			rc = pd_ch_query(s->ch, "INSERT INTO profd_schema VALUES (1)", NULL, 0, s->ins_settings, NULL,
			                 err);
	}
	pd_buf_free(&out);
	return rc;
}

/* ---- ingest ------------------------------------------------------------------ */

static int put_h(struct pd_buf *b, struct pd_h128 h)
{
	uint8_t x[16];
	memcpy(x, &h.lo, 8);
	memcpy(x + 8, &h.hi, 8);
	return pd_buf_append(b, x, 16);
}

static int put_v(struct pd_buf *b, uint64_t v)
{
	return pd_rb_len(b, v);
}

struct ing {
	struct chs *s;
	struct pd_prepared *pp;
	int64_t day;
	struct pd_buf rows; /* symbols, RowBinary */
	struct pd_buf data; /* one symbol's data */
	size_t nrows;
	uint64_t *keys; /* known keys of the rows, marked written after the insert */
	size_t nkeys, ckeys;
	/* refs: the header's strings and mappings, the stacks and label sets */
	struct pd_hidx ix[4];
	struct pd_h128 *ref[4];
	size_t nref[4], cref[4];
};
enum { R_STR, R_MAP, R_STK, R_LS };

static bool ref_eq(void *ctx, uint32_t v)
{
	void **c = ctx;
	const struct pd_h128 *arr = c[0], *k = c[1];
	return arr[v].lo == k->lo && arr[v].hi == k->hi;
}

/* The 1-based local number of hash h in refs table t (added if new). */
static int ref_of(struct ing *g, int t, struct pd_h128 h, int64_t *out)
{
	uint64_t hk = h.lo ^ h.hi;
	void *ctx[2] = {g->ref[t], &h};
	uint32_t v = pd_hidx_find(&g->ix[t], hk, ref_eq, ctx);
	if (v != PD_NONE) {
		*out = (int64_t)v + 1;
		return 0;
	}
	if (pd_grow((void **)&g->ref[t], &g->cref[t], g->nref[t] + 1, sizeof *g->ref[t]) ||
	    pd_hidx_insert(&g->ix[t], hk, (uint32_t)g->nref[t]))
		return PD_ENOMEM;
	g->ref[t][g->nref[t]] = h;
	*out = (int64_t)++g->nref[t];
	return 0;
}

/* How far ahead the lookups of the set of written symbols prefetch: the
 * set is 16 MB, so each probe is a cache (and TLB) miss, and the lookups
 * of one profile's symbols are independent. Measured on the ingest of 200
 * large profiles: the probes one at a time, each under the mutex, were a
 * third of the collector's CPU. */
#define KNOWN_AHEAD 12

static void known_prefetch(const struct chs *s, uint64_t k)
{
	__builtin_prefetch(&s->known[k & s->kmask]);
}

/* Which of the n keys of the distinct symbols of one kind were written by
 * this process before (then they are not encoded nor sent again): is[j];
 * the others' keys are kept for after the insert. */
static int sym_known(struct ing *g, const uint64_t *keys, size_t n, bool *is)
{
	struct chs *s = g->s;
	pthread_mutex_lock(&s->mu);
	for (size_t j = 0; j < n && j < KNOWN_AHEAD; j++)
		known_prefetch(s, keys[j]);
	size_t unknown = 0;
	for (size_t j = 0; j < n; j++) {
		if (j + KNOWN_AHEAD < n)
			known_prefetch(s, keys[j + KNOWN_AHEAD]);
		is[j] = known_has(s, keys[j]);
		unknown += !is[j];
	}
	pthread_mutex_unlock(&s->mu);
	if (pd_grow((void **)&g->keys, &g->ckeys, g->nkeys + unknown, sizeof *g->keys))
		return PD_ENOMEM;
	for (size_t j = 0; j < n; j++)
		if (!is[j])
			g->keys[g->nkeys++] = keys[j];
	return 0;
}

/* Queue symbol (kind, h) with g->data as its data. */
static int sym_row(struct ing *g, int kind, struct pd_h128 h)
{
	uint8_t hb[16];
	memcpy(hb, &h.lo, 8);
	memcpy(hb + 8, &h.hi, 8);
	if (pd_rb_u16(&g->rows, (uint16_t)g->day) || pd_rb_u8(&g->rows, (uint8_t)kind) ||
	    pd_rb_fixed(&g->rows, hb, 16) || pd_rb_str(&g->rows, g->data.ptr, g->data.len))
		return PD_ENOMEM;
	g->nrows++;
	return 0;
}

/* The symbols rows of every symbol of the profile (each once). */
static int enc_symbols(struct ing *g)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	struct pd_buf *d = &g->data;
	int rc = 0;
	struct pd_h128 *all[] = {pp->sh, pp->fh, pp->mh, pp->lh, pp->kh, pp->bh};
	size_t counts[] = {p->nstrings, p->nfunctions, p->nmappings, p->nlocations, p->nsamples, p->nsamples};
	size_t most = 1;
	for (int k = PD_SYM_STR; k < PD_SYM_NKINDS; k++)
		most = counts[k] > most ? counts[k] : most;
	/* per kind: the distinct symbols (index, key), which were written */
	uint32_t *idx = malloc(most * sizeof *idx);
	uint64_t *keys = malloc(most * sizeof *keys);
	bool *is = malloc(most * sizeof *is);
	if (!idx || !keys || !is)
		rc = PD_ENOMEM;
	for (int k = PD_SYM_STR; k < PD_SYM_NKINDS && !rc; k++) {
		struct pd_hidx seen;
		if (pd_hidx_init(&seen, counts[k] + 16)) {
			rc = PD_ENOMEM;
			break;
		}
		size_t n = 0;
		for (size_t i = 0; i < counts[k] && !rc; i++) {
			if (k == PD_SYM_LSET && !p->samples[i].nlabels)
				continue;
			struct pd_h128 h = all[k][i];
			void *ctx[2] = {all[k], &h};
			if (pd_hidx_find(&seen, h.lo ^ h.hi, ref_eq, ctx) != PD_NONE)
				continue;
			if (pd_hidx_insert(&seen, h.lo ^ h.hi, (uint32_t)i))
				rc = PD_ENOMEM;
			idx[n] = (uint32_t)i;
			keys[n++] = known_key(g->day, k, h);
		}
		if (!rc && sym_known(g, keys, n, is))
			rc = PD_ENOMEM;
		for (size_t u = 0; u < n && !rc; u++) {
			if (is[u])
				continue;
			size_t i = idx[u];
			struct pd_h128 h = all[k][i];
			d->len = 0;
			switch (k) {
			case PD_SYM_STR: rc = rc || pd_buf_append(d, p->strings[i].ptr, p->strings[i].len); break;
			case PD_SYM_FN: {
				const struct pd_function *f = &p->functions[i];
				rc = rc || put_h(d, pp->sh[f->name]) || put_h(d, pp->sh[f->system_name]) ||
				     put_h(d, pp->sh[f->filename]) || put_v(d, pd_zz(f->start_line));
				break;
			}
			case PD_SYM_MAP: {
				const struct pd_mapping *m = &p->mappings[i];
				uint64_t flags = (uint64_t)m->has_functions | (uint64_t)m->has_filenames << 1 |
				                 (uint64_t)m->has_line_numbers << 2 |
				                 (uint64_t)m->has_inline_frames << 3;
				rc = rc || put_v(d, pd_mapping_key_size(m)) || put_v(d, m->offset) ||
				     put_h(d, pp->sh[pd_mapping_key_file(m)]) || put_v(d, m->start) ||
				     put_v(d, m->limit) || put_h(d, pp->sh[m->filename]) ||
				     put_h(d, pp->sh[m->build_id]) || put_v(d, flags);
				break;
			}
			case PD_SYM_LOC: {
				const struct pd_location *l = &p->locations[i];
				uint64_t rel = l->address;
				bool hm = l->mapping != PD_NONE;
				if (hm)
					rel = l->address - p->mappings[l->mapping].start;
				rc = rc || pd_rb_u8(d, hm) || (hm && put_h(d, pp->mh[l->mapping])) || put_v(d, rel) ||
				     put_v(d, l->is_folded) || put_v(d, l->nlines);
				for (uint32_t j = 0; j < l->nlines && !rc; j++)
					rc = put_h(d, pp->fh[l->lines[j].function]) ||
					     put_v(d, pd_zz(l->lines[j].line)) || put_v(d, pd_zz(l->lines[j].column));
				break;
			}
			case PD_SYM_STACK: {
				const struct pd_sample *sm = &p->samples[i];
				for (uint32_t j = 0; j < sm->nlocs && !rc; j++)
					rc = put_h(d, pp->lh[sm->locs[j]]);
				break;
			}
			case PD_SYM_LSET: {
				const struct pd_sample *sm = &p->samples[i];
				for (uint32_t j = 0; j < sm->nlabels && !rc; j++) {
					const struct pd_label *l = &sm->labels[j];
					rc = put_h(d, pp->sh[l->key]) || put_h(d, pp->sh[l->str]) ||
					     put_v(d, pd_zz(l->num)) || put_h(d, pp->sh[l->num_unit]);
				}
				break;
			}
			}
			if (!rc)
				rc = sym_row(g, k, h);
		}
		pd_hidx_free(&seen);
	}
	free(idx);
	free(keys);
	free(is);
	return rc ? PD_ENOMEM : 0;
}

/* The header (codec.h) with the profile's strings and mappings as refs. */
static int enc_header(struct ing *g, struct pd_buf *out, struct pd_err *err)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	struct pd_shdr h = {0};
	int rc = 0;
	h.nst = p->nsample_types;
	h.ncomments = p->ncomments;
	h.nmaps = p->nmappings;
	h.stypes = calloc(2 * (size_t)h.nst + 1, sizeof *h.stypes);
	h.comments = calloc((size_t)h.ncomments + 1, sizeof *h.comments);
	h.maps = calloc((size_t)h.nmaps + 1, sizeof *h.maps);
	h.inst = calloc((size_t)h.nmaps + 1, sizeof *h.inst);
	if (!h.stypes || !h.comments || !h.maps || !h.inst)
		rc = PD_ENOMEM;
	for (uint32_t i = 0; i < h.nst && !rc; i++)
		rc = ref_of(g, R_STR, pp->sh[p->sample_types[i].type], &h.stypes[2 * i]) ||
		     ref_of(g, R_STR, pp->sh[p->sample_types[i].unit], &h.stypes[2 * i + 1]);
	for (uint32_t i = 0; i < h.ncomments && !rc; i++)
		rc = ref_of(g, R_STR, pp->sh[p->comments[i]], &h.comments[i]);
	for (uint32_t i = 0; i < h.nmaps && !rc; i++) {
		const struct pd_mapping *m = &p->mappings[i];
		h.inst[i] = (struct pd_smap){m->start, m->limit, 0, 0, pd_smap_flags(m)};
		rc = ref_of(g, R_MAP, pp->mh[i], &h.maps[i]) || ref_of(g, R_STR, pp->sh[m->filename], &h.inst[i].file) ||
		     ref_of(g, R_STR, pp->sh[m->build_id], &h.inst[i].build);
	}
	if (!rc)
		rc = ref_of(g, R_STR, pp->sh[p->period_type.type], &h.ptype) ||
		     ref_of(g, R_STR, pp->sh[p->period_type.unit], &h.punit) ||
		     ref_of(g, R_STR, pp->sh[p->drop_frames], &h.drop) ||
		     ref_of(g, R_STR, pp->sh[p->keep_frames], &h.keep) ||
		     ref_of(g, R_STR, pp->sh[p->default_sample_type], &h.dflt) ||
		     ref_of(g, R_STR, pp->sh[p->doc_url], &h.doc);
	h.period = p->period;
	h.time = p->time_nanos;
	h.duration = p->duration_nanos;
	if (!rc)
		rc = pd_enc_header(&h, out, err);
	else
		rc = nomem(err);
	pd_shdr_free(&h);
	return rc;
}

/* The sample block (codec.h): stacks and label sets as refs. */
static int enc_block(struct ing *g, struct pd_buf *out, struct pd_err *err)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	size_t n = p->nsamples;
	int64_t *stk = malloc((n + 1) * sizeof *stk), *ls = malloc((n + 1) * sizeof *ls);
	int rc = stk && ls ? 0 : PD_ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = ref_of(g, R_STK, pp->kh[i], &stk[i]);
		ls[i] = 0;
		if (!rc && p->samples[i].nlabels)
			rc = ref_of(g, R_LS, pp->bh[i], &ls[i]);
	}
	if (rc)
		rc = nomem(err);
	else {
		ZSTD_CCtx *z = ZSTD_createCCtx();
		rc = z ? pd_enc_block(z, p, stk, ls, NULL, out, err) : nomem(err);
		ZSTD_freeCCtx(z);
	}
	free(stk);
	free(ls);
	return rc;
}

/* refs: for each of strings, mappings, stacks, label sets: a varint
 * count, then that many 16-byte hashes. */
static int enc_refs(struct ing *g, struct pd_buf *out)
{
	for (int t = 0; t < 4; t++) {
		if (put_v(out, g->nref[t]))
			return PD_ENOMEM;
		for (size_t i = 0; i < g->nref[t]; i++)
			if (put_h(out, g->ref[t][i]))
				return PD_ENOMEM;
	}
	return 0;
}

static void ing_free(struct ing *g)
{
	pd_buf_free(&g->rows);
	pd_buf_free(&g->data);
	free(g->keys);
	for (int t = 0; t < 4; t++) {
		pd_hidx_free(&g->ix[t]);
		free(g->ref[t]);
	}
}

/* A framed blob (codec.h) of payload into out. */
static int framed(const struct pd_buf *payload, const char *id, enum pd_blob_role role, struct pd_buf *out)
{
	size_t start = out->len;
	if (pd_blob_begin(out) || pd_buf_append(out, payload->ptr, payload->len))
		return PD_ENOMEM;
	pd_blob_seal(out, start, pd_blob_seed(id, strlen(id), role));
	return 0;
}

/* The INSERTs of one batch: symbols first (a profile row is never visible
 * before its symbols), then the profiles. */
static int batch_insert(struct chs *s, struct chbatch *b)
{
	int rc = 0;
	if (b->sym.len)
		rc = pd_ch_query(s->ch, "INSERT INTO symbols FORMAT RowBinary", b->sym.ptr, b->sym.len, s->ins_settings,
		                 NULL, &b->err);
	if (!rc)
		rc = pd_ch_query(s->ch, "INSERT INTO profiles FORMAT RowBinary", b->prof.ptr, b->prof.len,
		                 s->ins_settings, NULL, &b->err);
	return rc;
}

static void batch_unref(struct chbatch *b)
{
	if (--b->waiting == 0) {
		pd_buf_free(&b->sym);
		pd_buf_free(&b->prof);
		free(b);
	}
}

/* Add one upload's symbol and profile rows to the open batch and wait
 * until ClickHouse acknowledged (or refused) the INSERTs that hold them:
 * 0 only then. The first upload of a batch leads it: once no other
 * batch is in flight, it waits (at most CH_BATCH_WINDOW_NS from the
 * batch's start) while other ingests are still decoding, closes the batch
 * and sends it; the uploads that arrive meanwhile gather in the next one.
 * Called with s->preparing counting this ingest. */
static int batch_submit(struct chs *s, const struct pd_buf *sym, const struct pd_buf *prof, struct pd_err *err)
{
	pthread_mutex_lock(&s->bmu);
	s->preparing--;
	while (s->open && s->open->sym.len + s->open->prof.len >= CH_BATCH_MAX)
		pthread_cond_wait(&s->bcv, &s->bmu); /* full: wait until its leader takes it */
	struct chbatch *b = s->open;
	if (!b) {
		if (!(b = calloc(1, sizeof *b))) {
			pthread_mutex_unlock(&s->bmu);
			return nomem(err);
		}
		b->sym = (struct pd_buf)PD_BUF_INIT(0);
		b->prof = (struct pd_buf)PD_BUF_INIT(0);
		b->opened_ns = pd_mono_ns();
		s->open = b;
	}
	size_t sl = b->sym.len, pl = b->prof.len;
	if (pd_buf_append(&b->sym, sym->ptr, sym->len) || pd_buf_append(&b->prof, prof->ptr, prof->len)) {
		b->sym.len = sl, b->prof.len = pl;
		if (!b->nup) {
			s->open = NULL;
			b->waiting = 1;
			batch_unref(b);
		}
		pthread_mutex_unlock(&s->bmu);
		return nomem(err);
	}
	b->nup++;
	b->waiting++;
	pthread_cond_broadcast(&s->bcv); /* a leader in its window counts the ingests still decoding */
	while (!b->done) {
		if (!s->busy && s->open == b && s->down_ns &&
		    (b->opened_ns < s->down_ns || (s->down_slow && pd_mono_ns() - s->down_ns < CH_DOWN_HOLD_NS))) {
			/* its uploads waited for a batch that ClickHouse did not
			 * take (down, or not answering for a request timeout), or
			 * come right after it (CH_DOWN_HOLD_NS): they fail with it
			 * now (503, retry) rather than each wait another timeout,
			 * and a pile of them behind */
			s->open = NULL;
			b->err = s->down_err;
			b->rc = s->down_err.code;
			b->done = true;
			pthread_cond_broadcast(&s->bcv);
			break;
		}
		if (!s->busy && s->open == b) {
			s->busy = true;
			int64_t end = b->opened_ns + CH_BATCH_WINDOW_NS;
			while (s->preparing && b->sym.len + b->prof.len < CH_BATCH_MAX) {
				int64_t now = pd_mono_ns();
				if (now >= end)
					break;
				struct timespec ts = {(time_t)(end / 1000000000), (long)(end % 1000000000)};
				pthread_cond_timedwait(&s->bcv, &s->bmu, &ts);
			}
			s->open = NULL;
			pthread_cond_broadcast(&s->bcv); /* uploads waiting for room start the next batch */
			pthread_mutex_unlock(&s->bmu);
			int64_t t0 = pd_mono_ns();
			int rc = batch_insert(s, b);
			pthread_mutex_lock(&s->bmu);
			b->rc = rc;
			b->done = true;
			s->busy = false;
			if (rc == PD_EUNAVAIL) {
				s->down_ns = pd_mono_ns();
				s->down_slow = s->down_ns - t0 >= CH_DOWN_HOLD_NS;
				s->down_err = b->err;
			} else {
				s->down_ns = 0;
			}
			s->batches++;
			s->batched += b->nup;
			pthread_cond_broadcast(&s->bcv); /* its uploads, and the next batch's leader */
			break;
		}
		pthread_cond_wait(&s->bcv, &s->bmu);
	}
	int rc = b->rc;
	if (rc && err)
		*err = b->err;
	batch_unref(b);
	pthread_mutex_unlock(&s->bmu);
	return rc;
}

/* An ingest that will not join a batch (refused, failed) is no longer
 * waited for. */
static void prep_done(struct chs *s)
{
	pthread_mutex_lock(&s->bmu);
	s->preparing--;
	pthread_cond_broadcast(&s->bcv);
	pthread_mutex_unlock(&s->bmu);
}

static int ch_ingest(struct pd_store *base, const struct pd_ingest *in, const uint8_t *data, size_t len,
                     struct pd_profile_meta *out, enum pd_refusal *why, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	memset(out, 0, sizeof *out);
	if (why)
		*why = PD_REFUSE_NONE;
	for (size_t i = 0; i < in->nlabels; i++)
		if (!in->labels[i].key || !in->labels[i].value)
			return pd_errf(err, PD_EINVAL, "insert label %s: no value",
			               in->labels[i].key ? in->labels[i].key : "(null)");
	pthread_mutex_lock(&s->bmu);
	s->preparing++; /* a batch's leader may wait for this one */
	pthread_mutex_unlock(&s->bmu);
	bool submitted = false;
	struct pd_prepared pp;
	int rc = pd_prepare(in, data, len, &s->lim, &pp, why, err);
	if (rc) {
		prep_done(s);
		return rc;
	}
	struct ing g;
	memset(&g, 0, sizeof g);
	g.s = s;
	g.pp = &pp;
	g.day = floor_div(pp.created_ns, DAY_NS);
	g.rows.max = 0;
	char id[PD_STORE_ID_LEN + 1];
	pd_xid_new(pp.created_ns, id);
	struct pd_buf hdr = PD_BUF_INIT(0), blk = PD_BUF_INIT(0), refs = PD_BUF_INIT(0), row = PD_BUF_INIT(0),
	              fh = PD_BUF_INIT(0), fb = PD_BUF_INIT(0);
	for (int t = 0; t < 4 && !rc; t++)
		rc = pd_hidx_init(&g.ix[t], t == R_STK ? pp.p->nsamples + 16 : 64) ? nomem(err) : 0;
	if (!rc && enc_symbols(&g))
		rc = nomem(err);
	if (!rc)
		rc = enc_header(&g, &hdr, err);
	if (!rc)
		rc = enc_block(&g, &blk, err);
	if (!rc &&
	    (enc_refs(&g, &refs) || framed(&hdr, id, PD_BLOB_HEADER, &fh) || framed(&blk, id, PD_BLOB_BLOCK, &fb)))
		rc = nomem(err);
	if (rc)
		goto out;
	if (fb.len > PD_STORE_MAX_BLOCK) {
		if (why)
			*why = PD_REFUSE_TOO_LARGE;
		rc = pd_errf(err, PD_ELIMIT, "store: sample block over %u bytes", PD_STORE_MAX_BLOCK);
		goto out;
	}
	/* the profile row */
	const struct pd_ingest *gi = pp.in;
	bool ok = !pd_rb_u16(&row, (uint16_t)g.day) && !pd_rb_str(&row, gi->service, strlen(gi->service)) &&
	          !pd_rb_str(&row, pp.type, strlen(pp.type)) && !pd_rb_u64(&row, (uint64_t)pp.created_ns) &&
	          !pd_rb_str(&row, id, strlen(id)) && !pd_rb_len(&row, gi->nlabels);
	/* series labels sorted by key, as the metadata has them */
	struct pd_profile_meta m;
	pd_prepared_meta(&pp, id, fh.len + fb.len, &m); /* as the embedded store counts: header and block */
	for (size_t i = 0; ok && i < m.nlabels; i++)
		ok = !pd_rb_str(&row, m.labels[i].key, strlen(m.labels[i].key));
	ok = ok && !pd_rb_len(&row, m.nlabels);
	for (size_t i = 0; ok && i < m.nlabels; i++)
		ok = !pd_rb_str(&row, m.labels[i].value, strlen(m.labels[i].value));
	ok = ok && !pd_rb_str(&row, fh.ptr, fh.len) && !pd_rb_str(&row, fb.ptr, fb.len) &&
	     !pd_rb_str(&row, refs.ptr, refs.len) && !pd_rb_u64(&row, fh.len + fb.len);
	if (!ok || m.nlabels != gi->nlabels) {
		pd_meta_clear(&m);
		rc = nomem(err);
		goto out;
	}
	pd_prepared_drop_profile(&pp);
	/* with the other uploads of its batch: symbols first, then profiles */
	submitted = true;
	if ((rc = batch_submit(s, &g.rows, &row, err)))
		goto fail;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < g.nkeys; i++) {
		if (i + KNOWN_AHEAD < g.nkeys)
			known_prefetch(s, g.keys[i + KNOWN_AHEAD]);
		known_put(s, g.keys[i]);
	}
	pthread_mutex_unlock(&s->mu);
	*out = m;
	goto out;
fail:
	pd_meta_clear(&m);
	pd_err_prefix(err, "store");
out:
	if (!submitted)
		prep_done(s);
	pd_buf_free(&hdr), pd_buf_free(&blk), pd_buf_free(&refs), pd_buf_free(&row), pd_buf_free(&fh), pd_buf_free(&fb);
	ing_free(&g);
	pd_prepared_free(&pp);
	return rc;
}

/* ---- find ---------------------------------------------------------------------- */

/* " AND day BETWEEN A AND B" for [from, to] (ns) */
static int days_clause(struct pd_buf *b, int64_t from, int64_t to)
{
	char a[DAY_SQL_LEN], z[DAY_SQL_LEN];
	int64_t d0 = floor_div(from < 0 ? 0 : from, DAY_NS), d1 = floor_div(to, DAY_NS);
	if (d1 > CH_MAX_DAY) /* ids end in 2106 */
		d1 = CH_MAX_DAY;
	if (d0 > d1)
		d0 = d1;
	return pd_buf_appendf(b, " AND day BETWEEN %s AND %s", day_sql(d0, a), day_sql(d1, z));
}

/* ch_find over services[0..n) (fq->service unused) in one query: rows in
 * (service, created_ns, id) order; a limit only with one service */
static int find_in(struct chs *s, const char *const *services, size_t nsv, const struct pd_store_query *fq,
                   pd_meta_fn fn, void *ctx, struct pd_err *err)
{
	for (size_t i = 0; i < nsv; i++)
		if (!services[i] || !*services[i])
			return pd_errf(err, PD_EINVAL, "missing \"service\"");
	if (!nsv || (fq->limit && nsv > 1))
		return pd_errf(err, PD_EINVAL,
		               nsv ? "a limit of profiles over more than one service" : "missing \"service\"");
	if (fq->to_ns < fq->from_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" is after \"to\"");
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	bool ok = !pd_buf_appendf(&sql,
	                          "SELECT id, service, type, created_ns, label_keys, label_values, stored_bytes "
	                          "FROM profiles FINAL WHERE service %s",
	                          nsv > 1 ? "IN (" : "= ");
	for (size_t i = 0; ok && i < nsv; i++)
		ok = (!i || !pd_buf_appendf(&sql, ", ")) && !pd_ch_lit_s(&sql, services[i]);
	ok = ok && (nsv == 1 || !pd_buf_appendf(&sql, ")"));
	if (ok && fq->type)
		ok = !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, fq->type);
	ok = ok &&
	     !pd_buf_appendf(&sql, " AND created_ns BETWEEN %lld AND %lld", (long long)fq->from_ns,
	                     (long long)fq->to_ns) &&
	     !days_clause(&sql, fq->from_ns, fq->to_ns);
	/* a pair (k, v) the profile carries: any of its labels, as a profile
	 * may carry one key twice (labels=k=a,k=b; the embedded store matches
	 * either value), not only the first of that key */
	for (size_t i = 0; ok && i < fq->nlabels; i++) {
		const char *k = fq->labels[i].key, *v = fq->labels[i].value ? fq->labels[i].value : "";
		ok = !pd_buf_appendf(&sql, " AND arrayExists((k, v) -> k = ") && !pd_ch_lit_s(&sql, k) &&
		     !pd_buf_appendf(&sql, " AND v = ") && !pd_ch_lit_s(&sql, v) &&
		     !pd_buf_appendf(&sql, ", label_keys, label_values)");
	}
	ok = ok && !pd_buf_appendf(&sql, " AND id %sNOT IN (SELECT id FROM deleted WHERE 1", s->gl) &&
	     !days_clause(&sql, fq->from_ns, fq->to_ns) && !pd_buf_appendf(&sql, ")");
	if (ok && fq->limit)
		ok = !pd_buf_appendf(&sql, " ORDER BY created_ns DESC, id DESC LIMIT %zu", fq->limit);
	else if (ok)
		ok = !pd_buf_appendf(&sql, nsv > 1 ? " ORDER BY service, created_ns, id" : " ORDER BY created_ns, id");
	ok = ok && !pd_buf_appendf(&sql, " FORMAT RowBinary") && !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	if (rc) {
		pd_buf_free(&ans);
		return rc;
	}
	/* parse every row first (the newest-first answer of a limit is then
	 * walked backwards), then call fn in ascending time */
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	size_t n = 0, cap = 0;
	const uint8_t **starts = NULL;
	while (r.p < r.end && !r.bad) {
		if (pd_grow((void **)&starts, &cap, n + 1, sizeof *starts)) {
			rc = nomem(err);
			break;
		}
		starts[n++] = r.p;
		size_t len;
		(void)pd_rb_get_str(&r, &len), (void)pd_rb_get_str(&r, &len), (void)pd_rb_get_str(&r, &len);
		(void)pd_rb_get_u64(&r);
		for (int a = 0; a < 2; a++)
			for (uint64_t k = pd_rb_get_len(&r); k-- && !r.bad;)
				(void)pd_rb_get_str(&r, &len);
		(void)pd_rb_get_u64(&r);
	}
	if (!rc && r.bad)
		rc = pd_errf(err, PD_EIO, "ClickHouse at %s: a malformed answer to a query of profiles",
		             pd_ch_where(s->ch));
	for (size_t j = 0; j < n && !rc; j++) {
		struct pd_rb_rd x = {fq->limit ? starts[n - 1 - j] : starts[j], ans.ptr + ans.len, false};
		struct pd_profile_meta m;
		memset(&m, 0, sizeof m);
		size_t len;
		const uint8_t *v = pd_rb_get_str(&x, &len);
		snprintf(m.id, sizeof m.id, "%.*s", (int)len, (const char *)v);
		v = pd_rb_get_str(&x, &len);
		snprintf(m.service, sizeof m.service, "%.*s", (int)len, (const char *)v);
		v = pd_rb_get_str(&x, &len);
		snprintf(m.type, sizeof m.type, "%.*s", (int)len, (const char *)v);
		m.created_ns = (int64_t)pd_rb_get_u64(&x);
		uint64_t nk = pd_rb_get_len(&x);
		if (nk > 4096 || !(m.labels = calloc(nk + 1, sizeof *m.labels))) {
			rc = nk > 4096 ? pd_errf(err, PD_EIO, "ClickHouse: a profile with %llu labels",
			                         (unsigned long long)nk)
			               : nomem(err);
			break;
		}
		for (uint64_t k = 0; k < nk && !rc; k++) {
			v = pd_rb_get_str(&x, &len);
			if (!(m.labels[k].key = strndup((const char *)v, len)))
				rc = nomem(err);
			m.nlabels = k + 1;
		}
		uint64_t nvl = pd_rb_get_len(&x);
		for (uint64_t k = 0; k < nvl && !rc; k++) {
			v = pd_rb_get_str(&x, &len);
			if (k < nk && !(m.labels[k].value = strndup((const char *)v, len)))
				rc = nomem(err);
		}
		for (size_t k = 0; k < m.nlabels && !rc; k++)
			if (!m.labels[k].value && !(m.labels[k].value = strdup("")))
				rc = nomem(err);
		m.stored_bytes = (size_t)pd_rb_get_u64(&x);
		if (!rc && x.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed profile row");
		if (!rc)
			rc = fn(ctx, &m);
		pd_meta_clear(&m);
	}
	free(starts);
	pd_buf_free(&ans);
	return rc;
}

static int ch_find(struct pd_store *base, const struct pd_store_query *fq, pd_meta_fn fn, void *ctx,
                   struct pd_store_skipped *skipped, struct pd_err *err)
{
	(void)skipped; /* ClickHouse has no damaged day to skip: it answers or fails */
	return find_in((struct chs *)base, &fq->service, 1, fq, fn, ctx, err);
}

/* A selection over many services (pd_query_each: every service of a
 * fleet for /api/1/types, /labels, a report) in one round trip, not one
 * per service: 20 services' /api/1/types 121 -> 44 ms, /labels 110 -> 25 ms (measured). */
static int ch_find_services(struct pd_store *base, const char *const *services, size_t n,
                            const struct pd_store_query *fq, pd_meta_fn fn, void *ctx, struct pd_err *err)
{
	return find_in((struct chs *)base, services, n, fq, fn, ctx, err);
}

/* ---- remove, services, retention, stats ------------------------------------- */

static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n != PD_STORE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'v')))
			return false;
	return true;
}

/* How many live (not deleted) profiles have this id (0 or 1). */
static int live(struct chs *s, const char *id, int64_t day, uint64_t *n, struct pd_err *err)
{
	char dn[DAY_SQL_LEN];
	day_sql(day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(1 << 16);
	int rc = pd_buf_appendf(&sql,
	                        "SELECT toUInt64(count()) FROM profiles WHERE day = %s AND id = '%s' AND id %sNOT IN "
	                        "(SELECT id FROM deleted WHERE day = %s) FORMAT RowBinary",
	                        dn, id, s->gl, dn) ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : q(s, (const char *)sql.ptr, &ans, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		*n = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	return rc;
}

static int ch_remove(struct pd_store *base, const char *id, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	int64_t t = id_ok(id) ? pd_xid_time(id) : -1;
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	int64_t day = floor_div(t, DAY_NS);
	uint64_t n = 0;
	int rc = live(s, id, day, &n, err);
	if (rc)
		return rc;
	if (!n)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	struct pd_buf row = PD_BUF_INIT(0);
	rc = pd_rb_u16(&row, (uint16_t)day) || pd_rb_str(&row, id, strlen(id))
	         ? nomem(err)
	         : pd_ch_query(s->ch, "INSERT INTO deleted FORMAT RowBinary", row.ptr, row.len, s->ins_settings, NULL,
	                       err);
	pd_buf_free(&row);
	return rc;
}

static int ch_services(struct pd_store *base, char ***out, size_t *n, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	*n = 0;
	struct pd_buf ans = PD_BUF_INIT(CH_MAX_ANSWER);
	char sql[200];
	snprintf(sql, sizeof sql,
	         "SELECT DISTINCT service FROM profiles WHERE id %sNOT IN (SELECT id FROM deleted) ORDER BY service "
	         "FORMAT RowBinary",
	         s->gl);
	int rc = q(s, sql, &ans, err);
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	size_t cap = 0;
	char **v = NULL;
	while (!rc && r.p < r.end) {
		size_t len;
		const uint8_t *p = pd_rb_get_str(&r, &len);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
			break;
		}
		if (pd_grow((void **)&v, &cap, *n + 1, sizeof *v) || !(v[*n] = strndup((const char *)p, len))) {
			rc = nomem(err);
			break;
		}
		(*n)++;
	}
	if (rc) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
	} else {
		*out = v;
	}
	pd_buf_free(&ans);
	return rc;
}

/* The tables whose parts are ours on this server (system.parts). */
static const char *parts_tables(const struct chs *s)
{
	return s->cluster ? "('profiles_local', 'symbols_local', 'deleted_local', 'rollups_local')"
	                  : "('profiles', 'symbols', 'deleted', 'rollups')";
}

/* The days (partitions) present in our tables, ascending: on one server,
 * from system.parts; with a cluster, the days of every shard's rows
 * (through the Distributed tables). */
static int days_present(struct chs *s, int64_t **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	bool ok;
	if (s->cluster)
		ok = !pd_buf_appendf(&sql,
		                     "SELECT DISTINCT toUInt16(day) AS d FROM (SELECT DISTINCT day FROM profiles "
		                     "UNION ALL SELECT DISTINCT day FROM symbols UNION ALL SELECT DISTINCT day FROM "
		                     "deleted) ORDER BY d FORMAT RowBinary");
	else
		ok = !pd_buf_appendf(&sql, "SELECT DISTINCT toUInt16(min_date) AS d FROM system.parts WHERE active AND "
		                           "database = ") &&
		     !pd_ch_lit_s(&sql, pd_ch_database(s->ch)) &&
		     !pd_buf_appendf(&sql, " AND table IN %s ORDER BY d FORMAT RowBinary", parts_tables(s));
	int rc = ok && !pd_buf_append(&sql, "", 1) ? q(s, (const char *)sql.ptr, &ans, err) : nomem(err);
	size_t cap = 0;
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		uint16_t d = pd_rb_get_u16(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
		else if (pd_grow((void **)out, &cap, *n + 1, sizeof **out))
			rc = nomem(err);
		else
			(*out)[(*n)++] = d;
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static int ch_retain(struct pd_store *base, int64_t cutoff, size_t *dropped, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*dropped = 0;
	int64_t *days;
	size_t n;
	int rc = days_present(s, &days, &n, err);
	static const char *const tables[] = {"profiles", "symbols", "deleted", "rollups"};
	for (size_t i = 0; i < n && !rc; i++) {
		if ((days[i] + 1) * DAY_NS > cutoff) /* the day ends after the cutoff: kept */
			continue;
		char dn[16], sql[400];
		pd_store_day_name(days[i], dn);
		for (size_t t = 0; t < 4 && !rc; t++) {
			if (s->cluster) /* each shard's local table, on one replica (the others follow) */
				snprintf(sql, sizeof sql, "ALTER TABLE %s.%s_local%s DROP PARTITION '%s'",
				         pd_ch_database(s->ch), tables[t], s->on, dn);
			else
				snprintf(sql, sizeof sql, "ALTER TABLE %s DROP PARTITION '%s'", tables[t], dn);
			rc = q(s, sql, NULL, err);
		}
		if (!rc)
			(*dropped)++;
	}
	free(days);
	return rc;
}

/* The stats' queries: within CH_STATS_MS in all, so that a ClickHouse
 * that does not answer holds a refresh seconds, not the request timeout per
 * query (the collector's own counters are what would show the outage) */
#define CH_STATS_MS 5000
/* how long /metrics waits for a refresh before it answers with the last
 * one's figures: it runs on an HTTP worker, whose other connections
 * (/healthz among them) wait with it; the queries of a large ClickHouse
 * (count() ... FINAL) may take longer than a scrape should */
#define CH_STATS_WAIT_MS 500
static int stats_q(struct chs *s, const char *sql, struct pd_buf *ans, int64_t end, struct pd_err *err)
{
	int64_t left = (end - pd_mono_ns()) / 1000000;
	if (left < 1)
		return pd_errf(err, PD_EUNAVAIL, "ClickHouse at %s: the stats took over %d ms", pd_ch_where(s->ch),
		               CH_STATS_MS);
	return pd_ch_query_to(s->ch, sql, NULL, 0, CH_QUERY_SETTINGS, ans, (long)left, err);
}

/* The figures ClickHouse holds: parts, bytes on disk, live profiles, valid rollups. */
static int stats_fetch(struct chs *s, struct pd_store_stats *st, struct pd_err *err)
{
	memset(st, 0, sizeof *st);
	int64_t end = pd_mono_ns() + CH_STATS_MS * 1000000LL;
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(1 << 16);
	int rc = pd_buf_appendf(&sql,
	                        "SELECT toUInt64(uniqExact(partition)), toUInt64(sum(bytes_on_disk)) FROM system.parts "
	                        "WHERE active AND database = ") ||
	                 pd_ch_lit_s(&sql, pd_ch_database(s->ch)) ||
	                 pd_buf_appendf(&sql, " AND table IN %s FORMAT RowBinary", parts_tables(s)) ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : stats_q(s, (const char *)sql.ptr, &ans, end, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		st->partitions = pd_rb_get_u64(&r);
		st->disk_bytes = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	if (!rc) {
		char cnt[200];
		snprintf(
		    cnt, sizeof cnt,
		    "SELECT toUInt64(count()) FROM profiles FINAL WHERE id %sNOT IN (SELECT id FROM deleted) FORMAT "
		    "RowBinary",
		    s->gl);
		rc = stats_q(s, cnt, &ans, end, err);
	}
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		st->profiles = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	/* valid rollups: the newest of each hour, with a block, built from the
	 * hour's live profiles */
	sql.len = 0;
	if (!rc &&
	    (pd_buf_appendf(&sql,
	                    "SELECT toUInt64(count()) FROM (SELECT service, type, intDiv(created_ns, "
	                    "3600000000000) AS hour, toUInt64(count()) AS cnt, sum(cityHash64(id)) AS fp FROM "
	                    "profiles FINAL WHERE id %sNOT IN (SELECT id FROM deleted) GROUP BY service, type, "
	                    "hour) %sANY INNER JOIN (" CH_ROLLUPS_NOW
	                    ") USING (service, type, hour) WHERE rok AND rcnt = cnt AND rfp = fp FORMAT RowBinary",
	                    s->gl, s->gl) ||
	     pd_buf_append(&sql, "", 1)))
		rc = nomem(err);
	if (!rc)
		rc = stats_q(s, (const char *)sql.ptr, &ans, end, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		st->rollups = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	return rc;
}

/* A condition variable whose timed waits count on CLOCK_MONOTONIC. */
static void cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

static void bg_init(struct bg *b, void *(*fn)(void *))
{
	pthread_mutex_init(&b->mu, NULL);
	cond_init_mono(&b->cv);
	b->fn = fn;
}

/* The refresh still running, if one is (it ends within its own bound). */
static void bg_free(struct bg *b)
{
	if (b->joinable)
		pthread_join(b->th, NULL);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
}

/* Called by the refresh, its result stored under b->mu. */
static void bg_done(struct bg *b)
{
	b->gen++;
	b->done_ns = pd_mono_ns();
	b->running = false;
	pthread_cond_broadcast(&b->cv);
}

/* With b->mu held: a refresh started unless one is running or the last
 * ended less than fresh_ns ago, then waited for up to wait_ms (if no
 * thread can be started, done here as long as it takes). */
static void bg_run(struct bg *b, void *arg, int64_t fresh_ns, int wait_ms)
{
	if (b->gen && !b->running && pd_mono_ns() - b->done_ns < fresh_ns)
		return;
	uint64_t gen = b->gen;
	if (!b->running) {
		if (b->joinable) /* the last refresh's thread, done */
			pthread_join(b->th, NULL);
		b->joinable = b->running = pthread_create(&b->th, NULL, b->fn, arg) == 0;
		if (!b->running) {
			b->running = true; /* (no other starts one meanwhile) */
			pthread_mutex_unlock(&b->mu);
			b->fn(arg);
			pthread_mutex_lock(&b->mu);
			return;
		}
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_nsec += wait_ms * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	while (b->gen == gen && pthread_cond_timedwait(&b->cv, &b->mu, &dl) == 0)
		;
}

static void *stats_main(void *arg)
{
	struct chs *s = arg;
	struct pd_store_stats st;
	struct pd_err err = {0};
	int rc = stats_fetch(s, &st, &err);
	pthread_mutex_lock(&s->sbg.mu);
	s->s_rc = rc;
	s->s_have = rc == 0;
	if (rc)
		s->s_err = err;
	else
		s->s_st = st;
	bg_done(&s->sbg);
	pthread_mutex_unlock(&s->sbg.mu);
	return NULL;
}

/* What this process counted itself (the symbol cache's). */
static void stats_syms(struct chs *s, struct pd_store_stats *st)
{
	pthread_mutex_lock(&s->cmu);
	st->sym_reads = s->sym_reads;
	st->sym_cached = s->sym_cached;
	st->read_cache_bytes = s->cbytes.len;
	pthread_mutex_unlock(&s->cmu);
}

static int ch_stats(struct pd_store *base, struct pd_store_stats *st, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	int rc = stats_fetch(s, st, err);
	stats_syms(s, st);
	return rc;
}

/* /metrics (pd_store_stats_quick): a refresh waited for up to
 * CH_STATS_WAIT_MS; past that, the last refresh's figures, or its error if
 * it failed (the store's gauges are then left out). */
static int ch_stats_quick(struct pd_store *base, struct pd_store_stats *st, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	memset(st, 0, sizeof *st);
	pthread_mutex_lock(&s->sbg.mu);
	bg_run(&s->sbg, s, 0, CH_STATS_WAIT_MS);
	/* this refresh's result if it came, else the last one's */
	if (s->s_have)
		*st = s->s_st;
	else if (s->sbg.gen)
		*err = s->s_err;
	int rc = s->s_have ? 0
	         : s->sbg.gen ? s->s_rc
	                      : pd_errf(err, PD_EUNAVAIL, "ClickHouse at %s: the stats did not come within %d ms",
	                                pd_ch_where(s->ch), CH_STATS_WAIT_MS);
	pthread_mutex_unlock(&s->sbg.mu);
	stats_syms(s, st);
	return rc;
}

/* ---- reading: hashes to seqs, symbols fetched a level at a time ---------------- */

/* One day's symbols as a request sees them: every hash met gets a seq
 * (from 1, per kind), its data once fetched (the ClickHouse layout). */
struct csym {
	struct pd_h128 h;
	uint32_t off, len; /* data in day.bytes */
	bool have, want;   /* fetched; asked for in the next round */
};
struct cday {
	struct chs *s;
	int64_t day;
	struct pd_hidx ix[PD_SYM_NKINDS];
	struct csym *v[PD_SYM_NKINDS];
	size_t n[PD_SYM_NKINDS], cap[PD_SYM_NKINDS];
	size_t nwant;
	struct pd_buf bytes;
	struct pd_err *err;
	ZSTD_DCtx *dctx; /* the sample blocks' decompressor, made once per day (was: per profile) */
};

static bool csym_eq(void *ctx, uint32_t v)
{
	void **c = ctx;
	const struct csym *arr = c[0];
	const struct pd_h128 *k = c[1];
	return arr[v].h.lo == k->lo && arr[v].h.hi == k->hi;
}

static int cday_init(struct cday *d, struct chs *s, int64_t day, struct pd_err *err)
{
	memset(d, 0, sizeof *d);
	d->s = s;
	d->day = day;
	d->err = err;
	for (int k = 0; k < PD_SYM_NKINDS; k++)
		if (pd_hidx_init(&d->ix[k], 256))
			return nomem(err);
	return 0;
}

static void cday_free(struct cday *d)
{
	for (int k = 0; k < PD_SYM_NKINDS; k++) {
		pd_hidx_free(&d->ix[k]);
		free(d->v[k]);
	}
	pd_buf_free(&d->bytes);
	ZSTD_freeDCtx(d->dctx);
}

/* Prefetch the index slots of the n 16-byte hashes at p (kind k): the
 * lookups that follow are independent, and each one's slot is a cache
 * miss in a table of a day's symbols. */
static void cday_prefetch(const struct cday *d, int k, const uint8_t *p, size_t n)
{
	const struct pd_hidx *ix = &d->ix[k];
	for (size_t i = 0; i < n; i++, p += 16) {
		uint64_t lo, hi;
		memcpy(&lo, p, 8);
		memcpy(&hi, p + 8, 8);
		pd_hidx_prefetch(ix, lo ^ hi);
	}
}

/* The seq of (kind, h), assigned if new (and then wanted). */
static int cday_seq(struct cday *d, int k, struct pd_h128 h, int64_t *seq)
{
	void *ctx[2] = {d->v[k], &h};
	uint32_t v = pd_hidx_find(&d->ix[k], h.lo ^ h.hi, csym_eq, ctx);
	if (v == PD_NONE) {
		if (pd_grow((void **)&d->v[k], &d->cap[k], d->n[k] + 1, sizeof *d->v[k]) ||
		    pd_hidx_insert(&d->ix[k], h.lo ^ h.hi, (uint32_t)d->n[k]))
			return PD_ENOMEM;
		v = (uint32_t)d->n[k]++;
		d->v[k][v] = (struct csym){h, 0, 0, false, true};
		d->nwant++;
	}
	*seq = (int64_t)v + 1;
	return 0;
}

static struct pd_h128 rd_h(struct pd_rd *r)
{
	struct pd_h128 h = {0, 0};
	if (r->bad || r->end - r->p < 16) {
		r->bad = true;
		return h;
	}
	memcpy(&h.lo, r->p, 8);
	memcpy(&h.hi, r->p + 8, 8);
	r->p += 16;
	return h;
}

/* Convert a kind-k symbol's data as ClickHouse holds it (children as
 * hashes) to the embedded store's layout (mat.h: children as seqs),
 * appended to out, assigning seqs to its children (which become wanted). */
static int convert(struct cday *d, int k, const uint8_t *data, size_t len, struct pd_buf *out)
{
	if (!len) /* data may be NULL then (an empty answer's string, an empty cache) */
		data = (const uint8_t *)"";
	struct pd_rd r = {data, data + len, false};
	if (k == PD_SYM_STR)
		return pd_buf_append(out, r.p, len) ? PD_ENOMEM : 0;
	if (pd_buf_reserve(out, len + 64))
		return PD_ENOMEM;
	int64_t sq;
	int rc = 0;
#define CHILD(kind)                                                                                                    \
	do {                                                                                                           \
		struct pd_h128 h_ = rd_h(&r);                                                                          \
		if (r.bad || (rc = cday_seq(d, (kind), h_, &sq)) || (rc = put_v(out, (uint64_t)sq)))                   \
			goto done;                                                                                     \
	} while (0)
#define VAL()                                                                                                          \
	do {                                                                                                           \
		uint64_t v_ = pd_rd_v(&r);                                                                             \
		if (r.bad || (rc = put_v(out, v_)))                                                                    \
			goto done;                                                                                     \
	} while (0)
	switch (k) {
	case PD_SYM_FN:
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		VAL();
		break;
	case PD_SYM_MAP:
		VAL();
		VAL();
		CHILD(PD_SYM_STR);
		VAL();
		VAL();
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		VAL();
		break;
	case PD_SYM_LOC: {
		if (r.p >= r.end) {
			r.bad = true;
			break;
		}
		bool hm = *r.p++ != 0;
		if (hm)
			CHILD(PD_SYM_MAP);
		else if ((rc = put_v(out, 0)))
			goto done;
		VAL();
		VAL();
		uint64_t nl = pd_rd_v(&r);
		if (r.bad || nl > len || (rc = put_v(out, nl)))
			goto done;
		for (uint64_t j = 0; j < nl; j++) {
			CHILD(PD_SYM_FN);
			VAL();
			VAL();
		}
		break;
	}
	case PD_SYM_STACK:
		cday_prefetch(d, PD_SYM_LOC, r.p, (size_t)(r.end - r.p) / 16);
		while (r.p < r.end)
			CHILD(PD_SYM_LOC);
		break;
	case PD_SYM_LSET:
		while (r.p < r.end) {
			CHILD(PD_SYM_STR);
			CHILD(PD_SYM_STR);
			VAL();
			CHILD(PD_SYM_STR);
		}
		break;
	}
#undef CHILD
#undef VAL
done:
	if (!rc && (r.bad || r.p != r.end))
		rc = PD_EIO;
	return rc;
}

/* Symbol v of kind k fetched: its data (ClickHouse's layout) converted
 * into d->bytes, its children named; 0 or an error. */
static int take_sym(struct cday *d, int k, uint32_t v, const uint8_t *data, size_t len, const char *dn)
{
	size_t off = d->bytes.len;
	int cr = convert(d, k, data, len, &d->bytes);
	struct csym *c = &d->v[k][v]; /* after convert: it grows other kinds' arrays only */
	c->off = (uint32_t)off;
	c->len = (uint32_t)(d->bytes.len - off);
	c->have = cr == 0;
	if (cr == PD_ENOMEM)
		return nomem(d->err);
	if (cr)
		return pd_errf(d->err, PD_EIO, "ClickHouse: corrupt %s symbol in %s",
		               k == PD_SYM_FN      ? "function"
		               : k == PD_SYM_MAP   ? "mapping"
		               : k == PD_SYM_LOC   ? "location"
		               : k == PD_SYM_STACK ? "stack"
		               : k == PD_SYM_STR   ? "string"
		                                   : "label set",
		               dn);
	return 0;
}

/* Take a symbols answer (rows of kind, h, data) into d: the rows asked
 * for become fetched, and their children are named (wanted next); *got =
 * rows asked for taken. Rows not asked for that are children of rows
 * asked for (the answer may bring them: cday_fetch) are taken as well, in
 * a second pass, and are then no longer wanted. */
static int absorb(struct cday *d, const uint8_t *p, size_t n, size_t *got, const char *dn)
{
	/* the converted symbols take no more than the answer: one growth */
	if (pd_buf_reserve(&d->bytes, n))
		return nomem(d->err);
	int rc = 0;
	pthread_mutex_lock(&d->s->cmu);
	bool again = false; /* a row left for the second pass */
	for (int pass = 0; pass < 2 && !rc && (pass == 0 || again); pass++) {
		struct pd_rb_rd r = {p, p + n, false};
		while (r.p < r.end && !rc) {
			int k = pd_rb_get_u8(&r);
			uint8_t hb[16];
			pd_rb_get_fixed(&r, hb, 16);
			size_t len;
			const uint8_t *data = pd_rb_get_str(&r, &len);
			if (r.bad || k >= PD_SYM_NKINDS) {
				rc = pd_errf(d->err, PD_EIO, "ClickHouse: a malformed answer to a query of symbols");
				break;
			}
			struct pd_h128 h;
			memcpy(&h.lo, hb, 8);
			memcpy(&h.hi, hb + 8, 8);
			void *ctx[2] = {d->v[k], &h};
			uint32_t v = pd_hidx_find(&d->ix[k], h.lo ^ h.hi, csym_eq, ctx);
			if (pass == 0 &&
			    (v == PD_NONE || d->v[k][v].want)) { /* not named yet, or named by this answer */
				again = true;
				continue;
			}
			if (v == PD_NONE || d->v[k][v].have) /* not named, or a duplicate not yet merged away */
				continue;
			if (pass == 1 && d->v[k][v].want) { /* a child of a row taken in the first pass */
				d->v[k][v].want = false;
				d->nwant--;
			}
			if (d->bytes.len + len > UINT32_MAX) {
				rc = pd_errf(d->err, PD_ELIMIT, "ClickHouse: the symbols of one query are over 4 GB");
				break;
			}
			/* kept converted (children as seqs, named now: fetched in the
			 * next round), once; a seq takes at most the 16 bytes of its hash */
			if (!(rc = take_sym(d, k, v, data, len, dn)))
				symc_put(d->s, d->day, k, h, data, len);
			*got += pass == 0;
			d->s->sym_reads += !rc;
		}
	}
	pthread_mutex_unlock(&d->s->cmu);
	return rc;
}

/* The wanted symbols the cache has, taken from it as absorb takes
 * answers (their children become wanted, and may be there too: until
 * none is); 0 or an error. Looked up CACHE_BATCH at a time, in stages:
 * each lookup is three dependent cache misses (the index slot, the entry,
 * its data) in tables of up to CH_SYMC_BYTES, and a merge takes hundreds
 * of thousands of symbols from here; the stages let a batch's misses
 * overlap (perf: symc_find was 24 % of a 20-service top over the soak's
 * data, ~470 ns a lookup). */
#define CACHE_BATCH 16
static int from_cache(struct cday *d, const char *dn)
{
	int rc = 0;
	struct chs *s = d->s;
	pthread_mutex_lock(&s->cmu);
	for (bool more = true; more && d->nwant && !rc && s->cix.slots;) {
		more = false;
		for (int k = 0; k < PD_SYM_NKINDS && !rc; k++) {
			/* take_sym names children of other kinds only: d->v[k]
			 * and d->n[k] stay as they are in this loop */
			for (size_t i = 0; i < d->n[k] && !rc;) {
				uint32_t at[CACHE_BATCH];
				uint64_t key[CACHE_BATCH];
				size_t m = 0;
				for (; i < d->n[k] && m < CACHE_BATCH; i++)
					if (d->v[k][i].want) {
						at[m] = (uint32_t)i;
						key[m] = known_key(d->day, k, d->v[k][i].h);
						pd_hidx_prefetch(&s->cix, key[m++]);
					}
				const struct symc_e *e[CACHE_BATCH];
				for (size_t j = 0; j < m; j++) { /* the slot is in: the entry next */
					const struct pd_hidx_slot *sl = &s->cix.slots[key[j] & s->cix.mask];
					if (sl->hash == key[j])
						__builtin_prefetch(&s->ce[sl->val]);
				}
				for (size_t j = 0; j < m; j++) { /* the entry is in: the data next */
					e[j] = symc_find(s, d->day, k, d->v[k][at[j]].h);
					if (e[j] && e[j]->len)
						__builtin_prefetch(s->cbytes.ptr + e[j]->off);
				}
				for (size_t j = 0; j < m && !rc; j++) {
					if (!e[j])
						continue;
					d->v[k][at[j]].want = false;
					d->nwant--;
					more = true;
					s->sym_cached++;
					rc = take_sym(d, k, at[j], e[j]->len ? s->cbytes.ptr + e[j]->off : NULL,
					              e[j]->len, dn);
				}
			}
		}
	}
	pthread_mutex_unlock(&s->cmu);
	return rc;
}

/* Fetch every wanted symbol, and then those they name, until none is
 * wanted (a stack's locations, their functions and mappings, their
 * strings: four rounds at most). */
static int cday_fetch(struct cday *d)
{
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER), want = PD_BUF_INIT(0);
	int rc = 0;
	char dn[16], ds[DAY_SQL_LEN];
	pd_store_day_name(d->day, dn);
	day_sql(d->day, ds);
	for (int round = 0; d->nwant && !rc; round++) {
		if ((rc = from_cache(d, dn)) || !d->nwant)
			break;
		if (round > 8) {
			rc = pd_errf(d->err, PD_EIO, "ClickHouse: symbols of %s nest too deep", dn);
			break;
		}
		/* the wanted (kind, h) as an external table (no IN list to parse:
		 * measured 3x faster on 18.16 for 20,000 hashes); with functions
		 * wanted, the strings they name too (a function's data starts with
		 * the hashes of its three strings): one round less, measured 5.0 +
		 * 5.5 ms in two rounds against 8 ms in one */
		sql.len = 0;
		want.len = 0;
		bool ok = true, fns = false;
		for (int k = 0; k < PD_SYM_NKINDS && ok; k++)
			for (size_t i = 0; i < d->n[k] && ok; i++) {
				struct csym *c = &d->v[k][i];
				if (!c->want)
					continue;
				uint8_t hb[16];
				memcpy(hb, &c->h.lo, 8);
				memcpy(hb + 8, &c->h.hi, 8);
				ok = !pd_rb_u8(&want, (uint8_t)k) && !pd_rb_fixed(&want, hb, 16);
				fns = fns || k == PD_SYM_FN;
			}
		ok = ok && !pd_buf_appendf(
		               &sql, "SELECT kind, h, data FROM symbols WHERE day = %s AND ((kind, h) IN want", ds);
		if (ok && fns)
			ok = !pd_buf_appendf(
			    &sql,
			    " OR (kind = %d AND h %sIN (SELECT arrayJoin([toFixedString(substring(data, 1, "
			    "16), 16), toFixedString(substring(data, 17, 16), 16), "
			    "toFixedString(substring(data, 33, 16), 16)]) FROM symbols WHERE day = %s AND "
			    "kind = %d AND (kind, h) IN want))",
			    PD_SYM_STR, d->s->gl, ds, PD_SYM_FN);
		ok = ok && !pd_buf_appendf(&sql, ") FORMAT RowBinary") && !pd_buf_append(&sql, "", 1);
		if (!ok) {
			rc = nomem(d->err);
			break;
		}
		size_t asked = d->nwant;
		if ((rc = pd_ch_query_ext(d->s->ch, (const char *)sql.ptr, "want", "kind UInt8, h FixedString(16)",
		                          want.ptr, want.len, CH_QUERY_SETTINGS, &ans, d->err)))
			break;
		/* what was asked for is no longer wanted; what the answers name is */
		for (int k = 0; k < PD_SYM_NKINDS; k++)
			for (size_t i = 0; i < d->n[k]; i++)
				d->v[k][i].want = false;
		d->nwant = 0;
		size_t got = 0;
		rc = absorb(d, ans.ptr, ans.len, &got, dn);
		if (!rc && got < asked)
			rc = pd_errf(d->err, PD_EIO, "ClickHouse: %zu of the %zu symbols asked for in %s are missing",
			             asked - got, asked, dn);
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	pd_buf_free(&want);
	return rc;
}

/* mat.h's symbol source over a fetched day */
static int src_get(void *ctx, int k, int64_t seq, struct pd_buf *out, struct pd_err *err)
{
	struct cday *d = ctx;
	if (seq < 1 || (size_t)seq > d->n[k] || !d->v[k][seq - 1].have)
		return pd_errf(err, PD_EIO, "ClickHouse: symbol %d #%lld was not fetched", k, (long long)seq);
	const struct csym *c = &d->v[k][seq - 1];
	out->len = 0;
	return pd_buf_append(out, d->bytes.ptr + c->off, c->len) ? nomem(err) : 0;
}

/* A stored profile row read back: header and rows with seqs of day d. */
struct crow {
	struct pd_shdr h;
	int64_t *rows;
	size_t nrows;
	uint32_t nv;
};

/* A profile row's refs as seqs of day d (strings, mappings, stacks,
 * label sets: the row's local numbers 1..cnt[t] are map[t][0..]). */
struct crefs {
	uint32_t *map[4];
	size_t cnt[4];
};

static void crefs_free(struct crefs *m)
{
	for (int t = 0; t < 4; t++)
		free(m->map[t]);
	memset(m, 0, sizeof *m);
}

/* Turn a profile row's refs into seqs of d (new ones become wanted:
 * cday_fetch gets them). */
static int row_refs(struct cday *d, const char *id, const uint8_t *rb, size_t rn, struct crefs *m, struct pd_err *err)
{
	memset(m, 0, sizeof *m);
	static const int kinds[4] = {PD_SYM_STR, PD_SYM_MAP, PD_SYM_STACK, PD_SYM_LSET};
	int rc = 0;
	struct pd_rd x = {rb, rb + rn, false};
	for (int t = 0; t < 4 && !rc; t++) {
		m->cnt[t] = pd_rd_v(&x);
		if (x.bad || m->cnt[t] > rn / 16)
			return pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
		if (!(m->map[t] = malloc((m->cnt[t] + 1) * sizeof *m->map[t])))
			return nomem(err);
		for (size_t i = 0; i < m->cnt[t] && !rc; i++) {
			struct pd_h128 h = rd_h(&x);
			int64_t sq;
			if (x.bad)
				rc = pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
			else if (cday_seq(d, kinds[t], h, &sq))
				rc = nomem(err);
			else
				m->map[t][i] = (uint32_t)sq;
		}
	}
	/* a rollup's refs go on with every location and function its stacks
	 * reach (its strings and mappings are in the first two): wanted now,
	 * so that one round fetches all of its symbols */
	static const int more[2] = {PD_SYM_LOC, PD_SYM_FN};
	for (int t = 0; t < 2 && !rc && x.p < x.end; t++) {
		size_t c = pd_rd_v(&x);
		if (x.bad || c > rn / 16)
			return pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
		for (size_t i = 0; i < c && !rc; i++) {
			struct pd_h128 h = rd_h(&x);
			int64_t sq;
			if (x.bad)
				rc = pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
			else if (cday_seq(d, more[t], h, &sq))
				rc = nomem(err);
		}
	}
	return rc;
}

/* Decode a profile row's header and block into r, its local numbers
 * turned into d's seqs by m (row_refs). Touches nothing of d but its
 * decompressor: it may run while another thread fetches d's symbols. */
static int row_load(struct cday *d, const char *id, const uint8_t *hb, size_t hn, const uint8_t *bb, size_t bn,
                    const struct crefs *m, struct crow *r, struct pd_err *err)
{
	memset(r, 0, sizeof *r);
	const uint8_t *pl;
	size_t pn;
	bool checked;
	int rc = pd_blob_open(hb, hn, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER), &pl, &pn, &checked, err);
	if (!rc)
		rc = pd_dec_header(pl, pn, &r->h, err);
	if (rc) {
		pd_err_prefix(err, "profile %s: header", id);
		return rc;
	}
	if ((rc = pd_blob_open(bb, bn, pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), &pl, &pn, &checked, err))) {
		pd_err_prefix(err, "profile %s: sample block", id);
		return rc;
	}
	if (!d->dctx)
		d->dctx = ZSTD_createDCtx();
	rc = d->dctx ? pd_dec_block(d->dctx, pl, pn, &r->rows, &r->nrows, &r->nv, err) : nomem(err);
	if (rc) {
		pd_err_prefix(err, "profile %s: sample block", id);
		return rc;
	}
	/* local numbers (1-based; 0 = none) to seqs */
#define XL(t, v)                                                                                                       \
	do {                                                                                                           \
		int64_t v_ = (v);                                                                                      \
		if (v_ < 0 || (uint64_t)v_ > m->cnt[t])                                                                \
			return pd_errf(err, PD_EIO, "profile %s: a reference out of range", id);                       \
		(v) = v_ ? m->map[t][v_ - 1] : 0;                                                                      \
	} while (0)
	for (uint32_t i = 0; i < 2 * r->h.nst; i++)
		XL(0, r->h.stypes[i]);
	for (uint32_t i = 0; i < r->h.ncomments; i++)
		XL(0, r->h.comments[i]);
	XL(0, r->h.ptype);
	XL(0, r->h.punit);
	XL(0, r->h.drop);
	XL(0, r->h.keep);
	XL(0, r->h.dflt);
	XL(0, r->h.doc);
	for (uint32_t i = 0; i < r->h.nmaps; i++)
		XL(1, r->h.maps[i]);
	for (uint32_t i = 0; r->h.inst && i < r->h.nmaps; i++)
		if (r->h.inst[i].file >= 0) {
			XL(0, r->h.inst[i].file);
			XL(0, r->h.inst[i].build);
		}
	for (size_t i = 0; i < r->nrows; i++) {
		int64_t *row = r->rows + i * (2 + r->nv);
		XL(2, row[0]);
		XL(3, row[1]);
	}
#undef XL
	return 0;
}

/* Decode a profile row's header, block and refs into r, its refs turned
 * into seqs of d (wanted: cday_fetch gets them). */
static int load_row(struct cday *d, const char *id, const uint8_t *hb, size_t hn, const uint8_t *bb, size_t bn,
                    const uint8_t *rb, size_t rn, struct crow *r, struct pd_err *err)
{
	struct crefs m;
	memset(r, 0, sizeof *r);
	int rc = row_refs(d, id, rb, rn, &m, err);
	if (!rc)
		rc = row_load(d, id, hb, hn, bb, bn, &m, r, err);
	crefs_free(&m);
	return rc;
}

static void crow_free(struct crow *r)
{
	pd_shdr_free(&r->h);
	free(r->rows);
	memset(r, 0, sizeof *r);
}

/* The rows of ids (all of one day d) into out[i] (same order); a missing
 * or deleted id is PD_ENOTFOUND. */
static int load_rows(struct cday *d, const char *const *ids, size_t n, const char *svc, const char *typ,
                     struct crow *out, struct pd_err *err)
{
	if (n == 0)
		return 0;
	char dn[DAY_SQL_LEN];
	day_sql(d->day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	/* No FINAL: it read every blob of the day to collapse the rows (26 MB
	 * and 73 ms for 5 ids among a day's 9,400 rows; the whole day's blobs
	 * for one profile), the id being last in the sort key. A row written
	 * twice (a retried INSERT) is the same row: the first one of an id is
	 * taken below. PREWHERE reads the ids alone and then the blobs of the
	 * rows asked for (280 KB and 3 ms); created_ns (an id's second) lets
	 * the primary key skip granules where it can. That is where the ids'
	 * service and type are known (svc, typ: the sort key's prefix): else
	 * the day's whole id column is read (~20 bytes a row of the day). */
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		int64_t t = pd_xid_time(ids[i]);
		lo = t < lo ? t : lo;
		hi = t > hi ? t : hi;
	}
	bool ok = !pd_buf_appendf(&sql, "SELECT id, header, block, refs FROM profiles PREWHERE id IN (");
	for (size_t i = 0; i < n && ok; i++)
		ok = !pd_buf_appendf(&sql, "%s'%s'", i ? ", " : "", ids[i]);
	ok = ok && !pd_buf_appendf(&sql, ") WHERE ");
	if (ok && svc && typ)
		ok = !pd_buf_appendf(&sql, "service = ") && !pd_ch_lit_s(&sql, svc) &&
		     !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, typ) && !pd_buf_appendf(&sql, " AND ");
	ok = ok &&
	     !pd_buf_appendf(&sql,
	                     "day = %s AND created_ns BETWEEN %lld AND %lld AND id %sNOT IN (SELECT id FROM "
	                     "deleted WHERE day = %s) FORMAT RowBinary",
	                     dn, (long long)lo, (long long)hi + 999999999LL, d->s->gl, dn) &&
	     !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(d->s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	bool *have = rc ? NULL : calloc(n + 1, sizeof *have);
	if (!rc && !have)
		rc = nomem(err);
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		size_t idn, hn, bn, rn;
		const uint8_t *idp = pd_rb_get_str(&r, &idn), *hp = pd_rb_get_str(&r, &hn),
		              *bp = pd_rb_get_str(&r, &bn), *rp = pd_rb_get_str(&r, &rn);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer to a query of profiles");
			break;
		}
		for (size_t i = 0; i < n && !rc; i++)
			if (!have[i] && strlen(ids[i]) == idn && !memcmp(ids[i], idp, idn)) {
				have[i] = true;
				rc = load_row(d, ids[i], hp, hn, bp, bn, rp, rn, &out[i], err);
			}
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (!have[i])
			rc = pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", ids[i]);
	free(have);
	pd_buf_free(&ans);
	return rc;
}

static int ch_get(struct pd_store *base, const char *id, struct pd_profile **out, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	int64_t t = id_ok(id) ? pd_xid_time(id) : -1;
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	struct cday d;
	struct crow r;
	memset(&r, 0, sizeof r);
	struct pd_mat m;
	memset(&m, 0, sizeof m);
	int rc = cday_init(&d, s, floor_div(t, DAY_NS), err);
	if (!rc)
		rc = load_rows(&d, &id, 1, NULL, NULL, &r, err);
	if (!rc)
		rc = cday_fetch(&d);
	struct pd_symsrc src = {src_get, NULL, &d};
	if (!rc)
		rc = pd_mat_start(&m, &src, &r.h, r.nrows, err);
	for (size_t i = 0; i < r.nrows && !rc; i++) {
		const int64_t *row = r.rows + i * (2 + r.nv);
		rc = pd_mat_sample(&m, row[0], row[1], row + 2, r.nv);
	}
	if (!rc)
		rc = pd_mat_finish(&m, out);
	pd_mat_free(&m);
	crow_free(&r);
	cday_free(&d);
	return rc;
}

struct idday {
	int64_t day;
	size_t i;       /* its place in the caller's ids */
	const char *id; /* the caller's ids[i] */
};
/* in time order (an xid sorts by its time), as the embedded store merges:
 * the answer does not depend on the order the ids were given in */
static int cmp_idday(const void *a, const void *b)
{
	const struct idday *x = a, *y = b;
	if (x->day != y->day)
		return x->day < y->day ? -1 : 1;
	int c = strcmp(x->id, y->id);
	return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

/* ch_merge, and ch_merge_of where svc and typ are given */
static int merge_ids(struct pd_store *base, const char *svc, const char *typ, const char *const *ids, size_t n,
                     struct pd_profile **out, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	if (n == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	struct idday *v = malloc(n * sizeof *v);
	if (!v)
		return nomem(err);
	for (size_t i = 0; i < n; i++) {
		int64_t t = id_ok(ids[i]) ? pd_xid_time(ids[i]) : -1;
		if (t < 0) {
			free(v);
			return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", ids[i]);
		}
		v[i] = (struct idday){floor_div(t, DAY_NS), i, ids[i]};
	}
	qsort(v, n, sizeof *v, cmp_idday);
	struct pd_merger *mg = NULL;
	struct pd_profile *single = NULL;
	size_t ndays = 0;
	int rc = 0;
	const char **dids = malloc(n * sizeof *dids);
	struct crow *rows = calloc(n, sizeof *rows);
	if (!dids || !rows)
		rc = nomem(err);
	for (size_t a = 0; a < n && !rc;) {
		size_t b = a;
		while (b < n && v[b].day == v[a].day)
			b++;
		/* one day: its rows aggregated on seqs, materialised once */
		for (size_t i = a; i < b; i++)
			dids[i - a] = ids[v[i].i];
		struct cday d;
		struct pd_pmerge pm;
		memset(&pm, 0, sizeof pm);
		rc = cday_init(&d, s, v[a].day, err);
		if (!rc)
			rc = load_rows(&d, dids, b - a, svc, typ, rows, err);
		struct pd_symsrc src = {src_get, NULL, &d};
		pm.src = src;
		for (size_t i = 0; i < b - a && !rc; i++)
			rc = pd_pm_add(&pm, dids[i], &rows[i].h, rows[i].rows, rows[i].nrows, rows[i].nv, false, err);
		if (!rc)
			rc = cday_fetch(&d);
		struct pd_profile *part = NULL;
		if (!rc && pm.have)
			rc = pd_pm_profile(&pm, &part, err);
		for (size_t i = 0; i < b - a; i++)
			crow_free(&rows[i]);
		pd_pmerge_free(&pm);
		cday_free(&d);
		if (!rc && part) {
			if (ndays == 0) {
				single = part;
			} else {
				if (!mg && !(mg = pd_merger_new()))
					rc = nomem(err);
				if (!rc && single) {
					rc = pd_merger_add_partial(mg, single, err);
					pd_profile_free(single);
					single = NULL;
				}
				if (!rc)
					rc = pd_merger_add_partial(mg, part, err);
				pd_profile_free(part);
			}
			ndays++;
		} else {
			pd_profile_free(part);
		}
		a = b;
	}
	if (!rc && mg)
		rc = pd_merger_finish(mg, out, err);
	else if (!rc && (*out = single, single = NULL, *out))
		rc = pd_pm_final(out, err);
	pd_profile_free(single);
	pd_merger_free(mg);
	free(dids);
	free(rows);
	free(v);
	return rc;
}

static int ch_merge(struct pd_store *base, const char *const *ids, size_t n, struct pd_profile **out,
                    struct pd_err *err)
{
	return merge_ids(base, NULL, NULL, ids, n, out, err);
}

/* ids all of service svc and type typ: their rows found through the sort
 * key's prefix, not the day's id column (a series' step, a report's side:
 * 545 KB -> 73 KB read a query on the soak's 17,000-row day; the day's
 * column grows by 20 bytes an upload) */
static int ch_merge_of(struct pd_store *base, const char *svc, const char *typ, const char *const *ids, size_t n,
                       struct pd_profile **out, struct pd_err *err)
{
	return merge_ids(base, svc, typ, ids, n, out, err);
}

/* ---- range merge ---------------------------------------------------------------- */

/* Days' partial profiles combined: the first one as it is, then through
 * the pprof merger (as ch_merge does). */
struct dayacc {
	struct pd_merger *mg;
	struct pd_profile *single;
	size_t ndays;
};

static int dayacc_add(struct dayacc *a, struct pd_profile *part, struct pd_err *err)
{
	int rc = 0;
	if (a->ndays++ == 0) {
		a->single = part;
		return 0;
	}
	if (!a->mg && !(a->mg = pd_merger_new()))
		rc = nomem(err);
	if (!rc && a->single) {
		rc = pd_merger_add_partial(a->mg, a->single, err);
		pd_profile_free(a->single);
		a->single = NULL;
	}
	if (!rc)
		rc = pd_merger_add_partial(a->mg, part, err);
	pd_profile_free(part);
	return rc;
}

static int dayacc_finish(struct dayacc *a, int rc, struct pd_profile **out, struct pd_err *err)
{
	if (!rc && a->mg)
		rc = pd_merger_finish(a->mg, out, err);
	else if (!rc && (*out = a->single, a->single = NULL, *out))
		rc = pd_pm_final(out, err);
	pd_profile_free(a->single);
	pd_merger_free(a->mg);
	return rc;
}

/* cday_fetch on a thread of its own, while the caller goes on with what
 * touches nothing of d's symbols */
struct cfetch {
	struct cday *d;
	struct pd_err err;
	int rc;
};

static void *cfetch_main(void *p)
{
	struct cfetch *f = p;
	f->d->err = &f->err;
	f->rc = cday_fetch(f->d);
	return NULL;
}

/* A row of a profiles answer (pointers into it). */
struct prow {
	const uint8_t *id, *hp, *bp, *rp;
	size_t hn, bn, rn;
	int64_t created;
	uint64_t h;
};

static int cmp_prow(const void *a, const void *b)
{
	const struct prow *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return memcmp(x->id, y->id, PD_STORE_ID_LEN);
}

/* A valid rollup of a range merge's whole hour, loaded (pm_add_rollups):
 * added to the merge in its hour's place among the profiles (pm_add_day). */
struct rolled {
	int64_t hour;
	struct crow row;
	char rid[256];
};

static void rolled_free(struct rolled *ro, size_t n)
{
	for (size_t i = 0; i < n; i++)
		crow_free(&ro[i].row);
	free(ro);
}

/* Merge the live profiles of rq->service and rq->type created in [lo, hi]
 * (within day d), but those of the hours of ro (answered by its rollups;
 * ascending), into pm, the rollups with them, in time order (as the
 * embedded store and Go's merge of the files in time order: the same
 * samples in the same order): one query by the sorting key's prefix
 * (service, type, created_ns ranges: only the granules of those are read;
 * none if the rollups cover [lo, hi]). *n += profiles merged (over max, 0
 * = none: PD_ELIMIT); *fp (may be NULL) += the sum of their
 * cityHash64(id). */
static int pm_add_day(struct cday *d, struct pd_pmerge *pm, const struct pd_merge_range *rq, int64_t lo, int64_t hi,
                      struct rolled *ro, size_t nro, uint64_t *fp, size_t *n, size_t max, struct pd_err *err)
{
	char dn[DAY_SQL_LEN];
	day_sql(d->day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	/* no FINAL and no ORDER BY: both made ClickHouse merge-sort the rows'
	 * blobs (measured 20 -> 15 ms for 200 rows of 30 KB); a row written
	 * twice (a retried INSERT) is the same row, skipped here, and the
	 * rows are put in (created_ns, id) order here. The range in PREWHERE:
	 * the blobs are read only where it holds (a short range's rows are a
	 * few of the 256 of a granule: 1.4 MB -> 120 KB read, 8.2 -> 6.8 ms,
	 * for a minute of one service in the soak's data) */
	bool ok =
	    !pd_buf_appendf(&sql, "SELECT id, created_ns, header, block, refs, cityHash64(id) FROM profiles PREWHERE "
	                          "service = ") &&
	    !pd_ch_lit_s(&sql, rq->service) && !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, rq->type) &&
	    !pd_buf_appendf(&sql, " AND day = %s AND (0", dn);
	/* [lo, hi] less the skipped hours */
	size_t spans = 0;
	int64_t t = lo;
	for (size_t i = 0; ok && i <= nro; i++) {
		int64_t e = i < nro ? ro[i].hour * HOUR_NS - 1 : hi;
		if (e > hi)
			e = hi;
		if (t <= e) {
			ok = !pd_buf_appendf(&sql, " OR created_ns BETWEEN %lld AND %lld", (long long)t, (long long)e);
			spans++;
		}
		if (i < nro && (ro[i].hour + 1) * HOUR_NS > t)
			t = (ro[i].hour + 1) * HOUR_NS;
	}
	ok = ok &&
	     !pd_buf_appendf(&sql, ") WHERE id %sNOT IN (SELECT id FROM deleted WHERE day = %s) FORMAT RowBinary",
	                     d->s->gl, dn) &&
	     !pd_buf_append(&sql, "", 1);
	int rc = !ok ? nomem(err) : spans ? q(d->s, (const char *)sql.ptr, &ans, err) : 0;
	pd_buf_free(&sql);
	struct prow *rows = NULL;
	struct crefs *refs = NULL;
	size_t nr = 0, cap = 0;
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		struct prow w;
		size_t idn;
		w.id = pd_rb_get_str(&r, &idn);
		w.created = (int64_t)pd_rb_get_u64(&r);
		w.hp = pd_rb_get_str(&r, &w.hn);
		w.bp = pd_rb_get_str(&r, &w.bn);
		w.rp = pd_rb_get_str(&r, &w.rn);
		w.h = pd_rb_get_u64(&r);
		if (r.bad || idn != PD_STORE_ID_LEN)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer to a query of profiles");
		else if (pd_grow((void **)&rows, &cap, nr + 1, sizeof *rows))
			rc = nomem(err);
		else
			rows[nr++] = w;
	}
	if (!rc && nr > 1)
		qsort(rows, nr, sizeof *rows, cmp_prow);
	size_t keep = 0; /* the rows less those written twice */
	for (size_t i = 0; !rc && i < nr; i++)
		if (!keep || memcmp(rows[keep - 1].id, rows[i].id, PD_STORE_ID_LEN) ||
		    rows[keep - 1].created != rows[i].created)
			rows[keep++] = rows[i];
	nr = keep;
	if (!rc && max && *n + nr > max)
		rc = pd_errf(err, PD_ELIMIT,
		             "more than %zu profiles of \"%s\" to merge: over the limit of profiles per query", max,
		             rq->service);
	if (!rc && nr && !(refs = calloc(nr, sizeof *refs)))
		rc = nomem(err);
	/* every row's refs first (seqs, and what to fetch), then the fetch on
	 * a thread of its own beside the decoding and summing of the blocks */
	char id[PD_STORE_ID_LEN + 1];
	for (size_t i = 0; !rc && i < nr; i++) {
		memcpy(id, rows[i].id, PD_STORE_ID_LEN);
		id[PD_STORE_ID_LEN] = 0;
		rc = row_refs(d, id, rows[i].rp, rows[i].rn, &refs[i], err);
	}
	struct cfetch f = {d, {0}, 0};
	pthread_t th;
	bool thr = !rc && nr > 1 && d->nwant && pthread_create(&th, NULL, cfetch_main, &f) == 0;
	size_t k = 0; /* the rollups added */
	for (size_t i = 0; !rc && i <= nr; i++) {
		for (; !rc && k < nro && (i == nr || ro[k].hour * HOUR_NS <= rows[i].created); k++)
			rc = pd_pm_add(pm, ro[k].rid, &ro[k].row.h, ro[k].row.rows, ro[k].row.nrows, ro[k].row.nv, true,
			               err);
		if (rc || i == nr)
			break;
		memcpy(id, rows[i].id, PD_STORE_ID_LEN);
		id[PD_STORE_ID_LEN] = 0;
		struct crow row;
		rc = row_load(d, id, rows[i].hp, rows[i].hn, rows[i].bp, rows[i].bn, &refs[i], &row, err);
		if (!rc)
			rc = pd_pm_add(pm, id, &row.h, row.rows, row.nrows, row.nv, false, err);
		crow_free(&row);
		crefs_free(&refs[i]);
		if (fp)
			*fp += rows[i].h;
		(*n)++;
	}
	if (thr) {
		pthread_join(th, NULL);
		d->err = err;
		if (!rc && f.rc) {
			rc = f.rc;
			*err = f.err;
		}
	}
	for (size_t i = 0; refs && i < nr; i++)
		crefs_free(&refs[i]);
	free(refs);
	free(rows);
	pd_buf_free(&ans);
	return rc;
}

/* ---- rollups --------------------------------------------------------------------- */

static void rollup_id(const char *svc, const char *typ, int64_t hour, char *out, size_t n)
{
	snprintf(out, n, "rollup/%s/%s/%lld", svc, typ, (long long)hour);
}

/* The local number (refs table t of g) of seq of kind k of d; 0 stays 0. */
static int seq_ref(struct ing *g, const struct cday *d, int t, int k, int64_t seq, int64_t *out)
{
	if (seq == 0) {
		*out = 0;
		return 0;
	}
	if (seq < 0 || (size_t)seq > d->n[k])
		return PD_EIO;
	return ref_of(g, t, d->v[k][seq - 1].h, out);
}

static const int64_t *agg_vals(const void *ctx, size_t i)
{
	return pd_agg_values(ctx, i);
}

/* An aggregate (pm, on d's seqs) as a profile row's framed header and
 * block and its refs, named rid. */
static int enc_rollup(const struct cday *d, const struct pd_pmerge *pm, const char *rid, struct pd_buf *fh,
                      struct pd_buf *fb, struct pd_buf *refs, struct pd_err *err)
{
	struct ing g;
	memset(&g, 0, sizeof g);
	struct pd_shdr h = pm->h;
	h.stypes = calloc(2 * (size_t)h.nst + 1, sizeof *h.stypes);
	h.comments = calloc((size_t)h.ncomments + 1, sizeof *h.comments);
	h.maps = calloc((size_t)h.nmaps + 1, sizeof *h.maps);
	h.inst = pm->h.inst ? calloc((size_t)h.nmaps + 1, sizeof *h.inst) : NULL;
	size_t n = pm->agg.n;
	int64_t *stk = malloc((n + 1) * sizeof *stk), *ls = malloc((n + 1) * sizeof *ls);
	int rc = h.stypes && h.comments && h.maps && (h.inst || !pm->h.inst) && stk && ls ? 0 : PD_ENOMEM;
	for (int t = 0; t < 4 && !rc; t++)
		rc = pd_hidx_init(&g.ix[t], t == R_STK ? n + 16 : 64) ? PD_ENOMEM : 0;
	for (uint32_t i = 0; i < 2 * h.nst && !rc; i++)
		rc = seq_ref(&g, d, R_STR, PD_SYM_STR, pm->h.stypes[i], &h.stypes[i]);
	for (uint32_t i = 0; i < h.ncomments && !rc; i++)
		rc = seq_ref(&g, d, R_STR, PD_SYM_STR, pm->h.comments[i], &h.comments[i]);
	for (uint32_t i = 0; i < h.nmaps && !rc; i++)
		rc = seq_ref(&g, d, R_MAP, PD_SYM_MAP, pm->h.maps[i], &h.maps[i]);
	for (uint32_t i = 0; h.inst && i < h.nmaps && !rc; i++) {
		h.inst[i] = pm->h.inst[i];
		if (h.inst[i].file >= 0 && !(rc = seq_ref(&g, d, R_STR, PD_SYM_STR, pm->h.inst[i].file, &h.inst[i].file)))
			rc = seq_ref(&g, d, R_STR, PD_SYM_STR, pm->h.inst[i].build, &h.inst[i].build);
	}
	int64_t *fields[] = {&h.ptype, &h.punit, &h.drop, &h.keep, &h.dflt, &h.doc};
	for (size_t i = 0; i < 6 && !rc; i++)
		rc = seq_ref(&g, d, R_STR, PD_SYM_STR, *fields[i], fields[i]);
	for (size_t i = 0; i < n && !rc; i++) {
		rc = seq_ref(&g, d, R_STK, PD_SYM_STACK, pm->stk.keys[pm->agg.rows[i].stack], &stk[i]);
		if (!rc)
			rc = seq_ref(&g, d, R_LS, PD_SYM_LSET, pm->ls.keys[pm->agg.rows[i].labels], &ls[i]);
	}
	struct pd_buf hdr = PD_BUF_INIT(0), blk = PD_BUF_INIT(0);
	if (rc)
		rc = rc == PD_ENOMEM ? nomem(err) : pd_errf(err, PD_EIO, "%s: a symbol out of range", rid);
	if (!rc)
		rc = pd_enc_header(&h, &hdr, err);
	if (!rc) {
		ZSTD_CCtx *z = ZSTD_createCCtx();
		rc = z ? pd_enc_rows(z, n, pm->agg.nvalues, stk, ls, agg_vals, &pm->agg, NULL, &blk, err) : nomem(err);
		ZSTD_freeCCtx(z);
	}
	/* the closure of the symbols (d has fetched them): every string and
	 * mapping in the first two refs tables, then every location and
	 * function, for a reader to fetch all of them in one round */
	int64_t unused;
	for (size_t i = 0; i < d->n[PD_SYM_STR] && !rc; i++)
		if (d->v[PD_SYM_STR][i].have)
			rc = ref_of(&g, R_STR, d->v[PD_SYM_STR][i].h, &unused) ? nomem(err) : 0;
	for (size_t i = 0; i < d->n[PD_SYM_MAP] && !rc; i++)
		if (d->v[PD_SYM_MAP][i].have)
			rc = ref_of(&g, R_MAP, d->v[PD_SYM_MAP][i].h, &unused) ? nomem(err) : 0;
	if (!rc &&
	    (enc_refs(&g, refs) || framed(&hdr, rid, PD_BLOB_HEADER, fh) || framed(&blk, rid, PD_BLOB_BLOCK, fb)))
		rc = nomem(err);
	static const int more[2] = {PD_SYM_LOC, PD_SYM_FN};
	for (int t = 0; t < 2 && !rc; t++) {
		size_t c = 0;
		for (size_t i = 0; i < d->n[more[t]]; i++)
			c += d->v[more[t]][i].have;
		rc = put_v(refs, c) ? nomem(err) : 0;
		for (size_t i = 0; i < d->n[more[t]] && !rc; i++)
			if (d->v[more[t]][i].have && put_h(refs, d->v[more[t]][i].h))
				rc = nomem(err);
	}
	pd_buf_free(&hdr);
	pd_buf_free(&blk);
	free(h.stypes), free(h.comments), free(h.maps), free(h.inst);
	free(stk), free(ls);
	ing_free(&g);
	return rc;
}

/* Build the rollup of (svc, typ, hour): its profiles merged as a range
 * merge merges them, their count and fingerprint taken from the same
 * rows (a profile that arrives meanwhile makes the rollup stale, and the
 * next pass builds it again). */
static int rollup_hour(struct chs *s, const char *svc, const char *typ, int64_t hour, struct pd_err *err)
{
	int64_t day = floor_div(hour * HOUR_NS, DAY_NS);
	struct pd_merge_range rq = {svc, typ, hour * HOUR_NS, hour * HOUR_NS + HOUR_NS - 1, 0, true};
	struct cday d;
	struct pd_pmerge pm;
	memset(&pm, 0, sizeof pm);
	uint64_t fp = 0;
	size_t n = 0;
	char rid[256];
	rollup_id(svc, typ, hour, rid, sizeof rid);
	struct pd_buf fh = PD_BUF_INIT(0), fb = PD_BUF_INIT(0), refs = PD_BUF_INIT(0), row = PD_BUF_INIT(0);
	int rc = cday_init(&d, s, day, err);
	pm.src = (struct pd_symsrc){src_get, NULL, &d};
	if (!rc)
		rc = pm_add_day(&d, &pm, &rq, rq.from_ns, rq.to_ns, NULL, 0, &fp, &n, 0, err);
	if (!rc && pm.have)
		rc = cday_fetch(&d); /* for the closure of its symbols (enc_rollup) */
	if (rc == PD_EINCOMPAT) {    /* cannot be merged: a row without a block marks the hour as looked at */
		rc = 0;
		pd_pmerge_free(&pm);
		memset(&pm, 0, sizeof pm);
	}
	if (!rc && pm.have && !(rc = pd_pm_settle(&pm, err)))
		rc = enc_rollup(&d, &pm, rid, &fh, &fb, &refs, err);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!rc &&
	    (pd_rb_u16(&row, (uint16_t)day) || pd_rb_str(&row, svc, strlen(svc)) || pd_rb_str(&row, typ, strlen(typ)) ||
	     pd_rb_u64(&row, (uint64_t)hour) || pd_rb_u64(&row, n) || pd_rb_u64(&row, fp) ||
	     pd_rb_u64(&row, (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec) ||
	     pd_rb_str(&row, fh.ptr, fh.len) || pd_rb_str(&row, fb.ptr, fb.len) || pd_rb_str(&row, refs.ptr, refs.len)))
		rc = nomem(err);
	if (!rc)
		rc = pd_ch_query(s->ch, "INSERT INTO rollups FORMAT RowBinary", row.ptr, row.len, s->ins_settings, NULL,
		                 err);
	pd_pmerge_free(&pm);
	cday_free(&d);
	pd_buf_free(&fh), pd_buf_free(&fb), pd_buf_free(&refs), pd_buf_free(&row);
	if (rc)
		pd_err_prefix(err, "%s", rid);
	return rc;
}

/* pd_store_rollup: the hours ended by cutoff whose rollup is missing or
 * does not match their live profiles any more (count, fingerprint), oldest
 * first, at most max_hours. */
static int ch_rollup(struct pd_store *base, int64_t cutoff, size_t max_hours, size_t *built, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*built = 0;
	int64_t end = floor_div(cutoff, HOUR_NS); /* hours before this one are over */
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	bool ok = !pd_buf_appendf(
	    &sql,
	    "SELECT service, type, hour FROM (SELECT service, type, intDiv(created_ns, 3600000000000) AS hour, "
	    "toUInt64(count()) AS cnt, sum(cityHash64(id)) AS fp FROM profiles FINAL WHERE created_ns < %lld AND id "
	    "%sNOT IN (SELECT id FROM deleted) GROUP BY service, type, hour) %sANY LEFT JOIN (" CH_ROLLUPS_NOW
	    ") USING (service, type, hour) WHERE rcnt != cnt OR rfp != fp ORDER BY hour, service, type",
	    (long long)(end * HOUR_NS), s->gl, s->gl);
	ok = ok && (!max_hours || !pd_buf_appendf(&sql, " LIMIT %zu", max_hours)) &&
	     !pd_buf_appendf(&sql, " FORMAT RowBinary") && !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		size_t sn, tn;
		const uint8_t *sp = pd_rb_get_str(&r, &sn), *tp = pd_rb_get_str(&r, &tn);
		int64_t hour = (int64_t)pd_rb_get_u64(&r);
		if (r.bad || sn >= 128 || tn >= 16) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer to a query of stale rollups");
			break;
		}
		char svc[128], typ[16];
		memcpy(svc, sp, sn), svc[sn] = 0;
		memcpy(typ, tp, tn), typ[tn] = 0;
		if (!(rc = rollup_hour(s, svc, typ, hour, err)))
			(*built)++;
	}
	pd_buf_free(&ans);
	return rc;
}

/* The valid rollups of rq in day d's [h0, h1], loaded into *ro (hours
 * ascending; for pm_add_day to add in their place, and to skip their
 * hours' profiles). */
static int pm_add_rollups(struct cday *d, const struct pd_merge_range *rq, int64_t h0, int64_t h1, struct rolled **ro,
                          size_t *nh, struct pd_merge_info *info, struct pd_err *err)
{
	char dn[DAY_SQL_LEN];
	day_sql(d->day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	const char *gl = d->s->gl;
	/* a rollup whose (profiles, fp) are those of the hour's live profiles
	 * now (no FINAL: it would read every row's blobs; the same hour built
	 * twice from the same profiles is the same rollup, taken once) */
	bool ok =
	    !pd_buf_appendf(&sql, "SELECT hour, profiles, header, block, refs FROM (SELECT hour, profiles, fp, header, "
	                          "block, refs, built_ns FROM rollups WHERE service = ") &&
	    !pd_ch_lit_s(&sql, rq->service) && !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, rq->type) &&
	    !pd_buf_appendf(&sql,
	                    " AND day = %s AND hour BETWEEN %lld AND %lld) %sANY INNER JOIN (SELECT "
	                    "intDiv(created_ns, 3600000000000) AS hour, toUInt64(count()) AS cnt, sum(cityHash64(id)) "
	                    "AS cfp FROM profiles FINAL WHERE service = ",
	                    dn, (long long)h0, (long long)h1, gl) &&
	    !pd_ch_lit_s(&sql, rq->service) && !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, rq->type) &&
	    !pd_buf_appendf(&sql,
	                    " AND day = %s AND created_ns BETWEEN %lld AND %lld AND id %sNOT IN (SELECT id FROM "
	                    "deleted WHERE day = %s) GROUP BY hour) USING (hour) WHERE cnt = profiles AND cfp = fp "
	                    "AND length(block) > 0 ORDER BY hour, built_ns DESC FORMAT RowBinary",
	                    dn, (long long)(h0 * HOUR_NS), (long long)(h1 * HOUR_NS + HOUR_NS - 1), gl, dn) &&
	    !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(d->s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	size_t cap = 0;
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		int64_t hour = (int64_t)pd_rb_get_u64(&r);
		uint64_t np = pd_rb_get_u64(&r);
		size_t hn, bn, rn;
		const uint8_t *hp = pd_rb_get_str(&r, &hn), *bp = pd_rb_get_str(&r, &bn), *rp = pd_rb_get_str(&r, &rn);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer to a query of rollups");
			break;
		}
		if (*nh && (*ro)[*nh - 1].hour == hour) /* built twice (not merged away yet): the same profiles */
			continue;
		if (pd_grow((void **)ro, &cap, *nh + 1, sizeof **ro)) {
			rc = nomem(err);
			break;
		}
		struct rolled *x = &(*ro)[*nh];
		x->hour = hour;
		rollup_id(rq->service, rq->type, hour, x->rid, sizeof x->rid);
		if ((rc = load_row(d, x->rid, hp, hn, bp, bn, rp, rn, &x->row, err))) {
			crow_free(&x->row);
			break;
		}
		(*nh)++;
		info->rollup_hours++;
		info->profiles += (size_t)np;
	}
	pd_buf_free(&ans);
	return rc;
}

/* ---- range merge ------------------------------------------------------------------ */

static int64_t ceil_div(int64_t a, int64_t b)
{
	return -floor_div(-a, b);
}

/* pd_store_merge_range: per day, the valid rollups of the range's whole
 * hours and the other hours' profiles aggregated on the day's seqs and
 * materialised once, the days combined by the pprof merger. */
static int ch_merge_range(struct pd_store *base, const struct pd_merge_range *rq, struct pd_profile **out,
                          struct pd_merge_info *info, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	memset(info, 0, sizeof *info);
	int64_t d0 = floor_div(rq->from_ns < 0 ? 0 : rq->from_ns, DAY_NS), d1 = floor_div(rq->to_ns, DAY_NS);
	if (d1 > CH_MAX_DAY)
		d1 = CH_MAX_DAY;
	/* the days that have rows of the service and type in the range */
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	char a[DAY_SQL_LEN], z[DAY_SQL_LEN];
	day_sql(d0, a);
	day_sql(d1 < d0 ? d0 : d1, z);
	/* A range inside one day that holds no whole hour (or may not read
	 * rollups) asks nothing of the days: its one day is read as a day
	 * without rollups, and its query of profiles finds what there is. One
	 * round trip of two saved for short ranges: a report's sides, a minute's
	 * merge (the soak's regressions: 680 of these queries, ~3 ms each). */
	int64_t lo0 = rq->from_ns > d0 * DAY_NS ? rq->from_ns : d0 * DAY_NS;
	bool one_day = d0 == d1 && rq->from_ns <= rq->to_ns &&
	               (rq->no_rollups || ceil_div(lo0, HOUR_NS) > floor_div(rq->to_ns - HOUR_NS + 1, HOUR_NS));
	/* and whether the day has rollups of them at all (else its rollups
	 * query is not sent: a round trip of ~3.5 ms, measured); the IN outside
	 * the DISTINCT (18.16 returned a day twice with it inside) */
	bool ok =
	    one_day ||
	    (!pd_buf_appendf(&sql,
	                     "SELECT d, toUInt8(d %sIN (SELECT toUInt16(day) FROM rollups WHERE service = ", s->gl) &&
	     !pd_ch_lit_s(&sql, rq->service) && !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, rq->type) &&
	     !pd_buf_appendf(&sql,
	                     " AND day BETWEEN %s AND %s)) FROM (SELECT DISTINCT toUInt16(day) AS d FROM "
	                     "profiles WHERE service = ",
	                     a, z) &&
	     !pd_ch_lit_s(&sql, rq->service) && !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, rq->type) &&
	     !pd_buf_appendf(&sql,
	                     " AND created_ns BETWEEN %lld AND %lld AND day BETWEEN %s AND %s) ORDER BY d "
	                     "FORMAT RowBinary",
	                     (long long)rq->from_ns, (long long)rq->to_ns, a, z) &&
	     !pd_buf_append(&sql, "", 1));
	int rc = !ok ? nomem(err) : one_day ? 0 : q(s, (const char *)sql.ptr, &ans, err);
	pd_buf_free(&sql);
	struct dayacc acc = {NULL, NULL, 0};
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && (one_day || r.p < r.end)) {
		int64_t day = one_day ? d0 : pd_rb_get_u16(&r);
		bool rolled = !one_day && pd_rb_get_u8(&r) != 0;
		one_day = false; /* once */
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
			break;
		}
		int64_t lo = rq->from_ns > day * DAY_NS ? rq->from_ns : day * DAY_NS;
		int64_t hi = rq->to_ns < (day + 1) * DAY_NS - 1 ? rq->to_ns : (day + 1) * DAY_NS - 1;
		int64_t h0 = ceil_div(lo, HOUR_NS), h1 = floor_div(hi - HOUR_NS + 1, HOUR_NS);
		struct cday d;
		struct pd_pmerge pm;
		memset(&pm, 0, sizeof pm);
		struct rolled *ro = NULL;
		size_t nh = 0, n0 = info->raw;
		rc = cday_init(&d, s, day, err);
		pm.src = (struct pd_symsrc){src_get, NULL, &d};
		if (!rc && rolled && !rq->no_rollups && h0 <= h1)
			rc = pm_add_rollups(&d, rq, h0, h1, &ro, &nh, info, err);
		if (!rc)
			rc = pm_add_day(&d, &pm, rq, lo, hi, ro, nh, NULL, &info->raw, rq->max_raw, err);
		rolled_free(ro, nh);
		if (!rc)
			rc = cday_fetch(&d);
		struct pd_profile *part = NULL;
		if (!rc && pm.have)
			rc = pd_pm_profile(&pm, &part, err);
		pd_pmerge_free(&pm);
		cday_free(&d);
		info->profiles += info->raw - n0;
		if (!rc && part)
			rc = dayacc_add(&acc, part, err);
		else
			pd_profile_free(part);
	}
	pd_buf_free(&ans);
	return dayacc_finish(&acc, rc, out, err);
}

/* ---- open, close ---------------------------------------------------------------- */

static void ch_close(struct pd_store *base)
{
	struct chs *s = (struct chs *)base;
	bg_free(&s->sbg);
	bg_free(&s->hbg);
	pd_ch_close(s->ch);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->bmu);
	pthread_mutex_destroy(&s->cmu);
	pd_hidx_free(&s->cix);
	free(s->ce);
	pd_buf_free(&s->cbytes);
	pthread_cond_destroy(&s->bcv);
	free(s->ins_settings);
	free(s->on);
	free(s->known);
	free(s->cluster);
	free(s);
}

/* /readyz: whether ClickHouse answers (SELECT 1 within 2 s), asked at
 * most once a second, on a thread of its own (struct bg): a probe waits
 * for it CH_STATS_WAIT_MS at most (the first look: all of it), then has
 * the last answer. */
static void *health_main(void *arg)
{
	struct chs *s = arg;
	struct pd_err err = {0};
	struct pd_buf ans = PD_BUF_INIT(4096);
	int rc = pd_ch_query_to(s->ch, "SELECT 1", NULL, 0, NULL, &ans, 2000, &err);
	pd_buf_free(&ans);
	pthread_mutex_lock(&s->hbg.mu);
	s->health_bad = rc != 0;
	snprintf(s->health_msg, sizeof s->health_msg, "%s", rc ? err.msg : "");
	bg_done(&s->hbg);
	pthread_mutex_unlock(&s->hbg.mu);
	return NULL;
}

static void ch_health(struct pd_store *base, struct pd_store_health *out)
{
	struct chs *s = (struct chs *)base;
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&s->hbg.mu);
	/* the first look is waited for as long as it may take (2 s): no
	 * answer yet is no cause to report */
	bg_run(&s->hbg, s, 1000000000LL, s->hbg.gen ? CH_STATS_WAIT_MS : 2100);
	if (s->hbg.gen) {
		out->cannot_write = s->health_bad;
		snprintf(out->write_error, sizeof out->write_error, "%s", s->health_msg);
	} else { /* (the look's own bound is 2 s: only if the thread is late) */
		out->cannot_write = true;
		snprintf(out->write_error, sizeof out->write_error, "ClickHouse at %s: no answer to SELECT 1 yet",
		         pd_ch_where(s->ch));
	}
	pthread_mutex_unlock(&s->hbg.mu);
}

/* pd_store_warm: the symbols of the newest `days` days read into the
 * cache of read symbols while its bound allows, newest day first and, in
 * a day, the kinds a merge's later rounds ask for first (strings,
 * functions, mappings, locations, label sets, then stacks): the first
 * merge after a start then asks ClickHouse only for the profiles, as the
 * next ones do (a stateless collector behind a Service is often fresh).
 * Each query is capped by what is left of the bound (result_overflow_mode
 * = break: ClickHouse stops sending there); an error ends the warm-up and
 * is not one of the store's (the reads fetch what the cache lacks). */
static void ch_warm(struct pd_store *base, size_t days)
{
	struct chs *s = (struct chs *)base;
	static const int order[] = {PD_SYM_STR, PD_SYM_FN, PD_SYM_MAP, PD_SYM_LOC, PD_SYM_LSET, PD_SYM_STACK};
	struct pd_err err;
	int64_t *v = NULL;
	size_t nd = 0;
	if (days_present(s, &v, &nd, &err))
		return;
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER), set = PD_BUF_INIT(0);
	bool stop = false;
	for (size_t i = nd; i > (nd > days ? nd - days : 0) && !stop; i--) {
		char dn[DAY_SQL_LEN];
		day_sql(v[i - 1], dn);
		for (size_t o = 0; o < sizeof order / sizeof *order && !stop; o++) {
			pthread_mutex_lock(&s->cmu);
			size_t left = CH_SYMC_BYTES - s->cbytes.len;
			pthread_mutex_unlock(&s->cmu);
			if (left < (1u << 20)) {
				stop = true;
				break;
			}
			sql.len = set.len = ans.len = 0;
			if (pd_buf_appendf(&sql,
			                   "SELECT h, data FROM symbols WHERE day = %s AND kind = %d FORMAT RowBinary",
			                   dn, order[o]) ||
			    pd_buf_append(&sql, "", 1) ||
			    pd_buf_appendf(&set, "%s&max_result_bytes=%zu&result_overflow_mode=break",
			                   CH_QUERY_SETTINGS, left) ||
			    pd_buf_append(&set, "", 1) ||
			    pd_ch_query(s->ch, (const char *)sql.ptr, NULL, 0, (const char *)set.ptr, &ans, &err))
				break;
			pthread_mutex_lock(&s->cmu);
			struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
			while (r.p < r.end) {
				uint8_t hb[16];
				pd_rb_get_fixed(&r, hb, 16);
				size_t len;
				const uint8_t *data = pd_rb_get_str(&r, &len);
				if (r.bad)
					break;
				if (s->cbytes.len + len > CH_SYMC_BYTES) { /* full: symc_put would empty it */
					stop = true;
					break;
				}
				struct pd_h128 h;
				memcpy(&h.lo, hb, 8);
				memcpy(&h.hi, hb + 8, 8);
				symc_put(s, v[i - 1], order[o], h, data, len);
			}
			pthread_mutex_unlock(&s->cmu);
		}
	}
	free(v);
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	pd_buf_free(&set);
}

static const struct pd_store_ops ch_ops = {
    .name = "clickhouse",
    .ingest = ch_ingest,
    .find = ch_find,
    .find_services = ch_find_services,
    .get = ch_get,
    .merge = ch_merge,
    .merge_of = ch_merge_of,
    .merge_range = ch_merge_range,
    .rollup = ch_rollup,
    .remove = ch_remove,
    .services = ch_services,
    .retain = ch_retain,
    .stats = ch_stats,
    .stats_quick = ch_stats_quick,
    .close = ch_close,
    .health = ch_health,
    .warm = ch_warm,
    /* each read is a few round trips to ClickHouse, which has cores of its own */
    .read_ahead = 4,
};

int pd_store_open_clickhouse(const char *url, const struct pd_store_ch_opts *o, const struct pd_pprof_limits *lim,
                             struct pd_store **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_ch_url u;
	int rc = pd_ch_url_parse(url, &u, err);
	if (rc)
		return rc;
	if (o && o->password) {
		free(u.password);
		if (!(u.password = strdup(o->password))) {
			pd_ch_url_free(&u);
			return nomem(err);
		}
	}
	struct chs *s = calloc(1, sizeof *s);
	if (!s) {
		pd_ch_url_free(&u);
		return nomem(err);
	}
	/* INSERTs: through Distributed tables synchronously (acknowledged once
	 * every shard's replica has its rows), with insert_quorum replicas */
	char ins[512];
	snprintf(ins, sizeof ins, "%s%s", CH_QUERY_SETTINGS, u.cluster ? "&insert_distributed_sync=1" : "");
	if (u.insert_quorum)
		snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "&insert_quorum=%d&insert_quorum_timeout=%ld",
		         u.insert_quorum, (o && o->timeout_ms ? o->timeout_ms : 30000) * 2 / 3);
	s->gl = u.cluster ? "GLOBAL " : "";
	if (u.cluster && !(s->cluster = strdup(u.cluster))) {
		free(s);
		pd_ch_url_free(&u);
		return nomem(err);
	}
	if (asprintf(&s->on, "%s%s", u.cluster ? " ON CLUSTER " : "", u.cluster ? u.cluster : "") < 0)
		s->on = NULL;
	s->base.ops = &ch_ops;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->bmu, NULL);
	pthread_mutex_init(&s->cmu, NULL);
	cond_init_mono(&s->bcv);
	bg_init(&s->sbg, stats_main);
	bg_init(&s->hbg, health_main);
	s->kmask = (CH_KNOWN_MAX * 2) - 1;
	s->known = calloc(s->kmask + 1, sizeof *s->known);
	if (lim)
		s->lim = *lim;
	else
		pd_pprof_limits_default(&s->lim);
	struct pd_ch_opts co = {o ? o->cacert : NULL, o ? o->insecure : false, o ? o->timeout_ms : 0};
	s->ins_settings = strdup(ins);
	rc = s->known && s->ins_settings && s->on ? pd_ch_open(&u, &co, &s->ch, err) : nomem(err);
	pd_ch_url_free(&u);
	if (!rc)
		rc = create_schema(s, err);
	if (rc) {
		ch_close(&s->base);
		return rc;
	}
	*out = &s->base;
	return 0;
}

/* ---- for the fuzzer ------------------------------------------------------------- */

int pd_store_ch_fuzz(const uint8_t *data, size_t n)
{
	/* byte 0: which parser; then a symbols answer (every row's hash asked
	 * for, then taken, then each symbol read as mat.h reads it), or a
	 * profile row (id, header, block, refs) */
	if (n < 1)
		return 0;
	struct pd_err err = {0};
	struct chs fs; /* only the cache of read symbols: absorb fills it */
	memset(&fs, 0, sizeof fs);
	pthread_mutex_init(&fs.cmu, NULL);
	struct cday d;
	if (cday_init(&d, &fs, 20000, &err)) {
		cday_free(&d);
		pthread_mutex_destroy(&fs.cmu);
		return 0;
	}
	const uint8_t *p = data + 1;
	size_t len = n - 1;
	if (data[0] & 1) {
		struct pd_rb_rd r = {p, p + len, false};
		size_t idn, hn, bn, rn;
		const uint8_t *idp = pd_rb_get_str(&r, &idn), *hp = pd_rb_get_str(&r, &hn),
		              *bp = pd_rb_get_str(&r, &bn), *rp = pd_rb_get_str(&r, &rn);
		char id[64];
		snprintf(id, sizeof id, "%.*s", (int)(idn < 40 ? idn : 40), (const char *)idp);
		struct crow row;
		if (!r.bad) {
			(void)load_row(&d, id, hp, hn, bp, bn, rp, rn, &row, &err);
			crow_free(&row);
		}
	} else {
		struct pd_rb_rd r = {p, p + len, false};
		while (r.p < r.end && !r.bad) { /* ask for every row's hash */
			int k = pd_rb_get_u8(&r);
			struct pd_h128 h;
			uint8_t hb[16];
			pd_rb_get_fixed(&r, hb, 16);
			memcpy(&h.lo, hb, 8);
			memcpy(&h.hi, hb + 8, 8);
			size_t dl;
			(void)pd_rb_get_str(&r, &dl);
			int64_t seq;
			if (r.bad || k >= PD_SYM_NKINDS || cday_seq(&d, k, h, &seq))
				break;
		}
		struct pd_buf tmp = PD_BUF_INIT(0);
		size_t got = 0;
		if (!absorb(&d, p, len, &got, "fuzz"))
			for (int k = 0; k < PD_SYM_NKINDS; k++)
				for (size_t i = 0; i < d.n[k]; i++)
					if (d.v[k][i].have)
						(void)src_get(&d, k, (int64_t)i + 1, &tmp, &err);
		pd_buf_free(&tmp);
		/* and once more from the cache: what absorb kept converts the same */
		struct cday d2;
		if (!cday_init(&d2, &fs, 20000, &err)) {
			for (int k = 0; k < PD_SYM_NKINDS; k++)
				for (size_t i = 0; i < d.n[k]; i++) {
					int64_t seq;
					if (d.v[k][i].have && cday_seq(&d2, k, d.v[k][i].h, &seq))
						break;
				}
			(void)from_cache(&d2, "fuzz");
		}
		cday_free(&d2);
	}
	cday_free(&d);
	pd_hidx_free(&fs.cix);
	free(fs.ce);
	pd_buf_free(&fs.cbytes);
	pthread_mutex_destroy(&fs.cmu);
	return 0;
}
