/*
 * pdmhd.c — the table of pdmhd.h, filled by dlopen of libmicrohttpd.so.12 (pddl.h).
 */
#define PD_MHD_NO_MACROS
#include "pdmhd.h"
#include "pddl.h"

#include <pthread.h>

static struct pd_mhd_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = pd_dl_open("libmicrohttpd.so.12", "libmicrohttpd12");
#define PD_MHD_LOAD(f) *(void **)&api.f = pd_dl_sym(h, "libmicrohttpd.so.12", #f);
	PD_MHD_FNS(PD_MHD_LOAD)
#undef PD_MHD_LOAD
}

const struct pd_mhd_api *pd_mhd(void)
{
	pthread_once(&once, load);
	return &api;
}
