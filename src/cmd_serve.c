/*
 * cmd_serve.c — `profd serve`: the collector. Embedded store under the data
 * directory, API v0 over HTTP, retention, graceful shutdown.
 *
 * The main thread owns the life cycle: it opens the store, applies retention
 * once, starts the server, then waits for SIGINT/SIGTERM with a timeout that
 * is the retention interval, so the same thread runs retention periodically
 * without a timer thread. On a signal: not ready, stop accepting, let
 * in-flight requests finish (--shutdown-timeout), close the store. The
 * same thread builds the store's hourly rollups every --rollup-interval
 * (the first pass one interval after start: a restart is not slowed down),
 * a day's worth of hours at a time with a look at pending signals in
 * between.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "flags.h"
#include "serve_config.h"
#include "version.h"
#include "../lib/http/params.h"
#include "../lib/http/server.h"
#include "../lib/remote/influx.h"
#include "../lib/http/web.h"
#include "../lib/http/profmetrics.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define DEFAULT_DATA_DIR "./profd-data"
#define DEFAULT_RETENTION "720h"
#define DEFAULT_RETENTION_INTERVAL "10m"
#define DEFAULT_SHUTDOWN_TIMEOUT "30s"
#define DEFAULT_ROLLUP_INTERVAL "5m"
#define TRIM_EVERY (10 * 1000000000LL) /* free memory given back (malloc_trim), ns */
#define ROLLUP_GRACE_NS (120LL * 1000000000LL) /* an hour is rolled up 2 min after its end (late uploads) */
#define ROLLUP_CHUNK 24                        /* hours per store call, between looks at signals */

/* Long-only flag ids (-q and -h are their letters). */
enum {
	O_ADDR = 256, O_DIR, O_RET, O_RETI, O_BODY, O_DEC, O_SAMP, O_MERGE, O_TMO, O_CONN, O_GZ, O_SHUT, O_QRANGE,
	O_EXP_URL, O_EXP_EVERY, O_EXP_TOP, O_EXP_QUERY, O_EXP_DELAY, O_ROLLUP, O_UPMEM, O_INMEM, O_TOKENS,
	O_METRICS_OPEN, O_ORIGINS, O_TLS_CERT, O_TLS_KEY, O_TLS_CA, O_PER_IP, O_THREADS, O_MERGES, O_MAXOPEN, O_SKEW,
	O_STORE, O_STORE_PW, O_STORE_CA, O_STORE_INSEC, O_WEB_PREFIX, O_WEB_DIR, O_NO_UI, O_PM_WIN, O_PM_TOP,
	O_PM_QUERY, O_PM_MAX, O_PM_DELAY, O_LOG_FORMAT, O_LOG_LEVEL, O_CONFIG, O_PRINT_CONFIG, O_SCRAPE
};

/* serve's flags; they are the keys of --config FILE too (serve_config.c). */
static const struct cli_flag serve_flags[] = {
	{"addr", 0, O_ADDR, "ADDR",
	 "listen address, host:port, :port or [v6]:port;\nport 0 picks a free port (default " PD_SERVE_ADDR ")", 0},
	{"data-dir", 0, O_DIR, "DIR", "where the store lives, created if missing\n(default " DEFAULT_DATA_DIR ")", 0},
	{"store", 0, O_STORE, "STORE",
	 "sqlite (the default: embedded, under --data-dir), or\n"
	 "clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE[?secure=1]\n"
	 "[&cluster=NAME[&insert_quorum=N]] for a sharded or\n"
	 "replicated cluster (docs/scale-out.md)\n"
	 "(ClickHouse's HTTP port; many collectors may share it;\n"
	 "the tables are created at start)",
	 0},
	{"store-password-file", 0, O_STORE_PW, "F",
	 "ClickHouse password from file F (first line), instead\nof one in the URL", 0},
	{"store-cacert", 0, O_STORE_CA, "FILE", "PEM CA of an https ClickHouse (default: the system's)", 0},
	{"store-insecure", 0, O_STORE_INSEC, NULL, "do not verify ClickHouse's certificate (tests only)", 0},
	{"retention", 0, O_RET, "DUR",
	 "keep profiles this long, e.g. 720h, 168h; 0 = forever\n"
	 "(default " DEFAULT_RETENTION " = 30 days). Older profiles are no longer\n"
	 "listed or merged; their day's file is deleted when the\n"
	 "whole day is past the window",
	 0},
	{"retention-interval", 0, O_RETI, "DUR", "how often retention runs (default " DEFAULT_RETENTION_INTERVAL ")",
	 0},
	{"rollup-interval", 0, O_ROLLUP, "DUR",
	 "how often the hours that ended get their rollups\n"
	 "(per service, type and hour: API v1 answers long\n"
	 "ranges from them); 0 = never (default " DEFAULT_ROLLUP_INTERVAL ")",
	 0},
	{"max-body", 0, O_BODY, "SIZE", "largest upload, as sent (default 32MiB); over it = 413", 0},
	{"max-decompressed", 0, O_DEC, "SIZE", "largest profile after gunzip (default 256MiB)", 0},
	{"max-samples", 0, O_SAMP, "N", "most samples in one profile (default 16777216)", 0},
	{"max-upload-memory", 0, O_UPMEM, "SIZE",
	 "most memory decoding and storing one upload may take,\n"
	 "estimated before it is spent (default 64MiB); over it\n"
	 "= 413: a small gzip of millions of tiny samples is\n"
	 "refused at once instead of costing a GiB",
	 0},
	{"max-ingest-memory", 0, O_INMEM, "SIZE",
	 "most memory all uploads (bodies, decodes) and pprof\n"
	 "answers being sent may hold at once (default 1GiB);\n"
	 "over it = 503 with Retry-After",
	 0},
	{"max-open-partitions", 0, O_MAXOPEN, "N",
	 "day files kept open at most when idle (default 64, or\n"
	 "fewer if the descriptor limit is low: a third of it,\n"
	 "each takes ~6); the least recently used idle one is\n"
	 "closed first, one in use never",
	 0},
	{"max-future-skew", 0, O_SKEW, "DUR",
	 "refuse (400) a profile whose time (created_at or the\n"
	 "profile's own) is more than this ahead of the\n"
	 "collector's clock (default 1h; 0 = no bound): each day\n"
	 "is a file, and made-up future dates would pile them up",
	 0},
	{"max-merge-profiles", 0, O_MERGE, "N",
	 "most profiles in one merge or API v1 query (default\n"
	 "10000); over it = 413 naming the limit, never a\n"
	 "silent truncation",
	 0},
	{"max-query-range", 0, O_QRANGE, "DUR",
	 "longest from..to of an API v1 query (default 744h =\n31 days); over it = 400", 0},
	{"timeout", 0, O_TMO, "DUR", "drop a connection idle this long (default 60s)", 0},
	{"max-connections", 0, O_CONN, "N",
	 "concurrent connections, all clients (default 1024); the\n"
	 "server is event-driven: an idle or slow client holds a\n"
	 "socket, not a thread",
	 0},
	{"max-connections-per-ip", 0, O_PER_IP, "N", "of one client address (default 64; 0 = no cap)", 0},
	{"threads", 0, O_THREADS, "N", "worker threads (default 16)", 0},
	{"max-concurrent-merges", 0, O_MERGES, "N",
	 "merges (and API v1 top, series, diff) at once; more =\n503 with Retry-After (default 4; 0 = no cap)", 0},
	{"gzip-level", 0, O_GZ, "N", "compression of served profiles, 1-12 (default 1)", 0},
	{"shutdown-timeout", 0, O_SHUT, "DUR",
	 "on SIGTERM/SIGINT, wait this long for requests in\nflight (default " DEFAULT_SHUTDOWN_TIMEOUT ")", 0},
	{"tokens", 0, O_TOKENS, "FILE",
	 "require a token: one per line, TOKEN SCOPE[,SCOPE] [NAME],\n"
	 "scopes read (GET), write (POST), admin (DELETE); sent as\n"
	 "Authorization: Bearer TOKEN or as the password of basic\n"
	 "auth; mode 600; re-read on SIGHUP. /healthz and /readyz\n"
	 "stay open. Without it anyone who reaches the port may\n"
	 "upload and delete (a warning says so at start)",
	 0},
	{"metrics-open", 0, O_METRICS_OPEN, NULL, "/metrics without a token (default: read scope)", 0},
	{"tls-cert", 0, O_TLS_CERT, "FILE",
	 "serve HTTPS (TLS 1.2 and 1.3) with this PEM certificate\nchain (the server's first); re-read on SIGHUP", 0},
	{"tls-key", 0, O_TLS_KEY, "FILE", "its PEM private key (unencrypted; mode 600)", 0},
	{"tls-client-ca", 0, O_TLS_CA, "FILE",
	 "also require a client certificate signed by this PEM CA\n(403 otherwise); with --tls-cert", 0},
	{"allowed-origins", 0, O_ORIGINS, "LIST",
	 "web origins (https://ui.example,...) whose pages may\n"
	 "POST or DELETE here; others are refused (403): a page\n"
	 "of another site must not change the store",
	 0},
	{"profile-metrics-window", 0, O_PM_WIN, "DUR",
	 "GET /metrics/profiles: per service the CPU used\n"
	 "(cores) and its top functions, and the other types'\n"
	 "values, over the latest complete window of DUR\n"
	 "(default 5m), as gauges for Prometheus",
	 0},
	{"profile-metrics-top", 0, O_PM_TOP, "N", "functions per service and type (default 10)", 0},
	{"profile-metrics-query", 0, O_PM_QUERY, "SELECTOR", "which profiles (default: every profile)", 0},
	{"profile-metrics-max-series", 0, O_PM_MAX, "N", "at most N series, the largest first\n(default 2000)", 0},
	{"profile-metrics-delay", 0, O_PM_DELAY, "DUR", "a window is final this long after it ends\n(default 30s)",
	 0},
	{"web-prefix", 0, O_WEB_PREFIX, "PATH",
	 "the web UI and the API also under PATH (e.g. /profd, for\n"
	 "an ingress that forwards /profd/... as it is); the\n"
	 "unprefixed paths keep working (an ingress that strips)",
	 0},
	{"web-dir", 0, O_WEB_DIR, "DIR",
	 "serve the UI's files from DIR (the source tree's web/),\n"
	 "re-read on every request, instead of the copies built\n"
	 "into the binary: for working on the UI",
	 0},
	{"no-ui", 0, O_NO_UI, NULL, "no web UI (GET / is a 404)", 0},
	{"config", 0, O_CONFIG, "FILE",
	 "the flags from a YAML file: each key a flag without\n"
	 "its -- (data-dir: /var/lib/profd, metrics-open: true),\n"
	 "and scrape: the scraper's YAML (profd scrape --config);\n"
	 "the command line's flags win over the file's",
	 0},
	{"print-config", 0, O_PRINT_CONFIG, NULL, "print the settings in force as such a file, and exit", 0},
	{"quiet", 'q', 'q', NULL, "no request log (errors are still logged)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* --log-format, --log-level (cli_log_option), in serve's help column */
static const struct cli_flag serve_log_flags[] = {
	{"log-format", 0, O_LOG_FORMAT, "FORMAT", "logfmt (default) or json: one JSON object per line", 0},
	{"log-level", 0, O_LOG_LEVEL, "LEVEL",
	 "debug, info (default), warn or error: lines below it\nare dropped (the request log is info)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* -h, --scrape (the word --scrape ends serve's flags: cmd_serve cuts argv
 * there, so getopt only sees a --scrape=X or an abbreviation) and the
 * InfluxDB export. */
static const struct cli_flag serve_more_flags[] = {
	{"help", 'h', 'h', NULL, "this help", 0},
	{"scrape", 0, O_SCRAPE, "...",
	 "also pull profiles from Go pprof endpoints, into the\n"
	 "store directly: everything after --scrape is\n"
	 "`profd scrape` options (targets, --config, Kubernetes\n"
	 "discovery, --types, --interval, --target-ca FILE for\n"
	 "https:// targets, --listen...; see `profd scrape\n"
	 "--help`), except --collector and --once.\n"
	 "Its series are on this server's /metrics too; on\n"
	 "SIGTERM it stops first (delivering what it has\n"
	 "fetched), then the server",
	 CLI_F_LISTONLY},
	{"export-influx", 0, O_EXP_URL, "URL",
	 "push the top functions as time series to InfluxDB (line\n"
	 "protocol, POST to URL as given, e.g.\n"
	 "http://influxdb:8086/api/v2/write?org=o&bucket=b&precision=ns\n"
	 "or .../write?db=profd for InfluxDB 1); a token in\n"
	 "$PROFD_INFLUX_TOKEN is sent as \"Authorization: Token\".\n"
	 "Every window: per service and type, the total and the\n"
	 "top functions by flat, as GET /api/1/series?format=influx\n"
	 "writes them. Failures are logged and counted in /metrics\n"
	 "(profd_export_*), never retried, never block the server",
	 0},
	{"export-every", 0, O_EXP_EVERY, "DUR", "the window, aligned to the epoch (default 1m)", 0},
	{"export-top", 0, O_EXP_TOP, "N", "functions per service and type (default 10)", 0},
	{"export-query", 0, O_EXP_QUERY, "SELECTOR", "which profiles (default cpu; e.g. '{service=~\"api-.*\"}')", 0},
	{"export-delay", 0, O_EXP_DELAY, "DUR",
	 "push a window this long after it ends, for profiles\nstill arriving (default 30s)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc serve_doc = {
    "serve",
    "Usage: profd serve [options] [--scrape SCRAPE-OPTIONS...]\n"
    "\n"
    "Run the collector: profiles arrive by POST /api/0/profiles (profefe's API: the\n"
    "profefe agent, kprofefe and `profd load` send them), are stored under the data\n"
    "directory (embedded SQLite, one file per UTC day), and are served back one by\n"
    "one or merged over any time range, e.g. for go tool pprof:\n"
    "\n"
    "  go tool pprof 'http://localhost:10100/api/0/profiles/merge?service=auth&type=cpu&from=now-1h&to=now'\n"
    "\n",
    {serve_flags, serve_log_flags, serve_more_flags},
    "\n"
    "SIZE: bytes, or with a suffix KiB, MiB, GiB (also K, M, G). DUR: a Go duration\n"
    "(90s, 15m, 1h30m).\n"
    "\n"
    "The web UI (flame graph, top table, timeline, diff, fleet, profiles) is at\n"
    "http://ADDR/ (docs/ui.md); with --tokens the page asks for a read token.\n"
    "\n"
    "Routes: POST/GET /api/0/profiles, GET /api/0/profiles/{id}[+{id}...],\n"
    "GET /api/0/profiles/merge, DELETE /api/0/profiles/{id}, GET /api/0/services,\n"
    "GET /api/0/version, /healthz, /readyz, /metrics; API v1: GET /api/1/profiles,\n"
    "/api/1/merge, /api/1/top, /api/1/labels[/{name}/values], /api/1/types,\n"
    "/api/1/series, /api/1/diff.\n"
    "See docs/api.md.\n"
    "\n"
    "The request log (one line per request) and errors go to stderr; the first\n"
    "line says where the server listens.\n"
    "\n"
    "Example, a collector that scrapes the annotated pods of its cluster:\n"
    "\n"
    "  profd serve --data-dir /data --scrape -A --interval 60s\n"
    "\n"
    "Exit codes: 0 clean shutdown, 1 cannot start (address in use, data dir not\n"
    "writable, with --scrape: what makes profd scrape exit 1), 2 usage error.\n",
    32,
    NULL,
};

/* The host of the UI's URL in the log: the address's, or localhost for
 * "any address" (":10100", "0.0.0.0:10100", "[::]:10100"). */
static const char *ui_host(const char *addr)
{
	static char h[256];
	const char *colon = strrchr(addr, ':');
	size_t n = colon ? (size_t)(colon - addr) : 0;
	snprintf(h, sizeof h, "%.*s", (int)n, addr);
	if (!n || !strcmp(h, "0.0.0.0") || !strcmp(h, "[::]"))
		snprintf(h, sizeof h, "localhost");
	return h;
}

#define parse_dur(opt, s, out) cli_parse_dur("serve", opt, s, true, out)

#define log_line cli_log

/* One retention pass; returns the partitions dropped. */
static size_t run_retention(struct pd_store *st, struct pd_metrics *m, int64_t retention)
{
	if (!retention)
		return 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	size_t dropped = 0;
	struct pd_err err;
	if (pd_store_retain(st, now - retention, &dropped, &err)) {
		char q[2 * sizeof err.msg];
		log_line("level=error component=retention msg=\"%s\"", pd_log_esc(q, sizeof q, err.msg));
		return 0;
	}
	if (m) {
		atomic_fetch_add(&m->retention_runs, 1);
		atomic_fetch_add(&m->retention_dropped, dropped);
	}
	if (dropped)
		log_line("level=info component=retention msg=\"dropped %zu day partition(s) older than the retention "
			 "window\"",
			 dropped);
	return dropped;
}


static bool hup_pending; /* SIGHUP taken while rolling up (main thread only) */

/* SIGHUP: re-read what can change without a restart (the tokens file). */
static void reload(struct pd_server *srv)
{
	size_t n;
	struct pd_err err;
	char q[2 * sizeof err.msg];
	if (pd_server_reload_tokens(srv, &n, &err))
		log_line("level=error msg=\"SIGHUP: tokens not reloaded, the %zu in force are kept\" error=\"%s\"", n,
			 pd_log_esc(q, sizeof q, err.msg));
	else if (n)
		log_line("level=info msg=\"SIGHUP: tokens reloaded\" tokens=%zu", n);
	char desc[400];
	if (pd_server_reload_tls(srv, desc, sizeof desc, &err))
		log_line("level=error msg=\"SIGHUP: TLS certificate not reloaded, the one in force is kept\" error=\"%s\"",
			 pd_log_esc(q, sizeof q, err.msg));
	else if (desc[0] && strcmp(desc, "none"))
		log_line("level=info msg=\"SIGHUP: TLS certificate reloaded\" %s", desc);
}

/* One rollup pass: the store's missing or stale rollups of hours that
 * ended ROLLUP_GRACE_NS ago, ROLLUP_CHUNK at a time; stops early for a
 * pending signal in set (then *sig). Returns the rollups built. */
static size_t run_rollups(struct pd_store *st, const sigset_t *set, int *sig)
{
	int64_t t0 = pd_mono_ns();
	size_t total = 0, built = 0;
	do {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		struct pd_err err;
		if (pd_store_rollup(st, now - ROLLUP_GRACE_NS, ROLLUP_CHUNK, &built, &err)) {
			char q[2 * sizeof err.msg];
			log_line("level=error component=rollup msg=\"%s\"", pd_log_esc(q, sizeof q, err.msg));
			break;
		}
		total += built;
		struct timespec zero = {0, 0};
		int r = sigtimedwait(set, NULL, &zero);
		if (r == SIGHUP)
			hup_pending = true; /* the main loop reloads after the pass */
		else if (r > 0)
			*sig = r;
	} while (built == ROLLUP_CHUNK && !*sig);
	if (total)
		log_line("level=info component=rollup msg=\"built %zu hourly rollup(s)\" seconds=%.3f", total,
			 (double)(pd_mono_ns() - t0) / 1e9);
	return total;
}

/* /metrics extras: the in-process scraper's and the exporter's series. */
struct serve_extras {
	struct scrape_cmd *sc;
	struct pd_exporter *ex;
};

static int serve_metrics(void *ctx, struct pd_buf *out)
{
	struct serve_extras *x = ctx;
	int rc = x->sc ? scrape_cmd_metrics(x->sc, out) : 0;
	if (!rc && x->ex)
		rc = pd_exporter_metrics(x->ex, out);
	return rc;
}

int cmd_serve(int argc, char **argv)
{
	/* main() tunes malloc for the one-shot tools: everything freed kept
	 * for reuse (blocks up to 256 MiB from the heap, trimmed past 512 MiB).
	 * A collector runs for months on ~35 threads, and each thread's arena
	 * kept what it had freed: bench/soak.sh measured 191 MB of RSS after
	 * 150 s of steady traffic, for a heap that peaked at 43 MB. So here
	 * blocks of 4 MiB and more are mapped for their use and unmapped after,
	 * and the main loop below gives back what the arenas hold free every
	 * TRIM_EVERY (malloc_trim): 86 MB in the same run. 1 MiB gave 76 MB,
	 * but a warm API merge of deep profiles 15 % slower (its big arrays
	 * faulted in again each time); 4 MiB costs it ~5 %. docs/benchmarks.md
	 * "A collector's memory over a long run". */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 4 << 20);
	struct pd_server_config cfg;
	pd_server_config_default(&cfg);
	cfg.version = PD_VERSION;
	cfg.commit = PD_COMMIT;
	cfg.build_time = PD_BUILD_TIME;
	cfg.log = stderr;
	cfg.errlog = stderr;
	const char *dir = DEFAULT_DATA_DIR;
	int64_t retention = 0, interval = 0, shutdown = 0, timeout = 0, rollup_every = 0, skew = 0;
	long max_open = 64;
	bool max_open_set = false, no_ui = false;
	struct pd_profmetrics_config pmc;
	pd_profmetrics_config_default(&pmc);
	const char *web_prefix = NULL, *web_dir = NULL;
	parse_dur("max-future-skew", "1h", &skew);
	parse_dur("retention", DEFAULT_RETENTION, &retention);
	parse_dur("rollup-interval", DEFAULT_ROLLUP_INTERVAL, &rollup_every);
	parse_dur("retention-interval", DEFAULT_RETENTION_INTERVAL, &interval);
	parse_dur("shutdown-timeout", DEFAULT_SHUTDOWN_TIMEOUT, &shutdown);
	timeout = (int64_t)cfg.timeout_s * 1000000000;
	struct pd_pprof_limits lim = {0};
	pd_pprof_limits_default(&lim);
	lim.max_compressed = cfg.max_body;
	lim.max_memory = PD_SERVE_MAX_UPLOAD_MEMORY;
	struct pd_export_config ex;
	pd_export_config_default(&ex);
	bool ex_flags = false;

	const char *store_url = NULL, *store_pw_file = NULL;
	struct pd_store_ch_opts store_ch = {0};
	struct cli_getopt g;
	if (cli_getopt_init(&g, &serve_doc))
		return EXIT_USAGE;
	/* --config FILE: its flags before the command line's (which win) */
	static struct serve_cfg scfg; /* static: optarg strings point into it until exit */
	int crc = serve_config_expand(argc, argv, g.opts, &scfg);
	if (crc)
		return crc;
	argc = scfg.argc;
	argv = scfg.argv;
	/* everything after --scrape is the scraper's (profd scrape's options) */
	int sargc = 0;
	char **sargv = NULL;
	static char *scrape_only[] = {"--scrape", NULL};
	if (scfg.scrape) { /* the file's scrape: section, without --scrape on the command line */
		sargc = 1;
		sargv = scrape_only;
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--scrape")) {
			sargc = argc - i;
			sargv = argv + i;
			argc = i;
			break;
		} else if (!strcmp(argv[i], "--")) {
			break;
		}
	int c;
	long v;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case O_ADDR: cfg.addr = optarg; break;
		case O_DIR: dir = optarg; break;
		case O_STORE: store_url = optarg; break;
		case O_STORE_PW: store_pw_file = optarg; break;
		case O_STORE_CA: store_ch.cacert = optarg; break;
		case O_STORE_INSEC: store_ch.insecure = true; break;
		case O_RET:
			if (parse_dur("retention", optarg, &retention))
				return EXIT_USAGE;
			break;
		case O_ROLLUP:
			if (parse_dur("rollup-interval", optarg, &rollup_every))
				return EXIT_USAGE;
			if (rollup_every && rollup_every < 1000000000LL)
				return cli_usage_error("serve", "--rollup-interval must be 0 or at least 1s");
			break;
		case O_RETI:
			if (parse_dur("retention-interval", optarg, &interval))
				return EXIT_USAGE;
			if (interval < 1000000000LL)
				return cli_usage_error("serve", "--retention-interval must be at least 1s");
			break;
		case O_BODY:
			if (cli_parse_size(optarg, &cfg.max_body) || cfg.max_body == 0)
				return cli_usage_error("serve", "--max-body: bad size '%s' (e.g. 32MiB)", optarg);
			lim.max_compressed = cfg.max_body;
			break;
		case O_DEC:
			if (cli_parse_size(optarg, &lim.max_decompressed) || lim.max_decompressed == 0)
				return cli_usage_error("serve", "--max-decompressed: bad size '%s' (e.g. 256MiB)", optarg);
			break;
		case O_SAMP:
			if ((v = cli_parse_count(optarg)) <= 0)
				return cli_usage_error("serve", "--max-samples: want a positive integer, got '%s'", optarg);
			lim.max_samples = (size_t)v;
			break;
		case O_TOKENS: cfg.tokens_path = optarg; break;
		case O_METRICS_OPEN: cfg.metrics_open = true; break;
		case O_WEB_PREFIX: web_prefix = optarg; break;
		case O_PM_WIN:
			if (parse_dur("profile-metrics-window", optarg, &pmc.window_ns))
				return EXIT_USAGE;
			break;
		case O_PM_DELAY:
			if (parse_dur("profile-metrics-delay", optarg, &pmc.delay_ns))
				return EXIT_USAGE;
			break;
		case O_PM_TOP:
			if ((v = cli_parse_count(optarg)) < 1 || v > 1000)
				return cli_usage_error("serve", "--profile-metrics-top: want 1..1000, got '%s'", optarg);
			pmc.top = (size_t)v;
			break;
		case O_PM_MAX:
			if ((v = cli_parse_count(optarg)) < 1)
				return cli_usage_error("serve", "--profile-metrics-max-series: want a positive integer, got '%s'",
						       optarg);
			pmc.max_series = (size_t)v;
			break;
		case O_PM_QUERY: pmc.query = optarg; break;
		case O_WEB_DIR: web_dir = optarg; break;
		case O_NO_UI: no_ui = true; break;
		case O_ORIGINS: cfg.allowed_origins = optarg; break;
		case O_TLS_CERT: cfg.tls_cert = optarg; break;
		case O_PER_IP:
			if ((v = cli_parse_count(optarg)) < 0 || v > 65536)
				return cli_usage_error("serve", "--max-connections-per-ip: want 0..65536, got '%s'", optarg);
			cfg.max_per_ip = (unsigned)v;
			break;
		case O_THREADS:
			if ((v = cli_parse_count(optarg)) < 1 || v > 1024)
				return cli_usage_error("serve", "--threads: want 1..1024, got '%s'", optarg);
			cfg.threads = (unsigned)v;
			break;
		case O_MERGES:
			if ((v = cli_parse_count(optarg)) < 0 || v > 4096)
				return cli_usage_error("serve", "--max-concurrent-merges: want 0..4096, got '%s'", optarg);
			cfg.max_merges = (unsigned)v;
			break;
		case O_TLS_KEY: cfg.tls_key = optarg; break;
		case O_TLS_CA: cfg.tls_client_ca = optarg; break;
		case O_UPMEM:
			if (cli_parse_size(optarg, &lim.max_memory) || lim.max_memory < (1u << 20))
				return cli_usage_error("serve", "--max-upload-memory: bad size '%s' (at least 1MiB, e.g. 64MiB)",
						       optarg);
			break;
		case O_INMEM:
			if (cli_parse_size(optarg, &cfg.max_ingest_memory) || cfg.max_ingest_memory < (1u << 20))
				return cli_usage_error("serve", "--max-ingest-memory: bad size '%s' (at least 1MiB, e.g. 1GiB)",
						       optarg);
			break;
		case O_MAXOPEN:
			max_open_set = true;
			if ((max_open = cli_parse_count(optarg)) < 2)
				return cli_usage_error("serve", "--max-open-partitions: want an integer >= 2, got '%s'", optarg);
			break;
		case O_SKEW:
			if (parse_dur("max-future-skew", optarg, &skew))
				return EXIT_USAGE;
			break;
		case O_MERGE:
			if ((v = cli_parse_count(optarg)) <= 0)
				return cli_usage_error("serve", "--max-merge-profiles: want a positive integer, got '%s'",
						       optarg);
			cfg.max_merge = (size_t)v;
			break;
		case O_TMO:
			if (parse_dur("timeout", optarg, &timeout))
				return EXIT_USAGE;
			if (timeout < 1000000000LL)
				return cli_usage_error("serve", "--timeout must be at least 1s");
			break;
		case O_CONN:
			if ((v = cli_parse_count(optarg)) <= 0 || v > 65536)
				return cli_usage_error("serve", "--max-connections: want 1..65536, got '%s'", optarg);
			cfg.max_connections = (unsigned)v;
			break;
		case O_GZ:
			if ((v = cli_parse_count(optarg)) < 1 || v > 12)
				return cli_usage_error("serve", "--gzip-level must be 1..12, got '%s'", optarg);
			cfg.gzip_level = (int)v;
			break;
		case O_SHUT:
			if (parse_dur("shutdown-timeout", optarg, &shutdown))
				return EXIT_USAGE;
			break;
		case O_QRANGE:
			if (parse_dur("max-query-range", optarg, &cfg.max_query_range_ns))
				return EXIT_USAGE;
			if (cfg.max_query_range_ns < 1000000000LL)
				return cli_usage_error("serve", "--max-query-range must be at least 1s");
			break;
		case O_EXP_URL: ex.url = optarg; break;
		case O_EXP_EVERY:
			if (parse_dur("export-every", optarg, &ex.every_ns))
				return EXIT_USAGE;
			ex_flags = true;
			break;
		case O_EXP_DELAY:
			if (parse_dur("export-delay", optarg, &ex.delay_ns))
				return EXIT_USAGE;
			ex_flags = true;
			break;
		case O_EXP_TOP:
			if ((v = cli_parse_count(optarg)) < 1 || v > PD_EXPORT_MAX_TOP)
				return cli_usage_error("serve", "--export-top: want 1..%d, got '%s'", PD_EXPORT_MAX_TOP, optarg);
			ex.top = (size_t)v;
			ex_flags = true;
			break;
		case O_EXP_QUERY:
			ex.query = optarg;
			ex_flags = true;
			break;
		case 'q': cfg.log = NULL; break;
		case O_CONFIG:
		case O_PRINT_CONFIG:
			/* serve_config_expand took out the ones written in full: getopt's
			 * abbreviation (--conf FILE) would be ignored, and the collector
			 * would run without the file's tokens and TLS */
			return cli_usage_error("serve", "write --config and --print-config in full (an abbreviation of %s)",
					       c == O_CONFIG ? "--config" : "--print-config");
		case O_LOG_FORMAT:
		case O_LOG_LEVEL:
			if (cli_log_option("serve", c == O_LOG_LEVEL, optarg))
				return EXIT_USAGE;
			break;
		case 'h': cli_flags_help(&serve_doc); return EXIT_OK;
		default: return cli_bad_option("serve", c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
	if (no_ui && (web_prefix || web_dir))
		return cli_usage_error("serve", "--no-ui with --web-prefix or --web-dir");
	if (scfg.print) { /* the flags have been checked: print them as a --config file */
		serve_config_print(&scfg, g.opts, argc, argv);
		return EXIT_OK;
	}
	struct pd_profmetrics *pm = NULL;
	{ /* checked now, made for good once the store is open */
		struct pd_err perr;
		pmc.max_profiles = cfg.max_merge;
		pmc.log = cfg.errlog;
		if (pd_profmetrics_new(&pmc, &pm, &perr))
			return cli_usage_error("serve", "%s", perr.msg);
		pd_profmetrics_free(pm);
		pm = NULL;
	}
	struct pd_web *web = NULL;
	if (!no_ui) { /* checked now, opened for good once the store is */
		struct pd_err werr;
		if (pd_web_open(pd_web_assets, pd_web_nassets, web_prefix, web_dir, &web, &werr))
			return cli_usage_error("serve", "%s", werr.msg);
		pd_web_free(web);
		web = NULL;
	}
	cfg.timeout_s = (unsigned)(timeout / 1000000000LL);
	cfg.retention_ns = retention;
	cfg.max_future_skew_ns = skew;
	if (ex_flags && !ex.url)
		return cli_usage_error("serve", "--export-every/--export-top/--export-query/--export-delay need --export-influx URL");
	if (ex.url) {
		struct pd_err xerr;
		ex.token = getenv("PROFD_INFLUX_TOKEN");
		if (ex.token && !*ex.token)
			ex.token = NULL;
		ex.max_profiles = cfg.max_merge;
		ex.log = stderr; /* failures are logged even with -q */
		ex.verbose = cfg.log != NULL;
		if (pd_export_check(&ex, &xerr))
			return cli_usage_error("serve", "%s", xerr.msg);
	}
	struct scrape_cmd *sc = NULL;
	if (sargv) {
		int rc = scrape_cmd_parse(sargc, sargv, true, &sc);
		if (!sc)
			return rc;
	}
	struct serve_extras extras = {sc, NULL};
	cfg.metrics_extra = serve_metrics;
	cfg.metrics_ctx = &extras;

	/* Signals are taken by this thread only: block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct pd_err err;
	if (pd_server_check_addr(cfg.addr, &err)) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--addr: %s", err.msg);
	}
	if (!cfg.tls_cert != !cfg.tls_key) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--tls-cert and --tls-key go together");
	}
	if (cfg.tls_client_ca && !cfg.tls_cert) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--tls-client-ca needs --tls-cert and --tls-key");
	}
	if (lim.max_memory > cfg.max_ingest_memory) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--max-upload-memory (%zu MiB) is over --max-ingest-memory (%zu MiB)",
				       lim.max_memory >> 20, cfg.max_ingest_memory >> 20);
	}
	/* sockets and day files: take the descriptors the hard limit allows */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct pd_store *st;
	bool ch = store_url && strcmp(store_url, "sqlite") != 0;
	if (store_url && ch && strncmp(store_url, "clickhouse://", 13) != 0) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--store: want sqlite or clickhouse://HOST:PORT/DATABASE, not \"%s\"",
				       store_url);
	}
	if ((store_pw_file || store_ch.cacert || store_ch.insecure) && !ch) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--store-password-file, --store-cacert and --store-insecure need "
						"--store clickhouse://...");
	}
	char pw[1024] = "";
	if (store_pw_file) {
		struct pd_buf b = PD_BUF_INIT(sizeof pw - 1);
		if (pd_buf_read_file(&b, store_pw_file, &err)) {
			pd_buf_free(&b);
			scrape_cmd_free(sc);
			cli_error("--store-password-file: %s", err.msg);
			return EXIT_INPUT;
		}
		size_t n = 0;
		while (n < b.len && b.ptr[n] != '\n' && b.ptr[n] != '\r')
			n++;
		memcpy(pw, b.ptr, n);
		pw[n] = 0;
		explicit_bzero(b.ptr, b.len);
		pd_buf_free(&b);
		store_ch.password = pw;
	}
	int orc = ch ? pd_store_open_clickhouse(store_url, &store_ch, &lim, &st, &err)
		     : pd_store_open_sqlite(dir, &lim, &st, &err);
	explicit_bzero(pw, sizeof pw);
	if (orc) {
		cli_error("%s", err.msg);
		scrape_cmd_free(sc);
		return orc == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
	}
	/* without --max-open-partitions: at most a third of the descriptors
	 * for day files (~6 each), the rest for sockets */
	if (!max_open_set && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (long)(rl.rlim_cur / 18) < max_open)
		max_open = rl.rlim_cur / 18 < 2 ? 2 : (long)(rl.rlim_cur / 18);
	if (!ch)
		pd_store_sqlite_set_max_open(st, (size_t)max_open);
	size_t dropped0 = run_retention(st, NULL, retention); /* before serving: no expired data is ever served */
	pd_store_warm(st, 2); /* the newest two days: where the first queries and uploads go */
	/* the scraper starts before the server, so that /metrics never sees it half made */
	if (sc) {
		int rc = scrape_cmd_start(sc, st, retention);
		if (rc) {
			scrape_cmd_free(sc);
			pd_store_close(st);
			return rc;
		}
	}
	if (ex.url && pd_exporter_start(&ex, st, &extras.ex, &err)) {
		cli_error("%s", err.msg);
		scrape_cmd_free(sc);
		pd_store_close(st);
		return EXIT_INPUT;
	}
	struct pd_server *srv;
	if (!no_ui && pd_web_open(pd_web_assets, pd_web_nassets, web_prefix, web_dir, &web, &err)) {
		cli_error("%s", err.msg);
		pd_exporter_free(extras.ex);
		scrape_cmd_free(sc);
		pd_store_close(st);
		return EXIT_INPUT;
	}
	cfg.web = web;
	if (pd_profmetrics_new(&pmc, &pm, &err)) {
		cli_error("%s", err.msg);
		pd_web_free(web);
		pd_exporter_free(extras.ex);
		scrape_cmd_free(sc);
		pd_store_close(st);
		return EXIT_INPUT;
	}
	cfg.profmetrics = pm;
	if (pd_server_start(&cfg, st, &srv, &err)) {
		cli_error("%s", err.msg);
		pd_web_free(web);
		pd_profmetrics_free(pm);
		pd_exporter_free(extras.ex);
		scrape_cmd_free(sc); /* stops the loop first */
		pd_store_close(st);
		return err.code == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
	}
	struct pd_metrics *m = pd_server_metrics(srv);
	if (retention) {
		atomic_fetch_add(&m->retention_runs, 1);
		atomic_fetch_add(&m->retention_dropped, dropped0);
	}
	pd_server_set_ready(srv, true);
	char rbuf[32] = "forever";
	if (retention)
		snprintf(rbuf, sizeof rbuf, "%lldh", (long long)(retention / 3600000000000LL));
	char qa[600], qd[1200];
	log_line("level=info msg=\"profd %s listening on port %u\" addr=%s %s=%s retention=%s max_body=%zu "
		 "max_merge_profiles=%zu scrape=%s export=%s",
		 PD_VERSION, pd_server_port(srv), pd_log_val(qa, sizeof qa, cfg.addr), ch ? "store" : "data_dir",
		 ch ? "clickhouse" : pd_log_val(qd, sizeof qd, dir), rbuf, cfg.max_body, cfg.max_merge,
		 sc ? "on" : "off", extras.ex ? "on" : "off");
	if (web)
		log_line("level=info msg=\"web UI at %s://%s:%u%s/\"%s", cfg.tls_cert ? "https" : "http",
			 pd_log_esc(qa, sizeof qa, ui_host(cfg.addr)), pd_server_port(srv), pd_web_prefix(web), web_dir ? " files=web-dir" : "");
	if (!cfg.tokens_path)
		log_line("level=warn msg=\"no --tokens: anyone who can reach %s may upload, read and delete profiles\"",
			 pd_log_esc(qa, sizeof qa, cfg.addr));

	int sig = 0;
	int64_t next_ret = pd_mono_ns() + interval, next_roll = rollup_every ? pd_mono_ns() + rollup_every : INT64_MAX,
		next_trim = pd_mono_ns() + TRIM_EVERY;
	while (!sig) {
		int64_t next = next_ret < next_roll ? next_ret : next_roll;
		int64_t wait = (next < next_trim ? next : next_trim) - pd_mono_ns();
		if (wait < 0)
			wait = 0;
		struct timespec tmo = {(time_t)(wait / 1000000000LL), (long)(wait % 1000000000LL)};
		int r = sigtimedwait(&set, NULL, &tmo);
		if (r == SIGHUP || hup_pending) {
			hup_pending = false;
			reload(srv);
		} else if (r > 0) {
			sig = r;
		} else if (errno == EAGAIN) {
			if (pd_mono_ns() >= next_ret) {
				run_retention(st, m, retention);
				next_ret = pd_mono_ns() + interval;
			}
			if (pd_mono_ns() >= next_roll) {
				run_rollups(st, &set, &sig);
				next_roll = pd_mono_ns() + rollup_every;
			}
			if (pd_mono_ns() >= next_trim) { /* see the mallopt calls above */
				malloc_trim(0);
				next_trim = pd_mono_ns() + TRIM_EVERY;
			}
		}
	}
	log_line("level=info msg=\"%s: shutting down, waiting up to %llds for requests in flight\"",
		 sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)(shutdown / 1000000000LL));
	/* the scraper first (it delivers what it has to the store), then the server, then the store */
	int ret = EXIT_OK;
	if (sc) {
		scrape_cmd_stop(sc);
		ret = scrape_cmd_finish(sc, true);
	}
	unsigned left = pd_server_stop(srv, (unsigned)(shutdown / 1000000000LL));
	scrape_cmd_free(sc); /* after the server: its /metrics reads the scraper */
	pd_exporter_free(extras.ex); /* likewise; before the store it reads */
	pd_web_free(web);
	pd_profmetrics_free(pm);
	pd_store_close(st);
	if (left)
		log_line("level=warn msg=\"%u request(s) were still running at the shutdown timeout\"", left);
	log_line("level=info msg=\"stopped\"");
	return ret;
}
