/*
 * sink.c — what a scrape turns into: result names, the delta step of the
 * cumulative types, and the in-process sink (a store, for `profd serve
 * --scrape`). The HTTP sink (queue + POST) lives in scraper.c's loop.
 */
#include "scrape.h"

#include <string.h>

static const char *const result_names[PD_SR_N] = {
	"none",     "ok",       "base",    "reset",    "unchanged", "empty",     "cpu_in_use", "connect",
	"timeout",  "network",  "http_4xx", "http_5xx", "not_pprof", "wrong_kind", "too_large", "internal",
};

const char *pd_scrape_result_name(int r) { return r >= 0 && r < PD_SR_N ? result_names[r] : "unknown"; }

bool pd_scrape_result_ok(int r)
{
	return r == PD_SR_OK || r == PD_SR_BASE || r == PD_SR_RESET || r == PD_SR_UNCHANGED || r == PD_SR_EMPTY;
}

bool pd_scrape_result_down(int r)
{
	return r == PD_SR_CONNECT || r == PD_SR_TIMEOUT || r == PD_SR_NETWORK || r == PD_SR_HTTP_5XX;
}

int pd_scrape_delta_step(const struct pd_profile *cur, const struct pd_profile *prev, int *result,
			 struct pd_profile **out, struct pd_err *err)
{
	*out = NULL;
	if (!prev) {
		*result = PD_SR_BASE;
		return 0;
	}
	if (pd_pprof_counter_reset(cur, prev)) {
		*result = PD_SR_RESET;
		return 0;
	}
	struct pd_err e2;
	int rc = pd_pprof_delta(cur, prev, out, &e2);
	if (rc == PD_EINCOMPAT) {
		/* other sample types: another binary answers now, so a restart */
		*result = PD_SR_RESET;
		return 0;
	}
	if (rc) {
		*result = PD_SR_INTERNAL;
		if (err)
			*err = e2;
		return rc;
	}
	if (!(*out)->nsamples) {
		pd_profile_free(*out);
		*out = NULL;
		*result = PD_SR_UNCHANGED;
		return 0;
	}
	*result = PD_SR_OK;
	return 0;
}

int pd_scrape_store_ingest(struct pd_store *st, const struct pd_scrape_item *it, struct pd_profile_meta *out,
			   struct pd_err *err)
{
	struct pd_ingest in = {
		.service = it->service,
		.type = it->type,
		.labels = it->labels,
		.nlabels = it->nlabels,
		.created_ns = it->created_ns,
		.min_created_ns = it->min_created_ns > 0 ? it->min_created_ns : 0,
	};
	struct pd_profile_meta m;
	memset(&m, 0, sizeof m);
	int rc = pd_store_ingest(st, &in, it->data, it->len, out ? out : &m, err);
	if (!out)
		pd_meta_clear(&m);
	return rc;
}
