/*
 * test_store.c — the storage conformance suite, written against the
 * interface in lib/store/store.h only (never the SQLite files), so every
 * backend runs the same tests. Today: the embedded SQLite backend.
 */
#include "testutil.h"
#include "../../lib/store/store.h"
#include "../../lib/store/ch.h"
#include "../../lib/store/codec.h"
#include "../../lib/pprof/report.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DAY 86400000000000LL
#define T0 (1764374400LL * 1000000000LL) /* 2025-11-29T00:00:00Z */

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { return tu_xorshift(&rs); }

/* The profile built in p, at time t for 10 s, as gzip bytes (p freed). */
static struct pd_buf pb_gz_at(struct pb *p, int64_t t)
{
	tb_int(&p->b, PF_TIME_NANOS, t);
	tb_int(&p->b, PF_DURATION_NANOS, 10000000000LL);
	pb_finish(p);
	struct pd_profile *q = pb_decode(p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 6, &out, &err), 0);
	pd_profile_free(q);
	pb_free(p);
	return out;
}

/* A CPU profile (or, heap=true, a heap-shaped one) at time t: a few
 * functions and stacks, some samples labelled. Returns gzip bytes. */
static struct pd_buf make_profile(int64_t t, bool heap, int seed)
{
	static const char *const fn[] = {"main.main", "main.a", "main.b", "runtime.c", "main.d", "main.e"};
	static const char *const hv[] = {"login", "search"};
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, heap);
	uint64_t base = 0x400000 + (uint64_t)(seed % 3) * 0x10000;
	pb_mapping(&p, 1, base, base + 0x100000, 0, "/bin/app", "b1d");
	for (uint64_t f = 0; f < 6; f++)
		pb_function(&p, f + 1, fn[f], "app.go", 0);
	for (uint64_t l = 0; l < 6; l++)
		pb_location1(&p, l + 1, 1, base + 0x100 * (l + 1), l + 1, (int64_t)l * 10);
	rs = 1234567 + (uint64_t)seed;
	int ns = 4 + (int)(rnd() % 6);
	for (int i = 0; i < ns; i++) {
		uint64_t locs[4];
		size_t n = 1 + rnd() % 4;
		for (size_t j = 0; j < n; j++)
			locs[j] = 1 + rnd() % 6;
		int64_t vals[2] = {1 + (int64_t)(rnd() % 5), 10000000 * (1 + (int64_t)(rnd() % 5))};
		struct pb_label lb = {"handler", hv[rnd() % 2], 0, NULL};
		pb_sample(&p, locs, n, vals, 2, &lb, rnd() % 2);
	}
	return pb_gz_at(&p, t);
}

static int strcmp_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Canonical text of a profile's content: one line per sample, "frames |
 * labels | values", sorted (or, ordered, in the profile's order of
 * samples: what go tool pprof -raw lists); what go tool pprof would print
 * for it. */
static char *canon_as(const struct pd_profile *p, bool ordered)
{
	size_t n = p->nsamples, cap = 0;
	char **lines = calloc(n + 1, sizeof *lines);
	assert_non_null(lines);
	for (size_t i = 0; i < n; i++) {
		const struct pd_sample *s = &p->samples[i];
		char buf[4096];
		size_t o = 0;
		for (uint32_t k = 0; k < s->nlocs; k++) {
			const struct pd_location *l = &p->locations[s->locs[k]];
			for (uint32_t j = 0; j < l->nlines; j++) {
				struct pd_str nm = p->strings[p->functions[l->lines[j].function].name];
				o += (size_t)snprintf(buf + o, sizeof buf - o, "%.*s:%lld;", (int)nm.len, nm.ptr,
						      (long long)l->lines[j].line);
			}
		}
		o += (size_t)snprintf(buf + o, sizeof buf - o, "|");
		for (uint32_t k = 0; k < s->nlabels; k++) {
			struct pd_str key = p->strings[s->labels[k].key], v = p->strings[s->labels[k].str];
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%.*s=%.*s,", (int)key.len, key.ptr, (int)v.len, v.ptr);
		}
		o += (size_t)snprintf(buf + o, sizeof buf - o, "|");
		for (uint32_t k = 0; k < p->nsample_types; k++)
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%lld,", (long long)s->values[k]);
		lines[i] = strdup(buf);
		cap += o + 1;
	}
	if (!ordered)
		qsort(lines, n, sizeof *lines, strcmp_ptr);
	char *all = calloc(cap + 64, 1), *e = all;
	assert_non_null(all);
	for (size_t i = 0; i < n; i++) { /* not strcat: quadratic on profiles of thousands of samples */
		size_t len = strlen(lines[i]);
		memcpy(e, lines[i], len);
		e[len] = '\n';
		e += len + 1;
		free(lines[i]);
	}
	free(lines);
	return all;
}

static char *canon(const struct pd_profile *p)
{
	return canon_as(p, false);
}

static char tmpdir[256];

/* PD_TEST_STORE=clickhouse://HOST:PORT: the backend-independent tests run
 * against the ClickHouse backend instead, each in a database of its own
 * (created by setup, dropped by teardown); with PD_TEST_CH_CLUSTER=NAME as
 * well, on that cluster (?cluster=NAME, databases ON CLUSTER). */
static const char *ch_base, *ch_cluster;
static char ch_url[512], ch_db[64];

static struct pd_store *open_store(void)
{
	struct pd_store *st;
	struct pd_err err;
	if (ch_base ? pd_store_open_clickhouse(ch_url, NULL, NULL, &st, &err) : pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	return st;
}

/* Run sql on the ClickHouse server (database default). */
static int ch_admin(const char *sql)
{
	struct pd_ch_url u;
	struct pd_ch *c;
	struct pd_err err;
	char url[600];
	snprintf(url, sizeof url, "%s/default", ch_base);
	struct pd_ch_opts o = {0};
	if (pd_ch_url_parse(url, &u, &err) || pd_ch_open(&u, &o, &c, &err)) {
		fprintf(stderr, "ClickHouse: %s\n", err.msg);
		return -1;
	}
	pd_ch_url_free(&u);
	int rc = pd_ch_query(c, sql, NULL, 0, NULL, NULL, &err);
	if (rc)
		fprintf(stderr, "ClickHouse: %s\n", err.msg);
	pd_ch_close(c);
	return rc;
}

static int setup(void **state)
{
	(void)state;
	if (ch_base) {
		static int seq;
		char sql[128];
		snprintf(ch_db, sizeof ch_db, "pdtest_%d_%d", (int)getpid(), ++seq);
		snprintf(ch_url, sizeof ch_url, "%s/%s%s%s", ch_base, ch_db, ch_cluster ? "?cluster=" : "",
		         ch_cluster ? ch_cluster : "");
		snprintf(sql, sizeof sql, "CREATE DATABASE %s%s%s", ch_db, ch_cluster ? " ON CLUSTER " : "",
		         ch_cluster ? ch_cluster : "");
		if (ch_admin(sql))
			return -1;
	}
	return tu_mkdtemp(tmpdir, sizeof tmpdir, "store");
}

static int teardown(void **state)
{
	(void)state;
	if (ch_base && !getenv("PD_TEST_KEEP")) {
		char sql[128];
		snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s%s%s", ch_db, ch_cluster ? " ON CLUSTER " : "",
		         ch_cluster ? ch_cluster : "");
		(void)ch_admin(sql);
	}
	return tu_rmdir(tmpdir);
}

static void ingest(struct pd_store *st, const char *svc, const char *type, const struct pd_kv *labels, size_t nl,
		   struct pd_buf *b, struct pd_profile_meta *m)
{
	struct pd_ingest in = {.service = svc, .type = type, .labels = labels, .nlabels = nl, .created_ns = 0, .min_created_ns = 0};
	struct pd_err err;
	if (pd_store_ingest(st, &in, b->ptr, b->len, m, &err))
		fail_msg("ingest: %s", err.msg);
}

struct ids {
	char id[64][PD_STORE_ID_LEN + 1];
	int64_t t[64];
	size_t n;
};

static int collect(void *ctx, const struct pd_profile_meta *m)
{
	struct ids *ids = ctx;
	assert_true(ids->n < 64);
	memcpy(ids->id[ids->n], m->id, sizeof ids->id[0]);
	ids->t[ids->n++] = m->created_ns;
	return 0;
}

static struct ids find(struct pd_store *st, const char *svc, const char *type, const struct pd_kv *l, size_t nl,
		       int64_t from, int64_t to, size_t limit)
{
	struct ids ids = {0};
	struct pd_store_query q = {svc, type, l, nl, from, to, limit};
	struct pd_err err;
	if (pd_store_find(st, &q, collect, &ids, &err))
		fail_msg("find: %s", err.msg);
	return ids;
}

static void test_xid(void **state)
{
	(void)state;
	char a[PD_STORE_ID_LEN + 1], b[PD_STORE_ID_LEN + 1];
	pd_xid_new(T0 + 123456789, a);
	pd_xid_new(T0 + 123456789, b);
	assert_int_equal(strlen(a), 20);
	assert_string_not_equal(a, b);
	assert_int_equal(pd_xid_time(a), T0);
	assert_true(pd_xid_time("short") < 0);
	assert_true(pd_xid_time("zzzzzzzzzzzzzzzzzzzz") < 0); /* z is not base32hex */
	/* the id without its seconds (day files since schema 7), and back */
	uint64_t ta, tb;
	char c[PD_STORE_ID_LEN + 1];
	assert_int_equal(pd_xid_tail(a, &ta), 0);
	assert_int_equal(pd_xid_tail(b, &tb), 0);
	assert_true(ta != tb);
	pd_xid_make(T0 + 999999999, ta, c); /* any time of the second */
	assert_string_equal(c, a);
	pd_xid_make(T0 + 1000000000, ta, c); /* the next second: another id */
	assert_string_not_equal(c, a);
	assert_int_equal(pd_xid_time(c), T0 + 1000000000);
	assert_int_equal(pd_xid_tail(c, &tb), 0);
	assert_true(ta == tb);
	/* the order of the ids of one second is the order of their keys */
	assert_true((strcmp(a, b) < 0) == (sq_xid_key(ta) < sq_xid_key(pd_xid_tail(b, &tb) ? 0 : tb)));
	pd_xid_make(T0, 0xffffffffffffffffULL, c);
	assert_int_equal(pd_xid_tail(c, &tb), 0);
	assert_true(tb == 0xffffffffffffffffULL && sq_xid_key(tb) > sq_xid_key(0));
	/* the last digit carries one bit: another spelling of it is no id */
	memcpy(c, a, sizeof c);
	c[PD_STORE_ID_LEN - 1] = c[PD_STORE_ID_LEN - 1] == '0' ? '1' : 'h';
	assert_true(pd_xid_tail(c, &tb) < 0);
	assert_true(pd_xid_tail("short", &tb) < 0);
	assert_true(pd_xid_tail("zzzzzzzzzzzzzzzzzzzz", &tb) < 0);
}

/* Ingest, get back: the same samples, frames, lines, labels and values. */
static void test_roundtrip(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_kv lab[] = {{"region", "eu"}, {"version", "1.0"}};
	for (int i = 0; i < 5; i++) {
		struct pd_buf b = make_profile(T0 + i * 10 * 1000000000LL, false, i);
		struct pd_profile_meta m;
		ingest(st, "auth", "cpu", lab, 2, &b, &m);
		assert_int_equal(m.created_ns, T0 + i * 10 * 1000000000LL); /* from time_nanos */
		assert_int_equal(m.nlabels, 2);
		struct pd_profile *orig, *got;
		struct pd_err err;
		assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &orig, &err), 0);
		if (pd_store_get(st, m.id, &got, &err))
			fail_msg("get: %s", err.msg);
		char *co = canon(orig), *cg = canon(got);
		assert_string_equal(co, cg);
		/* header too */
		assert_int_equal(got->period, orig->period);
		assert_int_equal(got->time_nanos, orig->time_nanos);
		assert_int_equal(got->duration_nanos, orig->duration_nanos);
		assert_int_equal(got->nsample_types, 2);
		assert_true(pd_str_eq(got->strings[got->sample_types[1].type], "cpu"));
		assert_true(pd_str_eq(got->strings[got->period_type.unit], "nanoseconds"));
		assert_int_equal(got->nmappings, 1);
		assert_true(pd_str_eq(got->strings[got->mappings[0].filename], "/bin/app"));
		/* the rebuilt profile encodes to something Go-valid: our decoder agrees */
		struct pd_buf e = PD_BUF_INIT(0);
		struct pd_profile *again;
		assert_int_equal(pd_pprof_encode(got, 0, &e, &err), 0);
		assert_int_equal(pd_pprof_decode(e.ptr, e.len, NULL, &again, &err), 0);
		pd_profile_free(again);
		pd_buf_free(&e);
		free(co);
		free(cg);
		pd_profile_free(orig);
		pd_profile_free(got);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	pd_store_close(st);
}

static void test_find_filters(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_kv v1[] = {{"version", "1.0"}}, v2[] = {{"version", "2.0"}};
	struct pd_profile_meta m;
	/* 6 cpu profiles over 3 days (2 per day), versions alternating; 2 heap */
	for (int i = 0; i < 6; i++) {
		struct pd_buf b = make_profile(T0 + (i / 2) * DAY + (i % 2) * 60000000000LL, false, i);
		ingest(st, "api", "cpu", i % 2 ? v2 : v1, 1, &b, &m);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	for (int i = 0; i < 2; i++) {
		struct pd_buf b = make_profile(T0 + i * DAY + 1000000000LL, true, i);
		ingest(st, "api", "heap", v1, 1, &b, &m);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	struct ids all = find(st, "api", NULL, NULL, 0, 0, INT64_MAX, 0);
	assert_int_equal(all.n, 8);
	for (size_t i = 1; i < all.n; i++)
		assert_true(all.t[i - 1] <= all.t[i]); /* ascending */
	assert_int_equal(find(st, "api", "cpu", NULL, 0, 0, INT64_MAX, 0).n, 6);
	assert_int_equal(find(st, "api", "heap", NULL, 0, 0, INT64_MAX, 0).n, 2);
	assert_int_equal(find(st, "api", "cpu", v2, 1, 0, INT64_MAX, 0).n, 3);
	assert_int_equal(find(st, "api", NULL, v1, 1, 0, INT64_MAX, 0).n, 5);
	assert_int_equal(find(st, "other", NULL, NULL, 0, 0, INT64_MAX, 0).n, 0);
	/* a key carried twice (labels=k=a,k=b keeps both): either pair
	 * matches, both together too */
	struct pd_kv twice[] = {{"k", "a"}, {"k", "b"}}, kb[] = {{"k", "b"}}, kc[] = {{"k", "c"}};
	struct pd_buf tb = make_profile(T0 + 7, false, 7);
	ingest(st, "twice", "cpu", twice, 2, &tb, &m);
	pd_meta_clear(&m);
	pd_buf_free(&tb);
	assert_int_equal(find(st, "twice", NULL, twice, 1, 0, INT64_MAX, 0).n, 1);
	assert_int_equal(find(st, "twice", NULL, kb, 1, 0, INT64_MAX, 0).n, 1);
	assert_int_equal(find(st, "twice", NULL, twice, 2, 0, INT64_MAX, 0).n, 1);
	assert_int_equal(find(st, "twice", NULL, kc, 1, 0, INT64_MAX, 0).n, 0);
	/* [from, to] inclusive, across partitions */
	struct ids day1 = find(st, "api", "cpu", NULL, 0, T0 + DAY, T0 + DAY + 60000000000LL, 0);
	assert_int_equal(day1.n, 2);
	assert_int_equal(find(st, "api", "cpu", NULL, 0, T0 + DAY + 1, T0 + 2 * DAY - 1, 0).n, 1);
	/* limit keeps the newest, still ascending */
	struct ids lim = find(st, "api", "cpu", NULL, 0, 0, INT64_MAX, 2);
	assert_int_equal(lim.n, 2);
	assert_int_equal(lim.t[0], T0 + 2 * DAY);
	assert_int_equal(lim.t[1], T0 + 2 * DAY + 60000000000LL);
	/* bad queries */
	struct pd_store_query q = {"api", NULL, NULL, 0, 10, 5, 0};
	struct pd_err err;
	assert_int_equal(pd_store_find(st, &q, collect, &lim, &err), PD_EINVAL);
	q.service = NULL;
	assert_int_equal(pd_store_find(st, &q, collect, &lim, &err), PD_EINVAL);
	/* services */
	char **svcs;
	size_t ns;
	struct pd_buf b = make_profile(T0, false, 9);
	ingest(st, "aaa", "cpu", NULL, 0, &b, &m);
	pd_meta_clear(&m);
	pd_buf_free(&b);
	assert_int_equal(pd_store_services(st, &svcs, &ns, &err), 0);
	assert_int_equal(ns, 3);
	assert_string_equal(svcs[0], "aaa");
	assert_string_equal(svcs[1], "api");
	assert_string_equal(svcs[2], "twice");
	for (size_t i = 0; i < ns; i++)
		free(svcs[i]);
	free(svcs);
	pd_store_close(st);
}

/* The ends of what an id holds, 1970-01-01 and 2106-02-07T06:28:15Z, and
 * a day of 2106 (no date string after 2105-12-31 parses on ClickHouse
 * 18.16): what is acknowledged is listed, fetched, merged and removed. */
static void test_time_edges(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	const int64_t S = 1000000000LL, LAST = (int64_t)UINT32_MAX * S; /* 2106-02-07T06:28:15Z */
	const int64_t Y2106 = 4292956800LL * S;                              /* 2106-01-15T00:00:00Z */
	const int64_t at[3] = {S, Y2106, LAST};
	char id[3][PD_STORE_ID_LEN + 1];
	struct pd_err err;
	for (int i = 0; i < 3; i++) {
		struct pd_buf b = make_profile(T0, false, 50 + i);
		struct pd_ingest in = {.service = "edge", .type = "cpu", .created_ns = at[i]};
		struct pd_profile_meta m;
		if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
			fail_msg("ingest at %lld: %s", (long long)at[i], err.msg);
		memcpy(id[i], m.id, sizeof id[i]);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	struct ids all = find(st, "edge", NULL, NULL, 0, 0, INT64_MAX, 0);
	assert_int_equal(all.n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(all.t[i], at[i]);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, Y2106, Y2106, 0).n, 1); /* from == to */
	assert_int_equal(find(st, "edge", NULL, NULL, 0, Y2106 + 1, LAST - 1, 0).n, 0);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, Y2106 - 40 * DAY, LAST, 0).n, 2);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, LAST, INT64_MAX, 0).n, 1);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, INT64_MIN, 0, 0).n, 0);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, INT64_MIN, S, 1).n, 1);
	for (int i = 0; i < 3; i++) {
		struct pd_profile *p;
		if (pd_store_get(st, id[i], &p, &err))
			fail_msg("get %s: %s", id[i], err.msg);
		pd_profile_free(p);
	}
	struct pd_merge_range q = {"edge", "cpu", Y2106 - DAY, INT64_MAX, 0, false};
	struct pd_merge_info info;
	struct pd_profile *p = NULL;
	if (pd_store_merge_range(st, &q, &p, &info, &err))
		fail_msg("merge 2106: %s", err.msg);
	assert_non_null(p);
	assert_int_equal(info.profiles, 2);
	pd_profile_free(p);
	const char *two[2] = {id[1], id[2]};
	if (pd_store_merge(st, two, 2, &p, &err))
		fail_msg("merge by ids: %s", err.msg);
	pd_profile_free(p);
	assert_int_equal(pd_store_remove(st, id[1], &err), 0);
	assert_int_equal(find(st, "edge", NULL, NULL, 0, 0, INT64_MAX, 0).n, 2);
	assert_int_equal(pd_store_get(st, id[1], &p, &err), PD_ENOTFOUND);
	pd_store_close(st);
}

/* A merge of stored profiles equals pprof's Merge of the originals. */
/* Eight CPU profiles in two partitions, with mapping addresses that move
 * (ASLR): their ids and decoded originals (ingest_eight). */
struct eight {
	struct pd_profile *orig[8];
	const char *ids[8];
	char idbuf[8][PD_STORE_ID_LEN + 1];
};

static void ingest_eight(struct pd_store *st, const char *svc, struct eight *e)
{
	struct pd_err err;
	for (int i = 0; i < 8; i++) {
		struct pd_buf b = make_profile(T0 + (i / 4) * DAY + i * 1000000000LL, false, 100 + i);
		struct pd_profile_meta m;
		ingest(st, svc, "cpu", NULL, 0, &b, &m);
		memcpy(e->idbuf[i], m.id, sizeof e->idbuf[i]);
		e->ids[i] = e->idbuf[i];
		assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &e->orig[i], &err), 0);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
}

static void test_merge(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct eight e;
	struct pd_err err;
	ingest_eight(st, "m", &e);
	struct pd_profile **orig = e.orig;
	const char **ids = e.ids;
	struct pd_profile *want, *got;
	assert_int_equal(pd_pprof_merge(orig, 8, &want, &err), 0);
	if (pd_store_merge(st, ids, 8, &got, &err))
		fail_msg("merge: %s", err.msg);
	char *cw = canon(want), *cg = canon(got);
	assert_string_equal(cw, cg);
	assert_int_equal(got->duration_nanos, want->duration_nanos);
	assert_int_equal(got->time_nanos, want->time_nanos);
	assert_int_equal(got->period, want->period);
	free(cw);
	free(cg);
	pd_profile_free(want);
	pd_profile_free(got);
	/* profiles of several services (of one day), given newest first: the
	 * merge does not depend on the order of the ids; its samples are in
	 * pprof's order (first met first, as go tool pprof -raw lists them)
	 * of the profiles in time order, whatever the order the store keeps
	 * them in (by service, on ClickHouse) */
	struct pd_profile *po[3];
	char oid[3][PD_STORE_ID_LEN + 1];
	const char *order[3];
	static const char *const osvc[3] = {"zz", "mm", "aa"};
	for (int i = 0; i < 3; i++) {
		struct pd_buf ob = make_profile(T0 + 3 * DAY + i, false, 40 + i);
		struct pd_profile_meta om;
		ingest(st, osvc[i], "cpu", NULL, 0, &ob, &om);
		assert_int_equal(pd_pprof_decode(ob.ptr, ob.len, NULL, &po[i], &err), 0);
		memcpy(oid[i], om.id, sizeof oid[i]);
		order[2 - i] = oid[i];
		pd_meta_clear(&om);
		pd_buf_free(&ob);
	}
	assert_int_equal(pd_pprof_merge(po, 3, &want, &err), 0);
	if (pd_store_merge(st, order, 3, &got, &err))
		fail_msg("merge of three services: %s", err.msg);
	cw = canon_as(want, true), cg = canon_as(got, true);
	assert_string_equal(cw, cg);
	free(cw);
	free(cg);
	pd_profile_free(want);
	pd_profile_free(got);
	for (int i = 0; i < 3; i++)
		pd_profile_free(po[i]);
	/* unknown id; mixed types */
	const char *bad[2] = {ids[0], "9999999999zzzzzzzzzz"};
	assert_int_equal(pd_store_merge(st, bad, 2, &got, &err), PD_ENOTFOUND);
	struct pd_buf hb = make_profile(T0 + 5, true, 1);
	struct pd_profile_meta hm;
	ingest(st, "m", "heap", NULL, 0, &hb, &hm);
	const char *mixed[2] = {ids[0], hm.id};
	assert_int_equal(pd_store_merge(st, mixed, 2, &got, &err), PD_EINCOMPAT);
	pd_meta_clear(&hm);
	pd_buf_free(&hb);
	for (int i = 0; i < 8; i++)
		pd_profile_free(orig[i]);
	pd_store_close(st);
}

/* The embedded store's cache of symbols read back (sqlite_read.c): merges
 * answered from it, from a cache emptied at every put (a bound below one
 * entry) and from no cache at all equal Go's merge of the same profiles. */
static void test_read_cache(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct eight e;
	struct pd_err err;
	ingest_eight(st, "rc", &e);
	struct pd_profile **orig = e.orig;
	const char **ids = e.ids;
	struct pd_profile *want;
	assert_int_equal(pd_pprof_merge(orig, 8, &want, &err), 0);
	char *cw = canon(want);
	static const size_t bounds[] = {(size_t)64 << 20, 64, 0};
	for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++) {
		pd_store_sqlite_set_read_cache(st, bounds[b]);
		for (int round = 0; round < 2; round++) { /* the second from what the first kept */
			struct pd_profile *got;
			struct pd_merge_range q = {"rc", "cpu", T0, T0 + 2 * DAY, 0, true};
			struct pd_merge_info info;
			if (pd_store_merge_range(st, &q, &got, &info, &err))
				fail_msg("merge_range (bound %zu, round %d): %s", bounds[b], round, err.msg);
			char *cg = canon(got);
			assert_string_equal(cw, cg);
			free(cg);
			pd_profile_free(got);
			if (pd_store_merge(st, ids, 8, &got, &err))
				fail_msg("merge (bound %zu, round %d): %s", bounds[b], round, err.msg);
			cg = canon(got);
			assert_string_equal(cw, cg);
			free(cg);
			pd_profile_free(got);
		}
	}
	free(cw);
	pd_profile_free(want);
	for (int i = 0; i < 8; i++)
		pd_profile_free(orig[i]);
	pd_store_close(st);
}

/* One CPU sample on one stack, with these labels in this order. */
static struct pd_buf make_labelled(int64_t t, const struct pb_label *lb, size_t nl)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10000000);
	pb_mapping(&p, 1, 0x400000, 0x500000, 0, "/bin/app", "b1d");
	pb_function(&p, 1, "main.main", "app.go", 0);
	pb_location1(&p, 1, 1, 0x400100, 1, 10);
	uint64_t locs[1] = {1};
	int64_t vals[2] = {1, 10000000};
	pb_sample(&p, locs, 1, vals, 2, lb, nl);
	tb_int(&p.b, PF_TIME_NANOS, t);
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 6, &out, &err), 0);
	pd_profile_free(q);
	pb_free(&p);
	return out;
}

/* Samples whose labels differ only in order are one sample after a merge,
 * as in pprof's profile.Merge (its sample key sorts label keys). */
static void test_label_order(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pb_label ab[2] = {{"a", "1", 0, NULL}, {"b", "2", 0, NULL}};
	struct pb_label ba[2] = {{"b", "2", 0, NULL}, {"a", "1", 0, NULL}};
	char idbuf[2][PD_STORE_ID_LEN + 1];
	const char *ids[2] = {idbuf[0], idbuf[1]};
	for (int i = 0; i < 2; i++) {
		struct pd_buf b = make_labelled(T0 + i * 1000000000LL, i ? ba : ab, 2);
		struct pd_profile_meta m;
		ingest(st, "lo", "cpu", NULL, 0, &b, &m);
		memcpy(idbuf[i], m.id, sizeof idbuf[i]);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	struct pd_profile *got;
	struct pd_err err;
	if (pd_store_merge(st, ids, 2, &got, &err))
		fail_msg("merge: %s", err.msg);
	assert_int_equal(got->nsamples, 1);
	assert_int_equal(got->samples[0].values[0], 2);
	assert_int_equal(got->samples[0].nlabels, 2);
	pd_profile_free(got);
	pd_store_close(st);
}

static void test_bad_input_stores_nothing(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m;
	struct pd_err err;
	struct pd_ingest in = {.service = "bad", .type = "cpu", .labels = NULL, .nlabels = 0, .created_ns = 0, .min_created_ns = 0};
	assert_int_equal(pd_store_ingest(st, &in, (const uint8_t *)"garbage!", 8, &m, &err), PD_EINVAL);
	assert_contains(err.msg, "malformed profile");
	/* a valid profile without samples */
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10000000);
	pb_finish(&p);
	assert_int_equal(pd_store_ingest(st, &in, p.b.p, p.b.len, &m, &err), PD_EINVAL);
	assert_contains(err.msg, "no samples");
	pb_free(&p);
	struct pd_buf b = make_profile(T0, false, 1);
	in.type = "bogus";
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), PD_EINVAL);
	in.type = "cpu";
	in.service = "";
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), PD_EINVAL);
	/* older than the retention window: refused before any partition is made */
	in.service = "bad";
	in.min_created_ns = T0 + 1;
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), PD_EEXPIRED);
	assert_contains(err.msg, "older than the retention window");
	struct pd_store_stats ss;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.partitions, 0);
	in.min_created_ns = T0;
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), 0);
	pd_meta_clear(&m);
	assert_int_equal(pd_store_remove(st, m.id, &err), 0);
	assert_int_equal(find(st, "bad", NULL, NULL, 0, 0, INT64_MAX, 0).n, 0);
	struct pd_profile *got;
	assert_int_equal(pd_store_get(st, "nonsense", &got, &err), PD_ENOTFOUND);
	assert_int_equal(pd_store_get(st, "c6jddu000000000000a0", &got, &err), PD_ENOTFOUND);
	pd_buf_free(&b);
	pd_store_close(st);
}

static void test_remove_reopen_retain(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta a, b2, c;
	struct pd_buf pa = make_profile(T0 - 10 * DAY, false, 1), pb2 = make_profile(T0, false, 2),
		      pc = make_profile(T0 + 1000, false, 3);
	ingest(st, "r", "cpu", NULL, 0, &pa, &a);
	ingest(st, "r", "cpu", NULL, 0, &pb2, &b2);
	ingest(st, "r", "cpu", NULL, 0, &pc, &c);
	struct pd_err err;
	assert_int_equal(pd_store_remove(st, c.id, &err), 0);
	struct pd_profile *got;
	assert_int_equal(pd_store_get(st, c.id, &got, &err), PD_ENOTFOUND);
	/* every backend says so in the same words (the API's 404 passes them on) */
	char want[80];
	snprintf(want, sizeof want, "profile id \"%s\" not found", c.id);
	assert_string_equal(err.msg, want);
	assert_int_equal(pd_store_remove(st, c.id, &err), PD_ENOTFOUND);
	assert_string_equal(err.msg, want);
	const char *two[2] = {a.id, c.id};
	assert_int_equal(pd_store_merge(st, two, 2, &got, &err), PD_ENOTFOUND);
	assert_string_equal(err.msg, want);
	pd_store_close(st);
	/* everything acknowledged is there after reopening */
	st = open_store();
	assert_int_equal(find(st, "r", NULL, NULL, 0, INT64_MIN, INT64_MAX, 0).n, 2);
	assert_int_equal(pd_store_get(st, a.id, &got, &err), 0);
	pd_profile_free(got);
	struct pd_store_stats sb, sa;
	assert_int_equal(pd_store_stats(st, &sb, &err), 0);
	assert_int_equal(sb.profiles, 2);
	assert_int_equal(sb.partitions, 2);
	assert_true(sb.disk_bytes > 0);
	/* retention drops the old partition and its file */
	size_t dropped;
	if (pd_store_retain(st, T0 - 5 * DAY, &dropped, &err))
		fail_msg("retain: %s", err.msg);
	assert_int_equal(dropped, 1);
	assert_int_equal(pd_store_get(st, a.id, &got, &err), PD_ENOTFOUND);
	struct ids left = find(st, "r", NULL, NULL, 0, INT64_MIN, INT64_MAX, 0);
	assert_int_equal(left.n, 1);
	assert_string_equal(left.id[0], b2.id);
	size_t files = 0;
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	while (!ch_base && (e = readdir(d)))
		files += strstr(e->d_name, "profd-2025111") != NULL; /* the dropped day's files */
	closedir(d);
	assert_int_equal(files, 0);
	assert_int_equal(pd_store_stats(st, &sa, &err), 0);
	assert_int_equal(sa.profiles, 1);
	assert_int_equal(sa.partitions, 1);
	assert_true(sa.disk_bytes < sb.disk_bytes);
	pd_meta_clear(&a), pd_meta_clear(&b2), pd_meta_clear(&c);
	pd_buf_free(&pa), pd_buf_free(&pb2), pd_buf_free(&pc);
	pd_store_close(st);
}

/* Repeated scrapes of one service cost little: symbols are shared. */
static void test_dedup_is_compact(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	size_t in_bytes = 0, stored = 0;
	for (int i = 0; i < 50; i++) {
		struct pd_buf b = make_profile(T0 + 7 * DAY + i * 10000000000LL, false, i % 4);
		struct pd_profile_meta m;
		ingest(st, "d", "cpu", NULL, 0, &b, &m);
		in_bytes += b.len;
		stored += m.stored_bytes;
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	/* per-profile rows are much smaller than the gzip input */
	assert_true(stored * 3 < in_bytes);
	pd_store_close(st);
}

/* Group commit: threads ingesting into one store at once (two days, so a
 * batch can span partitions), one bad profile among them and one that
 * fails in the commit itself (a label without a value: the database's
 * NOT NULL refuses its label row after its profile row went in). Every
 * good one is acknowledged, found and read back intact, also after
 * reopening; the bad ones fail alone and leave nothing. Then concurrent
 * removals. */
enum { GC_THREADS = 8, GC_EACH = 12 };

struct gc_job {
	struct pd_buf b;
	bool heap, bad, badlabel;
	int rc;
	struct pd_err err;
	struct pd_profile_meta m;
};

struct gc_thread {
	struct pd_store *st;
	pthread_barrier_t *bar;
	struct gc_job *jobs; /* GC_EACH */
	int remove_rc;
};

static void *gc_run(void *arg)
{
	struct gc_thread *t = arg;
	static const struct pd_kv lab[] = {{"zone", "a"}, {"build", "7"}}, nolab[] = {{"zone", NULL}};
	pthread_barrier_wait(t->bar);
	for (int i = 0; i < GC_EACH; i++) {
		struct gc_job *j = &t->jobs[i];
		struct pd_ingest in = {.service = "gc", .type = j->heap ? "heap" : "cpu", .labels = j->badlabel ? nolab : lab, .nlabels = j->badlabel ? 1 : (size_t)(i % 3), .created_ns = 0, .min_created_ns = 0};
		j->rc = pd_store_ingest(t->st, &in, j->b.ptr, j->b.len, &j->m, &j->err);
	}
	pthread_barrier_wait(t->bar);
	/* each thread removes its first profile, all at once */
	t->remove_rc = pd_store_remove(t->st, t->jobs[0].m.id, &t->jobs[0].err);
	return NULL;
}

static int gc_count(void *ctx, const struct pd_profile_meta *m)
{
	(void)m;
	(*(size_t *)ctx)++;
	return 0;
}

static size_t gc_found(struct pd_store *st)
{
	size_t n = 0;
	struct pd_store_query q = {"gc", NULL, NULL, 0, INT64_MIN, INT64_MAX, 0};
	struct pd_err err;
	if (pd_store_find(st, &q, gc_count, &n, &err))
		fail_msg("find: %s", err.msg);
	return n;
}

static void gc_check_content(struct pd_store *st, struct gc_job *j)
{
	struct pd_profile *orig, *got;
	struct pd_err err;
	assert_int_equal(pd_pprof_decode(j->b.ptr, j->b.len, NULL, &orig, &err), 0);
	if (pd_store_get(st, j->m.id, &got, &err))
		fail_msg("get %s: %s", j->m.id, err.msg);
	char *co = canon(orig), *cg = canon(got);
	assert_string_equal(co, cg);
	free(co);
	free(cg);
	pd_profile_free(orig);
	pd_profile_free(got);
}

static void test_group_commit(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct gc_job *jobs = calloc(GC_THREADS * GC_EACH, sizeof *jobs);
	assert_non_null(jobs);
	for (int i = 0; i < GC_THREADS * GC_EACH; i++) {
		struct gc_job *j = &jobs[i];
		j->heap = i % 5 == 4;
		if (i == GC_THREADS * GC_EACH / 2 + 1) { /* thread 4's second: bad */
			j->bad = true;
			j->b = (struct pd_buf)PD_BUF_INIT(0);
			static const char junk[] = "\x1f\x8b not really gzip";
			assert_int_equal(pd_buf_append(&j->b, junk, sizeof junk - 1), 0);
			continue;
		}
		/* distinct seeds: new symbols appear in every batch */
		j->b = make_profile(T0 + (i % 2) * DAY + i * 1000000000LL, j->heap, i * 7);
		j->badlabel = i == 2 * GC_EACH + 5;
	}
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, GC_THREADS);
	pthread_t th[GC_THREADS];
	struct gc_thread t[GC_THREADS];
	for (int i = 0; i < GC_THREADS; i++) {
		t[i] = (struct gc_thread){st, &bar, jobs + i * GC_EACH, -1};
		assert_int_equal(pthread_create(&th[i], NULL, gc_run, &t[i]), 0);
	}
	for (int i = 0; i < GC_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	size_t good = 0;
	for (int i = 0; i < GC_THREADS * GC_EACH; i++) {
		struct gc_job *j = &jobs[i];
		if (j->bad) {
			assert_int_equal(j->rc, PD_EINVAL);
			assert_contains(j->err.msg, "malformed profile");
			continue;
		}
		if (j->badlabel) { /* refused (the embedded store in its commit: the batch's others are stored) */
			assert_int_equal(j->rc, PD_EINVAL);
			assert_contains(j->err.msg, "insert label");
			continue;
		}
		if (j->rc)
			fail_msg("ingest %d: %s", i, j->err.msg);
		good++;
		for (int k = 0; k < i; k++)
			if (!jobs[k].bad && !jobs[k].badlabel)
				assert_string_not_equal(jobs[k].m.id, j->m.id);
	}
	assert_int_equal(good, GC_THREADS * GC_EACH - 2);
	for (int i = 0; i < GC_THREADS; i++)
		assert_int_equal(t[i].remove_rc, 0);
	/* the removed ones are gone, every other one is there, intact */
	assert_int_equal(gc_found(st), good - GC_THREADS);
	for (int i = 0; i < GC_THREADS * GC_EACH; i++) {
		struct gc_job *j = &jobs[i];
		struct pd_profile *got;
		struct pd_err err;
		if (j->bad || j->badlabel)
			continue;
		if (i % GC_EACH == 0)
			assert_int_equal(pd_store_get(st, j->m.id, &got, &err), PD_ENOTFOUND);
		else
			gc_check_content(st, j);
	}
	pd_store_close(st);
	/* and after reopening; new ingests still find the symbols they share */
	st = open_store();
	assert_int_equal(gc_found(st), good - GC_THREADS);
	for (int i = 1; i < GC_THREADS * GC_EACH; i += 5)
		if (!jobs[i].bad && !jobs[i].badlabel && i % GC_EACH)
			gc_check_content(st, &jobs[i]);
	struct pd_profile_meta m;
	ingest(st, "gc", "cpu", NULL, 0, &jobs[1].b, &m);
	struct gc_job again = {.b = jobs[1].b, .m = m};
	gc_check_content(st, &again);
	pd_meta_clear(&m);
	pd_store_close(st);
	for (int i = 0; i < GC_THREADS * GC_EACH; i++) {
		pd_meta_clear(&jobs[i].m);
		pd_buf_free(&jobs[i].b);
	}
	free(jobs);
}

/* ---- rollups ------------------------------------------------------------------------ */

#define HOUR 3600000000000LL
#define SEC 1000000000LL

/* n profiles of service svc, spread evenly over [t, t + span), seeds from
 * seed; their ids into ids (if not NULL). */
static void ingest_span(struct pd_store *st, const char *svc, int64_t t, int64_t span, int n, int seed,
			char (*ids)[PD_STORE_ID_LEN + 1])
{
	struct pd_kv lab[] = {{"pod", "p-1"}};
	for (int i = 0; i < n; i++) {
		struct pd_buf b = make_profile(t + span / n * i, false, seed + i);
		struct pd_profile_meta m;
		ingest(st, svc, "cpu", lab, 1, &b, &m);
		if (ids)
			memcpy(ids[i], m.id, sizeof ids[i]);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
}

/* pd_store_find + pd_store_merge: what a range merge must equal. NULL if
 * nothing matches. */
static struct pd_profile *raw_merge(struct pd_store *st, const char *svc, int64_t from, int64_t to)
{
	struct ids v = find(st, svc, "cpu", NULL, 0, from, to, 0);
	if (!v.n)
		return NULL;
	const char *ids[64];
	for (size_t i = 0; i < v.n; i++)
		ids[i] = v.id[i];
	struct pd_profile *p;
	struct pd_err err;
	if (pd_store_merge(st, ids, v.n, &p, &err))
		fail_msg("merge: %s", err.msg);
	return p;
}

/* The range merge of [from, to] equals the merge of the profiles found
 * (samples, labels, values and the header's numbers) and so do its
 * per-function totals; returns how it was answered. */
static struct pd_merge_info check_range(struct pd_store *st, const char *svc, int64_t from, int64_t to)
{
	struct pd_merge_range q = {svc, "cpu", from, to, 0, false};
	struct pd_merge_info info, info2;
	struct pd_profile *got, *want = raw_merge(st, svc, from, to);
	struct pd_err err;
	if (pd_store_merge_range(st, &q, &got, &info, &err))
		fail_msg("merge_range: %s", err.msg);
	if (!want) {
		assert_null(got);
		assert_int_equal(info.profiles, 0);
		return info;
	}
	assert_non_null(got);
	assert_int_equal(info.profiles, find(st, svc, "cpu", NULL, 0, from, to, 0).n);
	assert_int_equal(info.profiles >= info.raw, true);
	char *cw = canon(want), *cg = canon(got);
	assert_string_equal(cw, cg);
	assert_int_equal(got->time_nanos, want->time_nanos);
	assert_int_equal(got->duration_nanos, want->duration_nanos);
	assert_int_equal(got->period, want->period);
	assert_int_equal(got->nsample_types, want->nsample_types);
	free(cw);
	free(cg);
	/* per-function totals: the same as computed on the merged profile */
	struct pd_fn_totals t, tw;
	if (pd_store_fn_totals(st, &q, &t, &info2, &err))
		fail_msg("fn_totals: %s", err.msg);
	assert_int_equal(info2.profiles, info.profiles);
	assert_int_equal(info2.rollup_hours, info.rollup_hours);
	assert_int_equal(pd_fn_totals_of(want, &tw, &err), 0);
	assert_int_equal(t.nv, tw.nv);
	assert_int_equal(t.n, tw.n);
	assert_int_equal(pd_fn_totals_default_index(&t), pd_fn_totals_default_index(&tw));
	for (uint32_t j = 0; j < t.nv; j++) {
		assert_int_equal(t.total[j], tw.total[j]);
		assert_int_equal(pd_str_cmp(t.types[j], tw.types[j]), 0);
	}
	for (size_t i = 0; i < tw.n; i++) {
		size_t k = 0;
		while (k < t.n && pd_str_cmp(t.names[k], tw.names[i]))
			k++;
		assert_true(k < t.n);
		for (uint32_t j = 0; j < t.nv; j++) {
			assert_int_equal(t.flat[k * t.nv + j], tw.flat[i * tw.nv + j]);
			assert_int_equal(t.cum[k * t.nv + j], tw.cum[i * tw.nv + j]);
		}
	}
	pd_fn_totals_free(&t);
	pd_fn_totals_free(&tw);
	pd_profile_free(want);
	pd_profile_free(got);
	return info;
}

static size_t rollup(struct pd_store *st, int64_t cutoff, size_t max)
{
	size_t built;
	struct pd_err err;
	if (pd_store_rollup(st, cutoff, max, &built, &err))
		fail_msg("rollup: %s", err.msg);
	return built;
}

static uint64_t nrollups(struct pd_store *st)
{
	struct pd_store_stats ss;
	struct pd_err err;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	return ss.rollups;
}

/* Hours 22:00 and 23:00 of day 0 and 00:00 of day 1 (two partitions), 4
 * profiles each, and one in 01:00 of day 1. */
static void rollup_fixture(struct pd_store *st, char (*ids)[PD_STORE_ID_LEN + 1])
{
	ingest_span(st, "svc", T0 + 22 * HOUR, 3 * HOUR, 12, 500, ids);
	ingest_span(st, "svc", T0 + 25 * HOUR + 10 * SEC, HOUR / 2, 1, 600, ids ? ids + 12 : NULL);
	ingest_span(st, "other", T0 + 22 * HOUR, 2 * HOUR, 4, 700, NULL); /* another service: never mixed in */
}

/* A range merge from rollups equals the merge of the profiles: whole
 * hours, edges mixing profiles and rollups, across partitions; hours not
 * over yet get no rollup. */
static void test_rollup_merge(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	rollup_fixture(st, NULL);
	/* before any rollup: every profile from its block */
	struct pd_merge_info info = check_range(st, "svc", T0 + 22 * HOUR, T0 + 26 * HOUR - 1);
	assert_int_equal(info.rollup_hours, 0);
	assert_int_equal(info.raw, 13);
	/* hours over by T0 + 25 h: 22, 23, 24 of svc and 22, 23 of other */
	assert_int_equal(rollup(st, T0 + 25 * HOUR + 30 * SEC, 0), 5);
	assert_int_equal(nrollups(st), 5);
	assert_int_equal(rollup(st, T0 + 25 * HOUR + 30 * SEC, 0), 0); /* nothing stale */
	/* whole hours */
	info = check_range(st, "svc", T0 + 22 * HOUR, T0 + 25 * HOUR - 1);
	assert_int_equal(info.rollup_hours, 3);
	assert_int_equal(info.raw, 0);
	assert_int_equal(info.profiles, 12);
	/* the hour still open is merged from its profile */
	info = check_range(st, "svc", T0 + 22 * HOUR, T0 + 26 * HOUR - 1);
	assert_int_equal(info.rollup_hours, 3);
	assert_int_equal(info.raw, 1);
	/* edges: 22:30 .. 00:29:59 = profiles, 23:00 rollup, profiles */
	info = check_range(st, "svc", T0 + 22 * HOUR + HOUR / 2, T0 + 24 * HOUR + HOUR / 2 - 1);
	assert_int_equal(info.rollup_hours, 1);
	assert_int_equal(info.raw, 4);
	/* one instant, one hour minus a nanosecond: no whole hour */
	info = check_range(st, "svc", T0 + 23 * HOUR, T0 + 24 * HOUR - 2);
	assert_int_equal(info.rollup_hours, 0);
	info = check_range(st, "svc", T0 + 23 * HOUR + 15 * 60 * SEC, T0 + 23 * HOUR + 15 * 60 * SEC);
	assert_int_equal(info.rollup_hours, 0);
	assert_int_equal(info.raw, 1);
	/* nothing there */
	info = check_range(st, "svc", T0 + 30 * HOUR, T0 + 40 * HOUR);
	assert_int_equal(info.profiles, 0);
	info = check_range(st, "nobody", T0, T0 + 48 * HOUR);
	assert_int_equal(info.profiles, 0);
	/* the other service's rollups are its own */
	info = check_range(st, "other", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 2);
	assert_int_equal(info.profiles, 4);
	/* no_rollups: the same from the blocks */
	struct pd_merge_range q = {"svc", "cpu", T0, T0 + 48 * HOUR, 0, true};
	struct pd_profile *p;
	struct pd_err err;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), 0);
	assert_int_equal(info.rollup_hours, 0);
	assert_int_equal(info.raw, 13);
	pd_profile_free(p);
	/* max_raw counts only what is merged from blocks */
	q.no_rollups = false;
	q.max_raw = 1;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), 0);
	assert_int_equal(info.raw, 1);
	pd_profile_free(p);
	q.no_rollups = true;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), PD_ELIMIT);
	assert_null(p);
	/* bad queries */
	q = (struct pd_merge_range){"svc", NULL, T0, T0 + HOUR, 0, false};
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), PD_EINVAL);
	q.type = "cpu";
	q.from_ns = T0 + 2 * HOUR;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), PD_EINVAL);
	/* after reopening, the rollups are still there and used */
	pd_store_close(st);
	st = open_store();
	assert_int_equal(nrollups(st), 5);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 3);
	/* a rolled-up hour between two profiles of the range's partial
	 * hours (one profile an hour, so its rollup is that profile): the
	 * merge lists the samples in the order of the merge of the three in
	 * time order, the rollup in its hour's place, not before the others */
	const int64_t D = T0 + 5 * DAY, M30 = HOUR / 2;
	for (int i = 0; i < 3; i++) {
		struct pd_buf b = make_profile(D + i * HOUR + M30, false, 80 + i);
		struct pd_profile_meta m;
		ingest(st, "ord", "cpu", NULL, 0, &b, &m);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	assert_true(rollup(st, D + 3 * HOUR + 30 * SEC, 0) >= 3);
	struct pd_profile *want = raw_merge(st, "ord", D, D + DAY - 1);
	q = (struct pd_merge_range){"ord", "cpu", D + M30, D + 2 * HOUR + M30, 0, false};
	if (pd_store_merge_range(st, &q, &p, &info, &err))
		fail_msg("merge_range: %s", err.msg);
	assert_int_equal(info.rollup_hours, 1);
	char *cw = canon_as(want, true), *cg = canon_as(p, true);
	assert_string_equal(cw, cg);
	free(cw);
	free(cg);
	pd_profile_free(want);
	pd_profile_free(p);
	pd_store_close(st);
}

/* Ingest p as of time at into service svc (cpu): its id into id, the
 * profile as uploaded (decoded) into *orig. */
static void ingest_pb(struct pd_store *st, const char *svc, struct pb *p, int64_t at, char id[PD_STORE_ID_LEN + 1],
		      struct pd_profile **orig)
{
	struct pd_err err;
	struct pd_buf b = pb_gz_at(p, at);
	struct pd_profile_meta m;
	ingest(st, svc, "cpu", NULL, 0, &b, &m);
	assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, orig, &err), 0);
	memcpy(id, m.id, PD_STORE_ID_LEN + 1);
	pd_meta_clear(&m);
	pd_buf_free(&b);
}

/* default_sample_type and doc_url of a merge are those of the first profile
 * that has them, its period the largest after the first non-zero one, its
 * mappings the first profile's first and those samples use, as pprof's Merge takes them (go tool pprof -proto: a heap
 * profile without one merged with an allocs profile is an allocs profile):
 * from the profiles' blocks and from a rollup alike, whatever the first
 * profile of a partition says ("" is a string like any other to the store). */
static void test_merge_first_nonempty(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	const int64_t D = T0 + 7 * DAY;
	static const char *const dflt[3] = {NULL, "cpu", "samples"}, *const doc[3] = {NULL, "http://d/1", "http://d/2"};
	/* the period is the largest, but 0 counts as none (pprof's Merge: a
	 * first 0 is replaced, by a negative period too) */
	static const int64_t period[3] = {0, -5, -7};
	const char *ids[3];
	char idbuf[3][PD_STORE_ID_LEN + 1];
	struct pd_profile *orig[3];
	struct pd_err err;
	for (int i = 0; i < 3; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, period[i]);
		pb_mapping(&p, 1, 0x400000, 0x500000, 0, "/bin/app", "b1d");
		if (i == 0) /* used by no sample: not in a merge */
			pb_mapping(&p, 2, 0x7f0000, 0x7f1000, 0, "libc.so", "");
		pb_function(&p, 1, "main.main", "app.go", 0);
		pb_location1(&p, 1, 1, 0x400100, 1, 10);
		uint64_t loc = 1;
		int64_t vals[2] = {1, 10000000};
		pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
		if (dflt[i])
			tb_int(&p.b, PF_DEFAULT_SAMPLE_TYPE, pb_s(&p, dflt[i]));
		if (doc[i])
			tb_int(&p.b, PF_DOC_URL, pb_s(&p, doc[i]));
		ingest_pb(st, "first", &p, D + (10 + 10 * i) * 60 * SEC, idbuf[i], &orig[i]);
		ids[i] = idbuf[i];
	}
	struct pd_profile *want, *got;
	assert_int_equal(pd_pprof_merge(orig, 3, &want, &err), 0);
	tu_assert_str(want, want->default_sample_type, "cpu");
	tu_assert_str(want, want->doc_url, "http://d/1");
	assert_int_equal(want->period, -5);
	assert_int_equal(want->nmappings, 1);
	if (pd_store_merge(st, ids, 3, &got, &err))
		fail_msg("merge: %s", err.msg);
	tu_assert_str(got, got->default_sample_type, "cpu");
	tu_assert_str(got, got->doc_url, "http://d/1");
	assert_int_equal(got->period, -5);
	assert_int_equal(got->nmappings, 1);
	pd_profile_free(got);
	/* the last two: the first of them has them */
	if (pd_store_merge(st, ids + 1, 2, &got, &err))
		fail_msg("merge: %s", err.msg);
	tu_assert_str(got, got->default_sample_type, "cpu");
	tu_assert_str(got, got->doc_url, "http://d/1");
	pd_profile_free(got);
	/* the range merge, before and after the hour is rolled up */
	struct pd_merge_range q = {"first", "cpu", D, D + HOUR - 1, 0, false};
	struct pd_merge_info info;
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			assert_int_equal(rollup(st, D + 2 * HOUR, 0), 1);
		if (pd_store_merge_range(st, &q, &got, &info, &err))
			fail_msg("merge_range: %s", err.msg);
		assert_int_equal(info.rollup_hours, pass);
		assert_int_equal(got->period, -5);
		assert_int_equal(got->nmappings, 1);
		tu_assert_str(got, got->default_sample_type, "cpu");
		tu_assert_str(got, got->doc_url, "http://d/1");
		pd_profile_free(got);
	}
	pd_profile_free(want);
	for (int i = 0; i < 3; i++)
		pd_profile_free(orig[i]);
	pd_store_close(st);
}

/* A stack whose values sum to zero over the profiles merged (a delta and
 * its negation, a counter reset) is not in the merge, nor is what only it
 * used, as pprof's Merge drops it: also when the profiles share one
 * partition (whose aggregate is the answer) and when an hour is rolled up.
 * Mappings no sample uses are left out too, but for the first profile's
 * first (the main binary). */
static void test_merge_zero_sum(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	const int64_t D = T0 + 8 * DAY;
	static const int64_t va[3] = {3, -3, 1}; /* main.a: 3, then -3; main.b: 1 */
	const char *ids[2];
	char idbuf[2][PD_STORE_ID_LEN + 1];
	struct pd_profile *orig[2];
	struct pd_err err;
	for (int i = 0; i < 2; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, 10000000);
		pb_mapping(&p, 1, 0x400000, 0x500000, 0, "/bin/app", "b1d");
		if (i == 0) { /* used by no sample */
			pb_mapping(&p, 2, 0x7f0000, 0x7f1000, 0, "libc.so", "");
			pb_mapping(&p, 3, 0x7f2000, 0x7f3000, 0, "libz.so", "");
		}
		pb_function(&p, 1, "main.main", "app.go", 0);
		pb_function(&p, 2, "main.a", "app.go", 0);
		pb_function(&p, 3, "main.b", "app.go", 0);
		for (uint64_t l = 1; l <= 3; l++)
			pb_location1(&p, l, 1, 0x400000 + 0x100 * l, l, (int64_t)l * 10);
		uint64_t sa[2] = {2, 1}, sb[2] = {3, 1};
		int64_t v[2] = {va[i], va[i] * 10000000};
		pb_sample(&p, sa, 2, v, 2, NULL, 0);
		if (i == 0) {
			int64_t w[2] = {va[2], va[2] * 10000000};
			pb_sample(&p, sb, 2, w, 2, NULL, 0);
		}
		ingest_pb(st, "zero", &p, D + (10 + 10 * i) * 60 * SEC, idbuf[i], &orig[i]);
		ids[i] = idbuf[i];
	}
	struct pd_profile *want, *got;
	assert_int_equal(pd_pprof_merge(orig, 2, &want, &err), 0);
	assert_int_equal(want->nsamples, 1);
	assert_int_equal(want->nlocations, 2); /* main.a's is gone */
	assert_int_equal(want->nmappings, 1);
	char *cw = canon(want);
	if (pd_store_merge(st, ids, 2, &got, &err))
		fail_msg("merge: %s", err.msg);
	char *cg = canon(got);
	assert_string_equal(cw, cg);
	assert_int_equal(got->nsamples, 1);
	assert_int_equal(got->nlocations, 2);
	assert_int_equal(got->nmappings, 1);
	free(cg);
	pd_profile_free(got);
	struct pd_merge_range q = {"zero", "cpu", D, D + HOUR - 1, 0, false};
	struct pd_merge_info info;
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			assert_int_equal(rollup(st, D + 2 * HOUR, 0), 1);
		if (pd_store_merge_range(st, &q, &got, &info, &err))
			fail_msg("merge_range: %s", err.msg);
		assert_int_equal(info.rollup_hours, pass);
		cg = canon(got);
		assert_string_equal(cw, cg);
		assert_int_equal(got->nsamples, 1);
		assert_int_equal(got->nlocations, 2);
		assert_int_equal(got->nmappings, 1);
		free(cg);
		pd_profile_free(got);
	}
	free(cw);
	pd_profile_free(want);
	for (int i = 0; i < 2; i++)
		pd_profile_free(orig[i]);
	pd_store_close(st);
}

/* Two processes of one binary (same build id, size and offset: one pprof
 * merge key, one mapping symbol in the partition) loaded at other
 * addresses from other paths, profiled by two services: each profile
 * fetched has its own mapping (start, file) and addresses, as uploaded;
 * a merge has the first profile's (in time order), addresses relocated to
 * it, as pprof's Merge does; not the mapping of whichever profile the
 * partition stored first. */
static void test_mapping_own_copy(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	const int64_t D = T0 + 9 * DAY;
	static const char *const svc[2] = {"one", "two"}, *const file[2] = {"/bin/app", "/srv/app"};
	static const uint64_t base[2] = {0x400000, 0x7f0000};
	char idbuf[2][PD_STORE_ID_LEN + 1];
	const char *ids[2];
	struct pd_profile *orig[2];
	struct pd_err err;
	for (int i = 0; i < 2; i++) {
		struct pb p;
		pb_init(&p);
		pb_cpu_header(&p, 10000000);
		pb_mapping(&p, 1, base[i], base[i] + 0x100000, 0, file[i], "bX");
		pb_function(&p, 1, "main.main", "app.go", 0);
		pb_location1(&p, 1, 1, base[i] + 0x1234, 1, 10);
		uint64_t loc = 1;
		int64_t vals[2] = {1, 10000000};
		pb_sample(&p, &loc, 1, vals, 2, NULL, 0);
		ingest_pb(st, svc[i], &p, D + (10 + 10 * i) * 60 * SEC, idbuf[i], &orig[i]);
		ids[i] = idbuf[i];
	}
	struct pd_profile *got;
	for (int i = 0; i < 2; i++) {
		if (pd_store_get(st, ids[i], &got, &err))
			fail_msg("get: %s", err.msg);
		assert_int_equal(got->nmappings, 1);
		assert_int_equal(got->mappings[0].start, base[i]);
		tu_assert_str(got, got->mappings[0].filename, file[i]);
		assert_int_equal(got->locations[0].address, base[i] + 0x1234);
		pd_profile_free(got);
		/* the merge of the service's profiles: that one */
		struct pd_merge_range q = {svc[i], "cpu", D, D + HOUR - 1, 0, false};
		struct pd_merge_info info;
		if (pd_store_merge_range(st, &q, &got, &info, &err))
			fail_msg("merge_range: %s", err.msg);
		assert_int_equal(got->mappings[0].start, base[i]);
		tu_assert_str(got, got->mappings[0].filename, file[i]);
		assert_int_equal(got->locations[0].address, base[i] + 0x1234);
		pd_profile_free(got);
	}
	/* both, newest first: pprof's Merge of the two in time order */
	const char *rev[2] = {ids[1], ids[0]};
	struct pd_profile *want;
	assert_int_equal(pd_pprof_merge(orig, 2, &want, &err), 0);
	if (pd_store_merge(st, rev, 2, &got, &err))
		fail_msg("merge: %s", err.msg);
	assert_int_equal(got->nmappings, 1);
	assert_int_equal(got->mappings[0].start, want->mappings[0].start);
	tu_assert_str(got, got->mappings[0].filename, file[0]);
	assert_int_equal(got->nlocations, 1);
	assert_int_equal(got->locations[0].address, want->locations[0].address);
	pd_profile_free(got);
	pd_profile_free(want);
	for (int i = 0; i < 2; i++)
		pd_profile_free(orig[i]);
	pd_store_close(st);
}

/* A late profile or a removal in a rolled-up hour makes its rollup stale
 * (not used: the hour is merged from its profiles) until the next pass
 * rebuilds it; an hour whose profiles are all gone gets an empty rollup. */
static void test_rollup_invalidation(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	char ids[13][PD_STORE_ID_LEN + 1];
	rollup_fixture(st, ids);
	int64_t cut = T0 + 26 * HOUR;
	assert_int_equal(rollup(st, cut, 0), 6);
	struct pd_merge_info info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 4);
	assert_int_equal(info.raw, 0);
	/* late ingest into 23:00 */
	ingest_span(st, "svc", T0 + 23 * HOUR + 59 * 60 * SEC, 1, 1, 900, NULL);
	assert_int_equal(nrollups(st), 5);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 3);
	assert_int_equal(info.raw, 5);
	assert_int_equal(rollup(st, cut, 0), 1);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 4);
	assert_int_equal(info.profiles, 14);
	/* removal in 00:00 of day 1 */
	struct pd_err err;
	assert_int_equal(pd_store_remove(st, ids[9], &err), 0);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 3);
	assert_int_equal(rollup(st, cut, 0), 1);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 4);
	assert_int_equal(info.profiles, 13);
	/* every profile of 01:00 removed: an empty rollup */
	assert_int_equal(pd_store_remove(st, ids[12], &err), 0);
	assert_int_equal(rollup(st, cut, 0), 1);
	info = check_range(st, "svc", T0 + 25 * HOUR, T0 + 26 * HOUR - 1);
	assert_int_equal(info.profiles, 0);
	info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 4);
	assert_int_equal(info.profiles, 12);
	/* max_hours: oldest first, one at a time */
	ingest_span(st, "svc", T0 + 22 * HOUR + 1, 1, 1, 901, NULL);
	ingest_span(st, "svc", T0 + 24 * HOUR + 1, 1, 1, 902, NULL);
	assert_int_equal(rollup(st, cut, 1), 1);
	info = check_range(st, "svc", T0 + 22 * HOUR, T0 + 23 * HOUR - 1);
	assert_int_equal(info.rollup_hours, 1);
	info = check_range(st, "svc", T0 + 24 * HOUR, T0 + 25 * HOUR - 1);
	assert_int_equal(info.rollup_hours, 0);
	assert_int_equal(rollup(st, cut, 0), 1);
	pd_store_close(st);
}

/* Concurrent late ingests while rollup passes run: a rollup built from a
 * snapshot that an ingest then changed is never used (or never written). */
struct late_ctx {
	struct pd_store *st;
	int done;
};

static void *late_ingests(void *arg)
{
	struct late_ctx *c = arg;
	for (int i = 0; i < 24; i++)
		ingest_span(c->st, "svc", T0 + (22 + i % 3) * HOUR + (int64_t)i * 60 * SEC, 1, 1, 2000 + i, NULL);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_rollup_concurrent(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	rollup_fixture(st, NULL);
	struct late_ctx c = {st, 0};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, late_ingests, &c), 0);
	while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE))
		rollup(st, T0 + 26 * HOUR, 0);
	pthread_join(th, NULL);
	/* whatever the passes left: only valid rollups are used */
	check_range(st, "svc", T0, T0 + 48 * HOUR);
	rollup(st, T0 + 26 * HOUR, 0);
	struct pd_merge_info info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 4);
	assert_int_equal(info.raw, 0);
	assert_int_equal(info.profiles, 13 + 24);
	pd_store_close(st);
}

/* An hour whose profiles cannot be merged (other sample types under one
 * type) gets no usable rollup: the merge fails as without rollups, and
 * later passes do not try again. */
static void test_rollup_incompatible(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m;
	for (int i = 0; i < 2; i++) {
		struct pd_buf b = make_profile(T0 + 3 * HOUR + i, i == 1, 40 + i);
		ingest(st, "mix", "other", NULL, 0, &b, &m); /* "other": the type check lets it be anything */
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	assert_int_equal(rollup(st, T0 + DAY, 0), 1);
	assert_int_equal(nrollups(st), 0);
	assert_int_equal(rollup(st, T0 + DAY, 0), 0);
	struct pd_merge_range q = {"mix", "other", T0, T0 + DAY, 0, false};
	struct pd_merge_info info;
	struct pd_profile *p;
	struct pd_fn_totals t;
	struct pd_err err;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), PD_EINCOMPAT);
	assert_contains(err.msg, "other sample types");
	assert_int_equal(pd_store_fn_totals(st, &q, &t, &info, &err), PD_EINCOMPAT);
	pd_store_close(st);
}

/* Retention drops rollups with their partition. */
static void test_rollup_retention(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	rollup_fixture(st, NULL);
	assert_int_equal(rollup(st, T0 + 26 * HOUR, 0), 6);
	size_t dropped;
	struct pd_err err;
	assert_int_equal(pd_store_retain(st, T0 + DAY, &dropped, &err), 0);
	assert_int_equal(dropped, 1);
	assert_int_equal(nrollups(st), 2); /* day 1: svc 00:00, 01:00 */
	struct pd_merge_info info = check_range(st, "svc", T0, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 2);
	assert_int_equal(info.profiles, 5);
	info = check_range(st, "other", T0, T0 + 48 * HOUR);
	assert_int_equal(info.profiles, 0);
	pd_store_close(st);
}

/* A backend without the rollup ops: the wrappers fall back to find +
 * merge, with the same answers. */
static void test_rollup_fallback(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	rollup_fixture(st, NULL);
	struct pd_store_ops plain = *st->ops;
	const struct pd_store_ops *orig = st->ops;
	plain.merge_range = NULL;
	plain.rollup = NULL;
	plain.fn_totals = NULL;
	st->ops = &plain;
	assert_int_equal(rollup(st, T0 + 26 * HOUR, 0), 0);
	struct pd_merge_info info = check_range(st, "svc", T0 + 22 * HOUR + 1, T0 + 48 * HOUR);
	assert_int_equal(info.rollup_hours, 0);
	assert_int_equal(info.raw, 12); /* not the one at 22:00:00 */
	struct pd_merge_range q = {"svc", "cpu", T0, T0 + 48 * HOUR, 2, false};
	struct pd_profile *p;
	struct pd_err err;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), PD_ELIMIT);
	st->ops = orig;
	pd_store_close(st);
}

/* Rollup writes are transactional: a process killed (SIGKILL) while
 * rollup passes run leaves a store whose rollups are each whole and valid;
 * the next pass completes them. */
static void test_rollup_crash(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	for (int s = 0; s < 3; s++) {
		char svc[16];
		snprintf(svc, sizeof svc, "s%d", s);
		ingest_span(st, svc, T0, 24 * HOUR, 48, 3000 + 100 * s, NULL);
	}
	pd_store_close(st);
	for (int round = 0; round < 3; round++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct pd_store *cs;
			struct pd_err err;
			if (pd_store_open_sqlite(tmpdir, NULL, &cs, &err))
				_exit(2);
			for (;;) {
				size_t built;
				if (pd_store_rollup(cs, T0 + DAY, 1, &built, &err))
					_exit(3);
				if (!built) /* all done: wait for the kill */
					pause();
			}
		}
		usleep((useconds_t)(20000 + 40000 * round));
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		assert_true(WIFSIGNALED(status));
		st = open_store();
		uint64_t have = nrollups(st);
		assert_true(have <= 72);
		for (int s = 0; s < 3; s++) {
			char svc[16];
			snprintf(svc, sizeof svc, "s%d", s);
			check_range(st, svc, T0, T0 + DAY - 1);
		}
		if (round == 2) {
			rollup(st, T0 + DAY, 0);
			assert_int_equal(nrollups(st), 72);
			struct pd_merge_info info = check_range(st, "s1", T0, T0 + DAY - 1);
			assert_int_equal(info.rollup_hours, 24);
		}
		pd_store_close(st);
	}
}


/* ---- damaged files, open partitions, limits (SQLite backend: these tests
 * reach behind the interface into the day files, with the sqlite3 API) ---- */

#include <fcntl.h>
#include "../../lib/util/pdsqlite.h"

static void day_file_path(int64_t t, char *buf, size_t n)
{
	time_t sec = (time_t)(t / 1000000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	snprintf(buf, n, "%s/profd-%04d%02d%02d.db", tmpdir, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* Run sql on the day file of time t (the store closed). */
static void day_sql(int64_t t, const char *sql)
{
	char path[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

/* XOR byte `off` of blob column col of the rows of table matching where. */
static void flip_blob(int64_t t, const char *table, const char *col, const char *where, size_t off)
{
	char path[512], sql[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	snprintf(sql, sizeof sql, "SELECT rowid, %s FROM %s WHERE %s", col, table, where);
	sqlite3_stmt *st, *up;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE rowid = ?2", table, col);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &up, NULL), SQLITE_OK);
	int rows = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(st, 1);
		assert_true(n > off);
		uint8_t *b = malloc(n);
		memcpy(b, sqlite3_column_blob(st, 1), n);
		b[off] ^= 0x5a;
		sqlite3_bind_blob(up, 1, b, (int)n, SQLITE_TRANSIENT);
		sqlite3_bind_int64(up, 2, sqlite3_column_int64(st, 0));
		assert_int_equal(sqlite3_step(up), SQLITE_DONE);
		sqlite3_reset(up);
		free(b);
		rows++;
	}
	assert_true(rows > 0);
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	sqlite3_close(db);
}

static int ingest_at(struct pd_store *st, const char *svc, int64_t t, int seed, struct pd_profile_meta *m,
		     struct pd_err *err)
{
	struct pd_buf b = make_profile(t, false, seed);
	struct pd_ingest in = {.service = svc, .type = "cpu"};
	int rc = pd_store_ingest(st, &in, b.ptr, b.len, m, err);
	pd_buf_free(&b);
	return rc;
}

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	size_t n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A flipped byte in a stored block, or blocks swapped between two rows (a
 * damaged b-tree pointing a row at another's cell), is an error naming the
 * file and the profile, never another profile's values; the day is then
 * quarantined and range queries skip it and say so. Rows written without
 * a checksum (before this format) still read. */
static void test_checksums(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m[4];
	struct pd_err err;
	for (int i = 0; i < 3; i++)
		assert_int_equal(ingest_at(st, "svc", T0 + 3600000000000LL * (i + 1), 10 + i, &m[i], &err), 0);
	assert_int_equal(ingest_at(st, "svc", T0 + DAY + 3600000000000LL, 20, &m[3], &err), 0);
	for (int i = 0; i < 4; i++)
		pd_meta_clear(&m[i]);
	pd_store_close(st);
	/* swap the sample blocks of profiles 0 and 2; flip a byte in 1's (its
	 * header is in it: codec.h, version 3) */
	char sql[1024];
	snprintf(sql, sizeof sql,
		 "CREATE TEMP TABLE b AS SELECT pd_xid(created, xid) AS xid, block FROM profiles;"
		 "UPDATE profiles SET block = (SELECT block FROM b WHERE xid = '%s') WHERE pd_xid(created, xid) = '%s';"
		 "UPDATE profiles SET block = (SELECT block FROM b WHERE xid = '%s') WHERE pd_xid(created, xid) = '%s';",
		 m[2].id, m[0].id, m[0].id, m[2].id);
	day_sql(T0, sql);
	snprintf(sql, sizeof sql, "pd_xid(created, xid) = '%s'", m[1].id);
	flip_blob(T0, "profiles", "block", sql, 12);
	st = open_store();
	struct pd_profile *p = NULL;
	int rc = pd_store_get(st, m[0].id, &p, &err);
	assert_int_equal(rc, PD_EIO);
	assert_null(p);
	assert_non_null(strstr(err.msg, "profd-20251129.db"));
	assert_non_null(strstr(err.msg, m[0].id));
	assert_non_null(strstr(err.msg, "checksum mismatch"));
	/* the day is quarantined now: every read of it fails, clearly */
	assert_int_equal(pd_store_get(st, m[2].id, &p, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "profd-20251129.db"));
	struct pd_store_health h;
	pd_store_health(st, &h);
	assert_int_equal(h.nquarantined, 1);
	assert_string_equal(h.quarantined[0].file, "profd-20251129.db");
	struct pd_store_stats ss;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.quarantined, 1);
	/* the other day answers; a range over both says which day it skipped */
	assert_int_equal(pd_store_get(st, m[3].id, &p, &err), 0);
	pd_profile_free(p);
	struct pd_merge_range q = {"svc", "cpu", T0, T0 + 2 * DAY - 1, 0, true};
	struct pd_merge_info info;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), 0);
	assert_non_null(p);
	assert_int_equal(info.profiles, 1);
	assert_true(info.skipped.partial);
	assert_int_equal(info.skipped.n, 1);
	assert_int_equal(info.skipped.days[0], T0 / DAY);
	pd_profile_free(p);
	struct pd_fn_totals ft;
	assert_int_equal(pd_store_fn_totals(st, &q, &ft, &info, &err), 0);
	assert_int_equal(info.profiles, 1);
	assert_true(info.skipped.partial);
	pd_fn_totals_free(&ft);
	pd_store_close(st);
}

static void count_report(void *ctx, const char *file, const char *what)
{
	(void)what;
	size_t *n = ctx;
	if (strstr(file, "profd-"))
		(*n)++;
}

static char last_what[1024];
static void last_report(void *ctx, const char *file, const char *what)
{
	count_report(ctx, file, what);
	snprintf(last_what, sizeof last_what, "%s", what);
}

/* What store check reports over tmpdir's day files: their number, the
 * last one in last_what. */
static size_t check_reports(void)
{
	struct pd_store_check ck;
	struct pd_err err;
	size_t n = 0;
	assert_int_equal(pd_store_check_dir(tmpdir, last_report, &n, &ck, &err), 0);
	return n;
}

/* With PD_WRITE_SEEDS=DIR: the blobs of the day file of T0 as seeds of
 * tests/fuzz/fuzz_storeblob.c (byte 0 = decoder, then the payload; framed
 * blobs as they are stored, byte 0 = 3, byte 1 = decoder, seed 0 frames
 * made again so the frame check passes). */
static void write_seeds(void)
{
	const char *dir = getenv("PD_WRITE_SEEDS");
	if (!dir)
		return;
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	static const char *const q[] = {"SELECT header, 0 FROM profiles WHERE length(header) > 0",
					"SELECT block, 1 FROM profiles",
					"SELECT header, 0 FROM rollups WHERE profiles > 0",
					"SELECT block, 1 FROM rollups WHERE profiles > 0",
					"SELECT fns, 2 FROM rollups WHERE profiles > 0"};
	int k = 0;
	for (size_t i = 0; i < ARRAY_LEN(q); i++) {
		sqlite3_stmt *st;
		assert_int_equal(sqlite3_prepare_v2(db, q[i], -1, &st, NULL), SQLITE_OK);
		while (sqlite3_step(st) == SQLITE_ROW) {
			const uint8_t *b = sqlite3_column_blob(st, 0);
			size_t n = (size_t)sqlite3_column_bytes(st, 0);
			int which = sqlite3_column_int(st, 1);
			assert_true(n > PD_BLOB_FRAME && b[0] == PD_BLOB_MAGIC);
			char f[600];
			/* the payload alone */
			snprintf(f, sizeof f, "%s/seed-%02d", dir, k++);
			FILE *o = fopen(f, "wb");
			assert_non_null(o);
			fputc(which, o);
			fwrite(b + PD_BLOB_FRAME, 1, n - PD_BLOB_FRAME, o);
			fclose(o);
			/* framed with seed 0 */
			struct pd_buf fb = PD_BUF_INIT(0);
			assert_int_equal(pd_blob_begin(&fb), 0);
			assert_int_equal(pd_buf_append(&fb, b + PD_BLOB_FRAME, n - PD_BLOB_FRAME), 0);
			pd_blob_seal(&fb, 0, 0);
			snprintf(f, sizeof f, "%s/seed-%02d", dir, k++);
			o = fopen(f, "wb");
			assert_non_null(o);
			fputc(3, o);
			fputc(which, o);
			fwrite(fb.ptr, 1, fb.len, o);
			fclose(o);
			pd_buf_free(&fb);
		}
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
}

static void test_check_and_legacy(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m[2];
	struct pd_err err;
	assert_int_equal(ingest_at(st, "svc", T0 + 3600000000000LL, 1, &m[0], &err), 0);
	assert_int_equal(ingest_at(st, "svc", T0 + 7200000000000LL, 2, &m[1], &err), 0);
	size_t built = 0;
	assert_int_equal(pd_store_rollup(st, T0 + DAY, 0, &built, &err), 0);
	assert_true(built >= 2);
	struct pd_profile *want;
	assert_int_equal(pd_store_get(st, m[0].id, &want, &err), 0);
	char *cw = canon(want);
	pd_profile_free(want);
	pd_store_close(st);
	write_seeds();
	size_t n = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ck.files, 1);
	assert_int_equal(ck.damaged_files, 0);
	assert_int_equal(ck.profiles, 2);
	assert_int_equal(ck.unchecked, 0);
	/* a row as written before checksums (no frame) still reads, unchecked
	 * (its block: the header column is empty, the header in the block) */
	char sql[512];
	snprintf(sql, sizeof sql,
		 "UPDATE profiles SET header = iif(length(header), substr(header, 10), header),"
		 " block = substr(block, 10) WHERE pd_xid(created, xid) = '%s';",
		 m[0].id);
	day_sql(T0, sql);
	st = open_store();
	struct pd_profile *got;
	assert_int_equal(pd_store_get(st, m[0].id, &got, &err), 0);
	char *cg = canon(got);
	assert_string_equal(cw, cg);
	free(cg);
	pd_profile_free(got);
	pd_store_close(st);
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(ck.damaged_files, 0);
	assert_int_equal(ck.unchecked, 1);
	/* a damaged rollup block and a damaged profile block: both named */
	flip_blob(T0, "rollups", "block", "profiles > 0", 20);
	snprintf(sql, sizeof sql, "pd_xid(created, xid) = '%s'", m[1].id);
	flip_blob(T0, "profiles", "block", sql, 11);
	n = 0;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(ck.damaged_files, 1);
	assert_true(n >= 2);
	/* a file of a newer profd: said once, its rows not read as damage */
	day_sql(T0, "PRAGMA user_version = 99");
	n = 0;
	assert_int_equal(pd_store_check_dir(tmpdir, last_report, &n, &ck, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ck.problems, 1);
	assert_contains(last_what, "written by a newer profd (schema 99");
	pd_meta_clear(&m[0]);
	pd_meta_clear(&m[1]);
	free(cw);
}

/* One profile of service svcD on each day D of [from, 4). */
static void one_per_day(int from)
{
	struct pd_store *st = open_store();
	struct pd_profile_meta m;
	struct pd_err err;
	for (int d = from; d < 4; d++) {
		char svc[16];
		snprintf(svc, sizeof svc, "svc%d", d);
		assert_int_equal(ingest_at(st, svc, T0 + d * DAY + 3600000000000LL, d, &m, &err), 0);
		pd_meta_clear(&m);
	}
	pd_store_close(st);
}

/* Day T0 is skipped and the others answer: nservices services are listed,
 * and svc1 (day 1) is found in [T0, to] with day T0 named as skipped. */
static void day0_skipped(struct pd_store *st, size_t nservices, int64_t to)
{
	struct pd_err err;
	char **v;
	size_t n;
	assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
	assert_int_equal(n, nservices);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	struct ids ids = {0};
	struct pd_store_query q = {"svc1", NULL, NULL, 0, T0, to, 0};
	struct pd_store_skipped sk = {0};
	assert_int_equal(pd_store_find_partial(st, &q, collect, &ids, &sk, &err), 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(sk.n, 1);
	assert_int_equal(sk.days[0], T0 / DAY);
}

/* Zero-length, garbage and page-1-damaged day files are quarantined; the
 * other days answer, every query says which days it skipped, and nothing
 * writes over a damaged file. */
static void test_quarantine_files(void **state)
{
	(void)state;
	one_per_day(0);
	struct pd_store *st;
	struct pd_profile_meta m;
	struct pd_err err;
	char path[512];
	day_file_path(T0, path, sizeof path); /* day 0: zero-length */
	assert_int_equal(truncate(path, 0), 0);
	day_file_path(T0 + DAY, path, sizeof path); /* day 1: garbage */
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	uint8_t junk[8192];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (uint8_t)rnd();
	assert_int_equal(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
	close(fd);
	day_file_path(T0 + 2 * DAY, path, sizeof path); /* day 2: page 1 (the schema) damaged */
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	memset(junk, 0xff, 3000);
	assert_int_equal(pwrite(fd, junk, 3000, 100), 3000);
	close(fd);

	st = open_store();
	char **v;
	size_t n;
	assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0], "svc3");
	free(v[0]);
	free(v);
	struct pd_store_skipped sk = {0};
	pd_store_skipped_in(st, INT64_MIN, INT64_MAX, &sk);
	assert_int_equal(sk.n, 3);
	for (int d = 0; d < 3; d++)
		assert_int_equal(sk.days[d], T0 / DAY + d);
	struct ids ids = {0};
	struct pd_store_query q = {"svc3", NULL, NULL, 0, T0, T0 + 4 * DAY, 0};
	struct pd_store_skipped fsk = {0};
	assert_int_equal(pd_store_find_partial(st, &q, collect, &ids, &fsk, &err), 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(fsk.n, 3);
	struct pd_store_health h;
	pd_store_health(st, &h);
	assert_int_equal(h.nquarantined, 3);
	assert_false(h.cannot_write);
	/* a write to a damaged day is refused; the file is left as it is */
	assert_int_equal(ingest_at(st, "svc0", T0 + 7200000000000LL, 9, &m, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "profd-20251129.db"));
	struct stat sb;
	day_file_path(T0, path, sizeof path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	struct pd_merge_range mq = {"svc3", "cpu", T0, T0 + 4 * DAY - 1, 0, false};
	struct pd_merge_info info;
	struct pd_profile *p;
	assert_int_equal(pd_store_merge_range(st, &mq, &p, &info, &err), 0);
	assert_non_null(p);
	assert_int_equal(info.skipped.n, 3);
	pd_profile_free(p);
	/* the file removed (by an operator): the day is usable again */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(ingest_at(st, "svc0", T0 + 7200000000000LL, 9, &m, &err), 0);
	pd_meta_clear(&m);
	pd_store_health(st, &h);
	assert_int_equal(h.nquarantined, 2);
	pd_store_close(st);
	size_t nrep = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &nrep, &ck, &err), 0);
	assert_int_equal(ck.files, 4);
	assert_int_equal(ck.damaged_files, 2);
}

/* A directory where a day file goes is quarantined like a damaged file:
 * the other days answer (services, find, stats, rollups; before, each of
 * them failed as a whole), store check names it, and retention drops the
 * days around it (before, it stopped at the first file it could not
 * remove). */
static void test_quarantine_nonfile(void **state)
{
	(void)state;
	one_per_day(1);
	struct pd_store *st;
	struct pd_profile_meta m;
	struct pd_err err;
	char path[512];
	day_file_path(T0, path, sizeof path); /* day 0: a directory */
	assert_int_equal(mkdir(path, 0755), 0);
	st = open_store();
	day0_skipped(st, 3, T0 + 4 * DAY);
	struct pd_store_stats ss;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.profiles, 3);
	assert_int_equal(ss.quarantined, 1);
	size_t built;
	assert_int_equal(pd_store_rollup(st, T0 + 4 * DAY, 0, &built, &err), 0);
	assert_int_equal(ingest_at(st, "svc0", T0 + 7200000000000LL, 9, &m, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "not a regular file"));
	/* retention: the directory cannot be removed (said), the next two days are */
	size_t dropped;
	assert_int_equal(pd_store_retain(st, T0 + 3 * DAY, &dropped, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "profd-20251129.db"));
	assert_int_equal(dropped, 2);
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.profiles, 1);
	pd_store_close(st);
	size_t nrep = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, last_report, &nrep, &ck, &err), 0);
	assert_int_equal(ck.damaged_files, 1);
	assert_contains(last_what, "not a regular file");
	assert_int_equal(rmdir(path), 0);
}

/* A day file of a newer profd (downgrade) is not read, and the other days
 * answer: every query touching it failed (services, find, stats: all days). */
static void test_newer_day_skipped(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m;
	struct pd_err err;
	for (int d = 0; d < 3; d++) {
		char svc[16];
		snprintf(svc, sizeof svc, "svc%d", d);
		assert_int_equal(ingest_at(st, svc, T0 + d * DAY + 3600000000000LL, d, &m, &err), 0);
		pd_meta_clear(&m);
	}
	pd_store_close(st);
	day_sql(T0, "PRAGMA user_version = 99");
	st = open_store();
	day0_skipped(st, 2, T0 + 3 * DAY);
	struct pd_store_health h;
	pd_store_health(st, &h);
	assert_int_equal(h.nquarantined, 1);
	assert_contains(h.quarantined[0].reason, "written by a newer profd (schema 99");
	assert_int_equal(ingest_at(st, "svc0", T0 + 7200000000000LL, 9, &m, &err), PD_EIO);
	assert_contains(err.msg, "newer profd");
	assert_null(strstr(err.msg, "damaged"));
	pd_store_close(st);
}

/* 20 uploads to day T0 by a child that exits without closing the store:
 * the commits stay in the day's -wal, whose path goes to wal. */
static void crash_with_wal(char *wal, size_t n)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pd_store *cs;
		struct pd_err err;
		struct pd_profile_meta m;
		if (pd_store_open_sqlite(tmpdir, NULL, &cs, &err))
			_exit(2);
		for (int i = 0; i < 20; i++)
			if (ingest_at(cs, "w", T0 + 3600000000000LL + i * 1000000000LL, i, &m, &err))
				_exit(3);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char path[512];
	day_file_path(T0, path, sizeof path);
	snprintf(wal, n, "%s-wal", path);
}

/* A -wal left by a crash and damaged in its middle: SQLite's recovery
 * stops at the bad frame and drops every commit after it without a word
 * (acknowledged profiles gone, store check clean). The day is quarantined
 * instead, its files left as they are, and store check names the -wal. */
static void test_wal_damaged(void **state)
{
	(void)state;
	char wal[600];
	crash_with_wal(wal, sizeof wal);
	struct stat sb;
	assert_int_equal(stat(wal, &sb), 0);
	int fd = open(wal, O_RDWR);
	assert_true(fd >= 0);
	uint8_t junk[64];
	memset(junk, 0x5a, sizeof junk);
	assert_int_equal(pwrite(fd, junk, sizeof junk, sb.st_size / 2), (ssize_t)sizeof junk);
	close(fd);
	struct pd_err err;
	size_t nrep = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, last_report, &nrep, &ck, &err), 0);
	assert_int_equal(ck.damaged_files, 1);
	assert_contains(last_what, "-wal is damaged");
	struct pd_store *st = open_store();
	struct ids ids = {0};
	struct pd_store_query q = {"w", NULL, NULL, 0, T0, T0 + DAY - 1, 0};
	struct pd_store_skipped sk = {0};
	assert_int_equal(pd_store_find_partial(st, &q, collect, &ids, &sk, &err), 0);
	assert_int_equal(ids.n, 0);
	assert_int_equal(sk.n, 1);
	pd_store_close(st);
	assert_int_equal(stat(wal, &sb), 0); /* kept for a person to look at */
}

/* A frame that fails its checksum inside the last transaction of the -wal,
 * before its commit frame, is what a power loss during that (unsynced,
 * never acknowledged) commit leaves: SQLite rightly drops that transaction,
 * and the day is not damaged. Only a commit after that one would be a lost
 * acknowledged commit (test_wal_damaged). */
static void test_wal_torn_last(void **state)
{
	(void)state;
	char wal[600];
	crash_with_wal(wal, sizeof wal);
	int fd = open(wal, O_RDWR);
	assert_true(fd >= 0);
	uint8_t h[32], fh[24];
	assert_int_equal(pread(fd, h, 32, 0), 32);
	size_t psz = (size_t)h[8] << 24 | (size_t)h[9] << 16 | (size_t)h[10] << 8 | h[11];
	off_t prev = -1, last = -1; /* the offsets of the last two commit frames */
	for (off_t o = 32; pread(fd, fh, 24, o) == 24; o += 24 + (off_t)psz)
		if (memcmp(fh + 8, h + 16, 8) == 0 && (fh[4] | fh[5] | fh[6] | fh[7])) {
			prev = last;
			last = o;
		}
	assert_true(prev > 0 && last > prev + 24 + (off_t)psz); /* the last transaction has 2+ frames */
	uint8_t junk[64];
	memset(junk, 0x5a, sizeof junk);
	assert_int_equal(pwrite(fd, junk, sizeof junk, prev + 24 + (off_t)psz + 24 + 100), (ssize_t)sizeof junk);
	close(fd);
	char why[300];
	assert_int_equal(pd_wal_damaged(wal, why, sizeof why), 0);
	struct pd_err err;
	size_t nrep = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, last_report, &nrep, &ck, &err), 0);
	assert_int_equal(ck.damaged_files, 0);
	struct pd_store *st = open_store();
	struct ids ids = {0};
	struct pd_store_query q = {"w", NULL, NULL, 0, T0, T0 + DAY - 1, 0};
	struct pd_store_skipped sk = {0};
	assert_int_equal(pd_store_find_partial(st, &q, collect, &ids, &sk, &err), 0);
	assert_int_equal(ids.n, 19); /* the torn last commit is dropped, every other one kept */
	assert_int_equal(sk.n, 0);
	pd_store_close(st);
}

/* A crash while a new day file is being made (here: the process killed,
 * SIGXFSZ, at its first write) leaves no zero-length day file: that one
 * was quarantined at the next start (a day emptied looks the same), so
 * the day refused every upload until an operator removed it. */
static void test_day_file_crash(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pd_store *cs;
		struct pd_err err;
		struct pd_profile_meta m;
		if (pd_store_open_sqlite(tmpdir, NULL, &cs, &err))
			_exit(2);
		struct rlimit rl = {1, 1}; /* the first byte written to a file kills */
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(3);
		ingest_at(cs, "c", T0 + 3600000000000LL, 1, &m, &err);
		_exit(4);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGXFSZ);
	struct pd_store *st = open_store();
	struct pd_profile_meta m;
	struct pd_err err;
	if (ingest_at(st, "c", T0 + 3600000000000LL, 1, &m, &err))
		fail_msg("ingest after the crash: %s", err.msg);
	pd_meta_clear(&m);
	struct pd_store_health h;
	pd_store_health(st, &h);
	assert_int_equal(h.nquarantined, 0);
	pd_store_close(st);
	size_t nrep = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &nrep, &ck, &err), 0);
	assert_int_equal(ck.files, 1);
	assert_int_equal(ck.damaged_files, 0);
}

/* Open day files are bounded (LRU): many days cost a bounded number of
 * file descriptors, and listing services does not open them all at once. */
static void test_open_partitions_bounded(void **state)
{
	(void)state;
	size_t fd00 = open_fds();
	struct pd_store *st = open_store();
	pd_store_sqlite_set_max_open(st, 4);
	size_t fd0 = open_fds();
	struct pd_err err;
	struct pd_profile_meta m;
	char first[PD_STORE_ID_LEN + 1] = "";
	for (int d = 0; d < 30; d++) {
		assert_int_equal(ingest_at(st, "svc", T0 + d * DAY + 1000000000LL, d, &m, &err), 0);
		if (!d)
			memcpy(first, m.id, sizeof first);
		pd_meta_clear(&m);
		assert_true(open_fds() <= fd0 + 4 * 6);
	}
	char **v;
	size_t n;
	assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	free(v[0]);
	free(v);
	assert_true(open_fds() <= fd0 + 4 * 6);
	struct ids ids = find(st, "svc", "cpu", NULL, 0, T0, T0 + 40 * DAY, 0);
	assert_int_equal(ids.n, 30);
	struct pd_merge_range q = {"svc", "cpu", T0, T0 + 30 * DAY, 0, true};
	struct pd_merge_info info;
	struct pd_profile *p;
	assert_int_equal(pd_store_merge_range(st, &q, &p, &info, &err), 0);
	assert_int_equal(info.profiles, 30);
	assert_false(info.skipped.partial);
	pd_profile_free(p);
	assert_true(open_fds() <= fd0 + 4 * 6);
	struct pd_store_stats ss;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.partitions, 30);
	assert_int_equal(ss.profiles, 30);
	assert_true(ss.open_partitions <= 4);
	assert_int_equal(pd_store_get(st, first, &p, &err), 0); /* a closed day reopens */
	pd_profile_free(p);
	pd_store_close(st);
	assert_int_equal(open_fds(), fd00);
}

/* FNV-1a 64 of n bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* Edge cases of the content hashes: a mapping without a build id (keyed by
 * its file) and one with, a location without a mapping, one with inlined
 * lines and columns (folded), one without lines, an empty stack, system
 * names, start lines, numeric labels with units, negative values. */
static struct pd_buf make_edgy(int64_t t)
{
	struct pb p;
	pb_init(&p);
	pb_cpu_header(&p, 10000000);
	tb_mapping(&p.b, 1, 0x7f0000000000, 0x7f0000012345, 0x1000, pb_s(&p, "/lib/libc.so.6"), 0,
		   TB_HAS_FUNCTIONS | TB_HAS_LINE_NUMBERS);
	tb_mapping(&p.b, 2, 0x400000, 0x480000, 0, pb_s(&p, "/bin/app"), pb_s(&p, "bid-2"), TB_HAS_INLINE_FRAMES);
	tb_function(&p.b, 1, pb_s(&p, "runtime.mallocgc"), pb_s(&p, "runtime.mallocgc.abi0"), pb_s(&p, "malloc.go"), 12);
	tb_function(&p.b, 2, pb_s(&p, "main.inl"), 0, pb_s(&p, "main.go"), -3);
	tb_function(&p.b, 3, pb_s(&p, "main.outer"), 0, pb_s(&p, "main.go"), 40);
	struct tb_line l1 = {1, 77, 0};
	tb_location(&p.b, 1, 0, 0x1234, &l1, 1, false);
	struct tb_line l2[2] = {{2, 5, 9}, {3, 44, 2}};
	tb_location(&p.b, 2, 2, 0x401010, l2, 2, true);
	tb_location(&p.b, 3, 1, 0x7f0000000042, NULL, 0, false);
	uint64_t s1[3] = {1, 2, 3}, s2[1] = {3};
	int64_t v1[2] = {3, -30000000}, v2[2] = {1, 10000000}, v3[2] = {2, 0};
	struct pb_label lb[3] = {{"bytes", NULL, 4096, "bytes"}, {"handler", "login", 0, NULL}, {"n", NULL, -7, NULL}};
	pb_sample(&p, s1, 3, v1, 2, lb, 3);
	pb_sample(&p, s2, 1, v2, 2, lb + 1, 1);
	pb_sample(&p, NULL, 0, v3, 2, NULL, 0);
	tb_int(&p.b, PF_TIME_NANOS, t);
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 6, &out, &err), 0);
	pd_profile_free(q);
	pb_free(&p);
	return out;
}

/* Blocks of a series are compressed against the series' previous one
 * (codec.h: chains). Every profile reads back as it was sent: through the
 * chain, after a base is removed (its block is kept in `bases`), after the
 * removed last row's pk went to a later profile, cold after a reopen, and
 * with the chain longer than a writer makes it (a fresh start every
 * PD_CHAIN_WRITE blocks). Scrapes that repeat cost a fraction of the
 * first. A damaged base is damage, never another profile's values. */
static int64_t day_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

/* day_int on the file of the day of t, opened for this one query */
static int64_t day_q(int64_t t, const char *sql)
{
	char path[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	int64_t v = day_int(db, sql);
	sqlite3_close(db);
	return v;
}

static void chain_check(struct pd_store *st, char (*ids)[PD_STORE_ID_LEN + 1], char **want, int n)
{
	for (int i = 0; i < n; i++) {
		struct pd_profile *got;
		struct pd_err err;
		if (!want[i]) {
			assert_int_equal(pd_store_get(st, ids[i], &got, &err), PD_ENOTFOUND);
			continue;
		}
		if (pd_store_get(st, ids[i], &got, &err))
			fail_msg("get %d (%s): %s", i, ids[i], err.msg);
		char *c = canon(got);
		if (strcmp(c, want[i]))
			fail_msg("profile %d: read back\n%s\nwant\n%s", i, c, want[i]);
		free(c);
		pd_profile_free(got);
	}
}

static void test_block_chains(void **state)
{
	(void)state;
	enum { N = 2 * PD_CHAIN_WRITE + 6, M = N + 2 };
	struct pd_store *st = open_store();
	static char ids[M][PD_STORE_ID_LEN + 1];
	char *want[M];
	struct pd_kv kv[1] = {{"pod", "p1"}};
	for (int i = 0; i < M; i++) {
		if (i == N) { /* remove the first (a base) and the last row (its pk is given again) */
			struct pd_err err;
			assert_int_equal(pd_store_remove(st, ids[0], &err), 0);
			assert_int_equal(pd_store_remove(st, ids[N - 1], &err), 0);
			free(want[0]), free(want[N - 1]);
			want[0] = want[N - 1] = NULL;
		}
		/* runs of repeats, then a change, as scrapes of a quiet target */
		struct pd_buf b = make_profile(T0 + (i + 1) * 1000000000LL, true, 1 + i / 8);
		struct pd_profile *orig;
		struct pd_err err;
		assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &orig, &err), 0);
		want[i] = canon(orig);
		pd_profile_free(orig);
		struct pd_profile_meta m;
		ingest(st, "chains", "heap", kv, 1, &b, &m);
		snprintf(ids[i], sizeof ids[i], "%s", m.id);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	chain_check(st, ids, want, M);
	/* a merge of ids in any order reads the chains in time order: the
	 * same answer for the ids reversed */
	{
		const char *fw[M], *bw[M];
		int k = 0;
		for (int i = 0; i < M; i++)
			if (want[i])
				fw[k] = ids[i], bw[k] = NULL, k++;
		for (int i = 0; i < k; i++)
			bw[i] = fw[k - 1 - i];
		struct pd_profile *a, *b;
		struct pd_err err;
		assert_int_equal(pd_store_merge(st, fw, (size_t)k, &a, &err), 0);
		assert_int_equal(pd_store_merge(st, bw, (size_t)k, &b, &err), 0);
		char *ca = canon(a), *cb = canon(b);
		assert_string_equal(ca, cb);
		assert_true(strlen(ca) > 0);
		free(ca), free(cb);
		pd_profile_free(a), pd_profile_free(b);
	}
	pd_store_close(st);
	/* what was written: chains, a fresh start every PD_CHAIN_WRITE, a
	 * removed base kept, repeats cheap */
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	int64_t based = day_int(db, "SELECT count(*) FROM profiles WHERE substr(block, 10, 2) <> x'0300'");
	int64_t alone = day_int(db, "SELECT count(*) FROM profiles WHERE substr(block, 10, 2) = x'0300'");
	assert_int_equal(based + alone, M - 2);
	assert_true(alone >= 2 && alone <= 1 + (M - 2) / (PD_CHAIN_WRITE - 1) + 1);
	assert_int_equal(day_int(db, "SELECT count(*) FROM bases"), 2);
	assert_true(day_int(db, "SELECT max(pk) FROM profiles") <= M - 1); /* a pk was given again */
	int64_t first = day_int(db, "SELECT length(block) FROM profiles WHERE substr(block, 10, 2) = x'0300'"
				    " ORDER BY pk LIMIT 1"),
		rest = day_int(db, "SELECT avg(length(block)) FROM profiles WHERE substr(block, 10, 2) <> x'0300'");
	/* their zstd frames (these blocks are tiny: frame 9 bytes, version and
	 * base 2, base hash 8) */
	if ((rest - 19) * 2 > first - 11)
		fail_msg("a repeated scrape costs %lld bytes, the first %lld", (long long)rest, (long long)first);
	sqlite3_close(db);
	/* cold: no cache of bases, no series */
	st = open_store();
	chain_check(st, ids, want, M);
	pd_store_close(st);
	size_t n = 0;
	struct pd_store_check ck;
	struct pd_err err;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ck.profiles, M - 2);
	/* a damaged base: its dependants are damage, the day quarantined */
	day_sql(T0, "UPDATE bases SET block = substr(block, 1, 20) || x'00' || substr(block, 22)");
	st = open_store();
	struct pd_profile *got;
	int rc = pd_store_get(st, ids[1], &got, &err);
	assert_int_equal(rc, PD_EIO);
	assert_contains(err.msg, "damaged");
	pd_store_close(st);
	n = 0;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_true(n >= 1);
	for (int i = 0; i < M; i++)
		free(want[i]);
}

/* A day file replaced while its partition was closed (the LRU closed it;
 * an operator put another file there) has other rows under the same
 * numbers: the next block of a series must not be based on the block the
 * store remembers from the file before. */
static void test_chain_file_replaced(void **state)
{
	(void)state;
	struct pd_kv kv[1] = {{"pod", "p1"}};
	struct pd_profile_meta m;
	char path[512], other[600], cmd[2400];
	day_file_path(T0, path, sizeof path);
	snprintf(other, sizeof other, "%s.other", path);
	/* the other file: one unrelated profile at row 1 */
	struct pd_store *st = open_store();
	struct pd_buf b = make_profile(T0 + 5000000000LL, true, 9);
	ingest(st, "else", "heap", NULL, 0, &b, &m);
	pd_meta_clear(&m);
	pd_buf_free(&b);
	pd_store_close(st);
	snprintf(cmd, sizeof cmd, "mv '%s' '%s' && rm -f '%s-wal' '%s-shm'", path, other, path, path);
	assert_int_equal(system(cmd), 0);
	st = open_store();
	pd_store_sqlite_set_max_open(st, 1);
	b = make_profile(T0 + 1000000000LL, true, 1); /* row 1 of the day: the series' base */
	ingest(st, "chains", "heap", kv, 1, &b, &m);
	pd_meta_clear(&m);
	pd_buf_free(&b);
	for (int d = 1; d <= 2; d++) { /* two other days: the first day's partition is closed (2 kept open) */
		b = make_profile(T0 + d * DAY, true, 2);
		ingest(st, "chains", "heap", NULL, 0, &b, &m);
		pd_meta_clear(&m);
		pd_buf_free(&b);
	}
	snprintf(cmd, sizeof cmd, "cp '%s' '%s' && rm -f '%s-wal' '%s-shm'", other, path, path, path);
	assert_int_equal(system(cmd), 0);
	b = make_profile(T0 + 2000000000LL, true, 1);
	struct pd_profile *orig, *got;
	struct pd_err err;
	assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &orig, &err), 0);
	ingest(st, "chains", "heap", kv, 1, &b, &m);
	pd_buf_free(&b);
	if (pd_store_get(st, m.id, &got, &err))
		fail_msg("the upload after the file was replaced: %s", err.msg);
	char *co = canon(orig), *cg = canon(got);
	assert_string_equal(co, cg);
	free(co), free(cg);
	pd_profile_free(orig), pd_profile_free(got);
	pd_meta_clear(&m);
	pd_store_close(st);
	/* it was the other file that the store wrote to */
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT service FROM profiles WHERE pk = 1", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "else");
	sqlite3_finalize(q);
	sqlite3_close(db);
	unlink(other);
}

/* pd_block_fetch over a day file opened by a test */
static int golden_fetch(void *ctx, int64_t pk, int k, struct pd_buf *out, struct pd_err *err)
{
	bool frame;
	return pd_block_fetch_stmt(ctx, pk, k, out, &frame, err);
}

static const int64_t *golden_vals(const void *ctx, size_t i)
{
	const int64_t *const *r = ctx;
	return r[0] + i * (size_t)r[1][0] + 2;
}

/* rows (nr of 2 + nv) encoded again by pd_enc_rows with o (NULL:
 * version 1) onto out */
static void golden_encode(ZSTD_CCtx *z, const int64_t *rows, size_t nr, uint32_t nv, const struct pd_blkopt *o,
			  struct pd_buf *out)
{
	int64_t *stk = malloc((nr + 1) * sizeof *stk), *ls = malloc((nr + 1) * sizeof *ls), w = 2 + nv;
	for (size_t i = 0; i < nr; i++)
		stk[i] = rows[i * (size_t)w], ls[i] = rows[i * (size_t)w + 1];
	const int64_t *ctx[2] = {rows, &w};
	struct pd_err err;
	if (pd_enc_rows(z, nr, nv, stk, ls, golden_vals, ctx, o, out, &err))
		fail_msg("encode: %s", err.msg);
	free(stk);
	free(ls);
}

/* The version 1 payload (codec.h) of a stored block: its rows decoded
 * (bases resolved) and encoded again the old way, bit for bit what the
 * store wrote before version 2. A version 3 block's header payload is
 * appended to hdr first (the header column's payload before version 3). */
static void golden_v1(sqlite3 *db, const void *blob, size_t bn, const char *xid, struct pd_buf *hdr,
		      struct pd_buf *out)
{
	sqlite3_stmt *fq;
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT pd_xid(created, xid), block FROM profiles WHERE pk = ?1 UNION ALL"
					    " SELECT xid, block FROM bases WHERE pk = ?1",
					    -1, &fq, NULL),
			 SQLITE_OK);
	static struct pd_rawcache rc;
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_CCtx *z = ZSTD_createCCtx();
	const uint8_t *pl;
	size_t pn, rn, nr;
	bool checked;
	struct pd_err err;
	assert_int_equal(pd_blob_open(blob, bn, pd_blob_seed(xid, strlen(xid), PD_BLOB_BLOCK), &pl, &pn, &checked, &err),
			 0);
	uint8_t *raw;
	int ver;
	int64_t *rows;
	uint32_t nv;
	if (pd_block_resolve(d, &rc, pl, pn, golden_fetch, fq, &raw, &rn, &ver, &err) ||
	    pd_block_rows(raw, rn, ver, &rows, &nr, &nv, &err))
		fail_msg("%s: %s", xid, err.msg);
	if (ver == 3) {
		const uint8_t *hp;
		size_t hn;
		if (pd_block_header(raw, rn, ver, &hp, &hn, &err))
			fail_msg("%s: %s", xid, err.msg);
		assert_int_equal(pd_buf_append(hdr, hp, hn), 0);
	}
	out->len = 0;
	golden_encode(z, rows, nr, nv, NULL, out);
	pd_rawcache_put(&rc, pd_block_raw_hash(raw, rn), raw, rn);
	free(rows);
	ZSTD_freeDCtx(d);
	ZSTD_freeCCtx(z);
	sqlite3_finalize(fq);
}

/* The content ids (h) and stored contents of every symbol, and the
 * payloads of the profiles' headers (in their column, or since version 3
 * in the block) and blocks, of a fixed set of profiles are what they
 * always were: the h column of existing day files
 * depends on the hashing, so a refactoring of ingest must not change a
 * bit of it (issue 13). The digest was taken from the code before the
 * store core was split out of the SQLite backend. Blocks are written in
 * version 2 since (columns, chains: codec.h): their rows, encoded again
 * in version 1, must be the blocks of then, bit for bit. The headers have
 * since had the profile's own copies of its mappings appended (pd_smap;
 * headers without them are read as before): the digest was taken again
 * then, the symbols' rows unchanged. */
static void test_content_ids_stable(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_buf b[5] = {make_profile(T0 + 1000000000LL, false, 1), make_profile(T0 + 2000000000LL, true, 2),
			      make_profile(T0 + 3000000000LL, false, 3), PD_BUF_INIT(0), make_edgy(T0 + 5000000000LL)};
	struct pb_label lb[2] = {{"b", "2", 0, NULL}, {"a", "1", 7, "bytes"}};
	b[3] = make_labelled(T0 + 4000000000LL, lb, 2);
	const char *types[5] = {"cpu", "heap", NULL, "cpu", "cpu"};
	for (int i = 0; i < 5; i++) {
		struct pd_profile_meta m;
		struct pd_kv kv[1] = {{"zone", "z1"}};
		ingest(st, "golden", types[i], kv, 1, &b[i], &m);
		pd_meta_clear(&m);
		pd_buf_free(&b[i]);
	}
	pd_store_close(st);
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	static const char *const sql[] = {
		"SELECT seq, h, c FROM strings ORDER BY seq",
		"SELECT seq, h, c FROM functions ORDER BY seq",
		"SELECT seq, h, c FROM mappings ORDER BY seq",
		"SELECT seq, h, c FROM locations ORDER BY seq",
		"SELECT seq, h, c FROM stacks ORDER BY seq",
		"SELECT seq, h, c FROM labelsets ORDER BY seq",
		"SELECT 0, nsamples, substr(header, 10), block, pd_xid(created, xid) FROM profiles ORDER BY created",
		"SELECT 0, 0, service || type || hour || gen FROM hour_gen ORDER BY hour, type",
	};
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t rows = 0;
	for (size_t i = 0; i < sizeof sql / sizeof *sql; i++) {
		sqlite3_stmt *q;
		assert_int_equal(sqlite3_prepare_v2(db, sql[i], -1, &q, NULL), SQLITE_OK);
		while (sqlite3_step(q) == SQLITE_ROW) {
			int64_t v[2] = {sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1)};
			h = fnv(h, v, sizeof v);
			if (sqlite3_column_count(q) == 5) { /* a profile: header, then its block's rows in version 1 */
				struct pd_buf hb = PD_BUF_INIT(0), v1 = PD_BUF_INIT(0);
				assert_int_equal(pd_buf_append(&hb, sqlite3_column_blob(q, 2),
							       (size_t)sqlite3_column_bytes(q, 2)), 0);
				golden_v1(db, sqlite3_column_blob(q, 3), (size_t)sqlite3_column_bytes(q, 3),
					  (const char *)sqlite3_column_text(q, 4), &hb, &v1);
				assert_int_equal(pd_buf_append(&hb, v1.ptr, v1.len), 0);
				h = fnv(h, hb.ptr, hb.len);
				pd_buf_free(&hb);
				pd_buf_free(&v1);
			} else
				h = fnv(h, sqlite3_column_blob(q, 2), (size_t)sqlite3_column_bytes(q, 2));
			rows++;
		}
		sqlite3_finalize(q);
		h = fnv(h, "|", 1);
	}
	sqlite3_close(db);
	if (rows != 94 || h != 0x9a26daadeb76181eULL)
		fail_msg("content digest %016llx over %zu rows, want 9a26daadeb76181e over 94", (unsigned long long)h, rows);
}

/* Rewrite profile id's row (its block without a base) as a store before
 * version 3 wrote it: the header payload in its own framed column, the
 * rows in a version 2 block. Or damage it: the header in the column and
 * still in the (version 3) block (both), or in neither (the column left
 * empty, a version 2 block): what no store writes. */
enum v2how { V2_LEGACY, V2_BOTH, V2_NEITHER };
static void row_to_v2(const char *id, enum v2how how)
{
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	sqlite3_stmt *q, *up;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT block FROM profiles WHERE pd_xid(created, xid) = ?1", -1, &q,
					    NULL),
			 SQLITE_OK);
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	const uint8_t *pl, *hp;
	size_t pn, rn, hn, nr;
	bool checked;
	struct pd_err err;
	assert_int_equal(pd_blob_open(sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0),
				      pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), &pl, &pn, &checked, &err),
			 0);
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_CCtx *z = ZSTD_createCCtx();
	uint8_t *raw;
	int ver;
	int64_t *rows;
	uint32_t nv;
	assert_int_equal(pd_block_raw(d, pl, pn, NULL, 0, &raw, &rn, &ver, &err), 0);
	assert_int_equal(ver, 3);
	assert_int_equal(pd_block_header(raw, rn, ver, &hp, &hn, &err), 0);
	assert_int_equal(pd_block_rows(raw, rn, ver, &rows, &nr, &nv, &err), 0);
	struct pd_buf hb = PD_BUF_INIT(0), bb = PD_BUF_INIT(0);
	assert_int_equal(pd_blob_begin(&hb), 0);
	assert_int_equal(pd_buf_append(&hb, hp, hn), 0);
	pd_blob_seal(&hb, 0, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER));
	if (how == V2_BOTH) /* keep the version 3 block */
		assert_int_equal(pd_buf_append(&bb, sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0)), 0);
	else {
		assert_int_equal(pd_blob_begin(&bb), 0);
		golden_encode(z, rows, nr, nv, &(struct pd_blkopt){0}, &bb);
		assert_int_equal(bb.ptr[PD_BLOB_FRAME], PD_BLOCK_V2);
		pd_blob_seal(&bb, 0, pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK));
	}
	sqlite3_finalize(q);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "UPDATE profiles SET header = ?1, block = ?2 WHERE pd_xid(created, xid) = ?3",
					    -1, &up, NULL),
			 SQLITE_OK);
	sqlite3_bind_blob(up, 1, hb.ptr, how == V2_NEITHER ? 0 : (int)hb.len, SQLITE_STATIC);
	sqlite3_bind_blob(up, 2, bb.ptr, (int)bb.len, SQLITE_STATIC);
	sqlite3_bind_text(up, 3, id, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(up), SQLITE_DONE);
	sqlite3_finalize(up);
	sqlite3_close(db);
	free(rows), free(raw);
	pd_buf_free(&hb), pd_buf_free(&bb);
	ZSTD_freeDCtx(d);
	ZSTD_freeCCtx(z);
}

/* Profiles are written with their header in the sample block (codec.h:
 * version 3), the header column empty, and read back as sent; a row as a
 * store of schema 2 wrote it (header column, version 2 block) still reads
 * and checks clean in a day file of schema 2, raised on open; a
 * header in both places, or in neither, is damage, said. */
static void test_header_in_block(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m[3];
	struct pd_err err;
	const char *svc[3] = {"a", "b", "c"}; /* a series each: no block has a base */
	char *want[3];
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ingest_at(st, svc[i], T0 + 3600000000000LL * (i + 1), 30 + i, &m[i], &err), 0);
		struct pd_profile *p;
		assert_int_equal(pd_store_get(st, m[i].id, &p, &err), 0);
		want[i] = canon(p);
		pd_profile_free(p);
	}
	pd_store_close(st);
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM profiles WHERE length(header) = 0"
				     " AND substr(block, 10, 2) = x'0300'"),
			 3);
	assert_int_equal(day_int(db, "PRAGMA user_version"), PD_DAYFILE_SCHEMA);
	sqlite3_close(db);
	/* b as schema 2 wrote it, in a file of schema 2 */
	row_to_v2(m[1].id, V2_LEGACY);
	day_sql(T0, "PRAGMA user_version = 2");
	size_t n = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ck.profiles, 3);
	st = open_store();
	for (int i = 0; i < 3; i++) {
		struct pd_profile *p;
		if (pd_store_get(st, m[i].id, &p, &err))
			fail_msg("get %d: %s", i, err.msg);
		char *c = canon(p);
		assert_string_equal(c, want[i]);
		free(c);
		pd_profile_free(p);
	}
	pd_store_close(st);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "PRAGMA user_version"), PD_DAYFILE_SCHEMA);
	sqlite3_close(db);
	/* c's header in its column and in its block, a's in neither: damage,
	 * said by check and by reads */
	row_to_v2(m[2].id, V2_BOTH);
	row_to_v2(m[0].id, V2_NEITHER);
	n = 0;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ck.damaged_files, 1);
	st = open_store();
	struct pd_profile *p = NULL;
	assert_int_equal(pd_store_get(st, m[2].id, &p, &err), PD_EIO);
	assert_null(p);
	assert_non_null(strstr(err.msg, m[2].id));
	assert_non_null(strstr(err.msg, "in its column and in its block"));
	pd_store_close(st);
	st = open_store(); /* a fresh store: no quarantine yet */
	assert_int_equal(pd_store_get(st, m[0].id, &p, &err), PD_EIO);
	assert_null(p);
	assert_non_null(strstr(err.msg, m[0].id));
	assert_non_null(strstr(err.msg, "not in its sample block"));
	pd_store_close(st);
	for (int i = 0; i < 3; i++)
		free(want[i]);
}

/* want[i] = canon of profile m[i], read back, for i in [from, to) */
static void read_canon(struct pd_store *st, const struct pd_profile_meta *m, char **want, int from, int to)
{
	for (int i = from; i < to; i++) {
		struct pd_profile *p;
		struct pd_err err;
		if (pd_store_get(st, m[i].id, &p, &err))
			fail_msg("get %d: %s", i, err.msg);
		want[i] = canon(p);
		pd_profile_free(p);
	}
}

/* A new day file has 2 KiB pages (sqlite_part.c, day_make: half the
 * fixed cost of its one-page tables, and large blocks end in a half-empty
 * overflow page of 2 KiB, not 4); a day file made with 4 KiB pages by an
 * earlier profd keeps them, takes new profiles and reads and checks clean. */
static void test_page_size(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_profile_meta m[4];
	struct pd_err err;
	char *want[4];
	assert_int_equal(ingest_at(st, "a", T0 + 1000000000LL, 40, &m[0], &err), 0);
	assert_int_equal(ingest_at(st, "b", T0 + 2000000000LL, 41, &m[1], &err), 0);
	read_canon(st, m, want, 0, 2); /* as read from the file of 2 KiB pages */
	pd_store_close(st);
	assert_int_equal(day_q(T0, "PRAGMA page_size"), 2048);
	assert_int_equal(day_q(T0, "PRAGMA auto_vacuum"), 1);
	/* the file as a profd with 4 KiB pages made it */
	day_sql(T0, "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096; VACUUM; PRAGMA journal_mode=WAL");
	assert_int_equal(day_q(T0, "PRAGMA page_size"), 4096);
	st = open_store();
	assert_int_equal(ingest_at(st, "a", T0 + 3000000000LL, 42, &m[2], &err), 0);
	assert_int_equal(ingest_at(st, "c", T0 + 4000000000LL, 43, &m[3], &err), 0);
	read_canon(st, m, want, 2, 4);
	pd_store_close(st);
	size_t n = 0;
	struct pd_store_check ck;
	assert_int_equal(pd_store_check_dir(tmpdir, count_report, &n, &ck, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ck.profiles, 4);
	assert_int_equal(day_q(T0, "PRAGMA page_size"), 4096);
	st = open_store(); /* read back after a restart: the same profiles */
	char ids[4][PD_STORE_ID_LEN + 1];
	for (int i = 0; i < 4; i++)
		memcpy(ids[i], m[i].id, sizeof ids[i]);
	chain_check(st, ids, want, 4);
	pd_store_close(st);
	for (int i = 0; i < 4; i++)
		free(want[i]);
}

/* The symbols of the day of t, and whether any of its symbol tables has
 * an index (on h: files before schema 3); no h twice. */
static int64_t day_symbols(int64_t t, bool *indexed)
{
	char path[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	int64_t n = day_int(db, "SELECT (SELECT count(*) FROM strings) + (SELECT count(*) FROM functions)"
				" + (SELECT count(*) FROM mappings) + (SELECT count(*) FROM locations)"
				" + (SELECT count(*) FROM stacks) + (SELECT count(*) FROM labelsets)");
	*indexed = day_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name IN"
			       " ('strings', 'functions', 'mappings', 'locations', 'stacks', 'labelsets')") > 0;
	static const char *const dup[] = {"strings", "functions", "mappings", "locations", "stacks", "labelsets"};
	for (size_t i = 0; i < ARRAY_LEN(dup); i++) {
		char sql[128];
		snprintf(sql, sizeof sql, "SELECT count(*) FROM (SELECT h FROM %s GROUP BY h HAVING count(*) > 1)", dup[i]);
		assert_int_equal(day_int(db, sql), 0);
	}
	sqlite3_close(db);
	return n;
}

/* The symbol tables of a day file have no index on h (schema 3): after a
 * reopen, the writer finds what is stored through a map it reads from the
 * table (when a lookup first needs it, or ahead for the newest day when
 * the store is warmed), so profiles stored again add no symbol and a new
 * one adds what a store that had them all in one run adds; a file whose
 * tables have the index (as schema 2 made them) is written through it,
 * alike. */
static void test_symbols_unindexed(void **state)
{
	(void)state;
	const int64_t H = 3600000000000LL;
	int seeds[4] = {40, 41, 42, 50};
	for (int legacy = 0; legacy < 2; legacy++) {
		int64_t ref = T0 + 4 * legacy * DAY, day = ref + 2 * DAY; /* day the newest */
		struct pd_store *st = open_store();
		struct pd_profile_meta m;
		struct pd_err err;
		for (int i = 0; i < 4; i++) { /* the reference: all four in one run */
			assert_int_equal(ingest_at(st, "svc", ref + H * (i + 1), seeds[i], &m, &err), 0);
			pd_meta_clear(&m);
		}
		for (int i = 0; i < 3; i++) {
			assert_int_equal(ingest_at(st, "svc", day + H * (i + 1), seeds[i], &m, &err), 0);
			pd_meta_clear(&m);
		}
		pd_store_close(st);
		bool indexed;
		int64_t n3 = day_symbols(day, &indexed), nref = day_symbols(ref, &indexed);
		assert_false(indexed);
		assert_true(nref > n3);
		if (legacy) { /* the tables as a store of schema 2 made them */
			char path[512];
			day_file_path(day, path, sizeof path);
			sqlite3 *db;
			assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
			assert_int_equal(sq_xid_fn(db), 0);
			assert_int_equal(sqlite3_exec(db,
						      "CREATE UNIQUE INDEX s1 ON strings(h); CREATE UNIQUE INDEX s2 ON functions(h);"
						      "CREATE UNIQUE INDEX s3 ON mappings(h); CREATE UNIQUE INDEX s4 ON locations(h);"
						      "CREATE UNIQUE INDEX s5 ON stacks(h); CREATE UNIQUE INDEX s6 ON labelsets(h);"
						      "PRAGMA user_version = 2",
						      NULL, NULL, NULL),
					 SQLITE_OK);
			sqlite3_close(db);
		}
		st = open_store();
		if (!legacy) /* as `serve` starts: the newest day's (day's) maps read ahead */
			pd_store_warm(st, 2);
		for (int i = 0; i < 3; i++) { /* the same profiles again: nothing new */
			assert_int_equal(ingest_at(st, "svc", day + H * (i + 4), seeds[i], &m, &err), 0);
			pd_meta_clear(&m);
		}
		pd_store_close(st);
		assert_int_equal(day_symbols(day, &indexed), n3);
		assert_int_equal(indexed, legacy);
		st = open_store(); /* and one more: what the reference added for it */
		assert_int_equal(ingest_at(st, "svc", day + H * 8, seeds[3], &m, &err), 0);
		pd_meta_clear(&m);
		pd_store_close(st);
		assert_int_equal(day_symbols(day, &indexed), nref);
	}
}

/* A CPU profile with many symbols at time t: nfn functions (one location
 * each), 2,000 stacks of 2-12 frames drawn from them; seeds that share
 * salt share most of them (successive scrapes of one program). Returns
 * gzip'd bytes. */
static struct pd_buf make_wide(int64_t t, int seed, int salt)
{
	enum { NFN = 700, NSTK = 2000 };
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, false);
	pb_mapping(&p, 1, 0x400000, 0x800000, 0, "/bin/wide", "w1d");
	char(*name)[64] = malloc(NFN * sizeof *name); /* the builder keeps the pointers: freed once decoded */
	assert_non_null(name);
	for (uint64_t f = 0; f < NFN; f++) {
		snprintf(name[f], sizeof name[f], "example.com/svc/pkg%d.(*T).method%d_%d", (int)f % 13, (int)f, salt);
		pb_function(&p, f + 1, name[f], "wide.go", (int64_t)f);
		pb_location1(&p, f + 1, 1, 0x400000 + 0x40 * (f + 1), f + 1, (int64_t)f * 3 + 1);
	}
	for (int i = 0; i < NSTK; i++) {
		/* stack i: the same for every seed but for the last tenth, the seed's own */
		rs = 777 + (uint64_t)(i < NSTK * 9 / 10 ? i : i * 1000 + seed);
		uint64_t locs[12];
		size_t n = 2 + rnd() % 11;
		for (size_t j = 0; j < n; j++)
			locs[j] = 1 + rnd() % NFN;
		int64_t vals[2] = {1 + i % 7, 10000000 * (1 + i % 7)};
		pb_sample(&p, locs, n, vals, 2, NULL, 0);
	}
	struct pd_buf out = pb_gz_at(&p, t);
	free(name);
	return out;
}

/* Profile id of st reads back as the gzip'd pprof b says (canon). */
static void assert_reads_back(struct pd_store *st, const char *id, const struct pd_buf *b)
{
	struct pd_profile *orig, *got;
	struct pd_err err;
	assert_int_equal(pd_pprof_decode(b->ptr, b->len, NULL, &orig, &err), 0);
	if (pd_store_get(st, id, &got, &err))
		fail_msg("get %s: %s", id, err.msg);
	char *co = canon(orig), *cg = canon(got);
	assert_string_equal(co, cg);
	free(co), free(cg);
	pd_profile_free(orig), pd_profile_free(got);
}

static void ingest_wide(struct pd_store *st, int64_t t, int seed, int salt, char *id)
{
	struct pd_buf b = make_wide(t, seed, salt);
	struct pd_ingest in = {.service = "wide", .type = "cpu"};
	struct pd_profile_meta m;
	struct pd_err err;
	if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
		fail_msg("ingest: %s", err.msg);
	snprintf(id, PD_STORE_ID_LEN + 1, "%s", m.id);
	pd_meta_clear(&m);
	pd_buf_free(&b);
}

/* fn(ctx, seq, content) for every symbol in the packs of kind k of db
 * (none if it has no packs table: schema 3). */
static void each_packed(sqlite3 *db, int k, void (*fn)(void *ctx, int64_t seq, const uint8_t *c, size_t n), void *ctx)
{
	static ZSTD_DCtx *d;
	if (!d)
		d = ZSTD_createDCtx();
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT kg & 1099511627775, c FROM packs WHERE kg >> 40 = ?", -1, &st, NULL) !=
	    SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, k);
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct pd_pack pk;
		struct pd_err err;
		if (pd_pack_dec(d, k, sqlite3_column_int64(st, 0), sqlite3_column_blob(st, 1),
				(size_t)sqlite3_column_bytes(st, 1), &pk, &err))
			fail_msg("pack: %s", err.msg);
		for (uint32_t i = 0; i < pk.n; i++)
			if (pk.n1[i])
				fn(ctx, pk.first + i, pk.raw + pk.off[i], pk.n1[i] - 1);
		pd_pack_free(&pk);
	}
	sqlite3_finalize(st);
}

struct seen {
	struct pd_buf *v;
	size_t n, cap;
	int64_t packed;
};

static void seen_add(struct seen *s, const void *c, size_t n)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
		assert_non_null(s->v);
	}
	s->v[s->n] = (struct pd_buf)PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&s->v[s->n++], n ? c : "", n), 0);
}

static void seen_packed(void *ctx, int64_t seq, const uint8_t *c, size_t n)
{
	(void)seq;
	struct seen *s = ctx;
	seen_add(s, c, n);
	s->packed++;
}

static int buf_cmp(const void *a, const void *b)
{
	const struct pd_buf *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->len ? memcmp(x->ptr, y->ptr, x->len) : 0;
}

/* The symbols of day t's file, rows and packs (decoded): their number,
 * how many are packed (*packed), and none stored twice by content. */
static int64_t day_symbols_packed(int64_t t, int64_t *packed)
{
	char path[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	int64_t all = 0;
	*packed = 0;
	/* by kind: every content (a duplicate would be a symbol stored twice) */
	static const char *const tab[] = {"strings", "functions", "mappings", "locations", "stacks", "labelsets"};
	for (int k = 0; k < 6; k++) {
		struct seen s = {0};
		char sql[96];
		sqlite3_stmt *st;
		snprintf(sql, sizeof sql, "SELECT c FROM %s", tab[k]);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
		while (sqlite3_step(st) == SQLITE_ROW)
			seen_add(&s, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
		sqlite3_finalize(st);
		each_packed(db, k, seen_packed, &s);
		if (s.n) /* qsort of a NULL base is undefined, even for none */
			qsort(s.v, s.n, sizeof *s.v, buf_cmp);
		for (size_t i = 1; i < s.n && k != 2; i++) /* a mapping's identity is a prefix: not checked */
			assert_int_not_equal(buf_cmp(&s.v[i - 1], &s.v[i]), 0);
		for (size_t i = 0; i < s.n; i++)
			pd_buf_free(&s.v[i]);
		free(s.v);
		all += (int64_t)s.n;
		*packed += s.packed;
	}
	sqlite3_close(db);
	return all;
}

/* Symbols go into packs (schema 4) once enough of a kind are committed:
 * profiles read back the same from packs and rows, after a reopen too; a
 * reopened day's writer finds packed symbols by content (profiles stored
 * again add nothing, a new one adds what a store that had them all in one
 * run adds), warmed or not; `store check` counts packed symbols and finds
 * a damaged pack, and a read of it is an error that quarantines the day. */
static void test_symbol_packs(void **state)
{
	(void)state;
	const int64_t H = 3600000000000LL;
	int64_t day_damaged = 0;
	char damaged_id[PD_STORE_ID_LEN + 1];
	for (int warm = 0; warm < 2; warm++) {
		int64_t ref = T0 + 10 * warm * DAY, day = ref + 3 * DAY;
		struct pd_store *st = open_store();
		char ids[4][PD_STORE_ID_LEN + 1], tmp[PD_STORE_ID_LEN + 1];
		for (int i = 0; i < 4; i++) /* the reference: all four in one run */
			ingest_wide(st, ref + H * (i + 1), i, i / 2, tmp);
		for (int i = 0; i < 3; i++)
			ingest_wide(st, day + H * (i + 1), i, i / 2, ids[i]);
		pd_store_close(st);
		int64_t packed, nref = day_symbols_packed(ref, &packed), n3 = day_symbols_packed(day, &packed);
		assert_true(packed > 2000);  /* most of them */
		assert_true(nref > n3);
		/* the pages the packed rows left are given back (auto_vacuum) */
		char path[512];
		day_file_path(day, path, sizeof path);
		sqlite3 *db;
		assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
		assert_int_equal(sq_xid_fn(db), 0);
		assert_int_equal(day_int(db, "PRAGMA freelist_count"), 0);
		sqlite3_close(db);
		/* read back from packs: what went in */
		st = open_store();
		if (warm)
			pd_store_warm(st, 4);
		for (int i = 0; i < 3; i++) {
			struct pd_buf b = make_wide(day + H * (i + 1), i, i / 2);
			assert_reads_back(st, ids[i], &b);
			pd_buf_free(&b);
		}
		for (int i = 0; i < 3; i++) /* the same profiles again: nothing new */
			ingest_wide(st, day + H * (i + 4), i, i / 2, tmp);
		pd_store_close(st);
		int64_t p2;
		assert_int_equal(day_symbols_packed(day, &p2), n3);
		assert_true(p2 >= packed);
		st = open_store(); /* and one more: what the reference added for it */
		if (warm)
			pd_store_warm(st, 4);
		ingest_wide(st, day + H * 8, 3, 1, ids[3]);
		pd_store_close(st);
		assert_int_equal(day_symbols_packed(day, &p2), nref);
		/* store check: clean, every symbol counted */
		struct pd_store_check ck;
		struct pd_err err;
		size_t nrep = 0;
		assert_int_equal(pd_store_check_dir(tmpdir, count_report, &nrep, &ck, &err), 0);
		assert_int_equal(nrep, 0);
		assert_true(ck.symbols >= (size_t)(nref + n3));
		day_damaged = day;
		snprintf(damaged_id, sizeof damaged_id, "%s", ids[0]);
	}
	/* a byte flipped in a pack: check says so, a read is an error */
	day_sql(day_damaged, "UPDATE packs SET c = substr(c, 1, 40) || x'00' || substr(c, 42)"
			     " WHERE kg = (SELECT min(kg) FROM packs WHERE kg >> 40 = 4)");
	assert_int_equal(check_reports(), 1);
	assert_non_null(strstr(last_what, "stacks: the pack from #1: "));
	struct pd_store *st = open_store();
	struct pd_profile *got = NULL;
	struct pd_err err;
	assert_int_equal(pd_store_get(st, damaged_id, &got, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "the pack from #1"));
	assert_non_null(strstr(err.msg, "quarantined"));
	pd_store_close(st);
}

/* Reads while symbols are being packed: a reader's snapshot may be older
 * or newer than the commit that packed what it reads (sqlite_read.c
 * looks in both places). Profiles of new functions each (every commit
 * packs), read back over and over by a second thread while they come,
 * under services that appear meanwhile (schema 5: an id is looked for
 * under the day's services as a read sees them). */
#define PK_N 16
struct pk_shared {
	struct pd_store *st;
	char ids[PK_N][PD_STORE_ID_LEN + 1];
	char *canon[PK_N];
	atomic_int stored; /* ids[0 .. stored) are committed */
	atomic_bool done;
	int reads, bad;
	char msg[600];
};

static void *pk_reader(void *arg)
{
	struct pk_shared *s = arg;
	for (unsigned i = 0; !s->bad && (!atomic_load(&s->done) || s->reads < 2 * PK_N);) {
		int n = atomic_load(&s->stored);
		if (!n) {
			sched_yield();
			continue;
		}
		int j = i & 1 ? n - 1 : (int)(i % (unsigned)n); /* the newest (maybe of a new service) every other time */
		i++;
		struct pd_profile *got;
		struct pd_err err;
		if (pd_store_get(s->st, s->ids[j], &got, &err)) {
			s->bad++;
			snprintf(s->msg, sizeof s->msg, "get %d: %s", j, err.msg);
			break;
		}
		char *cg = canon(got);
		if (strcmp(cg, s->canon[j])) {
			s->bad++;
			snprintf(s->msg, sizeof s->msg, "profile %d read back otherwise", j);
		}
		free(cg);
		pd_profile_free(got);
		s->reads++;
	}
	return NULL;
}

static void test_packs_concurrent(void **state)
{
	(void)state;
	const int64_t H = 3600000000000LL;
	static struct pk_shared s;
	memset(&s, 0, sizeof s);
	s.st = open_store();
	struct pd_buf b[PK_N];
	for (int i = 0; i < PK_N; i++) {
		b[i] = make_wide(T0 + H + i * 60000000000LL, i, 100 + i); /* new functions each */
		struct pd_profile *orig;
		struct pd_err err;
		assert_int_equal(pd_pprof_decode(b[i].ptr, b[i].len, NULL, &orig, &err), 0);
		s.canon[i] = canon(orig);
		pd_profile_free(orig);
	}
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, pk_reader, &s), 0);
	for (int i = 0; i < PK_N; i++) {
		char svc[16]; /* services come and go between ids (sq_locate lists them per read) */
		snprintf(svc, sizeof svc, "wide-%d", i * 7 % 5);
		struct pd_ingest in = {.service = svc, .type = "cpu"};
		struct pd_profile_meta m;
		struct pd_err err;
		if (pd_store_ingest(s.st, &in, b[i].ptr, b[i].len, &m, &err))
			fail_msg("ingest %d: %s", i, err.msg);
		snprintf(s.ids[i], sizeof s.ids[i], "%s", m.id);
		pd_meta_clear(&m);
		atomic_store(&s.stored, i + 1);
	}
	atomic_store(&s.done, true);
	pthread_join(th, NULL);
	if (s.bad)
		fail_msg("%s", s.msg);
	assert_true(s.reads >= 2 * PK_N);
	pd_store_close(s.st);
	int64_t packed;
	day_symbols_packed(T0, &packed);
	assert_true(packed > PK_N * 2000); /* the stacks of all but the last few */
	for (int i = 0; i < PK_N; i++) {
		free(s.canon[i]);
		pd_buf_free(&b[i]);
	}
}

static void unpack_one(void *ctx, int64_t seq, const uint8_t *c, size_t n)
{
	sqlite3_stmt *ins = ctx;
	sqlite3_bind_int64(ins, 1, seq);
	sqlite3_bind_int64(ins, 2, -seq); /* not the writer's h: no longer used */
	sqlite3_bind_blob(ins, 3, n ? (const void *)c : "", (int)n, SQLITE_TRANSIENT);
	assert_int_equal(sqlite3_step(ins), SQLITE_DONE);
	sqlite3_reset(ins);
}

/* Day t's file as schema 3 left it: every packed symbol back in a row of
 * its table (h: minus its seq, unique), no packs table, user_version 3. */
static void unpack_day(int64_t t)
{
	char path[512];
	day_file_path(t, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	static const char *const tab[] = {"strings", "functions", "mappings", "locations", "stacks", "labelsets"};
	assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	for (int k = 0; k < 6; k++) {
		char sql[128];
		sqlite3_stmt *ins;
		snprintf(sql, sizeof sql, "INSERT INTO %s(seq, h, c) VALUES(?, ?, ?)", tab[k]);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &ins, NULL), SQLITE_OK);
		each_packed(db, k, unpack_one, ins);
		sqlite3_finalize(ins);
	}
	assert_int_equal(sqlite3_exec(db, "DROP TABLE packs; PRAGMA user_version = 3; COMMIT", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
}

/* A day file of schema 3 (symbols in rows, no packs) is raised on open:
 * profiles stored again find their symbols in its rows (by content, its
 * h no longer used), the next commit moves its rows into packs, and
 * every profile reads back the same. */
static void test_packs_upgrade(void **state)
{
	(void)state;
	const int64_t H = 3600000000000LL;
	char ids[4][PD_STORE_ID_LEN + 1], tmp[PD_STORE_ID_LEN + 1];
	struct pd_store *st = open_store();
	for (int i = 0; i < 3; i++)
		ingest_wide(st, T0 + H * (i + 1), i, 20 + i, ids[i]);
	pd_store_close(st);
	int64_t packed, all = day_symbols_packed(T0, &packed);
	assert_true(packed > 0);
	unpack_day(T0);
	assert_int_equal(day_symbols_packed(T0, &packed), all);
	assert_int_equal(packed, 0);
	{ /* a file of schema 4 without its packs table is damage to check */
		day_sql(T0, "PRAGMA user_version = 4");
		assert_int_equal(check_reports(), 1);
		assert_non_null(strstr(last_what, "packs: no such table"));
		day_sql(T0, "PRAGMA user_version = 3");
	}
	st = open_store();
	for (int i = 0; i < 3; i++) /* nothing new */
		ingest_wide(st, T0 + H * (i + 4), i, 20 + i, tmp);
	ingest_wide(st, T0 + H * 8, 3, 23, ids[3]); /* new: the commit packs */
	pd_store_close(st);
	int64_t all2 = day_symbols_packed(T0, &packed);
	assert_true(all2 > all);
	assert_true(packed > all / 2);
	st = open_store();
	for (int i = 0; i < 4; i++) {
		struct pd_buf b = make_wide(T0 + H * (i < 3 ? i + 1 : 8), i, 20 + i);
		assert_reads_back(st, ids[i], &b);
		pd_buf_free(&b);
	}
	pd_store_close(st);
	assert_int_equal(check_reports(), 0);
}

static int64_t value_sum(const struct pd_profile *p)
{
	int64_t v = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		v += p->samples[i].values[0];
	return v;
}

/* Every id found, one by one in scrambled order and all in one merge;
 * `gone` (if any) removed. */
static void ids_found(struct pd_store *st, char (*ids)[PD_STORE_ID_LEN + 1], const int64_t *t, int n, int gone)
{
	struct pd_err err;
	const char *all[64];
	int64_t want = 0;
	int na = 0;
	for (int k = 0; k < n; k++) {
		int i = (k * 7) % n;
		struct pd_profile *p = NULL;
		if (i == gone) {
			assert_int_equal(pd_store_get(st, ids[i], &p, &err), PD_ENOTFOUND);
			continue;
		}
		if (pd_store_get(st, ids[i], &p, &err))
			fail_msg("get %s: %s", ids[i], err.msg);
		assert_int_equal(p->time_nanos, t[i]);
		want += value_sum(p);
		all[na++] = ids[i];
		pd_profile_free(p);
	}
	struct pd_profile *m = NULL;
	if (pd_store_merge(st, all, (size_t)na, &m, &err))
		fail_msg("merge: %s", err.msg);
	assert_int_equal(value_sum(m), want);
	pd_profile_free(m);
}

/* Schema 5: no index on xid. A profile is found by its id under the
 * service of the last one found, then under each of the day's services
 * (several profiles a second, of several services, asked for in any
 * order); an id of the right second but of no profile, or removed, is not
 * found; a file before schema 5 finds them by its xid index; store check
 * names a row whose time is not its id's. */
static void test_id_lookup(void **state)
{
	(void)state;
	enum { N = 24 };
	const char *svcs[] = {"auth", "billing", "cart", "search"};
	char ids[N][PD_STORE_ID_LEN + 1];
	int64_t t[N];
	struct pd_profile_meta m;
	struct pd_err err;
	struct pd_store *st = open_store();
	for (int i = 0; i < N; i++) {
		t[i] = T0 + (int64_t)(i / 3) * 1000000000 + (i % 3) * 1000; /* three a second */
		assert_int_equal(ingest_at(st, svcs[i % 4], t[i], i, &m, &err), 0);
		memcpy(ids[i], m.id, sizeof ids[i]);
	}
	ids_found(st, ids, t, N, -1);
	char other[PD_STORE_ID_LEN + 1];
	memcpy(other, ids[4], sizeof other);
	other[PD_STORE_ID_LEN - 2] = other[PD_STORE_ID_LEN - 2] == '0' ? '1' : '0'; /* its counter */
	struct pd_profile *p = NULL;
	assert_int_equal(pd_xid_time(other), pd_xid_time(ids[4]));
	assert_int_equal(pd_store_get(st, other, &p, &err), PD_ENOTFOUND);
	assert_int_equal(pd_store_remove(st, ids[5], &err), 0);
	ids_found(st, ids, t, N, 5);
	/* a service new since the day's services were listed */
	assert_int_equal(ingest_at(st, "newcomer", t[2] + 5, 77, &m, &err), 0);
	assert_int_equal(pd_store_get(st, m.id, &p, &err), 0);
	assert_int_equal(p->time_nanos, t[2] + 5);
	pd_profile_free(p);
	ids_found(st, ids, t, N, 5);
	pd_store_close(st);
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM pragma_index_list('profiles')"), 1);
	assert_int_equal(day_int(db, "PRAGMA user_version"), PD_DAYFILE_SCHEMA);
	/* schema 7: the ids as integers (codec.h), read back through pd_xid */
	assert_int_equal(day_int(db, "SELECT count(*) FROM profiles WHERE typeof(xid) != 'integer'"), 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM profiles"), N + 1 - 1);
	for (int i = 0; i < N; i++) {
		char q[160];
		snprintf(q, sizeof q, "SELECT count(*) FROM profiles WHERE pd_xid(created, xid) = '%.20s'", ids[i]);
		assert_int_equal(day_int(db, q), i == 5 ? 0 : 1);
	}
	sqlite3_close(db);
	/* another spelling of an id (the last digit's padding bit set) is not
	 * the id: not found, as it was not when ids were text */
	st = open_store();
	memcpy(other, ids[4], sizeof other);
	other[PD_STORE_ID_LEN - 1] = other[PD_STORE_ID_LEN - 1] == '0' ? '1' : 'h';
	assert_int_equal(pd_xid_time(other), pd_xid_time(ids[4]));
	assert_int_equal(pd_store_get(st, other, &p, &err), PD_ENOTFOUND);
	pd_store_close(st);

	/* the same day as a file of schema 4: xid UNIQUE */
	day_sql(T0, "BEGIN; CREATE TABLE p4(pk INTEGER PRIMARY KEY, xid TEXT NOT NULL UNIQUE, service TEXT NOT NULL,"
		    " type TEXT NOT NULL, created INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
		    " nsamples INTEGER NOT NULL); INSERT INTO p4 SELECT pk, pd_xid(created, xid), service, type, created,"
		    " header, block,"
		    " nsamples FROM profiles; DROP TABLE profiles;"
		    " ALTER TABLE p4 RENAME TO profiles; CREATE INDEX profiles_svc ON profiles(service, created);"
		    " PRAGMA user_version = 4; COMMIT;");
	st = open_store();
	ids_found(st, ids, t, N, 5);
	assert_int_equal(ingest_at(st, "zeta", t[0] + 7, 99, &m, &err), 0); /* written on, found */
	assert_int_equal(pd_store_get(st, m.id, &p, &err), 0);
	assert_int_equal(p->time_nanos, t[0] + 7);
	pd_profile_free(p);
	pd_store_close(st);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM pragma_index_list('profiles') l, pragma_index_info(l.name) i"
				     " WHERE i.name = 'xid'"),
			 1);
	/* a file of text ids gets text ids: the new one too */
	assert_int_equal(day_int(db, "SELECT count(*) FROM profiles WHERE typeof(xid) != 'text'"), 0);
	sqlite3_close(db);
	assert_int_equal(check_reports(), 0);
	/* a row whose time is not its id's could not be found: check says so */
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE profiles SET created = created + 2000000000 WHERE pd_xid(created, xid) = '%s'",
		 ids[7]);
	day_sql(T0, sql);
	assert_int_equal(check_reports(), 1);
	assert_non_null(strstr(last_what, "cannot be found by its id"));
}

#include "../../lib/store/sqlite_int.h"
/* kill -9 while symbols are being packed: every profile acknowledged
 * before reads back the same, the day file checks clean, and the next
 * round writes on where the last one died. A child ingests profiles of
 * new functions (every commit packs) and reports each id once stored;
 * the parent kills it after a few, mid-ingest. */
/* Stats and services read a day file once while it does not change (each
 * /metrics scrape and each services list opened every day file under the
 * store mutex: seconds with thousands of days, ingests waiting), and see
 * every change: an upload, a removal, retention. */
static void test_day_facts_cached(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct sq *sq = (struct sq *)st;
	pd_store_sqlite_set_max_open(st, 2);
	struct pd_profile_meta m, last;
	struct pd_err err;
	for (int d = 0; d < 12; d++) {
		char svc[16];
		snprintf(svc, sizeof svc, "d%d", d % 3);
		assert_int_equal(ingest_at(st, svc, T0 + d * DAY + 3600000000000LL, d, d == 5 ? &last : &m, &err), 0);
		if (d != 5)
			pd_meta_clear(&m);
	}
	struct pd_store_stats ss;
	char **v;
	size_t n;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.profiles, 12);
	assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	uint64_t opened = sq->ninst;
	for (int k = 0; k < 3; k++) {
		assert_int_equal(pd_store_stats(st, &ss, &err), 0);
		assert_int_equal(ss.profiles, 12);
		assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
		assert_int_equal(n, 3);
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
	}
	assert_int_equal(sq->ninst, opened); /* no day file opened again */
	/* an upload of a new service to an old day, a removal: seen */
	assert_int_equal(ingest_at(st, "new", T0 + 2 * DAY + 7200000000000LL, 99, &m, &err), 0);
	pd_meta_clear(&m);
	assert_int_equal(pd_store_remove(st, last.id, &err), 0);
	pd_meta_clear(&last);
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.profiles, 12);
	assert_int_equal(pd_store_services(st, &v, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_string_equal(v[3], "new");
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	size_t dropped;
	assert_int_equal(pd_store_retain(st, T0 + 4 * DAY, &dropped, &err), 0);
	assert_int_equal(dropped, 4);
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.profiles, 7);
	assert_int_equal(ss.partitions, 8);
	pd_store_close(st);
}

/* A rollup pass opens only the days it may have work in: a day that is
 * over, found with nothing to build, is not opened again until it is
 * written (a pass opened every day file under the store mutex). */
static void test_rollup_pass_skips_done_days(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct sq *sq = (struct sq *)st;
	pd_store_sqlite_set_max_open(st, 2);
	struct pd_profile_meta m;
	struct pd_err err;
	for (int d = 0; d < 12; d++) {
		assert_int_equal(ingest_at(st, "r", T0 + d * DAY + 3600000000000LL, d, &m, &err), 0);
		pd_meta_clear(&m);
	}
	size_t built;
	assert_int_equal(pd_store_rollup(st, T0 + 20 * DAY, 0, &built, &err), 0);
	assert_int_equal(built, 12);
	assert_int_equal(pd_store_rollup(st, T0 + 20 * DAY, 0, &built, &err), 0);
	assert_int_equal(built, 0);
	uint64_t opened = sq->ninst;
	assert_int_equal(pd_store_rollup(st, T0 + 20 * DAY, 0, &built, &err), 0);
	assert_int_equal(built, 0);
	assert_int_equal(sq->ninst, opened); /* no day file opened */
	/* a late upload to a day that was done: its hour is built again */
	assert_int_equal(ingest_at(st, "r", T0 + 3 * DAY + 3700000000000LL, 50, &m, &err), 0);
	pd_meta_clear(&m);
	assert_int_equal(pd_store_rollup(st, T0 + 20 * DAY, 0, &built, &err), 0);
	assert_int_equal(built, 1);
	struct pd_merge_info info = check_range(st, "r", T0 + 3 * DAY, T0 + 4 * DAY - 1);
	assert_int_equal(info.rollup_hours, 1); /* the hour of its two profiles, from its rollup */
	pd_store_close(st);
}

static void test_packs_crash(void **state)
{
	(void)state;
	const int64_t M = 60000000000LL;
	enum { ROUNDS = 3, MAXN = 64 };
	int next = 0; /* profile numbers go on over the rounds */
	for (int round = 0; round < ROUNDS; round++) {
		int fd[2];
		assert_int_equal(pipe(fd), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fd[0]);
			struct pd_store *cs;
			struct pd_err err;
			if (pd_store_open_sqlite(tmpdir, NULL, &cs, &err))
				_exit(2);
			for (int i = next; i < next + MAXN; i++) {
				struct pd_buf b = make_wide(T0 + M * i, i, 500 + i);
				struct pd_ingest in = {.service = "crash", .type = "cpu"};
				struct pd_profile_meta m;
				if (pd_store_ingest(cs, &in, b.ptr, b.len, &m, &err))
					_exit(3);
				char line[64];
				int n = snprintf(line, sizeof line, "%d %s\n", i, m.id);
				if (write(fd[1], line, (size_t)n) != n)
					_exit(4);
				pd_meta_clear(&m);
				pd_buf_free(&b);
			}
			pause(); /* wait for the kill */
		}
		close(fd[1]);
		FILE *f = fdopen(fd[0], "r");
		assert_non_null(f);
		int num[MAXN], got = 0, want = 3 + 2 * round;
		char ids[MAXN][PD_STORE_ID_LEN + 1];
		while (got < want && fscanf(f, "%d %20s", &num[got], ids[got]) == 2)
			got++;
		usleep((useconds_t)(3000 * (round + 1))); /* into the next ingest */
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		while (got < MAXN && fscanf(f, "%d %20s", &num[got], ids[got]) == 2) /* acknowledged meanwhile */
			got++;
		fclose(f);
		assert_true(WIFSIGNALED(status));
		assert_true(got >= want);
		struct pd_store *st = open_store();
		for (int j = 0; j < got; j++) {
			struct pd_buf b = make_wide(T0 + M * num[j], num[j], 500 + num[j]);
			assert_reads_back(st, ids[j], &b);
			pd_buf_free(&b);
		}
		pd_store_close(st);
		if (check_reports())
			fail_msg("round %d: store check: %s", round, last_what);
		next = num[got - 1] + 1;
	}
	int64_t packed;
	day_symbols_packed(T0, &packed);
	assert_true(packed > 0);
}


/* Set what day d's open partition believes is packed: every kind's to
 * to(p, k). Returns nothing; the store holds the partition open. */
static void set_packed(struct pd_store *st, int64_t t, int64_t (*to)(const struct part *p, int k))
{
	struct sq *sq = (struct sq *)st;
	struct part *pt = NULL;
	struct pd_err err;
	sq_store_lock(sq);
	assert_int_equal(sq_part_get(sq, t / DAY, false, &pt, &err), 0);
	assert_non_null(pt);
	for (int k = 0; k < NKINDS; k++)
		pt->packed[k] = to(pt, k);
	sq_store_unlock(sq);
}
static int64_t packed_none(const struct part *p, int k) { return (void)p, (void)k, 0; }
static int64_t packed_all(const struct part *p, int k) { return sq_packable(p, k) ? p->next[k] - 1 : 0; }

/* A reader whose snapshot is newer than what packed[] says (the commit
 * that packed is visible, packed[] not yet set: the rows are gone) finds
 * the symbols in their packs; one whose snapshot is older (packed[] says
 * packed, its snapshot still has the rows) finds them in their rows. Both
 * made here by setting packed[] on a reopened store. */
static void test_packs_snapshots(void **state)
{
	(void)state;
	const int64_t H = 3600000000000LL;
	char ids[3][PD_STORE_ID_LEN + 1];
	char *want[3];
	struct pd_store *st = open_store();
	for (int i = 0; i < 3; i++) {
		struct pd_buf b = make_wide(T0 + H * (i + 1), i, 7 + i);
		struct pd_profile *orig;
		struct pd_err err;
		assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &orig, &err), 0);
		want[i] = canon(orig);
		pd_profile_free(orig);
		pd_buf_free(&b);
		ingest_wide(st, T0 + H * (i + 1), i, 7 + i, ids[i]);
	}
	pd_store_close(st);
	int64_t packed, all = day_symbols_packed(T0, &packed);
	assert_true(packed > 0 && packed < all); /* some in packs, some in rows */
	int64_t (*const cases[2])(const struct part *, int) = {packed_none, packed_all};
	for (int c = 0; c < 2; c++) {
		st = open_store();
		set_packed(st, T0, cases[c]);
		for (int i = 0; i < 3; i++) {
			struct pd_profile *got;
			struct pd_err err;
			if (pd_store_get(st, ids[i], &got, &err))
				fail_msg("case %d, get %d: %s", c, i, err.msg);
			char *cg = canon(got);
			assert_string_equal(cg, want[i]);
			free(cg);
			pd_profile_free(got);
		}
		pd_store_close(st);
	}
	for (int i = 0; i < 3; i++)
		free(want[i]);
}

static int refuse_reserve(void *ctx, size_t bytes)
{
	(void)ctx;
	(void)bytes;
	return PD_EBUSY;
}

/* Every refusal says why, typed (callers decide on it, never on the
 * message), with the code that goes with it, and stores nothing. */
static void test_refusal_reasons(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct pd_buf cpu = make_profile(T0, false, 1), heap = make_profile(T0, true, 1);
	struct pb empty, amb;
	pb_init(&empty);
	pb_cpu_header(&empty, 10000000);
	pb_finish(&empty);
	/* contentions/delay, its one sample without a stack: block or mutex? */
	pb_init(&amb);
	pb_sample_type(&amb, "contentions", "count");
	pb_sample_type(&amb, "delay", "nanoseconds");
	pb_period_type(&amb, "contentions", "count", 1);
	int64_t av[2] = {1, 100};
	pb_sample(&amb, NULL, 0, av, 2, NULL, 0);
	pb_finish(&amb);
	int64_t now = (int64_t)time(NULL) * 1000000000LL;
	struct {
		const char *name, *service, *type;
		const uint8_t *data;
		size_t len;
		int64_t created, min, max;
		bool busy;
		int rc;
		enum pd_refusal why;
	} cases[] = {
		{"no service", "", "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_SERVICE},
		{"long service", "ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss"
				 "ssssssssssssssssssssssssssssssssssssssss",
		 "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_SERVICE},
		{"newline in service", "svc\nFORGED 1", "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_SERVICE},
		{"escape in service", "svc\x1b[31m", "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_SERVICE},
		{"DEL in service", "svc\x7f", "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_SERVICE},
		{"unknown type", "svc", "bogus", cpu.ptr, cpu.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_UNKNOWN_TYPE},
		{"garbage", "svc", "cpu", (const uint8_t *)"garbage!", 8, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_MALFORMED},
		{"empty", "svc", "cpu", empty.b.p, empty.b.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_EMPTY},
		{"mismatch", "svc", "cpu", heap.ptr, heap.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_TYPE_MISMATCH},
		{"ambiguous", "svc", NULL, amb.b.p, amb.b.len, 0, 0, 0, false, PD_EINVAL, PD_REFUSE_AMBIGUOUS_TYPE},
		{"after 2106", "svc", "cpu", cpu.ptr, cpu.len, (int64_t)1 << 62, 0, 0, false, PD_EINVAL,
		 PD_REFUSE_TIME_RANGE},
		{"too old", "svc", "cpu", cpu.ptr, cpu.len, 0, T0 + 1, 0, false, PD_EEXPIRED, PD_REFUSE_TOO_OLD},
		{"too new", "svc", "cpu", cpu.ptr, cpu.len, now + 30 * DAY, 0, now + DAY, false, PD_EINVAL,
		 PD_REFUSE_TOO_NEW},
		{"budget", "svc", "cpu", cpu.ptr, cpu.len, 0, 0, 0, true, PD_EBUSY, PD_REFUSE_BUSY},
		{"stored", "svc", "cpu", cpu.ptr, cpu.len, 0, 0, 0, false, 0, PD_REFUSE_NONE},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct pd_ingest in = {.service = cases[i].service,
				       .type = cases[i].type,
				       .created_ns = cases[i].created,
				       .min_created_ns = cases[i].min,
				       .max_created_ns = cases[i].max,
				       .reserve = cases[i].busy ? refuse_reserve : NULL};
		struct pd_profile_meta m;
		struct pd_err err = {0, ""};
		enum pd_refusal why = (enum pd_refusal)-1;
		int rc = pd_store_ingest_why(st, &in, cases[i].data, cases[i].len, &m, &why, &err);
		if (rc != cases[i].rc || why != cases[i].why)
			fail_msg("%s: rc %d why %d, want rc %d why %d (%s)", cases[i].name, rc, (int)why, cases[i].rc,
				 (int)cases[i].why, err.msg);
		if (!rc)
			pd_meta_clear(&m);
		struct pd_store_stats ss;
		assert_int_equal(pd_store_stats(st, &ss, &err), 0);
		assert_int_equal(ss.profiles, rc ? 0 : 1);
	}
	pd_store_close(st);
	/* the decoder's caps, the store's own (a NULL why is fine) */
	struct pd_pprof_limits lim = {.max_samples = 2};
	struct pd_err err;
	assert_int_equal(pd_store_open_sqlite(tmpdir, &lim, &st, &err), 0);
	struct pd_ingest in = {.service = "svc", .type = "cpu"};
	struct pd_profile_meta m;
	enum pd_refusal why;
	assert_int_equal(pd_store_ingest_why(st, &in, cpu.ptr, cpu.len, &m, &why, &err), PD_ELIMIT);
	assert_int_equal(why, PD_REFUSE_TOO_LARGE);
	assert_int_equal(pd_store_ingest(st, &in, cpu.ptr, cpu.len, &m, &err), PD_ELIMIT);
	pd_store_close(st);
	pb_free(&empty);
	pb_free(&amb);
	pd_buf_free(&cpu);
	pd_buf_free(&heap);
}

/* The store core's ingest (prepare.h), without a backend: a prepared
 * profile is decoded, typed and timed, and its content hashes do not
 * depend on how the upload numbered or ordered things (label order, the
 * string table, ids), only on content. */
#include "../../lib/store/prepare.h"

static void test_prepare_core(void **state)
{
	(void)state;
	struct pd_pprof_limits lim = {0};
	pd_pprof_limits_default(&lim);
	struct pb_label ab[2] = {{"a", "1", 0, NULL}, {"b", "2", 0, NULL}};
	struct pb_label ba[2] = {{"b", "2", 0, NULL}, {"a", "1", 0, NULL}};
	struct pd_buf x = make_labelled(T0, ab, 2), y = make_labelled(T0, ba, 2);
	struct pd_kv kv[1] = {{"zone", "z1"}};
	struct pd_ingest in = {.service = "svc", .labels = kv, .nlabels = 1};
	struct pd_prepared px, py;
	struct pd_err err;
	enum pd_refusal why;
	assert_int_equal(pd_prepare(&in, x.ptr, x.len, &lim, &px, &why, &err), 0);
	assert_int_equal(why, PD_REFUSE_NONE);
	assert_int_equal(pd_prepare(&in, y.ptr, y.len, &lim, &py, NULL, &err), 0);
	assert_string_equal(px.type, "cpu"); /* inferred */
	assert_int_equal(px.created_ns, T0);
	assert_int_equal(px.p->nsamples, 1);
	assert_int_equal(py.p->nsamples, 1);
	/* labels in canonical order: the same label set, the same stack */
	assert_memory_equal(&px.bh[0], &py.bh[0], sizeof px.bh[0]);
	assert_memory_equal(&px.kh[0], &py.kh[0], sizeof px.kh[0]);
	struct pd_str k0 = px.p->strings[px.p->samples[0].labels[0].key];
	assert_int_equal(k0.len, 1);
	assert_int_equal(k0.ptr[0], 'a');
	/* the metadata of a stored one */
	struct pd_profile_meta m;
	pd_prepared_meta(&px, "c6jddu000000000000a0", 123, &m);
	assert_string_equal(m.id, "c6jddu000000000000a0");
	assert_string_equal(m.service, "svc");
	assert_string_equal(m.type, "cpu");
	assert_int_equal(m.created_ns, T0);
	assert_int_equal(m.stored_bytes, 123);
	assert_int_equal(m.nlabels, 1);
	assert_string_equal(m.labels[0].value, "z1");
	pd_meta_clear(&m);
	/* the same stack uploaded with other ids and another string table */
	struct pb q;
	pb_init(&q);
	(void)pb_s(&q, "zzz-unused"); /* shifts every string index */
	pb_cpu_header(&q, 10000000);
	pb_function(&q, 7, "main.main", "app.go", 0);
	pb_mapping(&q, 3, 0x400000, 0x500000, 0, "/bin/app", "b1d");
	pb_location1(&q, 9, 3, 0x400100, 7, 10);
	uint64_t locs[1] = {9};
	int64_t vals[2] = {5, 50000000};
	pb_sample(&q, locs, 1, vals, 2, ba, 2);
	tb_int(&q.b, PF_TIME_NANOS, T0 + 1);
	pb_finish(&q);
	struct pd_prepared pq;
	assert_int_equal(pd_prepare(&in, q.b.p, q.b.len, &lim, &pq, &why, &err), 0);
	assert_memory_equal(&px.kh[0], &pq.kh[0], sizeof px.kh[0]);
	assert_memory_equal(&px.bh[0], &pq.bh[0], sizeof px.bh[0]);
	assert_int_equal(pq.created_ns, T0 + 1);
	pd_prepared_drop_profile(&pq);
	assert_null(pq.p);
	assert_string_equal(pq.type, "cpu"); /* kept for the metadata */
	pd_prepared_free(&pq);
	pb_free(&q);
	/* refusals leave nothing to free */
	in.type = "heap";
	assert_int_equal(pd_prepare(&in, x.ptr, x.len, &lim, &pq, &why, &err), PD_EINVAL);
	assert_int_equal(why, PD_REFUSE_TYPE_MISMATCH);
	assert_null(pq.p);
	assert_null(pq.sh);
	pd_prepared_free(&px);
	pd_prepared_free(&py);
	pd_buf_free(&x);
	pd_buf_free(&y);
}

/* Profile times too far ahead of now are refused before any file exists. */
static void test_future_skew(void **state)
{
	(void)state;
	struct pd_store *st = open_store();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, hour = 3600000000000LL;
	struct pd_buf b = make_profile(now, false, 1);
	struct pd_ingest in = {.service = "svc", .type = "cpu", .created_ns = now + 30 * 24 * hour,
			       .max_created_ns = now + hour};
	struct pd_profile_meta m;
	struct pd_err err;
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "future"));
	struct pd_store_stats ss;
	assert_int_equal(pd_store_stats(st, &ss, &err), 0);
	assert_int_equal(ss.partitions, 0);
	in.created_ns = now + hour / 2;
	assert_int_equal(pd_store_ingest(st, &in, b.ptr, b.len, &m, &err), 0);
	pd_meta_clear(&m);
	pd_buf_free(&b);
	pd_store_close(st);
}

/* Labels as listed: "id k=v,k=v;" per profile, in listing order. */
static int collect_labels(void *ctx, const struct pd_profile_meta *m)
{
	struct pd_buf *b = ctx;
	char line[1024];
	int n = snprintf(line, sizeof line, "%.4s ", m->id + 16);
	for (size_t i = 0; i < m->nlabels; i++)
		n += snprintf(line + n, sizeof line - (size_t)n, "%s%s=%s", i ? "," : "", m->labels[i].key,
			      m->labels[i].value);
	n += snprintf(line + n, sizeof line - (size_t)n, ";");
	assert_int_equal(pd_buf_append(b, line, (size_t)n), 0);
	return 0;
}

/* Listing of svc (labels matching l[0..nl)) as collect_labels writes it,
 * with the id's last four characters replaced by its index in ids. */
static char *listed(struct pd_store *st, const char *svc, const struct pd_kv *l, size_t nl,
		    char (*ids)[PD_STORE_ID_LEN + 1], size_t nids)
{
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_store_query q = {svc, NULL, l, nl, INT64_MIN, INT64_MAX, 0};
	struct pd_err err;
	if (pd_store_find(st, &q, collect_labels, &b, &err))
		fail_msg("find: %s", err.msg);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	char *out = (char *)b.ptr;
	for (size_t i = 0; i < nids; i++) {
		char *at;
		char tag[16];
		snprintf(tag, sizeof tag, "#%-3u", (unsigned)i % 1000);
		while ((at = strstr(out, ids[i] + 16)))
			memcpy(at, tag, 4);
	}
	return out;
}

#define assert_listed(st, svc, l, nl, ids, nids, want)                                                                 \
	do {                                                                                                           \
		char *got_ = listed(st, svc, l, nl, ids, nids);                                                        \
		assert_string_equal(got_, want);                                                                       \
		free(got_);                                                                                            \
	} while (0)

/* Schema 6: a profile's labels are one row of label_sets per distinct set
 * (the order given does not make another set), listed in key order (equal
 * keys as given) and matched as before; a file of schema 5, whose
 * profiles have rows in profile_labels, is read and written on: old and
 * new profiles are listed, matched and removed alike. A damaged set is
 * damage: check names it, a listing skips the day. */
static void test_label_sets(void **state)
{
	(void)state;
	const struct pd_kv a[] = {{"pod", "p-1"}, {"namespace", "ops"}, {"app", "web"}},
	                   a2[] = {{"app", "web"}, {"namespace", "ops"}, {"pod", "p-1"}},
	                   b[] = {{"pod", "p-2"}, {"namespace", "ops"}, {"app", "web"}, {"z", "2"}, {"z", "1"}};
	char ids[8][PD_STORE_ID_LEN + 1];
	struct pd_store *st = open_store();
	for (int i = 0; i < 6; i++) {
		struct pd_buf pb = make_profile(T0 + i * 1000000000LL, false, 1);
		struct pd_profile_meta m;
		if (i == 5)
			ingest(st, "ls", "cpu", NULL, 0, &pb, &m);
		else
			ingest(st, "ls", "cpu", i % 3 == 0 ? a : i % 3 == 1 ? a2 : b, i % 3 == 2 ? 5 : 3, &pb, &m);
		memcpy(ids[i], m.id, sizeof ids[i]);
		pd_meta_clear(&m);
		pd_buf_free(&pb);
	}
	const char *all = "#0   app=web,namespace=ops,pod=p-1;#1   app=web,namespace=ops,pod=p-1;"
	                  "#2   app=web,namespace=ops,pod=p-2,z=2,z=1;#3   app=web,namespace=ops,pod=p-1;"
	                  "#4   app=web,namespace=ops,pod=p-1;#5   ;";
	assert_listed(st, "ls", NULL, 0, ids, 6, all);
	const struct pd_kv q1[] = {{"pod", "p-1"}}, q2[] = {{"namespace", "ops"}, {"z", "1"}}, q3[] = {{"z", "3"}};
	assert_listed(st, "ls", q1, 1, ids, 6,
	              "#0   app=web,namespace=ops,pod=p-1;#1   app=web,namespace=ops,pod=p-1;"
	              "#3   app=web,namespace=ops,pod=p-1;#4   app=web,namespace=ops,pod=p-1;");
	assert_listed(st, "ls", q2, 2, ids, 6, "#2   app=web,namespace=ops,pod=p-2,z=2,z=1;");
	assert_listed(st, "ls", q3, 1, ids, 6, "");
	pd_store_close(st);
	char path[512];
	day_file_path(T0, path, sizeof path);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM label_sets"), 2); /* a and a2 are one set */
	assert_int_equal(day_int(db, "SELECT count(*) FROM set_labels"), 3 + 5);
	assert_int_equal(day_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'profile_labels'"), 0);
	sqlite3_close(db);
	assert_int_equal(check_reports(), 0);

	/* the same day as a file of schema 5: labels in profile_labels */
	day_sql(T0, "BEGIN; CREATE TABLE profile_labels(pk INTEGER NOT NULL, k TEXT NOT NULL, v TEXT NOT NULL);"
	            " CREATE INDEX profile_labels_pk ON profile_labels(pk);"
	            " CREATE INDEX profile_labels_kv ON profile_labels(k, v, pk);"
	            " CREATE TABLE p5(pk INTEGER PRIMARY KEY, xid TEXT NOT NULL, service TEXT NOT NULL,"
	            " type TEXT NOT NULL, created INTEGER NOT NULL, header BLOB NOT NULL, block BLOB NOT NULL,"
	            " nsamples INTEGER NOT NULL); INSERT INTO p5 SELECT pk, pd_xid(created, xid), service, type, created,"
	            " header, block,"
	            " nsamples FROM profiles; DROP TABLE profiles; ALTER TABLE p5 RENAME TO profiles;"
	            " CREATE INDEX profiles_svc ON profiles(service, created); DROP TABLE label_sets;"
	            " DROP TABLE set_labels; PRAGMA user_version = 5; COMMIT;");
	/* rows as schema 5 wrote them: in the order given */
	for (int i = 0; i < 5; i++) {
		const struct pd_kv *l = i % 3 == 0 ? a : i % 3 == 1 ? a2 : b;
		for (int k = 0; k < (i % 3 == 2 ? 5 : 3); k++) {
			char sql[320];
			snprintf(sql, sizeof sql,
			         "INSERT INTO profile_labels SELECT pk, '%s', '%s' FROM profiles"
			         " WHERE pd_xid(created, xid) = '%s'",
			         l[k].key, l[k].value, ids[i]);
			day_sql(T0, sql);
		}
	}
	st = open_store();
	assert_listed(st, "ls", NULL, 0, ids, 6, all);
	for (int i = 6; i < 8; i++) { /* new profiles of the old sets, and one more set */
		struct pd_buf pb = make_profile(T0 + i * 1000000000LL, false, 1);
		struct pd_profile_meta m;
		const struct pd_kv c[] = {{"pod", "p-3"}};
		ingest(st, "ls", "cpu", i == 6 ? a2 : c, i == 6 ? 3 : 1, &pb, &m);
		memcpy(ids[i], m.id, sizeof ids[i]);
		pd_meta_clear(&m);
		pd_buf_free(&pb);
	}
	struct pd_err err;
	assert_int_equal(pd_store_remove(st, ids[0], &err), 0);
	assert_listed(st, "ls", q1, 1, ids, 8,
	              "#1   app=web,namespace=ops,pod=p-1;#3   app=web,namespace=ops,pod=p-1;"
	              "#4   app=web,namespace=ops,pod=p-1;#6   app=web,namespace=ops,pod=p-1;");
	const struct pd_kv q4[] = {{"pod", "p-3"}};
	assert_listed(st, "ls", q4, 1, ids, 8, "#7   pod=p-3;");
	pd_store_close(st);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sq_xid_fn(db), 0);
	assert_int_equal(day_int(db, "PRAGMA user_version"), PD_DAYFILE_SCHEMA);
	assert_int_equal(day_int(db, "SELECT count(*) FROM profile_labels WHERE pk NOT IN (SELECT pk FROM profiles)"),
	                 0);
	assert_int_equal(day_int(db, "SELECT count(*) FROM label_sets"), 2);
	sqlite3_close(db);
	assert_int_equal(check_reports(), 0);

	/* a damaged set: check names it; a listing skips the day, says so */
	flip_blob(T0, "label_sets", "c", "seq = 1", 12);
	assert_int_equal(check_reports(), 1);
	assert_non_null(strstr(last_what, "label set #1"));
	st = open_store();
	struct ids found = {0};
	struct pd_store_query q = {"ls", NULL, NULL, 0, INT64_MIN, INT64_MAX, 0};
	struct pd_store_skipped sk = {0};
	assert_int_equal(pd_store_find_partial(st, &q, collect, &found, &sk, &err), 0);
	assert_int_equal(found.n, 5); /* the old profiles before #6, whose set (#1) is damaged */
	assert_int_equal(sk.n, 1);
	assert_int_equal(pd_store_find_partial(st, &q, collect, &found, &sk, &err), 0);
	assert_int_equal(found.n, 5); /* quarantined now: none of the day */
	pd_store_close(st);
}

int main(void)
{
	ch_base = getenv("PD_TEST_STORE");
	ch_cluster = getenv("PD_TEST_CH_CLUSTER");
	if (ch_base && !*ch_base)
		ch_base = NULL;
	if (ch_base) {
		/* what every backend must do (store.h); the rest is the embedded
		 * store's own: its files, rollups, checksums and quarantine */
		const struct CMUnitTest generic[] = {
			cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
			cmocka_unit_test_setup_teardown(test_find_filters, setup, teardown),
			cmocka_unit_test_setup_teardown(test_time_edges, setup, teardown),
			cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
			cmocka_unit_test_setup_teardown(test_label_order, setup, teardown),
			cmocka_unit_test_setup_teardown(test_bad_input_stores_nothing, setup, teardown),
			cmocka_unit_test_setup_teardown(test_remove_reopen_retain, setup, teardown),
			cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
			cmocka_unit_test_setup_teardown(test_rollup_fallback, setup, teardown),
			cmocka_unit_test_setup_teardown(test_future_skew, setup, teardown),
			cmocka_unit_test_setup_teardown(test_refusal_reasons, setup, teardown),
			cmocka_unit_test_setup_teardown(test_rollup_merge, setup, teardown),
			cmocka_unit_test_setup_teardown(test_merge_first_nonempty, setup, teardown),
			cmocka_unit_test_setup_teardown(test_merge_zero_sum, setup, teardown),
			cmocka_unit_test_setup_teardown(test_mapping_own_copy, setup, teardown),
			cmocka_unit_test_setup_teardown(test_rollup_concurrent, setup, teardown),
			cmocka_unit_test_setup_teardown(test_rollup_incompatible, setup, teardown),
			cmocka_unit_test_setup_teardown(test_rollup_retention, setup, teardown),
		};
		return cmocka_run_group_tests_name("store conformance (ClickHouse)", generic, NULL, NULL);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xid),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_find_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_time_edges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_label_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_stores_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_reopen_retain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dedup_is_compact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_first_nonempty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_zero_sum, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mapping_own_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_invalidation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_incompatible, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checksums, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_and_legacy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_header_in_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_page_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbols_unindexed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbol_packs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packs_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packs_snapshots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packs_upgrade, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packs_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_day_facts_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_pass_skips_done_days, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quarantine_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quarantine_nonfile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_day_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_torn_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_day_file_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_partitions_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_future_skew, setup, teardown),
		cmocka_unit_test_setup_teardown(test_content_ids_stable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_chains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_file_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusal_reasons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_id_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_label_sets, setup, teardown),
		cmocka_unit_test(test_prepare_core),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
