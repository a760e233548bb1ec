/*
 * cmd_capture.c — `profd capture` / `kubectl profd capture`: profiles from
 * Kubernetes pods, now, through the API server's pod proxy. This file is
 * the flags (kubectl's -n, -A, -l, --kubeconfig, --context, parsed here
 * since a kubectl plugin gets its arguments verbatim) and the output; the
 * work is lib/scrape/capture.c over lib/kube.
 *
 * Output: stdout gets one line per captured profile (the file written or
 * the stored profile's URL), at the end, for scripts. stderr gets the rest:
 * on a terminal a live table (a row per pod, a column per type), else one
 * line per finished (pod, type); one line per problem; a summary.
 * SIGINT/SIGTERM end the requests in flight and report what was captured.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "flags.h"
#include "version.h"
#include "../lib/http/auth.h"
#include "../lib/http/params.h"
#include "../lib/kube/kube.h"
#include "../lib/scrape/scrape.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Long-only flag ids (-n, -A, -l, -q, -h are their letters). */
enum {
	O_TYPES = 256, O_DURATION, O_TIMEOUT, O_OUTDIR, O_COLLECTOR, O_SERVICE, O_PORT, O_PATH, O_KUBECONFIG,
	O_CONTEXT, O_TOKEN_FILE
};

/* The flags, one table per section of --help (capture_help_texts: the
 * text before each). */
static const struct cli_flag capture_flags_pods[] = {
	{"selector", 'l', 'l', "SELECTOR", "the pods with these labels (app=web,tier!=db, ...)", 0},
	{"namespace", 'n', 'n', "NS", "namespace (default: the kubeconfig context's, else default)", 0},
	{"all-namespaces", 'A', 'A', NULL, "with -l: matching pods in every namespace", 0},
	{"kubeconfig", 0, O_KUBECONFIG, "FILE", "kubeconfig (default $KUBECONFIG, else ~/.kube/config)", 0},
	{"context", 0, O_CONTEXT, "NAME", "kubeconfig context (default its current-context)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag capture_flags_what[] = {
	{"types", 0, O_TYPES, "LIST",
	 "profile types, comma-separated, or all (default):\ncpu heap allocs block mutex goroutine threadcreate", 0},
	{"duration", 0, O_DURATION, "DUR", "length of the CPU profile, whole seconds (default 30s)", 0},
	{"timeout", 0, O_TIMEOUT, "DUR", "per request, on top of --duration for cpu (default 30s)", 0},
	{"port", 0, O_PORT, "PORT",
	 "pprof port of pods without a profefe.com/port annotation:\n"
	 "a number or a container port name (a pod annotated\n"
	 "profefe.com/enable: \"true\" defaults to 6060; any other\n"
	 "pod without the annotation needs --port)",
	 0},
	{"path", 0, O_PATH, "PATH", "pprof path of pods without profefe.com/path\n(default /debug/pprof)", 0},
	{"service", 0, O_SERVICE, "NAME",
	 "service the profiles are filed under (default: the pod's\n"
	 "profefe.com/service, else its Deployment, StatefulSet...)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag capture_flags_where[] = {
	{"output-dir", 0, O_OUTDIR, "DIR",
	 "write DIR/<service>-<pod>-<type>-<time>.pb.gz (default: the\n"
	 "current directory; time in UTC, 20060102T150405Z; an\n"
	 "existing file is never overwritten)",
	 0},
	{"collector", 0, O_COLLECTOR, "URL",
	 "push them to a collector (profd serve, profefe) through\n"
	 "API v0 instead, labelled namespace, pod, container, node\n"
	 "(+ app, version; cumulative=true on allocs, block, mutex),\n"
	 "and print their URLs. A profile that cannot be pushed is\n"
	 "written to the current directory instead (and reported).\n"
	 "Only this flag pushes ($PROFD_COLLECTOR is not used here)",
	 0},
	{"token-file", 0, O_TOKEN_FILE, "FILE",
	 "the collector's token (default $PROFD_TOKEN), for a\ncollector run with --tokens (write scope)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag capture_flags_output[] = {
	{"quiet", 'q', 'q', NULL, "no progress and no summary: only problems", 0},
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* The headings and text of --help before each of capture_doc's tables (the
 * arguments, which are not flags, among them). */
static const char *const capture_help_texts[] = {
    "Choosing pods (kubectl's flags and meanings):\n"
    "  POD                       a pod\n"
    "  TYPE/NAME                 the pods of a workload: deployment/NAME, statefulset/NAME,\n"
    "                            daemonset/NAME, replicaset/NAME (or deploy, sts, ds, rs);\n"
    "                            pod/NAME is a pod\n"
    "  NAME                      a pod; if there is none, a deployment (then a statefulset,\n"
    "                            a daemonset) of that name\n",
    "  Pods that are not Running are skipped (a pod named on the command line fails).\n"
    "\n"
    "What to capture:\n",
    "\n"
    "Where they go:\n",
    "\n"
    "Output: stdout gets one line per profile: its file, or its URL. stderr gets the\n"
    "progress (on a terminal a live table, else one line per pod and type), one line\n"
    "per problem (which pod, which type, what failed, what to try) and a summary.\n",
};
const struct cli_doc capture_doc = {
    "capture",
    "Usage: profd capture [POD | TYPE/NAME]... [-n NS] [options]\n"
    "       profd capture -l SELECTOR [-n NS | -A] [options]\n"
    "\n"
    "Take profiles from Kubernetes pods now, through the API server's pod proxy\n"
    "(/api/v1/namespaces/NS/pods/NAME:PORT/proxy/debug/pprof/...): it needs only\n"
    "what kubectl needs, so it works from a laptop. All pods and types are fetched at\n"
    "once; each profile is checked (a pprof of the requested type) and written to a\n"
    "file, or pushed to a collector. As a kubectl plugin (the binary installed as\n"
    "kubectl-profd): kubectl profd capture ...\n"
    "\n",
    {capture_flags_pods, capture_flags_what, capture_flags_where, capture_flags_output},
    "\n"
    "DUR: a Go duration (30s, 1m30s).\n"
    "\n"
    "Examples:\n"
    "  # every profile type of one pod, into the current directory\n"
    "  kubectl profd capture -n shop web-7d9f8c6b5-x2x9k\n"
    "  # the pods of a deployment (a bare workload name works too), 10 s of CPU\n"
    "  kubectl profd capture -n ops deployment/influxdb-v2 --duration 10s\n"
    "  kubectl profd capture -n ops influxdb-v2\n"
    "  # heap and goroutines of every pod labelled app=web, in any namespace\n"
    "  kubectl profd capture -A -l app=web --types heap,goroutine --output-dir /tmp/prof\n"
    "  # a pod without profefe annotations, pprof on its port named \"metrics\"\n"
    "  profd capture -n shop db-0 --port metrics --path /internal/pprof\n"
    "  # into a collector, then open one\n"
    "  kubectl profd capture -n shop deploy/web --collector http://localhost:10100\n"
    "  go tool pprof http://localhost:10100/api/0/profiles/<id>\n"
    "\n"
    "Needs RBAC: get and list on pods, get on pods/proxy, get on the workloads named.\n"
    "\n"
    "Exit codes: 0 every chosen pod captured, every type; 1 anything failed (a name\n"
    "that matches no pod, a pod that cannot be captured, a profile that could not be\n"
    "fetched, checked, written or pushed; no usable kubeconfig; interrupted) — the\n"
    "other pods are still captured; 2 usage error.\n",
    28,
    capture_help_texts,
};

static atomic_int stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, 1);
}

/* What the progress display needs, beside the capture. */
struct ui {
	bool tty, quiet;
	bool one_ns;        /* every pod in one namespace: the table shows pod names only */
	unsigned types;
	int64_t cpu_ns;
	size_t drawn;       /* lines of the live table on screen */
	double last_draw;
	int cols, rows;
	size_t podw;        /* width of the POD column */
	size_t *rowpod;     /* table row -> pod index */
	size_t nrows;
	bool compact;       /* too many pods for the screen: one line */
	bool *reported;     /* per pod: its failures printed */
};

/* Column header and width of a type in the table. */
static const char *col_name(int t) { return t == PD_ST_THREADCREATE ? "THREADS" : NULL; }
static int col_width(const struct ui *u, int t)
{
	char b[40];
	int w = t == PD_ST_CPU ? snprintf(b, sizeof b, "%lld/%llds", (long long)(u->cpu_ns / 1000000000LL),
					  (long long)(u->cpu_ns / 1000000000LL))
			       : (int)strlen(col_name(t) ? col_name(t) : pd_scrape_type_name(t));
	return w < 6 ? 6 : w;
}

static void print_ok_line(const struct pd_capture_view *v, const struct pd_capture_job *j)
{
	const struct pd_capture_pod *p = &v->pods[j->pod];
	char b[32];
	fprintf(stderr, "%s %s: ok, %s in %.1fs%s%s%s%s\n", p->name, pd_scrape_type_name(j->type),
		pd_fmt_bytes(b, sizeof b, (double)j->bytes), j->t1 - j->t0, j->where ? " -> " : "", j->where ? j->where : "",
		j->msg[0] ? ", " : "", j->msg);
}

/* The failures of pod i, one line per distinct message: the types that
 * failed the same way share a line ("all types" when every one did). */
static void report_pod(struct ui *u, const struct pd_capture_view *v, size_t i)
{
	const struct pd_capture_pod *p = &v->pods[i];
	if (u->reported[i])
		return;
	u->reported[i] = true;
	bool done[PD_ST_N] = {false};
	for (size_t a = 0; a < p->njobs; a++) {
		const struct pd_capture_job *ja = &v->jobs[p->first_job + a];
		if (ja->state == PD_CAP_OK || done[a])
			continue;
		char types[200] = "";
		size_t o = 0, n = 0;
		for (size_t b = a; b < p->njobs; b++) {
			const struct pd_capture_job *jb = &v->jobs[p->first_job + b];
			if (jb->state != PD_CAP_OK && !done[b] && !strcmp(jb->msg, ja->msg)) {
				done[b] = true;
				n++;
				o += (size_t)snprintf(types + o, sizeof types - o, "%s%s", o ? "," : "", pd_scrape_type_name(jb->type));
			}
		}
		fprintf(stderr, "%s capture: %s %s: %s\n", cli_prog, p->name, n == p->njobs && n > 1 ? "(all types)" : types,
			ja->msg[0] ? ja->msg : "not captured");
	}
}

static bool pod_ended(const struct pd_capture_view *v, size_t i)
{
	const struct pd_capture_pod *p = &v->pods[i];
	for (size_t k = 0; k < p->njobs; k++)
		if (v->jobs[p->first_job + k].state == PD_CAP_WAITING || v->jobs[p->first_job + k].state == PD_CAP_RUNNING)
			return false;
	return true;
}

/* One cell of the table. */
static void cell(const struct ui *u, const struct pd_capture_job *j, double now, char *out, size_t cap)
{
	switch (j->state) {
	case PD_CAP_WAITING: snprintf(out, cap, "-"); break;
	case PD_CAP_RUNNING:
		if (j->type == PD_ST_CPU)
			snprintf(out, cap, "%.0f/%llds", now - j->t0, (long long)(u->cpu_ns / 1000000000LL));
		else
			snprintf(out, cap, "%.0fs", now - j->t0);
		break;
	case PD_CAP_OK: snprintf(out, cap, "%s", j->empty ? "empty" : "ok"); break;
	default: snprintf(out, cap, "FAILED"); break;
	}
}

static void put_line(const struct ui *u, const char *line)
{
	fprintf(stderr, "\r%.*s\033[K\n", u->cols > 1 ? u->cols - 1 : 79, line);
}

/* The live table (or, for more pods than rows, one line), redrawn in place. */
static void draw(struct ui *u, const struct pd_capture_view *v, bool final)
{
	double now = pd_now();
	if (!final && now - u->last_draw < 0.1)
		return;
	u->last_draw = now;
	char line[4096];
	size_t ok = 0, failed = 0, running = 0, lines = 0;
	double cpu_t0 = 0;
	for (size_t i = 0; i < v->njobs; i++) {
		const struct pd_capture_job *j = &v->jobs[i];
		ok += j->state == PD_CAP_OK;
		failed += j->state == PD_CAP_FAILED;
		running += j->state == PD_CAP_RUNNING;
		if (j->type == PD_ST_CPU && j->state == PD_CAP_RUNNING && (!cpu_t0 || j->t0 < cpu_t0))
			cpu_t0 = j->t0;
	}
	if (u->drawn)
		fprintf(stderr, "\r\033[%zuA", u->drawn);
	if (u->compact) {
		int w = snprintf(line, sizeof line, "%zu pods, %zu profiles: %zu ok, %zu failed, %zu running", u->nrows,
				 v->njobs, ok, failed, running);
		if (cpu_t0 && w > 0 && (size_t)w < sizeof line)
			snprintf(line + w, sizeof line - (size_t)w, " (cpu %.0f/%llds)", now - cpu_t0,
				 (long long)(u->cpu_ns / 1000000000LL));
		put_line(u, line);
		lines = 1;
	} else {
		size_t w = (size_t)snprintf(line, sizeof line, "%-*s", (int)u->podw, "POD");
		for (int t = 0; t < PD_ST_N && w < sizeof line; t++)
			if (u->types & (1u << t)) {
				char up[32];
				const char *tn = col_name(t) ? col_name(t) : pd_scrape_type_name(t);
				size_t k = 0;
				for (; tn[k] && k + 1 < sizeof up; k++)
					up[k] = (char)(tn[k] >= 'a' && tn[k] <= 'z' ? tn[k] - 32 : tn[k]);
				up[k] = 0;
				w += (size_t)snprintf(line + w, sizeof line - w, "  %-*s", col_width(u, t), up);
			}
		put_line(u, line);
		lines++;
		for (size_t r = 0; r < u->nrows; r++) {
			const struct pd_capture_pod *p = &v->pods[u->rowpod[r]];
			const char *name = u->one_ns ? p->pod->name : p->name;
			size_t nl = strlen(name);
			if (nl > u->podw)
				w = (size_t)snprintf(line, sizeof line, "..%s", name + nl - (u->podw - 2));
			else
				w = (size_t)snprintf(line, sizeof line, "%-*s", (int)u->podw, name);
			for (size_t k = 0; k < p->njobs && w < sizeof line; k++) {
				const struct pd_capture_job *j = &v->jobs[p->first_job + k];
				char cb[32];
				cell(u, j, now, cb, sizeof cb);
				w += (size_t)snprintf(line + w, sizeof line - w, "  %-*s", col_width(u, j->type), cb);
			}
			put_line(u, line);
			lines++;
		}
	}
	fflush(stderr);
	u->drawn = lines;
}

static void progress(void *ctx, const struct pd_capture *c, const struct pd_capture_job *j)
{
	struct ui *u = ctx;
	struct pd_capture_view v;
	pd_capture_view(c, &v);
	if (u->tty) {
		draw(u, &v, false);
		return;
	}
	if (!j || j->state == PD_CAP_RUNNING)
		return;
	if (j->state == PD_CAP_OK && !u->quiet)
		print_ok_line(&v, j);
	if (pod_ended(&v, j->pod))
		report_pod(u, &v, j->pod);
	fflush(stderr);
}

static void fail_line(const char *fmt, ...) PD_PRINTF(1, 2);
static void fail_line(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s capture: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

#define parse_dur(opt, s, out) cli_parse_dur("capture", opt, s, false, out)

/* kubectl (pflag) takes -n=NS as -n NS: drop the '='. */
static const char *short_arg(const char *s) { return s[0] == '=' ? s + 1 : s; }

int cmd_capture(int argc, char **argv)
{
	const char *ns = NULL, *sel = NULL, *kubeconfig = NULL, *kcontext = NULL, *outdir = NULL, *collector = NULL;
	const char *token_file = NULL;
	char *token = NULL;
	const char *service = NULL, *port = NULL, *path = NULL;
	bool all_ns = false, quiet = false;
	unsigned types = PD_ST_ALL;
	int64_t cpu_ns = PD_CAPTURE_CPU_NS, timeout_ns = PD_CAPTURE_TIMEOUT_NS;
	struct pd_err err;
	int c;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &capture_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'n':
			ns = short_arg(optarg);
			if (!*ns)
				return cli_usage_error("capture", "-n: the namespace must not be empty");
			break;
		case 'A': all_ns = true; break;
		case 'l':
			sel = short_arg(optarg);
			if (!*sel)
				return cli_usage_error("capture", "-l: the selector must not be empty");
			break;
		case O_KUBECONFIG:
			if (!*optarg)
				return cli_usage_error("capture", "--kubeconfig must not be empty");
			kubeconfig = optarg;
			break;
		case O_CONTEXT:
			if (!*optarg)
				return cli_usage_error("capture", "--context must not be empty");
			kcontext = optarg;
			break;
		case O_TYPES:
			if (pd_scrape_parse_types(optarg, &types, &err))
				return cli_usage_error("capture", "--types: %s", err.msg);
			break;
		case O_DURATION:
			if (parse_dur("duration", optarg, &cpu_ns))
				return EXIT_USAGE;
			if (cpu_ns % 1000000000LL)
				return cli_usage_error("capture", "--duration must be whole seconds (Go's ?seconds= takes an "
								  "integer), got '%s'",
						       optarg);
			break;
		case O_TIMEOUT:
			if (parse_dur("timeout", optarg, &timeout_ns))
				return EXIT_USAGE;
			if (timeout_ns < 1000000LL)
				return cli_usage_error("capture", "--timeout must be at least 1ms");
			break;
		case O_OUTDIR:
			if (!*optarg)
				return cli_usage_error("capture", "--output-dir must not be empty");
			outdir = optarg;
			break;
		case O_TOKEN_FILE: token_file = optarg; break;
		case O_COLLECTOR:
			if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8))
				return cli_usage_error("capture", "--collector: want an http:// or https:// URL, got '%s'", optarg);
			collector = optarg;
			break;
		case O_SERVICE:
			if (!*optarg)
				return cli_usage_error("capture", "--service must not be empty");
			service = optarg;
			break;
		case O_PORT:
			if (!*optarg)
				return cli_usage_error("capture", "--port must not be empty");
			port = optarg;
			break;
		case O_PATH:
			if (!pd_scrape_kube_path_ok(optarg))
				return cli_usage_error("capture", "--path: want an absolute URL path like /debug/pprof, got '%s'",
						       optarg);
			path = optarg;
			break;
		case 'q': quiet = true; break;
		case 'h': cli_flags_help(&capture_doc); return EXIT_OK;
		default: return cli_bad_option("capture", c, argv);
		}
	}
	const char *const *names = (const char *const *)argv + optind;
	size_t nnames = (size_t)(argc - optind);
	if (outdir && collector)
		return cli_usage_error("capture", "--output-dir and --collector: choose one (files, or the collector)");
	if (all_ns && nnames)
		return cli_usage_error("capture", "-A: a pod or workload cannot be named across all namespaces; use -n NS, "
						  "or -A -l SELECTOR");
	if (all_ns && ns)
		return cli_usage_error("capture", "-n and -A: choose one");
	if (nnames && sel)
		return cli_usage_error("capture", "-l cannot be combined with pod or workload names (as in kubectl)");
	if (!nnames && !sel)
		return cli_usage_error("capture", "which pods? give a pod, a workload (deployment/NAME) or -l SELECTOR%s",
				       all_ns ? " (-A needs -l)" : "");
	if (outdir) {
		struct stat st;
		if (stat(outdir, &st) || !S_ISDIR(st.st_mode)) {
			fail_line("--output-dir %s: not a directory (create it first)", outdir);
			return EXIT_INPUT;
		}
	}

	/* the API server */
	struct pd_kube_config *kcfg = NULL;
	struct pd_kube_client *kc = NULL;
	struct pd_capture *cap = NULL;
	struct ui u = {.quiet = quiet, .types = types, .cpu_ns = cpu_ns};
	int ret = EXIT_INPUT;
	/* kubectl's rule: a kubeconfig, else (in a pod) the service account */
	struct pd_kube_opts ko = {.mode = PD_KUBE_AUTO, .kubeconfig = kubeconfig, .context = kcontext};
	ko.sa_dir = getenv("PROFD_KUBE_SA_DIR");
	if (pd_kube_config_load(&ko, &kcfg, &err)) {
		fail_line("%s", err.msg);
		goto out;
	}
	struct pd_kube_client_opts co = {.timeout_ms = 30000, .user_agent = "profd-capture/" PD_VERSION};
	if (pd_kube_client_new(kcfg, &co, &kc, &err)) {
		fail_line("%s", err.msg);
		goto out;
	}
	if (!all_ns && !ns)
		ns = kcfg->namespace && *kcfg->namespace ? kcfg->namespace : "default";

	/* the collector: if it is not there, say so now and keep the profiles in files */
	bool collector_down = false;
	if (collector && pd_token_read(token_file, getenv("PROFD_TOKEN"), &token, &err)) {
		ret = cli_usage_error("capture", "%s", err.msg);
		goto out;
	}
	if (collector && pd_capture_ping_collector(collector, token, 5000, &err)) {
		fprintf(stderr,
			"%s capture: collector not reachable: %s (is it running? check --collector); the profiles go to "
			"files in the current directory instead\n",
			cli_prog, err.msg);
		collector = NULL;
		collector_down = true;
	}

	struct pd_capture_opts o = {
		.client = kc,
		.namespace = all_ns ? NULL : ns,
		.types = types,
		.cpu_ns = cpu_ns,
		.timeout_ns = timeout_ns,
		.port = port,
		.path = path,
		.service = service,
		.output_dir = outdir,
		.collector = collector,
		.token = token,
		.stop = &stop_flag,
		.progress = progress,
		.ctx = &u,
	};
	if (pd_capture_new(&o, &cap, &err) || pd_capture_select(cap, names, nnames, sel, &err)) {
		fail_line("%s", err.msg);
		goto out;
	}
	struct pd_capture_view v;
	pd_capture_view(cap, &v);
	size_t problems = v.nproblems, pods_failed = 0, skipped = 0, captured = 0;
	for (size_t i = 0; i < v.nproblems; i++)
		fprintf(stderr, "%s capture: %s\n", cli_prog, v.problems[i]);
	for (size_t i = 0; i < v.npods; i++) {
		const struct pd_capture_pod *p = &v.pods[i];
		if (p->state == PD_CAP_FAILED) {
			pods_failed++;
			fprintf(stderr, "%s capture: %s: %s\n", cli_prog, p->name, p->msg);
		} else if (p->state == PD_CAP_SKIPPED) {
			skipped++;
			if (!quiet)
				fprintf(stderr, "%s: skipped (%s, chosen by %s)\n", p->name, p->msg, p->via);
		} else {
			captured++;
		}
	}
	fflush(stderr);

	/* the display */
	u.tty = isatty(2) && !quiet;
	u.reported = calloc(v.npods + 1, sizeof *u.reported);
	if (!u.reported) {
		fail_line("out of memory");
		goto out;
	}
	u.one_ns = !all_ns;
	if (u.tty) {
		struct winsize ws;
		u.cols = 80;
		u.rows = 24;
		if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
			u.cols = ws.ws_col;
			u.rows = ws.ws_row;
		}
		u.rowpod = calloc(captured + 1, sizeof *u.rowpod);
		if (!u.rowpod) {
			fail_line("out of memory");
			goto out;
		}
		u.podw = 3;
		for (size_t i = 0; i < v.npods; i++)
			if (v.pods[i].state == PD_CAP_RUNNING) {
				u.rowpod[u.nrows++] = i;
				size_t l = strlen(u.one_ns ? v.pods[i].pod->name : v.pods[i].name);
				u.podw = l > u.podw ? l : u.podw;
			}
		/* what the type columns leave of the width, within 12..48 */
		int rest = u.cols - 1;
		for (int t = 0; t < PD_ST_N; t++)
			if (types & (1u << t))
				rest -= 2 + col_width(&u, t);
		size_t maxw = rest < 12 ? 12 : rest > 48 ? 48 : (size_t)rest;
		u.podw = u.podw > maxw ? maxw : u.podw;
		u.compact = u.nrows + 2 > (size_t)u.rows;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	double t0 = pd_now();
	if (u.tty && v.njobs)
		draw(&u, &v, true);
	if (pd_capture_run(cap, &err))
		fail_line("%s", err.msg);
	pd_capture_view(cap, &v);
	if (u.tty && v.njobs)
		draw(&u, &v, true);

	size_t ok = 0, failed = 0, empty = 0;
	for (size_t i = 0; i < v.njobs; i++) {
		const struct pd_capture_job *j = &v.jobs[i];
		ok += j->state == PD_CAP_OK;
		failed += j->state != PD_CAP_OK;
		empty += j->state == PD_CAP_OK && j->empty;
	}
	for (size_t i = 0; i < v.npods; i++) /* those not reported as they ended */
		if (v.pods[i].state == PD_CAP_RUNNING)
			report_pod(&u, &v, i);
	for (size_t i = 0; i < v.njobs; i++)
		if (v.jobs[i].where && v.jobs[i].state == PD_CAP_OK)
			printf("%s\n", v.jobs[i].where);
	fflush(stdout);
	bool bad = problems || pods_failed || failed || collector_down || !ok || atomic_load(&stop_flag);
	if (!quiet || bad) {
		char where[600];
		if (collector)
			snprintf(where, sizeof where, "stored in %s", collector);
		else
			snprintf(where, sizeof where, "written to %s", outdir ? outdir : "the current directory");
		fprintf(stderr, "%s%zu profile(s) from %zu pod(s) %s in %.1fs", atomic_load(&stop_flag) ? "interrupted: " : "",
			ok, captured, where, pd_now() - t0);
		if (empty)
			fprintf(stderr, " (%zu without samples)", empty);
		if (failed)
			fprintf(stderr, "; %zu failed", failed);
		if (pods_failed)
			fprintf(stderr, "; %zu pod(s) could not be captured", pods_failed);
		if (problems)
			fprintf(stderr, "; %zu name(s) or selector(s) found nothing usable", problems);
		if (skipped)
			fprintf(stderr, "; %zu pod(s) skipped (not Running, or not readable)", skipped);
		fputc('\n', stderr);
	}
	ret = bad ? EXIT_INPUT : EXIT_OK;
out:
	free(u.rowpod);
	free(u.reported);
	pd_capture_free(cap);
	pd_kube_client_free(kc);
	pd_kube_config_free(kcfg);
	if (token)
		memset(token, 0, strlen(token));
	free(token);
	return ret;
}
