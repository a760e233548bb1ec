/*
 * sqlite_rollup.c — the SQLite backend's rollups (see sqlite.c): building
 * an hour's rollup, range merges from rollups and stored profiles, and
 * per-function totals read from the rollups' function tables.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <stdio.h>

/* ---- rollups ------------------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

static int enc_fns(struct sq *s, const struct pd_fn_totals *t, struct pd_buf *out, struct pd_err *err)
{
	ZSTD_CCtx *z = sq_cctx_get(s);
	if (!z)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = pd_enc_fns(z, t, out, err);
	sq_cctx_put(s, z);
	return rc;
}

static const int64_t *agg_vals(const void *ctx, size_t i) { return pd_agg_values(ctx, i); }

/* A sample block (codec.h) of an aggregate's rows. */
static int enc_agg(struct sq *s, const struct pd_pmerge *pm, struct pd_buf *out, struct pd_err *err)
{
	size_t n = pm->agg.n;
	int64_t *stk = malloc((n + 1) * sizeof *stk), *ls = malloc((n + 1) * sizeof *ls);
	ZSTD_CCtx *z = stk && ls ? sq_cctx_get(s) : NULL;
	int rc = z ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		stk[i] = pm->stk.keys[pm->agg.rows[i].stack];
		ls[i] = pm->ls.keys[pm->agg.rows[i].labels];
	}
	if (!rc)
		rc = pd_enc_rows(z, n, pm->agg.nvalues, stk, ls, agg_vals, &pm->agg, &(struct pd_blkopt){0}, out, err);
	if (z)
		sq_cctx_put(s, z);
	free(stk);
	free(ls);
	return rc;
}

/* Add the stored profiles of service/type created in [a, b] in pt (in
 * creation order) to pm; *n += their number; over max (0 = none): PD_ELIMIT.
 * Under the store mutex, in pt's read transaction. */
static int pm_add_range(struct sq *s, struct pd_pmerge *pm, const char *svc, const char *typ, int64_t a, int64_t b,
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
		if (!(rc = sq_dec_row(s, pm->pt, st, 1, 2, row, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER),
				   pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), &h, &rows, &nrows, &nv, err))) {
			rc = pd_pm_add(pm, id, &h, rows, nrows, nv, false, err);
			pd_shdr_free(&h);
			free(rows);
		}
		(*n)++;
	}
	if (!rc && r != SQLITE_DONE)
		rc = sq_qerr(pm->pt, pm->pt->db, "range", err);
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

/* An empty merge aggregate of partition pt. */
static void pm_begin(struct pd_pmerge *pm, struct part *pt)
{
	memset(pm, 0, sizeof *pm);
	pm->pt = pt;
	pm->src = sq_symsrc(pt);
}

/* Build the rollup of (svc, typ, hour) of partition `day`: read its
 * generation and profiles in one snapshot under the store mutex, encode
 * outside it, write through the committer. *built += 1 if written. */
static int rollup_hour(struct sq *s, int64_t day, const char *svc, const char *typ, int64_t hour, size_t *built,
		       struct pd_err *err)
{
	struct pd_pmerge pm;
	memset(&pm, 0, sizeof pm);
	struct rjob r = {svc, typ, hour, 0, 0, PD_BUF_INIT(0), PD_BUF_INIT(0), PD_BUF_INIT(0), false};
	struct pd_profile *p = NULL;
	struct pd_fn_totals ft = {0};
	size_t n = 0;
	sq_store_lock(s);
	struct part *pt;
	int rc = sq_part_q(s, day, &pt, NULL, err);
	if (rc || !pt) {
		sq_store_unlock(s);
		return rc; /* dropped by retention meanwhile, or damaged: no rollup */
	}
	pm_begin(&pm, pt);
	sq_part_read(pt);
	sqlite3_stmt *g = pt->gen_get;
	sqlite3_reset(g);
	sqlite3_bind_text(g, 1, svc, -1, SQLITE_STATIC);
	sqlite3_bind_text(g, 2, typ, -1, SQLITE_STATIC);
	sqlite3_bind_int64(g, 3, hour);
	int step = sqlite3_step(g);
	r.gen = step == SQLITE_ROW ? sqlite3_column_int64(g, 0) : 0;
	sqlite3_reset(g);
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = sq_err(err, pt->db, "rollup generation");
	if (!rc)
		rc = pm_add_range(s, &pm, svc, typ, hour * HOUR_NS, hour * HOUR_NS + HOUR_NS - 1, &n, 0, err);
	bool unusable = rc == PD_EINCOMPAT;
	if (unusable) { /* profiles that cannot be merged: a marker, so that passes do not retry it */
		rc = 0;
		pd_pmerge_free(&pm);
		memset(&pm, 0, sizeof pm);
	}
	if (!rc && pm.have) /* for the function table (symbols are read under the mutex) */
		rc = pd_pm_profile(&pm, &p, err);
	if (!rc)
		atomic_fetch_add(&pt->refs, 1); /* retention keeps pt until the commit */
	bool skip = rc && pt->bad; /* damaged: quarantined, the pass goes on */
	sq_store_unlock(s);
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
	sq_submit(s, &j);
	if (!(rc = j.rc) && r.written)
		(*built)++;
out:
	pd_pmerge_free(&pm);
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

int sq_rollup(struct pd_store *base, int64_t cutoff, size_t max_hours, size_t *built, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*built = 0;
	int64_t end = floor_div(cutoff, HOUR_NS); /* hours before this one are over */
	struct stale *v = NULL;
	size_t n = 0, cap = 0;
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	int rc = sq_days_in(s, INT64_MIN, cutoff, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc && (!max_hours || n < max_hours); i++) {
		/* a day that is over, found with nothing to build and not
		 * written since, is not opened again (a pass opened every day
		 * file under the store mutex: seconds with thousands of days) */
		bool over = (days[i] + 1) * DAY_NS <= end * HOUR_NS;
		if (over && sq_dayinfo_rolled(s, days[i]))
			continue;
		struct part *pt;
		if ((rc = sq_part_q(s, days[i], &pt, NULL, err)) || !pt)
			continue;
		sqlite3_stmt *st = pt->stale_get;
		sq_part_read(pt);
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, end);
		int r = SQLITE_DONE;
		size_t n0 = n;
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
			rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "stale rollups", err), NULL);
		else if (!rc && r == SQLITE_DONE && n == n0 && over)
			sq_dayinfo_set_rolled(s, days[i]);
		sqlite3_reset(st);
		sq_part_done(pt);
	}
	free(days);
	sq_store_unlock(s);
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
static int pm_add_span(struct sq *s, struct pd_pmerge *pm, struct pd_fnt_acc *acc, const struct pd_merge_range *q,
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
				if ((rc = sq_blob_col(pm->pt, st, 2, pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_FNS), id,
						   "function table", &fp, &fn, err)))
					break;
				if ((rc = pd_dec_fns(s->dctx, fp, fn, acc, id, err)) == PD_EIO)
					rc = sq_damaged(pm->pt, err, "%s: %s", id, err->msg);
				continue;
			}
			if ((rc = sq_dec_row(s, pm->pt, st, 2, 3, id, pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_HEADER),
					  pd_blob_rollup_seed(q->service, q->type, hour, PD_BLOB_BLOCK), &h, &rows, &nrows, &nv,
					  err)))
				break;
			rc = pd_pm_add(pm, id, &h, rows, nrows, nv, true, err);
			pd_shdr_free(&h);
			free(rows);
		}
		if (!rc && r != SQLITE_DONE)
			rc = sq_qerr(pm->pt, pm->pt->db, "rollups", err);
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
int sq_merge_range(struct pd_store *base, const struct pd_merge_range *q, struct pd_profile **out,
			  struct pd_merge_info *info, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	memset(info, 0, sizeof *info);
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	struct pd_pmerge held; /* the one partition aggregate not yet in mg */
	memset(&held, 0, sizeof held);
	struct pd_merger *mg = NULL;
	int rc = sq_days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = sq_part_q(s, days[i], &pt, &info->skipped, err)) || !pt)
			continue;
		struct pd_pmerge pm;
		pm_begin(&pm, pt);
		int64_t lo, hi, h0, h1;
		span_of(pt, q, &lo, &hi, &h0, &h1);
		struct pd_merge_info pi = {0};
		sq_part_read(pt);
		rc = pm_add_span(s, &pm, NULL, q, lo, hi, h0, h1, &pi, err);
		if (rc && (rc = sq_part_skip(pt, rc, &info->skipped)) == 0) { /* damaged: none of it */
			pd_pmerge_free(&pm);
			sq_part_done(pt);
			continue;
		}
		info->raw += pi.raw;
		info->profiles += pi.profiles;
		info->rollup_hours += pi.rollup_hours;
		if (rc || !pm.have) {
			pd_pmerge_free(&pm);
			sq_part_done(pt);
			continue;
		}
		if (held.have) { /* a second partition with rows: the held one goes to the merger */
			struct pd_profile *part = NULL;
			if (!mg && !(mg = pd_merger_new()))
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
			if (!rc && (rc = pd_pm_profile(&held, &part, err)))
				rc = sq_part_skip(held.pt, rc, &info->skipped); /* damaged symbols: skipped */
			else if (!rc)
				rc = pd_merger_add_partial(mg, part, err);
			pd_profile_free(part);
			sq_part_done(held.pt);
			pd_pmerge_free(&held);
		}
		held = pm;
	}
	info->profiles += info->raw;
	if (!rc && held.have) {
		struct pd_profile *part = NULL;
		if (!mg) {
			if (!(rc = pd_pm_profile(&held, out, err)))
				rc = pd_pm_final(out, err);
		} else if (!(rc = pd_pm_profile(&held, &part, err))) {
			rc = pd_merger_add_partial(mg, part, err);
		}
		pd_profile_free(part);
		if (rc && held.pt->bad) { /* damaged symbols: skip it */
			rc = sq_part_skip(held.pt, rc, &info->skipped);
			pd_profile_free(*out);
			*out = NULL;
		}
	}
	if (!rc && mg && !*out)
		rc = pd_merger_finish(mg, out, err);
	pd_merger_free(mg);
	pd_pmerge_free(&held);
	free(days);
	sq_store_unlock(s);
	struct pd_store_skipped sk = info->skipped;
	if (rc || !*out) {
		memset(info, 0, sizeof *info);
		if (!rc)
			info->skipped = sk;
		return rc;
	}
	return 0;
}

int sq_fn_totals(struct pd_store *base, const struct pd_merge_range *q, struct pd_fn_totals *out,
			struct pd_merge_info *info, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	struct pd_fnt_acc acc;
	memset(info, 0, sizeof *info);
	int rc = pd_fnt_init(&acc, err);
	if (rc)
		return rc;
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd = 0;
	rc = sq_days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = sq_part_q(s, days[i], &pt, &info->skipped, err)) || !pt)
			continue;
		/* the partition's totals on their own first, so that a damaged
		 * partition adds nothing */
		struct pd_fnt_acc pa;
		if ((rc = pd_fnt_init(&pa, err)))
			break;
		struct pd_pmerge pm;
		pm_begin(&pm, pt);
		int64_t lo, hi, h0, h1;
		span_of(pt, q, &lo, &hi, &h0, &h1);
		struct pd_merge_info pi = {0};
		sq_part_read(pt);
		rc = pm_add_span(s, &pm, &pa, q, lo, hi, h0, h1, &pi, err);
		/* the profiles outside rolled-up hours: merged, then their totals */
		struct pd_profile *p = NULL;
		if (!rc && pm.have && !(rc = pd_pm_profile(&pm, &p, err)))
			rc = pd_fnt_add_profile(&pa, p, "a profile", err);
		pd_profile_free(p);
		pd_pmerge_free(&pm);
		if (rc && (rc = sq_part_skip(pt, rc, &info->skipped)) == 0) {
			pd_fnt_free(&pa);
			sq_part_done(pt);
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
		sq_part_done(pt);
	}
	free(days);
	sq_store_unlock(s);
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

