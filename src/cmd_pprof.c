/*
 * cmd_pprof.c — `profd pprof merge|top|folded|info`: local tools on pprof
 * files, the command-line face of lib/pprof.
 *
 * All commands that take several files merge them first with the streaming
 * merger: each file is read, decoded, added and freed before the next, so
 * memory stays proportional to the merged result, not to the input.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "flags.h"
#include "../lib/pprof/pprof.h"
#include "../lib/pprof/report.h"
#include "../lib/util/gz.h"
#include <pthread.h>
#include <stdatomic.h>

#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- shared: load and merge inputs ------------------------------------------- */

struct inputs {
	char **files;
	int n;
	bool skip_bad; /* warn and go on when a file fails to decode */
	bool quiet;
	int workers; /* merge threads, 0 = one per CPU */
};

/* Threads to use: -j, else one per online CPU (at most 8). */
static int cli_threads(int jobs)
{
	if (jobs > 0)
		return jobs;
	long c = sysconf(_SC_NPROCESSORS_ONLN);
	return c < 1 ? 1 : c > 8 ? 8 : (int)c;
}

/*
 * Parallel merge: the inputs are cut into consecutive runs, one per merging
 * thread; each run's files are read, decoded and merged into a partial
 * result, then the partials are merged in order. pd_merger_add_partial
 * makes this identical to one sequential merge (see pprof.h), so the output
 * does not depend on the number of threads.
 *
 * A run of small files is merged by its thread alone: each file is read and
 * streamed from the decoder into the merger (with its data still in that
 * core's cache). But every run builds the merged tables from nothing, and
 * with large profiles, whose stacks recur from file to file, that work is
 * repeated in each run: merging 100 of (e)'s files into a fresh merger
 * costs ~15 % more than merging them into one that has seen 100 others
 * (docs/benchmarks.md, "Two threads on (e)"). So a run of large files gets
 * decoding threads instead of a second run: they read and decode its files
 * into memory ahead of the merge (struct pipe), which the merging thread
 * helps with whenever the next file is not decoded yet, and it merges them
 * in order.
 */
struct run {
	const struct inputs *in;
	const char *cmd;
	int first, n;       /* files [first, first + n) */
	int decoders;       /* decoding threads beside the merging one (run_pipe) */
	int bad;            /* skipped files (--skip-bad) */
	int err_index;      /* file that failed, -1 */
	struct pd_err err;
	struct pd_profile *result;
	struct pd_merger *merger; /* run 0 of several: kept unfinished, the partials are added to it */
	bool partial;       /* produce a partial result (several runs) */
	atomic_int *done;   /* files processed, all runs */
	bool progress;
};

/* Files decoded ahead of the merge: at most PIPE_AHEAD past the one it is
 * at, and while more than one is in memory, at most PIPE_BUDGET bytes of
 * them as read (a decoded profile takes several times its file: a few
 * large inputs must not multiply a merge's memory). */
enum { PIPE_AHEAD = 6 };
#ifndef PIPE_BUDGET
#define PIPE_BUDGET ((long long)16 << 20)
#endif
struct pipe {
	const struct run *r;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int claim;  /* next file (of the run) to decode */
	int merged; /* files merged so far: the merge is at file `merged` */
	bool stop;  /* the merge failed: decode no more */
	long long held; /* file bytes of the files claimed and not yet merged */
	struct slot {
		int file; /* the file it holds, -1 */
		bool ready;
		long long bytes; /* its file's size */
		struct pd_profile *p; /* NULL: decoding failed (err) */
		struct pd_err err;
	} slots[PIPE_AHEAD];
};

/* Decode file k of the run into its slot (called without the lock). */
static void pipe_decode(struct pipe *q, int k)
{
	struct pd_profile *p = NULL;
	struct pd_err err = {0};
	if (pd_pprof_decode_file(q->r->in->files[q->r->first + k], NULL, &p, &err))
		p = NULL;
	pthread_mutex_lock(&q->mu);
	struct slot *s = &q->slots[k % PIPE_AHEAD];
	s->p = p;
	s->err = err;
	s->ready = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* Claim the next file to decode, -1 if none may be yet (under the lock):
 * a slot is free once the merge has passed the file it last held. */
static int pipe_claim(struct pipe *q)
{
	if (q->stop || q->claim >= q->r->n || q->claim >= q->merged + PIPE_AHEAD)
		return -1;
	struct stat st; /* 0 if it cannot be read: its decode says why */
	long long bytes = stat(q->r->in->files[q->r->first + q->claim], &st) == 0 ? (long long)st.st_size : 0;
	if (q->claim > q->merged && q->held + bytes > PIPE_BUDGET)
		return -1; /* the next file to merge is in hand: wait for memory */
	int k = q->claim++;
	q->held += bytes;
	q->slots[k % PIPE_AHEAD] = (struct slot){k, false, bytes, NULL, {0, {0}}};
	return k;
}

static void *pipe_decoder(void *arg)
{
	struct pipe *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		int k = pipe_claim(q);
		if (k < 0) {
			if (q->stop || q->claim >= q->r->n)
				break;
			pthread_cond_wait(&q->cv, &q->mu);
			continue;
		}
		pthread_mutex_unlock(&q->mu);
		pipe_decode(q, k);
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* The run's file i, decoded: by a decoder, or here while none has it ready.
 * Returns its slot (ready); the caller takes its profile. */
static struct slot *pipe_next(struct pipe *q, int i)
{
	pthread_mutex_lock(&q->mu);
	struct slot *s = &q->slots[i % PIPE_AHEAD];
	while (!(s->file == i && s->ready)) {
		int k = pipe_claim(q);
		if (k >= 0) { /* help: decode the next file rather than wait */
			pthread_mutex_unlock(&q->mu);
			pipe_decode(q, k);
			pthread_mutex_lock(&q->mu);
		} else
			pthread_cond_wait(&q->cv, &q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return s;
}

/* File i has been merged (or skipped, or failed: stop) and its slot emptied. */
static void pipe_done(struct pipe *q, int i, bool stop)
{
	pthread_mutex_lock(&q->mu);
	q->merged = i + 1;
	q->held -= q->slots[i % PIPE_AHEAD].bytes;
	q->stop |= stop;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* Count a processed file and show progress. */
static void run_progress(struct run *r)
{
	int d = atomic_fetch_add(r->done, 1) + 1;
	if (r->progress && (d % 25 == 0 || d == r->in->n))
		fprintf(stderr, "\rprofd %s: %d/%d files", r->cmd, d, r->in->n);
}

/* Merge the run's files into m with r->decoders threads decoding ahead. */
static void run_pipe(struct run *r, struct pd_merger *m)
{
	struct pipe q = {.r = r};
	for (int k = 0; k < PIPE_AHEAD; k++)
		q.slots[k].file = -1;
	pthread_mutex_init(&q.mu, NULL);
	pthread_cond_init(&q.cv, NULL);
	pthread_t th[8];
	int nth = 0;
	while (nth < r->decoders && nth < 8 && pthread_create(&th[nth], NULL, pipe_decoder, &q) == 0)
		nth++;
	for (int i = 0; i < r->n; i++) {
		struct slot *s = pipe_next(&q, i);
		struct pd_profile *p = s->p;
		struct pd_err err = s->err;
		s->p = NULL;
		const char *path = r->in->files[r->first + i];
		int rc = 0;
		if (p) {
			rc = pd_merger_add(m, p, &err);
			pd_profile_free(p);
			if (rc)
				pd_err_prefix(&err, "%s", path);
		} else if (r->in->skip_bad) {
			fprintf(stderr, "%sprofd %s: skipping %s\n", r->progress ? "\r\033[K" : "", r->cmd, err.msg);
			r->bad++;
		} else
			rc = 1;
		if (rc) {
			r->err = err;
			r->err_index = r->first + i;
		}
		pipe_done(&q, i, rc != 0);
		if (rc)
			break;
		run_progress(r);
	}
	for (int k = 0; k < nth; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < PIPE_AHEAD; k++) /* decoded past a failure */
		pd_profile_free(q.slots[k].p);
	pthread_cond_destroy(&q.cv);
	pthread_mutex_destroy(&q.mu);
}

static void *run_merge(void *arg)
{
	struct run *r = arg;
	struct pd_merger *m = pd_merger_new();
	r->err_index = -1;
	if (!m) {
		pd_errf(&r->err, PD_ENOMEM, "out of memory");
		r->err_index = r->first;
		return NULL;
	}
	pd_merger_set_partial(m, r->partial);
	pd_merger_set_scale_units(m, true); /* as go tool pprof, which converts units before merging */
	struct pd_buf buf = PD_BUF_INIT(PD_DEFAULT_MAX_COMPRESSED);
	if (r->decoders > 0) {
		run_pipe(r, m);
		goto merged;
	}
	for (int i = r->first; i < r->first + r->n; i++) {
		struct pd_profile *p;
		struct pd_err err = {0};
		if (!r->in->skip_bad) {
			/* The fast path: samples go straight from the decoder into the
			 * merger. A bad file stops the whole merge, so a half-added
			 * profile does not matter. */
			buf.len = 0;
			if (pd_buf_read_file(&buf, r->in->files[i], &err) ||
			    (pd_merger_add_encoded(m, buf.ptr, buf.len, NULL, &err) &&
			     (pd_err_prefix(&err, "%s", r->in->files[i]), 1))) {
				r->err = err;
				r->err_index = i;
				break;
			}
			goto added;
		}
		if (pd_pprof_decode_file(r->in->files[i], NULL, &p, &err)) {
			if (r->in->skip_bad) {
				fprintf(stderr, "%sprofd %s: skipping %s\n", r->progress ? "\r\033[K" : "", r->cmd, err.msg);
				r->bad++;
				continue;
			}
			r->err = err;
			r->err_index = i;
			break;
		}
		int rc = pd_merger_add(m, p, &err);
		pd_profile_free(p);
		if (rc) {
			pd_err_prefix(&err, "%s", r->in->files[i]);
			r->err = err;
			r->err_index = i;
			break;
		}
	added:
		run_progress(r);
	}
merged:
	pd_buf_free(&buf);
	if (r->partial && r->first == 0 && r->err_index < 0) {
		r->merger = m; /* the caller adds the other runs' partials to it */
		return NULL;
	}
	if (r->err_index < 0 && pd_merger_count(m) > 0 && pd_merger_finish(m, &r->result, &r->err))
		r->err_index = r->first;
	pd_merger_free(m);
	return NULL;
}

/* Inputs whose mean size is at least this many bytes are merged by piped
 * runs (PROFD_MERGE_PIPE_MIN overrides it; 0 = always). Go CPU profiles of
 * busy services are 20–100 KB gzip'd; (b) and (e) are 65 and 75 KB, (a)
 * and (d) 6 KB (docs/benchmarks.md, "Two threads on (e)"). */
static long long pipe_min_mean(void)
{
	const char *e = getenv("PROFD_MERGE_PIPE_MIN");
	char *end = NULL;
	long long v = e && *e ? strtoll(e, &end, 10) : -1;
	return v >= 0 && *end == '\0' ? v : 32 * 1024;
}

/* The mean size of the inputs, from the first 16 (0 when unknown: stdin). */
static long long mean_input_size(const struct inputs *in)
{
	long long sum = 0;
	int n = 0;
	for (int i = 0; i < in->n && n < 16; i++) {
		struct stat st;
		if (strcmp(in->files[i], "-") == 0 || stat(in->files[i], &st) != 0 || !S_ISREG(st.st_mode))
			return 0;
		sum += st.st_size;
		n++;
	}
	return n ? sum / n : 0;
}

/* Decode and merge all inputs into *out. One input is merged too (compacted),
 * as go tool pprof merges even one source: samples of one stack and labels
 * become one (so pprof's total, a sum of |value| per sample, is the same
 * when their values differ in sign or wrap) and samples whose values are
 * all zero go. */
static int load_merged(const char *cmd, const struct inputs *in, struct pd_profile **out)
{
	struct pd_err err = {0};
	*out = NULL;
	if (in->n == 1) {
		struct pd_profile *p;
		if (pd_pprof_decode_file(in->files[0], NULL, &p, &err)) {
			cli_error("%s: %s", cmd, err.msg);
			return EXIT_INPUT;
		}
		int rc = pd_pprof_compact(p, out, &err);
		pd_profile_free(p);
		if (rc) {
			cli_error("%s: %s", cmd, err.msg);
			return EXIT_INPUT;
		}
		return EXIT_OK;
	}
	int threads = cli_threads(in->workers), t = threads;
	/* large files: half the threads merge, the others decode for them */
	bool piped = threads > 1 && mean_input_size(in) >= pipe_min_mean();
	if (piped)
		t = threads / 2;
	if (t > in->n / 8) /* a run of a few files is not worth a thread */
		t = in->n / 8 > 0 ? in->n / 8 : 1;
#ifdef __GLIBC__
	/* One malloc arena for all threads: each run's partial result is freed
	 * by the main thread, and with an arena per thread the memory freed in
	 * a worker's could not be reused for the result (peak RSS of the
	 * merge of 200 large profiles 29.7 -> 26.0 MB, deep 47 -> 41 MB; the
	 * merge allocates little per sample, so the shared lock costs nothing
	 * measurable). Likewise the files a decoder thread decoded and the
	 * merging thread freed (piped, medians of 7: (e) 30.4 -> 25.4 MB, (b)
	 * 17.3 -> 15.5 MB, the same time; docs/benchmarks.md). */
	if (t > 1 || piped)
		mallopt(M_ARENA_MAX, 1);
#endif
	struct run *runs = calloc((size_t)t, sizeof *runs);
	pthread_t *th = calloc((size_t)t, sizeof *th);
	bool *started = calloc((size_t)t, sizeof *started);
	atomic_int done = 0;
	int rc = EXIT_INPUT;
	if (!runs || !th || !started) {
		cli_error("%s: out of memory", cmd);
		goto out;
	}
	bool progress = !in->quiet && isatty(2) && in->n >= 50;
	for (int k = 0, first = 0; k < t; k++) {
		int n = in->n / t + (k < in->n % t);
		int dec = piped ? (threads - t) / t + (k < (threads - t) % t) : 0;
		runs[k] = (struct run){in, cmd, first, n, dec, 0, -1, {0, {0}}, NULL, NULL, t > 1, &done, progress};
		first += n;
	}
	for (int k = 1; k < t; k++)
		started[k] = pthread_create(&th[k], NULL, run_merge, &runs[k]) == 0;
	run_merge(&runs[0]);
	for (int k = 1; k < t; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		else
			run_merge(&runs[k]); /* no thread: do it here */
	}
	if (progress)
		fputs("\r\033[K", stderr);
	int bad = 0;
	for (int k = 0; k < t; k++) {
		bad += runs[k].bad;
		if (runs[k].err_index >= 0) { /* the first failing file, in input order */
			cli_error("%s: %s", cmd, runs[k].err.msg);
			goto out;
		}
	}
	if (t == 1) {
		*out = runs[0].result;
		runs[0].result = NULL;
	} else {
		/* Run 0's merger holds run 0 as a partial; adding the other runs'
		 * partials to it in order equals adding all partials to a new one. */
		struct pd_merger *m = runs[0].merger;
		runs[0].merger = NULL;
		int r = 0;
		for (int k = 1; k < t && !r; k++)
			if (runs[k].result) {
				r = pd_merger_add_partial(m, runs[k].result, &err);
				/* added: freed now, its memory (one arena, above) is reused for the result */
				pd_profile_free(runs[k].result);
				runs[k].result = NULL;
			}
		pd_merger_set_partial(m, false);
		if (!r && pd_merger_count(m) > 0)
			r = pd_merger_finish(m, out, &err);
		pd_merger_free(m);
		if (r) {
			cli_error("%s: %s", cmd, err.msg);
			goto out;
		}
	}
	if (!*out) {
		cli_error("%s: none of the %d inputs could be read", cmd, in->n);
		goto out;
	}
	if (bad)
		fprintf(stderr, "profd %s: merged %d of %d files (%d skipped)\n", cmd, in->n - bad, in->n, bad);
	rc = EXIT_OK;
out:
	for (int k = 0; runs && k < t; k++) {
		pd_profile_free(runs[k].result);
		pd_merger_free(runs[k].merger);
	}
	free(runs);
	free(th);
	free(started);
	return rc;
}

static int sample_index(const char *cmd, const struct pd_profile *p, const char *name, uint32_t *si)
{
	int i = pd_profile_sample_index(p, name);
	if (i < 0) {
		char types[512];
		pd_profile_describe_types(p, types, sizeof types);
		cli_error("%s: no sample type '%s' in this profile; it has %s", cmd, name, types);
		return EXIT_USAGE;
	}
	*si = (uint32_t)i;
	return EXIT_OK;
}

static void fmt_time(char *buf, size_t n, int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* as go tool pprof's header says it (measurement.Label in nanoseconds):
 * 100ns, 10ms, 30.13s, 2hrs */
static void fmt_duration(char *buf, size_t n, int64_t ns)
{
	pd_fmt_value(buf, n, ns, (struct pd_str){"nanoseconds", 11});
}

#define PSTR(s) (int)(s).len, (s).ptr

/* what every subcommand's options end with */
static const struct cli_flag pprof_flags_help[] = {
	{"help", 'h', 'h', NULL, "this help", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
/* the inputs of top and folded */
static const struct cli_flag pprof_flags_input[] = {
	{"skip-bad", 0, 's', NULL, "warn about unreadable files and use the rest", 0},
	{"jobs", 'j', 'j', "N", "merge with N threads (default: one per CPU)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};

/* ---- merge ---------------------------------------------------------------------- */

static const struct cli_flag pprof_merge_flags[] = {
	{"output", 'o', 'o', "FILE",
	 "write the merged profile to FILE (default: stdout,\nrefused if stdout is a terminal)", 0},
	{"raw", 0, 'r', NULL, "write uncompressed profile.proto instead of gzip", 0},
	{"level", 0, 'l', "N", "gzip level 1-12 (default 6)", 0},
	{"skip-bad", 0, 's', NULL, "warn about unreadable files and merge the rest", 0},
	{"jobs", 'j', 'j', "N",
	 "merge with N threads (default: one per CPU); with\nlarge inputs (a mean of 32 KiB or more; env\nPROFD_MERGE_PIPE_MIN, bytes) half of them decode\nfiles ahead for the others", 0},
	{"quiet", 'q', 'q', NULL, "no progress output", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc pprof_merge_doc = {
	"pprof merge",
	"Usage: profd pprof merge [-o OUT.pb.gz] [options] FILE...\n"
	"\n"
	"Merge pprof profiles (gzip or raw profile.proto) into one, with the\n"
	"semantics of `go tool pprof -proto` / pprof's profile.Merge: all inputs\n"
	"must have the same sample and period types (units of one kind, as ms and\n"
	"ns, are converted to the finest); samples with the same stack and labels\n"
	"are summed; period = max, duration = sum, time = earliest.\n"
	"Files are read one at a time (a few ahead per thread with large inputs),\n"
	"so memory is bounded by the size of the merged result, not the inputs.\n"
	"\n",
	{pprof_merge_flags, pprof_flags_help},
	"\n"
	"Examples:\n"
	"  profd pprof merge -o merged.pb.gz cpu-*.pb.gz\n"
	"  go tool pprof -top merged.pb.gz\n"
	"\n"
	"Exit codes: 0 success, 1 unreadable or incompatible input, 2 usage error.\n",
	22,
    NULL,
};

static int pprof_merge(int argc, char **argv)
{
	const char *outpath = "-";
	int level = 6, c;
	bool raw = false;
	struct inputs in = {0};
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_merge_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'o': outpath = optarg; break;
		case 'r': raw = true; break;
		case 'l':
			level = (int)cli_parse_count(optarg);
			if (level < 1 || level > 12)
				return cli_usage_error("pprof merge", "--level must be 1..12, got '%s'", optarg);
			break;
		case 's': in.skip_bad = true; break;
		case 'j':
			if ((in.workers = (int)cli_parse_count(optarg)) < 1 || in.workers > 64)
				return cli_usage_error("pprof merge", "--jobs must be 1..64, got '%s'", optarg);
			break;
		case 'q': in.quiet = true; break;
		case 'h': cli_flags_help(&pprof_merge_doc); return EXIT_OK;
		default: return cli_bad_option("pprof merge", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("pprof merge", "no input files");
	if (!strcmp(outpath, "-") && isatty(1))
		return cli_usage_error("pprof merge", "refusing to write a binary profile to a terminal; use -o FILE");
	in.files = argv + optind;
	in.n = argc - optind;
	struct pd_profile *p;
	int rc = load_merged("pprof merge", &in, &p);
	if (rc)
		return rc;
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err = {0};
	rc = EXIT_OK;
	if (pd_pprof_encode_mt(p, raw ? 0 : level, cli_threads(in.workers), &out, &err) ||
	    pd_write_file(outpath, out.ptr, out.len, &err)) {
		cli_error("pprof merge: %s", err.msg);
		rc = EXIT_INPUT;
	}
	pd_buf_free(&out);
	pd_profile_free(p);
	return rc;
}

/* ---- top -------------------------------------------------------------------------- */

static const struct cli_flag pprof_top_flags[] = {
	{"nodes", 'n', 'n', "N", "show the top N functions (default 20, 0 = all)", 0},
	{"sample-index", 'i', 'i', "NAME",
	 "sample type to rank by, e.g. cpu, samples,\nalloc_space, inuse_space, delay, contentions,\n"
	 "or its index (default: the profile's default)",
	 0},
	{"cum", 'c', 'c', NULL, "sort by cumulative instead of flat value", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc pprof_top_doc = {
	"pprof top",
	"Usage: profd pprof top [-n N] [--sample-index NAME] [--cum] FILE...\n"
	"\n"
	"Print the functions with the highest flat (self) or cumulative cost,\n"
	"like `go tool pprof -top`, over the merge of all FILEs.\n"
	"\n",
	{pprof_top_flags, pprof_flags_input, pprof_flags_help},
	"\n"
	"Columns: flat = cost in the function itself, flat% = share of the total,\n"
	"sum% = running sum of flat%, cum = cost in the function and its callees.\n"
	"\n"
	"Examples:\n"
	"  profd pprof top cpu.pb.gz\n"
	"  profd pprof top -n 10 --sample-index alloc_space heap-*.pb.gz\n"
	"\n"
	"Exit codes: 0 success, 1 unreadable or incompatible input, 2 usage error.\n",
	26,
    NULL,
};

static void print_header(const struct pd_profile *p, uint32_t si)
{
	char buf[64];
	printf("Type: %.*s\n", PSTR(p->strings[p->sample_types[si].type]));
	if (p->time_nanos) {
		fmt_time(buf, sizeof buf, p->time_nanos);
		printf("Time: %s\n", buf);
	}
	if (p->duration_nanos) {
		fmt_duration(buf, sizeof buf, p->duration_nanos);
		printf("Duration: %s\n", buf);
	}
}

static int pprof_top(int argc, char **argv)
{
	long n = 20;
	const char *sidx = NULL;
	bool cum = false;
	int c;
	struct inputs in = {0};
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_top_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'n':
			if ((n = cli_parse_count(optarg)) < 0)
				return cli_usage_error("pprof top", "-n needs a count, got '%s'", optarg);
			break;
		case 'i': sidx = optarg; break;
		case 'c': cum = true; break;
		case 's': in.skip_bad = true; break;
		case 'j':
			if ((in.workers = (int)cli_parse_count(optarg)) < 1 || in.workers > 64)
				return cli_usage_error("pprof top", "--jobs must be 1..64, got '%s'", optarg);
			break;
		case 'h': cli_flags_help(&pprof_top_doc); return EXIT_OK;
		default: return cli_bad_option("pprof top", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("pprof top", "no input files");
	in.files = argv + optind;
	in.n = argc - optind;
	struct pd_profile *p;
	int rc = load_merged("pprof top", &in, &p);
	if (rc)
		return rc;
	uint32_t si = 0;
	if (p->nsample_types == 0) {
		cli_error("pprof top: the profile has no sample types");
		pd_profile_free(p);
		return EXIT_INPUT;
	}
	if ((rc = sample_index("pprof top", p, sidx, &si))) {
		pd_profile_free(p);
		return rc;
	}
	struct pd_top t;
	struct pd_err err = {0};
	if (pd_top_compute(p, si, cum, &t, &err)) {
		cli_error("pprof top: %s", err.msg);
		pd_profile_free(p);
		return EXIT_INPUT;
	}
	/* The table is printed exactly as `go tool pprof -top` prints it: one
	 * unit for all values, its percentages (of pprof's total), and the
	 * inline markers. */
	t.total = pd_report_total(p, si);
	struct pd_buf text = PD_BUF_INIT(0);
	rc = pd_top_text(&t, (size_t)n, p->strings[p->sample_types[si].unit], &text, &err);
	if (!rc) {
		print_header(p, si);
		fwrite(text.ptr, 1, text.len, stdout);
	} else {
		cli_error("pprof top: %s", err.msg);
		rc = EXIT_INPUT;
	}
	pd_buf_free(&text);
	pd_top_free(&t);
	pd_profile_free(p);
	return rc;
}

/* ---- folded ------------------------------------------------------------------------- */

static const struct cli_flag pprof_folded_flags[] = {
	{"sample-index", 'i', 'i', "NAME", "sample type to use (default: the profile's default)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc pprof_folded_doc = {
	"pprof folded",
	"Usage: profd pprof folded [--sample-index NAME] FILE...\n"
	"\n"
	"Print the merge of all FILEs as collapsed stacks (Brendan Gregg's folded\n"
	"format: `root;caller;leaf VALUE` per line, sorted), the input of\n"
	"flamegraph.pl, inferno, speedscope and others. Inlined frames are\n"
	"expanded; ';' inside a function name is written as ':'.\n"
	"\n",
	{pprof_folded_flags, pprof_flags_input, pprof_flags_help},
	"\n"
	"Example:\n"
	"  profd pprof folded cpu.pb.gz | flamegraph.pl > cpu.svg\n"
	"\n"
	"Exit codes: 0 success, 1 unreadable or incompatible input, 2 usage error.\n",
	26,
    NULL,
};

static int pprof_folded(int argc, char **argv)
{
	const char *sidx = NULL;
	int c;
	struct inputs in = {0};
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_folded_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'i': sidx = optarg; break;
		case 's': in.skip_bad = true; break;
		case 'j':
			if ((in.workers = (int)cli_parse_count(optarg)) < 1 || in.workers > 64)
				return cli_usage_error("pprof folded", "--jobs must be 1..64, got '%s'", optarg);
			break;
		case 'h': cli_flags_help(&pprof_folded_doc); return EXIT_OK;
		default: return cli_bad_option("pprof folded", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("pprof folded", "no input files");
	in.files = argv + optind;
	in.n = argc - optind;
	struct pd_profile *p;
	int rc = load_merged("pprof folded", &in, &p);
	if (rc)
		return rc;
	uint32_t si = 0;
	if (p->nsample_types && (rc = sample_index("pprof folded", p, sidx, &si))) {
		pd_profile_free(p);
		return rc;
	}
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err = {0};
	if (pd_folded(p, si, &out, &err) || pd_write_file("-", out.ptr, out.len, &err)) {
		cli_error("pprof folded: %s", err.msg);
		rc = EXIT_INPUT;
	}
	pd_buf_free(&out);
	pd_profile_free(p);
	return rc;
}

/* ---- info ------------------------------------------------------------------------------ */

const struct cli_doc pprof_info_doc = {
	"pprof info",
	"Usage: profd pprof info FILE...\n"
	"\n"
	"Describe each profile: kind, sample types and totals, period, time,\n"
	"duration, counts of samples/locations/functions/mappings/strings,\n"
	"label keys with their number of distinct values, comments, mappings.\n"
	"\n",
	{pprof_flags_help},
	"\n"
	"Exit codes: 0 success, 1 unreadable input, 2 usage error.\n",
	15,
    NULL,
};

struct labelkey {
	struct pd_str key;
	bool numeric;
	size_t samples;
	size_t nvalues; /* distinct values seen (capped at 1000) */
	struct pd_str values[1000];
	int64_t nums[1000];
};

static void info_labels(const struct pd_profile *p)
{
	struct labelkey *keys = NULL;
	size_t nk = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pd_label *l = &s->labels[j];
			struct pd_str k = p->strings[l->key];
			size_t x = 0;
			while (x < nk && !(keys[x].key.len == k.len && !memcmp(keys[x].key.ptr, k.ptr, k.len) &&
					   keys[x].numeric == (l->str == 0)))
				x++;
			if (x == nk) {
				if (nk == 64)
					continue;
				struct labelkey *nkeys = realloc(keys, (nk + 1) * sizeof *keys);
				if (!nkeys)
					break;
				keys = nkeys;
				memset(&keys[nk], 0, sizeof *keys);
				keys[nk].key = k;
				keys[nk].numeric = l->str == 0;
				nk++;
			}
			struct labelkey *lk = &keys[x];
			lk->samples++;
			bool seen = false;
			for (size_t v = 0; v < lk->nvalues && !seen; v++)
				seen = lk->numeric ? lk->nums[v] == l->num
						   : (lk->values[v].len == p->strings[l->str].len &&
						      !memcmp(lk->values[v].ptr, p->strings[l->str].ptr, lk->values[v].len));
			if (!seen && lk->nvalues < 1000) {
				lk->values[lk->nvalues] = p->strings[l->str];
				lk->nums[lk->nvalues++] = l->num;
			}
		}
	}
	if (nk == 0) {
		printf("labels:        none\n");
	} else {
		printf("labels:\n");
		for (size_t x = 0; x < nk; x++) {
			struct labelkey *lk = &keys[x];
			printf("  %.*s%s: %zu%s distinct value%s on %zu samples", PSTR(lk->key),
			       lk->numeric ? " (numeric)" : "", lk->nvalues, lk->nvalues >= 1000 ? "+" : "",
			       lk->nvalues == 1 ? "" : "s", lk->samples);
			if (!lk->numeric && lk->nvalues <= 5) {
				printf(" (");
				for (size_t v = 0; v < lk->nvalues; v++)
					printf("%s%.*s", v ? ", " : "", PSTR(lk->values[v]));
				printf(")");
			}
			printf("\n");
		}
	}
	free(keys);
}

static int info_one(const char *path)
{
	struct pd_err err = {0};
	struct pd_buf raw = PD_BUF_INIT(PD_DEFAULT_MAX_COMPRESSED);
	struct pd_profile *p = NULL;
	if (pd_buf_read_file(&raw, path, &err) || pd_pprof_decode(raw.ptr, raw.len, NULL, &p, &err)) {
		if (err.code != PD_EIO)
			pd_err_prefix(&err, "%s", path);
		cli_error("pprof info: %s", err.msg);
		pd_buf_free(&raw);
		return EXIT_INPUT;
	}
	char buf[64], b2[64];
	bool gz = pd_is_gzip(raw.ptr, raw.len);
	if (p->legacy_format) /* Go's legacy text or binary formats */
		printf("file:          %s (%s, %s%s, legacy format)\n", path, pd_fmt_bytes(buf, sizeof buf, (double)raw.len),
		       gz ? "gzip, " : "", p->legacy_format);
	else
		printf("file:          %s (%s, %s)\n", path, pd_fmt_bytes(buf, sizeof buf, (double)raw.len),
		       gz ? "gzip" : "raw protobuf");
	pd_buf_free(&raw);
	printf("kind:          %s\n", pd_profile_kind(p));
	uint32_t def = pd_profile_default_index(p);
	printf("sample types: ");
	for (uint32_t i = 0; i < p->nsample_types; i++)
		printf(" %.*s/%.*s%s", PSTR(p->strings[p->sample_types[i].type]),
		       PSTR(p->strings[p->sample_types[i].unit]), i == def ? " (default)" : "");
	printf("\n");
	printf("period:        %" PRId64 " %.*s/%.*s\n", p->period, PSTR(p->strings[p->period_type.type]),
	       PSTR(p->strings[p->period_type.unit]));
	if (p->time_nanos) {
		fmt_time(buf, sizeof buf, p->time_nanos);
		printf("time:          %s (%" PRId64 " ns)\n", buf, p->time_nanos);
	} else {
		printf("time:          not set\n");
	}
	fmt_duration(buf, sizeof buf, p->duration_nanos);
	printf("duration:      %s\n", p->duration_nanos ? buf : "not set");
	printf("samples:       %zu\nlocations:     %u\nfunctions:     %u\nmappings:      %u\nstrings:       %u\n",
	       p->nsamples, p->nlocations, p->nfunctions, p->nmappings, p->nstrings);
	printf("totals:       ");
	for (uint32_t i = 0; i < p->nsample_types; i++) {
		int64_t tot = 0;
		for (size_t s = 0; s < p->nsamples; s++)
			tot += p->samples[s].values[i];
		printf(" %.*s=%s", PSTR(p->strings[p->sample_types[i].type]),
		       pd_fmt_value(b2, sizeof b2, tot, p->strings[p->sample_types[i].unit]));
	}
	printf("\n");
	info_labels(p);
	for (uint32_t i = 0; i < p->ncomments; i++)
		printf("comment:       %.*s\n", PSTR(p->strings[p->comments[i]]));
	if (p->drop_frames)
		printf("drop_frames:   %.*s\n", PSTR(p->strings[p->drop_frames]));
	if (p->keep_frames)
		printf("keep_frames:   %.*s\n", PSTR(p->strings[p->keep_frames]));
	for (uint32_t i = 0; i < p->nmappings && i < 10; i++) {
		const struct pd_mapping *m = &p->mappings[i];
		printf("mapping %-5" PRIu64 " %#" PRIx64 "-%#" PRIx64 " %.*s%s%.*s\n", m->id, m->start, m->limit,
		       PSTR(p->strings[m->filename]), m->build_id ? " build_id=" : "", PSTR(p->strings[m->build_id]));
	}
	if (p->nmappings > 10)
		printf("... %u more mappings\n", p->nmappings - 10);
	pd_profile_free(p);
	return EXIT_OK;
}

static int pprof_info(int argc, char **argv)
{
	int c;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_info_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		if (c == 'h') {
			cli_flags_help(&pprof_info_doc);
			return EXIT_OK;
		}
		return cli_bad_option("pprof info", c, argv);
	}
	if (optind >= argc)
		return cli_usage_error("pprof info", "no input file");
	int rc = EXIT_OK;
	for (int i = optind; i < argc; i++) {
		if (i > optind)
			printf("\n");
		int r = info_one(argv[i]);
		if (r)
			rc = r;
	}
	return rc;
}

/* ---- convert ---------------------------------------------------------------------------- */

static const struct cli_flag pprof_convert_flags[] = {
	{"raw", 0, 'r', NULL, "write uncompressed profile.proto", 0},
	{"level", 0, 'l', "N", "gzip level 1-12 (default 6)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc pprof_convert_doc = {
	"pprof convert",
	"Usage: profd pprof convert [--raw] [--level N] IN OUT\n"
	"\n"
	"Decode IN (gzip or raw profile.proto; \"-\" = stdin), validate it, and\n"
	"encode it again to OUT (\"-\" = stdout): gzip by default, raw protobuf\n"
	"with --raw. Ids, order and content are kept as they are (no merge, no\n"
	"compaction), so this is also a strict validity check of IN.\n"
	"\n"
	"IN may also be in one of the legacy formats that go tool pprof reads\n"
	"(Go's ?debug=1 text heap/allocs, block, mutex and goroutine profiles,\n"
	"the legacy binary CPU format, Java's heapz, contentionz and CPU\n"
	"profiles): OUT is then the protobuf that Go's profile.Parse makes of it.\n"
	"\n",
	{pprof_convert_flags, pprof_flags_help},
	"\n"
	"Exit codes: 0 success, 1 invalid input or write error, 2 usage error.\n",
	18,
    NULL,
};

static int pprof_convert(int argc, char **argv)
{
	int level = 6, c;
	bool raw = false;
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_convert_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'r': raw = true; break;
		case 'l':
			level = (int)cli_parse_count(optarg);
			if (level < 1 || level > 12)
				return cli_usage_error("pprof convert", "--level must be 1..12, got '%s'", optarg);
			break;
		case 'h': cli_flags_help(&pprof_convert_doc); return EXIT_OK;
		default: return cli_bad_option("pprof convert", c, argv);
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("pprof convert", "need exactly IN and OUT");
	if (!strcmp(argv[optind + 1], "-") && isatty(1))
		return cli_usage_error("pprof convert", "refusing to write a binary profile to a terminal; give OUT a file");
	struct pd_err err = {0};
	struct pd_profile *p;
	if (pd_pprof_decode_file(argv[optind], NULL, &p, &err)) {
		cli_error("pprof convert: %s", err.msg);
		return EXIT_INPUT;
	}
	struct pd_buf out = PD_BUF_INIT(0);
	int rc = EXIT_OK;
	if (pd_pprof_encode(p, raw ? 0 : level, &out, &err) || pd_write_file(argv[optind + 1], out.ptr, out.len, &err)) {
		cli_error("pprof convert: %s", err.msg);
		rc = EXIT_INPUT;
	}
	pd_buf_free(&out);
	pd_profile_free(p);
	return rc;
}

/* ---- delta ------------------------------------------------------------------------------ */

static const struct cli_flag pprof_delta_flags[] = {
	{"output", 'o', 'o', "OUT", "output file (default \"-\" = stdout, refused if stdout is a\nterminal), gzip'd profile.proto", 0},
	{"level", 0, 'l', "N", "gzip level 1-12 (default 6)", 0},
	{NULL, 0, 0, NULL, NULL, 0},
};
const struct cli_doc pprof_delta_doc = {
	"pprof delta",
	"Usage: profd pprof delta [-o OUT] [--level N] BASE PROFILE\n"
	"\n"
	"What happened between two snapshots of a cumulative profile (Go's allocs,\n"
	"heap alloc_*, block, mutex count since the process started): PROFILE minus\n"
	"BASE, as `go tool pprof -base BASE PROFILE` computes it (BASE negated, then\n"
	"merged). The result's time is PROFILE's, its duration the time between the\n"
	"two. If a counter went down (the process restarted in between), PROFILE\n"
	"is written as it is and a note says so on stderr.\n"
	"\n",
	{pprof_delta_flags, pprof_flags_help},
	"\n"
	"Example:\n"
	"  curl -so a.pb.gz localhost:6060/debug/pprof/allocs; sleep 60\n"
	"  curl -so b.pb.gz localhost:6060/debug/pprof/allocs\n"
	"  profd pprof delta -o last-minute.pb.gz a.pb.gz b.pb.gz\n"
	"\n"
	"Exit codes: 0 success, 1 invalid or incompatible input, 2 usage error.\n",
	20,
    NULL,
};

static int pprof_delta(int argc, char **argv)
{
	int level = 6, c;
	const char *outp = "-";
	struct cli_getopt g;
	if (cli_getopt_init(&g, &pprof_delta_doc))
		return EXIT_USAGE;
	while ((c = cli_getopt_next(&g, argc, argv)) != -1) {
		switch (c) {
		case 'o': outp = optarg; break;
		case 'l':
			level = (int)cli_parse_count(optarg);
			if (level < 1 || level > 12)
				return cli_usage_error("pprof delta", "--level must be 1..12, got '%s'", optarg);
			break;
		case 'h': cli_flags_help(&pprof_delta_doc); return EXIT_OK;
		default: return cli_bad_option("pprof delta", c, argv);
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("pprof delta", "need exactly BASE and PROFILE");
	if (!strcmp(outp, "-") && isatty(1))
		return cli_usage_error("pprof delta", "refusing to write a binary profile to a terminal; use -o FILE");
	struct pd_err err = {0};
	struct pd_profile *base = NULL, *cur = NULL, *d = NULL;
	struct pd_buf out = PD_BUF_INIT(0);
	int rc = EXIT_INPUT;
	if (pd_pprof_decode_file(argv[optind], NULL, &base, &err)) {
		cli_error("pprof delta: %s: %s", argv[optind], err.msg);
		goto done;
	}
	if (pd_pprof_decode_file(argv[optind + 1], NULL, &cur, &err)) {
		cli_error("pprof delta: %s: %s", argv[optind + 1], err.msg);
		goto done;
	}
	const struct pd_profile *w = cur;
	if (pd_pprof_counter_reset(cur, base)) {
		fprintf(stderr, "profd pprof delta: a counter of %s is below %s's (restart?): writing %s as it is\n",
			argv[optind + 1], argv[optind], argv[optind + 1]);
	} else {
		if (pd_pprof_delta_units(cur, base, &d, &err)) {
			cli_error("pprof delta: %s", err.msg);
			goto done;
		}
		w = d;
	}
	if (pd_pprof_encode(w, level, &out, &err) || pd_write_file(outp, out.ptr, out.len, &err)) {
		cli_error("pprof delta: %s", err.msg);
		goto done;
	}
	rc = EXIT_OK;
done:
	pd_buf_free(&out);
	pd_profile_free(base);
	pd_profile_free(cur);
	pd_profile_free(d);
	return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

static const struct pd_cmd subcommands[] = {
	{"merge", pprof_merge, "merge profiles into one (like go tool pprof -proto)"},
	{"top", pprof_top, "hottest functions, flat and cumulative"},
	{"folded", pprof_folded, "collapsed stacks for flame graph tools"},
	{"info", pprof_info, "describe a profile"},
	{"convert", pprof_convert, "validate and re-encode a profile (gzip <-> raw)"},
	{"delta", pprof_delta, "what a cumulative profile gained between two snapshots (like -base)"},
};

static void pprof_usage(FILE *f)
{
	fprintf(f, "Usage: profd pprof <command> [options] FILE...\n\n"
		   "Local tools on Go pprof files (gzip or raw profile.proto, or the legacy\n"
		   "text and binary formats that go tool pprof reads).\n\nCommands:\n");
	for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\nRun 'profd pprof <command> --help' for its options.\n");
}

int cmd_pprof(int argc, char **argv)
{
	if (argc < 2) {
		pprof_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		pprof_usage(stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "profd pprof: unknown command '%s'\n\n", argv[1]);
	pprof_usage(stderr);
	return EXIT_USAGE;
}
