/*
 * pdcurl.c — the table of pdcurl.h, filled by dlopen of libcurl.
 */
#define _GNU_SOURCE
#define PD_CURL_NO_MACROS
#include "pdcurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct pd_curl_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int loaded;

static void load(void)
{
	/* RTLD_GLOBAL: as if linked (libcurl's own dependencies, and anything
	 * else loaded later, see its symbols the usual way) */
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "profd: cannot load libcurl: %s (Debian: apt-get install libcurl4)\n", dlerror());
		exit(70);
	}
	const char *missing = NULL;
#define PD_CURL_LOAD(f)                                                                                                \
	if (!(*(void **)&api.f = dlsym(h, #f)) && !missing)                                                            \
		missing = #f;
	PD_CURL_FNS(PD_CURL_LOAD)
#undef PD_CURL_LOAD
	if (missing) {
		fprintf(stderr, "profd: libcurl.so.4 has no %s: it is older than the headers profd was built with\n",
			missing);
		exit(70);
	}
	loaded = 1;
}

const struct pd_curl_api *pd_curl(void)
{
	pthread_once(&once, load);
	return &api;
}

int pd_curl_loaded(void)
{
	return loaded;
}
