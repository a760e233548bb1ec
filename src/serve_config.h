/*
 * serve_config.h — `profd serve --config FILE` (YAML: serve's flags without
 * "--", and scrape: in the scraper's YAML) and `--print-config`.
 */
#ifndef PD_SERVE_CONFIG_H
#define PD_SERVE_CONFIG_H

#include <getopt.h>
#include <stdbool.h>

#include "cli.h"

struct serve_cfg {
	char **argv; /* argv[0], the file's flags, then the command line's (without --config/--print-config) */
	int argc;
	bool print;       /* --print-config */
	const char *path; /* --config FILE, or NULL */
	struct pd_buf text;
	char *scrape; /* the file's scrape: section as the scraper's YAML (lines where they were), or NULL */
	size_t scrape_len;
	char **owned;
	size_t nowned;
};
/* opts: serve's getopt table, as cli_getopt_init builds it from serve_doc's
 * flag tables (flags.h): the file's keys are exactly those flags.
 * 0, or EXIT_USAGE / EXIT_INPUT after printing why (FILE:LINE:COL). */
int serve_config_expand(int argc, char **argv, const struct option *opts, struct serve_cfg *c);
/* The settings in force as a --config file, on stdout. */
void serve_config_print(const struct serve_cfg *c, const struct option *opts, int argc, char **argv);
void serve_config_free(struct serve_cfg *c);

#endif
