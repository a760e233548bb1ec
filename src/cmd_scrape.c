/*
 * cmd_scrape.c — `profd scrape`: pull Go pprof endpoints and push the
 * profiles to a collector (profd serve or profefe). This file is the static
 * discovery source (--target, --config: the line format, or YAML parsed by
 * lib/scrape/scrape_config.c, whose global: is resolved with the flags before
 * anything else is built), the wiring of Kubernetes discovery
 * (lib/scrape/kube.c over lib/kube: kubeconfig or in-cluster, -n/-A/-l; the
 * config's kubernetes entries) and the process around the library loop
 * (lib/scrape): flags, signals, the --once summary and exit code.
 *
 * Threads: main blocks SIGINT/SIGTERM before anything starts, runs the
 * scrape loop in a thread of its own (and, continuous with Kubernetes, the
 * list+watch in another) and waits for a signal or for the loop to end
 * (--once); a signal stops discovery and asks the loop to stop, which
 * delivers what is queued for up to --flush-timeout.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "flags.h"
#include "version.h"
#include "../lib/http/auth.h"
#include "../lib/http/params.h"
#include "../lib/kube/kube.h"
#include "../lib/scrape/scrape.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Long-only flag ids (the short ones are their letters). */
enum {
	O_COLL = 256, O_TARGET, O_SERVICE, O_CONFIG, O_ONCE, O_INTERVAL, O_CPU, O_TYPES, O_TIMEOUT, O_CONC, O_QUEUE,
	O_STATE, O_RAW, O_LISTEN, O_FLUSH, O_MAXBODY, O_KUBE, O_KUBECONFIG, O_CONTEXT, O_PODLABELS, O_CPUCONC,
	O_TOKEN_FILE, O_CCACERT, O_CINSECURE, O_TCA, O_TINSECURE, O_LOG_FORMAT, O_LOG_LEVEL
};

/* The flags, one table per section of --help (scrape_help_texts: the text
 * before each). */
static const struct cli_flag scrape_flags_targets[] = {
	{"target", 0, O_TARGET, "URL",
	 "a pprof endpoint: http://host:6060/debug/pprof, or\n"
	 "host:port (= http://host:port/debug/pprof). Repeatable.\n"
	 "https:// too (--target-ca). A query is sent with every\n"
	 "type: http://host:6060/debug/pprof?debug=1 (Go's legacy\n"
	 "text formats) asks for BASE/heap?debug=1, ...",
	 0},
	{"service", 0, O_SERVICE, "NAME",
	 "service of the --target before it (before any --target:\nthe default of all targets). Required.", 0},
	{"label", 'L', 'L', "KEY=VALUE",
	 "a label of every profile of the --target before it\n"
	 "(before any --target: of all targets). Repeatable.\n"
	 "instance=HOST:PORT is added unless given.",
	 0},
	{"config", 0, O_CONFIG, "FILE",
	 "a YAML config (FILE.yaml/.yml, or a first line like\n"
	 "\"key:\"): global: defaults, scrape_configs: groups of\n"
	 "static targets and kubernetes entries, each with its\n"
	 "own types, interval, cpu_duration, timeout, labels,\n"
	 "label_keep, params (URL parameters: {debug: 1})\n"
	 "(examples/scrape.yaml; docs/scraping.md).\n"
	 "Precedence: global: < flags < a group's own keys.\n"
	 "Or static targets, one per line:\n"
	 "  URL [service=NAME] [types=cpu,heap] [KEY=VALUE]...\n"
	 "(KEY=VALUE words are labels; '#' starts a comment)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag scrape_flags_kube[] = {
	{"kubernetes", 0, O_KUBE, NULL,
	 "discover pods (the kubeconfig kubectl would use, else\nthe pod's service account)", 0},
	{"kubeconfig", 0, O_KUBECONFIG, "FILE",
	 "kubeconfig (default $KUBECONFIG, else ~/.kube/config;\nin a pod without one: the service account)", 0},
	{"context", 0, O_CONTEXT, "NAME", "kubeconfig context (default its current-context)", 0},
	{"namespace", 'n', 'n', "NS", "only pods in NS (default: the context's namespace; in a\npod, its own)", 0},
	{"all-namespaces", 'A', 'A', NULL, "pods in every namespace", 0},
	{"selector", 'l', 'l', "SELECTOR", "only pods with these labels (app=web,tier!=db, ...)", 0},
	{"pod-labels", 0, O_PODLABELS, "LIST",
	 "pod labels copied to the profiles when a pod has them\n"
	 "(default app,version,app.kubernetes.io/name,\n"
	 "app.kubernetes.io/version; \"\" = none)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag scrape_flags_fetch[] = {
	{"types", 0, O_TYPES, "LIST",
	 "profile types, comma-separated, or all (default):\ncpu heap allocs block mutex goroutine threadcreate", 0},
	{"interval", 0, O_INTERVAL, "DUR", "how often each target is scraped (default 60s)", 0},
	{"cpu-duration", 0, O_CPU, "DUR", "length of each CPU profile, whole seconds (default 10s)", 0},
	{"timeout", 0, O_TIMEOUT, "DUR", "per request; a CPU profile gets --cpu-duration more\n(default 10s)", 0},
	{"concurrency", 0, O_CONC, "N",
	 "requests in flight for the types other than cpu\n(default 64; each takes milliseconds)", 0},
	{"cpu-concurrency", 0, O_CPUCONC, "N",
	 "CPU profiles in flight; each holds its slot for\n"
	 "--cpu-duration. Default: enough for every target's to\n"
	 "start on time, ceil(1.25 x the sum over the targets of\n"
	 "cpu-duration / interval) + 4, at least --concurrency\n"
	 "(1,000 targets at 60s / 10s: 213)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag scrape_flags_fetch_more[] = {
	{"max-body", 0, O_MAXBODY, "SIZE", "largest profile accepted from a target (default 64MiB)", 0},
	{"target-ca", 0, O_TCA, "FILE",
	 "PEM CA bundle that verifies https:// targets (default:\nthe system's CAs)", 0},
	{"target-insecure", 0, O_TINSECURE, NULL, "do not verify targets' certificates (tests only)", 0},
	{"state-dir", 0, O_STATE, "DIR",
	 "keep the last snapshot of each cumulative profile (allocs,\nblock, mutex) here, so that --once runs store deltas",
	 0},
	{"save-raw", 0, O_RAW, "DIR",
	 "also write every fetched profile, as received, to\nDIR/<target>.<type>.<unix ns>.pb.gz (debugging, audits)", 0},
	{"once", 0, O_ONCE, NULL, "one pass over all targets, a summary table, exit", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag scrape_flags_delivery[] = {
	{"collector", 0, O_COLL, "URL",
	 "where profiles go (default $PROFD_COLLECTOR, else\n" PD_SCRAPE_COLLECTOR ")", 0},
	{"token-file", 0, O_TOKEN_FILE, "FILE",
	 "the collector's token (default $PROFD_TOKEN), for a\ncollector run with --tokens (write scope)", 0},
	{"collector-cacert", 0, O_CCACERT, "FILE", "PEM CA of an https:// collector (default: the system's)", 0},
	{"collector-insecure", 0, O_CINSECURE, NULL, "do not verify the collector's certificate (tests only)", 0},
	{"queue-size", 0, O_QUEUE, "SIZE",
	 "memory for profiles waiting for the collector (default\n64MiB); when full the oldest are dropped (counted)", 0},
	{"flush-timeout", 0, O_FLUSH, "DUR", "how long to keep delivering at exit (default 10s)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag scrape_flags_operation[] = {
	{"listen", 0, O_LISTEN, "ADDR",
	 "serve /metrics, /healthz and /targets on ADDR\n(host:port, :port; port 0 = any free port; default off)", 0},
	{"quiet", 'q', 'q', NULL, "log only warnings and errors", 0},
	{"log-format", 0, O_LOG_FORMAT, "FORMAT", "logfmt (default) or json: one JSON object per line", 0},
	{"log-level", 0, O_LOG_LEVEL, "LEVEL", "debug, info (default), warn or error", 0},
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* The headings and text of --help before each of scrape_doc's tables. */
static const char *const scrape_help_texts[] = {
    "Targets:\n",
    "\n"
    "Kubernetes discovery (pods annotated profefe.com/enable: \"true\"; combines with\n"
    "the static targets). On when any of these flags is given, when --config has\n"
    "kubernetes entries, or when running in a pod (KUBERNETES_SERVICE_HOST set)\n"
    "without static targets:\n",
    "  A pod is scraped when it is Running, has a pod IP and is not being deleted, at\n"
    "  http://PODIP:PORT/PATH, as its annotations say:\n"
    "    profefe.com/port     port number or container port name (default 6060)\n"
    "    profefe.com/path     where the pprof handlers are (default /debug/pprof)\n"
    "    profefe.com/service  default: the owning Deployment, StatefulSet, DaemonSet,\n"
    "                         CronJob... (the pod itself if it has no owner)\n"
    "  Labels: namespace, pod, container, node, the --pod-labels, and -L given before\n"
    "  any --target. Needs RBAC get, list, watch on pods.\n"
    "\n"
    "Scraping:\n",
    "  A (target, type) still waiting for a slot, or still running, at its next due\n"
    "  time misses that round: counted (profd_scrape_missed_total) and logged.\n",
    "\n"
    "Delivery:\n",
    "  `profd serve ... --scrape OPTIONS` runs this scraper inside the collector, storing\n"
    "  directly (no --collector, no --once there).\n"
    "\n"
    "Operation:\n",
};
const struct cli_doc scrape_doc = {
    "scrape",
    "Usage: profd scrape [options] --target URL [--service NAME] [-L KEY=VALUE]... [--target ...]\n"
    "       profd scrape [options] --config FILE\n"
    "       profd scrape [options] [--kubeconfig FILE] [--context NAME] [-n NS | -A] [-l SELECTOR]\n"
    "\n"
    "Pull profiles from Go services that serve net/http/pprof and push them to a\n"
    "collector (`profd serve`, or a profefe collector) through API v0. Without\n"
    "--once it runs until SIGTERM/SIGINT and scrapes every target each --interval,\n"
    "each target at its own moment within the interval (a hash of the target, so\n"
    "targets do not all hit at once); with --once it scrapes every target once,\n"
    "delivers, prints a table and exits (for a cron job).\n"
    "\n",
    {scrape_flags_targets, scrape_flags_kube, scrape_flags_fetch, scrape_flags_fetch_more, scrape_flags_delivery,
     scrape_flags_operation},
    "\n"
    "SIZE: bytes, or with a suffix KiB, MiB, GiB (also K, M, G). DUR: a Go duration\n"
    "(90s, 15m, 1h30m).\n"
    "\n"
    "Cumulative profiles: Go's allocs, block and mutex count since the process\n"
    "started. The continuous scraper stores what happened between two scrapes\n"
    "(like go tool pprof -base); the first scrape of a target is only the base.\n"
    "--once without --state-dir stores them as they are, labelled cumulative=true.\n"
    "heap, goroutine and threadcreate are stored as they are (snapshots), cpu is\n"
    "the last --cpu-duration. See docs/scraping.md.\n"
    "\n"
    "Examples:\n"
    "  # one pass over two services, into a local collector\n"
    "  profd scrape --once --target 10.0.0.7:6060 --service auth -L env=prod \\\n"
    "               --target 10.0.0.8:6060 --service search\n"
    "  # every minute, cpu and heap only, metrics on :9100\n"
    "  profd scrape --collector http://profd:10100 --config targets.txt --types cpu,heap --listen :9100\n"
    "  # groups of targets with their own types, intervals and labels (YAML)\n"
    "  profd scrape --collector http://profd:10100 --config scrape.yaml --listen :9100\n"
    "  # a cron job that stores allocation deltas between its runs\n"
    "  profd scrape --once --state-dir /var/lib/profd-scrape --config targets.txt\n"
    "  # every annotated pod of the cluster (in a pod: the service account)\n"
    "  profd scrape -A --collector http://profd:10100 --listen :9100\n"
    "  # one pass over the annotated pods of namespace shop, from a laptop\n"
    "  profd scrape --once --kubeconfig ~/.kube/config --context prod -n shop -l app=web\n"
    "  # an https:// target with a private CA; one read in Go's text formats\n"
    "  profd scrape --once --target-ca ca.pem --target https://10.0.0.9:6060 --service pay \\\n"
    "               --target 'http://10.0.0.10:6060/debug/pprof?debug=1' --service legacy\n"
    "\n"
    "Logs (ts=... level=... msg=\"...\") go to stderr; --once prints its table on stdout.\n"
    "\n"
    "Exit codes: 0 every profile scraped and delivered (--once; a first snapshot kept\n"
    "as the delta base and an empty profile count as done), or a clean shutdown;\n"
    "1 a target failed or a profile was not delivered (--once), or cannot start\n"
    "(--listen address in use, --state-dir not writable, unreadable --config, no\n"
    "usable kubeconfig; --once: the pod list failed); 2 usage error (a bad --config\n"
    "too: FILE:LINE:COLUMN: key: what).\n",
    28,
    scrape_help_texts,
};

/* "scrape", or "serve" for serve --scrape: whose --help a usage error points to */
static const char *cmdname = "scrape";

/* A positive Go duration; 0 or negative is a usage error. */
#define parse_dur(opt, s, out) cli_parse_dur(cmdname, opt, s, false, out)

#define log_line cli_log

/* The static targets as given on the command line. */
struct spec {
	const char *url, *service;
	struct pd_kv *labels;
	size_t nlabels, cap;
};

static int add_label(struct pd_kv **v, size_t *n, size_t *cap, char *arg)
{
	char *eq = strchr(arg, '=');
	if (!eq || eq == arg)
		return cli_usage_error(cmdname, "-L: want KEY=VALUE, got '%s'", arg);
	if (eq - arg == 7 && !memcmp(arg, "service", 7)) /* a selector's service= is the profile's service */
		return cli_usage_error(cmdname, "-L %s: service is not a label: --service NAME sets the service", arg);
	if (pd_grow((void **)v, cap, *n + 1, sizeof **v))
		return EXIT_INPUT;
	*eq = 0; /* argv strings are ours to cut */
	(*v)[*n].key = arg;
	(*v)[*n].value = eq + 1;
	(*n)++;
	return 0;
}

/* "a, b,c" -> strings cut in place (s is ours); empty elements skipped. */
static int split_list(char *s, char ***out, size_t *n)
{
	size_t cap = 0;
	*n = 0;
	for (char *save = NULL, *p = strtok_r(s, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		while (*p == ' ' || *p == '\t')
			p++;
		size_t l = strlen(p);
		while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
			p[--l] = 0;
		if (!l)
			continue;
		if (pd_grow((void **)out, &cap, *n + 1, sizeof **out))
			return -1;
		(*out)[(*n)++] = p;
	}
	return 0;
}

struct runner {
	struct pd_scraper *s;
	struct pd_err err;
	int rc;
	atomic_bool done;
};

static void *run_thread(void *arg)
{
	struct runner *r = arg;
	r->rc = pd_scraper_run(r->s, &r->err);
	atomic_store(&r->done, true);
	return NULL;
}

/* Everything `profd scrape` options make, from parsing to the end. */
struct scrape_cmd {
	struct pd_scrape_config cfg;
	bool in_serve;
	const char *token_file; /* --token-file */
	char *token;            /* the collector's token (malloc'd), or NULL */
	const char *config_file, *listen_addr, *default_service;
	struct pd_kv *dlabels;
	size_t ndl, capdl;
	struct spec *specs;
	size_t nspecs, capspecs;
	struct pd_scrape_targets targets;
	struct pd_scraper *s;
	struct pd_scrape_http *http;
	struct pd_buf cfgtext;
	/* --config in YAML: its targets, kubernetes entries and global: (resolved with the flags) */
	bool yaml;
	struct pd_scrape_file file;
	unsigned given; /* PD_SCF_*: flags that win over the file's global: */
	struct pd_kv *all;
	char **norm;
	/* Kubernetes discovery */
	bool kube, all_ns;
	const char *kubeconfig, *kcontext, *kns, *ksel;
	char *pod_labels_arg, **pod_labels;
	size_t npod_labels;
	char default_pod_labels[sizeof PD_SCRAPE_KUBE_POD_LABELS]; /* split_list cuts it */
	struct pd_kube_config *kcfg;
	struct pd_kube_client *kclient;
	struct pd_scrape_kube *kd;
	size_t nkube;
	/* the loop */
	struct runner r;
	pthread_t th;
	bool running;
};

void scrape_cmd_free(struct scrape_cmd *c)
{
	if (!c)
		return;
	if (c->running) {
		pd_scrape_kube_stop(c->kd);
		pd_scraper_stop(c->s);
		pthread_join(c->th, NULL);
	}
	pd_scrape_http_stop(c->http);
	pd_scrape_kube_free(c->kd);
	pd_scraper_free(c->s);
	pd_scrape_file_free(&c->file); /* after the source that borrows its rules */
	pd_kube_client_free(c->kclient);
	pd_kube_config_free(c->kcfg);
	free(c->pod_labels);
	pd_scrape_targets_free(&c->targets);
	if (c->norm)
		for (size_t i = 0; i < c->nspecs; i++)
			free(c->norm[i]);
	free(c->norm);
	free(c->all);
	for (size_t i = 0; i < c->nspecs; i++)
		free(c->specs[i].labels);
	free(c->specs);
	free(c->dlabels);
	pd_buf_free(&c->cfgtext);
	if (c->token)
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	free(c);
}

/* serve --config's scrape: section, given as the scraper's --config text */
static const char *preset_name;
static const char *preset_text;
static size_t preset_len;

void scrape_cmd_preset_config(const char *name, const char *text, size_t n)
{
	preset_name = name;
	preset_text = text;
	preset_len = n;
}

int scrape_cmd_parse(int argc, char **argv, bool in_serve, struct scrape_cmd **out)
{
	*out = NULL;
	cmdname = in_serve ? "serve" : "scrape";
	struct scrape_cmd *sc = calloc(1, sizeof *sc);
	if (!sc) {
		cli_error("out of memory");
		return EXIT_INPUT;
	}
	sc->in_serve = in_serve;
	struct pd_scrape_config *cfg = &sc->cfg;
	pd_scrape_config_default(cfg);
	const char *env = getenv("PROFD_COLLECTOR");
	if (env && *env && !in_serve)
		cfg->collector = env;
	cfg->log = stderr;
	sc->cfgtext = (struct pd_buf)PD_BUF_INIT(16u << 20);
	memcpy(sc->default_pod_labels, PD_SCRAPE_KUBE_POD_LABELS, sizeof sc->default_pod_labels);
	int ret = EXIT_USAGE;

	int c;
	long v;
	struct pd_err err;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &scrape_doc))
		goto out;
	optind = in_serve ? 0 : 1; /* 0: getopt starts afresh on this other argv */
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case O_KUBE: sc->kube = true; break;
		case O_KUBECONFIG:
			if (!*optarg) {
				cli_usage_error(cmdname, "--kubeconfig must not be empty");
				goto out;
			}
			sc->kubeconfig = optarg;
			sc->kube = true;
			break;
		case O_CONTEXT:
			if (!*optarg) {
				cli_usage_error(cmdname, "--context must not be empty");
				goto out;
			}
			sc->kcontext = optarg;
			sc->kube = true;
			break;
		case 'n':
			if (!pd_scrape_dns_label(optarg)) {
				cli_usage_error(cmdname,
						"-n: \"%s\" is not a namespace name (lower case letters, digits, '-')", optarg);
				goto out;
			}
			sc->kns = optarg;
			sc->kube = true;
			break;
		case 'A': sc->all_ns = sc->kube = true; break;
		case 'l':
			sc->ksel = optarg;
			sc->kube = true;
			break;
		case O_PODLABELS:
			sc->pod_labels_arg = optarg;
			sc->kube = true;
			break;
		case O_CCACERT: cfg->cacert = optarg; break;
		case O_CINSECURE: cfg->insecure = true; break;
		case O_TCA: {
			FILE *f = *optarg ? fopen(optarg, "r") : NULL;
			if (!f) {
				cli_error("%s: --target-ca %s: %s", cmdname, optarg, *optarg ? strerror(errno) : "empty name");
				ret = EXIT_INPUT;
				goto out;
			}
			fclose(f);
			cfg->target_ca = optarg;
			break;
		}
		case O_TINSECURE: cfg->target_insecure = true; break;
		case O_TOKEN_FILE:
			if (in_serve) {
				cli_usage_error(cmdname, "--token-file: not with serve --scrape: profiles go straight to the store");
				goto out;
			}
			sc->token_file = optarg;
			break;
		case O_COLL:
			if (in_serve) {
				cli_usage_error(cmdname, "--collector: not with serve --scrape: profiles go straight to the store");
				goto out;
			}
			cfg->collector = optarg;
			break;
		case O_TARGET:
			if (pd_grow((void **)&sc->specs, &sc->capspecs, sc->nspecs + 1, sizeof *sc->specs)) {
				ret = EXIT_INPUT;
				goto out;
			}
			memset(&sc->specs[sc->nspecs], 0, sizeof *sc->specs);
			sc->specs[sc->nspecs++].url = optarg;
			break;
		case O_SERVICE:
			if (!*optarg) {
				cli_usage_error(cmdname, "--service must not be empty");
				goto out;
			}
			if (sc->nspecs)
				sc->specs[sc->nspecs - 1].service = optarg;
			else
				sc->default_service = optarg;
			break;
		case 'L':
			if (sc->nspecs) {
				struct spec *sp = &sc->specs[sc->nspecs - 1];
				if ((ret = add_label(&sp->labels, &sp->nlabels, &sp->cap, optarg)))
					goto out;
			} else if ((ret = add_label(&sc->dlabels, &sc->ndl, &sc->capdl, optarg))) {
				goto out;
			}
			ret = EXIT_USAGE;
			break;
		case O_CONFIG: sc->config_file = optarg; break;
		case O_ONCE:
			if (in_serve) {
				cli_usage_error(cmdname, "--once: not with serve --scrape: profiles go straight to the store");
				goto out;
			}
			cfg->once = true;
			break;
		case O_INTERVAL:
			if (parse_dur("interval", optarg, &cfg->interval_ns))
				goto out;
			if (cfg->interval_ns < 1000000000LL) {
				cli_usage_error(cmdname, "--interval must be at least 1s");
				goto out;
			}
			sc->given |= PD_SCF_INTERVAL;
			break;
		case O_CPU:
			if (parse_dur("cpu-duration", optarg, &cfg->cpu_ns))
				goto out;
			if (cfg->cpu_ns % 1000000000LL) {
				cli_usage_error(cmdname,
						"--cpu-duration must be whole seconds (Go's ?seconds= takes an integer), got '%s'",
						optarg);
				goto out;
			}
			sc->given |= PD_SCF_CPU;
			break;
		case O_TYPES:
			if (pd_scrape_parse_types(optarg, &cfg->types, &err)) {
				cli_usage_error(cmdname, "--types: %s", err.msg);
				goto out;
			}
			sc->given |= PD_SCF_TYPES;
			break;
		case O_TIMEOUT:
			if (parse_dur("timeout", optarg, &cfg->timeout_ns))
				goto out;
			if (cfg->timeout_ns < 1000000LL) {
				cli_usage_error(cmdname, "--timeout must be at least 1ms");
				goto out;
			}
			sc->given |= PD_SCF_TIMEOUT;
			break;
		case O_CONC:
			if ((v = cli_parse_count(optarg)) <= 0 || v > 10000) {
				cli_usage_error(cmdname, "--concurrency: want 1..10000, got '%s'", optarg);
				goto out;
			}
			cfg->concurrency = (unsigned)v;
			break;
		case O_CPUCONC:
			if ((v = cli_parse_count(optarg)) <= 0 || v > 100000) {
				cli_usage_error(cmdname, "--cpu-concurrency: want 1..100000, got '%s'", optarg);
				goto out;
			}
			cfg->cpu_concurrency = (unsigned)v;
			break;
		case O_QUEUE:
			if (cli_parse_size(optarg, &cfg->queue_bytes) || !cfg->queue_bytes) {
				cli_usage_error(cmdname, "--queue-size: bad size '%s' (e.g. 64MiB)", optarg);
				goto out;
			}
			break;
		case O_MAXBODY:
			if (cli_parse_size(optarg, &cfg->max_body) || !cfg->max_body) {
				cli_usage_error(cmdname, "--max-body: bad size '%s' (e.g. 64MiB)", optarg);
				goto out;
			}
			break;
		case O_STATE: cfg->state_dir = optarg; break;
		case O_RAW: cfg->save_raw_dir = optarg; break;
		case O_LISTEN: sc->listen_addr = optarg; break;
		case O_FLUSH:
			if (parse_dur("flush-timeout", optarg, &cfg->flush_ns))
				goto out;
			break;
		case 'q': cfg->quiet = true; break;
		case O_LOG_FORMAT:
		case O_LOG_LEVEL:
			if (cli_log_option(cmdname, c == O_LOG_LEVEL, optarg))
				goto out;
			break;
		case 'h':
			cli_flags_help(&scrape_doc);
			ret = EXIT_OK;
			goto out;
		default: cli_bad_option(cmdname, c, argv); goto out;
		}
	}
	if (optind < argc) {
		cli_usage_error(cmdname, "unexpected argument '%s' (targets are given with --target URL)", argv[optind]);
		goto out;
	}
	if (!cfg->once && cfg->cpu_ns >= cfg->interval_ns && (cfg->types & (1u << PD_ST_CPU))) {
		cli_usage_error(cmdname, "--cpu-duration (%llds) must be shorter than --interval (%llds)",
				(long long)(cfg->cpu_ns / 1000000000LL), (long long)(cfg->interval_ns / 1000000000LL));
		goto out;
	}
	if (!in_serve) {
		const char *cl = cfg->collector;
		if (strncmp(cl, "http://", 7) && strncmp(cl, "https://", 8)) {
			cli_usage_error(cmdname, "--collector: want an http:// or https:// URL, got '%s'", cl);
			goto out;
		}
		if (pd_token_read(sc->token_file, getenv("PROFD_TOKEN"), &sc->token, &err)) {
			cli_usage_error(cmdname, "%s", err.msg);
			goto out;
		}
		cfg->token = sc->token;
	}

	/* --config: read it now; a YAML file is parsed now too, since its global:
	 * gives defaults to everything below (the flags given win over it) */
	if (preset_text && sc->config_file) {
		cli_usage_error(cmdname, "--scrape --config %s and the scrape: section of %s: give one", sc->config_file,
				preset_name);
		goto out;
	}
	if (preset_text) { /* serve --config FILE's scrape: section, its lines where they are in FILE */
		sc->config_file = preset_name;
		if (pd_buf_append(&sc->cfgtext, preset_text, preset_len) || pd_buf_append(&sc->cfgtext, "", 1)) {
			cli_error("%s: out of memory", cmdname);
			ret = EXIT_INPUT;
			goto out;
		}
		sc->yaml = true;
	} else if (sc->config_file) {
		if (pd_buf_read_file(&sc->cfgtext, sc->config_file, &err) || pd_buf_append(&sc->cfgtext, "", 1)) {
			cli_error("%s: --config: %s", cmdname, err.msg);
			ret = EXIT_INPUT;
			goto out;
		}
		size_t len = sc->cfgtext.len - 1;
		sc->yaml = pd_scrape_config_is_yaml(sc->config_file, (const char *)sc->cfgtext.ptr, len);
	}
	if (sc->yaml) {
		struct pd_scrape_cfg_flags fl = {
			.service = sc->default_service,
			.labels = sc->dlabels,
			.nlabels = sc->ndl,
			.types = cfg->types,
			.interval_ns = cfg->interval_ns,
			.cpu_ns = cfg->cpu_ns,
			.timeout_ns = cfg->timeout_ns,
			.given = sc->given,
			.once = cfg->once,
		};
		if (pd_scrape_parse_yaml(sc->config_file, sc->cfgtext.ptr, sc->cfgtext.len - 1, &fl, &sc->file, &err)) {
			if (err.code == PD_ENOMEM) {
				cli_error("%s: --config: %s", cmdname, err.msg);
				ret = EXIT_INPUT;
			} else {
				cli_usage_error(cmdname, "--config %s", err.msg);
			}
			goto out;
		}
		cfg->types = sc->file.global.types;
		cfg->interval_ns = sc->file.global.interval_ns;
		cfg->cpu_ns = sc->file.global.cpu_ns;
		cfg->timeout_ns = sc->file.global.timeout_ns;
		if (sc->file.nrules)
			sc->kube = true; /* kubernetes entries turn discovery on */
		char q[1200];
		if (!cfg->quiet)
			log_line("level=info component=scrape msg=\"config %s: %zu static target(s), %zu kubernetes "
				 "entr%s\"",
				 pd_log_esc(q, sizeof q, sc->config_file), sc->file.targets.n, sc->file.nrules, sc->file.nrules == 1 ? "y" : "ies");
	}
	/* the labels of every target (-L before any --target; merged with global: labels) */
	const struct pd_kv *dl = sc->yaml ? sc->file.global.labels : sc->dlabels;
	size_t ndl = sc->yaml ? sc->file.global.nlabels : sc->ndl;

	/* in a pod with nothing else to scrape: zero config */
	{
		const char *h = getenv("KUBERNETES_SERVICE_HOST");
		if (!sc->kube && !sc->nspecs && !sc->config_file && h && *h)
			sc->kube = true;
	}
	if (!sc->pod_labels_arg)
		sc->pod_labels_arg = sc->default_pod_labels;
	if (sc->kube && split_list(sc->pod_labels_arg, &sc->pod_labels, &sc->npod_labels)) {
		ret = EXIT_INPUT;
		goto out;
	}
	for (size_t i = 0; i < sc->npod_labels; i++)
		if (!strcmp(sc->pod_labels[i], "service")) { /* as -L service=... */
			ret = cli_usage_error(cmdname,
					      "--pod-labels: service is not a label: the profiles' service comes from the "
					      "pod's profefe.com/service annotation (or its workload), and a selector's "
					      "service= matches that; leave it out of --pod-labels");
			goto out;
		}

	/* the static discovery source: --target and --config into one list */
	sc->norm = calloc(sc->nspecs + 1, sizeof *sc->norm);
	if (!sc->norm) {
		ret = EXIT_INPUT;
		goto out;
	}
	for (size_t i = 0; i < sc->nspecs; i++) {
		struct spec *sp = &sc->specs[i];
		if (pd_scrape_normalize_url(sp->url, &sc->norm[i], &err)) {
			cli_usage_error(cmdname, "--target: %s", err.msg);
			goto out;
		}
		const char *service = sp->service ? sp->service : sc->default_service;
		if (!service) {
			cli_usage_error(cmdname, "target %s has no service: add --service NAME after it (or before the "
						 "first --target for all)",
					sc->norm[i]);
			goto out;
		}
		size_t n = 0;
		free(sc->all);
		sc->all = calloc(ndl + sp->nlabels + 1, sizeof *sc->all);
		if (!sc->all) {
			ret = EXIT_INPUT;
			goto out;
		}
		struct pd_kv *all = sc->all;
		bool has_instance = false;
		for (size_t k = 0; k < ndl; k++) {
			has_instance |= !strcmp(dl[k].key, "instance");
			all[n++] = dl[k];
		}
		for (size_t k = 0; k < sp->nlabels; k++) { /* the target's -L over the defaults' (one env, not two) */
			has_instance |= !strcmp(sp->labels[k].key, "instance");
			size_t at = 0;
			while (at < n && strcmp(all[at].key, sp->labels[k].key))
				at++;
			all[at == n ? n++ : at] = sp->labels[k];
		}
		char hp[256];
		if (!has_instance) {
			all[n].key = (char *)"instance";
			all[n++].value = (char *)pd_scrape_url_hostport(sc->norm[i], hp, sizeof hp);
		}
		if (sc->yaml && sc->file.global.has_keep)
			n = pd_scrape_labels_keep(all, n, sc->file.global.keep, sc->file.global.nkeep);
		if (pd_scrape_targets_add(&sc->targets, sc->norm[i], sc->norm[i], service, all, n, 0, &err)) {
			cli_usage_error(cmdname, "--target: %s", err.msg);
			goto out;
		}
	}
	if (sc->yaml) {
		for (size_t i = 0; i < sc->file.targets.n; i++)
			if (pd_scrape_targets_copy(&sc->targets, &sc->file.targets.v[i], &err)) {
				cli_usage_error(cmdname, "--config %s: %s (with --target and in the file)", sc->config_file,
						err.msg);
				goto out;
			}
	} else if (sc->config_file) {
		if (pd_scrape_parse_config((const char *)sc->cfgtext.ptr, sc->config_file, sc->default_service,
					   sc->dlabels, sc->ndl, &sc->targets, &err)) {
			cli_usage_error(cmdname, "--config %s", err.msg);
			goto out;
		}
	}
	if (!sc->targets.n && !sc->kube) {
		cli_usage_error(cmdname, "no targets: give --target URL --service NAME, or --config FILE, or -A, "
					 "-n NS or --kubernetes for the annotated pods of a Kubernetes cluster");
		goto out;
	}
	if (sc->kube) {
		struct pd_kube_opts ko = {.mode = PD_KUBE_AUTO, .kubeconfig = sc->kubeconfig, .context = sc->kcontext};
		/* the service-account directory, for tests (default: the real one) */
		ko.sa_dir = getenv("PROFD_KUBE_SA_DIR");
		ret = EXIT_INPUT;
		if (pd_kube_config_load(&ko, &sc->kcfg, &err)) {
			cli_error("%s: kubernetes: %s", cmdname, err.msg);
			goto out;
		}
		struct pd_kube_client_opts co = {.timeout_ms = 30000, .user_agent = "profd-scrape/" PD_VERSION};
		if (pd_kube_client_new(sc->kcfg, &co, &sc->kclient, &err)) {
			cli_error("%s: kubernetes: %s", cmdname, err.msg);
			goto out;
		}
		struct pd_kube_config *kcfg = sc->kcfg;
		/* without -n/-A: the namespaces the config's kubernetes entries name */
		if (!sc->all_ns && !sc->kns && sc->yaml) {
			sc->all_ns = sc->file.kube_all;
			sc->kns = sc->file.kube_namespace;
		}
		if (!sc->all_ns && !sc->kns)
			sc->kns = kcfg->namespace && *kcfg->namespace ? kcfg->namespace : "default";
		if (sc->all_ns)
			sc->kns = NULL;
		for (size_t i = 0; sc->kns && i < sc->file.nrules; i++) {
			const struct pd_scrape_kube_rule *r = &sc->file.rules[i];
			bool watched = !r->nnamespaces;
			for (size_t k = 0; !watched && k < r->nnamespaces; k++)
				watched = !strcmp(r->namespaces[k], sc->kns);
			char q1[600], q2[600];
			if (!watched || r->all_namespaces)
				log_line("level=warn component=kube msg=\"kubernetes entry at %s wants other namespaces than "
					 "the one watched (%s): it %s (-A watches all)\"",
					 pd_log_esc(q1, sizeof q1, r->where), pd_log_esc(q2, sizeof q2, sc->kns),
					 watched ? "only sees that one" : "matches no pod");
		}
		const char *kns = sc->kns, *ksel = sc->ksel;
		if (!cfg->quiet) {
			char q1[600], q2[600], q3[600], q4[600], q5[600];
			pd_log_esc(q1, sizeof q1, kcfg->server);
			pd_log_esc(q2, sizeof q2, kns ? kns : "");
			pd_log_esc(q3, sizeof q3, ksel ? ksel : "");
			if (kcfg->source == PD_KUBE_SRC_IN_CLUSTER)
				log_line("level=info component=kube msg=\"Kubernetes API %s (in-cluster service account), %s%s%s%s\"",
					 q1, kns ? "namespace " : "all namespaces", q2, ksel ? ", selector " : "", q3);
			else
				log_line("level=info component=kube msg=\"Kubernetes API %s (%s, context %s), %s%s%s%s\"",
					 q1, pd_log_esc(q4, sizeof q4, kcfg->origin),
					 pd_log_esc(q5, sizeof q5, kcfg->context ? kcfg->context : ""),
					 kns ? "namespace " : "all namespaces", q2, ksel ? ", selector " : "", q3);
		}
	}
	*out = sc;
	return EXIT_OK;
out:
	scrape_cmd_free(sc);
	return ret;
}

int scrape_cmd_start(struct scrape_cmd *sc, struct pd_store *st, int64_t retention_ns)
{
	struct pd_err err;
	struct pd_scrape_config *cfg = &sc->cfg;
	if (st) {
		cfg->store = st;
		cfg->retention_ns = retention_ns;
	}
	if (pd_scraper_new(cfg, &sc->s, &err)) {
		cli_error("scrape: %s", err.msg);
		return err.code == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
	}
	if (pd_scraper_set_targets(sc->s, &sc->targets, &err)) {
		cli_error("scrape: %s", err.msg);
		return EXIT_INPUT;
	}
	if (sc->kube) {
		struct pd_scrape_kube_opts kopts = {
			.namespace = sc->kns,
			.selector = sc->ksel,
			.pod_labels = (const char *const *)sc->pod_labels,
			.npod_labels = sc->npod_labels,
			.labels = sc->yaml ? sc->file.global.labels : sc->dlabels,
			.nlabels = sc->yaml ? sc->file.global.nlabels : sc->ndl,
			.log = stderr,
			.quiet = cfg->quiet,
			.rules = sc->file.rules,
			.nrules = sc->file.nrules,
			.label_keep = sc->file.global.keep,
			.nlabel_keep = sc->file.global.nkeep,
			.has_keep = sc->file.global.has_keep,
		};
		if (pd_scrape_kube_new(sc->s, sc->kclient, &kopts, &sc->targets, &sc->kd, &err)) {
			cli_error("scrape: %s", err.msg);
			return EXIT_INPUT;
		}
		if (cfg->once) {
			if (pd_scrape_kube_sync(sc->kd, &sc->nkube, &err)) {
				cli_error("scrape: kubernetes: %s", err.msg);
				return EXIT_INPUT;
			}
			if (!sc->targets.n && !sc->nkube) {
				char q[600];
				log_line("level=warn component=scrape msg=\"no targets: no Running pod annotated "
					 "profefe.com/enable=true in %s%s\"",
					 sc->kns ? "namespace " : "any namespace", pd_log_esc(q, sizeof q, sc->kns ? sc->kns : ""));
				return EXIT_OK; /* nothing runs: scrape_cmd_done() is true */
			}
		}
	}
	if (sc->listen_addr) {
		if (pd_scrape_http_start(sc->s, sc->listen_addr, &sc->http, &err)) {
			cli_error("scrape: --listen: %s", err.msg);
			return err.code == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
		}
		char q[600];
		log_line("level=info component=scrape msg=\"metrics listening on port %u\" addr=%s",
			 pd_scrape_http_port(sc->http), pd_log_val(q, sizeof q, sc->listen_addr));
	}
	if (sc->kd && !cfg->once && pd_scrape_kube_start(sc->kd, &err)) {
		cli_error("scrape: %s", err.msg);
		return EXIT_INPUT;
	}
	sc->r.s = sc->s;
	if (pthread_create(&sc->th, NULL, run_thread, &sc->r)) {
		cli_error("scrape: cannot start a thread");
		return EXIT_INPUT;
	}
	sc->running = true;
	return EXIT_OK;
}

bool scrape_cmd_done(struct scrape_cmd *sc) { return !sc->running || atomic_load(&sc->r.done); }

void scrape_cmd_stop(struct scrape_cmd *sc)
{
	if (!sc->cfg.quiet)
		log_line("level=info component=scrape msg=\"stopping%s\"", sc->cfg.store ? ", flushing to the store" : "");
	pd_scrape_kube_stop(sc->kd);
	if (sc->s)
		pd_scraper_stop(sc->s);
}

int scrape_cmd_finish(struct scrape_cmd *sc, bool signalled)
{
	if (!sc->running)
		return EXIT_OK;
	pthread_join(sc->th, NULL);
	sc->running = false;
	if (sc->r.rc) {
		cli_error("scrape: %s", sc->r.err.msg);
		return EXIT_INPUT;
	}
	struct pd_scrape_totals t;
	pd_scraper_totals(sc->s, &t);
	if (sc->cfg.once) {
		struct pd_buf sum = PD_BUF_INIT(0);
		size_t failed = pd_scraper_summary(sc->s, &sum);
		if (sum.len)
			fwrite(sum.ptr, 1, sum.len, stdout);
		fflush(stdout);
		pd_buf_free(&sum);
		if (failed || !sc->cfg.quiet)
			log_line("level=%s component=scrape msg=\"%zu of %zu target(s) failed; %llu profile(s) delivered, %llu "
				 "refused, %llu not delivered\"",
				 failed ? "warn" : "info", failed, sc->targets.n + sc->nkube, (unsigned long long)t.posts_ok,
				 (unsigned long long)t.posts_refused,
				 (unsigned long long)(t.enqueued - t.posts_ok - t.posts_refused));
		return failed || signalled ? EXIT_INPUT : EXIT_OK;
	}
	if (sc->cfg.store)
		log_line("level=info component=scrape msg=\"stopped\" stored=%llu store_failed=%llu missed_rounds=%llu",
			 (unsigned long long)t.stored, (unsigned long long)t.store_failed,
			 (unsigned long long)(t.missed_queued + t.missed_running));
	else
		log_line("level=info component=scrape msg=\"stopped\" delivered=%llu refused=%llu dropped=%llu "
			 "post_failures=%llu missed_rounds=%llu",
			 (unsigned long long)t.posts_ok, (unsigned long long)t.posts_refused,
			 (unsigned long long)t.queue_dropped, (unsigned long long)t.posts_failed,
			 (unsigned long long)(t.missed_queued + t.missed_running));
	return EXIT_OK;
}

int scrape_cmd_metrics(void *ctx, struct pd_buf *out)
{
	struct scrape_cmd *sc = ctx;
	return sc->s ? pd_scraper_metrics(sc->s, out) : 0;
}

int cmd_scrape(int argc, char **argv)
{
	struct scrape_cmd *sc;
	int ret = scrape_cmd_parse(argc, argv, false, &sc);
	if (!sc)
		return ret;
	/* Signals are taken by this thread only: block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = scrape_cmd_start(sc, NULL, 0);
	if (ret) {
		scrape_cmd_free(sc);
		return ret;
	}
	int sig = 0;
	while (!scrape_cmd_done(sc)) {
		struct timespec tmo = {0, 100 * 1000000};
		int got = sigtimedwait(&set, NULL, &tmo);
		if (got > 0 && !sig) {
			sig = got;
			if (!sc->cfg.quiet)
				log_line("level=info component=scrape msg=\"%s: stopping\"",
					 sig == SIGINT ? "SIGINT" : "SIGTERM");
			pd_scrape_kube_stop(sc->kd);
			pd_scraper_stop(sc->s);
		}
	}
	ret = scrape_cmd_finish(sc, sig != 0);
	scrape_cmd_free(sc);
	return ret;
}
