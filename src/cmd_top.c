/*
 * cmd_top.c — `profd top`: the hottest functions of one service or of the
 * whole fleet, in the table `go tool pprof -top` prints.
 *
 * How: one request to the collector's fleet analytics route, GET
 * /api/1/top (by=function; the selector built from --type, --service and
 * -l, values escaped), normalised by default (docs/api.md "Normalisation":
 * gauges averaged per source, cumulative snapshots differenced; --raw
 * sums); its rows are printed with lib/pprof/report's -top formatter, with
 * a header saying what was aggregated and, for cpu, the cores. A collector
 * without API v1 (profefe, an older profd: 404 on /api/1/top) gets the API
 * v0 path: each service's profiles merged by the collector
 * (GET /api/0/profiles/merge), those merged here with lib/pprof's merger
 * (summed: API v0 cannot normalise) and ranked here. So is a request for
 * more rows than /api/1/top returns (over 1000 functions with -n 0).
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/http/params.h"
#include "../lib/pprof/pprof.h"
#include "../lib/pprof/report.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API1_TOP_MAX_N 1000 /* rows /api/1/top returns at most */

static const struct cli_flag top_sel[] = {
	{"service", 0, CO_SERVICE, "NAME", "one service", 0},
	{"all", 0, CO_ALL, NULL, "every service the collector has", 0},
	{"query", 0, CO_QUERY, "SELECTOR",
	 "the profiles as an API v1 selector instead, e.g.\n'cpu{service=~\"api-.*\",version=\"1.2\"}'", 0},
	{"type", 0, CO_TYPE, "TYPE", "cpu (default), heap, allocs, block, mutex, goroutine,\nthreadcreate", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag top_flags[] = {
	{"limit", 0, CO_LIMIT, "N",
	 "show the top N functions (default 10, 0 = all; also\n--nodes N; -n N still works, with a warning)", 0},
	{"nodes", 0, CO_LIMIT, "N", NULL, CLI_F_HIDDEN},
	{"output", 'o', 'o', "FORMAT", "table (default) or json (the collector's answer)", 0},
	{"sample-index", 'i', 'i', "NAME",
	 "sample type to rank by, e.g. samples, cpu,\nalloc_space, inuse_space, contentions, delay, or its\nindex "
	 "(default: the profile's default)",
	 0},
	{"cum", 0, CO_CUM, NULL, "sort by cumulative instead of flat cost", 0},
	{"raw", 0, CO_RAW, NULL,
	 "sum the profiles as they are (no per-source averages\nor differences): go tool pprof -top of them merged", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc top_doc = {
    "top",
    "Usage: profd top (--service S | --all | --query SELECTOR) [--type T] [--from TIME]\n"
    "                 [--to TIME] [-l K=V] [-n NAMESPACE] [--limit N] [-i SAMPLE_TYPE]\n"
    "                 [--cum] [--raw] [-o table|json]\n"
    "\n"
    "The functions with the highest flat (self) cost in the profiles a collector\n"
    "has for one service (--service) or for every service (--all), over a time\n"
    "range, in the table of `go tool pprof -top`. The collector computes it\n"
    "(GET /api/1/top), normalised: cpu and the scraper's deltas are summed (what\n"
    "`go tool pprof -top` prints for all those profiles merged); heap, goroutine\n"
    "and threadcreate snapshots are averaged per source (process) and the averages\n"
    "summed; cumulative=true allocs/block/mutex snapshots count latest minus\n"
    "earliest per source. The header says which. A collector without API v1\n"
    "(profefe) merges each service's profiles and they are summed here.\n"
    "\n",
    {top_sel, client_flags_range, client_flags_labels, client_flags_namespace, top_flags, client_flags_conn},
    "\n"
    "Columns: flat = cost in the function itself, flat% = share of the total,\n"
    "sum% = running sum of flat%, cum = cost in the function and its callees.\n"
    "For cpu the header has the cores used: CPU time / profiled wall time x\n"
    "processes, per service, summed.\n"
    "\n" CLIENT_HELP_TIME "\n"
    "Examples:\n"
    "  profd top --all                    # the fleet's CPU, the last hour\n"
    "  profd top --service auth --type heap -i alloc_space --from -24h --limit 20\n"
    "  profd top --query 'cpu{service=~\"api-.*\"}' -n prod -o json\n"
    "  profd top --all --type heap --raw  # the snapshots summed, not averaged\n"
    "  profd top --all --type mutex -i delay -l region=eu\n"
    "  kubectl profd top --service auth --from now-2h --to now-1h\n"
    "\n"
    "Exit codes: 0 success, 1 no profiles of the type in the range, the collector\n"
    "cannot be reached or refused, or the services' profiles cannot be merged;\n"
    "2 usage error.\n",
    0,
    NULL,
};

struct top_opts {
	bool all, cum, raw;
	long n;
	const char *sidx;
	const char *query; /* --query: the selector as given (labels, -n appended) */
	bool json;         /* -o json: the collector's answer */
};

/* ---- the selector ---------------------------------------------------------------- */

/* s as a selector string: "..." with Go escapes (\\ \" \n \t \r, other
 * control bytes \xHH; the rest, UTF-8 included, as is). */
static int sel_quote(struct pd_buf *b, const char *s)
{
	int rc = pd_buf_append(b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c && !rc; c++) {
		char e[8];
		if (*c == '\\' || *c == '"')
			snprintf(e, sizeof e, "\\%c", *c);
		else if (*c == '\n')
			snprintf(e, sizeof e, "\\n");
		else if (*c == '\t')
			snprintf(e, sizeof e, "\\t");
		else if (*c == '\r')
			snprintf(e, sizeof e, "\\r");
		else if (*c < 0x20 || *c == 0x7f)
			snprintf(e, sizeof e, "\\x%02x", *c);
		else {
			e[0] = (char)*c;
			e[1] = 0;
		}
		rc = pd_buf_append(b, e, strlen(e));
	}
	return rc ? rc : pd_buf_append(b, "\"", 1);
}

/* A label name: bare when the selector grammar allows it, else quoted. */
static int sel_name(struct pd_buf *b, const char *s)
{
	bool bare = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
	for (const char *c = s + 1; bare && *c; c++)
		bare = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		       strchr("_.:/-", *c);
	return bare ? pd_buf_append(b, s, strlen(s)) : sel_quote(b, s);
}

/* type{service="S",k="v",...} (NUL-terminated in b). */
static int build_selector(const struct client *c, struct pd_buf *b)
{
	int rc = pd_buf_append(b, c->type, strlen(c->type));
	if (!rc)
		rc = pd_buf_append(b, "{", 1);
	bool first = true;
	if (!rc && c->service) {
		rc = pd_buf_append(b, "service=", 8);
		if (!rc)
			rc = sel_quote(b, c->service);
		first = false;
	}
	for (size_t i = 0; i < c->nlabels && !rc; i++) {
		if (!first)
			rc = pd_buf_append(b, ",", 1);
		if (!rc)
			rc = sel_name(b, c->labels[i].key);
		if (!rc)
			rc = pd_buf_append(b, "=", 1);
		if (!rc)
			rc = sel_quote(b, c->labels[i].value);
		first = false;
	}
	return rc ? rc : pd_buf_append(b, "}", 2);
}

/* ---- the header ------------------------------------------------------------------- */

static void print_header(const struct client *c, bool all, const char *sample_type, const char *services, size_t nused,
                         size_t nsv)
{
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ], lbl[600];
	printf("Type: %s\n", sample_type);
	if (all)
		printf("Profiles: %s, %zu of %zu services: %s\n", c->type, nused, nsv, services);
	else
		printf("Profiles: %s, service %s\n", c->type, c->service);
	printf("Range: %s to %s (UTC)\n", pd_api_format_time(c->from_ns, a, sizeof a),
	       pd_api_format_time(c->to_ns, b, sizeof b));
	client_labels_str(c, lbl, sizeof lbl);
	if (c->nlabels)
		printf("Labels: %s\n", lbl + strlen(" with labels "));
}

static void nothing(const struct client *c, bool all)
{
	char range[128], lbl[600];
	client_range_str(c, range, sizeof range);
	client_labels_str(c, lbl, sizeof lbl);
	if (all)
		cli_cmd_error(
		    "top",
			      "no %s profiles of any service %s%s; see what there is with `%s get types --from %s --to %s`",
			      c->type, range, lbl, cli_prog, c->from, c->to);
	else
		cli_cmd_error(
		    "top",
		    "no %s profiles of service \"%s\" %s%s; see what there is with `%s get types --service %s "
				     "--from %s --to %s`",
			      c->type, c->service, range, lbl, cli_prog, c->service, c->from, c->to);
}

/* ---- API v1 ------------------------------------------------------------------------ */

/* What the answer's "normalization" did, in one header line (none for a plain sum). */
static void print_normalization(json_t *nm)
{
	const char *mode = client_jstr(nm, "mode");
	if (!strcmp(mode, "none")) {
		printf("Normalized: no (--raw): the profiles summed as they are\n");
		return;
	}
	bool gauge = strstr(mode, "gauge_average") != NULL, cumul = strstr(mode, "cumulative_delta") != NULL;
	if (!gauge && !cumul)
		return;
	printf("Normalized: %s%s%s (%lld sources, %lld profiles", gauge ? "each source's snapshots averaged" : "",
	       gauge && cumul ? "; " : "", cumul ? "each source's latest minus earliest cumulative snapshot" : "",
	       (long long)client_jint(nm, "sources"), (long long)client_jint(nm, "profiles"));
	if (client_jint(nm, "excluded"))
		printf(", %lld left out: a source's only cumulative snapshot", (long long)client_jint(nm, "excluded"));
	printf("); --raw sums them\n");
}

/* 0 printed; -1 = not served here (404) or more rows wanted than it returns:
 * use API v0; else an exit code (the error printed). */
static int top_api1(struct client *c, const struct top_opts *o)
{
	struct pd_buf sel = PD_BUF_INIT(0), q = PD_BUF_INIT(0), text = PD_BUF_INIT(0), used = PD_BUF_INIT(0);
	struct pd_client_resp r = {0};
	json_t *body = NULL;
	struct pd_top t = {0};
	char **sv = NULL;
	size_t nsv = 0;
	char t1[48], t2[48], nb[32];
	int rc = EXIT_INPUT;
	long want = o->n == 0 || o->n > API1_TOP_MAX_N ? API1_TOP_MAX_N : o->n;
	snprintf(nb, sizeof nb, "%ld", want);
	int bsel = 0;
	if (o->query) { /* the selector as given, with -l and -n appended */
		char *x = strdup(o->query);
		for (size_t i = 0; x && i < c->nlabels; i++) {
			char *y = client_selector_with(x, c->labels[i].key, c->labels[i].value);
			free(x);
			x = y;
		}
		bsel = !x || pd_buf_append(&sel, x, strlen(x) + 1);
		free(x);
	} else {
		bsel = build_selector(c, &sel);
	}
	if (bsel || pd_buf_append(&q, "/api/1/top?by=function", 22) ||
	    client_add_param(&q, "query", (const char *)sel.ptr) ||
	    client_add_param(&q, "from", client_unix_time(c->from_ns, t1, sizeof t1)) ||
	    client_add_param(&q, "to", client_unix_time(c->to_ns, t2, sizeof t2)) || client_add_param(&q, "n", nb) ||
	    client_add_param(&q, "value", o->cum ? "cum" : "flat") ||
	    (o->sidx && client_add_param(&q, "si", o->sidx)) ||
	    (o->raw && client_add_param(&q, "normalize", "false")) || pd_buf_append(&q, "", 1)) {
		cli_cmd_error("top", "out of memory");
		goto out;
	}
	if ((rc = client_get(c, (const char *)q.ptr, PD_CLIENT_MAX_JSON, &r)))
		goto out;
	if (r.status == 404 && !o->query && !o->json) { /* no such route: a profefe or API-v0-only collector */
		rc = -1;
		goto out;
	}
	struct pd_err err = {0};
	if (r.status == 400 && o->sidx) {
		char msg[512];
		pd_client_error(&r, msg, sizeof msg);
		const char *a = strstr(msg, "bad \"si\""), *ty = a ? strstr(a, "sample types ") : NULL;
		const char *e = ty ? strstr(ty, " (give") : NULL;
		if (e) {
			ty += strlen("sample types ");
			cli_cmd_error("top", "no sample type '%s' in the %s profiles; they have %.*s", o->sidx, c->type,
				      (int)(e - ty), ty);
			rc = EXIT_USAGE;
			goto out;
		}
	}
	if (r.status != 200) {
		char what[300];
		snprintf(what, sizeof what, "ranking the %s profiles", c->type);
		rc = client_http_fail(c, &r, what);
		goto out;
	}
	if (pd_client_json_body(&r, &body, &err)) {
		cli_cmd_error("top", "the collector's answer: %s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	if (!o->json) /* names are the uploaders': no control bytes onto the terminal */
		pd_client_term_safe(body);
	json_t *rows = json_object_get(body, "rows"), *svcs = json_object_get(body, "services");
	if (!json_is_object(body) || !json_is_array(rows)) {
		/* a 200 of another shape is not "no profiles" */
		cli_cmd_error("top", "the collector's answer is not an API v1 top (no \"rows\"): is %s a profd "
				     "collector? check --collector",
			      c->collector);
		rc = EXIT_INPUT;
		goto out;
	}
	size_t n = json_array_size(rows), functions = (size_t)client_jint(body, "functions");
	if (o->json) {
		json_dumpf(body, stdout, JSON_INDENT(2));
		putchar('\n');
		rc = EXIT_OK;
		goto out;
	}
	if (client_jint(body, "profiles") == 0 || !json_array_size(svcs)) {
		nothing(c, o->all);
		rc = EXIT_INPUT;
		goto out;
	}
	size_t need = o->n == 0 ? functions : (size_t)o->n < functions ? (size_t)o->n : functions;
	if (n < need && !o->query) { /* more rows than the route returns: rank them here */
		rc = -1;
		goto out;
	}
	/* the table: pd_top_text reads rows [0, shown) and counts t.n functions */
	t.rows = calloc(n + 1, sizeof *t.rows);
	if (!t.rows) {
		cli_cmd_error("top", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	t.n = functions < n ? n : functions;
	t.total = client_jint(body, "total");
	char why[160];
	if (client_top_rows(body, "flat", "cum", t.rows, why, sizeof why)) {
		cli_cmd_error("top", "the collector's answer is not an API v1 top: %s (is %s a profd collector? check "
				     "--collector)",
			      why, c->collector);
		rc = EXIT_INPUT;
		goto out;
	}
	const char *u = client_jstr(body, "unit");
	struct pd_str unit = {u, (uint32_t)strlen(u)};
	if (pd_top_text(&t, need, unit, &text, &err)) {
		cli_cmd_error("top", "%s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	/* the services used, and (--all) how many the collector has */
	for (size_t i = 0; i < json_array_size(svcs); i++) {
		const char *s = client_jstr(json_array_get(svcs, i), "service");
		if ((used.len && pd_buf_append(&used, ", ", 2)) || pd_buf_append(&used, s, strlen(s))) {
			cli_cmd_error("top", "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
	}
	if (pd_buf_append(&used, "", 1)) {
		cli_cmd_error("top", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	if (o->all && (rc = client_services(c, &sv, &nsv)))
		goto out;
	print_header(c, o->all, client_jstr(body, "sample_type"), (const char *)used.ptr, json_array_size(svcs), nsv);
	print_normalization(json_object_get(body, "normalization"));
	json_t *cores = json_object_get(body, "cores");
	if (json_is_number(cores))
		printf("Cores: %.3f (CPU time / profiled wall time x processes, per service)\n",
		       json_number_value(cores));
	fwrite(text.ptr, 1, text.len, stdout);
	rc = EXIT_OK;
out:
	free(t.rows);
	json_decref(body);
	pd_client_resp_free(&r);
	pd_buf_free(&sel);
	pd_buf_free(&q);
	pd_buf_free(&text);
	pd_buf_free(&used);
	client_strv_free(sv, nsv);
	return rc;
}

/* ---- API v0: merge per service at the collector, here across services -------------- */

static int top_local(struct client *c, const struct top_opts *o)
{
	int rc = EXIT_OK;
	char **sv = NULL;
	size_t nsv = 0, nused = 0;
	struct pd_merger *m = NULL;
	struct pd_profile *p = NULL;
	struct pd_top t = {0};
	struct pd_buf text = PD_BUF_INIT(0), used = PD_BUF_INIT(0);
	if ((rc = client_services(c, &sv, &nsv)))
		goto out;
	if (!(m = pd_merger_new())) {
		cli_cmd_error("top", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	for (size_t s = 0; s < nsv; s++) {
		struct pd_client_query q = client_query(c, sv[s]);
		char *path = pd_client_query_path("/api/0/profiles/merge", &q);
		struct pd_client_resp r = {0};
		rc = client_get(c, path, PD_CLIENT_MAX_PPROF, &r);
		free(path);
		if (rc)
			goto out;
		if (pd_client_nothing_found(&r)) { /* this service has none: fine */
			pd_client_resp_free(&r);
			continue;
		}
		if (r.status != 200) {
			char what[300];
			snprintf(what, sizeof what, "merging the %s profiles of service \"%s\"", c->type, sv[s]);
			rc = client_http_fail(c, &r, what);
			pd_client_resp_free(&r);
			goto out;
		}
		struct pd_err err = {0};
		struct pd_profile *one = NULL;
		int drc = pd_pprof_decode(r.body.ptr, r.body.len, NULL, &one, &err);
		pd_client_resp_free(&r);
		if (drc) {
			cli_cmd_error("top", "service \"%s\": the collector's merge is not a valid profile: %s", sv[s],
			              err.msg);
			rc = EXIT_INPUT;
			goto out;
		}
		drc = pd_merger_add(m, one, &err);
		pd_profile_free(one);
		if (drc) {
			cli_cmd_error("top", "service \"%s\": %s", sv[s], err.msg);
			rc = EXIT_INPUT;
			goto out;
		}
		if ((used.len && pd_buf_append(&used, ", ", 2)) || pd_buf_append(&used, sv[s], strlen(sv[s]))) {
			cli_cmd_error("top", "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
		nused++;
	}
	if (!nused) {
		nothing(c, o->all);
		rc = EXIT_INPUT;
		goto out;
	}
	struct pd_err err = {0};
	if (pd_merger_finish(m, &p, &err)) {
		cli_cmd_error("top", "%s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	if (p->nsample_types == 0) {
		cli_cmd_error("top", "the merged profile has no sample types");
		rc = EXIT_INPUT;
		goto out;
	}
	int si = pd_profile_sample_index(p, o->sidx);
	if (si < 0) {
		char types[512];
		pd_profile_describe_types(p, types, sizeof types);
		cli_cmd_error("top", "no sample type '%s' in the %s profiles; they have %s", o->sidx, c->type, types);
		rc = EXIT_USAGE;
		goto out;
	}
	int trc = pd_top_compute(p, (uint32_t)si, o->cum, &t, &err);
	if (!trc)
		t.total = pd_report_total(p, (uint32_t)si); /* pprof's 100 %: magnitudes, or the diff base's */
	if (trc ||
	    pd_top_text(&t, (size_t)o->n, p->strings[p->sample_types[si].unit], &text, &err) ||
	    pd_buf_append(&used, "", 1)) {
		cli_cmd_error("top", "%s", err.msg[0] ? err.msg : "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	struct pd_str st = p->strings[p->sample_types[si].type];
	char stype[128];
	snprintf(stype, sizeof stype, "%.*s", (int)st.len, st.ptr);
	print_header(c, o->all, stype, (const char *)used.ptr, nused, nsv);
	if (strcmp(c->type, "cpu"))
		printf(
		    "Normalized: no: the collector has no API v1 (GET /api/1/top); the profiles summed as they are\n");
	fwrite(text.ptr, 1, text.len, stdout);
out:
	pd_buf_free(&text);
	pd_buf_free(&used);
	pd_top_free(&t);
	pd_profile_free(p);
	pd_merger_free(m);
	client_strv_free(sv, nsv);
	return rc;
}

int cmd_top(int argc, char **argv)
{
	struct client c;
	client_init(&c, "top");
	struct top_opts to = {false, false, false, 10, NULL, NULL, false};
	const char *ns = NULL;
	int o, rc = EXIT_OK;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &top_doc)) {
		rc = EXIT_USAGE;
		goto out;
	}
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&top_doc); goto out;
		case CO_ALL: to.all = true; break;
		case CO_CUM: to.cum = true; break;
		case CO_RAW: to.raw = true; break;
		case CO_QUERY: to.query = optarg; break;
		case 'i': to.sidx = optarg; break;
		case 'o':
			if (strcmp(optarg, "table") && strcmp(optarg, "json")) {
				rc = cli_usage_error("top", "-o: want table or json, got '%s'", optarg);
				goto out;
			}
			to.json = !strcmp(optarg, "json");
			break;
		case CO_LIMIT:
			if ((rc = client_count(&c, "--limit", optarg, &to.n)))
				goto out;
			break;
		case 'n': /* the namespace, as everywhere; a number: the old row count */
			ns = NULL;
			if ((rc = client_n_legacy(&c, optarg, &to.n, &ns)) || (ns && (rc = client_opt(&c, 'n', ns))))
				goto out;
			break;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv)))
				goto out;
		}
	}
	if ((rc = client_no_args(&c, argc, argv, "")))
		goto out;
	if (to.query && (to.all || c.service || c.type)) {
		rc = cli_usage_error(
		    "top", "--query SELECTOR already says the type and services: no --service, --all or --type");
		goto out;
	}
	if (!to.query && to.all == (c.service != NULL)) {
		rc = cli_usage_error("top",
		                     to.all ? "--service and --all: choose one"
		                            : "--service NAME, --all (every service) or --query SELECTOR is required");
		goto out;
	}
	if (!c.type)
		c.type = "cpu";
	if ((rc = client_ready(&c, true)))
		goto out;
	rc = top_api1(&c, &to);
	if (rc == -1 && (to.query || to.json)) {
		cli_cmd_error("top", "the collector has no API v1 (GET /api/1/top): --query and -o json need it");
		rc = EXIT_INPUT;
	} else if (rc == -1)
		rc = top_local(&c, &to);
out:
	client_free(&c);
	return rc;
}
