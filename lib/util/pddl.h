/*
 * pddl.h — shared libraries profd loads the first time it calls them.
 *
 * libcurl (pdcurl.h), libmicrohttpd (pdmhd.h), gnutls (pdgnutls.h), SQLite
 * (pdsqlite.h), zstd (pdzstd.h), libyaml (pdyaml.h) and PCRE2 (pdpcre2.h)
 * are not linked: with their own dependencies they are 34 libraries, which
 * cost every process ~8 ms of start and ~6.5 MB of RSS before main
 * (docs/benchmarks.md, fourth and fifth stops). Commands that need none of
 * them (`profd pprof ...`) paid it all, and those that need some paid for
 * the rest: a client command needs libcurl only, `profd store ...` SQLite
 * and zstd, a collector libmicrohttpd (and the gnutls it is built with),
 * SQLite and zstd, libyaml only with a config file, PCRE2 only for a
 * regex matcher. Each header puts the library's functions that
 * profd calls over a table of the real ones, with their real types
 * (__typeof__ of the prototypes), filled on the first call.
 *
 * The release archive bundles these libraries too (tools/dist.sh). A library
 * that cannot be loaded is a clear message and exit 70: nothing that needs
 * it can go on without it.
 */
#ifndef PD_PDDL_H
#define PD_PDDL_H

/* dlopen(soname) (RTLD_NOW | RTLD_LOCAL), else exit 70 naming the Debian
 * package. */
void *pd_dl_open(const char *soname, const char *package);
/* The symbol name of h (soname), else exit 70. */
void *pd_dl_sym(void *h, const char *soname, const char *name);

/* Declares `struct pd_NAME_api`, the table of the functions FNS lists (an
 * X-macro of names), each with its real type; `pd_NAME()`, the table,
 * loaded on the first call (thread-safe), never NULL; and
 * `pd_NAME_loaded()`, whether the library is loaded in this process (for
 * tests). */
#define PD_DL_FIELD(f) __typeof__(f) *f;
#define PD_DL_DECLARE(name, FNS)                                                                                       \
	struct pd_##name##_api {                                                                                        \
		FNS(PD_DL_FIELD)                                                                                        \
	};                                                                                                              \
	const struct pd_##name##_api *pd_##name(void);                                                                  \
	int pd_##name##_loaded(void);

/* Defines `const struct pd_NAME_api *pd_NAME(void)`, the table of the
 * functions FNS lists (an X-macro of names) loaded from SONAME on the
 * first call, and `int pd_NAME_loaded(void)` (pddl.c). */
#define PD_DL_LOAD1(f) *(void **)&pd_dl_tab_->f = pd_dl_sym(pd_dl_h_, pd_dl_so_, #f);
#define PD_DL_DEFINE(name, soname, package, FNS)                                                                       \
	static struct pd_##name##_api pd_##name##_tab;                                                                  \
	static pthread_once_t pd_##name##_once = PTHREAD_ONCE_INIT;                                                     \
	static _Atomic int pd_##name##_ok;                                                                              \
	static void pd_##name##_load(void)                                                                              \
	{                                                                                                               \
		struct pd_##name##_api *pd_dl_tab_ = &pd_##name##_tab;                                                  \
		const char *pd_dl_so_ = soname;                                                                         \
		void *pd_dl_h_ = pd_dl_open(soname, package);                                                           \
		FNS(PD_DL_LOAD1)                                                                                        \
		pd_##name##_ok = 1;                                                                                     \
	}                                                                                                               \
	const struct pd_##name##_api *pd_##name(void)                                                                   \
	{                                                                                                               \
		pthread_once(&pd_##name##_once, pd_##name##_load);                                                      \
		return &pd_##name##_tab;                                                                                \
	}                                                                                                               \
	int pd_##name##_loaded(void) { return pd_##name##_ok; }

#endif
