/*
 * cmd_store.c — `profd store check`: verify a data directory offline
 * (lib/store/check.c does the work): one line per damaged thing, a
 * summary, exit 1 naming the damaged files, 0 when everything is clean.
 */
#include "cli.h"
#include "../lib/store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char check_help[] =
	"Usage: profd store check [--data-dir DIR]\n"
	"\n"
	"Verify every day file of a collector's data directory: SQLite's\n"
	"integrity_check, the checksum of every stored blob (profile headers and\n"
	"sample blocks, rollup headers, blocks and function tables), and every\n"
	"header, block and table decoded. Prints one line per damaged thing\n"
	"(\"FILE: what\"), then a summary. Files are opened read-only; run it\n"
	"with the collector stopped for a consistent answer.\n"
	"\n"
	"A damaged day file is what the collector quarantines (skips, and says\n"
	"\"partial\" in its answers): move it away (or restore it from a backup)\n"
	"and the collector uses the day again.\n"
	"\n"
	"Options:\n"
	"      --data-dir DIR  the data directory (default ./profd-data)\n"
	"  -q, --quiet         only the damaged things and the summary's verdict\n"
	"  -h, --help          this help\n"
	"\n"
	"Examples:\n"
	"  profd store check --data-dir /var/lib/profd\n"
	"\n"
	"Exit codes: 0 every file clean, 1 damage found (the files are named) or\n"
	"the directory unreadable, 2 usage error.\n";

static void report(void *ctx, const char *file, const char *what)
{
	(void)ctx;
	printf("%s: %s\n", file, what);
}

static int store_check(int argc, char **argv)
{
	static const struct option opts[] = {{"data-dir", required_argument, 0, 'd'},
					     {"quiet", no_argument, 0, 'q'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	const char *dir = "./profd-data";
	bool quiet = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":qh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'q': quiet = true; break;
		case 'h': cli_help(check_help); return EXIT_OK;
		default: return cli_bad_option("store check", c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("store check", "unexpected argument '%s'", argv[optind]);
	struct pd_store_check sum;
	struct pd_err err;
	if (pd_store_check_dir(dir, report, NULL, &sum, &err)) {
		cli_cmd_error("store check", "%s", err.msg);
		return EXIT_INPUT;
	}
	if (!quiet || sum.damaged_files)
		printf("%zu day files, %zu profiles, %zu rollups, %zu symbols checked (%zu blobs from before "
		       "checksums, decoded only): ",
		       sum.files, sum.profiles, sum.rollups, sum.symbols, sum.unchecked);
	if (!sum.damaged_files) {
		if (!quiet)
			printf("clean\n");
		return EXIT_OK;
	}
	printf("%zu damaged (%zu problems)\n", sum.damaged_files, sum.problems);
	return EXIT_INPUT;
}

static const struct pd_cmd subcommands[] = {
	{"check", store_check, "verify every day file of a data directory (checksums, SQLite integrity)"},
};

static void store_usage(FILE *f)
{
	fprintf(f, "Usage: %s store <command> [options]\n\nCommands:\n", cli_prog);
	for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\nRun '%s store <command> --help' for its options.\n", cli_prog);
}

int cmd_store(int argc, char **argv)
{
	if (argc < 2) {
		store_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		store_usage(stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "%s store: unknown command '%s'\n\n", cli_prog, argv[1]);
	store_usage(stderr);
	return EXIT_USAGE;
}
