/*
 * test_kube.c — lib/kube, the Kubernetes client.
 *
 *   - kubeconfig: files in a temp dir (tokens, base64 and file CAs, client
 *     certificates, contexts, $KUBECONFIG merging, ~/.kube/config), every
 *     error message that names file, context and field;
 *   - in-cluster: a fake service-account directory and KUBERNETES_SERVICE_*;
 *   - exec credential plugins: tiny shell scripts printing ExecCredentials;
 *   - pods: fixtures in data/kube shaped as `kubectl get -o json` prints them,
 *     type errors with field paths, syntax errors with positions, caps;
 *   - the owning-workload rule;
 *   - the watch stream parser fed at every split point (and 3-way splits),
 *     410 handling, framing of strings that contain braces;
 *   - the client against a small HTTP/1.1 server in a thread (paging, list
 *     restart on an expired continue token, Status messages, watch streaming,
 *     stop flag, token-file rotation with a fake clock, exec caching and
 *     re-run on 401, raw GETs with caps and timeouts), and against
 *     `openssl s_server` for TLS (CA blob, tls-server-name, client certs).
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "../../lib/kube/kube_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- helpers ------------------------------------------------------------------- */

static char tmp[64];

#define assert_str(a, b)                                                                                    \
	do {                                                                                                \
		const char *a_ = (a), *b_ = (b);                                                            \
		if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                      \
			fail_msg("%s:%d: got \"%s\", want \"%s\"", __FILE__, __LINE__, a_ ? a_ : "(null)",   \
				 b_ ? b_ : "(null)");                                                       \
	} while (0)

#define assert_has(hay, needle)                                                                        \
	do {                                                                                                \
		const char *h_ = (hay), *n_ = (needle);                                                     \
		if (!h_ || !strstr(h_, n_))                                                                 \
			fail_msg("%s:%d: \"%s\" does not contain \"%s\"", __FILE__, __LINE__, h_ ? h_ : "(null)", \
				 n_);                                                                       \
	} while (0)

static void clear_env(void)
{
	unsetenv("KUBECONFIG");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof tmp, "/tmp/pdkube.XXXXXX");
	assert_non_null(mkdtemp(tmp));
	clear_env();
	setenv("HOME", tmp, 1); /* no real ~/.kube/config leaks in */
	return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	return remove(p);
}

static int teardown(void **state)
{
	(void)state;
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	clear_env();
	return 0;
}

/* tmp/name, in one of 8 rotating buffers. */
static const char *tp(const char *name)
{
	static char bufs[8][512];
	static int i;
	char *b = bufs[i++ % 8];
	snprintf(b, 512, "%s/%s", tmp, name);
	return b;
}

static void wfile_mode(const char *name, const char *content, mode_t mode)
{
	const char *p = tp(name);
	char dir[512];
	snprintf(dir, sizeof dir, "%s", p);
	for (char *s = dir + strlen(tmp) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(dir, 0755);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
	chmod(p, mode);
}

static void wfile(const char *name, const char *content) { wfile_mode(name, content, 0644); }

static char *read_all(const char *path)
{
	struct pd_buf b = PD_BUF_INIT(0);
	struct pd_err err = {0, ""};
	if (pd_buf_read_file(&b, path, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(pd_buf_append(&b, "", 1), 0);
	return (char *)b.ptr;
}

static char *data_file(const char *name)
{
	char p[512];
	const char *slash = strrchr(__FILE__, '/');
	snprintf(p, sizeof p, "%.*s/data/kube/%s", slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".", name);
	return read_all(p);
}

#define CA_PEM   "-----BEGIN CERTIFICATE-----\nMIIBCATEST\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBCLIENT\n-----END CERTIFICATE-----\n"
#define KEY_PEM  "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKEY\n-----END EC PRIVATE KEY-----\n"

static char *b64(const char *s)
{
	char *r = kube_b64_encode((const uint8_t *)s, strlen(s));
	assert_non_null(r);
	return r;
}

static struct pd_kube_config *parse_ok(const char *yaml, const char *ctx)
{
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	if (pd_kube_config_parse("/k/config", yaml, strlen(yaml), ctx, &cfg, &err))
		fail_msg("parse failed: %s", err.msg);
	return cfg;
}

static void parse_err(const char *yaml, const char *ctx, int code, const char *want)
{
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_kube_config_parse("/k/config", yaml, strlen(yaml), ctx, &cfg, &err);
	if (rc == 0)
		fail_msg("parse succeeded, want \"%s\"", want);
	assert_null(cfg);
	if (rc != code)
		fail_msg("code %d (%s), want %d; message: %s", rc, err.msg, code, err.msg);
	assert_str(err.msg, want);
}

static struct pd_kube_config *load_ok(const struct pd_kube_opts *o)
{
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	if (pd_kube_config_load(o, &cfg, &err))
		fail_msg("load failed: %s", err.msg);
	return cfg;
}

static int load_err(const struct pd_kube_opts *o, struct pd_err *err)
{
	struct pd_kube_config *cfg = NULL;
	int rc = pd_kube_config_load(o, &cfg, err);
	assert_true(rc < 0);
	assert_null(cfg);
	return rc;
}

static void assert_blob(struct pd_kube_blob b, const char *want)
{
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.ptr, want, b.len);
}

/* ---- base64, times -------------------------------------------------------------- */

static void test_b64_rfc3339(void **state)
{
	(void)state;
	static const char *const vec[][2] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
					     {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
	for (size_t i = 0; i < sizeof vec / sizeof *vec; i++) {
		char *e = kube_b64_encode((const uint8_t *)vec[i][0], strlen(vec[i][0]));
		assert_str(e, vec[i][1]);
		free(e);
		uint8_t *d;
		size_t n;
		struct pd_err err = {0, ""};
		assert_int_equal(kube_b64_decode(vec[i][1], strlen(vec[i][1]), &d, &n, &err), 0);
		assert_int_equal(n, strlen(vec[i][0]));
		assert_memory_equal(d, vec[i][0], n);
		free(d);
	}
	/* newlines (as in wrapped PEM-ish data) and missing padding are accepted */
	uint8_t *d;
	size_t n;
	struct pd_err err = {0, ""};
	assert_int_equal(kube_b64_decode("Zm9v\nYmE\n", 9, &d, &n, &err), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "fooba", 5);
	free(d);
	assert_int_equal(kube_b64_decode("Zm9v!", 5, &d, &n, &err), PD_EINVAL);
	assert_str(err.msg, "invalid base64 at byte 4");
	assert_int_equal(kube_b64_decode("Zg==Zg", 6, &d, &n, &err), PD_EINVAL);
	assert_int_equal(kube_b64_decode("Z", 1, &d, &n, &err), PD_EINVAL);

	assert_true(kube_parse_rfc3339("1970-01-01T00:00:00Z") == 0);
	assert_true(kube_parse_rfc3339("2024-05-02T10:00:00Z") == 1714644000);
	assert_true(kube_parse_rfc3339("2024-05-02T12:00:00+02:00") == 1714644000);
	assert_true(kube_parse_rfc3339("2024-05-02T09:30:00-00:30") == 1714644000);
	assert_true(kube_parse_rfc3339("2024-05-02T10:00:00.25Z") == 1714644000.25);
	assert_true(kube_parse_rfc3339("2024-05-02T10:00:00") < 0);
	assert_true(kube_parse_rfc3339("2024-13-02T10:00:00Z") < 0);
	assert_true(kube_parse_rfc3339("yesterday") < 0);
	assert_true(kube_parse_rfc3339("2024-05-02T10:00:00Zjunk") < 0);
}

/* ---- kubeconfig ------------------------------------------------------------------ */

static void test_config_token_ca_data(void **state)
{
	(void)state;
	char *ca = b64(CA_PEM);
	char yaml[4096];
	snprintf(yaml, sizeof yaml,
		 "apiVersion: v1\n"
		 "kind: Config\n"
		 "clusters:\n"
		 "- name: dev-cluster\n"
		 "  cluster:\n"
		 "    server: https://dev.example.com:6443/\n"
		 "    certificate-authority-data: %s\n"
		 "    tls-server-name: kubernetes.default\n"
		 "- name: prod-cluster\n"
		 "  cluster:\n"
		 "    server: 10.0.0.1:443\n"
		 "    insecure-skip-tls-verify: true\n"
		 "    proxy-url: http://proxy:3128\n"
		 "contexts:\n"
		 "- name: dev\n"
		 "  context: {cluster: dev-cluster, user: alice, namespace: team-a}\n"
		 "- name: prod\n"
		 "  context:\n"
		 "    cluster: prod-cluster\n"
		 "    user: bob\n"
		 "current-context: dev\n"
		 "preferences: {}\n"
		 "users:\n"
		 "- name: alice\n"
		 "  user:\n"
		 "    token: eyJhbGciOiJSUzI1NiJ9.payload.sig\n"
		 "    as: jane\n"
		 "    as-groups: [devs, \"system:authenticated\"]\n"
		 "- name: bob\n"
		 "  user:\n"
		 "    username: bob\n"
		 "    password: \"s3cret: yes\"\n",
		 ca);
	free(ca);
	struct pd_kube_config *cfg = parse_ok(yaml, NULL);
	assert_int_equal(cfg->source, PD_KUBE_SRC_KUBECONFIG);
	assert_str(cfg->origin, "kubeconfig /k/config");
	assert_str(cfg->context, "dev");
	assert_str(cfg->cluster, "dev-cluster");
	assert_str(cfg->user, "alice");
	assert_str(cfg->namespace, "team-a");
	assert_str(cfg->server, "https://dev.example.com:6443");
	assert_str(cfg->tls_server_name, "kubernetes.default");
	assert_false(cfg->insecure);
	assert_blob(cfg->ca, CA_PEM);
	assert_null(cfg->ca_file);
	assert_str(cfg->token, "eyJhbGciOiJSUzI1NiJ9.payload.sig");
	assert_null(cfg->token_file);
	assert_null(cfg->username);
	assert_str(cfg->impersonate_user, "jane");
	assert_int_equal(cfg->nimpersonate_groups, 2);
	assert_str(cfg->impersonate_groups[1], "system:authenticated");
	assert_null(cfg->exec);
	pd_kube_config_free(cfg);

	cfg = parse_ok(yaml, "prod");
	assert_str(cfg->context, "prod");
	assert_str(cfg->namespace, "default");
	assert_str(cfg->server, "https://10.0.0.1:443"); /* no scheme: https, as client-go */
	assert_true(cfg->insecure);
	assert_str(cfg->proxy_url, "http://proxy:3128");
	assert_int_equal(cfg->ca.len, 0);
	assert_null(cfg->token);
	assert_str(cfg->username, "bob");
	assert_str(cfg->password, "s3cret: yes");
	pd_kube_config_free(cfg);

	/* an anonymous context (no user) is fine */
	cfg = parse_ok("clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
		       "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
		       NULL);
	assert_null(cfg->user);
	assert_str(cfg->server, "http://127.0.0.1:8080");
	pd_kube_config_free(cfg);
}

static void test_config_errors(void **state)
{
	(void)state;
#define HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
#define CTX  "contexts:\n- name: dev\n  context: {cluster: c1, user: u1}\n- name: prod\n  context: {cluster: c1}\n"
	parse_err(HEAD CTX "users: [{name: u1, user: {token: t}}]\ncurrent-context: dev\n", "nope", PD_ENOTFOUND,
		  "kubeconfig /k/config: context \"nope\" not found (contexts: dev, prod)");
	parse_err(HEAD CTX "users: [{name: u1, user: {token: t}}]\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: current-context is not set and no context was given (contexts: dev, prod)");
	parse_err("{}", NULL, PD_EINVAL,
		  "kubeconfig /k/config: current-context is not set and no context was given (contexts: none)");
	parse_err("", "x", PD_ENOTFOUND, "kubeconfig /k/config: context \"x\" not found (contexts: none)");
	parse_err(HEAD "contexts: [{name: dev, context: {cluster: gone, user: u1}}]\n", "dev", PD_ENOTFOUND,
		  "kubeconfig /k/config: context \"dev\": cluster \"gone\" not found (clusters: c1)");
	parse_err(HEAD CTX, "dev", PD_ENOTFOUND,
		  "kubeconfig /k/config: context \"dev\": user \"u1\" not found (users: none)");
	parse_err(HEAD "contexts: [{name: dev, context: {user: u1}}]\n", "dev", PD_EINVAL,
		  "kubeconfig /k/config: context \"dev\": cluster is not set");
	parse_err("clusters: [{name: c1, cluster: {certificate-authority: /ca}}]\n"
		  "contexts: [{name: dev, context: {cluster: c1}}]\n",
		  "dev", PD_EINVAL, "kubeconfig /k/config: cluster \"c1\": server is not set");
	parse_err("clusters: [{name: c1, cluster: {server: 'ftp://h'}}]\ncontexts: [{name: dev, context: {cluster: c1}}]\n",
		  "dev", PD_EINVAL, "kubeconfig /k/config: cluster \"c1\": server \"ftp://h\": the scheme must be https or http");
	parse_err("clusters: hello\n", NULL, PD_EINVAL, "kubeconfig /k/config: clusters: expected a list, got a string");
	parse_err("- a\n- b\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: expected a mapping at the top level, got a list");
	parse_err("clusters: [{name: c1, cluster: [1]}]\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": cluster: expected a mapping, got a list");
	parse_err("clusters: [{name: c1, cluster: {server: {a: b}}}]\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": server: expected a string, got a mapping");
	parse_err("clusters: [{name: c1, cluster: {server: h, insecure-skip-tls-verify: maybe}}]\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": insecure-skip-tls-verify: expected true or false, got \"maybe\"");
	parse_err("clusters: [\n  {name: c1\n", NULL, PD_EINVAL,
		  "kubeconfig /k/config: line 3 column 1: did not find expected ',' or '}' while parsing a flow mapping");
	parse_err("current-context: dev\nusers: [{name: u1, user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}}]\n"
		  HEAD CTX,
		  NULL, PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": exec: interactiveMode must be specified for u1 to use exec authentication plugin");
	parse_err("current-context: dev\nusers: [{name: u1, user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1alpha1}}}]\n"
		  HEAD CTX,
		  NULL, PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": exec: apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported (use client.authentication.k8s.io/v1 or v1beta1)");
	parse_err("current-context: dev\nusers: [{name: u1, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1}}}]\n"
		  HEAD CTX,
		  NULL, PD_EINVAL, "kubeconfig /k/config: user \"u1\": exec: command must be specified");
	parse_err("current-context: dev\nusers: [{name: u1, user: {auth-provider: {name: gcp, config: {}}}}]\n" HEAD CTX,
		  NULL, PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": auth-provider \"gcp\" is not supported: use the provider's exec credential plugin (e.g. gke-gcloud-auth-plugin, kubelogin)");
	parse_err("current-context: dev\nusers: [{name: u1, user: {token: t, username: a, password: b}}]\n" HEAD CTX, NULL,
		  PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": more than one authentication method found (token and username/password); only one is allowed");
	parse_err("current-context: dev\nusers: [{name: u1, user: {client-certificate: /c.pem}}]\n" HEAD CTX, NULL,
		  PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": client-certificate is set but client-key is not: both are needed for a client certificate");
	parse_err("current-context: dev\nusers: [{name: u1, user: {token: \"a b\"}}]\n" HEAD CTX, NULL, PD_EINVAL,
		  "kubeconfig /k/config: user \"u1\": token: contains spaces or control characters");
	parse_err("current-context: dev\nusers: [{name: u1, user: {token: \"a\\r\\nX-Evil: 1\"}}]\n" HEAD CTX, NULL,
		  PD_EINVAL, "kubeconfig /k/config: user \"u1\": token: contains spaces or control characters");
	parse_err("clusters: [{name: c1, cluster: {server: h, certificate-authority-data: 'Zm9!'}}]\n"
		  "contexts: [{name: dev, context: {cluster: c1}}]\n",
		  "dev", PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": certificate-authority-data: invalid base64 at byte 3");
	parse_err("clusters: [{name: c1, cluster: {server: h, certificate-authority-data: Zm9vYmFy}}]\n"
		  "contexts: [{name: dev, context: {cluster: c1}}]\n",
		  "dev", PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": certificate-authority-data: not PEM data (no \"-----BEGIN\" line after base64 decoding)");
	parse_err("clusters: [{name: c1, cluster: {server: h, certificate-authority: ca.crt, insecure-skip-tls-verify: true}}]\n"
		  "contexts: [{name: dev, context: {cluster: c1}}]\n",
		  "dev", PD_EINVAL,
		  "kubeconfig /k/config: cluster \"c1\": specifying a root certificates file with the insecure flag is not allowed (certificate-authority and insecure-skip-tls-verify)");
	/* an alias bomb is bounded by the walk budget, not followed forever */
	struct pd_buf bomb = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&bomb, "a: &a [x, x, x, x, x, x, x, x, x, x]\n", 37), 0);
	for (int i = 0; i < 8; i++) {
		char line[200];
		snprintf(line, sizeof line, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", 'b' + i, 'b' + i,
			 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i);
		assert_int_equal(pd_buf_append(&bomb, line, strlen(line)), 0);
	}
	assert_int_equal(pd_buf_append(&bomb, "clusters: [*i, *i]\n", 19), 0);
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	assert_true(pd_kube_config_parse("/k/config", bomb.ptr, bomb.len, NULL, &cfg, &err) < 0);
	assert_null(cfg);
	pd_buf_free(&bomb);
#undef HEAD
#undef CTX
}

static void test_config_files_and_paths(void **state)
{
	(void)state;
	wfile("conf/ca.crt", CA_PEM);
	wfile("conf/certs/admin.crt", CERT_PEM);
	wfile_mode("conf/certs/admin.key", KEY_PEM, 0600);
	wfile_mode("conf/token", "  file-token-1\n", 0600);
	wfile("conf/config", "apiVersion: v1\n"
			     "clusters:\n"
			     "- cluster:\n"
			     "    certificate-authority: ca.crt\n"
			     "    server: https://192.168.49.2:8443\n"
			     "  name: minikube\n"
			     "contexts:\n"
			     "- context:\n"
			     "    cluster: minikube\n"
			     "    namespace: default\n"
			     "    user: minikube\n"
			     "  name: minikube\n"
			     "current-context: minikube\n"
			     "kind: Config\n"
			     "users:\n"
			     "- name: minikube\n"
			     "  user:\n"
			     "    client-certificate: certs/admin.crt\n"
			     "    client-key: certs/admin.key\n"
			     "    tokenFile: ./token\n"
			     "- name: plug\n"
			     "  user:\n"
			     "    exec:\n"
			     "      command: ./bin/plugin\n"
			     "      apiVersion: client.authentication.k8s.io/v1beta1\n"
			     "      args: [get-token, --cluster=x]\n"
			     "      env: [{name: A, value: '1'}, {name: B, value: ''}]\n"
			     "      provideClusterInfo: true\n"
			     "- name: plug2\n"
			     "  user:\n"
			     "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}\n");
	struct pd_kube_opts o = {.kubeconfig = tp("conf/config")};
	struct pd_kube_config *cfg = load_ok(&o);
	char want[600];
	snprintf(want, sizeof want, "%s/conf/ca.crt", tmp);
	assert_str(cfg->ca_file, want);
	assert_blob(cfg->ca, CA_PEM);
	snprintf(want, sizeof want, "%s/conf/certs/admin.crt", tmp);
	assert_str(cfg->cert_file, want);
	assert_blob(cfg->cert, CERT_PEM);
	assert_blob(cfg->key, KEY_PEM);
	snprintf(want, sizeof want, "%s/conf/./token", tmp);
	assert_str(cfg->token_file, want);
	pd_kube_config_free(cfg);

	/* parse only: paths resolved, nothing read */
	char *text = read_all(tp("conf/config"));
	struct pd_err err = {0, ""};
	assert_int_equal(pd_kube_config_parse(tp("conf/config"), text, strlen(text), NULL, &cfg, &err), 0);
	snprintf(want, sizeof want, "%s/conf/ca.crt", tmp);
	assert_str(cfg->ca_file, want);
	assert_int_equal(cfg->ca.len, 0);
	assert_int_equal(cfg->cert.len, 0);
	pd_kube_config_free(cfg);

	/* exec: a command with '/' is relative to the kubeconfig; one without is looked up in $PATH */
	wfile("conf/ctx2", "");
	char yaml[4096];
	snprintf(yaml, sizeof yaml, "%s\ncontexts: [{name: p, context: {cluster: minikube, user: plug}},"
				    " {name: p2, context: {cluster: minikube, user: plug2}}]\n",
		 text);
	/* "contexts" appears twice: the last one wins, as Go's decoder does */
	assert_int_equal(pd_kube_config_parse(tp("conf/config"), yaml, strlen(yaml), "p", &cfg, &err), 0);
	assert_non_null(cfg->exec);
	snprintf(want, sizeof want, "%s/conf/./bin/plugin", tmp);
	assert_str(cfg->exec->command, want);
	assert_int_equal(cfg->exec->nargs, 2);
	assert_str(cfg->exec->args[1], "--cluster=x");
	assert_int_equal(cfg->exec->nenv, 2);
	assert_str(cfg->exec->env[0], "A=1");
	assert_str(cfg->exec->env[1], "B=");
	assert_true(cfg->exec->provide_cluster_info);
	assert_int_equal(cfg->exec->interactive, PD_KUBE_EXEC_IF_AVAILABLE);
	assert_str(cfg->exec->api_version, "client.authentication.k8s.io/v1beta1");
	pd_kube_config_free(cfg);
	assert_int_equal(pd_kube_config_parse(tp("conf/config"), yaml, strlen(yaml), "p2", &cfg, &err), 0);
	assert_str(cfg->exec->command, "aws");
	assert_int_equal(cfg->exec->interactive, PD_KUBE_EXEC_NEVER);
	pd_kube_config_free(cfg);
	free(text);

	/* a missing file the config names: the error says which file, user and field */
	remove(tp("conf/certs/admin.key"));
	assert_int_equal(load_err(&o, &err), PD_EIO);
	snprintf(want, sizeof want, "kubeconfig %s/conf/config: user \"minikube\": client-key: %s/conf/certs/admin.key: No such file or directory",
		 tmp, tmp);
	assert_str(err.msg, want);
	/* not PEM */
	wfile("conf/certs/admin.key", "garbage");
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	snprintf(want, sizeof want, "kubeconfig %s/conf/config: user \"minikube\": client-key %s/conf/certs/admin.key: not a PEM file (no \"-----BEGIN\" line)",
		 tmp, tmp);
	assert_str(err.msg, want);

	/* an explicit --kubeconfig must exist */
	o.kubeconfig = tp("nope");
	assert_int_equal(load_err(&o, &err), PD_EIO);
	snprintf(want, sizeof want, "kubeconfig: %s/nope: No such file or directory", tmp);
	assert_str(err.msg, want);
}

static void test_config_kubeconfig_merge(void **state)
{
	(void)state;
	wfile("a.yaml", "current-context: ctx-b\n"
			"clusters:\n- name: shared\n  cluster: {server: 'https://from-a'}\n"
			"users:\n- name: u-a\n  user: {token: ta}\n");
	wfile("b.yaml", "current-context: ctx-a\n"
			"clusters:\n- name: shared\n  cluster: {server: 'https://from-b'}\n"
			"- name: only-b\n  cluster: {server: 'https://only-b'}\n"
			"contexts:\n- name: ctx-b\n  context: {cluster: shared, user: u-b, namespace: nb}\n"
			"- name: ctx-a\n  context: {cluster: only-b, user: u-a}\n"
			"users:\n- name: u-b\n  user: {token: tb}\n- name: u-a\n  user: {token: ignored}\n");
	char env[1024];
	/* a missing file in the list is skipped; a repeated one read once */
	snprintf(env, sizeof env, "%s:%s/missing.yaml::%s:%s", tp("a.yaml"), tmp, tp("b.yaml"), tp("a.yaml"));
	setenv("KUBECONFIG", env, 1);
	struct pd_kube_config *cfg = load_ok(NULL);
	char want[1024];
	snprintf(want, sizeof want, "kubeconfig %s/a.yaml:%s/b.yaml", tmp, tmp);
	assert_str(cfg->origin, want);
	assert_str(cfg->context, "ctx-b");      /* the first file that sets current-context */
	assert_str(cfg->server, "https://from-a"); /* first file wins per cluster name */
	assert_str(cfg->token, "tb");
	assert_str(cfg->namespace, "nb");
	pd_kube_config_free(cfg);

	struct pd_kube_opts o = {.context = "ctx-a"};
	cfg = load_ok(&o);
	assert_str(cfg->server, "https://only-b");
	assert_str(cfg->token, "ta"); /* u-a from a.yaml, not b.yaml's */
	pd_kube_config_free(cfg);

	struct pd_err err = {0, ""};
	o.context = "ctx-c";
	assert_int_equal(load_err(&o, &err), PD_ENOTFOUND);
	snprintf(want, sizeof want, "kubeconfig %s/a.yaml:%s/b.yaml: context \"ctx-c\" not found (contexts: ctx-b, ctx-a)",
		 tmp, tmp);
	assert_str(err.msg, want);

	/* a YAML error names its file */
	wfile("b.yaml", "clusters: [\n");
	o.context = NULL;
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	snprintf(want, sizeof want, "kubeconfig %s/b.yaml: line 2 column 1:", tmp);
	assert_has(err.msg, want);

	/* none of the files exist, not in a cluster */
	snprintf(env, sizeof env, "%s/x:%s/y", tmp, tmp);
	setenv("KUBECONFIG", env, 1);
	assert_int_equal(load_err(NULL, &err), PD_ENOTFOUND);
	snprintf(want, sizeof want, "no kubeconfig: none of the files in $KUBECONFIG (%s/x:%s/y) exists and not running in a cluster (KUBERNETES_SERVICE_HOST is unset)",
		 tmp, tmp);
	assert_str(err.msg, want);
}

static void test_config_home_default(void **state)
{
	(void)state;
	struct pd_err err = {0, ""};
	char want[1024];
	assert_int_equal(load_err(NULL, &err), PD_ENOTFOUND);
	snprintf(want, sizeof want, "no kubeconfig: %s/.kube/config does not exist and not running in a cluster (KUBERNETES_SERVICE_HOST is unset); use --kubeconfig or set $KUBECONFIG",
		 tmp);
	assert_str(err.msg, want);
	wfile(".kube/config", "clusters: [{name: c, cluster: {server: 'https://home'}}]\n"
			      "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n");
	struct pd_kube_config *cfg = load_ok(NULL);
	assert_str(cfg->server, "https://home");
	pd_kube_config_free(cfg);
	/* mode in-cluster ignores it */
	struct pd_kube_opts o = {.mode = PD_KUBE_IN_CLUSTER};
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	assert_str(err.msg, "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a pod?)");
}

static void test_config_in_cluster(void **state)
{
	(void)state;
	wfile_mode("sa/token", "\n eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.sa.sig \n", 0600);
	wfile("sa/ca.crt", CA_PEM);
	wfile("sa/namespace", "ops\n");
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	struct pd_kube_opts o = {.sa_dir = tp("sa")};
	/* AUTO: no kubeconfig anywhere, inside a pod -> the service account */
	struct pd_kube_config *cfg = load_ok(&o);
	assert_int_equal(cfg->source, PD_KUBE_SRC_IN_CLUSTER);
	assert_str(cfg->server, "https://10.96.0.1:443");
	assert_str(cfg->token, "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.sa.sig");
	char want[600];
	snprintf(want, sizeof want, "%s/sa/token", tmp);
	assert_str(cfg->token_file, want);
	assert_blob(cfg->ca, CA_PEM);
	assert_str(cfg->namespace, "ops");
	assert_null(cfg->context);
	pd_kube_config_free(cfg);

	/* an empty kubeconfig also falls back (client-go's rule) ... */
	wfile(".kube/config", "");
	cfg = load_ok(&o);
	assert_int_equal(cfg->source, PD_KUBE_SRC_IN_CLUSTER);
	pd_kube_config_free(cfg);
	/* ... but KUBECONFIG mode does not */
	struct pd_err err = {0, ""};
	o.mode = PD_KUBE_KUBECONFIG;
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	assert_has(err.msg, "current-context is not set");

	o.mode = PD_KUBE_IN_CLUSTER;
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	remove(tp("sa/namespace"));
	cfg = load_ok(&o);
	assert_str(cfg->server, "https://[fd00:10:96::1]:443");
	assert_str(cfg->namespace, "default");
	pd_kube_config_free(cfg);

	remove(tp("sa/token"));
	assert_int_equal(load_err(&o, &err), PD_EIO);
	snprintf(want, sizeof want, "in-cluster config: service account token: %s/sa/token: No such file or directory", tmp);
	assert_str(err.msg, want);
	wfile("sa/token", " \n");
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	snprintf(want, sizeof want, "in-cluster config: service account token %s/sa/token: empty", tmp);
	assert_str(err.msg, want);
	wfile("sa/token", "t");
	remove(tp("sa/ca.crt"));
	assert_int_equal(load_err(&o, &err), PD_EIO);
	snprintf(want, sizeof want, "in-cluster config: service account CA: %s/sa/ca.crt: No such file or directory", tmp);
	assert_str(err.msg, want);
	setenv("KUBERNETES_SERVICE_PORT", "https", 1);
	assert_int_equal(load_err(&o, &err), PD_EINVAL);
	assert_str(err.msg, "in-cluster config: KUBERNETES_SERVICE_PORT \"https\" is not a port number");
}

/* ---- exec credential plugins ---------------------------------------------------------- */

static void test_exec_cred_parse(void **state)
{
	(void)state;
	const char *v1 = "client.authentication.k8s.io/v1";
	struct kube_cred c;
	struct pd_err err = {0, ""};
#define CP(json) kube_exec_cred_parse(json, strlen(json), v1, &c, &err)
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"spec\":{},"
			    "\"status\":{\"token\":\"k8s-aws-v1.abc\",\"expirationTimestamp\":\"2024-05-02T10:00:00Z\"}}"),
			 0);
	assert_str(c.token, "k8s-aws-v1.abc");
	assert_true(c.expiry == 1714644000);
	assert_null(c.cert);
	kube_cred_clear(&c);
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
			    "\"status\":{\"clientCertificateData\":\"" "-----BEGIN CERTIFICATE-----\\nX\\n-----END CERTIFICATE-----\\n"
			    "\",\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\nY\\n-----END PRIVATE KEY-----\\n\"}}"),
			 0);
	assert_null(c.token);
	assert_non_null(c.cert);
	assert_int_equal(c.expiry, 0);
	assert_str((const char *)c.key, "-----BEGIN PRIVATE KEY-----\nY\n-----END PRIVATE KEY-----\n");
	kube_cred_clear(&c);
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"status\":{\"token\":\"t\"}}"),
			 PD_EINVAL);
	assert_str(err.msg, "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version client.authentication.k8s.io/v1beta1");
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\"}"), PD_EINVAL);
	assert_str(err.msg, "exec plugin didn't return a status field");
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{}}"),
			 PD_EINVAL);
	assert_str(err.msg, "exec plugin didn't return a token or cert/key pair");
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":"
			    "{\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\n\"}}"),
			 PD_EINVAL);
	assert_str(err.msg, "exec plugin returned only clientKeyData: clientCertificateData and clientKeyData must both be set");
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":"
			    "{\"token\":\"t\",\"expirationTimestamp\":\"soon\"}}"),
			 PD_EINVAL);
	assert_str(err.msg, "exec plugin: ExecCredential status.expirationTimestamp: not an RFC 3339 time");
	assert_int_equal(CP("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":"
			    "{\"token\":\"t\\nHost: evil\"}}"),
			 PD_EINVAL);
	assert_str(err.msg, "exec plugin: the token contains spaces or control characters");
	assert_int_equal(CP("Please log in at https://login.example.com/device\n"), PD_EINVAL);
	assert_str(err.msg, "exec plugin: ExecCredential: line 1 column 6 (byte 6): '[' or '{' expected near 'Please'");
	assert_int_equal(CP("{\"kind\":\"Status\"}"), PD_EINVAL);
	assert_str(err.msg, "exec plugin: output is not an ExecCredential (kind \"Status\")");
#undef CP
}

/* The plugin: counts its runs, records its environment, prints a token made
 * of its first argument and the run count, expiring at $EXP. */
static const char plugin_sh[] =
	"#!/bin/sh\n"
	"n=$(cat \"$STATE/count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$STATE/count\"\n"
	"printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$STATE/info\"\n"
	"printf '%s %s' \"$#\" \"$2\" > \"$STATE/args\"\n"
	"printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
	"\"status\":{\"token\":\"exec-%s-%s\",\"expirationTimestamp\":\"%s\"}}\\n' \"$1\" \"$n\" \"$EXP\"\n";

static struct pd_kube_config *exec_config(const char *server, const char *command, const char *exp, const char *extra)
{
	char yaml[4096];
	snprintf(yaml, sizeof yaml,
		 "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
		 "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
		 "users:\n- name: u\n  user:\n    exec:\n"
		 "      apiVersion: client.authentication.k8s.io/v1beta1\n"
		 "      command: %s\n"
		 "      args: [tok, \"second arg\"]\n"
		 "      installHint: 'install it with: apt install plugin'\n"
		 "      provideClusterInfo: true\n"
		 "      env: [{name: STATE, value: '%s'}, {name: EXP, value: '%s'}]\n%s",
		 server, "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=", command, tmp,
		 exp, extra ? extra : "");
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	if (pd_kube_config_parse(tp("kc"), yaml, strlen(yaml), NULL, &cfg, &err))
		fail_msg("%s", err.msg);
	return cfg;
}

static void test_exec_run(void **state)
{
	(void)state;
	wfile_mode("plugin.sh", plugin_sh, 0755);
	struct pd_kube_config *cfg = exec_config("https://k.example:6443", tp("plugin.sh"), "2030-01-01T00:00:00Z", NULL);
	struct kube_cred c;
	struct pd_err err = {0, ""};
	if (kube_exec_run(cfg, 10000, &c, &err))
		fail_msg("%s", err.msg);
	assert_str(c.token, "exec-tok-1");
	assert_true(c.expiry == 1893456000);
	kube_cred_clear(&c);
	char *args = read_all(tp("args"));
	assert_str(args, "2 second arg");
	free(args);
	char *info = read_all(tp("info"));
	assert_str(info, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"spec\":"
			 "{\"interactive\":false,\"cluster\":{\"server\":\"https://k.example:6443\",\"certificate-authority-data\":"
			 "\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\"}}}");
	free(info);
	pd_kube_config_free(cfg);

	/* not found: the install hint */
	cfg = exec_config("https://k", "no-such-plugin-xyz", "", NULL);
	assert_int_equal(kube_exec_run(cfg, 10000, &c, &err), PD_ENOTFOUND);
	assert_str(err.msg, "exec plugin: executable no-such-plugin-xyz not found\n\ninstall it with: apt install plugin");
	pd_kube_config_free(cfg);

	/* failing, garbage, too much, too slow */
	wfile_mode("fail.sh", "#!/bin/sh\necho 'error: you must be logged in' >&2\nexit 3\n", 0755);
	cfg = exec_config("https://k", tp("fail.sh"), "", NULL);
	/* silence the plugin's stderr */
	int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	int rc = kube_exec_run(cfg, 10000, &c, &err);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	assert_int_equal(rc, PD_EIO);
	char want[600];
	snprintf(want, sizeof want, "exec plugin: executable %s failed with exit code 3", tp("fail.sh"));
	assert_str(err.msg, want);
	pd_kube_config_free(cfg);

	wfile_mode("garbage.sh", "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",'\n", 0755);
	cfg = exec_config("https://k", tp("garbage.sh"), "", NULL);
	assert_int_equal(kube_exec_run(cfg, 10000, &c, &err), PD_EINVAL);
	assert_has(err.msg, ": exec plugin: ExecCredential: line 2 column 0 (byte 26): ");
	pd_kube_config_free(cfg);

	wfile_mode("big.sh", "#!/bin/sh\nhead -c 1100000 /dev/zero\n", 0755);
	cfg = exec_config("https://k", tp("big.sh"), "", NULL);
	assert_int_equal(kube_exec_run(cfg, 10000, &c, &err), PD_ELIMIT);
	assert_has(err.msg, "output over the 1048576-byte limit (killed)");
	pd_kube_config_free(cfg);

	wfile_mode("slow.sh", "#!/bin/sh\nexec sleep 10\n", 0755);
	cfg = exec_config("https://k", tp("slow.sh"), "", NULL);
	double t0 = pd_now();
	assert_int_equal(kube_exec_run(cfg, 300, &c, &err), PD_EIO);
	assert_true(pd_now() - t0 < 5);
	assert_has(err.msg, "no answer within 300 ms (killed)");
	pd_kube_config_free(cfg);
}

/* ---- pods ------------------------------------------------------------------------- */

static void parse_pod_file(const char *name, struct pd_arena *a, struct pd_kube_pod *p)
{
	char *json = data_file(name);
	struct pd_err err = {0, ""};
	if (pd_kube_pod_parse(json, strlen(json), a, p, &err))
		fail_msg("%s: %s", name, err.msg);
	free(json);
}

static void assert_workload(const struct pd_kube_pod *p, const char *kind, const char *name)
{
	char buf[256];
	const char *k = NULL;
	assert_ptr_equal(pd_kube_pod_workload(p, buf, sizeof buf, &k), buf);
	assert_str(k, kind);
	assert_str(buf, name);
}

static void test_pod_deployment(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	parse_pod_file("pod_deployment.json", a, &p);
	assert_str(p.namespace, "shop");
	assert_str(p.name, "checkout-7d4b9c8f6-x2kqp");
	assert_str(p.uid, "0c7f3d52-8a41-4b7a-a1f3-6f3c9de2b0a4");
	assert_str(p.resource_version, "48213377");
	assert_str(p.phase, "Running");
	assert_str(p.pod_ip, "10.52.3.41");
	assert_str(p.node_name, "gke-prod-pool-1-9f8e7d6c-abcd");
	assert_true(p.ready);
	assert_false(p.deleting);
	assert_int_equal(p.nlabels, 3);
	assert_str(p.labels[0].key, "app"); /* object order */
	assert_str(p.labels[2].key, "version");
	assert_str(pd_kube_pod_label(&p, "pod-template-hash"), "7d4b9c8f6");
	assert_null(pd_kube_pod_label(&p, "nope"));
	assert_int_equal(p.nannotations, 4);
	assert_str(pd_kube_pod_annotation(&p, "profefe.com/port"), "6060");
	assert_int_equal(p.nowners, 1);
	assert_str(p.owners[0].kind, "ReplicaSet");
	assert_str(p.owners[0].name, "checkout-7d4b9c8f6");
	assert_true(p.owners[0].controller);
	assert_int_equal(p.ncontainers, 2);
	assert_str(p.containers[0].name, "checkout");
	assert_int_equal(p.containers[0].nports, 2);
	assert_str(p.containers[0].ports[1].name, "pprof");
	assert_int_equal(p.containers[0].ports[1].port, 6060);
	assert_str(p.containers[0].ports[1].protocol, "TCP");
	assert_str(p.containers[1].name, "envoy");
	assert_int_equal(p.containers[1].nports, 0);
	assert_workload(&p, "Deployment", "checkout");

	/* a deep copy outlives the arena it came from */
	struct pd_arena *b = pd_arena_new(0);
	struct pd_kube_pod q;
	assert_int_equal(pd_kube_pod_copy(b, &p, &q), 0);
	pd_arena_free(a);
	assert_str(q.name, "checkout-7d4b9c8f6-x2kqp");
	assert_str(q.containers[0].ports[1].name, "pprof");
	assert_str(q.owners[0].name, "checkout-7d4b9c8f6");
	assert_str(pd_kube_pod_annotation(&q, "profefe.com/service"), "checkout");
	assert_workload(&q, "Deployment", "checkout");
	pd_arena_free(b);
}

static void test_pod_other_shapes(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	parse_pod_file("pod_statefulset_terminating.json", a, &p);
	assert_true(p.deleting);
	assert_false(p.ready);
	assert_str(p.phase, "Running");
	assert_int_equal(p.containers[0].nports, 2);
	assert_null(p.containers[0].ports[1].name);
	assert_str(p.containers[0].ports[1].protocol, "UDP");
	assert_workload(&p, "StatefulSet", "influxdb");

	parse_pod_file("pod_pending.json", a, &p);
	assert_str(p.phase, "Pending");
	assert_null(p.pod_ip);
	assert_null(p.node_name);
	assert_null(p.annotations);
	assert_int_equal(p.nowners, 0);
	assert_false(p.ready);
	assert_workload(&p, "Pod", "debug");

	char *json = data_file("podlist.json");
	struct pd_kube_pod_page page;
	struct pd_err err = {0, ""};
	if (pd_kube_pod_page_parse(json, strlen(json), a, &page, &err))
		fail_msg("%s", err.msg);
	free(json);
	assert_int_equal(page.n, 3);
	assert_str(page.resource_version, "48100020");
	assert_non_null(page.continue_token);
	assert_int_equal(strncmp(page.continue_token, "eyJ2Ijoib", 9), 0);
	assert_workload(&page.items[0], "DaemonSet", "node-exporter");
	assert_workload(&page.items[1], "CronJob", "backup");
	assert_str(page.items[1].phase, "Succeeded");
	assert_workload(&page.items[2], "Pod", "kube-apiserver"); /* mirror pod: name minus "-<node>" */
	assert_int_equal(page.items[0].containers[0].ports[0].port, 9100);

	/* an empty last page */
	const char *last = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}";
	assert_int_equal(pd_kube_pod_page_parse(last, strlen(last), a, &page, &err), 0);
	assert_int_equal(page.n, 0);
	assert_null(page.continue_token);
	assert_str(page.resource_version, "7");
	const char *st = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\"}";
	assert_int_equal(pd_kube_pod_page_parse(st, strlen(st), a, &page, &err), PD_EINVAL);
	assert_str(err.msg, "pod list JSON: expected a PodList, got a Status");
	pd_arena_free(a);
}

/* A minimal pod with the given owners JSON and labels JSON. */
static void mkpod(struct pd_arena *a, struct pd_kube_pod *p, const char *name, const char *owners, const char *labels)
{
	char json[2048];
	snprintf(json, sizeof json,
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"n\",\"ownerReferences\":[%s],\"labels\":{%s}}}", name,
		 owners, labels);
	struct pd_err err = {0, ""};
	if (pd_kube_pod_parse(json, strlen(json), a, p, &err))
		fail_msg("%s: %s", json, err.msg);
}

static void test_workload_rules(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	static const struct {
		const char *pod, *owners, *labels, *kind, *name;
	} cases[] = {
		{"web-5f7b9d4c8-abcde", "{\"kind\":\"ReplicaSet\",\"name\":\"web-5f7b9d4c8\",\"controller\":true}",
		 "\"pod-template-hash\":\"5f7b9d4c8\"", "Deployment", "web"},
		/* no label: a suffix from the hash alphabet */
		{"api-v2-6c8d9f7b5d-xx", "{\"kind\":\"ReplicaSet\",\"name\":\"api-v2-6c8d9f7b5d\",\"controller\":true}", "",
		 "Deployment", "api-v2"},
		/* no label, not a hash ("frontend" has vowels): a bare ReplicaSet */
		{"web-frontend-xx", "{\"kind\":\"ReplicaSet\",\"name\":\"web-frontend\",\"controller\":true}", "",
		 "ReplicaSet", "web-frontend"},
		/* label that is not the suffix */
		{"rs-1", "{\"kind\":\"ReplicaSet\",\"name\":\"web-abc\"}", "\"pod-template-hash\":\"zzz\"", "ReplicaSet",
		 "web-abc"},
		{"migrate-2-x", "{\"kind\":\"Job\",\"name\":\"migrate-2\",\"controller\":true}", "", "Job", "migrate-2"},
		{"report-1234567-x", "{\"kind\":\"Job\",\"name\":\"report-1234567\",\"controller\":true}", "", "Job",
		 "report-1234567"},
		{"nightly-28593810-q", "{\"kind\":\"Job\",\"name\":\"nightly-28593810\",\"controller\":true}", "", "CronJob",
		 "nightly"},
		{"ds-x", "{\"kind\":\"DaemonSet\",\"name\":\"fluent-bit\",\"controller\":true}", "", "DaemonSet",
		 "fluent-bit"},
		/* the controller wins over an earlier non-controller owner */
		{"x-1", "{\"kind\":\"ConfigMap\",\"name\":\"cm\"},{\"kind\":\"StatefulSet\",\"name\":\"db\",\"controller\":true}",
		 "", "StatefulSet", "db"},
		/* no controller: the first owner */
		{"x-2", "{\"kind\":\"Rollout\",\"name\":\"canary\"}", "", "Rollout", "canary"},
		{"etcd-cp-1", "{\"kind\":\"Node\",\"name\":\"cp-1\",\"controller\":true}", "", "Pod", "etcd"},
		{"odd", "{\"kind\":\"Node\",\"name\":\"cp-1\",\"controller\":true}", "", "Pod", "odd"},
		{"lonely", "", "", "Pod", "lonely"},
		/* a hash-only name is not stripped to nothing */
		{"h", "{\"kind\":\"ReplicaSet\",\"name\":\"-bcdfg\"}", "", "ReplicaSet", "-bcdfg"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		mkpod(a, &p, cases[i].pod, cases[i].owners, cases[i].labels);
		char buf[64];
		const char *k;
		pd_kube_pod_workload(&p, buf, sizeof buf, &k);
		if (strcmp(k, cases[i].kind) || strcmp(buf, cases[i].name))
			fail_msg("case %zu (%s): got %s/%s, want %s/%s", i, cases[i].pod, k, buf, cases[i].kind,
				 cases[i].name);
	}
	/* truncation */
	mkpod(a, &p, "web-5f7b9d4c8-abcde", "{\"kind\":\"ReplicaSet\",\"name\":\"web-5f7b9d4c8\",\"controller\":true}",
	      "\"pod-template-hash\":\"5f7b9d4c8\"");
	char small[3];
	assert_str(pd_kube_pod_workload(&p, small, sizeof small, NULL), "we");
	pd_arena_free(a);
}

static void pod_err(const char *json, int code, const char *want)
{
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	struct pd_err err = {0, ""};
	int rc = pd_kube_pod_parse(json, strlen(json), a, &p, &err);
	if (rc != code)
		fail_msg("%s: rc %d (%s), want %d", json, rc, err.msg, code);
	assert_str(err.msg, want);
	assert_null(p.name);
	pd_arena_free(a);
}

static void test_pod_errors(void **state)
{
	(void)state;
#define MD "\"metadata\":{\"name\":\"p\",\"namespace\":\"n\""
	pod_err("{\"metadata\":", PD_EINVAL, "pod JSON: line 1 column 12 (byte 12): unexpected token near end of file");
	pod_err("{\"metadata\":{\"name\":\"p\",}", PD_EINVAL,
		"pod JSON: line 1 column 25 (byte 25): string or '}' expected near '}'");
	pod_err("[]", PD_EINVAL, "pod JSON: expected an object, got an array");
	pod_err("{\"kind\":\"Service\"}", PD_EINVAL, "pod JSON: expected a Pod, got a Service");
	pod_err("{}", PD_EINVAL, "pod JSON: metadata: missing");
	pod_err("{\"metadata\":{\"namespace\":\"n\"}}", PD_EINVAL, "pod JSON: metadata.name: missing or empty");
	pod_err("{\"metadata\":{\"name\":\"p\"}}", PD_EINVAL, "pod JSON: metadata.namespace: missing or empty");
	pod_err("{\"metadata\":{\"name\":7,\"namespace\":\"n\"}}", PD_EINVAL,
		"pod JSON: metadata.name: expected a string, got a number");
	pod_err("{" MD ",\"labels\":{\"app\":true}}}", PD_EINVAL,
		"pod JSON: metadata.labels.app: expected a string, got a boolean");
	pod_err("{" MD ",\"labels\":[]}}", PD_EINVAL, "pod JSON: metadata.labels: expected an object, got an array");
	pod_err("{" MD ",\"ownerReferences\":[{\"kind\":\"ReplicaSet\"}]}}", PD_EINVAL,
		"pod JSON: metadata.ownerReferences[0].name: missing or empty");
	pod_err("{" MD ",\"ownerReferences\":[{\"kind\":\"A\",\"name\":\"b\",\"controller\":\"yes\"}]}}", PD_EINVAL,
		"pod JSON: metadata.ownerReferences[0].controller: expected a boolean, got a string");
	pod_err("{" MD "},\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":\"6060\"}]}]}}", PD_EINVAL,
		"pod JSON: spec.containers[0].ports[0].containerPort: expected an integer, got a string");
	pod_err("{" MD "},\"spec\":{\"containers\":[{\"name\":\"c\"},{\"name\":\"d\",\"ports\":[{},{\"containerPort\":70000}]}]}}",
		PD_EINVAL, "pod JSON: spec.containers[1].ports[0].containerPort: missing");
	pod_err("{" MD "},\"spec\":{\"containers\":[{\"name\":\"d\",\"ports\":[{\"containerPort\":70000}]}]}}", PD_EINVAL,
		"pod JSON: spec.containers[0].ports[0].containerPort: 70000 is not a port (1-65535)");
	pod_err("{" MD "},\"spec\":{\"containers\":{}}}", PD_EINVAL,
		"pod JSON: spec.containers: expected an array, got an object");
	pod_err("{" MD "},\"status\":{\"phase\":1}}", PD_EINVAL, "pod JSON: status.phase: expected a string, got a number");
	pod_err("{" MD ",\"deletionTimestamp\":5}}", PD_EINVAL,
		"pod JSON: metadata.deletionTimestamp: expected a string, got a number");
	/* nulls are absences */
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	struct pd_err err = {0, ""};
	const char *nulls = "{" MD ",\"labels\":null,\"deletionTimestamp\":null,\"ownerReferences\":null},\"spec\":null,\"status\":{\"podIP\":null}}";
	assert_int_equal(pd_kube_pod_parse(nulls, strlen(nulls), a, &p, &err), 0);
	assert_false(p.deleting);
	assert_null(p.pod_ip);
	/* caps */
	struct pd_buf big = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_append(&big, "{" MD ",\"labels\":{", strlen("{" MD ",\"labels\":{")), 0);
	for (int i = 0; i <= PD_KUBE_MAX_KV; i++) {
		char kv[32];
		int n = snprintf(kv, sizeof kv, "%s\"k%d\":\"v\"", i ? "," : "", i);
		assert_int_equal(pd_buf_append(&big, kv, (size_t)n), 0);
	}
	assert_int_equal(pd_buf_append(&big, "}}}", 3), 0);
	assert_int_equal(pd_kube_pod_parse(big.ptr, big.len, a, &p, &err), PD_ELIMIT);
	assert_str(err.msg, "pod JSON: metadata.labels: 4097 entries, over the limit of 4096");
	/* in a list, such a pod is kept as invalid (the others, and the list, go on); one
	 * without a readable namespace and name still fails the page */
	struct pd_buf page = PD_BUF_INIT(0);
	const char *head = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{" MD "}},";
	assert_int_equal(pd_buf_append(&page, head, strlen(head)), 0);
	assert_int_equal(pd_buf_append(&page, big.ptr, big.len - 2), 0); /* its metadata gets a uid */
	const char *tail = ",\"uid\":\"u-1\"}},{\"metadata\":{\"name\":\"q\",\"namespace\":\"n\"}}]}";
	assert_int_equal(pd_buf_append(&page, tail, strlen(tail)), 0);
	struct pd_kube_pod_page pg;
	if (pd_kube_pod_page_parse(page.ptr, page.len, a, &pg, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(pg.n, 3);
	assert_null(pg.items[0].invalid);
	assert_str(pg.items[1].name, "p");
	assert_str(pg.items[1].namespace, "n");
	assert_str(pg.items[1].uid, "u-1");
	assert_str(pg.items[1].invalid, "pod list JSON: items[1]: metadata.labels: 4097 entries, over the limit of 4096");
	assert_int_equal(pg.items[1].nlabels, 0);
	assert_null(pg.items[2].invalid);
	assert_str(pg.items[2].name, "q");
	const char *noname = "{\"items\":[{\"metadata\":{\"namespace\":\"n\",\"labels\":[]}}]}";
	assert_int_equal(pd_kube_pod_page_parse(noname, strlen(noname), a, &pg, &err), PD_EINVAL);
	assert_str(err.msg, "pod list JSON: items[0]: metadata.name: missing or empty");
	pd_buf_free(&page);
	pd_buf_free(&big);
	pd_arena_free(a);
#undef MD
}

static void test_proxy_path(void **state)
{
	(void)state;
	char buf[256];
	struct pd_err err = {0, ""};
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "influxdb-0", 6060, "/debug/pprof/profile?seconds=30",
						&err),
			 0);
	assert_str(buf, "/api/v1/namespaces/ops/pods/influxdb-0:6060/proxy/debug/pprof/profile?seconds=30");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "p", 0, "debug/pprof/", &err), 0);
	assert_str(buf, "/api/v1/namespaces/ops/pods/p/proxy/debug/pprof/");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "p", 8080, "a b/%/é?x=1 2", &err), 0);
	assert_str(buf, "/api/v1/namespaces/ops/pods/p:8080/proxy/a%20b/%25/%C3%A9?x=1%202");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "p", 1, NULL, &err), 0);
	assert_str(buf, "/api/v1/namespaces/ops/pods/p:1/proxy/");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "o/x", "p", 1, "", &err), PD_EINVAL);
	assert_str(err.msg, "invalid namespace \"o/x\"");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "..", 1, "", &err), PD_EINVAL);
	assert_str(err.msg, "invalid pod name \"..\"");
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "", 1, "", &err), PD_EINVAL);
	assert_int_equal(pd_kube_pod_proxy_path(buf, sizeof buf, "ops", "p", 70000, "", &err), PD_EINVAL);
	assert_int_equal(pd_kube_pod_proxy_path(buf, 30, "ops", "p", 1, "", &err), PD_ELIMIT);
	assert_str(buf, "");
	char exact[64];
	const char *want = "/api/v1/namespaces/ops/pods/p:1/proxy/ab";
	assert_int_equal(pd_kube_pod_proxy_path(exact, strlen(want) + 1, "ops", "p", 1, "ab", &err), 0);
	assert_str(exact, want);
	assert_int_equal(pd_kube_pod_proxy_path(exact, strlen(want), "ops", "p", 1, "ab", &err), PD_ELIMIT);
}

/* ---- the watch stream ------------------------------------------------------------------- */

struct evlog {
	char s[4096];
	int stop_after; /* return 7 after this many events (0 = never) */
	int n;
	atomic_int *flag; /* set after the first event */
};

static int on_event(void *ctx, const struct pd_kube_event *ev, struct pd_err *err)
{
	(void)err;
	struct evlog *l = ctx;
	static const char *const names[] = {"?", "ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
	size_t n = strlen(l->s);
	snprintf(l->s + n, sizeof l->s - n, "%s %s %s%s%s;", names[ev->type], ev->pod ? ev->pod->name : "-",
		 ev->resource_version, ev->pod && ev->pod->deleting ? " deleting" : "",
		 ev->pod && ev->pod->invalid ? " invalid" : "");
	l->n++;
	if (l->flag)
		atomic_store(l->flag, 1);
	return l->stop_after && l->n >= l->stop_after ? 7 : 0;
}

#define EV(type, name, rv, extra)                                                                            \
	"{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name \
	"\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv "\"" extra "},\"spec\":{\"containers\":[{\"name\":\"c\"," \
	"\"args\":[\"{\",\"}\\\"{\",\"[[\"]}]},\"status\":{\"phase\":\"Running\"}}}"
#define BOOKMARK(rv)                                                                                         \
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"" rv \
	"\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"

static const char watch_stream[] = EV("ADDED", "a-1", "101", "") "\n" EV("MODIFIED", "a-1", "102", "") "\r\n" BOOKMARK(
	"150") "\n\n" EV("DELETED", "a-1", "160", ",\"deletionTimestamp\":\"2024-05-02T10:00:00Z\"") EV("ADDED", "b-2", "161", "") "\n";
static const char watch_want[] = "ADDED a-1 101;MODIFIED a-1 102;BOOKMARK - 150;DELETED a-1 160 deleting;ADDED b-2 161;";

static void feed_all(struct pd_kube_watch_parser *p, const char *s, size_t n)
{
	struct pd_err err = {0, ""};
	if (pd_kube_watch_feed(p, s, n, &err))
		fail_msg("feed: %s", err.msg);
}

static void test_watch_splits(void **state)
{
	(void)state;
	size_t len = strlen(watch_stream);
	struct pd_err err = {0, ""};
	/* whole */
	struct evlog l = {"", 0, 0, NULL};
	struct pd_kube_watch_parser *p;
	assert_int_equal(pd_kube_watch_parser_new(0, on_event, &l, &p), 0);
	feed_all(p, watch_stream, len);
	assert_int_equal(pd_kube_watch_finish(p, &err), 0);
	assert_int_equal(pd_kube_watch_events(p), 5);
	pd_kube_watch_parser_free(p);
	assert_str(l.s, watch_want);
	/* every 2-way split */
	for (size_t i = 0; i <= len; i++) {
		struct evlog m = {"", 0, 0, NULL};
		assert_int_equal(pd_kube_watch_parser_new(0, on_event, &m, &p), 0);
		feed_all(p, watch_stream, i);
		feed_all(p, watch_stream + i, len - i);
		assert_int_equal(pd_kube_watch_finish(p, &err), 0);
		pd_kube_watch_parser_free(p);
		if (strcmp(m.s, watch_want))
			fail_msg("split at %zu: %s", i, m.s);
	}
	/* byte by byte */
	struct evlog m = {"", 0, 0, NULL};
	assert_int_equal(pd_kube_watch_parser_new(0, on_event, &m, &p), 0);
	for (size_t i = 0; i < len; i++)
		feed_all(p, watch_stream + i, 1);
	assert_int_equal(pd_kube_watch_finish(p, &err), 0);
	pd_kube_watch_parser_free(p);
	assert_str(m.s, watch_want);
	/* every 3-way split of a shorter stream (two events) */
	const char *s2 = EV("ADDED", "x", "1", "") "\n" BOOKMARK("2");
	size_t l2 = strlen(s2);
	for (size_t i = 0; i <= l2; i++) {
		for (size_t j = i; j <= l2; j++) {
			struct evlog k = {"", 0, 0, NULL};
			assert_int_equal(pd_kube_watch_parser_new(0, on_event, &k, &p), 0);
			feed_all(p, s2, i);
			feed_all(p, s2 + i, j - i);
			feed_all(p, s2 + j, l2 - j);
			assert_int_equal(pd_kube_watch_finish(p, &err), 0);
			pd_kube_watch_parser_free(p);
			if (strcmp(k.s, "ADDED x 1;BOOKMARK - 2;"))
				fail_msg("split at %zu,%zu: %s", i, j, k.s);
		}
	}
}

static void test_watch_410_and_errors(void **state)
{
	(void)state;
	struct pd_err err = {0, ""};
	struct pd_kube_watch_parser *p;
	const char *gone = EV("ADDED", "a", "5", "") "\n"
		"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
		"\"message\":\"too old resource version: 5 (4821)\",\"reason\":\"Expired\",\"code\":410}}\n" EV("ADDED", "b", "6", "") "\n";
	size_t len = strlen(gone);
	for (size_t i = 0; i <= len; i++) {
		struct evlog l = {"", 0, 0, NULL};
		assert_int_equal(pd_kube_watch_parser_new(0, on_event, &l, &p), 0);
		int rc = pd_kube_watch_feed(p, gone, i, &err);
		if (!rc)
			rc = pd_kube_watch_feed(p, gone + i, len - i, &err);
		assert_int_equal(rc, PD_KUBE_EGONE);
		assert_str(err.msg, "watch: ERROR event: 410 Expired: too old resource version: 5 (4821)");
		assert_str(l.s, "ADDED a 5;"); /* nothing after the ERROR */
		assert_int_equal(pd_kube_watch_feed(p, "{}", 2, &err), PD_KUBE_EGONE);
		assert_int_equal(pd_kube_watch_finish(p, &err), PD_KUBE_EGONE);
		pd_kube_watch_parser_free(p);
	}

	static const struct {
		const char *in;
		size_t max;
		int code;
		const char *msg;
	} cases[] = {
		{"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"etcdserver: request timed out\",\"reason\":\"InternalError\",\"code\":500}}",
		 0, PD_KUBE_EHTTP, "watch: ERROR event: 500 InternalError: etcdserver: request timed out"},
		{"  x", 0, PD_EINVAL, "watch stream: byte 2: expected '{' (an event object), got 0x78"},
		{"{\"type\":\"ADDED\",\"object\":{}}\n[", 0, PD_EINVAL,
		 "watch stream: event at byte 0: metadata: missing"},
		{"\n{\"type\":\"ADDED\" \"object\":{}}", 0, PD_EINVAL,
		 "watch stream: event at byte 1: line 1 column 24 (byte 24): '}' expected near '\"object\"'"},
		{"{\"type\":\"SYNC\",\"object\":{}}", 0, PD_EINVAL, "watch stream: event at byte 0: unknown event type \"SYNC\""},
		{"{\"type\":\"ADDED\"}", 0, PD_EINVAL, "watch stream: event at byte 0: object: missing or not an object"},
		{"{\"object\":{}}", 0, PD_EINVAL, "watch stream: event at byte 0: type: missing or not a string"},
		{"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}", 0, PD_EINVAL,
		 "watch stream: event at byte 0: BOOKMARK without object.metadata.resourceVersion"},
		{BOOKMARK("1") "\n" BOOKMARK("2"), 100, PD_ELIMIT, "watch stream: event at byte 0 is over the 100-byte limit"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct evlog l = {"", 0, 0, NULL};
		assert_int_equal(pd_kube_watch_parser_new(cases[i].max, on_event, &l, &p), 0);
		int rc = pd_kube_watch_feed(p, cases[i].in, strlen(cases[i].in), &err);
		if (rc != cases[i].code)
			fail_msg("case %zu: rc %d (%s)", i, rc, err.msg);
		assert_str(err.msg, cases[i].msg);
		pd_kube_watch_parser_free(p);
	}
	/* a pod that cannot be decoded (a label of the wrong type, over a cap) but has a namespace and
	 * a name: delivered as invalid, the stream goes on (it used to end it, and every watch again) */
	{
		const char *bad = EV("ADDED", "a", "5", ",\"labels\":{\"app\":true}") "\n" EV("ADDED", "b", "6", "") "\n";
		struct evlog lb = {"", 0, 0, NULL};
		assert_int_equal(pd_kube_watch_parser_new(0, on_event, &lb, &p), 0);
		assert_int_equal(pd_kube_watch_feed(p, bad, strlen(bad), &err), 0);
		assert_int_equal(pd_kube_watch_finish(p, &err), 0);
		assert_str(lb.s, "ADDED a 5 invalid;ADDED b 6;");
		pd_kube_watch_parser_free(p);
	}
	/* the cap holds across chunks too */
	struct evlog l = {"", 0, 0, NULL};
	assert_int_equal(pd_kube_watch_parser_new(100, on_event, &l, &p), 0);
	const char *bm = BOOKMARK("1");
	int rc = 0;
	for (size_t i = 0; !rc && i < strlen(bm); i++)
		rc = pd_kube_watch_feed(p, bm + i, 1, &err);
	assert_int_equal(rc, PD_ELIMIT);
	pd_kube_watch_parser_free(p);
	/* cut short */
	assert_int_equal(pd_kube_watch_parser_new(0, on_event, &l, &p), 0);
	feed_all(p, "\n{\"type\":", 9);
	assert_int_equal(pd_kube_watch_finish(p, &err), PD_EINVAL);
	assert_str(err.msg, "watch stream: ended inside the event at byte 1 (8 bytes received)");
	pd_kube_watch_parser_free(p);
	/* the callback's value stops the stream */
	struct evlog s = {"", 2, 0, NULL};
	assert_int_equal(pd_kube_watch_parser_new(0, on_event, &s, &p), 0);
	assert_int_equal(pd_kube_watch_feed(p, watch_stream, strlen(watch_stream), &err), 7);
	assert_str(s.s, "ADDED a-1 101;MODIFIED a-1 102;");
	pd_kube_watch_parser_free(p);
}

/* ---- an HTTP server in a thread ------------------------------------------------------------ */

struct hreq {
	char target[2048], auth[512], imp[512], accept[128], host[128];
};

struct hsrv;
typedef void (*handler_fn)(struct hsrv *s, int fd, const struct hreq *r);

#define HLOG 64
struct hsrv {
	int lfd, port;
	pthread_t th;
	atomic_int quit;
	handler_fn fn;
	void *ctx;
	pthread_mutex_t mu;
	struct hreq log[HLOG];
	int nlog;
};

static void sendall(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void reply(int fd, int status, const char *ctype, const char *body)
{
	char h[512];
	int n = snprintf(h, sizeof h, "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, ctype, strlen(body));
	sendall(fd, h, (size_t)n);
	sendall(fd, body, strlen(body));
}

static void reply_status(int fd, int code, const char *reason, const char *msg)
{
	char b[1024];
	snprintf(b, sizeof b,
		 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"%s\","
		 "\"reason\":\"%s\",\"code\":%d}\n",
		 msg, reason, code);
	reply(fd, code, "application/json", b);
}

static void hdr(const char *req, const char *name, char *out, size_t cap)
{
	out[0] = 0;
	size_t nl = strlen(name);
	for (const char *p = req; (p = strstr(p, "\r\n")); p += 2) {
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *v = p + 3 + nl, *e = strstr(v, "\r\n");
			while (*v == ' ')
				v++;
			size_t n = e ? (size_t)(e - v) : strlen(v);
			size_t used = strlen(out);
			snprintf(out + used, cap - used, "%s%.*s", used ? "|" : "", (int)n, v);
		}
	}
}

static void *hsrv_main(void *arg)
{
	struct hsrv *s = arg;
	while (!atomic_load(&s->quit)) {
		struct pollfd pf = {s->lfd, POLLIN, 0};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		char req[16384];
		size_t n = 0;
		while (n < sizeof req - 1) {
			struct pollfd q = {fd, POLLIN, 0};
			if (poll(&q, 1, 2000) <= 0)
				break;
			ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
			if (r <= 0)
				break;
			n += (size_t)r;
			req[n] = 0;
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[n] = 0;
		struct hreq hr;
		memset(&hr, 0, sizeof hr);
		const char *sp = strchr(req, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
		if (sp && sp2)
			snprintf(hr.target, sizeof hr.target, "%.*s", (int)(sp2 - sp - 1), sp + 1);
		hdr(req, "Authorization", hr.auth, sizeof hr.auth);
		hdr(req, "Impersonate-User", hr.imp, sizeof hr.imp);
		char groups[256];
		hdr(req, "Impersonate-Group", groups, sizeof groups);
		size_t il = strlen(hr.imp);
		snprintf(hr.imp + il, sizeof hr.imp - il, "%s%s", il && groups[0] ? "|" : "", groups);
		hdr(req, "Accept", hr.accept, sizeof hr.accept);
		hdr(req, "Host", hr.host, sizeof hr.host);
		pthread_mutex_lock(&s->mu);
		if (s->nlog < HLOG)
			s->log[s->nlog++] = hr;
		pthread_mutex_unlock(&s->mu);
		s->fn(s, fd, &hr);
		close(fd);
	}
	return NULL;
}

static void hsrv_start(struct hsrv *s, handler_fn fn, void *ctx)
{
	memset(s, 0, sizeof *s);
	s->fn = fn;
	s->ctx = ctx;
	pthread_mutex_init(&s->mu, NULL);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(s->lfd, 16), 0);
	socklen_t al = sizeof a;
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->th, NULL, hsrv_main, s), 0);
}

static void hsrv_stop(struct hsrv *s)
{
	atomic_store(&s->quit, 1);
	pthread_join(s->th, NULL);
	close(s->lfd);
	pthread_mutex_destroy(&s->mu);
}

static struct hreq hlog(struct hsrv *s, int i)
{
	pthread_mutex_lock(&s->mu);
	struct hreq r = i < s->nlog ? s->log[i] : (struct hreq){0};
	pthread_mutex_unlock(&s->mu);
	return r;
}

static bool qparam(const char *target, const char *key, char *out, size_t cap)
{
	const char *q = strchr(target, '?');
	size_t kl = strlen(key);
	for (const char *p = q; p; p = strchr(p + 1, '&')) {
		if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '=') {
			const char *v = p + 2 + kl, *e = strchr(v, '&');
			snprintf(out, cap, "%.*s", (int)(e ? (size_t)(e - v) : strlen(v)), v);
			return true;
		}
	}
	out[0] = 0;
	return false;
}

static struct pd_kube_config *http_config(struct hsrv *s, const char *user_yaml)
{
	char yaml[4096];
	snprintf(yaml, sizeof yaml,
		 "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d/'}}]\n"
		 "contexts: [{name: x, context: {cluster: c, user: u, namespace: shop}}]\ncurrent-context: x\n"
		 "users:\n- name: u\n  user:\n%s",
		 s->port, user_yaml);
	struct pd_kube_config *cfg = NULL;
	struct pd_err err = {0, ""};
	if (pd_kube_config_parse(tp("kubeconfig"), yaml, strlen(yaml), NULL, &cfg, &err))
		fail_msg("%s", err.msg);
	return cfg;
}

static struct pd_kube_client *client(const struct pd_kube_config *cfg, const struct pd_kube_client_opts *o)
{
	struct pd_kube_client *c = NULL;
	struct pd_err err = {0, ""};
	if (pd_kube_client_new(cfg, o, &c, &err))
		fail_msg("client: %s", err.msg);
	return c;
}

/* ---- the fake API ---------------------------------------------------------------------- */

struct api {
	int npods;
	bool gone_on_continue;
	const char *require_auth; /* else 401 */
	const char *stream;       /* watch body */
	size_t chunk;             /* watch: bytes per write */
	bool hold;                /* watch: keep the connection open after the stream */
	int status;               /* watch / raw: answer with this status instead */
	int sleep_ms;
	const char *body;         /* raw body */
};

static void pod_item(char *b, size_t cap, int i)
{
	snprintf(b, cap,
		 "{\"metadata\":{\"name\":\"web-5f7b9d4c8-p%d\",\"namespace\":\"shop\",\"resourceVersion\":\"%d\","
		 "\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"5f7b9d4c8\"},\"ownerReferences\":[{\"kind\":\"ReplicaSet\","
		 "\"name\":\"web-5f7b9d4c8\",\"controller\":true}]},\"spec\":{\"containers\":[{\"name\":\"web\",\"ports\":"
		 "[{\"containerPort\":6060}]}]},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.%d\"}}",
		 i, 1000 + i, i);
}

static void api_handler(struct hsrv *s, int fd, const struct hreq *r)
{
	struct api *api = s->ctx;
	if (api->sleep_ms)
		usleep((useconds_t)api->sleep_ms * 1000);
	if (api->require_auth && strcmp(r->auth, api->require_auth) != 0) {
		reply_status(fd, 401, "Unauthorized", "Unauthorized");
		return;
	}
	char v[256];
	if (qparam(r->target, "watch", v, sizeof v)) {
		if (api->status) {
			reply_status(fd, api->status, "Expired", "too old resource version: 1 (2)");
			return;
		}
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
		sendall(fd, h, strlen(h));
		size_t len = strlen(api->stream), step = api->chunk ? api->chunk : len;
		for (size_t i = 0; i < len; i += step) {
			sendall(fd, api->stream + i, len - i < step ? len - i : step);
			usleep(1000);
		}
		if (api->hold) {
			/* until the client goes away (or 10 s) */
			struct pollfd pf = {fd, POLLIN, 0};
			poll(&pf, 1, 10000);
		}
		return;
	}
	if (strncmp(r->target, "/api/v1/", 8) == 0 && strstr(r->target, "/pods") && !strstr(r->target, "/proxy/")) {
		if (strstr(r->target, "/pods/")) { /* get one */
			const char *name = strstr(r->target, "/pods/") + 6;
			if (strcmp(name, "cut-short") == 0) { /* an answer that is not a pod */
				reply(fd, 200, "application/json", "{\"kind\":\"Pod\",\"metad");
				return;
			}
			if (strcmp(name, "web-5f7b9d4c8-p1") != 0) {
				char m[300];
				snprintf(m, sizeof m, "pods \\\"%s\\\" not found", name);
				reply_status(fd, 404, "NotFound", m);
				return;
			}
			char b[2048];
			pod_item(b, sizeof b, 1);
			reply(fd, 200, "application/json", b);
			return;
		}
		if (api->status) {
			reply_status(fd, api->status, "Forbidden",
				     "pods is forbidden: User \\\"system:serviceaccount:ops:profd\\\" cannot list resource "
				     "\\\"pods\\\" in API group \\\"\\\" at the cluster scope");
			return;
		}
		int limit = qparam(r->target, "limit", v, sizeof v) ? atoi(v) : api->npods;
		int start = 0;
		if (qparam(r->target, "continue", v, sizeof v)) {
			if (api->gone_on_continue) {
				reply_status(fd, 410, "Expired",
					     "The provided continue parameter is too old to display a consistent list result.");
				return;
			}
			start = atoi(v + 1);
		}
		char *b = malloc(65536);
		size_t n = (size_t)snprintf(b, 65536, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"777\"%s",
					    start + limit < api->npods ? ",\"continue\":\"c" : "");
		if (start + limit < api->npods)
			n += (size_t)snprintf(b + n, 65536 - n, "%d\"", start + limit);
		n += (size_t)snprintf(b + n, 65536 - n, "},\"items\":[");
		for (int i = start; i < start + limit && i < api->npods; i++) {
			if (i > start)
				b[n++] = ',';
			pod_item(b + n, 65536 - n, i);
			n += strlen(b + n);
		}
		snprintf(b + n, 65536 - n, "]}");
		reply(fd, 200, "application/json", b);
		free(b);
		return;
	}
	/* anything else: the raw body */
	reply(fd, api->status ? api->status : 200, "application/octet-stream", api->body ? api->body : "");
}

struct podnames {
	char s[4096];
	int n, stop_at;
};

static int on_pod(void *ctx, const struct pd_kube_pod *p, struct pd_err *err)
{
	struct podnames *pn = ctx;
	size_t n = strlen(pn->s);
	snprintf(pn->s + n, sizeof pn->s - n, "%s;", p->name);
	if (++pn->n == pn->stop_at)
		return pd_errf(err, PD_EUSAGE, "stop");
	return 0;
}

/* A page over max_response: the same page again with half the limit (it used to end the list). */
static void test_client_list_big_pages(void **state)
{
	(void)state;
	struct api api = {.npods = 5};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	struct pd_kube_config *cfg = http_config(&s, "    token: t\n");
	struct pd_kube_client_opts o = {.max_response = 1200}; /* 2 pods fit, 4 do not */
	struct pd_kube_client *c = client(cfg, &o);
	struct pd_err err = {0, ""};
	struct pd_kube_pod_query q = {.namespace = "shop", .limit = 4};
	struct podnames pn = {"", 0, 0};
	char *rv = NULL;
	if (pd_kube_list_pods(c, &q, on_pod, &pn, &rv, &err))
		fail_msg("%s", err.msg);
	assert_str(pn.s, "web-5f7b9d4c8-p0;web-5f7b9d4c8-p1;web-5f7b9d4c8-p2;web-5f7b9d4c8-p3;web-5f7b9d4c8-p4;");
	assert_str(rv, "777");
	free(rv);
	assert_str(hlog(&s, 0).target, "/api/v1/namespaces/shop/pods?limit=4");
	assert_str(hlog(&s, 1).target, "/api/v1/namespaces/shop/pods?limit=2");
	assert_str(hlog(&s, 2).target, "/api/v1/namespaces/shop/pods?limit=2&continue=c2");
	assert_int_equal(s.nlog, 4);
	/* one pod over the cap: no smaller page, an error */
	pd_kube_client_free(c);
	o.max_response = 100;
	c = client(cfg, &o);
	assert_int_equal(pd_kube_list_pods(c, &q, on_pod, &pn, NULL, &err), PD_ELIMIT);
	assert_contains(err.msg, "limit=1: the response is over the 100-byte limit");
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
}

/* Sets *halt on the first pod (a SIGTERM while the list runs). */
struct halt_ctx {
	atomic_int *halt;
	int n;
};
static int halt_on_pod(void *ctx, const struct pd_kube_pod *p, struct pd_err *err)
{
	(void)p, (void)err;
	struct halt_ctx *h = ctx;
	h->n++;
	atomic_store(h->halt, 1);
	return 0;
}

static void test_client_list(void **state)
{
	(void)state;
	struct api api = {.npods = 5, .require_auth = "Bearer tok-1"};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	struct pd_kube_config *cfg = http_config(&s, "    token: tok-1\n    as: jane\n    as-groups: [a, b]\n");
	struct pd_kube_client *c = client(cfg, NULL);
	struct pd_err err = {0, ""};
	struct pd_kube_pod_query q = {.namespace = "shop", .label_selector = "app=web,tier in (a,b)", .limit = 2};
	struct podnames pn = {"", 0, 0};
	char *rv = NULL;
	if (pd_kube_list_pods(c, &q, on_pod, &pn, &rv, &err))
		fail_msg("%s", err.msg);
	assert_str(pn.s, "web-5f7b9d4c8-p0;web-5f7b9d4c8-p1;web-5f7b9d4c8-p2;web-5f7b9d4c8-p3;web-5f7b9d4c8-p4;");
	assert_str(rv, "777");
	free(rv);
	assert_int_equal(s.nlog, 3);
	struct hreq r = hlog(&s, 0);
	assert_str(r.target, "/api/v1/namespaces/shop/pods?limit=2&labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29");
	assert_str(r.auth, "Bearer tok-1");
	assert_str(r.accept, "application/json");
	assert_str(r.imp, "jane|a|b");
	assert_str(hlog(&s, 2).target,
		   "/api/v1/namespaces/shop/pods?limit=2&labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29&continue=c4");

	/* all namespaces, field selector, one array */
	struct pd_kube_pod_query all = {.field_selector = "status.phase=Running", .limit = 3};
	struct pd_kube_pod_list *l = NULL;
	if (pd_kube_list_pods_all(c, &all, &l, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(l->n, 5);
	assert_str(l->resource_version, "777");
	assert_str(l->items[4].name, "web-5f7b9d4c8-p4");
	assert_str(l->items[4].pod_ip, "10.0.0.4");
	assert_workload(&l->items[0], "Deployment", "web");
	pd_kube_pod_list_free(l);
	assert_str(hlog(&s, 3).target, "/api/v1/pods?limit=3&fieldSelector=status.phase%3DRunning");

	/* the callback stops the list */
	struct podnames stop = {"", 0, 3};
	assert_int_equal(pd_kube_list_pods(c, &q, on_pod, &stop, NULL, &err), PD_EUSAGE);
	assert_int_equal(stop.n, 3);

	/* q.stop: set (SIGTERM) before the list: no request; during it: no next page */
	atomic_int halt = 1;
	struct pd_kube_pod_query qs = q;
	qs.stop = &halt;
	int n0 = s.nlog;
	struct podnames none = {"", 0, 0};
	assert_int_equal(pd_kube_list_pods(c, &qs, on_pod, &none, NULL, &err), PD_EIO);
	assert_contains(err.msg, "stopped");
	assert_int_equal(none.n, 0);
	assert_int_equal(s.nlog, n0);
	atomic_store(&halt, 0);
	struct halt_ctx hc = {&halt, 0};
	assert_int_equal(pd_kube_list_pods(c, &qs, halt_on_pod, &hc, NULL, &err), PD_EIO);
	assert_contains(err.msg, "stopped");
	assert_int_equal(hc.n, 2); /* the first page only */
	assert_int_equal(s.nlog, n0 + 1);

	/* an expired continue token: the callback list says so, the array list restarts unpaged */
	api.gone_on_continue = true;
	struct podnames pn2 = {"", 0, 0};
	assert_int_equal(pd_kube_list_pods(c, &q, on_pod, &pn2, NULL, &err), PD_KUBE_EGONE);
	char want[512];
	snprintf(want, sizeof want, "the list's continue token expired (list again): GET http://127.0.0.1:%d/api/v1/namespaces/shop/pods?limit=2&labelSelector=app%%3Dweb%%2Ctier%%20in%%20%%28a%%2Cb%%29&continue=c2: HTTP 410 Gone: The provided continue parameter is too old to display a consistent list result.",
		 s.port);
	assert_str(err.msg, want);
	int before = s.nlog;
	if (pd_kube_list_pods_all(c, &q, &l, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(l->n, 5);
	pd_kube_pod_list_free(l);
	assert_int_equal(s.nlog, before + 3); /* page 1, 410, then the unpaged list */
	assert_str(hlog(&s, before + 2).target, "/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29");

	/* get one; a missing one */
	struct pd_arena *a = pd_arena_new(0);
	struct pd_kube_pod p;
	if (pd_kube_get_pod(c, "shop", "web-5f7b9d4c8-p1", a, &p, &err))
		fail_msg("%s", err.msg);
	assert_str(p.name, "web-5f7b9d4c8-p1");
	assert_int_equal(pd_kube_get_pod(c, "shop", "nope", a, &p, &err), PD_ENOTFOUND);
	snprintf(want, sizeof want, "GET http://127.0.0.1:%d/api/v1/namespaces/shop/pods/nope: HTTP 404 Not Found: pods \"nope\" not found",
		 s.port);
	assert_str(err.msg, want);
	assert_int_equal(pd_kube_get_pod(c, "shop", "a/b", a, &p, &err), PD_EUSAGE);
	/* a name that is fine, an answer that is not a pod: not the name's fault */
	assert_int_equal(pd_kube_get_pod(c, "shop", "cut-short", a, &p, &err), PD_EINVAL);
	assert_has(err.msg, "/api/v1/namespaces/shop/pods/cut-short: pod JSON");
	pd_arena_free(a);

	/* 403 with the API's words */
	api.status = 403;
	assert_int_equal(pd_kube_list_pods(c, &all, on_pod, &pn2, NULL, &err), PD_KUBE_EFORBIDDEN);
	snprintf(want, sizeof want, "GET http://127.0.0.1:%d/api/v1/pods?limit=3&fieldSelector=status.phase%%3DRunning: HTTP 403 Forbidden: pods is forbidden: User \"system:serviceaccount:ops:profd\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
		 s.port);
	assert_str(err.msg, want);
	api.status = 0;

	/* wrong token: 401, nothing to refresh, no retry */
	api.require_auth = "Bearer other";
	before = s.nlog;
	assert_int_equal(pd_kube_list_pods(c, &q, on_pod, &pn2, NULL, &err), PD_KUBE_EUNAUTH);
	assert_has(err.msg, ": HTTP 401 Unauthorized: Unauthorized");
	assert_int_equal(s.nlog, before + 1);
	api.require_auth = NULL;

	/* the response cap */
	pd_kube_client_free(c);
	struct pd_kube_client_opts o = {.max_response = 300};
	c = client(cfg, &o);
	assert_int_equal(pd_kube_list_pods(c, &q, on_pod, &pn2, NULL, &err), PD_ELIMIT);
	assert_has(err.msg, ": the response is over the 300-byte limit");
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
}

static void test_client_bad_json_and_transport(void **state)
{
	(void)state;
	struct api api = {.body = "{\"kind\":\"PodList\",\"items\":[{]}"};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	struct pd_kube_config *cfg = http_config(&s, "    username: admin\n    password: 'p@ss'\n");
	struct pd_kube_client *c = client(cfg, NULL);
	struct pd_err err = {0, ""};
	/* raw GET: any status is an answer */
	struct pd_kube_response resp;
	api.status = 500;
	api.body = "cpu profiling already in use\n";
	char path[256];
	assert_int_equal(pd_kube_pod_proxy_path(path, sizeof path, "shop", "web-1", 6060, "debug/pprof/profile?seconds=1", &err), 0);
	if (pd_kube_get(c, path, NULL, &resp, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(resp.status, 500);
	assert_int_equal(resp.body.len, strlen(api.body));
	assert_memory_equal(resp.body.ptr, api.body, resp.body.len);
	assert_str(resp.content_type, "application/octet-stream");
	struct hreq r = hlog(&s, 0);
	assert_str(r.target, "/api/v1/namespaces/shop/pods/web-1:6060/proxy/debug/pprof/profile?seconds=1");
	assert_str(r.auth, "Basic YWRtaW46cEBzcw=="); /* admin:p@ss */
	assert_str(r.accept, "*/*");
	/* ... and the caller can turn it into an error */
	assert_int_equal(pd_kube_http_error("capture web-1", resp.status, resp.body.ptr, resp.body.len, &err), PD_KUBE_EHTTP);
	assert_str(err.msg, "capture web-1: HTTP 500 Internal Server Error: cpu profiling already in use");
	pd_kube_response_free(&resp);
	assert_int_equal(pd_kube_http_error("x", 418, NULL, 0, &err), PD_KUBE_EHTTP);
	assert_str(err.msg, "x: HTTP 418: (empty body)");

	/* body cap */
	api.status = 0;
	api.body = "0123456789abcdef";
	struct pd_kube_get_opts go = {.max_body = 10};
	assert_int_equal(pd_kube_get(c, "/x", &go, &resp, &err), PD_ELIMIT);
	assert_has(err.msg, "/x: the response is over the 10-byte limit");
	go.max_body = 16;
	assert_int_equal(pd_kube_get(c, "/x", &go, &resp, &err), 0);
	pd_kube_response_free(&resp);
	assert_int_equal(pd_kube_get(c, "x", NULL, &resp, &err), PD_EINVAL);
	assert_int_equal(pd_kube_get(c, "/a b", NULL, &resp, &err), PD_EINVAL);

	/* timeout */
	api.sleep_ms = 1500;
	go.timeout_ms = 200;
	double t0 = pd_now();
	assert_int_equal(pd_kube_get(c, "/slow", &go, &resp, &err), PD_EIO);
	assert_true(pd_now() - t0 < 1.4);
	assert_has(err.msg, "/slow: Operation timed out after");
	api.sleep_ms = 0;

	/* a list body that is not JSON: the position */
	api.body = "{\"kind\":\"PodList\",\"items\":[{]}";
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);

	/* connection refused */
	struct hsrv dead;
	hsrv_start(&dead, api_handler, &api);
	cfg = http_config(&dead, "    token: t\n");
	hsrv_stop(&dead);
	c = client(cfg, NULL);
	assert_int_equal(pd_kube_get(c, "/x", NULL, &resp, &err), PD_EIO);
	assert_has(err.msg, "/x: Failed to connect to 127.0.0.1 port");
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
}

static void bad_list_handler(struct hsrv *s, int fd, const struct hreq *r)
{
	(void)s, (void)r;
	reply(fd, 200, "application/json", "{\"kind\":\"PodList\",\n\"items\":[{]}");
}

static void test_client_bad_list(void **state)
{
	(void)state;
	struct hsrv s;
	hsrv_start(&s, bad_list_handler, NULL);
	struct pd_kube_config *cfg = http_config(&s, "    token: t\n");
	struct pd_kube_client *c = client(cfg, NULL);
	struct pd_err err = {0, ""};
	struct podnames pn = {"", 0, 0};
	assert_int_equal(pd_kube_list_pods(c, NULL, on_pod, &pn, NULL, &err), PD_EINVAL);
	char want[300];
	snprintf(want, sizeof want, "GET http://127.0.0.1:%d/api/v1/pods?limit=500: pod list JSON: line 2 column 11 (byte 30): string or '}' expected near ']'",
		 s.port);
	assert_str(err.msg, want);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
}

static void test_client_watch(void **state)
{
	(void)state;
	struct api api = {.stream = watch_stream, .chunk = 7};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	struct pd_kube_config *cfg = http_config(&s, "    token: t\n");
	struct pd_kube_client *c = client(cfg, NULL);
	struct pd_err err = {0, ""};
	struct pd_kube_pod_query q = {.namespace = "shop", .label_selector = "app=web"};
	struct evlog l = {"", 0, 0, NULL};
	if (pd_kube_watch_pods(c, &q, "100", 30, on_event, &l, NULL, &err))
		fail_msg("%s", err.msg);
	assert_str(l.s, watch_want);
	assert_str(hlog(&s, 0).target,
		   "/api/v1/namespaces/shop/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion=100&labelSelector=app%3Dweb");

	/* ERROR 410 in the stream */
	api.stream = EV("ADDED", "a", "5", "") "\n"
		"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
		"\"message\":\"too old resource version: 5 (4821)\",\"reason\":\"Expired\",\"code\":410}}\n";
	struct evlog l2 = {"", 0, 0, NULL};
	assert_int_equal(pd_kube_watch_pods(c, &q, "5", 30, on_event, &l2, NULL, &err), PD_KUBE_EGONE);
	assert_str(err.msg, "watch: ERROR event: 410 Expired: too old resource version: 5 (4821)");
	assert_str(l2.s, "ADDED a 5;");

	/* 410 as the HTTP status */
	api.status = 410;
	assert_int_equal(pd_kube_watch_pods(c, NULL, "1", 30, on_event, &l2, NULL, &err), PD_KUBE_EGONE);
	char want[400];
	snprintf(want, sizeof want, "GET http://127.0.0.1:%d/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion=1: HTTP 410 Gone: too old resource version: 1 (2)",
		 s.port);
	assert_str(err.msg, want);
	api.status = 0;

	/* the stream cut inside an event */
	api.stream = EV("ADDED", "a", "5", "") "\n{\"type\":\"MODIF";
	struct evlog l3 = {"", 0, 0, NULL};
	assert_int_equal(pd_kube_watch_pods(c, NULL, NULL, 30, on_event, &l3, NULL, &err), PD_EINVAL);
	assert_has(err.msg, ": watch stream: ended inside the event at byte");
	assert_str(l3.s, "ADDED a 5;");

	/* the stop flag ends a watch the server keeps open */
	api.stream = EV("ADDED", "a", "5", "") "\n";
	api.hold = true;
	atomic_int stop = 0;
	struct evlog l4 = {"", 0, 0, &stop};
	double t0 = pd_now();
	assert_int_equal(pd_kube_watch_pods(c, NULL, NULL, 30, on_event, &l4, &stop, &err), 0);
	assert_true(pd_now() - t0 < 4);
	assert_str(l4.s, "ADDED a 5;");
	/* already stopped: nothing is sent */
	int before = s.nlog;
	assert_int_equal(pd_kube_watch_pods(c, NULL, NULL, 30, on_event, &l4, &stop, &err), 0);
	assert_int_equal(s.nlog, before);
	/* the callback's value */
	struct evlog l5 = {"", 1, 0, NULL};
	assert_int_equal(pd_kube_watch_pods(c, NULL, NULL, 30, on_event, &l5, NULL, &err), 7);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
}

static double fake_clock;
static double fake_now(void) { return fake_clock; }

static void test_client_token_rotation(void **state)
{
	(void)state;
	struct api api = {.npods = 1};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	wfile_mode("tok", "tok-1\n", 0600);
	char user[600];
	snprintf(user, sizeof user, "    tokenFile: %s\n    token: static-fallback\n", tp("tok"));
	struct pd_kube_config *cfg = http_config(&s, user);
	fake_clock = 1000;
	struct pd_kube_client_opts o = {.now = fake_now};
	struct pd_kube_client *c = client(cfg, &o);
	struct pd_err err = {0, ""};
	struct pd_kube_response resp;
#define GET()                                                                                                 \
	do {                                                                                                  \
		if (pd_kube_get(c, "/version", NULL, &resp, &err))                                            \
			fail_msg("%s", err.msg);                                                              \
		pd_kube_response_free(&resp);                                                                 \
	} while (0)
	GET();
	assert_str(hlog(&s, 0).auth, "Bearer tok-1"); /* the file wins over the static token */
	wfile_mode("tok", "tok-2\n", 0600);
	fake_clock += 30;
	GET();
	assert_str(hlog(&s, 1).auth, "Bearer tok-1"); /* not re-read within a minute */
	fake_clock += 31;
	GET();
	assert_str(hlog(&s, 2).auth, "Bearer tok-2");
	/* rotated, and the server already refuses the old one: re-read at once on the 401 */
	wfile_mode("tok", "tok-3\n", 0600);
	api.require_auth = "Bearer tok-3";
	GET();
	assert_str(hlog(&s, 3).auth, "Bearer tok-2");
	assert_str(hlog(&s, 4).auth, "Bearer tok-3");
	/* the file disappears: the last good token goes on */
	remove(tp("tok"));
	fake_clock += 61;
	GET();
	assert_str(hlog(&s, 5).auth, "Bearer tok-3");
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);

	/* no readable file and no static token: the client cannot start */
	snprintf(user, sizeof user, "    tokenFile: %s\n", tp("tok"));
	cfg = http_config(&s, user);
	assert_int_equal(pd_kube_client_new(cfg, &o, &c, &err), PD_EIO);
	char want[600];
	snprintf(want, sizeof want, "kubeconfig %s: tokenFile: %s: No such file or directory", tp("kubeconfig"), tp("tok"));
	assert_str(err.msg, want);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
#undef GET
}

static void test_client_exec(void **state)
{
	(void)state;
	struct api api = {.npods = 1};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	wfile_mode("plugin.sh", plugin_sh, 0755);
	char server[64];
	snprintf(server, sizeof server, "http://127.0.0.1:%d", s.port);
	struct pd_kube_config *cfg = exec_config(server, tp("plugin.sh"), "2024-05-02T10:00:00Z", NULL);
	fake_clock = 1714644000 - 100;
	struct pd_kube_client_opts o = {.now = fake_now};
	struct pd_kube_client *c = client(cfg, &o);
	struct pd_err err = {0, ""};
	struct pd_kube_response resp;
#define GET()                                                                                                 \
	do {                                                                                                  \
		if (pd_kube_get(c, "/version", NULL, &resp, &err))                                            \
			fail_msg("%s", err.msg);                                                              \
		pd_kube_response_free(&resp);                                                                 \
	} while (0)
	GET();
	GET();
	assert_str(hlog(&s, 0).auth, "Bearer exec-tok-1");
	assert_str(hlog(&s, 1).auth, "Bearer exec-tok-1"); /* cached */
	fake_clock += 100;                                   /* expired */
	GET();
	assert_str(hlog(&s, 2).auth, "Bearer exec-tok-2");
	fake_clock -= 100;
	api.require_auth = "Bearer exec-tok-3"; /* revoked: the 401 re-runs the plugin */
	GET();
	assert_str(hlog(&s, 3).auth, "Bearer exec-tok-2");
	assert_str(hlog(&s, 4).auth, "Bearer exec-tok-3");
	api.require_auth = "Bearer never";
	assert_int_equal(pd_kube_get(c, "/version", NULL, &resp, &err), 0);
	assert_int_equal(resp.status, 401); /* one retry only */
	pd_kube_response_free(&resp);
	assert_int_equal(s.nlog, 7);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);

	/* a plugin that fails: the request fails with its words, naming the user */
	cfg = exec_config(server, "no-such-plugin-xyz", "", NULL);
	c = client(cfg, &o);
	assert_int_equal(pd_kube_get(c, "/version", NULL, &resp, &err), PD_ENOTFOUND);
	char want[600];
	snprintf(want, sizeof want, "kubeconfig %s: user \"u\": exec plugin: executable no-such-plugin-xyz not found\n\ninstall it with: apt install plugin",
		 tp("kc"));
	assert_str(err.msg, want);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
#undef GET
}

struct getter {
	struct pd_kube_client *c;
	long status;
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;
	struct pd_err err = {0, ""};
	struct pd_kube_response resp;
	if (pd_kube_get(g->c, "/version", NULL, &resp, &err) == 0)
		g->status = resp.status;
	pd_kube_response_free(&resp);
	return NULL;
}

/* The exec credential revoked under 8 concurrent requests: the first 401
 * runs the plugin again, the other seven take its credential (they used to
 * run it once each, one after another, each new token replacing the last). */
static void test_client_exec_concurrent_401(void **state)
{
	(void)state;
	struct api api = {.npods = 1, .sleep_ms = 20};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	wfile_mode("plugin.sh", plugin_sh, 0755);
	unlink(tp("count"));
	char server[64];
	snprintf(server, sizeof server, "http://127.0.0.1:%d", s.port);
	struct pd_kube_config *cfg = exec_config(server, tp("plugin.sh"), "2099-01-01T00:00:00Z", NULL);
	fake_clock = 1714644000;
	struct pd_kube_client_opts o = {.now = fake_now};
	struct pd_kube_client *c = client(cfg, &o);
	struct getter g[8];
	pthread_t th[8];
	g[0] = (struct getter){c, 0};
	getter_main(&g[0]); /* exec-tok-1 */
	assert_int_equal(g[0].status, 200);
	api.require_auth = "Bearer exec-tok-2";
	for (int i = 0; i < 8; i++) {
		g[i] = (struct getter){c, 0};
		assert_int_equal(pthread_create(&th[i], NULL, getter_main, &g[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(g[i].status, 200);
	}
	struct pd_buf b = PD_BUF_INIT(64);
	struct pd_err err;
	assert_int_equal(pd_buf_read_file(&b, tp("count"), &err), 0);
	assert_int_equal(atoi((const char *)b.ptr), 2); /* the first run, and one after the 401s */
	pd_buf_free(&b);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
}

struct worker {
	struct pd_kube_client *c;
	int ok;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 15; i++) {
		struct pd_err err = {0, ""};
		if (i % 3 == 0) {
			struct pd_kube_pod_list *l = NULL;
			struct pd_kube_pod_query q = {.limit = 2};
			if (pd_kube_list_pods_all(w->c, &q, &l, &err) == 0 && l->n == 3)
				w->ok++;
			pd_kube_pod_list_free(l);
		} else {
			struct pd_kube_response resp;
			if (pd_kube_get(w->c, "/version", NULL, &resp, &err) == 0 && resp.status == 200)
				w->ok++;
			pd_kube_response_free(&resp);
		}
	}
	return NULL;
}

/* One client, several threads: handles, credentials (a token file re-read
 * on every request here) and lists do not interfere. */
static void test_client_concurrent(void **state)
{
	(void)state;
	struct api api = {.npods = 3, .body = "{\"major\":\"1\"}"};
	struct hsrv s;
	hsrv_start(&s, api_handler, &api);
	wfile_mode("tok", "tok-c\n", 0600);
	char user[600];
	snprintf(user, sizeof user, "    tokenFile: %s\n", tp("tok"));
	struct pd_kube_config *cfg = http_config(&s, user);
	fake_clock = 0;
	struct pd_kube_client_opts o = {.now = fake_now};
	struct pd_kube_client *c = client(cfg, &o);
	fake_clock = 1e9; /* always a minute later: every request re-reads the file */
	struct worker w[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){c, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].ok, 15);
	}
	for (int i = 0; i < s.nlog; i++)
		assert_str(hlog(&s, i).auth, "Bearer tok-c");
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	hsrv_stop(&s);
	assert_str(pd_kube_strerror(PD_KUBE_EGONE), "resource version too old (410 Gone)");
	assert_str(pd_kube_strerror(PD_ENOTFOUND), "not found");
}

/* ---- TLS against openssl s_server ----------------------------------------------------------- */

static bool have_openssl(void) { return system("openssl version >/dev/null 2>&1") == 0; }

static pid_t s_server(const char *dir, int port)
{
	char accept[64], cert[600], key[600], ca[600];
	snprintf(accept, sizeof accept, "127.0.0.1:%d", port);
	snprintf(cert, sizeof cert, "%s/srv.crt", dir);
	snprintf(key, sizeof key, "%s/srv.key", dir);
	snprintf(ca, sizeof ca, "%s/ca.crt", dir);
	char *argv[] = {"openssl", "s_server", "-accept", accept, "-cert", cert, "-key", key, "-CAfile", ca,
			"-Verify", "1", "-www", "-quiet", NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	pid_t pid;
	assert_int_equal(posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	/* wait until it listens */
	for (int i = 0; i < 100; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {0};
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		close(fd);
		if (ok)
			return pid;
		usleep(50000);
	}
	fail_msg("openssl s_server did not start");
	return -1;
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&a, sizeof a);
	socklen_t al = sizeof a;
	getsockname(fd, (struct sockaddr *)&a, &al);
	close(fd);
	return ntohs(a.sin_port);
}

static int tls_get(const char *yaml_fmt_server, int port, bool load, struct pd_err *err)
{
	char yaml[16384];
	snprintf(yaml, sizeof yaml, yaml_fmt_server, port);
	struct pd_kube_config *cfg = NULL;
	int rc;
	if (load) {
		wfile("tls/kubeconfig", yaml);
		struct pd_kube_opts o = {.kubeconfig = tp("tls/kubeconfig")};
		rc = pd_kube_config_load(&o, &cfg, err);
	} else {
		rc = pd_kube_config_parse(tp("tls/kubeconfig"), yaml, strlen(yaml), NULL, &cfg, err);
	}
	if (rc)
		return rc;
	struct pd_kube_client *c = NULL;
	if ((rc = pd_kube_client_new(cfg, NULL, &c, err))) {
		pd_kube_config_free(cfg);
		return rc;
	}
	struct pd_kube_response resp;
	rc = pd_kube_get(c, "/api/v1/namespaces/default/pods", NULL, &resp, err);
	if (!rc && resp.status != 200)
		rc = pd_kube_http_error("GET", resp.status, resp.body.ptr, resp.body.len, err);
	if (!rc)
		pd_kube_response_free(&resp);
	pd_kube_client_free(c);
	pd_kube_config_free(cfg);
	return rc;
}

static char *file_b64(const char *name)
{
	char *s = read_all(tp(name));
	char *b = b64(s);
	free(s);
	return b;
}

static void test_tls(void **state)
{
	(void)state;
	if (!have_openssl())
		skip();
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "set -e; cd %s && mkdir -p tls && cd tls && ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';"
		 "openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca;"
		 "openssl req -x509 $ec -keyout other.key -out other.crt -days 2 -subj /CN=other-ca;"
		 "openssl req $ec -keyout srv.key -out srv.csr -subj /CN=kube.test;"
		 "printf 'subjectAltName=DNS:kube.test\\n' > srv.ext;"
		 "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile srv.ext;"
		 "openssl req $ec -keyout cli.key -out cli.csr -subj /CN=admin/O=system:masters;"
		 "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt -days 2",
		 tmp);
	char full[2200];
	snprintf(full, sizeof full, "(%s) >/dev/null 2>&1", cmd);
	assert_int_equal(system(full), 0);
	int port = free_port();
	char dir[512];
	snprintf(dir, sizeof dir, "%s/tls", tmp);
	pid_t pid = s_server(dir, port);
	char *ca = file_b64("tls/ca.crt"), *other = file_b64("tls/other.crt");
	char *cert = file_b64("tls/cli.crt"), *key = file_b64("tls/cli.key");
	char fmt[12000];
	struct pd_err err = {0, ""};
#define KC(cluster_extra, user_extra)                                                                    \
	snprintf(fmt, sizeof fmt,                                                                       \
		 "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:%%d', %s}}]\n"              \
		 "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"          \
		 "users: [{name: u, user: {%s}}]\n",                                                   \
		 cluster_extra, user_extra)
	char cl[4096], us[4096];
	/* the cluster CA as data, tls-server-name, a client certificate as data: all in memory */
	snprintf(cl, sizeof cl, "certificate-authority-data: %s, tls-server-name: kube.test", ca);
	snprintf(us, sizeof us, "client-certificate-data: %s, client-key-data: %s", cert, key);
	KC(cl, us);
	if (tls_get(fmt, port, false, &err))
		fail_msg("TLS with blobs: %s", err.msg);
	/* no client certificate: the server refuses */
	KC(cl, "token: t");
	assert_int_equal(tls_get(fmt, port, false, &err), PD_EIO);
	/* the wrong CA */
	snprintf(cl, sizeof cl, "certificate-authority-data: %s, tls-server-name: kube.test", other);
	KC(cl, us);
	assert_int_equal(tls_get(fmt, port, false, &err), PD_EIO);
	assert_has(err.msg, "certificate");
	/* the right CA, but the certificate is for kube.test, not 127.0.0.1 */
	snprintf(cl, sizeof cl, "certificate-authority-data: %s", ca);
	KC(cl, us);
	assert_int_equal(tls_get(fmt, port, false, &err), PD_EIO);
	assert_has(err.msg, "127.0.0.1");
	/* insecure-skip-tls-verify */
	KC("insecure-skip-tls-verify: true", us);
	if (tls_get(fmt, port, false, &err))
		fail_msg("insecure: %s", err.msg);
	/* files, read by pd_kube_config_load (relative to the kubeconfig) */
	KC("certificate-authority: ca.crt, tls-server-name: kube.test", "client-certificate: cli.crt, client-key: cli.key");
	if (tls_get(fmt, port, true, &err))
		fail_msg("TLS with files: %s", err.msg);
	/* ... or by pd_kube_client_new after a parse-only config */
	if (tls_get(fmt, port, false, &err))
		fail_msg("TLS with files read by the client: %s", err.msg);
	free(ca);
	free(other);
	free(cert);
	free(key);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
#undef KC
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_rfc3339),
		cmocka_unit_test_setup_teardown(test_config_token_ca_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_files_and_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_kubeconfig_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_home_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_in_cluster, setup, teardown),
		cmocka_unit_test(test_exec_cred_parse),
		cmocka_unit_test_setup_teardown(test_exec_run, setup, teardown),
		cmocka_unit_test(test_pod_deployment),
		cmocka_unit_test(test_pod_other_shapes),
		cmocka_unit_test(test_workload_rules),
		cmocka_unit_test(test_pod_errors),
		cmocka_unit_test(test_proxy_path),
		cmocka_unit_test(test_watch_splits),
		cmocka_unit_test(test_watch_410_and_errors),
		cmocka_unit_test_setup_teardown(test_client_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_bad_json_and_transport, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_bad_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_watch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_token_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_list_big_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_exec_concurrent_401, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
