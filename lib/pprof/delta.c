/*
 * delta.c — the difference of two snapshots of a cumulative Go profile.
 *
 * Go's allocs, heap (alloc_*), block and mutex profiles count since the
 * process started; storing each scrape and merging them later would count
 * the same events again and again. A scraper stores what happened between
 * two scrapes instead: cur - prev, computed exactly as
 * `go tool pprof -base prev cur` does (prev's values negated, then
 * profile.Merge of [cur, -prev]), so the stored delta reads like that.
 */
#include "pprof.h"

#include <stdlib.h>
#include <string.h>

/* A gauge, not a counter: Go's in-use heap types. */
static bool is_gauge(const struct pd_profile *p, uint32_t i)
{
	struct pd_str t = pd_profile_str(p, p->sample_types[i].type);
	return t.len >= 5 && !memcmp(t.ptr, "inuse", 5);
}

bool pd_pprof_counter_reset(const struct pd_profile *cur, const struct pd_profile *prev)
{
	if (cur->nsample_types != prev->nsample_types)
		return false; /* not the same counters: pd_pprof_delta says so */
	for (uint32_t t = 0; t < cur->nsample_types; t++)
		if (pd_str_cmp(pd_profile_str(cur, cur->sample_types[t].type),
			       pd_profile_str(prev, prev->sample_types[t].type)))
			return false;
	for (uint32_t t = 0; t < cur->nsample_types; t++) {
		if (is_gauge(cur, t))
			continue;
		int64_t a = 0, b = 0;
		for (size_t i = 0; i < cur->nsamples; i++)
			a = pd_wadd(a, cur->samples[i].values[t]);
		for (size_t i = 0; i < prev->nsamples; i++)
			b = pd_wadd(b, prev->samples[i].values[t]);
		struct pd_str ua = pd_profile_str(cur, cur->sample_types[t].unit),
			      ub = pd_profile_str(prev, prev->sample_types[t].unit);
		if (!pd_str_cmp(ua, ub)) {
			if (a < b)
				return true;
			continue;
		}
		/* units of one kind (ms and ns): the totals converted */
		int ka, kb;
		double fa = pd_unit_factor(ua, &ka), fb = pd_unit_factor(ub, &kb);
		if (fa > 0 && fb > 0 && ka == kb && (double)a * fa < (double)b * fb)
			return true;
	}
	return false;
}

static int delta(const struct pd_profile *cur, const struct pd_profile *prev, bool units, struct pd_profile **out,
		 struct pd_err *err)
{
	*out = NULL;
	struct pd_profile neg = *prev; /* shares prev's tables; only the values are new */
	size_t nv = prev->nsample_types;
	neg.samples = malloc((prev->nsamples + 1) * sizeof *neg.samples);
	int64_t *vals = malloc((prev->nsamples * nv + 1) * sizeof *vals);
	struct pd_merger *m = pd_merger_new();
	int rc = 0;
	if (!neg.samples || !vals || !m) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < prev->nsamples; i++) {
		neg.samples[i] = prev->samples[i];
		neg.samples[i].values = vals + i * nv;
		for (size_t j = 0; j < nv; j++)
			neg.samples[i].values[j] = pd_wneg(prev->samples[i].values[j]);
	}
	pd_merger_set_scale_units(m, units);
	if ((rc = pd_merger_add(m, cur, err)) || (rc = pd_merger_add(m, &neg, err)) ||
	    (rc = pd_merger_finish(m, out, err)))
		goto out;
	/* the window the delta covers: from the previous snapshot to this one */
	(*out)->time_nanos = cur->time_nanos;
	(*out)->duration_nanos =
		cur->time_nanos > prev->time_nanos && prev->time_nanos > 0 ? cur->time_nanos - prev->time_nanos : 0;
out:
	pd_merger_free(m);
	free(neg.samples);
	free(vals);
	return rc;
}

int pd_pprof_delta(const struct pd_profile *cur, const struct pd_profile *prev, struct pd_profile **out,
		   struct pd_err *err)
{
	return delta(cur, prev, false, out, err);
}

int pd_pprof_delta_units(const struct pd_profile *cur, const struct pd_profile *prev, struct pd_profile **out,
			 struct pd_err *err)
{
	return delta(cur, prev, true, out, err);
}
