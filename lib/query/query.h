/*
 * query.h — selecting and analysing profiles across services: selectors
 * (Prometheus / Parca / Pyroscope style), selection over a store, and the
 * fleet-wide analytics API v1 serves (docs/api.md "API v1").
 *
 * Selector grammar (one parser, fuzzed by tests/fuzz/fuzz_selector.c):
 *
 *   selector := [type] [ "{" [ matcher { "," matcher } [","] ] "}" ]
 *   type     := cpu | heap | allocs | block | mutex | goroutine | threadcreate | other
 *   matcher  := name op value
 *   name     := [A-Za-z_][A-Za-z0-9_.:/-]*  |  quoted string
 *   op       := "=" | "!=" | "=~" | "!~"
 *   value    := "..." | '...' (Go escapes: \\ \" \' \n \t \r \a \b \f \v
 *               \xHH \ooo \uHHHH \UHHHHHHHH; no NUL) | `...` (raw)
 *
 * White space is allowed between tokens. No type (`{...}`) = every type.
 * The name `service` matches the profile's service, `__name__` its type
 * ({__name__="cpu"} parses as cpu{}; not with a type before the braces, as
 * Prometheus); any other name matches
 * the profile label of that key, and a missing label reads as "" (as in
 * Prometheus: `pod!="x"` matches profiles without a pod label, `pod=~".+"`
 * requires one). Regexes are RE2 syntax, as Prometheus' (Go regexp), run
 * by PCRE2 (pd_regex_compile below) and matched against the whole value,
 * as Prometheus anchors them (`^(?s:re)$`): `.` matches a newline unless
 * (?-s); \d \w \s \b are ASCII; (?i) (?m) (?s) (?U), \pL, [[:alpha:]],
 * \Q..\E work. What PCRE2 accepts and RE2 does not (back-references,
 * look-around, atomic groups, possessive quantifiers, recursion, \C \K \G
 * \R \h ...) is refused: "unsupported in RE2/Prometheus selector syntax".
 * A match is bounded (PD_QUERY_RE_*_LIMIT); a regex that hits a bound
 * makes the query fail (pd_query_each: PD_EINVAL "... hit the match limit").
 * All matchers must hold (AND).
 *
 * Errors (PD_EINVAL, PD_ELIMIT for the caps) point at the byte offset
 * (0-based) of the offending token: `bad query "cpu{a=~"("}": at 7: regex
 * "(" does not compile: ...`.
 */
#ifndef PD_QUERY_H
#define PD_QUERY_H

#include "../store/store.h"
#include "../pprof/ptype.h"
#include "../pprof/report.h"

/* Caps. */
#define PD_QUERY_MAX_LEN      8192 /* bytes of one selector */
#define PD_QUERY_MAX_MATCHERS 64
#define PD_QUERY_MAX_REGEX    1024 /* bytes of one regex */
#define PD_QUERY_MAX_REPEAT   1000 /* {n,m} counts, as RE2 */
#define PD_QUERY_RE_MATCH_LIMIT   1000000 /* PCRE2 match limit (backtracking steps) of one match */
#define PD_QUERY_RE_DEPTH_LIMIT   100000  /* PCRE2 depth limit (nested backtracking points) */
#define PD_QUERY_RE_HEAP_LIMIT_KB 8192    /* PCRE2 heap limit of one match, KiB */

/*
 * A compiled RE2-syntax regex (PCRE2 underneath), fully anchored.
 * pd_regex_compile: 0, or PD_EINVAL with why = ' does not compile: <reason>'
 * or ': unsupported in RE2/Prometheus selector syntax: <what>' (to follow
 * 'regex "<re>"'), PD_ELIMIT over PD_QUERY_MAX_REGEX bytes, PD_ENOMEM.
 * pd_regex_match: 1 the whole of s[0..len) matches, 0 it does not (invalid
 * UTF-8 in s reads as U+FFFD per bad byte, as in Go), PD_ELIMIT a match
 * bound was hit (then and from then on: the regex is "limited"), PD_ENOMEM.
 * Safe to call from several threads at once. Caller frees with pd_regex_free.
 */
struct pd_regex;
int pd_regex_compile(const char *re, struct pd_regex **out, char *why, size_t nwhy) PD_WUR;
int pd_regex_match(const struct pd_regex *re, const char *s, size_t len);
bool pd_regex_limited(const struct pd_regex *re);
void pd_regex_free(struct pd_regex *re);

enum pd_match_op { PD_MATCH_EQ, PD_MATCH_NE, PD_MATCH_RE, PD_MATCH_NRE };

struct pd_matcher {
	char *name, *value; /* malloc'd, NUL-terminated (value may be "") */
	int op;             /* enum pd_match_op */
	bool has_re;        /* re compiled (op RE / NRE) */
	struct pd_regex *re; /* value, anchored (pd_regex_compile) */
};

struct pd_selector {
	char *type; /* malloc'd; NULL = every type */
	struct pd_matcher *m;
	size_t n;
};

/* Parse s into *out (zeroed on error). Caller frees with pd_selector_free. */
int pd_selector_parse(const char *s, struct pd_selector *out, struct pd_err *err) PD_WUR;
void pd_selector_free(struct pd_selector *sel);
/* Does the profile satisfy the selector (type and every matcher)? */
bool pd_selector_match(const struct pd_selector *sel, const struct pd_profile_meta *m);
/* Only the `service` matchers, for a service name (pre-filter). */
bool pd_selector_match_service(const struct pd_selector *sel, const char *service);
/* After matching: PD_EINVAL naming the regex if one of sel's regexes hit a
 * match bound (its matches then read as "no match"), else 0. */
int pd_selector_check(const struct pd_selector *sel, struct pd_err *err) PD_WUR;
/* The value of an exact `service="x"` matcher (non-empty), else NULL. */
const char *pd_selector_service(const struct pd_selector *sel);
/* Canonical text of the selector, e.g. `cpu{service="a",v=~"1\\..*"}`,
 * into buf (truncated to n); returns buf. */
const char *pd_selector_format(const struct pd_selector *sel, char *buf, size_t n);
/* The profile types a selector may name, in docs order; NULL-terminated. */
#define pd_query_types pd_ptype_names /* lib/pprof/ptype.h: the names, NULL-terminated */

/*
 * Every profile the selector matches, created in [from_ns, to_ns], of every
 * service the matchers allow (an exact service="x" matcher queries that
 * service only, else each of pd_store_services), in ascending creation time
 * (ties: service, then id). More than max matches (max 0 = no cap) is
 * PD_ELIMIT "more than <max> profiles match: over the limit of profiles per
 * query (<max>); narrow the selector or the time range", and nothing is
 * returned. *out (caller frees with pd_query_metas_free) is NULL when *n is 0.
 */
int pd_query_select(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, size_t max,
		    struct pd_profile_meta **out, size_t *n, struct pd_err *err) PD_WUR;
void pd_query_metas_free(struct pd_profile_meta *v, size_t n);
/* The same selection streamed: fn(ctx, m) per matching profile, service by
 * service (services sorted, each ascending in time); m is valid during the
 * call only. A non-zero return of fn stops and is returned (err untouched). */
int pd_query_each(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, pd_meta_fn fn,
		  void *ctx, struct pd_err *err) PD_WUR;
/* Deep copy of a meta's labels into dst (dst->labels owned by dst). */
int pd_meta_copy(struct pd_profile_meta *dst, const struct pd_profile_meta *src) PD_WUR;

/* ---- flame graph ------------------------------------------------------------------- */

#define PD_FLAME_DEFAULT_NODES 1000
#define PD_FLAME_MAX_NODES     100000
#define PD_FLAME_MAX_DEPTH     1024 /* frames below this depth are counted as the deepest kept frame's self */

/*
 * A flame graph of sample index si: a call tree from a synthetic "root"
 * (value = the profile's total of non-zero samples) down to the leaves,
 * frames named as pprof's top names them (function granularity, inlined
 * frames expanded). value = everything at or below the node, self = what
 * stops there: value = self + sum(children's values) for every node.
 *
 * At most max_nodes nodes (root included) are kept, chosen by value
 * (largest first, a child only after its parent, ties by first
 * appearance). Under each kept node, the children not kept are summed into
 * one node named "other" (other = true, no children), so every total is
 * preserved. Children are ordered by value (largest first), then name.
 */
struct pd_flame_node {
	struct pd_str name;  /* "root", a frame name, or "other" */
	int64_t value, self;
	uint32_t kids, nkids; /* children: f->kids[kids .. kids+nkids) */
	bool other;
};
struct pd_flame {
	struct pd_flame_node *v; /* v[0] = root */
	uint32_t *kids;
	size_t n;            /* nodes in v, "other" nodes included */
	size_t frames;       /* nodes of the full tree (root included) */
	bool truncated;      /* some nodes were folded into "other" */
	struct pd_arena *arena; /* owns everything */
};
int pd_flame_build(const struct pd_profile *p, uint32_t si, size_t max_nodes, struct pd_flame *out,
		   struct pd_err *err) PD_WUR;
void pd_flame_free(struct pd_flame *f);

/* ---- fleet top ---------------------------------------------------------------------- */

/* One service's merged profile, and the sample index to rank it by. */
struct pd_fleet_input {
	const char *service;
	const struct pd_profile *p;
	uint32_t si;
};

struct pd_fleet_cell {
	uint32_t service; /* index into the inputs */
	int64_t flat, cum;
};

struct pd_fleet_fn {
	struct pd_str name;
	int64_t flat, cum;           /* sums over the services */
	struct pd_fleet_cell *by;    /* per service where the function appears, ranked like the rows */
	uint32_t nby;
	int inlined;                 /* PD_TOP_*: pprof's (inline) marker of the inputs summed */
};

/*
 * pd_top_compute per service, then combined per function name: fleet flat
 * and cum are the sums over services (a function counts once per sample in
 * each service's cum, so the sums are what `go tool pprof -top` reports on
 * the services' profiles merged). Rows are every function, ranked as
 * `pprof -top` (by |flat|, then name, then |cum|) or, with by_cum, as
 * `pprof -top -cum`; each row's per-service cells are ranked the same way
 * (ties: input order). total = the sum of the services' totals;
 * totals[i] = service i's. The inputs' sample types are not checked here.
 */
struct pd_fleet_top {
	struct pd_fleet_fn *fns;
	size_t nfns;
	int64_t total;
	int64_t *totals;        /* per input */
	struct pd_arena *arena; /* owns everything, names included */
};
int pd_fleet_top(const struct pd_fleet_input *in, size_t n, bool by_cum, struct pd_fleet_top *out,
		 struct pd_err *err) PD_WUR;
void pd_fleet_top_free(struct pd_fleet_top *t);

/*
 * The same, one profile at a time (what pd_fleet_top and GET /api/1/top
 * use): ngroups groups (services; a cell's `service` is the group index);
 * pd_fleet_acc_add folds p's top table (sample index si) into its group with
 * a weight (1 = exact int64 sums; other weights, e.g. 1/snapshots for a
 * gauge source, are summed in double and every row, cell and total is
 * rounded once, half away from zero, at finish). p may be freed right
 * after. Memory: distinct functions and (function, group) cells.
 * pd_fleet_acc_finish can be called once; free the accumulator after it.
 */
struct pd_fleet_acc;
int pd_fleet_acc_new(size_t ngroups, struct pd_fleet_acc **out) PD_WUR;
int pd_fleet_acc_add(struct pd_fleet_acc *a, uint32_t group, const struct pd_profile *p, uint32_t si, double weight,
		     struct pd_err *err) PD_WUR;
int pd_fleet_acc_finish(struct pd_fleet_acc *a, bool by_cum, struct pd_fleet_top *out, struct pd_err *err) PD_WUR;
void pd_fleet_acc_free(struct pd_fleet_acc *a);

#endif
