/*
 * cli.h — shared pieces of the profd command-line tools: the command table
 * entry type, exit codes and small helpers every subcommand uses.
 */
#ifndef PD_CLI_H
#define PD_CLI_H

#include "../lib/util/util.h"

/* Exit codes, documented in every --help. */
enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

struct pd_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

/* Print "profd: <msg>" to stderr. */
void cli_error(const char *fmt, ...) PD_PRINTF(1, 2);
/* Print a usage error and a hint to run --help; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) PD_PRINTF(2, 3);
/* Parse a non-negative integer option value; -1 on error. */
long cli_parse_count(const char *s);

int cmd_pprof(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_scrape(int argc, char **argv);

#endif
