/*
 * cmd_scrape.c — `profd scrape`: pull Go pprof endpoints and push the
 * profiles to a collector (profd serve or profefe). This file is the static
 * discovery source (--target, --config), the wiring of Kubernetes discovery
 * (lib/scrape/kube.c over lib/kube: kubeconfig or in-cluster, -n/-A/-l) and
 * the process around the library loop (lib/scrape): flags, signals, the
 * --once summary and exit code.
 *
 * Threads: main blocks SIGINT/SIGTERM before anything starts, runs the
 * scrape loop in a thread of its own (and, continuous with Kubernetes, the
 * list+watch in another) and waits for a signal or for the loop to end
 * (--once); a signal stops discovery and asks the loop to stop, which
 * delivers what is queued for up to --flush-timeout.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "version.h"
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

static const char usage_text[] =
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
	"\n"
	"Targets:\n"
	"      --target URL          a pprof endpoint: http://host:6060/debug/pprof, or\n"
	"                            host:port (= http://host:port/debug/pprof). Repeatable.\n"
	"      --service NAME        service of the --target before it (before any --target:\n"
	"                            the default of all targets). Required.\n"
	"  -L, --label KEY=VALUE     a label of every profile of the --target before it\n"
	"                            (before any --target: of all targets). Repeatable.\n"
	"                            instance=HOST:PORT is added unless given.\n"
	"      --config FILE         static targets, one per line:\n"
	"                              URL [service=NAME] [types=cpu,heap] [KEY=VALUE]...\n"
	"                            (KEY=VALUE words are labels; '#' starts a comment)\n"
	"\n"
	"Kubernetes discovery (pods annotated profefe.com/enable: \"true\"; combines with\n"
	"the static targets). On when any of these flags is given, or when running in a\n"
	"pod (KUBERNETES_SERVICE_HOST set) without static targets:\n"
	"      --kubernetes          discover pods (the kubeconfig kubectl would use, else\n"
	"                            the pod's service account)\n"
	"      --kubeconfig FILE     kubeconfig (default $KUBECONFIG, else ~/.kube/config;\n"
	"                            in a pod without one: the service account)\n"
	"      --context NAME        kubeconfig context (default its current-context)\n"
	"  -n, --namespace NS        only pods in NS (default: the context's namespace; in a\n"
	"                            pod, its own)\n"
	"  -A, --all-namespaces      pods in every namespace\n"
	"  -l, --selector SELECTOR   only pods with these labels (app=web,tier!=db, ...)\n"
	"      --pod-labels LIST     pod labels copied to the profiles when a pod has them\n"
	"                            (default app,version,app.kubernetes.io/name,\n"
	"                            app.kubernetes.io/version; \"\" = none)\n"
	"  A pod is scraped when it is Running, has a pod IP and is not being deleted, at\n"
	"  http://PODIP:PORT/PATH, as its annotations say:\n"
	"    profefe.com/port     port number or container port name (default 6060)\n"
	"    profefe.com/path     where the pprof handlers are (default /debug/pprof)\n"
	"    profefe.com/service  default: the owning Deployment, StatefulSet, DaemonSet,\n"
	"                         CronJob... (the pod itself if it has no owner)\n"
	"  Labels: namespace, pod, container, node, the --pod-labels, and -L given before\n"
	"  any --target. Needs RBAC get, list, watch on pods.\n"
	"\n"
	"Scraping:\n"
	"      --types LIST          profile types, comma-separated, or all (default):\n"
	"                            cpu heap allocs block mutex goroutine threadcreate\n"
	"      --interval DUR        how often each target is scraped (default 60s)\n"
	"      --cpu-duration DUR    length of each CPU profile, whole seconds (default 10s)\n"
	"      --timeout DUR         per request; a CPU profile gets --cpu-duration more\n"
	"                            (default 10s)\n"
	"      --concurrency N       requests in flight (default 64)\n"
	"      --max-body SIZE       largest profile accepted from a target (default 64MiB)\n"
	"      --state-dir DIR       keep the last snapshot of each cumulative profile (allocs,\n"
	"                            block, mutex) here, so that --once runs store deltas\n"
	"      --save-raw DIR        also write every fetched profile, as received, to\n"
	"                            DIR/<target>.<type>.<unix ns>.pb.gz (debugging, audits)\n"
	"      --once                one pass over all targets, a summary table, exit\n"
	"\n"
	"Delivery:\n"
	"      --collector URL       where profiles go (default $PROFD_COLLECTOR, else\n"
	"                            " PD_SCRAPE_COLLECTOR ")\n"
	"      --queue-size SIZE     memory for profiles waiting for the collector (default\n"
	"                            64MiB); when full the oldest are dropped (counted)\n"
	"      --flush-timeout DUR   how long to keep delivering at exit (default 10s)\n"
	"\n"
	"Operation:\n"
	"      --listen ADDR         serve /metrics, /healthz and /targets on ADDR\n"
	"                            (host:port, :port; port 0 = any free port; default off)\n"
	"  -q, --quiet               log only warnings and errors\n"
	"  -h, --help                this help\n"
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
	"  # a cron job that stores allocation deltas between its runs\n"
	"  profd scrape --once --state-dir /var/lib/profd-scrape --config targets.txt\n"
	"  # every annotated pod of the cluster (in a pod: the service account)\n"
	"  profd scrape -A --collector http://profd:10100 --listen :9100\n"
	"  # one pass over the annotated pods of namespace shop, from a laptop\n"
	"  profd scrape --once --kubeconfig ~/.kube/config --context prod -n shop -l app=web\n"
	"\n"
	"Logs (ts=... level=... msg=\"...\") go to stderr; --once prints its table on stdout.\n"
	"\n"
	"Exit codes: 0 every profile scraped and delivered (--once; a first snapshot kept\n"
	"as the delta base and an empty profile count as done), or a clean shutdown;\n"
	"1 a target failed or a profile was not delivered (--once), or cannot start\n"
	"(--listen address in use, --state-dir not writable, unreadable --config, no\n"
	"usable kubeconfig; --once: the pod list failed); 2 usage error.\n";

static int parse_size(const char *s, size_t *out)
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

/* A positive Go duration; 0 or negative is a usage error. */
static int parse_dur(const char *opt, const char *s, int64_t *out)
{
	struct pd_err err;
	if (pd_api_parse_duration(s, strlen(s), out, &err))
		return cli_usage_error("scrape", "--%s: %s", opt, err.msg);
	if (*out <= 0)
		return cli_usage_error("scrape", "--%s must be positive, got '%s'", opt, s);
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
		return cli_usage_error("scrape", "-L: want KEY=VALUE, got '%s'", arg);
	if (pd_grow((void **)v, cap, *n + 1, sizeof **v))
		return EXIT_INPUT;
	*eq = 0; /* argv strings are ours to cut */
	(*v)[*n].key = arg;
	(*v)[*n].value = eq + 1;
	(*n)++;
	return 0;
}

/* A Kubernetes namespace name (RFC 1123 label). */
static bool dns_label(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
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

int cmd_scrape(int argc, char **argv)
{
	struct pd_scrape_config cfg;
	pd_scrape_config_default(&cfg);
	const char *env = getenv("PROFD_COLLECTOR");
	if (env && *env)
		cfg.collector = env;
	cfg.log = stderr;
	const char *config_file = NULL, *listen_addr = NULL;
	const char *default_service = NULL;
	struct pd_kv *dlabels = NULL;
	size_t ndl = 0, capdl = 0;
	struct spec *specs = NULL;
	size_t nspecs = 0, capspecs = 0;
	int ret = EXIT_USAGE;
	struct pd_scrape_targets targets = {0};
	struct pd_scraper *s = NULL;
	struct pd_scrape_http *http = NULL;
	struct pd_buf cfgtext = PD_BUF_INIT(16u << 20);
	struct pd_kv *all = NULL;
	char **norm = NULL;
	/* Kubernetes discovery */
	bool kube = false, all_ns = false;
	const char *kubeconfig = NULL, *kcontext = NULL, *kns = NULL, *ksel = NULL;
	char *pod_labels_arg = NULL, **pod_labels = NULL;
	size_t npod_labels = 0;
	char default_pod_labels[] = PD_SCRAPE_KUBE_POD_LABELS; /* split_list cuts it */
	struct pd_kube_config *kcfg = NULL;
	struct pd_kube_client *kclient = NULL;
	struct pd_scrape_kube *kd = NULL;
	size_t nkube = 0;

	enum {
		O_COLL = 256, O_TARGET, O_SERVICE, O_CONFIG, O_ONCE, O_INTERVAL, O_CPU, O_TYPES, O_TIMEOUT, O_CONC,
		O_QUEUE, O_STATE, O_RAW, O_LISTEN, O_FLUSH, O_MAXBODY, O_KUBE, O_KUBECONFIG, O_CONTEXT, O_PODLABELS
	};
	static const struct option opts[] = {
		{"collector", required_argument, 0, O_COLL},
		{"target", required_argument, 0, O_TARGET},
		{"service", required_argument, 0, O_SERVICE},
		{"label", required_argument, 0, 'L'},
		{"config", required_argument, 0, O_CONFIG},
		{"once", no_argument, 0, O_ONCE},
		{"interval", required_argument, 0, O_INTERVAL},
		{"cpu-duration", required_argument, 0, O_CPU},
		{"types", required_argument, 0, O_TYPES},
		{"timeout", required_argument, 0, O_TIMEOUT},
		{"concurrency", required_argument, 0, O_CONC},
		{"queue-size", required_argument, 0, O_QUEUE},
		{"max-body", required_argument, 0, O_MAXBODY},
		{"state-dir", required_argument, 0, O_STATE},
		{"save-raw", required_argument, 0, O_RAW},
		{"listen", required_argument, 0, O_LISTEN},
		{"flush-timeout", required_argument, 0, O_FLUSH},
		{"kubernetes", no_argument, 0, O_KUBE},
		{"kubeconfig", required_argument, 0, O_KUBECONFIG},
		{"context", required_argument, 0, O_CONTEXT},
		{"namespace", required_argument, 0, 'n'},
		{"all-namespaces", no_argument, 0, 'A'},
		{"selector", required_argument, 0, 'l'},
		{"pod-labels", required_argument, 0, O_PODLABELS},
		{"quiet", no_argument, 0, 'q'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int c;
	long v;
	struct pd_err err;
	optind = 1;
	while ((c = getopt_long(argc, argv, "L:n:Al:qh", opts, NULL)) != -1) {
		switch (c) {
		case O_KUBE: kube = true; break;
		case O_KUBECONFIG:
			if (!*optarg) {
				cli_usage_error("scrape", "--kubeconfig must not be empty");
				goto out;
			}
			kubeconfig = optarg;
			kube = true;
			break;
		case O_CONTEXT:
			if (!*optarg) {
				cli_usage_error("scrape", "--context must not be empty");
				goto out;
			}
			kcontext = optarg;
			kube = true;
			break;
		case 'n':
			if (!dns_label(optarg)) {
				cli_usage_error("scrape", "-n: \"%s\" is not a namespace name (lower case letters, digits, '-')",
						optarg);
				goto out;
			}
			kns = optarg;
			kube = true;
			break;
		case 'A': all_ns = kube = true; break;
		case 'l':
			ksel = optarg;
			kube = true;
			break;
		case O_PODLABELS:
			pod_labels_arg = optarg;
			kube = true;
			break;
		case O_COLL: cfg.collector = optarg; break;
		case O_TARGET:
			if (pd_grow((void **)&specs, &capspecs, nspecs + 1, sizeof *specs)) {
				ret = EXIT_INPUT;
				goto out;
			}
			memset(&specs[nspecs], 0, sizeof *specs);
			specs[nspecs++].url = optarg;
			break;
		case O_SERVICE:
			if (!*optarg) {
				cli_usage_error("scrape", "--service must not be empty");
				goto out;
			}
			if (nspecs)
				specs[nspecs - 1].service = optarg;
			else
				default_service = optarg;
			break;
		case 'L':
			if (nspecs) {
				struct spec *sp = &specs[nspecs - 1];
				if ((ret = add_label(&sp->labels, &sp->nlabels, &sp->cap, optarg)))
					goto out;
			} else if ((ret = add_label(&dlabels, &ndl, &capdl, optarg))) {
				goto out;
			}
			ret = EXIT_USAGE;
			break;
		case O_CONFIG: config_file = optarg; break;
		case O_ONCE: cfg.once = true; break;
		case O_INTERVAL:
			if (parse_dur("interval", optarg, &cfg.interval_ns))
				goto out;
			if (cfg.interval_ns < 1000000000LL) {
				cli_usage_error("scrape", "--interval must be at least 1s");
				goto out;
			}
			break;
		case O_CPU:
			if (parse_dur("cpu-duration", optarg, &cfg.cpu_ns))
				goto out;
			if (cfg.cpu_ns % 1000000000LL) {
				cli_usage_error("scrape",
						"--cpu-duration must be whole seconds (Go's ?seconds= takes an integer), got '%s'",
						optarg);
				goto out;
			}
			break;
		case O_TYPES:
			if (pd_scrape_parse_types(optarg, &cfg.types, &err)) {
				cli_usage_error("scrape", "--types: %s", err.msg);
				goto out;
			}
			break;
		case O_TIMEOUT:
			if (parse_dur("timeout", optarg, &cfg.timeout_ns))
				goto out;
			if (cfg.timeout_ns < 1000000LL) {
				cli_usage_error("scrape", "--timeout must be at least 1ms");
				goto out;
			}
			break;
		case O_CONC:
			if ((v = cli_parse_count(optarg)) <= 0 || v > 10000) {
				cli_usage_error("scrape", "--concurrency: want 1..10000, got '%s'", optarg);
				goto out;
			}
			cfg.concurrency = (unsigned)v;
			break;
		case O_QUEUE:
			if (parse_size(optarg, &cfg.queue_bytes) || !cfg.queue_bytes) {
				cli_usage_error("scrape", "--queue-size: bad size '%s' (e.g. 64MiB)", optarg);
				goto out;
			}
			break;
		case O_MAXBODY:
			if (parse_size(optarg, &cfg.max_body) || !cfg.max_body) {
				cli_usage_error("scrape", "--max-body: bad size '%s' (e.g. 64MiB)", optarg);
				goto out;
			}
			break;
		case O_STATE: cfg.state_dir = optarg; break;
		case O_RAW: cfg.save_raw_dir = optarg; break;
		case O_LISTEN: listen_addr = optarg; break;
		case O_FLUSH:
			if (parse_dur("flush-timeout", optarg, &cfg.flush_ns))
				goto out;
			break;
		case 'q': cfg.quiet = true; break;
		case 'h':
			fputs(usage_text, stdout);
			ret = EXIT_OK;
			goto out;
		default: cli_usage_error("scrape", "unknown option"); goto out;
		}
	}
	if (optind < argc) {
		cli_usage_error("scrape", "unexpected argument '%s' (targets are given with --target URL)", argv[optind]);
		goto out;
	}
	if (!cfg.once && cfg.cpu_ns >= cfg.interval_ns && (cfg.types & (1u << PD_ST_CPU))) {
		cli_usage_error("scrape", "--cpu-duration (%llds) must be shorter than --interval (%llds)",
				(long long)(cfg.cpu_ns / 1000000000LL), (long long)(cfg.interval_ns / 1000000000LL));
		goto out;
	}
	{
		const char *cl = cfg.collector;
		if (strncmp(cl, "http://", 7) && strncmp(cl, "https://", 8)) {
			cli_usage_error("scrape", "--collector: want an http:// or https:// URL, got '%s'", cl);
			goto out;
		}
	}

	/* in a pod with nothing else to scrape: zero config */
	{
		const char *h = getenv("KUBERNETES_SERVICE_HOST");
		if (!kube && !nspecs && !config_file && h && *h)
			kube = true;
	}
	if (!pod_labels_arg)
		pod_labels_arg = default_pod_labels;
	if (kube && split_list(pod_labels_arg, &pod_labels, &npod_labels)) {
		ret = EXIT_INPUT;
		goto out;
	}

	/* the static discovery source: --target and --config into one list */
	norm = calloc(nspecs + 1, sizeof *norm);
	if (!norm) {
		ret = EXIT_INPUT;
		goto out;
	}
	for (size_t i = 0; i < nspecs; i++) {
		struct spec *sp = &specs[i];
		if (pd_scrape_normalize_url(sp->url, &norm[i], &err)) {
			cli_usage_error("scrape", "--target: %s", err.msg);
			goto out;
		}
		const char *service = sp->service ? sp->service : default_service;
		if (!service) {
			cli_usage_error("scrape", "target %s has no service: add --service NAME after it (or before the "
						  "first --target for all)",
					norm[i]);
			goto out;
		}
		size_t n = 0;
		free(all);
		all = calloc(ndl + sp->nlabels + 1, sizeof *all);
		if (!all) {
			ret = EXIT_INPUT;
			goto out;
		}
		bool has_instance = false;
		for (size_t k = 0; k < ndl; k++) {
			has_instance |= !strcmp(dlabels[k].key, "instance");
			all[n++] = dlabels[k];
		}
		for (size_t k = 0; k < sp->nlabels; k++) {
			has_instance |= !strcmp(sp->labels[k].key, "instance");
			all[n++] = sp->labels[k];
		}
		char hp[256];
		if (!has_instance) {
			all[n].key = (char *)"instance";
			all[n++].value = (char *)pd_scrape_url_hostport(norm[i], hp, sizeof hp);
		}
		if (pd_scrape_targets_add(&targets, norm[i], norm[i], service, all, n, 0, &err)) {
			cli_usage_error("scrape", "--target: %s", err.msg);
			goto out;
		}
	}
	if (config_file) {
		if (pd_buf_read_file(&cfgtext, config_file, &err) || pd_buf_append(&cfgtext, "", 1)) {
			cli_error("scrape: --config: %s", err.msg);
			ret = EXIT_INPUT;
			goto out;
		}
		if (pd_scrape_parse_config((const char *)cfgtext.ptr, config_file, default_service, dlabels, ndl, &targets,
					   &err)) {
			cli_usage_error("scrape", "--config %s", err.msg);
			goto out;
		}
	}
	if (!targets.n && !kube) {
		cli_usage_error("scrape", "no targets: give --target URL --service NAME, or --config FILE, or -A, "
					  "-n NS or --kubernetes for the annotated pods of a Kubernetes cluster");
		goto out;
	}
	if (kube) {
		struct pd_kube_opts ko = {.mode = PD_KUBE_AUTO, .kubeconfig = kubeconfig, .context = kcontext};
		/* the service-account directory, for tests (default: the real one) */
		ko.sa_dir = getenv("PROFD_KUBE_SA_DIR");
		ret = EXIT_INPUT;
		if (pd_kube_config_load(&ko, &kcfg, &err)) {
			cli_error("scrape: kubernetes: %s", err.msg);
			goto out;
		}
		struct pd_kube_client_opts co = {.timeout_ms = 30000, .user_agent = "profd-scrape/" PD_VERSION};
		if (pd_kube_client_new(kcfg, &co, &kclient, &err)) {
			cli_error("scrape: kubernetes: %s", err.msg);
			goto out;
		}
		if (!all_ns && !kns)
			kns = kcfg->namespace && *kcfg->namespace ? kcfg->namespace : "default";
		if (all_ns)
			kns = NULL;
		if (!cfg.quiet) {
			if (kcfg->source == PD_KUBE_SRC_IN_CLUSTER)
				log_line("level=info component=kube msg=\"Kubernetes API %s (in-cluster service account), %s%s%s%s\"",
					 kcfg->server, kns ? "namespace " : "all namespaces", kns ? kns : "",
					 ksel ? ", selector " : "", ksel ? ksel : "");
			else
				log_line("level=info component=kube msg=\"Kubernetes API %s (%s, context %s), %s%s%s%s\"",
					 kcfg->server, kcfg->origin, kcfg->context ? kcfg->context : "",
					 kns ? "namespace " : "all namespaces", kns ? kns : "", ksel ? ", selector " : "",
					 ksel ? ksel : "");
		}
		ret = EXIT_USAGE;
	}

	/* Signals are taken by this thread only: block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = EXIT_INPUT;
	if (pd_scraper_new(&cfg, &s, &err)) {
		cli_error("scrape: %s", err.msg);
		ret = err.code == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
		goto out;
	}
	if (pd_scraper_set_targets(s, &targets, &err)) {
		cli_error("scrape: %s", err.msg);
		goto out;
	}
	if (kube) {
		struct pd_scrape_kube_opts kopts = {
			.namespace = kns,
			.selector = ksel,
			.pod_labels = (const char *const *)pod_labels,
			.npod_labels = npod_labels,
			.labels = dlabels,
			.nlabels = ndl,
			.log = stderr,
			.quiet = cfg.quiet,
		};
		if (pd_scrape_kube_new(s, kclient, &kopts, &targets, &kd, &err)) {
			cli_error("scrape: %s", err.msg);
			goto out;
		}
		if (cfg.once) {
			if (pd_scrape_kube_sync(kd, &nkube, &err)) {
				cli_error("scrape: kubernetes: %s", err.msg);
				goto out;
			}
			if (!targets.n && !nkube) {
				log_line("level=warn component=scrape msg=\"no targets: no Running pod annotated "
					 "profefe.com/enable=true in %s%s\"",
					 kns ? "namespace " : "any namespace", kns ? kns : "");
				ret = EXIT_OK;
				goto out;
			}
		}
	}
	if (listen_addr) {
		if (pd_scrape_http_start(s, listen_addr, &http, &err)) {
			cli_error("scrape: --listen: %s", err.msg);
			ret = err.code == PD_EUSAGE ? EXIT_USAGE : EXIT_INPUT;
			goto out;
		}
		log_line("level=info component=scrape msg=\"metrics listening on port %u\" addr=%s",
			 pd_scrape_http_port(http), listen_addr);
	}

	if (kd && !cfg.once && pd_scrape_kube_start(kd, &err)) {
		cli_error("scrape: %s", err.msg);
		goto out;
	}
	struct runner r = {.s = s};
	pthread_t th;
	if (pthread_create(&th, NULL, run_thread, &r)) {
		cli_error("scrape: cannot start a thread");
		goto out;
	}
	int sig = 0;
	while (!atomic_load(&r.done)) {
		struct timespec tmo = {0, 100 * 1000000};
		int got = sigtimedwait(&set, NULL, &tmo);
		if (got > 0 && !sig) {
			sig = got;
			if (!cfg.quiet)
				log_line("level=info component=scrape msg=\"%s: stopping\"",
					 sig == SIGINT ? "SIGINT" : "SIGTERM");
			pd_scrape_kube_stop(kd);
			pd_scraper_stop(s);
		}
	}
	pthread_join(th, NULL);
	if (r.rc) {
		cli_error("scrape: %s", r.err.msg);
		goto out;
	}
	struct pd_scrape_totals t;
	pd_scraper_totals(s, &t);
	if (cfg.once) {
		struct pd_buf sum = PD_BUF_INIT(0);
		size_t failed = pd_scraper_summary(s, &sum);
		if (sum.len)
			fwrite(sum.ptr, 1, sum.len, stdout);
		fflush(stdout);
		pd_buf_free(&sum);
		ret = failed || sig ? EXIT_INPUT : EXIT_OK;
		if (failed || !cfg.quiet)
			log_line("level=%s component=scrape msg=\"%zu of %zu target(s) failed; %llu profile(s) delivered, %llu "
			 "refused, %llu not delivered\"",
			 failed ? "warn" : "info", failed, targets.n + nkube, (unsigned long long)t.posts_ok,
			 (unsigned long long)t.posts_refused,
			 (unsigned long long)(t.enqueued - t.posts_ok - t.posts_refused));
	} else {
		log_line("level=info component=scrape msg=\"stopped\" delivered=%llu refused=%llu dropped=%llu "
			 "post_failures=%llu",
			 (unsigned long long)t.posts_ok, (unsigned long long)t.posts_refused,
			 (unsigned long long)t.queue_dropped, (unsigned long long)t.posts_failed);
		ret = EXIT_OK;
	}
out:
	pd_scrape_http_stop(http);
	pd_scrape_kube_free(kd);
	pd_scraper_free(s);
	pd_kube_client_free(kclient);
	pd_kube_config_free(kcfg);
	free(pod_labels);
	pd_scrape_targets_free(&targets);
	if (norm)
		for (size_t i = 0; i < nspecs; i++)
			free(norm[i]);
	free(norm);
	free(all);
	for (size_t i = 0; i < nspecs; i++)
		free(specs[i].labels);
	free(specs);
	free(dlabels);
	pd_buf_free(&cfgtext);
	return ret;
}
