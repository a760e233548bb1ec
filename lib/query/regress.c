/*
 * regress.c — rollouts from the metadata, rates and noise of a comparison
 * (regress.h).
 */
#include "regress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *pd_meta_label(const struct pd_profile_meta *m, const char *key)
{
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, key))
			return m->labels[i].value;
	return "";
}

static int cmp_version(const void *a, const void *b)
{
	const struct pd_version *x = a, *y = b;
	int c = strcmp(x->service, y->service);
	if (c)
		return c;
	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	return strcmp(x->value, y->value);
}

void pd_rollouts_free(struct pd_rollouts *r)
{
	for (size_t i = 0; i < r->nv; i++) {
		free(r->v[i].service);
		free(r->v[i].value);
	}
	free(r->v);
	free(r->r);
	memset(r, 0, sizeof *r);
}

struct vkey {
	const char *svc, *val;
	int64_t ns;
};

static int cmp_vkey(const void *a, const void *b)
{
	const struct vkey *x = a, *y = b;
	int c = strcmp(x->svc, y->svc);
	return c ? c : strcmp(x->val, y->val);
}

/* The versions by sorting the labelled profiles by (service, value): a scan
 * of the versions found so far for each profile was profiles x versions,
 * and a label with a new value per profile (an instance id) made that
 * quadratic. */
int pd_rollouts_find(const struct pd_profile_meta *m, size_t n, const char *label, struct pd_rollouts *out,
                     struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct vkey *k = malloc((n ? n : 1) * sizeof *k);
	if (!k)
		goto nomem;
	size_t nk = 0;
	for (size_t i = 0; i < n; i++) {
		const char *val = pd_meta_label(&m[i], label);
		if (*val)
			k[nk++] = (struct vkey){m[i].service, val, m[i].created_ns};
	}
	if (nk > 1)
		qsort(k, nk, sizeof *k, cmp_vkey);
	size_t nv = 0;
	for (size_t i = 0; i < nk; i++)
		nv += i == 0 || cmp_vkey(&k[i - 1], &k[i]) != 0;
	out->v = calloc(nv ? nv : 1, sizeof *out->v);
	if (!out->v)
		goto nomem;
	for (size_t i = 0; i < nk; i++) {
		if (i == 0 || cmp_vkey(&k[i - 1], &k[i]) != 0) {
			struct pd_version *nw = &out->v[out->nv++];
			*nw = (struct pd_version){strdup(k[i].svc), strdup(k[i].val), k[i].ns, k[i].ns, 0};
			if (!nw->service || !nw->value)
				goto nomem;
		}
		struct pd_version *v = &out->v[out->nv - 1];
		v->profiles++;
		if (k[i].ns < v->first_ns)
			v->first_ns = k[i].ns;
		if (k[i].ns > v->last_ns)
			v->last_ns = k[i].ns;
	}
	free(k);
	k = NULL;
	if (out->nv)
		qsort(out->v, out->nv, sizeof *out->v, cmp_version);
	out->r = calloc(out->nv ? out->nv : 1, sizeof *out->r);
	if (!out->r)
		goto nomem;
	for (size_t i = 1; i < out->nv; i++)
		if (!strcmp(out->v[i].service, out->v[i - 1].service))
			out->r[out->nr++] = (struct pd_rollout){i - 1, i, out->v[i].first_ns};
	return 0;
nomem:
	free(k);
	pd_rollouts_free(out);
	return pd_errf(err, PD_ENOMEM, "out of memory");
}

void pd_rate_compute(int64_t vb, int64_t vt, double eb, double et, int64_t nb, int64_t nt, double wb, double wt,
                     struct pd_rate *out)
{
	out->base = (double)vb / eb;
	out->target = (double)vt / et;
	out->change = out->target - out->base;
	out->relative = out->base != 0 ? out->change / fabs(out->base) : out->change != 0 ? INFINITY : 0;
	out->base_samples = nb;
	out->target_samples = nt;
	if (nb < 0 || nt < 0) {
		out->noise = -1;
		out->within_noise = false;
		return;
	}
	/* Poisson: a rate from n samples is known to rate / sqrt(n); with none,
	 * to one sample's worth */
	double sb = nb > 0 ? fabs(out->base) / sqrt((double)nb) : wb / eb;
	double st = nt > 0 ? fabs(out->target) / sqrt((double)nt) : wt / et;
	out->noise = 2 * sqrt(sb * sb + st * st);
	out->within_noise = fabs(out->change) <= out->noise;
}
