/*
 * plan.h — query planning, decided once for every reader of a selection
 * (API v1's top, series and regressions; the CLI and the exporters through
 * them): which path answers it, and how many profiles it may merge from
 * their own sample blocks.
 *
 * Two paths:
 *   PD_PLAN_RANGE   per service, pd_store_merge_range / pd_store_fn_totals
 *                   over [from, to]: whole UTC hours from their hourly
 *                   rollups where current, the edges and stale hours from
 *                   the profiles. Possible when the selector names a type
 *                   and matches on the service only (a rollup sums every
 *                   profile of one service and type in its hour: it knows
 *                   no profile label), the answer is not split finer than
 *                   by service, a step (series) is at least an hour, and a
 *                   normalised answer does not average gauge snapshots
 *                   (heap, goroutine, threadcreate: a rollup sums them).
 *   PD_PLAN_SELECT  the profiles' metadata selected (pd_query_select), then
 *                   merged or normalised per source.
 * rollups=false (the request's parameter) forces PD_PLAN_SELECT. A caller
 * may still fall back from RANGE to SELECT on what the data says (e.g.
 * normalised cumulative snapshots: pd_norm_count_sources).
 *
 * The budget: --max-merge-profiles bounds the profiles one query merges
 * from their own blocks; on the range path that is the profiles outside
 * rolled-up hours (pd_merge_info.raw), summed over the query's services
 * and steps. One message for every path that runs over it.
 */
#ifndef PD_PLAN_H
#define PD_PLAN_H

#include "query.h"

enum pd_plan_path { PD_PLAN_SELECT, PD_PLAN_RANGE };

struct pd_plan_in {
	const struct pd_selector *sel;
	bool rollups;    /* the caller allows them (the rollups parameter, default true) */
	bool normalize;  /* a normalised answer */
	int64_t step_ns; /* 0: one answer over the range; else the series' step */
	bool finer;      /* grouped finer than by service (labels, function,service is not finer) */
};

/* The parameter rollups=true|false|1|0 (NULL: true) into *on. */
int pd_plan_parse_rollups(const char *s, bool *on, struct pd_err *err);
/* A selector a rollup can answer: a type, matchers on the service only. */
bool pd_plan_rollup_selector(const struct pd_selector *sel);
/* Matchers on the service only (any type or none). */
bool pd_plan_service_only(const struct pd_selector *sel);
/* The path for in. */
enum pd_plan_path pd_plan_path(const struct pd_plan_in *in);

struct pd_plan_budget {
	size_t max; /* 0: no limit */
	size_t raw; /* merged from blocks so far */
};
/* Count raw more profiles merged from blocks: 0, or PD_ELIMIT with the
 * message once over the limit. */
int pd_plan_charge(struct pd_plan_budget *b, size_t raw, struct pd_err *err);
/* The over-the-limit error itself (a store's own PD_ELIMIT of max_raw). */
int pd_plan_over(const struct pd_plan_budget *b, struct pd_err *err);

#endif
