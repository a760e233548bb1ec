/*
 * workload.c — workloads as `capture` needs them: kubectl's names for
 * resource types (deploy, sts, deployment.apps, ...) and the label selector
 * of an apps/v1 Deployment, StatefulSet, DaemonSet or ReplicaSet, read from
 * its spec.selector (matchLabels and matchExpressions) and written in the
 * syntax of the labelSelector parameter, so that the workload's pods are one
 * pod list away.
 *
 * The selector string is built as apimachinery's LabelSelectorAsSelector
 * prints it: requirements sorted by key, values of in/notin sorted. Keys
 * and values are checked against the characters labels allow, so that a
 * hostile object cannot inject selector syntax (',', '(', '!').
 */
#include "kube_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQS   256 /* requirements in one selector */
#define MAX_VALUES 256 /* values of one in / notin */

static const struct {
	const char *name, *resource;
} resource_names[] = {
	{"pod", "pods"},
	{"pods", "pods"},
	{"po", "pods"},
	{"deployment", "deployments"},
	{"deployments", "deployments"},
	{"deploy", "deployments"},
	{"deployment.apps", "deployments"},
	{"deployments.apps", "deployments"},
	{"statefulset", "statefulsets"},
	{"statefulsets", "statefulsets"},
	{"sts", "statefulsets"},
	{"statefulset.apps", "statefulsets"},
	{"statefulsets.apps", "statefulsets"},
	{"daemonset", "daemonsets"},
	{"daemonsets", "daemonsets"},
	{"ds", "daemonsets"},
	{"daemonset.apps", "daemonsets"},
	{"daemonsets.apps", "daemonsets"},
	{"replicaset", "replicasets"},
	{"replicasets", "replicasets"},
	{"rs", "replicasets"},
	{"replicaset.apps", "replicasets"},
	{"replicasets.apps", "replicasets"},
};

const char *pd_kube_resource(const char *type)
{
	if (!type)
		return NULL;
	for (size_t i = 0; i < sizeof resource_names / sizeof *resource_names; i++) {
		const char *a = resource_names[i].name, *b = type;
		while (*a && (*b == *a || (*b >= 'A' && *b <= 'Z' && *b + 32 == *a))) /* kubectl ignores case */
			a++, b++;
		if (!*a && !*b)
			return resource_names[i].resource;
	}
	return NULL;
}

const char *pd_kube_resource_kind(const char *resource)
{
	if (!resource)
		return NULL;
	if (!strcmp(resource, "pods"))
		return "pod";
	if (!strcmp(resource, "deployments"))
		return "deployment";
	if (!strcmp(resource, "statefulsets"))
		return "statefulset";
	if (!strcmp(resource, "daemonsets"))
		return "daemonset";
	if (!strcmp(resource, "replicasets"))
		return "replicaset";
	return NULL;
}

/* A label key (prefix/name) or value: only what labels may hold, so nothing
 * of the selector syntax. Lengths as Kubernetes validates them. */
static bool label_chars_ok(const char *s, size_t n, bool key)
{
	if (n > (key ? 317u : 63u) || (key && !n))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '.' || c == '_' || (key && c == '/')))
			return false;
	}
	return true;
}

struct req {
	const char *key;
	int op; /* 0 =, 1 in, 2 notin, 3 exists, 4 !exists */
	const char **values;
	size_t nvalues;
};

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int cmp_req(const void *a, const void *b)
{
	const struct req *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : x->op - y->op;
}

static int put(struct pd_buf *b, const char *s) { return pd_buf_append(b, s, strlen(s)); }

int pd_kube_workload_selector_parse(const void *json, size_t len, char **out, struct pd_err *err)
{
	*out = NULL;
	json_error_t je;
	struct req reqs[MAX_REQS];
	const char **vals = NULL;
	size_t nreq = 0, nvals = 0, i;
	struct pd_buf b = PD_BUF_INIT(1u << 20);
	int rc = 0;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), *e, *v;
	if (!root)
		return kube_json_error(err, "workload JSON", &je);
	json_t *kind = json_object_get(root, "kind"), *meta = json_object_get(root, "metadata");
	json_t *name = json_is_object(meta) ? json_object_get(meta, "name") : NULL;
	const char *what = json_is_string(kind) ? json_string_value(kind) : "workload";
	const char *nm = json_is_string(name) ? json_string_value(name) : "";
	json_t *spec = json_object_get(root, "spec");
	json_t *sel = json_is_object(spec) ? json_object_get(spec, "selector") : NULL;
	if (!json_is_object(sel)) {
		rc = pd_errf(err, PD_EINVAL, "%s %.64s: no spec.selector", what, nm);
		goto out;
	}
	json_t *ml = json_object_get(sel, "matchLabels"), *me = json_object_get(sel, "matchExpressions");
	if (ml && !json_is_null(ml) && !json_is_object(ml)) {
		rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchLabels: expected an object", what, nm);
		goto out;
	}
	if (me && !json_is_null(me) && !json_is_array(me)) {
		rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchExpressions: expected an array", what, nm);
		goto out;
	}
	if (json_object_size(ml) + json_array_size(me) > MAX_REQS) {
		rc = pd_errf(err, PD_ELIMIT, "%s %.64s: spec.selector has over %d requirements", what, nm, MAX_REQS);
		goto out;
	}
	/* every value, in one array sized up front (values point into root) */
	size_t total = json_object_size(ml);
	json_array_foreach(me, i, e) {
		json_t *vs = json_is_object(e) ? json_object_get(e, "values") : NULL;
		total += json_is_array(vs) ? json_array_size(vs) : 0;
	}
	if (total > MAX_VALUES * 4) {
		rc = pd_errf(err, PD_ELIMIT, "%s %.64s: spec.selector has over %d values", what, nm, MAX_VALUES * 4);
		goto out;
	}
	if (total && !(vals = calloc(total, sizeof *vals))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	const char *k;
	json_object_foreach(ml, k, v) {
		if (!json_is_string(v) || !label_chars_ok(k, strlen(k), true) ||
		    !label_chars_ok(json_string_value(v), json_string_length(v), false)) {
			rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchLabels: invalid label \"%.64s\"", what, nm, k);
			goto out;
		}
		reqs[nreq++] = (struct req){k, 0, vals + nvals, 1};
		vals[nvals++] = json_string_value(v);
	}
	json_array_foreach(me, i, e) {
		json_t *key = json_is_object(e) ? json_object_get(e, "key") : NULL;
		json_t *op = json_is_object(e) ? json_object_get(e, "operator") : NULL;
		json_t *vs = json_is_object(e) ? json_object_get(e, "values") : NULL;
		if (!json_is_string(key) || !label_chars_ok(json_string_value(key), json_string_length(key), true)) {
			rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchExpressions[%zu].key: invalid", what, nm, i);
			goto out;
		}
		const char *o = json_is_string(op) ? json_string_value(op) : "";
		int opc = !strcmp(o, "In")             ? 1
			  : !strcmp(o, "NotIn")        ? 2
			  : !strcmp(o, "Exists")       ? 3
			  : !strcmp(o, "DoesNotExist") ? 4
						       : -1;
		if (opc < 0) {
			rc = pd_errf(err, PD_EINVAL,
				     "%s %.64s: spec.selector.matchExpressions[%zu].operator \"%.32s\" (want In, NotIn, Exists or "
				     "DoesNotExist)",
				     what, nm, i, o);
			goto out;
		}
		size_t nv = json_is_array(vs) ? json_array_size(vs) : 0;
		if ((opc <= 2) != (nv > 0) || (vs && !json_is_null(vs) && !json_is_array(vs)) || nv > MAX_VALUES) {
			rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchExpressions[%zu]: operator %s %s values", what,
				     nm, i, o, opc <= 2 ? "needs" : "takes no");
			goto out;
		}
		reqs[nreq++] = (struct req){json_string_value(key), opc, nv ? vals + nvals : NULL, nv};
		for (size_t j = 0; j < nv; j++) {
			json_t *x = json_array_get(vs, j);
			if (!json_is_string(x) || !label_chars_ok(json_string_value(x), json_string_length(x), false)) {
				rc = pd_errf(err, PD_EINVAL, "%s %.64s: spec.selector.matchExpressions[%zu].values[%zu]: invalid",
					     what, nm, i, j);
				goto out;
			}
			vals[nvals++] = json_string_value(x);
		}
	}
	if (!nreq) {
		rc = pd_errf(err, PD_EINVAL, "%s %.64s has an empty selector (it would select every pod)", what, nm);
		goto out;
	}
	for (size_t r = 0; r < nreq; r++)
		if (reqs[r].nvalues)
			qsort(reqs[r].values, reqs[r].nvalues, sizeof *reqs[r].values, cmp_str);
	qsort(reqs, nreq, sizeof *reqs, cmp_req);
	for (size_t r = 0; r < nreq && !rc; r++) {
		const struct req *q = &reqs[r];
		if (r)
			rc = put(&b, ",");
		if (!rc && q->op == 4)
			rc = put(&b, "!");
		if (!rc)
			rc = put(&b, q->key);
		if (!rc && q->op == 0)
			rc = put(&b, "=") || put(&b, q->values[0]);
		if (!rc && (q->op == 1 || q->op == 2)) {
			rc = put(&b, q->op == 1 ? " in (" : " notin (");
			for (size_t j = 0; j < q->nvalues && !rc; j++)
				rc = (j ? put(&b, ",") : 0) || put(&b, q->values[j]);
			if (!rc)
				rc = put(&b, ")");
		}
	}
	if (rc || pd_buf_append(&b, "", 1)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	*out = (char *)b.ptr;
	b.ptr = NULL;
out:
	pd_buf_free(&b);
	free(vals);
	json_decref(root);
	return rc;
}

int pd_kube_get_workload_selector(struct pd_kube_client *c, const char *ns, const char *resource, const char *name,
				  char **out, struct pd_err *err)
{
	*out = NULL;
	const char *kind = pd_kube_resource_kind(resource);
	if (!kind || !strcmp(resource, "pods"))
		return pd_errf(err, PD_EINVAL, "not a workload resource: \"%.32s\"", resource ? resource : "");
	if (!kube_name_ok(ns))
		return pd_errf(err, PD_EINVAL, "invalid namespace \"%.64s\"", ns ? ns : "");
	if (!kube_name_ok(name))
		return pd_errf(err, PD_EINVAL, "invalid %s name \"%.64s\"", kind, name ? name : "");
	char path[700];
	snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/%s/%s", ns, resource, name);
	struct pd_kube_get_opts o = {.max_body = 8u << 20, .accept = "application/json"};
	struct pd_kube_response r;
	int rc = pd_kube_get(c, path, &o, &r, err);
	if (rc)
		return rc;
	if (r.status != 200) {
		char what[800];
		snprintf(what, sizeof what, "GET %s", path);
		rc = pd_kube_http_error(what, r.status, r.body.ptr, r.body.len, err);
	} else {
		rc = pd_kube_workload_selector_parse(r.body.ptr ? (const char *)r.body.ptr : "", r.body.len, out, err);
	}
	pd_kube_response_free(&r);
	return rc;
}
