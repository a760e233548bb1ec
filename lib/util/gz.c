/*
 * gz.c — capped gunzip / gzip over libdeflate.
 *
 * The gzip trailer's ISIZE (size mod 2^32) is only a hint: a hostile file
 * can lie. We start with min(hint, cap), double on LIBDEFLATE_INSUFFICIENT_SPACE
 * and stop at the cap. Deflate cannot expand more than ~1032:1, so a buffer
 * of 1100x the compressed size is always enough for one member.
 */
#include "gz.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static size_t member_hint(const uint8_t *in, size_t n)
{
	if (n < 18)
		return 64;
	uint32_t isize = (uint32_t)in[n - 4] | (uint32_t)in[n - 3] << 8 | (uint32_t)in[n - 2] << 16 |
			 (uint32_t)in[n - 1] << 24;
	return isize ? isize : 64;
}

int pd_gunzip(const uint8_t *in, size_t n, size_t max_out, uint8_t **out, size_t *out_len,
	      struct pd_err *err)
{
	*out = NULL;
	*out_len = 0;
	if (!pd_is_gzip(in, n))
		return pd_errf(err, PD_EINVAL, "not gzip data (bad magic)");
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	if (!d)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	/* Upper bound of what the remaining input could expand to. */
	size_t bound = n > SIZE_MAX / 1100 ? SIZE_MAX : n * 1100 + 64;
	size_t cap = member_hint(in, n);
	if (cap > bound)
		cap = bound;
	if (cap < 64)
		cap = 64;
	if (cap > max_out)
		cap = max_out; /* may be 0: then any output is over the limit */
	uint8_t *buf = malloc(cap ? cap : 1);
	size_t len = 0, pos = 0;
	int rc = 0;
	if (!buf) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	while (pos < n) {
		if (!pd_is_gzip(in + pos, n - pos)) {
			rc = pd_errf(err, PD_EINVAL, "gzip: trailing garbage at byte %zu", pos);
			goto out;
		}
		for (;;) {
			size_t in_used = 0, got = 0;
			enum libdeflate_result r = libdeflate_gzip_decompress_ex(
				d, in + pos, n - pos, buf + len, cap - len, &in_used, &got);
			if (r == LIBDEFLATE_SUCCESS) {
				len += got;
				pos += in_used;
				break;
			}
			if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
				if (cap >= max_out) {
					rc = pd_errf(err, PD_ELIMIT,
						     "gzip: decompressed size exceeds the %zu-byte limit "
						     "(input of %zu bytes; a gzip bomb?)",
						     max_out, n);
					goto out;
				}
				size_t ncap = cap * 2;
				if (ncap > max_out || ncap < cap)
					ncap = max_out;
				uint8_t *nb = realloc(buf, ncap);
				if (!nb) {
					rc = pd_errf(err, PD_ENOMEM, "gzip: out of memory growing to %zu bytes", ncap);
					goto out;
				}
				buf = nb;
				cap = ncap;
				continue;
			}
			rc = pd_errf(err, PD_EINVAL, "gzip: corrupt or truncated data (member at byte %zu)", pos);
			goto out;
		}
	}
	*out = buf;
	*out_len = len;
	buf = NULL;
out:
	free(buf);
	libdeflate_free_decompressor(d);
	return rc;
}

int pd_gzip(const uint8_t *in, size_t n, int level, struct pd_buf *out, struct pd_err *err)
{
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
	if (!c)
		return pd_errf(err, PD_ENOMEM, "gzip: cannot create compressor (level %d)", level);
	size_t bound = libdeflate_gzip_compress_bound(c, n);
	int rc = pd_buf_reserve(out, bound);
	if (rc) {
		libdeflate_free_compressor(c);
		return pd_errf(err, rc, "gzip: output of up to %zu bytes over the buffer limit", bound);
	}
	size_t w = libdeflate_gzip_compress(c, in, n, out->ptr + out->len, bound);
	libdeflate_free_compressor(c);
	if (!w)
		return pd_errf(err, PD_EINVAL, "gzip: compression failed");
	out->len += w;
	return 0;
}

/* Parts of a fixed size, so the output bytes do not depend on the number
 * of threads. */
#define GZ_PART (512u * 1024)
#define GZ_MAX_PARTS 64
#define GZ_MAX_THREADS 8

struct gzjob {
	const uint8_t *in;
	size_t n, nparts;
	int level, step, first;
	struct pd_buf out[GZ_MAX_PARTS];
	int rc[GZ_MAX_PARTS];
	struct pd_err err[GZ_MAX_PARTS];
};

struct gzworker {
	struct gzjob *job;
	int first;
};

static void part_range(const struct gzjob *j, size_t i, size_t *off, size_t *len)
{
	size_t base = j->n / j->nparts, extra = j->n % j->nparts;
	*off = i * base + (i < extra ? i : extra);
	*len = base + (i < extra);
}

static void *gz_worker(void *arg)
{
	struct gzworker *w = arg;
	struct gzjob *j = w->job;
	for (size_t i = (size_t)w->first; i < j->nparts; i += (size_t)j->step) {
		size_t off, len;
		part_range(j, i, &off, &len);
		j->rc[i] = pd_gzip(j->in + off, len, j->level, &j->out[i], &j->err[i]);
	}
	return NULL;
}

int pd_gzip_mt(const uint8_t *in, size_t n, int level, int threads, struct pd_buf *out, struct pd_err *err)
{
	size_t nparts = n / GZ_PART;
	if (nparts > GZ_MAX_PARTS)
		nparts = GZ_MAX_PARTS;
	if (nparts < 2)
		return pd_gzip(in, n, level, out, err);
	struct gzjob *j = calloc(1, sizeof *j);
	if (!j)
		return pd_errf(err, PD_ENOMEM, "out of memory");
	if (threads < 1)
		threads = 1;
	if (threads > GZ_MAX_THREADS)
		threads = GZ_MAX_THREADS;
	if ((size_t)threads > nparts)
		threads = (int)nparts;
	j->in = in;
	j->n = n;
	j->nparts = nparts;
	j->level = level;
	j->step = threads;
	struct gzworker w[GZ_MAX_THREADS];
	pthread_t th[GZ_MAX_THREADS];
	bool started[GZ_MAX_THREADS] = {false};
	for (int i = 0; i < threads; i++)
		w[i] = (struct gzworker){j, i};
	for (int i = 1; i < threads; i++)
		started[i] = pthread_create(&th[i], NULL, gz_worker, &w[i]) == 0;
	gz_worker(&w[0]);
	for (int i = 1; i < threads; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			gz_worker(&w[i]);
	}
	int rc = 0;
	for (size_t i = 0; i < nparts; i++) {
		if (!rc && j->rc[i]) {
			rc = j->rc[i];
			if (err)
				*err = j->err[i];
		}
		if (!rc && pd_buf_append(out, j->out[i].ptr, j->out[i].len))
			rc = pd_errf(err, PD_ELIMIT, "gzip: output over the buffer limit");
		pd_buf_free(&j->out[i]);
	}
	free(j);
	return rc;
}
