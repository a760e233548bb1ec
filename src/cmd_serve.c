/*
 * cmd_serve.c — `profd serve`: the collector. Embedded store under the data
 * directory, API v0 over HTTP, retention, graceful shutdown.
 *
 * The main thread owns the life cycle: it opens the store, applies retention
 * once, starts the server, then waits for SIGINT/SIGTERM with a timeout that
 * is the retention interval, so the same thread runs retention periodically
 * without a timer thread. On a signal: not ready, stop accepting, let
 * in-flight requests finish (--shutdown-timeout), close the store.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "version.h"
#include "../lib/http/params.h"
#include "../lib/http/server.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PD_COMMIT
#define PD_COMMIT ""
#endif
#ifndef PD_BUILD_TIME
#define PD_BUILD_TIME ""
#endif

#define DEFAULT_DATA_DIR "./profd-data"
#define DEFAULT_RETENTION "720h"
#define DEFAULT_RETENTION_INTERVAL "10m"
#define DEFAULT_SHUTDOWN_TIMEOUT "30s"

static const char usage_text[] =
	"Usage: profd serve [options] [--scrape SCRAPE-OPTIONS...]\n"
	"\n"
	"Run the collector: profiles arrive by POST /api/0/profiles (profefe's API: the\n"
	"profefe agent, kprofefe and `profd load` send them), are stored under the data\n"
	"directory (embedded SQLite, one file per UTC day), and are served back one by\n"
	"one or merged over any time range, e.g. for go tool pprof:\n"
	"\n"
	"  go tool pprof 'http://localhost:10100/api/0/profiles/merge?service=auth&type=cpu&from=now-1h&to=now'\n"
	"\n"
	"Options:\n"
	"      --addr ADDR               listen address, host:port, :port or [v6]:port;\n"
	"                                port 0 picks a free port (default " PD_SERVE_ADDR ")\n"
	"      --data-dir DIR            where the store lives, created if missing\n"
	"                                (default " DEFAULT_DATA_DIR ")\n"
	"      --retention DUR           keep profiles this long, e.g. 720h, 168h; 0 = forever\n"
	"                                (default " DEFAULT_RETENTION " = 30 days). Older profiles are no longer\n"
	"                                listed or merged; their day's file is deleted when the\n"
	"                                whole day is past the window\n"
	"      --retention-interval DUR  how often retention runs (default " DEFAULT_RETENTION_INTERVAL ")\n"
	"      --max-body SIZE           largest upload, as sent (default 32MiB); over it = 413\n"
	"      --max-decompressed SIZE   largest profile after gunzip (default 256MiB)\n"
	"      --max-samples N           most samples in one profile (default 16777216)\n"
	"      --max-merge-profiles N    most profiles in one merge (default 10000); over it =\n"
	"                                413 naming the limit, never a silent truncation\n"
	"      --timeout DUR             drop a connection idle this long (default 60s)\n"
	"      --max-connections N       concurrent connections (default 256)\n"
	"      --gzip-level N            compression of served profiles, 1-12 (default 1)\n"
	"      --shutdown-timeout DUR    on SIGTERM/SIGINT, wait this long for requests in\n"
	"                                flight (default " DEFAULT_SHUTDOWN_TIMEOUT ")\n"
	"  -q, --quiet                   no request log\n"
	"  -h, --help                    this help\n"
	"      --scrape ...              also pull profiles from Go pprof endpoints, into the\n"
	"                                store directly: everything after --scrape is\n"
	"                                `profd scrape` options (targets, --config, Kubernetes\n"
	"                                discovery, --types, --interval, --listen...; see\n"
	"                                `profd scrape --help`), except --collector and --once.\n"
	"                                Its series are on this server's /metrics too; on\n"
	"                                SIGTERM it stops first (delivering what it has\n"
	"                                fetched), then the server\n"
	"\n"
	"SIZE: bytes, or with a suffix KiB, MiB, GiB (also K, M, G). DUR: a Go duration\n"
	"(90s, 15m, 1h30m).\n"
	"\n"
	"Routes: POST/GET /api/0/profiles, GET /api/0/profiles/{id}[+{id}...],\n"
	"GET /api/0/profiles/merge, DELETE /api/0/profiles/{id}, GET /api/0/services,\n"
	"GET /api/0/version, /healthz, /readyz, /metrics. See docs/api.md.\n"
	"\n"
	"The request log (one line per request) and errors go to stderr; the first\n"
	"line says where the server listens.\n"
	"\n"
	"Example, a collector that scrapes the annotated pods of its cluster:\n"
	"\n"
	"  profd serve --data-dir /data --scrape -A --interval 60s\n"
	"\n"
	"Exit codes: 0 clean shutdown, 1 cannot start (address in use, data dir not\n"
	"writable, with --scrape: what makes profd scrape exit 1), 2 usage error.\n";

static int parse_dur(const char *opt, const char *s, int64_t *out)
{
	struct pd_err err;
	if (!strcmp(s, "0")) {
		*out = 0;
		return 0;
	}
	if (pd_api_parse_duration(s, strlen(s), out, &err) || *out < 0)
		return cli_usage_error("serve", "--%s: %s", opt,
				       *out < 0 ? "must not be negative" : err.msg);
	return 0;
}

static void log_line(const char *fmt, ...) PD_PRINTF(1, 2);
static void log_line(const char *fmt, ...)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char t[40];
	strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "ts=%s.%03ldZ ", t, ts.tv_nsec / 1000000);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

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
		log_line("level=error component=retention msg=\"%s\"", err.msg);
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

int cmd_serve(int argc, char **argv)
{
	struct pd_server_config cfg;
	pd_server_config_default(&cfg);
	cfg.version = PD_VERSION;
	cfg.commit = PD_COMMIT;
	cfg.build_time = PD_BUILD_TIME;
	cfg.log = stderr;
	const char *dir = DEFAULT_DATA_DIR;
	int64_t retention = 0, interval = 0, shutdown = 0, timeout = 0;
	parse_dur("retention", DEFAULT_RETENTION, &retention);
	parse_dur("retention-interval", DEFAULT_RETENTION_INTERVAL, &interval);
	parse_dur("shutdown-timeout", DEFAULT_SHUTDOWN_TIMEOUT, &shutdown);
	timeout = (int64_t)cfg.timeout_s * 1000000000;
	struct pd_pprof_limits lim = {0};
	pd_pprof_limits_default(&lim);
	lim.max_compressed = cfg.max_body;

	enum { O_ADDR = 256, O_DIR, O_RET, O_RETI, O_BODY, O_DEC, O_SAMP, O_MERGE, O_TMO, O_CONN, O_GZ, O_SHUT };
	static const struct option opts[] = {
		{"addr", required_argument, 0, O_ADDR},
		{"data-dir", required_argument, 0, O_DIR},
		{"retention", required_argument, 0, O_RET},
		{"retention-interval", required_argument, 0, O_RETI},
		{"max-body", required_argument, 0, O_BODY},
		{"max-decompressed", required_argument, 0, O_DEC},
		{"max-samples", required_argument, 0, O_SAMP},
		{"max-merge-profiles", required_argument, 0, O_MERGE},
		{"timeout", required_argument, 0, O_TMO},
		{"max-connections", required_argument, 0, O_CONN},
		{"gzip-level", required_argument, 0, O_GZ},
		{"shutdown-timeout", required_argument, 0, O_SHUT},
		{"quiet", no_argument, 0, 'q'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	/* everything after --scrape is the scraper's (profd scrape's options) */
	int sargc = 0;
	char **sargv = NULL;
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
	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case O_ADDR: cfg.addr = optarg; break;
		case O_DIR: dir = optarg; break;
		case O_RET:
			if (parse_dur("retention", optarg, &retention))
				return EXIT_USAGE;
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
		case 'q': cfg.log = NULL; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		default: return cli_usage_error("serve", "unknown option");
		}
	}
	if (optind < argc)
		return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
	cfg.timeout_s = (unsigned)(timeout / 1000000000LL);
	cfg.retention_ns = retention;
	struct scrape_cmd *sc = NULL;
	if (sargv) {
		int rc = scrape_cmd_parse(sargc, sargv, true, &sc);
		if (!sc)
			return rc;
		cfg.metrics_extra = scrape_cmd_metrics;
		cfg.metrics_ctx = sc;
	}

	/* Signals are taken by this thread only: block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct pd_err err;
	if (pd_server_check_addr(cfg.addr, &err)) {
		scrape_cmd_free(sc);
		return cli_usage_error("serve", "--addr: %s", err.msg);
	}
	struct pd_store *st;
	if (pd_store_open_sqlite(dir, &lim, &st, &err)) {
		cli_error("%s", err.msg);
		scrape_cmd_free(sc);
		return EXIT_INPUT;
	}
	size_t dropped0 = run_retention(st, NULL, retention); /* before serving: no expired data is ever served */
	/* the scraper starts before the server, so that /metrics never sees it half made */
	if (sc) {
		int rc = scrape_cmd_start(sc, st, retention);
		if (rc) {
			scrape_cmd_free(sc);
			pd_store_close(st);
			return rc;
		}
	}
	struct pd_server *srv;
	if (pd_server_start(&cfg, st, &srv, &err)) {
		cli_error("%s", err.msg);
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
	log_line("level=info msg=\"profd %s listening on port %u\" addr=%s data_dir=%s retention=%s max_body=%zu "
		 "max_merge_profiles=%zu scrape=%s",
		 PD_VERSION, pd_server_port(srv), cfg.addr, dir, rbuf, cfg.max_body, cfg.max_merge, sc ? "on" : "off");

	int sig = 0;
	while (!sig) {
		struct timespec tmo = {(time_t)(interval / 1000000000LL), (long)(interval % 1000000000LL)};
		int r = sigtimedwait(&set, NULL, &tmo);
		if (r > 0)
			sig = r;
		else if (errno == EAGAIN)
			run_retention(st, m, retention);
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
	pd_store_close(st);
	if (left)
		log_line("level=warn msg=\"%u request(s) were still running at the shutdown timeout\"", left);
	log_line("level=info msg=\"stopped\"");
	return ret;
}
