/*
 * pddl.h — shared libraries profd loads the first time it calls them.
 *
 * libcurl (pdcurl.h), libmicrohttpd (pdmhd.h) and gnutls (pdgnutls.h) are
 * not linked: with their own dependencies they are ~35 libraries, which
 * cost every process ~7 ms of start and ~6 MB of RSS before main
 * (docs/benchmarks.md, fourth stop), paid also by commands that need none
 * of them (`profd pprof ...`, `profd store ...`, a collector without TLS
 * still needs libmicrohttpd, a client command libcurl). Each header puts the
 * library's functions that profd calls over a table of the real ones, with
 * their real types (__typeof__ of the prototypes), filled on the first call.
 *
 * The release archive bundles these libraries too (tools/dist.sh). A library
 * that cannot be loaded is a clear message and exit 70: nothing that needs
 * it can go on without it.
 */
#ifndef PD_PDDL_H
#define PD_PDDL_H

/* dlopen(soname) (RTLD_NOW | RTLD_GLOBAL, as if linked), else exit 70
 * naming the Debian package. */
void *pd_dl_open(const char *soname, const char *package);
/* The symbol name of h (soname), else exit 70. */
void *pd_dl_sym(void *h, const char *soname, const char *name);

#endif
