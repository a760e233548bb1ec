/*
 * main.c — the profd binary: dispatches to one file per subcommand.
 * The command table below is the single source of `profd --help`.
 */
#include "cli.h"
#include "flags.h"
#include "version.h"
#include "../lib/http/params.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const struct cli_flag version_flags[] = {
	{"output", 'o', 'o', "FORMAT", "table (default) or json", 0},
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_doc version_doc = {
    "version",
    "Usage: profd version [-o json]\n\nThe version, the commit it was built from and when (UTC).\n\n",
    {version_flags},
    NULL,
    0,
    NULL,
};

static int cmd_version(int argc, char **argv)
{
	bool json = false;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &version_doc))
		return EXIT_USAGE;
	int o;
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&version_doc); return EXIT_OK;
		case 'o':
			if (strcmp(optarg, "json") && strcmp(optarg, "table"))
				return cli_usage_error("version", "-o: want table or json, got '%s'", optarg);
			json = !strcmp(optarg, "json");
			break;
		default: return cli_bad_option("version", o, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("version", "unexpected argument '%s' (only -o json)", argv[optind]);
	if (json)
		printf("{\"version\":\"%s\",\"commit\":\"%s\",\"build_time\":\"%s\"}\n", PD_VERSION, PD_COMMIT,
		       PD_BUILD_TIME);
	else
		printf("profd %s (commit %s, built %s)\n", PD_VERSION, *PD_COMMIT ? PD_COMMIT : "unknown",
		       *PD_BUILD_TIME ? PD_BUILD_TIME : "unknown");
	return EXIT_OK;
}

/* Every command's flags, for `profd help --markdown` (docs/cli.md's flag
 * reference; tests/e2e/test_cli.sh checks the file against it). */
const struct cli_doc *const cli_docs[] = {
	&serve_doc,
	&scrape_doc,
	&capture_doc,
	&get_doc,
	&merge_doc,
	&load_doc,
	&top_doc,
	&diff_doc,
	&regressions_doc,
	&pprof_merge_doc,
	&pprof_top_doc,
	&pprof_folded_doc,
	&pprof_info_doc,
	&pprof_convert_doc,
	&pprof_delta_doc,
	&store_check_doc,
	&store_backup_doc,
	&store_restore_doc,
	&version_doc,
	NULL,
};

static int help_markdown(void)
{
	for (size_t i = 0; cli_docs[i]; i++)
		cli_flags_markdown(stdout, cli_docs[i]);
	return EXIT_OK;
}

static int cmd_completion(int argc, char **argv);

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
	{"version", cmd_version, "print the version, commit and build time"},
	{"completion", cmd_completion, "shell completion: eval \"$(profd completion bash)\" (or zsh)"},
	{"help", NULL, "help about a command: profd help merge"},
};

/* Completion asks the binary itself: the commands from this table, each
 * command's flags from its --help (every --flag it prints), subcommands
 * (get, pprof, store) from their usage lines. One source: the help texts. */
static int cmd_completion(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "bash") && strcmp(argv[1], "zsh"))) {
		if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
			printf("Usage: %s completion bash|zsh\n\n"
			       "A completion script for the shell: commands, subcommands and each command's flags.\n"
			       "  bash: eval \"$(profd completion bash)\"   (or save it in\n"
			       "        /etc/bash_completion.d/profd)\n"
			       "  zsh:  eval \"$(profd completion zsh)\"\n",
			       cli_prog);
			return EXIT_OK;
		}
		return cli_usage_error("completion", "want bash or zsh");
	}
	if (!strcmp(argv[1], "zsh"))
		printf("autoload -U +X bashcompinit && bashcompinit\n");
	printf("_profd_complete() {\n"
	       "  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} bin=${COMP_WORDS[0]}\n"
	       "  [ \"$bin\" = kubectl ] && { bin=kubectl-profd; cmd=${COMP_WORDS[2]}; }\n"
	       "  local first=1; [ \"${COMP_WORDS[0]}\" = kubectl ] && first=2\n"
	       "  if [ \"$COMP_CWORD\" -le \"$first\" ]; then\n"
	       "    COMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		printf("%s%s", i ? " " : "", commands[i].name);
	printf("\" -- \"$cur\"))\n"
	       "    return\n"
	       "  fi\n"
	       "  local sub=\"\"\n"
	       "  case $cmd in get|pprof|store) [ \"$COMP_CWORD\" -gt $((first + 1)) ] && sub=${COMP_WORDS[first + 1]} ;; esac\n"
	       "  if [ -z \"$sub\" ] && [[ $cmd == get || $cmd == pprof || $cmd == store ]] && [[ $cur != -* ]]; then\n"
	       "    COMPREPLY=($(compgen -W \"$(\"$bin\" \"$cmd\" --help 2>/dev/null | sed -n 's/^  \\([a-z][a-z-]*\\)  .*/\\1/p')\" -- \"$cur\"))\n"
	       "    return\n"
	       "  fi\n"
	       "  COMPREPLY=($(compgen -W \"$(\"$bin\" $cmd $sub --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)\" -- \"$cur\"))\n"
	       "}\n"
	       "complete -o default -F _profd_complete profd kubectl-profd\n");
	return EXIT_OK;
}

const char *cli_prog = "profd";

static void usage(FILE *f)
{
	fprintf(f, "profd — continuous profiling for Go services\n\n"
		   "Usage: %s <command> [options]\n\nCommands:\n", cli_prog);
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
		fprintf(f, "  %-12s ", commands[i].name);
		cli_fhelp(f, commands[i].summary); /* "profd help merge" -> "kubectl profd help merge" */
		fputc('\n', f);
	}
	fprintf(f, "\nRun '%s <command> --help' for the options of a command.\n"
		   "Installed as kubectl-profd (make install links it), the same binary is the\n"
		   "kubectl plugin `kubectl profd <command>`.\n"
		   "Exit codes: 0 success, 1 bad input or failed operation, 2 usage error.\n", cli_prog);
}

void cli_log(const char *fmt, ...)
{
	char line[4096];
	size_t o = pd_log_ts(line, sizeof line);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + o, sizeof line - o, fmt, ap);
	va_end(ap);
	pd_log_emit(stderr, line);
}

int cli_log_option(const char *cmd, bool level, const char *arg)
{
	static int format = PD_LOG_LOGFMT, min = PD_LOG_DEBUG;
	if (level) {
		int l = pd_log_parse_level(arg);
		if (l < 0)
			return cli_usage_error(cmd, "--log-level: want debug, info, warn or error, got '%s'", arg);
		min = l;
	} else if (!strcmp(arg, "json") || !strcmp(arg, "logfmt")) {
		format = !strcmp(arg, "json") ? PD_LOG_JSON : PD_LOG_LOGFMT;
	} else {
		return cli_usage_error(cmd, "--log-format: want logfmt or json, got '%s'", arg);
	}
	pd_log_setup(format, min);
	return 0;
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

int cli_bad_option(const char *cmd, int opt, char **argv)
{
	extern int optind, optopt;
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	char shortopt[3] = {'-', (char)optopt, 0};
	/* a short option inside a group (-qx) is not argv[optind-1] as such */
	if (optopt && strncmp(arg, "--", 2))
		arg = shortopt;
	if (opt == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", arg);
	if (opt == '?')
		return cli_usage_error(cmd, "unknown option '%s'", arg);
	return cli_usage_error(cmd, "bad option");
}

void cli_help(const char *text) { cli_fhelp(stdout, text); }

void cli_fhelp(FILE *f, const char *text)
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
			fputs(p, f);
			break;
		}
		fwrite(p, 1, (size_t)(q - p), f);
		fputs(cli_prog, f);
		p = q + 5;
	}
}

int cli_parse_dur(const char *cmd, const char *opt, const char *s, bool zero_ok, int64_t *out)
{
	struct pd_err err;
	if (zero_ok && !strcmp(s, "0")) {
		*out = 0;
		return 0;
	}
	if (pd_api_parse_duration(s, strlen(s), out, &err))
		return cli_usage_error(cmd, "--%s: %s", opt, err.msg);
	if (zero_ok ? *out < 0 : *out <= 0)
		return cli_usage_error(cmd, "--%s must be %s, got '%s'", opt, zero_ok ? "0 or more" : "positive", s);
	return 0;
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
	if (!strcmp(c, "help") && argc == 3 && !strcmp(argv[2], "--markdown"))
		return help_markdown();
	if (!strcmp(c, "help") && argc > 2) { /* profd help merge = profd merge --help */
		for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
			if (commands[i].run && !strcmp(argv[2], commands[i].name)) {
				char *args[] = {argv[2], "--help", NULL};
				return commands[i].run(2, args);
			}
		fprintf(stderr, "%s: unknown command '%s'\n\n", cli_prog, argv[2]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(c, "--version") || !strcmp(c, "-v"))
		return cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		if (commands[i].run && !strcmp(c, commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n\n", cli_prog, c);
	usage(stderr);
	return EXIT_USAGE;
}
