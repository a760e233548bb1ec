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
 * mutex and only the fourth in the database. The first two are the store
 * core's (pd_prepare, prepare.h), the same for every backend:
 *  1. decode the profile and check it against the ingest policy;
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
 *
 * The backend is split along these parts into sqlite_*.c, which share
 * sqlite_int.h (the list is there); this file opens and closes the store
 * and holds what is left: removal, services, retention, stats, health.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the rest --------------------------------------------------------------------------- */

/* A file as stat sees it: what a write changes (a commit grows the -wal, a
 * checkpoint writes the database). */
struct fid {
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* What stats and services read of a day file, kept with the identity of
 * its database and -wal then: a day file that did not change since is not
 * opened again. The committer forgets a day's entry once a commit to it
 * is visible (the -wal grows before: a read between would be kept). Each /metrics scrape and each services list (every API v1
 * query without an exact service) opened every day file under the store
 * mutex: 5-6 s with 3,000 days, ingests waiting as long. */
struct dayinfo {
	int64_t day;
	struct fid db, wal;
	bool counted, listed;
	bool rolled; /* no hour of the day left to roll up (a day that is over) */
	uint64_t profiles, rollups;
	char **svc;
	size_t nsvc;
};

static void fid_of(const char *path, struct fid *f)
{
	struct stat sb;
	memset(f, 0, sizeof *f);
	if ((f->exists = stat(path, &sb) == 0)) {
		f->dev = sb.st_dev;
		f->ino = sb.st_ino;
		f->size = sb.st_size;
		f->mtime = sb.st_mtim;
	}
}

static bool fid_eq(const struct fid *a, const struct fid *b)
{
	return a->exists == b->exists &&
	       (!a->exists || (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
			       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec));
}

static void dayinfo_clear(struct dayinfo *d)
{
	for (size_t i = 0; i < d->nsvc; i++)
		free(d->svc[i]);
	free(d->svc);
	d->svc = NULL;
	d->nsvc = 0;
	d->counted = d->listed = d->rolled = false;
}

/* Where day's entry is, or goes (the entries are in day order). */
static size_t dayinfo_at(const struct sq *s, int64_t day)
{
	size_t lo = 0, hi = s->ndinfo;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->dinfo[mid].day < day)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The entry of day (under mu), its facts kept if the day file is as it was
 * when they were read, else cleared; its file's size in *bytes (database
 * and -wal). NULL: out of memory. */
static struct dayinfo *dayinfo_get(struct sq *s, int64_t day, uint64_t *bytes)
{
	char path[4096], aux[4200];
	struct fid db, wal;
	sq_day_path(s, day, path, sizeof path);
	snprintf(aux, sizeof aux, "%s-wal", path);
	fid_of(path, &db);
	fid_of(aux, &wal);
	if (bytes)
		*bytes = (uint64_t)db.size + (uint64_t)wal.size;
	size_t lo = dayinfo_at(s, day);
	struct dayinfo *d = lo < s->ndinfo && s->dinfo[lo].day == day ? &s->dinfo[lo] : NULL;
	if (!d) {
		if (pd_grow((void **)&s->dinfo, &s->cdinfo, s->ndinfo + 1, sizeof *s->dinfo))
			return NULL;
		memmove(&s->dinfo[lo + 1], &s->dinfo[lo], (s->ndinfo - lo) * sizeof *s->dinfo);
		s->ndinfo++;
		d = &s->dinfo[lo];
		memset(d, 0, sizeof *d);
		d->day = day;
	} else if (!fid_eq(&d->db, &db) || !fid_eq(&d->wal, &wal)) {
		dayinfo_clear(d);
	}
	d->db = db;
	d->wal = wal;
	return d;
}

void sq_dayinfo_forget(struct sq *s, int64_t day)
{
	size_t i = dayinfo_at(s, day);
	if (i < s->ndinfo && s->dinfo[i].day == day)
		dayinfo_clear(&s->dinfo[i]);
}

bool sq_dayinfo_rolled(struct sq *s, int64_t day)
{
	struct dayinfo *d = dayinfo_get(s, day, NULL);
	return d && d->rolled;
}

void sq_dayinfo_set_rolled(struct sq *s, int64_t day)
{
	size_t i = dayinfo_at(s, day);
	if (i < s->ndinfo && s->dinfo[i].day == day)
		s->dinfo[i].rolled = true;
}

/* A day dropped (retention): its entry too. */
static void dayinfo_drop(struct sq *s, int64_t day)
{
	size_t i = dayinfo_at(s, day);
	if (i < s->ndinfo && s->dinfo[i].day == day) {
		dayinfo_clear(&s->dinfo[i]);
		memmove(&s->dinfo[i], &s->dinfo[i + 1], (s->ndinfo - i - 1) * sizeof *s->dinfo);
		s->ndinfo--;
	}
}

static int sq_remove(struct pd_store *base, const char *id, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	sq_store_lock(s);
	struct part *pt = NULL;
	int rc = sq_locate(s, id, &pt, err);
	struct job j = {.pt = pt, .err = err};
	if (!rc) {
		j.pk = sqlite3_column_int64(pt->get_prof, 0);
		snprintf(j.svc, sizeof j.svc, "%s", (const char *)sqlite3_column_text(pt->get_prof, 1));
		snprintf(j.typ, sizeof j.typ, "%s", (const char *)sqlite3_column_text(pt->get_prof, 2));
		j.created = sqlite3_column_int64(pt->get_prof, 3);
		sqlite3_reset(pt->get_prof);
		atomic_fetch_add(&pt->refs, 1);
	}
	sq_store_unlock(s);
	if (rc)
		return rc;
	/* through the committer, which owns the writer connection; the
	 * profile's symbols stay until its partition is dropped */
	sq_submit(s, &j);
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
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0, cap = 0;
	char **v = NULL;
	size_t nv = 0;
	int rc = sq_days_in(s, INT64_MIN, INT64_MAX, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct dayinfo *d = dayinfo_get(s, days[i], NULL);
		if (!d) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		struct quar *q = sq_quar_find(s, days[i]);
		if (!d->listed || (q && sq_quar_current(s, q))) {
			struct part *pt;
			if ((rc = sq_part_q(s, days[i], &pt, NULL, err)) || !pt)
				continue;
			sqlite3_stmt *st;
			sq_part_read(pt);
			if (sqlite3_prepare_v2(pt->db, "SELECT DISTINCT service FROM profiles", -1, &st, NULL) != SQLITE_OK) {
				rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "services", err), NULL);
				sq_part_done(pt);
				continue;
			}
			size_t dcap = 0;
			int r;
			while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
				const char *svc = (const char *)sqlite3_column_text(st, 0);
				if (pd_grow((void **)&d->svc, &dcap, d->nsvc + 1, sizeof *d->svc) ||
				    !(d->svc[d->nsvc] = strdup(svc)))
					rc = pd_errf(err, PD_ENOMEM, "out of memory");
				else
					d->nsvc++;
			}
			if (!rc && r != SQLITE_DONE)
				rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "services", err), NULL);
			else
				d->listed = !rc;
			sqlite3_finalize(st);
			sq_part_done(pt);
			if (!d->listed) { /* none of a damaged day */
				dayinfo_clear(d);
				continue;
			}
		}
		for (size_t k = 0; k < d->nsvc && !rc; k++) {
			bool seen = false;
			for (size_t j = 0; j < nv && !seen; j++)
				seen = !strcmp(v[j], d->svc[k]);
			if (seen)
				continue;
			if (pd_grow((void **)&v, &cap, nv + 1, sizeof *v) || !(v[nv] = strdup(d->svc[k])))
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			else
				nv++;
		}
	}
	free(days);
	sq_store_unlock(s);
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
 * open), never one with queued work. A file that cannot be removed is
 * reported (the first) and the others are still dropped. */
static int sq_retain(struct pd_store *base, int64_t cutoff, size_t *dropped, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*dropped = 0;
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = sq_days_in(s, INT64_MIN, cutoff - DAY_NS, &days, &nd, err);
	for (size_t i = 0; i < nd; i++) {
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
		sq_day_path(s, day, path, sizeof path);
		if (pt) {
			s->parts[at] = s->parts[--s->nparts];
			sq_part_close(pt);
		}
		if (unlink(path) && errno != ENOENT) {
			if (!rc)
				rc = pd_errf(err, PD_EIO, "store: %s: %s", path, strerror(errno));
			continue;
		}
		snprintf(aux, sizeof aux, "%s-wal", path);
		unlink(aux);
		snprintf(aux, sizeof aux, "%s-shm", path);
		unlink(aux);
		struct quar *q = sq_quar_find(s, day);
		if (q)
			sq_quar_drop(s, q);
		dayinfo_drop(s, day);
		(*dropped)++;
	}
	free(days);
	sq_store_unlock(s);
	return rc;
}

static int sq_stats(struct pd_store *base, struct pd_store_stats *st, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	memset(st, 0, sizeof *st);
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = sq_days_in(s, INT64_MIN, INT64_MAX, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		uint64_t bytes = 0;
		struct dayinfo *d = dayinfo_get(s, days[i], &bytes);
		if (!d) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		st->disk_bytes += bytes;
		st->partitions++;
		struct quar *qr = sq_quar_find(s, days[i]);
		if (d->counted && !(qr && sq_quar_current(s, qr))) {
			st->profiles += d->profiles;
			st->rollups += d->rollups;
			continue;
		}
		uint64_t np = 0, nr = 0;
		struct part *pt;
		if ((rc = sq_part_q(s, days[i], &pt, NULL, err)) || !pt)
			continue;
		sq_part_read(pt);
		sqlite3_stmt *q;
		if (sqlite3_prepare_v2(pt->db, "SELECT count(*) FROM profiles", -1, &q, NULL) != SQLITE_OK) {
			rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "stats", err), NULL);
			sq_part_done(pt);
			continue;
		}
		bool ok = sqlite3_step(q) == SQLITE_ROW;
		if (ok)
			np = (uint64_t)sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		if (sqlite3_prepare_v2(pt->db,
				       "SELECT count(*) FROM rollups r LEFT JOIN hour_gen g ON g.service = r.service"
				       " AND g.type = r.type AND g.hour = r.hour WHERE r.gen = coalesce(g.gen, 0)"
				       " AND r.profiles >= 0",
				       -1, &q, NULL) != SQLITE_OK) {
			rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "stats", err), NULL);
			sq_part_done(pt);
			continue;
		}
		ok = sqlite3_step(q) == SQLITE_ROW && ok;
		if (ok)
			nr = (uint64_t)sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		sq_part_done(pt);
		st->profiles += np;
		st->rollups += nr;
		d->profiles = np;
		d->rollups = nr;
		d->counted = ok;
	}
	free(days);
	for (size_t i = 0; i < s->nquar;)
		if (sq_quar_current(s, &s->quar[i]))
			i++;
	st->quarantined = s->nquar;
	sq_store_unlock(s);
	pthread_mutex_lock(&s->mu);
	st->open_partitions = s->nparts;
	st->read_cache_bytes = s->rc_bytes;
	pthread_mutex_unlock(&s->mu);
	st->sym_reads = atomic_load(&s->sym_reads);
	st->sym_cached = atomic_load(&s->sym_cached);
	return rc;
}

static void sq_health(struct pd_store *base, struct pd_store_health *out)
{
	struct sq *s = (struct sq *)base;
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nquar;)
		if (sq_quar_current(s, &s->quar[i]))
			i++;
	out->nquarantined = s->nquar;
	for (size_t i = 0; i < s->nquar && i < PD_STORE_MAX_QUARANTINED; i++) {
		out->quarantined[i].day = s->quar[i].day;
		sq_day_file(s->quar[i].day, out->quarantined[i].file, sizeof out->quarantined[i].file);
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
		if (!sq_quar_current(s, q))
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
	sq_parts_trim(s, s->max_open);
	pthread_mutex_unlock(&s->mu);
}

void pd_store_sqlite_set_read_cache(struct pd_store *base, size_t bytes)
{
	struct sq *s = (struct sq *)base;
	pthread_mutex_lock(&s->mu);
	s->rc_max = bytes;
	sq_rcache_clear_all(s);
	pthread_mutex_unlock(&s->mu);
}

static void sq_close(struct pd_store *base)
{
	struct sq *s = (struct sq *)base;
	for (size_t i = 0; i < s->nparts; i++)
		sq_part_close(s->parts[i]);
	free(s->parts);
	for (size_t i = 0; s->series && i < SQ_SERIES_N; i++)
		pd_buf_free(&s->series[i].raw);
	free(s->series);
	pd_rawcache_free(&s->rawcache);
	ZSTD_freeDCtx(s->dctx);
	for (int i = 0; i < s->nzfree; i++)
		ZSTD_freeCCtx(s->zfree[i]);
	close(s->lock_fd); /* releases the flock */
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->qmu);
	pthread_mutex_destroy(&s->zmu);
	free(s->quar);
	for (size_t i = 0; i < s->ndinfo; i++)
		dayinfo_clear(&s->dinfo[i]);
	free(s->dinfo);
	free(s->reserve_path);
	free(s->dir);
	free(s);
}

/* pd_store_warm: the newest `days` day files opened (they stay in the
 * LRU of open partitions), newest first, and their symbols read into the
 * partitions' read caches while their bound allows (the first merge
 * after a start then reads no symbol from SQLite, as the next ones do); a
 * damaged one is quarantined as a query would. */
static void sq_warm(struct pd_store *base, size_t days)
{
	struct sq *s = (struct sq *)base;
	sq_store_lock(s);
	int64_t *v = NULL;
	size_t nd = 0;
	struct pd_err err;
	bool room = true;
	if (sq_days_in(s, INT64_MIN, INT64_MAX, &v, &nd, &err) == 0)
		for (size_t i = nd; i > (nd > days ? nd - days : 0); i--) {
			struct part *pt;
			if (sq_part_q(s, v[i - 1], &pt, NULL, &err) == 0 && pt) {
				if (room)
					room = sq_rcache_warm(pt);
				/* the newest day is the one uploads go to: its symbol
				 * maps read now, not under the first upload */
				if (i == nd)
					for (int k = 0; k < NKINDS; k++)
						if (!pt->fresh[k] && !pt->hidx[k] && !pt->pm[k].s &&
						    sq_pmap_read(pt, k, &err))
							break;
				sq_part_done(pt);
			}
		}
	free(v);
	sq_store_unlock(s);
}

static const struct pd_store_ops sqlite_ops = {
	.name = "sqlite",
	.ingest = sq_ingest,
	.find = sq_find,
	.get = sq_get,
	.merge = sq_merge,
	.remove = sq_remove,
	.services = sq_services,
	.retain = sq_retain,
	.stats = sq_stats,
	.close = sq_close,
	.merge_range = sq_merge_range,
	.rollup = sq_rollup,
	.fn_totals = sq_fn_totals,
	.health = sq_health,
	.skipped_in = sq_skipped_in,
	.warm = sq_warm,
	/* one file read on this process's threads: reads one after another */
	.read_ahead = 1,
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
	s->qtail = &s->qhead;
	s->max_open = 64;
	s->rc_max = SQ_RCACHE_BYTES;
	atomic_init(&s->nospace, false);
	atomic_init(&s->sym_reads, 0);
	atomic_init(&s->sym_cached, 0);
	atomic_init(&s->reserve_held, false);
	char rp[4096];
	snprintf(rp, sizeof rp, "%s/.reserve", dir);
	if ((s->reserve_path = strdup(rp))) {
		unlink(rp); /* a previous run's: sized again for this file system */
		sq_reserve_make(s);
	}
	*out = &s->base;
	return 0;
}
