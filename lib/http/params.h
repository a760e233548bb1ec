/*
 * params.h — the request-parameter layer of API v0 (profefe-compatible),
 * independent of any HTTP library. docs/api.md is the contract it implements.
 *
 * The server hands us query parameters already URL-decoded once (as Go's
 * net/url does: "+" -> space, %XX -> byte), through a lookup callback
 * (pd_api_get_fn: first value for a key, NULL when absent). Everything here
 * turns those strings into checked values or into one error message a user
 * can act on, in profefe's words where profefe had words for it:
 *   - profile types (profefe's eight strings plus "allocs");
 *   - labels "k1=v1,k2=v2" (second QueryUnescape, exactly as Go's net/url);
 *   - times: profefe's 2006-01-02T15:04:05 (UTC), RFC3339, unix seconds,
 *     now/now-1h/-30m (Go durations); "now" is a parameter, for tests;
 *   - the list/merge query and the POST parameters;
 *   - the JSON envelope, byte-identical to Go's json.Encoder (HTML escaping,
 *     \ufffd for invalid UTF-8, trailing newline), and profile metadata JSON.
 * Errors: 0 or a negative PD_E* with err->msg filled; pd_api_http_status()
 * maps the code to the HTTP status. Nothing here keeps global state.
 */
#ifndef PD_HTTP_PARAMS_H
#define PD_HTTP_PARAMS_H

#include <jansson.h>

#include "../util/util.h"

/* Caps (over cap = PD_ELIMIT, HTTP 413 like every cap). */
#define PD_API_MAX_LABELS    64   /* labels in one "labels" parameter */
#define PD_API_MAX_PARAM_LEN 8192 /* bytes in any one parameter value we read */
/* How deep a JSON answer may nest: a flame graph of PD_FLAME_MAX_DEPTH
 * frames takes two levels per frame (api1_merge.c checks the rule). */
#define PD_JSON_MAX_DEPTH 4096

/* ---- profile types ----------------------------------------------------- */

/* Values are stable (profefe's numbers; allocs is new): the store may persist
 * them. PD_API_TYPE_ANY is "no type given" on queries, never a stored type. */
enum pd_api_type {
	PD_API_TYPE_ANY = 0,
	PD_API_TYPE_CPU = 1,
	PD_API_TYPE_HEAP = 2,
	PD_API_TYPE_BLOCK = 3,
	PD_API_TYPE_MUTEX = 4,
	PD_API_TYPE_GOROUTINE = 5,
	PD_API_TYPE_THREADCREATE = 6,
	PD_API_TYPE_ALLOCS = 7,
	PD_API_TYPE_OTHER = 127,
	PD_API_TYPE_TRACE = 128, /* parsed, but rejected by every endpoint: pprof only */
};

/* s (Go TrimSpace'd, case-sensitive) to a type; unknown or empty =
 * PD_EINVAL 'unknown profile type "<s>" (valid: cpu, heap, ...)'. */
int pd_api_parse_type(const char *s, int *type, struct pd_err *err) PD_WUR;
/* "cpu", ..., "trace"; NULL for PD_API_TYPE_ANY and non-types. */
const char *pd_api_type_name(int type);

/* ---- labels -------------------------------------------------------------- */

struct pd_api_label {
	const char *key, *value; /* NUL-terminated; may be "" (value) */
};

/*
 * Parse profefe's "k1=v1,k2=v2": split on ',', then on the first '=';
 * TrimSpace each side, then QueryUnescape it (a second decode); a chunk whose
 * key is empty is skipped (its value is not looked at); no '=' = empty value.
 * Sorted by key (bytewise, stable: duplicates kept in input order).
 * *out is one malloc'd block (array and strings): free it with
 * pd_api_labels_free. s NULL or "" = no labels (*out NULL, *n 0).
 * Errors (PD_EINVAL / PD_ELIMIT): bad "labels" "<s>": <why>.
 */
int pd_api_parse_labels(const char *s, struct pd_api_label **out, size_t *n, struct pd_err *err) PD_WUR;
void pd_api_labels_free(struct pd_api_label *labels);

/*
 * Go's url.QueryUnescape: %XX -> byte, '+' -> ' '. A '%' not followed by two
 * hex digits is PD_EINVAL 'invalid URL escape "%zz"' (Go's words). A decoded
 * NUL byte is PD_EINVAL too (C strings; Go would accept it). dst needs
 * strlen(src)+1 bytes; the result is never longer than src.
 */
int pd_api_query_unescape(const char *src, size_t n, char *dst, size_t *dlen, struct pd_err *err) PD_WUR;

/* ---- times -------------------------------------------------------------- */

/*
 * Parse a time parameter to ns since the epoch (UTC). Accepted, after
 * TrimSpace:
 *   2019-05-30T11:49:02[.123]            profefe's layout, UTC
 *   2019-05-30T11:49:02[.123](Z|+02:00)  RFC3339
 *   1559216942[.5]                       unix seconds
 *   now, now-1h, now%2B1h, -30m, now-2h30m  relative to now_ns (Go durations:
 *                                        ns us µs ms s m h, combined, fractions)
 * Fractions beyond 9 digits are truncated (as Go). Errors are PD_EINVAL
 * 'bad "<name>" timestamp "<v>": <why>', where <why> starts with profefe's
 * 'time in unsupported format "<v>"' for unrecognised text.
 */
int pd_api_parse_time(const char *name, const char *v, int64_t now_ns, int64_t *out_ns, struct pd_err *err) PD_WUR;
/* The times a stored profile can have: a profile id holds 32 bits of unix
 * seconds (github.com/rs/xid), 1970-01-01T00:00:00Z .. 2106-02-07T06:28:15Z. */
#define PD_TIME_MIN_NS INT64_C(0)
#define PD_TIME_MAX_NS (INT64_C(4294967295) * 1000000000 + 999999999)
/* pd_api_parse_time for a time that selects or stamps stored profiles (every
 * API parameter): PD_EINVAL outside [PD_TIME_MIN_NS, PD_TIME_MAX_NS]. */
int pd_api_parse_stored_time(const char *name, const char *v, int64_t now_ns, int64_t *out_ns,
			     struct pd_err *err) PD_WUR;

/*
 * Go's time.ParseDuration on s (optional sign included), in ns, with Go's
 * error messages ('time: invalid duration "x"', 'time: unknown unit "x" in
 * duration "y"', 'time: missing unit in duration "y"').
 */
int pd_api_parse_duration(const char *s, size_t n, int64_t *out_ns, struct pd_err *err) PD_WUR;

/* RFC3339 in UTC truncated to seconds ("2019-05-30T11:49:02Z", floor for
 * times before 1970), as profefe writes created_at. buf >= 32 bytes. */
#define PD_API_TIME_BUFSZ 32
const char *pd_api_format_time(int64_t ns, char *buf, size_t n);

/* ---- request parameters ------------------------------------------------- */

/* Look up the first value of a query parameter (already URL-decoded once);
 * NULL when absent. A key given without "=" may be returned as "" or NULL:
 * both mean "absent" here. */
typedef const char *(*pd_api_get_fn)(void *ctx, const char *key);

/* Adapter for parallel key/value arrays (vals[i] may be NULL): pass
 * pd_api_kv_get as the function and a struct pd_api_kv * as ctx. */
struct pd_api_kv {
	const char *const *keys;
	const char *const *vals;
	size_t n;
};
const char *pd_api_kv_get(void *kv, const char *key);

/*
 * GET /api/0/profiles and /api/0/profiles/merge:
 *   service  required, non-empty, taken as is (not trimmed)
 *   type     optional; absent, blank or "unknown" (profefe's name of no
 *            type, sent by kube-profefe) = PD_API_TYPE_ANY; another
 *            unknown name = 400; trace = 400 (not supported)
 *   labels   optional, pd_api_parse_labels; a profile matches when it
 *            carries every query label (exact key and value)
 *   from, to required (as in profefe); window [from, to] inclusive, ns
 *   limit    optional integer >= 0 (Go strconv.Atoi syntax); 0 or absent =
 *            no limit; N = the newest N matches (returned ascending)
 *   anything else (instance_id, seconds, ...) is ignored.
 * All messages start with "bad request: ". On error *q is left zeroed.
 */
struct pd_api_query {
	char *service; /* malloc'd */
	int type;      /* enum pd_api_type; PD_API_TYPE_ANY = every type */
	struct pd_api_label *labels; /* pd_api_parse_labels block, or NULL */
	size_t nlabels;
	int64_t from_ns, to_ns; /* inclusive */
	int64_t limit;          /* 0 = no limit */
};
int pd_api_parse_query(pd_api_get_fn get, void *ctx, int64_t now_ns, struct pd_api_query *q,
		       struct pd_err *err) PD_WUR;
void pd_api_query_free(struct pd_api_query *q);

/*
 * POST /api/0/profiles:
 *   service     required, non-empty
 *   type        optional (absent or blank: inferred from the profile);
 *               known; allocs accepted; "unknown" = 400; trace = 400 (pprof only)
 *   labels      optional
 *   created_at  optional, any pd_api_parse_time format
 * Everything else is ignored (instance_id: kube-profefe sends it).
 */
struct pd_api_post {
	char *service; /* malloc'd */
	int type;
	struct pd_api_label *labels;
	size_t nlabels;
	bool has_created_at;
	int64_t created_at_ns; /* valid when has_created_at */
};
int pd_api_parse_post(pd_api_get_fn get, void *ctx, int64_t now_ns, struct pd_api_post *p,
		      struct pd_err *err) PD_WUR;
void pd_api_post_free(struct pd_api_post *p);

/* HTTP status for a PD_E* code from this module (and the store): EINVAL,
 * EUSAGE, EINCOMPAT, EEXPIRED -> 400; ELIMIT (over any cap) -> 413; ENOTFOUND -> 404;
 * else 500. */
int pd_api_http_status(int rc);

/* ---- JSON ------------------------------------------------------------------ */

/*
 * The envelope, exactly as profefe's Go json.Encoder writes it: compact,
 * field order code, body / code, error, a trailing "\n"; strings escaped as
 * Go does with SetEscapeHTML(true) (<, >, & as \u003c \u003e \u0026; U+2028,
 * U+2029 escaped; control bytes \n \r \t or \u00XX lowercase; invalid UTF-8
 * bytes as \ufffd). Objects are written in jansson's insertion order.
 * Returns a malloc'd NUL-terminated string (caller frees), NULL on OOM or a
 * value Go cannot encode (NaN, Inf). body is borrowed; NULL = omitted.
 */
char *pd_api_ok_json(json_t *body);
/* {"code":<status>,"error":"<msg>"}\n ; msg NULL or "" omits "error" as Go's
 * omitempty does. */
char *pd_api_error_json(int status, const char *msg);
/* Any JSON value encoded as Go's json.Encoder would (with the "\n"). */
char *pd_api_json_encode(json_t *v);

/*
 * Profile metadata as profefe's models.go: {"id","type","service","labels"
 * (omitted when nlabels is 0; [{"key","value"}...] in the given order),
 * "created_at" (pd_api_format_time)}. Strings are copied without UTF-8
 * validation (the encoder replaces invalid bytes as Go does). type must be a
 * concrete type. New reference (json_decref it), NULL on OOM or bad type.
 */
json_t *pd_api_profile_json(const char *id, int type, const char *service, const struct pd_api_label *labels,
			    size_t nlabels, int64_t created_at_ns);

#endif
