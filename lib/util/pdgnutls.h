/*
 * pdgnutls.h — libgnutls.so.30, loaded the first time profd calls it (pddl.h).
 * Include this instead of <gnutls/gnutls.h>, <gnutls/abstract.h>, <gnutls/x509.h>.
 */
#ifndef PD_PDGNUTLS_H
#define PD_PDGNUTLS_H

#include "pddl.h"

#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>

#define PD_GNUTLS_FNS(X) \
	X(gnutls_strerror) \
	X(gnutls_free) \
	X(gnutls_certificate_get_peers) \
	X(gnutls_certificate_verify_peers) \
	X(gnutls_certificate_verification_status_print) \
	X(gnutls_x509_crt_init) \
	X(gnutls_x509_crt_deinit) \
	X(gnutls_x509_crt_import) \
	X(gnutls_x509_crt_get_dn) \
	X(gnutls_x509_crt_get_expiration_time) \
	X(gnutls_pcert_list_import_x509_raw) \
	X(gnutls_pcert_deinit) \
	X(gnutls_privkey_init) \
	X(gnutls_privkey_deinit) \
	X(gnutls_privkey_import_x509_raw) \
	X(gnutls_privkey_sign_data2) \
	X(gnutls_pubkey_get_pk_algorithm) \
	X(gnutls_pubkey_get_preferred_hash_algorithm) \
	X(gnutls_pubkey_verify_data2) \
	X(gnutls_pk_to_sign)

PD_DL_DECLARE(gnutls, PD_GNUTLS_FNS)

#ifndef PD_GNUTLS_NO_MACROS
#define gnutls_strerror (pd_gnutls()->gnutls_strerror)
#define gnutls_certificate_get_peers (pd_gnutls()->gnutls_certificate_get_peers)
#define gnutls_certificate_verify_peers (pd_gnutls()->gnutls_certificate_verify_peers)
#define gnutls_certificate_verification_status_print (pd_gnutls()->gnutls_certificate_verification_status_print)
#define gnutls_x509_crt_init (pd_gnutls()->gnutls_x509_crt_init)
#define gnutls_x509_crt_deinit (pd_gnutls()->gnutls_x509_crt_deinit)
#define gnutls_x509_crt_import (pd_gnutls()->gnutls_x509_crt_import)
#define gnutls_x509_crt_get_dn (pd_gnutls()->gnutls_x509_crt_get_dn)
#define gnutls_x509_crt_get_expiration_time (pd_gnutls()->gnutls_x509_crt_get_expiration_time)
#define gnutls_pcert_list_import_x509_raw (pd_gnutls()->gnutls_pcert_list_import_x509_raw)
#define gnutls_pcert_deinit (pd_gnutls()->gnutls_pcert_deinit)
#define gnutls_privkey_init (pd_gnutls()->gnutls_privkey_init)
#define gnutls_privkey_deinit (pd_gnutls()->gnutls_privkey_deinit)
#define gnutls_privkey_import_x509_raw (pd_gnutls()->gnutls_privkey_import_x509_raw)
#define gnutls_privkey_sign_data2 (pd_gnutls()->gnutls_privkey_sign_data2)
#define gnutls_pubkey_get_pk_algorithm (pd_gnutls()->gnutls_pubkey_get_pk_algorithm)
#define gnutls_pubkey_get_preferred_hash_algorithm (pd_gnutls()->gnutls_pubkey_get_preferred_hash_algorithm)
#define gnutls_pubkey_verify_data2 (pd_gnutls()->gnutls_pubkey_verify_data2)
#define gnutls_pk_to_sign (pd_gnutls()->gnutls_pk_to_sign)
/* gnutls_free is a variable (the library's free function), wrapped by a
 * macro that also clears the pointer */
#undef gnutls_free
#define gnutls_free(a) ((*pd_gnutls()->gnutls_free)((void *)(a)), (a) = NULL)
#endif

#endif
