/*
 * pod.c — pods as discovery and capture see them: the JSON decoder (jansson
 * DOM -> struct pd_kube_pod in an arena), list pages, deep copies, the
 * owning-workload rule and the pod-proxy path.
 *
 * The decoder is strict about types (a field of the wrong type is an error
 * naming the field, as Go's decoder would fail) and lenient about absence
 * (every optional field may be missing or null). Unknown fields are ignored.
 * Every repeated field is capped (PD_KUBE_MAX_*); the caller caps the bytes.
 */
#include "kube_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_QUOTE 64 /* longest map key quoted in a message */

int kube_json_error(struct pd_err *err, const char *where, const json_error_t *je)
{
	return pd_errf(err, PD_EINVAL, "%s: line %d column %d (byte %d): %s", where, je->line, je->column,
		       je->position, je->text);
}

void kube_status_fields(json_t *o, long *code, const char **reason, const char **message)
{
	json_t *c = json_object_get(o, "code"), *r = json_object_get(o, "reason"), *m = json_object_get(o, "message");
	*code = json_is_integer(c) ? (long)json_integer_value(c) : 0;
	*reason = json_is_string(r) && json_string_length(r) ? json_string_value(r) : NULL;
	*message = json_is_string(m) && json_string_length(m) ? json_string_value(m) : NULL;
}

static const char *jtype(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER:
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

struct jc {
	struct pd_arena *a;
	const char *where;
	struct pd_err *err;
};

static int jfail(struct jc *c, int code, const char *path, const char *fmt, ...) PD_PRINTF(4, 5);
static int jfail(struct jc *c, int code, const char *path, const char *fmt, ...)
{
	char m[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	return pd_errf(c->err, code, "%s: %s: %s", c->where, path, m);
}

static int joom(struct jc *c) { return pd_errf(c->err, PD_ENOMEM, "%s: out of memory", c->where); }

static const char *jdup(struct jc *c, json_t *s)
{
	size_t n = json_string_length(s);
	char *d = pd_arena_alloc(c->a, n + 1);
	if (d) {
		memcpy(d, json_string_value(s), n);
		d[n] = 0;
	}
	return d;
}

/* Optional string field key of o ("path" for messages). */
static int jstr(struct jc *c, json_t *o, const char *key, const char *path, const char **out)
{
	*out = NULL;
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return jfail(c, PD_EINVAL, path, "expected a string, got %s", jtype(v));
	return (*out = jdup(c, v)) ? 0 : joom(c);
}

static int jreq(struct jc *c, json_t *o, const char *key, const char *path, const char **out)
{
	int rc = jstr(c, o, key, path, out);
	if (!rc && (!*out || !**out))
		return jfail(c, PD_EINVAL, path, "missing or empty");
	return rc;
}

/* Optional object / array field (NULL when absent or null). */
static int jsub(struct jc *c, json_t *o, const char *key, const char *path, bool array, json_t **out)
{
	*out = NULL;
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (array ? !json_is_array(v) : !json_is_object(v))
		return jfail(c, PD_EINVAL, path, "expected %s, got %s", array ? "an array" : "an object", jtype(v));
	*out = v;
	return 0;
}

/* A string -> string map (labels, annotations). */
static int jkv(struct jc *c, json_t *md, const char *key, const char *path, struct pd_kube_kv **out, uint32_t *n)
{
	*out = NULL;
	*n = 0;
	json_t *m;
	int rc = jsub(c, md, key, path, false, &m);
	if (rc || !m)
		return rc;
	size_t cnt = json_object_size(m);
	if (cnt > PD_KUBE_MAX_KV)
		return jfail(c, PD_ELIMIT, path, "%zu entries, over the limit of %d", cnt, PD_KUBE_MAX_KV);
	if (!cnt)
		return 0;
	struct pd_kube_kv *kv = pd_arena_calloc(c->a, cnt, sizeof *kv);
	if (!kv)
		return joom(c);
	const char *k;
	json_t *v;
	json_object_foreach(m, k, v)
	{
		if (!json_is_string(v)) {
			char p[KEY_QUOTE + 64];
			snprintf(p, sizeof p, "%s.%.*s", path, KEY_QUOTE, k);
			return jfail(c, PD_EINVAL, p, "expected a string, got %s", jtype(v));
		}
		char *kd = pd_arena_dup(c->a, k, strlen(k) + 1);
		const char *vd = jdup(c, v);
		if (!kd || !vd)
			return joom(c);
		kv[*n].key = kd;
		kv[*n].value = vd;
		(*n)++;
	}
	*out = kv;
	return 0;
}

static int owners(struct jc *c, json_t *md, struct pd_kube_pod *p)
{
	json_t *arr;
	int rc = jsub(c, md, "ownerReferences", "metadata.ownerReferences", true, &arr);
	if (rc || !arr)
		return rc;
	size_t n = json_array_size(arr);
	if (n > PD_KUBE_MAX_OWNERS)
		return jfail(c, PD_ELIMIT, "metadata.ownerReferences", "%zu entries, over the limit of %d", n,
			     PD_KUBE_MAX_OWNERS);
	if (!n)
		return 0;
	if (!(p->owners = pd_arena_calloc(c->a, n, sizeof *p->owners)))
		return joom(c);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		char path[64];
		snprintf(path, sizeof path, "metadata.ownerReferences[%zu]", i);
		if (!json_is_object(o))
			return jfail(c, PD_EINVAL, path, "expected an object, got %s", jtype(o));
		struct pd_kube_owner *w = &p->owners[i];
		char f[96];
		snprintf(f, sizeof f, "%s.kind", path);
		if ((rc = jreq(c, o, "kind", f, &w->kind)))
			return rc;
		snprintf(f, sizeof f, "%s.name", path);
		if ((rc = jreq(c, o, "name", f, &w->name)))
			return rc;
		json_t *ctl = json_object_get(o, "controller");
		if (ctl && !json_is_null(ctl) && !json_is_boolean(ctl)) {
			snprintf(f, sizeof f, "%s.controller", path);
			return jfail(c, PD_EINVAL, f, "expected a boolean, got %s", jtype(ctl));
		}
		w->controller = json_is_true(ctl);
	}
	p->nowners = (uint32_t)n;
	return 0;
}

static int containers(struct jc *c, json_t *spec, struct pd_kube_pod *p)
{
	json_t *arr;
	int rc = jsub(c, spec, "containers", "spec.containers", true, &arr);
	if (rc || !arr)
		return rc;
	size_t n = json_array_size(arr);
	if (n > PD_KUBE_MAX_CONTAINERS)
		return jfail(c, PD_ELIMIT, "spec.containers", "%zu entries, over the limit of %d", n,
			     PD_KUBE_MAX_CONTAINERS);
	if (!n)
		return 0;
	if (!(p->containers = pd_arena_calloc(c->a, n, sizeof *p->containers)))
		return joom(c);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i), *ports;
		char path[64], f[128];
		snprintf(path, sizeof path, "spec.containers[%zu]", i);
		if (!json_is_object(o))
			return jfail(c, PD_EINVAL, path, "expected an object, got %s", jtype(o));
		struct pd_kube_container *ct = &p->containers[i];
		snprintf(f, sizeof f, "%s.name", path);
		if ((rc = jreq(c, o, "name", f, &ct->name)))
			return rc;
		snprintf(f, sizeof f, "%s.ports", path);
		if ((rc = jsub(c, o, "ports", f, true, &ports)))
			return rc;
		size_t np = ports ? json_array_size(ports) : 0;
		if (np > PD_KUBE_MAX_CONTAINERS)
			return jfail(c, PD_ELIMIT, f, "%zu entries, over the limit of %d", np, PD_KUBE_MAX_CONTAINERS);
		if (!np)
			continue;
		if (!(ct->ports = pd_arena_calloc(c->a, np, sizeof *ct->ports)))
			return joom(c);
		for (size_t j = 0; j < np; j++) {
			json_t *po = json_array_get(ports, j);
			snprintf(f, sizeof f, "%s.ports[%zu]", path, j);
			if (!json_is_object(po))
				return jfail(c, PD_EINVAL, f, "expected an object, got %s", jtype(po));
			struct pd_kube_port *pt = &ct->ports[j];
			char g[160];
			snprintf(g, sizeof g, "%s.name", f);
			if ((rc = jstr(c, po, "name", g, &pt->name)))
				return rc;
			if (pt->name && !*pt->name)
				pt->name = NULL;
			snprintf(g, sizeof g, "%s.protocol", f);
			if ((rc = jstr(c, po, "protocol", g, &pt->protocol)))
				return rc;
			if (!pt->protocol || !*pt->protocol)
				pt->protocol = "TCP";
			snprintf(g, sizeof g, "%s.containerPort", f);
			json_t *cp = json_object_get(po, "containerPort");
			if (!json_is_integer(cp))
				return jfail(c, PD_EINVAL, g, cp ? "expected an integer, got %s" : "missing%s",
					     cp ? jtype(cp) : "");
			json_int_t v = json_integer_value(cp);
			if (v < 1 || v > 65535)
				return jfail(c, PD_EINVAL, g, "%lld is not a port (1-65535)", (long long)v);
			pt->port = (int32_t)v;
		}
		ct->nports = (uint32_t)np;
	}
	p->ncontainers = (uint32_t)n;
	return 0;
}

static int ready(struct jc *c, json_t *status, struct pd_kube_pod *p)
{
	json_t *arr;
	int rc = jsub(c, status, "conditions", "status.conditions", true, &arr);
	if (rc || !arr)
		return rc;
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		if (!json_is_object(o))
			continue;
		json_t *t = json_object_get(o, "type"), *s = json_object_get(o, "status");
		if (json_is_string(t) && strcmp(json_string_value(t), "Ready") == 0)
			p->ready = json_is_string(s) && strcmp(json_string_value(s), "True") == 0;
	}
	return 0;
}

int kube_pod_from_json(json_t *o, struct pd_arena *a, struct pd_kube_pod *p, const char *where, struct pd_err *err)
{
	memset(p, 0, sizeof *p);
	struct jc c = {a, where, err};
	if (!json_is_object(o))
		return pd_errf(err, PD_EINVAL, "%s: expected an object, got %s", where, jtype(o));
	json_t *kind = json_object_get(o, "kind");
	if (json_is_string(kind) && strcmp(json_string_value(kind), "Pod") != 0)
		return pd_errf(err, PD_EINVAL, "%s: expected a Pod, got a %.64s", where, json_string_value(kind));
	json_t *md, *spec, *status;
	int rc = jsub(&c, o, "metadata", "metadata", false, &md);
	if (rc)
		return rc;
	if (!md)
		return pd_errf(err, PD_EINVAL, "%s: metadata: missing", where);
	if ((rc = jreq(&c, md, "name", "metadata.name", &p->name)) ||
	    (rc = jreq(&c, md, "namespace", "metadata.namespace", &p->namespace)) ||
	    (rc = jstr(&c, md, "uid", "metadata.uid", &p->uid)) ||
	    (rc = jstr(&c, md, "resourceVersion", "metadata.resourceVersion", &p->resource_version)) ||
	    (rc = jkv(&c, md, "labels", "metadata.labels", &p->labels, &p->nlabels)) ||
	    (rc = jkv(&c, md, "annotations", "metadata.annotations", &p->annotations, &p->nannotations)) ||
	    (rc = owners(&c, md, p)))
		return rc;
	const char *del;
	if ((rc = jstr(&c, md, "deletionTimestamp", "metadata.deletionTimestamp", &del)))
		return rc;
	p->deleting = del != NULL;
	if ((rc = jsub(&c, o, "spec", "spec", false, &spec)) || (rc = jsub(&c, o, "status", "status", false, &status)))
		return rc;
	if (spec && ((rc = jstr(&c, spec, "nodeName", "spec.nodeName", &p->node_name)) ||
		     (rc = containers(&c, spec, p))))
		return rc;
	if (status && ((rc = jstr(&c, status, "phase", "status.phase", &p->phase)) ||
		       (rc = jstr(&c, status, "podIP", "status.podIP", &p->pod_ip)) || (rc = ready(&c, status, p))))
		return rc;
	return 0;
}

int kube_pod_invalid(json_t *o, struct pd_arena *a, struct pd_kube_pod *out, int rc, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	if (rc == PD_ENOMEM)
		return rc;
	json_t *md = json_object_get(o, "metadata");
	json_t *ns = json_object_get(md, "namespace"), *name = json_object_get(md, "name");
	if (!json_is_string(ns) || !json_is_string(name) || !json_string_length(ns) || !json_string_length(name))
		return rc;
	json_t *uid = json_object_get(md, "uid"), *rv = json_object_get(md, "resourceVersion");
	struct jc c = {a, "", err};
	char *msg = pd_arena_dup(a, err ? err->msg : "", strlen(err ? err->msg : "") + 1);
	out->namespace = jdup(&c, ns);
	out->name = jdup(&c, name);
	out->uid = json_is_string(uid) ? jdup(&c, uid) : NULL;
	out->resource_version = json_is_string(rv) ? jdup(&c, rv) : NULL;
	out->invalid = msg;
	if (!msg || !out->namespace || !out->name || (json_is_string(uid) && !out->uid) ||
	    (json_is_string(rv) && !out->resource_version)) {
		memset(out, 0, sizeof *out);
		return pd_errf(err, PD_ENOMEM, "out of memory");
	}
	return 0;
}

int pd_kube_pod_parse(const void *json, size_t len, struct pd_arena *a, struct pd_kube_pod *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je);
	if (!o)
		return kube_json_error(err, "pod JSON", &je);
	int rc = kube_pod_from_json(o, a, out, "pod JSON", err);
	json_decref(o);
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}

int pd_kube_pod_page_parse(const void *json, size_t len, struct pd_arena *a, struct pd_kube_pod_page *out,
			   struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je);
	if (!o)
		return kube_json_error(err, "pod list JSON", &je);
	struct jc c = {a, "pod list JSON", err};
	int rc = 0;
	json_t *items, *md, *kind = json_object_get(o, "kind");
	const char *rv = NULL, *cont = NULL;
	if (!json_is_object(o)) {
		rc = pd_errf(err, PD_EINVAL, "pod list JSON: expected an object, got %s", jtype(o));
		goto out;
	}
	if (json_is_string(kind) && strcmp(json_string_value(kind), "PodList") != 0 &&
	    strcmp(json_string_value(kind), "List") != 0) {
		rc = pd_errf(err, PD_EINVAL, "pod list JSON: expected a PodList, got a %.64s", json_string_value(kind));
		goto out;
	}
	if ((rc = jsub(&c, o, "items", "items", true, &items)) || (rc = jsub(&c, o, "metadata", "metadata", false, &md)))
		goto out;
	if (md && ((rc = jstr(&c, md, "resourceVersion", "metadata.resourceVersion", &rv)) ||
		   (rc = jstr(&c, md, "continue", "metadata.continue", &cont))))
		goto out;
	out->resource_version = rv ? rv : "";
	out->continue_token = cont && *cont ? cont : NULL;
	size_t n = items ? json_array_size(items) : 0;
	if (n && !(out->items = pd_arena_calloc(a, n, sizeof *out->items))) {
		rc = joom(&c);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char where[48];
		snprintf(where, sizeof where, "pod list JSON: items[%zu]", i);
		json_t *it = json_array_get(items, i);
		if ((rc = kube_pod_from_json(it, a, &out->items[i], where, err)) &&
		    (rc = kube_pod_invalid(it, a, &out->items[i], rc, err)))
			goto out;
		out->n++;
	}
out:
	json_decref(o);
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}

/* ---- copies and lookups --------------------------------------------------------- */

static const char *cdup(struct pd_arena *a, const char *s, bool *oom)
{
	if (!s)
		return NULL;
	char *d = pd_arena_dup(a, s, strlen(s) + 1);
	if (!d)
		*oom = true;
	return d;
}

static struct pd_kube_kv *kvdup(struct pd_arena *a, const struct pd_kube_kv *kv, uint32_t n, bool *oom)
{
	if (!n)
		return NULL;
	struct pd_kube_kv *d = pd_arena_calloc(a, n, sizeof *d);
	if (!d) {
		*oom = true;
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		d[i].key = cdup(a, kv[i].key, oom);
		d[i].value = cdup(a, kv[i].value, oom);
	}
	return d;
}

int pd_kube_pod_copy(struct pd_arena *a, const struct pd_kube_pod *s, struct pd_kube_pod *d)
{
	bool oom = false;
	*d = *s;
	d->namespace = cdup(a, s->namespace, &oom);
	d->name = cdup(a, s->name, &oom);
	d->uid = cdup(a, s->uid, &oom);
	d->resource_version = cdup(a, s->resource_version, &oom);
	d->phase = cdup(a, s->phase, &oom);
	d->pod_ip = cdup(a, s->pod_ip, &oom);
	d->node_name = cdup(a, s->node_name, &oom);
	d->invalid = cdup(a, s->invalid, &oom);
	d->labels = kvdup(a, s->labels, s->nlabels, &oom);
	d->annotations = kvdup(a, s->annotations, s->nannotations, &oom);
	d->owners = NULL;
	d->containers = NULL;
	if (s->nowners && (d->owners = pd_arena_calloc(a, s->nowners, sizeof *d->owners))) {
		for (uint32_t i = 0; i < s->nowners; i++) {
			d->owners[i].kind = cdup(a, s->owners[i].kind, &oom);
			d->owners[i].name = cdup(a, s->owners[i].name, &oom);
			d->owners[i].controller = s->owners[i].controller;
		}
	} else if (s->nowners) {
		oom = true;
	}
	if (s->ncontainers && (d->containers = pd_arena_calloc(a, s->ncontainers, sizeof *d->containers))) {
		for (uint32_t i = 0; i < s->ncontainers; i++) {
			const struct pd_kube_container *sc = &s->containers[i];
			struct pd_kube_container *dc = &d->containers[i];
			dc->name = cdup(a, sc->name, &oom);
			dc->nports = sc->nports;
			dc->ports = sc->nports ? pd_arena_calloc(a, sc->nports, sizeof *dc->ports) : NULL;
			if (sc->nports && !dc->ports) {
				oom = true;
				continue;
			}
			for (uint32_t j = 0; j < sc->nports; j++) {
				dc->ports[j].name = cdup(a, sc->ports[j].name, &oom);
				dc->ports[j].protocol = cdup(a, sc->ports[j].protocol, &oom);
				dc->ports[j].port = sc->ports[j].port;
			}
		}
	} else if (s->ncontainers) {
		oom = true;
	}
	if (oom) {
		memset(d, 0, sizeof *d);
		return PD_ENOMEM;
	}
	return 0;
}

static const char *kv_get(const struct pd_kube_kv *kv, uint32_t n, const char *key)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

const char *pd_kube_pod_label(const struct pd_kube_pod *p, const char *key)
{
	return kv_get(p->labels, p->nlabels, key);
}

const char *pd_kube_pod_annotation(const struct pd_kube_pod *p, const char *key)
{
	return kv_get(p->annotations, p->nannotations, key);
}

/* ---- the owning workload ------------------------------------------------------- */

/* Kubernetes' rand.SafeEncodeString alphabet (no vowels, no 0/1/3): what a
 * pod-template-hash is made of. */
static bool template_hash(const char *s, size_t n)
{
	if (n < 5 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("bcdfghjklmnpqrstvwxz2456789", s[i]) || !s[i])
			return false;
	return true;
}

const char *pd_kube_pod_workload(const struct pd_kube_pod *p, char *buf, size_t cap, const char **kind)
{
	const struct pd_kube_owner *o = NULL;
	for (uint32_t i = 0; i < p->nowners && !o; i++)
		if (p->owners[i].controller)
			o = &p->owners[i];
	if (!o && p->nowners)
		o = &p->owners[0];
	const char *k = "Pod", *name = p->name ? p->name : "";
	size_t len = strlen(name);
	if (o && o->kind && o->name && *o->name) {
		k = o->kind;
		name = o->name;
		len = strlen(name);
		const char *dash = strrchr(name, '-');
		size_t sl = dash ? len - (size_t)(dash - name) - 1 : 0; /* suffix length */
		if (strcmp(k, "ReplicaSet") == 0) {
			const char *h = pd_kube_pod_label(p, "pod-template-hash");
			size_t hl = h ? strlen(h) : 0;
			if (hl && len > hl + 1 && name[len - hl - 1] == '-' && memcmp(name + len - hl, h, hl) == 0) {
				len -= hl + 1;
				k = "Deployment";
			} else if (!h && dash && dash > name && template_hash(dash + 1, sl)) {
				len = (size_t)(dash - name);
				k = "Deployment";
			}
		} else if (strcmp(k, "Job") == 0) {
			bool num = dash && dash > name && sl >= 8;
			for (size_t i = 0; num && i < sl; i++)
				num = dash[1 + i] >= '0' && dash[1 + i] <= '9';
			if (num) {
				len = (size_t)(dash - name);
				k = "CronJob";
			}
		} else if (strcmp(k, "Node") == 0) {
			/* a mirror pod: "<name>-<node>" */
			size_t nl = strlen(o->name);
			name = p->name ? p->name : "";
			len = strlen(name);
			if (len > nl + 1 && name[len - nl - 1] == '-' && strcmp(name + len - nl, o->name) == 0)
				len -= nl + 1;
			k = "Pod";
		}
	}
	if (cap) {
		if (len >= cap)
			len = cap - 1;
		memcpy(buf, name, len);
		buf[len] = 0;
	}
	if (kind)
		*kind = k;
	return buf;
}

/* ---- the pod proxy --------------------------------------------------------------- */

bool kube_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '.' || c == '_'))
			return false;
	}
	return true;
}

int pd_kube_pod_proxy_path(char *buf, size_t cap, const char *ns, const char *name, unsigned port,
			   const char *path, struct pd_err *err)
{
	static const char hex[] = "0123456789ABCDEF";
	if (cap)
		buf[0] = 0;
	if (!kube_name_ok(ns))
		return pd_errf(err, PD_EINVAL, "invalid namespace \"%.64s\"", ns ? ns : "");
	if (!kube_name_ok(name))
		return pd_errf(err, PD_EINVAL, "invalid pod name \"%.64s\"", name ? name : "");
	if (port > 65535)
		return pd_errf(err, PD_EINVAL, "invalid port %u", port);
	char head[600];
	int hn = port ? snprintf(head, sizeof head, "/api/v1/namespaces/%s/pods/%s:%u/proxy/", ns, name, port)
		      : snprintf(head, sizeof head, "/api/v1/namespaces/%s/pods/%s/proxy/", ns, name);
	size_t len = (size_t)hn;
	if (len >= cap)
		goto toolong;
	memcpy(buf, head, len);
	if (!path)
		path = "";
	while (*path == '/')
		path++;
	bool query = false;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		unsigned char ch = *p;
		if (ch == '?')
			query = true;
		bool keep = query ? (ch > 0x20 && ch < 0x7f && ch != '#')
				  : ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
				     strchr("-._~/:@!$&'()*+,;=", ch));
		if (keep) {
			if (len + 1 >= cap)
				goto toolong;
			buf[len++] = (char)ch;
		} else {
			if (len + 3 >= cap)
				goto toolong;
			buf[len++] = '%';
			buf[len++] = hex[ch >> 4];
			buf[len++] = hex[ch & 15];
		}
	}
	buf[len] = 0;
	return 0;
toolong:
	if (cap)
		buf[0] = 0;
	return pd_errf(err, PD_ELIMIT, "pod proxy path for %s/%s is longer than %zu bytes", ns, name, cap);
}
