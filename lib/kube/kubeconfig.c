/*
 * kubeconfig.c — where the API server is and how to authenticate: kubeconfig
 * files (libyaml) with kubectl's loading and merging rules, or the pod's
 * service account (in-cluster). See kube.h.
 *
 * A kubeconfig goes through three steps: parse (YAML document -> struct
 * kc_file: every cluster, user and context of one file, type-checked like
 * kubectl's decoder), resolve (pick the context across all files, the first
 * file that names an entry wins, validate what the context uses), and, for
 * pd_kube_config_load only, read the files it names. pd_kube_config_parse
 * stops before the I/O, so the fuzzer never touches the filesystem and
 * never runs a plugin.
 *
 * Invariants: all strings live in cfg->arena; secrets (token, password, key
 * and certificate bytes) are wiped by pd_kube_config_free; file buffers are
 * wiped after parsing; every error names the file, the entry and the field.
 * YAML aliases are followed, but every node visit costs from a budget, so an
 * alias-heavy document cannot make the walk quadratic.
 */
#include "kube_int.h"
#include "../util/ynode.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../util/pdyaml.h"

#define SA_DIR       "/var/run/secrets/kubernetes.io/serviceaccount"
#define YAML_BUDGET  2000000 /* node visits per file */
#define NAME_QUOTE   64      /* longest name quoted in a message */

/* ---- small helpers ---------------------------------------------------------- */

void kube_wipe(void *p, size_t n)
{
	if (p && n)
		explicit_bzero(p, n);
}

void kube_buf_wipe(struct pd_buf *b)
{
	if (b->ptr)
		kube_wipe(b->ptr, b->len);
	pd_buf_free(b);
}

int kube_read_secret(const char *path, struct pd_buf *b, struct pd_err *err)
{
	b->max = PD_KUBE_MAX_CRED_BYTES;
	if (strcmp(path, "-") == 0) /* pd_buf_read_file would read stdin */
		return pd_errf(err, PD_EINVAL, "-: reading stdin is not supported");
	return pd_buf_read_file(b, path, err);
}

bool kube_is_pem(const uint8_t *p, size_t n)
{
	static const char tag[] = "-----BEGIN ";
	size_t tl = sizeof tag - 1;
	for (size_t i = 0; i + tl <= n; i++)
		if (p[i] == '-' && memcmp(p + i, tag, tl) == 0)
			return true;
	return false;
}

bool kube_token_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return n > 0;
}

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int kube_b64_decode(const char *s, size_t len, uint8_t **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	uint8_t *o = malloc(len / 4 * 3 + 4);
	if (!o)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	size_t on = 0, sextets = 0;
	uint32_t acc = 0;
	bool pad = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad = true;
			continue;
		}
		int v = b64val(c);
		if (v < 0 || pad) {
			kube_wipe(o, len / 4 * 3 + 4);
			free(o);
			return pd_errf(err, PD_EINVAL, "invalid base64 at byte %zu", i);
		}
		acc = acc << 6 | (uint32_t)v;
		if (++sextets % 4 == 0) {
			o[on++] = (uint8_t)(acc >> 16);
			o[on++] = (uint8_t)(acc >> 8);
			o[on++] = (uint8_t)acc;
			acc = 0;
		}
	}
	switch (sextets % 4) {
	case 1:
		kube_wipe(o, len / 4 * 3 + 4);
		free(o);
		return pd_errf(err, PD_EINVAL, "invalid base64: truncated (%zu characters)", sextets);
	case 2:
		o[on++] = (uint8_t)(acc >> 4);
		break;
	case 3:
		o[on++] = (uint8_t)(acc >> 10);
		o[on++] = (uint8_t)(acc >> 2);
		break;
	}
	o[on] = 0;
	*out = o;
	*n = on;
	return 0;
}

char *kube_b64_encode(const uint8_t *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o = malloc((n + 2) / 3 * 4 + 1), *w = o;
	if (!o)
		return NULL;
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*w++ = tab[v >> 18];
		*w++ = tab[(v >> 12) & 63];
		*w++ = tab[(v >> 6) & 63];
		*w++ = tab[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		*w++ = tab[v >> 18];
		*w++ = tab[(v >> 12) & 63];
		*w++ = '=';
		*w++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		*w++ = tab[v >> 18];
		*w++ = tab[(v >> 12) & 63];
		*w++ = tab[(v >> 6) & 63];
		*w++ = '=';
	}
	*w = 0;
	return o;
}

static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

double kube_parse_rfc3339(const char *s)
{
	if (!s || strlen(s) < 20)
		return -1;
	int Y = digits(s, 4), M = digits(s + 5, 2), D = digits(s + 8, 2);
	int h = digits(s + 11, 2), m = digits(s + 14, 2), sec = digits(s + 17, 2);
	if (Y < 0 || M < 1 || M > 12 || D < 1 || D > 31 || h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 ||
	    sec > 60 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    s[13] != ':' || s[16] != ':')
		return -1;
	const char *p = s + 19;
	double frac = 0;
	if (*p == '.') {
		double scale = 0.1;
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9') {
			frac += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh = digits(p + 1, 2), om = p[3] == ':' ? digits(p + 4, 2) : -1;
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -1;
		off = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	struct tm tm = {0};
	tm.tm_year = Y - 1900;
	tm.tm_mon = M - 1;
	tm.tm_mday = D;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	return (double)t - (double)off + frac;
}

static char *adup(struct pd_arena *a, const char *s, size_t n)
{
	char *d = pd_arena_alloc(a, n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

static char *astr(struct pd_arena *a, const char *s) { return s ? adup(a, s, strlen(s)) : NULL; }

static char *afmt(struct pd_arena *a, const char *fmt, ...) PD_PRINTF(2, 3);
static char *afmt(struct pd_arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *d = pd_arena_alloc(a, (size_t)n + 1);
	if (!d)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return d;
}

/* ---- the model of one kubeconfig file ------------------------------------------ */

struct kc_cluster {
	const char *name; /* first member: see find_named */
	const char *server, *ca_file, *ca_data, *tls_server_name, *proxy_url;
	bool insecure;
};

struct kc_exec {
	const char *command, *api_version, *install_hint, *interactive;
	bool provide_cluster_info;
	const char **args, **env;
	size_t nargs, nenv;
};

struct kc_user {
	const char *name;
	const char *token, *token_file, *cert_file, *cert_data, *key_file, *key_data;
	const char *username, *password, *as;
	const char **as_groups;
	size_t nas_groups;
	const char *auth_provider; /* its name; "" when unnamed */
	struct kc_exec *exec;
};

struct kc_context {
	const char *name;
	const char *cluster, *user, *namespace;
};

struct kc_file {
	const char *path, *dir; /* dir NULL: relative paths stay relative */
	const char *current_context;
	struct kc_cluster *clusters;
	struct kc_user *users;
	struct kc_context *contexts;
	size_t nclusters, nusers, ncontexts;
};

/* ---- YAML walking --------------------------------------------------------------- */

struct yw {
	yaml_document_t *doc;
	struct pd_arena *a;
	const char *path;
	size_t budget;
	struct pd_err *err;
};

static int yerr(struct yw *w, int code, const char *fmt, ...) PD_PRINTF(3, 4);
static int yerr(struct yw *w, int code, const char *fmt, ...)
{
	char m[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	return pd_errf(w->err, code, "kubeconfig %s: %s", w->path, m);
}

static yaml_node_t *ynode(struct yw *w, int i)
{
	if (w->budget == 0)
		return NULL;
	w->budget--;
	return yaml_document_get_node(w->doc, i);
}

static int ybudget(struct yw *w)
{
	return yerr(w, PD_ELIMIT, "document too complex (over %d node visits; aliases?)", YAML_BUDGET);
}

/* ctx: "cluster \"prod\": " style prefix for messages. */
static int ystr(struct yw *w, yaml_node_t *v, const char *ctx, const char *field, const char **out)
{
	*out = NULL;
	if (pd_ynull(v))
		return 0;
	if (v->type != YAML_SCALAR_NODE)
		return yerr(w, PD_EINVAL, "%s%s: expected a string, got %s", ctx, field, pd_ytype(v));
	const char *s = (const char *)v->data.scalar.value;
	size_t n = v->data.scalar.length;
	if (memchr(s, 0, n))
		return yerr(w, PD_EINVAL, "%s%s: contains a NUL byte", ctx, field);
	if (!(*out = adup(w->a, s, n)))
		return yerr(w, PD_ENOMEM, "out of memory");
	return 0;
}

static int ybool(struct yw *w, yaml_node_t *v, const char *ctx, const char *field, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"};
	*out = false;
	if (pd_ynull(v))
		return 0;
	if (v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
			if (pd_yis(v, yes[i])) {
				*out = true;
				return 0;
			}
			if (pd_yis(v, no[i]))
				return 0;
		}
	}
	if (v->type == YAML_SCALAR_NODE)
		return yerr(w, PD_EINVAL, "%s%s: expected true or false, got \"%.*s\"", ctx, field,
			    (int)(v->data.scalar.length > 32 ? 32 : v->data.scalar.length),
			    (const char *)v->data.scalar.value);
	return yerr(w, PD_EINVAL, "%s%s: expected true or false, got %s", ctx, field, pd_ytype(v));
}

/* A list of strings (null = empty). */
static int ystrlist(struct yw *w, yaml_node_t *v, const char *ctx, const char *field, const char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (pd_ynull(v))
		return 0;
	if (v->type != YAML_SEQUENCE_NODE)
		return yerr(w, PD_EINVAL, "%s%s: expected a list, got %s", ctx, field, pd_ytype(v));
	size_t cnt = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	const char **arr = pd_arena_calloc(w->a, cnt ? cnt : 1, sizeof *arr);
	if (!arr)
		return yerr(w, PD_ENOMEM, "out of memory");
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *it = ynode(w, v->data.sequence.items.start[i]);
		if (!it && w->budget == 0)
			return ybudget(w);
		char f[64];
		snprintf(f, sizeof f, "%s[%zu]", field, i);
		int rc = ystr(w, it, ctx, f, &arr[*n]);
		if (rc)
			return rc;
		if (!arr[*n])
			arr[*n] = "";
		(*n)++;
	}
	*out = arr;
	return 0;
}

enum { F_STR, F_BOOL };
struct field {
	const char *key;
	int type;
	size_t off;
};

/* Fill the fields of obj from mapping m (unknown keys ignored). */
static int yfields(struct yw *w, yaml_node_t *m, const char *ctx, const struct field *fs, size_t nf, void *obj)
{
	for (yaml_node_pair_t *pp = m->data.mapping.pairs.start; pp < m->data.mapping.pairs.top; pp++) {
		yaml_node_t *k = ynode(w, pp->key), *v = ynode(w, pp->value);
		if (w->budget == 0)
			return ybudget(w);
		for (size_t i = 0; i < nf; i++) {
			if (!pd_yis(k, fs[i].key))
				continue;
			int rc = fs[i].type == F_STR
					 ? ystr(w, v, ctx, fs[i].key, (const char **)(void *)((char *)obj + fs[i].off))
					 : ybool(w, v, ctx, fs[i].key, (bool *)(void *)((char *)obj + fs[i].off));
			if (rc)
				return rc;
			break;
		}
	}
	return 0;
}

static yaml_node_t *yget(struct yw *w, yaml_node_t *m, const char *key)
{
	yaml_node_t *hit = NULL;
	for (yaml_node_pair_t *pp = m->data.mapping.pairs.start; pp < m->data.mapping.pairs.top; pp++) {
		yaml_node_t *k = ynode(w, pp->key);
		if (pd_yis(k, key))
			hit = ynode(w, pp->value); /* the last one wins, as in Go's decoder */
	}
	return hit;
}

static const struct field cluster_fields[] = {
	{"server", F_STR, offsetof(struct kc_cluster, server)},
	{"certificate-authority", F_STR, offsetof(struct kc_cluster, ca_file)},
	{"certificate-authority-data", F_STR, offsetof(struct kc_cluster, ca_data)},
	{"insecure-skip-tls-verify", F_BOOL, offsetof(struct kc_cluster, insecure)},
	{"tls-server-name", F_STR, offsetof(struct kc_cluster, tls_server_name)},
	{"proxy-url", F_STR, offsetof(struct kc_cluster, proxy_url)},
};

static const struct field user_fields[] = {
	{"token", F_STR, offsetof(struct kc_user, token)},
	{"tokenFile", F_STR, offsetof(struct kc_user, token_file)},
	{"client-certificate", F_STR, offsetof(struct kc_user, cert_file)},
	{"client-certificate-data", F_STR, offsetof(struct kc_user, cert_data)},
	{"client-key", F_STR, offsetof(struct kc_user, key_file)},
	{"client-key-data", F_STR, offsetof(struct kc_user, key_data)},
	{"username", F_STR, offsetof(struct kc_user, username)},
	{"password", F_STR, offsetof(struct kc_user, password)},
	{"as", F_STR, offsetof(struct kc_user, as)},
};

static const struct field exec_fields[] = {
	{"command", F_STR, offsetof(struct kc_exec, command)},
	{"apiVersion", F_STR, offsetof(struct kc_exec, api_version)},
	{"installHint", F_STR, offsetof(struct kc_exec, install_hint)},
	{"interactiveMode", F_STR, offsetof(struct kc_exec, interactive)},
	{"provideClusterInfo", F_BOOL, offsetof(struct kc_exec, provide_cluster_info)},
};

static const struct field context_fields[] = {
	{"cluster", F_STR, offsetof(struct kc_context, cluster)},
	{"user", F_STR, offsetof(struct kc_context, user)},
	{"namespace", F_STR, offsetof(struct kc_context, namespace)},
};

static int parse_exec(struct yw *w, yaml_node_t *m, const char *ctx, struct kc_exec **out)
{
	*out = NULL;
	if (pd_ynull(m))
		return 0;
	if (m->type != YAML_MAPPING_NODE)
		return yerr(w, PD_EINVAL, "%sexec: expected a mapping, got %s", ctx, pd_ytype(m));
	struct kc_exec *e = pd_arena_calloc(w->a, 1, sizeof *e);
	if (!e)
		return yerr(w, PD_ENOMEM, "out of memory");
	char c2[200];
	snprintf(c2, sizeof c2, "%sexec.", ctx);
	int rc = yfields(w, m, c2, exec_fields, sizeof exec_fields / sizeof *exec_fields, e);
	if (rc)
		return rc;
	if ((rc = ystrlist(w, yget(w, m, "args"), c2, "args", &e->args, &e->nargs)))
		return rc;
	yaml_node_t *env = yget(w, m, "env");
	if (!pd_ynull(env)) {
		if (env->type != YAML_SEQUENCE_NODE)
			return yerr(w, PD_EINVAL, "%senv: expected a list, got %s", c2, pd_ytype(env));
		size_t cnt = (size_t)(env->data.sequence.items.top - env->data.sequence.items.start);
		if (!(e->env = pd_arena_calloc(w->a, cnt ? cnt : 1, sizeof *e->env)))
			return yerr(w, PD_ENOMEM, "out of memory");
		for (size_t i = 0; i < cnt; i++) {
			yaml_node_t *it = ynode(w, env->data.sequence.items.start[i]);
			if (w->budget == 0)
				return ybudget(w);
			if (pd_ynull(it))
				continue;
			if (it->type != YAML_MAPPING_NODE)
				return yerr(w, PD_EINVAL, "%senv[%zu]: expected a mapping, got %s", c2, i, pd_ytype(it));
			const char *name = NULL, *value = NULL;
			char f[32];
			snprintf(f, sizeof f, "env[%zu].", i);
			if ((rc = ystr(w, yget(w, it, "name"), c2, "env name", &name)) ||
			    (rc = ystr(w, yget(w, it, "value"), c2, "env value", &value)))
				return rc;
			if (!name || !*name || strchr(name, '='))
				return yerr(w, PD_EINVAL, "%s%sname: must be a non-empty name without '='", c2, f);
			if (!(e->env[e->nenv++] = afmt(w->a, "%s=%s", name, value ? value : "")))
				return yerr(w, PD_ENOMEM, "out of memory");
		}
	}
	*out = e;
	return 0;
}

/* Which list: clusters (0), users (1), contexts (2). */
static const char *const list_key[3] = {"clusters", "users", "contexts"};
static const char *const item_key[3] = {"cluster", "user", "context"};

static int parse_list(struct yw *w, yaml_node_t *seq, int which, struct kc_file *f)
{
	if (pd_ynull(seq))
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return yerr(w, PD_EINVAL, "%s: expected a list, got %s", list_key[which], pd_ytype(seq));
	size_t cnt = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	size_t sz = which == 0 ? sizeof(struct kc_cluster) : which == 1 ? sizeof(struct kc_user) : sizeof(struct kc_context);
	char *arr = pd_arena_calloc(w->a, cnt ? cnt : 1, sz);
	if (!arr)
		return yerr(w, PD_ENOMEM, "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *it = ynode(w, seq->data.sequence.items.start[i]);
		if (w->budget == 0)
			return ybudget(w);
		if (pd_ynull(it))
			continue;
		if (it->type != YAML_MAPPING_NODE)
			return yerr(w, PD_EINVAL, "%s[%zu]: expected a mapping, got %s", list_key[which], i, pd_ytype(it));
		char c0[64];
		snprintf(c0, sizeof c0, "%s[%zu].", list_key[which], i);
		const char *name = NULL;
		int rc = ystr(w, yget(w, it, "name"), c0, "name", &name);
		if (rc)
			return rc;
		if (!name || !*name)
			continue; /* kubectl cannot select it either */
		char ctx[NAME_QUOTE + 32];
		snprintf(ctx, sizeof ctx, "%s \"%.*s\": ", item_key[which], NAME_QUOTE, name);
		yaml_node_t *body = yget(w, it, item_key[which]);
		if (w->budget == 0)
			return ybudget(w);
		if (!pd_ynull(body) && body->type != YAML_MAPPING_NODE)
			return yerr(w, PD_EINVAL, "%s%s: expected a mapping, got %s", ctx, item_key[which], pd_ytype(body));
		void *obj = arr + n * sz;
		*(const char **)obj = name;
		if (!pd_ynull(body)) {
			if (which == 0) {
				rc = yfields(w, body, ctx, cluster_fields, sizeof cluster_fields / sizeof *cluster_fields, obj);
			} else if (which == 1) {
				struct kc_user *u = obj;
				rc = yfields(w, body, ctx, user_fields, sizeof user_fields / sizeof *user_fields, obj);
				if (!rc)
					rc = ystrlist(w, yget(w, body, "as-groups"), ctx, "as-groups", &u->as_groups,
						      &u->nas_groups);
				if (!rc)
					rc = parse_exec(w, yget(w, body, "exec"), ctx, &u->exec);
				yaml_node_t *ap = rc ? NULL : yget(w, body, "auth-provider");
				if (!pd_ynull(ap)) {
					if (ap->type != YAML_MAPPING_NODE)
						return yerr(w, PD_EINVAL, "%sauth-provider: expected a mapping, got %s", ctx,
							    pd_ytype(ap));
					rc = ystr(w, yget(w, ap, "name"), ctx, "auth-provider.name", &u->auth_provider);
					if (!rc && !u->auth_provider)
						u->auth_provider = "";
				}
			} else {
				rc = yfields(w, body, ctx, context_fields, sizeof context_fields / sizeof *context_fields,
					     obj);
			}
			if (rc)
				return rc;
			if (w->budget == 0)
				return ybudget(w);
		}
		n++;
	}
	if (which == 0) {
		f->clusters = (struct kc_cluster *)(void *)arr;
		f->nclusters = n;
	} else if (which == 1) {
		f->users = (struct kc_user *)(void *)arr;
		f->nusers = n;
	} else {
		f->contexts = (struct kc_context *)(void *)arr;
		f->ncontexts = n;
	}
	return 0;
}

static char *dir_of(struct pd_arena *a, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return NULL;
	if (slash == path)
		return astr(a, "/");
	return adup(a, path, (size_t)(slash - path));
}

/* Parse one kubeconfig document into f (in a). */
static int kc_parse(struct pd_arena *a, const char *path, const void *data, size_t len, struct kc_file *f,
		    struct pd_err *err)
{
	memset(f, 0, sizeof *f);
	if (!path)
		path = "(memory)";
	if (!(f->path = astr(a, path)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	f->dir = strchr(path, '/') ? dir_of(a, path) : NULL;
	if (len > PD_KUBE_MAX_CONFIG_BYTES)
		return pd_errf(err, PD_ELIMIT, "kubeconfig %s: %zu bytes, over the %u-byte limit", path, len,
			       PD_KUBE_MAX_CONFIG_BYTES);
	yaml_parser_t ps;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&ps))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&ps, data, len);
	if (!yaml_parser_load(&ps, &doc)) {
		int rc = pd_errf(err, ps.error == YAML_MEMORY_ERROR ? PD_ENOMEM : PD_EINVAL,
				 "kubeconfig %s: line %zu column %zu: %s%s%s", path, ps.problem_mark.line + 1,
				 ps.problem_mark.column + 1, ps.problem ? ps.problem : "invalid YAML",
				 ps.context ? " " : "", ps.context ? ps.context : "");
		yaml_parser_delete(&ps);
		return rc;
	}
	struct yw w = {&doc, a, path, YAML_BUDGET, err};
	int rc = 0;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (pd_ynull(root))
		goto out; /* an empty file is an empty config */
	if (root->type != YAML_MAPPING_NODE) {
		rc = yerr(&w, PD_EINVAL, "expected a mapping at the top level, got %s", pd_ytype(root));
		goto out;
	}
	if ((rc = ystr(&w, yget(&w, root, "current-context"), "", "current-context", &f->current_context)))
		goto out;
	if (f->current_context && !*f->current_context)
		f->current_context = NULL;
	for (int i = 0; i < 3 && !rc; i++)
		rc = parse_list(&w, yget(&w, root, list_key[i]), i, f);
	if (!rc && w.budget == 0)
		rc = ybudget(&w);
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&ps);
	return rc;
}

/* ---- resolving the context ------------------------------------------------------- */

/* The last entry named `name` in arr (entries start with their name). */
static const void *find_named(const void *arr, size_t n, size_t stride, const char *name)
{
	const void *hit = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *nm = *(const char *const *)(const void *)((const char *)arr + i * stride);
		if (nm && strcmp(nm, name) == 0)
			hit = (const char *)arr + i * stride;
	}
	return hit;
}

/* First file that defines `name` in list `which`; its index in *fi. */
static const void *lookup(const struct kc_file *fs, size_t nf, int which, const char *name, size_t *fi)
{
	for (size_t i = 0; i < nf; i++) {
		const void *hit = which == 0   ? find_named(fs[i].clusters, fs[i].nclusters, sizeof(struct kc_cluster), name)
				  : which == 1 ? find_named(fs[i].users, fs[i].nusers, sizeof(struct kc_user), name)
					       : find_named(fs[i].contexts, fs[i].ncontexts, sizeof(struct kc_context), name);
		if (hit) {
			*fi = i;
			return hit;
		}
	}
	return NULL;
}

/* "a, b, c" — the distinct names of list `which` across files, for messages. */
static void names(const struct kc_file *fs, size_t nf, int which, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < nf; i++) {
		size_t n = which == 0 ? fs[i].nclusters : which == 1 ? fs[i].nusers : fs[i].ncontexts;
		for (size_t j = 0; j < n; j++) {
			const char *nm = which == 0   ? fs[i].clusters[j].name
					 : which == 1 ? fs[i].users[j].name
						      : fs[i].contexts[j].name;
			size_t fi;
			const void *first = lookup(fs, i + 1, which, nm, &fi);
			const void *self = which == 0   ? (const void *)&fs[i].clusters[j]
					   : which == 1 ? (const void *)&fs[i].users[j]
							: (const void *)&fs[i].contexts[j];
			/* list each name once: where it is first defined (its last entry there) */
			if (fi != i || first != self)
				continue;
			int w = snprintf(buf + len, cap - len, "%s%.*s", len ? ", " : "", NAME_QUOTE, nm);
			if (w < 0 || (size_t)w >= cap - len - 5) {
				snprintf(buf + len, cap - len, ", ...");
				return;
			}
			len += (size_t)w;
		}
	}
	if (!len)
		snprintf(buf, cap, "none");
}

static const char *rpath(struct pd_arena *a, const struct kc_file *f, const char *p)
{
	if (!p || !*p)
		return NULL;
	if (p[0] == '/' || !f->dir)
		return p;
	return afmt(a, "%s/%s", f->dir, p);
}

/* Decode a *-data field into blob b; ctx names it for messages. */
static int data_blob(struct pd_kube_config *cfg, const char *file, const char *ctx, const char *field,
		     const char *b64, struct pd_kube_blob *b, struct pd_err *err)
{
	uint8_t *raw;
	size_t n;
	int rc = kube_b64_decode(b64, strlen(b64), &raw, &n, err);
	if (rc) {
		pd_err_prefix(err, "kubeconfig %s: %s%s", file, ctx, field);
		return rc;
	}
	if (!kube_is_pem(raw, n)) {
		kube_wipe(raw, n);
		free(raw);
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %s%s: not PEM data (no \"-----BEGIN\" line after base64 decoding)",
			       file, ctx, field);
	}
	b->ptr = pd_arena_dup(cfg->arena, raw, n + 1);
	b->len = n;
	kube_wipe(raw, n);
	free(raw);
	return b->ptr ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
}

/* Read file path into blob b (PEM expected). */
static int file_blob(struct pd_kube_config *cfg, const char *origin, const char *ctx, const char *field,
		     const char *path, struct pd_kube_blob *b, struct pd_err *err)
{
	struct pd_buf buf = PD_BUF_INIT(0);
	int rc = kube_read_secret(path, &buf, err);
	if (rc) {
		pd_err_prefix(err, "%s: %s%s", origin, ctx, field);
		kube_buf_wipe(&buf);
		return rc;
	}
	if (!kube_is_pem(buf.ptr, buf.len)) {
		kube_buf_wipe(&buf);
		return pd_errf(err, PD_EINVAL, "%s: %s%s %s: not a PEM file (no \"-----BEGIN\" line)", origin, ctx, field,
			       path);
	}
	b->ptr = pd_arena_alloc(cfg->arena, buf.len + 1);
	if (b->ptr) {
		memcpy((void *)b->ptr, buf.ptr, buf.len);
		((uint8_t *)b->ptr)[buf.len] = 0;
		b->len = buf.len;
	}
	kube_buf_wipe(&buf);
	return b->ptr ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
}

static struct pd_kube_config *cfg_new(void)
{
	struct pd_arena *a = pd_arena_new(16384);
	if (!a)
		return NULL;
	struct pd_kube_config *cfg = pd_arena_calloc(a, 1, sizeof *cfg);
	if (!cfg) {
		pd_arena_free(a);
		return NULL;
	}
	cfg->arena = a;
	return cfg;
}

void pd_kube_config_free(struct pd_kube_config *cfg)
{
	if (!cfg)
		return;
	kube_wipe((void *)cfg->cert.ptr, cfg->cert.len);
	kube_wipe((void *)cfg->key.ptr, cfg->key.len);
	if (cfg->token)
		kube_wipe((void *)cfg->token, strlen(cfg->token));
	if (cfg->password)
		kube_wipe((void *)cfg->password, strlen(cfg->password));
	pd_arena_free(cfg->arena);
}

/* Normalise a server URL: scheme required (https:// added when missing, as
 * client-go does), no trailing '/'. */
static int norm_server(struct pd_kube_config *cfg, const char *file, const char *ctx, const char *s,
		       struct pd_err *err)
{
	if (!s || !*s)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sserver is not set", file, ctx);
	const char *sep = strstr(s, "://");
	if (sep && !(sep - s == 5 && strncmp(s, "https", 5) == 0) && !(sep - s == 4 && strncmp(s, "http", 4) == 0))
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sserver \"%.200s\": the scheme must be https or http",
			       file, ctx, s);
	size_t n = strlen(s);
	while (n && s[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
			return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sserver \"%.200s\": contains spaces or control characters",
				       file, ctx, s);
	cfg->server = sep ? adup(cfg->arena, s, n) : afmt(cfg->arena, "https://%.*s", (int)n, s);
	if (sep && n <= (size_t)(sep - s) + 3)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sserver \"%.200s\": no host", file, ctx, s);
	return cfg->server ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
}

static int check_header_value(const char *file, const char *ctx, const char *field, const char *v, bool token,
			      struct pd_err *err)
{
	if (!v)
		return 0;
	size_t n = strlen(v);
	bool ok = token ? kube_token_ok(v, n) : true;
	for (size_t i = 0; ok && i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			ok = false;
	if (!ok)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %s%s: contains spaces or control characters", file, ctx,
			       field);
	return 0;
}

static int resolve_exec(struct pd_kube_config *cfg, const struct kc_file *f, const char *ctx, const char *uname,
			const struct kc_exec *e, struct pd_err *err)
{
	if (!e->command || !*e->command)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sexec: command must be specified", f->path, ctx);
	if (!e->api_version || !*e->api_version)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sexec: apiVersion must be specified for %s to use exec authentication plugin",
			       f->path, ctx, uname);
	bool v1 = strcmp(e->api_version, "client.authentication.k8s.io/v1") == 0;
	if (!v1 && strcmp(e->api_version, "client.authentication.k8s.io/v1beta1") != 0)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sexec: apiVersion \"%.100s\" is not supported (use client.authentication.k8s.io/v1 or v1beta1)",
			       f->path, ctx, e->api_version);
	struct pd_kube_exec *x = pd_arena_calloc(cfg->arena, 1, sizeof *x);
	if (!x)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (!e->interactive || !*e->interactive) {
		if (v1)
			return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sexec: interactiveMode must be specified for %s to use exec authentication plugin",
				       f->path, ctx, uname);
		x->interactive = PD_KUBE_EXEC_IF_AVAILABLE;
	} else if (strcmp(e->interactive, "Never") == 0) {
		x->interactive = PD_KUBE_EXEC_NEVER;
	} else if (strcmp(e->interactive, "IfAvailable") == 0) {
		x->interactive = PD_KUBE_EXEC_IF_AVAILABLE;
	} else if (strcmp(e->interactive, "Always") == 0) {
		x->interactive = PD_KUBE_EXEC_ALWAYS;
	} else {
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sexec: interactiveMode \"%.64s\" is invalid (Never, IfAvailable or Always)",
			       f->path, ctx, e->interactive);
	}
	/* A command with a '/' is a path, relative to the kubeconfig (as kubectl). */
	x->command = strchr(e->command, '/') ? rpath(cfg->arena, f, e->command) : e->command;
	x->args = e->args;
	x->nargs = e->nargs;
	x->env = e->env;
	x->nenv = e->nenv;
	x->api_version = e->api_version;
	x->install_hint = e->install_hint;
	x->provide_cluster_info = e->provide_cluster_info;
	cfg->exec = x;
	return x->command ? 0 : pd_errf(err, PD_ENOMEM, "out of memory");
}

/* Pick the context and fill cfg from the files (first file wins per name).
 * io: read the CA, certificate and key files now. */
static int kc_resolve(struct pd_kube_config *cfg, const struct kc_file *fs, size_t nf, const char *want, bool io,
		      struct pd_err *err)
{
	struct pd_arena *a = cfg->arena;
	char list[320];
	/* origin: "kubeconfig a:b" */
	size_t olen = 16;
	for (size_t i = 0; i < nf; i++)
		olen += strlen(fs[i].path) + 1;
	char *origin = pd_arena_alloc(a, olen);
	if (!origin)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	strcpy(origin, "kubeconfig ");
	for (size_t i = 0; i < nf; i++) {
		if (i)
			strcat(origin, ":");
		strcat(origin, fs[i].path);
	}
	cfg->origin = origin;
	cfg->source = PD_KUBE_SRC_KUBECONFIG;

	const char *ctxname = want && *want ? want : NULL;
	for (size_t i = 0; !ctxname && i < nf; i++)
		ctxname = fs[i].current_context;
	if (!ctxname) {
		names(fs, nf, 2, list, sizeof list);
		return pd_errf(err, PD_EINVAL, "%s: current-context is not set and no context was given (contexts: %s)",
			       origin, list);
	}
	size_t fi = 0;
	const struct kc_context *ctx = lookup(fs, nf, 2, ctxname, &fi);
	if (!ctx) {
		names(fs, nf, 2, list, sizeof list);
		return pd_errf(err, PD_ENOTFOUND, "%s: context \"%.*s\" not found (contexts: %s)", origin, NAME_QUOTE,
			       ctxname, list);
	}
	cfg->context = ctx->name;
	cfg->namespace = ctx->namespace && *ctx->namespace ? ctx->namespace : "default";
	char cq[NAME_QUOTE + 32];
	snprintf(cq, sizeof cq, "context \"%.*s\": ", NAME_QUOTE, ctx->name);
	if (!ctx->cluster || !*ctx->cluster)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %scluster is not set", fs[fi].path, cq);
	size_t cfi = 0;
	const struct kc_cluster *cl = lookup(fs, nf, 0, ctx->cluster, &cfi);
	if (!cl) {
		names(fs, nf, 0, list, sizeof list);
		return pd_errf(err, PD_ENOTFOUND, "%s: %scluster \"%.*s\" not found (clusters: %s)", origin, cq,
			       NAME_QUOTE, ctx->cluster, list);
	}
	const struct kc_user *u = NULL;
	size_t ufi = 0;
	if (ctx->user && *ctx->user) {
		u = lookup(fs, nf, 1, ctx->user, &ufi);
		if (!u) {
			names(fs, nf, 1, list, sizeof list);
			return pd_errf(err, PD_ENOTFOUND, "%s: %suser \"%.*s\" not found (users: %s)", origin, cq,
				       NAME_QUOTE, ctx->user, list);
		}
	}

	/* cluster */
	const struct kc_file *cf = &fs[cfi];
	snprintf(cq, sizeof cq, "cluster \"%.*s\": ", NAME_QUOTE, cl->name);
	cfg->cluster = cl->name;
	int rc = norm_server(cfg, cf->path, cq, cl->server, err);
	if (rc)
		return rc;
	cfg->insecure = cl->insecure;
	cfg->tls_server_name = cl->tls_server_name && *cl->tls_server_name ? cl->tls_server_name : NULL;
	cfg->proxy_url = cl->proxy_url && *cl->proxy_url ? cl->proxy_url : NULL;
	if ((rc = check_header_value(cf->path, cq, "tls-server-name", cfg->tls_server_name, true, err)) ||
	    (rc = check_header_value(cf->path, cq, "proxy-url", cfg->proxy_url, true, err)))
		return rc;
	bool has_ca = (cl->ca_data && *cl->ca_data) || (cl->ca_file && *cl->ca_file);
	if (cl->insecure && has_ca)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sspecifying a root certificates file with the insecure flag is not allowed (certificate-authority and insecure-skip-tls-verify)",
			       cf->path, cq);
	if (cl->ca_data && *cl->ca_data) {
		/* data wins over a file, as in client-go */
		if ((rc = data_blob(cfg, cf->path, cq, "certificate-authority-data", cl->ca_data, &cfg->ca, err)))
			return rc;
	} else if (cl->ca_file && *cl->ca_file) {
		if (!(cfg->ca_file = rpath(a, cf, cl->ca_file)))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		char o2[PATH_MAX + 16];
		snprintf(o2, sizeof o2, "kubeconfig %s", cf->path);
		if (io && (rc = file_blob(cfg, o2, cq, "certificate-authority", cfg->ca_file, &cfg->ca, err)))
			return rc;
	}

	if (!u)
		return 0;
	/* user */
	const struct kc_file *uf = &fs[ufi];
	char uq[NAME_QUOTE + 32];
	snprintf(uq, sizeof uq, "user \"%.*s\": ", NAME_QUOTE, u->name);
	char o2[PATH_MAX + 16];
	snprintf(o2, sizeof o2, "kubeconfig %s", uf->path);
	cfg->user = u->name;
	bool has_token = (u->token && *u->token) || (u->token_file && *u->token_file);
	bool has_basic = (u->username && *u->username) || (u->password && *u->password);
	if (has_token && has_basic)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %smore than one authentication method found (token and username/password); only one is allowed",
			       uf->path, uq);
	if (u->auth_provider && !u->exec)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sauth-provider \"%.64s\" is not supported: use the provider's exec credential plugin (e.g. gke-gcloud-auth-plugin, kubelogin)",
			       uf->path, uq, u->auth_provider);
	if (u->auth_provider && u->exec)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %sauth-provider cannot be provided in combination with an exec plugin",
			       uf->path, uq);
	cfg->token = u->token && *u->token ? u->token : NULL;
	if ((rc = check_header_value(uf->path, uq, "token", cfg->token, true, err)))
		return rc;
	if (u->token_file && *u->token_file && !(cfg->token_file = rpath(a, uf, u->token_file)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	cfg->username = u->username && *u->username ? u->username : NULL;
	cfg->password = u->password ? u->password : NULL;
	if (cfg->username && !cfg->password)
		cfg->password = "";
	cfg->impersonate_user = u->as && *u->as ? u->as : NULL;
	cfg->impersonate_groups = u->as_groups;
	cfg->nimpersonate_groups = u->nas_groups;
	if ((rc = check_header_value(uf->path, uq, "as", cfg->impersonate_user, false, err)))
		return rc;
	for (size_t i = 0; i < u->nas_groups; i++)
		if ((rc = check_header_value(uf->path, uq, "as-groups", u->as_groups[i], false, err)))
			return rc;
	/* client certificate: data wins over a file */
	bool cert = (u->cert_data && *u->cert_data) || (u->cert_file && *u->cert_file);
	bool key = (u->key_data && *u->key_data) || (u->key_file && *u->key_file);
	if (cert != key)
		return pd_errf(err, PD_EINVAL, "kubeconfig %s: %s%s is set but %s is not: both are needed for a client certificate",
			       uf->path, uq, cert ? "client-certificate" : "client-key", cert ? "client-key" : "client-certificate");
	if (u->cert_data && *u->cert_data) {
		if ((rc = data_blob(cfg, uf->path, uq, "client-certificate-data", u->cert_data, &cfg->cert, err)))
			return rc;
	} else if (cert) {
		if (!(cfg->cert_file = rpath(a, uf, u->cert_file)))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		if (io && (rc = file_blob(cfg, o2, uq, "client-certificate", cfg->cert_file, &cfg->cert, err)))
			return rc;
	}
	if (u->key_data && *u->key_data) {
		if ((rc = data_blob(cfg, uf->path, uq, "client-key-data", u->key_data, &cfg->key, err)))
			return rc;
	} else if (key) {
		if (!(cfg->key_file = rpath(a, uf, u->key_file)))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		if (io && (rc = file_blob(cfg, o2, uq, "client-key", cfg->key_file, &cfg->key, err)))
			return rc;
	}
	if (u->exec && (rc = resolve_exec(cfg, uf, uq, u->name, u->exec, err)))
		return rc;
	return 0;
}

int pd_kube_config_parse(const char *name, const void *yaml, size_t len, const char *context,
			 struct pd_kube_config **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_kube_config *cfg = cfg_new();
	if (!cfg)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	struct kc_file f;
	int rc = kc_parse(cfg->arena, name, yaml, len, &f, err);
	if (!rc)
		rc = kc_resolve(cfg, &f, 1, context, false, err);
	if (rc) {
		pd_kube_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

/* ---- in-cluster ---------------------------------------------------------------- */

static int in_cluster(const struct pd_kube_opts *o, struct pd_kube_config **out, struct pd_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host || !port || !*port)
		return pd_errf(err, PD_EINVAL, "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a pod?)");
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return pd_errf(err, PD_EINVAL, "in-cluster config: KUBERNETES_SERVICE_PORT \"%.32s\" is not a port number",
				       port);
	for (const char *p = host; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == '/' || *p == '@' || *p == '?' || *p == '#' || *p == 0x7f)
			return pd_errf(err, PD_EINVAL, "in-cluster config: KUBERNETES_SERVICE_HOST \"%.64s\" is not a host",
				       host);
	const char *dir = o->sa_dir && *o->sa_dir ? o->sa_dir : SA_DIR;
	struct pd_kube_config *cfg = cfg_new();
	if (!cfg)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	struct pd_arena *a = cfg->arena;
	struct pd_buf b = PD_BUF_INIT(0);
	int rc;
	cfg->source = PD_KUBE_SRC_IN_CLUSTER;
	cfg->origin = afmt(a, "in-cluster config (%s)", dir);
	/* an IPv6 address needs brackets in a URL */
	cfg->server = strchr(host, ':') && host[0] != '[' ? afmt(a, "https://[%s]:%s", host, port)
							  : afmt(a, "https://%s:%s", host, port);
	cfg->token_file = afmt(a, "%s/token", dir);
	const char *ca = afmt(a, "%s/ca.crt", dir), *nsf = afmt(a, "%s/namespace", dir);
	if (!cfg->origin || !cfg->server || !cfg->token_file || !ca || !nsf) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto fail;
	}
	/* the token must be readable now (client-go reads it here too) */
	if ((rc = kube_read_secret(cfg->token_file, &b, err))) {
		pd_err_prefix(err, "in-cluster config: service account token");
		goto fail;
	}
	size_t s, e;
	kube_trim(&b, &s, &e);
	if (!kube_token_ok((const char *)b.ptr + s, e - s)) {
		rc = pd_errf(err, PD_EINVAL, "in-cluster config: service account token %s: %s", cfg->token_file,
			     e == s ? "empty" : "contains spaces or control characters");
		goto fail;
	}
	if (!(cfg->token = adup(a, (const char *)b.ptr + s, e - s))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto fail;
	}
	kube_buf_wipe(&b);
	cfg->ca_file = ca;
	if ((rc = file_blob(cfg, "in-cluster config", "", "service account CA", ca, &cfg->ca, err)))
		goto fail;
	/* namespace: the file, else "default" */
	cfg->namespace = "default";
	if (access(nsf, F_OK) == 0) {
		b.max = 4096;
		if ((rc = pd_buf_read_file(&b, nsf, err))) {
			pd_err_prefix(err, "in-cluster config: namespace");
			goto fail;
		}
		size_t n = b.len;
		while (n && (b.ptr[n - 1] == '\n' || b.ptr[n - 1] == ' ' || b.ptr[n - 1] == '\r'))
			n--;
		if (n && !(cfg->namespace = adup(a, (const char *)b.ptr, n))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto fail;
		}
		pd_buf_free(&b);
	}
	*out = cfg;
	return 0;
fail:
	kube_buf_wipe(&b);
	pd_kube_config_free(cfg);
	return rc;
}

/* ---- loading -------------------------------------------------------------------- */

static bool in_cluster_env(void)
{
	const char *h = getenv("KUBERNETES_SERVICE_HOST");
	return h && *h;
}

int pd_kube_config_load(const struct pd_kube_opts *o, struct pd_kube_config **out, struct pd_err *err)
{
	static const struct pd_kube_opts defaults;
	if (!o)
		o = &defaults;
	*out = NULL;
	if (o->mode == PD_KUBE_IN_CLUSTER)
		return in_cluster(o, out, err);

	const char *paths[PD_KUBE_MAX_CONFIG_FILES];
	size_t np = 0;
	bool explicit = false;
	char *envcopy = NULL, home[PATH_MAX];
	const char *env = getenv("KUBECONFIG");
	if (o->kubeconfig && *o->kubeconfig) {
		paths[np++] = o->kubeconfig;
		explicit = true;
	} else if (env && *env) {
		if (!(envcopy = strdup(env)))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		char *save = NULL;
		for (char *p = strtok_r(envcopy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			bool dup = false;
			for (size_t i = 0; i < np; i++)
				dup |= strcmp(paths[i], p) == 0;
			if (dup)
				continue;
			if (np == PD_KUBE_MAX_CONFIG_FILES) {
				free(envcopy);
				return pd_errf(err, PD_ELIMIT, "$KUBECONFIG lists more than %d files", PD_KUBE_MAX_CONFIG_FILES);
			}
			paths[np++] = p;
		}
	} else {
		const char *h = getenv("HOME");
		if (!h || !*h) {
			struct passwd *pw = getpwuid(getuid());
			h = pw ? pw->pw_dir : NULL;
		}
		if (h && *h) {
			snprintf(home, sizeof home, "%s/.kube/config", h);
			paths[np++] = home;
		}
	}

	struct pd_kube_config *cfg = cfg_new();
	struct kc_file *fs = cfg ? pd_arena_calloc(cfg->arena, np ? np : 1, sizeof *fs) : NULL;
	if (!fs) {
		free(envcopy);
		pd_kube_config_free(cfg);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	size_t nf = 0, ncontexts = 0;
	int rc = 0;
	for (size_t i = 0; i < np; i++) {
		struct stat st;
		if (!explicit && stat(paths[i], &st) != 0 && errno == ENOENT)
			continue; /* kubectl skips missing files of $KUBECONFIG */
		struct pd_buf b = PD_BUF_INIT(PD_KUBE_MAX_CONFIG_BYTES);
		if (strcmp(paths[i], "-") == 0) {
			rc = pd_errf(err, PD_EINVAL, "kubeconfig -: reading stdin is not supported");
		} else if ((rc = pd_buf_read_file(&b, paths[i], err)) == 0) {
			rc = kc_parse(cfg->arena, paths[i], b.ptr ? (const char *)b.ptr : "", b.len, &fs[nf], err);
		} else {
			pd_err_prefix(err, "kubeconfig");
		}
		kube_buf_wipe(&b);
		if (rc)
			goto fail;
		ncontexts += fs[nf].ncontexts;
		nf++;
	}
	if ((nf == 0 || ncontexts == 0) && o->mode == PD_KUBE_AUTO && !(o->context && *o->context) &&
	    in_cluster_env()) {
		/* no kubeconfig (or an empty one) inside a pod: the service account, as client-go */
		free(envcopy);
		pd_kube_config_free(cfg);
		return in_cluster(o, out, err);
	}
	if (nf == 0) {
		const char *tail = o->mode == PD_KUBE_AUTO ? " and not running in a cluster (KUBERNETES_SERVICE_HOST is unset)" : "";
		if (env && *env)
			rc = pd_errf(err, PD_ENOTFOUND, "no kubeconfig: none of the files in $KUBECONFIG (%.300s) exists%s", env, tail);
		else if (np)
			rc = pd_errf(err, PD_ENOTFOUND, "no kubeconfig: %s does not exist%s; use --kubeconfig or set $KUBECONFIG",
				     paths[0], tail);
		else
			rc = pd_errf(err, PD_ENOTFOUND, "no kubeconfig: $HOME is unset%s; use --kubeconfig", tail);
		goto fail;
	}
	if ((rc = kc_resolve(cfg, fs, nf, o->context, true, err)))
		goto fail;
	free(envcopy);
	*out = cfg;
	return 0;
fail:
	free(envcopy);
	pd_kube_config_free(cfg);
	return rc;
}
