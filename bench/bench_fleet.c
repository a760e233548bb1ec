/*
 * bench_fleet.c — fleet analytics on a store, in process (bench/fleet.sh).
 *
 *   bench_fleet -d DATADIR -from NS -to NS [-r ROUNDS] [-build] [-fn NAME]
 *
 * Opens the store (the server must be stopped: one process per data dir)
 * and times, alternating, ROUNDS times each (medians):
 *   top_raw      fleet top of cpu{} over [from, to] as /api/1/top computes it
 *                without rollups: select every profile (pd_query_select),
 *                merge each service's in the store, pd_fleet_top;
 *   top_rollup   the same with pd_store_merge_range per service (rollups for
 *                the whole hours, profiles for the rest);
 *   top_fn       the fleet's per-function flat and cum from
 *                pd_store_fn_totals per service (the rollups' function
 *                tables; no profile materialised), checked against top_raw;
 *   series_*     with -fn: the function's flat value per hour over
 *                [from, to] summed over the fleet: raw = per hour and
 *                service a merge of the hour's profiles and pd_top_compute;
 *                rollup = per hour and service pd_store_fn_totals.
 * -build first builds the rollups of every hour ended by `to` and reports
 * the time. Checks that both tops (every function's flat and cum, every
 * service's total) and both series are identical. Output: "name value"
 * lines.
 */
#include "../lib/query/query.h"
#include "../lib/store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOUR (3600LL * 1000000000LL)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const struct pd_err *err)
{
	fprintf(stderr, "bench_fleet: %s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

static int meta_by_service(const void *a, const void *b)
{
	const struct pd_profile_meta *x = a, *y = b;
	int c = strcmp(x->service, y->service);
	if (c)
		return c;
	if (x->created_ns != y->created_ns)
		return x->created_ns < y->created_ns ? -1 : 1;
	return strcmp(x->id, y->id);
}

struct result {
	struct pd_fleet_top ft;
	struct pd_profile **ps;
	char **names;
	size_t n, profiles, rollup_hours;
};

static void result_free(struct result *r)
{
	pd_fleet_top_free(&r->ft);
	for (size_t i = 0; i < r->n; i++) {
		pd_profile_free(r->ps[i]);
		free(r->names[i]);
	}
	free(r->ps);
	free(r->names);
	memset(r, 0, sizeof *r);
}

static void top_finish(struct result *r)
{
	struct pd_fleet_input *in = calloc(r->n + 1, sizeof *in);
	struct pd_err err;
	for (size_t i = 0; i < r->n; i++)
		in[i] = (struct pd_fleet_input){r->names[i], r->ps[i], pd_profile_default_index(r->ps[i])};
	if (pd_fleet_top(in, r->n, false, &r->ft, &err))
		die("fleet top", &err);
	free(in);
}

static void top_raw(struct pd_store *st, const struct pd_selector *sel, int64_t from, int64_t to, struct result *r)
{
	struct pd_profile_meta *v;
	size_t nv;
	struct pd_err err;
	if (pd_query_select(st, sel, from, to, 0, &v, &nv, &err))
		die("select", &err);
	qsort(v, nv, sizeof *v, meta_by_service);
	r->ps = calloc(nv + 1, sizeof *r->ps);
	r->names = calloc(nv + 1, sizeof *r->names);
	const char **ids = calloc(nv + 1, sizeof *ids);
	for (size_t i = 0; i < nv;) {
		size_t j = i;
		while (j < nv && !strcmp(v[j].service, v[i].service))
			ids[j - i] = v[j].id, j++;
		if (pd_store_merge(st, ids, j - i, &r->ps[r->n], &err))
			die("merge", &err);
		r->names[r->n++] = strdup(v[i].service);
		i = j;
	}
	r->profiles = nv;
	free(ids);
	pd_query_metas_free(v, nv);
	top_finish(r);
}

static void top_rollup(struct pd_store *st, int64_t from, int64_t to, struct result *r)
{
	char **svcs;
	size_t ns;
	struct pd_err err;
	if (pd_store_services(st, &svcs, &ns, &err))
		die("services", &err);
	r->ps = calloc(ns + 1, sizeof *r->ps);
	r->names = calloc(ns + 1, sizeof *r->names);
	for (size_t i = 0; i < ns; i++) {
		struct pd_merge_range q = {svcs[i], "cpu", from, to, 0, false};
		struct pd_merge_info info;
		struct pd_profile *p;
		if (pd_store_merge_range(st, &q, &p, &info, &err))
			die("merge_range", &err);
		if (p) {
			r->ps[r->n] = p;
			r->names[r->n++] = svcs[i];
			r->profiles += info.profiles;
			r->rollup_hours += info.rollup_hours;
		} else {
			free(svcs[i]);
		}
	}
	free(svcs);
	top_finish(r);
}

static void same_top(const struct result *a, const struct result *b)
{
	const struct pd_fleet_top *x = &a->ft, *y = &b->ft;
	if (a->profiles != b->profiles || x->nfns != y->nfns || x->total != y->total || a->n != b->n) {
		fprintf(stderr, "bench_fleet: tops differ: profiles %zu/%zu functions %zu/%zu total %lld/%lld\n", a->profiles,
			b->profiles, x->nfns, y->nfns, (long long)x->total, (long long)y->total);
		exit(1);
	}
	for (size_t i = 0; i < x->nfns; i++)
		if (pd_str_cmp(x->fns[i].name, y->fns[i].name) || x->fns[i].flat != y->fns[i].flat ||
		    x->fns[i].cum != y->fns[i].cum) {
			fprintf(stderr, "bench_fleet: tops differ at row %zu (%.*s)\n", i, (int)x->fns[i].name.len,
				x->fns[i].name.ptr);
			exit(1);
		}
	for (size_t i = 0; i < a->n; i++)
		if (x->totals[i] != y->totals[i]) {
			fprintf(stderr, "bench_fleet: totals of %s differ\n", a->names[i]);
			exit(1);
		}
}

/* The fleet's per-function totals (default sample index) from the rollups'
 * function tables; checked against a top computed from profiles. */
static double top_fn(struct pd_store *st, int64_t from, int64_t to, const struct result *want)
{
	double t0 = now();
	char **svcs;
	size_t ns;
	struct pd_err err;
	struct pd_fnt_acc all;
	if (pd_store_services(st, &svcs, &ns, &err) || pd_fnt_init(&all, &err))
		die("services", &err);
	for (size_t i = 0; i < ns; i++) {
		struct pd_merge_range q = {svcs[i], "cpu", from, to, 0, false};
		struct pd_merge_info info;
		struct pd_fn_totals t;
		if (pd_store_fn_totals(st, &q, &t, &info, &err))
			die("fn_totals", &err);
		if (t.nv && pd_fnt_types(&all, t.nv, t.types, t.units, t.dflt, svcs[i], &err))
			die("types", &err);
		for (size_t k = 0; k < t.n; k++)
			if (pd_fnt_add(&all, t.names[k], t.flat + k * t.nv, t.cum + k * t.nv, &err))
				die("add", &err);
		if (t.nv)
			pd_fnt_add_total(&all, t.total);
		pd_fn_totals_free(&t);
		free(svcs[i]);
	}
	free(svcs);
	struct pd_fn_totals t;
	pd_fnt_finish(&all, &t);
	pd_fnt_free(&all);
	double el = now() - t0;
	uint32_t si = pd_fn_totals_default_index(&t);
	const struct pd_fleet_top *x = &want->ft;
	bool same = t.n == x->nfns && t.total[si] == x->total;
	for (size_t i = 0; same && i < x->nfns; i++) {
		size_t k = 0;
		while (k < t.n && pd_str_cmp(t.names[k], x->fns[i].name))
			k++;
		same = k < t.n && t.flat[k * t.nv + si] == x->fns[i].flat && t.cum[k * t.nv + si] == x->fns[i].cum;
	}
	if (!same) {
		fprintf(stderr, "bench_fleet: function totals differ from the top (%zu/%zu functions)\n", t.n, x->nfns);
		exit(1);
	}
	pd_fn_totals_free(&t);
	return el;
}

/* The flat value of function fn in p (default sample index); 0 if absent. */
static int64_t fn_flat(const struct pd_profile *p, const char *fn)
{
	struct pd_top t;
	struct pd_err err;
	if (pd_top_compute(p, pd_profile_default_index(p), false, &t, &err))
		die("top", &err);
	int64_t v = 0;
	for (size_t i = 0; i < t.n; i++)
		if (pd_str_eq(t.rows[i].name, fn))
			v = t.rows[i].flat;
	pd_top_free(&t);
	return v;
}

struct ids {
	char (*id)[PD_STORE_ID_LEN + 1];
	size_t n, cap;
};

static int add_id(void *ctx, const struct pd_profile_meta *m)
{
	struct ids *v = ctx;
	if (pd_grow((void **)&v->id, &v->cap, v->n + 1, sizeof *v->id))
		return PD_ENOMEM;
	memcpy(v->id[v->n++], m->id, sizeof *v->id);
	return 0;
}

/* Series of fn per hour over the fleet; out[h] = value of hour h. */
static void series(struct pd_store *st, bool rollups, int64_t from, int64_t to, const char *fn, int64_t *out)
{
	char **svcs;
	size_t ns;
	struct pd_err err;
	if (pd_store_services(st, &svcs, &ns, &err))
		die("services", &err);
	size_t nh = (size_t)((to - from) / HOUR);
	for (size_t h = 0; h < nh; h++) {
		int64_t a = from + (int64_t)h * HOUR, b = a + HOUR - 1;
		out[h] = 0;
		for (size_t i = 0; i < ns; i++) {
			struct pd_profile *p = NULL;
			if (rollups) {
				struct pd_merge_range q = {svcs[i], "cpu", a, b, 0, false};
				struct pd_merge_info info;
				struct pd_fn_totals t;
				if (pd_store_fn_totals(st, &q, &t, &info, &err))
					die("fn_totals", &err);
				uint32_t si = pd_fn_totals_default_index(&t);
				for (size_t k = 0; k < t.n; k++)
					if (pd_str_eq(t.names[k], fn))
						out[h] += t.flat[k * t.nv + si];
				pd_fn_totals_free(&t);
				continue;
			} else {
				struct ids v = {0};
				struct pd_store_query q = {svcs[i], "cpu", NULL, 0, a, b, 0};
				if (pd_store_find(st, &q, add_id, &v, &err))
					die("find", &err);
				const char **ids = calloc(v.n + 1, sizeof *ids);
				for (size_t k = 0; k < v.n; k++)
					ids[k] = v.id[k];
				if (v.n && pd_store_merge(st, ids, v.n, &p, &err))
					die("merge", &err);
				free(ids);
				free(v.id);
			}
			if (p)
				out[h] += fn_flat(p, fn);
			pd_profile_free(p);
		}
	}
	for (size_t i = 0; i < ns; i++)
		free(svcs[i]);
	free(svcs);
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *fn = NULL;
	int64_t from = 0, to = 0;
	int rounds = 3;
	bool build = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-d") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "-from") && i + 1 < argc)
			from = strtoll(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-to") && i + 1 < argc)
			to = strtoll(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-fn") && i + 1 < argc)
			fn = argv[++i];
		else if (!strcmp(argv[i], "-build"))
			build = true;
		else {
			fprintf(stderr, "usage: bench_fleet -d DATADIR -from NS -to NS [-r ROUNDS] [-build] [-fn NAME]\n");
			return 2;
		}
	}
	if (!dir || to <= from || rounds < 1) {
		fprintf(stderr, "usage: bench_fleet -d DATADIR -from NS -to NS [-r ROUNDS] [-build] [-fn NAME]\n");
		return 2;
	}
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(dir, NULL, &st, &err))
		die("open", &err);
	if (build) {
		size_t built;
		double t0 = now();
		if (pd_store_rollup(st, to + 1, 0, &built, &err))
			die("rollup", &err);
		printf("rollup_build_s %.3f\nrollups_built %zu\n", now() - t0, built);
	}
	struct pd_selector sel;
	if (pd_selector_parse("cpu{}", &sel, &err))
		die("selector", &err);
	double *traw = calloc((size_t)rounds, sizeof *traw), *troll = calloc((size_t)rounds, sizeof *troll);
	double *sraw = calloc((size_t)rounds, sizeof *sraw), *sroll = calloc((size_t)rounds, sizeof *sroll);
	double *tfn = calloc((size_t)rounds, sizeof *tfn);
	size_t nh = (size_t)((to - from) / HOUR);
	int64_t *s1 = calloc(nh + 1, sizeof *s1), *s2 = calloc(nh + 1, sizeof *s2);
	for (int r = 0; r < rounds; r++) {
		struct result a = {0}, b = {0};
		double t0 = now();
		top_raw(st, &sel, from, to, &a);
		double t1 = now();
		top_rollup(st, from, to, &b);
		double t2 = now();
		traw[r] = t1 - t0;
		troll[r] = t2 - t1;
		same_top(&a, &b);
		tfn[r] = top_fn(st, from, to, &a);
		if (r == 0)
			printf("profiles %zu\nservices %zu\nfunctions %zu\nrollup_hours %zu\n", a.profiles, a.n, a.ft.nfns,
			       b.rollup_hours);
		result_free(&a);
		result_free(&b);
		if (fn) {
			t0 = now();
			series(st, false, from, to, fn, s1);
			t1 = now();
			series(st, true, from, to, fn, s2);
			t2 = now();
			sraw[r] = t1 - t0;
			sroll[r] = t2 - t1;
			if (memcmp(s1, s2, nh * sizeof *s1)) {
				fprintf(stderr, "bench_fleet: series differ\n");
				return 1;
			}
		}
	}
	printf("top_raw_s %.4f\ntop_rollup_s %.4f\ntop_fn_s %.4f\n", median(traw, rounds), median(troll, rounds),
	       median(tfn, rounds));
	if (fn) {
		int64_t sum = 0;
		for (size_t h = 0; h < nh; h++)
			sum += s1[h];
		printf("series_points %zu\nseries_sum %lld\nseries_raw_s %.4f\nseries_rollup_s %.4f\n", nh, (long long)sum,
		       median(sraw, rounds), median(sroll, rounds));
	}
	free(traw), free(troll), free(tfn), free(sraw), free(sroll), free(s1), free(s2);
	pd_selector_free(&sel);
	pd_store_close(st);
	return 0;
}
