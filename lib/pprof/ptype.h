/*
 * ptype.h — the profile types profd knows (Go's net/http/pprof profiles and
 * "other"), in one table every module reads: the API's type names, the
 * selectors', the store's, the metrics', the scraper's, the client's, and
 * how each is aggregated (normalize.h).
 */
#ifndef PD_PPROF_PTYPE_H
#define PD_PPROF_PTYPE_H

#include <stdbool.h>

enum pd_ptype {
	PD_PT_CPU,
	PD_PT_HEAP,
	PD_PT_ALLOCS,
	PD_PT_BLOCK,
	PD_PT_MUTEX,
	PD_PT_GOROUTINE,
	PD_PT_THREADCREATE,
	PD_PT_OTHER, /* not one of Go's: summed, never scraped */
	PD_PT_N
};

struct pd_ptype_info {
	const char *name;
	bool gauge;      /* a snapshot of a state (heap in use, goroutines, threads): averaged, never summed */
	bool cumulative; /* counters since the process started (allocs, block, mutex): deltas between snapshots */
	bool scraped;    /* a net/http/pprof endpoint of the same name (/debug/pprof/<name>) */
};
extern const struct pd_ptype_info pd_ptypes[PD_PT_N];
/* The names in table order, NULL-terminated. */
extern const char *const pd_ptype_names[PD_PT_N + 1];
/* The type named name (exactly), or -1. */
int pd_ptype_find(const char *name);
/* The name of t ("other" for an unknown one). */
const char *pd_ptype_name(int t);

#endif
