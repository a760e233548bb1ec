/*
 * sqlite_merge.c — the SQLite backend's merge by ids (see sqlite.c): each
 * partition's rows aggregated on (stack, label set) seqs, materialised,
 * partitions combined by the pprof merger.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- merge ---------------------------------------------------------------------------- */

void sq_pmerge_free(struct pmerge *pm)
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
int sq_pm_add(struct pmerge *pm, const char *id, struct pd_shdr *h, const int64_t *rows, size_t nrows,
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
int sq_pm_profile(struct pmerge *pm, struct pd_profile **out, struct pd_err *err)
{
	struct mat m;
	int rc = sq_mat_start(&m, pm->pt, &pm->h, pm->agg.n, err);
	for (size_t r = 0; r < pm->agg.n && !rc; r++)
		rc = sq_mat_sample(&m, pm->stk.keys[pm->agg.rows[r].stack], pm->ls.keys[pm->agg.rows[r].labels],
				pd_agg_values(&pm->agg, r), pm->agg.nvalues);
	if (!rc)
		rc = sq_mat_finish(&m, out);
	sq_mat_free(&m);
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
		return sq_pm_profile(&pms[last], out, err);
	}
	struct pd_merger *mg = pd_merger_new();
	int rc = mg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t k = 0; k < npm && !rc; k++) {
		if (!pms[k].have)
			continue;
		struct pd_profile *part;
		if ((rc = sq_pm_profile(&pms[k], &part, err)))
			break;
		rc = pd_merger_add_partial(mg, part, err);
		pd_profile_free(part);
	}
	if (!rc)
		rc = pd_merger_finish(mg, out, err);
	pd_merger_free(mg);
	return rc;
}

int sq_merge(struct pd_store *base, const char *const *ids, size_t n, struct pd_profile **out,
		    struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	if (n == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	sq_store_lock(s);
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
		if ((rc = sq_load_profile(s, ids[i], &pt, &h, &rows, &nrows, &nv, err))) {
			/* a damaged day is left out (the caller sees it in
			 * pd_store_skipped_in), unless nothing else is left */
			int64_t t = pd_xid_time(ids[i]);
			if ((pt && pt->bad) || (t >= 0 && sq_quar_find(s, floor_div(t, DAY_NS)))) {
				if (!skipped++)
					first = *err;
				for (size_t k = 0; k < npm; k++)
					if (pt && pms[k].pt == pt) {
						sq_pmerge_free(&pms[k]);
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
		rc = sq_pm_add(&pms[k], ids[i], &h, rows, nrows, nv, false, err);
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
		sq_pmerge_free(&pms[k]);
	free(pms);
	sq_store_unlock(s);
	return rc;
}

