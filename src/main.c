/*
 * main.c — the profd binary: dispatches to one file per subcommand.
 * The command table below is the single source of `profd --help`.
 */
#include "cli.h"
#include "version.h"

#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("profd %s\n", PD_VERSION);
	return EXIT_OK;
}

static const struct pd_cmd commands[] = {
	{"serve", cmd_serve, "run the collector: store profiles, serve profefe's API v0"},
	{"scrape", cmd_scrape, "pull profiles from Go pprof endpoints into a collector"},
	{"capture", cmd_capture, "profiles from Kubernetes pods, now, through the API server"},
	{"get", cmd_get, "list what a collector has: services, profiles, types"},
	{"merge", cmd_merge, "merge a collector's profiles into one pprof file (or print the URL)"},
	{"load", cmd_load, "upload local pprof files to a collector (type inferred)"},
	{"top", cmd_top, "the hottest functions of a service or of the whole fleet"},
	{"diff", cmd_diff, "what changed between two selections (e.g. two versions), per function"},
	{"regressions", cmd_regressions, "which functions got costlier after each rollout, per service and fleet"},
	{"pprof", cmd_pprof, "local tools on pprof files: merge, top, folded, info, convert"},
	{"store", cmd_store, "a data directory, offline: check (verify every day file)"},
	{"version", cmd_version, "print the version"},
};

const char *cli_prog = "profd";

static void usage(FILE *f)
{
	fprintf(f, "profd — continuous profiling for Go services\n\n"
		   "Usage: %s <command> [options]\n\nCommands:\n", cli_prog);
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nRun '%s <command> --help' for the options of a command.\n"
		   "Installed as kubectl-profd (make install links it), the same binary is the\n"
		   "kubectl plugin `kubectl profd <command>`.\n"
		   "Exit codes: 0 success, 1 bad input or failed operation, 2 usage error.\n", cli_prog);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void cli_cmd_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s %s: ", cli_prog, cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s %s: ", cli_prog, cmd);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\nRun '%s %s --help' for usage.\n", cli_prog, cmd);
	va_end(ap);
	return EXIT_USAGE;
}

void cli_help(const char *text)
{
	/* "profd " as a word (not in kubectl-profd, $PROFD_..., profd-data) */
	size_t plen = strlen(cli_prog);
	bool plain = plen == 5;
	for (const char *p = text; *p;) {
		const char *q = plain ? NULL : strstr(p, "profd ");
		while (q && q > text &&
		       (isalnum((unsigned char)q[-1]) || strchr("-_/.$", q[-1]) ||
			(q - text >= 8 && !strncmp(q - 8, "kubectl ", 8))))
			q = strstr(q + 1, "profd ");
		if (!q) {
			fputs(p, stdout);
			break;
		}
		fwrite(p, 1, (size_t)(q - p), stdout);
		fputs(cli_prog, stdout);
		p = q + 5;
	}
}

long cli_parse_count(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return -1;
	return v;
}

int cli_parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned long long mul = 1;
	if (!strcmp(end, "") || !strcmp(end, "B"))
		mul = 1;
	else if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "k"))
		mul = 1ULL << 10;
	else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
		mul = 1ULL << 20;
	else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
		mul = 1ULL << 30;
	else
		return -1;
	if (v > SIZE_MAX / mul)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

int main(int argc, char **argv)
{
	/* The tools allocate and free one profile-sized buffer per input file:
	 * keep freed memory for reuse instead of returning it to the kernel and
	 * faulting it in again for the next file (measured: ~10% of a merge). */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	/* kubectl runs a plugin as kubectl-NAME with the user's arguments after
	 * the plugin name, verbatim: the same commands, a different name. */
	const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
	base = base ? base + 1 : argv[0] ? argv[0] : "";
	if (!strcmp(base, "kubectl-profd"))
		cli_prog = "kubectl profd";
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *c = argv[1];
	if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(c, "--version") || !strcmp(c, "-v"))
		return cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		if (!strcmp(c, commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n\n", cli_prog, c);
	usage(stderr);
	return EXIT_USAGE;
}
