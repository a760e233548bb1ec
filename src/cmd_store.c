/*
 * cmd_store.c — `profd store check`: verify a data directory offline;
 * `backup` and `restore` (lib/store/backup.c)
 * (lib/store/check.c does the work): one line per damaged thing, a
 * summary, exit 1 naming the damaged files, 0 when everything is clean.
 */
#include "cli.h"
#include "flags.h"
#include "../lib/store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* what every subcommand's options begin and end with */
static const struct cli_flag store_flags_dir[] = {
	{"data-dir", 0, 'd', "DIR", "the data directory (default ./profd-data)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag store_flags_help[] = {
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag store_check_flags[] = {
	{"quiet", 'q', 'q', NULL, "only the damaged things and the summary's verdict", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag store_backup_flags[] = {
	{"force", 0, 'f', NULL, NULL, CLI_F_HIDDEN}, /* refused: restore's */
	{"quiet", 'q', 'q', NULL, "no line per file", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag store_restore_flags[] = {
	{"force", 0, 'f', NULL, "replace the days the directory has", 0},
	{"quiet", 'q', 'q', NULL, "no line per file", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};

const struct cli_doc store_check_doc = {
	"store check",
	"Usage: profd store check [--data-dir DIR]\n"
	"\n"
	"Verify every day file of a collector's data directory: SQLite's\n"
	"integrity_check, the checksum of every stored blob (profile headers and\n"
	"sample blocks, rollup headers, blocks and function tables, symbol\n"
	"packs), every header, block, table and pack decoded, and every profile's\n"
	"time the one its id holds (else it cannot be found by its id). Prints one\n"
	"line per damaged thing (\"FILE: what\"), then a summary. Files are\n"
	"opened read-only; run it with the collector stopped for a consistent\n"
	"answer.\n"
	"\n"
	"A damaged day file is what the collector quarantines (skips, and says\n"
	"\"partial\" in its answers): move it away (or restore it from a backup)\n"
	"and the collector uses the day again.\n"
	"\n",
	{store_flags_dir, store_check_flags, store_flags_help},
	"\n"
	"Examples:\n"
	"  profd store check --data-dir /var/lib/profd\n"
	"\n"
	"Exit codes: 0 every file clean, 1 damage found (the files are named) or\n"
	"the directory unreadable, 2 usage error.\n",
	22,
    NULL,
};

static void report(void *ctx, const char *file, const char *what)
{
	(void)ctx;
	printf("%s: %s\n", file, what);
}

static int store_check(int argc, char **argv)
{
	const char *dir = "./profd-data";
	bool quiet = false;
	int c;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &store_check_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'q': quiet = true; break;
		case 'h': cli_flags_help(&store_check_doc); return EXIT_OK;
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

const struct cli_doc store_backup_doc = {
	"store backup",
	"Usage: profd store backup [--data-dir DIR] OUT\n"
	"\n"
	"Copy every day file of a data directory into OUT (a new or empty directory,\n"
	"made mode 700) with SQLite's online backup API: safe while the collector\n"
	"runs and writes (each day is copied as of one commit: an upload is in the\n"
	"backup whole or not at all; one acknowledged before the backup started is in\n"
	"it). Each copy is synced and renamed into place, then the backup is verified\n"
	"as `profd store check` verifies. OUT gets a BACKUP note saying what it is.\n"
	"\n",
	{store_flags_dir, store_backup_flags, store_flags_help},
	"\n"
	"Examples:\n"
	"  profd store backup --data-dir /var/lib/profd /backup/profd-$(date +%F)\n"
	"  kubectl exec deploy/profd -- profd store backup --data-dir /data /data/backup-1\n"
	"\n"
	"The ClickHouse store is backed up with ClickHouse's own tools: docs/scale-out.md.\n"
	"\n"
	"Exit codes: 0 backed up and verified, 1 a file could not be copied or the\n"
	"copy does not verify (named), 2 usage error (OUT not empty).\n",
	22,
    NULL,
};

const struct cli_doc store_restore_doc = {
	"store restore",
	"Usage: profd store restore [--data-dir DIR] [--force] BACKUP\n"
	"\n"
	"Put the day files of a backup (profd store backup) into a data directory\n"
	"(made if missing), after verifying the backup. A day the directory already\n"
	"has is not replaced unless --force (it would lose that day's profiles since\n"
	"the backup): move it away first, or restore into a new directory and point\n"
	"the collector at it. Stop the collector first (a directory a collector\n"
	"serves is refused, as is the backup itself as DIR).\n"
	"\n",
	{store_flags_dir, store_restore_flags, store_flags_help},
	"\n"
	"Exit codes: 0 restored, 1 the backup is damaged or a file could not be\n"
	"copied, 2 usage error (a day exists without --force, a collector serves\n"
	"DIR).\n",
	22,
    NULL,
};

static void copied(void *ctx, const char *file, size_t bytes)
{
	if (!*(bool *)ctx)
		printf("%s: %zu bytes\n", file, bytes);
}

static void report_quiet(void *ctx, const char *file, const char *what)
{
	(void)ctx;
	fprintf(stderr, "%s: %s\n", file, what);
}

/* backup (restore = false) or restore */
static int store_copy(int argc, char **argv, bool restore)
{
	const char *name = restore ? "store restore" : "store backup";
	const char *dir = "./profd-data";
	bool quiet = false, force = false;
	const struct cli_doc *doc = restore ? &store_restore_doc : &store_backup_doc;
	int c;
	struct cli_getopt g;
	if (cli_getopt_init(&g, doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'q': quiet = true; break;
		case 'f':
			if (!restore)
				return cli_usage_error(name, "--force is for restore");
			force = true;
			break;
		case 'h': cli_flags_help(doc); return EXIT_OK;
		default: return cli_bad_option(name, c, argv);
		}
	}
	if (optind != argc - 1)
		return cli_usage_error(name, optind < argc ? "one %s directory, got more" : "the %s directory is missing",
				       restore ? "BACKUP" : "OUT");
	const char *other = argv[optind];
	struct pd_err err;
	struct pd_store_copy sum;
	struct pd_store_check chk;
	if (restore) { /* a damaged backup is not put in place */
		if (pd_store_check_dir(other, report_quiet, NULL, &chk, &err)) {
			cli_cmd_error(name, "%s", err.msg);
			return EXIT_INPUT;
		}
		if (chk.damaged_files) {
			cli_cmd_error(name, "%s: %zu of its %zu day files are damaged (named above): nothing restored", other,
				      chk.damaged_files, chk.files);
			return EXIT_INPUT;
		}
	}
	int rc = restore ? pd_store_restore_dir(other, dir, force, copied, &quiet, &sum, &err)
			 : pd_store_backup_dir(dir, other, copied, &quiet, &sum, &err);
	if (rc) {
		cli_cmd_error(name, "%s", err.msg);
		return rc == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
	}
	if (!restore) { /* verified as check verifies */
		if (pd_store_check_dir(other, report_quiet, NULL, &chk, &err)) {
			cli_cmd_error(name, "%s", err.msg);
			return EXIT_INPUT;
		}
		if (chk.damaged_files) {
			cli_cmd_error(name, "%s: %zu day files of the copy do not verify (named above)", other, chk.damaged_files);
			return EXIT_INPUT;
		}
	}
	printf("%s %zu day files (%zu bytes, %zu profiles) %s %s%s\n", restore ? "restored" : "backed up", sum.files,
	       sum.bytes, chk.profiles, restore ? "into" : "to", restore ? dir : other, restore ? "" : ": verified");
	return EXIT_OK;
}

static int store_backup(int argc, char **argv) { return store_copy(argc, argv, false); }
static int store_restore(int argc, char **argv) { return store_copy(argc, argv, true); }

static const struct pd_cmd subcommands[] = {
	{"check", store_check, "verify every day file of a data directory (checksums, SQLite integrity)"},
	{"backup", store_backup, "copy a data directory's day files, consistent while the collector runs"},
	{"restore", store_restore, "put a backup's day files into a data directory"},
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
