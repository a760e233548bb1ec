/*
 * cmd_get.c — `profd get services|profiles|types`: what a collector has,
 * as a table (or JSON, or names), through API v0.
 *
 * types: API v0 has no types route, so `get types` lists the profiles of
 * each service in the range (GET /api/0/profiles without a type) and counts
 * them per type. Every table time is UTC, as the collector writes it.
 * An empty answer (API v0's 404 "nothing found") is an empty table: a note
 * on stderr, exit 0.
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/pprof/ptype.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_flag get_sel[] = {
	{"service", 0, CO_SERVICE, "NAME", "the service (profiles, types)", 0},
	{"type", 0, CO_TYPE, "TYPE", "only this type: cpu heap allocs block mutex goroutine\nthreadcreate other (profiles)",
	 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
static const struct cli_flag get_flags[] = {
	{"limit", 0, CO_LIMIT, "N", "the newest N profiles only (profiles; default all)", 0},
	{"output", 'o', 'o', "FORMAT",
	 "table (default), json (the collector's data,\nindented), name (one id, service or type a line)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* get services, get profiles and get types share this one page */
const struct cli_doc get_doc = {
	"get",
	"Usage: profd get services [options]\n"
	"       profd get profiles [--service S] [--type T] [--from TIME] [--to TIME]\n"
	"                          [-l K=V] [--limit N] [options]\n"
	"       profd get types [--service S] [--from TIME] [--to TIME] [-l K=V]\n"
	"\n"
	"List what a collector (profd serve, or profefe) has, through its API v0.\n"
	"  services   the services with at least one stored profile\n"
	"  profiles   the profiles of a service in a time range: ID, TYPE, SERVICE,\n"
	"             CREATED (UTC), LABELS; oldest first. Without --service: of every\n"
	"             service\n"
	"  types      per service and type: how many profiles, the first and the last\n"
	"             (UTC) in the range. Without --service: every service\n"
	"An empty result is a note on stderr (exit 0).\n"
	"\n",
	{get_sel, client_flags_range, client_flags_labels, client_flags_namespace, get_flags, client_flags_conn},
	"\n" CLIENT_HELP_TIME "\n"
	"Examples:\n"
	"  profd get services\n"
	"  profd get profiles --service auth --type cpu --from -30m\n"
	"  profd get profiles --service auth -l version=1.2.0,region=eu \\\n"
	"      --from 2024-05-30T00:00:00Z --to now-1h\n"
	"  profd get types --from -24h\n"
	"  profd get profiles --service auth -o json | jq -r '.[].id'\n"
	"  kubectl profd get services --collector http://profd.ops:10100\n"
	"\n"
	"Exit codes: 0 success (an empty list too), 1 the collector cannot be reached or\n"
	"refused the request, 2 usage error.\n",
	0,
    NULL,
};

enum { OUT_TABLE, OUT_JSON, OUT_NAME };

/* Column widths of a table: computed over all rows, then printed. */
struct table {
	size_t ncols, nrows, cap;
	char **cells; /* nrows * ncols malloc'd strings */
	size_t width[8];
};

static int table_add(struct table *t, const char *const *cols)
{
	if (pd_grow((void **)&t->cells, &t->cap, (t->nrows + 1) * t->ncols, sizeof *t->cells))
		return -1;
	for (size_t j = 0; j < t->ncols; j++) {
		/* cells are the collector's strings: escaped for the terminal (an
		 * ESC sequence shown, a newline not a forged row) */
		const char *v = cols[j] ? cols[j] : "";
		char *s = pd_term_escaped(v, strlen(v), false);
		s = s ? s : strdup(v);
		if (!s) {
			for (size_t k = 0; k < j; k++)
				free(t->cells[t->nrows * t->ncols + k]);
			return -1;
		}
		t->cells[t->nrows * t->ncols + j] = s;
		size_t w = strlen(s);
		if (w > t->width[j])
			t->width[j] = w;
	}
	t->nrows++;
	return 0;
}

/* kubectl's layout: columns left-aligned, three spaces apart, the last one
 * not padded. Row 0 is the header. */
static void table_print(const struct table *t)
{
	for (size_t i = 0; i < t->nrows; i++) {
		for (size_t j = 0; j < t->ncols; j++) {
			const char *s = t->cells[i * t->ncols + j];
			if (j + 1 < t->ncols)
				printf("%-*s   ", (int)t->width[j], s);
			else
				printf("%s\n", s);
		}
	}
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
}

static void print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	if (s) {
		puts(s);
		free(s);
	}
}

static int oom(const struct client *c)
{
	cli_cmd_error(c->cmd, "out of memory");
	return EXIT_INPUT;
}

/* What get profiles and get types build: the services, every profile's
 * metadata (for -o json) and the table. */
struct listing {
	char **sv;
	size_t n;
	json_t *all;
	struct table t;
};

static void listing_free(struct listing *l)
{
	table_free(&l->t);
	json_decref(l->all);
	client_strv_free(l->sv, l->n);
}

/* The services to list and an empty listing with the 5-column header head. */
static int listing_init(struct client *c, struct listing *l, const char *const *head)
{
	memset(l, 0, sizeof *l);
	int rc = client_services(c, &l->sv, &l->n);
	if (rc)
		return rc;
	l->all = json_array();
	l->t.ncols = 5;
	if (!l->all || table_add(&l->t, head)) {
		listing_free(l);
		return oom(c);
	}
	return 0;
}

/* The note for an empty result: "No [TYPE ]profiles found for ...". */
static void print_none(const struct client *c, const char *type)
{
	char r[128], l[600];
	fprintf(stderr, "No %s%sprofiles found for %s%s %s%s.\n", type ? type : "", type ? " " : "",
		c->service ? "service " : "", c->service ? c->service : "any service", client_range_str(c, r, sizeof r),
		client_labels_str(c, l, sizeof l));
}

/* GET /api/0/profiles for one service: *list is the metadata array (new
 * reference; an empty array for "nothing found"). */
static int list_profiles(struct client *c, const char *service, long limit, json_t **list)
{
	*list = NULL;
	struct pd_client_query q = client_query(c, service);
	q.limit = limit;
	struct pd_client_resp r = {0};
	char *path = pd_client_query_path("/api/0/profiles", &q);
	int rc = client_get(c, path, PD_CLIENT_MAX_JSON, &r);
	free(path);
	if (rc)
		goto out;
	if (pd_client_nothing_found(&r)) {
		*list = json_array();
		goto out;
	}
	if (r.status != 200) {
		char what[300];
		snprintf(what, sizeof what, "listing the profiles of service \"%s\"", service);
		rc = client_http_fail(c, &r, what);
		goto out;
	}
	struct pd_err err = {0};
	if (pd_client_json_body(&r, list, &err)) {
		cli_cmd_error(c->cmd, "%s", err.msg);
		rc = EXIT_INPUT;
	} else if (!json_is_array(*list)) {
		json_decref(*list);
		*list = NULL;
		cli_cmd_error(c->cmd, "the collector's list of profiles is not a JSON array");
		rc = EXIT_INPUT;
	} else {
		/* every entry a profile's metadata, never a blank row */
		size_t i;
		json_t *m;
		json_array_foreach(*list, i, m)
		{
			if (!json_is_object(m) || !json_is_string(json_object_get(m, "id"))) {
				cli_cmd_error(c->cmd, "the collector's list of profiles holds an entry that is not a "
						      "profile (an object with an \"id\"): item %zu",
					      i);
				rc = EXIT_INPUT;
				break;
			}
		}
		if (rc) {
			json_decref(*list);
			*list = NULL;
		}
	}
out:
	pd_client_resp_free(&r);
	return rc;
}

static int get_services(struct client *c, int out)
{
	char **sv;
	size_t n;
	int rc = client_services(c, &sv, &n);
	if (rc)
		return rc;
	if (out == OUT_JSON) {
		json_t *a = json_array();
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, json_string(sv[i]));
		print_json(a);
		json_decref(a);
	} else if (n == 0) {
		fprintf(stderr, "No services found at %s.\n", c->collector);
	} else {
		if (out == OUT_TABLE)
			printf("SERVICE\n");
		for (size_t i = 0; i < n; i++) {
			char *x = pd_term_escaped(sv[i], strlen(sv[i]), false);
			printf("%s\n", x ? x : sv[i]);
			free(x);
		}
	}
	client_strv_free(sv, n);
	return EXIT_OK;
}

static char *labels_text(json_t *labels)
{
	struct pd_buf b = PD_BUF_INIT(0);
	size_t i;
	json_t *l;
	json_array_foreach(labels, i, l)
	{
		const char *k = json_string_value(json_object_get(l, "key"));
		const char *v = json_string_value(json_object_get(l, "value"));
		if (!k)
			continue;
		if ((b.len && pd_buf_append(&b, ",", 1)) || pd_buf_append(&b, k, strlen(k)) ||
		    pd_buf_append(&b, "=", 1) || (v && pd_buf_append(&b, v, strlen(v)))) {
			pd_buf_free(&b);
			return NULL;
		}
	}
	if (pd_buf_append(&b, "", 1)) {
		pd_buf_free(&b);
		return NULL;
	}
	return (char *)b.ptr;
}

static int get_profiles(struct client *c, int out, long limit)
{
	static const char *const head[] = {"ID", "TYPE", "SERVICE", "CREATED (UTC)", "LABELS"};
	struct listing ls;
	int rc = listing_init(c, &ls, head);
	if (rc)
		return rc;
	for (size_t s = 0; s < ls.n && !rc; s++) {
		json_t *list;
		if ((rc = list_profiles(c, ls.sv[s], limit, &list)))
			break;
		size_t i;
		json_t *m;
		json_array_foreach(list, i, m)
		{
			if (out == OUT_TABLE) {
				char *lt = labels_text(json_object_get(m, "labels"));
				const char *cols[] = {json_string_value(json_object_get(m, "id")),
						      json_string_value(json_object_get(m, "type")),
						      json_string_value(json_object_get(m, "service")),
						      json_string_value(json_object_get(m, "created_at")), lt};
				if (!lt || table_add(&ls.t, cols))
					rc = oom(c);
				free(lt);
			} else if (out == OUT_NAME) {
				json_t *id = json_object_get(m, "id");
				char *x = json_is_string(id) ? pd_term_escaped(json_string_value(id), json_string_length(id), false) : NULL;
				if (json_is_string(id))
					printf("%s\n", x ? x : json_string_value(id));
				free(x);
			}
		}
		json_array_extend(ls.all, list);
		json_decref(list);
	}
	if (rc)
		goto out;
	if (out == OUT_JSON) {
		print_json(ls.all);
	} else if (json_array_size(ls.all) == 0) {
		print_none(c, c->type);
	} else if (out == OUT_TABLE) {
		table_print(&ls.t);
	}
out:
	listing_free(&ls);
	return rc;
}

/* get types: per service, the profiles in the range counted by type. */
static int get_types(struct client *c, int out)
{
		const char *const *types = pd_ptype_names;
	enum { NT = PD_PT_N };
	static const char *const head[] = {"SERVICE", "TYPE", "PROFILES", "FIRST (UTC)", "LAST (UTC)"};
	bool seen_any[NT] = {0};
	struct listing ls;
	int rc = listing_init(c, &ls, head);
	if (rc)
		return rc;
	for (size_t s = 0; s < ls.n && !rc; s++) {
		json_t *list;
		if ((rc = list_profiles(c, ls.sv[s], 0, &list)))
			break;
		size_t count[NT] = {0};
		const char *first[NT] = {0}, *last[NT] = {0};
		size_t i;
		json_t *m;
		json_array_foreach(list, i, m)
		{
			const char *ty = json_string_value(json_object_get(m, "type"));
			const char *at = json_string_value(json_object_get(m, "created_at"));
			for (size_t k = 0; ty && k < NT; k++) {
				if (strcmp(ty, types[k]))
					continue;
				count[k]++;
				/* the list is ascending by created_at */
				if (!first[k])
					first[k] = at;
				last[k] = at;
			}
		}
		for (size_t k = 0; k < NT && !rc; k++) {
			if (!count[k])
				continue;
			seen_any[k] = true;
			char num[32];
			snprintf(num, sizeof num, "%zu", count[k]);
			const char *cols[] = {ls.sv[s], types[k], num, first[k], last[k]};
			json_t *o = json_pack("{s:s, s:s, s:I, s:s?, s:s?}", "service", ls.sv[s], "type", types[k],
					      "profiles", (json_int_t)count[k], "first", first[k], "last", last[k]);
			if (!o || json_array_append_new(ls.all, o) || table_add(&ls.t, cols))
				rc = oom(c);
		}
		json_decref(list);
	}
	if (rc)
		goto out;
	if (out == OUT_JSON) {
		print_json(ls.all);
	} else if (json_array_size(ls.all) == 0) {
		print_none(c, NULL);
	} else if (out == OUT_NAME) {
		for (size_t k = 0; k < NT; k++)
			if (seen_any[k])
				printf("%s\n", types[k]);
	} else {
		table_print(&ls.t);
	}
out:
	listing_free(&ls);
	return rc;
}

int cmd_get(int argc, char **argv)
{
	struct client c;
	client_init(&c, "get");
	int out = OUT_TABLE, o, rc;
	long limit = 0;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &get_doc)) {
		client_free(&c);
		return EXIT_USAGE;
	}
	/* "get" then the resource; flags may come before or after it */
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&get_doc); client_free(&c); return EXIT_OK;
		case 'o':
			if (!strcmp(optarg, "table") || !strcmp(optarg, "wide"))
				out = OUT_TABLE;
			else if (!strcmp(optarg, "json"))
				out = OUT_JSON;
			else if (!strcmp(optarg, "name"))
				out = OUT_NAME;
			else {
				client_free(&c);
				return cli_usage_error("get", "-o: want table, json or name, got '%s'", optarg);
			}
			break;
		case CO_LIMIT:
			if ((rc = client_count(&c, "--limit", optarg, &limit))) {
				client_free(&c);
				return rc;
			}
			break;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv))) {
				client_free(&c);
				return rc;
			}
		}
	}
	if (optind >= argc) {
		client_free(&c);
		return cli_usage_error("get", "what to get? services, profiles or types");
	}
	if (optind + 1 < argc) {
		client_free(&c);
		return cli_usage_error("get", "one resource at a time, got '%s' and '%s'", argv[optind], argv[optind + 1]);
	}
	const char *what = argv[optind];
	enum { SERVICES, PROFILES, TYPES } res;
	if (!strcmp(what, "services") || !strcmp(what, "service") || !strcmp(what, "svc"))
		res = SERVICES;
	else if (!strcmp(what, "profiles") || !strcmp(what, "profile"))
		res = PROFILES;
	else if (!strcmp(what, "types") || !strcmp(what, "type") || !strcmp(what, "profile-types"))
		res = TYPES;
	else {
		client_free(&c);
		return cli_usage_error("get", "unknown resource '%s': want services, profiles or types", what);
	}
	c.cmd = res == SERVICES ? "get services" : res == PROFILES ? "get profiles" : "get types";
	const char *bad = NULL;
	if (res == SERVICES && (c.service || c.type || c.nlabels || limit))
		bad = c.service ? "--service" : c.type ? "--type" : c.nlabels ? "-l" : "--limit";
	else if (res == TYPES && (c.type || limit))
		bad = c.type ? "--type" : "--limit";
	if (bad) {
		rc = cli_usage_error(c.cmd, "%s does not apply to %s", bad, c.cmd);
		client_free(&c);
		return rc;
	}
	if ((rc = client_ready(&c, res != SERVICES))) {
		client_free(&c);
		return rc;
	}
	rc = res == SERVICES ? get_services(&c, out) : res == PROFILES ? get_profiles(&c, out, limit) : get_types(&c, out);
	client_free(&c);
	return rc;
}
