/*
 * legacy.h — the legacy (pre-protobuf) profile formats that
 * github.com/google/pprof/profile.Parse reads, into the model of pprof.h.
 *
 * Formats: Go's text heap/allocs (`heap profile: ... @ heap/N`, also
 * heapz_v2, heap_v2, heapprofile, growthz, fragmentationz), contention
 * (`--- contention:`, `--- mutex:`, C++ `--- contentionz `), count profiles
 * (`goroutine profile: total N`, `threadcreate profile: total N`), C++
 * threadz (`--- threadz N ---` / `--- Thread ...`), and the legacy binary
 * CPU format (32/64-bit, little/big endian, header words 0 3 0 period 0),
 * each with its /proc/self/maps section; and Java's (legacy_java_profile.go):
 * heapz (`--- heapz 1 ---`), contentionz (`--- contentionz 1 ---` that the
 * C++ contention parser gives up on) and the binary CPU format with header
 * words 0 3 1 period 0, each with its symbol lines (`0x3 com.Foo.bar
 * (Foo.java:12)`).
 *
 * The result is what profile.Parse produces: same sample and period types,
 * periods, values, labels, mappings (massageMappings + remapMappingIDs)
 * and locations (ids by first use). Go's formats give addresses only (Go's
 * parser does not read their `#` symbol lines); Java's give functions,
 * files and lines, and no addresses (p.Aggregate clears them).
 * pd_pprof_decode falls back to this when the input is not protobuf, so
 * every reader of profiles accepts these.
 */
#ifndef PD_LEGACY_H
#define PD_LEGACY_H

#include "pprof.h"

/* pd_legacy_parse's result for bytes that are none of the formats. */
#define PD_LEGACY_UNRECOGNIZED 1

/*
 * Parse raw (already gunzipped) legacy profile bytes. 0 and *out (caller
 * frees; it does not reference buf), PD_LEGACY_UNRECOGNIZED (err untouched),
 * or a negative PD_E* with a message naming the format and line ("heap
 * profile, line 12: ..."). Every cap of lim (may be NULL) holds as in the
 * protobuf decoder; text lines longer than 64 KiB are refused (as Go's
 * bufio.Scanner refuses them).
 */
int pd_legacy_parse(const uint8_t *buf, size_t len, const struct pd_pprof_limits *lim, struct pd_profile **out,
		    struct pd_err *err);

/*
 * Say what bytes that are neither protobuf nor a legacy profile look like:
 * fills err with PD_EINVAL and "an HTML page", "JSON", "a goroutine dump
 * (debug=2)", "text that is not a profile (first line: ...)" or "N bytes
 * of binary data ...". Returns PD_EINVAL.
 */
int pd_legacy_refuse(const uint8_t *buf, size_t len, struct pd_err *err);

/*
 * decode.c's fallback after the protobuf decode failed with PD_EINVAL (its
 * message in err): a legacy profile is parsed (and streamed to on_header /
 * on_sample when given, as pd_pprof_decode_stream does); anything else is
 * refused with pd_legacy_refuse's message, except bytes that start like
 * profile.proto, which keep the protobuf error.
 */
int pd_legacy_fallback(const uint8_t *raw, size_t len, const struct pd_pprof_limits *lim, pd_header_fn on_header,
		       pd_sample_fn on_sample, void *ctx, struct pd_profile **out, struct pd_err *err) PD_WUR;

#endif
