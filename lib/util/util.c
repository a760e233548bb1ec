/*
 * util.c — errors, arenas, capped buffers, file I/O and the hash index.
 *
 * The arena is a list of chunks; allocations bump a pointer. Under
 * PD_ARENA_MALLOC (sanitizer builds) each allocation is its own malloc,
 * chained so pd_arena_free can release them, so ASan catches overruns
 * between neighbouring objects.
 */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <libgen.h>
#include <xxhash.h>

int pd_errf(struct pd_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

void pd_err_prefix(struct pd_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	char pre[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	size_t pl = strlen(pre) + 2, cap = sizeof err->msg;
	size_t ol = strnlen(err->msg, cap - 1);
	if (ol > cap - 1 - pl)
		ol = cap - 1 - pl; /* truncate the old message's tail */
	memmove(err->msg + pl, err->msg, ol);
	err->msg[pl + ol] = 0;
	memcpy(err->msg, pre, pl - 2);
	err->msg[pl - 2] = ':';
	err->msg[pl - 1] = ' ';
}

const char *pd_strerror(int code)
{
	switch (code) {
	case PD_OK: return "ok";
	case PD_EINVAL: return "invalid input";
	case PD_ENOMEM: return "out of memory";
	case PD_ELIMIT: return "limit exceeded";
	case PD_EIO: return "I/O error";
	case PD_EINCOMPAT: return "incompatible profiles";
	case PD_ENOTFOUND: return "not found";
	case PD_EUSAGE: return "usage error";
	case PD_EEXPIRED: return "older than the retention window";
	case PD_EBUSY: return "busy, try again later";
	case PD_ENOSPC: return "no space left on the device";
	case PD_EUNAVAIL: return "unavailable, try again later";
	}
	return "unknown error";
}

bool pd_utf8_valid(const void *sv, size_t n, size_t *bad)
{
	const unsigned char *s = sv;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		if (!len || n - i < len)
			goto fail;
		unsigned c1 = s[i + 1];
		/* the second byte's range excludes overlongs, surrogates and > U+10FFFF */
		unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
		unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
		if (c1 < lo || c1 > hi)
			goto fail;
		for (size_t k = 2; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				goto fail;
		i += len;
	}
	return true;
fail:
	if (bad)
		*bad = i;
	return false;
}

void pd__assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "profd: assertion failed: %s (%s:%d)\n", expr, file, line);
	abort();
}

/* ---- arena ---------------------------------------------------------- */

struct chunk {
	struct chunk *next;
	size_t size, used;
	max_align_t data[];
};

struct pd_arena {
	struct chunk *head;
	size_t chunk_size;
	size_t used;
};

struct pd_arena *pd_arena_new(size_t chunk_size)
{
	struct pd_arena *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
	return a;
}

void pd_arena_free(struct pd_arena *a)
{
	if (!a)
		return;
	struct chunk *c = a->head;
	while (c) {
		struct chunk *n = c->next;
		free(c);
		c = n;
	}
	free(a);
}

void *pd_arena_alloc(struct pd_arena *a, size_t n)
{
	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + 7) & ~(size_t)7;
	if (n == 0)
		n = 8;
	a->used += n;
#ifdef PD_ARENA_MALLOC
	struct chunk *c = malloc(sizeof *c + n);
	if (!c)
		return NULL;
	c->size = c->used = n;
	c->next = a->head;
	a->head = c;
	return c->data;
#else
	struct chunk *c = a->head;
	if (PD_LIKELY(c && c->size - c->used >= n)) {
		void *p = (char *)c->data + c->used;
		c->used += n;
		return p;
	}
	size_t sz = a->chunk_size;
	if (n > sz / 4) {
		/* Big allocation: its own chunk, placed behind the current head so
		 * the head's free space stays usable. */
		struct chunk *b = malloc(sizeof *b + n);
		if (!b)
			return NULL;
		b->size = b->used = n;
		if (c) {
			b->next = c->next;
			c->next = b;
		} else {
			b->next = NULL;
			a->head = b;
		}
		return b->data;
	}
	c = malloc(sizeof *c + sz);
	if (!c)
		return NULL;
	c->size = sz;
	c->used = n;
	c->next = a->head;
	a->head = c;
	/* Grow chunk size geometrically up to 4 MiB to limit malloc calls. */
	if (a->chunk_size < 4 * 1024 * 1024)
		a->chunk_size *= 2;
	return c->data;
#endif
}

void *pd_arena_calloc(struct pd_arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	void *p = pd_arena_alloc(a, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *pd_arena_dup(struct pd_arena *a, const void *p, size_t n)
{
	void *q = pd_arena_alloc(a, n);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

size_t pd_arena_used(const struct pd_arena *a) { return a->used; }

int pd_grow(void **p, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	if (elsz && nc > SIZE_MAX / elsz)
		return PD_ENOMEM;
	void *np = realloc(*p, nc * elsz);
	if (!np)
		return PD_ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* ---- buffers ---------------------------------------------------------- */

int pd_buf_reserve(struct pd_buf *b, size_t extra)
{
	size_t max = b->max ? b->max : SIZE_MAX;
	if (extra > max || b->len > max - extra)
		return PD_ELIMIT;
	size_t need = b->len + extra;
	if (need <= b->cap)
		return 0;
	size_t ncap = b->cap ? b->cap : 256;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (ncap > max)
		ncap = max;
	uint8_t *p = realloc(b->ptr, ncap);
	if (!p)
		return PD_ENOMEM;
	b->ptr = p;
	b->cap = ncap;
	return 0;
}

int pd_buf_append(struct pd_buf *b, const void *p, size_t n)
{
	int rc = pd_buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->ptr + b->len, p, n);
	b->len += n;
	return 0;
}

int pd_buf_appendf(struct pd_buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return PD_EINVAL;
	if ((size_t)n < sizeof tmp)
		return pd_buf_append(b, tmp, (size_t)n);
	char *big = malloc((size_t)n + 1);
	if (!big)
		return PD_ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int rc = pd_buf_append(b, big, (size_t)n);
	free(big);
	return rc;
}

void pd_buf_free(struct pd_buf *b)
{
	free(b->ptr);
	b->ptr = NULL;
	b->len = b->cap = 0;
}

int pd_buf_read_file(struct pd_buf *b, const char *path, struct pd_err *err)
{
	int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pd_errf(err, PD_EIO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		size_t max = b->max ? b->max : SIZE_MAX;
		if ((uint64_t)st.st_size > max) {
			if (fd)
				close(fd);
			return pd_errf(err, PD_ELIMIT, "%s: file is %lld bytes, over the %zu-byte input limit",
				       path, (long long)st.st_size, max);
		}
		size_t want = (size_t)st.st_size < max ? (size_t)st.st_size + 1 : max;
		if (want > b->len && pd_buf_reserve(b, want - b->len)) {
			if (fd)
				close(fd);
			return pd_errf(err, PD_ENOMEM, "%s: out of memory", path);
		}
	}
	size_t max = b->max ? b->max : SIZE_MAX;
	for (;;) {
		if (b->len >= max) {
			/* At the cap: any further byte means the input is too big. */
			char c;
			ssize_t r = read(fd, &c, 1);
			if (r == 0)
				break;
			if (fd)
				close(fd);
			return pd_errf(err, PD_ELIMIT, "%s: input is over the %zu-byte limit", path, max);
		}
		size_t want = max - b->len < 65536 ? max - b->len : 65536;
		int rc = pd_buf_reserve(b, want);
		if (rc) {
			if (fd)
				close(fd);
			return pd_errf(err, rc, "%s: out of memory", path);
		}
		size_t room = b->cap - b->len;
		if (room > max - b->len)
			room = max - b->len;
		ssize_t r = read(fd, b->ptr + b->len, room);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			if (fd)
				close(fd);
			return pd_errf(err, PD_EIO, "%s: read: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		b->len += (size_t)r;
	}
	if (fd)
		close(fd);
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int pd_write_file(const char *path, const void *p, size_t n, struct pd_err *err)
{
	if (strcmp(path, "-") == 0) {
		if (write_all(1, p, n))
			return pd_errf(err, PD_EIO, "stdout: %s", strerror(errno));
		return 0;
	}
	/* an existing path that is not a regular file (/dev/null, a FIFO,
	 * /dev/fd/N of a shell's >(...)) is written in place: renaming a temp
	 * file over it would replace a device node with a regular file (as
	 * root: /dev/null) or fail to create the temp file where it lives */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return pd_errf(err, PD_EIO, "%s: %s", path, strerror(errno));
		if (write_all(fd, p, n)) {
			int rc = pd_errf(err, PD_EIO, "%s: write: %s", path, strerror(errno));
			close(fd);
			return rc;
		}
		close(fd);
		return 0;
	}
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 32);
	if (!tmp)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = pd_errf(err, PD_EIO, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return rc;
	}
	if (write_all(fd, p, n) || fsync(fd)) {
		int rc = pd_errf(err, PD_EIO, "%s: write: %s", path, strerror(errno));
		close(fd);
		unlink(tmp);
		free(tmp);
		return rc;
	}
	close(fd);
	if (rename(tmp, path)) {
		int rc = pd_errf(err, PD_EIO, "%s: rename: %s", path, strerror(errno));
		unlink(tmp);
		free(tmp);
		return rc;
	}
	(void)pd_fsync_parent(path); /* so the rename itself is durable */
	free(tmp);
	return 0;
}

int pd_fsync_parent(const char *path)
{
	char *dcopy = strdup(path);
	if (!dcopy)
		return -1;
	int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = -1;
	if (dfd >= 0) {
		r = fsync(dfd);
		close(dfd);
	}
	free(dcopy);
	return r;
}

/* ---- hashing ----------------------------------------------------------- */

uint64_t pd_hash(const void *p, size_t n, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, n, seed);
}

int pd_hidx_init(struct pd_hidx *h, size_t expected)
{
	size_t cap = 16;
	while (cap < expected * 2)
		cap *= 2;
	h->slots = calloc(cap, sizeof *h->slots);
	if (!h->slots)
		return PD_ENOMEM;
	h->mask = cap - 1;
	h->n = 0;
	return 0;
}

void pd_hidx_free(struct pd_hidx *h)
{
	free(h->slots);
	h->slots = NULL;
	h->n = h->mask = 0;
}

static void hidx_put(struct pd_hidx_slot *slots, size_t mask, uint64_t hash, uint32_t val)
{
	size_t i = hash & mask;
	while (slots[i].hash)
		i = (i + 1) & mask;
	slots[i].hash = hash;
	slots[i].val = val;
}

int pd_hidx_insert(struct pd_hidx *h, uint64_t hash, uint32_t val)
{
	hash = pd__hidx_fix(hash);
	if ((h->n + 1) * 4 > (h->mask + 1) * 3) { /* keep load <= 0.75 */
		size_t ncap = (h->mask + 1) * 2;
		struct pd_hidx_slot *ns = calloc(ncap, sizeof *ns);
		if (!ns)
			return PD_ENOMEM;
		for (size_t i = 0; i <= h->mask; i++)
			if (h->slots[i].hash)
				hidx_put(ns, ncap - 1, h->slots[i].hash, h->slots[i].val);
		free(h->slots);
		h->slots = ns;
		h->mask = ncap - 1;
	}
	hidx_put(h->slots, h->mask, hash, val);
	h->n++;
	return 0;
}

/* ---- misc ------------------------------------------------------------ */

const char *pd_fmt_bytes(char *buf, size_t n, double v)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

int64_t pd_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t pd_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double pd_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void pd_log_vf(FILE *f, bool quiet, const char *level, const char *component, const char *fmt, va_list ap)
{
	if (!f || (quiet && !strcmp(level, "info")))
		return;
	char msg[1200];
	vsnprintf(msg, sizeof msg, fmt, ap);
	pd_log_line(f, level, component, msg);
}

void pd_log_line(FILE *f, const char *level, const char *component, const char *msg)
{
	char line[2600];
	size_t o = pd_log_ts(line, sizeof line);
	o += (size_t)snprintf(line + o, sizeof line - o, "level=%s component=%s msg=\"", level, component);
	for (const unsigned char *p = (const unsigned char *)msg; *p && o + 8 < sizeof line; p++) {
		if (*p == '"' || *p == '\\') {
			line[o++] = '\\';
			line[o++] = (char)*p;
		} else if (*p < ' ' || *p == 0x7f) {
			o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", *p);
		} else {
			line[o++] = (char)*p;
		}
	}
	line[o++] = '"';
	line[o] = 0;
	pd_log_emit(f, line);
}

char *pd_term_escaped(const char *s, size_t n, bool lines)
{
	struct pd_buf b = PD_BUF_INIT(0);
	bool changed = false;
	int bad = 0;
	for (size_t i = 0; i < n && !bad; i++) {
		unsigned char c = (unsigned char)s[i], c2 = i + 1 < n ? (unsigned char)s[i + 1] : 0;
		if ((c == '\n' && !lines) || c == '\t')
			bad = pd_buf_appendf(&b, "\\%c", c == '\n' ? 'n' : 't');
		else if ((c < 0x20 && c != '\n') || c == 0x7f)
			bad = pd_buf_appendf(&b, "\\x%02x", c);
		else if (c == 0xc2 && c2 >= 0x80 && c2 <= 0x9f) /* C1, as UTF-8 */
			bad = pd_buf_appendf(&b, "\\u%04x", s[++i] & 0xff);
		else if (c >= 0x80) {
			/* a whole UTF-8 character as it is; a byte that starts none
			 * (binary, Latin-1: a lone 0x9b is CSI to an 8-bit terminal)
			 * as \xNN */
			size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
			if (len && n - i >= len && pd_utf8_valid(s + i, len, NULL)) {
				bad = pd_buf_append(&b, &s[i], len);
				i += len - 1;
				continue;
			}
			bad = pd_buf_appendf(&b, "\\x%02x", c);
		} else {
			bad = pd_buf_append(&b, &s[i], 1);
			continue;
		}
		changed = true;
	}
	if (bad || !changed || pd_buf_append(&b, "", 1)) {
		pd_buf_free(&b);
		return NULL;
	}
	return (char *)b.ptr;
}
