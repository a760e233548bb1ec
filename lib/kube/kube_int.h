/*
 * kube_int.h — what the files of lib/kube share and nothing else needs:
 * base64, RFC 3339 times, secret files, the JSON -> pod decoder used by the
 * list, get and watch paths, and exec credential plugins. Unit tests include
 * it to test these pieces directly.
 */
#ifndef PD_KUBE_INT_H
#define PD_KUBE_INT_H

#include <jansson.h>

#include "kube.h"

/* ---- small helpers (kubeconfig.c) --------------------------------------------- */

/* Standard base64 (padding optional; ASCII whitespace ignored, as Go's
 * decoder ignores newlines). *out is malloc'd (a trailing NUL is added, not
 * counted in *n). Bad input: PD_EINVAL, "invalid base64 at byte N". */
int kube_b64_decode(const char *s, size_t len, uint8_t **out, size_t *n, struct pd_err *err) PD_WUR;
/* Standard base64 with padding, malloc'd NUL-terminated; NULL on OOM. */
char *kube_b64_encode(const uint8_t *p, size_t n);

/* RFC 3339 ("2024-05-01T10:00:00Z", fraction and offset optional) to unix
 * seconds; -1 when malformed. */
double kube_parse_rfc3339(const char *s);

/* A token as an HTTP header value needs visible ASCII only (no CR/LF: no
 * header injection). */
/* [*s, *e): b without leading and trailing whitespace (a token file's). */
static inline void kube_trim(const struct pd_buf *b, size_t *s, size_t *e)
{
	*s = 0, *e = b->len;
	while (*s < *e && (b->ptr[*s] == ' ' || b->ptr[*s] == '\n' || b->ptr[*s] == '\r' || b->ptr[*s] == '\t'))
		(*s)++;
	while (*e > *s && (b->ptr[*e - 1] == ' ' || b->ptr[*e - 1] == '\n' || b->ptr[*e - 1] == '\r' || b->ptr[*e - 1] == '\t'))
		(*e)--;
}
bool kube_token_ok(const char *s, size_t n);

/* Read a credential file (capped at PD_KUBE_MAX_CRED_BYTES) into b (b->max is
 * set here); errors are "<path>: <why>". */
int kube_read_secret(const char *path, struct pd_buf *b, struct pd_err *err) PD_WUR;
/* Zero and free (explicit_bzero: the compiler may not drop it). */
void kube_buf_wipe(struct pd_buf *b);
void kube_wipe(void *p, size_t n);

/* Does it look like PEM ("-----BEGIN ")? */
bool kube_is_pem(const uint8_t *p, size_t n);

/* ---- pods (pod.c) ---------------------------------------------------------- */

/* Decode a pod from a parsed JSON object into a; `where` prefixes errors
 * ("pod JSON", "items[3]"). */
int kube_pod_from_json(json_t *o, struct pd_arena *a, struct pd_kube_pod *out, const char *where,
		       struct pd_err *err) PD_WUR;
/* kube_pod_from_json failed (err says why): keep the pod as invalid, with
 * what of its metadata can be read. PD_ENOMEM, or the original error when
 * not even metadata.namespace and metadata.name are strings. */
int kube_pod_invalid(json_t *o, struct pd_arena *a, struct pd_kube_pod *out, int rc, struct pd_err *err) PD_WUR;
/* A namespace or object name safe to put in a URL path: letters, digits,
 * '-', '.', '_', at most 253 bytes, not "." or "..". */
bool kube_name_ok(const char *s);
/* jansson's parse error as "<where>: line L column C (byte B): <text>". */
int kube_json_error(struct pd_err *err, const char *where, const json_error_t *je);
/* A Kubernetes Status object's code, reason and message (NULL when absent). */
void kube_status_fields(json_t *o, long *code, const char **reason, const char **message);

/* ---- exec credential plugins (exec.c) ------------------------------------- */

struct kube_cred {
	char *token;    /* malloc'd, NULL = none */
	uint8_t *cert;  /* PEM, malloc'd */
	uint8_t *key;
	size_t cert_len, key_len;
	double expiry;  /* unix seconds; 0 = does not expire */
};
void kube_cred_clear(struct kube_cred *c); /* wipes */

/* Parse an ExecCredential (the plugin's stdout) that must carry apiVersion
 * api_version. A token or a certificate + key pair is required. */
int kube_exec_cred_parse(const char *json, size_t len, const char *api_version, struct kube_cred *out,
			 struct pd_err *err) PD_WUR;

/* Run cfg->exec (environment + KUBERNETES_EXEC_INFO), read its stdout
 * (capped, timeout_ms), parse it. stderr is inherited, stdin too when the
 * plugin may be interactive and stdin is a terminal, else /dev/null. */
int kube_exec_run(const struct pd_kube_config *cfg, long timeout_ms, struct kube_cred *out,
		  struct pd_err *err) PD_WUR;

#endif
