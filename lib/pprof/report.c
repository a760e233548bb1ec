/*
 * report.c — top table and folded stacks over a decoded profile, and the Go
 * profile type a profile is (pd_profile_go_type, used by `profd load`).
 */
#include "report.h"
#include "ptype.h"
#include "../query/query.h" /* pd_regex: RE2 syntax, for drop_frames (pd_prune) */

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pprof's looksLikeDemangledCPlusPlus */
static bool looks_demangled_cpp(struct pd_str s)
{
	bool cpp = false;
	for (uint32_t i = 0; i < s.len; i++) {
		char c = s.ptr[i];
		if (c == '.' && i + 1 < s.len && s.ptr[i + 1] == '<')
			return false; /* Java's "class.<init>" */
		if (c == ']' && i + 2 < s.len && s.ptr[i + 1] == ')' && s.ptr[i + 2] == '.')
			return false; /* Go's "pkg.(*T[...]).M" */
		if (c == '<' || c == '>' || c == '[' || c == ']' || (c == ':' && i + 1 < s.len && s.ptr[i + 1] == ':'))
			cpp = true;
	}
	return cpp;
}

/* pprof's removeMatching: every outermost open..close pair removed, in
 * place; a close without its open stops it (what was removed stays
 * removed). The new length. */
static uint32_t remove_matching(char *s, uint32_t n, char open, char close)
{
	uint32_t nest = 0, first = 0, cur = 0;
	while (cur < n) {
		if (s[cur] == open) {
			if (++nest == 1)
				first = cur;
		} else if (s[cur] == close) {
			if (!nest)
				return n;
			if (!--nest) {
				memmove(s + first, s + cur + 1, n - cur - 1);
				n -= cur + 1 - first;
				cur = first;
				continue;
			}
		}
		cur++;
	}
	return n;
}

struct pd_str pd_func_name(const struct pd_profile *p, uint32_t f, struct pd_arena **a, int *rc)
{
	const struct pd_function *fn = &p->functions[f];
	struct pd_str nm = p->strings[fn->name], sys = p->strings[fn->system_name];
	if (nm.len && fn->name != fn->system_name && pd_str_cmp(nm, sys))
		return nm; /* "already demangled" */
	if (!looks_demangled_cpp(sys))
		return sys;
	if (!*a && !(*a = pd_arena_new(4096)))
		goto oom;
	char *c = pd_arena_dup(*a, sys.ptr, sys.len);
	if (!c)
		goto oom;
	uint32_t n = remove_matching(c, sys.len, '(', ')');
	n = remove_matching(c, n, '<', '>');
	return (struct pd_str){c, n};
oom:
	*rc = PD_ENOMEM;
	return sys;
}

struct pd_str pd_frame_name(const struct pd_profile *p, const struct pd_prune *pr, const struct pd_location *l,
			    uint32_t j, struct pd_arena *a, bool pprof_style)
{
	if (l->nlines) {
		uint32_t f = l->lines[j].function;
		if (pr->fname[f].len)
			return pr->fname[f];
	}
	char tmp[300];
	int n;
	if (!pprof_style) {
		n = snprintf(tmp, sizeof tmp, "0x%" PRIx64, l->address);
	} else if (l->mapping != PD_NONE && p->strings[p->mappings[l->mapping].filename].len) {
		struct pd_str f = p->strings[p->mappings[l->mapping].filename];
		uint32_t s = f.len;
		while (s > 0 && f.ptr[s - 1] != '/')
			s--;
		n = snprintf(tmp, sizeof tmp, "[%.*s]", (int)(f.len - s), f.ptr + s);
	} else {
		n = snprintf(tmp, sizeof tmp, "<unknown>");
	}
	if (n < 0 || (size_t)n >= sizeof tmp)
		n = (int)sizeof tmp - 1;
	char *c = pd_arena_dup(a, tmp, (size_t)n);
	return (struct pd_str){c ? c : "?", c ? (uint32_t)n : 1};
}

static uint32_t nframes(const struct pd_location *l) { return l->nlines ? l->nlines : 1; }

/* ---- drop_frames (pprof's RemoveUninteresting) ------------------------------------ */

/* pprof's simplifyFunc: a leading '.' (PPC ELF v1) dropped, and the name cut
 * at its first '(' that does not begin "(anonymous namespace)" and is not in
 * "operator()". */
static struct pd_str simplify_func(struct pd_str f)
{
	static const char anon[] = "(anonymous namespace)", call[] = "operator()";
	if (f.len && f.ptr[0] == '.')
		f.ptr++, f.len--;
	for (uint32_t i = 0; i < f.len;) {
		if (f.len - i >= sizeof anon - 1 && !memcmp(f.ptr + i, anon, sizeof anon - 1))
			i += sizeof anon - 1;
		else if (f.len - i >= sizeof call - 1 && !memcmp(f.ptr + i, call, sizeof call - 1))
			i += sizeof call - 1;
		else if (f.ptr[i] == '(')
			return (struct pd_str){f.ptr, i};
		else
			i++;
	}
	return f;
}

/* The profile's frames regex rx (drop_frames or keep_frames) compiled as Go
 * does ("^(" rx ")$", so '.' does not match a newline); NULL when empty or
 * when it does not compile (pprof then prunes nothing). */
static struct pd_regex *frames_regex(const struct pd_profile *p, uint32_t rx, int *rc)
{
	struct pd_str r = rx < p->nstrings ? p->strings[rx] : (struct pd_str){"", 0};
	*rc = 0;
	if (!r.len || memchr(r.ptr, 0, r.len))
		return NULL;
	char *src = malloc((size_t)r.len + 8);
	if (!src) {
		*rc = PD_ENOMEM;
		return NULL;
	}
	memcpy(src, "(?-s:", 5);
	memcpy(src + 5, r.ptr, r.len);
	memcpy(src + 5 + r.len, ")", 2);
	struct pd_regex *re = NULL;
	char why[8];
	int c = pd_regex_compile(src, &re, why, sizeof why);
	free(src);
	if (c == PD_ENOMEM)
		*rc = c;
	return c ? NULL : re;
}

int pd_prune_init(const struct pd_profile *p, struct pd_prune *pr, struct pd_arena *names, struct pd_err *err)
{
	memset(pr, 0, sizeof *pr);
	int rc = 0;
	pr->farena = names; /* NULL: pd_func_name creates one, the prune's own */
	pr->own_farena = !names;
	pr->fname = malloc(((size_t)p->nfunctions + 1) * sizeof *pr->fname);
	if (!pr->fname)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	for (uint32_t f = 0; f < p->nfunctions && !rc; f++)
		pr->fname[f] = pd_func_name(p, f, &pr->farena, &rc);
	struct pd_regex *drop = rc ? NULL : frames_regex(p, p->drop_frames, &rc), *keep = NULL;
	if (drop && !rc)
		keep = frames_regex(p, p->keep_frames, &rc);
	int8_t *fm = NULL; /* per function: -1 not yet, 0 kept, 1 dropped */
	if (!drop || rc)
		goto out;
	pr->line0 = calloc((size_t)p->nlocations + 1, sizeof *pr->line0);
	pr->how = calloc((size_t)p->nlocations + 1, 1);
	fm = malloc((size_t)p->nfunctions + 1);
	if (!pr->line0 || !pr->how || !fm) {
		rc = PD_ENOMEM;
		goto out;
	}
	memset(fm, -1, (size_t)p->nfunctions + 1);
	for (uint32_t li = 0; li < p->nlocations; li++) {
		const struct pd_location *l = &p->locations[li];
		/* the outermost line whose function is dropped, as Prune scans */
		for (uint32_t j = l->nlines; j-- > 0;) {
			uint32_t f = l->lines[j].function;
			if (f >= p->nfunctions)
				continue;
			if (fm[f] < 0) {
				struct pd_str nm = pr->fname[f];
				fm[f] = 0;
				if (nm.len) {
					struct pd_str sn = simplify_func(nm);
					fm[f] = pd_regex_match(drop, sn.ptr, sn.len) == 1 &&
						(!keep || pd_regex_match(keep, sn.ptr, sn.len) != 1);
				}
			}
			if (fm[f] == 1) {
				pr->how[li] = j == l->nlines - 1 ? 2 : 1;
				pr->line0[li] = j == l->nlines - 1 ? 0 : j + 1;
				pr->on = true;
				break;
			}
		}
	}
out:
	free(fm);
	pd_regex_free(drop);
	pd_regex_free(keep);
	if (rc) {
		pd_prune_free(pr);
	} else if (!pr->on) {
		free(pr->line0);
		free(pr->how);
		pr->line0 = NULL;
		pr->how = NULL;
	}
	return rc ? pd_errf(err, rc, "out of memory") : 0;
}

uint32_t pd_prune_leaf(const struct pd_prune *pr, const struct pd_sample *s)
{
	if (!pr->on)
		return 0;
	bool user = false; /* pprof keeps frames above the first one of the program's own */
	for (uint32_t k = s->nlocs; k-- > 0;) {
		uint8_t h = pr->how[s->locs[k]];
		if (!h)
			user = true;
		else if (user)
			return h == 2 ? k + 1 : k;
	}
	return 0;
}

void pd_prune_free(struct pd_prune *pr)
{
	free(pr->line0);
	free(pr->how);
	free(pr->fname);
	if (pr->own_farena)
		pd_arena_free(pr->farena);
	memset(pr, 0, sizeof *pr);
}

/* ---- top ------------------------------------------------------------------ */

struct node {
	struct pd_str name;
	int64_t flat, cum;
	size_t stamp; /* last sample that added to cum, +1 */
	bool in_inline, in_call; /* has inlined / non-inlined incoming edges */
	bool anon;               /* no function name: obj and sline tell it apart */
	struct pd_str obj;
	int64_t sline;
};

/* caller -> callee edge, inline iff every contribution was inlined */
struct edge {
	uint32_t from, to;
	size_t stamp;
	bool inl;
};

struct nodes {
	struct node *v;
	size_t n, cap;
	struct pd_hidx idx;
};

/* A node's identity, as pprof's NodeInfo at the functions granularity: its
 * name; for a frame without one, the binary's path and the function's start
 * line instead (what is printed, "[base]" or "<unknown>", may repeat). */
struct namekey {
	struct nodes *ns;
	struct pd_str s, obj;
	int64_t sline;
	bool anon;
};

static bool name_eq(void *ctx, uint32_t v)
{
	struct namekey *k = ctx;
	const struct node *n = &k->ns->v[v];
	if (n->anon != k->anon || n->name.len != k->s.len || memcmp(n->name.ptr, k->s.ptr, k->s.len))
		return false;
	return !k->anon || (n->sline == k->sline && !pd_str_cmp(n->obj, k->obj));
}

static struct node *node_get(struct nodes *ns, const struct namekey *key)
{
	uint64_t h = pd_hash(key->s.ptr, key->s.len, 7);
	if (key->anon)
		h = pd_hash(key->obj.ptr, key->obj.len, h ^ (uint64_t)key->sline);
	struct namekey k = *key;
	k.ns = ns;
	uint32_t v = pd_hidx_find(&ns->idx, h, name_eq, &k);
	if (v != UINT32_MAX)
		return &ns->v[v];
	if (pd_grow((void **)&ns->v, &ns->cap, ns->n + 1, sizeof *ns->v))
		return NULL;
	if (pd_hidx_insert(&ns->idx, h, (uint32_t)ns->n))
		return NULL;
	struct node *n = &ns->v[ns->n++];
	*n = (struct node){.name = key->s, .anon = key->anon, .obj = key->obj, .sline = key->sline};
	return n;
}

/* The key of frame j of location l (its name from pd_frame_name). */
static struct namekey frame_key(const struct pd_profile *p, const struct pd_prune *pr, const struct pd_location *l,
				uint32_t j, struct pd_str name)
{
	struct namekey k = {.s = name};
	uint32_t f = l->nlines ? l->lines[j].function : PD_NONE;
	if (f != PD_NONE && pr->fname[f].len)
		return k;
	k.anon = true;
	if (l->mapping != PD_NONE)
		k.obj = p->strings[p->mappings[l->mapping].filename];
	if (f != PD_NONE)
		k.sline = p->functions[f].start_line;
	return k;
}

/* pprof's last tie-break (compareNodes): fmt.Sprint of the NodeInfo,
 * "{Name OrigName Address File StartLine Lineno Objfile}", as strings. */
static int cmp_nodeinfo(const struct pd_top_row *a, const struct pd_top_row *b)
{
	struct pd_buf x = PD_BUF_INIT(0), y = PD_BUF_INIT(0);
	const struct pd_top_row *r[2] = {a, b};
	struct pd_buf *o[2] = {&x, &y};
	int c = 0;
	for (int i = 0; i < 2; i++) {
		struct pd_str nm = r[i]->anon ? (struct pd_str){"", 0} : r[i]->name;
		if (pd_buf_append(o[i], "{", 1) || pd_buf_append(o[i], nm.ptr, nm.len) ||
		    pd_buf_appendf(o[i], "  0  %" PRId64 " 0 ", r[i]->sline) ||
		    pd_buf_append(o[i], r[i]->obj.ptr, r[i]->obj.len) || pd_buf_append(o[i], "}", 1))
			goto out;
	}
	c = pd_str_cmp((struct pd_str){(const char *)x.ptr, (uint32_t)x.len},
		       (struct pd_str){(const char *)y.ptr, (uint32_t)y.len});
out:
	pd_buf_free(&x);
	pd_buf_free(&y);
	return c;
}

static int cmp_flat(const void *x, const void *y)
{
	const struct pd_top_row *a = x, *b = y;
	if (pd_wabs(a->flat) != pd_wabs(b->flat))
		return pd_wabs(a->flat) > pd_wabs(b->flat) ? -1 : 1;
	int c = pd_str_cmp(a->name, b->name);
	if (c)
		return c;
	if (pd_wabs(a->cum) != pd_wabs(b->cum))
		return pd_wabs(a->cum) > pd_wabs(b->cum) ? -1 : 1;
	return cmp_nodeinfo(a, b);
}

static int cmp_cum(const void *x, const void *y)
{
	const struct pd_top_row *a = x, *b = y;
	if (pd_wabs(a->cum) != pd_wabs(b->cum))
		return pd_wabs(a->cum) > pd_wabs(b->cum) ? -1 : 1;
	int c = pd_str_cmp(a->name, b->name);
	if (c)
		return c;
	if (pd_wabs(a->flat) != pd_wabs(b->flat))
		return pd_wabs(a->flat) > pd_wabs(b->flat) ? -1 : 1;
	return cmp_nodeinfo(a, b);
}

struct edgekey {
	struct edge *v;
	uint32_t from, to;
};

static bool edge_eq(void *ctx, uint32_t i)
{
	struct edgekey *k = ctx;
	return k->v[i].from == k->from && k->v[i].to == k->to;
}

int pd_top_compute(const struct pd_profile *p, uint32_t si, bool by_cum, struct pd_top *out, struct pd_err *err)
{
	return pd_top_compute_opt(p, si, by_cum ? PD_TOP_BY_CUM : 0, out, err);
}

int pd_top_compute_opt(const struct pd_profile *p, uint32_t si, unsigned flags, struct pd_top *out, struct pd_err *err)
{
	bool by_cum = flags & PD_TOP_BY_CUM;
	memset(out, 0, sizeof *out);
	if (si >= p->nsample_types && p->nsamples)
		return pd_errf(err, PD_EINVAL, "sample index %u out of range (%u sample types)", si,
			       p->nsample_types);
	struct nodes ns = {0};
	struct edge *ev = NULL;
	size_t ne = 0, ecap = 0;
	struct pd_hidx eidx = {0};
	int rc = PD_ENOMEM;
	struct pd_prune pr = {0};
	out->arena = pd_arena_new(64 * 1024);
	if (!out->arena)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (pd_prune_init(p, &pr, out->arena, err)) {
		pd_arena_free(out->arena);
		out->arena = NULL;
		return PD_ENOMEM;
	}
	if (pd_hidx_init(&ns.idx, 1024) || pd_hidx_init(&eidx, 4096))
		goto out;
	/* Mirrors pprof's graph.New: walk each stack root to leaf; a node adds
	 * the value to cum once per sample; an edge parent -> node is added once
	 * per sample, inline when the node is not the outermost line of its
	 * location; self edges (recursion) are skipped. */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		int64_t v = s->values[si];
		out->total = pd_wadd(out->total, v);
		if (v == 0)
			continue;
		uint32_t parent = UINT32_MAX, k0 = pd_prune_leaf(&pr, s);
		for (uint32_t k = s->nlocs; k-- > k0;) {
			const struct pd_location *l = &p->locations[s->locs[k]];
			uint32_t j0 = pd_prune_line0(&pr, s->locs[k]);
			for (uint32_t j = nframes(l); j-- > j0;) {
				struct namekey key = {.s = pd_frame_name(p, &pr, l, j, out->arena, true)};
				if (!(flags & PD_TOP_BY_NAME))
					key = frame_key(p, &pr, l, j, key.s);
				struct node *n = node_get(&ns, &key);
				if (!n)
					goto out;
				uint32_t ni = (uint32_t)(n - ns.v);
				if (n->stamp != i + 1) {
					n->stamp = i + 1;
					n->cum = pd_wadd(n->cum, v);
				}
				if (k == k0 && j == j0)
					n->flat = pd_wadd(n->flat, v);
				if (parent != UINT32_MAX && parent != ni) {
					bool inl = j != nframes(l) - 1;
					struct edgekey ek = {ev, parent, ni};
					uint64_t h = pd_hash_u64((uint64_t)parent << 32 | ni);
					uint32_t e = pd_hidx_find_u64(&eidx, h, edge_eq, &ek);
					if (e == UINT32_MAX) {
						if (pd_grow((void **)&ev, &ecap, ne + 1, sizeof *ev) ||
						    pd_hidx_insert(&eidx, h, (uint32_t)ne))
							goto out;
						ev[ne++] = (struct edge){parent, ni, i + 1, inl};
					} else if (ev[e].stamp != i + 1) {
						ev[e].stamp = i + 1;
						ev[e].inl = ev[e].inl && inl;
					}
				}
				parent = ni;
			}
		}
	}
	for (size_t e = 0; e < ne; e++) {
		if (ev[e].inl)
			ns.v[ev[e].to].in_inline = true;
		else
			ns.v[ev[e].to].in_call = true;
	}
	out->rows = pd_arena_alloc(out->arena, (ns.n + 1) * sizeof *out->rows);
	if (!out->rows)
		goto out;
	/* as pprof's selectNodesForGraph: a function whose values summed to
	 * zero, flat and cum (5 and -5 of a diff or a delta), is not a node */
	out->n = 0;
	for (size_t i = 0; i < ns.n; i++) {
		const struct node *n = &ns.v[i];
		if (n->flat == 0 && n->cum == 0)
			continue;
		int inl = !n->in_inline ? PD_TOP_NOT_INLINED : n->in_call ? PD_TOP_PARTIAL_INLINE : PD_TOP_INLINED;
		out->rows[out->n++] =
			(struct pd_top_row){n->name, n->flat, n->cum, inl, n->in_call, n->anon, n->obj, n->sline};
	}
	qsort(out->rows, out->n, sizeof *out->rows, by_cum ? cmp_cum : cmp_flat);
	rc = 0;
out:
	pd_prune_free(&pr);
	free(ns.v);
	free(ev);
	pd_hidx_free(&ns.idx);
	pd_hidx_free(&eidx);
	if (rc) {
		pd_top_free(out);
		return pd_errf(err, rc, "top: out of memory");
	}
	return 0;
}

static bool diff_base_sample(const struct pd_profile *p, const struct pd_sample *s)
{
	for (uint32_t j = 0; j < s->nlabels; j++)
		if (s->labels[j].str && pd_str_eq(p->strings[s->labels[j].key], "pprof::base") &&
		    pd_str_eq(p->strings[s->labels[j].str], "true"))
			return true;
	return false;
}

int64_t pd_report_total(const struct pd_profile *p, uint32_t si)
{
	int64_t all = 0, base = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		int64_t v = pd_wabs(p->samples[i].values[si]);
		all = pd_wadd(all, v);
		if (diff_base_sample(p, &p->samples[i]))
			base = pd_wadd(base, v);
	}
	return base > 0 ? base : all;
}

void pd_top_free(struct pd_top *t)
{
	pd_arena_free(t->arena);
	memset(t, 0, sizeof *t);
}

/* ---- folded ----------------------------------------------------------------- */

struct fold {
	char *s;
	size_t len;
	int64_t v;
};

struct folds {
	struct fold *v;
	size_t n, cap;
	struct pd_hidx idx;
	const char *key;
	size_t keylen;
};

static bool fold_eq(void *ctx, uint32_t v)
{
	struct folds *f = ctx;
	return f->v[v].len == f->keylen && memcmp(f->v[v].s, f->key, f->keylen) == 0;
}

static int cmp_fold(const void *x, const void *y)
{
	const struct fold *a = x, *b = y;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->s, b->s, n);
	return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

int pd_folded(const struct pd_profile *p, uint32_t si, struct pd_buf *out, struct pd_err *err)
{
	if (si >= p->nsample_types && p->nsamples)
		return pd_errf(err, PD_EINVAL, "sample index %u out of range", si);
	struct folds fs = {0};
	struct pd_buf line = PD_BUF_INIT(0);
	struct pd_arena *a = pd_arena_new(256 * 1024);
	struct pd_prune pr = {0}; /* drop_frames, cut as pd_top_compute cuts them */
	int rc = PD_ENOMEM;
	if (!a || pd_hidx_init(&fs.idx, 1024) || pd_prune_init(p, &pr, NULL, err))
		goto out;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		int64_t v = s->values[si];
		if (v == 0)
			continue;
		line.len = 0;
		/* root first: walk locations and their lines backwards */
		uint32_t k0 = pd_prune_leaf(&pr, s);
		for (uint32_t k = s->nlocs; k-- > k0;) {
			const struct pd_location *l = &p->locations[s->locs[k]];
			uint32_t j0 = pd_prune_line0(&pr, s->locs[k]);
			for (uint32_t j = nframes(l); j-- > j0;) {
				struct pd_str nm = pd_frame_name(p, &pr, l, j, a, false);
				if ((line.len && pd_buf_append(&line, ";", 1)) || pd_buf_append(&line, nm.ptr, nm.len))
					goto out;
				/* ';' separates frames and '\\n' lines: keep them out of names, and
				 * NUL (the collector sends the text as a C string) */
				for (size_t c = line.len - nm.len; c < line.len; c++)
					if (line.ptr[c] == ';' || line.ptr[c] == '\n' || line.ptr[c] == '\0')
						line.ptr[c] = ':';
			}
		}
		if (line.len == 0 && pd_buf_append(&line, "[no stack]", 10))
			goto out;
		fs.key = (const char *)line.ptr;
		fs.keylen = line.len;
		uint64_t h = pd_hash(line.ptr, line.len, 3);
		uint32_t idx = pd_hidx_find(&fs.idx, h, fold_eq, &fs);
		if (idx != UINT32_MAX) {
			fs.v[idx].v = pd_wadd(fs.v[idx].v, v);
			continue;
		}
		if (pd_grow((void **)&fs.v, &fs.cap, fs.n + 1, sizeof *fs.v))
			goto out;
		char *c = pd_arena_dup(a, line.ptr, line.len);
		if (!c || pd_hidx_insert(&fs.idx, h, (uint32_t)fs.n))
			goto out;
		fs.v[fs.n++] = (struct fold){c, line.len, v};
	}
	if (fs.n)
		qsort(fs.v, fs.n, sizeof *fs.v, cmp_fold);
	for (size_t i = 0; i < fs.n; i++) {
		char num[32];
		int n = snprintf(num, sizeof num, " %" PRId64 "\n", fs.v[i].v);
		if (fs.v[i].v == 0)
			continue;
		if (pd_buf_append(out, fs.v[i].s, fs.v[i].len) || pd_buf_append(out, num, (size_t)n))
			goto out;
	}
	rc = 0;
out:
	pd_prune_free(&pr);
	free(fs.v);
	pd_hidx_free(&fs.idx);
	pd_buf_free(&line);
	pd_arena_free(a);
	if (rc)
		return pd_errf(err, rc, "folded: out of memory");
	return 0;
}

/* ---- value formatting ---------------------------------------------------------- */

/*
 * Units as pprof's internal/measurement knows them: a value is converted to
 * the base unit, then auto-scaled to the largest unit it is >= 1 of.
 */
struct unit {
	const char *name;
	const char *aliases[4];
	double factor;
};
static const struct unit mem_units[] = {
	{"B", {"b", "byte"}, 1},
	{"kB", {"kb", "kbyte", "kilobyte"}, 1024.0},
	{"MB", {"mb", "mbyte", "megabyte"}, 1048576.0},
	{"GB", {"gb", "gbyte", "gigabyte"}, 1073741824.0},
	{"TB", {"tb", "tbyte", "terabyte"}, 1099511627776.0},
	{"PB", {"pb", "pbyte", "petabyte"}, 1125899906842624.0},
	{NULL, {0}, 0},
};
static const struct unit time_units[] = {
	{"ns", {"ns", "nanosecond"}, 1},
	{"us", {"\xce\xbcs", "us", "microsecond"}, 1e3},
	{"ms", {"ms", "millisecond"}, 1e6},
	{"s", {"s", "sec", "second"}, 1e9},
	{"hrs", {"hour", "hr"}, 3600e9},
	{NULL, {0}, 0},
};

/* pprof's sniffUnit: lower-case, drop a plural "s" (if longer than 2). */
static const struct unit *sniff(const struct unit *us, struct pd_str u)
{
	char low[32];
	size_t n = u.len < sizeof low - 1 ? u.len : sizeof low - 1;
	for (size_t i = 0; i < n; i++)
		low[i] = (char)(u.ptr[i] >= 'A' && u.ptr[i] <= 'Z' ? u.ptr[i] + 32 : u.ptr[i]);
	low[n] = 0;
	if (n > 2 && low[n - 1] == 's')
		low[--n] = 0;
	for (const struct unit *x = us; x->name; x++)
		for (int a = 0; a < 4 && x->aliases[a]; a++)
			if (!strcmp(low, x->aliases[a]))
				return x;
	return NULL;
}

/* pprof's measurement.Scale: |v| in from-unit converted to to_unit (NULL =
 * auto-scale); returns the unit name ("" for counts). MinInt64, whose
 * negation wraps, is scaled as Go scales it: as itself, negative, which
 * no unit fits, so it stays in the base unit ("-9223372036854775808B"). */
static const char *scale(int64_t v, struct pd_str from_unit, const char *to_unit, double *out)
{
	static const struct unit *const tables[] = {mem_units, time_units};
	static const char *const defname[] = {"B", "s"};
	static const double defactor[] = {1, 1e9};
	double val = v < 0 && v != INT64_MIN ? -(double)v : (double)v;
	for (int t = 0; t < 2; t++) {
		const struct unit *from = sniff(tables[t], from_unit);
		if (!from)
			continue;
		double base = val * from->factor, f = 0;
		const char *name = NULL;
		if (to_unit) {
			const struct unit *to = sniff(tables[t], (struct pd_str){to_unit, (uint32_t)strlen(to_unit)});
			if (to) {
				f = to->factor;
				name = to->name;
			}
		} else {
			for (const struct unit *x = tables[t]; x->name; x++)
				if (x->factor >= f && base / x->factor >= 1.0) {
					f = x->factor;
					name = x->name;
				}
		}
		if (!name) {
			f = defactor[t];
			name = defname[t];
		}
		*out = base / f;
		return name;
	}
	*out = val;
	if (!to_unit || !strcmp(to_unit, "count") || !strcmp(to_unit, "sample") || !strcmp(to_unit, "unit"))
		return "";
	return to_unit;
}

/* pprof's measurement.ScaledLabel: "%.2f" without a ".00" suffix, then the
 * unit; zero is "0". */
const char *pd_fmt_value_to(char *buf, size_t n, int64_t v, struct pd_str unit, const char *to_unit)
{
	double val;
	const char *uname = scale(v, unit, to_unit, &val);
	if (v < 0 && v != INT64_MIN) /* scale kept MinInt64's sign */
		val = -val;
	char num[64];
	snprintf(num, sizeof num, "%.2f", val);
	size_t l = strlen(num);
	if (l > 3 && !strcmp(num + l - 3, ".00"))
		num[l - 3] = 0;
	if (!strcmp(num, "0") || !strcmp(num, "-0"))
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "%s%s", num, uname);
	return buf;
}

const char *pd_fmt_value(char *buf, size_t n, int64_t v, struct pd_str unit)
{
	return pd_fmt_value_to(buf, n, v, unit, NULL);
}

const char *pd_top_unit(const struct pd_top *t, size_t nrows, struct pd_str unit, char *buf, size_t n)
{
	int64_t minv = 0, maxv = t->total;
	/* pprof's int64 arithmetic, wrapping: abs64(MinInt64) stays negative
	 * (a wrapped heap scaling or sum), minValue*100 may wrap */
	for (size_t i = 0; i < nrows && i < t->n; i++) {
		int64_t m = pd_wabs(t->rows[i].flat);
		if (m == 0)
			m = pd_wabs(t->rows[i].cum);
		if (m > 0 && (minv == 0 || m < minv))
			minv = m;
	}
	if (minv == 0)
		minv = maxv;
	double d;
	const char *minu = scale(minv, unit, NULL, &d), *maxu = scale(maxv, unit, NULL, &d);
	const char *u = minu;
	int64_t min100 = (int64_t)((uint64_t)minv * 100);
	if (strcmp(minu, maxu) != 0 && min100 < maxv)
		u = scale(min100, unit, NULL, &d);
	if (*u)
		snprintf(buf, n, "%s", u);
	else
		snprintf(buf, n, "%.*s", (int)unit.len, unit.ptr);
	return buf;
}

/* pprof's measurement.Percentage. */
const char *pd_fmt_percent(char *buf, size_t n, int64_t v, int64_t total)
{
	double r = total ? fabs((double)v / (double)total) * 100 : 0; /* fabs: never "-0%" */
	if (r >= 99.95 && r <= 100.05)
		snprintf(buf, n, "  100%%");
	else if (r >= 1.0)
		snprintf(buf, n, "%5.2f%%", r);
	else
		snprintf(buf, n, "%5.2g%%", r);
	return buf;
}

const char *pd_profile_kind(const struct pd_profile *p)
{
	return pd_kind_name(p->strings[p->period_type.type],
			    p->nsample_types ? p->strings[p->sample_types[0].type] : p->strings[0],
			    p->strings[p->default_sample_type]);
}

/* Leaf function names of the stacks of a mutex profile: the unlock that
 * released a contended lock (sync.(*Mutex).Unlock, sync.(*RWMutex).RUnlock,
 * runtime.unlock; since Go 1.22 runtime locks also show as
 * runtime._LostContendedRuntimeLock). */
static bool mutex_leaf(struct pd_str s)
{
	static const char *const needles[] = {"Unlock", "unlock", "_LostContended"};
	for (size_t k = 0; k < sizeof needles / sizeof *needles; k++) {
		size_t m = strlen(needles[k]);
		for (size_t i = 0; i + m <= s.len; i++)
			if (!memcmp(s.ptr + i, needles[k], m))
				return true;
	}
	return false;
}

const char *pd_profile_go_type(const struct pd_profile *p)
{
	const char *k = pd_profile_kind(p);
	if (strcmp(k, "block/mutex"))
		return strcmp(k, "unknown") ? k : NULL;
	if (p->go_type_hint) /* a legacy `--- mutex:` / `--- contention:` header */
		return p->go_type_hint;
	size_t unlock = 0, other = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		if (!s->nlocs)
			continue;
		const struct pd_location *l = &p->locations[s->locs[0]];
		if (!l->nlines)
			continue;
		struct pd_str name = p->strings[p->functions[l->lines[0].function].name];
		if (!name.len)
			continue;
		if (mutex_leaf(name))
			unlock++;
		else
			other++;
	}
	if (unlock == 0 && other == 0)
		return NULL;
	return unlock > other ? "mutex" : "block";
}

int pd_profile_check_type(const struct pd_profile *p, const char *declared, const char **out, struct pd_err *err)
{
	
	const char *kind = pd_profile_kind(p);
	*out = NULL;
	if (!declared || !*declared) {
		const char *t = pd_profile_go_type(p);
		if (!t && !strcmp(kind, "block/mutex"))
			return pd_errf(err, PD_EINVAL,
				       "cannot tell a block from a mutex profile by its stacks: give type=block or type=mutex");
		*out = t ? t : "other";
		return 0;
	}
		int dt = pd_ptype_find(declared);
	*out = dt >= 0 ? pd_ptypes[dt].name : NULL;
	if (!*out)
		return pd_errf(err, PD_EINVAL, "unknown profile type \"%.32s\"", declared);
	if (!strcmp(*out, "other"))
		return 0;
	bool heapish = !strcmp(*out, "heap") || !strcmp(*out, "allocs");
	bool contention = !strcmp(*out, "block") || !strcmp(*out, "mutex");
	bool ok = heapish ? !strcmp(kind, "heap") || !strcmp(kind, "allocs")
		  : contention ? !strcmp(kind, "block/mutex")
			       : !strcmp(kind, *out);
	if (ok)
		return 0;
	char desc[256];
	pd_profile_describe_types(p, desc, sizeof desc);
	const char *name = heapish ? "heap/allocs" : contention ? "block/mutex" : *out;
	*out = NULL;
	if (!strcmp(kind, "unknown"))
		return pd_errf(err, PD_EINVAL,
			       "declared type \"%s\" but the profile %s is not a Go %s profile "
			       "(send type=other for profiles of other kinds)",
			       declared, desc, name);
	return pd_errf(err, PD_EINVAL,
		       "declared type \"%s\" but the profile is %s %s profile %s: send type=%s, or no type to infer it",
		       declared, kind[0] && strchr("aeiou", kind[0]) ? "an" : "a", kind, desc,
		       !strcmp(kind, "block/mutex") ? "block or type=mutex" : kind);
}

int pd_top_text(const struct pd_top *t, size_t nrows, struct pd_str unit, struct pd_buf *out, struct pd_err *err)
{
	size_t show = nrows == 0 || nrows > t->n ? t->n : nrows;
	int64_t shown = 0;
	for (size_t i = 0; i < show; i++)
		shown = pd_wadd(shown, t->rows[i].flat);
	char a[48], b[48], c1[32], c2[32], c3[32], u[32]; /* a % of a wrapped total: up to 26 chars */
	pd_top_unit(t, show, unit, u, sizeof u);
	const char *pct = pd_fmt_percent(c1, sizeof c1, shown, t->total);
	while (*pct == ' ')
		pct++;
	int rc = pd_buf_appendf(out, "Showing %zu of %zu functions, accounting for %s, %s of %s total\n", show, t->n,
			 pd_fmt_value_to(a, sizeof a, shown, unit, u), pct,
			 pd_fmt_value_to(b, sizeof b, t->total, unit, u));
	if (!rc)
		rc = pd_buf_appendf(out, "%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum");
	int64_t sum = 0;
	for (size_t i = 0; i < show && !rc; i++) {
		const struct pd_top_row *r = &t->rows[i];
		sum = pd_wadd(sum, r->flat);
		static const char *const inl[] = {"", " (inline)", " (partial-inline)"};
		/* the name appended as bytes: a NUL in it is printed, as pprof does */
		rc = pd_buf_appendf(out, "%10s %s %s %10s %s  ", pd_fmt_value_to(a, sizeof a, r->flat, unit, u),
				    pd_fmt_percent(c1, sizeof c1, r->flat, t->total),
				    pd_fmt_percent(c2, sizeof c2, sum, t->total),
				    pd_fmt_value_to(b, sizeof b, r->cum, unit, u),
				    pd_fmt_percent(c3, sizeof c3, r->cum, t->total));
		if (!rc)
			rc = pd_buf_append(out, r->name.ptr, r->name.len);
		if (!rc)
			rc = pd_buf_appendf(out, "%s\n", inl[r->inlined]);
	}
	if (rc)
		return pd_errf(err, rc, "top: %s", rc == PD_ELIMIT ? "output over the limit" : "out of memory");
	return 0;
}
