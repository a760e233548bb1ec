/*
 * flame.c — a profile as a capped flame graph tree (contract in query.h).
 *
 * Two passes: build the full call tree (nodes keyed by (parent, frame name)
 * in a hash index), then keep the max_nodes largest nodes best-first from
 * the root with a max-heap of candidates, so the kept set always contains
 * every kept node's parent; the children left out of each kept node become
 * its "other" child. Memory is O(distinct call paths).
 */
#define _GNU_SOURCE /* qsort_r */
#include "query.h"

#include <stdlib.h>
#include <string.h>

struct fnode {
	struct pd_str name;
	int64_t value, self;
	uint32_t parent;
	uint32_t kept; /* index in the output + 1; 0 = not kept */
};

struct tree {
	struct fnode *v;
	size_t n, cap;
	struct pd_hidx idx;
	/* lookup key */
	uint32_t kparent;
	struct pd_str kname;
};

static bool fnode_eq(void *ctx, uint32_t i)
{
	struct tree *t = ctx;
	const struct fnode *f = &t->v[i];
	return f->parent == t->kparent && f->name.len == t->kname.len && !memcmp(f->name.ptr, t->kname.ptr, f->name.len);
}

/* The child of parent named name (created if new); UINT32_MAX on OOM. */
static uint32_t child(struct tree *t, uint32_t parent, struct pd_str name)
{
	uint64_t h = pd_hash(name.ptr, name.len, parent);
	t->kparent = parent;
	t->kname = name;
	uint32_t i = pd_hidx_find(&t->idx, h, fnode_eq, t);
	if (i != UINT32_MAX)
		return i;
	if (t->n >= UINT32_MAX - 1 || pd_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v) ||
	    pd_hidx_insert(&t->idx, h, (uint32_t)t->n))
		return UINT32_MAX;
	t->v[t->n] = (struct fnode){name, 0, 0, parent, 0};
	return (uint32_t)t->n++;
}


/* Heap order: larger |value| first, then earlier node. */
static bool before(const struct fnode *v, uint32_t a, uint32_t b)
{
	int64_t x = pd_wabs(v[a].value), y = pd_wabs(v[b].value);
	return x != y ? x > y : a < b;
}

static void heap_push(uint32_t *h, size_t *n, const struct fnode *v, uint32_t x)
{
	size_t i = (*n)++;
	h[i] = x;
	while (i > 0 && before(v, h[i], h[(i - 1) / 2])) {
		uint32_t t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static uint32_t heap_pop(uint32_t *h, size_t *n, const struct fnode *v)
{
	uint32_t top = h[0];
	h[0] = h[--*n];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < *n && before(v, h[l], h[m]))
			m = l;
		if (r < *n && before(v, h[r], h[m]))
			m = r;
		if (m == i)
			break;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
	return top;
}

static int kid_cmp(const void *a, const void *b, void *base)
{
	const struct pd_flame_node *v = base;
	const struct pd_flame_node *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];
	if (x->other != y->other)
		return x->other ? 1 : -1; /* "other" last */
	if (pd_wabs(x->value) != pd_wabs(y->value))
		return pd_wabs(x->value) > pd_wabs(y->value) ? -1 : 1;
	int c = pd_str_cmp(x->name, y->name);
	return c ? c : (*(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1);
}

void pd_flame_free(struct pd_flame *f)
{
	pd_arena_free(f->arena);
	memset(f, 0, sizeof *f);
}

int pd_flame_build(const struct pd_profile *p, uint32_t si, size_t max_nodes, struct pd_flame *out,
		   struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	if (si >= p->nsample_types && p->nsamples)
		return pd_errf(err, PD_EINVAL, "sample index %u out of range (%u sample types)", si, p->nsample_types);
	if (max_nodes < 1)
		max_nodes = 1;
	struct tree t = {0};
	uint32_t *heap = NULL, *cstart = NULL, *clist = NULL, *fill = NULL;
	struct pd_prune pr = {0}; /* drop_frames, as pprof's views cut them */
	int rc = PD_ENOMEM;
	out->arena = pd_arena_new(64 * 1024);
	if (!out->arena || pd_hidx_init(&t.idx, 1024) || pd_prune_init(p, &pr, out->arena, err))
		goto out;
	if (pd_grow((void **)&t.v, &t.cap, 1, sizeof *t.v))
		goto out;
	t.v[0] = (struct fnode){{"root", 4}, 0, 0, UINT32_MAX, 0};
	t.n = 1;
	/* 1. the full tree */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		int64_t v = s->values[si];
		if (v == 0)
			continue;
		uint32_t cur = 0, depth = 0;
		t.v[0].value = pd_wadd(t.v[0].value, v);
		uint32_t k0 = pd_prune_leaf(&pr, s);
		for (uint32_t k = s->nlocs; k-- > k0 && depth < PD_FLAME_MAX_DEPTH;) {
			const struct pd_location *l = &p->locations[s->locs[k]];
			uint32_t j0 = pd_prune_line0(&pr, s->locs[k]);
			for (uint32_t j = l->nlines ? l->nlines : 1; j-- > j0 && depth < PD_FLAME_MAX_DEPTH;) {
				struct pd_str nm = pd_frame_name(p, &pr, l, j, out->arena, true);
				uint32_t c = child(&t, cur, nm);
				if (c == UINT32_MAX)
					goto out;
				t.v[c].value = pd_wadd(t.v[c].value, v);
				cur = c;
				depth++;
			}
		}
		t.v[cur].self = pd_wadd(t.v[cur].self, v);
	}
	out->frames = t.n;
	/* children lists (CSR), in creation order */
	cstart = calloc(t.n + 1, sizeof *cstart);
	clist = malloc(t.n * sizeof *clist);
	fill = calloc(t.n, sizeof *fill);
	heap = malloc(t.n * sizeof *heap);
	if (!cstart || !clist || !fill || !heap)
		goto out;
	for (size_t i = 1; i < t.n; i++)
		cstart[t.v[i].parent + 1]++;
	for (size_t i = 0; i < t.n; i++)
		cstart[i + 1] += cstart[i];
	for (size_t i = 1; i < t.n; i++) {
		uint32_t pa = t.v[i].parent;
		clist[cstart[pa] + fill[pa]++] = (uint32_t)i;
	}
	/* 2. keep the largest nodes, parents first */
	size_t cap = max_nodes < t.n ? max_nodes : t.n;
	size_t nh = 0, kept = 1;
	t.v[0].kept = 1;
	for (uint32_t c = cstart[0]; c < cstart[1]; c++)
		heap_push(heap, &nh, t.v, clist[c]);
	while (nh && kept < cap) {
		uint32_t x = heap_pop(heap, &nh, t.v);
		t.v[x].kept = (uint32_t)++kept;
		for (uint32_t c = cstart[x]; c < cstart[x + 1]; c++)
			heap_push(heap, &nh, t.v, clist[c]);
	}
	out->truncated = kept < t.n;
	/* 3. output: kept nodes in keep order, plus one "other" per parent that lost children */
	memset(fill, 0, t.n * sizeof *fill); /* reused: 1 = the parent gets an "other" */
	size_t nother = 0;
	for (size_t i = 1; i < t.n; i++) {
		uint32_t pa = t.v[i].parent;
		if (!t.v[i].kept && t.v[pa].kept && !fill[pa]) {
			fill[pa] = 1;
			nother++;
		}
	}
	size_t total = kept + nother;
	out->v = pd_arena_calloc(out->arena, total, sizeof *out->v);
	out->kids = pd_arena_calloc(out->arena, total, sizeof *out->kids);
	if (!out->v || !out->kids)
		goto out;
	for (size_t i = 0; i < t.n; i++)
		if (t.v[i].kept)
			out->v[t.v[i].kept - 1] = (struct pd_flame_node){t.v[i].name, t.v[i].value, t.v[i].self, 0, 0, false};
	size_t on = kept, ko = 0;
	for (size_t i = 0; i < t.n; i++) {
		if (!t.v[i].kept)
			continue;
		struct pd_flame_node *o = &out->v[t.v[i].kept - 1];
		o->kids = (uint32_t)ko;
		int64_t dropped = 0;
		bool any = false;
		for (uint32_t c = cstart[i]; c < cstart[i + 1]; c++) {
			const struct fnode *ch = &t.v[clist[c]];
			if (ch->kept)
				out->kids[ko++] = ch->kept - 1;
			else
				dropped = pd_wadd(dropped, ch->value), any = true;
		}
		if (any) {
			out->v[on] = (struct pd_flame_node){{"other", 5}, dropped, dropped, 0, 0, true};
			out->kids[ko++] = (uint32_t)on++;
		}
		o->nkids = (uint32_t)(ko - o->kids);
		qsort_r(out->kids + o->kids, o->nkids, sizeof *out->kids, kid_cmp, out->v);
	}
	PD_ASSERT(on == total && ko == total - 1);
	out->n = total;
	rc = 0;
out:
	pd_prune_free(&pr);
	free(t.v);
	pd_hidx_free(&t.idx);
	free(heap);
	free(cstart);
	free(clist);
	free(fill);
	if (rc) {
		pd_flame_free(out);
		return pd_errf(err, rc, "flame graph: out of memory");
	}
	return 0;
}
