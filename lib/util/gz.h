/*
 * gz.h — whole-buffer gzip with hard caps (libdeflate).
 *
 * pprof bodies are bounded, so the fast whole-buffer path is used. The
 * decompressed size is capped: a gzip bomb fails with PD_ELIMIT as soon as
 * the output would pass the cap, never allocating more than the cap.
 * Multi-member gzip streams (concatenated members) are decoded as one
 * stream, as Go's gzip reader does.
 */
#ifndef PD_GZ_H
#define PD_GZ_H

#include "util.h"

static inline bool pd_is_gzip(const uint8_t *p, size_t n)
{
	return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

/* Decompress gzip data in [in, in+n) into a malloc'd buffer (caller frees
 * *out). At most max_out bytes are produced; more is PD_ELIMIT. */
int pd_gunzip(const uint8_t *in, size_t n, size_t max_out, uint8_t **out, size_t *out_len,
	      struct pd_err *err) PD_WUR;

/* Append the gzip compression of [in, in+n) to out at level 1..12. */
int pd_gzip(const uint8_t *in, size_t n, int level, struct pd_buf *out, struct pd_err *err) PD_WUR;

/* The same on up to `threads` threads for large inputs: the input is cut
 * into parts of 512 KiB (at most 64) compressed in parallel as consecutive
 * gzip members, which every gzip reader (Go's, zlib's, gzip -d, ours) reads
 * as one stream. The parts do not depend on `threads`: the output bytes are
 * the same for any thread count. */
int pd_gzip_mt(const uint8_t *in, size_t n, int level, int threads, struct pd_buf *out,
	       struct pd_err *err) PD_WUR;

#endif
