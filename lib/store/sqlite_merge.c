/*
 * sqlite_merge.c — the SQLite backend's merge by ids (see sqlite.c): each
 * partition's rows aggregated on (stack, label set) seqs, materialised,
 * partitions combined by the pprof merger.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- merge ---------------------------------------------------------------------------- */

/* The merge of the partitions' aggregates pms[0..npm) (those with rows),
 * partitions in time order. */
static int pms_finish(struct pd_pmerge *pms, size_t npm, struct pd_profile **out, struct pd_err *err)
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
		int rc = pd_pm_profile(&pms[last], out, err);
		return rc ? rc : pd_pm_final(out, err);
	}
	struct pd_merger *mg = pd_merger_new();
	int rc = mg ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
	for (size_t k = 0; k < npm && !rc; k++) {
		if (!pms[k].have)
			continue;
		struct pd_profile *part;
		if ((rc = pd_pm_profile(&pms[k], &part, err)))
			break;
		rc = pd_merger_add_partial(mg, part, err);
		pd_profile_free(part);
	}
	if (!rc)
		rc = pd_merger_finish(mg, out, err);
	pd_merger_free(mg);
	return rc;
}

static int cmp_id(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int sq_merge(struct pd_store *base, const char *const *given, size_t n, struct pd_profile **out,
		    struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	if (n == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	/* in time order (an xid sorts by its time): a series' blocks are read
	 * after their bases (codec.h: chains), and the answer does not depend
	 * on the order the ids were given in */
	const char **ids = malloc(n * sizeof *ids);
	if (!ids)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	memcpy(ids, given, n * sizeof *ids);
	qsort(ids, n, sizeof *ids, cmp_id);
	sq_store_lock(s);
	struct pd_pmerge *pms = NULL;
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
						pd_pmerge_free(&pms[k]);
						memset(&pms[k], 0, sizeof pms[k]);
						pms[k].pt = pt; /* stays, empty: its later ids fail the same way */
						pms[k].src = sq_symsrc(pt);
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
			pms[npm].src = sq_symsrc(pt);
			pms[npm++].pt = pt;
		}
		rc = pd_pm_add(&pms[k], ids[i], &h, rows, nrows, nv, false, err);
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
		pd_pmerge_free(&pms[k]);
	free(pms);
	sq_store_unlock(s);
	free(ids);
	return rc;
}

