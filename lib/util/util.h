/*
 * util.h — the small foundation every profd module stands on.
 *
 * - One error convention: fallible functions return int, 0 on success or a
 *   negative PD_E* code, and fill a caller-provided struct pd_err with a
 *   message a user can act on ("what, where, what to try").
 * - Arenas: bump allocators for everything whose lifetime is one decode, one
 *   merge or one request; freed in one call. Built with -DPD_ARENA_MALLOC (the
 *   sanitizer build does), every arena allocation is a real malloc so ASan
 *   sees each object's bounds.
 * - Capped byte buffers: every growable buffer has a maximum; growing past it
 *   is PD_ELIMIT, never an OOM.
 * - An open-addressing hash index (hash -> uint32 slot) used for interning.
 */
#ifndef PD_UTIL_H
#define PD_UTIL_H

#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(__GNUC__)
#define PD_WUR __attribute__((warn_unused_result))
#define PD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PD_LIKELY(x) __builtin_expect(!!(x), 1)
#define PD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PD_WUR
#define PD_PRINTF(a, b)
#define PD_LIKELY(x) (x)
#define PD_UNLIKELY(x) (x)
#endif

/* Error codes. */
enum {
	PD_OK = 0,
	PD_EINVAL = -1,    /* malformed input */
	PD_ENOMEM = -2,    /* allocation failed */
	PD_ELIMIT = -3,    /* input exceeds a configured cap */
	PD_EIO = -4,       /* file or socket error */
	PD_EINCOMPAT = -5, /* profiles cannot be combined */
	PD_ENOTFOUND = -6,
	PD_EUSAGE = -7,    /* bad arguments */
	PD_EEXPIRED = -8,  /* older than the retention window */
	PD_EBUSY = -9,     /* a shared budget is exhausted: try again later (HTTP 503) */
	PD_ENOSPC = -10,   /* the disk is full: nothing was written (HTTP 507) */
	PD_EUNAVAIL = -11, /* a server we depend on (the store's database) cannot be reached or is failing:
			    * nothing was written, try again later (HTTP 503) */
};

/* Whether [s, s+n) is valid UTF-8 (no overlongs, surrogates or code
 * points past U+10FFFF); if not, *bad (may be NULL) = the offset of the
 * first bad byte. */
bool pd_utf8_valid(const void *s, size_t n, size_t *bad);

struct pd_err {
	int code;
	char msg[512];
};

/* Set err (may be NULL) to code and a formatted message; returns code. */
int pd_errf(struct pd_err *err, int code, const char *fmt, ...) PD_PRINTF(3, 4);
/* Prefix an existing message: "<prefix>: <old message>". */
void pd_err_prefix(struct pd_err *err, const char *fmt, ...) PD_PRINTF(2, 3);
const char *pd_strerror(int code);

/* Always-on assertion for impossible states: logs file:line and aborts. */
#define PD_ASSERT(c) ((c) ? (void)0 : pd__assert_fail(#c, __FILE__, __LINE__))
_Noreturn void pd__assert_fail(const char *expr, const char *file, int line);

/* ---- arena ---------------------------------------------------------- */
struct pd_arena;
struct pd_arena *pd_arena_new(size_t chunk_size);
void pd_arena_free(struct pd_arena *a);
/* 8-byte aligned; NULL on OOM. Memory is valid until pd_arena_free. */
void *pd_arena_alloc(struct pd_arena *a, size_t n);
void *pd_arena_calloc(struct pd_arena *a, size_t n, size_t size);
/* Copy n bytes into the arena. */
void *pd_arena_dup(struct pd_arena *a, const void *p, size_t n);
/* Bytes handed out (not counting chunk slack). */
size_t pd_arena_used(const struct pd_arena *a);

/* Grow a malloc'd array *p of *cap elements of elsz bytes (doubling) so it
 * holds at least need; 0 or PD_ENOMEM (then *p is unchanged). */
int pd_grow(void **p, size_t *cap, size_t need, size_t elsz) PD_WUR;

/* ---- capped byte buffer ---------------------------------------------- */
struct pd_buf {
	uint8_t *ptr;
	size_t len, cap;
	size_t max; /* 0 = SIZE_MAX */
};
#define PD_BUF_INIT(maxbytes) {NULL, 0, 0, (maxbytes)}
int pd_buf_reserve(struct pd_buf *b, size_t extra) PD_WUR;
int pd_buf_append(struct pd_buf *b, const void *p, size_t n) PD_WUR;
/* Append printf output (any length); 0, PD_ENOMEM or PD_EINVAL. */
int pd_buf_appendf(struct pd_buf *b, const char *fmt, ...) PD_PRINTF(2, 3);
void pd_buf_free(struct pd_buf *b);
/* Read a whole file (or stdin for "-") into b, honouring b->max. */
int pd_buf_read_file(struct pd_buf *b, const char *path, struct pd_err *err) PD_WUR;
/* Write a buffer to a file atomically (temp, fsync, rename); "-" = stdout. */
int pd_write_file(const char *path, const void *p, size_t n, struct pd_err *err) PD_WUR;
/* fsync the directory holding path, so that a rename or creation of path
 * is durable; -1 (errno) if it cannot be opened or synced. */
int pd_fsync_parent(const char *path);

/* a + b and -a wrapping around as Go's int64 arithmetic does (pprof sums
 * sample values so; a hostile profile's values may overflow): the same
 * result as go tool pprof, and no undefined behaviour. */
static inline int64_t pd_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t pd_wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
static inline int64_t pd_wabs(int64_t a) { return a < 0 ? pd_wneg(a) : a; } /* as pprof's abs64 */

/* ---- hashing ----------------------------------------------------------- */
uint64_t pd_hash(const void *p, size_t n, uint64_t seed);
static inline uint64_t pd_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/*
 * Hash index: maps a 64-bit hash to uint32 values (indexes into the caller's
 * own arrays). The caller resolves collisions: pd_hidx_find walks every slot
 * with an equal hash and asks eq(ctx, value) whether it is the one.
 */
struct pd_hidx_slot {
	uint64_t hash; /* 0 = empty (hash 0 is remapped to 1) */
	uint32_t val;
};
struct pd_hidx {
	struct pd_hidx_slot *slots; /* hash and value side by side: one cache line per probe */
	size_t mask, n;
};
typedef bool (*pd_hidx_eq)(void *ctx, uint32_t val);
int pd_hidx_init(struct pd_hidx *h, size_t expected) PD_WUR;
void pd_hidx_free(struct pd_hidx *h);
static inline uint64_t pd__hidx_fix(uint64_t h) { return h ? h : 1; }
/* The probe of both lookups below; whole: the hash is pd_hash_u64 of the
 * whole key (pd_hidx_find_u64). */
static inline uint32_t pd__hidx_probe(const struct pd_hidx *h, uint64_t hash, pd_hidx_eq eq, void *ctx, bool whole)
{
	hash = pd__hidx_fix(hash);
	size_t i = hash & h->mask;
	for (;;) {
		const struct pd_hidx_slot *s = &h->slots[i];
		if (s->hash == 0)
			return UINT32_MAX;
		if (s->hash == hash && ((whole && hash != 1) || eq(ctx, s->val)))
			return s->val;
		i = (i + 1) & h->mask;
	}
}
/* Returns the value found or UINT32_MAX. Inline, so that each call site's
 * eq (a constant) is inlined into the probe loop. */
static inline uint32_t pd_hidx_find(const struct pd_hidx *h, uint64_t hash, pd_hidx_eq eq, void *ctx)
{
	return pd__hidx_probe(h, hash, eq, ctx, false);
}
/* For an index whose hash is pd_hash_u64 of the whole key: that is a
 * bijection (each step of it can be undone), so an equal hash is an equal
 * key, and eq is not asked (its load of the stored key was a cache miss on
 * every lookup). But for the one hash two keys share: 0 (the key 0) is
 * stored as 1, as is the key whose hash is 1; eq tells those apart. */
static inline uint32_t pd_hidx_find_u64(const struct pd_hidx *h, uint64_t hash, pd_hidx_eq eq, void *ctx)
{
	return pd__hidx_probe(h, hash, eq, ctx, true);
}
/* Bring the slot a lookup of hash starts at into the cache (a pipeline's
 * early stage, ahead of the lookup). */
static inline void pd_hidx_prefetch(const struct pd_hidx *h, uint64_t hash)
{
	__builtin_prefetch(&h->slots[pd__hidx_fix(hash) & h->mask]);
}
/* Insert without checking for an existing equal entry. */
int pd_hidx_insert(struct pd_hidx *h, uint64_t hash, uint32_t val) PD_WUR;

/* ---- misc ------------------------------------------------------------ */
/* Format v as a human-readable byte count into buf ("1.5 MiB"). */
const char *pd_fmt_bytes(char *buf, size_t n, double v);
/* Logging: every line of the binary's logs is built as logfmt and written
 * by pd_log_emit (lib/util/log.c): as it is (the default), or as one JSON
 * object per line; lines below the minimum level are dropped (a line
 * without level= counts as info). */
enum { PD_LOG_DEBUG, PD_LOG_INFO, PD_LOG_WARN, PD_LOG_ERROR };
enum { PD_LOG_LOGFMT, PD_LOG_JSON };
/* --log-format, --log-level (process-wide). */
void pd_log_setup(int format, int min_level);
/* "debug", "info", "warn" (or "warning"), "error" -> PD_LOG_*; -1 otherwise. */
int pd_log_parse_level(const char *s);
/* One logfmt line (no newline) to f, in the chosen format, flushed. */
void pd_log_emit(FILE *f, const char *line);
/* A string for a log line (into buf, NUL-terminated, cut to fit; returned):
 * pd_log_esc escapes it for inside a quoted value (\" \\, control bytes as
 * \xNN); pd_log_val gives a whole value: as it is if it is a plain word,
 * else quoted and escaped. Every string a client, a file or the
 * environment chose goes through one of them: it cannot end its value or
 * the line, or forge another key. */
const char *pd_log_esc(char *buf, size_t n, const char *s);
const char *pd_log_val(char *buf, size_t n, const char *s);
/* "ts=2026-12-02T07:00:00.123Z " into buf (NUL-terminated); its length. */
size_t pd_log_ts(char *buf, size_t n);
/* Write one logfmt line to f and flush it:
 * ts=<RFC3339 UTC, ms> level=<level> component=<component> msg="<msg>"
 * with quotes and backslashes escaped and control bytes as \xNN. */
void pd_log_line(FILE *f, const char *level, const char *component, const char *msg);
/* The same with a printf format (message cut at 1200 bytes); nothing when f
 * is NULL, or when quiet and level is "info". For components' log wrappers. */
void pd_log_vf(FILE *f, bool quiet, const char *level, const char *component, const char *fmt, va_list ap)
	PD_PRINTF(5, 0);
/* s (n bytes) escaped for a terminal: C0 controls, DEL and C1 controls (as
 * UTF-8) as \xNN or \u00NN, bytes that are not UTF-8 as \xNN, tab as \t,
 * newline as \n unless lines. A
 * malloc'd string; NULL if it needs nothing (or out of memory). For what
 * another party sent (a collector's error, an uploader's name): an ESC
 * sequence shown, not obeyed; a newline not a forged line. */
char *pd_term_escaped(const char *s, size_t n, bool lines);
/* Monotonic time in seconds. */
double pd_now(void);
/* The clocks, in ns: wall (CLOCK_REALTIME, since the epoch) and monotonic. */
int64_t pd_wall_ns(void);
int64_t pd_mono_ns(void);

#endif
