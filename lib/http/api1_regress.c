/*
 * api1_regress.c — GET /api/1/rollouts (the versions of each service seen in
 * the data, and when each was rolled out) and GET /api/1/regressions (per
 * rollout, or per service between two given selections: every function
 * whose normalised cost changed, ranked, with a noise estimate from the
 * sample counts). lib/query/regress.h has the rules; docs/api.md "API v1:
 * rollouts and regressions" is the contract.
 */
#include "api1.h"
#include "../query/plan.h"
#include "../query/diff.h"
#include "../query/regress.h"
#include "../query/series.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define REG_DEFAULT_N 20
#define REG_MAX_N     10000
#define LABEL_MAX     128

static const char *label_param(const struct pd_api1_req *q, struct pd_err *err)
{
	const char *l = pd_api1_param(q, "label");
	if (!l)
		return "version";
	if (strlen(l) > LABEL_MAX || !strcmp(l, "service")) {
		pd_errf(err, PD_EINVAL, "bad \"label\" \"%.64s\": want a label name (not service) of at most %d bytes",
		        l, LABEL_MAX);
		return NULL;
	}
	return l;
}

/* Every selected profile's metadata: not capped by --max-merge-profiles
 * (nothing is merged yet; the comparisons are capped one by one). */
static int select_all(const struct pd_api1_req *q, struct pd_profile_meta **v, size_t *n, struct pd_err *err)
{
	return pd_query_select(q->cfg->st, &q->sel, q->from_ns, q->to_ns, 0, v, n, err);
}

static json_t *time_json(int64_t ns)
{
	char b[PD_API_TIME_BUFSZ];
	return json_string(pd_api_format_time(ns, b, sizeof b));
}

int pd_api1_h_rollouts(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	const char *label = label_param(q, err);
	if (!label)
		return PD_EINVAL;
	struct pd_profile_meta *v = NULL;
	size_t n = 0;
	struct pd_rollouts ro = {0};
	int rc = select_all(q, &v, &n, err);
	if (!rc)
		rc = pd_rollouts_find(v, n, label, &ro, err);
	pd_query_metas_free(v, n);
	if (rc)
		return rc;
	json_t *o = json_object(), *vs = json_array(), *rs = json_array();
	bool bad = !o || !vs || !rs;
	for (size_t i = 0; !bad && i < ro.nv; i++) {
		const struct pd_version *x = &ro.v[i];
		bad = json_array_append_new(vs, json_pack("{sssssososI}", "service", x->service, "value", x->value,
		                                          "first_seen", time_json(x->first_ns), "last_seen",
		                                          time_json(x->last_ns), "profiles", (json_int_t)x->profiles));
	}
	for (size_t i = 0; !bad && i < ro.nr; i++) {
		const struct pd_version *a = &ro.v[ro.r[i].from], *b = &ro.v[ro.r[i].to];
		bad = json_array_append_new(rs, json_pack("{sssssssosIsI}", "service", b->service, "from", a->value,
		                                          "to", b->value, "at", time_json(ro.r[i].at_ns),
		                                          "base_profiles", (json_int_t)a->profiles, "target_profiles",
		                                          (json_int_t)b->profiles));
	}
	bad = bad || json_object_set_new(o, "label", json_string(label)) ||
	      json_object_set_new(o, "from", time_json(q->from_ns)) ||
	      json_object_set_new(o, "to", time_json(q->to_ns)) || json_object_set_new(o, "versions", vs) ||
	      json_object_set_new(o, "rollouts", rs);
	pd_rollouts_free(&ro);
	if (bad) {
		json_decref(o);
		o = NULL;
	}
	out->ranged = true;
	out->from_ns = q->from_ns;
	out->to_ns = q->to_ns;
	return pd_api1_reply_json(out, o, err);
}

/* ---- regressions ------------------------------------------------------------------- */

/* One comparison: a service's base and target profiles. */
struct cmp {
	const char *service;
	const char *base_label, *target_label; /* rollout mode: the two versions; else NULL */
	int64_t at_ns;                         /* rollout mode: when the target was first seen */
	struct pd_profile_meta *b, *t;         /* the sides: runs of a struct groups, not owned */
	size_t nb, nt;
};

/*
 * A selection's metas grouped for the comparisons: shallow copies sorted by
 * service (and then by a label's value, when grouped by one), each group in
 * the selection's order (ascending creation time). A side of a comparison
 * is one group, a run found by binary search. It was a copy of the metas
 * picked by a scan of the whole selection for every side: memory and time
 * in comparisons x profiles (an hour of 20 services deployed every few
 * minutes: 240 rollouts over 11,000 profiles, hundreds of MB a request).
 */
struct groups {
	struct pd_profile_meta *m;
	const char **val; /* each one's value of the label (grouped by one), else NULL */
	size_t n;
};

struct gkey {
	const char *svc, *val;
	size_t pos;
};

static int gkey_cmp(const void *a, const void *b)
{
	const struct gkey *x = a, *y = b;
	int c = strcmp(x->svc, y->svc);
	if (!c && x->val)
		c = strcmp(x->val, y->val);
	return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static void groups_free(struct groups *g)
{
	free(g->m);
	free(g->val);
	memset(g, 0, sizeof *g);
}

static int groups_make(const struct pd_profile_meta *v, size_t n, const char *label, struct groups *g)
{
	size_t c = n ? n : 1;
	struct gkey *k = malloc(c * sizeof *k);
	*g = (struct groups){malloc(c * sizeof *g->m), label ? malloc(c * sizeof *g->val) : NULL, n};
	if (!k || !g->m || (label && !g->val)) {
		free(k);
		groups_free(g);
		return PD_ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		k[i] = (struct gkey){v[i].service, label ? pd_meta_label(&v[i], label) : NULL, i};
	if (n > 1)
		qsort(k, n, sizeof *k, gkey_cmp);
	for (size_t i = 0; i < n; i++) {
		g->m[i] = v[k[i].pos];
		if (label)
			g->val[i] = k[i].val;
	}
	free(k);
	return 0;
}

static int group_cmp(const struct groups *g, size_t i, const char *svc, const char *val)
{
	int c = strcmp(g->m[i].service, svc);
	return !c && val ? strcmp(g->val[i], val) : c;
}

/* The group of service svc (and of value val, in groups by a label): [*lo, *hi). */
static void group_run(const struct groups *g, const char *svc, const char *val, size_t *lo, size_t *hi)
{
	size_t a = 0, b = g->n;
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (group_cmp(g, mid, svc, val) < 0)
			a = mid + 1;
		else
			b = mid;
	}
	*lo = a;
	for (b = g->n; a < b;) {
		size_t mid = a + (b - a) / 2;
		if (group_cmp(g, mid, svc, val) <= 0)
			a = mid + 1;
		else
			b = mid;
	}
	*hi = a;
}

struct row {
	struct pd_str name;
	struct pd_rate flat, cum;
	struct pd_rate key; /* what the row is ranked on: a copy of flat or cum (qsort moves rows) */
};

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->key.within_noise != y->key.within_noise)
		return x->key.within_noise ? 1 : -1; /* changes within noise after the real ones */
	if (x->key.change != y->key.change)
		return x->key.change > y->key.change ? -1 : 1;
	size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
	int c = memcmp(x->name.ptr, y->name.ptr, n);
	return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

struct fleet_fn {
	char *name;
	double change;
	json_t *services;
};

struct reg {
	struct pd_api1_req *q;
	bool by_cum;
	int64_t n;
	double min_change;
	int fmt;                       /* 0 json, 1 table, 2 prometheus */
	json_t *comparisons, *skipped; /* skipped: comparisons a side of which had nothing to merge */
	struct pd_buf text;
	struct fleet_fn *fleet;
	size_t nfleet, capfleet;
	struct pd_hidx fleet_idx; /* fleet by name (slots NULL until the first) */
	char sample_type[64], unit[64], rate_unit[96], mode[160];
	size_t merged, rollup_hours;
	bool have_types;
	/* every selected profile of the type, grouped by service, when the query
	 * has no matcher but on service: a side that fills a time range alone
	 * is read from the range's function tables (rollups); NULL = always merge */
	const struct groups *all;
};

static json_t *rate_json(const struct pd_rate *r)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool bad =
	    json_object_set_new(o, "base", json_real(r->base)) ||
	    json_object_set_new(o, "target", json_real(r->target)) ||
	    json_object_set_new(o, "change", json_real(r->change)) ||
	    json_object_set_new(o, "relative", isinf(r->relative) ? json_null() : json_real(r->relative)) ||
	    json_object_set_new(o, "noise", r->noise < 0 ? json_null() : json_real(r->noise)) ||
	    json_object_set_new(o, "base_samples", r->base_samples < 0 ? json_null() : json_integer(r->base_samples)) ||
	    json_object_set_new(o, "target_samples",
	                        r->target_samples < 0 ? json_null() : json_integer(r->target_samples)) ||
	    json_object_set_new(o, "within_noise", json_boolean(r->within_noise));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A side of a comparison: its profiles, total (in the sample type's unit),
 * the hours its table took from rollups, and its normalisation. */
static json_t *side_json(size_t n, int64_t total, size_t rollup_hours, const struct pd_norm_info *ni)
{
	return json_pack("{sIsIsIso}", "profiles", (json_int_t)n, "total", (json_int_t)total, "rollup_hours",
	                 (json_int_t)rollup_hours, "normalization", pd_api1_norm_json(ni));
}

struct fleet_key {
	const struct reg *g;
	struct pd_str name;
};

static bool fleet_eq(void *ctx, uint32_t v)
{
	const struct fleet_key *k = ctx;
	const char *n = k->g->fleet[v].name;
	return strlen(n) == k->name.len && !memcmp(n, k->name.ptr, k->name.len);
}

/* Add a function's change beyond noise in a comparison of service to the
 * fleet list; found by name through an index (a scan of the list for every
 * row was rows x functions a request). A service is listed once, however
 * many of its rollouts changed the function (they come one after another). */
static int fleet_add(struct reg *g, struct pd_str name, double change, const char *service)
{
	if (!g->fleet_idx.slots && pd_hidx_init(&g->fleet_idx, 64))
		return PD_ENOMEM;
	uint64_t h = pd_hash(name.ptr, name.len, 0);
	struct fleet_key k = {g, name};
	uint32_t i = pd_hidx_find(&g->fleet_idx, h, fleet_eq, &k);
	if (i != UINT32_MAX) {
		struct fleet_fn *f = &g->fleet[i];
		f->change += change;
		size_t ns = json_array_size(f->services);
		if (ns && !strcmp(json_string_value(json_array_get(f->services, ns - 1)), service))
			return 0;
		return json_array_append_new(f->services, json_string(service)) ? PD_ENOMEM : 0;
	}
	if (g->nfleet >= UINT32_MAX - 1)
		return PD_ENOMEM;
	if (g->nfleet == g->capfleet) {
		size_t c = g->capfleet ? 2 * g->capfleet : 64;
		struct fleet_fn *f = realloc(g->fleet, c * sizeof *f);
		if (!f)
			return PD_ENOMEM;
		g->fleet = f;
		g->capfleet = c;
	}
	struct fleet_fn *f = &g->fleet[g->nfleet];
	f->name = strndup(name.ptr, name.len);
	f->change = change;
	f->services = json_array();
	if (!f->name || !f->services || json_array_append_new(f->services, json_string(service)) ||
	    pd_hidx_insert(&g->fleet_idx, h, (uint32_t)g->nfleet)) {
		free(f->name);
		json_decref(f->services);
		return PD_ENOMEM;
	}
	g->nfleet++;
	return 0;
}

static const char *fmt_rel(double r, char *b, size_t n)
{
	if (isinf(r))
		snprintf(b, n, "new");
	else
		snprintf(b, n, "%+.1f%%", r * 100);
	return b;
}

/* Exposure of a side (what its rate is per) and the words for it. CPU:
 * the side's CPU time itself, so that a rate is the function's share of the
 * CPU the version used: a version that serves less traffic, or got less CPU
 * on a busier node, is compared by where its CPU goes, not by how much it
 * had. total: the side's sum of the value. */
static double exposure(int64_t total, size_t nprof, const struct pd_norm_info *ni, bool cpu_ns, char *rate_unit,
                       size_t ru, char *mode, size_t mn, const char *unit)
{
	if (cpu_ns && total > 0) {
		snprintf(rate_unit, ru, "share of CPU time");
		snprintf(mode, mn,
		         "per CPU-second of profiled CPU time (the function's share of the CPU the side used)");
		return (double)total;
	}
	bool sum_only = ni->on && ni->kinds == (1u << PD_NORM_SUM);
	if (sum_only || !ni->on || !ni->sources) {
		snprintf(rate_unit, ru, "%s per profile", unit);
		snprintf(mode, mn, "per profile (each delta profile is one window)");
		return nprof ? (double)nprof : 1;
	}
	snprintf(rate_unit, ru, "%s per source", unit);
	snprintf(mode, mn, "per source (each process's average snapshot, or its latest minus earliest)");
	return (double)ni->sources;
}

/* One side of a comparison: the per-function table of its profiles, from
 * the store's rollups where it can be (pd_store_fn_totals over a range that
 * holds exactly this side's profiles), else from their normalised merge. */
struct side {
	struct pd_fn_totals t;
	struct pd_norm_info ni;
	size_t rollup_hours;
	bool merged; /* from a merge (not the range's table) */
};

/* How many of the service's profiles of this type (in all: a group by
 * service is in ascending creation time) were created in [lo, hi]. */
static size_t count_in(const struct groups *all, const char *service, int64_t lo, int64_t hi)
{
	size_t a, b;
	group_run(all, service, NULL, &a, &b);
	size_t l = a, r = b;
	while (l < r) {
		size_t mid = l + (r - l) / 2;
		if (all->m[mid].created_ns < lo)
			l = mid + 1;
		else
			r = mid;
	}
	size_t first = l;
	for (r = b; l < r;) {
		size_t mid = l + (r - l) / 2;
		if (all->m[mid].created_ns <= hi)
			l = mid + 1;
		else
			r = mid;
	}
	return l - first;
}

#define HOUR_NS (3600LL * 1000000000LL)

/* Whether v[0..n) are, of the service's profiles of this type (all,
 * selected over [from, to]), exactly those created in a range [lo, hi]:
 * then the range's function table is this side's. The range is widened to
 * whole hours where that takes in no other profile (and stays in [from,
 * to]), so that the store can answer those hours from their rollups. */
static bool range_exact(const struct pd_profile_meta *v, size_t n, const struct groups *all, const char *service,
                        int64_t from, int64_t to, int64_t *lo, int64_t *hi)
{
	if (!n || !all)
		return false;
	*lo = INT64_MAX;
	*hi = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		*lo = v[i].created_ns < *lo ? v[i].created_ns : *lo;
		*hi = v[i].created_ns > *hi ? v[i].created_ns : *hi;
	}
	if (count_in(all, service, *lo, *hi) != n)
		return false;
	int64_t h0 = *lo - ((*lo % HOUR_NS) + HOUR_NS) % HOUR_NS,
	        h1 = *hi - ((*hi % HOUR_NS) + HOUR_NS) % HOUR_NS + HOUR_NS - 1;
	if (h0 >= from && count_in(all, service, h0, *hi) == n)
		*lo = h0;
	if (h1 <= to && count_in(all, service, *lo, h1) == n)
		*hi = h1;
	return true;
}

static int side_totals(struct reg *g, const struct cmp *c, bool target, struct side *sd, struct pd_err *err)
{
	struct pd_api1_req *q = g->q;
	struct pd_profile_meta *v = target ? c->t : c->b;
	size_t n = target ? c->nt : c->nb;
	memset(sd, 0, sizeof *sd);
	struct pd_norm_plan plan;
	int rc = pd_norm_plan(v, n, &plan, err);
	if (rc)
		return rc;
	bool sums = plan.nsrc > 0;
	for (size_t i = 0; i < plan.nsrc; i++)
		sums = sums && plan.src[i].kind == PD_NORM_SUM;
	size_t nsrc = plan.nsrc;
	pd_norm_plan_free(&plan);
	int64_t lo, hi;
	if (sums && range_exact(v, n, g->all, c->service, q->from_ns, q->to_ns, &lo, &hi)) {
		struct pd_merge_range r = {c->service, q->sel.type, lo, hi, q->cfg->max_profiles, false};
		struct pd_merge_info info = {0};
		rc = pd_store_fn_totals(q->cfg->st, &r, &sd->t, &info, err);
		if (rc)
			return rc;
		if (info.profiles == n) { /* else the store changed since the scan: merge what was selected */
			sd->ni = (struct pd_norm_info){true, 1u << PD_NORM_SUM, n, nsrc, 0, 0};
			sd->rollup_hours = info.rollup_hours;
			return 0;
		}
		pd_fn_totals_free(&sd->t);
	}
	struct pd_profile *p = NULL;
	if ((rc = pd_norm_merge(q->cfg->st, v, n, true, &p, &sd->ni, err)))
		return rc;
	rc = pd_fn_totals_of(p, &sd->t, err);
	pd_profile_free(p);
	sd->merged = true;
	return rc;
}

/* The sample index of parameter sample_index/si in a function table (a
 * type name as pprof's -sample_index, "space" = inuse_space, or an index). */
static int totals_index(const struct pd_api1_req *q, const struct pd_fn_totals *t, uint32_t *si, struct pd_err *err)
{
	const char *key, *v = pd_api1_si_param(q, &key);
	if (!v) {
		*si = pd_fn_totals_default_index(t);
		return 0;
	}
	char *end;
	long k = strtol(v, &end, 10);
	if (*v >= '0' && *v <= '9' && !*end && k >= 0 && k < (long)t->nv) {
		*si = (uint32_t)k;
		return 0;
	}
	size_t wn = strlen(v);
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < t->nv; i++) {
			struct pd_str s = t->types[i];
			if (pass == 1 && s.len > 6 && !memcmp(s.ptr, "inuse_", 6)) /* "space" = inuse_space */
				s = (struct pd_str){s.ptr + 6, s.len - 6};
			if (s.len == wn && !memcmp(s.ptr, v, wn)) {
				*si = i;
				return 0;
			}
		}
	struct pd_buf b = PD_BUF_INIT(0);
	for (uint32_t i = 0; i < t->nv; i++)
		if (pd_buf_appendf(&b, "%s%.*s", i ? ", " : "", (int)t->types[i].len, t->types[i].ptr))
			break;
	pd_errf(err, PD_EINVAL, "bad \"%s\" \"%.64s\": the profiles have sample types %.*s", key, v, (int)b.len,
	        b.ptr ? (const char *)b.ptr : "");
	pd_buf_free(&b);
	return PD_EINVAL;
}

/* The first sample type counted in "count" units (samples, objects,
 * contentions, goroutines), or -1. */
static int totals_count_index(const struct pd_fn_totals *t)
{
	for (uint32_t i = 0; i < t->nv; i++)
		if (t->units[i].len == 5 && !memcmp(t->units[i].ptr, "count", 5))
			return (int)i;
	return -1;
}

static bool str_same(struct pd_str a, struct pd_str b)
{
	return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len);
}

static bool same_types(const struct pd_fn_totals *a, const struct pd_fn_totals *b)
{
	if (a->nv != b->nv)
		return false;
	for (uint32_t i = 0; i < a->nv; i++)
		if (!str_same(a->types[i], b->types[i]) || !str_same(a->units[i], b->units[i]))
			return false;
	return true;
}

struct fnref {
	struct pd_str name;
	size_t i; /* index in its table */
};

static int cmp_ref(const void *a, const void *b)
{
	const struct fnref *x = a, *y = b;
	size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
	int c = memcmp(x->name.ptr, y->name.ptr, n);
	return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

/* A comparison's two sides, computed ahead of it (struct ahead): rc and
 * err are those of the first side that failed; a side is freed by compare. */
struct sides {
	struct side sb, st;
	int rc;
	struct pd_err err;
};

/* Both sides of c (only reads g: run on the threads of struct ahead). */
static void sides_of(struct reg *g, const struct cmp *c, struct sides *o)
{
	memset(o, 0, sizeof *o);
	size_t cap = g->q->cfg->max_profiles;
	if (cap && (c->nb > cap || c->nt > cap)) {
		o->rc = pd_errf(&o->err, PD_ELIMIT,
		                "service %s: more than %zu profiles on one side: over the limit of profiles per query "
		                "(--max-merge-profiles); narrow the selector or the time range",
		                c->service, cap);
	} else if ((o->rc = side_totals(g, c, false, &o->sb, &o->err))) {
		pd_err_prefix(&o->err, "service %s: base", c->service);
	} else if ((o->rc = side_totals(g, c, true, &o->st, &o->err))) {
		pd_err_prefix(&o->err, "service %s: target", c->service);
	}
}

/* On a store whose reads wait on round trips (pd_store_read_ahead > 1:
 * ClickHouse), the comparisons' sides are computed REG_AHEAD comparisons at
 * a time on that many threads (the calling one among them), then compared
 * in order as before: a report of hundreds of rollouts waited for each
 * side's round trips one after another. At most 2 x REG_AHEAD sides are
 * held at once. On the embedded store they are computed one comparison at
 * a time: threads made the report slower there (0.27 -> 0.31 s for 100
 * comparisons) and its peak memory higher (36 -> 60 MB). */
#define REG_AHEAD 8

struct ahead {
	struct reg *g;
	struct cmp *cs;
	struct sides *o;
	size_t n;
	atomic_size_t next;
};

static void *ahead_main(void *arg)
{
	struct ahead *a = arg;
	for (size_t k; (k = atomic_fetch_add(&a->next, 1)) < a->n;)
		sides_of(a->g, &a->cs[k], &a->o[k]);
	return NULL;
}

/* o[0..n) = the sides of cs[0..n), on up to nthreads threads */
static void sides_ahead(struct reg *g, struct cmp *cs, struct sides *o, size_t n, size_t nthreads)
{
	struct ahead a = {g, cs, o, n, 0};
	pthread_t th[REG_AHEAD - 1];
	size_t nt = 0;
	while (nt + 1 < nthreads && nt + 1 < n && nt < REG_AHEAD - 1 &&
	       !pthread_create(&th[nt], NULL, ahead_main, &a))
		nt++; /* a thread that cannot be made: fewer of them, the same answer */
	ahead_main(&a);
	for (size_t i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
}

static int compare(struct reg *g, struct cmp *c, struct sides *pre, struct pd_err *err)
{
	struct pd_api1_req *q = g->q;
	struct side sb = pre->sb, st = pre->st;
	memset(&pre->sb, 0, sizeof pre->sb);
	memset(&pre->st, 0, sizeof pre->st);
	struct row *rows = NULL;
	struct fnref *refs = NULL;
	json_t *jrows = NULL, *cj = NULL;
	int rc = pre->rc;
	if (rc) {
		*err = pre->err;
		goto out;
	}
	g->merged += (sb.merged ? c->nb : 0) + (st.merged ? c->nt : 0);
	g->rollup_hours += sb.rollup_hours + st.rollup_hours;
	if (!same_types(&sb.t, &st.t)) {
		rc = pd_errf(err, PD_EINCOMPAT,
		             "service %s: the base's and the target's profiles have other sample types", c->service);
		goto out;
	}
	uint32_t si;
	if ((rc = totals_index(q, &sb.t, &si, err)))
		goto out;
	int ci = totals_count_index(&sb.t);
	uint32_t nv = sb.t.nv;
	char stype[64], unit[64], ru[96], mode[160];
	snprintf(stype, sizeof stype, "%.*s", (int)sb.t.types[si].len, sb.t.types[si].ptr);
	snprintf(unit, sizeof unit, "%.*s", (int)sb.t.units[si].len, sb.t.units[si].ptr);
	bool cpu_ns = q->sel.type && !strcmp(q->sel.type, "cpu") && !strcmp(unit, "nanoseconds");
	double eb = exposure(sb.t.total[si], c->nb, &sb.ni, cpu_ns, ru, sizeof ru, mode, sizeof mode, unit);
	double et = exposure(st.t.total[si], c->nt, &st.ni, cpu_ns, ru, sizeof ru, mode, sizeof mode, unit);
	if (!g->have_types) {
		snprintf(g->sample_type, sizeof g->sample_type, "%s", stype);
		snprintf(g->unit, sizeof g->unit, "%s", unit);
		snprintf(g->rate_unit, sizeof g->rate_unit, "%s", ru);
		snprintf(g->mode, sizeof g->mode, "%s", mode);
		g->have_types = true;
	} else if (strcmp(g->sample_type, stype) || strcmp(g->rate_unit, ru)) {
		rc = pd_errf(err, PD_EINCOMPAT,
		             "service %s: its rates are %s of %s, another service's %s of %s: select one profile type "
		             "(query=cpu{...})",
		             c->service, ru, stype, g->rate_unit, g->sample_type);
		goto out;
	}
	/* mean weight of one sample on each side, for the noise of a side without samples */
	double wb = ci >= 0 && sb.t.total[ci] > 0 ? (double)sb.t.total[si] / (double)sb.t.total[ci] : 0;
	double wt = ci >= 0 && st.t.total[ci] > 0 ? (double)st.t.total[si] / (double)st.t.total[ci] : 0;
	/* every function of either side, joined by name */
	size_t nref = sb.t.n + st.t.n;
	refs = malloc((nref ? nref : 1) * sizeof *refs);
	rows = calloc(nref ? nref : 1, sizeof *rows);
	if (!refs || !rows) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < st.t.n; i++)
		refs[i] = (struct fnref){st.t.names[i], i};
	qsort(refs, st.t.n, sizeof *refs, cmp_ref);
	bool *seen = calloc(st.t.n ? st.t.n : 1, sizeof *seen);
	if (!seen) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	size_t nr = 0;
	for (size_t pass = 0; pass < 2; pass++) {
		size_t m = pass ? st.t.n : sb.t.n;
		for (size_t k = 0; k < m; k++) {
			int64_t vbf = 0, vbc = 0, vtf = 0, vtc = 0, nbf = 0, nbc = 0, ntf = 0, ntc = 0;
			struct pd_str name;
			if (!pass) { /* a function of the base, and of the target if it has it */
				size_t i = k;
				name = sb.t.names[i];
				vbf = sb.t.flat[i * nv + si], vbc = sb.t.cum[i * nv + si];
				nbf = ci >= 0 ? sb.t.flat[i * nv + (uint32_t)ci] : -1;
				nbc = ci >= 0 ? sb.t.cum[i * nv + (uint32_t)ci] : -1;
				struct fnref key = {name, 0}, *f = bsearch(&key, refs, st.t.n, sizeof *refs, cmp_ref);
				if (f) {
					seen[f->i] = true;
					vtf = st.t.flat[f->i * nv + si], vtc = st.t.cum[f->i * nv + si];
					ntf = ci >= 0 ? st.t.flat[f->i * nv + (uint32_t)ci] : -1;
					ntc = ci >= 0 ? st.t.cum[f->i * nv + (uint32_t)ci] : -1;
				} else {
					ntf = ntc = ci >= 0 ? 0 : -1;
				}
			} else { /* a function only the target has */
				if (seen[k])
					continue;
				name = st.t.names[k];
				vtf = st.t.flat[k * nv + si], vtc = st.t.cum[k * nv + si];
				ntf = ci >= 0 ? st.t.flat[k * nv + (uint32_t)ci] : -1;
				ntc = ci >= 0 ? st.t.cum[k * nv + (uint32_t)ci] : -1;
				nbf = nbc = ci >= 0 ? 0 : -1;
			}
			struct row *w = &rows[nr];
			w->name = name;
			pd_rate_compute(vbf, vtf, eb, et, nbf, ntf, wb, wt, &w->flat);
			pd_rate_compute(vbc, vtc, eb, et, nbc, ntc, wb, wt, &w->cum);
			w->key = g->by_cum ? w->cum : w->flat;
			if (w->key.change == 0 || fabs(w->key.relative) < g->min_change)
				continue;
			nr++;
		}
	}
	free(seen);
	qsort(rows, nr, sizeof *rows, cmp_rows);
	size_t significant = 0, regressions = 0;
	for (size_t i = 0; i < nr; i++)
		if (!rows[i].key.within_noise) {
			significant++;
			regressions += rows[i].key.change > 0;
			if ((rc = fleet_add(g, rows[i].name, rows[i].key.change, c->service))) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
		}
	size_t keep = nr < (size_t)g->n ? nr : (size_t)g->n;
	if (g->fmt == 1) {
		char at[PD_API_TIME_BUFSZ];
		bool bad = c->base_label ? pd_buf_appendf(&g->text, "service %s: %s -> %s (first seen %s)\n",
		                                          c->service, c->base_label, c->target_label,
		                                          pd_api_format_time(c->at_ns, at, sizeof at))
		                         : pd_buf_appendf(&g->text, "service %s\n", c->service);
		char cores[96] = "";
		if (sb.rollup_hours + st.rollup_hours)
			snprintf(cores, sizeof cores, " (%zu hours from rollups)", sb.rollup_hours + st.rollup_hours);
		bad = bad ||
		      pd_buf_appendf(&g->text,
		                     "  base %zu profiles, target %zu%s; %zu functions changed, %zu beyond noise "
		                     "(%zu costlier); rates: %s\n",
		                     c->nb, c->nt, cores, nr, significant, regressions, ru) ||
		      pd_buf_appendf(&g->text, "  %12s %12s %12s %9s %9s  %s\n", "base", "target", "change", "relative",
		                     "noise", g->by_cum ? "cum of" : "flat of");
		for (size_t i = 0; !bad && i < keep; i++) {
			const struct pd_rate *k = &rows[i].key;
			char rel[32], nz[32];
			snprintf(nz, sizeof nz, "%.3g", k->noise);
			bad = pd_buf_appendf(&g->text, "  %12.6g %12.6g %+12.6g %9s %9s  %.*s%s\n", k->base, k->target,
			                     k->change, fmt_rel(k->relative, rel, sizeof rel), k->noise < 0 ? "?" : nz,
			                     (int)rows[i].name.len, rows[i].name.ptr,
			                     k->within_noise ? "  (within noise)" : "");
		}
		if (!bad && nr > keep)
			bad = pd_buf_appendf(&g->text, "  ... %zu more (n=%lld)\n", nr - keep, (long long)g->n);
		bad = bad || pd_buf_appendf(&g->text, "\n");
		rc = bad ? pd_errf(err, PD_ENOMEM, "out of memory") : 0;
		goto out;
	}
	if (g->fmt == 2) {
		bool bad = false;
		for (size_t i = 0; !bad && i < keep; i++) {
			bad = pd_buf_appendf(&g->text, "profd_regression_change{service=\"") ||
			      pd_prom_escape_value(&g->text, c->service, strlen(c->service)) ||
			      pd_buf_appendf(&g->text, "\",from=\"") ||
			      pd_prom_escape_value(&g->text, c->base_label ? c->base_label : "base",
			                           strlen(c->base_label ? c->base_label : "base")) ||
			      pd_buf_appendf(&g->text, "\",to=\"") ||
			      pd_prom_escape_value(&g->text, c->target_label ? c->target_label : "target",
			                           strlen(c->target_label ? c->target_label : "target")) ||
			      pd_buf_appendf(&g->text, "\",function=\"") ||
			      pd_prom_escape_value(&g->text, rows[i].name.ptr, rows[i].name.len) ||
			      pd_buf_appendf(&g->text, "\",value=\"%s\",unit=\"%s\",within_noise=\"%s\"} %.9g\n",
			                     g->by_cum ? "cum" : "flat", ru,
			                     rows[i].key.within_noise ? "true" : "false", rows[i].key.change);
		}
		rc = bad ? pd_errf(err, PD_ENOMEM, "out of memory") : 0;
		goto out;
	}
	jrows = json_array();
	bool bad = !jrows;
	for (size_t i = 0; !bad && i < keep; i++) {
		json_t *o = json_object();
		bad = !o || json_object_set_new(o, "name", json_stringn_nocheck(rows[i].name.ptr, rows[i].name.len)) ||
		      json_object_set_new(o, "flat", rate_json(&rows[i].flat)) ||
		      json_object_set_new(o, "cum", rate_json(&rows[i].cum)) ||
		      json_object_set_new(o, "within_noise", json_boolean(rows[i].key.within_noise));
		if (bad)
			json_decref(o);
		else
			bad = json_array_append_new(jrows, o) != 0;
	}
	cj = bad ? NULL : json_object();
	bad = !cj || json_object_set_new(cj, "service", json_string(c->service)) ||
	      (c->base_label && (json_object_set_new(cj, "from", json_string(c->base_label)) ||
	                         json_object_set_new(cj, "to", json_string(c->target_label)) ||
	                         json_object_set_new(cj, "at", time_json(c->at_ns)))) ||
	      json_object_set_new(cj, "base", side_json(c->nb, sb.t.total[si], sb.rollup_hours, &sb.ni)) ||
	      json_object_set_new(cj, "target", side_json(c->nt, st.t.total[si], st.rollup_hours, &st.ni)) ||
	      json_object_set_new(cj, "functions", json_integer((json_int_t)nr)) ||
	      json_object_set_new(cj, "beyond_noise", json_integer((json_int_t)significant)) ||
	      json_object_set_new(cj, "regressions", json_integer((json_int_t)regressions)) ||
	      json_object_set_new(cj, "rows", jrows);
	jrows = NULL;
	if (bad || json_array_append_new(g->comparisons, cj))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	cj = NULL;
out:
	json_decref(jrows);
	json_decref(cj);
	free(rows);
	free(refs);
	pd_fn_totals_free(&sb.t);
	pd_fn_totals_free(&st.t);
	return rc;
}

static int cmp_fleet(const void *a, const void *b)
{
	const struct fleet_fn *x = a, *y = b;
	if (x->change != y->change)
		return x->change > y->change ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* "5%", "0.05" or "5e-2" as a fraction >= 0. */
static int parse_change(const char *s, double *out, struct pd_err *err)
{
	char *end;
	double v = strtod(s, &end);
	if (end != s && *end == '%' && !end[1])
		v /= 100;
	else if (end == s || *end)
		v = -1;
	if (!(v >= 0 && v < 1e9))
		return pd_errf(err, PD_EINVAL,
		               "bad \"min_change\" \"%.64s\": want a fraction or a percentage, e.g. 5%% or 0.05", s);
	*out = v;
	return 0;
}

int pd_api1_h_regressions(struct pd_api1_req *q, struct pd_api1_resp *out, struct pd_err *err)
{
	const char *label = label_param(q, err);
	if (!label)
		return PD_EINVAL;
	const char *bs = pd_api1_param(q, "base"), *ts = pd_api1_param(q, "target");
	if (!bs != !ts)
		return pd_errf(err, PD_EINVAL,
		               "give both \"base\" and \"target\" (two selections to compare per service), "
		               "or neither (each rollout of \"label\" in the range)");
	struct reg g = {.q = q, .text = PD_BUF_INIT(0)};
	const char *vs = pd_api1_param(q, "value"), *fs = pd_api1_param(q, "format"),
	           *mc = pd_api1_param(q, "min_change");
	if (vs && strcmp(vs, "flat") && strcmp(vs, "cum"))
		return pd_errf(err, PD_EINVAL, "bad \"value\" \"%.64s\": want flat or cum", vs);
	g.by_cum = vs && !strcmp(vs, "cum");
	g.fmt = !fs || !strcmp(fs, "json") ? 0 : !strcmp(fs, "table") ? 1 : !strcmp(fs, "prometheus") ? 2 : -1;
	if (g.fmt < 0)
		return pd_errf(err, PD_EINVAL, "bad \"format\" \"%.64s\": want json, table or prometheus", fs);
	int rc;
	if ((rc = pd_api1_param_int(q, "n", REG_DEFAULT_N, 1, REG_MAX_N, &g.n, err)) ||
	    (mc && (rc = parse_change(mc, &g.min_change, err))))
		return rc;
	struct pd_api1_req bq = *q; /* selections mode: the base's own selector */
	memset(&bq.sel, 0, sizeof bq.sel);
	if (ts) {
		pd_selector_free(&q->sel);
		q->has_query = false;
		if ((rc = pd_selector_parse(ts, &q->sel, err))) {
			pd_err_prefix(err, "bad \"target\"");
			return rc;
		}
		q->has_query = true;
		snprintf(q->query_text, sizeof q->query_text, "%s", ts);
		if ((rc = pd_selector_parse(bs, &bq.sel, err))) {
			pd_err_prefix(err, "bad \"base\"");
			return rc;
		}
		if (!bq.sel.type || !q->sel.type || strcmp(bq.sel.type, q->sel.type)) {
			pd_selector_free(&bq.sel);
			return pd_errf(err, PD_EINVAL,
			               "\"base\" and \"target\" need the same profile type, e.g. "
			               "base=cpu{version=\"1.0\"}&target=cpu{version=\"1.1\"}");
		}
	} else if (!q->has_query || !q->sel.type) {
		return pd_errf(err, PD_EINVAL,
		               "\"query\" needs a profile type, e.g. query=cpu{} or "
		               "query=cpu{service=\"auth\"}: rates of different types do not add up");
	}
	struct pd_profile_meta *v = NULL, *bv = NULL;
	size_t n = 0, bn = 0;
	struct pd_rollouts ro = {0};
	struct cmp *cs = NULL;
	size_t nc = 0;
	/* the sides: tg (by label value in rollout mode), bg (the base's);
	 * sg: the fast path's every profile by service */
	struct groups tg = {0}, bg = {0}, sg = {0};
	bool *done = NULL;
	bool oom = false;
	json_t *o = NULL;
	if ((rc = select_all(q, &v, &n, err)) || (ts && (rc = select_all(&bq, &bv, &bn, err))))
		goto out;
	if (!ts) {
		if ((rc = pd_rollouts_find(v, n, label, &ro, err)))
			goto out;
		cs = calloc(ro.nr ? ro.nr : 1, sizeof *cs);
		oom = !cs || groups_make(v, n, label, &tg);
		for (size_t i = 0; !oom && i < ro.nr; i++) {
			const struct pd_version *a = &ro.v[ro.r[i].from], *b = &ro.v[ro.r[i].to];
			struct cmp *c = &cs[nc++];
			size_t lo, hi;
			*c = (struct cmp){b->service, a->value, b->value, ro.r[i].at_ns, NULL, NULL, 0, 0};
			group_run(&tg, a->service, a->value, &lo, &hi);
			c->b = tg.m + lo;
			c->nb = hi - lo;
			group_run(&tg, b->service, b->value, &lo, &hi);
			c->t = tg.m + lo;
			c->nt = hi - lo;
		}
	} else { /* every service with profiles on both sides, in the order the target first has them */
		cs = calloc(n ? n : 1, sizeof *cs);
		done = calloc(n ? n : 1, sizeof *done); /* by the first index of a service's group */
		oom = !cs || !done || groups_make(v, n, NULL, &tg) || groups_make(bv, bn, NULL, &bg);
		for (size_t i = 0; !oom && i < n; i++) {
			size_t lo, hi, blo, bhi;
			group_run(&tg, v[i].service, NULL, &lo, &hi);
			if (done[lo])
				continue;
			done[lo] = true;
			group_run(&bg, v[i].service, NULL, &blo, &bhi);
			if (blo == bhi)
				continue;
			cs[nc++] = (struct cmp){v[i].service, NULL, NULL, 0, bg.m + blo, tg.m + lo, bhi - blo, hi - lo};
		}
	}
	if (oom) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	bool rollups;
	if ((rc = pd_plan_parse_rollups(pd_api1_param(q, "rollups"), &rollups, err)))
		goto out;
	/* the fast path's precondition: the selection is every profile of the
	 * type of those services (the planner's; the type is the selector's
	 * or the one of each comparison) */
	if (!ts && rollups && pd_plan_service_only(&q->sel)) {
		if (groups_make(v, n, NULL, &sg)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		g.all = &sg;
	}
	g.comparisons = json_array();
	g.skipped = json_array();
	if (!g.comparisons || !g.skipped) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	struct sides ahead[REG_AHEAD];
	size_t have = 0, from = 0; /* ahead[k] is the sides of cs[from + k], k < have */
	size_t nthreads = pd_store_read_ahead(q->cfg->st), window = nthreads > 1 ? REG_AHEAD : 1;
	for (size_t i = 0; !rc && i < nc; i++) {
		if (i == from + have) {
			from = i;
			have = nc - i < window ? nc - i : window;
			sides_ahead(&g, cs + from, ahead, have, nthreads);
		}
		rc = compare(&g, &cs[i], &ahead[i - from], err);
		if (rc == PD_ENOTFOUND) { /* e.g. a side of single cumulative snapshots: said, not fatal */
			rc = json_array_append_new(g.skipped,
			                           json_pack("{ssss}", "service", cs[i].service, "why", err->msg))
			         ? pd_errf(err, PD_ENOMEM, "out of memory")
			         : 0;
			if (!rc && g.fmt == 1)
				rc = pd_buf_appendf(&g.text, "service %s: skipped: %s\n\n", cs[i].service, err->msg)
				         ? pd_errf(err, PD_ENOMEM, "out of memory")
				         : 0;
		}
	}
	for (size_t k = 0; k < have; k++) { /* those computed ahead of a comparison that failed */
		pd_fn_totals_free(&ahead[k].sb.t);
		pd_fn_totals_free(&ahead[k].st.t);
	}
	if (rc)
		goto out;
	out->merged = g.merged;
	if (g.nfleet) /* qsort must not be given NULL, even for 0 rows */
		qsort(g.fleet, g.nfleet, sizeof *g.fleet, cmp_fleet);
	if (g.fmt) {
		if (!nc && g.fmt == 1)
			rc = pd_buf_appendf(&g.text,
			                    ts ? "no service has profiles in both selections\n"
			                       : "no rollout of label \"%s\" in the range: no service has two "
			                         "values of it\n",
			                    label);
		if (g.fmt == 1 && g.nfleet) {
			rc = rc || pd_buf_appendf(&g.text, "fleet (%s, %s): change summed over services\n",
			                          g.sample_type, g.rate_unit);
			for (size_t i = 0; !rc && i < g.nfleet && i < (size_t)g.n; i++)
				rc = pd_buf_appendf(&g.text, "  %+12.6g  %s (%zu service%s)\n", g.fleet[i].change,
				                    g.fleet[i].name, json_array_size(g.fleet[i].services),
				                    json_array_size(g.fleet[i].services) == 1 ? "" : "s");
		}
		if (rc) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		if (g.fmt == 2) {
			struct pd_buf h = PD_BUF_INIT(0);
			if (pd_buf_appendf(&h,
			                   "# HELP profd_regression_change The change of a function's normalised cost "
			                   "from a service's base to its target (rollout)\n"
			                   "# TYPE profd_regression_change gauge\n") ||
			    pd_buf_append(&h, g.text.ptr, g.text.len)) {
				pd_buf_free(&h);
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
			pd_buf_free(&g.text);
			g.text = h;
		}
		rc = pd_api1_reply_text(out, &g.text,
		                        g.fmt == 2 ? "text/plain; version=0.0.4; charset=utf-8"
		                                   : "text/plain; charset=utf-8");
		goto out;
	}
	o = json_object();
	json_t *fl = json_array();
	bool bad = !o || !fl;
	for (size_t i = 0; !bad && i < g.nfleet && i < (size_t)g.n; i++)
		bad = json_array_append_new(fl, json_pack("{sssfsO}", "name", g.fleet[i].name, "change",
		                                          g.fleet[i].change, "services", g.fleet[i].services)) != 0;
	if (!o) {
		json_decref(fl);
		fl = NULL;
	}
	bad = bad || json_object_set_new(o, "label", json_string(label)) ||
	      json_object_set_new(o, "from", time_json(q->from_ns)) ||
	      json_object_set_new(o, "to", time_json(q->to_ns)) ||
	      json_object_set_new(o, "sample_type", json_string(g.sample_type)) ||
	      json_object_set_new(o, "unit", json_string(g.unit)) ||
	      json_object_set_new(o, "rate_unit", json_string(g.rate_unit)) ||
	      json_object_set_new(o, "mode", json_string(g.mode)) ||
	      json_object_set_new(o, "value", json_string(g.by_cum ? "cum" : "flat")) ||
	      json_object_set_new(o, "min_change", json_real(g.min_change)) ||
	      json_object_set_new(o, "rollup_hours", json_integer((json_int_t)g.rollup_hours)) ||
	      json_object_set_new(o, "skipped", g.skipped) || json_object_set_new(o, "comparisons", g.comparisons);
	g.comparisons = g.skipped = NULL;
	if (o && (bad || json_object_set_new(o, "fleet", fl))) {
		json_decref(o);
		o = NULL;
	}
	rc = pd_api1_reply_json(out, o, err); /* NULL: out of memory */
	o = NULL;
out:
	out->ranged = true;
	out->from_ns = q->from_ns;
	out->to_ns = q->to_ns;
	free(cs);
	free(done);
	groups_free(&tg);
	groups_free(&bg);
	groups_free(&sg);
	for (size_t i = 0; i < g.nfleet; i++) {
		free(g.fleet[i].name);
		json_decref(g.fleet[i].services);
	}
	free(g.fleet);
	pd_hidx_free(&g.fleet_idx);
	json_decref(g.comparisons);
	json_decref(g.skipped);
	pd_buf_free(&g.text);
	pd_rollouts_free(&ro);
	pd_query_metas_free(v, n);
	pd_query_metas_free(bv, bn);
	pd_selector_free(&bq.sel);
	return rc;
}
