/*
 * pdgnutls.c — the table of pdgnutls.h, filled by dlopen of libgnutls.so.30 (pddl.h).
 */
#define PD_GNUTLS_NO_MACROS
#include "pdgnutls.h"
#include "pddl.h"

#include <pthread.h>

static struct pd_gnutls_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = pd_dl_open("libgnutls.so.30", "libgnutls30");
#define PD_GNUTLS_LOAD(f) *(void **)&api.f = pd_dl_sym(h, "libgnutls.so.30", #f);
	PD_GNUTLS_FNS(PD_GNUTLS_LOAD)
#undef PD_GNUTLS_LOAD
}

const struct pd_gnutls_api *pd_gnutls(void)
{
	pthread_once(&once, load);
	return &api;
}
