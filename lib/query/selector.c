/*
 * selector.c — the selector parser (grammar in query.h), matching of
 * profile metadata, and selection over a store (pd_query_select).
 *
 * The parser is a hand-written scanner over a NUL-terminated string: every
 * error names the byte offset where the offending token starts. Regexes are
 * RE2 syntax, checked and translated for PCRE2 (re2_translate), compiled
 * anchored at both ends, and matched with bounded work (pd_regex_*).
 *
 * Selection asks the store per service (the store indexes service, type,
 * time and exact labels) with the exact, non-empty label matchers pushed
 * down, and checks every matcher again on what comes back.
 */
#include "query.h"

#include "../util/pdpcre2.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>



static const char *const op_names[] = {"=", "!=", "=~", "!~"};

/* ---- parser ------------------------------------------------------------------ */

struct ps {
	const char *s;
	size_t i;
	struct pd_err *err;
};

static int perr(struct ps *p, size_t at, int code, const char *fmt, ...) PD_PRINTF(4, 5);
static int perr(struct ps *p, size_t at, int code, const char *fmt, ...)
{
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return pd_errf(p->err, code, "bad query \"%.200s%s\": at %zu: %s", p->s, strlen(p->s) > 200 ? "..." : "", at,
		       why);
}

static void skip_ws(struct ps *p)
{
	while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
		p->i++;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name(char c) { return is_alpha(c) || is_digit(c) || c == '.' || c == ':' || c == '/' || c == '-'; }

/* What the character at i looks like, for messages. */
static const char *what(const struct ps *p, size_t i, char *buf, size_t n)
{
	unsigned char c = (unsigned char)p->s[i];
	if (!c)
		snprintf(buf, n, "end of query");
	else if (c < 0x20 || c >= 0x7f)
		snprintf(buf, n, "byte 0x%02x", c);
	else
		snprintf(buf, n, "'%c'", c);
	return buf;
}

static int hexval(char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static size_t put_utf8(char *o, uint32_t r)
{
	if (r < 0x80) {
		o[0] = (char)r;
		return 1;
	}
	if (r < 0x800) {
		o[0] = (char)(0xc0 | (r >> 6));
		o[1] = (char)(0x80 | (r & 0x3f));
		return 2;
	}
	if (r < 0x10000) {
		o[0] = (char)(0xe0 | (r >> 12));
		o[1] = (char)(0x80 | ((r >> 6) & 0x3f));
		o[2] = (char)(0x80 | (r & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (r >> 18));
	o[1] = (char)(0x80 | ((r >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((r >> 6) & 0x3f));
	o[3] = (char)(0x80 | (r & 0x3f));
	return 4;
}

/* A quoted string at p->i ("..." or '...' with Go escapes, `...` raw) into a
 * malloc'd *out. The decoded text is never longer than the quoted one. */
static int parse_string(struct ps *p, char **out)
{
	size_t start = p->i;
	char q = p->s[p->i];
	*out = NULL;
	const char *b = p->s + p->i + 1;
	size_t len = 0;
	while (b[len] && b[len] != q) {
		if (b[len] == '\\' && q != '`' && b[len + 1])
			len++;
		len++;
	}
	if (!b[len])
		return perr(p, start, PD_EINVAL, "unterminated string (missing closing %c)", q);
	char *o = malloc(len + 1);
	if (!o)
		return pd_errf(p->err, PD_ENOMEM, "out of memory");
	size_t k = 0;
	int rc = 0;
	for (size_t j = 0; j < len && !rc; j++) {
		size_t at = start + 1 + j;
		char c = b[j];
		if (c == '\n' && q != '`') {
			rc = perr(p, at, PD_EINVAL, "newline in string (use \\n)");
			break;
		}
		if (c != '\\' || q == '`') {
			o[k++] = c;
			continue;
		}
		char e = b[++j];
		switch (e) {
		case 'a': o[k++] = '\a'; break;
		case 'b': o[k++] = '\b'; break;
		case 'f': o[k++] = '\f'; break;
		case 'n': o[k++] = '\n'; break;
		case 'r': o[k++] = '\r'; break;
		case 't': o[k++] = '\t'; break;
		case 'v': o[k++] = '\v'; break;
		case '\\': o[k++] = '\\'; break;
		case '"':
		case '\'':
			if (e != q) {
				rc = perr(p, at, PD_EINVAL, "unknown escape \\%c in %c-quoted string", e, q);
				break;
			}
			o[k++] = e;
			break;
		case 'x':
		case 'u':
		case 'U': {
			int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
			uint32_t v = 0;
			for (int d = 0; d < nd; d++) {
				int h = j + 1 + (size_t)d < len ? hexval(b[j + 1 + (size_t)d]) : -1;
				if (h < 0) {
					rc = perr(p, at, PD_EINVAL, "bad escape \\%c: want %d hex digits", e, nd);
					break;
				}
				v = v << 4 | (uint32_t)h;
			}
			if (rc)
				break;
			j += (size_t)nd;
			if (e != 'x' && (v > 0x10ffff || (v >= 0xd800 && v < 0xe000))) {
				rc = perr(p, at, PD_EINVAL, "bad escape: U+%04X is not a valid code point", v);
				break;
			}
			if (v == 0) {
				rc = perr(p, at, PD_EINVAL, "NUL byte in string");
				break;
			}
			if (e == 'x')
				o[k++] = (char)v;
			else
				k += put_utf8(o + k, v); /* \uHHHH (6 bytes) >= 3 bytes of UTF-8 */
			break;
		}
		default:
			if (e >= '0' && e <= '7') {
				uint32_t v = 0;
				for (int d = 0; d < 3; d++) {
					char c2 = j + (size_t)d < len ? b[j + (size_t)d] : 0;
					if (c2 < '0' || c2 > '7') {
						rc = perr(p, at, PD_EINVAL, "bad escape: want 3 octal digits");
						break;
					}
					v = v * 8 + (uint32_t)(c2 - '0');
				}
				if (rc)
					break;
				if (v > 255 || v == 0) {
					rc = perr(p, at, PD_EINVAL, v ? "bad escape: octal value over 255" : "NUL byte in string");
					break;
				}
				o[k++] = (char)v;
				j += 2;
				break;
			}
			rc = perr(p, at, PD_EINVAL, "unknown escape \\%c", e ? e : '0');
		}
	}
	if (rc) {
		free(o);
		return rc;
	}
	o[k] = 0;
	p->i = start + 1 + len + 1;
	*out = o;
	return 0;
}

/* ---- regexes: RE2 syntax on PCRE2 ----------------------------------------------
 *
 * Prometheus compiles a matcher's regex with Go's regexp (RE2 syntax) as
 * ^(?s:re)$. PCRE2 reads most of that syntax the same way; re2_translate
 * walks the regex once and
 *   - refuses what PCRE2 would accept with a meaning RE2 does not have
 *     (back-references, look-around, atomic groups, possessive quantifiers,
 *     recursion, conditionals, verbs, callouts, \C \K \G \R \X \h \N ...):
 *     "unsupported in RE2/Prometheus selector syntax: <what>";
 *   - refuses what RE2 refuses and PCRE2 would read otherwise: stacked
 *     repetitions (a**), repeat counts over 1000, unknown flags, letters
 *     escaped without a meaning, \b \B \A \z \Q inside a class;
 *   - rewrites what both accept with different meanings: \v (RE2: the
 *     vertical tab; PCRE2: any vertical space), \s \S (RE2: [\t\n\f\r ];
 *     PCRE2 adds \v), octal \12 and \0 (RE2: octal; PCRE2: maybe a
 *     back-reference), a '{' that is no repetition and '[' or ']' meant
 *     literally (escaped), named groups (RE2 allows names PCRE2 refuses;
 *     names never matter for a whole-value match: plain groups).
 * Then PCRE2 compiles it with UTF, DOTALL (as (?s:...)), anchored at both
 * ends, $ at the very end only, newline = \n, no auto-capture, no \C; JIT
 * when the platform allows it.
 */

#define UNSUP ": unsupported in RE2/Prometheus selector syntax: "

#define RX_DEPTH 250 /* nested groups (PCRE2's default limit) */

struct rx {
	const char *s; /* the regex */
	size_t i;
	/* Go's repeatIsValid: nested {n,m} counts multiply to at most 1000;
	 * gmax[d] = the largest product inside open group d, last = the last
	 * atom's */
	unsigned gmax[RX_DEPTH + 1], last;
	size_t d;
	bool ci[RX_DEPTH + 1]; /* (?i) in force in open group d */
	char *o; /* output, cap 96 * strlen + 64 (\W in a class under (?i), 2 bytes to 89, expands most) */
	size_t n;
	char *why;
	size_t nwhy;
};

static int rx_fail(struct rx *x, const char *fmt, ...) PD_PRINTF(2, 3);
static int rx_fail(struct rx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->why, x->nwhy, fmt, ap);
	va_end(ap);
	return PD_EINVAL;
}

static void rx_put(struct rx *x, const char *s, size_t n)
{
	memcpy(x->o + x->n, s, n);
	x->n += n;
}
static void rx_puts(struct rx *x, const char *s) { rx_put(x, s, strlen(s)); }
static void rx_putc(struct rx *x, char c) { x->o[x->n++] = c; }

static bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_odigit(char c) { return c >= '0' && c <= '7'; }

/* What a PCRE2-only escape letter is, or NULL (then it is simply invalid). */
static const char *pcre_only_escape(char c)
{
	switch (c) {
	case 'g':
	case 'k': return "back-reference";
	case 'K': return "match start reset";
	case 'G': return "\\G anchor";
	case 'Z': return "\\Z (end before a final newline; RE2 has \\z)";
	case 'C': return "\\C (one code unit)";
	case 'R': return "\\R (any newline sequence)";
	case 'X': return "\\X (extended grapheme cluster)";
	case 'N': return "\\N";
	case 'h':
	case 'H': return "horizontal-space class";
	case 'V': return "vertical-space class";
	case 'E': return "\\E without \\Q";
	case 'c': return "\\c control-character escape";
	case 'o': return "\\o{} octal escape";
	case 'e': return "\\e escape";
	default: return NULL;
	}
}

/*
 * Under (?i) RE2 folds a class: an ASCII class with k or s in it then holds
 * U+212A (Kelvin sign) and U+017F (long s) too, whose other cases they are
 * ((?i)\w and (?i)[[:alpha:]] match them, (?i)\W does not). PCRE2 folds
 * literal ranges but not \w or [:alpha:], so under (?i) those are written as
 * the ranges of the folded set: [set] or [^set] (in_class: the ranges, or
 * those of the complement).
 */
struct aset {
	bool has[128];
};

static void aset_range(struct aset *a, int lo, int hi)
{
	for (int c = lo; c <= hi; c++)
		a->has[c] = true;
}

/* The ASCII set of POSIX class name[0..n) (RE2's), false if none. */
static bool posix_set(const char *name, size_t n, struct aset *a)
{
	memset(a, 0, sizeof *a);
#define IS(w) (n == strlen(w) && !memcmp(name, w, n))
	if (IS("alnum") || IS("alpha") || IS("upper") || IS("word") || IS("xdigit"))
		aset_range(a, 'A', IS("xdigit") ? 'F' : 'Z');
	if (IS("alnum") || IS("alpha") || IS("lower") || IS("word") || IS("xdigit"))
		aset_range(a, 'a', IS("xdigit") ? 'f' : 'z');
	if (IS("alnum") || IS("digit") || IS("word") || IS("xdigit"))
		aset_range(a, '0', '9');
	if (IS("word"))
		a->has['_'] = true;
	if (IS("ascii"))
		aset_range(a, 0, 127);
	if (IS("blank"))
		a->has['\t'] = a->has[' '] = true;
	if (IS("cntrl"))
		aset_range(a, 0, 31), a->has[127] = true;
	if (IS("graph") || IS("print"))
		aset_range(a, IS("print") ? ' ' : '!', '~');
	if (IS("punct"))
		aset_range(a, '!', '/'), aset_range(a, ':', '@'), aset_range(a, '[', '`'), aset_range(a, '{', '~');
	if (IS("space"))
		aset_range(a, '\t', '\r'), a->has[' '] = true;
#undef IS
	for (int c = 0; c < 128; c++)
		if (a->has[c])
			return true;
	return false;
}

/* Does the set hold a letter (then folding changes it)? */
static bool aset_cased(const struct aset *a)
{
	for (int c = 'A'; c <= 'Z'; c++)
		if (a->has[c] || a->has[c + 32])
			return true;
	return false;
}

static void rx_range(struct rx *x, uint32_t lo, uint32_t hi)
{
	char t[32];
	if (lo == hi)
		snprintf(t, sizeof t, "\\x{%x}", (unsigned)lo);
	else
		snprintf(t, sizeof t, "\\x{%x}-\\x{%x}", (unsigned)lo, (unsigned)hi);
	rx_puts(x, t);
}

static void rx_folded(struct rx *x, const struct aset *a0, bool neg, bool in_class)
{
	bool in[130]; /* 0..127, then U+017F, U+212A */
	for (int c = 0; c < 128; c++)
		in[c] = a0->has[c] || (c >= 'A' && c <= 'Z' && a0->has[c + 32]) || (c >= 'a' && c <= 'z' && a0->has[c - 32]);
	in[128] = in['s'];
	in[129] = in['k'];
	static const uint32_t cp[2] = {0x17f, 0x212a};
	if (!in_class)
		rx_puts(x, neg ? "[^" : "[");
	if (!in_class || !neg) {
		for (int c = 0; c < 128; c++) {
			if (!in[c] || (c && in[c - 1]))
				continue;
			int e = c;
			while (e + 1 < 128 && in[e + 1])
				e++;
			rx_range(x, (uint32_t)c, (uint32_t)e);
		}
		for (int k = 0; k < 2; k++)
			if (in[128 + k])
				rx_range(x, cp[k], cp[k]);
	} else { /* the complement over every code point */
		uint32_t lo = 0;
		for (uint32_t c = 0; c <= 0x212a; c++) {
			bool member = c < 128 ? in[c] : c == 0x17f ? in[128] : c == 0x212a ? in[129] : false;
			if (!member)
				continue;
			if (c > lo)
				rx_range(x, lo, c - 1);
			lo = c + 1;
			if (c >= 127 && c < 0x17f)
				c = 0x17e; /* nothing between */
			else if (c >= 0x17f && c < 0x212a)
				c = 0x2129;
		}
		rx_range(x, lo, 0x10ffff);
	}
	if (!in_class)
		rx_putc(x, ']');
}

/* The escape at x->s[x->i] == '\\'; in a class or not. */
static int rx_escape(struct rx *x, bool in_class)
{
	const char *s = x->s;
	size_t i = x->i + 1;
	char c = s[i];
	char t[24];
	if (!c)
		return rx_fail(x, " does not compile: trailing backslash at end of expression");
	if (c >= '1' && c <= '9' && !(c <= '7' && is_odigit(s[i + 1])))
		return rx_fail(x, UNSUP "back-reference \\%c", c);
	if (is_odigit(c)) { /* RE2 octal: \0, \0o, \0oo, \1o, \1oo (up to 3 digits) */
		unsigned v = (unsigned)(c - '0');
		size_t k = 1;
		while (k < 3 && is_odigit(s[i + k]))
			v = v * 8 + (unsigned)(s[i + k++] - '0');
		snprintf(t, sizeof t, "\\x{%x}", v);
		rx_puts(x, t);
		x->i = i + k;
		return 0;
	}
	switch (c) {
	case 'x': {
		uint32_t v = 0;
		size_t k;
		if (s[i + 1] == '{') {
			for (k = 2; hexval(s[i + k]) >= 0; k++) {
				v = v * 16 + (uint32_t)hexval(s[i + k]);
				if (v > 0x10ffff)
					return rx_fail(x, " does not compile: invalid escape sequence: \\x{%.8s (over U+10FFFF)",
						       s + i + 2);
			}
			if (k == 2 || s[i + k] != '}')
				return rx_fail(x, " does not compile: invalid escape sequence \\x{ (want \\x{hex})");
			k++;
		} else {
			if (hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
				return rx_fail(x, " does not compile: invalid escape sequence \\x (want \\xHH or \\x{hex})");
			v = (uint32_t)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			k = 3;
		}
		if (v >= 0xd800 && v < 0xe000) /* never in UTF-8 text: RE2 never matches it, PCRE2 refuses it */
			return rx_fail(x, " does not compile: \\x{%x} is a surrogate, never in UTF-8 text", (unsigned)v);
		snprintf(t, sizeof t, "\\x{%x}", (unsigned)v);
		rx_puts(x, t);
		x->i = i + k;
		return 0;
	}
	case 'w':
	case 'W':
		if (x->ci[x->d]) {
			struct aset a;
			posix_set("word", 4, &a);
			rx_folded(x, &a, c == 'W', in_class);
			x->i = i + 1;
			return 0;
		}
		rx_putc(x, '\\');
		rx_putc(x, c);
		x->i = i + 1;
		return 0;
	case 'a':
	case 'f':
	case 'n':
	case 'r':
	case 't':
	case 'd':
	case 'D': rx_putc(x, '\\'); rx_putc(x, c); x->i = i + 1; return 0;
	case 'v': rx_puts(x, "\\x{b}"); x->i = i + 1; return 0;
	case 's': rx_puts(x, in_class ? "\\t\\n\\f\\r " : "[\\t\\n\\f\\r ]"); x->i = i + 1; return 0;
	case 'S':
		rx_puts(x, in_class ? "\\x{0}-\\x{8}\\x{b}\\x{e}-\\x{1f}\\x{21}-\\x{10ffff}" : "[^\\t\\n\\f\\r ]");
		x->i = i + 1;
		return 0;
	case 'p':
	case 'P': {
		size_t k = 2;
		if (s[i + 1] == '{') {
			while (s[i + k] && s[i + k] != '}')
				k++;
			if (!s[i + k])
				return rx_fail(x, " does not compile: invalid character class range \\%c{ (missing })", c);
			/* RE2 folds a class under (?i): (?i)\p{Lu} matches "a"; PCRE2 does not fold \p */
			const char *nm = s + i + 2 + (s[i + 2] == '^');
			if (x->ci[x->d] && (!strncmp(nm, "Lu}", 3) || !strncmp(nm, "Ll}", 3) || !strncmp(nm, "Lt}", 3)))
				return rx_fail(x, UNSUP "\\%c{%.*s} under (?i) (RE2 matches both cases there, PCRE2 one: "
							"write [\\p{Lu}\\p{Ll}] or drop the (?i))",
					       c, (int)(k - 2), s + i + 2);
			/* a script (not a category: one or two letters, or Any): RE2's is
			 * the Script property, PCRE2's bare name Script_Extensions
			 * (\p{Greek} would match U+0342, \p{Han} U+3001): sc: says Script */
			size_t nl = (size_t)(s + i + k - nm);
			if (nl > 2 && !(nl == 3 && !memcmp(nm, "Any", 3))) {
				rx_puts(x, c == 'p' ? "\\p{" : "\\P{");
				if (nm[-1] == '^')
					rx_putc(x, '^');
				rx_puts(x, "sc:");
				rx_put(x, nm, nl + 1);
				x->i = i + k + 1;
				return 0;
			}
			k++;
		} else if (!s[i + 1] || (unsigned char)s[i + 1] >= 0x80) {
			return rx_fail(x, " does not compile: invalid character class range \\%c", c);
		}
		rx_putc(x, '\\');
		rx_put(x, s + i, k);
		x->i = i + k;
		return 0;
	}
	case 'b':
	case 'B':
	case 'A':
	case 'z':
		if (in_class)
			return rx_fail(x, " does not compile: invalid escape sequence \\%c in a character class", c);
		rx_putc(x, '\\');
		rx_putc(x, c);
		x->i = i + 1;
		return 0;
	case 'Q': {
		if (in_class)
			return rx_fail(x, " does not compile: \\Q in a character class");
		/* literal up to \E or the end: each character escaped or copied */
		size_t k = i + 1;
		while (s[k] && !(s[k] == '\\' && s[k + 1] == 'E')) {
			if ((unsigned char)s[k] < 0x80 && !is_alnum(s[k]))
				rx_putc(x, '\\');
			rx_putc(x, s[k++]);
		}
		x->i = s[k] ? k + 2 : k;
		return 0;
	}
	default: break;
	}
	if ((unsigned char)c < 0x80 && !is_alnum(c)) { /* escaped punctuation: itself */
		rx_putc(x, '\\');
		rx_putc(x, c);
		x->i = i + 1;
		return 0;
	}
	const char *what = pcre_only_escape(c);
	if (what)
		return rx_fail(x, UNSUP "%s (\\%c)", what, c);
	if ((unsigned char)c >= 0x80)
		return rx_fail(x, " does not compile: invalid escape sequence (backslash before a non-ASCII character)");
	return rx_fail(x, " does not compile: invalid escape sequence \\%c", c);
}

static const char *const posix_classes[] = {"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
					     "lower", "print", "punct", "space", "upper", "word",  "xdigit"};

/* A class at x->s[x->i] == '['. */
static int rx_class(struct rx *x)
{
	const char *s = x->s;
	size_t start = x->i, i = x->i + 1;
	rx_putc(x, '[');
	if (s[i] == '^')
		rx_putc(x, '^'), i++;
	if (s[i] == ']') /* first: literal */
		rx_puts(x, "\\]"), i++;
	while (s[i] && s[i] != ']') {
		if (s[i] == '[' && s[i + 1] == ':') {
			size_t k = i + 2 + (s[i + 2] == '^');
			size_t e = k;
			while (is_alpha(s[e]))
				e++;
			bool known = false;
			for (size_t j = 0; j < sizeof posix_classes / sizeof *posix_classes && !known; j++)
				known = e - k == strlen(posix_classes[j]) && !memcmp(s + k, posix_classes[j], e - k);
			if (s[e] == ':' && s[e + 1] == ']') {
				if (!known)
					return rx_fail(x, " does not compile: invalid character class range [:%.*s:]",
						       (int)(e - k > 20 ? 20 : e - k), s + k);
				struct aset a;
				if (x->ci[x->d] && posix_set(s + k, e - k, &a) && aset_cased(&a))
					rx_folded(x, &a, s[i + 2] == '^', true);
				else
					rx_put(x, s + i, e + 2 - i);
				i = e + 2;
				if (s[i] == '-' && s[i + 1] != ']') /* [[:alpha:]-z]: a literal '-' in RE2 */
					rx_puts(x, "\\-"), i++;
				continue;
			}
			rx_puts(x, "\\["), i++; /* RE2: a literal '[' */
			continue;
		}
		if (s[i] == '[') {
			rx_puts(x, "\\["), i++;
			continue;
		}
		if (s[i] == '\\') {
			x->i = i;
			int rc = rx_escape(x, true);
			if (rc)
				return rc;
			bool set = strchr("dDwWsSpP", s[i + 1]) != NULL;
			i = x->i;
			if (set && s[i] == '-' && s[i + 1] != ']') /* [\s-a]: RE2's '-' is literal there, a range in PCRE2 */
				rx_puts(x, "\\-"), i++;
			continue;
		}
		rx_putc(x, s[i++]);
	}
	if (!s[i])
		return rx_fail(x, " does not compile: missing closing ]: %.40s", s + start);
	rx_putc(x, ']');
	x->i = i + 1;
	return 0;
}

static int rx_open(struct rx *x)
{
	if (x->d == RX_DEPTH)
		return rx_fail(x, " does not compile: expression nests too deeply (over %d groups)", RX_DEPTH);
	x->gmax[++x->d] = 0;
	x->ci[x->d] = x->ci[x->d - 1];
	return 0;
}

static void rx_atom(struct rx *x, unsigned prod)
{
	x->last = prod;
	if (prod > x->gmax[x->d])
		x->gmax[x->d] = prod;
}

/* A group opening at x->s[x->i] == '('. */
static int rx_group(struct rx *x)
{
	const char *s = x->s;
	size_t i = x->i;
	if (s[i + 1] == '*')
		return rx_fail(x, UNSUP "(*...) verbs and options");
	if (s[i + 1] != '?') {
		rx_putc(x, '(');
		x->i = i + 1;
		return rx_open(x);
	}
	const char *g = s + i + 2;
	/* named groups: (?P<name>re) and (?<name>re) */
	if ((g[0] == 'P' && g[1] == '<') || (g[0] == '<' && g[1] != '=' && g[1] != '!')) {
		size_t k = g[0] == 'P' ? 2 : 1, e = k;
		while (is_alpha(g[e]) || is_digit(g[e]))
			e++;
		if (e == k || g[e] != '>')
			return rx_fail(x, " does not compile: invalid named capture: (?%.*s", (int)(e + 1), g);
		rx_putc(x, '(');
		x->i = i + 2 + e + 1;
		return rx_open(x);
	}
	switch (g[0]) {
	case '=': return rx_fail(x, UNSUP "lookahead (?=");
	case '!': return rx_fail(x, UNSUP "negative lookahead (?!");
	case '<': return rx_fail(x, UNSUP "lookbehind (?%.2s", g);
	case '>': return rx_fail(x, UNSUP "atomic group (?>");
	case '|': return rx_fail(x, UNSUP "branch reset group (?|");
	case '#': return rx_fail(x, UNSUP "comment (?#");
	case '(': return rx_fail(x, UNSUP "conditional group (?(");
	case 'C': return rx_fail(x, UNSUP "callout (?C");
	case '\'': return rx_fail(x, UNSUP "named group (?'name'");
	case '*': return rx_fail(x, UNSUP "non-atomic lookaround (?*");
	case '&': return rx_fail(x, UNSUP "recursion / subroutine call (?&name)");
	case 'R': return rx_fail(x, UNSUP "recursion (?R)");
	case 'P':
		if (g[1] == '=')
			return rx_fail(x, UNSUP "back-reference (?P=name)");
		if (g[1] == '>')
			return rx_fail(x, UNSUP "recursion (?P>name)");
		break;
	default:
		if (is_digit(g[0]) || ((g[0] == '+' || g[0] == '-') && is_digit(g[1])))
			return rx_fail(x, UNSUP "recursion / subroutine call (?%.2s", g);
	}
	/* flags: (?flags) or (?flags:re), flags in i m s U, one '-' not last */
	size_t k = 0;
	bool neg = false, after_neg = false;
	for (;; k++) {
		char c = g[k];
		if (c == 'i' || c == 'm' || c == 's' || c == 'U') {
			after_neg = false;
			continue;
		}
		if (c == '-' && !neg) {
			neg = after_neg = true;
			continue;
		}
		if ((c == ')' || c == ':') && !after_neg)
			break;
		if (!c)
			return rx_fail(x, " does not compile: missing closing ): (?%.20s", g);
		if (is_alpha(c) || c == '^')
			return rx_fail(x, UNSUP "flag '%c' in (?%.*s (RE2 knows i, m, s, U)", c, (int)(k + 1), g);
		return rx_fail(x, " does not compile: invalid or unsupported Perl syntax: (?%.*s", (int)(k + 1), g);
	}
	bool ci = x->ci[x->d];
	for (size_t j = 0, off = 0; j < k; j++)
		if (g[j] == '-')
			off = 1;
		else if (g[j] == 'i')
			ci = !off;
	rx_put(x, s + i, 2 + k + 1);
	x->i = i + 2 + k + 1;
	int rc = g[k] == ':' ? rx_open(x) : 0;
	if (!rc)
		x->ci[x->d] = ci; /* (?i:...) for the group, (?i) for the rest of the open one */
	return rc;
}

/* {n}, {n,} or {n,m} at s (RE2's grammar), its length, or 0 if not one. */
static size_t rx_repeat(const char *s, unsigned *lo, unsigned *hi, bool *big)
{
	size_t k = 1;
	unsigned a = 0, b;
	*big = false;
	if (!is_digit(s[k]))
		return 0;
	while (is_digit(s[k])) {
		a = a > 100000 ? a : a * 10 + (unsigned)(s[k] - '0');
		k++;
	}
	b = a;
	if (s[k] == ',') {
		k++;
		b = UINT32_MAX;
		if (is_digit(s[k])) {
			b = 0;
			while (is_digit(s[k])) {
				b = b > 100000 ? b : b * 10 + (unsigned)(s[k] - '0');
				k++;
			}
		}
	}
	if (s[k] != '}')
		return 0;
	*lo = a;
	*hi = b;
	*big = a > PD_QUERY_MAX_REPEAT || (b != UINT32_MAX && (b > PD_QUERY_MAX_REPEAT || b < a));
	return k + 1;
}

static int re2_translate(struct rx *x)
{
	const char *s = x->s;
	int rep = 0; /* the previous token: 0 not a repetition, 1 a repetition, 2 one made lazy by '?' */
	while (s[x->i]) {
		char c = s[x->i];
		unsigned lo, hi;
		bool big;
		size_t rl = c == '{' ? rx_repeat(s + x->i, &lo, &hi, &big) : 0;
		bool is_rep = c == '*' || c == '+' || c == '?' || rl;
		if (is_rep) {
			if (rep) {
				if (c == '?' && rep == 1) { /* lazy: the same whole-value matches */
					rep = 2;
					rx_putc(x, '?');
					x->i++;
					continue;
				}
				if (c == '+' && rep == 1)
					return rx_fail(x, UNSUP "possessive quantifier (a repetition followed by '+', "
								"e.g. a++ or a{2}+)");
				return rx_fail(x, " does not compile: invalid nested repetition operator: %.*s (group it: "
						  "(a*)*)",
					       (int)(rl ? rl : 1), s + x->i);
			}
			if (rl && big)
				return rx_fail(x, " does not compile: invalid repeat count %.*s (at most %d)", (int)rl, s + x->i,
					       PD_QUERY_MAX_REPEAT);
			if (rl) {
				unsigned m = hi == UINT32_MAX ? lo : hi;
				if (m && (uint64_t)x->last * m > PD_QUERY_MAX_REPEAT)
					return rx_fail(x, " does not compile: invalid repeat count %.*s (nested counts "
							  "multiply to over %d)",
						       (int)rl, s + x->i, PD_QUERY_MAX_REPEAT);
				rx_atom(x, m ? x->last * m : 1);
			}
			rep = 1;
			rx_put(x, s + x->i, rl ? rl : 1);
			x->i += rl ? rl : 1;
			continue;
		}
		rep = 0;
		int rc = 0;
		if (c != '(' && c != ')' && c != '|')
			rx_atom(x, 1);
		switch (c) {
		case ')':
			rx_putc(x, ')');
			x->i++;
			if (x->d) { /* else unbalanced: PCRE2 says so */
				unsigned g = x->gmax[x->d--];
				rx_atom(x, g ? g : 1);
			}
			break;
		case '\\': rc = rx_escape(x, false); break;
		case '[': rc = rx_class(x); break;
		case '(': rc = rx_group(x); break;
		case '{':
		case ']':
		case '}':
			rx_putc(x, '\\');
			rx_putc(x, c);
			x->i++;
			break;
		default:
			rx_putc(x, c);
			x->i++;
		}
		if (rc)
			return rc;
	}
	x->o[x->n] = 0;
	return 0;
}

struct pd_regex {
	pcre2_code *code;
	pcre2_match_context *mctx;
	atomic_bool limited; /* a match hit a bound: every later match is PD_ELIMIT */
};

void pd_regex_free(struct pd_regex *re)
{
	if (!re)
		return;
	pcre2_code_free(re->code);
	pcre2_match_context_free(re->mctx);
	free(re);
}

int pd_regex_compile(const char *re, struct pd_regex **out, char *why, size_t nwhy)
{
	*out = NULL;
	if (nwhy)
		why[0] = 0;
	size_t len = strlen(re);
	if (len > PD_QUERY_MAX_REGEX) {
		snprintf(why, nwhy, ": regex of %zu bytes: over the limit of %d", len, PD_QUERY_MAX_REGEX);
		return PD_ELIMIT;
	}
	int rc = PD_ENOMEM;
	pcre2_compile_context *cc = NULL;
	struct pd_regex *r = calloc(1, sizeof *r);
	struct rx x = {.s = re, .o = malloc(96 * len + 64), .why = why, .nwhy = nwhy};
	if (!r || !x.o)
		goto out;
	if ((rc = re2_translate(&x)))
		goto out;
	rc = PD_ENOMEM;
	if (!(cc = pcre2_compile_context_create(NULL)) || pcre2_set_newline(cc, PCRE2_NEWLINE_LF))
		goto out;
	int ec;
	PCRE2_SIZE eo;
	r->code = pcre2_compile((PCRE2_SPTR)x.o, x.n,
				PCRE2_UTF | PCRE2_DOTALL | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOLLAR_ENDONLY |
					PCRE2_ALT_CIRCUMFLEX | PCRE2_NO_AUTO_CAPTURE | PCRE2_NEVER_BACKSLASH_C,
				&ec, &eo, cc);
	if (!r->code) {
		if (ec == PCRE2_ERROR_NOMEMORY)
			goto out;
		char msg[160];
		if (pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg) < 0)
			snprintf(msg, sizeof msg, "PCRE2 error %d", ec);
		snprintf(why, nwhy, " does not compile: %s", msg);
		rc = PD_EINVAL;
		goto out;
	}
	(void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE); /* else the interpreter */
	if (!(r->mctx = pcre2_match_context_create(NULL)) || pcre2_set_match_limit(r->mctx, PD_QUERY_RE_MATCH_LIMIT) ||
	    pcre2_set_depth_limit(r->mctx, PD_QUERY_RE_DEPTH_LIMIT) ||
	    pcre2_set_heap_limit(r->mctx, PD_QUERY_RE_HEAP_LIMIT_KB))
		goto out;
	atomic_init(&r->limited, false);
	*out = r;
	r = NULL;
	rc = 0;
out:
	if (rc == PD_ENOMEM)
		snprintf(why, nwhy, ": out of memory");
	pcre2_compile_context_free(cc);
	pd_regex_free(r);
	free(x.o);
	return rc;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 (strict: no overlong
 * forms, no surrogates, nothing over U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t k;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		k = 2;
	else if (c >= 0xe0 && c <= 0xef)
		k = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		k = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < k || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t j = 2; j < k; j++)
		if ((s[j] & 0xc0) != 0x80)
			return 0;
	return k;
}

static int rx_run(const struct pd_regex *re, const char *s, size_t len, uint32_t opts, pcre2_match_data *md)
{
	int r = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, opts, md, re->mctx);
	if (r == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter's bounds are the heap and depth limits */
		r = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, opts | PCRE2_NO_JIT, md, re->mctx);
	return r;
}

int pd_regex_match(const struct pd_regex *re, const char *s, size_t len)
{
	/* the flag is the one mutable field (re is malloc'd, never const itself) */
	atomic_bool *limited = &((struct pd_regex *)re)->limited;
	if (atomic_load_explicit(limited, memory_order_relaxed))
		return PD_ELIMIT;
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	if (!md)
		return PD_ENOMEM;
	char *fixed = NULL;
	int r = rx_run(re, s, len, 0, md);
	if (r <= PCRE2_ERROR_UTF8_ERR1 && r >= PCRE2_ERROR_UTF8_ERR21) {
		/* invalid UTF-8: as Go reads it, each bad byte is U+FFFD */
		if (len > (SIZE_MAX - 1) / 3 || !(fixed = malloc(3 * len + 1))) {
			pcre2_match_data_free(md);
			return PD_ENOMEM;
		}
		size_t o = 0;
		for (size_t i = 0; i < len;) {
			size_t k = utf8_len((const unsigned char *)s + i, len - i);
			if (k) {
				memcpy(fixed + o, s + i, k);
				o += k, i += k;
			} else {
				memcpy(fixed + o, "\xef\xbf\xbd", 3);
				o += 3, i++;
			}
		}
		r = rx_run(re, fixed, o, PCRE2_NO_UTF_CHECK, md); /* validated just above */
		free(fixed);
	}
	pcre2_match_data_free(md);
	if (r >= 0)
		return 1;
	if (r == PCRE2_ERROR_NOMATCH)
		return 0;
	if (r == PCRE2_ERROR_NOMEMORY)
		return PD_ENOMEM;
	/* match, depth, heap or JIT stack limit (nothing else can fail here) */
	atomic_store_explicit(limited, true, memory_order_relaxed);
	return PD_ELIMIT;
}

bool pd_regex_limited(const struct pd_regex *re)
{
	return re && atomic_load_explicit(&((struct pd_regex *)re)->limited, memory_order_relaxed);
}

static int compile_re(struct ps *p, size_t at, struct pd_matcher *m)
{
	char why[300];
	int rc = pd_regex_compile(m->value, &m->re, why, sizeof why);
	if (rc == PD_ENOMEM)
		return pd_errf(p->err, PD_ENOMEM, "out of memory");
	if (rc == PD_ELIMIT)
		return perr(p, at, PD_ELIMIT, "regex of %zu bytes: over the limit of %d", strlen(m->value),
			    PD_QUERY_MAX_REGEX);
	if (rc)
		return perr(p, at, PD_EINVAL, "regex \"%.100s\"%s", m->value, why);
	m->has_re = true;
	return 0;
}

static void matcher_free(struct pd_matcher *m)
{
	free(m->name);
	free(m->value);
	pd_regex_free(m->re);
	memset(m, 0, sizeof *m);
}

void pd_selector_free(struct pd_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++)
		matcher_free(&sel->m[i]);
	free(sel->m);
	free(sel->type);
	memset(sel, 0, sizeof *sel);
}

static int parse_matcher(struct ps *p, struct pd_selector *sel)
{
	char buf[24];
	size_t at = p->i;
	if (sel->n >= PD_QUERY_MAX_MATCHERS)
		return perr(p, at, PD_ELIMIT, "more than %d matchers", PD_QUERY_MAX_MATCHERS);
	struct pd_matcher m = {0};
	int rc = 0;
	char c = p->s[p->i];
	if (c == '"' || c == '\'' || c == '`') {
		if ((rc = parse_string(p, &m.name)))
			goto out;
		if (!m.name[0]) {
			rc = perr(p, at, PD_EINVAL, "empty label name");
			goto out;
		}
	} else if (is_alpha(c)) {
		size_t e = p->i;
		while (is_name(p->s[e]))
			e++;
		m.name = strndup(p->s + p->i, e - p->i);
		if (!m.name) {
			rc = pd_errf(p->err, PD_ENOMEM, "out of memory");
			goto out;
		}
		p->i = e;
	} else {
		rc = perr(p, at, PD_EINVAL, "expected a label name, got %s", what(p, at, buf, sizeof buf));
		goto out;
	}
	skip_ws(p);
	size_t opat = p->i;
	const char *o = p->s + p->i;
	if (o[0] == '=' && o[1] == '~')
		m.op = PD_MATCH_RE, p->i += 2;
	else if (o[0] == '!' && o[1] == '~')
		m.op = PD_MATCH_NRE, p->i += 2;
	else if (o[0] == '!' && o[1] == '=')
		m.op = PD_MATCH_NE, p->i += 2;
	else if (o[0] == '=')
		m.op = PD_MATCH_EQ, p->i += 1;
	else {
		rc = perr(p, opat, PD_EINVAL, "expected one of = != =~ !~ after label \"%.100s\", got %s", m.name,
			  what(p, opat, buf, sizeof buf));
		goto out;
	}
	skip_ws(p);
	size_t vat = p->i;
	c = p->s[p->i];
	if (c != '"' && c != '\'' && c != '`') {
		rc = perr(p, vat, PD_EINVAL, "expected a quoted value after %s, got %s", op_names[m.op],
			  what(p, vat, buf, sizeof buf));
		goto out;
	}
	if ((rc = parse_string(p, &m.value)))
		goto out;
	if ((m.op == PD_MATCH_RE || m.op == PD_MATCH_NRE) && (rc = compile_re(p, vat, &m)))
		goto out;
	if (pd_grow((void **)&sel->m, &(size_t){sel->n}, sel->n + 1, sizeof *sel->m)) {
		rc = pd_errf(p->err, PD_ENOMEM, "out of memory");
		goto out;
	}
	sel->m[sel->n++] = m;
	return 0;
out:
	matcher_free(&m);
	return rc;
}

/* The index of the profile type t[0..n) in pd_query_types, or an error at at. */
static int type_of(struct ps *p, size_t at, const char *t, size_t n, size_t *k)
{
	for (*k = 0; pd_query_types[*k]; (*k)++)
		if (strlen(pd_query_types[*k]) == n && !memcmp(pd_query_types[*k], t, n))
			return 0;
	if (n == 5 && !memcmp(t, "trace", 5))
		return perr(p, at, PD_EINVAL,
			    "profile type \"trace\" is not supported: profd stores pprof profiles only "
			    "(valid: cpu, heap, allocs, block, mutex, goroutine, threadcreate, other)");
	return perr(p, at, PD_EINVAL,
		    "unknown profile type \"%.*s\" (valid: cpu, heap, allocs, block, mutex, goroutine, threadcreate, other)",
		    (int)(n > 64 ? 64 : n), t);
}

/*
 * The matcher just parsed (the last, at at) names __name__: Prometheus' metric
 * name, here the profile type. {__name__="cpu"} is cpu{} (the matcher becomes
 * the type: the same store lookups and plans); other operators stay matchers
 * on the type (label_of). With a type before the braces it is an error, as
 * Prometheus' "metric name must not be set twice".
 */
static int name_matcher(struct ps *p, size_t at, bool outside, struct pd_selector *sel)
{
	struct pd_matcher *m = &sel->m[sel->n - 1];
	if (strcmp(m->name, "__name__"))
		return 0;
	if (outside)
		return perr(p, at, PD_EINVAL,
			    "the profile type is given twice: \"%s\" before the braces and __name__ %s \"%.64s\" "
			    "(__name__ is the type: give one)",
			    sel->type, op_names[m->op], m->value);
	size_t k;
	if (m->op != PD_MATCH_EQ || (sel->type && strcmp(sel->type, m->value)))
		return 0; /* a regex, a negation, a second type (matches nothing, as in Prometheus) */
	int rc = type_of(p, at, m->value, strlen(m->value), &k);
	if (rc)
		return rc;
	if (!sel->type && !(sel->type = strdup(pd_query_types[k])))
		return pd_errf(p->err, PD_ENOMEM, "out of memory");
	matcher_free(m);
	sel->n--;
	return 0;
}

int pd_selector_parse(const char *s, struct pd_selector *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct ps p = {s ? s : "", 0, err};
	char buf[24];
	size_t len = strlen(p.s);
	if (len > PD_QUERY_MAX_LEN)
		return pd_errf(err, PD_ELIMIT, "bad query: %zu bytes, over the limit of %d", len, PD_QUERY_MAX_LEN);
	int rc = 0;
	skip_ws(&p);
	if (!p.s[p.i])
		return perr(&p, p.i, PD_EINVAL, "empty query (want e.g. cpu{service=\"auth\"})");
	if (is_alpha(p.s[p.i])) {
		size_t at = p.i, e = p.i;
		while (is_alpha(p.s[e]) || is_digit(p.s[e]) || p.s[e] == ':')
			e++;
		size_t k;
		if ((rc = type_of(&p, at, p.s + at, e - at, &k)))
			return rc;
		if (!(out->type = strdup(pd_query_types[k])))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		p.i = e;
		skip_ws(&p);
		if (!p.s[p.i])
			return 0;
	}
	if (p.s[p.i] != '{') {
		rc = perr(&p, p.i, PD_EINVAL, "expected %s, got %s", out->type ? "'{' or end of query" : "a profile type or '{'",
			  what(&p, p.i, buf, sizeof buf));
		goto out;
	}
	p.i++;
	bool outside = out->type != NULL;
	for (;;) {
		skip_ws(&p);
		if (p.s[p.i] == '}')
			break;
		size_t at = p.i;
		if ((rc = parse_matcher(&p, out)) || (rc = name_matcher(&p, at, outside, out)))
			goto out;
		skip_ws(&p);
		if (p.s[p.i] == ',') {
			p.i++;
			continue;
		}
		if (p.s[p.i] == '}')
			break;
		rc = perr(&p, p.i, PD_EINVAL, "expected ',' or '}' after a matcher, got %s", what(&p, p.i, buf, sizeof buf));
		goto out;
	}
	p.i++; /* '}' */
	skip_ws(&p);
	if (p.s[p.i])
		rc = perr(&p, p.i, PD_EINVAL, "unexpected %s after '}'", what(&p, p.i, buf, sizeof buf));
out:
	if (rc)
		pd_selector_free(out);
	return rc;
}

/* ---- matching -------------------------------------------------------------------- */

static bool match1(const struct pd_matcher *m, const char *v)
{
	switch (m->op) {
	case PD_MATCH_EQ: return strcmp(v, m->value) == 0;
	case PD_MATCH_NE: return strcmp(v, m->value) != 0;
	/* a regex that hit a match bound reads as matching nothing; the
	 * selection fails afterwards (pd_selector_check) */
	case PD_MATCH_RE: return pd_regex_match(m->re, v, strlen(v)) == 1;
	default: return pd_regex_match(m->re, v, strlen(v)) == 0;
	}
}

static const char *label_of(const struct pd_profile_meta *m, const char *name)
{
	if (!strcmp(name, "service"))
		return m->service;
	if (!strcmp(name, "__name__")) /* Prometheus' metric name: the type */
		return m->type;
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, name))
			return m->labels[i].value;
	return "";
}

/* A profile may carry a label twice (API v0 keeps duplicate keys, as
 * profefe): = and =~ hold if one of its values matches, != and !~ if none
 * does (env!="prod" is false for env=prod,env=dev), as the store's index and
 * API v0's labels= read them. */
static bool match_label(const struct pd_matcher *mt, const struct pd_profile_meta *m)
{
	const char *v = label_of(m, mt->name);
	if (!strcmp(mt->name, "service") || !strcmp(mt->name, "__name__"))
		return match1(mt, v);
	bool pos = mt->op == PD_MATCH_EQ || mt->op == PD_MATCH_RE, seen = false;
	for (size_t i = 0; i < m->nlabels; i++) {
		if (strcmp(m->labels[i].key, mt->name))
			continue;
		seen = true;
		if (match1(mt, m->labels[i].value) == pos)
			return pos;
	}
	return seen ? !pos : match1(mt, v);
}

bool pd_selector_match(const struct pd_selector *sel, const struct pd_profile_meta *m)
{
	if (sel->type && strcmp(sel->type, m->type))
		return false;
	for (size_t i = 0; i < sel->n; i++)
		if (!match_label(&sel->m[i], m))
			return false;
	return true;
}

bool pd_selector_match_service(const struct pd_selector *sel, const char *service)
{
	for (size_t i = 0; i < sel->n; i++)
		if (!strcmp(sel->m[i].name, "service") && !match1(&sel->m[i], service))
			return false;
	return true;
}

int pd_selector_check(const struct pd_selector *sel, struct pd_err *err)
{
	for (size_t i = 0; i < sel->n; i++)
		if (pd_regex_limited(sel->m[i].re))
			return pd_errf(err, PD_EINVAL,
				       "bad query: regex \"%.100s\" of label \"%.100s\" hit the match limit (%d steps, "
				       "depth %d, %d KiB) on a value: simplify it (nested repetitions like (a+)+ backtrack "
				       "exponentially)",
				       sel->m[i].value, sel->m[i].name, PD_QUERY_RE_MATCH_LIMIT, PD_QUERY_RE_DEPTH_LIMIT,
				       PD_QUERY_RE_HEAP_LIMIT_KB);
	return 0;
}

const char *pd_selector_service(const struct pd_selector *sel)
{
	for (size_t i = 0; i < sel->n; i++)
		if (sel->m[i].op == PD_MATCH_EQ && sel->m[i].value[0] && !strcmp(sel->m[i].name, "service"))
			return sel->m[i].value;
	return NULL;
}

/* Append s to buf[*o..n) escaped as a Go double-quoted string. */
static void put_quoted(char *buf, size_t n, size_t *o, const char *s)
{
	char t[8];
	for (const char *c = s;; c++) {
		const char *piece = t;
		if (!*c)
			piece = "\"";
		else if (*c == '"' || *c == '\\')
			snprintf(t, sizeof t, "\\%c", *c);
		else if (*c == '\n')
			piece = "\\n";
		else if ((unsigned char)*c < 0x20 || *c == 0x7f)
			snprintf(t, sizeof t, "\\x%02x", (unsigned char)*c);
		else
			t[0] = *c, t[1] = 0;
		size_t l = strlen(piece);
		if (*o + l < n) {
			memcpy(buf + *o, piece, l);
			*o += l;
			buf[*o] = 0;
		}
		if (!*c)
			return;
	}
}

const char *pd_selector_format(const struct pd_selector *sel, char *buf, size_t n)
{
	if (!n)
		return buf;
	/* a type with __name__ matchers left ({__name__="cpu",__name__!~"x"}) is
	 * written as the first of them: cpu{__name__!~"x"} would not parse */
	bool inside = false;
	for (size_t i = 0; sel->type && i < sel->n; i++)
		inside |= !strcmp(sel->m[i].name, "__name__");
	size_t o = (size_t)snprintf(buf, n, "%s{", sel->type && !inside ? sel->type : "");
	if (o >= n)
		return buf;
	if (inside) {
		int w = snprintf(buf + o, n - o, "__name__=\"%s\"%s", sel->type, sel->n ? "," : "");
		o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
	}
	for (size_t i = 0; i < sel->n; i++) {
		const struct pd_matcher *m = &sel->m[i];
		bool plain = is_alpha(m->name[0]);
		for (const char *c = m->name; plain && *c; c++)
			plain = is_name(*c);
		if (i && o + 1 < n)
			buf[o++] = ',', buf[o] = 0;
		if (plain) {
			int w = snprintf(buf + o, n - o, "%s", m->name);
			o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
		} else {
			if (o + 1 < n)
				buf[o++] = '"', buf[o] = 0;
			put_quoted(buf, n, &o, m->name);
		}
		int w = snprintf(buf + o, n - o, "%s\"", op_names[m->op]);
		o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
		put_quoted(buf, n, &o, m->value);
	}
	if (o + 1 < n)
		buf[o++] = '}', buf[o] = 0;
	return buf;
}

/* ---- selection ------------------------------------------------------------------- */

int pd_meta_copy(struct pd_profile_meta *dst, const struct pd_profile_meta *src)
{
	*dst = *src;
	dst->labels = NULL;
	dst->nlabels = 0;
	if (!src->nlabels)
		return 0;
	struct pd_kv *l = calloc(src->nlabels, sizeof *l);
	if (!l)
		return PD_ENOMEM;
	dst->labels = l;
	for (size_t i = 0; i < src->nlabels; i++) {
		l[i].key = strdup(src->labels[i].key);
		l[i].value = strdup(src->labels[i].value);
		dst->nlabels = i + 1;
		if (!l[i].key || !l[i].value) {
			pd_meta_clear(dst);
			return PD_ENOMEM;
		}
	}
	return 0;
}

void pd_query_metas_free(struct pd_profile_meta *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		pd_meta_clear(&v[i]);
	free(v);
}

struct each_ctx {
	const struct pd_selector *sel;
	pd_meta_fn fn;
	void *ctx;
	int rc; /* fn's non-zero return */
};

/* each_one's return when a regex hit its match bound (not one of fn's) */
#define EACH_LIMITED 1

static int each_one(void *ctx, const struct pd_profile_meta *m)
{
	struct each_ctx *c = ctx;
	if (!pd_selector_match(c->sel, m)) {
		struct pd_err e;
		return pd_selector_check(c->sel, &e) ? EACH_LIMITED : 0;
	}
	return c->rc = c->fn(c->ctx, m);
}

int pd_query_each(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, pd_meta_fn fn,
		  void *ctx, struct pd_err *err)
{
	char **svcs = NULL;
	size_t nsvc = 0;
	struct pd_kv *kv = NULL;
	int rc = 0;
	if (from_ns > to_ns)
		return 0;
	const char *one = pd_selector_service(sel);
	if (one) {
		if (!(svcs = calloc(1, sizeof *svcs)) || !(svcs[0] = strdup(one))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		nsvc = 1;
	} else if ((rc = pd_store_services(st, &svcs, &nsvc, err))) {
		goto out;
	}
	/* exact non-empty label matchers go to the store's index */
	if (!(kv = calloc(sel->n + 1, sizeof *kv))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	size_t nkv = 0;
	for (size_t i = 0; i < sel->n; i++)
		if (sel->m[i].op == PD_MATCH_EQ && sel->m[i].value[0] && strcmp(sel->m[i].name, "service") &&
		    strcmp(sel->m[i].name, "__name__")) {
			kv[nkv].key = sel->m[i].name;
			kv[nkv].value = sel->m[i].value;
			nkv++;
		}
	/* the services the selector allows, found in turn (at once where the
	 * store can: pd_store_find_services) */
	size_t nm = 0;
	for (size_t i = 0; i < nsvc && !rc; i++) {
		char *sv = svcs[i];
		svcs[i] = NULL;
		if (pd_selector_match_service(sel, sv))
			svcs[nm++] = sv;
		else {
			free(sv);
			rc = pd_selector_check(sel, err);
		}
	}
	struct each_ctx ec = {sel, fn, ctx, 0};
	if (!rc && nm) {
		struct pd_store_query q = {NULL, sel->type, kv, nkv, from_ns, to_ns, 0};
		rc = pd_store_find_services(st, (const char *const *)svcs, nm, &q, each_one, &ec, err);
		if (rc && !ec.rc && pd_selector_check(sel, err))
			rc = PD_EINVAL;
	}
out:
	for (size_t i = 0; svcs && i < nsvc; i++)
		free(svcs[i]);
	free(svcs);
	free(kv);
	return rc;
}

struct sel_ctx {
	struct pd_profile_meta *v;
	size_t n, cap, max;
};

static int sel_add(void *ctx, const struct pd_profile_meta *m)
{
	struct sel_ctx *c = ctx;
	if (c->max && c->n >= c->max)
		return PD_ELIMIT;
	if (pd_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v))
		return PD_ENOMEM;
	if (pd_meta_copy(&c->v[c->n], m))
		return PD_ENOMEM;
	c->n++;
	return 0;
}

static int meta_cmp(const void *a, const void *b)
{
	const struct pd_profile_meta *x = a, *y = b;
	if (x->created_ns != y->created_ns)
		return x->created_ns < y->created_ns ? -1 : 1;
	int c = strcmp(x->service, y->service);
	return c ? c : strcmp(x->id, y->id);
}

int pd_query_select(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, size_t max,
		    struct pd_profile_meta **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	struct sel_ctx c = {NULL, 0, 0, max};
	int rc = pd_query_each(st, sel, from_ns, to_ns, sel_add, &c, err);
	if (rc == PD_ELIMIT)
		rc = pd_errf(err, PD_ELIMIT,
			     "more than %zu profiles match: over the limit of profiles per query (%zu); "
			     "narrow the selector or the time range",
			     max, max);
	else if (rc == PD_ENOMEM)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	if (rc) {
		pd_query_metas_free(c.v, c.n);
		return rc;
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof *c.v, meta_cmp);
	*out = c.v;
	*n = c.n;
	return 0;
}
