/*
 * legacy.c — the legacy profile formats of github.com/google/pprof/profile
 * (legacy_profile.go, legacy_java_profile.go) into the pprof model; see
 * legacy.h for the formats.
 *
 * Each parser reproduces profile.Parse's result, not just its spirit: the
 * regular expressions of the Go parser are matched by hand here with the
 * same leftmost-first answers (each matcher notes why greedy is exact, or
 * where it backtracks), numbers are parsed with strconv's rules (base 0
 * where Go uses it: octal, 0x, underscores), values are scaled with the
 * same float64 steps, and mappings go through massageMappings and
 * remapMappingIDs' heuristics in the same order. Locations carry addresses
 * only: the `#` symbol lines of Go's text profiles are comments to Go. Java
 * profiles carry symbols instead, and no addresses: that is what Go makes
 * of them too.
 *
 * Safety: every line is bounded (64 KiB, as Go's bufio.Scanner; Java's
 * parser has no such limit, but the input is bounded), matchers
 * are linear in the line, every count is capped by pd_pprof_limits, and
 * every byte allocated is charged against max_memory (and the caller's
 * reserve callback) before it is allocated. Mapping lookup is a binary
 * search when the maps are sorted and disjoint (always, for /proc maps),
 * else a linear scan under a work budget.
 */
#include "legacy.h"
#include "../util/gz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 65535 /* Go's bufio.MaxScanTokenSize, newline included */
#define MAX_ATTRS 1024	     /* $attr definitions in a memory map */
#define ATTR_WORK_BUDGET ((uint64_t)1 << 28) /* key bytes compared in $attr substitution */
#define MAX_EXPANDED (1u << 20)
#define MAP_WORK_BUDGET ((uint64_t)1 << 30)

/* ---- model under construction ------------------------------------------------ */

struct lsample {
	uint32_t *locs; /* loc indexes (creation order until remapped), leaf first */
	uint32_t nlocs;
	int64_t v[4];
	int64_t bytes; /* the "bytes" numeric label of heap samples */
	bool has_bytes;
};

struct lmap {
	uint64_t start, limit, offset;
	struct pd_str file, bid;
};

struct lb {
	struct pd_pprof_limits lim;
	struct pd_err *err;
	struct pd_err why; /* why an input a parser began to read is unrecognized after all */
	const char *what; /* "heap profile" ... for messages */
	struct pd_profile *p;
	size_t mem, reserved;
	size_t line; /* current line, for messages (0 = binary) */
	uint64_t *addrs;
	size_t naddrs, addrs_cap;
	struct pd_hidx lh;
	struct lsample *s;
	size_t ns, s_cap;
	uint32_t *stk;
	size_t nstk, stk_cap;
	struct lmap *m;
	size_t nm, m_cap;
	uint64_t *hex; /* addresses of the line(s) being parsed */
	size_t nhex, hex_cap;
	struct pd_str *strs;
	size_t nstr, str_cap, str_bytes;
	struct pd_hidx sh;
	/* header */
	unsigned nvals;
	struct pd_str stype[4][2];
	struct pd_str ptype[2];
	int64_t period, duration;
	const char *drop, *keep, *go_type;
	/* memory map $attr substitutions */
	struct pd_str attr_key[MAX_ATTRS], attr_val[MAX_ATTRS];
	size_t nattrs;
	uint64_t attr_work;
	char *expand;
	size_t expand_cap;
	/* Java (parseJavaLocations): functions by name, each location's line */
	bool java;
	struct lfunc {
		uint32_t name, file; /* string indexes */
	} *fn;
	size_t nfn, fn_cap;
	uint32_t *fn_of_str; /* function of a name, by its string index, or PD_NONE */
	size_t nfos, fos_cap;
	uint32_t *loc_fn; /* by location (b->addrs index): its line's function, or PD_NONE */
	int64_t *loc_line;
};

static struct pd_str S(const char *c)
{
	struct pd_str s = {c, (uint32_t)strlen(c)};
	return s;
}

static int lerr(struct lb *b, int code, const char *fmt, ...) PD_PRINTF(3, 4);
static int lerr(struct lb *b, int code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (b->lim.no_quotes && code == PD_EINVAL) /* the messages may quote the line */
		snprintf(msg, sizeof msg, "malformed (Go's profile.Parse refuses it too; the line is not shown: the input is not trusted)");
	if (b->line)
		return pd_errf(b->err, code, "%s, line %zu: %s", b->what, b->line, msg);
	return pd_errf(b->err, code, "%s: %s", b->what, msg);
}

/* Go's errUnrecognized from a parser that began to read the input: the
 * next parser tries it. Why is kept in b->why, for when none reads it. */
static int unrecognized(struct lb *b, const char *fmt, ...) PD_PRINTF(2, 3);
static int unrecognized(struct lb *b, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct pd_err *err = b->err;
	b->err = &b->why;
	lerr(b, PD_EINVAL, "%s", msg);
	b->err = err;
	return PD_LEGACY_UNRECOGNIZED;
}

/* Charge n bytes against the memory cap and the caller's budget, before
 * allocating them. */
static int charge(struct lb *b, size_t n)
{
	if (n > b->lim.max_memory || b->mem > b->lim.max_memory - n)
		return lerr(b, PD_ELIMIT, "profile needs more than %zu MiB of memory to decode: over the limit of %zu MiB "
				       "per profile", b->lim.max_memory >> 20, b->lim.max_memory >> 20);
	b->mem += n;
	if (b->lim.reserve && b->mem > b->reserved) {
		size_t chunk = b->mem - b->reserved;
		if (chunk < (1u << 20))
			chunk = 1u << 20;
		if (b->lim.reserve(b->lim.reserve_ctx, chunk))
			return pd_errf(b->err, PD_EBUSY, "too much profile data being ingested at once (%zu MiB more needed)",
				       (chunk + (1u << 20) - 1) >> 20);
		b->reserved += chunk;
	}
	return 0;
}

static int grow(struct lb *b, void **p, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return 0;
	size_t old = *cap;
	size_t ncap = old ? old : 8;
	while (ncap < need)
		ncap *= 2;
	int rc = charge(b, (ncap - old) * elsz);
	if (rc)
		return rc;
	if (pd_grow(p, cap, need, elsz))
		return pd_errf(b->err, PD_ENOMEM, "out of memory");
	return 0;
}

static void *aalloc(struct lb *b, size_t n, int *rc)
{
	if ((*rc = charge(b, n)))
		return NULL;
	void *v = pd_arena_alloc(b->p->arena, n ? n : 1);
	if (!v)
		*rc = pd_errf(b->err, PD_ENOMEM, "out of memory");
	return v;
}

struct streq_ctx {
	const struct lb *b;
	const char *ptr;
	size_t len;
};
static bool str_eq(void *ctx, uint32_t v)
{
	const struct streq_ctx *c = ctx;
	return c->b->strs[v].len == c->len && (!c->len || !memcmp(c->b->strs[v].ptr, c->ptr, c->len));
}

/* Intern a string (copied into the arena when copy is set); *idx = its index. */
static int str_add(struct lb *b, struct pd_str s, bool copy, uint32_t *idx)
{
	struct streq_ctx c = {b, s.ptr, s.len};
	uint64_t h = pd_hash(s.ptr, s.len, 0);
	uint32_t v = pd_hidx_find(&b->sh, h, str_eq, &c);
	if (v != UINT32_MAX) {
		*idx = v;
		return 0;
	}
	int rc;
	if (b->nstr + 1 > b->lim.max_strings)
		return lerr(b, PD_ELIMIT, "profile has more than %zu strings (limit)", b->lim.max_strings);
	if (b->str_bytes + s.len > b->lim.max_string_bytes)
		return lerr(b, PD_ELIMIT, "profile has more than %zu bytes of strings (limit)", b->lim.max_string_bytes);
	if ((rc = grow(b, (void **)&b->strs, &b->str_cap, b->nstr + 1, sizeof *b->strs)) || (rc = charge(b, 48)))
		return rc;
	if (copy && s.len) {
		char *d = aalloc(b, s.len, &rc);
		if (!d)
			return rc;
		memcpy(d, s.ptr, s.len);
		s.ptr = d;
	}
	b->strs[b->nstr] = s;
	b->str_bytes += s.len;
	if (pd_hidx_insert(&b->sh, h, (uint32_t)b->nstr))
		return pd_errf(b->err, PD_ENOMEM, "out of memory");
	*idx = (uint32_t)b->nstr++;
	return 0;
}

struct addreq_ctx {
	const uint64_t *addrs;
	uint64_t a;
};
static bool addr_eq(void *ctx, uint32_t v)
{
	const struct addreq_ctx *c = ctx;
	return c->addrs[v] == c->a;
}

/* Push the location of address a (created on first use) onto the stack. */
/* The location of address a, or PD_NONE. */
static uint32_t find_addr(const struct lb *b, uint64_t a)
{
	struct addreq_ctx c = {b->addrs, a};
	return pd_hidx_find_u64(&b->lh, pd_hash_u64(a), addr_eq, &c);
}

static int push_addr(struct lb *b, uint64_t a)
{
	int rc;
	uint32_t v = find_addr(b, a);
	if (v == PD_NONE) {
		if (b->naddrs + 1 > b->lim.max_locations)
			return lerr(b, PD_ELIMIT, "profile has more than %zu locations (limit)", b->lim.max_locations);
		if ((rc = grow(b, (void **)&b->addrs, &b->addrs_cap, b->naddrs + 1, sizeof *b->addrs)) ||
		    (rc = charge(b, 48 + sizeof(struct pd_location) + b->lim.extra_per_symbol)))
			return rc;
		v = (uint32_t)b->naddrs;
		b->addrs[b->naddrs++] = a;
		if (pd_hidx_insert(&b->lh, pd_hash_u64(a), v))
			return pd_errf(b->err, PD_ENOMEM, "out of memory");
	}
	if (b->nstk + 1 > b->lim.max_stack_depth)
		return lerr(b, PD_ELIMIT, "a sample has more than %zu locations (stack depth limit)",
			    b->lim.max_stack_depth);
	if ((rc = grow(b, (void **)&b->stk, &b->stk_cap, b->nstk + 1, sizeof *b->stk)))
		return rc;
	b->stk[b->nstk++] = v;
	return 0;
}

/* Add a sample of the stack pushed since the last one. */
static int add_sample(struct lb *b, const int64_t *v, bool has_bytes, int64_t bytes)
{
	int rc;
	if (b->ns + 1 > b->lim.max_samples)
		return lerr(b, PD_ELIMIT, "profile has more than %zu samples (limit)", b->lim.max_samples);
	if ((rc = grow(b, (void **)&b->s, &b->s_cap, b->ns + 1, sizeof *b->s)) ||
	    (rc = charge(b, sizeof(struct pd_sample) + 8 * b->nvals + sizeof(struct pd_label) + b->lim.extra_per_sample)))
		return rc;
	struct lsample *s = &b->s[b->ns];
	memset(s, 0, sizeof *s);
	if (b->nstk) {
		s->locs = aalloc(b, b->nstk * sizeof *s->locs, &rc);
		if (!s->locs)
			return rc;
		memcpy(s->locs, b->stk, b->nstk * sizeof *s->locs);
	}
	s->nlocs = (uint32_t)b->nstk;
	memcpy(s->v, v, b->nvals * sizeof *v);
	s->has_bytes = has_bytes;
	s->bytes = bytes;
	b->nstk = 0;
	b->ns++;
	return 0;
}

/* ---- Go's character classes and number syntax --------------------------------- */

/* RE2's \s */
static bool re_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}
static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}
static bool is_xdigit(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_lxdigit(char c) /* [0-9a-f] */
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}
static int digit_val(char c)
{
	if (is_digit(c))
		return c - '0';
	c = (char)(c | 0x20);
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	return 99;
}

/* The width of the white space (unicode.IsSpace) that s starts with, or 0:
 * ASCII \t \n \v \f \r and space, U+0085, U+00A0, and the White_Space
 * characters beyond Latin-1: U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000. Only complete encodings count, as Go's decoder's. */
static size_t space_width(const char *c, size_t n)
{
	const unsigned char *s = (const unsigned char *)c;
	if (n >= 1 && (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')))
		return 1;
	if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
		return 2;
	if (n < 3)
		return 0;
	if ((s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) || (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) ||
	    (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80))
		return 3;
	if (s[0] == 0xe2 && s[1] == 0x80 &&
	    ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
		return 3;
	return 0;
}

/* The width of the white space that the n bytes at s end with, or 0. A
 * complete encoding at the end is the rune Go's DecodeLastRune reads there:
 * continuation bytes cannot start one. */
static size_t space_width_end(const char *s, size_t n)
{
	for (size_t w = 1; w <= 3 && w <= n; w++)
		if (space_width(s + n - w, w) == w)
			return w;
	return 0;
}

/* strings.TrimSpace */
static struct pd_str trim(const char *s, size_t n)
{
	size_t w;
	while ((w = space_width(s, n)))
		s += w, n -= w;
	while ((w = space_width_end(s, n)))
		n -= w;
	struct pd_str r = {s, (uint32_t)n};
	return r;
}

static bool space_or_comment(struct pd_str l)
{
	struct pd_str t = trim(l.ptr, l.len);
	return t.len == 0 || t.ptr[0] == '#';
}

static bool has_prefix(struct pd_str s, const char *pre)
{
	size_t n = strlen(pre);
	return s.len >= n && !memcmp(s.ptr, pre, n);
}

static const char *find(const char *s, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (const char *p = s, *end = s + n; m <= (size_t)(end - p);) {
		const char *c = memchr(p, needle[0], (size_t)(end - p) - m + 1);
		if (!c)
			return NULL;
		if (!memcmp(c, needle, m))
			return c;
		p = c + 1;
	}
	return NULL;
}

static bool sentinel(struct pd_str l)
{
	return find(l.ptr, l.len, "--- Memory map: ---") || find(l.ptr, l.len, "MAPPED_LIBRARIES:");
}

/* strconv.ParseUint(s, base, 64); base 0 = Go literal syntax. */
static bool underscore_ok(const char *s, size_t n)
{
	char saw = '^';
	size_t i = 0;
	bool hex = false;
	if (n >= 2 && s[0] == '0' && ((s[1] | 0x20) == 'b' || (s[1] | 0x20) == 'o' || (s[1] | 0x20) == 'x')) {
		i = 2;
		saw = '0';
		hex = (s[1] | 0x20) == 'x';
	}
	for (; i < n; i++) {
		char lc = (char)(s[i] | 0x20);
		if (is_digit(s[i]) || (hex && lc >= 'a' && lc <= 'f')) {
			saw = '0';
			continue;
		}
		if (s[i] == '_') {
			if (saw != '0')
				return false;
			saw = '_';
			continue;
		}
		if (saw == '_')
			return false;
		saw = '!';
	}
	return saw != '_';
}

static bool go_parse_uint(const char *s0, size_t n0, int base, uint64_t *out)
{
	const char *s = s0;
	size_t n = n0;
	bool base0 = base == 0, us = false;
	if (n == 0)
		return false;
	if (base == 0) {
		base = 10;
		if (s[0] == '0') {
			if (n >= 3 && (s[1] | 0x20) == 'b')
				base = 2, s += 2, n -= 2;
			else if (n >= 3 && (s[1] | 0x20) == 'o')
				base = 8, s += 2, n -= 2;
			else if (n >= 3 && (s[1] | 0x20) == 'x')
				base = 16, s += 2, n -= 2;
			else
				base = 8, s += 1, n -= 1;
		}
	}
	uint64_t v = 0;
	bool range = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '_' && base0) {
			us = true;
			continue;
		}
		int d = digit_val(s[i]);
		if (d >= base)
			return false;
		if (range)
			continue;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			range = true;
		else
			v = v * (uint64_t)base + (uint64_t)d;
	}
	if (range)
		return false;
	if (us && !underscore_ok(s0, n0))
		return false;
	*out = v;
	return true;
}

/* strconv.ParseInt(s, base, 64). */
static bool go_parse_int(const char *s, size_t n, int base, int64_t *out)
{
	bool neg = false;
	if (n == 0)
		return false;
	if (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		s++, n--;
	}
	uint64_t u;
	if (!go_parse_uint(s, n, base, &u))
		return false;
	if (!neg && u > (uint64_t)INT64_MAX)
		return false;
	if (neg && u > (uint64_t)INT64_MAX + 1)
		return false;
	*out = neg ? (u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
	return true;
}

/* Go's int64(f) on amd64 (CVTTSD2SQ): NaN and out-of-range give MinInt64. */
static int64_t go_f2i(double f)
{
	if (isnan(f) || f >= 9223372036854775808.0 || f < -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)f;
}

/* Wrapping int64 arithmetic, as Go's. */
static int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}
static int64_t wdiv(int64_t a, int64_t b) /* b != 0 */
{
	if (b == -1)
		return (int64_t)(0 - (uint64_t)a);
	return a / b;
}

/* parseHexAddresses: every 0x[0-9a-f]+ in s, appended to b->hex. */
static int collect_hex(struct lb *b, const char *s, size_t n)
{
	for (size_t i = 0; i + 2 < n;) {
		if (s[i] == '0' && s[i + 1] == 'x' && is_lxdigit(s[i + 2])) {
			size_t j = i + 2;
			while (j < n && is_lxdigit(s[j]))
				j++;
			uint64_t a;
			if (!go_parse_uint(s + i + 2, j - i - 2, 16, &a))
				return lerr(b, PD_EINVAL, "malformed sample: failed to parse %.*s%s as a hex 64-bit number",
					    (int)(j - i > 40 ? 40 : j - i), s + i, j - i > 40 ? "..." : "");
			if (b->nhex + 1 > b->lim.max_stack_depth)
				return lerr(b, PD_ELIMIT, "a sample has more than %zu locations (stack depth limit)",
					    b->lim.max_stack_depth);
			int rc = grow(b, (void **)&b->hex, &b->hex_cap, b->nhex + 1, sizeof *b->hex);
			if (rc)
				return rc;
			b->hex[b->nhex++] = a;
			i = j;
		} else {
			i++;
		}
	}
	return 0;
}

/* Push the collected addresses as the next sample's stack, adjusted by -1
 * ("to land on the call instruction"): all of them, or all but the leaf. */
static int push_hex_all(struct lb *b, bool skip_leaf)
{
	for (size_t i = 0; i < b->nhex; i++) {
		int rc = push_addr(b, b->hex[i] - (skip_leaf && i == 0 ? 0 : 1));
		if (rc)
			return rc;
	}
	b->nhex = 0;
	return 0;
}

static int push_hex(struct lb *b, const char *s, size_t n)
{
	b->nhex = 0;
	int rc = collect_hex(b, s, n);
	return rc ? rc : push_hex_all(b, false);
}

/* ---- lines (bufio.Scanner with ScanLines) -------------------------------------- */

struct scan {
	const char *b;
	size_t n, pos;
	struct pd_str t; /* current token; "" after the end */
	size_t line;
	size_t stop;  /* a line too long for Go's scanner (0: none): the scan ends before it */
	bool toolong; /* ... and it did: where Go's scanner fails (s.Err()) */
};

static bool sc_next(struct scan *s)
{
	if (s->pos >= s->n || (s->stop && s->line + 1 == s->stop)) {
		if (s->pos < s->n)
			s->toolong = true;
		s->pos = s->n;
		s->t = S("");
		return false;
	}
	const char *p = s->b + s->pos;
	size_t rem = s->n - s->pos;
	const char *nl = memchr(p, '\n', rem);
	size_t len = nl ? (size_t)(nl - p) : rem;
	s->pos += len + (nl ? 1 : 0);
	if (len && p[len - 1] == '\r')
		len--;
	s->t.ptr = p;
	s->t.len = (uint32_t)len;
	s->line++;
	return true;
}

/* The first line longer than Go's scanner takes, or 0. */
static size_t long_line(const char *b, size_t n)
{
	size_t line = 1;
	for (size_t pos = 0; pos < n; line++) {
		const char *nl = memchr(b + pos, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - (b + pos)) : n - pos;
		if (len > LINE_MAX_BYTES)
			return line;
		pos += len + 1;
	}
	return 0;
}

/* ---- memory maps (parseProcMapsFromScanner, parseMappingEntry) ------------------- */

struct mcap {
	const char *start, *end, *perm, *file, *off, *bid;
	size_t nstart, nend, nperm, nfile, noff, nbid;
};

static size_t spaces(const char *s, size_t n, size_t i)
{
	while (i < n && re_space(s[i]))
		i++;
	return i;
}
static size_t run(const char *s, size_t n, size_t i, bool (*cls)(char))
{
	while (i < n && cls(s[i]))
		i++;
	return i;
}
static bool is_perm(char c)
{
	return c == '-' || c == 'r' || c == 'w' || c == 'x' || c == 'p';
}
static bool not_space(char c)
{
	return !re_space(c);
}

/* `\s+X+` at i: the end of X+ or 0 when there is none. */
static size_t sp_run(const char *s, size_t n, size_t i, bool (*cls)(char), size_t *xs)
{
	size_t j = spaces(s, n, i);
	if (j == i || j >= n || !cls(s[j]))
		return 0;
	*xs = j;
	return run(s, n, j, cls);
}

/* The rest of procMapsRE after the address range:
 * (?:\s+([-rwxp]+))?(?:\s+([[:xdigit:]]+))?\s+[[:xdigit:]]+:[[:xdigit:]]+\s+[[:digit:]]+(?:\s+(\S+))?
 * Each X+ must be maximal (a shorter one leaves a class char where \s or ':'
 * must follow), so only the take/skip choices of the two groups backtrack. */
static bool proc_rest(const char *s, size_t n, size_t q, struct mcap *c)
{
	for (int tp = 1; tp >= 0; tp--) {
		size_t q1 = q, ps = 0, pe = 0;
		if (tp) {
			pe = sp_run(s, n, q, is_perm, &ps);
			if (!pe)
				continue;
			q1 = pe;
		}
		for (int to = 1; to >= 0; to--) {
			size_t q2 = q1, os = 0, oe = 0, xs;
			if (to) {
				oe = sp_run(s, n, q1, is_xdigit, &os);
				if (!oe)
					continue;
				q2 = oe;
			}
			size_t e = sp_run(s, n, q2, is_xdigit, &xs);
			if (!e || e >= n || s[e] != ':' || e + 1 >= n || !is_xdigit(s[e + 1]))
				continue;
			e = run(s, n, e + 1, is_xdigit);
			size_t ds;
			size_t de = sp_run(s, n, e, is_digit, &ds);
			if (!de)
				continue;
			c->perm = s + ps, c->nperm = pe - ps;
			c->off = s + os, c->noff = oe - os;
			size_t fs = 0, fe = sp_run(s, n, de, not_space, &fs);
			c->file = s + fs, c->nfile = fe ? fe - fs : 0;
			return true;
		}
	}
	return false;
}

/* The rest of briefMapsRE: (?:\s+([-rwxp]+))?(?:\s+(\S+))?(?:\s+\(@([[:xdigit:]]+)\))?(?:\s+([[:xdigit:]]+))?
 * All optional, so the first (greedy) choice of each group succeeds. */
static void brief_rest(const char *s, size_t n, size_t q, struct mcap *c)
{
	size_t st = 0, e;
	if ((e = sp_run(s, n, q, is_perm, &st)))
		c->perm = s + st, c->nperm = e - st, q = e;
	if ((e = sp_run(s, n, q, not_space, &st)))
		c->file = s + st, c->nfile = e - st, q = e;
	size_t j = spaces(s, n, q);
	if (j > q && j + 2 < n && s[j] == '(' && s[j + 1] == '@' && is_xdigit(s[j + 2])) {
		size_t k = run(s, n, j + 2, is_xdigit);
		if (k < n && s[k] == ')')
			c->off = s + j + 2, c->noff = k - j - 2, q = k + 1;
	}
	if ((e = sp_run(s, n, q, is_xdigit, &st)))
		c->bid = s + st, c->nbid = e - st;
}

/* `\s*(?:0x)?([[:xdigit:]]+)[\s-]?\s*(?:0x)?([[:xdigit:]]+):?` then the
 * rest. Backtracking: the first hex run may give its last digit to the
 * second (when nothing follows it); every shorter split ends in the same
 * state, so two attempts are exact. When the digit given is a 0 followed by
 * x and a hex digit ("fcdc20x7efb"), the second (?:0x)? takes "0x" first:
 * the second number is the run after the x. Without the 0x the second
 * number would end before that x, which only the brief form accepts, and
 * the brief form accepts the 0x split first. */
static bool match_maps(const char *s, size_t n, bool proc, struct mcap *c)
{
	memset(c, 0, sizeof *c);
	size_t i = spaces(s, n, 0);
	if (i + 2 < n && s[i] == '0' && s[i + 1] == 'x' && is_xdigit(s[i + 2]))
		i += 2;
	if (i >= n || !is_xdigit(s[i]))
		return false;
	size_t a = i, e1 = run(s, n, i, is_xdigit);
	for (int attempt = 0; attempt < 2; attempt++) {
		size_t q, bs, be;
		if (attempt == 0) {
			q = e1;
			if (q < n && (re_space(s[q]) || s[q] == '-'))
				q++;
			q = spaces(s, n, q);
			if (q + 2 < n && s[q] == '0' && s[q + 1] == 'x' && is_xdigit(s[q + 2]))
				q += 2;
			if (q >= n || !is_xdigit(s[q]))
				continue;
			bs = q;
			be = run(s, n, q, is_xdigit);
			c->start = s + a, c->nstart = e1 - a;
		} else {
			if (e1 - a < 2)
				break;
			bs = e1 - 1;
			be = e1;
			if (s[bs] == '0' && e1 + 1 < n && s[e1] == 'x' && is_xdigit(s[e1 + 1])) {
				bs = e1 + 1;
				be = run(s, n, bs, is_xdigit);
			}
			c->start = s + a, c->nstart = e1 - 1 - a;
		}
		c->end = s + bs, c->nend = be - bs;
		q = be;
		if (q < n && s[q] == ':')
			q++;
		if (!proc) {
			brief_rest(s, n, q, c);
			return true;
		}
		if (proc_rest(s, n, q, c))
			return true;
	}
	return false;
}

/* parseMappingEntry: 1 = a mapping, 0 = skipped (not executable), -1 = unrecognized. */
static int mapping_entry(const char *s, size_t n, struct lmap *m, struct mcap *c)
{
	if (!match_maps(s, n, true, c) && !match_maps(s, n, false, c))
		return -1;
	memset(m, 0, sizeof *m);
	m->file.ptr = c->file, m->file.len = (uint32_t)c->nfile;
	m->bid.ptr = c->bid, m->bid.len = (uint32_t)c->nbid;
	if (c->nperm && !memchr(c->perm, 'x', c->nperm))
		return 0;
	if (!go_parse_uint(c->start, c->nstart, 16, &m->start) || !go_parse_uint(c->end, c->nend, 16, &m->limit))
		return -1;
	if (c->noff && !go_parse_uint(c->off, c->noff, 16, &m->offset))
		return -1;
	return 1;
}

/* removeLoggingInfo: drop a glog prefix `^[^\[\]]+:[0-9]+]\s`. */
static struct pd_str strip_glog(struct pd_str l)
{
	size_t j = 0;
	while (j < l.len && l.ptr[j] != '[' && l.ptr[j] != ']')
		j++;
	if (j >= l.len || l.ptr[j] != ']' || j + 1 >= l.len || !re_space(l.ptr[j + 1]))
		return l;
	size_t d = j;
	while (d > 0 && is_digit(l.ptr[d - 1]))
		d--;
	if (d == j || d < 2 || l.ptr[d - 1] != ':')
		return l;
	struct pd_str r = {l.ptr + j + 2, l.len - (uint32_t)j - 2};
	return r;
}

/* strings.Replacer over the $attr definitions seen so far (earlier ones win). */
static int expand_attrs(struct lb *b, struct pd_str l, struct pd_str *out)
{
	if (!b->nattrs || !memchr(l.ptr, '$', l.len)) {
		*out = l;
		return 0;
	}
	size_t o = 0;
	for (size_t i = 0; i < l.len;) {
		const struct pd_str *v = NULL;
		size_t klen = 0;
		if (l.ptr[i] == '$')
			for (size_t k = 0; k < b->nattrs; k++) {
				struct pd_str key = b->attr_key[k];
				if ((b->attr_work += key.len) > ATTR_WORK_BUDGET)
					return lerr(b, PD_ELIMIT, "too much work substituting $attr definitions in the memory map");
				if (key.len <= l.len - i && !memcmp(l.ptr + i, key.ptr, key.len)) {
					v = &b->attr_val[k];
					klen = key.len;
					break;
				}
			}
		size_t add = v ? v->len : 1;
		if (o + add > MAX_EXPANDED)
			return lerr(b, PD_ELIMIT, "memory map line longer than %u bytes after $attr substitution",
				    MAX_EXPANDED);
		int rc = grow(b, (void **)&b->expand, &b->expand_cap, o + add, 1);
		if (rc)
			return rc;
		if (v) {
			if (v->len) /* an empty value: nothing to copy, b->expand may still be NULL */
				memcpy(b->expand + o, v->ptr, v->len);
			i += klen;
		} else {
			b->expand[o] = l.ptr[i++];
		}
		o += add;
	}
	out->ptr = o ? b->expand : ""; /* all of it $attrs with empty values: b->expand may be NULL */
	out->len = (uint32_t)o;
	return 0;
}

static int add_mapping(struct lb *b, const struct lmap *m)
{
	int rc;
	if (b->nm + 1 > b->lim.max_mappings)
		return lerr(b, PD_ELIMIT, "profile has more than %zu mappings (limit)", b->lim.max_mappings);
	if ((rc = grow(b, (void **)&b->m, &b->m_cap, b->nm + 1, sizeof *b->m)) ||
	    (rc = charge(b, sizeof(struct pd_mapping) + b->lim.extra_per_symbol)))
		return rc;
	struct lmap *d = &b->m[b->nm++];
	*d = *m;
	/* the strings point into a line or the expansion buffer: copy them */
	char *f = m->file.len ? aalloc(b, m->file.len + m->bid.len, &rc) : m->bid.len ? aalloc(b, m->bid.len, &rc) : NULL;
	if ((m->file.len || m->bid.len) && !f)
		return rc;
	if (m->file.len) {
		memcpy(f, m->file.ptr, m->file.len);
		d->file.ptr = f;
		f += m->file.len;
	}
	if (m->bid.len) {
		memcpy(f, m->bid.ptr, m->bid.len);
		d->bid.ptr = f;
	}
	return 0;
}

/* Every line after the scanner's current one is a memory map line. */
static int parse_maps(struct lb *b, struct scan *sc)
{
	int rc;
	while (sc_next(sc)) {
		b->line = sc->line;
		struct pd_str l = {"", 0};
		if ((rc = expand_attrs(b, strip_glog(sc->t), &l)))
			return rc;
		struct lmap m;
		struct mcap c;
		int r = mapping_entry(l.ptr, l.len, &m, &c);
		if (r > 0 && (rc = add_mapping(b, &m)))
			return rc;
		if (r < 0) {
			const char *eq = memchr(l.ptr, '=', l.len);
			if (!eq)
				continue;
			if (b->nattrs >= MAX_ATTRS)
				return lerr(b, PD_ELIMIT, "more than %d attr=value definitions in the memory map", MAX_ATTRS);
			struct pd_str k = trim(l.ptr, (size_t)(eq - l.ptr));
			struct pd_str v = trim(eq + 1, l.len - (size_t)(eq - l.ptr) - 1);
			char *d = aalloc(b, k.len + 1 + v.len, &rc);
			if (!d)
				return rc;
			d[0] = '$';
			memcpy(d + 1, k.ptr, k.len);
			memcpy(d + 1 + k.len, v.ptr, v.len);
			b->attr_key[b->nattrs].ptr = d;
			b->attr_key[b->nattrs].len = k.len + 1;
			b->attr_val[b->nattrs].ptr = d + 1 + k.len;
			b->attr_val[b->nattrs].len = v.len;
			b->nattrs++;
		}
	}
	b->line = 0;
	return 0;
}

/* parseAdditionalSections: skip to a memory map sentinel, then read the maps. */
static int additional_sections(struct lb *b, struct scan *sc)
{
	while (!sentinel(sc->t) && sc_next(sc)) {
	}
	return parse_maps(b, sc);
}

/* ---- finishing: massageMappings, remapLocationIDs, remapMappingIDs --------------- */

static bool is_lib(struct pd_str f)
{
	/* libRx: ([.]so$|[.]so[._][0-9]+) */
	for (uint32_t i = 0; i + 3 <= f.len; i++) {
		if (memcmp(f.ptr + i, ".so", 3))
			continue;
		if (i + 3 == f.len)
			return true;
		if (i + 4 < f.len && (f.ptr[i + 3] == '.' || f.ptr[i + 3] == '_') && is_digit(f.ptr[i + 4]))
			return true;
	}
	return false;
}

static bool main_candidate(struct lb *b, struct pd_str f)
{
	/* TrimSpace(strings.Replace(file, "(deleted)", "", -1)) */
	size_t o = 0;
	if (grow(b, (void **)&b->expand, &b->expand_cap, f.len + 1, 1))
		return false;
	char *tmp = b->expand;
	for (uint32_t i = 0; i < f.len;) {
		if (f.len - i >= 9 && !memcmp(f.ptr + i, "(deleted)", 9)) {
			i += 9;
			continue;
		}
		tmp[o++] = f.ptr[i++];
	}
	struct pd_str t = trim(tmp, o);
	return t.len && !is_lib(t) && t.ptr[0] != '[';
}

static bool adjacent(const struct lmap *a, const struct lmap *c)
{
	if (a->file.len && c->file.len && (a->file.len != c->file.len || memcmp(a->file.ptr, c->file.ptr, a->file.len)))
		return false;
	if (a->bid.len && c->bid.len && (a->bid.len != c->bid.len || memcmp(a->bid.ptr, c->bid.ptr, a->bid.len)))
		return false;
	if (a->limit != c->start)
		return false;
	if (a->offset && c->offset && a->offset + (a->limit - a->start) != c->offset)
		return false;
	return true;
}

static void massage_mappings(struct lb *b)
{
	if (b->nm > 1) {
		size_t k = 0;
		for (size_t i = 1; i < b->nm; i++) {
			struct lmap *lm = &b->m[k];
			if (adjacent(lm, &b->m[i])) {
				lm->limit = b->m[i].limit;
				if (b->m[i].file.len)
					lm->file = b->m[i].file;
				if (b->m[i].bid.len)
					lm->bid = b->m[i].bid;
				continue;
			}
			b->m[++k] = b->m[i];
		}
		b->nm = k + 1;
	}
	for (size_t i = 0; i < b->nm; i++) {
		if (!main_candidate(b, b->m[i].file))
			continue;
		struct lmap t = b->m[0];
		b->m[0] = b->m[i];
		b->m[i] = t;
		break;
	}
}

/* Whether the mappings are sorted, non-empty and disjoint (binary search is exact). */
static bool maps_sorted(const struct lb *b)
{
	for (size_t i = 0; i < b->nm; i++) {
		if (b->m[i].start >= b->m[i].limit)
			return false;
		if (i && b->m[i - 1].limit > b->m[i].start)
			return false;
	}
	return true;
}

/* remapMappingIDs: *out[i] = mapping index of location i (PD_NONE for address 0). */
static int assign_mappings(struct lb *b, const uint64_t *addr, size_t nloc, uint32_t *out)
{
	if (b->nm > 0 && has_prefix(b->m[0].file, "/anon_hugepage") && b->nm > 1 && b->m[0].limit == b->m[1].start) {
		memmove(b->m, b->m + 1, (b->nm - 1) * sizeof *b->m);
		b->nm--;
	}
	if (b->nm > 0 && b->m[0].start - b->m[0].offset == 0x400000) {
		b->m[0].start = 0x400000;
		b->m[0].offset = 0;
	}
	bool sorted = maps_sorted(b);
	uint64_t work = 0;
	uint32_t fake = PD_NONE;
	for (size_t i = 0; i < nloc; i++) {
		uint64_t a = addr[i];
		out[i] = PD_NONE;
		if (a == 0)
			continue;
		size_t nreal = fake == PD_NONE ? b->nm : b->nm - 1;
		if (sorted) {
			size_t lo = 0, hi = nreal;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (b->m[mid].limit <= a)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < nreal && b->m[lo].start <= a) {
				out[i] = (uint32_t)lo;
				continue;
			}
		} else {
			/* the fake mapping, once made, is last and contains everything but ^0 */
			size_t k;
			for (k = 0; k < b->nm; k++)
				if (b->m[k].start <= a && a < b->m[k].limit)
					break;
			work += k;
			if (k < b->nm) {
				out[i] = (uint32_t)k;
				continue;
			}
		}
		size_t k;
		for (k = 0; k < b->nm; k++) {
			struct lmap *m = &b->m[k];
			if (m->offset != 0 && m->start - m->offset <= a && a < m->start) {
				m->start -= m->offset;
				m->offset = 0;
				if (sorted && (m->start >= m->limit || (k && b->m[k - 1].limit > m->start)))
					sorted = false;
				break;
			}
		}
		work += k;
		if (work > MAP_WORK_BUDGET)
			return lerr(b, PD_ELIMIT, "too much work to map %zu locations to %zu overlapping mappings", nloc,
				    b->nm);
		if (k < b->nm) {
			out[i] = (uint32_t)k;
			continue;
		}
		if (fake == PD_NONE) {
			struct lmap f;
			memset(&f, 0, sizeof f);
			f.limit = UINT64_MAX;
			int rc = add_mapping(b, &f);
			if (rc)
				return rc;
			fake = (uint32_t)(b->nm - 1);
			/* the fake mapping overlaps everything: lookups stay exact as
			 * long as real ones are searched first, which both paths do */
		}
		out[i] = fake;
	}
	return 0;
}

/* cleanupDuplicateLocations: drop the -1-adjusted duplicate of the leaf. */
static void cleanup_dups(struct lb *b, const uint64_t *addr)
{
	for (size_t i = 0; i < b->ns; i++) {
		struct lsample *s = &b->s[i];
		if (s->nlocs > 1 && addr[s->locs[0]] == addr[s->locs[1]] + 1) {
			memmove(s->locs + 1, s->locs + 2, (s->nlocs - 2) * sizeof *s->locs);
			s->nlocs--;
		}
	}
}

static int finish(struct lb *b, bool cleanup, struct pd_profile **out)
{
	int rc;
	struct pd_profile *p = b->p;
	/* remapLocationIDs: locations in order of first use; unused ones go */
	uint32_t *remap = NULL, *lmaps = NULL, *lold = NULL, *fnew = NULL;
	uint64_t *naddr = NULL;
	size_t nl = 0, nf = 0;
	if ((rc = charge(b, b->naddrs * (sizeof *remap + sizeof *naddr + sizeof *lmaps + sizeof *lold) +
				    b->nfn * sizeof *fnew)))
		return rc;
	remap = malloc((b->naddrs + 1) * sizeof *remap);
	naddr = malloc((b->naddrs + 1) * sizeof *naddr);
	lmaps = malloc((b->naddrs + 1) * sizeof *lmaps);
	lold = malloc((b->naddrs + 1) * sizeof *lold);
	fnew = malloc((b->nfn + 1) * sizeof *fnew);
	if (!remap || !naddr || !lmaps || !lold || !fnew) {
		rc = pd_errf(b->err, PD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < b->naddrs; i++)
		remap[i] = PD_NONE;
	for (size_t i = 0; i < b->ns; i++)
		for (uint32_t j = 0; j < b->s[i].nlocs; j++) {
			uint32_t *l = &b->s[i].locs[j];
			if (remap[*l] == PD_NONE) {
				remap[*l] = (uint32_t)nl;
				lold[nl] = *l;
				naddr[nl++] = b->addrs[*l];
			}
			*l = remap[*l];
		}
	/* Java: a location with a symbol has address 0 by remapMappingIDs (no
	 * mapping), the others the fake one; p.Aggregate then clears them all.
	 * remapFunctionIDs: functions in order of first use by a location. */
	for (size_t i = 0; i < b->nfn; i++)
		fnew[i] = PD_NONE;
	for (size_t i = 0; b->loc_fn && i < nl; i++) {
		uint32_t f = b->loc_fn[lold[i]];
		if (f == PD_NONE)
			continue;
		naddr[i] = 0;
		if (fnew[f] == PD_NONE)
			fnew[f] = (uint32_t)nf++;
	}
	massage_mappings(b);
	if ((rc = assign_mappings(b, naddr, nl, lmaps)))
		goto out;
	if (cleanup)
		cleanup_dups(b, naddr);

	/* the model */
	uint32_t sidx[4][2], pidx[2], bytes_key = 0, drop = 0, keep = 0;
	for (unsigned i = 0; i < b->nvals; i++)
		if ((rc = str_add(b, b->stype[i][0], true, &sidx[i][0])) ||
		    (rc = str_add(b, b->stype[i][1], true, &sidx[i][1])))
			goto out;
	if ((rc = str_add(b, b->ptype[0], true, &pidx[0])) || (rc = str_add(b, b->ptype[1], true, &pidx[1])) ||
	    (rc = str_add(b, S("bytes"), false, &bytes_key)) ||
	    (b->drop && (rc = str_add(b, S(b->drop), false, &drop))) ||
	    (b->keep && (rc = str_add(b, S(b->keep), false, &keep))))
		goto out;
	uint32_t *mfile = NULL;
	if (!(mfile = aalloc(b, 2 * (b->nm + 1) * sizeof *mfile, &rc)))
		goto out;
	for (size_t i = 0; i < b->nm; i++)
		if ((rc = str_add(b, b->m[i].file, false, &mfile[2 * i])) ||
		    (rc = str_add(b, b->m[i].bid, false, &mfile[2 * i + 1])))
			goto out;
	p->strings = aalloc(b, (b->nstr + 1) * sizeof *p->strings, &rc);
	p->sample_types = p->strings ? aalloc(b, (b->nvals + 1) * sizeof *p->sample_types, &rc) : NULL;
	p->samples = p->sample_types ? aalloc(b, (b->ns + 1) * sizeof *p->samples, &rc) : NULL;
	p->locations = p->samples ? aalloc(b, (nl + 1) * sizeof *p->locations, &rc) : NULL;
	p->mappings = p->locations ? aalloc(b, (b->nm + 1) * sizeof *p->mappings, &rc) : NULL;
	p->functions = p->mappings ? aalloc(b, (nf + 1) * sizeof *p->functions, &rc) : NULL;
	p->comments = p->functions ? aalloc(b, sizeof *p->comments, &rc) : NULL;
	if (!p->comments)
		goto out;
	memcpy(p->strings, b->strs, b->nstr * sizeof *p->strings);
	p->nstrings = (uint32_t)b->nstr;
	for (unsigned i = 0; i < b->nvals; i++) {
		p->sample_types[i].type = sidx[i][0];
		p->sample_types[i].unit = sidx[i][1];
	}
	p->nsample_types = b->nvals;
	p->period_type.type = pidx[0];
	p->period_type.unit = pidx[1];
	p->period = b->period;
	p->duration_nanos = b->duration;
	p->drop_frames = drop;
	p->keep_frames = keep;
	for (size_t i = 0; i < b->nm; i++) {
		struct pd_mapping *m = &p->mappings[i];
		memset(m, 0, sizeof *m);
		m->id = i + 1;
		m->start = b->m[i].start;
		m->limit = b->m[i].limit;
		m->offset = b->m[i].offset;
		m->filename = mfile[2 * i];
		m->build_id = mfile[2 * i + 1];
	}
	p->nmappings = (uint32_t)b->nm;
	for (size_t i = 0; i < b->nfn; i++) {
		if (fnew[i] == PD_NONE)
			continue;
		struct pd_function *f = &p->functions[fnew[i]];
		memset(f, 0, sizeof *f);
		f->id = fnew[i] + 1;
		f->name = f->system_name = b->fn[i].name;
		f->filename = b->fn[i].file;
	}
	p->nfunctions = (uint32_t)nf;
	for (size_t i = 0; i < nl; i++) {
		struct pd_location *l = &p->locations[i];
		memset(l, 0, sizeof *l);
		l->id = i + 1;
		l->address = b->java ? 0 : naddr[i];
		l->mapping = lmaps[i];
		uint32_t f = b->loc_fn ? b->loc_fn[lold[i]] : PD_NONE;
		if (f == PD_NONE)
			continue;
		if (!(l->lines = aalloc(b, sizeof *l->lines, &rc)))
			goto out;
		l->lines[0].function = fnew[f];
		l->lines[0].line = b->loc_line[lold[i]];
		l->lines[0].column = 0;
		l->nlines = 1;
	}
	p->nlocations = (uint32_t)nl;
	for (size_t i = 0; i < b->ns; i++) {
		struct pd_sample *s = &p->samples[i];
		const struct lsample *ls = &b->s[i];
		s->locs = ls->locs;
		s->nlocs = ls->nlocs;
		s->values = aalloc(b, b->nvals * sizeof *s->values, &rc);
		if (!s->values)
			goto out;
		memcpy(s->values, ls->v, b->nvals * sizeof *s->values);
		s->nlabels = 0;
		s->labels = NULL;
		if (ls->has_bytes && ls->bytes != 0) { /* profile.proto cannot carry a numeric 0: Go's round trip drops it too */
			s->labels = aalloc(b, sizeof *s->labels, &rc);
			if (!s->labels)
				goto out;
			s->labels[0].key = bytes_key;
			s->labels[0].str = 0;
			s->labels[0].num = ls->bytes;
			s->labels[0].num_unit = 0;
			s->nlabels = 1;
		}
	}
	p->nsamples = b->ns;
	p->go_type_hint = b->go_type;
	p->legacy_format = b->what;
	*out = p;
	b->p = NULL;
	rc = 0;
out:
	free(remap);
	free(naddr);
	free(lmaps);
	free(lold);
	free(fnew);
	return rc;
}

/* ---- the frames pprof drops (addLegacyFrameInfo: by the sample types) ----------- */

static const char *const alloc_drop =
	"calloc|cfree|malloc|free|memalign|do_memalign|(__)?posix_memalign|pvalloc|valloc|realloc|"
	"tcmalloc::.*|tc_calloc|tc_cfree|tc_malloc|tc_free|tc_memalign|tc_posix_memalign|tc_pvalloc|"
	"tc_valloc|tc_realloc|tc_new|tc_delete|tc_newarray|tc_deletearray|tc_new_nothrow|"
	"tc_newarray_nothrow|malloc_zone_malloc|malloc_zone_calloc|malloc_zone_valloc|"
	"malloc_zone_realloc|malloc_zone_memalign|malloc_zone_free|runtime\\..*|BaseArena::.*|"
	"(::)?do_malloc_no_errno|(::)?do_malloc_pages|(::)?do_malloc|DoSampledAllocation|"
	"MallocedMemBlock::MallocedMemBlock|_M_allocate|__builtin_(vec_)?delete|__builtin_(vec_)?new|"
	"__gnu_cxx::new_allocator::allocate|__libc_malloc|__malloc_alloc_template::allocate|allocate|"
	"cpp_alloc|operator new(\\[\\])?|simple_alloc::allocate";
static const char *const alloc_keep = "runtime\\.panic|runtime\\.reflectcall|runtime\\.call[0-9]*";
static const char *const lock_drop =
	"RecordLockProfileData|(base::)?RecordLockProfileData.*|(base::)?SubmitMutexProfileData.*|"
	"(base::)?SubmitSpinLockProfileData.*|(base::Mutex::)?AwaitCommon.*|(base::Mutex::)?Unlock.*|"
	"(base::Mutex::)?UnlockSlow.*|(base::Mutex::)?ReaderUnlock.*|(base::MutexLock::)?~MutexLock.*|"
	"(Mutex::)?AwaitCommon.*|(Mutex::)?Unlock.*|(Mutex::)?UnlockSlow.*|(Mutex::)?ReaderUnlock.*|"
	"(MutexLock::)?~MutexLock.*|(SpinLock::)?Unlock.*|(SpinLock::)?SlowUnlock.*|"
	"(SpinLockHolder::)?~SpinLockHolder.*";
static const char *const cpu_drop = "ProfileData::Add|ProfileData::prof_handler|CpuProfiler::prof_handler|"
				    "__pthread_sighandler|__restore";

/* ---- heap (parseHeap) ---------------------------------------------------------- */

/* `heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\] *` at s: the four
 * numbers and the end, or 0. Each \d+ is maximal (a digit cannot be where
 * ':' or ' ' or '[' must follow), each ` *` greedy. */
static size_t heap_counts(const char *s, size_t n, size_t i, struct pd_str num[4])
{
	static const char lit[] = "heap profile:";
	if (n - i < sizeof lit - 1 || memcmp(s + i, lit, sizeof lit - 1))
		return 0;
	i += sizeof lit - 1;
	for (int k = 0; k < 4; k++) {
		while (i < n && s[i] == ' ')
			i++;
		if (k == 2) {
			if (i >= n || s[i] != '[')
				return 0;
			i++;
			while (i < n && s[i] == ' ')
				i++;
		}
		size_t st = i;
		i = run(s, n, i, is_digit);
		if (i == st)
			return 0;
		num[k].ptr = s + st;
		num[k].len = (uint32_t)(i - st);
		if (k == 0 || k == 2) {
			if (i >= n || s[i] != ':')
				return 0;
			i++;
		}
	}
	while (i < n && s[i] == ' ')
		i++;
	if (i >= n || s[i] != ']')
		return 0;
	return i + 1;
}

static bool str_is(struct pd_str s, const char *c)
{
	return pd_str_eq(s, c);
}

/* 1 = heap header (sampling, period, has_alloc set), 2 = growth/fragmentation,
 * 0 = not a heap header, -1 = a heap header Go refuses (unrecognized too). */
static int heap_header(struct pd_str l, bool *v2, int64_t *period, bool *has_alloc)
{
	const char *s = l.ptr;
	size_t n = l.len;
	/* heapHeaderRE, unanchored: the first position where it matches */
	for (size_t i = 0; i < n; i++) {
		if (s[i] != 'h')
			continue;
		struct pd_str num[4];
		size_t e = heap_counts(s, n, i, num);
		if (!e)
			continue;
		while (e < n && s[e] == ' ')
			e++;
		if (e >= n || s[e] != '@')
			continue;
		e++;
		while (e < n && s[e] == ' ')
			e++;
		if (n - e < 4 || memcmp(s + e, "heap", 4))
			continue;
		size_t ns = e;
		e += 4;
		while (e < n && (s[e] == '_' || is_digit(s[e]) || (s[e] >= 'a' && s[e] <= 'z')))
			e++;
		struct pd_str name = {s + ns, (uint32_t)(e - ns)};
		if (e < n && s[e] == '/')
			e++;
		size_t ds = e;
		e = run(s, n, e, is_digit);
		int64_t per = 0;
		if (e > ds && !go_parse_int(s + ds, e - ds, 10, &per))
			return -1;
		*has_alloc = (!(num[2].len == num[0].len && !memcmp(num[2].ptr, num[0].ptr, num[0].len)) &&
			      !str_is(num[2], "0")) ||
			     (!(num[3].len == num[1].len && !memcmp(num[3].ptr, num[1].ptr, num[1].len)) &&
			      !str_is(num[3], "0"));
		if (str_is(name, "heapz_v2") || str_is(name, "heap_v2")) {
			*v2 = true, *period = per;
		} else if (str_is(name, "heapprofile")) {
			*v2 = false, *period = 1;
		} else if (str_is(name, "heap")) {
			*v2 = true, *period = per / 2;
		} else {
			return -1;
		}
		return 1;
	}
	/* growthHeaderRE / fragmentationHeaderRE: `...\] @ growth` */
	for (int g = 0; g < 2; g++) {
		const char *word = g ? "fragmentation" : "growth";
		for (size_t i = 0; i < n; i++) {
			if (s[i] != 'h')
				continue;
			struct pd_str num[4];
			size_t e = heap_counts(s, n, i, num);
			if (!e)
				continue;
			size_t wl = strlen(word);
			if (n - e >= 3 + wl && !memcmp(s + e, " @ ", 3) && !memcmp(s + e + 3, word, wl))
				return 2;
		}
	}
	return 0;
}

/* heapSampleRE `(-?\d+): *(-?\d+) *\[ *(\d+): *(\d+) *] @([ x0-9a-f]*)`, leftmost:
 * each number run is maximal, so a failed start skips its whole run. */
static bool heap_sample_re(const char *s, size_t n, struct pd_str num[4], struct pd_str *addrs)
{
	for (size_t i = 0; i < n;) {
		if (!(is_digit(s[i]) || (s[i] == '-' && i + 1 < n && is_digit(s[i + 1])))) {
			i++;
			continue;
		}
		size_t st = i, e = i;
		bool ok = true;
		for (int k = 0; k < 4 && ok; k++) {
			if (k == 2) {
				while (e < n && s[e] == ' ')
					e++;
				if (e >= n || s[e] != '[') {
					ok = false;
					break;
				}
				e++;
			}
			if (k)
				while (e < n && s[e] == ' ')
					e++;
			size_t ns = e;
			if (k < 2 && e < n && s[e] == '-')
				e++;
			size_t ds = e;
			e = run(s, n, e, is_digit);
			if (e == ds) {
				ok = false;
				break;
			}
			num[k].ptr = s + ns;
			num[k].len = (uint32_t)(e - ns);
			if (k == 0 || k == 2) {
				if (e >= n || s[e] != ':')
					ok = false;
				else
					e++;
			}
		}
		if (ok) {
			while (e < n && s[e] == ' ')
				e++;
			if (n - e >= 3 && !memcmp(s + e, "] @", 3)) {
				e += 3;
				size_t as = e;
				while (e < n && (s[e] == ' ' || s[e] == 'x' || is_lxdigit(s[e])))
					e++;
				addrs->ptr = s + as;
				addrs->len = (uint32_t)(e - as);
				return true;
			}
		}
		/* skip the first number's run: later starts inside it fail alike */
		i = st + 1;
		while (i < n && is_digit(s[i]))
			i++;
	}
	return false;
}

/* scaleHeapSample */
static void scale_heap(int64_t *count, int64_t *size, int64_t rate)
{
	if (*count == 0 || *size == 0) {
		*count = 0, *size = 0;
		return;
	}
	if (rate <= 1)
		return;
	double avg = (double)*size / (double)*count;
	double scale = 1 / (1 - exp(-avg / (double)rate));
	*count = go_f2i((double)*count * scale);
	*size = go_f2i((double)*size * scale);
}

static int heap_values(struct lb *b, struct pd_str cs, struct pd_str ss, const char *label, bool v2, int64_t rate,
		       int64_t *vals, unsigned *nv, int64_t *blocksize, struct pd_str line)
{
	int64_t count, size;
	if (!go_parse_int(cs.ptr, cs.len, 10, &count) || !go_parse_int(ss.ptr, ss.len, 10, &size))
		return lerr(b, PD_EINVAL, "malformed sample: %.100s: value out of range", line.ptr);
	if (count == 0 && size != 0)
		return lerr(b, PD_EINVAL, "%s count was 0 but %s bytes was %lld", label, label, (long long)size);
	if (count != 0) {
		*blocksize = wdiv(size, count);
		if (v2)
			scale_heap(&count, &size, rate);
	}
	vals[(*nv)++] = count;
	vals[(*nv)++] = size;
	return 0;
}

static int parse_heap(struct lb *b, struct scan *sc)
{
	int rc;
	if (!sc_next(sc))
		return PD_LEGACY_UNRECOGNIZED;
	bool v2 = false, has_alloc = false;
	int64_t period = 0;
	int h = heap_header(sc->t, &v2, &period, &has_alloc);
	if (h <= 0)
		return PD_LEGACY_UNRECOGNIZED;
	if (h == 2)
		period = 1, v2 = false, has_alloc = false;
	b->what = "heap profile";
	b->go_type = "heap";
	b->period = period;
	b->ptype[0] = S("space"), b->ptype[1] = S("bytes");
	if (has_alloc) {
		b->nvals = 4;
		b->stype[0][0] = S("alloc_objects"), b->stype[0][1] = S("count");
		b->stype[1][0] = S("alloc_space"), b->stype[1][1] = S("bytes");
		b->stype[2][0] = S("inuse_objects"), b->stype[2][1] = S("count");
		b->stype[3][0] = S("inuse_space"), b->stype[3][1] = S("bytes");
	} else {
		b->nvals = 2;
		b->stype[0][0] = S("objects"), b->stype[0][1] = S("count");
		b->stype[1][0] = S("space"), b->stype[1][1] = S("bytes");
	}
	while (sc_next(sc)) {
		b->line = sc->line;
		struct pd_str l = trim(sc->t.ptr, sc->t.len);
		if (space_or_comment(l))
			continue;
		if (sentinel(l))
			break;
		struct pd_str num[4], addrs;
		char lbuf[104];
		snprintf(lbuf, sizeof lbuf, "%.*s", (int)(l.len > 100 ? 100 : l.len), l.ptr);
		struct pd_str ln = {lbuf, 0};
		if (!heap_sample_re(l.ptr, l.len, num, &addrs))
			return lerr(b, PD_EINVAL, "not a heap sample (want \"N: N [N: N] @ 0x...\"): %s", lbuf);
		int64_t vals[4], blocksize = 0;
		unsigned nv = 0;
		if (has_alloc && (rc = heap_values(b, num[2], num[3], "allocation", v2, period, vals, &nv, &blocksize, ln)))
			return rc;
		if ((rc = heap_values(b, num[0], num[1], "inuse", v2, period, vals, &nv, &blocksize, ln)))
			return rc;
		if ((rc = push_hex(b, addrs.ptr, addrs.len)) ||
		    (rc = add_sample(b, vals, true, blocksize)))
			return rc;
	}
	b->line = 0;
	b->drop = alloc_drop;
	b->keep = alloc_keep;
	if ((rc = additional_sections(b, sc)))
		return rc;
	return 0;
}

/* ---- goroutine / threadcreate (parseGoCount) ------------------------------------ */

static int parse_count(struct lb *b, struct scan *sc)
{
	int rc;
	while (sc_next(sc) && space_or_comment(sc->t)) {
	}
	/* countStartRE `\A(\S+) profile: total \d+\z` */
	struct pd_str l = sc->t;
	size_t i = run(l.ptr, l.len, 0, not_space);
	static const char lit[] = " profile: total ";
	if (i == 0 || l.len - i < sizeof lit - 1 || memcmp(l.ptr + i, lit, sizeof lit - 1))
		return PD_LEGACY_UNRECOGNIZED;
	size_t d = i + sizeof lit - 1;
	if (d >= l.len || run(l.ptr, l.len, d, is_digit) != l.len)
		return PD_LEGACY_UNRECOGNIZED;
	struct pd_str type = {l.ptr, (uint32_t)i};
	b->what = str_is(type, "goroutine")	 ? "goroutine profile"
		  : str_is(type, "threadcreate") ? "threadcreate profile"
						 : "count profile";
	b->nvals = 1;
	b->stype[0][0] = type, b->stype[0][1] = S("count");
	b->ptype[0] = type, b->ptype[1] = S("count");
	b->period = 1;
	b->drop = cpu_drop;
	while (sc_next(sc)) {
		b->line = sc->line;
		l = sc->t;
		if (space_or_comment(l))
			continue;
		if (has_prefix(l, "---"))
			break;
		/* countRE `\A(\d+) @(( 0x[0-9a-f]+)+)\z` */
		size_t e = run(l.ptr, l.len, 0, is_digit);
		bool ok = e > 0 && l.len - e >= 2 && l.ptr[e] == ' ' && l.ptr[e + 1] == '@';
		size_t as = e + 2, k = as;
		if (ok) {
			ok = k < l.len;
			while (ok && k < l.len) {
				if (l.len - k < 4 || memcmp(l.ptr + k, " 0x", 3) || !is_lxdigit(l.ptr[k + 3])) {
					ok = false;
					break;
				}
				k = run(l.ptr, l.len, k + 3, is_lxdigit);
			}
		}
		int64_t n;
		if (!ok && e > 0 && trim(l.ptr + e, l.len - e).len == 1 && l.ptr[e] == ' ' && l.ptr[e + 1] == '@')
			return lerr(b, PD_EINVAL,
				    "malformed line \"%.*s\": a count without a stack, as Go's threadcreate?debug=1 "
				    "writes them, which go tool pprof refuses too; fetch it with debug=0 (protobuf)",
				    (int)(l.len > 100 ? 100 : l.len), l.ptr);
		if (!ok)
			return lerr(b, PD_EINVAL, "malformed line (want \"N @ 0x... 0x...\"): %.*s", (int)(l.len > 100 ? 100 : l.len),
				    l.ptr);
		if (!go_parse_int(l.ptr, e, 0, &n))
			return lerr(b, PD_EINVAL, "malformed count %.*s", (int)(e > 40 ? 40 : e), l.ptr);
		if ((rc = push_hex(b, l.ptr + as, l.len - as)) || (rc = add_sample(b, &n, false, 0)))
			return rc;
	}
	b->line = 0;
	return additional_sections(b, sc);
}

/* ---- contention (parseContention) ----------------------------------------------- */

/* contentionSampleRE `(\d+) *(\d+) @([ x0-9a-f]*)`, leftmost; see above:
 * the first run either is followed by spaces and the second run, or gives
 * its last digit to the second. */
static bool contention_re(const char *s, size_t n, struct pd_str *v1, struct pd_str *v2, struct pd_str *addrs)
{
	for (size_t i = 0; i < n;) {
		if (!is_digit(s[i])) {
			i++;
			continue;
		}
		size_t e1 = run(s, n, i, is_digit);
		for (int att = 0; att < 2; att++) {
			size_t d2, e2;
			if (att == 0) {
				d2 = e1;
				while (d2 < n && s[d2] == ' ')
					d2++;
				e2 = run(s, n, d2, is_digit);
				if (d2 == e1 || e2 == d2)
					continue;
				v1->ptr = s + i, v1->len = (uint32_t)(e1 - i);
			} else {
				if (e1 - i < 2)
					continue;
				d2 = e1 - 1, e2 = e1;
				v1->ptr = s + i, v1->len = (uint32_t)(e1 - 1 - i);
			}
			if (n - e2 >= 2 && s[e2] == ' ' && s[e2 + 1] == '@') {
				size_t e = e2 + 2, as = e;
				while (e < n && (s[e] == ' ' || s[e] == 'x' || is_lxdigit(s[e])))
					e++;
				v2->ptr = s + d2, v2->len = (uint32_t)(e2 - d2);
				addrs->ptr = s + as, addrs->len = (uint32_t)(e - as);
				return true;
			}
		}
		i = e1;
	}
	return false;
}

/* parseContentionSample's errUnrecognized: a line that is not a sample
 * makes the whole input unrecognized, and profile.Parse tries its next
 * parser (Java's, which reads `--- contentionz 1 ---` files too). */
static int not_a_sample(struct lb *b, struct pd_str l)
{
	return unrecognized(b, "not a contention sample (want \"N N @ 0x...\"): %.*s",
			    (int)(l.len > 100 ? 100 : l.len), l.ptr);
}

static int parse_contention(struct lb *b, struct scan *sc)
{
	int rc;
	if (!sc_next(sc))
		return PD_LEGACY_UNRECOGNIZED;
	if (has_prefix(sc->t, "--- contentionz "))
		b->go_type = NULL;
	else if (has_prefix(sc->t, "--- mutex:"))
		b->go_type = "mutex";
	else if (has_prefix(sc->t, "--- contention:"))
		b->go_type = "block";
	else
		return PD_LEGACY_UNRECOGNIZED;
	b->what = "contention profile";
	b->nvals = 2;
	b->ptype[0] = S("contentions"), b->ptype[1] = S("count");
	b->stype[0][0] = S("contentions"), b->stype[0][1] = S("count");
	b->stype[1][0] = S("delay"), b->stype[1][1] = S("nanoseconds");
	b->period = 1;
	int64_t hz = 0;
	while (sc_next(sc)) {
		struct pd_str l = trim(sc->t.ptr, sc->t.len);
		if (space_or_comment(l))
			continue;
		if (has_prefix(l, "---"))
			break;
		const char *eq = memchr(l.ptr, '=', l.len);
		if (!eq)
			break;
		struct pd_str k = trim(l.ptr, (size_t)(eq - l.ptr));
		struct pd_str v = trim(eq + 1, l.len - (size_t)(eq - l.ptr) - 1);
		int64_t x;
		if (str_is(k, "discarded samples"))
			continue;
		bool known = str_is(k, "cycles/second") || str_is(k, "sampling period") || str_is(k, "ms since reset");
		if (!known || !go_parse_int(v.ptr, v.len, 0, &x))
			return PD_LEGACY_UNRECOGNIZED; /* as Go: e.g. a Java contention profile */
		if (str_is(k, "cycles/second"))
			hz = x;
		else if (str_is(k, "sampling period"))
			b->period = x;
		else
			b->duration = wmul(wmul(x, 1000), 1000);
	}
	b->drop = lock_drop;
	for (;;) {
		b->line = sc->line;
		struct pd_str l = trim(sc->t.ptr, sc->t.len);
		if (has_prefix(l, "---"))
			break;
		if (!space_or_comment(l)) {
			struct pd_str s1, s2, addrs;
			int64_t v1, v2;
			if (!contention_re(l.ptr, l.len, &s1, &s2, &addrs))
				return not_a_sample(b, l);
			if (!go_parse_int(s1.ptr, s1.len, 10, &v1) || !go_parse_int(s2.ptr, s2.len, 10, &v2))
				return lerr(b, PD_EINVAL, "malformed sample: %.*s: value out of range",
					    (int)(l.len > 100 ? 100 : l.len), l.ptr);
			if (b->period > 0) {
				if (hz > 0) {
					double ghz = (double)hz / 1e9;
					v1 = go_f2i((double)v1 * (double)b->period / ghz);
				}
				v2 = wmul(v2, b->period);
			}
			int64_t vals[2] = {v2, v1};
			if ((rc = push_hex(b, addrs.ptr, addrs.len)) ||
			    (rc = add_sample(b, vals, false, 0)))
				return rc;
		}
		if (!sc_next(sc))
			break;
	}
	b->line = 0;
	return additional_sections(b, sc);
}

/* ---- C++ threadz (parseThread) -------------------------------------------------- */

/* threadStartRE `--- Thread ([[:xdigit:]]+) \(name: (.*)/(\d+)\) stack: ---`, unanchored. */
static bool thread_start(struct pd_str l)
{
	/* The earliest start has the widest (.*): if any start matches, it does.
	 * So one scan for the start and one for the ends: linear. */
	const char *s = l.ptr, *end = l.ptr + l.len, *body = NULL;
	for (const char *p = s; !body && (p = find(p, (size_t)(end - p), "--- Thread ")); p++) {
		const char *q = p + 11;
		const char *x = q;
		while (x < end && is_xdigit(*x))
			x++;
		if (x > q && (size_t)(end - x) >= 8 && !memcmp(x, " (name: ", 8))
			body = x + 8;
	}
	if (!body)
		return false;
	for (const char *r = body; (r = find(r, (size_t)(end - r), ") stack: ---")); r++) {
		const char *d = r;
		while (d > body && is_digit(d[-1]))
			d--;
		if (d < r && d > body && d[-1] == '/')
			return true;
	}
	return false;
}

static bool threadz_start(struct pd_str l)
{
	const char *end = l.ptr + l.len;
	for (const char *p = l.ptr; (p = find(p, (size_t)(end - p), "--- threadz ")); p++) {
		const char *q = p + 12, *d = q;
		while (d < end && is_digit(*d))
			d++;
		if (d > q && (size_t)(end - d) >= 4 && !memcmp(d, " ---", 4))
			return true;
	}
	return false;
}

static int parse_thread(struct lb *b, struct scan *sc)
{
	int rc;
	while (sc_next(sc) && space_or_comment(sc->t)) {
	}
	struct pd_str line = sc->t;
	if (threadz_start(line)) {
		while (sc_next(sc)) {
			line = sc->t;
			if (sentinel(line) || has_prefix(line, "-"))
				break;
		}
	} else if (!thread_start(line)) {
		return PD_LEGACY_UNRECOGNIZED;
	}
	b->what = "thread profile";
	b->nvals = 1;
	b->stype[0][0] = S("thread"), b->stype[0][1] = S("count");
	b->ptype[0] = S("thread"), b->ptype[1] = S("count");
	b->period = 1;
	b->drop = cpu_drop;
	while (!sentinel(line)) {
		b->line = sc->line;
		if (has_prefix(line, "---- no stack trace for")) {
			line = S("");
			break;
		}
		if (!thread_start(line))
			return PD_LEGACY_UNRECOGNIZED;
		/* parseThreadSample: addresses of every line up to the next "---" */
		bool same = false;
		b->nhex = 0;
		/* as in Go, a sample that meets the end of input yields "" (not the
		 * header again, which would loop for ever) */
		line = S("");
		while (sc_next(sc)) {
			line = trim(sc->t.ptr, sc->t.len);
			if (!line.len)
				continue;
			if (has_prefix(line, "---"))
				break;
			if (find(line.ptr, line.len, "same as previous thread")) {
				same = true;
				continue;
			}
			if ((rc = collect_hex(b, line.ptr, line.len)))
				return rc;
		}
		if (same || b->nhex == 0) {
			if (b->ns > 0)
				b->s[b->ns - 1].v[0]++;
			continue;
		}
		int64_t one = 1;
		if ((rc = push_hex_all(b, true)) || (rc = add_sample(b, &one, false, 0)))
			return rc;
	}
	b->line = 0;
	return additional_sections(b, sc);
}

/* ---- Java heapz and contentionz (parseJavaProfile) ------------------------------------ */

static bool attr_char(char c) /* [\w ] */
{
	char l = (char)(c | 0x20);
	return c == ' ' || c == '_' || is_digit(c) || (l >= 'a' && l <= 'z');
}

/* attributeRx `([\w ]+)=([\w ]+)`, unanchored: the first '=' with a [\w ]
 * byte on each side (an earlier '=' cannot start a later run); the groups
 * are the whole runs of [\w ] around it, trimmed as Go trims them. */
static bool java_attr(struct pd_str l, struct pd_str *k, struct pd_str *v)
{
	for (size_t j = 1; j + 1 < l.len; j++) {
		if (l.ptr[j] != '=' || !attr_char(l.ptr[j - 1]) || !attr_char(l.ptr[j + 1]))
			continue;
		size_t i = j;
		while (i > 0 && attr_char(l.ptr[i - 1]))
			i--;
		size_t e = run(l.ptr, l.len, j + 1, attr_char);
		*k = trim(l.ptr + i, j - i);
		*v = trim(l.ptr + j + 1, e - j - 1);
		return true;
	}
	return false;
}

/* parseJavaHeader's attributes: format (java), resolution (the unit of the
 * second sample type), and for contentionz sampling period and ms since
 * reset; any other is Go's errUnrecognized. */
static int java_attribute(struct lb *b, bool heap, struct pd_str l, struct pd_str k, struct pd_str v)
{
	int64_t x;
	if (str_is(k, "format")) {
		if (!str_is(v, "java"))
			return unrecognized(b, "format \"%.*s\": not a Java profile", (int)(v.len > 60 ? 60 : v.len),
					    v.ptr);
		return 0;
	}
	if (str_is(k, "resolution")) {
		b->nvals = 2;
		b->stype[0][0] = S(heap ? "inuse_objects" : "contentions"), b->stype[0][1] = S("count");
		b->stype[1][0] = S(heap ? "inuse_space" : "delay"), b->stype[1][1] = v;
		return 0;
	}
	bool period = str_is(k, "sampling period");
	if (heap || !(period || str_is(k, "ms since reset")))
		return unrecognized(b, "\"%.*s\" is not an attribute of a Java %s profile (%s)",
				    (int)(k.len > 60 ? 60 : k.len), k.ptr, heap ? "heapz" : "contentionz",
				    heap ? "format, resolution" : "format, resolution, sampling period, ms since reset");
	if (period)
		b->ptype[0] = S("contentions"), b->ptype[1] = S("count");
	if (!go_parse_int(v.ptr, v.len, 0, &x))
		return lerr(b, PD_EINVAL, "failed to parse attribute %.*s: not an int64",
			    (int)(l.len > 100 ? 100 : l.len), l.ptr);
	if (period)
		b->period = x;
	else
		b->duration = wmul(wmul(x, 1000), 1000);
	return 0;
}

/* javaSampleRx ` *(\d+) +(\d+) +@ +([ x0-9a-f]*)`, unanchored. Each number
 * is a whole run of digits (a space must follow it), so a start that fails
 * fails for every start inside its run: the next try is the next run. */
static bool java_sample_re(const char *s, size_t n, struct pd_str *v1, struct pd_str *v2, struct pd_str *addrs)
{
	for (size_t i = 0; i < n;) {
		if (!is_digit(s[i])) {
			i++;
			continue;
		}
		size_t e1 = run(s, n, i, is_digit), d2 = e1;
		while (d2 < n && s[d2] == ' ')
			d2++;
		if (d2 > e1 && d2 < n && is_digit(s[d2])) {
			size_t e2 = run(s, n, d2, is_digit), at = e2;
			while (at < n && s[at] == ' ')
				at++;
			if (at > e2 && at < n && s[at] == '@') {
				size_t as = at + 1;
				while (as < n && s[as] == ' ')
					as++;
				if (as > at + 1) {
					size_t e = as;
					while (e < n && (s[e] == ' ' || s[e] == 'x' || is_lxdigit(s[e])))
						e++;
					v1->ptr = s + i, v1->len = (uint32_t)(e1 - i);
					v2->ptr = s + d2, v2->len = (uint32_t)(e2 - d2);
					addrs->ptr = s + as, addrs->len = (uint32_t)(e - as);
					return true;
				}
			}
		}
		i = e1;
	}
	return false;
}

/* One sample line: its addresses as they are (no -1), then its values
 * (base 0: a leading 0 is octal), which the file has as "bytes count" or
 * "delay count" and the profile count first. */
static int java_sample(struct lb *b, bool heap, struct pd_str l, struct pd_str c1, struct pd_str c2,
		       struct pd_str as)
{
	int rc, show = (int)(l.len > 100 ? 100 : l.len);
	b->nhex = 0;
	if ((rc = collect_hex(b, as.ptr, as.len)))
		return rc;
	for (size_t i = 0; i < b->nhex; i++)
		if ((rc = push_addr(b, b->hex[i])))
			return rc;
	b->nhex = 0;
	int64_t v[2], bytes = 0;
	if (!go_parse_int(c2.ptr, c2.len, 0, &v[0]) || !go_parse_int(c1.ptr, c1.len, 0, &v[1]))
		return lerr(b, PD_EINVAL,
			    "parsing sample %.*s: a value that is not an int64 (a leading 0 makes it octal)", show,
			    l.ptr);
	if (heap) {
		if (v[0] == 0)
			return lerr(b, PD_EINVAL, "parsing sample %.*s: second value must be non-zero", show, l.ptr);
		bytes = wdiv(v[1], v[0]);
		scale_heap(&v[0], &v[1], 524288); /* javaHeapzSamplingRate */
	} else if (b->period != 0) {
		v[0] = wmul(v[0], b->period);
		v[1] = wmul(v[1], b->period);
	}
	return add_sample(b, v, heap, bytes);
}

/* filepath.Base */
static struct pd_str path_base(struct pd_str p)
{
	if (!p.len)
		return S(".");
	while (p.len && p.ptr[p.len - 1] == '/')
		p.len--;
	if (!p.len)
		return S("/");
	uint32_t i = p.len;
	while (i && p.ptr[i - 1] != '/')
		i--;
	struct pd_str r = {p.ptr + i, p.len - i};
	return r;
}

/* The function, file and line of a symbol's text r. Both regular
 * expressions end in `\)$` and begin with a greedy (.*) before `\s+\(`: the
 * last '(' after a white space byte that lets the rest match, and the (.*)
 * keeps all but that one byte of white space ("f  (A.java:1)" is "f ").
 * javaLocationFileLineRx `^(.*)\s+\((.+):(-?[[:digit:]]+)\)$`: the number
 * follows the last ':', and (.+) needs a byte before it. Else
 * javaLocationPathRx `^(.*)\s+\((.*)\)$`: the file is the path's base name.
 * Else "generated stub/JIT" anywhere is STUB, and anything else is the
 * function ("GC", "VM"). */
static void java_symbol(struct pd_str r, struct pd_str *fn, struct pd_str *file, int64_t *line)
{
	const char *s = r.ptr;
	size_t n = r.len;
	*fn = r;
	*file = S("");
	*line = 0;
	if (n >= 2 && s[n - 1] == ')') {
		size_t c = n - 1;
		while (c > 0 && s[c - 1] != ':')
			c--;
		if (c > 0) { /* s[c - 1] is the last ':', the number is s[c .. n-1) */
			size_t d = c < n - 1 && s[c] == '-' ? c + 1 : c;
			bool num = d < n - 1 && run(s, n - 1, d, is_digit) == n - 1;
			for (size_t q = c >= 4 ? c - 3 : 0; num && q >= 1; q--) {
				if (s[q] != '(' || !re_space(s[q - 1]))
					continue;
				fn->len = (uint32_t)(q - 1);
				file->ptr = s + q + 1, file->len = (uint32_t)(c - 1 - q - 1);
				if (!go_parse_int(s + c, n - 1 - c, 10, line) || *line < 0)
					*line = 0;
				return;
			}
		}
		for (size_t q = n - 2; q >= 1; q--) {
			if (s[q] != '(' || !re_space(s[q - 1]))
				continue;
			fn->len = (uint32_t)(q - 1);
			struct pd_str path = {s + q + 1, (uint32_t)(n - 1 - q - 1)};
			*file = path_base(path);
			return;
		}
	}
	if (find(s, n, "generated stub/JIT"))
		*fn = S("STUB");
}

/* The function named name (made with file on first sight: a name keeps the
 * file it was first seen with). */
static int java_function(struct lb *b, struct pd_str name, struct pd_str file, uint32_t *f)
{
	int rc;
	uint32_t ni, fi;
	if ((rc = str_add(b, name, true, &ni)) ||
	    (rc = grow(b, (void **)&b->fn_of_str, &b->fos_cap, b->nstr, sizeof *b->fn_of_str)))
		return rc;
	while (b->nfos < b->nstr)
		b->fn_of_str[b->nfos++] = PD_NONE;
	if (b->fn_of_str[ni] != PD_NONE) {
		*f = b->fn_of_str[ni];
		return 0;
	}
	if (b->nfn + 1 > b->lim.max_functions)
		return lerr(b, PD_ELIMIT, "profile has more than %zu functions (limit)", b->lim.max_functions);
	if ((rc = str_add(b, file, true, &fi)) ||
	    (rc = grow(b, (void **)&b->fn, &b->fn_cap, b->nfn + 1, sizeof *b->fn)) ||
	    (rc = charge(b, sizeof(struct pd_function) + b->lim.extra_per_symbol)))
		return rc;
	b->fn[b->nfn].name = ni;
	b->fn[b->nfn].file = fi;
	b->fn_of_str[ni] = (uint32_t)b->nfn;
	*f = (uint32_t)b->nfn++;
	return 0;
}

/* parseJavaLocations: every line (the last one too, with or without its
 * newline) `0xADDR text` names the function, file and line of ADDR's
 * location, if a sample has one; a later line for it wins. Lines are of
 * any length (Go reads them with bytes.Buffer, not a Scanner). ln: the
 * number of t's first line, for messages. */
static int java_symbols(struct lb *b, const char *t, size_t n, size_t ln)
{
	int rc;
	if (b->naddrs) {
		if ((rc = charge(b, b->naddrs * (sizeof *b->loc_fn + sizeof *b->loc_line))))
			return rc;
		b->loc_fn = malloc(b->naddrs * sizeof *b->loc_fn);
		b->loc_line = malloc(b->naddrs * sizeof *b->loc_line);
		if (!b->loc_fn || !b->loc_line)
			return pd_errf(b->err, PD_ENOMEM, "out of memory");
		for (size_t i = 0; i < b->naddrs; i++)
			b->loc_fn[i] = PD_NONE, b->loc_line[i] = 0;
	}
	for (size_t pos = 0; pos < n; ln++) {
		const char *p = t + pos, *nl = memchr(p, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - p) : n - pos;
		pos += len + (nl ? 1 : 0);
		b->line = ln;
		/* javaLocationRx `^\s*0x([[:xdigit:]]+)\s+(.*)\s*$` on the trimmed
		 * line: the digits are a whole run, (.*) all after the white space */
		struct pd_str l = trim(p, len);
		if (l.len < 3 || l.ptr[0] != '0' || l.ptr[1] != 'x' || !is_xdigit(l.ptr[2]))
			continue;
		size_t e = run(l.ptr, l.len, 2, is_xdigit);
		if (e >= l.len || !re_space(l.ptr[e]))
			continue;
		size_t rs = spaces(l.ptr, l.len, e);
		struct pd_str r = {l.ptr + rs, (uint32_t)(l.len - rs)}, fn, file;
		uint64_t a;
		if (!go_parse_uint(l.ptr + 2, e - 2, 16, &a))
			return lerr(b, PD_EINVAL, "parsing symbol 0x%.*s%s: more than 64 bits",
				    (int)(e - 2 > 40 ? 40 : e - 2), l.ptr + 2, e - 2 > 40 ? "..." : "");
		uint32_t v = find_addr(b, a), f = PD_NONE;
		if (v == PD_NONE)
			continue; /* no sample has it */
		int64_t line;
		java_symbol(r, &fn, &file, &line);
		if ((rc = java_function(b, fn, file, &f)))
			return rc;
		b->loc_fn[v] = f;
		b->loc_line[v] = line;
	}
	b->line = 0;
	return 0;
}

enum { JAVA_NONE, JAVA_HEAPZ, JAVA_CONTENTIONZ };

/* Whether the first line is a Java heapz or contentionz header (and not
 * the whole input), as parseJavaProfile reads it. */
static int java_header(const char *s, size_t len)
{
	const char *nl = memchr(s, '\n', len);
	if (!nl)
		return JAVA_NONE;
	struct pd_str h = trim(s, (size_t)(nl - s));
	if (str_is(h, "--- heapz 1 ---"))
		return JAVA_HEAPZ;
	return str_is(h, "--- contentionz 1 ---") ? JAVA_CONTENTIONZ : JAVA_NONE;
}

/* The heapz or contentionz header, its attributes, its samples, then its
 * symbols. Attribute and sample lines are only those that end in a
 * newline (Go's bytes.IndexByte loops); the first line that is neither
 * begins the symbols. */
static int parse_java(struct lb *b, struct scan *sc)
{
	int rc;
	const char *s = sc->b, *nl = memchr(s, '\n', sc->n);
	size_t n = sc->n;
	int kind = java_header(s, n);
	if (kind == JAVA_NONE)
		return PD_LEGACY_UNRECOGNIZED;
	bool heap = kind == JAVA_HEAPZ;
	b->what = heap ? "Java heap profile" : "Java contention profile";
	b->go_type = heap ? "heap" : NULL;
	b->java = true;
	b->ptype[0] = b->ptype[1] = S(""); /* Go's &ValueType{} unless sampling period says */
	size_t pos = (size_t)(nl - s) + 1, ln = 2;
	for (; (nl = memchr(s + pos, '\n', n - pos)); pos = (size_t)(nl - s) + 1, ln++) {
		b->line = ln;
		struct pd_str l = trim(s + pos, (size_t)(nl - s) - pos), k, v;
		if (!l.len)
			continue;
		if (!java_attr(l, &k, &v))
			break;
		if ((rc = java_attribute(b, heap, l, k, v)))
			return rc;
	}
	for (; (nl = memchr(s + pos, '\n', n - pos)); pos = (size_t)(nl - s) + 1, ln++) {
		b->line = ln;
		struct pd_str l = trim(s + pos, (size_t)(nl - s) - pos), c1, c2, as;
		if (!l.len)
			continue;
		if (!java_sample_re(l.ptr, l.len, &c1, &c2, &as))
			break;
		if ((rc = java_sample(b, heap, l, c1, c2, as)))
			return rc;
	}
	if ((rc = java_symbols(b, s + pos, n - pos, ln)))
		return rc;
	/* p.Aggregate's CheckValid */
	if (b->ns && !b->nvals)
		return lerr(b, PD_EINVAL, "samples but no sample types (no resolution attribute): profile.Parse "
					  "refuses it too (\"missing sample type information\")");
	/* addLegacyFrameInfo: heapz's or contentionz's sample types, or none */
	b->drop = !b->nvals ? cpu_drop : heap ? alloc_drop : lock_drop;
	b->keep = b->nvals && heap ? alloc_keep : NULL;
	return 0;
}

/* ---- legacy binary CPU (parseCPU) ----------------------------------------------- */

struct words {
	const uint8_t *p;
	size_t n;
	int size;
	bool big;
	bool nil; /* Go's nil slice: a short read happened */
};

static uint64_t word(struct words *w)
{
	if (w->nil || w->n < (size_t)w->size) {
		w->nil = true;
		w->n = 0;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < w->size; i++) {
		int k = w->big ? i : w->size - 1 - i;
		v = v << 8 | w->p[k];
	}
	w->p += w->size;
	w->n -= (size_t)w->size;
	return v;
}

/* parseCPUSamples: sample records (count, depth, that many addresses; with
 * adjust, the callers' -1, as for C++ but not Java) up to the end-of-data
 * marker 0 1 0 or the end. A record longer than the bytes left is Go's
 * errUnrecognized: profile.Parse goes on to its text parsers, which may find
 * their header in the binary's first "line". Why is kept in b->why, for when
 * none of them reads the input. */
static int cpu_samples(struct lb *b, struct words *w, size_t len, bool adjust)
{
	int rc;
	while (w->n > 0) {
		size_t at = len - w->n;
		uint64_t count = word(w), nstk = word(w);
		if (w->nil || nstk > w->n / 4) {
			pd_errf(&b->why, PD_EINVAL,
				"%s, offset %zu: truncated sample record (stack of %llu words, %zu bytes "
				"left)",
				b->what, at, (unsigned long long)nstk, w->n);
			return PD_LEGACY_UNRECOGNIZED;
		}
		b->nstk = 0;
		/* the end-of-data marker 0 1 0 */
		if (count == 0 && nstk == 1) {
			struct words t = *w;
			if (word(&t) == 0) {
				*w = t;
				break;
			}
		}
		for (uint64_t i = 0; i < nstk; i++) {
			uint64_t a = word(w);
			if (adjust && i > 0)
				a--;
			if ((rc = push_addr(b, a)))
				return rc;
		}
		int64_t v[2] = {(int64_t)count, wmul((int64_t)count, b->period)};
		if ((rc = add_sample(b, v, false, 0)))
			return rc;
	}
	return 0;
}

/* javaCPUProfile: the samples (addresses as they are), then the Java
 * symbols of the text after them (parseJavaLocations); no memory map. */
static int java_cpu(struct lb *b, struct words *w, const uint8_t *buf, size_t len, uint64_t period)
{
	int rc;
	b->what = "legacy Java CPU profile";
	b->go_type = "cpu";
	b->java = true;
	b->nvals = 2;
	b->period = wmul((int64_t)period, 1000);
	b->ptype[0] = S("cpu"), b->ptype[1] = S("nanoseconds");
	b->stype[0][0] = S("samples"), b->stype[0][1] = S("count");
	b->stype[1][0] = S("cpu"), b->stype[1][1] = S("nanoseconds");
	b->drop = cpu_drop; /* addLegacyFrameInfo: samples/cpu is neither heapz nor contentionz */
	if ((rc = cpu_samples(b, w, len, false)))
		return rc;
	size_t rest = w->nil ? 0 : w->n;
	b->what = "legacy Java CPU profile's symbols";
	if ((rc = java_symbols(b, (const char *)(buf + len - rest), rest, 1)))
		return rc;
	b->what = "legacy Java CPU profile";
	return 0;
}

static int parse_cpu(struct lb *b, const uint8_t *buf, size_t len)
{
	static const struct {
		int size;
		bool big;
	} fmts[] = {{4, false}, {4, true}, {8, false}, {8, true}};
	struct words w;
	uint64_t h[5];
	int f;
	for (f = 0; f < 4; f++) {
		w.p = buf, w.n = len, w.size = fmts[f].size, w.big = fmts[f].big, w.nil = false;
		for (int k = 0; k < 5; k++)
			h[k] = word(&w);
		if (!w.nil && h[0] == 0 && h[1] == 3 && h[2] == 0 && h[3] > 0 && h[4] == 0)
			break;
		if (!w.nil && h[0] == 0 && h[1] == 3 && h[2] == 1 && h[3] > 0 && h[4] == 0)
			return java_cpu(b, &w, buf, len, h[3]);
	}
	if (f == 4)
		return PD_LEGACY_UNRECOGNIZED;
	int rc;
	b->what = "legacy CPU profile";
	b->go_type = "cpu";
	b->nvals = 2;
	b->period = wmul((int64_t)h[3], 1000);
	b->ptype[0] = S("cpu"), b->ptype[1] = S("nanoseconds");
	b->stype[0][0] = S("samples"), b->stype[0][1] = S("count");
	b->stype[1][0] = S("cpu"), b->stype[1][1] = S("nanoseconds");
	b->drop = cpu_drop;
	if ((rc = cpu_samples(b, &w, len, true)))
		return rc;
	/* strip up to two frames most samples share in second position */
	size_t margin = b->ns / 32;
	for (int iter = 0; iter < 2; iter++) {
		/* a frame in >= ns - margin samples is the majority: Boyer-Moore finds the candidate */
		uint32_t cand = PD_NONE;
		size_t cnt = 0, withtwo = 0;
		for (size_t i = 0; i < b->ns; i++) {
			if (b->s[i].nlocs <= 1)
				continue;
			withtwo++;
			uint64_t a = b->addrs[b->s[i].locs[1]];
			if (cnt == 0)
				cand = b->s[i].locs[1], cnt = 1;
			else if (b->addrs[cand] == a)
				cnt++;
			else
				cnt--;
		}
		if (cand == PD_NONE || withtwo == 0)
			continue;
		uint64_t ca = b->addrs[cand];
		size_t c = 0;
		for (size_t i = 0; i < b->ns; i++)
			if (b->s[i].nlocs > 1 && b->addrs[b->s[i].locs[1]] == ca)
				c++;
		if (c + margin < b->ns)
			continue;
		for (size_t i = 0; i < b->ns; i++) {
			struct lsample *s = &b->s[i];
			if (s->nlocs > 1 && b->addrs[s->locs[1]] == ca) {
				memmove(s->locs + 1, s->locs + 2, (s->nlocs - 2) * sizeof *s->locs);
				s->nlocs--;
			}
		}
	}
	/* the rest is a memory map (p.ParseMemoryMap) */
	size_t rest = w.nil ? 0 : w.n;
	const char *text = (const char *)(buf + len - rest);
	size_t ll = long_line(text, rest);
	if (ll)
		return pd_errf(b->err, PD_EINVAL, "legacy CPU profile: memory map line %zu is longer than %d bytes", ll,
			       LINE_MAX_BYTES);
	struct scan sc = {text, rest, 0, {"", 0}, 0, 0, false};
	b->what = "legacy CPU profile memory map";
	if ((rc = parse_maps(b, &sc)))
		return rc;
	b->what = "legacy CPU profile";
	return 0;
}

/* ---- entry points ---------------------------------------------------------------- */

static void lb_free(struct lb *b)
{
	free(b->addrs);
	free(b->s);
	free(b->stk);
	free(b->m);
	free(b->strs);
	free(b->expand);
	free(b->hex);
	free(b->fn);
	free(b->fn_of_str);
	free(b->loc_fn);
	free(b->loc_line);
	pd_hidx_free(&b->lh);
	pd_hidx_free(&b->sh);
	pd_profile_free(b->p);
}

static int lb_init(struct lb *b, const struct pd_pprof_limits *lim, size_t held, struct pd_err *err)
{
	memset(b, 0, sizeof *b);
	b->mem = b->reserved = held;
	if (lim)
		b->lim = *lim;
	pd_pprof_limits_default(&b->lim);
	b->err = err;
	b->p = calloc(1, sizeof *b->p);
	if (!b->p || !(b->p->arena = pd_arena_new(16384)) || pd_hidx_init(&b->lh, 64) || pd_hidx_init(&b->sh, 64))
		return pd_errf(err, PD_ENOMEM, "out of memory");
	uint32_t zero;
	return str_add(b, S(""), false, &zero);
}

typedef int (*text_parser)(struct lb *, struct scan *);


/* held: bytes the caller already holds (and reserved) for this input. */
static int legacy_parse(const uint8_t *buf, size_t len, const struct pd_pprof_limits *lim, size_t held,
			struct pd_profile **out, struct pd_err *err)
{
	/* profile.parseLegacy's order: CPU (C++ or Java), heap, count, thread, contention, Java */
	static const text_parser parsers[] = {parse_heap, parse_count, parse_thread, parse_contention, parse_java};
	struct lb b;
	struct pd_err why = {0}; /* why a parser that began to read the input let go of it */
	int rc;
	*out = NULL;
	if (len == 0)
		return PD_LEGACY_UNRECOGNIZED;
	if ((rc = lb_init(&b, lim, held, err)))
		goto out;
	b.what = "legacy profile";
	if ((rc = parse_cpu(&b, buf, len)) != PD_LEGACY_UNRECOGNIZED) {
		if (!rc)
			rc = finish(&b, !b.java, out);
		goto out;
	}
	why = b.why;
	size_t ll = long_line((const char *)buf, len), stop = 0;
	if (ll > 1 && java_header((const char *)buf, len) != JAVA_NONE) {
		/* Go's Java parser reads lines of any length: the parsers before
		 * it see the input up to the long line, where their scanner fails */
		stop = ll;
	} else if (ll) {
		/* Go's scanner refuses the input; say so if it starts like a profile */
		struct scan one = {(const char *)buf, len, 0, {"", 0}, 0, 0, false};
		bool v2, al;
		int64_t per;
		rc = PD_LEGACY_UNRECOGNIZED;
		if (ll > 1 && sc_next(&one) &&
		    (heap_header(one.t, &v2, &per, &al) || has_prefix(one.t, "--- ") ||
		     find(one.t.ptr, one.t.len, " profile: total ")))
			rc = pd_errf(err, PD_EINVAL, "legacy profile, line %zu: longer than %d bytes (Go's parser refuses it too)",
				     ll, LINE_MAX_BYTES);
		goto out;
	}
	for (size_t i = 0; i < sizeof parsers / sizeof *parsers; i++) {
		lb_free(&b);
		if ((rc = lb_init(&b, lim, held, err)))
			goto out;
		b.what = "legacy profile";
		struct scan sc = {(const char *)buf, len, 0, {"", 0}, 0, stop, false};
		rc = parsers[i](&b, &sc);
		if (rc == PD_LEGACY_UNRECOGNIZED) {
			if (b.why.code)
				why = b.why;
			continue;
		}
		if (!rc && sc.toolong)
			rc = pd_errf(err, PD_EINVAL, "%s, line %zu: longer than %d bytes (Go's parser refuses it too)",
				     b.what, ll, LINE_MAX_BYTES);
		if (!rc)
			rc = finish(&b, parsers[i] == parse_thread, out);
		goto out;
	}
	rc = PD_LEGACY_UNRECOGNIZED;
out:
	/* Go says only "unrecognized": say where a parser stopped */
	if (rc == PD_LEGACY_UNRECOGNIZED && why.code) {
		*err = why;
		rc = why.code;
	}
	lb_free(&b);
	return rc;
}

int pd_legacy_parse(const uint8_t *buf, size_t len, const struct pd_pprof_limits *lim, struct pd_profile **out,
		    struct pd_err *err)
{
	return legacy_parse(buf, len, lim, 0, out, err);
}

/* ---- what a non-profile looks like ------------------------------------------------ */

static bool ci_prefix(const uint8_t *p, size_t n, const char *pre)
{
	size_t m = strlen(pre);
	if (n < m)
		return false;
	for (size_t i = 0; i < m; i++)
		if ((p[i] | 0x20) != (uint8_t)(pre[i] | 0x20))
			return false;
	return true;
}

static bool ci_find(const uint8_t *p, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (size_t i = 0; i + m <= n; i++)
		if (ci_prefix(p + i, n - i, needle))
			return true;
	return false;
}

/* Text: valid UTF-8 without control bytes other than \t \n \r \f \v (first 4 KiB). */
static bool looks_text(const uint8_t *p, size_t n)
{
	size_t m = n < 4096 ? n : 4096;
	for (size_t i = 0; i < m; i++)
		if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' && p[i] != '\f' && p[i] != '\v')
			return false;
	size_t bad;
	if (pd_utf8_valid(p, m, &bad))
		return true;
	return m == 4096 && bad + 4 >= m; /* a character cut at the window's end */
}

/* The bytes after a UTF-8 BOM and leading white space. */
static const uint8_t *skip_space(const uint8_t *buf, size_t len, size_t *n)
{
	size_t i = 0;
	if (len >= 3 && buf[0] == 0xef && buf[1] == 0xbb && buf[2] == 0xbf)
		i = 3; /* UTF-8 BOM */
	while (i < len && (buf[i] == ' ' || (buf[i] >= '\t' && buf[i] <= '\r')))
		i++;
	*n = len - i;
	return buf + i;
}

/* A Go execution trace (runtime/trace, /debug/pprof/trace): its 16-byte
 * header "go 1.N trace" padded with NULs, since Go 1.5. */
static bool is_go_trace(const uint8_t *p, size_t n)
{
	if (n < 16 || memcmp(p, "go 1.", 5))
		return false;
	size_t i = 5;
	while (i < 16 && is_digit((char)p[i]))
		i++;
	return i > 5 && i + 7 <= 16 && !memcmp(p + i, " trace", 6) && p[i + 6] == 0;
}

int pd_pprof_body_kind(const uint8_t *buf, size_t len)
{
	if (!len)
		return PD_BODY_EMPTY;
	if (pd_is_gzip(buf, len))
		return PD_BODY_GZIP;
	if (is_go_trace(buf, len))
		return PD_BODY_TRACE;
	if (!looks_text(buf, len))
		return PD_BODY_BINARY;
	size_t n;
	const uint8_t *p = skip_space(buf, len, &n);
	if (!n)
		return PD_BODY_SPACE;
	size_t head = n < 1024 ? n : 1024;
	if (p[0] == '<' && (ci_prefix(p, n, "<!doctype html") || ci_find(p, head, "<html") || ci_find(p, head, "<head") ||
			    ci_find(p, head, "<body")))
		return PD_BODY_HTML;
	if (p[0] == '{' || p[0] == '[')
		return PD_BODY_JSON;
	if (ci_prefix(p, n, "goroutine ") && n > 10 && is_digit((char)p[10])) {
		size_t k = 10;
		while (k < n && is_digit((char)p[k]))
			k++;
		if (k + 1 < n && p[k] == ' ' && p[k + 1] == '[')
			return PD_BODY_DUMP;
	}
	return PD_BODY_TEXT;
}

const char *pd_pprof_describe_body(const uint8_t *buf, size_t len, char *out, size_t cap)
{
	static const char *const what[] = {
		[PD_BODY_SPACE] = "white space", [PD_BODY_HTML] = "an HTML page", [PD_BODY_JSON] = "JSON",
		[PD_BODY_TEXT] = "text",         [PD_BODY_GZIP] = "gzip data",    [PD_BODY_BINARY] = "binary data",
		[PD_BODY_TRACE] = "a Go execution trace",
	};
	int k = pd_pprof_body_kind(buf, len);
	if (k == PD_BODY_EMPTY)
		snprintf(out, cap, "an empty body");
	else if (k == PD_BODY_DUMP)
		snprintf(out, cap, "a goroutine dump (debug=2, %zu bytes)", len);
	else
		snprintf(out, cap, "%s (%zu bytes)", what[k], len);
	return out;
}

/* /debug/pprof/cmdline's answer of more than one argument: os.Args joined
 * by NUL bytes; text otherwise (no line breaks, no empty argument first,
 * no other control bytes). */
static bool is_cmdline(const uint8_t *p, size_t n)
{
	if (n < 3 || n > 65536 || p[0] == 0 || !memchr(p, 0, n))
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0 && (p[i] < 0x20 || p[i] == 0x7f))
			return false;
	size_t bad;
	return pd_utf8_valid(p, n, &bad);
}

/* pd_legacy_refuse; quotes: the message may show the input's first bytes. */
static int refuse(const uint8_t *buf, size_t len, bool quotes, struct pd_err *err)
{
	size_t n;
	const uint8_t *p = skip_space(buf, len, &n);
	switch (pd_pprof_body_kind(buf, len)) {
	case PD_BODY_EMPTY:
	case PD_BODY_SPACE: return pd_errf(err, PD_EINVAL, PD_PPROF_REFUSED "%zu bytes of white space", len);
	case PD_BODY_HTML:
		return pd_errf(err, PD_EINVAL,
			       PD_PPROF_REFUSED "the body is an HTML page (%zu bytes) — a login or error page, or a "
						"URL that is not a /debug/pprof endpoint?",
			       len);
	case PD_BODY_JSON:
		if (!quotes)
			return pd_errf(err, PD_EINVAL, PD_PPROF_REFUSED "the body is JSON (%zu bytes)", len);
		return pd_errf(err, PD_EINVAL, PD_PPROF_REFUSED "the body is JSON (%zu bytes, starts with %.*s)", len,
			       (int)(n > 40 ? 40 : n), (const char *)p);
	case PD_BODY_DUMP:
		return pd_errf(err, PD_EINVAL,
			       PD_PPROF_REFUSED "the body is a goroutine dump (debug=2: stack traces of every "
						"goroutine), which no profile parser reads; fetch /debug/pprof/goroutine "
						"with debug=0 (protobuf) or debug=1");
	case PD_BODY_TRACE:
		return pd_errf(err, PD_EINVAL,
			       PD_PPROF_REFUSED "the body is a Go execution trace (%zu bytes, from /debug/pprof/trace or "
						"runtime/trace), which go tool trace reads, not a profile; fetch "
						"/debug/pprof/profile for a CPU profile",
			       len);
	case PD_BODY_TEXT: {
		if (n > 13 && !memcmp(p, "num_symbols: ", 13))
			return pd_errf(err, PD_EINVAL,
				       PD_PPROF_REFUSED "the body is /debug/pprof/symbol's answer (%zu bytes, "
							"\"num_symbols: ...\"), a symbol lookup, not a profile",
				       len);
		if (!quotes)
			return pd_errf(err, PD_EINVAL,
				       PD_PPROF_REFUSED "the body is text (%zu bytes) in none of the profile formats", len);
		const uint8_t *nl = memchr(p, '\n', n);
		size_t fl = nl ? (size_t)(nl - p) : n;
		if (fl && p[fl - 1] == '\r')
			fl--;
		return pd_errf(err, PD_EINVAL, PD_PPROF_REFUSED "text that is not a profile (first line: \"%.*s%s\")",
			       (int)(fl > 100 ? 100 : fl), (const char *)p, fl > 100 ? "..." : "");
	}
	default: break; /* binary data (gzip inside gzip too) */
	}
	if (len == 1 && buf[0] == 0x1f)
		return pd_errf(err, PD_EINVAL, PD_PPROF_REFUSED "1 byte, 1f: a truncated gzip file?");
	if (is_cmdline(buf, len))
		return pd_errf(err, PD_EINVAL,
			       PD_PPROF_REFUSED "the body is a command line, arguments separated by NUL bytes (%zu "
						"bytes), as /debug/pprof/cmdline answers, not a profile",
			       len);
	if (!quotes)
		return pd_errf(err, PD_EINVAL,
			       PD_PPROF_REFUSED "the body is binary data (%zu bytes) that is neither protobuf nor a "
						"legacy profile",
			       len);
	char hx[16] = "";
	for (size_t i = 0, o = 0; i < len && i < 4; i++)
		o += (size_t)snprintf(hx + o, sizeof hx - o, "%s%02x", i ? " " : "", buf[i]);
	return pd_errf(err, PD_EINVAL,
		       PD_PPROF_REFUSED "%zu bytes of binary data that is neither protobuf nor a legacy profile "
					"(starts with %s)",
		       len, hx);
}

int pd_legacy_refuse(const uint8_t *buf, size_t len, struct pd_err *err) { return refuse(buf, len, true, err); }

/* A first byte shaped like a one-byte tag of a Profile field (1-15, wire
 * types 0-5). */
static bool proto_start(uint8_t c)
{
	unsigned f = c >> 3, wt = c & 7;
	return f >= 1 && f <= 15 && wt <= 5;
}

/* Whether raw reads as the start of a Profile message: its first top-level
 * fields have tags of Profile fields 1-15 with their wire types (13 packed
 * or not) and lengths that fit. Input that does (three fields, or all of it)
 * keeps the protobuf decoder's error (a truncated or damaged profile); for
 * random bytes the chance is well under 1 in 10,000. */
static bool proto_like(const uint8_t *p, size_t n)
{
	/* wire type of each field: 0 varint, 2 bytes; 13 takes both */
	static const int8_t want[16] = {-1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 2, 0, 0, 0, 2};
	size_t i = 0, fields = 0;
	while (i < n && fields < 3) {
		uint64_t v[2] = {0, 0};
		for (int k = 0; k < 2; k++) { /* the tag, then the varint value or the length */
			int shift = 0;
			for (;;) {
				if (i >= n || shift > 63)
					return false;
				uint8_t b = p[i++];
				v[k] |= (uint64_t)(b & 0x7f) << shift;
				shift += 7;
				if (!(b & 0x80))
					break;
			}
			if (k == 0) {
				unsigned f = (unsigned)(v[0] >> 3), wt = (unsigned)(v[0] & 7);
				if (f < 1 || f > 15 || !(wt == (unsigned)want[f] || (f == 13 && wt == 2)))
					return false;
			}
		}
		if ((v[0] & 7) == 2) {
			if (v[1] > n - i)
				return false;
			i += (size_t)v[1];
		}
		fields++;
	}
	return fields > 0;
}

int pd_legacy_fallback(const uint8_t *raw, size_t len, const struct pd_pprof_limits *lim, pd_header_fn on_header,
		       pd_sample_fn on_sample, void *ctx, struct pd_profile **out, struct pd_err *err)
{
	struct pd_err perr = *err; /* the protobuf decoder's message */
	struct pd_profile *p = NULL;
	*out = NULL;
	int rc = legacy_parse(raw, len, lim, len, &p, err);
	if (rc == PD_LEGACY_UNRECOGNIZED) {
		/* binary that is none of what refuse names */
		bool other = !looks_text(raw, len) && pd_pprof_body_kind(raw, len) != PD_BODY_TRACE &&
			     !is_cmdline(raw, len);
		if (perr.code == PD_ELIMIT || (other && proto_like(raw, len))) {
			*err = perr;
			return perr.code ? perr.code : PD_EINVAL;
		}
		rc = refuse(raw, len, !(lim && lim->no_quotes), err);
		/* broken in its first field, but its first byte is a Profile tag:
		 * a damaged profile or noise; say both */
		if (other && proto_start(raw[0]) && perr.code) {
			char first[sizeof err->msg];
			snprintf(first, sizeof first, "%s", err->msg);
			pd_errf(err, rc, "%s; read as protobuf: %s", first, perr.msg);
		}
		return rc;
	}
	if (rc)
		return rc;
	if (on_header && (rc = on_header(ctx, p, err)))
		goto fail;
	if (on_sample) {
		for (size_t i = 0; i < p->nsamples; i++)
			if ((rc = on_sample(ctx, p, &p->samples[i], err)))
				goto fail;
		p->nsamples = 0;
	}
	*out = p;
	return 0;
fail:
	pd_profile_free(p);
	return rc;
}
