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

/* How the program is called in messages and --help: "profd", or
 * "kubectl profd" when run as the kubectl plugin (argv[0] kubectl-profd). */
extern const char *cli_prog;
/* Print "<prog>: <msg>" to stderr. */
void cli_error(const char *fmt, ...) PD_PRINTF(1, 2);
/* One log line on stderr: "ts=... " and fmt's logfmt fields (pd_log_emit:
 * --log-format, --log-level). For the long-running commands. */
void cli_log(const char *fmt, ...) PD_PRINTF(1, 2);
/* --log-format logfmt|json (level false) or --log-level debug|info|warn|error
 * (level true): set for the whole process; EXIT_USAGE on a bad value. */
int cli_log_option(const char *cmd, bool level, const char *arg);
/* Print "<prog> <cmd>: <msg>" to stderr: a command's failure (the collector
 * commands and capture: "profd get services: cannot reach ..."). */
void cli_cmd_error(const char *cmd, const char *fmt, ...) PD_PRINTF(2, 3);
/* Print "<prog> <cmd>: <msg>" and a hint to run --help; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) PD_PRINTF(2, 3);
/* getopt_long's '?' or ':' (optstring starting with ':', opterr 0) as one
 * usage error: "unknown option '--x'" or "option '--x' needs a value";
 * every command reports its bad options so. EXIT_USAGE. */
int cli_bad_option(const char *cmd, int opt, char **argv);
/* Print a --help text to stdout, each command line "profd ..." in it
 * written with cli_prog ("kubectl profd ..." as the plugin). */
void cli_help(const char *text);
/* The same to f. */
void cli_fhelp(FILE *f, const char *text);
/* Parse a non-negative integer option value; -1 on error. */
long cli_parse_count(const char *s);
/* A Go duration flag (90s, 15m, 1h30m) of command cmd into *out (ns):
 * positive, or with zero_ok 0 ("0" too) or more; else EXIT_USAGE after
 * "--opt: why". One rule for every command. */
int cli_parse_dur(const char *cmd, const char *opt, const char *s, bool zero_ok, int64_t *out);
/* A size: bytes, or with a suffix K/KiB, M/MiB, G/GiB; -1 on error. */
int cli_parse_size(const char *s, size_t *out);

int cmd_pprof(int argc, char **argv);
int cmd_store(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_scrape(int argc, char **argv);
int cmd_capture(int argc, char **argv);
/* The collector commands (src/collector_cli.c + one file each). */
int cmd_get(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_regressions(int argc, char **argv);

/* The commands' flag tables and help (flags.h), one per --help page. */
struct cli_doc;
extern const struct cli_doc serve_doc;
extern const struct cli_doc scrape_doc;
extern const struct cli_doc capture_doc;
extern const struct cli_doc top_doc;
extern const struct cli_doc get_doc;
extern const struct cli_doc merge_doc;
extern const struct cli_doc load_doc;
extern const struct cli_doc diff_doc;
extern const struct cli_doc regressions_doc;
extern const struct cli_doc pprof_merge_doc;
extern const struct cli_doc pprof_top_doc;
extern const struct cli_doc pprof_folded_doc;
extern const struct cli_doc pprof_info_doc;
extern const struct cli_doc pprof_convert_doc;
extern const struct cli_doc pprof_delta_doc;
extern const struct cli_doc store_check_doc;
extern const struct cli_doc store_backup_doc;
extern const struct cli_doc store_restore_doc;

/*
 * The scraper of `profd scrape`, in pieces so that `profd serve --scrape`
 * runs the same code (cmd_scrape.c). parse: the scrape options (in_serve:
 * --collector and --once are usage errors); returns an exit code, with *out
 * NULL after --help or an error. start: the scraper (into st if not NULL,
 * refusing profiles older than retention_ns like POST, else to the
 * collector), its --listen, Kubernetes discovery and the loop thread;
 * signals must already be blocked. stop: ask discovery and the loop to stop
 * (the loop delivers what it has). finish: join, log the totals; returns
 * the exit code. free: everything (stops first if still running).
 */
struct scrape_cmd;
struct pd_store;
struct pd_buf;
int scrape_cmd_parse(int argc, char **argv, bool in_serve, struct scrape_cmd **out);
/* The next scrape_cmd_parse takes text (named name in messages) as its
 * YAML --config: serve --config FILE's scrape: section. Borrowed. */
void scrape_cmd_preset_config(const char *name, const char *text, size_t n);
int scrape_cmd_start(struct scrape_cmd *c, struct pd_store *st, int64_t retention_ns);
bool scrape_cmd_done(struct scrape_cmd *c);
void scrape_cmd_stop(struct scrape_cmd *c);
int scrape_cmd_finish(struct scrape_cmd *c, bool signalled);
/* The scraper's /metrics series (for the collector's /metrics). */
int scrape_cmd_metrics(void *c, struct pd_buf *out);
void scrape_cmd_free(struct scrape_cmd *c);

#endif
