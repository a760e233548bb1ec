/*
 * metrics.c — counters and their Prometheus text rendering.
 */
#include "metrics.h"
#include "../pprof/ptype.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <dirent.h>
#include <time.h>

#define type_names pd_ptype_names /* labels "type": the profile type table's names */
_Static_assert(PD_METRICS_NTYPES == PD_PT_N, "a counter per profile type");
static const char *const reject_names[PD_REJ_N] = {"bad_request", "malformed", "empty", "too_large",
                                                   "too_old",     "internal",  "busy"};
static const char *const route_names[PD_RT_N] = {
    "post_profile", "list",        "get",       "merge",         "delete",           "services", "version",
    "health",       "metrics", "metrics_profiles", "api1",      "api1_profiles", "api1_merge",       "api1_top", "api1_labels",
    "api1_types",   "api1_series", "api1_diff", "api1_rollouts", "api1_regressions", "ui",       "other"};
static const double req_buckets[PD_METRICS_NREQ_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                            0.25,  0.5,    1,     2.5,  5,     10,   30};
static const int code_values[PD_METRICS_NCODES - 2] = {200, 400, 404, 405, 408, 413, 500, 503};
/* merge latency buckets, seconds */
static const double buckets[PD_METRICS_NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                    1,     2.5,  5,     10,   30,  60,   120};

const char *pd_route_name(int route)
{
	return route >= 0 && route < PD_RT_N ? route_names[route] : "other";
}

int pd_route_api1(const char *path)
{
	static const struct {
		const char *name;
		int route;
	} t[] = {{"profiles", PD_RT_API1_PROFILES},
	         {"merge", PD_RT_API1_MERGE},
	         {"top", PD_RT_API1_TOP},
	         {"labels", PD_RT_API1_LABELS},
	         {"types", PD_RT_API1_TYPES},
	         {"series", PD_RT_API1_SERIES},
	         {"diff", PD_RT_API1_DIFF},
	         {"rollouts", PD_RT_API1_ROLLOUTS},
	         {"regressions", PD_RT_API1_REGRESSIONS}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		size_t n = strlen(t[i].name);
		if (!strncmp(path, t[i].name, n) && (!path[n] || (path[n] == '/' && t[i].route == PD_RT_API1_LABELS)))
			return t[i].route;
	}
	return PD_RT_API1;
}

void pd_metrics_init(struct pd_metrics *m)
{
	memset(m, 0, sizeof *m);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	m->start_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void pd_metrics_ingested(struct pd_metrics *m, const char *type, size_t stored_bytes)
{
		int t = pd_ptype_find(type);
	if (t < 0)
		t = PD_PT_OTHER;
	atomic_fetch_add(&m->ingested[t], 1);
	atomic_fetch_add(&m->stored_bytes, stored_bytes);
}

void pd_metrics_merge(struct pd_metrics *m, size_t nprofiles, int64_t ns)
{
	atomic_fetch_add(&m->merges, 1);
	atomic_fetch_add(&m->merged_profiles, nprofiles);
	atomic_fetch_add(&m->merge_ns_sum, (uint64_t)ns);
	double s = (double)ns / 1e9;
	int b = 0;
	while (b < PD_METRICS_NBUCKETS && s > buckets[b])
		b++;
	atomic_fetch_add(&m->merge_bucket[b], 1);
}

void pd_metrics_request(struct pd_metrics *m, int route, int status, int64_t ns)
{
	int c = status >= 500 ? PD_METRICS_NCODES - 1 : PD_METRICS_NCODES - 2;
	for (int i = 0; i < PD_METRICS_NCODES - 2; i++)
		if (code_values[i] == status)
			c = i;
	if (route < 0 || route >= PD_RT_N)
		route = PD_RT_OTHER;
	atomic_fetch_add(&m->requests[route][c], 1);
	double sec = (double)(ns > 0 ? ns : 0) / 1e9;
	int b = 0;
	while (b < PD_METRICS_NREQ_BUCKETS && sec > req_buckets[b])
		b++;
	atomic_fetch_add(&m->req_bucket[route][b], 1);
	atomic_fetch_add(&m->req_ns_sum[route], (uint64_t)(ns > 0 ? ns : 0));
}

struct out {
	struct pd_buf *b;
	int rc;
};

static void put(struct out *o, const char *fmt, ...) PD_PRINTF(2, 3);
static void put(struct out *o, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (!o->rc && n > 0)
		o->rc = pd_buf_append(o->b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void head(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* process_* as Prometheus' client libraries export them, from /proc. */
static void process_metrics(struct out *o, const struct pd_metrics *m)
{
	FILE *f = fopen("/proc/self/stat", "r");
	char buf[1024];
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces: fields after its ')' */
	unsigned long long utime = 0, stime = 0, vsize = 0;
	long long rss = 0;
	if (p &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %*u %llu %lld",
	           &utime, &stime, &vsize, &rss) == 4) {
		double tick = (double)sysconf(_SC_CLK_TCK);
		head(o, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
		put(o, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (tick > 0 ? tick : 100));
		head(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
		put(o, "process_virtual_memory_bytes %llu\n", vsize);
		head(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
		put(o, "process_resident_memory_bytes %lld\n", rss * (long long)sysconf(_SC_PAGESIZE));
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		long fds = -1; /* the directory's own descriptor is not counted */
		struct dirent *e;
		while ((e = readdir(d)))
			fds += e->d_name[0] != '.';
		closedir(d);
		head(o, "process_open_fds", "gauge", "Number of open file descriptors.");
		put(o, "process_open_fds %ld\n", fds > 0 ? fds : 0);
	}
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		head(o, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
		put(o, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
	}
	head(o, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
	put(o, "process_start_time_seconds %.3f\n", (double)m->start_ns / 1e9);
}

#define LD(x) ((unsigned long long)atomic_load(&(x)))

int pd_metrics_render(const struct pd_metrics *cm, const struct pd_store_stats *st, struct pd_buf *out)
{
	struct pd_metrics *m = (struct pd_metrics *)cm; /* atomic_load wants non-const in C11 */
	struct out o = {out, 0};
	head(&o, "profd_profiles_ingested_total", "counter", "Profiles stored, by profile type.");
	for (int i = 0; i < PD_METRICS_NTYPES; i++)
		put(&o, "profd_profiles_ingested_total{type=\"%s\"} %llu\n", type_names[i], LD(m->ingested[i]));
	head(&o, "profd_profiles_rejected_total", "counter", "Uploads refused, by reason.");
	for (int i = 0; i < PD_REJ_N; i++)
		put(&o, "profd_profiles_rejected_total{reason=\"%s\"} %llu\n", reject_names[i], LD(m->rejected[i]));
	head(&o, "profd_ingest_received_bytes_total", "counter",
	     "Bytes of profile uploads received (request bodies, as sent: usually gzip).");
	put(&o, "profd_ingest_received_bytes_total %llu\n", LD(m->bytes_in));
	head(&o, "profd_ingest_stored_bytes_total", "counter",
	     "Bytes of profile metadata and sample blocks written by this process (symbols are shared, not counted).");
	put(&o, "profd_ingest_stored_bytes_total %llu\n", LD(m->stored_bytes));
	head(&o, "profd_merges_total", "counter", "Merges served (GET /api/0/profiles/merge and id1+id2).");
	put(&o, "profd_merges_total %llu\n", LD(m->merges));
	head(&o, "profd_merged_profiles_total", "counter", "Stored profiles read by merges.");
	put(&o, "profd_merged_profiles_total %llu\n", LD(m->merged_profiles));
	head(&o, "profd_merge_duration_seconds", "histogram", "Time to select, merge and encode a merged profile.");
	unsigned long long cum = 0;
	for (int b = 0; b < PD_METRICS_NBUCKETS; b++) {
		cum += LD(m->merge_bucket[b]);
		put(&o, "profd_merge_duration_seconds_bucket{le=\"%g\"} %llu\n", buckets[b], cum);
	}
	cum += LD(m->merge_bucket[PD_METRICS_NBUCKETS]);
	put(&o, "profd_merge_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	put(&o, "profd_merge_duration_seconds_sum %.9f\n", (double)LD(m->merge_ns_sum) / 1e9);
	put(&o, "profd_merge_duration_seconds_count %llu\n", cum);
	head(&o, "profd_retention_runs_total", "counter", "Retention passes run.");
	put(&o, "profd_retention_runs_total %llu\n", LD(m->retention_runs));
	head(&o, "profd_retention_dropped_partitions_total", "counter", "Time partitions (days) deleted by retention.");
	put(&o, "profd_retention_dropped_partitions_total %llu\n", LD(m->retention_dropped));
	if (st) {
		head(&o, "profd_store_partitions", "gauge", "Time partitions in the store.");
		put(&o, "profd_store_partitions %llu\n", (unsigned long long)st->partitions);
		head(&o, "profd_store_profiles", "gauge", "Profiles in the store.");
		put(&o, "profd_store_profiles %llu\n", (unsigned long long)st->profiles);
		head(&o, "profd_store_disk_bytes", "gauge", "Bytes on disk used by the store (all partitions).");
		put(&o, "profd_store_disk_bytes %llu\n", (unsigned long long)st->disk_bytes);
		head(&o, "profd_store_quarantined_partitions", "gauge",
		     "Damaged day files the store skips (logged; listed by /readyz; `profd store check`).");
		put(&o, "profd_store_quarantined_partitions %llu\n", (unsigned long long)st->quarantined);
		head(&o, "profd_store_open_partitions", "gauge",
		     "Day files open now (--max-open-partitions when idle).");
		put(&o, "profd_store_open_partitions %llu\n", (unsigned long long)st->open_partitions);
		head(&o, "profd_store_symbol_reads_total", "counter",
		     "Symbols (strings, functions, locations, stacks, ...) that reads took from the store's tables "
		     "(source=\"store\") or from its cache of read symbols, filled by reads and at start "
		     "(source=\"cache\").");
		put(&o, "profd_store_symbol_reads_total{source=\"store\"} %llu\n", (unsigned long long)st->sym_reads);
		put(&o, "profd_store_symbol_reads_total{source=\"cache\"} %llu\n", (unsigned long long)st->sym_cached);
		head(&o, "profd_store_read_cache_bytes", "gauge", "Bytes held by the store's cache of read symbols.");
		put(&o, "profd_store_read_cache_bytes %llu\n", (unsigned long long)st->read_cache_bytes);
	}
	head(&o, "profd_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
	for (int r = 0; r < PD_RT_N; r++)
		for (int c = 0; c < PD_METRICS_NCODES; c++) {
			unsigned long long v = LD(m->requests[r][c]);
			if (!v)
				continue;
			if (c < PD_METRICS_NCODES - 2)
				put(&o, "profd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", route_names[r],
				    code_values[c], v);
			else
				put(&o, "profd_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n", route_names[r],
				    c == PD_METRICS_NCODES - 1 ? "5xx" : "4xx", v);
		}
	head(&o, "profd_http_request_duration_seconds", "histogram",
	     "Time from a request's first byte to its answer's last, by route (routes that had requests).");
	for (int r = 0; r < PD_RT_N; r++) {
		unsigned long long total = 0;
		for (int b = 0; b <= PD_METRICS_NREQ_BUCKETS; b++)
			total += LD(m->req_bucket[r][b]);
		if (!total)
			continue;
		unsigned long long rcum = 0;
		for (int b = 0; b < PD_METRICS_NREQ_BUCKETS; b++) {
			rcum += LD(m->req_bucket[r][b]);
			put(&o, "profd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
			    route_names[r], req_buckets[b], rcum);
		}
		put(&o, "profd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", route_names[r],
		    total);
		put(&o, "profd_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n", route_names[r],
		    (double)LD(m->req_ns_sum[r]) / 1e9);
		put(&o, "profd_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_names[r], total);
	}
	head(&o, "profd_http_requests_in_flight", "gauge", "Requests being served.");
	put(&o, "profd_http_requests_in_flight %llu\n", LD(m->in_flight));
	head(&o, "profd_http_offload_threads", "gauge",
	     "Threads that run requests' store work (uploads, reads) off the HTTP workers.");
	put(&o, "profd_http_offload_threads %llu\n", (unsigned long long)m->offload_threads);
	head(&o, "profd_http_offload_busy", "gauge", "Offload threads at work.");
	put(&o, "profd_http_offload_busy %llu\n", LD(m->offload_busy));
	head(&o, "profd_http_offload_waiting", "gauge", "Requests whose store work waits for an offload thread.");
	put(&o, "profd_http_offload_waiting %llu\n", LD(m->offload_waiting));
	head(&o, "profd_start_time_seconds", "gauge", "Start time of the process, unix seconds.");
	put(&o, "profd_start_time_seconds %.3f\n", (double)m->start_ns / 1e9);
	if (m->version) {
		head(&o, "profd_build_info", "gauge", "The running binary: version, commit and build time (always 1).");
		put(&o, "profd_build_info{version=\"%s\",commit=\"%s\",build_time=\"%s\"} 1\n", m->version,
		    m->commit ? m->commit : "", m->build_time ? m->build_time : "");
	}
	process_metrics(&o, m);
	return o.rc;
}
