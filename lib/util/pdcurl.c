/*
 * pdcurl.c — the table of pdcurl.h, filled by dlopen of libcurl (pddl.h).
 */
#define PD_CURL_NO_MACROS
#include "pdcurl.h"
#include "pddl.h"

#include <pthread.h>

static struct pd_curl_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int loaded;

static void load(void)
{
	void *h = pd_dl_open("libcurl.so.4", "libcurl4");
#define PD_CURL_LOAD(f) *(void **)&api.f = pd_dl_sym(h, "libcurl.so.4", #f);
	PD_CURL_FNS(PD_CURL_LOAD)
#undef PD_CURL_LOAD
	loaded = 1;
}

const struct pd_curl_api *pd_curl(void)
{
	pthread_once(&once, load);
	return &api;
}

int pd_curl_loaded(void) { return loaded; }
