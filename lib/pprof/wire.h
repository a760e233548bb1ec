/*
 * wire.h — protobuf wire-format primitives shared by the pprof decoder and
 * encoder (private to lib/pprof). Varints are plain (not zigzag); a varint
 * longer than 10 bytes is malformed.
 */
#ifndef PD_WIRE_H
#define PD_WIRE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "../util/util.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* Decode a varint at *pp (< end). Returns 0 or -1 (truncated / too long). */
static inline int pd_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	if (PD_LIKELY(p < end && *p < 0x80)) {
		*v = *p;
		*pp = p + 1;
		return 0;
	}
	if (PD_LIKELY(end - p >= 2 && p[1] < 0x80)) { /* 2-byte ids and values are common */
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		*pp = p + 2;
		return 0;
	}
	uint64_t x = 0;
	for (int i = 0; i < 10; i++) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (b < 0x80) {
			*v = x;
			*pp = p;
			return 0;
		}
	}
	return -1;
}

static inline size_t pd_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *pd_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

#endif
