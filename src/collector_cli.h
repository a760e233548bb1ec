/*
 * collector_cli.h — what the collector commands (profd get, merge, load, top)
 * share: their common flags, the time range and label arguments, the
 * connection to the collector, and one way to report each failure as one
 * line: which command, what failed, what to try.
 *
 * Each command declares its flags in tables (flags.h), lists the shared
 * client_flags_* tables below in its cli_doc, and passes every option it
 * does not handle itself to client_opt(). client_ready() then resolves the collector URL (--collector,
 * $PROFD_COLLECTOR, http://localhost:10100) and the time range (default the
 * last hour: --from -1h --to now) and checks them.
 */
#ifndef PD_COLLECTOR_CLI_H
#define PD_COLLECTOR_CLI_H

#include "cli.h"
#include "flags.h"
#include "../lib/remote/collector.h"

/* Long-only option ids shared by the collector commands. */
enum {
	CO_COLLECTOR = 0x1000,
	CO_TIMEOUT,
	CO_SERVICE,
	CO_TYPE,
	CO_FROM,
	CO_TO,
	CO_LIMIT,
	CO_ALL,
	CO_PRINT_URL,
	CO_CREATED_AT,
	CO_CUM,
	CO_QUIET,
	CO_RAW,
	CO_TOKEN_FILE,
	CO_CACERT,
	CO_INSECURE,
	CO_NAMESPACE,
	CO_OUTPUT_FILE,
	CO_QUERY,
};

/* The flags every collector command shares, as flag tables (flags.h) a
 * command lists in its cli_doc around its own: the time range, -l label
 * filters, -n/--namespace, and the connection (which ends with -h,
 * --help). client_opt handles their ids. */
extern const struct cli_flag client_flags_range[];     /* --from, --to */
extern const struct cli_flag client_flags_labels[];    /* -l, --selector K=V (--label) */
extern const struct cli_flag client_flags_namespace[]; /* -n, --namespace NS */
extern const struct cli_flag client_flags_conn[];      /* --collector ... --insecure, -h */
#define CLIENT_HELP_TIME                                                                                 \
	"TIME: relative to now (-30m, now-2h, now, now+1h; Go durations: s m h, 1h30m),\n"                    \
	"RFC3339 (2024-05-30T11:49:02Z, 2024-05-30T13:49:02+02:00), 2024-05-30T11:49:02\n"                     \
	"(UTC) or unix seconds (1717069742).\n"

struct client {
	const char *cmd;             /* "get profiles": messages and --help hints */
	const char *collector_flag;  /* --collector as given */
	const char *token_file;      /* --token-file as given */
	const char *cacert;          /* --cacert */
	bool insecure;               /* --insecure */
	char *collector;             /* resolved base URL (malloc'd) */
	int64_t timeout_ns;
	const char *service;
	const char *type;            /* a valid API type name, or NULL */
	const char *from, *to;       /* as given */
	int64_t from_ns, to_ns;
	struct pd_kv *labels;        /* -l, in the order given; strings point into argv copies */
	size_t nlabels, labels_cap;
	char **owned;                /* label argument copies */
	size_t nowned;
	struct pd_client *http;
};

/* getopt_long's '?' or ':' (with opterr 0 and ':' first in optstring):
 * "unknown option '--x'" or "option '--x' needs a value"; EXIT_USAGE. */
int client_bad_option(const char *cmd, int opt, char **argv);
/* Defaults; cmd is used in messages. Also readies getopt_long for the
 * command's flags (optind 1, opterr 0: client_other_opt reports). */
void client_init(struct client *c, const char *cmd);
void client_free(struct client *c);
/* Handle one shared option (the getopt return value and optarg).
 * Returns 0 if handled, 1 if the option is not a shared one, or
 * EXIT_USAGE after printing the error. */
int client_opt(struct client *c, int opt, const char *arg);
/* The default: case of a command's getopt_long loop: '?' and ':' as
 * client_bad_option, else client_opt, an option it does not know being
 * "bad option". Returns 0 if handled, else EXIT_USAGE or EXIT_INPUT after
 * printing the error. */
int client_other_opt(struct client *c, int opt, const char *arg, char **argv);
/* After the flags: 0 if no argument is left, else EXIT_USAGE after
 * "unexpected argument 'X'" and hint (may be ""). */
int client_no_args(const struct client *c, int argc, char **argv, const char *hint);
/* -n NS where -n used to be a row count (top, diff): a number is still
 * taken as the count (*count), with a warning naming --limit; anything
 * else is the namespace (*ns). Returns 0 or EXIT_USAGE. */
int client_n_legacy(const struct client *c, const char *arg, long *count, const char **ns);
/* A selector with one more matcher key="value" (value escaped): "cpu{a="b"}"
 * -> "cpu{a="b",key="value"}", "cpu" -> "cpu{key="value"}". malloc'd;
 * NULL when out of memory. */
char *client_selector_with(const char *sel, const char *key, const char *value);
/* -o's value where -o used to be a file (merge, diff): one of formats[]
 * (NULL-terminated) is the format (*fmt); anything else is taken as the
 * file (*file), with a warning naming -O/--output-file. */
void client_o_legacy(const struct client *c, const char *arg, const char *const *formats, const char **fmt,
		     const char **file);
/* A count flag's value (cli_parse_count) into *out; 0, or EXIT_USAGE after
 * "<flag> needs a count, got '<arg>'". */
int client_count(const struct client *c, const char *flag, const char *arg, long *out);
/* The wall clock, in ns since the epoch. */
int64_t client_now_ns(void);
/* Parse a TIME argument of flag (e.g. "--base-from"; name is the API's
 * name for it) relative to now into *out; 0, or EXIT_USAGE after printing
 * the error. */
int client_parse_time(const struct client *c, const char *flag, const char *name, const char *arg, int64_t now,
		      int64_t *out);
/* Resolve the collector and the time range (range: whether --from/--to
 * apply to this command) and connect. Returns 0, EXIT_USAGE or EXIT_INPUT
 * after printing the error. */
int client_ready(struct client *c, bool range);

/* The query of GET /api/0/profiles[/merge] for service (NULL = c->service). */
struct pd_client_query client_query(const struct client *c, const char *service);

/* GET path into r. On failure prints one line (with a hint for an
 * unreachable collector or a timeout) and returns EXIT_INPUT. On an answer
 * returns 0 whatever the status. */
int client_get(struct client *c, const char *path, size_t max_body, struct pd_client_resp *r);
/* For an answer with a status other than 200: prints
 * "<cmd>: <what>: the collector answered <status>: <message>" and returns EXIT_INPUT. */
int client_http_fail(const struct client *c, const struct pd_client_resp *r, const char *what);
/* Print a failed request (err of pd_client_*), with a hint; EXIT_INPUT. */
int client_net_fail(const struct client *c, const struct pd_client_resp *r, const struct pd_err *err);

/* The services to work on: c->service, or (all) every service the
 * collector has. *out is a malloc'd array of malloc'd strings
 * (client_strv_free). An empty list is not an error. */
int client_services(struct client *c, char ***out, size_t *n);
void client_strv_free(char **v, size_t n);

/* For API v1 URLs: "&key=<value, query-escaped>" appended to b (0 or
 * PD_ENOMEM), and a time as unix seconds with nanoseconds (what the
 * collector parses exactly). */
int client_add_param(struct pd_buf *b, const char *key, const char *val);
const char *client_unix_time(int64_t ns, char *buf, size_t n);

/* "between 2024-05-30T11:00:00Z and 2024-05-30T12:00:00Z" (UTC, seconds) */
const char *client_range_str(const struct client *c, char *buf, size_t n);
/* " with labels k=v,k2=v2" or "" */
const char *client_labels_str(const struct client *c, char *buf, size_t n);

/* Members of an API v1 answer: 0 and "" when absent or of another type. */
int64_t client_jint(json_t *o, const char *k);
const char *client_jstr(json_t *o, const char *k);

/* An API v1 top's rows (body's "rows") as the table's rows (names point
 * into the JSON): flat and cum are the members holding their values ("flat"
 * and "cum"; "delta_flat" and "delta_cum" in a diff). -1 with why set when
 * the answer is not one (no integer "total" or "functions", a row without
 * a name or an integer value): a garbled answer is an error, not a table
 * of zeros. */
struct pd_top_row;
int client_top_rows(json_t *body, const char *flat, const char *cum, struct pd_top_row *out, char *why,
		    size_t nwhy);

#endif
