/*
 * scrape_config.c — the YAML configuration file of `profd scrape --config FILE`, in
 * the spirit of Prometheus' scrape_configs: a global: section (defaults),
 * groups of static targets, and kubernetes entries that choose and tune the
 * discovered pods; plus Kubernetes label selectors (parsed here, matched
 * against a pod's labels by kube.c). The schema is docs/scraping.md
 * "Configuration file"; examples/scrape.yaml is a full example.
 *
 * The walk goes over libyaml's document (as lib/kube/kubeconfig.c does for
 * kubeconfig, but strict): every key must be known and given once (a typo is
 * an error, never ignored), every error names FILE:LINE:COLUMN (1-based, of
 * the node at fault) and the key path (scrape_configs[1].types[0]). Aliases
 * are followed, but each node visit costs from a budget, so an alias bomb
 * cannot make the walk explode; the file, the targets, the entries and the
 * labels are capped. No I/O: the caller reads the file (the fuzzer feeds
 * memory).
 *
 * Precedence (each level resolved into a struct pd_scrape_settings): built-in
 * defaults < global: < command-line flags < a group's own keys. Labels merge
 * in the same order (a later level's value wins for the same key); static
 * targets then get instance=HOST:PORT unless a label instance is given, and
 * label_keep (the group's, else global's) drops every other label.
 */
#define _GNU_SOURCE
#include "scrape.h"
#include "../http/params.h"
#include "../util/ynode.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../util/pdyaml.h"

#define CFG_BUDGET   500000 /* node visits per file */
#define CFG_PATH     192    /* longest key path in a message */
#define CFG_MAX_KEYS 16     /* keys of one mapping kind */
#define CFG_MAX_MAP  1024   /* names in one label_keep, namespaces in one entry */

/* ---- label selectors ------------------------------------------------------------------------- */

enum { SEL_EQ, SEL_NE, SEL_IN, SEL_NOTIN, SEL_EXISTS, SEL_NOT_EXISTS };

struct sel_req {
	int op;
	char *key;
	char **vals;
	size_t nvals;
};

struct pd_scrape_selector {
	struct sel_req *v;
	size_t n;
};

void pd_scrape_selector_free(struct pd_scrape_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->v[i].key);
		for (size_t k = 0; k < sel->v[i].nvals; k++)
			free(sel->v[i].vals[k]);
		free(sel->v[i].vals);
	}
	free(sel->v);
	free(sel);
}

/* Kubernetes label keys: [prefix/]name of [A-Za-z0-9._-]; values the same without '/'. */
static bool key_char(char c) { return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' || c == '/'; }
static bool val_char(char c) { return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-'; }

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int sel_err(struct pd_err *err, const char *s, const char *at, const char *what)
{
	return pd_errf(err, PD_EUSAGE, "selector \"%.100s\": %s at position %zu", s, what, (size_t)(at - s) + 1);
}

static int sel_add_val(struct sel_req *r, const char *p, size_t n)
{
	char **nv = realloc(r->vals, (r->nvals + 1) * sizeof *nv);
	if (!nv)
		return PD_ENOMEM;
	r->vals = nv;
	if (!(nv[r->nvals] = strndup(p, n)))
		return PD_ENOMEM;
	r->nvals++;
	return 0;
}

/* The value at *p (blanks around it skipped) added to r; *p moves past it. */
static int sel_take_val(struct sel_req *r, const char **p)
{
	const char *v = skip_ws(*p), *e = v;
	while (val_char(*e))
		e++;
	*p = skip_ws(e);
	return sel_add_val(r, v, (size_t)(e - v));
}

int pd_scrape_selector_parse(const char *s, struct pd_scrape_selector **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_scrape_selector *sel = calloc(1, sizeof *sel);
	if (!sel)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	int rc = 0;
	const char *p = skip_ws(s ? s : "");
	if (!*p)
		goto out; /* everything */
	for (;;) {
		struct sel_req r = {SEL_EXISTS, NULL, NULL, 0};
		p = skip_ws(p);
		if (*p == '!') {
			r.op = SEL_NOT_EXISTS;
			p = skip_ws(p + 1);
		}
		const char *k = p;
		while (key_char(*p))
			p++;
		if (p == k) {
			rc = sel_err(err, s, p, "expected a label key");
			goto out;
		}
		if (!(r.key = strndup(k, (size_t)(p - k))))
			goto oom;
		p = skip_ws(p);
		if (r.op == SEL_NOT_EXISTS) {
			/* !key stands alone */
		} else if (p[0] == '=' || (p[0] == '!' && p[1] == '=')) {
			r.op = p[0] == '!' ? SEL_NE : SEL_EQ;
			p += p[0] == '!' || p[1] == '=' ? 2 : 1;
			if (sel_take_val(&r, &p))
				goto oom_r;
		} else if ((!strncmp(p, "in", 2) && !key_char(p[2])) || (!strncmp(p, "notin", 5) && !key_char(p[5]))) {
			r.op = p[0] == 'i' ? SEL_IN : SEL_NOTIN;
			p = skip_ws(p + (r.op == SEL_IN ? 2 : 5));
			if (*p != '(') {
				free(r.key);
				rc = sel_err(err, s, p, "expected '(' after in/notin");
				goto out;
			}
			p++;
			for (;;) {
				if (sel_take_val(&r, &p))
					goto oom_r;
				if (*p == ',') {
					p++;
					continue;
				}
				if (*p == ')') {
					p = skip_ws(p + 1);
					break;
				}
				for (size_t i = 0; i < r.nvals; i++)
					free(r.vals[i]);
				free(r.vals);
				free(r.key);
				rc = sel_err(err, s, p, "expected ',' or ')' in a value set");
				goto out;
			}
		}
		struct sel_req *nv = realloc(sel->v, (sel->n + 1) * sizeof *nv);
		if (!nv)
			goto oom_r;
		sel->v = nv;
		sel->v[sel->n++] = r;
		if (!*p)
			break;
		if (*p != ',') {
			rc = sel_err(err, s, p, "expected ',', '=', '!=', 'in' or 'notin'");
			goto out;
		}
		p++;
		continue;
oom_r:
		for (size_t i = 0; i < r.nvals; i++)
			free(r.vals[i]);
		free(r.vals);
		free(r.key);
		goto oom;
	}
out:
	if (rc) {
		pd_scrape_selector_free(sel);
		return rc;
	}
	*out = sel;
	return 0;
oom:
	pd_scrape_selector_free(sel);
	return pd_errf(err, PD_ENOMEM, "out of memory");
}

bool pd_scrape_selector_match(const struct pd_scrape_selector *sel, pd_scrape_label_fn get, void *ctx)
{
	for (size_t i = 0; sel && i < sel->n; i++) {
		const struct sel_req *r = &sel->v[i];
		const char *v = get(ctx, r->key);
		bool in = false;
		for (size_t k = 0; v && k < r->nvals; k++)
			in |= !strcmp(v, r->vals[k]);
		bool ok;
		switch (r->op) {
		case SEL_EQ:
		case SEL_IN: ok = in; break;
		case SEL_NE:
		case SEL_NOTIN: ok = !in; break;
		case SEL_EXISTS: ok = v != NULL; break;
		default: ok = v == NULL; break;
		}
		if (!ok)
			return false;
	}
	return true;
}

const struct pd_scrape_kube_rule *pd_scrape_kube_rule_match(const struct pd_scrape_kube_rule *rules, size_t n,
							    const char *ns, pd_scrape_label_fn get, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		const struct pd_scrape_kube_rule *r = &rules[i];
		bool ns_ok = !r->nnamespaces;
		for (size_t k = 0; !ns_ok && k < r->nnamespaces; k++)
			ns_ok = ns && !strcmp(ns, r->namespaces[k]);
		if (ns_ok && pd_scrape_selector_match(r->selector, get, ctx))
			return r;
	}
	return NULL;
}

/* ---- format detection ---------------------------------------------------------------------- */

bool pd_scrape_config_is_yaml(const char *name, const char *text, size_t len)
{
	size_t nl = name ? strlen(name) : 0;
	if ((nl >= 5 && !strcasecmp(name + nl - 5, ".yaml")) || (nl >= 4 && !strcasecmp(name + nl - 4, ".yml")))
		return true;
	const char *p = text, *e = text + len;
	if (e - p >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) /* a UTF-8 byte order mark */
		p += 3;
	while (p < e) {
		const char *eol = memchr(p, '\n', (size_t)(e - p));
		if (!eol)
			eol = e;
		const char *q = p;
		while (q < eol && (*q == ' ' || *q == '\t' || *q == '\r'))
			q++;
		if (q == eol || *q == '#') {
			p = eol + (eol < e);
			continue;
		}
		/* the first line that says something */
		if ((eol - q >= 3 && !memcmp(q, "---", 3)) || *q == '%' || *q == '{' || *q == '"' || *q == '\'')
			return true;
		if (*q == '-' && (q + 1 == eol || q[1] == ' ' || q[1] == '\t'))
			return true;
		if (!isalpha((unsigned char)*q) && *q != '_')
			return false;
		const char *k = q;
		while (k < eol && (isalnum((unsigned char)*k) || *k == '_' || *k == '-' || *k == '.'))
			k++;
		/* "key:" then a blank or the end; a target's ':' is followed by a port or "//" */
		return k < eol && *k == ':' && (k + 1 == eol || k[1] == ' ' || k[1] == '\t' || k[1] == '\r');
	}
	return false;
}

/* ---- the walk ---------------------------------------------------------------------------------- */

struct tpos {
	size_t line, col;
};

struct cw {
	yaml_document_t *doc;
	const char *name;
	size_t budget;
	struct pd_err *err;
	const struct pd_scrape_cfg_flags *fl;
	struct pd_scrape_file *f;
	struct tpos *pos; /* where each static target was given */
	size_t poscap;
};

static int cerr(struct cw *w, const yaml_node_t *n, int code, const char *path, const char *fmt, ...) PD_PRINTF(5, 6);
static int cerr(struct cw *w, const yaml_node_t *n, int code, const char *path, const char *fmt, ...)
{
	if (code == PD_ENOMEM)
		return pd_errf(w->err, code, "out of memory");
	char m[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	return pd_errf(w->err, code, "%s:%zu:%zu: %s%s%s", w->name, n ? n->start_mark.line + 1 : 1,
		       n ? n->start_mark.column + 1 : 1, path, *path ? ": " : "", m);
}

static int node(struct cw *w, int id, yaml_node_t **out)
{
	if (!w->budget)
		return pd_errf(w->err, PD_ELIMIT, "%s: document too complex (over %d node visits; aliases?)", w->name,
			       CFG_BUDGET);
	w->budget--;
	if (!(*out = yaml_document_get_node(w->doc, id)))
		return pd_errf(w->err, PD_EUSAGE, "%s: broken YAML document", w->name);
	return 0;
}

static size_t ylen(const yaml_node_t *n)
{
	return n->type == YAML_SEQUENCE_NODE ? (size_t)(n->data.sequence.items.top - n->data.sequence.items.start)
					     : (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

/* A scalar as a C string (libyaml keeps scalars NUL-terminated; valid while the document is). */
static int scalar(struct cw *w, yaml_node_t *n, const char *path, const char *want, const char **out)
{
	if (n->type != YAML_SCALAR_NODE)
		return cerr(w, n, PD_EUSAGE, path, "expected %s, got %s", want, pd_ytype(n));
	if (memchr(n->data.scalar.value, 0, n->data.scalar.length))
		return cerr(w, n, PD_EUSAGE, path, "contains a NUL byte");
	*out = (const char *)n->data.scalar.value;
	return 0;
}

/* Key paths for messages; a long one is cut (the position says where anyway). */
static void subpath(char *buf, const char *path, const char *key)
{
	if (snprintf(buf, CFG_PATH, "%s%s%s", path, *path ? "." : "", key) >= CFG_PATH)
		buf[CFG_PATH - 1] = 0;
}

static void idxpath(char *buf, const char *path, size_t i)
{
	if (snprintf(buf, CFG_PATH, "%s[%zu]", path, i) >= CFG_PATH)
		buf[CFG_PATH - 1] = 0;
}

/*
 * Prometheus' keys, which a Prometheus user writes here: what profd has
 * instead, or why it has none, added to the "unknown key" message (never
 * accepted with another meaning, never ignored).
 */
static const struct {
	const char *key, *hint;
} prom_keys[] = {
    {"scrape_interval", "write interval (a Go duration: 30s, 1m30s)"},
    {"scrape_timeout", "write timeout (per request; a cpu request gets cpu_duration more)"},
    {"metrics_path", "write path: where the pprof handlers are (/debug/pprof), not one endpoint"},
    {"scheme", "write the scheme in the target: https://host:port (TLS: --target-ca FILE)"},
    {"external_labels", "write labels (on every profile)"},
    {"evaluation_interval", "profd has no rules: leave it out"},
    {"rule_files", "profd has no rules: leave it out"},
    {"alerting", "profd sends no alerts: leave it out"},
    {"remote_write", "profiles go to --collector: leave it out"},
    {"remote_read", "not in profd: leave it out"},
    {"storage", "not in profd: leave it out"},
    {"tracing", "not in profd: leave it out"},
    {"query_log_file", "not in profd: leave it out"},
    {"scrape_config_files", "write every scrape_configs entry in this file"},
    {"honor_labels", "targets send no labels (a profile's are labels:): leave it out"},
    {"honor_timestamps", "a profile's time is its scrape's: leave it out"},
    {"track_timestamps_staleness", "not in profd: leave it out"},
    {"relabel_configs", "no relabelling: labels adds labels, label_keep keeps only those it names"},
    {"metric_relabel_configs", "no relabelling: labels adds labels, label_keep keeps only those it names"},
    {"kubernetes_sd_configs", "write an entry of its own: - kubernetes: {namespaces: [...], selector: \"app=web\"} "
			      "(pods annotated profefe.com/enable: \"true\")"},
    {"tls_config", "TLS to targets is the whole process': --target-ca FILE, --target-insecure"},
    {"basic_auth", "targets are fetched without credentials (not supported)"},
    {"authorization", "targets are fetched without credentials (not supported)"},
    {"bearer_token", "targets are fetched without credentials (not supported)"},
    {"bearer_token_file", "targets are fetched without credentials (not supported)"},
    {"oauth2", "targets are fetched without credentials (not supported)"},
    {"proxy_url", "no proxy per group (not supported)"},
    {"follow_redirects", "profd follows no redirect: leave it out"},
    {"enable_http2", "not in profd: leave it out"},
    {"body_size_limit", "write --max-body SIZE (the flag)"},
    {"sample_limit", "not in profd: leave it out"},
    {"target_limit", "not in profd: leave it out"},
    {"label_limit", "a profile has at most 64 labels (label_keep drops some)"},
    {"label_name_length_limit", "not in profd: leave it out"},
    {"label_value_length_limit", "not in profd: leave it out"},
    {"role", "profd discovers pods only: leave it out"},
    {"selectors", "write selector: \"app=web,tier!=db\" (a Kubernetes label selector)"},
    {"api_server", "the API server is the kubeconfig's (--kubeconfig, --context) or the pod's service account"},
    {"kubeconfig_file", "write --kubeconfig FILE (the flag)"},
};

/*
 * The pairs of mapping m: every key one of keys[] and given once, else an
 * error at the key. vals[i] gets the value node of keys[i] (NULL if absent;
 * a null value is a node: pd_ynull() tells).
 */
static int fields(struct cw *w, yaml_node_t *m, const char *path, const char *const *keys, size_t nk,
		  yaml_node_t **vals)
{
	PD_ASSERT(nk <= CFG_MAX_KEYS);
	for (size_t i = 0; i < nk; i++)
		vals[i] = NULL;
	if (m->type != YAML_MAPPING_NODE)
		return cerr(w, m, PD_EUSAGE, path, "expected a mapping, got %s", pd_ytype(m));
	for (yaml_node_pair_t *pp = m->data.mapping.pairs.start; pp < m->data.mapping.pairs.top; pp++) {
		yaml_node_t *k, *v;
		int rc;
		if ((rc = node(w, pp->key, &k)) || (rc = node(w, pp->value, &v)))
			return rc;
		if (k->type != YAML_SCALAR_NODE)
			return cerr(w, k, PD_EUSAGE, path, "expected a key, got %s", pd_ytype(k));
		size_t i = 0;
		while (i < nk && !pd_yis(k, keys[i]))
			i++;
		if (i == nk) {
			char valid[400];
			size_t o = 0;
			valid[0] = 0;
			for (size_t j = 0; j < nk && o < sizeof valid; j++)
				o += (size_t)snprintf(valid + o, sizeof valid - o, "%s%s", j ? ", " : "", keys[j]);
			const char *hint = NULL;
			for (size_t j = 0; j < sizeof prom_keys / sizeof *prom_keys && !hint; j++)
				if (pd_yis(k, prom_keys[j].key))
					hint = prom_keys[j].hint;
			int kl = (int)(k->data.scalar.length > 64 ? 64 : k->data.scalar.length);
			const char *ks = (const char *)k->data.scalar.value;
			if (pd_yis(k, "<<"))
				return cerr(w, k, PD_EUSAGE, path,
					    "YAML merge keys (<<) are not supported: repeat the keys (an alias "
					    "(*a) works for a whole value)");
			if (!hint && k->data.scalar.length > 11 &&
			    !memcmp(k->data.scalar.value + k->data.scalar.length - 11, "_sd_configs", 11))
				hint = "profd's targets are static_configs and kubernetes entries";
			if (hint)
				return cerr(w, k, PD_EUSAGE, path, "unknown key \"%.*s\" (a Prometheus key): %s", kl, ks,
					    hint);
			return cerr(w, k, PD_EUSAGE, path, "unknown key \"%.*s\" (valid: %s)", kl, ks, valid);
		}
		if (vals[i])
			return cerr(w, k, PD_EUSAGE, path, "key \"%s\" given twice", keys[i]);
		vals[i] = v;
	}
	return 0;
}

/* A list (a null is an empty one); *n its length. */
static int list(struct cw *w, yaml_node_t *v, const char *path, size_t *n)
{
	*n = 0;
	if (pd_ynull(v))
		return 0;
	if (v->type != YAML_SEQUENCE_NODE)
		return cerr(w, v, PD_EUSAGE, path, "expected a list, got %s", pd_ytype(v));
	*n = ylen(v);
	return 0;
}

static int item(struct cw *w, yaml_node_t *seq, size_t i, yaml_node_t **out)
{
	return node(w, seq->data.sequence.items.start[i], out);
}

/* types: a list of names, or one string "cpu,heap" / "all". */
static int get_types(struct cw *w, yaml_node_t *v, const char *path, unsigned *out)
{
	struct pd_err e;
	const char *s;
	int rc;
	*out = 0;
	if (v->type != YAML_SEQUENCE_NODE) {
		if ((rc = scalar(w, v, path, "a list of profile types", &s)))
			return rc;
		if (pd_scrape_parse_types(s, out, &e))
			return cerr(w, v, PD_EUSAGE, path, "%s", e.msg);
		return 0;
	}
	size_t n = ylen(v);
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it;
		char p[CFG_PATH];
		unsigned m;
		idxpath(p, path, i);
		if ((rc = item(w, v, i, &it)) || (rc = scalar(w, it, p, "a profile type", &s)))
			return rc;
		if (pd_scrape_parse_types(s, &m, &e))
			return cerr(w, it, PD_EUSAGE, p, "%s", e.msg);
		*out |= m;
	}
	if (!*out)
		return cerr(w, v, PD_EUSAGE, path,
			    "no profile type given (valid: cpu, heap, allocs, block, mutex, goroutine, threadcreate, all)");
	return 0;
}

enum { D_INTERVAL, D_CPU, D_TIMEOUT };

static int get_dur(struct cw *w, yaml_node_t *v, const char *path, int which, int64_t *out)
{
	const char *s;
	struct pd_err e;
	int rc = scalar(w, v, path, "a duration (like 30s, 5m, 1h30m)", &s);
	if (rc)
		return rc;
	if (pd_api_parse_duration(s, strlen(s), out, &e)) /* Prometheus' 1d, 1w, 1y: no unit of Go's */
		return cerr(w, v, PD_EUSAGE, path, "%s%s", e.msg,
			    strstr(e.msg, "unknown unit") ? " (units: ns, us, ms, s, m, h; 1d is 24h)" : "");
	if (*out <= 0)
		return cerr(w, v, PD_EUSAGE, path, "must be positive, got \"%.64s\"", s);
	if (which == D_INTERVAL && *out < 1000000000LL)
		return cerr(w, v, PD_EUSAGE, path, "must be at least 1s, got \"%.64s\"", s);
	if (which == D_CPU && *out % 1000000000LL)
		return cerr(w, v, PD_EUSAGE, path, "must be whole seconds (Go's ?seconds= takes an integer), got \"%.64s\"",
			    s);
	if (which == D_TIMEOUT && *out < 1000000LL)
		return cerr(w, v, PD_EUSAGE, path, "must be at least 1ms, got \"%.64s\"", s);
	return 0;
}

static int get_bool(struct cw *w, yaml_node_t *v, const char *path, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False", "FALSE"};
	if (v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
		for (size_t i = 0; i < 3; i++)
			if (pd_yis(v, yes[i]) || pd_yis(v, no[i])) {
				*out = pd_yis(v, yes[i]);
				return 0;
			}
	return cerr(w, v, PD_EUSAGE, path, "expected true or false");
}

/* ---- label sets ------------------------------------------------------------------------------- */

static void kv_free(struct pd_kv *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
}

/* Set key k to val (copied): replaces the value of an existing k in place. */
static int kv_set(struct pd_kv **v, size_t *n, const char *k, const char *val)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].key, k)) {
			char *d = strdup(val);
			if (!d)
				return PD_ENOMEM;
			free((*v)[i].value);
			(*v)[i].value = d;
			return 0;
		}
	struct pd_kv *nv = realloc(*v, (*n + 1) * sizeof *nv);
	if (!nv)
		return PD_ENOMEM;
	*v = nv;
	nv[*n].key = strdup(k);
	nv[*n].value = strdup(val);
	if (!nv[*n].key || !nv[*n].value) {
		free(nv[*n].key);
		free(nv[*n].value);
		return PD_ENOMEM;
	}
	(*n)++;
	return 0;
}

static int kv_add_all(struct pd_kv **v, size_t *n, const struct pd_kv *src, size_t ns)
{
	for (size_t i = 0; i < ns; i++)
		if (kv_set(v, n, src[i].key, src[i].value ? src[i].value : ""))
			return PD_ENOMEM;
	return 0;
}

/* labels: a mapping of names to values (a null value is ""), merged into *v. */
static int get_labels(struct cw *w, yaml_node_t *m, const char *path, struct pd_kv **v, size_t *n)
{
	if (m->type != YAML_MAPPING_NODE)
		return cerr(w, m, PD_EUSAGE, path, "expected a mapping of label names to values, got %s", pd_ytype(m));
	if (ylen(m) > PD_SCRAPE_MAX_LABELS)
		return cerr(w, m, PD_EUSAGE, path, "%zu labels, over the collector's limit of %d", ylen(m),
			    PD_SCRAPE_MAX_LABELS);
	const char *seen[PD_SCRAPE_MAX_LABELS];
	size_t nseen = 0;
	for (yaml_node_pair_t *pp = m->data.mapping.pairs.start; pp < m->data.mapping.pairs.top; pp++) {
		yaml_node_t *k, *val;
		const char *ks, *vs = "";
		int rc;
		if ((rc = node(w, pp->key, &k)) || (rc = node(w, pp->value, &val)))
			return rc;
		if ((rc = scalar(w, k, path, "a label name", &ks)))
			return rc;
		char p[CFG_PATH];
		subpath(p, path, ks);
		if (!*ks)
			return cerr(w, k, PD_EUSAGE, path, "a label name must not be empty");
		/* names a selector or Prometheus reads otherwise: never stored with another meaning */
		if (!strcmp(ks, "service"))
			return cerr(w, k, PD_EUSAGE, path,
				    "\"service\" is not a label: the group's service (or job_name) sets the profiles' service, "
				    "which service=\"...\" in a selector matches (a label of that name could not be selected)");
		if (!strncmp(ks, "__", 2))
			return cerr(w, k, PD_EUSAGE, path,
				    "label \"%.64s\": names starting with __ are reserved, as in Prometheus (__address__, "
				    "__metrics_path__, __scheme__, __param_NAME: write the target's URL, path, params; __name__ "
				    "in a selector is the type)",
				    ks);
		for (size_t i = 0; i < nseen; i++)
			if (!strcmp(seen[i], ks))
				return cerr(w, k, PD_EUSAGE, path, "label \"%.64s\" given twice", ks);
		seen[nseen++] = ks;
		if (!pd_ynull(val) && (rc = scalar(w, val, p, "a label value (a string)", &vs)))
			return rc;
		if (kv_set(v, n, ks, vs))
			return cerr(w, m, PD_ENOMEM, path, "out of memory");
	}
	return 0;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* label_keep: a list of label names. */
static int get_keep(struct cw *w, yaml_node_t *v, const char *path, char ***out, size_t *nout)
{
	size_t n;
	int rc = list(w, v, path, &n);
	if (rc)
		return rc;
	if (n > CFG_MAX_MAP)
		return cerr(w, v, PD_ELIMIT, path, "%zu names, over the limit of %d", n, CFG_MAX_MAP);
	char **arr = calloc(n ? n : 1, sizeof *arr);
	if (!arr)
		return cerr(w, v, PD_ENOMEM, path, "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it;
		const char *s;
		char p[CFG_PATH];
		idxpath(p, path, i);
		if ((rc = item(w, v, i, &it)) || (rc = scalar(w, it, p, "a label name", &s)))
			break;
		if (!*s) {
			rc = cerr(w, it, PD_EUSAGE, p, "a label name must not be empty");
			break;
		}
		if (strpbrk(s, "*+?|()[]{}^$\\")) { /* "team_.*" would keep no label, silently */
			rc = cerr(w, it, PD_EUSAGE, p,
				  "\"%.64s\": label_keep names labels exactly, it is not a regex (as Prometheus' labelkeep "
				  "is): list the names",
				  s);
			break;
		}
		if (!(arr[i] = strdup(s))) {
			rc = cerr(w, it, PD_ENOMEM, p, "out of memory");
			break;
		}
	}
	if (rc) {
		strv_free(arr, n);
		return rc;
	}
	*out = arr;
	*nout = n;
	return 0;
}

static void settings_free(struct pd_scrape_settings *s)
{
	kv_free(s->labels, s->nlabels);
	strv_free(s->keep, s->nkeep);
	free(s->query);
	memset(s, 0, sizeof *s);
}

/* params: URL parameters sent with every request of a group's targets, as
 * Prometheus' params ({debug: 1}, or lists of values {a: [x, y]}) ->
 * "debug=1&a=x&a=y", names and values QueryEscape'd. seconds is the
 * scraper's own (--cpu-duration). */
static int get_params(struct cw *w, yaml_node_t *m, const char *path, char **out)
{
	if (m->type != YAML_MAPPING_NODE)
		return cerr(w, m, PD_EUSAGE, path, "expected a mapping of URL parameters to values (like {debug: 1}), got %s",
			    pd_ytype(m));
	struct pd_buf b = PD_BUF_INIT(8192);
	int rc = 0;
	for (yaml_node_pair_t *pp = m->data.mapping.pairs.start; pp < m->data.mapping.pairs.top && !rc; pp++) {
		yaml_node_t *k, *val;
		const char *ks, *vs;
		char p[CFG_PATH];
		if ((rc = node(w, pp->key, &k)) || (rc = node(w, pp->value, &val)) ||
		    (rc = scalar(w, k, path, "a parameter name", &ks)))
			break;
		subpath(p, path, ks);
		if (!*ks) {
			rc = cerr(w, k, PD_EUSAGE, path, "a parameter name must not be empty");
			break;
		}
		if (!strcmp(ks, "seconds")) {
			rc = cerr(w, k, PD_EUSAGE, p, "seconds is the scraper's own parameter (cpu_duration, --cpu-duration)");
			break;
		}
		for (yaml_node_pair_t *pk = m->data.mapping.pairs.start; pk < pp && !rc; pk++) { /* as every key */
			yaml_node_t *k0 = yaml_document_get_node(w->doc, pk->key);
			if (k0 && k0->type == YAML_SCALAR_NODE && k0->data.scalar.length == k->data.scalar.length &&
			    !memcmp(k0->data.scalar.value, k->data.scalar.value, k->data.scalar.length))
				rc = cerr(w, k, PD_EUSAGE, path, "parameter \"%.64s\" given twice (for several values: %s: [a, b])",
					  ks, ks);
		}
		if (rc)
			break;
		size_t nv = 1;
		bool seq = val->type == YAML_SEQUENCE_NODE;
		if (seq && (rc = list(w, val, p, &nv)))
			break;
		for (size_t i = 0; i < nv && !rc; i++) {
			yaml_node_t *v = val;
			char pi[CFG_PATH];
			snprintf(pi, sizeof pi, "%s", p);
			if (seq) {
				idxpath(pi, p, i);
				if ((rc = item(w, val, i, &v)))
					break;
			}
			vs = "";
			if (!pd_ynull(v) && (rc = scalar(w, v, pi, "a parameter value", &vs)))
				break;
			int e = 0;
			if ((b.len && (e = pd_buf_append(&b, "&", 1))) || (e = pd_scrape_query_escape(ks, &b)) ||
			    (e = pd_buf_append(&b, "=", 1)) || (e = pd_scrape_query_escape(vs, &b)))
				rc = cerr(w, m, e == PD_ELIMIT ? PD_ELIMIT : PD_ENOMEM, path, "%s",
					  e == PD_ELIMIT ? "over 8 KiB of parameters" : "out of memory");
		}
	}
	int e;
	if (!rc && b.len && (e = pd_buf_append(&b, "", 1)))
		rc = cerr(w, m, e == PD_ELIMIT ? PD_ELIMIT : PD_ENOMEM, path, "%s",
			  e == PD_ELIMIT ? "over 8 KiB of parameters" : "out of memory");
	if (rc || !b.len) {
		pd_buf_free(&b);
		return rc;
	}
	*out = (char *)b.ptr;
	return 0;
}

/* url + '?' or '&' + query (malloc'd), url if query is NULL. */
static char *with_query(const char *url, const char *query)
{
	char *u = NULL;
	if (asprintf(&u, "%s%s%s", url, query ? (strchr(url, '?') ? "&" : "?") : "", query ? query : "") < 0)
		return NULL;
	return u;
}

/* ---- settings: global and groups ------------------------------------------------------------ */

/* The keys every level has, in this order at the front of each key table. */
enum { K_TYPES, K_INTERVAL, K_CPU, K_TIMEOUT, K_LABELS, K_KEEP, K_COMMON };
#define COMMON_KEYS "types", "interval", "cpu_duration", "timeout", "labels", "label_keep"

/*
 * Resolve one level: out = base, overridden by the level's keys (vals[K_*]),
 * except for the PD_SCF_* bits in flags_win (global: the flags given), whose
 * values stay base's; the level's labels are merged over base's, then
 * after_labels over them (global: -L). Every value is checked even when a
 * flag wins. where/path: the level, for the cpu-vs-interval message.
 */
static int resolve(struct cw *w, const struct pd_scrape_settings *base, unsigned flags_win, yaml_node_t **vals,
		   const struct pd_kv *after_labels, size_t nafter, yaml_node_t *where, const char *path,
		   struct pd_scrape_settings *out)
{
	char p[CFG_PATH];
	int rc = 0;
	memset(out, 0, sizeof *out);
	out->types = base->types;
	out->interval_ns = base->interval_ns;
	out->cpu_ns = base->cpu_ns;
	out->timeout_ns = base->timeout_ns;
	unsigned t;
	int64_t d;
	if (!pd_ynull(vals[K_TYPES])) {
		subpath(p, path, "types");
		if ((rc = get_types(w, vals[K_TYPES], p, &t)))
			return rc;
		if (!(flags_win & PD_SCF_TYPES))
			out->types = t;
	}
	static const int which[3] = {D_INTERVAL, D_CPU, D_TIMEOUT};
	static const char *const names[3] = {"interval", "cpu_duration", "timeout"};
	static const unsigned bits[3] = {PD_SCF_INTERVAL, PD_SCF_CPU, PD_SCF_TIMEOUT};
	int64_t *dst[3] = {&out->interval_ns, &out->cpu_ns, &out->timeout_ns};
	for (int i = 0; i < 3; i++) {
		if (pd_ynull(vals[K_INTERVAL + i]))
			continue;
		subpath(p, path, names[i]);
		if ((rc = get_dur(w, vals[K_INTERVAL + i], p, which[i], &d)))
			return rc;
		if (!(flags_win & bits[i]))
			*dst[i] = d;
	}
	if (kv_add_all(&out->labels, &out->nlabels, base->labels, base->nlabels))
		goto oom;
	if (!pd_ynull(vals[K_LABELS])) {
		subpath(p, path, "labels");
		if ((rc = get_labels(w, vals[K_LABELS], p, &out->labels, &out->nlabels)))
			goto fail;
	}
	if (kv_add_all(&out->labels, &out->nlabels, after_labels, nafter))
		goto oom;
	if (!pd_ynull(vals[K_KEEP])) { /* label_keep: [] keeps no label */
		subpath(p, path, "label_keep");
		if ((rc = get_keep(w, vals[K_KEEP], p, &out->keep, &out->nkeep)))
			goto fail;
		out->has_keep = true;
	} else if (base->has_keep) {
		out->has_keep = true;
		out->nkeep = base->nkeep;
		if (!(out->keep = calloc(base->nkeep ? base->nkeep : 1, sizeof *out->keep)))
			goto oom;
		for (size_t i = 0; i < base->nkeep; i++)
			if (!(out->keep[i] = strdup(base->keep[i])))
				goto oom;
	}
	bool says = !pd_ynull(vals[K_TYPES]) || !pd_ynull(vals[K_INTERVAL]) || !pd_ynull(vals[K_CPU]);
	if (says && !w->fl->once && (out->types & (1u << PD_ST_CPU)) && out->cpu_ns >= out->interval_ns) {
		rc = cerr(w, where, PD_EUSAGE, path, "cpu_duration (%gs) must be shorter than interval (%gs)",
			  (double)out->cpu_ns / 1e9, (double)out->interval_ns / 1e9);
		goto fail;
	}
	return 0;
oom:
	rc = cerr(w, where, PD_ENOMEM, path, "out of memory");
fail:
	settings_free(out);
	return rc;
}

/* ---- static targets ---------------------------------------------------------------------------- */

/* path: where a group's host:port targets serve pprof. */
static int get_path(struct cw *w, yaml_node_t *v, const char *path, char **out)
{
	const char *s;
	int rc = scalar(w, v, path, "a URL path (like /debug/pprof)", &s);
	if (rc)
		return rc;
	size_t n = strlen(s);
	bool ok = s[0] == '/' && n <= 1024;
	for (size_t i = 0; ok && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		ok = c > ' ' && c != 0x7f && c != '?' && c != '#' && c != '\\';
	}
	if (!ok)
		return cerr(w, v, PD_EUSAGE, path, "\"%.64s\" is not an absolute URL path (like /debug/pprof; no query, no blanks)",
			    s);
	while (n && s[n - 1] == '/')
		n--;
	if (!n)
		return cerr(w, v, PD_EUSAGE, path, "\"/\": the pprof handlers live under a path, like /debug/pprof");
	if (!(*out = strndup(s, n)))
		return cerr(w, v, PD_ENOMEM, path, "out of memory");
	return 0;
}

/* A target as written -> its base URL; gpath replaces /debug/pprof for a target without a path. */
static int target_url(struct cw *w, yaml_node_t *v, const char *path, const char *gpath, char **out)
{
	const char *s;
	struct pd_err e;
	int rc = scalar(w, v, path, "a target (host:port or URL)", &s);
	if (rc)
		return rc;
	char *tmp = NULL;
	if (gpath) {
		const char *b = s;
		while (isspace((unsigned char)*b))
			b++;
		size_t n = strlen(b);
		while (n && isspace((unsigned char)b[n - 1]))
			n--;
		const char *sep = strstr(b, "://");
		const char *rest = sep && (size_t)(sep - b) < n ? sep + 3 : b;
		/* host:port?debug=1: the path goes before the query */
		const char *q = memchr(rest, '?', n - (size_t)(rest - b));
		size_t hn = q ? (size_t)(q - b) : n;
		if (!memchr(rest, '/', hn - (size_t)(rest - b)) && n &&
		    asprintf(&tmp, "%.*s%s%.*s", (int)hn, b, gpath, (int)(n - hn), b + hn) < 0)
			return cerr(w, v, PD_ENOMEM, path, "out of memory");
	}
	rc = pd_scrape_normalize_url(tmp ? tmp : s, out, &e);
	free(tmp);
	if (rc)
		return cerr(w, v, rc, path, "%s", e.msg);
	return 0;
}

static int add_target(struct cw *w, yaml_node_t *v, const char *path, const char *url, const char *service,
		      const struct pd_scrape_settings *set, const struct pd_kv *labels, size_t nlabels)
{
	struct pd_scrape_targets *l = &w->f->targets;
	struct pd_err e;
	if (l->n >= PD_SCRAPE_CFG_MAX_TARGETS)
		return cerr(w, v, PD_ELIMIT, path, "over %d static targets in one file", PD_SCRAPE_CFG_MAX_TARGETS);
	if (pd_grow((void **)&w->pos, &w->poscap, l->n + 1, sizeof *w->pos))
		return cerr(w, v, PD_ENOMEM, path, "out of memory");
	int rc = pd_scrape_targets_add(l, url, url, service, labels, nlabels, set->types, &e);
	if (rc == PD_EINVAL) { /* the key is there already */
		for (size_t i = 0; i < l->n; i++)
			if (!strcmp(l->v[i].key, url))
				return cerr(w, v, PD_EUSAGE, path, "target %s given twice (first at %s:%zu:%zu)", url,
					    w->name, w->pos[i].line, w->pos[i].col);
	}
	if (rc)
		return cerr(w, v, rc, path, "%s", e.msg);
	w->pos[l->n - 1] = (struct tpos){v->start_mark.line + 1, v->start_mark.column + 1};
	if ((rc = pd_scrape_targets_set_sched(l, l->n - 1, set->interval_ns, set->cpu_ns, set->timeout_ns, &e)))
		return cerr(w, v, rc, path, "%s", e.msg);
	return 0;
}

/* One item of static_configs: {targets: [...], labels: {...}}. */
static int static_config(struct cw *w, yaml_node_t *m, const char *path, const char *service, const char *gpath,
			 const struct pd_scrape_settings *set)
{
	static const char *const keys[] = {"targets", "labels"};
	yaml_node_t *vals[2];
	char p[CFG_PATH], pi[CFG_PATH];
	struct pd_kv *lab = NULL;
	size_t nlab = 0, n;
	char *url = NULL;
	int rc = fields(w, m, path, keys, 2, vals);
	if (rc)
		return rc;
	subpath(p, path, "targets");
	if ((rc = list(w, vals[0], p, &n)))
		return rc;
	if (!n)
		return cerr(w, vals[0] ? vals[0] : m, PD_EUSAGE, vals[0] ? p : path,
			    vals[0] ? "no targets (want a list of host:port or URLs)" : "targets: missing");
	if (kv_add_all(&lab, &nlab, set->labels, set->nlabels))
		goto oom;
	if (!pd_ynull(vals[1])) {
		subpath(pi, path, "labels");
		if ((rc = get_labels(w, vals[1], pi, &lab, &nlab)))
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it;
		idxpath(pi, p, i);
		if ((rc = item(w, vals[0], i, &it)) || (rc = target_url(w, it, pi, gpath, &url)))
			goto out;
		if (set->query) { /* the group's params, after the target's own query */
			char *q = with_query(url, set->query);
			free(url);
			if (!(url = q))
				goto oom;
		}
		/* instance=HOST:PORT unless given; then label_keep */
		size_t nl = nlab;
		bool has_instance = false;
		for (size_t k = 0; k < nlab; k++)
			has_instance |= !strcmp(lab[k].key, "instance");
		struct pd_kv *all = calloc(nlab + 1, sizeof *all);
		if (!all)
			goto oom;
		if (nlab)
			memcpy(all, lab, nlab * sizeof *all);
		char hp[256];
		if (!has_instance)
			all[nl++] = (struct pd_kv){(char *)"instance", (char *)pd_scrape_url_hostport(url, hp, sizeof hp)};
		if (set->has_keep)
			nl = pd_scrape_labels_keep(all, nl, set->keep, set->nkeep);
		if (nl > PD_SCRAPE_MAX_LABELS)
			rc = cerr(w, it, PD_EUSAGE, pi, "%zu labels, over the collector's limit of %d (label_keep can drop some)",
				  nl, PD_SCRAPE_MAX_LABELS);
		else
			rc = add_target(w, it, pi, url, service, set, all, nl);
		free(all);
		free(url);
		url = NULL;
		if (rc)
			goto out;
	}
	goto out;
oom:
	rc = cerr(w, m, PD_ENOMEM, path, "out of memory");
out:
	free(url);
	kv_free(lab, nlab);
	return rc;
}

/* ---- kubernetes entries ------------------------------------------------------------------------- */

/* A Kubernetes namespace name (RFC 1123 label). */
bool pd_scrape_dns_label(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static void rule_free(struct pd_scrape_kube_rule *r)
{
	free(r->where);
	strv_free(r->namespaces, r->nnamespaces);
	free(r->selector_text);
	pd_scrape_selector_free(r->selector);
	settings_free(&r->set);
	memset(r, 0, sizeof *r);
}

/* kubernetes: {namespaces: [...] | all_namespaces: true, selector: "..."} (null: any pod). */
static int kube_match(struct cw *w, yaml_node_t *v, const char *path, struct pd_scrape_kube_rule *r)
{
	static const char *const keys[] = {"namespaces", "all_namespaces", "selector"};
	yaml_node_t *vals[3];
	char p[CFG_PATH], pi[CFG_PATH];
	size_t n;
	int rc;
	if (pd_ynull(v))
		return 0;
	if ((rc = fields(w, v, path, keys, 3, vals)))
		return rc;
	subpath(p, path, "namespaces");
	if (vals[0] && vals[0]->type == YAML_MAPPING_NODE) /* Prometheus' {names: [...]} */
		return cerr(w, vals[0], PD_EUSAGE, p, "expected a list of namespaces: namespaces: [shop, web] "
						      "(not Prometheus' {names: [...]})");
	if ((rc = list(w, vals[0], p, &n)))
		return rc;
	if (vals[0] && !n)
		return cerr(w, vals[0], PD_EUSAGE, p, "empty (leave it out for any namespace)");
	if (n > CFG_MAX_MAP)
		return cerr(w, vals[0], PD_ELIMIT, p, "%zu namespaces, over the limit of %d", n, CFG_MAX_MAP);
	if (n && !(r->namespaces = calloc(n, sizeof *r->namespaces)))
		return cerr(w, v, PD_ENOMEM, path, "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it;
		const char *s;
		idxpath(pi, p, i);
		if ((rc = item(w, vals[0], i, &it)) || (rc = scalar(w, it, pi, "a namespace", &s)))
			return rc;
		if (!pd_scrape_dns_label(s))
			return cerr(w, it, PD_EUSAGE, pi, "\"%.64s\" is not a namespace name (lower case letters, digits, '-')",
				    s);
		if (!(r->namespaces[i] = strdup(s)))
			return cerr(w, it, PD_ENOMEM, pi, "out of memory");
		r->nnamespaces = i + 1;
	}
	if (!pd_ynull(vals[1])) {
		subpath(p, path, "all_namespaces");
		if ((rc = get_bool(w, vals[1], p, &r->all_namespaces)))
			return rc;
		if (r->all_namespaces && n)
			return cerr(w, vals[1], PD_EUSAGE, p, "give namespaces or all_namespaces, not both");
	}
	if (!pd_ynull(vals[2])) {
		const char *s;
		struct pd_err e;
		subpath(p, path, "selector");
		if ((rc = scalar(w, vals[2], p, "a label selector (like app=web,tier!=db)", &s)))
			return rc;
		if ((rc = pd_scrape_selector_parse(s, &r->selector, &e)))
			return cerr(w, vals[2], rc, p, "%s", e.msg);
		if (!(r->selector_text = strdup(s)))
			return cerr(w, vals[2], PD_ENOMEM, p, "out of memory");
	}
	return 0;
}

/* ---- groups and the document --------------------------------------------------------------------- */

enum { G_SERVICE = K_COMMON, G_JOB, G_PATH, G_STATIC, G_KUBE, G_PARAMS, G_N };

static int group(struct cw *w, yaml_node_t *m, const char *path)
{
	static const char *const keys[G_N] = {COMMON_KEYS,      "service",    "job_name", "path",
					      "static_configs", "kubernetes", "params"};
	yaml_node_t *vals[G_N];
	char p[CFG_PATH];
	struct pd_scrape_settings set = {0};
	char *gpath = NULL;
	const char *service = NULL;
	int rc = fields(w, m, path, keys, G_N, vals);
	if (rc)
		return rc;
	bool kube = vals[G_KUBE] != NULL;
	if (kube) {
		static const char *const why[] = {
		    "a pod's service is its profefe.com/service annotation, else its workload",
		    "a pod's service is its profefe.com/service annotation, else its workload",
		    "a pod's path is its profefe.com/path annotation",
		    "a kubernetes entry selects pods; put static targets in a group of their own",
		};
		for (int k = G_SERVICE; k <= G_STATIC; k++)
			if (vals[k]) {
				subpath(p, path, keys[k]);
				return cerr(w, vals[k], PD_EUSAGE, p, "not in a kubernetes entry (%s)", why[k - G_SERVICE]);
			}
	} else if (!vals[G_STATIC]) {
		return cerr(w, m, PD_EUSAGE, path, "want static_configs (static targets) or kubernetes (pods)");
	}
	if (vals[G_SERVICE] && vals[G_JOB]) {
		subpath(p, path, "job_name");
		return cerr(w, vals[G_JOB], PD_EUSAGE, p, "service and job_name are the same key: give one");
	}
	if ((rc = resolve(w, &w->f->global, 0, vals, NULL, 0, m, path, &set)))
		return rc;
	if (!pd_ynull(vals[G_PARAMS])) {
		subpath(p, path, "params");
		if ((rc = get_params(w, vals[G_PARAMS], p, &set.query)))
			goto out;
	}
	if (kube) {
		struct pd_scrape_file *f = w->f;
		if (f->nrules >= PD_SCRAPE_CFG_MAX_RULES) {
			rc = cerr(w, m, PD_ELIMIT, path, "over %d kubernetes entries", PD_SCRAPE_CFG_MAX_RULES);
			goto out;
		}
		struct pd_scrape_kube_rule *nr = realloc(f->rules, (f->nrules + 1) * sizeof *nr);
		if (!nr)
			goto oom;
		f->rules = nr;
		struct pd_scrape_kube_rule *r = &f->rules[f->nrules++];
		memset(r, 0, sizeof *r);
		r->set = set;
		memset(&set, 0, sizeof set);
		if (asprintf(&r->where, "%s:%zu:%zu", w->name, m->start_mark.line + 1, m->start_mark.column + 1) < 0) {
			r->where = NULL;
			goto oom;
		}
		if (!r->set.has_keep && r->set.nlabels > PD_SCRAPE_MAX_LABELS) {
			rc = cerr(w, m, PD_EUSAGE, path, "%zu labels, over the collector's limit of %d", r->set.nlabels,
				  PD_SCRAPE_MAX_LABELS);
			goto out;
		}
		subpath(p, path, "kubernetes");
		rc = kube_match(w, vals[G_KUBE], p, r);
		goto out;
	}
	yaml_node_t *sv = vals[G_SERVICE] ? vals[G_SERVICE] : vals[G_JOB];
	if (!pd_ynull(sv)) {
		subpath(p, path, keys[vals[G_SERVICE] ? G_SERVICE : G_JOB]);
		if ((rc = scalar(w, sv, p, "a service name", &service)))
			goto out;
		if (!*service) {
			rc = cerr(w, sv, PD_EUSAGE, p, "must not be empty");
			goto out;
		}
	} else if (!(service = w->fl->service)) {
		rc = cerr(w, m, PD_EUSAGE, path, "service is required for static targets (or --service NAME before any --target)");
		goto out;
	}
	if (!pd_ynull(vals[G_PATH])) {
		subpath(p, path, "path");
		if ((rc = get_path(w, vals[G_PATH], p, &gpath)))
			goto out;
	}
	size_t n;
	subpath(p, path, "static_configs");
	if ((rc = list(w, vals[G_STATIC], p, &n)))
		goto out;
	if (!n) {
		rc = cerr(w, vals[G_STATIC], PD_EUSAGE, p, "empty (want a list of {targets: [...], labels: {...}})");
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		yaml_node_t *it;
		char pi[CFG_PATH];
		idxpath(pi, p, i);
		if (!(rc = item(w, vals[G_STATIC], i, &it)))
			rc = static_config(w, it, pi, service, gpath, &set);
	}
	goto out;
oom:
	rc = cerr(w, m, PD_ENOMEM, path, "out of memory");
out:
	settings_free(&set);
	free(gpath);
	return rc;
}

static int document(struct cw *w, yaml_node_t *root)
{
	static const char *const top[] = {"global", "scrape_configs"};
	static const char *const gkeys[K_COMMON] = {COMMON_KEYS};
	const struct pd_scrape_cfg_flags *fl = w->fl;
	struct pd_scrape_file *f = w->f;
	yaml_node_t *vals[2], *gv[K_COMMON] = {0};
	int rc;
	/* the base of everything: the flags (or the built-in defaults) */
	struct pd_scrape_settings base = {fl->types, fl->interval_ns, fl->cpu_ns, fl->timeout_ns, NULL, 0, NULL, 0, false, NULL};
	if (pd_ynull(root)) {
		vals[0] = vals[1] = NULL; /* an empty file: no targets */
	} else if (root->type != YAML_MAPPING_NODE) {
		return cerr(w, root, PD_EUSAGE, "", "expected a mapping (global:, scrape_configs:) at the top level, got %s",
			    pd_ytype(root));
	} else if ((rc = fields(w, root, "", top, 2, vals))) {
		return rc;
	}
	if (!pd_ynull(vals[0]) && (rc = fields(w, vals[0], "global", gkeys, K_COMMON, gv)))
		return rc;
	if ((rc = resolve(w, &base, fl->given, gv, fl->labels, fl->nlabels, vals[0] ? vals[0] : root, "global",
			  &f->global)))
		return rc;
	size_t n;
	if ((rc = list(w, vals[1], "scrape_configs", &n)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it;
		char p[CFG_PATH];
		idxpath(p, "scrape_configs", i);
		if ((rc = item(w, vals[1], i, &it)) || (rc = group(w, it, p)))
			return rc;
	}
	/* the scope the entries ask for */
	const char *one = NULL;
	for (size_t i = 0; i < f->nrules; i++) {
		const struct pd_scrape_kube_rule *r = &f->rules[i];
		f->kube_all |= r->all_namespaces;
		for (size_t k = 0; k < r->nnamespaces; k++) {
			if (!one)
				one = r->namespaces[k];
			else if (strcmp(one, r->namespaces[k]))
				f->kube_all = true;
		}
	}
	if (one && !f->kube_all && !(f->kube_namespace = strdup(one)))
		return pd_errf(w->err, PD_ENOMEM, "out of memory");
	return 0;
}

void pd_scrape_file_free(struct pd_scrape_file *f)
{
	if (!f)
		return;
	settings_free(&f->global);
	pd_scrape_targets_free(&f->targets);
	for (size_t i = 0; i < f->nrules; i++)
		rule_free(&f->rules[i]);
	free(f->rules);
	free(f->kube_namespace);
	memset(f, 0, sizeof *f);
}

int pd_scrape_parse_yaml(const char *name, const void *text, size_t len, const struct pd_scrape_cfg_flags *fl,
			 struct pd_scrape_file *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	if (!name)
		name = "(config)";
	if (len > PD_SCRAPE_CFG_MAX_BYTES)
		return pd_errf(err, PD_ELIMIT, "%s: %zu bytes, over the limit of %u", name, len, PD_SCRAPE_CFG_MAX_BYTES);
	yaml_parser_t ps;
	yaml_document_t doc, more;
	if (!yaml_parser_initialize(&ps))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&ps, text, len);
	if (!yaml_parser_load(&ps, &doc)) {
		int rc = pd_errf(err, ps.error == YAML_MEMORY_ERROR ? PD_ENOMEM : PD_EUSAGE, "%s:%zu:%zu: invalid YAML: %s%s%s",
				 name, ps.problem_mark.line + 1, ps.problem_mark.column + 1,
				 ps.problem ? ps.problem : "syntax error", ps.context ? " " : "", ps.context ? ps.context : "");
		yaml_parser_delete(&ps);
		return rc;
	}
	struct cw w = {&doc, name, CFG_BUDGET, err, fl, out, NULL, 0};
	int rc = document(&w, yaml_document_get_root_node(&doc));
	/* a second document would be ignored: refuse it, unless it is empty (a
	 * trailing "---", which Prometheus reads too) */
	for (bool end = false; !rc && !end;) {
		if (!yaml_parser_load(&ps, &more)) {
			rc = pd_errf(err, ps.error == YAML_MEMORY_ERROR ? PD_ENOMEM : PD_EUSAGE,
				     "%s:%zu:%zu: invalid YAML: %s%s%s", name, ps.problem_mark.line + 1,
				     ps.problem_mark.column + 1, ps.problem ? ps.problem : "syntax error",
				     ps.context ? " " : "", ps.context ? ps.context : "");
			break;
		}
		yaml_node_t *r2 = yaml_document_get_root_node(&more);
		end = !r2; /* the end of the stream */
		if (r2 && !pd_ynull(r2))
			rc = pd_errf(err, PD_EUSAGE, "%s:%zu:%zu: a second YAML document: give one only", name,
				     r2->start_mark.line + 1, r2->start_mark.column + 1);
		yaml_document_delete(&more);
	}
	free(w.pos);
	yaml_document_delete(&doc);
	yaml_parser_delete(&ps);
	if (rc)
		pd_scrape_file_free(out);
	return rc;
}
