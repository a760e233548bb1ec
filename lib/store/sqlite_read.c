/*
 * sqlite_read.c — the SQLite backend's materialisation (see sqlite.c): a
 * pd_profile built from a partition's symbols, reading only the strings,
 * functions, mappings, locations, stacks and label sets it uses.
 */
#define _GNU_SOURCE
#include "sqlite_int.h"

/* ---- reading: header, block, materialisation ------------------------------------ */

/* Read back a symbol's stored content into buf. */
static int sym_get(struct part *p, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	sqlite3_stmt *g = p->get[k];
	sqlite3_reset(g);
	sqlite3_bind_int64(g, 1, seq);
	int r = sqlite3_step(g);
	if (r != SQLITE_ROW) {
		sqlite3_reset(g);
		if (r != SQLITE_DONE && !sq_corrupt(p->db))
			return sq_err(err, p->db, "symbol");
		return sq_damaged(p, err, "%s #%lld missing", sq_ktable[k], (long long)seq);
	}
	buf->len = 0;
	int rc = pd_buf_append(buf, sqlite3_column_blob(g, 0), (size_t)sqlite3_column_bytes(g, 0));
	sqlite3_reset(g);
	return rc ? pd_errf(err, rc, "out of memory") : 0;
}

static int mat_init(struct mat *m, struct part *pt, struct pd_err *err)
{
	memset(m, 0, sizeof *m);
	m->pt = pt;
	m->err = err;
	m->p = calloc(1, sizeof *m->p);
	if (!m->p || !(m->p->arena = pd_arena_new(256 * 1024)) || pd_hidx_init(&m->rs.idx, 1024) ||
	    pd_hidx_init(&m->rf.idx, 1024) || pd_hidx_init(&m->rm.idx, 16) || pd_hidx_init(&m->rl.idx, 1024) ||
	    pd_hidx_init(&m->rstk.idx, 1024) || pd_hidx_init(&m->rls.idx, 64))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

void sq_mat_free(struct mat *m)
{
	remap_free(&m->rs), remap_free(&m->rf), remap_free(&m->rm), remap_free(&m->rl);
	remap_free(&m->rstk), remap_free(&m->rls);
	free(m->strs), free(m->fns), free(m->maps), free(m->locs), free(m->stacks), free(m->lsets);
	pd_buf_free(&m->b);
	pd_profile_free(m->p);
}

#define NOMEM(m) pd_errf((m)->err, PD_ENOMEM, "out of memory")

static int mat_str(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rs, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_STR, seq, &m->b, m->err);
	if (rc)
		return rc;
	if (pd_grow((void **)&m->strs, &m->cs, m->rs.n, sizeof *m->strs))
		return NOMEM(m);
	char *c = m->b.len ? pd_arena_dup(m->p->arena, m->b.ptr, m->b.len) : (char *)"";
	if (!c)
		return NOMEM(m);
	m->strs[*out] = (struct pd_str){c, (uint32_t)m->b.len};
	return 0;
}

static int mat_fn(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rf, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_FN, seq, &m->b, m->err);
	if (rc)
		return rc;
	struct pd_rd r = {m->b.ptr, m->b.ptr + m->b.len, false};
	int64_t name = (int64_t)pd_rd_v(&r), sys = (int64_t)pd_rd_v(&r), file = (int64_t)pd_rd_v(&r);
	int64_t sl = pd_unzz(pd_rd_v(&r));
	if (r.bad)
		return sq_damaged(m->pt, m->err, "corrupt function #%lld", (long long)seq);
	struct pd_function f = {*out + 1, 0, 0, 0, sl};
	if ((rc = mat_str(m, name, &f.name)) || (rc = mat_str(m, sys, &f.system_name)) ||
	    (rc = mat_str(m, file, &f.filename)))
		return rc;
	if (pd_grow((void **)&m->fns, &m->cf, m->rf.n, sizeof *m->fns))
		return NOMEM(m);
	m->fns[*out] = f;
	return 0;
}

static int mat_map(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rm, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m->pt, K_MAP, seq, &m->b, m->err);
	if (rc)
		return rc;
	struct pd_rd r = {m->b.ptr, m->b.ptr + m->b.len, false};
	(void)pd_rd_v(&r); /* key: size, offset, build id or file */
	uint64_t offset = pd_rd_v(&r);
	(void)pd_rd_v(&r);
	uint64_t start = pd_rd_v(&r), limit = pd_rd_v(&r);
	int64_t file = (int64_t)pd_rd_v(&r), build = (int64_t)pd_rd_v(&r);
	uint64_t flags = pd_rd_v(&r);
	if (r.bad)
		return sq_damaged(m->pt, m->err, "corrupt mapping #%lld", (long long)seq);
	struct pd_mapping mp = {*out + 1, start, limit, offset, 0, 0, flags & 1, flags >> 1 & 1, flags >> 2 & 1,
				flags >> 3 & 1};
	if ((rc = mat_str(m, file, &mp.filename)) || (rc = mat_str(m, build, &mp.build_id)))
		return rc;
	if (pd_grow((void **)&m->maps, &m->cm, m->rm.n, sizeof *m->maps))
		return NOMEM(m);
	m->maps[*out] = mp;
	return 0;
}

static int mat_loc(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rl, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	/* its own buffer: the children read below reuse m->b */
	struct pd_buf own = PD_BUF_INIT(0);
	int rc = sym_get(m->pt, K_LOC, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	int64_t mseq = (int64_t)pd_rd_v(&r);
	uint64_t rel = pd_rd_v(&r);
	bool folded = pd_rd_v(&r) != 0;
	uint32_t nl = (uint32_t)pd_rd_v(&r);
	struct pd_location l = {*out + 1, rel, PD_NONE, 0, NULL, folded};
	if (r.bad || nl > n) {
		pd_buf_free(&own);
		return sq_damaged(m->pt, m->err, "corrupt location #%lld", (long long)seq);
	}
	if (mseq && (rc = mat_map(m, mseq, &l.mapping))) {
		pd_buf_free(&own);
		return rc;
	}
	if (l.mapping != PD_NONE)
		l.address = m->maps[l.mapping].start + rel;
	if (nl && !(l.lines = pd_arena_alloc(m->p->arena, nl * sizeof *l.lines))) {
		pd_buf_free(&own);
		return NOMEM(m);
	}
	for (uint32_t j = 0; j < nl; j++) {
		int64_t f = (int64_t)pd_rd_v(&r);
		l.lines[j].line = pd_unzz(pd_rd_v(&r));
		l.lines[j].column = pd_unzz(pd_rd_v(&r));
		if (r.bad) {
			pd_buf_free(&own);
			return sq_damaged(m->pt, m->err, "corrupt location #%lld", (long long)seq);
		}
		if ((rc = mat_fn(m, f, &l.lines[j].function))) {
			pd_buf_free(&own);
			return rc;
		}
		l.nlines++;
	}
	pd_buf_free(&own);
	if (pd_grow((void **)&m->locs, &m->cl, m->rl.n, sizeof *m->locs))
		return NOMEM(m);
	m->locs[*out] = l;
	return 0;
}

static int mat_stack(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rstk, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	struct pd_buf own = PD_BUF_INIT(0); /* the locations read below reuse m->b */
	int rc = sym_get(m->pt, K_STACK, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	uint32_t *ids = pd_arena_alloc(m->p->arena, (n + 1) * sizeof *ids);
	uint32_t k = 0;
	while (ids && r.p < r.end && !r.bad) {
		int64_t ls = (int64_t)pd_rd_v(&r);
		if (!r.bad && (rc = mat_loc(m, ls, &ids[k++]))) {
			pd_buf_free(&own);
			return rc;
		}
	}
	pd_buf_free(&own);
	if (!ids)
		return NOMEM(m);
	if (r.bad)
		return sq_damaged(m->pt, m->err, "corrupt stack #%lld", (long long)seq);
	if (pd_grow((void **)&m->stacks, &m->cstk, m->rstk.n, sizeof *m->stacks))
		return NOMEM(m);
	m->stacks[*out].locs = ids;
	m->stacks[*out].n = k;
	return 0;
}

static int mat_lset(struct mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rls, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	if (pd_grow((void **)&m->lsets, &m->cls, m->rls.n, sizeof *m->lsets))
		return NOMEM(m);
	m->lsets[*out].l = NULL;
	m->lsets[*out].n = 0;
	if (seq == 0)
		return 0;
	struct pd_buf own = PD_BUF_INIT(0); /* the strings read below reuse m->b */
	int rc = sym_get(m->pt, K_LSET, seq, &own, m->err);
	if (rc)
		return rc;
	size_t n = own.len;
	struct pd_label *l = pd_arena_alloc(m->p->arena, (n / 4 + 1) * sizeof *l);
	if (!l) {
		pd_buf_free(&own);
		return NOMEM(m);
	}
	struct pd_rd r = {own.ptr, own.ptr + n, false};
	uint32_t k = 0;
	while (r.p < r.end && !r.bad) {
		int64_t key = (int64_t)pd_rd_v(&r), str = (int64_t)pd_rd_v(&r);
		int64_t num = pd_unzz(pd_rd_v(&r));
		int64_t unit = (int64_t)pd_rd_v(&r);
		if (r.bad)
			break;
		l[k].num = num;
		if ((rc = mat_str(m, key, &l[k].key)) || (rc = mat_str(m, str, &l[k].str)) ||
		    (rc = mat_str(m, unit, &l[k].num_unit))) {
			pd_buf_free(&own);
			return rc;
		}
		k++;
	}
	pd_buf_free(&own);
	if (r.bad)
		return sq_damaged(m->pt, m->err, "corrupt label set #%lld", (long long)seq);
	m->lsets[*out].l = l;
	m->lsets[*out].n = k;
	return 0;
}

/* Header fields into the profile (strings through the partition). */
static int mat_header(struct mat *m, const struct pd_shdr *h)
{
	struct pd_profile *p = m->p;
	int rc;
	uint32_t e; /* "" first: string 0 must be empty */
	/* The header's seq of "": a string field that is empty (doc_url and
	 * default_sample_type are in Go's profiles, drop_frames is not in
	 * legacy ones, which carry pprof's drop_frames regexps). */
	int64_t empty = h->drop, cand[] = {h->drop, h->doc, h->dflt, h->keep};
	for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
		if ((rc = sym_get(m->pt, K_STR, cand[i], &m->b, m->err)))
			return rc;
		if (m->b.len == 0) {
			empty = cand[i];
			break;
		}
	}
	if ((rc = mat_str(m, empty, &e)))
		return rc;
	p->sample_types = pd_arena_alloc(p->arena, (h->nst + 1) * sizeof *p->sample_types);
	p->comments = pd_arena_alloc(p->arena, (h->ncomments + 1) * sizeof *p->comments);
	if (!p->sample_types || !p->comments)
		return NOMEM(m);
	for (uint32_t i = 0; i < h->nst; i++)
		if ((rc = mat_str(m, h->stypes[2 * i], &p->sample_types[i].type)) ||
		    (rc = mat_str(m, h->stypes[2 * i + 1], &p->sample_types[i].unit)))
			return rc;
	p->nsample_types = h->nst;
	for (uint32_t i = 0; i < h->ncomments; i++)
		if ((rc = mat_str(m, h->comments[i], &p->comments[i])))
			return rc;
	p->ncomments = h->ncomments;
	if ((rc = mat_str(m, h->ptype, &p->period_type.type)) || (rc = mat_str(m, h->punit, &p->period_type.unit)) ||
	    (rc = mat_str(m, h->drop, &p->drop_frames)) || (rc = mat_str(m, h->keep, &p->keep_frames)) ||
	    (rc = mat_str(m, h->dflt, &p->default_sample_type)) || (rc = mat_str(m, h->doc, &p->doc_url)))
		return rc;
	p->period = h->period;
	p->time_nanos = h->time;
	p->duration_nanos = h->duration;
	for (uint32_t i = 0; i < h->nmaps; i++) {
		uint32_t mi;
		if ((rc = mat_map(m, h->maps[i], &mi)))
			return rc;
	}
	return 0;
}

/* Copy n bytes into the arena; never NULL for n == 0 (NULL = out of memory). */
static void *dup0(struct pd_arena *a, const void *src, size_t n)
{
	void *q = pd_arena_alloc(a, n + 1);
	if (q && n)
		memcpy(q, src, n);
	return q;
}

/* Move the grown arrays into the arena; the profile is then complete. */
int sq_mat_finish(struct mat *m, struct pd_profile **out)
{
	struct pd_profile *p = m->p;
	struct pd_arena *a = p->arena;
	p->strings = dup0(a, m->strs, m->rs.n * sizeof *m->strs);
	p->functions = dup0(a, m->fns, m->rf.n * sizeof *m->fns);
	p->mappings = dup0(a, m->maps, m->rm.n * sizeof *m->maps);
	p->locations = dup0(a, m->locs, m->rl.n * sizeof *m->locs);
	if (!p->strings || !p->functions || !p->mappings || !p->locations)
		return NOMEM(m);
	p->nstrings = (uint32_t)m->rs.n;
	p->nfunctions = (uint32_t)m->rf.n;
	p->nmappings = (uint32_t)m->rm.n;
	p->nlocations = (uint32_t)m->rl.n;
	*out = p;
	m->p = NULL;
	return 0;
}

/* Start a profile of partition pt with header h and room for nrows samples. */
int sq_mat_start(struct mat *m, struct part *pt, const struct pd_shdr *h, size_t nrows, struct pd_err *err)
{
	int rc = mat_init(m, pt, err);
	if (!rc)
		rc = mat_header(m, h);
	if (!rc && !(m->p->samples = pd_arena_alloc(m->p->arena, (nrows + 1) * sizeof *m->p->samples)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	return rc;
}

/* Append a sample (stack and label-set seqs, values) to the profile being
 * built; samples must have been allocated for. */
int sq_mat_sample(struct mat *m, int64_t stack, int64_t lset, const int64_t *vals, uint32_t nv)
{
	uint32_t si, li;
	int rc;
	if ((rc = mat_stack(m, stack, &si)) || (rc = mat_lset(m, lset, &li)))
		return rc;
	struct pd_sample *s = &m->p->samples[m->p->nsamples++];
	s->locs = m->stacks[si].locs;
	s->nlocs = m->stacks[si].n;
	s->labels = m->lsets[li].l;
	s->nlabels = m->lsets[li].n;
	s->values = dup0(m->p->arena, vals, nv * sizeof *vals);
	return s->values ? 0 : NOMEM(m);
}

