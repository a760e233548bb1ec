/*
 * mat.c — materialisation and the per-partition merge aggregate (mat.h),
 * the same for every backend.
 */
#define _GNU_SOURCE
#include "mat.h"

#include <stdarg.h>
#include <stdio.h>

static int sym_get(struct pd_mat *m, int k, int64_t seq, struct pd_buf *buf, struct pd_err *err)
{
	return m->src.get(m->src.ctx, k, seq, buf, err);
}

static int damaged(struct pd_mat *m, const char *fmt, ...) PD_PRINTF(2, 3);
static int damaged(struct pd_mat *m, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (m->src.damaged)
		return m->src.damaged(m->src.ctx, m->err, msg);
	return pd_errf(m->err, PD_EIO, "%s", msg);
}

static int mat_init(struct pd_mat *m, const struct pd_symsrc *src, struct pd_err *err)
{
	memset(m, 0, sizeof *m);
	m->src = *src;
	m->err = err;
	m->p = calloc(1, sizeof *m->p);
	if (!m->p || !(m->p->arena = pd_arena_new(256 * 1024)) || pd_hidx_init(&m->rs.idx, 1024) ||
	    pd_hidx_init(&m->rf.idx, 1024) || pd_hidx_init(&m->rm.idx, 16) || pd_hidx_init(&m->rl.idx, 1024) ||
	    pd_hidx_init(&m->rstk.idx, 1024) || pd_hidx_init(&m->rls.idx, 64))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

void pd_mat_free(struct pd_mat *m)
{
	remap_free(&m->rs), remap_free(&m->rf), remap_free(&m->rm), remap_free(&m->rl);
	remap_free(&m->rstk), remap_free(&m->rls);
	free(m->strs), free(m->fns), free(m->maps), free(m->locs), free(m->stacks), free(m->lsets);
	pd_buf_free(&m->b);
	pd_profile_free(m->p);
}

#define NOMEM(m) pd_errf((m)->err, PD_ENOMEM, "out of memory")

static int mat_str(struct pd_mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rs, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m, PD_SYM_STR, seq, &m->b, m->err);
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

static int mat_fn(struct pd_mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rf, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m, PD_SYM_FN, seq, &m->b, m->err);
	if (rc)
		return rc;
	struct pd_rd r = {m->b.ptr, m->b.ptr + m->b.len, false};
	int64_t name = (int64_t)pd_rd_v(&r), sys = (int64_t)pd_rd_v(&r), file = (int64_t)pd_rd_v(&r);
	int64_t sl = pd_unzz(pd_rd_v(&r));
	if (r.bad)
		return damaged(m, "corrupt function #%lld", (long long)seq);
	struct pd_function f = {*out + 1, 0, 0, 0, sl};
	if ((rc = mat_str(m, name, &f.name)) || (rc = mat_str(m, sys, &f.system_name)) ||
	    (rc = mat_str(m, file, &f.filename)))
		return rc;
	if (pd_grow((void **)&m->fns, &m->cf, m->rf.n, sizeof *m->fns))
		return NOMEM(m);
	m->fns[*out] = f;
	return 0;
}

static int mat_map(struct pd_mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rm, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	int rc = sym_get(m, PD_SYM_MAP, seq, &m->b, m->err);
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
		return damaged(m, "corrupt mapping #%lld", (long long)seq);
	for (uint32_t i = 0; m->inst && i < m->ninst; i++)
		if (m->iseq[i] == seq && m->inst[i].file >= 0) { /* the profile's own */
			start = m->inst[i].start;
			limit = m->inst[i].limit;
			file = m->inst[i].file;
			build = m->inst[i].build;
			flags = m->inst[i].flags;
			break;
		}
	struct pd_mapping mp = {*out + 1, start,     limit,          offset,         0,
	                        0,        flags & 1, flags >> 1 & 1, flags >> 2 & 1, flags >> 3 & 1};
	if ((rc = mat_str(m, file, &mp.filename)) || (rc = mat_str(m, build, &mp.build_id)))
		return rc;
	if (pd_grow((void **)&m->maps, &m->cm, m->rm.n, sizeof *m->maps))
		return NOMEM(m);
	m->maps[*out] = mp;
	return 0;
}

static int mat_loc(struct pd_mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rl, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	/* its own buffer: the children read below reuse m->b */
	struct pd_buf own = PD_BUF_INIT(0);
	int rc = sym_get(m, PD_SYM_LOC, seq, &own, m->err);
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
		return damaged(m, "corrupt location #%lld", (long long)seq);
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
			return damaged(m, "corrupt location #%lld", (long long)seq);
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

static int mat_stack(struct pd_mat *m, int64_t seq, uint32_t *out)
{
	bool added;
	if (remap_get(&m->rstk, seq, out, &added))
		return NOMEM(m);
	if (!added)
		return 0;
	struct pd_buf own = PD_BUF_INIT(0); /* the locations read below reuse m->b */
	int rc = sym_get(m, PD_SYM_STACK, seq, &own, m->err);
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
		return damaged(m, "corrupt stack #%lld", (long long)seq);
	if (pd_grow((void **)&m->stacks, &m->cstk, m->rstk.n, sizeof *m->stacks))
		return NOMEM(m);
	m->stacks[*out].locs = ids;
	m->stacks[*out].n = k;
	return 0;
}

static int mat_lset(struct pd_mat *m, int64_t seq, uint32_t *out)
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
	int rc = sym_get(m, PD_SYM_LSET, seq, &own, m->err);
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
		return damaged(m, "corrupt label set #%lld", (long long)seq);
	m->lsets[*out].l = l;
	m->lsets[*out].n = k;
	return 0;
}

/* Header fields into the profile (strings through the partition); its
 * first `eager` mappings first, in order. */
static int mat_header(struct pd_mat *m, const struct pd_shdr *h, uint32_t eager)
{
	struct pd_profile *p = m->p;
	int rc;
	uint32_t e; /* "" first: string 0 must be empty */
	/* The header's seq of "": a string field that is empty (doc_url and
	 * default_sample_type are in Go's profiles, drop_frames is not in
	 * legacy ones, which carry pprof's drop_frames regexps). */
	int64_t empty = h->drop, cand[] = {h->drop, h->doc, h->dflt, h->keep};
	for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
		if ((rc = sym_get(m, PD_SYM_STR, cand[i], &m->b, m->err)))
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
	m->iseq = h->maps;
	m->inst = h->inst;
	m->ninst = h->nmaps;
	for (uint32_t i = 0; i < h->nmaps && i < eager; i++) {
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
int pd_mat_finish(struct pd_mat *m, struct pd_profile **out)
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
static int mat_start(struct pd_mat *m, const struct pd_symsrc *src, const struct pd_shdr *h, uint32_t eager,
		     size_t nrows, struct pd_err *err)
{
	int rc = mat_init(m, src, err);
	if (!rc)
		rc = mat_header(m, h, eager);
	if (!rc && !(m->p->samples = pd_arena_alloc(m->p->arena, (nrows + 1) * sizeof *m->p->samples)))
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	return rc;
}

int pd_mat_start(struct pd_mat *m, const struct pd_symsrc *src, const struct pd_shdr *h, size_t nrows,
                 struct pd_err *err)
{
	return mat_start(m, src, h, h->nmaps, nrows, err);
}

/* Append a sample (stack and label-set seqs, values) to the profile being
 * built; samples must have been allocated for. */
int pd_mat_sample(struct pd_mat *m, int64_t stack, int64_t lset, const int64_t *vals, uint32_t nv)
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

/* ---- merge aggregate ---- */

void pd_pmerge_free(struct pd_pmerge *pm)
{
	remap_free(&pm->stk);
	remap_free(&pm->ls);
	free(pm->row1);
	free(pm->ls1);
	if (pm->have)
		pd_agg_free(&pm->agg);
	pd_shdr_free(&pm->h);
	free(pm->stypes0);
	remap_free(&pm->mseen);
	remap_free(&pm->cseen);
}

/* Append h's mappings whose key (symbol seq) pm->h does not have yet, with
 * h's own copies of them (pd_smap): pprof's Merge keeps the first seen. */
static int pm_add_maps(struct pd_pmerge *pm, const struct pd_shdr *h, struct pd_err *err)
{
	for (uint32_t i = 0; i < h->nmaps; i++) {
		uint32_t at;
		bool added;
		if (remap_get(&pm->mseen, h->maps[i], &at, &added))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		if (!added)
			continue;
		uint32_t n = pm->h.nmaps;
		int64_t *mv = realloc(pm->h.maps, (n + 2) * sizeof *mv);
		if (mv)
			pm->h.maps = mv;
		struct pd_smap *iv = mv && (pm->h.inst || h->inst) ? realloc(pm->h.inst, (n + 2) * sizeof *iv) : NULL;
		if (!mv || ((pm->h.inst || h->inst) && !iv))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		if (iv && !pm->h.inst) /* the ones before had none */
			for (uint32_t j = 0; j < n; j++)
				iv[j] = (struct pd_smap){0, 0, -1, -1, 0};
		if (iv) {
			pm->h.inst = iv;
			iv[n] = h->inst ? h->inst[i] : (struct pd_smap){0, 0, -1, -1, 0};
		}
		mv[n] = h->maps[i];
		pm->h.nmaps = n + 1;
	}
	return 0;
}

/* Add one stored profile's rows (or, keep_zero, a rollup's: their rows are
 * sums of non-zero rows, kept even when they sum to zero, as the merge of
 * the profiles keeps them) to pm; h is consumed. */
int pd_pm_add(struct pd_pmerge *pm, const char *id, struct pd_shdr *h, const int64_t *rows, size_t nrows, uint32_t nv,
              bool keep_zero, struct pd_err *err)
{
	int64_t time = h->time, duration = h->duration, period = h->period;
	if (!pm->have) {
		if (pd_agg_init(&pm->agg, nv, nrows * 2) || pd_hidx_init(&pm->stk.idx, nrows + 16) ||
		    pd_hidx_init(&pm->ls.idx, 64) || pd_hidx_init(&pm->mseen.idx, 16) || pd_hidx_init(&pm->cseen.idx, 16))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		uint32_t at;
		bool added;
		for (uint32_t i = 0; i < h->nmaps; i++)
			if (remap_get(&pm->mseen, h->maps[i], &at, &added))
				return pd_errf(err, PD_ENOMEM, "out of memory");
		for (uint32_t i = 0; i < h->ncomments; i++)
			if (remap_get(&pm->cseen, h->comments[i], &at, &added))
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
			               "(one type at a time, e.g. type=cpu; profiles of one type from different "
			               "producers: narrow by service or labels)",
			               id);
		for (uint32_t i = 0; i < h->ncomments; i++) {
			uint32_t at;
			bool added;
			if (remap_get(&pm->cseen, h->comments[i], &at, &added))
				return pd_errf(err, PD_ENOMEM, "out of memory");
			if (added) {
				int64_t *nc = realloc(pm->h.comments, (pm->h.ncomments + 1) * sizeof *nc);
				if (!nc)
					return pd_errf(err, PD_ENOMEM, "out of memory");
				pm->h.comments = nc;
				pm->h.comments[pm->h.ncomments++] = h->comments[i];
			}
		}
		/* the mappings of keys not seen yet, as this profile has them (the
		 * first profile that has mappings names the main binary) */
		int mrc = pm_add_maps(pm, h, err);
		if (mrc)
			return mrc;
		int64_t firsts[2] = {pm->h.dflt, pm->h.doc}, these[2] = {h->dflt, h->doc};
		for (int k = 0; k < 2; k++)
			if (!pm->have_alt[k] && these[k] != firsts[k]) {
				pm->alt[k] = these[k];
				pm->have_alt[k] = true;
			}
	}
	if (time && (pm->h.time == 0 || time < pm->h.time))
		pm->h.time = time;
	pm->h.duration = pd_wadd(pm->h.duration, duration);
	if (pm->h.period == 0 || pm->h.period < period) /* pprof's Merge: 0 is no period yet */
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
			uint32_t *a = realloc(pm->row1, nc * sizeof *a),
			         *b = a ? realloc(pm->ls1, nc * sizeof *b) : NULL;
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

int pd_pm_settle(struct pd_pmerge *pm, struct pd_err *err)
{
	int64_t *f[2] = {&pm->h.dflt, &pm->h.doc};
	struct pd_buf b = PD_BUF_INIT(0);
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) {
		if (!pm->have_alt[k])
			continue;
		if (!(rc = pm->src.get(pm->src.ctx, PD_SYM_STR, *f[k], &b, err)) && b.len == 0)
			*f[k] = pm->alt[k]; /* the first profile's is "": the other one is not */
		pm->have_alt[k] = false;
	}
	pd_buf_free(&b);
	return rc;
}

int pd_pm_final(struct pd_profile **p, struct pd_err *err)
{
	struct pd_profile *q = *p;
	bool zero = false;
	for (size_t i = 0; q && i < q->nsamples && !zero; i++) {
		zero = true;
		for (uint32_t j = 0; j < q->nsample_types && zero; j++)
			zero = q->samples[i].values[j] == 0;
	}
	if (!zero)
		return 0;
	struct pd_merger *mg = pd_merger_new();
	struct pd_profile *r = NULL;
	int rc = mg ? pd_merger_add_partial(mg, q, err) : pd_errf(err, PD_ENOMEM, "out of memory");
	if (!rc)
		rc = pd_merger_finish(mg, &r, err);
	pd_merger_free(mg);
	if (rc)
		return rc;
	pd_profile_free(q);
	*p = r;
	return 0;
}

/* Materialise a partition's aggregate as a partial profile. */
int pd_pm_profile(struct pd_pmerge *pm, struct pd_profile **out, struct pd_err *err)
{
	struct pd_mat m;
	int rc = pd_pm_settle(pm, err);
	if (rc)
		return rc;
	/* pprof's Merge: the first profile's first mapping (the main binary)
	 * stays first; the others are those the samples' locations use */
	rc = mat_start(&m, &pm->src, &pm->h, 1, pm->agg.n, err);
	for (size_t r = 0; r < pm->agg.n && !rc; r++)
		rc = pd_mat_sample(&m, pm->stk.keys[pm->agg.rows[r].stack], pm->ls.keys[pm->agg.rows[r].labels],
		                   pd_agg_values(&pm->agg, r), pm->agg.nvalues);
	if (!rc)
		rc = pd_mat_finish(&m, out);
	pd_mat_free(&m);
	return rc;
}
