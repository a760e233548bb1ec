/*
 * dist_launcher.c — bin/profd of the release archive (tools/dist.sh): a
 * static program that runs the real binary (lib/profd) with the dynamic
 * loader and libraries shipped beside it (lib/), so the archive needs
 * nothing from the system it runs on but the kernel: not its libc, not
 * Debian's libraries, not a shell. Its own name is passed on (--argv0),
 * so bin/kubectl-profd, a link to it, is the kubectl plugin.
 */
#define _GNU_SOURCE
#include <errno.h>
/* the dynamic loader's name in lib/: the target's (tools/dist.sh passes it) */
#ifndef PD_LOADER
#define PD_LOADER "ld-linux-x86-64.so.2"
#endif
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The launcher's own path: /proc/self/exe, else argv[0] (a path, or found
 * in $PATH), for a root without /proc. */
static int self_path(const char *argv0, char *out, size_t n)
{
	ssize_t k = readlink("/proc/self/exe", out, n - 1);
	if (k > 0) {
		out[k] = 0;
		return 0;
	}
	char tmp[PATH_MAX];
	if (strchr(argv0, '/')) {
		if (!realpath(argv0, tmp))
			return -1;
	} else {
		const char *path = getenv("PATH");
		bool found = false;
		for (const char *p = path ? path : ""; *p && !found;) {
			size_t l = strcspn(p, ":");
			snprintf(tmp, sizeof tmp, "%.*s/%s", (int)l, p, argv0);
			char r[PATH_MAX];
			if (!access(tmp, X_OK) && realpath(tmp, r)) {
				snprintf(tmp, sizeof tmp, "%s", r);
				found = true;
			}
			p += l + (p[l] == ':');
		}
		if (!found)
			return -1;
	}
	snprintf(out, n, "%s", tmp);
	return 0;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];
	if (self_path(argv[0] ? argv[0] : "profd", self, sizeof self)) {
		fprintf(stderr, "profd: cannot find where this archive is (no /proc/self/exe, and %s is not a path)\n",
			argv[0] ? argv[0] : "argv[0]");
		return 1;
	}
	char *slash = strrchr(self, '/'); /* .../bin/profd -> ... */
	if (slash)
		*slash = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	char ld[PATH_MAX + 64], lib[PATH_MAX + 16], real[PATH_MAX + 16];
	snprintf(ld, sizeof ld, "%s/lib/%s", self, PD_LOADER);
	snprintf(lib, sizeof lib, "%s/lib", self);
	snprintf(real, sizeof real, "%s/lib/profd", self);
	char **av = calloc((size_t)argc + 7, sizeof *av);
	if (!av)
		return 1;
	int k = 0;
	av[k++] = ld;
	av[k++] = "--library-path";
	av[k++] = lib;
	av[k++] = "--argv0";
	av[k++] = argv[0] ? argv[0] : "profd";
	av[k++] = real;
	for (int i = 1; i < argc; i++)
		av[k++] = argv[i];
	av[k] = NULL;
	execv(ld, av);
	fprintf(stderr, "profd: cannot run %s: %s\n", ld, strerror(errno));
	return 1;
}
