/*
 * tls.c — the collector's certificate for libmicrohttpd's GnuTLS, loaded
 * from PEM files and replaceable while serving (SIGHUP).
 *
 * MHD takes the certificate through a GnuTLS retrieve callback
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), which GnuTLS calls in every handshake
 * without a user pointer: the certificate in force is a process-wide atomic
 * pointer (one TLS server per process). A reload loads the new pair first
 * (a broken pair changes nothing) and swaps the pointer; the old pair stays
 * allocated until the server stops, since a handshake in progress may still
 * use it (a few KB per reload).
 */
#define _GNU_SOURCE
#include "tls.h"

#include "../util/pdgnutls.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 16

struct pd_tls_cert {
	gnutls_pcert_st pcert[MAX_CHAIN];
	unsigned n;
	gnutls_privkey_t key;
	struct pd_tls_cert *older; /* kept until pd_tls_free_all */
	char subject[256];
	int64_t not_after; /* unix seconds */
};

static _Atomic(struct pd_tls_cert *) current;
static struct pd_tls_cert *all; /* every pair loaded (under the caller's single thread) */

static int read_file(const char *what, const char *path, gnutls_datum_t *d, struct pd_err *err)
{
	struct pd_buf b = PD_BUF_INIT(1u << 20);
	int rc = pd_buf_read_file(&b, path, err);
	if (rc) {
		pd_err_prefix(err, "%s", what);
		return rc;
	}
	d->data = b.ptr;
	d->size = (unsigned)b.len;
	return 0;
}

static void datum_free(gnutls_datum_t *d)
{
	if (d->data)
		memset(d->data, 0, d->size);
	free(d->data);
	d->data = NULL;
}

static void cert_free(struct pd_tls_cert *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n; i++)
		gnutls_pcert_deinit(&c->pcert[i]);
	if (c->key)
		gnutls_privkey_deinit(c->key);
	free(c);
}

int pd_tls_load(const char *cert_path, const char *key_path, struct pd_err *err)
{
	gnutls_datum_t cd = {0}, kd = {0};
	struct pd_tls_cert *c = calloc(1, sizeof *c);
	int rc = 0, g;
	if (!c)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if ((rc = read_file("--tls-cert", cert_path, &cd, err)) || (rc = read_file("--tls-key", key_path, &kd, err)))
		goto out;
	c->n = MAX_CHAIN;
	if ((g = gnutls_pcert_list_import_x509_raw(c->pcert, &c->n, &cd, GNUTLS_X509_FMT_PEM, 0)) < 0) {
		c->n = 0;
		rc = pd_errf(err, PD_EINVAL, "--tls-cert %s: %s (want PEM certificates, the server's first)", cert_path,
			     gnutls_strerror(g));
		goto out;
	}
	if ((g = gnutls_privkey_init(&c->key)) < 0 ||
	    (g = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		rc = pd_errf(err, PD_EINVAL, "--tls-key %s: %s (want an unencrypted PEM private key)", key_path,
			     gnutls_strerror(g));
		goto out;
	}
	/* the key must be the certificate's */
	gnutls_pubkey_t pub = c->pcert[0].pubkey;
	gnutls_datum_t probe = {(unsigned char *)"profd", 5}, sig = {0};
	gnutls_sign_algorithm_t alg;
	unsigned flags = 0;
	if ((g = gnutls_pubkey_get_preferred_hash_algorithm(pub, NULL, NULL)) < 0 ||
	    (alg = gnutls_pk_to_sign((gnutls_pk_algorithm_t)gnutls_pubkey_get_pk_algorithm(pub, NULL),
				     GNUTLS_DIG_SHA256)) == GNUTLS_SIGN_UNKNOWN ||
	    gnutls_privkey_sign_data2(c->key, alg, flags, &probe, &sig) < 0 ||
	    gnutls_pubkey_verify_data2(pub, alg, flags, &probe, &sig) < 0) {
		gnutls_free(sig.data);
		rc = pd_errf(err, PD_EINVAL, "--tls-key %s is not the key of the certificate in --tls-cert %s", key_path,
			     cert_path);
		goto out;
	}
	gnutls_free(sig.data);
	gnutls_x509_crt_t crt;
	if (gnutls_x509_crt_init(&crt) >= 0) {
		if (gnutls_x509_crt_import(crt, &c->pcert[0].cert, GNUTLS_X509_FMT_DER) >= 0) {
			size_t sn = sizeof c->subject;
			if (gnutls_x509_crt_get_dn(crt, c->subject, &sn) < 0)
				c->subject[0] = 0;
			c->not_after = (int64_t)gnutls_x509_crt_get_expiration_time(crt);
		}
		gnutls_x509_crt_deinit(crt);
	}
out:
	datum_free(&cd);
	datum_free(&kd);
	if (rc) {
		cert_free(c);
		return rc;
	}
	c->older = all;
	all = c;
	atomic_store(&current, c);
	return 0;
}

int pd_tls_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_rdn, int nreqs,
		    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
		    unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
	(void)s, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
	struct pd_tls_cert *c = atomic_load(&current);
	if (!c)
		return -1;
	*pcert = c->pcert;
	*pcert_length = c->n;
	*pkey = c->key;
	return 0;
}

void pd_tls_describe(char *buf, size_t n)
{
	struct pd_tls_cert *c = atomic_load(&current);
	if (!c) {
		snprintf(buf, n, "none");
		return;
	}
	char exp[32] = "?";
	time_t t = (time_t)c->not_after;
	struct tm tm;
	if (c->not_after > 0 && gmtime_r(&t, &tm))
		strftime(exp, sizeof exp, "%Y-%m-%dT%H:%M:%SZ", &tm);
	char q[4 * sizeof c->subject];
	snprintf(buf, n, "subject=\"%s\" chain=%u not_after=%s", pd_log_esc(q, sizeof q, c->subject), c->n, exp);
}

void pd_tls_free_all(void)
{
	atomic_store(&current, NULL);
	while (all) {
		struct pd_tls_cert *o = all->older;
		cert_free(all);
		all = o;
	}
}

int pd_tls_verify_client(void *session, char *why, size_t n)
{
	gnutls_session_t s = session;
	unsigned status = 0;
	/* a certificate made for servers only (extended key usage without
	 * clientAuth) is no client's: one without the extension is any purpose's */
	gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
	int g = gnutls_certificate_verify_peers(s, &purpose, 1, &status);
	if (g == GNUTLS_E_NO_CERTIFICATE_FOUND || (g >= 0 && gnutls_certificate_get_peers(s, &(unsigned){0}) == NULL)) {
		snprintf(why, n, "a client certificate is required (--tls-client-ca)");
		return -1;
	}
	if (g < 0) {
		snprintf(why, n, "the client certificate could not be verified: %s", gnutls_strerror(g));
		return -1;
	}
	if (status) {
		gnutls_datum_t out = {0};
		if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) >= 0) {
			/* GnuTLS ends each sentence with ". ": no trailing blank in the answer */
			size_t len = strlen((const char *)out.data);
			while (len > 0 && out.data[len - 1] == ' ')
				len--;
			snprintf(why, n, "the client certificate is not trusted: %.*s", (int)len, (const char *)out.data);
			gnutls_free(out.data);
		} else {
			snprintf(why, n, "the client certificate is not trusted");
		}
		return -1;
	}
	return 0;
}
