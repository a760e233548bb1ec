/*
 * scale.c — multiply a profile's values by a ratio, as pprof's
 * Profile.Scale / ScaleN do (used by `-normalize`, `-base`, and by profd's
 * normalisation: a gauge's snapshots merged, then divided by their count).
 *
 * The ratio is num/den, computed exactly in 128-bit arithmetic and rounded
 * half away from zero (Go's math.Round(v * ratio), without float64's loss
 * on large values); samples left with every value 0 are dropped, as
 * ScaleN drops them. Locations, functions and mappings only those samples
 * used stay in the tables (valid pprof; a merge or compact drops them).
 */
#include "pprof.h"

int64_t pd_scale_value(int64_t v, int64_t num, int64_t den)
{
	PD_ASSERT(den > 0);
	__int128 x = (__int128)v * num;
	__int128 q = x / den, r = x % den; /* truncated toward zero */
	if (r < 0)
		r = -r;
	if (2 * r >= den)
		q += x < 0 ? -1 : 1;
	if (q > INT64_MAX)
		return INT64_MAX;
	if (q < INT64_MIN)
		return INT64_MIN;
	return (int64_t)q;
}

void pd_profile_scale(struct pd_profile *p, int64_t num, int64_t den)
{
	if (num == den)
		return;
	size_t k = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		struct pd_sample *s = &p->samples[i];
		bool keep = false;
		for (uint32_t j = 0; j < p->nsample_types; j++) {
			s->values[j] = pd_scale_value(s->values[j], num, den);
			keep = keep || s->values[j] != 0;
		}
		if (keep)
			p->samples[k++] = *s;
	}
	p->nsamples = k;
}
