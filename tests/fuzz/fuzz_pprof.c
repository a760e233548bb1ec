/*
 * fuzz_pprof.c — libFuzzer driver for the pprof decoder (and, behind it,
 * gunzip, the encoder, merge and the report views).
 *
 * Property checked beyond "no crash, no leak, no UB": whatever decodes must
 * re-encode to a profile that decodes again, and whose encoding is a fixed
 * point (encode(decode(encode(p))) == encode(p)). Small limits keep each run
 * fast and exercise the limit paths.
 */
#include "../../lib/pprof/pprof.h"
#include "../../lib/pprof/report.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pd_pprof_limits lim = {0};
	lim.max_decompressed = 8u << 20;
	lim.max_samples = 100000;
	lim.max_stack_depth = 1024;
	struct pd_err err = {0};
	struct pd_profile *p = NULL, *q = NULL, *m = NULL;
	struct pd_buf a = PD_BUF_INIT(0), b = PD_BUF_INIT(0);
	if (pd_pprof_decode(data, size, &lim, &p, &err)) {
		PD_ASSERT(err.code < 0 && err.msg[0]);
		return 0;
	}
	PD_ASSERT(pd_pprof_encode(p, 0, &a, &err) == 0);
	PD_ASSERT(pd_pprof_decode(a.ptr, a.len, NULL, &q, &err) == 0);
	PD_ASSERT(pd_pprof_encode(q, 0, &b, &err) == 0);
	PD_ASSERT(a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0);
	if (pd_pprof_compact(p, &m, &err) == 0) {
		b.len = 0;
		PD_ASSERT(pd_pprof_encode(m, 1, &b, &err) == 0);
	}
	if (p->nsample_types) {
		struct pd_top t;
		uint32_t si = pd_profile_default_index(p);
		if (pd_top_compute(p, si, false, &t, &err) == 0)
			pd_top_free(&t);
		b.len = 0;
		if (pd_folded(p, si, &b, &err))
			PD_ASSERT(err.code < 0);
	}
	pd_buf_free(&a);
	pd_buf_free(&b);
	pd_profile_free(p);
	pd_profile_free(q);
	pd_profile_free(m);
	return 0;
}
