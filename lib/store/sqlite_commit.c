/*
 * sqlite_commit.c — the SQLite backend's group commit (see sqlite.c): the
 * queue of jobs (ingests, removals, rollups), the committer that writes a
 * batch in one transaction per partition, and what a failed commit undoes.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <stdio.h>

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
		return sq_err(j->err, pt->wdb, "rollup generation");
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
		return sq_err(j->err, pt->wdb, "insert rollup");
	r->written = true;
	return 0;
}

/* The seq of the label set of in's labels in pt (label_sets), added
 * with its set_labels rows if new; 0 if in has none. */
static int job_lset(struct part *pt, struct job *j, int64_t *seq)
{
	*seq = 0;
	if (!j->in->nlabels)
		return 0;
	struct pd_buf c = PD_BUF_INIT(0);
	int rc = pd_lset_enc(j->in->labels, j->in->nlabels, &c, j->err);
	if (rc)
		return rc;
	sqlite3_stmt *st = pt->lset_ins;
	sqlite3_bind_blob(st, 1, c.ptr, (int)c.len, SQLITE_STATIC);
	if (wstep(st)) {
		rc = sq_err(j->err, pt->wdb, "insert label set");
	} else if (sqlite3_changes(pt->wdb) == 1) { /* new: its labels become matchable */
		*seq = sqlite3_last_insert_rowid(pt->wdb);
		for (size_t i = 0; i < j->in->nlabels && !rc; i++) {
			st = pt->lset_kv;
			sqlite3_bind_text(st, 1, j->in->labels[i].key, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, j->in->labels[i].value, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 3, *seq);
			if (wstep(st))
				rc = sq_err(j->err, pt->wdb, "insert label");
		}
	} else {
		st = pt->lset_find;
		sqlite3_bind_blob(st, 1, c.ptr, (int)c.len, SQLITE_STATIC);
		int r = sqlite3_step(st);
		*seq = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		sqlite3_reset(st);
		if (r != SQLITE_ROW)
			rc = r == SQLITE_DONE ? pd_errf(j->err, PD_EIO, "store: a label set was not found after its insert")
					      : sq_err(j->err, pt->wdb, "find label set");
	}
	sqlite3_clear_bindings(pt->lset_ins);
	sqlite3_clear_bindings(pt->lset_find);
	pd_buf_free(&c);
	return rc;
}

/* One job's rows, inside the batch's transaction. */
static int job_apply(struct part *pt, struct job *j)
{
	sqlite3_stmt *st;
	if (j->ru)
		return rollup_apply(pt, j);
	if (!j->in) {
		/* its block may be the base of others (codec.h: chains): kept */
		sqlite3_bind_int64(pt->keep_base, 1, j->pk);
		sqlite3_bind_int64(pt->del_prof, 1, j->pk);
		if (pt->del_labels) /* a file before schema 6 */
			sqlite3_bind_int64(pt->del_labels, 1, j->pk);
		if (wstep(pt->keep_base) || (pt->del_labels && wstep(pt->del_labels)) || wstep(pt->del_prof))
			return sq_err(j->err, pt->wdb, "delete");
		return 0;
	}
	int64_t lset;
	int rc = job_lset(pt, j, &lset);
	if (rc)
		return rc;
	st = pt->ins_prof;
	if (pt->xid_int) /* the id as the file keeps it (codec.h: sq_xid_key) */
		sqlite3_bind_int64(st, 1, sq_xid_key(j->xtail));
	else
		sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, j->in->service, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, j->typ, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, j->created);
	sqlite3_bind_blob(st, 5, j->hdr.ptr ? (const void *)j->hdr.ptr : "", (int)j->hdr.len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 6, j->blk.ptr ? (const void *)j->blk.ptr : "", (int)j->blk.len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, j->nsamples);
	sqlite3_bind_int64(st, 8, lset);
	int r = wstep(st);
	sqlite3_clear_bindings(st);
	if (r)
		return sq_err(j->err, pt->wdb, "insert profile");
	j->pk = sqlite3_last_insert_rowid(pt->wdb);
	return 0;
}

/* The blocks of batch just committed to pt become the bases of their
 * series' next blocks (codec.h: chains). */
static void series_update(struct sq *s, struct part *pt, struct job *batch)
{
	pthread_mutex_lock(&s->mu);
	if (!s->series && !(s->series = calloc(SQ_SERIES_N, sizeof *s->series))) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	for (struct job *j = batch; j; j = j->next) {
		if (j->pt != pt || !j->in || j->rc || !j->pk || !j->raw.len)
			continue;
		struct sq_series *e = &s->series[j->series % SQ_SERIES_N];
		s->series_bytes -= e->raw.len;
		pd_buf_free(&e->raw);
		*e = (struct sq_series){0};
		if (j->raw.len > SQ_SERIES_RAW_MAX || s->series_bytes + j->raw.len > SQ_SERIES_BYTES)
			continue;
		*e = (struct sq_series){j->series, pt->inst, pt->day, j->pk, pd_block_raw_hash(j->raw.ptr, j->raw.len),
					j->raw, j->depth};
		s->series_bytes += j->raw.len;
		j->raw = (struct pd_buf)PD_BUF_INIT(0);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Packs (codec.h) aim at PACK_TARGET bytes: SQLite keeps a row of up to
 * ~4 KB on a 4 KB page, so a row of 2-4 KB has a page of its own, half
 * of it empty (packs of 256 stacks, ~2.2 KB, took 1.8 times their bytes:
 * dbstat), while a longer row takes ~0.5 KB of a shared page and full
 * overflow pages. A trial that comes out under PACK_MIN is not written:
 * its rows wait for more. */
#define PACK_TARGET 4600
#define PACK_MIN 4100
#define PACK_RAW_MAX ((size_t)1 << 20) /* a pack's contents at most (one symbol over it is alone) */
#define PACK_BPS0 (8 * 16)             /* bytes a packed symbol takes, x16, until one is measured */

/* Pack kind k of pt from pt->packed[k] + 1 on, up to upto (every seq to
 * it is committed, being committed, or lost with a failed commit), while
 * what is there is estimated to make a pack of PACK_TARGET bytes: the
 * rows become a row of packs. *np: the last seq packed then. A SQLite
 * error fails the transaction; out of memory only leaves the rows as
 * they are, for the next commit. */
static int pack_kind(struct sq *s, struct part *pt, int k, int64_t upto, int64_t *np)
{
	*np = pt->packed[k];
	uint32_t bps = pt->pack_bps[k] ? pt->pack_bps[k] : PACK_BPS0;
	if (!sq_packable(pt, k) || (upto - *np) * bps < PACK_TARGET * 16)
		return SQLITE_OK;
	ZSTD_CCtx *z = sq_cctx_get(s);
	struct pd_buf rows = PD_BUF_INIT(0), out = PD_BUF_INIT(0);
	size_t *off = malloc(PD_PACK_MAX * (sizeof *off + sizeof(uint32_t) + sizeof(const uint8_t *)));
	uint32_t *n1 = off ? (uint32_t *)(off + PD_PACK_MAX) : NULL;
	const uint8_t **c = off ? (const uint8_t **)(n1 + PD_PACK_MAX) : NULL;
	struct pd_err e;
	int r = SQLITE_OK;
	while (z && off && r == SQLITE_OK && upto > *np && (upto - *np) * bps >= PACK_TARGET * 16) {
		int64_t lo = *np + 1, hi = upto - lo >= PD_PACK_MAX ? lo + PD_PACK_MAX - 1 : upto;
		sqlite3_stmt *st = pt->pack_rows[k];
		memset(n1, 0, PD_PACK_MAX * sizeof *n1);
		rows.len = 0;
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, hi);
		bool oom = false;
		while (!oom && rows.len < PACK_RAW_MAX && (r = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t seq = sqlite3_column_int64(st, 0);
			size_t n = (size_t)sqlite3_column_bytes(st, 1);
			const void *b = sqlite3_column_blob(st, 1);
			if (seq < lo || seq > hi || n >= UINT32_MAX)
				continue;
			off[seq - lo] = rows.len;
			n1[seq - lo] = (uint32_t)n + 1;
			oom = pd_buf_append(&rows, n ? b : "", n) != 0;
			if (rows.len >= PACK_RAW_MAX)
				hi = seq; /* the rest goes into the next pack */
		}
		sqlite3_reset(st);
		if (r != SQLITE_DONE && r != SQLITE_ROW)
			break;
		r = SQLITE_OK;
		if (oom)
			break;
		uint32_t n = (uint32_t)(hi - lo + 1);
		for (uint32_t i = 0; i < n; i++)
			c[i] = n1[i] ? rows.ptr + off[i] : NULL;
		out.len = 0;
		if (pd_pack_enc(z, k, lo, n, c, n1, &out, &e))
			break;
		bps = (uint32_t)(out.len * 16 / n) + 1;
		if (out.len < PACK_MIN && hi == upto)
			break; /* the estimate was high: wait for more */
		st = pt->pack_ins;
		sqlite3_bind_int64(st, 1, k);
		sqlite3_bind_int64(st, 2, lo);
		sqlite3_bind_blob(st, 3, out.ptr, (int)out.len, SQLITE_STATIC);
		if ((r = wstep(st)))
			break;
		st = pt->pack_del[k];
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, hi);
		if ((r = wstep(st)))
			break;
		*np = hi;
	}
	pt->pack_bps[k] = bps;
	free(off);
	pd_buf_free(&rows);
	pd_buf_free(&out);
	if (z)
		sq_cctx_put(s, z);
	return r;
}

/* Commit the jobs of batch that are for partition pt: one transaction
 * with every pending symbol of pt, each job in a savepoint. */
static void commit_part(struct sq *s, struct part *pt, struct job *batch)
{
	pthread_mutex_lock(&s->mu);
	struct pendq q = pt->pend; /* ours now: symbols resolved from here on are for the next commit */
	memset(&pt->pend, 0, sizeof pt->pend);
	int64_t upto[NKINDS], np[NKINDS];
	for (int k = 0; k < NKINDS; k++)
		upto[k] = pt->next[k] - 1;
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
		sq_pendq_free(&q);
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
	what = "pack symbols";
	for (int k = 0; k < NKINDS; k++)
		if (pack_kind(s, pt, k, upto[k], &np[k]))
			goto fail;
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
	pthread_mutex_lock(&s->mu);
	for (int k = 0; k < NKINDS; k++)
		pt->packed[k] = np[k];
	sq_dayinfo_forget(s, pt->day); /* its counts and services are read again */
	pthread_mutex_unlock(&s->mu);
	sq_pendq_free(&q);
	series_update(s, pt, batch);
	bool full = false;
	for (struct job *j = batch; j; j = j->next)
		full = full || (j->pt == pt && j->rc == PD_ENOSPC);
	if (full) {
		pthread_mutex_lock(&s->mu);
		atomic_store(&s->nospace, true);
		snprintf(s->nospace_msg, sizeof s->nospace_msg, "store: the disk is full: a profile could not be written");
		pthread_mutex_unlock(&s->mu);
		sq_nospace_relief(s, pt);
	} else if (atomic_load(&s->nospace)) {
		atomic_store(&s->nospace, false); /* space again: writes work */
		sq_reserve_make(s);
	}
	return;
fail:;
	/* the transaction fails as a whole: every job of it, and the pending
	 * symbols are lost */
	struct pd_err e;
	char fw[128], f[64];
	sq_day_file(pt->day, f, sizeof f);
	snprintf(fw, sizeof fw, "%s: %s", f, what);
	sq_err(&e, pt->wdb, fw);
	if (!sqlite3_get_autocommit(pt->wdb))
		wstep(pt->rollback);
	for (struct job *j = batch; j; j = j->next)
		if (j->pt == pt && (!j->in || j->gen == gen)) {
			*j->err = e;
			j->rc = e.code;
		}
	pthread_mutex_lock(&s->mu);
	if (pt->gen == gen)
		sq_part_reset(pt);
	if (e.code == PD_ENOSPC) {
		atomic_store(&s->nospace, true);
		snprintf(s->nospace_msg, sizeof s->nospace_msg, "%s", e.msg);
	}
	pthread_mutex_unlock(&s->mu);
	if (e.code == PD_ENOSPC)
		sq_nospace_relief(s, pt);
	sq_pendq_free(&q);
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
void sq_submit(struct sq *s, struct job *j)
{
	/* each waiter sleeps on its own condition: the leader wakes the jobs
	 * it committed and the next leader, not every waiter (a broadcast
	 * woke the jobs queued during the commit only to sleep again) */
	pthread_cond_init(&j->cv, NULL);
	pthread_mutex_lock(&s->qmu);
	j->next = NULL;
	j->done = false;
	*s->qtail = j;
	s->qtail = &j->next;
	while (!j->done) {
		if (s->committing) {
			pthread_cond_wait(&j->cv, &s->qmu);
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
			next = b->next; /* b may be gone once done is seen (after the unlock) */
			b->done = true;
			if (b != j)
				pthread_cond_signal(&b->cv);
		}
		s->committing = false;
		if (s->qhead) /* queued meanwhile: its first job leads the next commit */
			pthread_cond_signal(&s->qhead->cv);
	}
	pthread_mutex_unlock(&s->qmu);
	pthread_cond_destroy(&j->cv);
}

