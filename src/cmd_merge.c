/*
 * cmd_merge.c — `profd merge`: the collector merges the profiles of a
 * service, type, time range and labels (GET /api/0/profiles/merge) and the
 * result is written to a file (atomically: temp, fsync, rename) or stdout;
 * --print-url prints that URL instead, for `go tool pprof URL`.
 *
 * The answer is decoded before it is written, so a file this command
 * leaves is always a valid profile.
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/pprof/pprof.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_flag merge_sel[] = {
	{"service", 0, CO_SERVICE, "NAME", "the service (required)", 0},
	{"type", 0, CO_TYPE, "TYPE", "cpu heap allocs block mutex goroutine threadcreate\nother (required)", 0},
	{"query", 0, CO_QUERY, "SELECTOR",
	 "instead of --service and --type: an API v1 selector,\ne.g. 'cpu{service=~\"api-.*\",version=\"1.2\"}', merged\n"
	 "with normalisation (GET /api/1/merge)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag merge_flags[] = {
	{"limit", 0, CO_LIMIT, "N", "merge only the newest N profiles (default all)", 0},
	{"output-file", 'O', 'O', "FILE",
	 "write the merged profile (gzip'd profile.proto) to\nFILE, atomically; '-' = stdout (refused when it is a\n"
	 "terminal)",
	 0},
	{"output", 'o', 'o', "FORMAT", "pprof (the only one; -o FILE still works, with a warning)", 0},
	{"print-url", 0, CO_PRINT_URL, NULL,
	 "print the URL of this merge on the collector and\nexit, for `go tool pprof URL` or curl (the times\n"
	 "written out in UTC)",
	 0},
	{"quiet", 'q', 'q', NULL, "no summary line on stderr", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc merge_doc = {
	"merge",
	"Usage: profd merge (--service S --type T | --query SELECTOR) [--from TIME]\n"
	"                   [--to TIME] [-l K=V] [-n NAMESPACE] (-O FILE | --print-url)\n"
	"\n"
	"Merge the profiles a collector has for one service and type in a time range\n"
	"(and with these labels) into one pprof profile: the collector merges them\n"
	"(GET /api/0/profiles/merge, pprof's Merge semantics) and sends it gzip'd.\n"
	"Open the result with `go tool pprof FILE`.\n"
	"\n",
	{merge_sel, client_flags_range, client_flags_labels, client_flags_namespace, merge_flags, client_flags_conn},
	"\n" CLIENT_HELP_TIME "\n"
	"Examples:\n"
	"  profd merge --service auth --type cpu -O auth-cpu.pb.gz\n"
	"  go tool pprof -top auth-cpu.pb.gz\n"
	"  profd merge --service auth --type heap --from -24h -l version=1.2.0 -O - |\n"
	"      profd pprof top -\n"
	"  go tool pprof -http=: \\\n"
	"      \"$(profd merge --service auth --type cpu --from -6h --print-url)\"\n"
	"  kubectl profd merge --service auth --type cpu --from now-2h -O cpu.pb.gz\n"
	"\n"
	"Exit codes: 0 success, 1 nothing to merge in the range, the collector cannot be\n"
	"reached or refused the merge, or the output cannot be written; 2 usage error.\n",
	0,
    NULL,
};

int cmd_merge(int argc, char **argv)
{
	struct client c;
	client_init(&c, "merge");
	const char *outpath = NULL, *fmt = "pprof", *query = NULL;
	static const char *const formats[] = {"pprof", NULL};
	char *sel = NULL;
	bool print_url = false, quiet = false;
	long limit = 0;
	int o, rc = EXIT_OK;
	char *path = NULL;
	struct pd_client_resp r = {0};
	struct pd_profile *p = NULL;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &merge_doc)) {
		rc = EXIT_USAGE;
		goto out;
	}
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&merge_doc); goto out;
		case 'o': client_o_legacy(&c, optarg, formats, &fmt, &outpath); break;
		case 'O': outpath = optarg; break;
		case CO_QUERY: query = optarg; break;
		case 'q': quiet = true; break;
		case CO_PRINT_URL: print_url = true; break;
		case CO_LIMIT:
			if ((rc = client_count(&c, "--limit", optarg, &limit)))
				goto out;
			break;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv)))
				goto out;
		}
	}
	if ((rc = client_no_args(&c, argc, argv, " (the output file goes after -O)")))
		goto out;
	if (query && (c.service || c.type || limit)) {
		rc = cli_usage_error(
		    "merge", "--query SELECTOR already says the type and services: no --service, --type or --limit");
		goto out;
	}
	if (!query && !c.service) {
		rc = cli_usage_error("merge", "--service is required (list them with `%s get services`)", cli_prog);
		goto out;
	}
	if (!query && !c.type) {
		rc = cli_usage_error("merge",
		                     "--type is required: cpu, heap, allocs, block, mutex, goroutine, "
					      "threadcreate or other (see `%s get types --service %s`)",
				     cli_prog, c.service);
		goto out;
	}
	if (print_url && outpath) {
		rc = cli_usage_error("merge", "--print-url and -O: choose one");
		goto out;
	}
	if (!print_url && !outpath)
		outpath = "-";
	if (!print_url && !strcmp(outpath, "-") && isatty(1)) {
		rc = cli_usage_error("merge",
		                     "refusing to write a binary profile to a terminal; use -O FILE or --print-url");
		goto out;
	}
	if ((rc = client_ready(&c, true)))
		goto out;
	if (query) { /* API v1: the selector, with -l and -n appended */
		sel = strdup(query);
		for (size_t i = 0; sel && i < c.nlabels; i++) {
			char *y = client_selector_with(sel, c.labels[i].key, c.labels[i].value);
			free(sel);
			sel = y;
		}
		struct pd_buf b = PD_BUF_INIT(0);
		char t1[48], t2[48];
		if (!sel || pd_buf_appendf(&b, "/api/1/merge?format=pprof") || client_add_param(&b, "query", sel) ||
		    client_add_param(&b, "from", client_unix_time(c.from_ns, t1, sizeof t1)) ||
		    client_add_param(&b, "to", client_unix_time(c.to_ns, t2, sizeof t2)) || pd_buf_append(&b, "", 1))
			pd_buf_free(&b);
		path = (char *)b.ptr;
	} else {
	struct pd_client_query q = client_query(&c, NULL);
	q.limit = limit;
	path = pd_client_query_path("/api/0/profiles/merge", &q);
	}
	if (print_url) {
		if (!path) {
			cli_cmd_error("merge", "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
		printf("%s%s\n", c.collector, path);
		goto out;
	}
	char range[128], lbl[600];
	client_range_str(&c, range, sizeof range);
	client_labels_str(&c, lbl, sizeof lbl);
	if (!path) {
		cli_cmd_error("merge", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	if ((rc = client_get(&c, path, PD_CLIENT_MAX_PPROF, &r)))
		goto out;
	if (query && r.status != 200) {
		rc = client_http_fail(&c, &r, "merging the selected profiles");
		goto out;
	}
	if (pd_client_nothing_found(&r)) {
		cli_cmd_error(
		    "merge",
		    "no %s profiles of service \"%s\" %s%s; see what there is with `%s get types --service %s "
			  "--from %s --to %s`",
			  c.type, c.service, range, lbl, cli_prog, c.service, c.from, c.to);
		rc = EXIT_INPUT;
		goto out;
	}
	if (r.status != 200) {
		char what[300];
		snprintf(what, sizeof what, "merging the %s profiles of service \"%s\"", c.type, c.service);
		rc = client_http_fail(&c, &r, what);
		goto out;
	}
	struct pd_err err = {0};
	if (pd_pprof_decode(r.body.ptr, r.body.len, NULL, &p, &err)) {
		cli_cmd_error("merge", "the collector's answer is not a valid profile: %s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	if (pd_write_file(outpath, r.body.ptr, r.body.len, &err)) {
		cli_cmd_error("merge", "%s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	if (!quiet) {
		char sz[32];
		if (query)
			fprintf(stderr, "%s merge: wrote %s (%s, %zu samples): %s %s\n", cli_prog,
			        strcmp(outpath, "-") ? outpath : "stdout",
			        pd_fmt_bytes(sz, sizeof sz, (double)r.body.len), p->nsamples, sel, range);
		else
			fprintf(stderr, "%s merge: wrote %s (%s, %zu samples): %s profiles of service \"%s\" %s%s\n",
			        cli_prog, strcmp(outpath, "-") ? outpath : "stdout",
			        pd_fmt_bytes(sz, sizeof sz, (double)r.body.len), p->nsamples, c.type, c.service, range,
			        lbl);
	}
out:
	pd_profile_free(p);
	pd_client_resp_free(&r);
	free(path);
	free(sel);
	client_free(&c);
	return rc;
}
