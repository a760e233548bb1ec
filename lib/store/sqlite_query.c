/*
 * sqlite_query.c — the SQLite backend's queries (see sqlite.c): the day
 * files a time range touches, finding profiles, locating one by id,
 * reading and checking its stored header and sample block, get.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>

/* ---- queries ------------------------------------------------------------------------ */

/* The days of the partition files whose day intersects [from, to],
 * ascending, from the directory alone (nothing opened: an operation over
 * many days opens them one at a time, within the LRU's bound). */
int sq_days_in(struct sq *s, int64_t from, int64_t to, int64_t **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir(s->dir);
	if (!d)
		return errno == EMFILE || errno == ENFILE ? pd_errf(err, PD_EBUSY, "store: %s: " EMFILE_HINT, s->dir)
							  : pd_errf(err, PD_EIO, "store: %s: %s", s->dir, strerror(errno));
	int64_t *days = NULL;
	size_t nd = 0, cd = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		int y, mo, dd;
		char tail[8];
		if (sscanf(e->d_name, "profd-%4d%2d%2d.%7s", &y, &mo, &dd, tail) != 4 || strcmp(tail, "db"))
			continue;
		struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = dd};
		int64_t day = (int64_t)timegm(&tm) / 86400;
		if ((day + 1) * DAY_NS - 1 < from || day * DAY_NS > to)
			continue;
		if (pd_grow((void **)&days, &cd, nd + 1, sizeof *days)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		days[nd++] = day;
	}
	closedir(d);
	for (size_t i = 1; i < nd; i++)
		for (size_t k = i; k > 0 && days[k - 1] > days[k]; k--) {
			int64_t t = days[k];
			days[k] = days[k - 1];
			days[k - 1] = t;
		}
	if (rc) {
		free(days);
		return rc;
	}
	*out = days;
	*n = nd;
	return 0;
}

/* The partition of an existing day, for a query: a damaged one is skipped
 * (0, *pt = NULL, the day added to sk), a missing file too. */
int sq_part_q(struct sq *s, int64_t day, struct part **pt, struct pd_store_skipped *sk, struct pd_err *err)
{
	int rc = sq_part_get(s, day, false, pt, err);
	if (rc && sq_quar_find(s, day)) {
		if (sk)
			pd_store_skipped_add(sk, day);
		*pt = NULL;
		return 0;
	}
	return rc;
}

/* After an error while reading pt in a query: skip it (0) if the error was
 * damage (pt quarantined), else the error. */
int sq_part_skip(struct part *pt, int rc, struct pd_store_skipped *sk)
{
	if (rc && pt && pt->bad) {
		if (sk)
			pd_store_skipped_add(sk, pt->day);
		return 0;
	}
	return rc;
}

void pd_meta_clear(struct pd_profile_meta *m)
{
	for (size_t i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	m->labels = NULL;
	m->nlabels = 0;
}

/* m's labels: its set's (schema 6: lset > 0), else its rows of
 * profile_labels (a profile of a file before schema 6). A set that does
 * not decode is damage: the day is quarantined. */
static int load_labels(struct part *pt, int64_t pk, int64_t lset, struct pd_profile_meta *m, struct pd_err *err)
{
	sqlite3_stmt *st = lset ? pt->get_lset : pt->get_labels;
	if (!st)
		return 0; /* no labels: a file of schema 6 */
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, lset ? lset : pk);
	int r, rc = 0;
	if (lset) {
		if ((r = sqlite3_step(st)) == SQLITE_ROW) {
			struct pd_err e;
			if (pd_lset_dec(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m->labels,
					&m->nlabels, &e))
				rc = e.code == PD_ENOMEM ? pd_errf(err, PD_ENOMEM, "out of memory")
							 : sq_damaged(pt, err, "profile %s: label set #%lld: %s", m->id,
								      (long long)lset, e.msg);
		} else {
			rc = r == SQLITE_DONE ? sq_damaged(pt, err, "profile %s: its label set #%lld is missing", m->id,
							   (long long)lset)
					      : sq_qerr(pt, pt->db, "labels", err);
		}
		sqlite3_reset(st);
		return rc;
	}
	size_t cap = 0;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *k = (const char *)sqlite3_column_text(st, 0), *v = (const char *)sqlite3_column_text(st, 1);
		if (pd_grow((void **)&m->labels, &cap, m->nlabels + 1, sizeof *m->labels) ||
		    !(m->labels[m->nlabels].key = strdup(k ? k : ""))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		if (!(m->labels[m->nlabels].value = strdup(v ? v : ""))) {
			free(m->labels[m->nlabels].key);
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		m->nlabels++;
	}
	if (!rc && r != SQLITE_DONE)
		rc = sq_qerr(pt, pt->db, "labels", err);
	sqlite3_reset(st);
	return rc;
}

/* The listing's statement: profiles of a service in a time range (of a
 * type), every label matcher k = v true of the profile's set (and, in a
 * file before schema 6, of its rows of profile_labels). Label i's key and
 * value are ?(5 + 2i) and ?(6 + 2i). */
static int find_sql(const struct pd_store_query *q, bool plabels, struct pd_buf *sql)
{
	const char *base = "SELECT p.pk, pd_xid(p.created, p.xid), p.service, p.type, p.created,"
			   " length(p.block) + length(p.header), p.lset"
			   " FROM profiles p WHERE p.service = ?1 AND p.created BETWEEN ?2 AND ?3"
			   " AND (?4 IS NULL OR p.type = ?4)";
	int rc = pd_buf_append(sql, base, strlen(base));
	for (size_t i = 0; i < q->nlabels && !rc; i++) {
		int k = 5 + 2 * (int)i, v = k + 1;
		char c[400];
		int n = plabels ? snprintf(c, sizeof c,
					   " AND (EXISTS (SELECT 1 FROM set_labels l WHERE l.k = ?%d AND l.v = ?%d"
					   " AND l.s = p.lset) OR EXISTS (SELECT 1 FROM profile_labels l"
					   " WHERE l.pk = p.pk AND l.k = ?%d AND l.v = ?%d))",
					   k, v, k, v)
				: snprintf(c, sizeof c,
					   " AND EXISTS (SELECT 1 FROM set_labels l WHERE l.k = ?%d AND l.v = ?%d"
					   " AND l.s = p.lset)",
					   k, v);
		rc = pd_buf_append(sql, c, (size_t)n);
	}
	return rc || pd_buf_append(sql, "", 1) ? PD_ENOMEM : 0;
}

struct hit {
	int64_t day;
	int64_t pk, created, lset;
	char xid[PD_STORE_ID_LEN + 1];
	char service[128], type[16];
	size_t bytes;
};

static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->xid, y->xid);
}

int sq_find(struct pd_store *base, const struct pd_store_query *q, pd_meta_fn fn, void *ctx,
		   struct pd_store_skipped *skipped, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	if (!q->service || !*q->service)
		return pd_errf(err, PD_EINVAL, "missing \"service\"");
	if (q->from_ns > q->to_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" is after \"to\"");
	sq_store_lock(s);
	int64_t *days = NULL;
	size_t nd;
	struct hit *hits = NULL;
	size_t nh = 0, ch = 0;
	struct pd_buf sql[2] = {PD_BUF_INIT(0), PD_BUF_INIT(0)}; /* [plabels] */
	int rc = sq_days_in(s, q->from_ns, q->to_ns, &days, &nd, err);
	if (rc)
		goto out;
	for (size_t i = 0; i < nd && !rc; i++) {
		struct part *pt;
		if ((rc = sq_part_q(s, days[i], &pt, skipped, err)) || !pt)
			continue;
		struct pd_buf *b = &sql[pt->plabels];
		if (!b->len && find_sql(q, pt->plabels, b)) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			sq_part_done(pt);
			break;
		}
		sqlite3_stmt *st;
		sq_part_read(pt);
		if (sqlite3_prepare_v2(pt->db, (const char *)b->ptr, -1, &st, NULL) != SQLITE_OK) {
			rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "query", err), skipped);
			sq_part_done(pt);
			continue;
		}
		sqlite3_bind_text(st, 1, q->service, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, q->from_ns);
		sqlite3_bind_int64(st, 3, q->to_ns);
		if (q->type)
			sqlite3_bind_text(st, 4, q->type, -1, SQLITE_STATIC);
		for (size_t l = 0; l < q->nlabels; l++) {
			sqlite3_bind_text(st, 5 + 2 * (int)l, q->labels[l].key, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 6 + 2 * (int)l, q->labels[l].value, -1, SQLITE_STATIC);
		}
		size_t nh0 = nh;
		int r;
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			if (pd_grow((void **)&hits, &ch, nh + 1, sizeof *hits)) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				break;
			}
			struct hit *h = &hits[nh++];
			h->day = pt->day;
			h->pk = sqlite3_column_int64(st, 0);
			snprintf(h->xid, sizeof h->xid, "%s", (const char *)sqlite3_column_text(st, 1));
			snprintf(h->service, sizeof h->service, "%s", (const char *)sqlite3_column_text(st, 2));
			snprintf(h->type, sizeof h->type, "%s", (const char *)sqlite3_column_text(st, 3));
			h->created = sqlite3_column_int64(st, 4);
			h->bytes = (size_t)sqlite3_column_int64(st, 5);
			h->lset = sqlite3_column_int64(st, 6);
		}
		if (!rc && r != SQLITE_DONE) {
			rc = sq_part_skip(pt, sq_qerr(pt, pt->db, "query", err), skipped);
			nh = nh0; /* none of a damaged day */
		}
		sqlite3_finalize(st);
		sq_part_done(pt);
	}
	if (nh)
		qsort(hits, nh, sizeof *hits, cmp_hit);
	size_t first = q->limit && nh > q->limit ? nh - q->limit : 0; /* the newest `limit` */
	struct part *pt = NULL;
	for (size_t i = first; i < nh && !rc; i++) {
		if (!pt || pt->day != hits[i].day) { /* ascending time: each day once */
			sq_part_done(pt);
			if ((rc = sq_part_q(s, hits[i].day, &pt, skipped, err)))
				break;
			if (!pt)
				continue; /* damaged meanwhile: skipped */
			sq_part_read(pt); /* the labels of the day's profiles in one read transaction */
		}
		struct pd_profile_meta m = {0};
		memcpy(m.id, hits[i].xid, sizeof m.id);
		memcpy(m.service, hits[i].service, sizeof m.service);
		memcpy(m.type, hits[i].type, sizeof m.type);
		m.created_ns = hits[i].created;
		m.stored_bytes = hits[i].bytes;
		if ((rc = load_labels(pt, hits[i].pk, hits[i].lset, &m, err)) && pt->bad) {
			rc = sq_part_skip(pt, rc, skipped); /* damaged: the day's other profiles are not listed */
			pd_meta_clear(&m);
			sq_part_done(pt);
			pt = NULL;
			for (int64_t day = hits[i].day; i + 1 < nh && hits[i + 1].day == day;)
				i++;
			continue;
		}
		if (!rc)
			rc = fn(ctx, &m);
		pd_meta_clear(&m);
	}
out:
	sq_store_unlock(s);
	pd_buf_free(&sql[0]);
	pd_buf_free(&sql[1]);
	free(days);
	free(hits);
	return rc;
}

void sq_svc_forget(struct part *p)
{
	for (size_t i = 0; i < p->nsvc; i++)
		free(p->svc[i]);
	free(p->svc);
	if (p->svc_next)
		sqlite3_clear_bindings(p->svc_next); /* bound to a name freed here */
	p->svc = NULL;
	p->nsvc = 0;
	p->svc_ok = false;
}

/* The day's services into p->svc, one seek into profiles_svc each. */
static int svc_list(struct part *p, struct pd_err *err)
{
	size_t cap = 0;
	sq_svc_forget(p);
	p->svc_at = p->rtx_no;
	sqlite3_stmt *st = p->svc_first;
	for (;;) {
		int r = sqlite3_step(st);
		const char *v = r == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
		char *dup = v ? strdup(v) : NULL;
		sqlite3_reset(st);
		if (r != SQLITE_ROW)
			return sq_qerr(p, p->db, "profile services", err);
		if (!v)
			break;
		if (!dup || pd_grow((void **)&p->svc, &cap, p->nsvc + 1, sizeof *p->svc)) {
			free(dup);
			sq_svc_forget(p);
			return pd_errf(err, PD_ENOMEM, "out of memory");
		}
		p->svc[p->nsvc++] = dup;
		st = p->svc_next;
		sqlite3_bind_text(st, 1, dup, -1, SQLITE_STATIC);
	}
	p->svc_ok = true;
	return 0;
}

/* The partition and row of profile id; PD_ENOTFOUND if none. Without an
 * index on xid (schema 5) the row is looked for under each service of the
 * day at the id's second, the service of the last one found first: ids
 * asked for together are mostly one series'. The services are listed once
 * and kept (services are only added while a day is written: a list of an
 * earlier read transaction is made again only when an id is not found). */
int sq_locate(struct sq *s, const char *id, struct part **pt, struct pd_err *err)
{
	int64_t t = pd_xid_time(id);
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found (not an id)", id);
	int rc = sq_part_get(s, floor_div(t, DAY_NS), false, pt, err);
	if (rc)
		return rc;
	if (!*pt)
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	sq_part_read(*pt);
	struct part *p = *pt;
	sqlite3_stmt *g = p->get_prof;
	sqlite3_reset(g);
	uint64_t tail;
	if (!p->xid_int)
		sqlite3_bind_text(g, 1, id, -1, SQLITE_TRANSIENT);
	else if (!pd_xid_tail(id, &tail))
		sqlite3_bind_int64(g, 1, sq_xid_key(tail));
	else /* not an id pd_xid_new writes: no row has it */
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	if (p->xidx) {
		int r = sqlite3_step(g);
		if (r == SQLITE_ROW)
			return 0; /* the row stays on get_prof until reset */
		sqlite3_reset(g);
		if (r != SQLITE_DONE)
			return sq_qerr(p, p->db, "profile", err);
		return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
	}
	bool listed = false; /* the list made in this call */
	sqlite3_bind_int64(g, 2, t); /* the id's second (pd_xid_new truncates) */
	sqlite3_bind_int64(g, 3, t + 999999999);
	/* the service of the last one found, then every other */
	for (size_t i = 0; i <= p->nsvc; i++) {
		const char *sv = i == 0 ? p->svc_last : p->svc[i - 1];
		if (!sv || (i > 0 && p->svc_last && !strcmp(sv, p->svc_last)))
			goto next;
		sqlite3_bind_text(g, 4, sv, -1, SQLITE_STATIC);
		int r = sqlite3_step(g);
		if (r == SQLITE_ROW) {
			if (i > 0) {
				char *d = strdup(sv);
				if (d) {
					free(p->svc_last);
					p->svc_last = d;
				}
			}
			return 0; /* the row stays on get_prof until reset */
		}
		sqlite3_reset(g);
		if (r != SQLITE_DONE)
			return sq_qerr(p, p->db, "profile", err);
	next:
		if (i == 0 && !p->svc_ok) {
			if ((rc = svc_list(p, err)))
				return rc;
			listed = true;
		}
		if (i == p->nsvc && !listed && (p->svc_at != p->rtx_no || !p->rtx)) {
			/* not found under a list of an earlier read: new
			 * services may have come since */
			if ((rc = svc_list(p, err)))
				return rc;
			listed = true;
			i = 0; /* then the loop's i++: the list from its start */
		}
	}
	return pd_errf(err, PD_ENOTFOUND, "profile id \"%s\" not found", id);
}

/* The payload of column col of st, a blob of row `row` checked against
 * seed: a mismatch is damage (pt quarantined), never a wrong answer. */
int sq_blob_col(struct part *pt, sqlite3_stmt *st, int col, uint64_t seed, const char *row, const char *what,
		    const uint8_t **p, size_t *n, struct pd_err *err)
{
	bool checked;
	struct pd_err e;
	if (pd_blob_open(sqlite3_column_blob(st, col), (size_t)sqlite3_column_bytes(st, col), seed, p, n, &checked, &e))
		return sq_damaged(pt, err, "%s: %s: %s", row, what, e.msg);
	return 0;
}

/* pd_block_fetch over a partition: row pk's block, then the removed
 * ones kept under pk; damage quarantines the day. */
static int fetch_base(void *ctx, int64_t pk, int k, struct pd_buf *out, struct pd_err *err)
{
	struct part *pt = ctx;
	bool frame;
	int rc = pd_block_fetch_stmt(pt->base_get, pk, k, out, &frame, err);
	if (rc == PD_EIO && (frame || sq_corrupt(pt->db)))
		return sq_damaged(pt, err, "row %lld (a base): sample block: %s", (long long)pk, err->msg);
	return rc;
}

/* Decode a profile's (or rollup's) header and block columns of st, row
 * `row`, seeds from key (its xid) or, key NULL, the rollup's identity. */
int sq_dec_row(struct sq *s, struct part *pt, sqlite3_stmt *st, int hcol, int bcol, const char *row,
		   uint64_t hseed, uint64_t bseed, struct pd_shdr *h, int64_t **rows, size_t *nrows, uint32_t *nv,
		   struct pd_err *err)
{
	const uint8_t *hp, *bp;
	size_t hn, bn;
	int rc;
	*rows = NULL;
	memset(h, 0, sizeof *h);
	if ((rc = sq_blob_col(pt, st, hcol, hseed, row, "header", &hp, &hn, err)) ||
	    (rc = sq_blob_col(pt, st, bcol, bseed, row, "sample block", &bp, &bn, err)))
		return rc;
	/* bases resolved; the raw bytes of a version 2 or 3 block are kept
	 * for the next block of its series (reads go in creation order) */
	rc = pd_row_decode(s->dctx, &s->rawcache, hp, hn, bp, bn, fetch_base, pt, h, rows, nrows, nv, err);
	return rc == PD_EIO ? sq_damaged(pt, err, "%s: %s", row, err->msg) : rc;
}

/* Header and sample rows of stored profile id. */
int sq_load_profile(struct sq *s, const char *id, struct part **pt, struct pd_shdr *h, int64_t **rows,
			size_t *nrows, uint32_t *nv, struct pd_err *err)
{
	*rows = NULL;
	memset(h, 0, sizeof *h);
	int rc = sq_locate(s, id, pt, err);
	if (rc)
		return rc;
	sqlite3_stmt *g = (*pt)->get_prof;
	char row[64];
	snprintf(row, sizeof row, "profile %s", id);
	rc = sq_dec_row(s, *pt, g, 4, 5, row, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER),
		     pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), h, rows, nrows, nv, err);
	sqlite3_reset(g);
	return rc;
}

int sq_get(struct pd_store *base, const char *id, struct pd_profile **out, struct pd_err *err)
{
	struct sq *s = (struct sq *)base;
	*out = NULL;
	sq_store_lock(s);
	struct part *pt = NULL;
	struct pd_mat m;
	memset(&m, 0, sizeof m); /* so pd_mat_free is safe on every path */
	struct pd_shdr h;
	int64_t *rows;
	size_t nrows = 0;
	uint32_t nv = 0;
	int rc = sq_load_profile(s, id, &pt, &h, &rows, &nrows, &nv, err);
	if (!rc)
		{
		struct pd_symsrc src = sq_symsrc(pt);
		rc = pd_mat_start(&m, &src, &h, nrows, err);
	}
	for (size_t i = 0; i < nrows && !rc; i++) {
		const int64_t *r = rows + i * (2 + nv);
		rc = pd_mat_sample(&m, r[0], r[1], r + 2, nv);
	}
	if (!rc)
		rc = pd_mat_finish(&m, out);
	pd_mat_free(&m);
	sq_store_unlock(s);
	pd_shdr_free(&h);
	free(rows);
	return rc;
}

