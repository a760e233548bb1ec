/*
 * flags.h — each command's flags declared once, in a table: name, short
 * form, argument, help. From the tables come getopt_long's option array
 * and short-option string (cli_flags_getopt), the "Options:" part of the
 * command's --help (cli_flags_help), hence the man pages (tools/man.sh
 * reads --help), the shell completion (it reads --help) and the flag
 * reference of docs/cli.md (`profd help --markdown`, checked against the
 * file by tests/e2e/test_cli.sh). A flag added to a table is parsed,
 * helped, completed and documented; one missing from it is none of these.
 *
 * A command lists one or more tables (its own, the shared ones of the
 * collector commands, the log flags) in a struct cli_doc, which also holds
 * the text before and after the options. Its getopt loop is the usual one:
 *
 *	struct cli_getopt g;
 *	if (cli_getopt_init(&g, &top_doc)) ...;
 *	while ((o = cli_getopt_next(&g, argc, argv)) != -1)
 *		switch (o) { case 'h': cli_flags_help(&top_doc); ... }
 */
#ifndef PD_FLAGS_H
#define PD_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/* A flag's properties. */
enum {
	CLI_F_HIDDEN = 1,  /* parsed, not listed (an old spelling another entry's help names) */
	CLI_F_LISTONLY = 2, /* listed, not parsed by getopt (serve's --scrape: argv is cut there) */
};

struct cli_flag {
	const char *name; /* the long form, without "--"; NULL ends a table */
	int sh;           /* the short form ('o'), or 0; -o returns sh */
	int id;           /* what --name returns: usually sh, or a long-only id (>= 0x100); one
	                     flag may set them apart (-n a count or a namespace, --namespace one) */
	const char *arg;  /* the argument's name in help ("FILE"), or NULL: no argument */
	const char *help; /* lines of help; '\n' breaks a line (no '\n' at its end) */
	unsigned f;       /* CLI_F_* */
};

#define CLI_FLAGS_MAX_TABLES 6

/* A command's help and flags. */
struct cli_doc {
	const char *name;  /* "top", "pprof merge": the page's name */
	const char *usage; /* "Usage: ..." and the description, ending with a blank line */
	const struct cli_flag *const tables[CLI_FLAGS_MAX_TABLES]; /* NULL-ended */
	const char *after; /* after the options (starting with a blank line), or NULL */
	int col;           /* the column of the help text (0: 26) */
	/* NULL: the tables' flags under one "Options:"; else the help in
	 * sections: sections[i] (NULL: none) printed before table i's flags,
	 * for commands whose options come under headings (scrape, capture) */
	const char *const *sections;
};

/* One parse of argv with a doc's flags. */
#define CLI_GETOPT_MAX 96
struct cli_getopt {
	struct option opts[CLI_GETOPT_MAX + 1];
	char shorts[2 * CLI_GETOPT_MAX + 2];
};

/* Build g from d's tables and ready getopt (optind 1, opterr 0, ':' first:
 * a missing value is ':', an unknown option '?'). -1 if the tables are
 * too many flags (a programming error, reported on stderr). */
int cli_getopt_init(struct cli_getopt *g, const struct cli_doc *d);
/* getopt_long over g; the flag's id, '?', ':' or -1 at the end. */
int cli_getopt_next(struct cli_getopt *g, int argc, char **argv);

/* The whole --help of d to f (cli_prog written for "profd "). */
void cli_flags_help(const struct cli_doc *d);
/* d's options as --help has them (under "Options:", or in d->sections) into f. */
void cli_flags_options(FILE *f, const struct cli_doc *d);
/* d as a Markdown section of docs/cli.md: heading, usage, a table of its
 * flags. */
void cli_flags_markdown(FILE *f, const struct cli_doc *d);
/* Every command's doc, for `profd help --markdown` (NULL-ended). */
extern const struct cli_doc *const cli_docs[];

#endif
