/*
 * plan.c — query planning (contract in plan.h).
 */
#include "plan.h"
#include "normalize.h"

#include <string.h>

int pd_plan_parse_rollups(const char *s, bool *on, struct pd_err *err)
{
	if (!s || !strcmp(s, "true") || !strcmp(s, "1")) {
		*on = true;
		return 0;
	}
	if (!strcmp(s, "false") || !strcmp(s, "0")) {
		*on = false;
		return 0;
	}
	return pd_errf(err, PD_EINVAL, "bad \"rollups\" \"%.64s\": want true or false", s);
}

bool pd_plan_service_only(const struct pd_selector *sel)
{
	for (size_t i = 0; i < sel->n; i++)
		if (strcmp(sel->m[i].name, "service"))
			return false;
	return true;
}

bool pd_plan_rollup_selector(const struct pd_selector *sel)
{
	return sel->type && pd_plan_service_only(sel);
}

enum pd_plan_path pd_plan_path(const struct pd_plan_in *in)
{
	if (!in->rollups || !pd_plan_rollup_selector(in->sel) || in->finer)
		return PD_PLAN_SELECT;
	if (in->step_ns && in->step_ns < PD_ROLLUP_NS)
		return PD_PLAN_SELECT;
	if (in->normalize && pd_norm_type_gauge(in->sel->type))
		return PD_PLAN_SELECT;
	return PD_PLAN_RANGE;
}

int pd_plan_over(const struct pd_plan_budget *b, struct pd_err *err)
{
	return pd_errf(err, PD_ELIMIT,
		       "more than %zu profiles to merge outside hourly rollups: over the limit of profiles per query "
		       "(--max-merge-profiles); narrow the selector or the time range",
		       b->max);
}

int pd_plan_charge(struct pd_plan_budget *b, size_t raw, struct pd_err *err)
{
	b->raw += raw;
	return b->max && b->raw > b->max ? pd_plan_over(b, err) : 0;
}
