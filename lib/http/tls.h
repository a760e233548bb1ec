/*
 * tls.h — the collector's TLS certificate (`profd serve --tls-cert F
 * --tls-key F [--tls-client-ca F]`), for libmicrohttpd's GnuTLS; see tls.c.
 */
#ifndef PD_HTTP_TLS_H
#define PD_HTTP_TLS_H

#include "../util/util.h"

#include "../util/pdgnutls.h"

/* TLS 1.2 and 1.3 only, GnuTLS's secure defaults otherwise. */
#define PD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"

/* Load a PEM certificate chain and its private key and make them the ones
 * every new handshake uses (at start and on SIGHUP). On error nothing
 * changes and err names the file and the reason (a key that is not the
 * certificate's is refused). */
int pd_tls_load(const char *cert_path, const char *key_path, struct pd_err *err) PD_WUR;
/* The gnutls_certificate_retrieve_function2 given to MHD. */
int pd_tls_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_rdn, int nreqs,
		    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
		    unsigned int *pcert_length, gnutls_privkey_t *pkey);
/* subject, chain length and expiry of the certificate in force, for logs. */
void pd_tls_describe(char *buf, size_t n);
/* Free every pair loaded (after the server stopped). */
void pd_tls_free_all(void);
/* A connection's client certificate against --tls-client-ca: 0, or -1 and why. */
int pd_tls_verify_client(void *gnutls_session, char *why, size_t n);

#endif
