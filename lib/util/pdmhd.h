/*
 * pdmhd.h — libmicrohttpd.so.12, loaded the first time profd calls it (pddl.h).
 * Include this instead of <microhttpd.h>.
 */
#ifndef PD_PDMHD_H
#define PD_PDMHD_H

#include "pddl.h"

#include <microhttpd.h>

#define PD_MHD_FNS(X) \
	X(MHD_start_daemon) \
	X(MHD_stop_daemon) \
	X(MHD_quiesce_daemon) \
	X(MHD_get_daemon_info) \
	X(MHD_get_connection_info) \
	X(MHD_set_connection_option) \
	X(MHD_get_connection_values_n) \
	X(MHD_lookup_connection_value) \
	X(MHD_create_response_from_buffer) \
	X(MHD_create_response_from_callback) \
	X(MHD_add_response_header) \
	X(MHD_get_response_header) \
	X(MHD_queue_response) \
	X(MHD_suspend_connection) \
	X(MHD_resume_connection) \
	X(MHD_destroy_response)

PD_DL_DECLARE(mhd, PD_MHD_FNS)

#ifndef PD_MHD_NO_MACROS
#define MHD_start_daemon (pd_mhd()->MHD_start_daemon)
#define MHD_stop_daemon (pd_mhd()->MHD_stop_daemon)
#define MHD_quiesce_daemon (pd_mhd()->MHD_quiesce_daemon)
#define MHD_get_daemon_info (pd_mhd()->MHD_get_daemon_info)
#define MHD_get_connection_info (pd_mhd()->MHD_get_connection_info)
#define MHD_set_connection_option (pd_mhd()->MHD_set_connection_option)
#define MHD_get_connection_values_n (pd_mhd()->MHD_get_connection_values_n)
#define MHD_lookup_connection_value (pd_mhd()->MHD_lookup_connection_value)
#define MHD_create_response_from_buffer (pd_mhd()->MHD_create_response_from_buffer)
#define MHD_create_response_from_callback (pd_mhd()->MHD_create_response_from_callback)
#define MHD_add_response_header (pd_mhd()->MHD_add_response_header)
#define MHD_get_response_header (pd_mhd()->MHD_get_response_header)
#define MHD_queue_response (pd_mhd()->MHD_queue_response)
#define MHD_suspend_connection (pd_mhd()->MHD_suspend_connection)
#define MHD_resume_connection (pd_mhd()->MHD_resume_connection)
#define MHD_destroy_response (pd_mhd()->MHD_destroy_response)
#endif

#endif
