/*
 * log.c — every log line of the binary goes out through pd_log_emit (util.h):
 * lines are built as logfmt (key=value, values with spaces or quotes
 * "quoted" with \" \\ \xNN escapes), then written as they are, or as one
 * JSON object per line (--log-format json), and dropped below the minimum
 * level (--log-level). A line without level= is at info (the request log).
 */
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int log_format = PD_LOG_LOGFMT;
static _Atomic int log_min = PD_LOG_DEBUG;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int pd_log_parse_level(const char *s)
{
	for (int i = 0; s && i < 4; i++)
		if (!strcmp(s, level_names[i]))
			return i;
	if (s && !strcmp(s, "warning"))
		return PD_LOG_WARN;
	return -1;
}

void pd_log_setup(int format, int min_level)
{
	atomic_store(&log_format, format);
	atomic_store(&log_min, min_level);
}

/* The level named by the line's level= token (info when there is none). */
static int line_level(const char *line)
{
	for (const char *p = line; (p = strstr(p, "level=")); p += 6)
		if (p == line || p[-1] == ' ') {
			const char *v = p + 6;
			for (int i = 0; i < 4; i++) {
				size_t n = strlen(level_names[i]);
				if (!strncmp(v, level_names[i], n) && (v[n] == ' ' || v[n] == 0))
					return i;
			}
			return PD_LOG_INFO;
		}
	return PD_LOG_INFO;
}

static void json_chars(struct pd_buf *b, const char *s, size_t n, int *bad)
{
	for (size_t i = 0; i < n && !*bad; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			*bad = pd_buf_appendf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			*bad = pd_buf_appendf(b, "\\u%04x", c);
		else
			*bad = pd_buf_append(b, &s[i], 1);
	}
}

/* A JSON string: a client's bytes (a request line, a path) need not be
 * UTF-8, and a log pipeline drops a line that is not: each bad byte is
 * \ufffd, as Go's encoding/json writes it. */
static void json_str(struct pd_buf *b, const char *s, size_t n, int *bad)
{
	size_t off;
	*bad = *bad || pd_buf_append(b, "\"", 1);
	while (!*bad && !pd_utf8_valid(s, n, &off)) {
		json_chars(b, s, off, bad);
		*bad = *bad || pd_buf_append(b, "\\ufffd", 6);
		s += off + 1;
		n -= off + 1;
	}
	json_chars(b, s, n, bad);
	*bad = *bad || pd_buf_append(b, "\"", 1);
}

/* logfmt -> {"key":"value",...}: quoted values are unescaped (\" \\ \xNN),
 * then JSON-escaped; every value is a string. */
static int to_json(const char *line, struct pd_buf *b)
{
	int bad = pd_buf_append(b, "{", 1);
	bool first = true;
	const char *p = line;
	char val[4096];
	while (*p && !bad) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		size_t kn = (size_t)(p - k);
		size_t vn = 0;
		if (*p == '=') {
			p++;
			if (*p == '"') {
				for (p++; *p && *p != '"' && vn < sizeof val - 1; p++) {
					if (*p == '\\' && p[1] == 'x' && p[2] && p[3]) {
						unsigned v = 0;
						sscanf(p + 2, "%2x", &v);
						val[vn++] = (char)v;
						p += 3;
					} else if (*p == '\\' && p[1]) {
						val[vn++] = *++p;
					} else {
						val[vn++] = *p;
					}
				}
				if (*p == '"')
					p++;
			} else {
				while (*p && *p != ' ' && vn < sizeof val - 1)
					val[vn++] = *p++;
			}
		}
		bad = bad || (!first && pd_buf_append(b, ",", 1));
		json_str(b, k, kn, &bad);
		bad = bad || pd_buf_append(b, ":", 1);
		json_str(b, val, vn, &bad);
		first = false;
	}
	return bad || pd_buf_append(b, "}\n", 2);
}

void pd_log_emit(FILE *f, const char *line)
{
	if (!f || line_level(line) < atomic_load(&log_min))
		return;
	if (atomic_load(&log_format) == PD_LOG_JSON) {
		struct pd_buf b = PD_BUF_INIT(0);
		if (!to_json(line, &b))
			fwrite(b.ptr, 1, b.len, f);
		pd_buf_free(&b);
	} else {
		size_t n = strlen(line);
		flockfile(f);
		fwrite(line, 1, n, f);
		fputc('\n', f);
		funlockfile(f);
	}
	fflush(f);
}

/* s escaped into buf[o..n) (no quotes); the new end. */
static size_t esc_into(char *buf, size_t n, size_t o, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 5 < n; p++) {
		if (*p == '"' || *p == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)*p;
		} else if (*p < ' ' || *p == 0x7f) {
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", *p);
		} else {
			buf[o++] = (char)*p;
		}
	}
	return o;
}

const char *pd_log_esc(char *buf, size_t n, const char *s)
{
	if (!n)
		return "";
	buf[esc_into(buf, n, 0, s)] = 0;
	return buf;
}

const char *pd_log_val(char *buf, size_t n, const char *s)
{
	if (n < 3)
		return "\"\"";
	bool plain = s && *s;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); plain && *p; p++)
		plain = *p > ' ' && *p != 0x7f && *p != '"' && *p != '\\' && *p != '=';
	if (plain && strlen(s) < n) {
		memcpy(buf, s, strlen(s) + 1);
		return buf;
	}
	size_t o = esc_into(buf, n - 1, 1, s);
	buf[0] = '"';
	buf[o++] = '"';
	buf[o] = 0;
	return buf;
}

size_t pd_log_ts(char *buf, size_t n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char t[40];
	strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
	int w = snprintf(buf, n, "ts=%s.%03ldZ ", t, ts.tv_nsec / 1000000);
	return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}
