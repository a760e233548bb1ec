/*
 * exec.c — exec credential plugins (client.authentication.k8s.io/v1 and
 * v1beta1), as kubectl runs them: the command with its args, our
 * environment plus the plugin's env entries plus KUBERNETES_EXEC_INFO (an
 * ExecCredential with spec.interactive and, if asked, spec.cluster); its
 * stdout is an ExecCredential whose status carries a token and/or a client
 * certificate and key (PEM), and maybe an expirationTimestamp.
 *
 * The child is started with posix_spawnp (safe in a threaded process), its
 * stdout read through a pipe with a deadline and a size cap; on either it is
 * killed. stderr is inherited so a plugin's prompts and errors reach the
 * user, as with kubectl. Caching and refresh live in apiserver.c.
 */
#define _GNU_SOURCE /* pipe2 */
#include "kube_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void kube_cred_clear(struct kube_cred *c)
{
	if (c->token) {
		kube_wipe(c->token, strlen(c->token));
		free(c->token);
	}
	if (c->cert) {
		kube_wipe(c->cert, c->cert_len);
		free(c->cert);
	}
	if (c->key) {
		kube_wipe(c->key, c->key_len);
		free(c->key);
	}
	memset(c, 0, sizeof *c);
}

static int pem_field(json_t *status, const char *key, uint8_t **out, size_t *n, struct pd_err *err)
{
	json_t *v = json_object_get(status, key);
	*out = NULL;
	*n = 0;
	if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
		return 0;
	if (!json_is_string(v))
		return pd_errf(err, PD_EINVAL, "exec plugin: ExecCredential status.%s: expected a string", key);
	size_t len = json_string_length(v);
	if (!kube_is_pem((const uint8_t *)json_string_value(v), len))
		return pd_errf(err, PD_EINVAL, "exec plugin: ExecCredential status.%s: not PEM data", key);
	if (!(*out = malloc(len + 1)))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	memcpy(*out, json_string_value(v), len + 1);
	*n = len;
	return 0;
}

int kube_exec_cred_parse(const char *json, size_t len, const char *api_version, struct kube_cred *out,
			 struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je);
	int rc = 0;
	if (!o)
		return kube_json_error(err, "exec plugin: ExecCredential", &je);
	json_t *av = json_object_get(o, "apiVersion"), *kind = json_object_get(o, "kind");
	json_t *st = json_object_get(o, "status");
	if (!json_is_object(o)) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin: output is not a JSON object");
		goto out;
	}
	if (!json_is_string(kind) || strcmp(json_string_value(kind), "ExecCredential") != 0) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin: output is not an ExecCredential (kind \"%.64s\")",
			     json_is_string(kind) ? json_string_value(kind) : "");
		goto out;
	}
	if (!json_is_string(av) || strcmp(json_string_value(av), api_version) != 0) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin is configured to use API version %s, plugin returned version %.100s",
			     api_version, json_is_string(av) ? json_string_value(av) : "(none)");
		goto out;
	}
	if (!json_is_object(st)) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin didn't return a status field");
		goto out;
	}
	json_t *tok = json_object_get(st, "token"), *exp = json_object_get(st, "expirationTimestamp");
	if (tok && !json_is_null(tok)) {
		if (!json_is_string(tok)) {
			rc = pd_errf(err, PD_EINVAL, "exec plugin: ExecCredential status.token: expected a string");
			goto out;
		}
		size_t tl = json_string_length(tok);
		if (tl) {
			if (!kube_token_ok(json_string_value(tok), tl)) {
				rc = pd_errf(err, PD_EINVAL, "exec plugin: the token contains spaces or control characters");
				goto out;
			}
			if (!(out->token = strdup(json_string_value(tok)))) {
				rc = pd_errf(err, PD_ENOMEM, "out of memory");
				goto out;
			}
		}
	}
	if ((rc = pem_field(st, "clientCertificateData", &out->cert, &out->cert_len, err)) ||
	    (rc = pem_field(st, "clientKeyData", &out->key, &out->key_len, err)))
		goto out;
	if (!out->cert != !out->key) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin returned only %s: clientCertificateData and clientKeyData must both be set",
			     out->cert ? "clientCertificateData" : "clientKeyData");
		goto out;
	}
	if (!out->token && !out->cert) {
		rc = pd_errf(err, PD_EINVAL, "exec plugin didn't return a token or cert/key pair");
		goto out;
	}
	if (exp && !json_is_null(exp)) {
		double t = json_is_string(exp) ? kube_parse_rfc3339(json_string_value(exp)) : -1;
		if (t < 0) {
			rc = pd_errf(err, PD_EINVAL, "exec plugin: ExecCredential status.expirationTimestamp: not an RFC 3339 time");
			goto out;
		}
		out->expiry = t > 0 ? t : 1; /* 0 means "never" */
	}
out:
	json_decref(o);
	if (rc)
		kube_cred_clear(out);
	return rc;
}

/* KUBERNETES_EXEC_INFO's value. */
static char *exec_info(const struct pd_kube_config *cfg, bool interactive)
{
	const struct pd_kube_exec *x = cfg->exec;
	json_t *spec = json_object(), *o = json_object();
	char *s = NULL;
	if (!spec || !o)
		goto out;
	json_object_set_new(o, "kind", json_string("ExecCredential"));
	json_object_set_new(o, "apiVersion", json_string(x->api_version));
	json_object_set_new(spec, "interactive", json_boolean(interactive));
	if (x->provide_cluster_info) {
		json_t *cl = json_object();
		if (!cl)
			goto out;
		json_object_set_new(cl, "server", json_string(cfg->server));
		if (cfg->tls_server_name)
			json_object_set_new(cl, "tls-server-name", json_string(cfg->tls_server_name));
		if (cfg->insecure)
			json_object_set_new(cl, "insecure-skip-tls-verify", json_true());
		if (cfg->proxy_url)
			json_object_set_new(cl, "proxy-url", json_string(cfg->proxy_url));
		if (cfg->ca.len) {
			char *b = kube_b64_encode(cfg->ca.ptr, cfg->ca.len);
			if (!b) {
				json_decref(cl);
				goto out;
			}
			json_object_set_new(cl, "certificate-authority-data", json_string(b));
			free(b);
		}
		json_object_set_new(spec, "cluster", cl);
	}
	json_object_set(o, "spec", spec);
	s = json_dumps(o, JSON_COMPACT);
out:
	json_decref(spec);
	json_decref(o);
	return s;
}

static bool env_overridden(const char *e, const struct pd_kube_exec *x)
{
	const char *eq = strchr(e, '=');
	size_t n = eq ? (size_t)(eq - e) : strlen(e);
	if (n == 20 && strncmp(e, "KUBERNETES_EXEC_INFO", 20) == 0)
		return true;
	for (size_t i = 0; i < x->nenv; i++)
		if (strncmp(x->env[i], e, n) == 0 && x->env[i][n] == '=')
			return true;
	return false;
}

int kube_exec_run(const struct pd_kube_config *cfg, long timeout_ms, struct kube_cred *out, struct pd_err *err)
{
	const struct pd_kube_exec *x = cfg->exec;
	memset(out, 0, sizeof *out);
	if (timeout_ms <= 0)
		timeout_ms = 120000;
	bool tty = isatty(0);
	if (x->interactive == PD_KUBE_EXEC_ALWAYS && !tty)
		return pd_errf(err, PD_EINVAL, "exec plugin %s: interactiveMode is Always but stdin is not a terminal",
			       x->command);
	bool interactive = tty && x->interactive != PD_KUBE_EXEC_NEVER;

	size_t nenv = 0;
	while (environ && environ[nenv])
		nenv++;
	char **argv = calloc(x->nargs + 2, sizeof *argv);
	char **envp = calloc(nenv + x->nenv + 2, sizeof *envp);
	char *info = exec_info(cfg, interactive), *infoenv = NULL;
	struct pd_buf b = PD_BUF_INIT(PD_KUBE_MAX_CRED_BYTES);
	int pfd[2] = {-1, -1}, rc = 0;
	pid_t pid = -1;
	posix_spawn_file_actions_t fa;
	bool fa_init = false;
	if (!argv || !envp || !info || !(infoenv = malloc(strlen(info) + 32))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	argv[0] = (char *)x->command;
	for (size_t i = 0; i < x->nargs; i++)
		argv[i + 1] = (char *)x->args[i];
	size_t ne = 0;
	for (size_t i = 0; i < nenv; i++)
		if (!env_overridden(environ[i], x))
			envp[ne++] = environ[i];
	for (size_t i = 0; i < x->nenv; i++)
		envp[ne++] = (char *)x->env[i];
	sprintf(infoenv, "KUBERNETES_EXEC_INFO=%s", info);
	envp[ne++] = infoenv;

	if (pipe2(pfd, O_CLOEXEC) != 0) {
		rc = pd_errf(err, PD_EIO, "exec plugin %s: pipe: %s", x->command, strerror(errno));
		goto out;
	}
	if (posix_spawn_file_actions_init(&fa) != 0) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	fa_init = true;
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	if (!interactive)
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	int se = posix_spawnp(&pid, x->command, &fa, NULL, argv, envp);
	if (se != 0) {
		pid = -1;
		if (se == ENOENT)
			rc = pd_errf(err, PD_ENOTFOUND, "exec plugin: executable %s not found%s%.300s", x->command,
				     x->install_hint ? "\n\n" : "", x->install_hint ? x->install_hint : "");
		else
			rc = pd_errf(err, PD_EIO, "exec plugin %s: %s", x->command, strerror(se));
		goto out;
	}
	close(pfd[1]);
	pfd[1] = -1;
	/* the whole cap at once: no realloc leaves copies of the secret behind */
	if (pd_buf_reserve(&b, PD_KUBE_MAX_CRED_BYTES)) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (el >= timeout_ms) {
			rc = pd_errf(err, PD_EIO, "exec plugin %s: no answer within %ld ms (killed)", x->command, timeout_ms);
			goto out;
		}
		struct pollfd pf = {pfd[0], POLLIN, 0};
		int pr = poll(&pf, 1, (int)(timeout_ms - el));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			rc = pd_errf(err, PD_EIO, "exec plugin %s: poll: %s", x->command, strerror(errno));
			goto out;
		}
		if (pr == 0)
			continue;
		char extra;
		bool full = b.len == b.cap;
		ssize_t r = full ? read(pfd[0], &extra, 1) : read(pfd[0], b.ptr + b.len, b.cap - b.len);
		if (full && r > 0) {
			rc = pd_errf(err, PD_ELIMIT, "exec plugin %s: output over the %u-byte limit (killed)", x->command,
				     PD_KUBE_MAX_CRED_BYTES);
			goto out;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = pd_errf(err, PD_EIO, "exec plugin %s: read: %s", x->command, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		b.len += (size_t)r;
	}
	int status;
	pid_t w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	pid = -1;
	if (w < 0) {
		rc = pd_errf(err, PD_EIO, "exec plugin %s: waitpid: %s", x->command, strerror(errno));
		goto out;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		rc = pd_errf(err, PD_EIO, "exec plugin: executable %s failed with exit code %d", x->command,
			     WEXITSTATUS(status));
		goto out;
	}
	if (WIFSIGNALED(status)) {
		rc = pd_errf(err, PD_EIO, "exec plugin: executable %s was killed by signal %d", x->command,
			     WTERMSIG(status));
		goto out;
	}
	if ((rc = kube_exec_cred_parse(b.ptr ? (const char *)b.ptr : "", b.len, x->api_version, out, err)))
		pd_err_prefix(err, "%s", x->command);
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (fa_init)
		posix_spawn_file_actions_destroy(&fa);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	kube_buf_wipe(&b);
	free(argv);
	free(envp);
	free(info);
	free(infoenv);
	return rc;
}
