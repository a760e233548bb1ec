/*
 * pddl.c — dlopen with profd's messages (pddl.h).
 */
#define _GNU_SOURCE
#include "pddl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *pd_dl_open(const char *soname, const char *package)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
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
