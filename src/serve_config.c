/*
 * serve_config.c — `profd serve --config FILE` and `--print-config`.
 *
 * The file is YAML: a mapping whose keys are serve's flags without "--"
 * (`data-dir: /var/lib/profd`, `tokens: /etc/profd/tokens`,
 * `metrics-open: true`), and `scrape:`, a mapping in the scraper's own YAML
 * (`profd scrape --config`'s global:/scrape_configs:, docs/scraping.md).
 * The keys become flags placed before the command line's, so the command
 * line wins (flags > file > defaults): one parser, one set of checks, the
 * same messages. Unknown keys, a key given twice, values of the wrong
 * shape: FILE:LINE:COL, exit 2. --print-config prints the settings in
 * force (the file's and the command line's, the later winning) as such a
 * file.
 */
#define _GNU_SOURCE
#include "serve_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../lib/scrape/scrape.h"
#include "../lib/util/pdyaml.h"

#include "../lib/util/ynode.h"

static int push(struct serve_cfg *c, const char *s, size_t n)
{
	char *d = strndup(s, n);
	char **a = d ? realloc(c->owned, (c->nowned + 1) * sizeof *a) : NULL;
	if (!a) {
		free(d);
		return -1;
	}
	c->owned = a;
	c->owned[c->nowned++] = d;
	return 0;
}

void serve_config_free(struct serve_cfg *c)
{
	for (size_t i = 0; i < c->nowned; i++)
		free(c->owned[i]);
	free(c->owned);
	free(c->argv);
	pd_buf_free(&c->text);
	free(c->scrape);
	memset(c, 0, sizeof *c);
}

static const struct option *find_opt(const struct option *opts, const char *name, size_t n)
{
	for (const struct option *o = opts; o->name; o++)
		if (strlen(o->name) == n && !strncmp(o->name, name, n))
			return o;
	return NULL;
}

/* serve's flags that are not keys of the file: --help, --config, --print-config
 * (--scrape is not in opts: the file has scrape: instead) */
static bool not_a_key(const char *name)
{
	return !strcmp(name, "help") || !strcmp(name, "config") || !strcmp(name, "print-config");
}

/* The byte offset of libyaml's mark index chars (it counts characters, not
 * bytes, and not a byte order mark) in the UTF-8 text t[0..len). */
static size_t byte_offset(const unsigned char *t, size_t len, size_t chars)
{
	size_t i = len >= 3 && !memcmp(t, "\xef\xbb\xbf", 3) ? 3 : 0;
	for (; i < len; i++)
		if ((t[i] & 0xc0) != 0x80 && !chars--)
			break;
	return i;
}

static int at(const char *path, const yaml_node_t *n, const char *fmt, const char *what)
{
	fprintf(stderr, "%s serve: %s:%zu:%zu: ", cli_prog, path, n->start_mark.line + 1, n->start_mark.column + 1);
	fprintf(stderr, fmt, what);
	fprintf(stderr, "\nRun '%s serve --help' for the flags (a key is a flag without its --).\n", cli_prog);
	return EXIT_USAGE;
}

/* The keys of the file's mapping as flags into c->owned (c->nfile of them). */
static int from_file(struct serve_cfg *c, const char *path, const struct option *opts)
{
	struct pd_err err;
	/* as profd scrape --config takes it: the scrape: section may be as big */
	c->text = (struct pd_buf)PD_BUF_INIT(PD_SCRAPE_CFG_MAX_BYTES);
	if (pd_buf_read_file(&c->text, path, &err)) {
		cli_error("serve: --config: %s", err.msg);
		return EXIT_INPUT;
	}
	yaml_parser_t p;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&p)) {
		cli_error("serve: out of memory");
		return EXIT_INPUT;
	}
	yaml_parser_set_input_string(&p, c->text.ptr ? c->text.ptr : (const unsigned char *)"", c->text.len);
	if (!yaml_parser_load(&p, &doc)) {
		fprintf(stderr, "%s serve: %s:%zu:%zu: not YAML: %s\n", cli_prog, path, p.problem_mark.line + 1,
		        p.problem_mark.column + 1, p.problem ? p.problem : "syntax error");
		yaml_parser_delete(&p);
		return EXIT_USAGE;
	}
	int rc = 0;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (root && root->type != YAML_MAPPING_NODE)
		rc = at(path, root, "%s", "want a mapping of flags (addr: :10100, data-dir: /var/lib/profd, ...)");
	for (yaml_node_pair_t *kv = root && !rc ? root->data.mapping.pairs.start : NULL;
	     kv && kv < root->data.mapping.pairs.top && !rc; kv++) {
		yaml_node_t *k = yaml_document_get_node(&doc, kv->key), *v = yaml_document_get_node(&doc, kv->value);
		if (k->type != YAML_SCALAR_NODE) {
			rc = at(path, k, "%s", "a key must be a flag's name");
			break;
		}
		const char *name = (const char *)k->data.scalar.value;
		size_t nl = k->data.scalar.length;
		/* given once: a second one would silently win (or, a false, not undo a true) */
		for (yaml_node_pair_t *pk = root->data.mapping.pairs.start; pk < kv && !rc; pk++) {
			yaml_node_t *pn = yaml_document_get_node(&doc, pk->key);
			if (pn->data.scalar.length == nl && !memcmp(pn->data.scalar.value, name, nl)) {
				char q[200];
				snprintf(q, sizeof q, "key \"%.*s\" given twice (first at %zu:%zu)",
				         (int)(nl > 100 ? 100 : nl), name, pn->start_mark.line + 1, pn->start_mark.column + 1);
				rc = at(path, k, "%s", q);
			}
		}
		if (rc)
			break;
		if (pd_yis(k, "scrape")) { /* the scraper's YAML, its lines kept where they are in the file */
			if (v->type != YAML_MAPPING_NODE) {
				rc = at(path, v, "%s",
				        "scrape: want a mapping (global:, scrape_configs:), as profd scrape --config");
				break;
			}
			if (p.encoding != YAML_UTF8_ENCODING) { /* the section is copied as bytes below */
				rc = at(path, v, "%s", "scrape: the file is UTF-16: save it as UTF-8");
				break;
			}
			/* marks count characters: a comment's "é" before the section
			 * would shift a copy by bytes (env: production read as env: product) */
			size_t lines = v->start_mark.line, col = v->start_mark.column;
			size_t from = byte_offset(c->text.ptr, c->text.len, v->start_mark.index);
			size_t n = byte_offset(c->text.ptr, c->text.len, v->end_mark.index) - from;
			c->scrape = malloc(lines + col + n + 1);
			if (!c->scrape) {
				rc = EXIT_INPUT;
				break;
			}
			memset(c->scrape, '\n', lines);
			memset(c->scrape + lines, ' ', col);
			memcpy(c->scrape + lines + col, c->text.ptr + from, n);
			c->scrape_len = lines + col + n;
			c->scrape[c->scrape_len] = 0;
			continue;
		}
		const struct option *o = find_opt(opts, name, nl);
		if (!o || not_a_key(o->name)) {
			char q[160];
			snprintf(q, sizeof q, "%.*s", (int)(nl > 100 ? 100 : nl), name);
			rc = at(path, k,
			        "unknown key \"%s\": a key is a profd serve flag without its --, or scrape:", q);
			break;
		}
		char flag[128];
		snprintf(flag, sizeof flag, "--%s", o->name);
		if (v->type != YAML_SCALAR_NODE) {
			rc = at(path, v, "%s: want a single value, not a list or a mapping", o->name);
			break;
		}
		if (o->has_arg == no_argument) {
			bool yes = pd_yis(v, "true") || pd_yis(v, "yes") || pd_yis(v, "on");
			if (!yes && !pd_yis(v, "false") && !pd_yis(v, "no") && !pd_yis(v, "off")) {
				rc = at(path, v, "%s: want true or false", o->name);
				break;
			}
			if (yes && push(c, flag, strlen(flag)))
				rc = EXIT_INPUT;
			continue;
		}
		if (push(c, flag, strlen(flag)) || push(c, (const char *)v->data.scalar.value, v->data.scalar.length))
			rc = EXIT_INPUT;
	}
	if (rc == EXIT_INPUT)
		cli_error("serve: out of memory");
	/* a second document would be ignored (its tokens: with it): refuse it,
	 * unless it is empty (a trailing ---), as profd scrape --config does */
	for (bool end = false; !rc && !end;) {
		yaml_document_t more;
		if (!yaml_parser_load(&p, &more)) {
			fprintf(stderr, "%s serve: %s:%zu:%zu: not YAML: %s\n", cli_prog, path, p.problem_mark.line + 1,
			        p.problem_mark.column + 1, p.problem ? p.problem : "syntax error");
			rc = EXIT_USAGE;
			break;
		}
		yaml_node_t *r2 = yaml_document_get_root_node(&more);
		end = !r2;
		if (r2 && !pd_ynull(r2))
			rc = at(path, r2, "%s", "a second YAML document (after ---): give one only");
		yaml_document_delete(&more);
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return rc;
}

int serve_config_expand(int argc, char **argv, const struct option *opts, struct serve_cfg *c)
{
	memset(c, 0, sizeof *c);
	/* --config and --print-config before --scrape (after it: the scraper's) */
	int end = argc;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--scrape") || !strcmp(argv[i], "--")) {
			end = i;
			break;
		}
	bool skip[argc > 0 ? argc : 1];
	memset(skip, 0, sizeof skip);
	for (int i = 1; i < end; i++) {
		if (!strcmp(argv[i], "--print-config")) {
			c->print = true;
			skip[i] = true;
		} else if (!strcmp(argv[i], "--config") || !strncmp(argv[i], "--config=", 9)) {
			if (c->path)
				return cli_usage_error("serve", "--config given twice");
			skip[i] = true;
			if (argv[i][8] == '=') {
				c->path = argv[i] + 9;
			} else if (i + 1 < end) {
				c->path = argv[++i];
				skip[i] = true;
			} else {
				return cli_usage_error("serve", "option '--config' needs a value");
			}
		}
	}
	int rc = c->path ? from_file(c, c->path, opts) : 0;
	if (rc)
		return rc;
	size_t nfile = c->nowned;
	c->argv = calloc((size_t)argc + nfile + 1, sizeof *c->argv);
	if (!c->argv) {
		cli_error("serve: out of memory");
		return EXIT_INPUT;
	}
	c->argv[c->argc++] = argv[0];
	for (size_t i = 0; i < nfile; i++) /* the file's first: the command line's win */
		c->argv[c->argc++] = c->owned[i];
	for (int i = 1; i < argc; i++)
		if (!skip[i])
			c->argv[c->argc++] = argv[i];
	c->argv[c->argc] = NULL;
	if (c->scrape)
		scrape_cmd_preset_config(c->path, c->scrape, c->scrape_len);
	return 0;
}

/* A YAML scalar, quoted when plain would read otherwise. */
static void yaml_value(const char *v)
{
	bool plain = *v && !strchr(":#{}[],&*!|>'\"%@`", *v) && !strchr(v, '#') && !strstr(v, ": ") &&
	             v[strlen(v) - 1] != ' ' && *v != ' ' && strcmp(v, "true") && strcmp(v, "false") &&
	             strcmp(v, "yes") && strcmp(v, "no") && strcmp(v, "null") && strcmp(v, "~");
	if (plain) {
		fputs(v, stdout);
		return;
	}
	putchar('"');
	for (const char *p = v; *p; p++)
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if ((unsigned char)*p < 0x20)
			printf("\\x%02x", (unsigned char)*p);
		else
			putchar(*p);
	putchar('"');
}

/* v with the password of a URL's user (scheme://USER:PASSWORD@host, as
 * --store clickhouse:// takes it) as REDACTED, into out: what --print-config
 * prints is pasted into tickets and repositories. False if v has none. */
static bool redacted(const char *v, char *out, size_t n)
{
	const char *h = strstr(v, "://");
	if (!h)
		return false;
	h += 3;
	size_t hn = strcspn(h, "/?#");
	const char *at = memrchr(h, '@', hn);
	const char *colon = at ? memchr(h, ':', (size_t)(at - h)) : NULL;
	if (!colon)
		return false;
	if ((size_t)snprintf(out, n, "%.*sREDACTED%s", (int)(colon + 1 - v), v, at) >= n)
		snprintf(out, n, "REDACTED");
	return true;
}

/* The option a ("--name", "--name=value") is, as getopt_long reads it: the
 * one of that name, else the only one whose name it begins (--tok is
 * --tokens); NULL if none or several (getopt has refused those). */
static const struct option *which(const struct option *opts, const char *a)
{
	if (strncmp(a, "--", 2) || !a[2])
		return NULL;
	size_t n = strcspn(a + 2, "=");
	const struct option *hit = NULL;
	unsigned hits = 0;
	for (const struct option *o = opts; o->name; o++) {
		if (strncmp(o->name, a + 2, n))
			continue;
		if (!o->name[n])
			return o;
		hit = o;
		hits++;
	}
	return hits == 1 ? hit : NULL;
}

void serve_config_print(const struct serve_cfg *c, const struct option *opts, int argc, char **argv)
{
	printf("# profd serve: the settings in force (%s%s); every other flag has its default\n"
	       "# (profd serve --help). Use it as: profd serve --config FILE\n",
	       c->path ? "from " : "the command line", c->path ? c->path : "");
	if (c->path)
		printf("# (file %s, then the command line)\n", c->path);
	for (const struct option *o = opts; o->name; o++) {
		if (not_a_key(o->name))
			continue;
		const char *val = NULL;
		bool set = false;
		for (int i = 1; i < argc; i++) { /* the last one given wins, as getopt reads them */
			const char *a = argv[i];
			if (!strcmp(a, "--scrape") || !strcmp(a, "--"))
				break;
			const struct option *w = which(opts, a);
			const char *eq = strchr(a, '=');
			if (w && w->has_arg != no_argument && !eq && i + 1 < argc)
				i++; /* its value, whatever it looks like */
			if (w != o)
				continue;
			set = true;
			val = o->has_arg == no_argument ? "true" : eq ? eq + 1 : argv[i] != a ? argv[i] : "";
		}
		if (o->val == 'q') /* -q is --quiet too */
			for (int i = 1; i < argc && !set; i++)
				set = !strcmp(argv[i], "-q");
		if (!set)
			continue;
		char red[2048];
		if (val && redacted(val, red, sizeof red)) {
			printf("# %s: the URL's password is not printed (--store-password-file keeps it out of the URL)\n",
			       o->name);
			val = red;
		}
		printf("%s: ", o->name);
		if (o->has_arg == no_argument)
			fputs("true", stdout);
		else
			yaml_value(val ? val : "");
		putchar('\n');
	}
	if (c->scrape) {
		printf("scrape:\n");
		/* the section as written in the file (its leading newlines and indent dropped) */
		const char *s = c->scrape;
		while (*s == '\n')
			s++;
		printf("  %s\n", s + strspn(s, " "));
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--scrape")) {
			printf("# and after --scrape, the scraper's flags:");
			for (int j = i + 1; j < argc; j++)
				printf(" %s", argv[j]);
			printf("\n");
			break;
		}
}
