/*
 * report.h — views of a decoded profile: top table, folded stacks, totals.
 * Pure functions over struct pd_profile; printing is the caller's job.
 *
 * Frames follow pprof's function granularity: each Location expands to its
 * Lines (inlined frames), innermost first; a frame's name is its function
 * name (or the hex address when a location has no lines).
 */
#ifndef PD_REPORT_H
#define PD_REPORT_H

#include "pprof.h"

enum { PD_TOP_NOT_INLINED = 0, PD_TOP_INLINED = 1, PD_TOP_PARTIAL_INLINE = 2 };

struct pd_top_row {
	struct pd_str name;
	int64_t flat, cum;
	int inlined; /* PD_TOP_*: how the function was reached from its callers */
	bool called; /* has a non-inlined incoming edge (with inlined: the markers of a sum of
		      * profiles are the OR of their rows' in-edges, lib/query/top.c) */
	/* A frame without a function name ("[binary]", "<unknown>") is told
	 * apart, as pprof's graph does, by its binary's whole path and its
	 * function's start line: rows of one name may repeat. */
	bool anon;
	struct pd_str obj;
	int64_t sline;
};

struct pd_top {
	struct pd_top_row *rows; /* sorted */
	size_t n;
	int64_t total;           /* sum of the sample values */
	struct pd_arena *arena;  /* owns rows and synthesized names */
};

/*
 * What `go tool pprof` cuts from every sample before it shows a view: its
 * RemoveUninteresting, profile.Prune with the profile's drop_frames and
 * keep_frames (legacy C++/Java profiles, and protobuf profiles made from
 * them, carry the allocator's or the profiler's own frames there). A frame
 * whose function name (simplified: up to its first '(') matches drop_frames
 * as a whole, and not keep_frames, is cut with every frame below it (leafward)
 * from each sample that has a frame of its own above it; the innermost lines
 * of a location down to the matching one are cut from the location in every
 * sample. Without drop_frames (Go's own profiles) nothing is cut. A regex that
 * does not compile cuts nothing, as in pprof. Views walk a sample from its
 * root down to location pd_prune_leaf() and, in each location l, to line
 * pd_prune_line0(l) instead of 0. Caller frees with pd_prune_free.
 * With the frames, the names: what pprof's views change in a profile before
 * they show it are its functions' names, as its symbolizer's Demangle leaves
 * them (pd_func_name, which drop_frames is matched against), and the frames
 * drop_frames cuts (RemoveUninteresting).
 */
struct pd_prune {
	uint32_t *line0; /* per location: its innermost line kept */
	uint8_t *how;    /* per location: 0 kept, 1 lines cut (prune beneath), 2 matched whole */
	bool on;         /* drop_frames cuts something */
	struct pd_str *fname;     /* per function: the name pprof shows (pd_func_name) */
	struct pd_arena *farena; /* the names pd_func_name rewrote */
	bool own_farena;         /* farena is the prune's own, freed with it */
};
/* names: where the names pd_func_name rewrites are allocated, for a caller
 * whose result keeps them (a top's rows, a flame graph's nodes): they must
 * outlive pd_prune_free. NULL: the prune's own arena, freed with it. */
int pd_prune_init(const struct pd_profile *p, struct pd_prune *pr, struct pd_arena *names,
		  struct pd_err *err) PD_WUR;
/* Index in s->locs of the sample's leaf once pruned (0: nothing cut). */
uint32_t pd_prune_leaf(const struct pd_prune *pr, const struct pd_sample *s);
static inline uint32_t pd_prune_line0(const struct pd_prune *pr, uint32_t loc)
{
	return pr->on ? pr->line0[loc] : 0;
}
void pd_prune_free(struct pd_prune *pr);

/* Flat/cum per function for sample index si, as pprof's graph computes it
 * (a function counts once per sample in cum; a frame without function is
 * "[binary]" or "<unknown>"; inlined = every call edge into it was inlined;
 * frames cut by drop_frames as pd_prune says). Sorted like `pprof -top`
 * (by |flat|, then name, then |cum|) or, with by_cum, by |cum| then name. */
int pd_top_compute(const struct pd_profile *p, uint32_t si, bool by_cum, struct pd_top *out,
		   struct pd_err *err) PD_WUR;
/* pd_top_compute with flags: PD_TOP_BY_CUM sorts as by_cum does;
 * PD_TOP_BY_NAME makes one row per name, the frames without a function name
 * of all binaries and start lines together (for tables keyed by name: the
 * fleet's, rollups, diffs). */
enum { PD_TOP_BY_CUM = 1, PD_TOP_BY_NAME = 2 };
int pd_top_compute_opt(const struct pd_profile *p, uint32_t si, unsigned flags, struct pd_top *out,
		       struct pd_err *err) PD_WUR;
void pd_top_free(struct pd_top *t);
/* The total a pprof report's percentages are of (report.go's computeTotal):
 * the sum of |v| over the samples, or over those labelled pprof::base=true
 * (the base of a -diff_base profile) when theirs is positive. Not the sum
 * of the values: a delta or diff profile has negative ones. */
int64_t pd_report_total(const struct pd_profile *p, uint32_t si);

/* The name go tool pprof shows for function f, as its symbolizer's Demangle
 * (default mode) leaves it: the name, when set and not the system name;
 * else the system name, with each (...) and <...> removed when it looks like
 * demangled C++ ("::" or one of "<>[]", but not Java's ".<" or Go's "]).").
 * pprof also demangles mangled C++ and Rust names (_Z..., _R...): profd
 * shows those as they are. Rewritten names are allocated in *a (created on
 * first use); *rc is set on out of memory. */
struct pd_str pd_func_name(const struct pd_profile *p, uint32_t f, struct pd_arena **a, int *rc);

/* Name of frame j (0 = innermost line) of location l, its function's
 * pd_func_name (from pr, set up by pd_prune_init). Without one, pprof style
 * (top): "[basename of the binary]" or "<unknown>"; else (folded) its hex
 * address. Synthesized names live in a. */
struct pd_str pd_frame_name(const struct pd_profile *p, const struct pd_prune *pr, const struct pd_location *l,
			    uint32_t j, struct pd_arena *a, bool pprof_style);

/* Collapsed stacks ("root;...;leaf value\n"), aggregated and sorted,
 * appended to out, frames cut by drop_frames as pd_prune says. Samples with
 * value 0 are omitted. */
int pd_folded(const struct pd_profile *p, uint32_t si, struct pd_buf *out, struct pd_err *err) PD_WUR;

/* Format v of the given unit exactly as pprof's text reports do
 * (measurement.ScaledLabel with unit "minimum"): "1.20s", "512.50kB",
 * "10ms", "42", "0". */
const char *pd_fmt_value(char *buf, size_t n, int64_t v, struct pd_str unit);
/* The same, converted to the fixed unit to_unit (as a report prints all its
 * values in one unit); to_unit NULL = auto-scale each value. */
const char *pd_fmt_value_to(char *buf, size_t n, int64_t v, struct pd_str unit, const char *to_unit);
/* pprof's selectOutputUnit: the one unit a table of the first nrows rows of t
 * is printed in (from the smallest non-zero row value and the total). */
const char *pd_top_unit(const struct pd_top *t, size_t nrows, struct pd_str unit, char *buf, size_t n);
/* pprof's measurement.Percentage: "  100%", "12.50%", " 0.35%". */
const char *pd_fmt_percent(char *buf, size_t n, int64_t v, int64_t total);

/*
 * The table of `go tool pprof -top` for the first nrows rows of t (0 = all),
 * appended to out: "Showing N of M functions, accounting for X, P% of T
 * total", the column header and one line per function, as pprof prints
 * them (one unit for all values, sum%, " (inline)" markers). unit is the
 * sample type's unit. The Type/Time/Duration lines above it are the
 * caller's.
 */
int pd_top_text(const struct pd_top *t, size_t nrows, struct pd_str unit, struct pd_buf *out,
		struct pd_err *err) PD_WUR;

#endif
