/*
 * bench_codec.c — microbenchmark of the pprof codec on real files.
 *
 *   bench_codec [-r ROUNDS] FILE...
 *
 * Loads every FILE, gunzips it once, then times (best and median of ROUNDS)
 * over the whole set: gunzip, decode of the raw protobuf (MB/s of raw
 * protobuf, one core), encode (raw), and the streaming merge of the decoded
 * profiles. Output is one "name value unit" line per figure, for run.sh.
 */
#include "../lib/pprof/pprof.h"
#include "../lib/util/gz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = 7, first = 1;
	if (argc > 2 && !strcmp(argv[1], "-r")) {
		rounds = atoi(argv[2]);
		first = 3;
	}
	int n = argc - first;
	if (n <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: bench_codec [-r ROUNDS] FILE...\n");
		return 2;
	}
	struct pd_buf *gz = calloc((size_t)n, sizeof *gz);
	uint8_t **raw = calloc((size_t)n, sizeof *raw);
	size_t *rawlen = calloc((size_t)n, sizeof *rawlen);
	struct pd_profile **ps = calloc((size_t)n, sizeof *ps);
	double *t = calloc((size_t)rounds, sizeof *t);
	struct pd_err err = {0};
	size_t gzbytes = 0, rawbytes = 0;
	for (int i = 0; i < n; i++) {
		gz[i].max = 1u << 30;
		if (pd_buf_read_file(&gz[i], argv[first + i], &err) ||
		    pd_gunzip(gz[i].ptr, gz[i].len, 1u << 30, &raw[i], &rawlen[i], &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		gzbytes += gz[i].len;
		rawbytes += rawlen[i];
	}
	printf("files %d\ngz_bytes %zu\nraw_bytes %zu\n", n, gzbytes, rawbytes);

#define MEDIAN(label, unit, expr)                                                                    \
	do {                                                                                         \
		for (int r = 0; r < rounds; r++) {                                                   \
			double t0 = pd_now();                                                        \
			expr;                                                                        \
			t[r] = pd_now() - t0;                                                        \
		}                                                                                    \
		qsort(t, (size_t)rounds, sizeof *t, cmp_double);                                     \
		printf("%s_median_s %.6f\n%s_best_s %.6f\n", label, t[rounds / 2], label, t[0]);      \
		(void)unit;                                                                          \
	} while (0)

	MEDIAN("gunzip", "s", for (int i = 0; i < n; i++) {
		uint8_t *o;
		size_t ol;
		if (pd_gunzip(gz[i].ptr, gz[i].len, 1u << 30, &o, &ol, &err))
			return 1;
		free(o);
	});
	double gunzip_med = t[rounds / 2];
	MEDIAN("decode", "s", for (int i = 0; i < n; i++) {
		struct pd_profile *p;
		if (pd_pprof_decode(raw[i], rawlen[i], NULL, &p, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		pd_profile_free(p);
	});
	printf("decode_raw_MBps %.1f\n", (double)rawbytes / 1e6 / t[rounds / 2]);
	printf("gunzip_raw_MBps %.1f\n", (double)rawbytes / 1e6 / gunzip_med);
	for (int i = 0; i < n; i++)
		if (pd_pprof_decode(raw[i], rawlen[i], NULL, &ps[i], &err))
			return 1;
	MEDIAN("encode", "s", for (int i = 0; i < n; i++) {
		struct pd_buf b = PD_BUF_INIT(0);
		if (pd_pprof_encode(ps[i], 0, &b, &err))
			return 1;
		pd_buf_free(&b);
	});
	printf("encode_raw_MBps %.1f\n", (double)rawbytes / 1e6 / t[rounds / 2]);
	MEDIAN("merge_decoded", "s", {
		struct pd_profile *m;
		if (pd_pprof_merge(ps, (size_t)n, &m, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		pd_profile_free(m);
	});
	for (int i = 0; i < n; i++) {
		pd_profile_free(ps[i]);
		free(raw[i]);
		pd_buf_free(&gz[i]);
	}
	free(gz), free(raw), free(rawlen), free(ps), free(t);
	return 0;
}
