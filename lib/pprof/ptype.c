/*
 * ptype.c — the profile type table (ptype.h).
 */
#include "ptype.h"

#include <string.h>

const struct pd_ptype_info pd_ptypes[PD_PT_N] = {
    [PD_PT_CPU] = {"cpu", false, false, true},
    [PD_PT_HEAP] = {"heap", true, false, true},
    [PD_PT_ALLOCS] = {"allocs", false, true, true},
    [PD_PT_BLOCK] = {"block", false, true, true},
    [PD_PT_MUTEX] = {"mutex", false, true, true},
    [PD_PT_GOROUTINE] = {"goroutine", true, false, true},
    [PD_PT_THREADCREATE] = {"threadcreate", true, false, true},
    [PD_PT_OTHER] = {"other", false, false, false},
};

const char *const pd_ptype_names[PD_PT_N + 1] = {"cpu",       "heap",         "allocs", "block", "mutex",
                                                 "goroutine", "threadcreate", "other",  NULL};

int pd_ptype_find(const char *name)
{
	for (int i = 0; name && i < PD_PT_N; i++)
		if (!strcmp(name, pd_ptypes[i].name))
			return i;
	return -1;
}

const char *pd_ptype_name(int t)
{
	return t >= 0 && t < PD_PT_N ? pd_ptypes[t].name : "other";
}
