/*
 * cmd_diff.c — `profd diff`: what changed between two selections of a
 * collector's profiles (e.g. version="1.0" vs version="1.1"), per function,
 * in the table `go tool pprof -top -diff_base BASE TARGET` prints; or the
 * diff profile itself (-o) for go tool pprof's other views.
 *
 * How: one request, GET /api/1/diff (format=top, or pprof for -o and
 * --print-url): the collector merges both selections and computes the
 * diff; this command prints its rows with lib/pprof/report's -top
 * formatter. The collector flags, time parsing and error lines are
 * collector_cli.c's.
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/http/params.h"
#include "../lib/pprof/pprof.h"
#include "../lib/pprof/report.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { O_BASE = 0x2000, O_TARGET, O_BASE_FROM, O_BASE_TO, O_NORMALIZE, O_RAW };

static const struct cli_flag diff_sel[] = {
	{"base", 0, O_BASE, "SELECTOR", "the profiles to compare against, e.g. 'cpu{version=\"1.0\"}'", 0},
	{"target", 0, O_TARGET, "SELECTOR",
	 "the profiles to compare, e.g. 'cpu{version=\"1.1\"}'\n"
	 "(selectors: type{label=\"v\", label=~\"regex\", service!=\"x\"})",
	 0},
	/* the target's range: client_opt's --from and --to, said of the target */
	{"from", 0, CO_FROM, "TIME", "start of the target's range, inclusive (default -1h)", 0},
	{"to", 0, CO_TO, "TIME", "end of the target's range, inclusive (default now)", 0},
	{"base-from", 0, O_BASE_FROM, "TIME", "start of the base's range (default: --from)", 0},
	{"base-to", 0, O_BASE_TO, "TIME", "end of the base's range (default: --to)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag diff_flags[] = {
	{"limit", 0, CO_LIMIT, "N",
	 "show the top N functions (default 10, 0 = all; also\n--nodes N; -n N still works, with a warning)", 0},
	{"nodes", 0, CO_LIMIT, "N", NULL, CLI_F_HIDDEN},
	{"sample-index", 'i', 'i', "NAME",
	 "sample type, e.g. cpu, samples, alloc_space, inuse_space,\ndelay (default: the profiles' default)", 0},
	{"cum", 0, CO_CUM, NULL, "sort by cumulative instead of flat change", 0},
	{"normalize", 0, O_NORMALIZE, NULL,
	 "scale the target so its total equals the base's (pprof's\n-normalize): compare shapes, not volumes", 0},
	{"raw", 0, O_RAW, NULL, "sum each side's profiles as they are (no per-source\naverages of snapshots)", 0},
	{"output", 'o', 'o', "FORMAT",
	 "table (default), json (the collector's answer) or pprof\n(the diff profile, to -O FILE or stdout)", 0},
	{"output-file", 'O', 'O', "FILE",
	 "write the diff profile (gzip'd profile.proto) to FILE\n(- = stdout) instead of printing the table; go tool\n"
	 "pprof reads it as it reads -diff_base",
	 0},
	{"print-url", 0, CO_PRINT_URL, NULL,
	 "print the URL of the diff profile on the collector, for\n`go tool pprof URL`", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc diff_doc = {
	"diff",
	"Usage: profd diff --base SELECTOR --target SELECTOR [--from TIME] [--to TIME]\n"
	"                  [--base-from TIME] [--base-to TIME] [--limit N] [--normalize] [--raw]\n"
	"                  [-n NAMESPACE] [-o table|json|pprof] [-O FILE]\n"
	"\n"
	"What changed between two selections of a collector's profiles, per function:\n"
	"the table `go tool pprof -top -diff_base BASE TARGET` prints for BASE = the\n"
	"base's profiles merged and TARGET = the target's (flat and cum are target\n"
	"minus base; percentages are of the base's total). The collector computes it\n"
	"(GET /api/1/diff); with -o the diff profile itself is saved, for go tool pprof.\n"
	"Each side is aggregated as `profd top` aggregates: heap, goroutine and\n"
	"threadcreate snapshots averaged per source (process), cumulative=true\n"
	"snapshots counted latest minus earliest; --raw sums each side as it is.\n"
	"\n",
	{diff_sel, client_flags_namespace, diff_flags, client_flags_conn},
	"\n"
	"Columns: flat = change in the function itself, cum = change in the function\n"
	"and its callees, flat%/cum% = of the base's total, sum% = running sum of flat%.\n"
	"Negative = the target spends less.\n"
	"\n" CLIENT_HELP_TIME "\n"
	"Examples:\n"
	"  profd diff --base 'cpu{service=\"auth\",version=\"1.0\"}' --target 'cpu{service=\"auth\",version=\"1.1\"}'\n"
	"  profd diff --base 'cpu{service=\"auth\"}' --base-from -2d --base-to -1d \\\n"
	"      --target 'cpu{service=\"auth\"}' --from -1d --normalize --limit 20\n"
	"  profd diff --base 'heap{version=\"1.0\"}' --target 'heap{version=\"1.1\"}' -i alloc_space -O d.pb.gz\n"
	"  go tool pprof -http :8080 \"$(profd diff --base 'cpu{version=\"1.0\"}' --target 'cpu{version=\"1.1\"}' "
	"--print-url)\"\n"
	"\n"
	"Exit codes: 0 success, 1 no profiles match one side, the collector cannot be\n"
	"reached or refused (its message is shown), 2 usage error.\n",
	0,
    NULL,
};

static void print_side(const char *what, json_t *s, struct pd_str unit)
{
	char v[48];
	printf("%s: %s, %" PRId64 " profiles, %s to %s (UTC), total %s\n", what, client_jstr(s, "query"),
	       client_jint(s, "profiles"), client_jstr(s, "from"), client_jstr(s, "to"),
	       pd_fmt_value(v, sizeof v, client_jint(s, "total"), unit));
}

/* Print the collector's format=top answer as `pprof -top -diff_base`. */
static int print_table(const struct client *c, json_t *body, long nrows)
{
	json_t *rows = json_object_get(body, "rows");
	size_t n = json_array_size(rows);
	struct pd_top t = {0};
	t.rows = calloc(n + 1, sizeof *t.rows);
	if (!t.rows) {
		cli_cmd_error(c->cmd, "out of memory");
		return EXIT_INPUT;
	}
	t.n = (size_t)client_jint(body, "functions");
	if (t.n < n)
		t.n = n;
	t.total = client_jint(body, "total");
	char why[160];
	if (client_top_rows(body, "delta_flat", "delta_cum", t.rows, why, sizeof why)) {
		cli_cmd_error(c->cmd, "the collector's answer is not an API v1 diff: %s (is %s a profd collector? "
				      "check --collector)",
			      why, c->collector);
		free(t.rows);
		return EXIT_INPUT;
	}
	const char *u = client_jstr(body, "unit");
	struct pd_str unit = {u, (uint32_t)strlen(u)};
	struct pd_buf text = PD_BUF_INIT(0);
	struct pd_err err = {0};
	int rc = pd_top_text(&t, nrows == 0 ? n : (size_t)nrows < n ? (size_t)nrows : n, unit, &text, &err);
	if (rc) {
		cli_cmd_error(c->cmd, "%s", err.msg);
		free(t.rows);
		pd_buf_free(&text);
		return EXIT_INPUT;
	}
	printf("Type: %s\n", client_jstr(body, "sample_type"));
	print_side("Base", json_object_get(body, "base"), unit);
	print_side("Target", json_object_get(body, "target"), unit);
	if (json_is_true(json_object_get(body, "normalized")))
		printf("Normalized: the target scaled to the base's total\n");
	fwrite(text.ptr, 1, text.len, stdout);
	free(t.rows);
	pd_buf_free(&text);
	return EXIT_OK;
}

int cmd_diff(int argc, char **argv)
{
	struct client c;
	client_init(&c, "diff");
	const char *base = NULL, *target = NULL, *bfrom = NULL, *bto = NULL, *sidx = NULL, *outf = NULL, *ns = NULL;
	const char *fmt = "table";
	static const char *const formats[] = {"table", "json", "pprof", NULL};
	char *nbase = NULL, *ntarget = NULL;
	bool normalize = false, raw = false, cum = false, print_url = false;
	long n = 10;
	int o, rc = EXIT_OK;
	struct pd_buf q = PD_BUF_INIT(0);
	struct pd_client_resp r = {0};
	json_t *body = NULL;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &diff_doc)) {
		rc = EXIT_USAGE;
		goto out;
	}
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&diff_doc); goto out;
		case O_BASE: base = optarg; break;
		case O_TARGET: target = optarg; break;
		case O_BASE_FROM: bfrom = optarg; break;
		case O_BASE_TO: bto = optarg; break;
		case O_NORMALIZE: normalize = true; break;
		case O_RAW: raw = true; break;
		case CO_CUM: cum = true; break;
		case CO_PRINT_URL: print_url = true; break;
		case 'i': sidx = optarg; break;
		case 'o': client_o_legacy(&c, optarg, formats, &fmt, &outf); break;
		case 'O': outf = optarg; break;
		case CO_LIMIT:
			if ((rc = client_count(&c, "--limit", optarg, &n)))
				goto out;
			break;
		case CO_NAMESPACE: /* a name, never a count */
			if (!*optarg || strchr(optarg, ',') || strchr(optarg, '=')) {
				rc = cli_usage_error("diff", "--namespace: want a namespace name, got '%s'", optarg);
				goto out;
			}
			ns = optarg;
			break;
		case 'n': /* the namespace, as everywhere; a number: the old row count */
			if ((rc = client_n_legacy(&c, optarg, &n, &ns)))
				goto out;
			break;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv)))
				goto out;
		}
	}
	if ((rc = client_no_args(&c, argc, argv, "")))
		goto out;
	if (!base || !target) {
		rc = cli_usage_error("diff", "--base SELECTOR and --target SELECTOR are required (e.g. --base "
					     "'cpu{version=\"1.0\"}' --target 'cpu{version=\"1.1\"}')");
		goto out;
	}
	if (!strcmp(fmt, "pprof") && !outf && !print_url)
		outf = "-";
	if (ns) { /* both sides in the namespace */
		if (!(nbase = client_selector_with(base, "namespace", ns)) ||
		    !(ntarget = client_selector_with(target, "namespace", ns))) {
			cli_cmd_error("diff", "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
		base = nbase;
		target = ntarget;
	}
	if (outf && print_url) {
		rc = cli_usage_error("diff", "-O and --print-url: choose one");
		goto out;
	}
	if (outf && !strcmp(outf, "-") && isatty(STDOUT_FILENO)) {
		rc = cli_usage_error("diff",
		                     "refusing to write a binary profile to a terminal; use -O FILE or --print-url");
		goto out;
	}
	if ((rc = client_ready(&c, true)))
		goto out;
	/* the base's range: its own flags, else the target's */
	int64_t bf = c.from_ns, bt = c.to_ns;
	struct pd_err err = {0};
	int64_t now = client_now_ns();
	if ((bfrom && (rc = client_parse_time(&c, "--base-from", "base_from", bfrom, now, &bf))) ||
	    (bto && (rc = client_parse_time(&c, "--base-to", "base_to", bto, now, &bt))))
		goto out;
	if (bf > bt) {
		char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
		rc = cli_usage_error("diff", "the base's range starts (%s) after it ends (%s)",
				     pd_api_format_time(bf, a, sizeof a), pd_api_format_time(bt, b, sizeof b));
		goto out;
	}
	char t1[48], t2[48], t3[48], t4[48], nb[32];
	snprintf(nb, sizeof nb, "%ld", n == 0 ? 100000L : n);
	bool pprof = outf || print_url;
	if (pd_buf_append(&q, "/api/1/diff?format=", 19) || pd_buf_append(&q, pprof ? "pprof" : "top", pprof ? 5 : 3) ||
	    client_add_param(&q, "base", base) || client_add_param(&q, "target", target) ||
	    client_add_param(&q, "from", client_unix_time(c.from_ns, t1, sizeof t1)) ||
	    client_add_param(&q, "to", client_unix_time(c.to_ns, t2, sizeof t2)) ||
	    client_add_param(&q, "base_from", client_unix_time(bf, t3, sizeof t3)) ||
	    client_add_param(&q, "base_to", client_unix_time(bt, t4, sizeof t4)) ||
	    (!pprof && client_add_param(&q, "n", nb)) || (normalize && client_add_param(&q, "normalize", "true")) ||
	    (raw && client_add_param(&q, "raw", "true")) || (sidx && client_add_param(&q, "sample_index", sidx)) ||
	    (cum && client_add_param(&q, "value", "cum")) || pd_buf_append(&q, "", 1)) {
		cli_cmd_error("diff", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	if (print_url) {
		printf("%s%s\n", c.collector, (const char *)q.ptr);
		goto out;
	}
	if ((rc = client_get(&c, (const char *)q.ptr, pprof ? PD_CLIENT_MAX_PPROF : PD_CLIENT_MAX_JSON, &r)))
		goto out;
	if (r.status != 200) {
		rc = client_http_fail(&c, &r, "comparing the selections");
		goto out;
	}
	if (pprof) {
		struct pd_profile *dp = NULL; /* checked as merge checks its answer: never a page saved as .pb.gz */
		if (pd_pprof_decode(r.body.ptr, r.body.len, NULL, &dp, &err)) {
			cli_cmd_error("diff", "the collector's answer is not a valid profile: %s", err.msg);
			rc = EXIT_INPUT;
			goto out;
		}
		pd_profile_free(dp);
		if (pd_write_file(outf, r.body.ptr, r.body.len, &err)) {
			cli_cmd_error("diff", "%s", err.msg);
			rc = EXIT_INPUT;
			goto out;
		}
		if (strcmp(outf, "-"))
			fprintf(stderr, "%s diff: wrote %s (%zu bytes): go tool pprof -top %s\n", cli_prog, outf,
			        r.body.len, outf);
		goto out;
	}
	if (pd_client_json_body(&r, &body, &err)) {
		cli_cmd_error("diff", "the collector's answer: %s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	if (!json_is_object(body) || !json_is_array(json_object_get(body, "rows"))) {
		/* a 200 of another shape is not an empty diff */
		cli_cmd_error("diff", "the collector's answer is not an API v1 diff (no \"rows\"): is %s a profd "
				      "collector? check --collector",
			      c.collector);
		rc = EXIT_INPUT;
		goto out;
	}
	if (!strcmp(fmt, "json")) {
		json_dumpf(body, stdout, JSON_INDENT(2));
		putchar('\n');
	} else {
		pd_client_term_safe(body); /* names are the uploaders': no control bytes onto the terminal */
	rc = print_table(&c, body, n);
	}
out:
	free(nbase);
	free(ntarget);
	json_decref(body);
	pd_client_resp_free(&r);
	pd_buf_free(&q);
	client_free(&c);
	return rc;
}
