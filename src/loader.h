/*
 * loader.h — decode many pprof files in parallel and hand them over in
 * order: worker threads read + gunzip + decode, the caller consumes
 * profiles strictly in input order (merge output must not depend on thread
 * timing). At most 2 x workers profiles are in flight: memory stays bounded.
 */
#ifndef PD_LOADER_H
#define PD_LOADER_H

#include "../lib/pprof/pprof.h"

struct pd_loader;
/* workers = 0: one per online CPU (at most 8). */
struct pd_loader *pd_loader_start(char **files, int n, int workers);
/* Next profile in input order. Returns 0 and *p (caller frees), or the
 * decode error of that file (err filled, *p NULL; the loader goes on).
 * Returns 1 when all files have been handed out. */
int pd_loader_next(struct pd_loader *l, struct pd_profile **p, int *index, struct pd_err *err);
void pd_loader_stop(struct pd_loader *l);

#endif
