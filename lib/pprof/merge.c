/*
 * merge.c — pprof's profile.Merge, streaming, in C.
 *
 * Semantics (github.com/google/pprof/profile/merge.go, as vendored by Go):
 *  - profiles must have equal period_type and sample_type lists (type and
 *    unit), else PD_EINCOMPAT naming both; with pd_merger_set_scale_units,
 *    as go tool pprof, units of one kind are converted to the finest;
 *  - period = max, duration = sum, time = earliest non-zero (upstream's loop
 *    has a bug with zero times; we take the minimum of the non-zero ones),
 *    comments = union in first-seen order, default_sample_type/doc_url =
 *    first non-empty, drop/keep frames, sample and period types = first;
 *  - mappings are keyed by (size rounded up to 4 KiB, file offset, build id
 *    or else file name); a later equal mapping's locations are relocated by
 *    the start difference (ASLR). The first mapping of the first profile
 *    that has mappings is always mapping 1 (the main binary);
 *  - functions keyed by (start line, name, system name, file name);
 *  - locations keyed by (address - mapping start, mapping, is_folded, each
 *    line's (function, line, column));
 *  - samples keyed by (locations, labels): equal keys sum their values;
 *    samples whose values are all zero are skipped on input, and rows that
 *    sum to zero are dropped with everything only they referenced;
 *  - ids are renumbered 1..n in first-seen order.
 *
 * Parallel merges split the inputs into consecutive runs, merge each run
 * into a *partial* result (finish keeps rows that sum to zero, in place),
 * and add the partials in order with pd_merger_add_partial (which does not
 * skip zero rows). Every rule above is order- and sum-preserving under this
 * scheme, so the result is identical to the sequential merge (tested).
 *
 * Everything a later profile needs is interned here (strings copied into
 * the merger's arena), so each input may be freed right after it is added.
 * Stacks (sequences of merged location ids) and label sets are interned to
 * integer ids and values are summed by the aggregation core (agg.h).
 */
#include "pprof.h"
#include "agg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* growable array of T, malloc'd */
#define VEC(T) struct { T *v; size_t n, cap; }
#define VEC_RESERVE(vec, extra) pd_grow((void **)&(vec).v, &(vec).cap, (vec).n + (extra), sizeof *(vec).v)

struct mloc {
	uint64_t address;  /* as stored (first seen, relocated) */
	uint64_t normaddr; /* address - mapping start, for the key */
	uint32_t mapping;  /* merged mapping index or PD_NONE */
	uint32_t lines;    /* offset into lines pool */
	uint32_t nlines;
	bool is_folded;
};

struct stackent {
	uint32_t off, n; /* locations in stack_pool */
	uint32_t row0;   /* agg row of (this stack, no labels), PD_NONE until seen:
			  * next to off/n so the common sample costs no extra miss */
};

struct span {
	uint32_t off, n;
};

/* A sample in the merger's pipeline (see merger_sample). */
enum { PF_B = 4, PF_C = 8, PF_DEPTH = 12 };

struct pending {
	VEC(uint32_t) stack; /* merged location ids */
	VEC(int64_t) vals;
	uint64_t hash;
	uint32_t lset, hint; /* hint: the stack id the index slot held at stage B */
};

/* A source location in premap_locations: its key, hash and candidate. */
struct preloc {
	struct mloc c;
	uint64_t hash;
	uint32_t cand; /* merged location its home slot names, PD_NONE */
};

struct pd_merger {
	struct pd_arena *arena; /* string bytes */
	size_t nprofiles;
	bool partial; /* finish keeps zero-sum rows: the result is an intermediate */
	bool no_premap; /* pd_merger_set_premap(m, false) */
	bool scale_units; /* pd_merger_set_scale_units(m, true) */
	bool scaling;     /* the profile being added has values to scale (in_ratio) */
	VEC(double) in_ratio; /* per sample type: the profile's values times this */

	/* header (merged string ids) */
	VEC(struct pd_vtype) stypes;
	struct pd_vtype ptype;
	int64_t time_nanos, duration_nanos, period;
	uint32_t drop_frames, keep_frames, default_sample_type, doc_url;
	VEC(uint32_t) comments;

	/* interned entities */
	VEC(struct pd_str) strs;
	struct pd_hidx strs_idx;
	VEC(struct pd_mapping) maps;
	struct pd_hidx maps_idx;
	VEC(struct pd_function) funcs;
	struct pd_hidx funcs_idx;
	VEC(struct mloc) locs;
	VEC(struct pd_line) lines;
	struct pd_hidx locs_idx;
	VEC(struct stackent) stacks;
	VEC(uint32_t) stack_pool;
	struct pd_hidx stacks_idx;
	VEC(struct span) lsets; /* label set 0 = empty */
	VEC(struct pd_label) label_pool;
	struct pd_hidx lsets_idx;
	struct pd_agg agg;
	uint32_t first_mapping;

	/* per-source memo tables (index in source -> merged index) */
	uint32_t *m_str, *m_func, *m_loc, *m_map;
	int64_t *m_map_off;
	uint64_t *m_fh; /* source function -> fn_hash, 0 = not computed yet */
	uint64_t *m_sh; /* source string -> str_hash, 0 = not computed yet */
	size_t m_cap_str, m_cap_func, m_cap_loc, m_cap_map, m_cap_fh, m_cap_sh;

	/* the sample pipeline (see merger_sample) */
	struct pending *pf;
	size_t pf_head, pf_count;

	/* scratch */
	VEC(struct pd_label) tmp_labels;
	VEC(struct preloc) pre; /* premap_locations */
};

/* ---- strings --------------------------------------------------------------- */

struct strkey {
	struct pd_merger *m;
	const char *p;
	uint32_t len;
};

static bool str_eq(void *ctx, uint32_t v)
{
	struct strkey *k = ctx;
	struct pd_str s = k->m->strs.v[v];
	return s.len == k->len && memcmp(s.ptr, k->p, k->len) == 0;
}

static inline uint64_t str_hash(const char *p, uint32_t len) { return pd_hash(p, len, 0); }

/* str_hash of source string i, once per source profile (0 in m_sh: not
 * computed yet; a hash that is 0 is computed again, which is harmless.
 * The hash itself keeps all its bits: its low ones pick the index slot) */
static inline uint64_t str_hash_of(struct pd_merger *m, const struct pd_profile *src, uint32_t i)
{
	if (!m->m_sh[i])
		m->m_sh[i] = str_hash(src->strings[i].ptr, src->strings[i].len);
	return m->m_sh[i];
}

static uint32_t intern_str_h(struct pd_merger *m, const char *p, uint32_t len, uint64_t h)
{
	struct strkey k = {m, p, len};
	uint32_t v = pd_hidx_find(&m->strs_idx, h, str_eq, &k);
	if (v != UINT32_MAX)
		return v;
	if (VEC_RESERVE(m->strs, 1))
		return PD_NONE;
	char *c = len ? pd_arena_dup(m->arena, p, len) : (char *)"";
	if (!c)
		return PD_NONE;
	v = (uint32_t)m->strs.n;
	m->strs.v[m->strs.n++] = (struct pd_str){c, len};
	if (pd_hidx_insert(&m->strs_idx, h, v))
		return PD_NONE;
	return v;
}

static uint32_t intern_str(struct pd_merger *m, const char *p, uint32_t len)
{
	return intern_str_h(m, p, len, str_hash(p, len));
}

/* Merged id of source string i (memoized per source). */
static inline uint32_t map_str(struct pd_merger *m, const struct pd_profile *src, uint32_t i)
{
	uint32_t v = m->m_str[i];
	if (v != PD_NONE)
		return v;
	v = intern_str_h(m, src->strings[i].ptr, src->strings[i].len, str_hash_of(m, src, i));
	m->m_str[i] = v;
	return v;
}

/* ---- mappings ------------------------------------------------------------- */

struct mapkey {
	struct pd_merger *m;
	uint64_t size, offset;
	uint32_t file; /* build id, else file name, else 0 */
};

static void mapping_key(const struct pd_mapping *mp, struct mapkey *k)
{
	uint64_t size = mp->limit - mp->start;
	size = size + 0x1000 - 1;
	size = size - (size % 0x1000);
	k->size = size;
	k->offset = mp->offset;
	k->file = mp->build_id ? mp->build_id : mp->filename;
}

static bool map_eq(void *ctx, uint32_t v)
{
	struct mapkey *k = ctx, o;
	mapping_key(&k->m->maps.v[v], &o);
	return o.size == k->size && o.offset == k->offset && o.file == k->file;
}

/* map_mapping_x with find_only: the mapping is not merged yet */
#define NOT_MERGED (PD_NONE - 1)

/* Merged index of source mapping i, or PD_NONE on OOM; sets offset. With
 * find_only, a mapping not merged yet is not added: NOT_MERGED (which
 * mapping comes first, and so where equal ones are relocated to, is
 * decided in the order samples first use them, as in pprof). */
static uint32_t map_mapping_x(struct pd_merger *m, const struct pd_profile *src, uint32_t i, int64_t *offset,
			      bool find_only)
{
	if (m->m_map[i] != PD_NONE) {
		*offset = m->m_map_off[i];
		return m->m_map[i];
	}
	const struct pd_mapping *s = &src->mappings[i];
	struct pd_mapping c = *s;
	c.filename = map_str(m, src, s->filename);
	c.build_id = map_str(m, src, s->build_id);
	if (c.filename == PD_NONE || c.build_id == PD_NONE)
		return PD_NONE;
	struct mapkey k = {m, 0, 0, 0};
	mapping_key(&c, &k);
	uint64_t h = pd_hash_u64(k.size ^ pd_hash_u64(k.offset ^ pd_hash_u64(k.file)));
	uint32_t v = pd_hidx_find(&m->maps_idx, h, map_eq, &k);
	if (v != UINT32_MAX) {
		*offset = (int64_t)m->maps.v[v].start - (int64_t)s->start;
	} else if (find_only) {
		return NOT_MERGED;
	} else {
		if (VEC_RESERVE(m->maps, 1))
			return PD_NONE;
		v = (uint32_t)m->maps.n++;
		m->maps.v[v] = c;
		if (pd_hidx_insert(&m->maps_idx, h, v))
			return PD_NONE;
		*offset = 0;
	}
	m->m_map[i] = v;
	m->m_map_off[i] = *offset;
	return v;
}

static uint32_t map_mapping(struct pd_merger *m, const struct pd_profile *src, uint32_t i, int64_t *offset)
{
	return map_mapping_x(m, src, i, offset, false);
}

/* ---- functions ------------------------------------------------------------ */

/* Functions are looked up by content (the bytes of name, system name and
 * file name, and the start line), so a function seen in an earlier profile
 * is found with one probe, without interning its three strings first. */
struct fnkey {
	struct pd_merger *m;
	const struct pd_profile *src;
	const struct pd_function *f; /* source function */
};

static inline bool str_same(struct pd_str a, struct pd_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static bool fn_eq(void *ctx, uint32_t v)
{
	struct fnkey *k = ctx;
	const struct pd_function *a = &k->m->funcs.v[v], *b = k->f;
	const struct pd_str *ms = k->m->strs.v, *ss = k->src->strings;
	return a->start_line == b->start_line && str_same(ms[a->name], ss[b->name]) &&
	       str_same(ms[a->system_name], ss[b->system_name]) && str_same(ms[a->filename], ss[b->filename]);
}

/* A function's hash from its strings' hashes (each string hashed once per
 * source profile: a file name is shared by many functions, and a Go
 * function's system name is its name) and its start line; every step a
 * bijective mix, so the order of the parts counts. */
static uint64_t fn_hash(struct pd_merger *m, const struct pd_profile *src, const struct pd_function *f)
{
	uint64_t h = pd_hash_u64(str_hash_of(m, src, f->name) ^ (uint64_t)f->start_line);
	h = pd_hash_u64(h ^ str_hash_of(m, src, f->system_name));
	return pd_hash_u64(h ^ str_hash_of(m, src, f->filename));
}

/* fn_hash of source function i, once per source profile (as str_hash_of:
 * 0 is "not computed"; it was ORed with 1, which left the even home slots
 * of the function index unused) */
static uint64_t fn_hash_of(struct pd_merger *m, const struct pd_profile *src, uint32_t i)
{
	if (!m->m_fh[i])
		m->m_fh[i] = fn_hash(m, src, &src->functions[i]);
	return m->m_fh[i];
}

static uint32_t map_function(struct pd_merger *m, const struct pd_profile *src, uint32_t i)
{
	if (m->m_func[i] != PD_NONE)
		return m->m_func[i];
	const struct pd_function *s = &src->functions[i];
	uint64_t h = fn_hash_of(m, src, i);
	struct fnkey k = {m, src, s};
	uint32_t v = pd_hidx_find(&m->funcs_idx, h, fn_eq, &k);
	if (v == UINT32_MAX) {
		struct pd_function c = {0, map_str(m, src, s->name), map_str(m, src, s->system_name),
					map_str(m, src, s->filename), s->start_line};
		if (c.name == PD_NONE || c.system_name == PD_NONE || c.filename == PD_NONE)
			return PD_NONE;
		if (VEC_RESERVE(m->funcs, 1))
			return PD_NONE;
		v = (uint32_t)m->funcs.n++;
		m->funcs.v[v] = c;
		if (pd_hidx_insert(&m->funcs_idx, h, v))
			return PD_NONE;
	}
	m->m_func[i] = v;
	return v;
}

/* ---- locations ------------------------------------------------------------ */

/*
 * A location is keyed as in pprof by (address - mapping start, mapping,
 * is_folded, each line's (function, line, column)). The hash takes each
 * line's function by content (fn_hash, once per source function), and the
 * comparison checks it against the source function (or by merged id once
 * known): finding a location seen in an earlier profile also maps the
 * source functions of its lines for free. Without the functions in the
 * hash, locations that differ only by function (no address, as in
 * profiles of interpreted code or a hostile upload of 60,000 of them) were
 * one chain of the index: a diff of such a profile took ten minutes.
 */
struct lockey {
	struct pd_merger *m;
	const struct pd_profile *src;
	const struct pd_location *s; /* source location */
	const struct mloc *l;        /* its mapped address and mapping */
};

static bool fn_same(struct pd_merger *m, const struct pd_profile *src, uint32_t merged, uint32_t srcfn)
{
	if (m->m_func[srcfn] != PD_NONE)
		return m->m_func[srcfn] == merged;
	struct fnkey k = {m, src, &src->functions[srcfn]};
	return fn_eq(&k, merged);
}

static bool loc_eq(void *ctx, uint32_t v)
{
	struct lockey *k = ctx;
	const struct mloc *a = &k->m->locs.v[v], *b = k->l;
	if (a->normaddr != b->normaddr || a->mapping != b->mapping || a->is_folded != b->is_folded ||
	    a->nlines != b->nlines)
		return false;
	const struct pd_line *la = k->m->lines.v ? k->m->lines.v + a->lines : NULL, *ls = k->s->lines;
	for (uint32_t i = 0; i < a->nlines; i++)
		if (la[i].line != ls[i].line || la[i].column != ls[i].column ||
		    !fn_same(k->m, k->src, la[i].function, ls[i].function))
			return false;
	return true;
}

static uint64_t loc_hash(struct pd_merger *m, const struct pd_profile *src, const struct mloc *c,
			 const struct pd_line *lines)
{
	uint64_t h = pd_hash_u64(c->normaddr ^ ((uint64_t)c->mapping << 1 | c->is_folded));
	for (uint32_t j = 0; j < c->nlines; j++)
		h = pd_hash_u64(h ^ pd_hash_u64((uint64_t)lines[j].line ^ ((uint64_t)lines[j].column << 40)) ^
				fn_hash_of(m, src, lines[j].function));
	return h;
}

/* Source location s's key (mapped address and mapping) into *c; -1 on OOM,
 * 1 if find_only and its mapping is not merged yet. */
static inline int loc_key(struct pd_merger *m, const struct pd_profile *src, const struct pd_location *s,
			  struct mloc *c, bool find_only)
{
	*c = (struct mloc){s->address, s->address, PD_NONE, 0, s->nlines, s->is_folded};
	if (s->mapping != PD_NONE) {
		int64_t off = 0;
		c->mapping = map_mapping_x(m, src, s->mapping, &off, find_only);
		if (c->mapping == NOT_MERGED)
			return 1;
		if (c->mapping == PD_NONE)
			return -1;
		c->address = (uint64_t)((int64_t)s->address + off);
		c->normaddr = c->address - m->maps.v[c->mapping].start;
	}
	return 0;
}

/* Merged location equal to source location s (key c, hash h), or
 * UINT32_MAX; when found, the source functions of its lines are memoized. */
static inline uint32_t loc_find(struct pd_merger *m, const struct pd_profile *src, const struct pd_location *s,
				const struct mloc *c, uint64_t h)
{
	struct lockey k = {m, src, s, c};
	uint32_t v = pd_hidx_find(&m->locs_idx, h, loc_eq, &k);
	if (v != UINT32_MAX) {
		/* equal location: its lines' functions are the source's */
		const struct pd_line *la = m->lines.v ? m->lines.v + m->locs.v[v].lines : NULL;
		for (uint32_t j = 0; j < s->nlines; j++)
			m->m_func[s->lines[j].function] = la[j].function;
	}
	return v;
}

/* Source location i, seen for the first time in this profile (m_loc[i] is
 * its memo: every later use is one load, in merger_sample). Out of line, so
 * that the per-location loop stays small. */
static __attribute__((noinline)) uint32_t map_location_new(struct pd_merger *m, const struct pd_profile *src, uint32_t i)
{
	const struct pd_location *s = &src->locations[i];
	struct mloc c;
	if (loc_key(m, src, s, &c, false))
		return PD_NONE;
	uint64_t h = loc_hash(m, src, &c, s->lines);
	uint32_t v = loc_find(m, src, s, &c, h);
	if (v == UINT32_MAX) {
		if (VEC_RESERVE(m->lines, s->nlines) || VEC_RESERVE(m->locs, 1))
			return PD_NONE;
		struct pd_line *nl = m->lines.v ? m->lines.v + m->lines.n : NULL; /* no lines yet: nothing to point at */
		for (uint32_t j = 0; j < s->nlines; j++) {
			nl[j].function = map_function(m, src, s->lines[j].function);
			if (nl[j].function == PD_NONE)
				return PD_NONE;
			nl[j].line = s->lines[j].line;
			nl[j].column = s->lines[j].column;
		}
		c.lines = (uint32_t)m->lines.n;
		m->lines.n += s->nlines;
		v = (uint32_t)m->locs.n++;
		m->locs.v[v] = c;
		if (pd_hidx_insert(&m->locs_idx, h, v))
			return PD_NONE;
	}
	m->m_loc[i] = v;
	return v;
}

/*
 * Look every location of a new source profile up at once, before its
 * samples: the locations seen in earlier profiles (after the first few
 * files, nearly all) get their memo here, with the cache misses of the
 * index slot, the merged location and its lines overlapped: PL_A ahead the
 * slot is prefetched, PL_B ahead it is read and the location it names
 * prefetched, PL_C ahead that location's lines. One at a time, as samples
 * first met them, the three were a miss each after a file's samples had
 * pushed the tables out of the cache (10 % of a merge of deep profiles).
 * Only lookups happen here: a location not found is added when a sample
 * first uses it, as before, so what is added and in which order is
 * unchanged (and the result is renumbered in output order anyway).
 */
enum { PL_A = 12, PL_B = 8, PL_C = 4, PL_MIN = 64 };

static int premap_locations(struct pd_merger *m, const struct pd_profile *p)
{
	size_t n = p->nlocations;
	if (n < PL_MIN || m->locs.n == 0 || m->no_premap)
		return 0;
	m->pre.n = 0;
	if (VEC_RESERVE(m->pre, n))
		return PD_ENOMEM;
	struct preloc *pl = m->pre.v;
	const struct pd_hidx *ix = &m->locs_idx;
	for (size_t i = 0; i < n; i++) {
		int r = loc_key(m, p, &p->locations[i], &pl[i].c, true);
		if (r < 0)
			return PD_ENOMEM;
		/* hash 0: not looked up (its mapping is new: so is the location) */
		pl[i].hash = r ? 0 : pd__hidx_fix(loc_hash(m, p, &pl[i].c, p->locations[i].lines));
		pl[i].cand = PD_NONE;
	}
	for (size_t i = 0; i < n + PL_A; i++) {
		if (i < n)
			pd_hidx_prefetch(ix, pl[i].hash);
		if (i >= PL_A - PL_B && i - (PL_A - PL_B) < n) {
			struct preloc *b = &pl[i - (PL_A - PL_B)];
			const struct pd_hidx_slot *sl = &ix->slots[b->hash & ix->mask];
			if (b->hash && sl->hash == b->hash && sl->val < m->locs.n) {
				b->cand = sl->val;
				__builtin_prefetch(&m->locs.v[sl->val]);
			}
		}
		if (i >= PL_A - PL_C && i - (PL_A - PL_C) < n) {
			const struct preloc *c = &pl[i - (PL_A - PL_C)];
			if (c->cand != PD_NONE && m->lines.v)
				__builtin_prefetch(&m->lines.v[m->locs.v[c->cand].lines]);
		}
		if (i >= PL_A && pl[i - PL_A].hash) {
			size_t j = i - PL_A;
			uint32_t v = loc_find(m, p, &p->locations[j], &pl[j].c, pl[j].hash);
			if (v != UINT32_MAX)
				m->m_loc[j] = v;
		}
	}
	return 0;
}

/* ---- stacks and label sets ------------------------------------------------- */

struct spankey {
	struct pd_merger *m;
	const void *items;
	uint32_t n;
	bool labels;
};

static bool stack_eq(void *ctx, uint32_t v)
{
	struct spankey *k = ctx;
	struct stackent s = k->m->stacks.v[v];
	return s.n == k->n && (s.n == 0 || memcmp(k->m->stack_pool.v + s.off, k->items, s.n * sizeof(uint32_t)) == 0);
}

static bool lset_eq(void *ctx, uint32_t v)
{
	struct spankey *k = ctx;
	struct span s = k->m->lsets.v[v];
	if (s.n != k->n)
		return false;
	const struct pd_label *a = k->m->label_pool.v + s.off, *b = k->items;
	for (uint32_t i = 0; i < s.n; i++)
		if (a[i].key != b[i].key || a[i].str != b[i].str || a[i].num != b[i].num ||
		    a[i].num_unit != b[i].num_unit)
			return false;
	return true;
}

static uint64_t stack_hash(const uint32_t *locs, uint32_t n)
{
	return n ? pd_hash(locs, n * sizeof *locs, 0x57ac) : 0x57ac;
}

static uint32_t intern_stack_h(struct pd_merger *m, const uint32_t *locs, uint32_t n, uint64_t h)
{
	struct spankey k = {m, locs, n, false};
	uint32_t v = pd_hidx_find(&m->stacks_idx, h, stack_eq, &k);
	if (v != UINT32_MAX)
		return v;
	if (VEC_RESERVE(m->stacks, 1) || VEC_RESERVE(m->stack_pool, n))
		return PD_NONE;
	if (n)
		memcpy(m->stack_pool.v + m->stack_pool.n, locs, n * sizeof *locs);
	v = (uint32_t)m->stacks.n++;
	m->stacks.v[v] = (struct stackent){(uint32_t)m->stack_pool.n, n, PD_NONE};
	m->stack_pool.n += n;
	if (pd_hidx_insert(&m->stacks_idx, h, v))
		return PD_NONE;
	return v;
}

static uint64_t labels_hash(const struct pd_label *l, uint32_t n)
{
	uint64_t h = 0x1abe1;
	for (uint32_t i = 0; i < n; i++)
		h = pd_hash_u64(h ^ ((uint64_t)l[i].key << 32 | l[i].str) ^
				pd_hash_u64((uint64_t)l[i].num ^ ((uint64_t)l[i].num_unit << 48)));
	return h;
}

static uint32_t intern_lset(struct pd_merger *m, const struct pd_label *l, uint32_t n)
{
	if (n == 0)
		return 0;
	uint64_t h = labels_hash(l, n);
	struct spankey k = {m, l, n, true};
	uint32_t v = pd_hidx_find(&m->lsets_idx, h, lset_eq, &k);
	if (v != UINT32_MAX)
		return v;
	if (VEC_RESERVE(m->lsets, 1) || VEC_RESERVE(m->label_pool, n))
		return PD_NONE;
	memcpy(m->label_pool.v + m->label_pool.n, l, n * sizeof *l);
	v = (uint32_t)m->lsets.n++;
	m->lsets.v[v] = (struct span){(uint32_t)m->label_pool.n, n};
	m->label_pool.n += n;
	if (pd_hidx_insert(&m->lsets_idx, h, v))
		return PD_NONE;
	return v;
}

static int str_cmp(const struct pd_merger *m, uint32_t a, uint32_t b)
{
	return a == b ? 0 : pd_str_cmp(m->strs.v[a], m->strs.v[b]);
}

/* Canonical label order, which is also what pprof's encoder writes: string
 * labels sorted by key, then numeric labels sorted by key; values of one key
 * keep their order (stable insertion sort; label lists are short). */
static void sort_labels(const struct pd_merger *m, struct pd_label *l, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		struct pd_label x = l[i];
		uint32_t j = i;
		while (j > 0) {
			const struct pd_label *y = &l[j - 1];
			bool xs = x.str != 0, ys = y->str != 0;
			int c = xs != ys ? (xs ? -1 : 1) : str_cmp(m, x.key, y->key);
			if (c >= 0)
				break;
			l[j] = l[j - 1];
			j--;
		}
		l[j] = x;
	}
}

/* ---- public ------------------------------------------------------------------ */

struct pd_merger *pd_merger_new(void)
{
	struct pd_merger *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->arena = pd_arena_new(256 * 1024);
	m->first_mapping = PD_NONE;
	m->pf = calloc(PF_DEPTH, sizeof *m->pf);
	/* small first tables, grown as they fill: 4,096 entries each were 128 KiB
	 * apiece, written all over by the first few hundred keys, ~1 MiB of RSS
	 * for a two-thread merge of small profiles (a tenth of its peak) */
	if (!m->arena || !m->pf || pd_hidx_init(&m->strs_idx, 256) || pd_hidx_init(&m->maps_idx, 16) ||
	    pd_hidx_init(&m->funcs_idx, 256) || pd_hidx_init(&m->locs_idx, 256) ||
	    pd_hidx_init(&m->stacks_idx, 256) || pd_hidx_init(&m->lsets_idx, 64) ||
	    VEC_RESERVE(m->lsets, 1) || intern_str(m, "", 0) != 0) {
		pd_merger_free(m);
		return NULL;
	}
	m->lsets.v[m->lsets.n++] = (struct span){0, 0}; /* label set 0: no labels */
	return m;
}

void pd_merger_free(struct pd_merger *m)
{
	if (!m)
		return;
	pd_arena_free(m->arena);
	free(m->stypes.v);
	free(m->comments.v);
	free(m->strs.v);
	pd_hidx_free(&m->strs_idx);
	free(m->maps.v);
	pd_hidx_free(&m->maps_idx);
	free(m->funcs.v);
	pd_hidx_free(&m->funcs_idx);
	free(m->locs.v);
	free(m->lines.v);
	pd_hidx_free(&m->locs_idx);
	free(m->stacks.v);
	free(m->stack_pool.v);
	pd_hidx_free(&m->stacks_idx);
	free(m->lsets.v);
	free(m->label_pool.v);
	pd_hidx_free(&m->lsets_idx);
	if (m->nprofiles)
		pd_agg_free(&m->agg);
	free(m->m_str);
	free(m->m_func);
	free(m->m_loc);
	free(m->m_map);
	free(m->m_map_off);
	free(m->m_fh);
	free(m->m_sh);
	for (int i = 0; m->pf && i < PF_DEPTH; i++) {
		free(m->pf[i].stack.v);
		free(m->pf[i].vals.v);
	}
	free(m->pf);
	free(m->tmp_labels.v);
	free(m->in_ratio.v);
	free(m->pre.v);
	free(m);
}

size_t pd_merger_count(const struct pd_merger *m) { return m->nprofiles; }

/* Resize a memo table *t of elements of elsz bytes to n entries, every
 * byte fill (0xff: PD_NONE ids; 0: hashes not computed yet). */
static int memo_reset(void **t, size_t *cap, size_t n, size_t elsz, int fill)
{
	if (n > *cap) {
		free(*t);
		*t = malloc((n ? n : 1) * elsz);
		*cap = *t ? n : 0;
		if (!*t)
			return PD_ENOMEM;
	}
	if (n)
		memset(*t, fill, n * elsz);
	return 0;
}

static int memo(uint32_t **t, size_t *cap, size_t n) { return memo_reset((void **)t, cap, n, sizeof **t, 0xff); }

static int memo_hash(uint64_t **t, size_t *cap, size_t n) { return memo_reset((void **)t, cap, n, sizeof **t, 0); }

const char *pd_kind_name(struct pd_str period_type, struct pd_str first_type, struct pd_str default_type)
{
	if (pd_str_eq(period_type, "cpu"))
		return "cpu";
	if (pd_str_eq(first_type, "alloc_objects") || pd_str_eq(period_type, "space"))
		return pd_str_eq(default_type, "alloc_space") ? "allocs" : "heap";
	if (pd_str_eq(first_type, "contentions"))
		return "block/mutex";
	if (pd_str_eq(first_type, "goroutine"))
		return "goroutine";
	if (pd_str_eq(first_type, "threadcreate"))
		return "threadcreate";
	return "unknown";
}

static int incompatible(struct pd_merger *m, const struct pd_profile *p, struct pd_err *err)
{
	char a[256], b[256];
	size_t o = 0;
	o += (size_t)snprintf(a, sizeof a, "[");
	for (size_t i = 0; i < m->stypes.n && o < sizeof a; i++) {
		struct pd_str t = m->strs.v[m->stypes.v[i].type], u = m->strs.v[m->stypes.v[i].unit];
		o += (size_t)snprintf(a + o, sizeof a - o, "%s%.*s/%.*s", i ? " " : "", (int)t.len, t.ptr, (int)u.len,
				      u.ptr);
	}
	if (o < sizeof a) {
		struct pd_str t = m->strs.v[m->ptype.type], u = m->strs.v[m->ptype.unit];
		snprintf(a + o, sizeof a - o, "] period %.*s/%.*s", (int)t.len, t.ptr, (int)u.len, u.ptr);
	}
	pd_profile_describe_types(p, b, sizeof b);
	struct pd_str empty = m->strs.v[0];
	const char *ka = pd_kind_name(m->strs.v[m->ptype.type], m->stypes.n ? m->strs.v[m->stypes.v[0].type] : empty,
				   m->strs.v[m->default_sample_type]);
	const char *kb = pd_kind_name(p->strings[p->period_type.type],
				   p->nsample_types ? p->strings[p->sample_types[0].type] : p->strings[0],
				   p->strings[p->default_sample_type]);
	return pd_errf(err, PD_EINCOMPAT,
		       "incompatible profiles: cannot merge a %s profile %s with a %s profile %s "
		       "(sample and period types must be equal%s)",
		       ka, a, kb, b, m->scale_units ? "; units may differ in scale, as ms and ns" : "");
}

static bool same_vtype(struct pd_merger *m, const struct pd_profile *p, struct pd_vtype mv, struct pd_vtype pv)
{
	struct pd_str a = m->strs.v[mv.type], b = p->strings[pv.type];
	struct pd_str c = m->strs.v[mv.unit], d = p->strings[pv.unit];
	return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len) && c.len == d.len && !memcmp(c.ptr, d.ptr, c.len);
}

/* ---- units: go tool pprof's measurement.ScaleProfiles ----------------------
 *
 * go tool pprof merges profiles whose sample (and period) types have the same
 * names and units of one kind (time, memory, Google's GCU) but not the same
 * unit: every value is converted to the finest unit seen, round(v * ratio),
 * and the type takes that unit's name as the first profile that had it wrote
 * it. A unit is known by Go's aliases, compared in lower case with one
 * trailing "s" dropped from names longer than two bytes ("nanoseconds",
 * "ms", "bytes", "kilobytes"; Go's "μs" is three bytes, so it never matches,
 * as in Go). Ratios between units of time and memory are integers, so
 * scaling the sum when a finer unit turns up equals scaling each input. */
struct unitdef {
	const char *alias;
	double factor;
	int kind;
};

static const struct unitdef unit_defs[] = {
	{"b", 1, 0},
	{"byte", 1, 0},
	{"kb", 1024.0, 0},
	{"kbyte", 1024.0, 0},
	{"kilobyte", 1024.0, 0},
	{"mb", 1048576.0, 0},
	{"mbyte", 1048576.0, 0},
	{"megabyte", 1048576.0, 0},
	{"gb", 1073741824.0, 0},
	{"gbyte", 1073741824.0, 0},
	{"gigabyte", 1073741824.0, 0},
	{"tb", 1099511627776.0, 0},
	{"tbyte", 1099511627776.0, 0},
	{"terabyte", 1099511627776.0, 0},
	{"pb", 1125899906842624.0, 0},
	{"pbyte", 1125899906842624.0, 0},
	{"petabyte", 1125899906842624.0, 0},
	{"ns", 1, 1},
	{"nanosecond", 1, 1},
	{"\xce\xbcs", 1e3, 1},
	{"us", 1e3, 1},
	{"microsecond", 1e3, 1},
	{"ms", 1e6, 1},
	{"millisecond", 1e6, 1},
	{"s", 1e9, 1},
	{"sec", 1e9, 1},
	{"second", 1e9, 1},
	{"hour", 3600e9, 1},
	{"hr", 3600e9, 1},
	{"nanogcu", 1e-9, 2},
	{"microgcu", 1e-6, 2},
	{"milligcu", 1e-3, 2},
	{"gcu", 1, 2},
	{"kilogcu", 1e3, 2},
	{"megagcu", 1e6, 2},
	{"gigagcu", 1e9, 2},
	{"teragcu", 1e12, 2},
	{"petagcu", 1e15, 2},
};

static const struct unitdef *sniff_unit(struct pd_str u)
{
	char b[32];
	size_t n = u.len;
	if (n >= sizeof b)
		return NULL;
	for (size_t i = 0; i < n; i++)
		b[i] = u.ptr[i] >= 'A' && u.ptr[i] <= 'Z' ? (char)(u.ptr[i] - 'A' + 'a') : u.ptr[i];
	if (n > 2 && b[n - 1] == 's')
		n--;
	for (size_t i = 0; i < sizeof unit_defs / sizeof *unit_defs; i++)
		if (strlen(unit_defs[i].alias) == n && !memcmp(unit_defs[i].alias, b, n))
			return &unit_defs[i];
	return NULL;
}

double pd_unit_factor(struct pd_str unit, int *kind)
{
	const struct unitdef *u = sniff_unit(unit);
	if (kind)
		*kind = u ? u->kind : -1;
	return u ? u->factor : 0;
}

/* Whether units a and b are the same or of one kind; their factors (1 and
 * 1 for the same unknown unit). */
static bool units_match(struct pd_str a, struct pd_str b, double *fa, double *fb)
{
	*fa = *fb = 1;
	if (a.len == b.len && !memcmp(a.ptr, b.ptr, a.len))
		return true;
	const struct unitdef *ua = sniff_unit(a), *ub = sniff_unit(b);
	if (!ua || !ub || ua->kind != ub->kind)
		return false;
	*fa = ua->factor;
	*fb = ub->factor;
	return true;
}

/* Go's int64(math.Round(float64(v) * r)), saturated. */
static int64_t scale_round(int64_t v, double r)
{
	double x = round((double)v * r);
	if (x >= 9223372036854775807.0)
		return INT64_MAX;
	if (x <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)x;
}

/* Go's int64(x) on amd64 (a period scaled to another unit): MinInt64 out
 * of range or NaN, which the merge's max then passes over, as Go's does;
 * in C such a cast would be undefined */
static int64_t go_i64(double x)
{
	if (!(x > -9223372036854775808.0 && x < 9223372036854775807.0))
		return INT64_MIN;
	return (int64_t)x;
}

static bool same_type_name(struct pd_merger *m, const struct pd_profile *p, struct pd_vtype mv, struct pd_vtype pv)
{
	struct pd_str a = m->strs.v[mv.type], b = p->strings[pv.type];
	return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len);
}

/* p's types against the merger's, units converted (scale_units): PD_EINCOMPAT
 * as without conversion, or the merged values rescaled to a finer unit of p
 * and p's ratios set (m->in_ratio) for a coarser one; *period = p's period in
 * the merged period unit. */
static int convert_units(struct pd_merger *m, const struct pd_profile *p, int64_t *period, struct pd_err *err)
{
	double fm, fp;
	bool ok = m->stypes.n == p->nsample_types && same_type_name(m, p, m->ptype, p->period_type) &&
		  units_match(m->strs.v[m->ptype.unit], p->strings[p->period_type.unit], &fm, &fp);
	for (uint32_t i = 0; ok && i < p->nsample_types; i++)
		ok = same_type_name(m, p, m->stypes.v[i], p->sample_types[i]) &&
		     units_match(m->strs.v[m->stypes.v[i].unit], p->strings[p->sample_types[i].unit], &fm, &fp);
	if (!ok)
		return incompatible(m, p, err);
	if (VEC_RESERVE(m->in_ratio, p->nsample_types))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	m->scaling = false;
	for (uint32_t i = 0; i < p->nsample_types; i++) {
		m->in_ratio.v[i] = 1;
		(void)units_match(m->strs.v[m->stypes.v[i].unit], p->strings[p->sample_types[i].unit], &fm, &fp);
		if (fp < fm) { /* p's unit is finer: the sums so far go to it */
			double r = fm / fp;
			for (size_t row = 0; row < m->agg.n; row++) {
				int64_t *v = m->agg.vals + row * m->agg.nvalues + i;
				*v = scale_round(*v, r);
			}
			if ((m->stypes.v[i].unit = map_str(m, p, p->sample_types[i].unit)) == PD_NONE)
				return pd_errf(err, PD_ENOMEM, "out of memory");
		} else if (fp > fm) {
			m->in_ratio.v[i] = fp / fm;
			m->scaling = true;
		}
	}
	(void)units_match(m->strs.v[m->ptype.unit], p->strings[p->period_type.unit], &fm, &fp);
	*period = p->period;
	if (fp < fm) {
		m->period = go_i64((double)m->period * fm / fp);
		if ((m->ptype.unit = map_str(m, p, p->period_type.unit)) == PD_NONE)
			return pd_errf(err, PD_ENOMEM, "out of memory");
	} else if (fp > fm) {
		*period = go_i64((double)p->period * fp / fm);
	}
	return 0;
}

void pd_merger_set_scale_units(struct pd_merger *m, bool on) { m->scale_units = on; }

static int merger_add(struct pd_merger *m, const struct pd_profile *p, bool partial, struct pd_err *err);

int pd_merger_add(struct pd_merger *m, const struct pd_profile *p, struct pd_err *err)
{
	return merger_add(m, p, false, err);
}

int pd_merger_add_partial(struct pd_merger *m, const struct pd_profile *p, struct pd_err *err)
{
	return merger_add(m, p, true, err);
}

void pd_merger_set_partial(struct pd_merger *m, bool partial) { m->partial = partial; }

void pd_merger_set_premap(struct pd_merger *m, bool on) { m->no_premap = !on; }

/* Start adding profile p: compatibility, header, per-source memo tables. */
static int merger_begin(struct pd_merger *m, const struct pd_profile *p, struct pd_err *err)
{
	if (memo(&m->m_str, &m->m_cap_str, p->nstrings) || memo(&m->m_func, &m->m_cap_func, p->nfunctions) ||
	    memo(&m->m_loc, &m->m_cap_loc, p->nlocations) || memo_hash(&m->m_fh, &m->m_cap_fh, p->nfunctions) ||
	    memo_hash(&m->m_sh, &m->m_cap_sh, p->nstrings))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (p->nmappings > m->m_cap_map) {
		free(m->m_map_off);
		m->m_map_off = malloc(p->nmappings * sizeof *m->m_map_off);
		if (!m->m_map_off)
			return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (memo(&m->m_map, &m->m_cap_map, p->nmappings))
		return pd_errf(err, PD_ENOMEM, "out of memory");

	if (m->nprofiles == 0) {
		if (VEC_RESERVE(m->stypes, p->nsample_types))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		for (uint32_t i = 0; i < p->nsample_types; i++) {
			m->stypes.v[i].type = map_str(m, p, p->sample_types[i].type);
			m->stypes.v[i].unit = map_str(m, p, p->sample_types[i].unit);
		}
		m->stypes.n = p->nsample_types;
		m->ptype.type = map_str(m, p, p->period_type.type);
		m->ptype.unit = map_str(m, p, p->period_type.unit);
		m->drop_frames = map_str(m, p, p->drop_frames);
		m->keep_frames = map_str(m, p, p->keep_frames);
		if (pd_agg_init(&m->agg, p->nsample_types, p->nsamples * 2))
			return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	int64_t period = p->period;
	m->scaling = false;
	if (m->nprofiles > 0) {
		bool ok = same_vtype(m, p, m->ptype, p->period_type) && m->stypes.n == p->nsample_types;
		for (uint32_t i = 0; ok && i < p->nsample_types; i++)
			ok = same_vtype(m, p, m->stypes.v[i], p->sample_types[i]);
		int rc;
		if (!ok && !m->scale_units)
			return incompatible(m, p, err);
		if (!ok && (rc = convert_units(m, p, &period, err)))
			return rc;
	}
	m->nprofiles++;

	/* header */
	if (p->time_nanos && (m->time_nanos == 0 || p->time_nanos < m->time_nanos))
		m->time_nanos = p->time_nanos;
	m->duration_nanos = pd_wadd(m->duration_nanos, p->duration_nanos);
	if (m->period == 0 || m->period < period)
		m->period = period;
	for (uint32_t i = 0; i < p->ncomments; i++) {
		uint32_t c = map_str(m, p, p->comments[i]);
		bool seen = false;
		for (size_t j = 0; j < m->comments.n && !seen; j++)
			seen = m->comments.v[j] == c;
		if (!seen) {
			if (VEC_RESERVE(m->comments, 1))
				return pd_errf(err, PD_ENOMEM, "out of memory");
			m->comments.v[m->comments.n++] = c;
		}
	}
	if (!m->default_sample_type && p->default_sample_type)
		m->default_sample_type = map_str(m, p, p->default_sample_type);
	if (!m->doc_url && p->doc_url)
		m->doc_url = map_str(m, p, p->doc_url);

	if (m->maps.n == 0 && p->nmappings > 0) {
		int64_t off;
		m->first_mapping = map_mapping(m, p, 0, &off);
		if (m->first_mapping == PD_NONE)
			return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	if (premap_locations(m, p))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	return 0;
}

/*
 * Samples go through a short pipeline so that the cache misses of their
 * aggregation overlap instead of adding up: on arrival a sample's locations
 * are mapped, its stack hashed and the stack index slot prefetched; PF_B
 * samples later the slot is read and the stack entry it names prefetched;
 * PF_C samples later the stack's locations and its aggregation row (for a
 * labelled sample, the row index's slot) are prefetched; PF_DEPTH samples
 * later it is interned and added. Samples leave in arrival order and every
 * decision is taken at the last stage, so the result is exactly that of
 * one-at-a-time processing; the earlier stages only prefetch.
 */
static inline struct pending *pf_at(struct pd_merger *m, size_t age) /* age 0 = newest */
{
	return &m->pf[(m->pf_head + PF_DEPTH - 1 - age) % PF_DEPTH];
}

/* Intern the oldest pending sample's stack and add its values. */
static int pf_finish_one(struct pd_merger *m, struct pd_err *err)
{
	struct pending *e = &m->pf[(m->pf_head + PF_DEPTH - m->pf_count) % PF_DEPTH];
	m->pf_count--;
	uint32_t stack = intern_stack_h(m, e->stack.v, (uint32_t)e->stack.n, e->hash);
	if (stack == PD_NONE)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	/* Most samples carry no labels: (stack, no labels)'s row is kept in
	 * the stack entry, which skips the aggregation's hash probe. */
	if (e->lset == 0 && m->stacks.v[stack].row0 != PD_NONE) {
		pd_agg_add_row(&m->agg, m->stacks.v[stack].row0, e->vals.v);
		return 0;
	}
	uint32_t row;
	int rc = pd_agg_add2(&m->agg, stack, e->lset, e->vals.v, &row);
	if (rc)
		return pd_errf(err, rc, rc == PD_ELIMIT ? "merge: too many distinct samples" : "out of memory");
	if (e->lset == 0)
		m->stacks.v[stack].row0 = row;
	return 0;
}

/* Finish every pending sample (end of a profile). */
static int pf_drain(struct pd_merger *m, struct pd_err *err)
{
	int rc = 0;
	while (m->pf_count && !rc)
		rc = pf_finish_one(m, err);
	m->pf_count = 0;
	return rc;
}

/* Add one sample of the profile begun last (through the pipeline). */
static int merger_sample(struct pd_merger *m, const struct pd_profile *p, const struct pd_sample *s, bool partial,
			 struct pd_err *err)
{
	int rc;
	bool zero = true;
	for (uint32_t j = 0; j < p->nsample_types && zero; j++)
		zero = s->values[j] == 0;
	if (zero && !partial) /* a partial result's zero rows keep their place */
		return 0;
	if (m->pf_count == PF_DEPTH && (rc = pf_finish_one(m, err)))
		return rc;
	struct pending *e = &m->pf[m->pf_head];
	e->stack.n = e->vals.n = 0;
	if (VEC_RESERVE(e->stack, s->nlocs) || VEC_RESERVE(e->vals, p->nsample_types) ||
	    VEC_RESERVE(m->tmp_labels, s->nlabels))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	uint32_t *st = e->stack.v;
	const uint32_t *memo = m->m_loc, *sloc = s->locs;
	for (uint32_t j = 0, n = s->nlocs; j < n; j++) {
		uint32_t v = memo[sloc[j]];
		if (PD_UNLIKELY(v == PD_NONE) && (v = map_location_new(m, p, sloc[j])) == PD_NONE)
			return pd_errf(err, PD_ENOMEM, "out of memory");
		st[j] = v;
	}
	e->stack.n = s->nlocs;
	if (p->nsample_types)
		memcpy(e->vals.v, s->values, p->nsample_types * sizeof *s->values);
	e->vals.n = p->nsample_types;
	if (PD_UNLIKELY(m->scaling))
		for (uint32_t j = 0; j < p->nsample_types; j++)
			e->vals.v[j] = scale_round(e->vals.v[j], m->in_ratio.v[j]);
	e->hash = stack_hash(st, s->nlocs);
	pd_hidx_prefetch(&m->stacks_idx, e->hash);
	struct pd_label *lb = m->tmp_labels.v;
	for (uint32_t j = 0; j < s->nlabels; j++) {
		const struct pd_label *l = &s->labels[j];
		lb[j].key = map_str(m, p, l->key);
		lb[j].str = l->str ? map_str(m, p, l->str) : 0;
		lb[j].num = l->str ? 0 : l->num;
		lb[j].num_unit = l->str ? 0 : map_str(m, p, l->num_unit);
		if (lb[j].key == PD_NONE || lb[j].str == PD_NONE || lb[j].num_unit == PD_NONE)
			return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	sort_labels(m, lb, s->nlabels);
	e->lset = intern_lset(m, lb, s->nlabels);
	if (e->lset == PD_NONE)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	e->hint = PD_NONE;
	m->pf_head = (m->pf_head + 1) % PF_DEPTH;
	m->pf_count++;
	/* stage B: read the (now cached) index slot, prefetch the stack entry */
	if (m->pf_count > PF_B) {
		struct pending *b = pf_at(m, PF_B);
		uint64_t h = pd__hidx_fix(b->hash);
		/* the home slot, or one a few places on (a displaced entry:
		 * about one in six at the index's load) */
		for (size_t i = h & m->stacks_idx.mask, k = 0; k < 8; k++, i = (i + 1) & m->stacks_idx.mask) {
			const struct pd_hidx_slot *sl = &m->stacks_idx.slots[i];
			if (sl->hash == 0)
				break;
			if (sl->hash == h && sl->val < m->stacks.n) {
				b->hint = sl->val;
				__builtin_prefetch(&m->stacks.v[sl->val]);
				break;
			}
		}
	}
	/* stage C: prefetch the stack's locations and its aggregation row */
	if (m->pf_count > PF_C) {
		struct pending *c = pf_at(m, PF_C);
		if (c->hint != PD_NONE && c->hint < m->stacks.n) {
			const struct stackent *se = &m->stacks.v[c->hint];
			/* every line of it: deep stacks (64 locations = 4 lines)
			 * are compared in full at the last stage */
			const char *sp = se->n ? (const char *)(m->stack_pool.v + se->off) : NULL;
			for (size_t o = 0; o < (size_t)se->n * sizeof(uint32_t); o += 64)
				__builtin_prefetch(sp + o);
			if (se->row0 != PD_NONE && c->lset == 0)
				__builtin_prefetch(m->agg.vals + (size_t)se->row0 * m->agg.nvalues);
			else if (c->lset != 0) /* a labelled sample's row is found by its hash */
				pd_hidx_prefetch(&m->agg.idx, pd_agg_hash(c->hint, c->lset));
		}
	}
	return 0;
}

static int merger_add(struct pd_merger *m, const struct pd_profile *p, bool partial, struct pd_err *err)
{
	int rc = merger_begin(m, p, err);
	for (size_t si = 0; !rc && si < p->nsamples; si++)
		rc = merger_sample(m, p, &p->samples[si], partial, err);
	if (!rc)
		rc = pf_drain(m, err);
	m->pf_count = 0;
	return rc;
}

static int stream_header(void *ctx, const struct pd_profile *p, struct pd_err *err)
{
	return merger_begin(ctx, p, err);
}

static int stream_sample(void *ctx, const struct pd_profile *p, const struct pd_sample *s, struct pd_err *err)
{
	return merger_sample(ctx, p, s, false, err);
}

int pd_merger_add_encoded(struct pd_merger *m, const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
			  struct pd_err *err)
{
	struct pd_profile *p = NULL;
	int rc = pd_pprof_decode_stream(data, len, lim, stream_header, stream_sample, m, &p, err);
	if (!rc)
		rc = pf_drain(m, err);
	m->pf_count = 0;
	pd_profile_free(p);
	return rc;
}

/* ---- finish: materialise only what surviving rows use ------------------------ */

struct outb {
	struct pd_merger *m;
	struct pd_profile *p;
	uint32_t *sremap, *mremap, *fremap, *lremap;
	size_t ns, nm, nf, nl;
};

static uint32_t out_str(struct outb *o, uint32_t s)
{
	if (o->sremap[s] == PD_NONE) {
		o->sremap[s] = (uint32_t)o->ns;
		o->p->strings[o->ns++] = o->m->strs.v[s];
	}
	return o->sremap[s];
}

static uint32_t out_mapping(struct outb *o, uint32_t mi)
{
	if (o->mremap[mi] == PD_NONE) {
		struct pd_mapping *d = &o->p->mappings[o->nm];
		*d = o->m->maps.v[mi];
		d->id = o->nm + 1;
		d->filename = out_str(o, d->filename);
		d->build_id = out_str(o, d->build_id);
		o->mremap[mi] = (uint32_t)o->nm++;
	}
	return o->mremap[mi];
}

static uint32_t out_function(struct outb *o, uint32_t fi)
{
	if (o->fremap[fi] == PD_NONE) {
		struct pd_function *d = &o->p->functions[o->nf];
		const struct pd_function *s = &o->m->funcs.v[fi];
		d->id = o->nf + 1;
		d->name = out_str(o, s->name);
		d->system_name = out_str(o, s->system_name);
		d->filename = out_str(o, s->filename);
		d->start_line = s->start_line;
		o->fremap[fi] = (uint32_t)o->nf++;
	}
	return o->fremap[fi];
}

static int out_location(struct outb *o, uint32_t li, uint32_t *res)
{
	if (o->lremap[li] == PD_NONE) {
		const struct mloc *s = &o->m->locs.v[li];
		struct pd_location *d = &o->p->locations[o->nl];
		d->id = o->nl + 1;
		d->address = s->address;
		d->is_folded = s->is_folded;
		d->mapping = s->mapping == PD_NONE ? PD_NONE : out_mapping(o, s->mapping);
		d->nlines = s->nlines;
		d->lines = NULL;
		if (s->nlines) {
			d->lines = pd_arena_alloc(o->p->arena, s->nlines * sizeof *d->lines);
			if (!d->lines)
				return PD_ENOMEM;
			for (uint32_t i = 0; i < s->nlines; i++) {
				const struct pd_line *ln = &o->m->lines.v[s->lines + i];
				d->lines[i].function = out_function(o, ln->function);
				d->lines[i].line = ln->line;
				d->lines[i].column = ln->column;
			}
		}
		o->lremap[li] = (uint32_t)o->nl++;
	}
	*res = o->lremap[li];
	return 0;
}

int pd_merger_finish(struct pd_merger *m, struct pd_profile **out, struct pd_err *err)
{
	*out = NULL;
	if (m->nprofiles == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	int rc = PD_ENOMEM;
	struct outb o = {m, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0};
	struct pd_profile *p = calloc(1, sizeof *p);
	if (!p)
		goto out;
	o.p = p;
	size_t nrows = 0;
	for (size_t r = 0; r < m->agg.n; r++)
		nrows += m->partial || !pd_agg_row_zero(&m->agg, r);
	p->arena = pd_arena_new(1 << 20);
	o.sremap = malloc(m->strs.n * sizeof *o.sremap);
	o.mremap = malloc((m->maps.n + 1) * sizeof *o.mremap);
	o.fremap = malloc((m->funcs.n + 1) * sizeof *o.fremap);
	o.lremap = malloc((m->locs.n + 1) * sizeof *o.lremap);
	if (!p->arena || !o.sremap || !o.mremap || !o.fremap || !o.lremap)
		goto out;
	memset(o.sremap, 0xff, m->strs.n * sizeof *o.sremap);
	memset(o.mremap, 0xff, (m->maps.n + 1) * sizeof *o.mremap);
	memset(o.fremap, 0xff, (m->funcs.n + 1) * sizeof *o.fremap);
	memset(o.lremap, 0xff, (m->locs.n + 1) * sizeof *o.lremap);
	p->strings = pd_arena_alloc(p->arena, m->strs.n * sizeof *p->strings);
	p->mappings = pd_arena_alloc(p->arena, (m->maps.n + 1) * sizeof *p->mappings);
	p->functions = pd_arena_alloc(p->arena, (m->funcs.n + 1) * sizeof *p->functions);
	p->locations = pd_arena_alloc(p->arena, (m->locs.n + 1) * sizeof *p->locations);
	p->samples = pd_arena_alloc(p->arena, (nrows + 1) * sizeof *p->samples);
	p->sample_types = pd_arena_alloc(p->arena, (m->stypes.n + 1) * sizeof *p->sample_types);
	p->comments = pd_arena_alloc(p->arena, (m->comments.n + 1) * sizeof *p->comments);
	if (!p->strings || !p->mappings || !p->functions || !p->locations || !p->samples || !p->sample_types ||
	    !p->comments)
		goto out;

	out_str(&o, 0);
	p->nsample_types = (uint32_t)m->stypes.n;
	for (size_t i = 0; i < m->stypes.n; i++) {
		p->sample_types[i].type = out_str(&o, m->stypes.v[i].type);
		p->sample_types[i].unit = out_str(&o, m->stypes.v[i].unit);
	}
	if (m->first_mapping != PD_NONE)
		out_mapping(&o, m->first_mapping);
	uint32_t nv = m->agg.nvalues;
	for (size_t r = 0; r < m->agg.n; r++) {
		if (!m->partial && pd_agg_row_zero(&m->agg, r))
			continue;
		struct pd_sample *s = &p->samples[p->nsamples++];
		struct stackent st = m->stacks.v[m->agg.rows[r].stack];
		struct span ls = m->lsets.v[m->agg.rows[r].labels];
		s->nlocs = st.n;
		s->nlabels = ls.n;
		s->locs = st.n ? pd_arena_alloc(p->arena, st.n * sizeof *s->locs) : NULL;
		s->values = nv ? pd_arena_dup(p->arena, pd_agg_values(&m->agg, r), nv * sizeof *s->values) : NULL;
		s->labels = ls.n ? pd_arena_alloc(p->arena, ls.n * sizeof *s->labels) : NULL;
		if ((st.n && !s->locs) || (nv && !s->values) || (ls.n && !s->labels))
			goto out;
		for (uint32_t i = 0; i < st.n; i++)
			if (out_location(&o, m->stack_pool.v[st.off + i], &s->locs[i]))
				goto out;
		for (uint32_t i = 0; i < ls.n; i++) {
			struct pd_label l = m->label_pool.v[ls.off + i];
			l.key = out_str(&o, l.key);
			l.str = l.str ? out_str(&o, l.str) : 0;
			l.num_unit = l.num_unit ? out_str(&o, l.num_unit) : 0;
			s->labels[i] = l;
		}
	}
	p->nmappings = (uint32_t)o.nm;
	p->nfunctions = (uint32_t)o.nf;
	p->nlocations = (uint32_t)o.nl;
	p->drop_frames = out_str(&o, m->drop_frames);
	p->keep_frames = out_str(&o, m->keep_frames);
	p->time_nanos = m->time_nanos;
	p->duration_nanos = m->duration_nanos;
	p->period_type.type = out_str(&o, m->ptype.type);
	p->period_type.unit = out_str(&o, m->ptype.unit);
	p->period = m->period;
	for (size_t i = 0; i < m->comments.n; i++)
		p->comments[p->ncomments++] = out_str(&o, m->comments.v[i]);
	p->default_sample_type = out_str(&o, m->default_sample_type);
	p->doc_url = out_str(&o, m->doc_url);
	p->nstrings = (uint32_t)o.ns;
	/* Strings point into the merger's arena: copy them into the profile's. */
	for (uint32_t i = 0; i < p->nstrings; i++) {
		if (p->strings[i].len) {
			char *c = pd_arena_dup(p->arena, p->strings[i].ptr, p->strings[i].len);
			if (!c)
				goto out;
			p->strings[i].ptr = c;
		}
	}
	*out = p;
	p = NULL;
	rc = 0;
out:
	free(o.sremap);
	free(o.mremap);
	free(o.fremap);
	free(o.lremap);
	pd_profile_free(p);
	if (rc)
		pd_errf(err, rc, "merge: out of memory");
	return rc;
}

int pd_pprof_merge(struct pd_profile *const *ps, size_t n, struct pd_profile **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_merger *m = pd_merger_new();
	if (!m)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = pd_merger_add(m, ps[i], err);
	if (!rc)
		rc = pd_merger_finish(m, out, err);
	pd_merger_free(m);
	return rc;
}

int pd_pprof_compact(const struct pd_profile *p, struct pd_profile **out, struct pd_err *err)
{
	struct pd_profile *const one[1] = {(struct pd_profile *)p};
	return pd_pprof_merge(one, 1, out, err);
}
