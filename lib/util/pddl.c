/*
 * pddl.c — dlopen with profd's messages, and the tables of pdcurl.h,
 * pdmhd.h, pdgnutls.h, pdsqlite.h, pdzstd.h, pdyaml.h and pdpcre2.h (pddl.h).
 */
#define _GNU_SOURCE
#define PD_CURL_NO_MACROS
#define PD_MHD_NO_MACROS
#define PD_GNUTLS_NO_MACROS
#define PD_SQLITE_NO_MACROS
#define PD_ZSTD_NO_MACROS
#define PD_YAML_NO_MACROS
#define PD_PCRE2_NO_MACROS
#include "pddl.h"
#include "pdcurl.h"
#include "pdgnutls.h"
#include "pdmhd.h"
#include "pdpcre2.h"
#include "pdsqlite.h"
#include "pdyaml.h"
#include "pdzstd.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void *pd_dl_open(const char *soname, const char *package)
{
	/* RTLD_LOCAL: its symbols are found through the handle, and its own
	 * dependencies through its DT_NEEDED. (RTLD_GLOBAL also grows the
	 * loader's global scope, a malloc LeakSanitizer cannot see the owner
	 * of when profd is started by an explicit ld.so, as the release
	 * archive's launcher does: a false leak report, measured.) */
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "profd: cannot load %s: %s (Debian: apt-get install %s)\n", soname, dlerror(), package);
		exit(70);
	}
	return h;
}

void *pd_dl_sym(void *h, const char *soname, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "profd: %s has no %s: it is older than the headers profd was built with\n", soname, name);
		exit(70);
	}
	return p;
}

PD_DL_DEFINE(curl, "libcurl.so.4", "libcurl4", PD_CURL_FNS)
PD_DL_DEFINE(mhd, "libmicrohttpd.so.12", "libmicrohttpd12", PD_MHD_FNS)
PD_DL_DEFINE(gnutls, "libgnutls.so.30", "libgnutls30", PD_GNUTLS_FNS)
PD_DL_DEFINE(sqlite, "libsqlite3.so.0", "libsqlite3-0", PD_SQLITE_FNS)
PD_DL_DEFINE(zstd, "libzstd.so.1", "libzstd1", PD_ZSTD_FNS)
PD_DL_DEFINE(yaml, "libyaml-0.so.2", "libyaml-0-2", PD_YAML_FNS)
PD_DL_DEFINE(pcre2, "libpcre2-8.so.0", "libpcre2-8-0", PD_PCRE2_FNS)
