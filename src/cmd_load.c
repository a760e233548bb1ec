/*
 * cmd_load.c — `profd load FILE...`: upload local pprof files to a
 * collector (POST /api/0/profiles), one request per file.
 *
 * Each file is read and decoded first: a file that is not a valid profile
 * is reported and skipped before anything is sent, and its type is
 * inferred from the profile itself (pd_profile_go_type: all seven Go
 * types, block and mutex told apart by their stacks) unless --type says.
 * The bytes sent are the file's own (gzip'd or raw). The collector takes
 * the creation time from the profile's time_nanos unless --created-at.
 * One failed file does not stop the others; the exit code is 1 then.
 */
#define _GNU_SOURCE
#include "collector_cli.h"
#include "../lib/http/params.h"
#include "../lib/pprof/pprof.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cli_flag load_flags[] = {
	{"service", 0, CO_SERVICE, "NAME", "the service the profiles belong to (required)", 0},
	{"type", 0, CO_TYPE, "TYPE", "store every file as this type (default: inferred)", 0},
	{"label", 'l', 'l', "K=V", "a label of every profile (K1=V1,K2=V2 or repeat -l)", 0},
	{"selector", 0, 'l', "K=V", NULL, CLI_F_HIDDEN},
	{"namespace", 'n', CO_NAMESPACE, "NS", "the label namespace=NS of every profile", 0},
	{"created-at", 0, CO_CREATED_AT, "TIME",
	 "the creation time of every profile (default the\nprofile's time_nanos, else the time of the upload)", 0},
	{"output", 'o', 'o', "FORMAT",
	 "table (default) or json (the collector's metadata of\neach stored profile, with \"file\" and \"url\")", 0},
	/* a time range does not apply: refused, naming --created-at */
	{"from", 0, CO_FROM, "TIME", NULL, CLI_F_HIDDEN},
	{"to", 0, CO_TO, "TIME", NULL, CLI_F_HIDDEN},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc load_doc = {
	"load",
	"Usage: profd load FILE... --service S [--type T] [-l K=V] [--created-at TIME]\n"
	"\n"
	"Upload local pprof profiles (gzip'd or raw profile.proto, as `go tool pprof`\n"
	"and /debug/pprof write them) to a collector, one request per file, and print\n"
	"where each one is stored. The type of each profile is read from the profile\n"
	"itself: cpu, heap, allocs, block, mutex, goroutine or threadcreate (heap and\n"
	"allocs by their default sample type, block and mutex by their stacks);\n"
	"--type overrides it for every file. The creation time is the profile's own\n"
	"(time_nanos) unless --created-at is given. A file that cannot be read, is not\n"
	"a profile or is refused is reported and skipped; the others are loaded.\n"
	"\n",
	{load_flags, client_flags_conn},
	"\n" CLIENT_HELP_TIME "\n"
	"Examples:\n"
	"  profd load --service auth cpu.pb.gz heap.pb.gz mutex.pb.gz\n"
	"  profd load --service auth -l version=1.2.0,pod=auth-7d9f profile-*.pb.gz\n"
	"  curl -s http://auth:6060/debug/pprof/heap | profd load --service auth -\n"
	"  kubectl profd load --service auth --collector http://localhost:10100 *.pb.gz\n"
	"\n"
	"Exit codes: 0 every file stored, 1 a file could not be read, typed or stored\n"
	"(the others are still loaded) or the collector cannot be reached, 2 usage error.\n",
	0,
    NULL,
};

#define LOAD_MAX_FILE (256u << 20)

struct row {
	const char *file;
	char type[16];
	char id[32];
	char created[40];
	char *url;
};

int cmd_load(int argc, char **argv)
{
	struct client c;
	client_init(&c, "load");
	const char *created_at = NULL;
	bool json = false;
	int o, rc = EXIT_OK;
	struct row *rows = NULL;
	size_t nrows = 0;
	json_t *jout = NULL;
	struct pd_buf data = PD_BUF_INIT(LOAD_MAX_FILE);
	struct cli_getopt g;
	if (cli_getopt_init(&g, &load_doc)) {
		rc = EXIT_USAGE;
		goto out;
	}
	while ((o = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (o) {
		case 'h': cli_flags_help(&load_doc); goto out;
		case 'o':
			if (!strcmp(optarg, "json"))
				json = true;
			else if (strcmp(optarg, "table")) {
				rc = cli_usage_error("load", "-o: want table or json, got '%s'", optarg);
				goto out;
			}
			break;
		case CO_CREATED_AT: created_at = optarg; break;
		case CO_FROM:
		case CO_TO: rc = cli_usage_error("load", "--from/--to do not apply to load (see --created-at)"); goto out;
		default:
			if ((rc = client_other_opt(&c, o, optarg, argv)))
				goto out;
		}
	}
	if (optind >= argc) {
		rc = cli_usage_error("load", "no files to load");
		goto out;
	}
	if (!c.service) {
		rc = cli_usage_error("load", "--service is required: the service these profiles belong to");
		goto out;
	}
	int64_t created_ns = 0;
	if (created_at) {
		if ((rc = client_parse_time(&c, "--created-at", "created-at", created_at, client_now_ns(), &created_ns)))
			goto out;
	}
	if ((rc = client_ready(&c, false)))
		goto out;
	int nfiles = argc - optind;
	rows = calloc((size_t)nfiles, sizeof *rows);
	jout = json_array();
	if (!rows || !jout) {
		cli_cmd_error("load", "out of memory");
		rc = EXIT_INPUT;
		goto out;
	}
	int failed = 0;
	for (int i = optind; i < argc; i++) {
		const char *file = argv[i];
		struct pd_err err = {0};
		struct pd_profile *p = NULL;
		data.len = 0;
		if (pd_buf_read_file(&data, file, &err)) {
			cli_cmd_error("load", "%s: %s; not loaded", file, err.msg);
			failed++;
			continue;
		}
		if (pd_pprof_decode(data.ptr, data.len, NULL, &p, &err)) {
			cli_cmd_error("load", "%s: not a pprof profile: %s; not loaded", file, err.msg);
			failed++;
			continue;
		}
		const char *type = c.type ? c.type : pd_profile_go_type(p);
		if (!type) {
			char st[300];
			pd_profile_describe_types(p, st, sizeof st);
			cli_cmd_error("load", "%s: cannot tell the profile type (a %s profile with sample types %s); pass --type; "
				  "not loaded",
				  file, pd_profile_kind(p), st);
			pd_profile_free(p);
			failed++;
			continue;
		}
		pd_profile_free(p);
		char *path = pd_client_post_path(c.service, type, c.labels, c.nlabels, created_at ? &created_ns : NULL);
		struct pd_client_resp r = {0};
		if (!path) {
			cli_cmd_error("load", "out of memory");
			rc = EXIT_INPUT;
			goto out;
		}
		int prc = pd_client_post(c.http, path, data.ptr, data.len, PD_CLIENT_MAX_JSON, &r, &err);
		free(path);
		if (prc) {
			/* the collector is gone: the other files would fail the same way */
			rc = client_net_fail(&c, &r, &err);
			pd_client_resp_free(&r);
			if (nfiles > 1)
				fprintf(stderr, "%s load: %d of %d files loaded before that\n", cli_prog, (int)nrows, nfiles);
			goto out;
		}
		json_t *meta = NULL;
		if (r.status != 200 || pd_client_json_body(&r, &meta, &err) || !json_is_object(meta) ||
		    !json_string_value(json_object_get(meta, "id"))) {
			char what[600];
			snprintf(what, sizeof what, "%s (as %s)", file, type);
			if (r.status != 200)
				client_http_fail(&c, &r, what);
			else {
				size_t n = r.body.len < 200 ? r.body.len : 200;
				char *x = pd_term_escaped((const char *)r.body.ptr, n, false); /* the server's bytes */
				cli_cmd_error("load", "%s: the collector's answer has no profile id: %.*s", what,
					  x ? (int)strlen(x) : (int)n, x ? x : r.body.ptr ? (const char *)r.body.ptr : "");
				free(x);
			}
			json_decref(meta);
			pd_client_resp_free(&r);
			failed++;
			continue;
		}
		pd_client_resp_free(&r);
		struct row *w = &rows[nrows++];
		w->file = file;
		snprintf(w->type, sizeof w->type, "%s", type);
		/* the table's cells are the collector's strings: escaped for the terminal */
		json_t *shown = json_deep_copy(meta);
		pd_client_term_safe(shown);
		snprintf(w->id, sizeof w->id, "%s", json_string_value(json_object_get(shown, "id")));
		const char *at = json_string_value(json_object_get(shown, "created_at"));
		snprintf(w->created, sizeof w->created, "%s", at ? at : "");
		json_decref(shown);
		if (asprintf(&w->url, "%s/api/0/profiles/%s", c.collector, w->id) < 0)
			w->url = NULL;
		json_object_set_new(meta, "file", json_string(file));
		json_object_set_new(meta, "url", json_string(w->url ? w->url : ""));
		json_array_append_new(jout, meta);
	}
	if (json) {
		char *s = json_dumps(jout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (s)
			puts(s);
		free(s);
	} else if (nrows) {
		size_t wf = 4, wt = 4;
		for (size_t i = 0; i < nrows; i++) {
			size_t l = strlen(rows[i].file);
			wf = l > wf ? l : wf;
			l = strlen(rows[i].type);
			wt = l > wt ? l : wt;
		}
		printf("%-*s   %-*s   %-20s   %-20s   %s\n", (int)wf, "FILE", (int)wt, "TYPE", "ID", "CREATED (UTC)", "URL");
		for (size_t i = 0; i < nrows; i++)
			printf("%-*s   %-*s   %-20s   %-20s   %s\n", (int)wf, rows[i].file, (int)wt, rows[i].type, rows[i].id,
			       rows[i].created, rows[i].url ? rows[i].url : "");
	}
	if (failed) {
		if (nfiles > 1)
			fprintf(stderr, "%s load: %zu of %d files loaded, %d failed\n", cli_prog, nrows, nfiles, failed);
		rc = EXIT_INPUT;
	}
out:
	for (size_t i = 0; rows && i < nrows; i++)
		free(rows[i].url);
	free(rows);
	json_decref(jout);
	pd_buf_free(&data);
	client_free(&c);
	return rc;
}
