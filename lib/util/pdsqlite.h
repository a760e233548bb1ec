/*
 * pdsqlite.h — libsqlite3.so.0, loaded the first time profd calls it
 * (pddl.h): only commands that open a store need it. Include this instead
 * of <sqlite3.h>.
 */
#ifndef PD_PDSQLITE_H
#define PD_PDSQLITE_H

#include "pddl.h"

#include <sqlite3.h>

#define PD_SQLITE_FNS(X) \
	X(sqlite3_backup_finish) \
	X(sqlite3_backup_init) \
	X(sqlite3_backup_step) \
	X(sqlite3_bind_blob) \
	X(sqlite3_bind_int64) \
	X(sqlite3_bind_text) \
	X(sqlite3_busy_timeout) \
	X(sqlite3_changes) \
	X(sqlite3_clear_bindings) \
	X(sqlite3_close) \
	X(sqlite3_column_blob) \
	X(sqlite3_column_bytes) \
	X(sqlite3_column_count) \
	X(sqlite3_column_int) \
	X(sqlite3_column_int64) \
	X(sqlite3_column_text) \
	X(sqlite3_column_type) \
	X(sqlite3_create_function_v2) \
	X(sqlite3_db_handle) \
	X(sqlite3_errcode) \
	X(sqlite3_errmsg) \
	X(sqlite3_errstr) \
	X(sqlite3_exec) \
	X(sqlite3_finalize) \
	X(sqlite3_free) \
	X(sqlite3_get_autocommit) \
	X(sqlite3_last_insert_rowid) \
	X(sqlite3_open) \
	X(sqlite3_open_v2) \
	X(sqlite3_prepare_v2) \
	X(sqlite3_prepare_v3) \
	X(sqlite3_reset) \
	X(sqlite3_result_text) \
	X(sqlite3_result_value) \
	X(sqlite3_step) \
	X(sqlite3_system_errno) \
	X(sqlite3_value_int64) \
	X(sqlite3_value_type)

PD_DL_DECLARE(sqlite, PD_SQLITE_FNS)

#ifndef PD_SQLITE_NO_MACROS
#define sqlite3_backup_finish (pd_sqlite()->sqlite3_backup_finish)
#define sqlite3_backup_init (pd_sqlite()->sqlite3_backup_init)
#define sqlite3_backup_step (pd_sqlite()->sqlite3_backup_step)
#define sqlite3_bind_blob (pd_sqlite()->sqlite3_bind_blob)
#define sqlite3_bind_int64 (pd_sqlite()->sqlite3_bind_int64)
#define sqlite3_bind_text (pd_sqlite()->sqlite3_bind_text)
#define sqlite3_busy_timeout (pd_sqlite()->sqlite3_busy_timeout)
#define sqlite3_changes (pd_sqlite()->sqlite3_changes)
#define sqlite3_clear_bindings (pd_sqlite()->sqlite3_clear_bindings)
#define sqlite3_close (pd_sqlite()->sqlite3_close)
#define sqlite3_column_blob (pd_sqlite()->sqlite3_column_blob)
#define sqlite3_column_bytes (pd_sqlite()->sqlite3_column_bytes)
#define sqlite3_column_count (pd_sqlite()->sqlite3_column_count)
#define sqlite3_column_int (pd_sqlite()->sqlite3_column_int)
#define sqlite3_column_int64 (pd_sqlite()->sqlite3_column_int64)
#define sqlite3_column_text (pd_sqlite()->sqlite3_column_text)
#define sqlite3_column_type (pd_sqlite()->sqlite3_column_type)
#define sqlite3_create_function_v2 (pd_sqlite()->sqlite3_create_function_v2)
#define sqlite3_db_handle (pd_sqlite()->sqlite3_db_handle)
#define sqlite3_errcode (pd_sqlite()->sqlite3_errcode)
#define sqlite3_errmsg (pd_sqlite()->sqlite3_errmsg)
#define sqlite3_errstr (pd_sqlite()->sqlite3_errstr)
#define sqlite3_exec (pd_sqlite()->sqlite3_exec)
#define sqlite3_finalize (pd_sqlite()->sqlite3_finalize)
#define sqlite3_free (pd_sqlite()->sqlite3_free)
#define sqlite3_get_autocommit (pd_sqlite()->sqlite3_get_autocommit)
#define sqlite3_last_insert_rowid (pd_sqlite()->sqlite3_last_insert_rowid)
#define sqlite3_open (pd_sqlite()->sqlite3_open)
#define sqlite3_open_v2 (pd_sqlite()->sqlite3_open_v2)
#define sqlite3_prepare_v2 (pd_sqlite()->sqlite3_prepare_v2)
#define sqlite3_prepare_v3 (pd_sqlite()->sqlite3_prepare_v3)
#define sqlite3_reset (pd_sqlite()->sqlite3_reset)
#define sqlite3_result_text (pd_sqlite()->sqlite3_result_text)
#define sqlite3_result_value (pd_sqlite()->sqlite3_result_value)
#define sqlite3_step (pd_sqlite()->sqlite3_step)
#define sqlite3_system_errno (pd_sqlite()->sqlite3_system_errno)
#define sqlite3_value_int64 (pd_sqlite()->sqlite3_value_int64)
#define sqlite3_value_type (pd_sqlite()->sqlite3_value_type)
#endif

#endif
