/*
 * pdcurl.h — libcurl, loaded the first time profd calls it (pddl.h).
 *
 * Debian's libcurl brings 25 more shared libraries (OpenSSL, Kerberos,
 * LDAP, SSH, ...): an empty program linked with -lcurl starts in 7.9 ms
 * against 1.2 ms, with 7.4 MB RSS against 1.0 MB (measured).
 *
 * Include this instead of <curl/curl.h>. curl's compile-time checks of
 * curl_easy_setopt's argument types (typecheck-gcc.h) are macros, which
 * cannot sit over the table: they are off (CURL_DISABLE_TYPECHECK).
 */
#ifndef PD_PDCURL_H
#define PD_PDCURL_H

#include "pddl.h"

#ifndef CURL_DISABLE_TYPECHECK
#define CURL_DISABLE_TYPECHECK 1
#endif
#include <curl/curl.h>

#define PD_CURL_FNS(X)                                                                                                 \
	X(curl_global_init)                                                                                            \
	X(curl_free)                                                                                                   \
	X(curl_easy_init)                                                                                              \
	X(curl_easy_setopt)                                                                                            \
	X(curl_easy_getinfo)                                                                                           \
	X(curl_easy_perform)                                                                                           \
	X(curl_easy_reset)                                                                                             \
	X(curl_easy_cleanup)                                                                                           \
	X(curl_easy_strerror)                                                                                          \
	X(curl_easy_escape)                                                                                            \
	X(curl_slist_append)                                                                                           \
	X(curl_slist_free_all)                                                                                         \
	X(curl_mime_init)                                                                                              \
	X(curl_mime_addpart)                                                                                           \
	X(curl_mime_name)                                                                                              \
	X(curl_mime_filename)                                                                                          \
	X(curl_mime_data)                                                                                              \
	X(curl_mime_free)                                                                                              \
	X(curl_multi_init)                                                                                             \
	X(curl_multi_setopt)                                                                                           \
	X(curl_multi_assign)                                                                                           \
	X(curl_multi_add_handle)                                                                                       \
	X(curl_multi_remove_handle)                                                                                    \
	X(curl_multi_socket_action)                                                                                    \
	X(curl_multi_perform)                                                                                          \
	X(curl_multi_poll)                                                                                             \
	X(curl_multi_info_read)                                                                                        \
	X(curl_multi_cleanup)                                                                                          \
	X(curl_url)                                                                                                    \
	X(curl_url_set)                                                                                                \
	X(curl_url_get)                                                                                                \
	X(curl_url_cleanup)                                                                                            \
	X(curl_url_strerror)

PD_DL_DECLARE(curl, PD_CURL_FNS)

#ifndef PD_CURL_NO_MACROS
#define curl_global_init (pd_curl()->curl_global_init)
#define curl_free (pd_curl()->curl_free)
#define curl_easy_init (pd_curl()->curl_easy_init)
#undef curl_easy_setopt
#define curl_easy_setopt (pd_curl()->curl_easy_setopt)
#undef curl_easy_getinfo
#define curl_easy_getinfo (pd_curl()->curl_easy_getinfo)
#define curl_easy_perform (pd_curl()->curl_easy_perform)
#define curl_easy_reset (pd_curl()->curl_easy_reset)
#define curl_easy_cleanup (pd_curl()->curl_easy_cleanup)
#define curl_easy_strerror (pd_curl()->curl_easy_strerror)
#define curl_easy_escape (pd_curl()->curl_easy_escape)
#define curl_slist_append (pd_curl()->curl_slist_append)
#define curl_slist_free_all (pd_curl()->curl_slist_free_all)
#define curl_mime_init (pd_curl()->curl_mime_init)
#define curl_mime_addpart (pd_curl()->curl_mime_addpart)
#define curl_mime_name (pd_curl()->curl_mime_name)
#define curl_mime_filename (pd_curl()->curl_mime_filename)
#define curl_mime_data (pd_curl()->curl_mime_data)
#define curl_mime_free (pd_curl()->curl_mime_free)
#define curl_multi_init (pd_curl()->curl_multi_init)
#undef curl_multi_setopt
#define curl_multi_setopt (pd_curl()->curl_multi_setopt)
#define curl_multi_assign (pd_curl()->curl_multi_assign)
#define curl_multi_add_handle (pd_curl()->curl_multi_add_handle)
#define curl_multi_remove_handle (pd_curl()->curl_multi_remove_handle)
#define curl_multi_socket_action (pd_curl()->curl_multi_socket_action)
#define curl_multi_perform (pd_curl()->curl_multi_perform)
#define curl_multi_poll (pd_curl()->curl_multi_poll)
#define curl_multi_info_read (pd_curl()->curl_multi_info_read)
#define curl_multi_cleanup (pd_curl()->curl_multi_cleanup)
#define curl_url (pd_curl()->curl_url)
#define curl_url_set (pd_curl()->curl_url_set)
#define curl_url_get (pd_curl()->curl_url_get)
#define curl_url_cleanup (pd_curl()->curl_url_cleanup)
#define curl_url_strerror (pd_curl()->curl_url_strerror)
#endif

#endif
