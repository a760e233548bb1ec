/*
 * pdpcre2.h — libpcre2-8.so.0, loaded the first time profd calls it
 * (pddl.h): only label selectors with =~ or !~ need it. The 8-bit library;
 * pcre2.h maps pcre2_compile to pcre2_compile_8 and so on, and these macros
 * take it from there.
 * Include this instead of <pcre2.h>.
 */
#ifndef PD_PDPCRE2_H
#define PD_PDPCRE2_H

#include "pddl.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#define PD_PCRE2_FNS(X) \
	X(pcre2_code_free_8) \
	X(pcre2_compile_8) \
	X(pcre2_compile_context_create_8) \
	X(pcre2_compile_context_free_8) \
	X(pcre2_get_error_message_8) \
	X(pcre2_jit_compile_8) \
	X(pcre2_match_8) \
	X(pcre2_match_context_create_8) \
	X(pcre2_match_context_free_8) \
	X(pcre2_match_data_create_8) \
	X(pcre2_match_data_free_8) \
	X(pcre2_set_depth_limit_8) \
	X(pcre2_set_heap_limit_8) \
	X(pcre2_set_match_limit_8) \
	X(pcre2_set_newline_8)

PD_DL_DECLARE(pcre2, PD_PCRE2_FNS)

#ifndef PD_PCRE2_NO_MACROS
#define pcre2_code_free_8 (pd_pcre2()->pcre2_code_free_8)
#define pcre2_compile_8 (pd_pcre2()->pcre2_compile_8)
#define pcre2_compile_context_create_8 (pd_pcre2()->pcre2_compile_context_create_8)
#define pcre2_compile_context_free_8 (pd_pcre2()->pcre2_compile_context_free_8)
#define pcre2_get_error_message_8 (pd_pcre2()->pcre2_get_error_message_8)
#define pcre2_jit_compile_8 (pd_pcre2()->pcre2_jit_compile_8)
#define pcre2_match_8 (pd_pcre2()->pcre2_match_8)
#define pcre2_match_context_create_8 (pd_pcre2()->pcre2_match_context_create_8)
#define pcre2_match_context_free_8 (pd_pcre2()->pcre2_match_context_free_8)
#define pcre2_match_data_create_8 (pd_pcre2()->pcre2_match_data_create_8)
#define pcre2_match_data_free_8 (pd_pcre2()->pcre2_match_data_free_8)
#define pcre2_set_depth_limit_8 (pd_pcre2()->pcre2_set_depth_limit_8)
#define pcre2_set_heap_limit_8 (pd_pcre2()->pcre2_set_heap_limit_8)
#define pcre2_set_match_limit_8 (pd_pcre2()->pcre2_set_match_limit_8)
#define pcre2_set_newline_8 (pd_pcre2()->pcre2_set_newline_8)
#endif

#endif
