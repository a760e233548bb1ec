/*
 * fuzz_legacy.c — libFuzzer driver for the legacy profile parsers
 * (lib/pprof/legacy.c): Go's text heap, contention, goroutine/threadcreate,
 * C++ threadz, the legacy binary CPU format and their memory maps, and the
 * refusal messages for everything else.
 *
 * Properties beyond "no crash, no leak, no UB": a parsed profile re-encodes
 * to protobuf that the protobuf decoder accepts, and re-encodes again to the
 * same bytes; a refusal always carries a message. The input goes both to the
 * parser directly and through pd_pprof_decode (the sniffing fallback). Small
 * limits keep each run fast and exercise the limit paths.
 */
#include "../../lib/pprof/legacy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pd_pprof_limits lim = {0};
	lim.max_decompressed = 8u << 20;
	lim.max_samples = 20000;
	lim.max_locations = 50000;
	lim.max_mappings = 1000;
	lim.max_stack_depth = 1024;
	lim.max_memory = 64u << 20;
	struct pd_err err = {0};
	struct pd_profile *p = NULL, *q = NULL;
	struct pd_buf a = PD_BUF_INIT(0), b = PD_BUF_INIT(0);
	int rc = pd_legacy_parse(data, size, &lim, &p, &err);
	if (rc == PD_LEGACY_UNRECOGNIZED) {
		PD_ASSERT(p == NULL);
		PD_ASSERT(pd_legacy_refuse(data, size, &err) == PD_EINVAL && err.msg[0]);
	} else if (rc) {
		PD_ASSERT(rc < 0 && err.msg[0] && p == NULL);
	} else {
		/* protobuf cannot carry a numeric label 0 without a unit (decoders,
		 * Go's too, drop it: a heap sample's "bytes" label of 0), so the
		 * fixed point is reached after one decode */
		struct pd_profile *r = NULL;
		PD_ASSERT(pd_pprof_encode(p, 0, &a, &err) == 0);
		PD_ASSERT(pd_pprof_decode(a.ptr, a.len, NULL, &q, &err) == 0);
		PD_ASSERT(q->nsamples == p->nsamples && q->nlocations == p->nlocations && q->nmappings == p->nmappings);
		PD_ASSERT(pd_pprof_encode(q, 0, &b, &err) == 0);
		PD_ASSERT(pd_pprof_decode(b.ptr, b.len, NULL, &r, &err) == 0);
		a.len = 0;
		PD_ASSERT(pd_pprof_encode(r, 0, &a, &err) == 0);
		PD_ASSERT(a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0);
		pd_profile_free(r);
		(void)pd_profile_go_type(p);
	}
	pd_profile_free(p);
	pd_profile_free(q);
	p = q = NULL;
	/* the same through the decoder's fallback */
	memset(&err, 0, sizeof err);
	if (pd_pprof_decode(data, size, &lim, &p, &err))
		PD_ASSERT(err.code < 0 && err.msg[0] && p == NULL);
	pd_profile_free(p);
	pd_buf_free(&a);
	pd_buf_free(&b);
	return 0;
}
