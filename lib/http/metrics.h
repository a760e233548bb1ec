/*
 * metrics.h — the collector's own metrics, rendered as Prometheus text
 * exposition (version 0.0.4) at /metrics.
 *
 * Counters are lock-free atomics bumped on the request path; the store's
 * gauges (partitions, profiles, bytes on disk) are read from the store when
 * /metrics is scraped. Every series is declared in pd_metrics_render, which
 * is the authoritative list (docs/api.md points here).
 */
#ifndef PD_HTTP_METRICS_H
#define PD_HTTP_METRICS_H

#include <stdatomic.h>

#include "../store/store.h"

/* Why an upload was refused (label "reason"). */
enum pd_reject {
	PD_REJ_BAD_REQUEST, /* bad parameters */
	PD_REJ_MALFORMED,   /* not a valid pprof */
	PD_REJ_EMPTY,       /* no samples */
	PD_REJ_TOO_LARGE,   /* body, decompressed size or a decoder cap */
	PD_REJ_TOO_OLD,     /* older than the retention window */
	PD_REJ_INTERNAL,    /* store error */
	PD_REJ_BUSY,        /* the memory budget was exhausted (503) */
	PD_REJ_N
};

/* Routes (label "route"). */
enum pd_route {
	PD_RT_POST_PROFILE,
	PD_RT_LIST,
	PD_RT_GET,
	PD_RT_MERGE,
	PD_RT_DELETE,
	PD_RT_SERVICES,
	PD_RT_VERSION,
	PD_RT_HEALTH,
	PD_RT_METRICS,
	PD_RT_METRICS_PROFILES, /* /metrics/profiles */
	PD_RT_API1, /* an unknown route under /api/1/ (the known ones: below) */
	PD_RT_API1_PROFILES,
	PD_RT_API1_MERGE,
	PD_RT_API1_TOP,
	PD_RT_API1_LABELS, /* labels and labels/{name}/values */
	PD_RT_API1_TYPES,
	PD_RT_API1_SERIES,
	PD_RT_API1_DIFF,
	PD_RT_API1_ROLLOUTS,
	PD_RT_API1_REGRESSIONS,
	PD_RT_UI, /* the web UI's page and files: /, /ui/... */
	PD_RT_OTHER,
	PD_RT_N
};
const char *pd_route_name(int route);
/* The route of a path under /api/1/ (the part after it). */
int pd_route_api1(const char *path);

#define PD_METRICS_NTYPES 8   /* cpu heap allocs block mutex goroutine threadcreate other */
#define PD_METRICS_NCODES 10  /* 200 400 404 405 408 413 500 503 other 4xx, other 5xx */
#define PD_METRICS_NBUCKETS 14
#define PD_METRICS_NREQ_BUCKETS 14 /* request durations: 1 ms .. 30 s */

struct pd_metrics {
	_Atomic uint64_t ingested[PD_METRICS_NTYPES];
	_Atomic uint64_t rejected[PD_REJ_N];
	_Atomic uint64_t bytes_in;      /* request bodies of POST /api/0/profiles */
	_Atomic uint64_t stored_bytes;  /* header + sample block bytes written for ingested profiles */
	_Atomic uint64_t merges;        /* merges served (get by several ids, /merge) */
	_Atomic uint64_t merged_profiles;
	_Atomic uint64_t merge_bucket[PD_METRICS_NBUCKETS + 1]; /* last = +Inf */
	_Atomic uint64_t merge_ns_sum;
	_Atomic uint64_t retention_dropped; /* partitions */
	_Atomic uint64_t retention_runs;
	_Atomic uint64_t requests[PD_RT_N][PD_METRICS_NCODES];
	_Atomic uint64_t req_bucket[PD_RT_N][PD_METRICS_NREQ_BUCKETS + 1]; /* last = +Inf */
	_Atomic uint64_t req_ns_sum[PD_RT_N];
	_Atomic uint64_t in_flight;
	/* store work on the offload threads (server.c, srv_offload): threads
	 * at work, and requests waiting for one */
	_Atomic uint64_t offload_busy, offload_waiting;
	uint64_t offload_threads;
	int64_t start_ns;
	const char *version, *commit, *build_time; /* profd_build_info (borrowed; may be NULL) */
};

void pd_metrics_init(struct pd_metrics *m);
/* type: "cpu", ...; unknown names count as "other". */
void pd_metrics_ingested(struct pd_metrics *m, const char *type, size_t stored_bytes);
void pd_metrics_merge(struct pd_metrics *m, size_t nprofiles, int64_t ns);
/* A request answered with status after ns (its route's counter and duration histogram). */
void pd_metrics_request(struct pd_metrics *m, int route, int status, int64_t ns);

/* Append the exposition text to out; st may be NULL (store unreadable). */
int pd_metrics_render(const struct pd_metrics *m, const struct pd_store_stats *st, struct pd_buf *out);

#endif
