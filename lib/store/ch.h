/*
 * ch.h — ClickHouse over its HTTP interface, for the ClickHouse store
 * backend (clickhouse.c): the store URL, a pool of libcurl handles (one
 * per concurrent request, so the store's callers never share one), a
 * query call that sends SQL (and, for INSERT, a RowBinary body), and the
 * RowBinary writer and reader. Internal to lib/store.
 *
 * Errors: a server that cannot be reached, times out or answers 5xx is
 * PD_EUNAVAIL ("try again later", HTTP 503 to profd's clients) with the
 * cause; an answer with ClickHouse's "Code: N, e.displayText() = ..." is
 * PD_EIO with that text (the SQL is never echoed: it can be long).
 * Queries run with wait_end_of_query=1: without it, an error after the
 * first megabytes of an answer comes as HTTP 200 with the error text at
 * the end of the body.
 */
#ifndef PD_STORE_CH_H
#define PD_STORE_CH_H

#include "../util/util.h"

#include <pthread.h>

/* clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE[?cluster=NAME&insert_quorum=N&secure=1] */
struct pd_ch_url {
	char *user, *password; /* NULL: ClickHouse's "default" user without one */
	char *host;            /* as given (IPv6 in brackets) */
	int port;              /* its HTTP(S) interface: 8123 / 8443 when absent */
	char *database;
	char *cluster;     /* ?cluster=NAME: tables ON CLUSTER, Distributed reads and writes */
	bool secure;       /* ?secure=1: https */
	int insert_quorum; /* ?insert_quorum=N (1..16): INSERTs wait for N replicas; 0 = not set */
};
/* Parse a store URL; PD_EUSAGE with what is wrong. */
int pd_ch_url_parse(const char *url, struct pd_ch_url *out, struct pd_err *err) PD_WUR;
void pd_ch_url_free(struct pd_ch_url *u);

struct pd_ch_opts {
	const char *cacert; /* PEM CA for https (NULL: the system's) */
	bool insecure;      /* do not verify the server's certificate */
	long timeout_ms;    /* per request, 0 = 30 s */
};

struct pd_ch;
int pd_ch_open(const struct pd_ch_url *u, const struct pd_ch_opts *o, struct pd_ch **out, struct pd_err *err) PD_WUR;
void pd_ch_close(struct pd_ch *c);
/* The URL without the password, for messages: http://HOST:PORT/DATABASE. */
const char *pd_ch_where(const struct pd_ch *c);
const char *pd_ch_database(const struct pd_ch *c);

/*
 * Run sql. data (n bytes) NULL: the SQL is the request body; else the SQL
 * goes in the URL and data is the body (INSERT ... FORMAT RowBinary).
 * settings: extra URL parameters ("insert_quorum=2&..."), NULL for none.
 * out (may be NULL) receives the answer (reset first), capped at out->max.
 */
int pd_ch_query(struct pd_ch *c, const char *sql, const void *data, size_t n, const char *settings, struct pd_buf *out,
                struct pd_err *err) PD_WUR;

/* The same with its own timeout (ms; 0 = the connection's). */
int pd_ch_query_to(struct pd_ch *c, const char *sql, const void *data, size_t n, const char *settings,
                   struct pd_buf *out, long timeout_ms, struct pd_err *err) PD_WUR;

/* sql (in the URL) with data, n bytes of RowBinary rows of structure
 * ("kind UInt8, h FixedString(16)"), as the temporary table `name` (external
 * data: no long IN list to parse). */
int pd_ch_query_ext(struct pd_ch *c, const char *sql, const char *name, const char *structure, const void *data,
                    size_t n, const char *settings, struct pd_buf *out, struct pd_err *err) PD_WUR;

/* ---- SQL text ---- */
/* Append s as a string literal that cannot break out: '\xHH...' (every byte). */
int pd_ch_lit(struct pd_buf *b, const void *s, size_t n) PD_WUR;
int pd_ch_lit_s(struct pd_buf *b, const char *s) PD_WUR;

/* ---- RowBinary ---- */
int pd_rb_u8(struct pd_buf *b, uint8_t v) PD_WUR;
int pd_rb_u16(struct pd_buf *b, uint16_t v) PD_WUR;                /* Date: days since the epoch */
int pd_rb_u64(struct pd_buf *b, uint64_t v) PD_WUR;                /* UInt64, Int64 (two's complement) */
int pd_rb_str(struct pd_buf *b, const void *s, size_t n) PD_WUR;   /* String: varint length, bytes */
int pd_rb_fixed(struct pd_buf *b, const void *s, size_t n) PD_WUR; /* FixedString(n) */
int pd_rb_len(struct pd_buf *b, uint64_t n) PD_WUR;                /* an Array's element count */

struct pd_rb_rd {
	const uint8_t *p, *end;
	bool bad; /* ran past the end or a length did not fit: every later read gives 0 / "" */
};
uint8_t pd_rb_get_u8(struct pd_rb_rd *r);
uint16_t pd_rb_get_u16(struct pd_rb_rd *r);
uint64_t pd_rb_get_u64(struct pd_rb_rd *r);
uint64_t pd_rb_get_len(struct pd_rb_rd *r);
/* A String (points into the answer). */
const uint8_t *pd_rb_get_str(struct pd_rb_rd *r, size_t *n);
/* FixedString(n) copied to out. */
void pd_rb_get_fixed(struct pd_rb_rd *r, void *out, size_t n);

#endif
