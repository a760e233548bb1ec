/*
 * collector_cli.c — the shared part of the collector commands (see collector_cli.h):
 * flags, time range, labels, connection, and one line per failure.
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "version.h"
#include "../lib/http/auth.h"
#include "../lib/http/params.h"
#include "../lib/pprof/report.h"
#include "../lib/scrape/scrape.h" /* pd_scrape_query_escape */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int client_bad_option(const char *cmd, int opt, char **argv) { return cli_bad_option(cmd, opt, argv); }

void client_init(struct client *c, const char *cmd)
{
	memset(c, 0, sizeof *c);
	c->cmd = cmd;
	c->timeout_ns = 60000000000LL;
	c->from = "-1h";
	c->to = "now";
	optind = 1;
	opterr = 0;
}

void client_free(struct client *c)
{
	pd_client_free(c->http);
	free(c->collector);
	free(c->labels);
	for (size_t i = 0; i < c->nowned; i++)
		free(c->owned[i]);
	free(c->owned);
	memset(c, 0, sizeof *c);
}

/* -l K=V[,K2=V2...]: literal keys and values (no unescaping; a value cannot
 * contain ','). */
static int add_labels(struct client *c, const char *arg)
{
	char *s = strdup(arg);
	char **no = s ? realloc(c->owned, (c->nowned + 1) * sizeof *no) : NULL;
	if (!no) {
		free(s);
		cli_cmd_error(c->cmd, "out of memory");
		return EXIT_INPUT;
	}
	c->owned = no;
	c->owned[c->nowned++] = s;
	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq || eq == tok)
			return cli_usage_error(c->cmd, "-l: want KEY=VALUE[,KEY=VALUE...], got '%s'", arg);
		if (c->nlabels >= PD_API_MAX_LABELS)
			return cli_usage_error(c->cmd, "-l: at most %d labels", PD_API_MAX_LABELS);
		if (pd_grow((void **)&c->labels, &c->labels_cap, c->nlabels + 1, sizeof *c->labels)) {
			cli_cmd_error(c->cmd, "out of memory");
			return EXIT_INPUT;
		}
		*eq = 0;
		c->labels[c->nlabels].key = tok;
		c->labels[c->nlabels].value = eq + 1;
		c->nlabels++;
	}
	return 0;
}

const struct cli_flag client_flags_range[] = {
	{"from", 0, CO_FROM, "TIME", "start of the time range, inclusive (default -1h)", 0},
	{"to", 0, CO_TO, "TIME", "end of the time range, inclusive (default now)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_flag client_flags_labels[] = {
	{"selector", 'l', 'l', "K=V", "only profiles with this label (K1=V1,K2=V2 or repeat\n-l: all must match)", 0},
	{"label", 0, 'l', "K=V", NULL, CLI_F_HIDDEN},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_flag client_flags_namespace[] = {
	{"namespace", 'n', CO_NAMESPACE, "NS",
	 "only profiles of pods in namespace NS (their label\nnamespace=NS, as the scraper and capture set it)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_flag client_flags_conn[] = {
	{"collector", 0, CO_COLLECTOR, "URL", "the collector (default $PROFD_COLLECTOR, else\nhttp://localhost:10100)", 0},
	{"timeout", 0, CO_TIMEOUT, "DUR", "per request (default 60s)", 0},
	{"token-file", 0, CO_TOKEN_FILE, "FILE",
	 "send the token in FILE (default $PROFD_TOKEN) to a\ncollector run with --tokens", 0},
	{"cacert", 0, CO_CACERT, "FILE", "verify an https:// collector against this PEM CA\n(default: the system's CAs)", 0},
	{"insecure", 0, CO_INSECURE, NULL, "do not verify its certificate (tests only)", 0},
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};

int client_opt(struct client *c, int opt, const char *arg)
{
	struct pd_err err = {0};
	switch (opt) {
	case CO_COLLECTOR: c->collector_flag = arg; return 0;
	case CO_TOKEN_FILE: c->token_file = arg; return 0;
	case CO_CACERT: c->cacert = arg; return 0;
	case CO_INSECURE: c->insecure = true; return 0;
	case CO_TIMEOUT:
		if (pd_api_parse_duration(arg, strlen(arg), &c->timeout_ns, &err))
			return cli_usage_error(c->cmd, "--timeout: %s", err.msg);
		if (c->timeout_ns < 1000000)
			return cli_usage_error(c->cmd, "--timeout must be at least 1ms, got '%s'", arg);
		return 0;
	case CO_SERVICE:
		if (!*arg)
			return cli_usage_error(c->cmd, "--service: empty service name");
		c->service = arg;
		return 0;
	case CO_TYPE: {
		int t;
		if (pd_api_parse_type(arg, &t, &err))
			return cli_usage_error(c->cmd, "--type: %s", err.msg);
		if (t == PD_API_TYPE_TRACE)
			return cli_usage_error(c->cmd, "--type trace: profd stores pprof profiles only");
		c->type = pd_api_type_name(t);
		return 0;
	}
	case CO_FROM: c->from = arg; return 0;
	case CO_TO: c->to = arg; return 0;
	case 'l': return add_labels(c, arg);
	case 'n':
	case CO_NAMESPACE: {
		if (!*arg || strchr(arg, ',') || strchr(arg, '='))
			return cli_usage_error(c->cmd, "-n/--namespace: want a namespace name, got '%s'", arg);
		char l[320];
		snprintf(l, sizeof l, "namespace=%.300s", arg);
		return add_labels(c, l);
	}
	default: return 1;
	}
}

int client_other_opt(struct client *c, int opt, const char *arg, char **argv)
{
	if (opt == '?' || opt == ':')
		return client_bad_option(c->cmd, opt, argv);
	int rc = client_opt(c, opt, arg);
	return rc == 1 ? cli_usage_error(c->cmd, "bad option") : rc;
}

int client_no_args(const struct client *c, int argc, char **argv, const char *hint)
{
	if (optind < argc)
		return cli_usage_error(c->cmd, "unexpected argument '%s'%s", argv[optind], hint);
	return 0;
}

int client_n_legacy(const struct client *c, const char *arg, long *count, const char **ns)
{
	long v = cli_parse_count(arg);
	if (v >= 0 && strspn(arg, "0123456789") == strlen(arg)) {
		fprintf(stderr,
		        "%s %s: warning: -n %s as a row count is deprecated: -n is the namespace (as in kubectl); use "
		        "--limit %s\n",
		        cli_prog, c->cmd, arg, arg);
		*count = v;
		return 0;
	}
	if (!*arg || strchr(arg, ',') || strchr(arg, '='))
		return cli_usage_error(c->cmd, "-n/--namespace: want a namespace name, got '%s'", arg);
	*ns = arg;
	return 0;
}

char *client_selector_with(const char *sel, const char *key, const char *value)
{
	struct pd_buf b = PD_BUF_INIT(0);
	size_t n = strlen(sel);
	while (n && (sel[n - 1] == ' ' || sel[n - 1] == '\t'))
		n--;
	bool braces = n && sel[n - 1] == '}';
	size_t keep = braces ? n - 1 : n;
	size_t k = keep;
	while (k && (sel[k - 1] == ' ' || sel[k - 1] == '\t'))
		k--;
	bool empty = braces && k && sel[k - 1] == '{';
	bool comma = braces && k && sel[k - 1] == ',';
	int bad = pd_buf_append(&b, sel, keep) ||
	          pd_buf_appendf(&b, "%s%s=\"", braces ? (empty || comma ? "" : ",") : "{", key);
	for (const char *p = value; !bad && *p; p++)
		bad = (*p == '"' || *p == '\\') ? pd_buf_appendf(&b, "\\%c", *p) : pd_buf_append(&b, p, 1);
	bad = bad || pd_buf_append(&b, "\"}", 2) || pd_buf_append(&b, "", 1);
	if (bad) {
		pd_buf_free(&b);
		return NULL;
	}
	return (char *)b.ptr;
}

void client_o_legacy(const struct client *c, const char *arg, const char *const *formats, const char **fmt,
                     const char **file)
{
	for (size_t i = 0; formats[i]; i++)
		if (!strcmp(arg, formats[i])) {
			*fmt = arg;
			return;
		}
	fprintf(stderr, "%s %s: warning: -o FILE is deprecated: -o is the output format; use -O %s (--output-file)\n",
	        cli_prog, c->cmd, arg);
	*file = arg;
}

int client_count(const struct client *c, const char *flag, const char *arg, long *out)
{
	if ((*out = cli_parse_count(arg)) < 0)
		return cli_usage_error(c->cmd, "%s needs a count, got '%s'", flag, arg);
	return 0;
}

int64_t client_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int client_parse_time(const struct client *c, const char *flag, const char *name, const char *arg, int64_t now,
		      int64_t *out)
{
	struct pd_err err = {0};
	if (pd_api_parse_time(name, arg, now, out, &err)) {
		/* the parser's hints are for URLs, where '+' must be sent as %2B; on a
		 * command line it is written as it is (and now%2B1h is refused) */
		char *h;
		while ((h = strstr(err.msg, "now%2B"))) {
			h[3] = '+';
			memmove(h + 4, h + 6, strlen(h + 6) + 1);
		}
		return cli_usage_error(c->cmd, "%s: %s", flag, err.msg);
	}
	return 0;
}

int client_ready(struct client *c, bool range)
{
	struct pd_err err = {0};
	if (range) {
		int64_t now = client_now_ns();
		if (client_parse_time(c, "--from", "from", c->from, now, &c->from_ns) ||
		    client_parse_time(c, "--to", "to", c->to, now, &c->to_ns))
			return EXIT_USAGE;
		if (c->from_ns > c->to_ns) {
			char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
			return cli_usage_error(c->cmd, "--from %s (%s) is after --to %s (%s)", c->from,
					       pd_api_format_time(c->from_ns, a, sizeof a), c->to,
					       pd_api_format_time(c->to_ns, b, sizeof b));
		}
	}
	if (pd_client_resolve_url(c->collector_flag, getenv("PROFD_COLLECTOR"), &c->collector, &err))
		return cli_usage_error(c->cmd, "%s", err.msg);
	char *token = NULL;
	if (pd_token_read(c->token_file, getenv("PROFD_TOKEN"), &token, &err))
		return cli_usage_error(c->cmd, "%s", err.msg);
	if (pd_client_new(c->collector, c->timeout_ns, "profd/" PD_VERSION, &c->http, &err) ||
	    pd_client_set_token(c->http, token, &err)) {
		free(token);
		cli_cmd_error(c->cmd, "%s", err.msg);
		return EXIT_INPUT;
	}
	pd_client_set_tls(c->http, c->cacert, c->insecure);
	free(token);
	return 0;
}

struct pd_client_query client_query(const struct client *c, const char *service)
{
	return (struct pd_client_query){
	    service ? service : c->service, c->type, c->labels, c->nlabels, c->from_ns, c->to_ns, 0};
}

int client_net_fail(const struct client *c, const struct pd_client_resp *r, const struct pd_err *err)
{
	const char *hint = "";
	switch (r->fail) {
	case PD_CLIENT_CONNECT: hint = "; is `profd serve` running? set --collector or $PROFD_COLLECTOR"; break;
	case PD_CLIENT_TIMEOUT: hint = "; try a larger --timeout or a shorter --from/--to range"; break;
	case PD_CLIENT_TOO_LARGE: hint = "; narrow the --from/--to range or the labels"; break;
	case PD_CLIENT_NETWORK:
		if (!strncmp(c->collector, "https://", 8))
			hint = "; for an https:// collector, --cacert FILE names the CA that signed its certificate";
		break;
	default: break;
	}
	cli_cmd_error(c->cmd, "%s%s", err->msg, hint);
	return EXIT_INPUT;
}

int client_get(struct client *c, const char *path, size_t max_body, struct pd_client_resp *r)
{
	struct pd_err err = {0};
	if (!path) {
		cli_cmd_error(c->cmd, "out of memory");
		return EXIT_INPUT;
	}
	if (pd_client_get(c->http, path, max_body, r, &err))
		return client_net_fail(c, r, &err);
	return 0;
}

int client_http_fail(const struct client *c, const struct pd_client_resp *r, const char *what)
{
	char msg[512];
	pd_client_error(r, msg, sizeof msg);
	const char *hint = "";
	if (r->status == 404 && !r->json)
		hint = " (is this a profd or profefe collector? check --collector)";
	else if (r->status >= 500)
		hint = " (the collector's log has the details)";
	else if (r->status == 401)
		hint = c->token_file || getenv("PROFD_TOKEN") ? " (the collector does not know this token)"
							      : " (give a token: --token-file FILE or $PROFD_TOKEN)";
	else if (r->status == 403)
		hint = " (ask for a token with that scope)";
	cli_cmd_error(c->cmd, "%s: the collector at %s answered %ld: %s%s", what, c->collector, r->status, msg, hint);
	return EXIT_INPUT;
}

void client_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int client_services(struct client *c, char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (c->service) {
		char **v = malloc(sizeof *v);
		if (!v || !(v[0] = strdup(c->service))) {
			free(v);
			cli_cmd_error(c->cmd, "out of memory");
			return EXIT_INPUT;
		}
		*out = v;
		*n = 1;
		return 0;
	}
	struct pd_client_resp r = {0};
	int rc = client_get(c, "/api/0/services", PD_CLIENT_MAX_JSON, &r);
	if (rc)
		goto out;
	if (pd_client_nothing_found(&r))
		goto out; /* no services yet */
	if (r.status != 200) {
		rc = client_http_fail(c, &r, "listing the services");
		goto out;
	}
	json_t *body;
	struct pd_err err = {0};
	if (pd_client_json_body(&r, &body, &err)) {
		cli_cmd_error(c->cmd, "listing the services: %s", err.msg);
		rc = EXIT_INPUT;
		goto out;
	}
	/* a 200 of another shape is not "no services" */
	bool names = json_is_array(body);
	for (size_t i = 0; names && i < json_array_size(body); i++)
		names = json_is_string(json_array_get(body, i));
	if (!names) {
		json_decref(body);
		cli_cmd_error(c->cmd, "listing the services: the collector's answer is not a JSON array of service names");
		rc = EXIT_INPUT;
		goto out;
	}
	size_t k = json_array_size(body);
	char **v = calloc(k ? k : 1, sizeof *v);
	if (!v) {
		json_decref(body);
		cli_cmd_error(c->cmd, "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		const char *s = json_string_value(json_array_get(body, i));
		if (s && !(v[m++] = strdup(s))) {
			client_strv_free(v, m);
			json_decref(body);
			cli_cmd_error(c->cmd, "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
	}
	json_decref(body);
	*out = v;
	*n = m;
out:
	pd_client_resp_free(&r);
	return rc;
}

int client_add_param(struct pd_buf *b, const char *key, const char *val)
{
	return pd_buf_append(b, "&", 1) || pd_buf_append(b, key, strlen(key)) || pd_buf_append(b, "=", 1) ||
			       pd_scrape_query_escape(val, b)
		       ? PD_ENOMEM
		       : 0;
}

const char *client_unix_time(int64_t ns, char *buf, size_t n)
{
	int64_t s = ns / 1000000000LL, f = ns % 1000000000LL;
	if (f < 0) {
		f += 1000000000LL;
		s--;
	}
	snprintf(buf, n, "%" PRId64 ".%09" PRId64, s, f);
	return buf;
}

const char *client_range_str(const struct client *c, char *buf, size_t n)
{
	char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
	snprintf(buf, n, "between %s and %s", pd_api_format_time(c->from_ns, a, sizeof a),
		 pd_api_format_time(c->to_ns, b, sizeof b));
	return buf;
}

const char *client_labels_str(const struct client *c, char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < c->nlabels && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%s=%s", i ? "," : " with labels ", c->labels[i].key,
				      c->labels[i].value);
	return buf;
}

int64_t client_jint(json_t *o, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(o, k));
}

const char *client_jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

int client_top_rows(json_t *body, const char *flat, const char *cum, struct pd_top_row *out, char *why,
		    size_t nwhy)
{
	json_t *rows = json_object_get(body, "rows");
	static const char *const ints[] = {"total", "functions"};
	for (size_t k = 0; k < 2; k++)
		if (!json_is_integer(json_object_get(body, ints[k]))) {
			snprintf(why, nwhy, "no integer \"%s\"", ints[k]);
			return -1;
		}
	for (size_t i = 0; i < json_array_size(rows); i++) {
		json_t *r = json_array_get(rows, i), *nm = json_object_get(r, "name");
		const char *miss = !json_is_object(r)                            ? "is not an object"
				   : !json_is_string(nm) || !json_string_length(nm) ? "has no \"name\""
				   : !json_is_integer(json_object_get(r, flat))      ? flat
				   : !json_is_integer(json_object_get(r, cum))       ? cum
										     : NULL;
		if (miss) {
			snprintf(why, nwhy, miss == flat || miss == cum ? "row %zu has no integer \"%s\"" : "row %zu %s", i,
				 miss);
			return -1;
		}
		const char *inl = client_jstr(r, "inline");
		out[i] = (struct pd_top_row){.name = {json_string_value(nm), (uint32_t)json_string_length(nm)},
					     .flat = client_jint(r, flat),
					     .cum = client_jint(r, cum),
					     .inlined = !strcmp(inl, "inline")		  ? PD_TOP_INLINED
							: !strcmp(inl, "partial-inline") ? PD_TOP_PARTIAL_INLINE
											 : PD_TOP_NOT_INLINED};
	}
	return 0;
}
