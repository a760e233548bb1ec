/*
 * params.c — API v0 request parameters and JSON envelope (see params.h and
 * docs/api.md).
 *
 * Where profefe's behaviour comes from Go's standard library, this file
 * re-implements that library function rather than something similar:
 * strings.TrimSpace (Unicode spaces), url.QueryUnescape, time.ParseDuration,
 * strconv.Atoi, the layout 2006-01-02T15:04:05 as time.Parse reads it (1- or
 * 2-digit hour, optional fraction), and encoding/json's string escaping with
 * SetEscapeHTML(true) and float formatting. Each is a small static function
 * named after its Go counterpart, so the two can be compared line by line.
 *
 * Invariants: every value we read is capped (PD_API_MAX_PARAM_LEN); every
 * message quotes user input Go-style and truncated, so it fits pd_err.msg;
 * on error every output struct is left zeroed and nothing leaks.
 */
#include "params.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S INT64_C(1000000000)
/* Longest piece of user input quoted in an error message. */
#define QUOTE_MAX 64
/* Cap of an encoded JSON document. */
#define JSON_MAX ((size_t)256 << 20)

/* ---- UTF-8 and Go's strings.TrimSpace -------------------------------------- */

/* Go's utf8.DecodeRune: the rune and its size; an invalid or truncated
 * sequence is (0xFFFD, 1). n > 0. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *r)
{
	unsigned c = s[0];
	if (c < 0x80) {
		*r = c;
		return 1;
	}
	size_t need;
	unsigned lo = 0x80, hi = 0xBF;
	uint32_t v;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 1;
		v = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		v = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		v = c & 0x07;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F; /* <= U+10FFFF */
	} else {
		goto bad;
	}
	if (n < need + 1)
		goto bad;
	for (size_t i = 1; i <= need; i++) {
		unsigned b = s[i];
		if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
			goto bad;
		v = v << 6 | (b & 0x3F);
	}
	*r = v;
	return need + 1;
bad:
	*r = 0xFFFD;
	return 1;
}

/* unicode.IsSpace */
static bool go_isspace(uint32_t r)
{
	switch (r) {
	case '\t': case '\n': case '\v': case '\f': case '\r': case ' ': case 0x85: case 0xA0:
	case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
		return true;
	default:
		return r >= 0x2000 && r <= 0x200A;
	}
}

/* strings.TrimSpace on s[0..*n): returns the new start, updates *n. */
static const char *trim_space(const char *s, size_t *n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t b = 0, e = *n;
	while (b < e) {
		uint32_t r;
		size_t k = utf8_decode(p + b, e - b, &r);
		if (!go_isspace(r))
			break;
		b += k;
	}
	while (e > b) {
		/* find the start of the last rune (at most 4 bytes back) */
		size_t st = e - 1;
		while (st > b && e - st < 4 && (p[st] & 0xC0) == 0x80)
			st--;
		uint32_t r;
		size_t k = utf8_decode(p + st, e - st, &r);
		if (st + k != e || !go_isspace(r)) /* st + k != e: the last byte is invalid */
			break;
		e = st;
	}
	*n = e - b;
	return s + b;
}

/* ---- quoting user input in messages (Go's %q, truncated) ------------------- */

/* Quote s[0..n) as Go's strconv.Quote does for the cases that matter here
 * (escapes, control bytes, invalid UTF-8); at most QUOTE_MAX input bytes,
 * then "..." after the closing quote. Returns buf. */
static const char *quote(const char *s, size_t n, char *buf, size_t bufn)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, lim = n > QUOTE_MAX ? QUOTE_MAX : n;
	/* worst case 4 output bytes per input byte + quotes + "..." + NUL */
	PD_ASSERT(bufn >= 4 * QUOTE_MAX + 8);
	buf[o++] = '"';
	for (size_t i = 0; i < lim;) {
		const unsigned char *p = (const unsigned char *)s + i;
		uint32_t r;
		size_t k = utf8_decode(p, n - i, &r);
		if (k > lim - i) /* a rune cut by the limit */
			break;
		if (r == 0xFFFD && k == 1) {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[p[0] >> 4];
			buf[o++] = hex[p[0] & 15];
		} else if (r < 0x20 || r == 0x7F) {
			const char *esc = NULL;
			switch (r) {
			case '\a': esc = "\\a"; break;
			case '\b': esc = "\\b"; break;
			case '\f': esc = "\\f"; break;
			case '\n': esc = "\\n"; break;
			case '\r': esc = "\\r"; break;
			case '\t': esc = "\\t"; break;
			case '\v': esc = "\\v"; break;
			}
			if (esc) {
				buf[o++] = esc[0];
				buf[o++] = esc[1];
			} else {
				buf[o++] = '\\';
				buf[o++] = 'x';
				buf[o++] = hex[r >> 4];
				buf[o++] = hex[r & 15];
			}
		} else if (r == '"' || r == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)r;
		} else {
			memcpy(buf + o, p, k);
			o += k;
		}
		i += k;
	}
	buf[o++] = '"';
	if (n > lim) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = 0;
	return buf;
}
#define QBUF (4 * QUOTE_MAX + 8)

/* ---- profile types ------------------------------------------------------- */

static const struct {
	const char *name;
	int type;
} types[] = {
	{"cpu", PD_API_TYPE_CPU},
	{"heap", PD_API_TYPE_HEAP},
	{"block", PD_API_TYPE_BLOCK},
	{"mutex", PD_API_TYPE_MUTEX},
	{"goroutine", PD_API_TYPE_GOROUTINE},
	{"threadcreate", PD_API_TYPE_THREADCREATE},
	{"allocs", PD_API_TYPE_ALLOCS},
	{"other", PD_API_TYPE_OTHER},
	{"trace", PD_API_TYPE_TRACE},
};
/* What a client may actually use (trace is parsed, then refused). */
#define VALID_TYPES "cpu, heap, block, mutex, goroutine, threadcreate, allocs, other"

const char *pd_api_type_name(int type)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (types[i].type == type)
			return types[i].name;
	return NULL;
}

static int parse_type_n(const char *s, size_t n, int *type, struct pd_err *err)
{
	char q[QBUF];
	const char *t = trim_space(s, &n);
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strlen(types[i].name) == n && memcmp(types[i].name, t, n) == 0) {
			*type = types[i].type;
			return 0;
		}
	return pd_errf(err, PD_EINVAL, "unknown profile type %s (valid: " VALID_TYPES ")",
		       quote(s, strlen(s), q, sizeof q));
}

int pd_api_parse_type(const char *s, int *type, struct pd_err *err)
{
	*type = PD_API_TYPE_ANY;
	if (!s)
		s = "";
	return parse_type_n(s, strlen(s), type, err);
}

/* ---- url.QueryUnescape ----------------------------------------------------- */

static int unhex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pd_api_query_unescape(const char *src, size_t n, char *dst, size_t *dlen, struct pd_err *err)
{
	char q[QBUF];
	/* First pass as Go: the first bad escape is the error, quoting at most
	 * three bytes from the '%'. */
	for (size_t i = 0; i < n; i++) {
		if (src[i] != '%')
			continue;
		if (i + 2 >= n || unhex((unsigned char)src[i + 1]) < 0 || unhex((unsigned char)src[i + 2]) < 0) {
			size_t k = n - i > 3 ? 3 : n - i;
			return pd_errf(err, PD_EINVAL, "invalid URL escape %s", quote(src + i, k, q, sizeof q));
		}
		if (src[i + 1] == '0' && src[i + 2] == '0')
			return pd_errf(err, PD_EINVAL, "%%00 (a NUL byte) is not allowed");
		i += 2;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (src[i] == '%') {
			dst[o++] = (char)(unhex((unsigned char)src[i + 1]) << 4 | unhex((unsigned char)src[i + 2]));
			i += 2;
		} else if (src[i] == '+') {
			dst[o++] = ' ';
		} else {
			dst[o++] = src[i];
		}
	}
	dst[o] = 0;
	if (dlen)
		*dlen = o;
	return 0;
}

/* ---- labels ------------------------------------------------------------------ */

/* Stable insertion sort by key, bytewise as Go's string <; n <= PD_API_MAX_LABELS. */
static void sort_labels(struct pd_api_label *l, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct pd_api_label x = l[i];
		size_t j = i;
		for (; j > 0 && strcmp(l[j - 1].key, x.key) > 0; j--)
			l[j] = l[j - 1];
		l[j] = x;
	}
}

void pd_api_labels_free(struct pd_api_label *labels) { free(labels); }

/* A label's key or value after its second decode: UTF-8, as every parameter
 * is after the first (server.c), or "%25ff" would store a byte that the JSON
 * answers can only show as U+FFFD, a label no client can copy back. */
static int utf8_checked(const char *what, const char *s, size_t n, struct pd_err *err)
{
	size_t bad;
	if (pd_utf8_valid(s, n, &bad))
		return 0;
	return pd_errf(err, PD_EINVAL, "a label %s is not valid UTF-8 once decoded (byte %zu of it)", what, bad);
}

int pd_api_parse_labels(const char *s, struct pd_api_label **out, size_t *n, struct pd_err *err)
{
	char q[QBUF];
	struct pd_api_label *l = NULL;
	size_t nl = 0;
	int rc = 0;
	*out = NULL;
	*n = 0;
	if (!s || !*s)
		return 0;
	size_t len = strlen(s);
	if (len > PD_API_MAX_PARAM_LEN)
		return pd_errf(err, PD_ELIMIT, "bad \"labels\": %zu bytes, over the %d-byte limit", len,
			       PD_API_MAX_PARAM_LEN);
	size_t chunks = 1;
	for (size_t i = 0; i < len; i++)
		chunks += s[i] == ',';
	/* One block: the array, then every key and value NUL-terminated.
	 * Decoded text is never longer than its source. */
	size_t arr = chunks * sizeof *l;
	l = malloc(arr + len + 2 * chunks);
	if (!l)
		return pd_errf(err, PD_ENOMEM, "bad \"labels\": out of memory");
	char *str = (char *)l + arr;
	const char *p = s, *end = s + len;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *ce = comma ? comma : end;
		const char *eq = memchr(p, '=', (size_t)(ce - p));
		size_t kn = (size_t)((eq ? eq : ce) - p);
		const char *k = trim_space(p, &kn);
		size_t dl;
		char *key = str;
		if ((rc = pd_api_query_unescape(k, kn, key, &dl, err)) ||
		    (dl > 0 && (rc = utf8_checked("key", key, dl, err))))
			goto bad;
		if (dl > 0) {
			str += dl + 1;
			char *val = str;
			if (eq) {
				size_t vn = (size_t)(ce - eq - 1);
				const char *v = trim_space(eq + 1, &vn);
				if ((rc = pd_api_query_unescape(v, vn, val, &dl, err)) ||
				    (rc = utf8_checked("value", val, dl, err)))
					goto bad;
			} else {
				val[0] = 0;
				dl = 0;
			}
			str += dl + 1;
			if (nl == PD_API_MAX_LABELS) {
				rc = pd_errf(err, PD_ELIMIT, "more than %d labels", PD_API_MAX_LABELS);
				goto bad;
			}
			l[nl].key = key;
			l[nl].value = val;
			nl++;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	if (nl == 0) {
		free(l);
		return 0;
	}
	sort_labels(l, nl);
	*out = l;
	*n = nl;
	return 0;
bad:
	free(l);
	pd_err_prefix(err, "bad \"labels\" %s", quote(s, len, q, sizeof q));
	return rc;
}

/* ---- time.ParseDuration ---------------------------------------------------- */

static int dur_err(struct pd_err *err, const char *what, const char *s, size_t n)
{
	char q[QBUF];
	return pd_errf(err, PD_EINVAL, "time: %s duration %s", what, quote(s, n, q, sizeof q));
}

int pd_api_parse_duration(const char *orig, size_t on, int64_t *out_ns, struct pd_err *err)
{
	static const struct {
		const char *u;
		uint64_t ns;
	} units[] = {
		{"ns", 1},
		{"us", 1000},
		{"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
		{"\xce\xbcs", 1000}, /* U+03BC Greek mu */
		{"ms", 1000000},
		{"s", 1000000000},
		{"m", UINT64_C(60) * 1000000000},
		{"h", UINT64_C(3600) * 1000000000},
	};
	const uint64_t lim = UINT64_C(1) << 63;
	const char *s = orig, *e = orig + on;
	uint64_t d = 0;
	bool neg = false;
	*out_ns = 0;
	if (s < e && (*s == '-' || *s == '+')) {
		neg = *s == '-';
		s++;
	}
	if (e - s == 1 && *s == '0')
		return 0;
	if (s == e)
		return dur_err(err, "invalid", orig, on);
	while (s < e) {
		uint64_t v = 0, f = 0;
		double scale = 1;
		if (!(*s == '.' || (*s >= '0' && *s <= '9')))
			return dur_err(err, "invalid", orig, on);
		/* leadingInt */
		const char *st = s;
		for (; s < e && *s >= '0' && *s <= '9'; s++) {
			if (v > lim / 10)
				return dur_err(err, "invalid", orig, on);
			v = v * 10 + (uint64_t)(*s - '0');
			if (v > lim)
				return dur_err(err, "invalid", orig, on);
		}
		bool pre = s != st, post = false;
		if (s < e && *s == '.') {
			s++;
			st = s;
			bool overflow = false;
			/* leadingFraction */
			for (; s < e && *s >= '0' && *s <= '9'; s++) {
				if (overflow)
					continue;
				if (f > (lim - 1) / 10) {
					overflow = true;
					continue;
				}
				uint64_t y = f * 10 + (uint64_t)(*s - '0');
				if (y > lim) {
					overflow = true;
					continue;
				}
				f = y;
				scale *= 10;
			}
			post = s != st;
		}
		if (!pre && !post)
			return dur_err(err, "invalid", orig, on);
		st = s;
		while (s < e && !(*s == '.' || (*s >= '0' && *s <= '9')))
			s++;
		if (s == st)
			return dur_err(err, "missing unit in", orig, on);
		uint64_t unit = 0;
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
			if (strlen(units[i].u) == (size_t)(s - st) && memcmp(units[i].u, st, (size_t)(s - st)) == 0)
				unit = units[i].ns;
		if (!unit) {
			char q1[QBUF], q2[QBUF];
			return pd_errf(err, PD_EINVAL, "time: unknown unit %s in duration %s",
				       quote(st, (size_t)(s - st), q1, sizeof q1), quote(orig, on, q2, sizeof q2));
		}
		if (v > lim / unit)
			return dur_err(err, "invalid", orig, on);
		v *= unit;
		if (f > 0) {
			/* float64 as Go: nanosecond-accurate for fractions of hours */
			v += (uint64_t)((double)f * ((double)unit / scale));
			if (v > lim)
				return dur_err(err, "invalid", orig, on);
		}
		d += v;
		if (d > lim)
			return dur_err(err, "invalid", orig, on);
	}
	if (neg) {
		*out_ns = d == lim ? INT64_MIN : -(int64_t)d;
		return 0;
	}
	if (d > lim - 1)
		return dur_err(err, "invalid", orig, on);
	*out_ns = (int64_t)d;
	return 0;
}

/* ---- calendar ---------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int days_in(int64_t y, int m)
{
	static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	if (m == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		return 29;
	return dm[m - 1];
}

const char *pd_api_format_time(int64_t ns, char *buf, size_t n)
{
	int64_t secs = ns / NS_PER_S;
	if (ns % NS_PER_S < 0)
		secs--; /* Go's Truncate(time.Second) floors */
	int64_t days = secs / 86400, rem = secs % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	int64_t y;
	int m, d;
	civil_from_days(days, &y, &m, &d);
	snprintf(buf, n, "%04" PRId64 "-%02d-%02dT%02d:%02d:%02dZ", y, m, d, (int)(rem / 3600), (int)(rem / 60 % 60),
		 (int)(rem % 60));
	return buf;
}

/* ---- times ------------------------------------------------------------------- */

static bool isdig(const char *s, const char *e) { return s < e && *s >= '0' && *s <= '9'; }

/* Exactly k digits. */
static bool digits(const char **s, const char *e, int k, int *v)
{
	int x = 0;
	for (int i = 0; i < k; i++) {
		if (!isdig(*s, e))
			return false;
		x = x * 10 + (*(*s)++ - '0');
	}
	*v = x;
	return true;
}

/* Fraction digits after '.', Go's parseNanoseconds: extra digits dropped. */
static int64_t fraction(const char **s, const char *e)
{
	int64_t ns = 0;
	int k = 0;
	for (; isdig(*s, e); (*s)++, k++)
		if (k < 9)
			ns = ns * 10 + (**s - '0');
	for (; k < 9; k++)
		ns *= 10;
	return ns;
}

static int secs_to_ns(int64_t secs, int64_t frac, int64_t *out)
{
	int64_t ns;
	if (__builtin_mul_overflow(secs, NS_PER_S, &ns) || __builtin_add_overflow(ns, frac, &ns))
		return -1;
	*out = ns;
	return 0;
}

#define RANGE_MSG "out of range (profd times span 1677-09-21T00:12:44Z to 2262-04-11T23:47:16Z)"
/* The same for a time the collector takes (pd_api_parse_stored_time): the
 * span it would say next for 1800-01-01, not one it cannot store. */
#define STORED_SPAN                                                                                                    \
	"profd stores times from 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z (a profile id holds 32 bits of seconds)"
#define STORED_RANGE_MSG "out of range: " STORED_SPAN

/*
 * 2006-01-02T15:04:05[.frac][Z|±hh:mm]: the first form is profefe's layout as
 * Go's time.Parse reads it (hour may have 1 digit; a fraction is accepted),
 * the others RFC3339. why: the reason after 'time in unsupported format "v"'.
 */
static int parse_datetime(const char *s, const char *e, int64_t *out, const char **why)
{
	int year, mon, day, hour, min, sec;
	*why = "";
	if (!digits(&s, e, 4, &year) || s == e || *s++ != '-' || !digits(&s, e, 2, &mon))
		return -1;
	if (mon < 1 || mon > 12)
		return *why = ": month out of range", -1;
	if (s == e || *s++ != '-' || !digits(&s, e, 2, &day) || s == e || *s++ != 'T')
		return -1;
	if (!isdig(s, e))
		return -1;
	hour = *s++ - '0';
	if (isdig(s, e))
		hour = hour * 10 + (*s++ - '0');
	if (hour > 23)
		return *why = ": hour out of range", -1;
	if (s == e || *s++ != ':' || !digits(&s, e, 2, &min))
		return -1;
	if (min > 59)
		return *why = ": minute out of range", -1;
	if (s == e || *s++ != ':' || !digits(&s, e, 2, &sec))
		return -1;
	if (sec > 59)
		return *why = ": second out of range", -1;
	int64_t frac = 0;
	if (s < e && *s == '.' && isdig(s + 1, e)) {
		s++;
		frac = fraction(&s, e);
	}
	int off = 0;
	if (s < e && *s == 'Z') {
		s++;
	} else if (s < e && (*s == '+' || *s == '-')) {
		int sign = *s++ == '-' ? -1 : 1, oh, om;
		if (!digits(&s, e, 2, &oh) || s == e || *s++ != ':' || !digits(&s, e, 2, &om))
			return -1;
		if (oh > 23 || om > 59)
			return *why = ": time zone offset out of range", -1;
		off = sign * (oh * 3600 + om * 60);
	}
	if (s != e && *s == ' ' && isdig(s + 1, e)) /* a '+' sent unescaped: 02+02:00 */
		return *why = ": extra text (a '+' in a URL means a space: write the offset's '+' as %2B)", -1;
	if (s != e)
		return *why = ": extra text", -1;
	if (day < 1 || day > days_in(year, mon))
		return *why = ": day out of range", -1;
	int64_t secs = days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec - off;
	if (secs_to_ns(secs, frac, out))
		return *why = NULL, -1; /* NULL: out of range */
	return 0;
}

/* range: what to say of a time beyond int64 nanoseconds */
static int parse_time(const char *name, const char *v, int64_t now_ns, int64_t *out_ns, const char *range,
		      struct pd_err *err)
{
	char q[QBUF], q2[QBUF];
	struct pd_err derr = {0, ""};
	size_t n = v ? strlen(v) : 0;
	*out_ns = 0;
	if (!v)
		v = "";
	if (n > PD_API_MAX_PARAM_LEN)
		return pd_errf(err, PD_ELIMIT, "bad \"%s\" timestamp: %zu bytes, over the %d-byte limit", name, n,
			       PD_API_MAX_PARAM_LEN);
	const char *s = trim_space(v, &n), *e = s + n;
	quote(v, strlen(v), q, sizeof q);

	/* relative: now, now-1h, now+1h, -1h, +1h */
	bool is_now = n >= 3 && memcmp(s, "now", 3) == 0;
	if (is_now || (n > 0 && (*s == '-' || *s == '+'))) {
		const char *d = is_now ? s + 3 : s;
		int64_t dur = 0, t;
		if (is_now && d < e && *d != '-' && *d != '+') {
			if (*d == ' ')
				return pd_errf(err, PD_EINVAL,
					       "bad \"%s\" timestamp %s: time in unsupported format %s ('+' in a URL "
					       "means a space: write now%%2B1h)", name, q, q);
			goto unsupported;
		}
		if (d < e && pd_api_parse_duration(d, (size_t)(e - d), &dur, &derr))
			return pd_errf(err, PD_EINVAL, "bad \"%s\" timestamp %s: %s", name, q, derr.msg);
		if (__builtin_add_overflow(now_ns, dur, &t))
			return pd_errf(err, PD_EINVAL, "bad \"%s\" timestamp %s: %s", name, q, range);
		*out_ns = t;
		return 0;
	}

	/* unix seconds: digits[.digits] */
	const char *p = s;
	while (isdig(p, e))
		p++;
	if (p > s && (p == e || (*p == '.' && isdig(p + 1, e)))) {
		const char *f = p;
		int64_t secs = 0, frac = 0;
		bool big = false;
		for (const char *c = s; c < p; c++) {
			if (secs > (INT64_MAX - 9) / 10)
				big = true;
			else
				secs = secs * 10 + (*c - '0');
		}
		if (f < e) {
			f++;
			frac = fraction(&f, e);
		}
		if (f == e) {
			if (big || secs_to_ns(secs, frac, out_ns))
				return pd_errf(err, PD_EINVAL,
					       "bad \"%s\" timestamp %s: unix time %s; send seconds, not milliseconds",
					       name, q, range);
			return 0;
		}
	}

	/* 2006-01-02T15:04:05 and RFC3339 */
	const char *why;
	if (n >= 4 && isdig(s, e) && isdig(s + 1, e) && isdig(s + 2, e) && isdig(s + 3, e) && n > 4 && s[4] == '-') {
		if (parse_datetime(s, e, out_ns, &why) == 0)
			return 0;
		if (!why)
			return pd_errf(err, PD_EINVAL, "bad \"%s\" timestamp %s: %s", name, q, range);
		if (*why)
			return pd_errf(err, PD_EINVAL, "bad \"%s\" timestamp %s: time in unsupported format %s%s", name,
				       q, q, why);
		goto unsupported;
	}

	/* a bare duration: say how to make it relative */
	int64_t dur;
	if (n > 0 && pd_api_parse_duration(s, n, &dur, NULL) == 0) {
		quote(s, n, q2, sizeof q2);
		return pd_errf(err, PD_EINVAL,
			       "bad \"%s\" timestamp %s: a relative time needs \"now\" or a sign: write now-%.*s "
			       "(past) or now%%2B%.*s (future)", name, q, (int)(n < 32 ? n : 32), s,
			       (int)(n < 32 ? n : 32), s);
	}
unsupported:
	*out_ns = 0;
	return pd_errf(err, PD_EINVAL,
		       "bad \"%s\" timestamp %s: time in unsupported format %s (want 2006-01-02T15:04:05 in UTC, "
		       "RFC3339, unix seconds or now-1h)", name, q, q);
}

int pd_api_parse_time(const char *name, const char *v, int64_t now_ns, int64_t *out_ns, struct pd_err *err)
{
	return parse_time(name, v, now_ns, out_ns, RANGE_MSG, err);
}

int pd_api_parse_stored_time(const char *name, const char *v, int64_t now_ns, int64_t *out_ns, struct pd_err *err)
{
	int rc = parse_time(name, v, now_ns, out_ns, STORED_RANGE_MSG, err);
	if (rc || (*out_ns >= PD_TIME_MIN_NS && *out_ns <= PD_TIME_MAX_NS))
		return rc;
	char q[QBUF];
	quote(v, strlen(v), q, sizeof q);
	return pd_errf(err, PD_EINVAL,
		       "bad \"%s\" timestamp %s: %s: " STORED_SPAN, name, q,
		       *out_ns < PD_TIME_MIN_NS ? "before 1970-01-01T00:00:00Z" : "after 2106-02-07T06:28:15Z");
}

/* ---- strconv.Atoi ------------------------------------------------------------- */

/* Go's strconv.Atoi on a 64-bit int = ParseInt(s, 10, 0): optional sign,
 * then ParseUint's loop (a range error as soon as uint64 overflows, a
 * syntax error at the first non-digit), then the int64 range check. */
static int go_atoi(const char *s, int64_t *out, struct pd_err *err)
{
	char q[QBUF];
	const char *p = s;
	const uint64_t cutoff = UINT64_MAX / 10 + 1, min = UINT64_C(1) << 63;
	bool neg = false;
	uint64_t v = 0;
	*out = 0;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!*p)
		goto syntax;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			goto syntax;
		if (v >= cutoff)
			goto range;
		uint64_t v1 = v * 10 + (uint64_t)(*p - '0');
		if (v1 < v)
			goto range;
		v = v1;
	}
	if ((!neg && v >= min) || (neg && v > min))
		goto range;
	*out = neg ? (v == min ? INT64_MIN : -(int64_t)v) : (int64_t)v;
	return 0;
range:
	return pd_errf(err, PD_EINVAL, "strconv.Atoi: parsing %s: value out of range",
		       quote(s, strlen(s), q, sizeof q));
syntax:
	return pd_errf(err, PD_EINVAL, "strconv.Atoi: parsing %s: invalid syntax", quote(s, strlen(s), q, sizeof q));
}

/* ---- request parameters -------------------------------------------------------- */

const char *pd_api_kv_get(void *ctx, const char *key)
{
	const struct pd_api_kv *kv = ctx;
	for (size_t i = 0; i < kv->n; i++)
		if (kv->keys[i] && strcmp(kv->keys[i], key) == 0)
			return kv->vals[i] ? kv->vals[i] : "";
	return NULL;
}

/* The value of key, NULL if absent or empty (as Go's q.Get(k) == ""). */
static int get_param(pd_api_get_fn get, void *ctx, const char *key, const char **v, struct pd_err *err)
{
	const char *s = get(ctx, key);
	*v = NULL;
	if (!s || !*s)
		return 0;
	size_t n = strlen(s);
	if (n > PD_API_MAX_PARAM_LEN)
		return pd_errf(err, PD_ELIMIT, "bad request: \"%s\" is %zu bytes, over the %d-byte limit", key, n,
			       PD_API_MAX_PARAM_LEN);
	*v = s;
	return 0;
}

static int trace_refused(struct pd_err *err)
{
	return pd_errf(err, PD_EINVAL,
		       "bad request: profile type \"trace\" is not supported: profd stores pprof profiles only, "
		       "not Go execution traces (valid: " VALID_TYPES ")");
}

/* service, type, labels: the part GET and POST share. query: a read, where
 * "unknown" is every type, as absent: profefe's name of "no type", which
 * kube-profefe's client sends (kubectl profefe get profiles --profile-type
 * unknown, or any type it does not know) and `get profile-types` lists. */
static int parse_common(pd_api_get_fn get, void *ctx, bool query, char **service, int *type,
			struct pd_api_label **labels, size_t *nlabels, struct pd_err *err)
{
	const char *v;
	int rc;
	if ((rc = get_param(get, ctx, "service", &v, err)))
		return rc;
	if (!v)
		return pd_errf(err, PD_EINVAL, "bad request: missing \"service\"");
	if (!(*service = strdup(v)))
		return pd_errf(err, PD_ENOMEM, "out of memory");

	if ((rc = get_param(get, ctx, "type", &v, err)))
		return rc;
	size_t tn = v ? strlen(v) : 0;
	const char *t = v ? trim_space(v, &tn) : NULL;
	if (tn == 0 || (query && tn == 7 && !memcmp(t, "unknown", 7))) {
		*type = PD_API_TYPE_ANY;
	} else {
		if ((rc = pd_api_parse_type(v, type, err))) {
			pd_err_prefix(err, "bad request");
			return rc;
		}
		if (*type == PD_API_TYPE_TRACE)
			return trace_refused(err);
	}

	if ((rc = get_param(get, ctx, "labels", &v, err)))
		return rc;
	if ((rc = pd_api_parse_labels(v, labels, nlabels, err))) {
		pd_err_prefix(err, "bad request");
		return rc;
	}
	return 0;
}

void pd_api_query_free(struct pd_api_query *q)
{
	if (!q)
		return;
	free(q->service);
	pd_api_labels_free(q->labels);
	memset(q, 0, sizeof *q);
}

static int req_time(pd_api_get_fn get, void *ctx, const char *key, int64_t now_ns, bool *have, int64_t *out,
		    struct pd_err *err)
{
	const char *v;
	int rc;
	*have = false;
	if ((rc = get_param(get, ctx, key, &v, err)))
		return rc;
	if (!v)
		return 0;
	if ((rc = pd_api_parse_stored_time(key, v, now_ns, out, err))) {
		pd_err_prefix(err, "bad request");
		return rc;
	}
	*have = true;
	return 0;
}

int pd_api_parse_query(pd_api_get_fn get, void *ctx, int64_t now_ns, struct pd_api_query *q, struct pd_err *err)
{
	const char *v;
	bool have;
	int rc;
	memset(q, 0, sizeof *q);
	if ((rc = parse_common(get, ctx, true, &q->service, &q->type, &q->labels, &q->nlabels, err)))
		goto fail;
	if ((rc = req_time(get, ctx, "from", now_ns, &have, &q->from_ns, err)))
		goto fail;
	if (!have) {
		rc = pd_errf(err, PD_EINVAL, "bad request: missing \"from\"");
		goto fail;
	}
	if ((rc = req_time(get, ctx, "to", now_ns, &have, &q->to_ns, err)))
		goto fail;
	if (!have) {
		rc = pd_errf(err, PD_EINVAL, "bad request: missing \"to\"");
		goto fail;
	}
	if ((rc = get_param(get, ctx, "limit", &v, err)))
		goto fail;
	if (v) {
		char qs[QBUF];
		if ((rc = go_atoi(v, &q->limit, err))) {
			pd_err_prefix(err, "bad request: bad \"limit\" %s", quote(v, strlen(v), qs, sizeof qs));
			goto fail;
		}
		if (q->limit < 0) {
			rc = pd_errf(err, PD_EINVAL, "bad request: bad \"limit\" %s: must be >= 0 (0 = no limit)",
				     quote(v, strlen(v), qs, sizeof qs));
			goto fail;
		}
	}
	if (q->from_ns > q->to_ns) {
		char a[PD_API_TIME_BUFSZ], b[PD_API_TIME_BUFSZ];
		rc = pd_errf(err, PD_EINVAL, "bad request: \"from\" after \"to\" (from %s, to %s)",
			     pd_api_format_time(q->from_ns, a, sizeof a), pd_api_format_time(q->to_ns, b, sizeof b));
		goto fail;
	}
	return 0;
fail:
	pd_api_query_free(q);
	return rc;
}

void pd_api_post_free(struct pd_api_post *p)
{
	if (!p)
		return;
	free(p->service);
	pd_api_labels_free(p->labels);
	memset(p, 0, sizeof *p);
}

int pd_api_parse_post(pd_api_get_fn get, void *ctx, int64_t now_ns, struct pd_api_post *p, struct pd_err *err)
{
	int rc;
	memset(p, 0, sizeof *p);
	/* no type: the store infers it from the profile */
	if ((rc = parse_common(get, ctx, false, &p->service, &p->type, &p->labels, &p->nlabels, err)))
		goto fail;
	if ((rc = req_time(get, ctx, "created_at", now_ns, &p->has_created_at, &p->created_at_ns, err)))
		goto fail;
	return 0;
fail:
	pd_api_post_free(p);
	return rc;
}

int pd_api_http_status(int rc)
{
	switch (rc) {
	case PD_OK: return 200;
	case PD_EINVAL:
	case PD_EUSAGE:
	case PD_EEXPIRED:
	case PD_EINCOMPAT: return 400;
	case PD_ELIMIT: return 413;
	case PD_ENOTFOUND: return 404;
	case PD_EBUSY:
	case PD_EUNAVAIL: return 503;
	case PD_ENOSPC: return 507;
	default: return 500;
	}
}

/* ---- JSON as Go's json.Encoder writes it ------------------------------------------ */

struct enc {
	struct pd_buf b;
	bool failed;
};

static void put(struct enc *e, const void *p, size_t n)
{
	if (!e->failed && pd_buf_append(&e->b, p, n))
		e->failed = true;
}

static void put_str(struct enc *e, const char *s) { put(e, s, strlen(s)); }

/* encodeState.string with escapeHTML = true (Go 1.15..1.21 byte for byte). */
static void enc_string(struct enc *e, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t start = 0, i = 0;
	put(e, "\"", 1);
	while (i < n) {
		unsigned c = p[i];
		if (c < 0x80) {
			if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
				i++;
				continue;
			}
			put(e, s + start, i - start);
			char esc[6] = {'\\', 0, 0, 0, 0, 0};
			size_t k = 2;
			switch (c) {
			case '\\': case '"': esc[1] = (char)c; break;
			case '\n': esc[1] = 'n'; break;
			case '\r': esc[1] = 'r'; break;
			case '\t': esc[1] = 't'; break;
			default:
				memcpy(esc + 1, "u00", 3);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				k = 6;
			}
			put(e, esc, k);
			start = ++i;
			continue;
		}
		uint32_t r;
		size_t k = utf8_decode(p + i, n - i, &r);
		if (r == 0xFFFD && k == 1) {
			put(e, s + start, i - start);
			put_str(e, "\\ufffd");
			start = ++i;
			continue;
		}
		if (r == 0x2028 || r == 0x2029) {
			put(e, s + start, i - start);
			put_str(e, r == 0x2028 ? "\\u2028" : "\\u2029");
			i += k;
			start = i;
			continue;
		}
		i += k;
	}
	put(e, s + start, n - start);
	put(e, "\"", 1);
}

/* floatEncoder: strconv.AppendFloat(f, 'f' or 'e', -1, 64), e-07 -> e-7. */
static int enc_real(struct enc *e, double f)
{
	if (isnan(f) || isinf(f))
		return -1;
	if (f == 0) {
		put_str(e, signbit(f) ? "-0" : "0");
		return 0;
	}
	char sci[40];
	int p;
	for (p = 1; p <= 17; p++) {
		snprintf(sci, sizeof sci, "%.*e", p - 1, f);
		if (strtod(sci, NULL) == f)
			break;
	}
	/* sci = [-]d[.ddd]e±XX: collect digits and exponent */
	char dig[24];
	size_t nd = 0;
	const char *c = sci;
	bool neg = *c == '-';
	if (neg)
		c++;
	for (; *c && *c != 'e'; c++)
		if (*c != '.')
			dig[nd++] = *c;
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	int x = atoi(c + 1);
	char out[400];
	size_t o = 0;
	if (neg)
		out[o++] = '-';
	double a = fabs(f);
	if (a < 1e-6 || a >= 1e21) {
		out[o++] = dig[0];
		if (nd > 1) {
			out[o++] = '.';
			memcpy(out + o, dig + 1, nd - 1);
			o += nd - 1;
		}
		o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
		if (o >= 4 && out[o - 4] == 'e' && out[o - 3] == '-' && out[o - 2] == '0') {
			out[o - 2] = out[o - 1];
			o--;
		}
	} else if (x >= 0) {
		for (int i = 0; i <= x; i++)
			out[o++] = (size_t)i < nd ? dig[i] : '0';
		if ((size_t)x + 1 < nd) {
			out[o++] = '.';
			for (size_t i = (size_t)x + 1; i < nd; i++)
				out[o++] = dig[i];
		}
	} else {
		out[o++] = '0';
		out[o++] = '.';
		for (int i = 0; i < -x - 1; i++)
			out[o++] = '0';
		memcpy(out + o, dig, nd);
		o += nd;
	}
	put(e, out, o);
	return 0;
}

static int enc_value(struct enc *e, json_t *v, int depth)
{
	char num[32];
	if (!v || depth > PD_JSON_MAX_DEPTH)
		return -1;
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		put(e, "{", 1);
		bool first = true;
		for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
			const char *k = json_object_iter_key(it);
			if (!first)
				put(e, ",", 1);
			first = false;
			enc_string(e, k, strlen(k));
			put(e, ":", 1);
			if (enc_value(e, json_object_iter_value(it), depth + 1))
				return -1;
		}
		put(e, "}", 1);
		return 0;
	}
	case JSON_ARRAY: {
		/* Go writes a nil slice as null, an empty one as []; json_t has only []. */
		put(e, "[", 1);
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i)
				put(e, ",", 1);
			if (enc_value(e, json_array_get(v, i), depth + 1))
				return -1;
		}
		put(e, "]", 1);
		return 0;
	}
	case JSON_STRING:
		enc_string(e, json_string_value(v), json_string_length(v));
		return 0;
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		put_str(e, num);
		return 0;
	case JSON_REAL: return enc_real(e, json_real_value(v));
	case JSON_TRUE: put_str(e, "true"); return 0;
	case JSON_FALSE: put_str(e, "false"); return 0;
	case JSON_NULL: put_str(e, "null"); return 0;
	}
	return -1;
}

/* Finish: newline, NUL, hand the bytes over (or NULL). */
static char *enc_finish(struct enc *e, int rc)
{
	put(e, "\n", 2); /* newline and the NUL */
	if (rc || e->failed) {
		pd_buf_free(&e->b);
		return NULL;
	}
	return (char *)e->b.ptr;
}

char *pd_api_json_encode(json_t *v)
{
	struct enc e = {PD_BUF_INIT(JSON_MAX), false};
	int rc = enc_value(&e, v, 0);
	return enc_finish(&e, rc);
}

char *pd_api_ok_json(json_t *body)
{
	struct enc e = {PD_BUF_INIT(JSON_MAX), false};
	int rc = 0;
	put_str(&e, "{\"code\":200");
	if (body) {
		put_str(&e, ",\"body\":");
		rc = enc_value(&e, body, 1);
	}
	put(&e, "}", 1);
	return enc_finish(&e, rc);
}

char *pd_api_error_json(int status, const char *msg)
{
	struct enc e = {PD_BUF_INIT(JSON_MAX), false};
	char num[32];
	snprintf(num, sizeof num, "{\"code\":%d", status);
	put_str(&e, num);
	if (msg && *msg) {
		put_str(&e, ",\"error\":");
		enc_string(&e, msg, strlen(msg));
	}
	put(&e, "}", 1);
	return enc_finish(&e, 0);
}

static json_t *str_nocheck(const char *s) { return json_stringn_nocheck(s ? s : "", s ? strlen(s) : 0); }

json_t *pd_api_profile_json(const char *id, int type, const char *service, const struct pd_api_label *labels,
			    size_t nlabels, int64_t created_at_ns)
{
	const char *tname = pd_api_type_name(type);
	char ts[PD_API_TIME_BUFSZ];
	json_t *o = NULL, *arr = NULL;
	if (!tname)
		return NULL;
	if (!(o = json_object()))
		goto fail;
	if (json_object_set_new(o, "id", str_nocheck(id)) || json_object_set_new(o, "type", json_string(tname)) ||
	    json_object_set_new(o, "service", str_nocheck(service)))
		goto fail;
	if (nlabels) {
		if (!(arr = json_array()))
			goto fail;
		for (size_t i = 0; i < nlabels; i++) {
			json_t *l = json_object();
			if (!l || json_object_set_new(l, "key", str_nocheck(labels[i].key)) ||
			    json_object_set_new(l, "value", str_nocheck(labels[i].value))) {
				json_decref(l);
				goto fail;
			}
			if (json_array_append_new(arr, l)) /* consumes l, even on failure */
				goto fail;
		}
		if (json_object_set_new(o, "labels", arr)) {
			arr = NULL; /* set_new consumed it */
			goto fail;
		}
		arr = NULL;
	}
	if (json_object_set_new(o, "created_at", json_string(pd_api_format_time(created_at_ns, ts, sizeof ts))))
		goto fail;
	return o;
fail:
	json_decref(arr);
	json_decref(o);
	return NULL;
}
