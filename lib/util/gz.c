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
