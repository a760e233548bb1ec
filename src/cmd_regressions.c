/*
 * cmd_regressions.c — `profd regressions`: which functions got costlier
 * after each rollout (a new value of the version label), per service and
 * for the fleet; one request, GET /api/1/regressions (format=table or
 * json), which does the work (lib/query/regress.h says how).
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/http/params.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_ALL = 0x2100, O_QUERY, O_LABEL, O_MIN, O_BASE, O_TARGET };

static const struct cli_flag regressions_sel[] = {
	{"service", 's', 's', "S", "one service (default: --all)", 0},
	{"all", 0, O_ALL, NULL, "every service (the default)", 0},
	{"query", 0, O_QUERY, "SELECTOR", "the profiles, e.g. 'cpu{env=\"prod\"}' (instead of --service\nand --type)", 0},
	{"type", 't', 't', "TYPE", "cpu (default), heap, allocs, block, mutex, goroutine", 0},
	/* client_opt's --from and --to, with this command's default */
	{"from", 0, CO_FROM, "TIME", "start of the range, inclusive (default -24h)", 0},
	{"to", 0, CO_TO, "TIME", "end of the range, inclusive (default now)", 0},
	{"label", 0, O_LABEL, "NAME", "the version label (default version)", 0},
	{"min-change", 0, O_MIN, "P",
	 "leave out functions whose cost changed by less than P,\ne.g. 5% or 0.05 (default: all)", 0},
	{"base", 0, O_BASE, "SELECTOR",
	 "instead of the rollouts: compare this selection with\n--target's, service by service (both needed)", 0},
	{"target", 0, O_TARGET, "SELECTOR", "the selection compared with --base's", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag regressions_flags[] = {
	{"limit", 0, CO_LIMIT, "N", "functions per service (default 20, 0 = all)", 0},
	{"cum", 0, CO_CUM, NULL, "rank by the change of cum (function and callees) instead\nof flat", 0},
	{"sample-index", 'i', 'i', "NAME", "sample type, e.g. alloc_space (default: the profiles')", 0},
	{"output", 'o', 'o', "FORMAT", "table (default) or json (the API's answer)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc regressions_doc = {
	"regressions",
	"Usage: profd regressions [--service S | --all | --query SELECTOR] [--type TYPE]\n"
	"                         [--from TIME] [--to TIME] [--label NAME] [--min-change P]\n"
	"                         [--base SELECTOR --target SELECTOR] [-n NAMESPACE]\n"
	"                         [--limit N] [--cum] [-o table|json]\n"
	"\n"
	"Which functions got more expensive after each rollout, in which services, and by\n"
	"how much. A rollout is found in the data: per service, a value of the version\n"
	"label (--label, default version) first seen after another one. For each, the\n"
	"profiles of the old and the new version in the range are merged (normalised as\n"
	"`profd top` does), every function's cost is put on a rate (CPU: its share of the\n"
	"CPU time the version used; deltas: per profile; snapshots: per process), and\n"
	"the functions are ranked by the change of that rate. A change smaller than\n"
	"twice its statistical noise (from the sample counts behind each side) is marked\n"
	"\"(within noise)\" and listed after the real ones. The fleet's line per function\n"
	"sums the changes beyond noise over services.\n"
	"\n",
	{regressions_sel, client_flags_namespace, regressions_flags, client_flags_conn},
	"\n" CLIENT_HELP_TIME "\n"
	"Examples:\n"
	"  profd regressions --from -24h --min-change 5%\n"
	"  profd regressions --service auth --cum --limit 10\n"
	"  kubectl profd regressions -n prod --min-change 10%\n"
	"  profd regressions --base 'cpu{version=\"1.0\"}' --target 'cpu{version=\"1.1\"}'\n"
	"  kubectl profd regressions --all -o json | jq '.fleet[:5]'\n"
	"\n"
	"Exit codes: 0 success, 1 the collector cannot be reached or refused (its message\n"
	"is shown), 2 usage error.\n",
	0,
    NULL,
};

/* A selector for the service and type flags: type{service="S"}. */
static char *selector_of(const char *type, const char *service)
{
	struct pd_buf b = PD_BUF_INIT(0);
	int bad = pd_buf_appendf(&b, "%s{", type ? type : "cpu");
	if (service) {
		bad = bad || pd_buf_appendf(&b, "service=\"");
		for (const char *p = service; !bad && *p; p++)
			bad = (*p == '"' || *p == '\\') ? pd_buf_appendf(&b, "\\%c", *p) : pd_buf_append(&b, p, 1);
		bad = bad || pd_buf_appendf(&b, "\"");
	}
	bad = bad || pd_buf_appendf(&b, "}") || pd_buf_append(&b, "", 1);
	if (bad) {
		pd_buf_free(&b);
		return NULL;
	}
	return (char *)b.ptr;
}

int cmd_regressions(int argc, char **argv)
{
	struct client c;
	client_init(&c, "regressions");
	c.from = "-24h"; /* rollouts are rare: a day by default */
	const char *service = NULL, *type = NULL, *query = NULL, *label = NULL, *minc = NULL, *base = NULL,
	           *target = NULL, *sidx = NULL, *out = "table";
	const char *ns = NULL;
	char *nsel = NULL, *nbase = NULL, *ntarget = NULL;
	bool all = false, cum = false;
	long n = 20;
	int o, rc = EXIT_OK;
	struct pd_buf q = PD_BUF_INIT(0);
	struct pd_client_resp r = {0};
	char *sel = NULL;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &regressions_doc)) {
		rc = EXIT_USAGE;
		goto done;
	}
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&regressions_doc); goto done;
		case 's': service = optarg; break;
		case 't': type = optarg; break;
		case O_ALL: all = true; break;
		case O_QUERY: query = optarg; break;
		case O_LABEL: label = optarg; break;
		case O_MIN: minc = optarg; break;
		case O_BASE: base = optarg; break;
		case O_TARGET: target = optarg; break;
		case CO_CUM: cum = true; break;
		case 'i': sidx = optarg; break;
		case 'o': out = optarg; break;
		case CO_LIMIT:
			if ((rc = client_count(&c, "--limit", optarg, &n)))
				goto done;
			if (n == 0)
				n = 10000;
			break;
		case 'n': /* the namespace, as everywhere; a number: a row count (as top and diff) */
			if ((rc = client_n_legacy(&c, optarg, &n, &ns)))
				goto done;
			if (n == 0)
				n = 10000;
			break;
		case CO_NAMESPACE:
			if (!*optarg || strchr(optarg, ',') || strchr(optarg, '=')) {
				rc = cli_usage_error("regressions", "-n/--namespace: want a namespace name, got '%s'",
				                     optarg);
				goto done;
			}
			ns = optarg;
			break;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv)))
				goto done;
		}
	}
	if ((rc = client_no_args(&c, argc, argv, "")))
		goto done;
	if (strcmp(out, "table") && strcmp(out, "json")) {
		rc = cli_usage_error("regressions", "-o: want table or json, got '%s'", out);
		goto done;
	}
	if ((service && all) || (query && (service || type || all))) {
		rc = cli_usage_error("regressions",
		                     "give one of --service, --all or --query (with --type only for the first two)");
		goto done;
	}
	if (!base != !target || (base && (query || service))) {
		rc = cli_usage_error("regressions", "--base and --target go together, without --query or --service");
		goto done;
	}
	if ((rc = client_ready(&c, true)))
		goto done;
	if (!base && !query && !(sel = selector_of(type, service))) {
		cli_cmd_error("regressions", "out of memory");
		rc = EXIT_INPUT;
		goto done;
	}
	if (ns) { /* every selection in the namespace */
		const char *qs = query ? query : sel;
		if ((qs && !(nsel = client_selector_with(qs, "namespace", ns))) ||
		    (base && (!(nbase = client_selector_with(base, "namespace", ns)) ||
		              !(ntarget = client_selector_with(target, "namespace", ns))))) {
			cli_cmd_error("regressions", "out of memory");
			rc = EXIT_INPUT;
			goto done;
		}
		if (qs)
			query = nsel;
		if (base) {
			base = nbase;
			target = ntarget;
		}
	}
	char t1[48], t2[48], nb[32];
	snprintf(nb, sizeof nb, "%ld", n);
	bool json = !strcmp(out, "json");
	if (pd_buf_appendf(&q, "/api/1/regressions?format=%s", json ? "json" : "table") ||
	    (!base && client_add_param(&q, "query", query ? query : sel)) ||
	    (base && (client_add_param(&q, "base", base) || client_add_param(&q, "target", target))) ||
	    client_add_param(&q, "from", client_unix_time(c.from_ns, t1, sizeof t1)) ||
	    client_add_param(&q, "to", client_unix_time(c.to_ns, t2, sizeof t2)) || client_add_param(&q, "n", nb) ||
	    (label && client_add_param(&q, "label", label)) || (minc && client_add_param(&q, "min_change", minc)) ||
	    (cum && client_add_param(&q, "value", "cum")) || (sidx && client_add_param(&q, "sample_index", sidx)) ||
	    pd_buf_append(&q, "", 1)) {
		cli_cmd_error("regressions", "out of memory");
		rc = EXIT_INPUT;
		goto done;
	}
	if ((rc = client_get(&c, (const char *)q.ptr, PD_CLIENT_MAX_JSON, &r)))
		goto done;
	if (r.status != 200) {
		rc = client_http_fail(&c, &r, "the regression report");
		goto done;
	}
	if (json) {
		struct pd_err err;
		json_t *body = NULL;
		if (pd_client_json_body(&r, &body, &err)) {
			cli_cmd_error("regressions", "the collector's answer: %s", err.msg);
			rc = EXIT_INPUT;
			goto done;
		}
		json_dumpf(body, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(body);
	} else if (!r.body.len || !r.text) {
		/* profd's table is text/plain and always says something ("no
		 * rollout ..." at least): an empty answer or an HTML page is a
		 * proxy or another server, not "no regressions" */
		char what[256];
		pd_client_error(&r, what, sizeof what);
		cli_cmd_error("regressions", "the collector at %s answered 200 with %s%s, not a regression report "
		              "(is this a profd collector? check --collector)", c.collector,
		              r.body.len ? "this: " : "an empty body", r.body.len ? what : "");
		rc = EXIT_INPUT;
	} else {
		/* the server's table: names and versions are the uploaders' */
		pd_client_term_write(stdout, (const char *)r.body.ptr, r.body.len);
	}
done:
	free(sel);
	free(nsel);
	free(nbase);
	free(ntarget);
	pd_client_resp_free(&r);
	pd_buf_free(&q);
	client_free(&c);
	return rc;
}
