/*
 * bench_codec.c — microbenchmark of the pprof codec on real files.
 *
 *   bench_codec [-r ROUNDS] [-j THREADS] FILE...
 *
 * Loads every FILE, gunzips it once, then times (best and median of ROUNDS)
 * over the whole set: gunzip, decode of the raw protobuf (MB/s of raw
 * protobuf, one core), encode (raw), and the streaming merge of the decoded
 * profiles. Then the floor of reading the set: each gzip'd file inflated
 * (libdeflate, into a buffer reused) and every field of profile.proto looked
 * at (each varint decoded, packed ones too, strings skipped), nothing kept,
 * on one thread and on THREADS (default 2) threads that each take a
 * consecutive run of the files, as `profd pprof merge -j` does. No merge can
 * read its inputs in less. The same floor again with each file read from
 * the page cache on every pass (open, read, close into a reused buffer), as
 * a merge of files must; and what any merge writes: the merged result
 * encoded and gzip'd (level 6) on THREADS threads. Output is one
 * "name value" line per figure, for run.sh.
 */
#include "../lib/pprof/pprof.h"
#include "../lib/pprof/wire.h"
#include "../lib/util/gz.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the floor: inflate + a walk of every field -------------------------------------- */

enum { W_PROFILE, W_SAMPLE, W_LOCATION, W_FLAT };

/* Every varint of the message at [p, end) decoded, nested messages walked;
 * their sum, so that nothing is optimized away. */
static uint64_t walk(const uint8_t *p, const uint8_t *end, int kind)
{
	uint64_t sum = 0, key, v;
	while (p < end) {
		if (pd_varint(&p, end, &key))
			return sum;
		uint32_t f = (uint32_t)(key >> 3);
		switch (key & 7) {
		case WT_VARINT:
			if (pd_varint(&p, end, &v))
				return sum;
			sum += v;
			break;
		case WT_I64:
			p += 8;
			break;
		case WT_I32:
			p += 4;
			break;
		case WT_LEN: {
			if (pd_varint(&p, end, &v) || v > (uint64_t)(end - p))
				return sum;
			const uint8_t *q = p, *qe = p + v;
			p = qe;
			if (kind == W_PROFILE && f == 2)
				sum += walk(q, qe, W_SAMPLE);
			else if (kind == W_PROFILE && f == 4)
				sum += walk(q, qe, W_LOCATION);
			else if ((kind == W_PROFILE && (f == 1 || f == 3 || f == 5 || f == 11)) ||
				 (kind == W_SAMPLE && f == 3) || (kind == W_LOCATION && f == 4))
				sum += walk(q, qe, W_FLAT);
			else if (kind == W_SAMPLE && (f == 1 || f == 2))
				while (q < qe && !pd_varint(&q, qe, &v)) /* packed ids, values */
					sum += v;
			break; /* strings: skipped */
		}
		default:
			return sum;
		}
	}
	return sum;
}

struct floor_job {
	const struct pd_buf *gz;
	char *const *paths; /* set: read file i from here on every pass, into a reused buffer */
	int from, to;
	size_t maxraw;
	uint64_t sum;
	int rc;
};

static void *floor_run(void *arg)
{
	struct floor_job *j = arg;
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	uint8_t *buf = malloc(j->maxraw ? j->maxraw : 1);
	size_t maxgz = 1;
	for (int i = j->from; i < j->to; i++)
		maxgz = j->gz[i].len > maxgz ? j->gz[i].len : maxgz;
	uint8_t *in = j->paths ? malloc(maxgz) : NULL;
	j->rc = !d || !buf || (j->paths && !in);
	for (int i = j->from; i < j->to && !j->rc; i++) {
		size_t got;
		const uint8_t *src = j->gz[i].ptr;
		if (j->paths) { /* as a merge reads its inputs: from the page cache */
			int fd = open(j->paths[i], O_RDONLY);
			ssize_t r = fd < 0 ? -1 : read(fd, in, maxgz);
			if (fd >= 0)
				close(fd);
			if (r != (ssize_t)j->gz[i].len) {
				j->rc = 1;
				break;
			}
			src = in;
		}
		if (libdeflate_gzip_decompress(d, src, j->gz[i].len, buf, j->maxraw, &got) !=
		    LIBDEFLATE_SUCCESS) {
			j->rc = 1;
			break;
		}
		j->sum += walk(buf, buf + got, W_PROFILE);
	}
	free(buf);
	free(in);
	if (d)
		libdeflate_free_decompressor(d);
	return NULL;
}

/* One pass over the n files on nt threads; 0, or 1 if a file did not inflate. */
static int floor_pass(const struct pd_buf *gz, char *const *paths, int n, size_t maxraw, int nt, uint64_t *sum)
{
	struct floor_job job[16];
	pthread_t th[16];
	if (nt > 16)
		nt = 16;
	for (int t = 0; t < nt; t++)
		job[t] = (struct floor_job){gz, paths, (int)((long)n * t / nt), (int)((long)n * (t + 1) / nt), maxraw, 0, 0};
	for (int t = 1; t < nt; t++)
		if (pthread_create(&th[t], NULL, floor_run, &job[t]))
			return 1;
	floor_run(&job[0]);
	int rc = job[0].rc;
	*sum = job[0].sum;
	for (int t = 1; t < nt; t++) {
		pthread_join(th[t], NULL);
		rc |= job[t].rc;
		*sum += job[t].sum;
	}
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = 7, threads = 2, first = 1;
	while (argc > first + 1 && (!strcmp(argv[first], "-r") || !strcmp(argv[first], "-j"))) {
		*(!strcmp(argv[first], "-r") ? &rounds : &threads) = atoi(argv[first + 1]);
		first += 2;
	}
	int n = argc - first;
	if (n <= 0 || rounds <= 0 || threads <= 0 || threads > 16) {
		fprintf(stderr, "usage: bench_codec [-r ROUNDS] [-j THREADS (1-16)] FILE...\n");
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
	/* what any merge writes: the merged profile encoded and gzip'd at
	 * level 6 (Go's default, and profd's) on THREADS threads, in memory */
	struct pd_profile *merged;
	if (pd_pprof_merge(ps, (size_t)n, &merged, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	size_t outbytes = 0;
	MEDIAN("write_merged_jt", "s", {
		struct pd_buf b = PD_BUF_INIT(0);
		if (pd_pprof_encode_mt(merged, 6, threads, &b, &err))
			return 1;
		outbytes = b.len;
		pd_buf_free(&b);
	});
	printf("merged_gz_bytes %zu\n", outbytes);
	pd_profile_free(merged);
	size_t maxraw = 0;
	for (int i = 0; i < n; i++)
		maxraw = rawlen[i] > maxraw ? rawlen[i] : maxraw;
	uint64_t sum1 = 0, sumj = 0;
	uint64_t sumf = 0;
	MEDIAN("floor_read_1t", "s", if (floor_pass(gz, NULL, n, maxraw, 1, &sum1)) return 1);
	MEDIAN("floor_read_jt", "s", if (floor_pass(gz, NULL, n, maxraw, threads, &sumj)) return 1);
	MEDIAN("floor_files_1t", "s", if (floor_pass(gz, argv + first, n, maxraw, 1, &sumf)) return 1);
	MEDIAN("floor_files_jt", "s", if (floor_pass(gz, argv + first, n, maxraw, threads, &sumf)) return 1);
	if (sum1 != sumj || sum1 != sumf) {
		fprintf(stderr, "bench_codec: the floor's walks disagree\n");
		return 1;
	}
	printf("floor_threads %d\n", threads);
	for (int i = 0; i < n; i++) {
		pd_profile_free(ps[i]);
		free(raw[i]);
		pd_buf_free(&gz[i]);
	}
	free(gz), free(raw), free(rawlen), free(ps), free(t);
	return 0;
}
