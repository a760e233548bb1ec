/*
 * fuzz_kube.c — libFuzzer driver for lib/kube's parsers: kubeconfig YAML
 * (from memory: no file is read, no plugin run), pod JSON and pod list
 * pages, the watch event stream, ExecCredentials, base64 / RFC 3339, and
 * the pod-proxy path builder.
 *
 * The first byte picks the parser (low 3 bits) and a parameter (the rest);
 * the remaining bytes are its input. Properties beyond "no crash, no leak,
 * no UB":
 *   - every error has a negative code and a message;
 *   - a kubeconfig that resolves resolves again, to the same server, when
 *     its context is named explicitly; its server has a scheme;
 *   - a parsed pod deep-copies to an equal pod, and its workload name fits
 *     any buffer size;
 *   - the watch parser gives the same events and the same result whether
 *     the stream comes whole or in chunks (sizes from the parameter);
 *   - base64 decoding of an encoding gives the input back;
 *   - a workload's selector (the pod parser's input, read as a workload)
 *     holds only label characters and selector syntax.
 */
#include "../../lib/kube/kube_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const struct pd_err *err)
{
	PD_ASSERT(rc < 0 && err->code == rc && err->msg[0]);
}

static void fuzz_kubeconfig(const uint8_t *d, size_t n, unsigned param)
{
	struct pd_kube_config *cfg = NULL, *again = NULL;
	struct pd_err err = {0, ""};
	const char *ctx = param & 1 ? "dev" : NULL;
	int rc = pd_kube_config_parse(param & 2 ? "/etc/kube/config" : "config", d, n, ctx, &cfg, &err);
	if (rc) {
		check_err(rc, &err);
		PD_ASSERT(cfg == NULL);
		return;
	}
	PD_ASSERT(cfg->server && (strncmp(cfg->server, "https://", 8) == 0 || strncmp(cfg->server, "http://", 7) == 0));
	PD_ASSERT(cfg->namespace && cfg->namespace[0] && cfg->context && cfg->origin);
	PD_ASSERT(!cfg->ca.len || kube_is_pem(cfg->ca.ptr, cfg->ca.len));
	rc = pd_kube_config_parse(param & 2 ? "/etc/kube/config" : "config", d, n, cfg->context, &again, &err);
	PD_ASSERT(rc == 0 && strcmp(again->server, cfg->server) == 0);
	pd_kube_config_free(again);
	pd_kube_config_free(cfg);
}

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static void check_pod(const struct pd_kube_pod *p)
{
	PD_ASSERT(p->name && p->name[0] && p->namespace && p->namespace[0]);
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod q;
	if (a && pd_kube_pod_copy(a, p, &q) == 0) {
		PD_ASSERT(same(p->name, q.name) && same(p->uid, q.uid) && same(p->phase, q.phase));
		PD_ASSERT(p->nlabels == q.nlabels && p->ncontainers == q.ncontainers && p->nowners == q.nowners);
		for (uint32_t i = 0; i < p->nlabels; i++)
			PD_ASSERT(same(p->labels[i].key, q.labels[i].key) && same(p->labels[i].value, q.labels[i].value));
		for (uint32_t i = 0; i < p->ncontainers; i++)
			for (uint32_t j = 0; j < p->containers[i].nports; j++) {
				int32_t port = q.containers[i].ports[j].port;
				PD_ASSERT(port == p->containers[i].ports[j].port && port >= 1 && port <= 65535);
			}
	}
	pd_arena_free(a);
	char full[512], small[4];
	const char *kind = NULL;
	pd_kube_pod_workload(p, full, sizeof full, &kind);
	PD_ASSERT(kind && strlen(full) < sizeof full);
	pd_kube_pod_workload(p, small, sizeof small, NULL);
	PD_ASSERT(strncmp(small, full, strlen(small)) == 0);
	(void)pd_kube_pod_label(p, "pod-template-hash");
	(void)pd_kube_pod_annotation(p, "profefe.com/port");
}

static void fuzz_pod(const uint8_t *d, size_t n)
{
	struct pd_arena *a = pd_arena_new(0);
	if (!a)
		return;
	struct pd_kube_pod p;
	struct pd_err err = {0, ""};
	int rc = pd_kube_pod_parse(d, n, a, &p, &err);
	if (rc)
		check_err(rc, &err);
	else
		check_pod(&p);
	struct pd_kube_pod_page page;
	rc = pd_kube_pod_page_parse(d, n, a, &page, &err);
	if (rc) {
		check_err(rc, &err);
	} else {
		PD_ASSERT(page.resource_version);
		for (size_t i = 0; i < page.n; i++)
			check_pod(&page.items[i]);
	}
	pd_arena_free(a);
	/* the same JSON as a workload: its selector, which must not carry
	 * anything but label characters and the selector's own syntax */
	char *sel = NULL;
	rc = pd_kube_workload_selector_parse(d, n, &sel, &err);
	if (rc) {
		check_err(rc, &err);
		PD_ASSERT(sel == NULL);
	} else {
		PD_ASSERT(sel && sel[0]);
		for (const char *q = sel; *q; q++)
			PD_ASSERT(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=!,() ", *q));
		free(sel);
	}
}

/* What the watch parser saw: a running digest of events. */
struct seen {
	uint64_t h;
	size_t n;
};

static int on_event(void *ctx, const struct pd_kube_event *ev, struct pd_err *err)
{
	(void)err;
	struct seen *s = ctx;
	PD_ASSERT(ev->type >= PD_KUBE_ADDED && ev->type <= PD_KUBE_BOOKMARK && ev->resource_version);
	PD_ASSERT((ev->type == PD_KUBE_BOOKMARK) == (ev->pod == NULL));
	if (ev->pod)
		check_pod(ev->pod);
	s->h = pd_hash(ev->resource_version, strlen(ev->resource_version), s->h ^ (uint64_t)ev->type);
	if (ev->pod)
		s->h = pd_hash(ev->pod->name, strlen(ev->pod->name), s->h);
	s->n++;
	return s->n == 50 ? 1 : 0; /* a stop value, sometimes */
}

static int run_watch(const uint8_t *d, size_t n, size_t chunk, size_t max, struct seen *s, struct pd_err *err)
{
	struct pd_kube_watch_parser *p;
	if (pd_kube_watch_parser_new(max, on_event, s, &p))
		return PD_ENOMEM;
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i += chunk)
		rc = pd_kube_watch_feed(p, d + i, n - i < chunk ? n - i : chunk, err);
	if (!rc)
		rc = pd_kube_watch_finish(p, err);
	PD_ASSERT(pd_kube_watch_events(p) == s->n);
	pd_kube_watch_parser_free(p);
	return rc;
}

static void fuzz_watch(const uint8_t *d, size_t n, unsigned param)
{
	size_t max = param & 16 ? 256 : 0;
	struct seen whole = {0, 0}, split = {0, 0};
	struct pd_err e1 = {0, ""}, e2 = {0, ""};
	int r1 = run_watch(d, n, n ? n : 1, max, &whole, &e1);
	int r2 = run_watch(d, n, (param & 15) + 1, max, &split, &e2);
	PD_ASSERT(r1 == r2 && whole.n == split.n && whole.h == split.h);
	if (r1 < 0) {
		check_err(r1, &e1);
		PD_ASSERT(strcmp(e1.msg, e2.msg) == 0);
	}
}

static void fuzz_exec_cred(const uint8_t *d, size_t n)
{
	struct kube_cred c;
	struct pd_err err = {0, ""};
	int rc = kube_exec_cred_parse((const char *)d, n, "client.authentication.k8s.io/v1", &c, &err);
	if (rc) {
		check_err(rc, &err);
		return;
	}
	PD_ASSERT(c.token || (c.cert && c.key));
	PD_ASSERT(!c.token || kube_token_ok(c.token, strlen(c.token)));
	kube_cred_clear(&c);
}

static void fuzz_small(const uint8_t *d, size_t n)
{
	/* base64 both ways */
	uint8_t *out;
	size_t on;
	struct pd_err err = {0, ""};
	if (kube_b64_decode((const char *)d, n, &out, &on, &err) == 0)
		free(out);
	char *e = kube_b64_encode(d, n);
	if (e) {
		PD_ASSERT(kube_b64_decode(e, strlen(e), &out, &on, &err) == 0);
		PD_ASSERT(on == n && (n == 0 || memcmp(out, d, n) == 0));
		free(out);
		free(e);
	}
	/* times and the proxy path, from NUL-separated pieces */
	char *s = malloc(n + 3);
	if (!s)
		return;
	memcpy(s, d, n);
	s[n] = s[n + 1] = s[n + 2] = 0;
	const char *ns = s, *name = ns + strlen(ns) + 1;
	const char *path = name < s + n ? name + strlen(name) + 1 : s + n + 1;
	if (path > s + n + 2)
		path = s + n + 2;
	(void)kube_parse_rfc3339(s);
	char buf[300];
	unsigned port = n ? d[0] * 300u : 0;
	int rc = pd_kube_pod_proxy_path(buf, sizeof buf, ns, name, port, path, &err);
	if (rc) {
		check_err(rc, &err);
		PD_ASSERT(buf[0] == 0);
	} else {
		PD_ASSERT(strncmp(buf, "/api/v1/namespaces/", 19) == 0 && strlen(buf) < sizeof buf);
		for (const char *p = buf; *p; p++)
			PD_ASSERT((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 262144)
		return 0;
	unsigned sel = data[0] & 7, param = data[0] >> 3;
	const uint8_t *d = data + 1;
	size_t n = size - 1;
	switch (sel) {
	case 0:
	case 1: fuzz_kubeconfig(d, n, param | (sel << 1)); break;
	case 2:
	case 3: fuzz_pod(d, n); break;
	case 4:
	case 5: fuzz_watch(d, n, param | (sel == 5 ? 16 : 0)); break;
	case 6: fuzz_exec_cred(d, n); break;
	default: fuzz_small(d, n); break;
	}
	return 0;
}
