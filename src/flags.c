/*
 * flags.c — getopt tables, --help options and Markdown from the flag
 * tables (contract in flags.h).
 */
#define _GNU_SOURCE /* open_memstream */
#include "flags.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_getopt_init(struct cli_getopt *g, const struct cli_doc *d)
{
	size_t n = 0, s = 0;
	memset(g, 0, sizeof *g);
	g->shorts[s++] = ':';
	for (size_t t = 0; t < CLI_FLAGS_MAX_TABLES && d->tables[t]; t++)
		for (const struct cli_flag *f = d->tables[t]; f->name; f++) {
			if (f->f & CLI_F_LISTONLY)
				continue;
			if (n == CLI_GETOPT_MAX) {
				fprintf(stderr, "%s %s: more than %d flags\n", cli_prog, d->name, CLI_GETOPT_MAX);
				return -1;
			}
			g->opts[n++] = (struct option){f->name, f->arg ? required_argument : no_argument, NULL, f->id};
			if (f->sh && !strchr(g->shorts + 1, f->sh)) {
				g->shorts[s++] = (char)f->sh;
				if (f->arg)
					g->shorts[s++] = ':';
			}
		}
	optind = 1;
	opterr = 0;
	return 0;
}

int cli_getopt_next(struct cli_getopt *g, int argc, char **argv)
{
	return getopt_long(argc, argv, g->shorts, g->opts, NULL);
}

/* "  -o, --output FORMAT" */
static int flag_text(const struct cli_flag *f, char *out, size_t n)
{
	if (f->sh)
		return snprintf(out, n, "  -%c, --%s%s%s", f->sh, f->name, f->arg ? " " : "", f->arg ? f->arg : "");
	return snprintf(out, n, "      --%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
}

/* Table t of d as --help lays out flags. */
static void table_out(FILE *f, const struct cli_doc *d, const struct cli_flag *t)
{
	int col = d->col ? d->col : 26;
	for (const struct cli_flag *fl = t; fl->name; fl++) {
		if (fl->f & CLI_F_HIDDEN)
			continue;
		char ft[128];
		int w = flag_text(fl, ft, sizeof ft);
		fputs(ft, f);
		if (w >= col) {
			fputc('\n', f);
			w = 0;
		}
		const char *h = fl->help ? fl->help : "";
		for (bool first = true; first || *h; first = false) {
			const char *e = strchr(h, '\n');
			size_t len = e ? (size_t)(e - h) : strlen(h);
			fprintf(f, "%*s%.*s\n", (first ? col - w : col), "", (int)len, h);
			h += len + (e != NULL);
		}
	}
}

void cli_flags_options(FILE *f, const struct cli_doc *d)
{
	if (!d->sections)
		fputs("Options:\n", f);
	for (size_t t = 0; t < CLI_FLAGS_MAX_TABLES && d->tables[t]; t++) {
		if (d->sections && d->sections[t])
			fputs(d->sections[t], f);
		table_out(f, d, d->tables[t]);
	}
}

void cli_flags_help(const struct cli_doc *d)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f) {
		cli_help(d->usage);
		return;
	}
	fputs(d->usage, f);
	cli_flags_options(f, d);
	if (d->after)
		fputs(d->after, f);
	fclose(f);
	cli_help(buf);
	free(buf);
}

/* s with | escaped and newlines as spaces (one table cell) */
static void md_cell(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\n') {
			fputc(' ', f);
			while (s[1] == ' ')
				s++;
		} else if (*s == '|') {
			fputs("\\|", f);
		} else {
			fputc(*s, f);
		}
	}
}

void cli_flags_markdown(FILE *f, const struct cli_doc *d)
{
	fprintf(f, "### profd %s\n\n```\n", d->name);
	/* the usage lines: up to the first blank line */
	const char *u = d->usage, *e = strstr(u, "\n\n");
	fprintf(f, "%.*s\n```\n\n", (int)(e ? (size_t)(e - u) : strlen(u)), u);
	fputs("| flag | argument | what it does |\n|---|---|---|\n", f);
	for (size_t t = 0; t < CLI_FLAGS_MAX_TABLES && d->tables[t]; t++)
		for (const struct cli_flag *fl = d->tables[t]; fl->name; fl++) {
			if (fl->f & CLI_F_HIDDEN)
				continue;
			if (fl->sh)
				fprintf(f, "| `-%c`, `--%s` | ", fl->sh, fl->name);
			else
				fprintf(f, "| `--%s` | ", fl->name);
			if (fl->arg)
				fprintf(f, "`%s`", fl->arg);
			fputs(" | ", f);
			md_cell(f, fl->help);
			fputs(" |\n", f);
		}
	fputc('\n', f);
}
