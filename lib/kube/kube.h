/*
 * kube.h — a small Kubernetes API client: configuration (kubeconfig or
 * in-cluster service account), pods (list, get, watch) and GETs through the
 * API server (the pod proxy). libcurl for HTTP(S), libyaml for kubeconfig,
 * jansson for JSON; no kubectl at run time.
 *
 * Three layers, usable separately:
 *   - struct pd_kube_config: WHERE the API server is and HOW to authenticate,
 *     read from kubeconfig file(s) (kubectl's loading and merging rules) or
 *     from the pod's service account. Immutable once loaded.
 *   - parsers with no I/O: pod JSON, a list page, the watch event stream
 *     (fed in arbitrary chunks), kubeconfig YAML from memory. The client
 *     uses them; tests and fuzzers call them directly.
 *   - struct pd_kube_client: requests. It owns the mutable credential state:
 *     the token file (re-read at most once a minute, and at once on a 401),
 *     exec-plugin credentials (cached until their expirationTimestamp, re-run
 *     on a 401: once for all the requests that failed with that credential).
 *     Thread-safe: requests may run concurrently.
 *
 * Secrets (tokens, keys, certificates) stay in memory — handed to libcurl as
 * in-memory blobs (CURLOPT_*_BLOB), never written to disk — and our copies
 * are wiped when freed (libcurl's, OpenSSL's and libyaml's internal copies
 * are not). Every input has a cap; over a cap is PD_ELIMIT. Errors follow
 * util.h; the HTTP-level ones have their own codes below, and their message
 * carries the HTTP status and the API's Status message:
 *   GET https://h:6443/api/v1/pods?limit=500: HTTP 403 Forbidden: pods is
 *   forbidden: User "x" cannot list resource "pods" ...
 */
#ifndef PD_KUBE_H
#define PD_KUBE_H

#include <stdatomic.h>

#include "../util/util.h"

/* Errors beyond util.h's (pd_kube_strerror knows both). */
enum {
	PD_KUBE_EGONE = -100,      /* 410 Gone / watch ERROR 410: resourceVersion too old, re-list */
	PD_KUBE_EUNAUTH = -101,    /* 401: credentials missing, wrong or expired (after one refresh) */
	PD_KUBE_EFORBIDDEN = -102, /* 403: RBAC says no */
	PD_KUBE_EHTTP = -103,      /* any other non-2xx answer (404 is PD_ENOTFOUND) */
};
const char *pd_kube_strerror(int code);

/* Caps. */
#define PD_KUBE_MAX_CONFIG_BYTES (4u << 20)  /* one kubeconfig file */
#define PD_KUBE_MAX_CONFIG_FILES 32          /* entries in $KUBECONFIG */
#define PD_KUBE_MAX_CRED_BYTES   (1u << 20)  /* token, CA, cert, key file; exec plugin output */
#define PD_KUBE_MAX_LIST_BYTES   (64u << 20) /* default: one list/get response */
#define PD_KUBE_MAX_EVENT_BYTES  (8u << 20)  /* default: one watch event */
#define PD_KUBE_MAX_KV           4096        /* labels, annotations per pod */
#define PD_KUBE_MAX_CONTAINERS   256         /* per pod; ports per container too */
#define PD_KUBE_MAX_OWNERS       64          /* ownerReferences per pod */

/* ---- configuration -------------------------------------------------------- */

enum pd_kube_mode {
	PD_KUBE_AUTO = 0,       /* kubeconfig if one is given or found (and has contexts), else
				 * in-cluster when KUBERNETES_SERVICE_HOST is set (client-go's rule) */
	PD_KUBE_KUBECONFIG = 1, /* kubeconfig only */
	PD_KUBE_IN_CLUSTER = 2, /* service account only */
};

struct pd_kube_opts {
	int mode;               /* enum pd_kube_mode */
	const char *kubeconfig; /* --kubeconfig: one file, must exist; NULL = $KUBECONFIG
				 * (':'-separated, missing files skipped), else ~/.kube/config */
	const char *context;    /* --context; NULL = current-context */
	const char *sa_dir;     /* in-cluster: the service-account directory; NULL =
				 * /var/run/secrets/kubernetes.io/serviceaccount (tests override) */
};

struct pd_kube_blob {
	const uint8_t *ptr;
	size_t len;
};

enum pd_kube_interactive { PD_KUBE_EXEC_NEVER = 0, PD_KUBE_EXEC_IF_AVAILABLE = 1, PD_KUBE_EXEC_ALWAYS = 2 };

/* An exec credential plugin (users[].user.exec). */
struct pd_kube_exec {
	const char *command;     /* resolved against the kubeconfig's directory if it holds a '/' */
	const char **args;       /* nargs strings */
	size_t nargs;
	const char **env;        /* nenv "NAME=value" strings, added to our environment */
	size_t nenv;
	const char *api_version; /* client.authentication.k8s.io/v1 or /v1beta1 */
	const char *install_hint;
	int interactive;         /* enum pd_kube_interactive */
	bool provide_cluster_info;
};

enum pd_kube_source { PD_KUBE_SRC_KUBECONFIG = 1, PD_KUBE_SRC_IN_CLUSTER = 2 };

/*
 * What pd_kube_config_load found; read-only. Paths are as resolved (relative
 * ones against the directory of the kubeconfig that named them). Blobs hold
 * PEM bytes: loaded from the *-data fields (base64-decoded) or, by
 * pd_kube_config_load, from the files. Everything lives in the config's
 * arena; pd_kube_config_free wipes the secrets and frees it.
 */
struct pd_kube_config {
	int source;              /* enum pd_kube_source */
	const char *origin;      /* for messages: "kubeconfig /a/b" (files used, ':'-joined) or "in-cluster" */
	const char *context;     /* context, cluster and user names (NULL in-cluster) */
	const char *cluster, *user;
	const char *namespace;   /* the context's namespace, else "default" */
	const char *server;      /* https://host:port[/prefix], no trailing '/' */
	const char *tls_server_name; /* verify (and SNI) against this name instead of the server's host */
	const char *proxy_url;
	bool insecure;           /* insecure-skip-tls-verify */
	const char *ca_file;     /* NULL when given as data or not at all (then the system CAs) */
	struct pd_kube_blob ca;
	const char *cert_file, *key_file;
	struct pd_kube_blob cert, key;
	const char *token;       /* static bearer token (a tokenFile, when readable, wins) */
	const char *token_file;  /* re-read at most once a minute, and on a 401 */
	const char *username, *password; /* basic auth */
	const char *impersonate_user;    /* "as" */
	const char **impersonate_groups; /* "as-groups" */
	size_t nimpersonate_groups;
	const struct pd_kube_exec *exec; /* NULL = no plugin */
	struct pd_arena *arena;          /* private */
};

/*
 * Load the configuration as kubectl would: the kubeconfig file(s) (merged:
 * for every cluster, user and context name and for current-context, the
 * first file that sets it wins), the chosen context, its cluster and user;
 * CA, certificate and key files read into memory. Or the in-cluster service
 * account: KUBERNETES_SERVICE_HOST/PORT, sa_dir/{token,ca.crt,namespace}.
 * Exec plugins are not run here but on the first request. *out: free with
 * pd_kube_config_free. Errors name the file, context and field:
 *   kubeconfig /x: context "prod" not found (contexts: a, b)
 */
int pd_kube_config_load(const struct pd_kube_opts *o, struct pd_kube_config **out, struct pd_err *err) PD_WUR;

/*
 * Parse one kubeconfig from memory (name: its path, for messages and for
 * resolving relative paths) and resolve `context` (NULL = current-context).
 * No I/O at all: files named by the config are not read (their blobs stay
 * empty and pd_kube_client_new reads them), nothing is executed. For tests
 * and the fuzzer.
 */
int pd_kube_config_parse(const char *name, const void *yaml, size_t len, const char *context,
			 struct pd_kube_config **out, struct pd_err *err) PD_WUR;

void pd_kube_config_free(struct pd_kube_config *cfg);

/* ---- pods ----------------------------------------------------------------- */

struct pd_kube_kv {
	const char *key, *value;
};

struct pd_kube_owner {
	const char *kind, *name;
	bool controller;
};

struct pd_kube_port {
	const char *name;     /* NULL when unnamed */
	int32_t port;         /* containerPort, 1..65535 */
	const char *protocol; /* "TCP" when not given */
};

struct pd_kube_container {
	const char *name;
	struct pd_kube_port *ports;
	uint32_t nports;
};

/*
 * A pod, as much as discovery and capture need. Strings are NUL-terminated;
 * absent optional fields are NULL (phase, pod_ip, node_name, ...). Labels
 * and annotations are in the object's order. Lives in an arena (see each
 * function for which).
 */
struct pd_kube_pod {
	const char *namespace, *name, *uid, *resource_version;
	const char *phase;     /* Pending, Running, Succeeded, Failed, Unknown */
	const char *pod_ip, *node_name;
	bool ready;            /* condition Ready is "True" */
	bool deleting;         /* metadata.deletionTimestamp is set */
	/* Lists and watches only: non-NULL when the object could not be decoded
	 * (over a cap, a field of the wrong type): why. Then only namespace,
	 * name, uid and resource_version are set. One unreadable pod must not
	 * stop a list or a watch (it would stop them for good: every retry
	 * meets it again); its reader decides (discovery skips it). */
	const char *invalid;
	struct pd_kube_kv *labels;
	uint32_t nlabels;
	struct pd_kube_kv *annotations;
	uint32_t nannotations;
	struct pd_kube_owner *owners;
	uint32_t nowners;
	struct pd_kube_container *containers;
	uint32_t ncontainers;
};

/* A pod from its JSON object (Kubernetes' shape), allocated in a (on error
 * *out is zeroed; what was allocated stays in a). Errors give the field
 * ("pod JSON: metadata.labels.app: expected a string, got a number") or the
 * position of a syntax error ("pod JSON: line 1 column 7 (byte 7): ..."). */
int pd_kube_pod_parse(const void *json, size_t len, struct pd_arena *a, struct pd_kube_pod *out,
		      struct pd_err *err) PD_WUR;

/* Deep copy into a (to keep a pod past a callback). */
int pd_kube_pod_copy(struct pd_arena *a, const struct pd_kube_pod *src, struct pd_kube_pod *dst) PD_WUR;

/* The value of a label / annotation, or NULL. */
const char *pd_kube_pod_label(const struct pd_kube_pod *p, const char *key);
const char *pd_kube_pod_annotation(const struct pd_kube_pod *p, const char *key);

/*
 * The workload that owns the pod, from its controller ownerReference (else
 * the first one): ReplicaSet "web-7d4b9c8f6" with the pod's pod-template-hash
 * label "7d4b9c8f6" (or, without the label, a 5..10 character suffix from
 * the alphabet Kubernetes uses for it) -> Deployment "web"; a Job named
 * "<cronjob>-<8+ digits>" -> CronJob; StatefulSet, DaemonSet, Job, other
 * kinds -> the owner itself; a mirror pod (owner Node) -> its name without
 * "-<node>"; no owner -> the pod itself (kind "Pod"). The name is written to
 * buf (truncated to cap-1); *kind (may be NULL) gets a static string or the
 * owner's kind (valid as long as the pod). Returns buf.
 */
const char *pd_kube_pod_workload(const struct pd_kube_pod *p, char *buf, size_t cap, const char **kind);

/* A page of a pod list. Items that cannot be decoded are kept with their
 * `invalid` message (and the metadata that could be read); an item without
 * a readable metadata.namespace and metadata.name fails the page. */
struct pd_kube_pod_page {
	struct pd_kube_pod *items;
	size_t n;
	const char *resource_version; /* the list's metadata.resourceVersion ("" if none) */
	const char *continue_token;   /* metadata.continue, NULL when this is the last page */
};
/* Parse a PodList JSON into a (items and strings in the arena). */
int pd_kube_pod_page_parse(const void *json, size_t len, struct pd_arena *a, struct pd_kube_pod_page *out,
			   struct pd_err *err) PD_WUR;

/* ---- watch events --------------------------------------------------------- */

enum pd_kube_event_type { PD_KUBE_ADDED = 1, PD_KUBE_MODIFIED, PD_KUBE_DELETED, PD_KUBE_BOOKMARK };

struct pd_kube_event {
	int type;                     /* enum pd_kube_event_type */
	const struct pd_kube_pod *pod; /* NULL for BOOKMARK */
	const char *resource_version; /* the object's: resume a watch from the last one seen */
};

/* Called per event; the event and its pod are valid during the call only
 * (pd_kube_pod_copy keeps one). Return 0 to go on; anything else stops the
 * stream, and that value is returned by whoever fed it (use a negative PD_*
 * code with err filled, or a positive value of your own). */
typedef int (*pd_kube_event_fn)(void *ctx, const struct pd_kube_event *ev, struct pd_err *err);

/*
 * Incremental parser of a watch response body: JSON event objects, one after
 * another (newline-separated as the API server writes them, but any
 * whitespace or none works), fed in chunks split anywhere. Each complete
 * event is decoded and handed to fn (a pod that cannot be decoded but has a
 * readable namespace and name comes with its `invalid` message, as in a
 * list). An ERROR event with code 410 returns
 * PD_KUBE_EGONE (re-list); another ERROR event PD_KUBE_EHTTP, both with the
 * Status message. After any non-zero return the parser is done.
 */
struct pd_kube_watch_parser;
int pd_kube_watch_parser_new(size_t max_event /* 0 = PD_KUBE_MAX_EVENT_BYTES */, pd_kube_event_fn fn, void *ctx,
			     struct pd_kube_watch_parser **out) PD_WUR;
int pd_kube_watch_feed(struct pd_kube_watch_parser *p, const void *data, size_t len, struct pd_err *err) PD_WUR;
/* End of stream: an event cut short is PD_EINVAL. */
int pd_kube_watch_finish(struct pd_kube_watch_parser *p, struct pd_err *err) PD_WUR;
/* Events delivered so far. */
size_t pd_kube_watch_events(const struct pd_kube_watch_parser *p);
void pd_kube_watch_parser_free(struct pd_kube_watch_parser *p);

/* ---- client --------------------------------------------------------------- */

struct pd_kube_client_opts {
	long connect_timeout_ms; /* 0 = 10 s */
	long timeout_ms;         /* whole list page / get; 0 = 60 s */
	size_t max_response;     /* list page / get body; 0 = PD_KUBE_MAX_LIST_BYTES */
	size_t max_event;        /* watch event; 0 = PD_KUBE_MAX_EVENT_BYTES */
	long exec_timeout_ms;    /* exec plugin run; 0 = 120 s */
	const char *user_agent;  /* NULL = "profd" */
	/* Wall-clock seconds (token re-read interval, exec credential expiry);
	 * NULL = the real clock. For tests. */
	double (*now)(void);
};

struct pd_kube_client;

/* cfg is borrowed: it must outlive the client. Reads what the config names
 * but did not load yet (files) and the token file, so a missing or
 * unreadable credential fails here, not on the first request. */
int pd_kube_client_new(const struct pd_kube_config *cfg, const struct pd_kube_client_opts *o,
		       struct pd_kube_client **out, struct pd_err *err) PD_WUR;
void pd_kube_client_free(struct pd_kube_client *c);

struct pd_kube_pod_query {
	const char *namespace;      /* NULL or "" = all namespaces */
	const char *label_selector; /* NULL = none; URL-encoded here */
	const char *field_selector;
	unsigned limit;             /* page size of a list; 0 = 500 */
	const atomic_int *stop;     /* lists: may be NULL; once non-zero (checked at least about
				     * once a second, also while a page is on its way) the list
				     * ends with PD_EIO "stopped". Watches take theirs apart. */
};

/* Called per listed pod; the pod is valid during the call only. Non-zero
 * stops the list and is returned. */
typedef int (*pd_kube_pod_fn)(void *ctx, const struct pd_kube_pod *pod, struct pd_err *err);

/*
 * List pods page by page (limit/continue), fn per pod. *resource_version
 * (may be NULL) gets the list's resourceVersion, malloc'd (caller frees): the
 * point to start a watch from. An expired continue token is PD_KUBE_EGONE
 * (pods already delivered stay delivered: start over). A page over
 * max_response is asked again with half the limit (down to 1).
 */
int pd_kube_list_pods(struct pd_kube_client *c, const struct pd_kube_pod_query *q, pd_kube_pod_fn fn, void *ctx,
		      char **resource_version, struct pd_err *err) PD_WUR;

/* All pods in one array (one arena). An expired continue token restarts
 * the list once, unpaged, as client-go's pager does. */
struct pd_kube_pod_list {
	struct pd_kube_pod *items;
	size_t n;
	const char *resource_version;
	struct pd_arena *arena;
};
int pd_kube_list_pods_all(struct pd_kube_client *c, const struct pd_kube_pod_query *q,
			  struct pd_kube_pod_list **out, struct pd_err *err) PD_WUR;
void pd_kube_pod_list_free(struct pd_kube_pod_list *l);

/* One pod, allocated in a. A missing pod is PD_ENOTFOUND; a namespace or
 * name that is not a Kubernetes name is PD_EUSAGE (nothing asked); an
 * answer that is not a pod is PD_EINVAL. */
int pd_kube_get_pod(struct pd_kube_client *c, const char *ns, const char *name, struct pd_arena *a,
		    struct pd_kube_pod *out, struct pd_err *err) PD_WUR;

/*
 * Watch pods from resource_version (NULL or "" = from now, as the server
 * decides), with bookmarks; the server ends the watch after timeout_s
 * seconds (0 = 300). Events are parsed as they stream in and handed to fn.
 * Returns 0 when the stream ended normally (timeout reached, server closed)
 * or *stop became non-zero (checked at least about once a second); then
 * watch again from the last resource_version seen. PD_KUBE_EGONE: list
 * again. Non-zero from fn: that value.
 */
int pd_kube_watch_pods(struct pd_kube_client *c, const struct pd_kube_pod_query *q, const char *resource_version,
		       int timeout_s, pd_kube_event_fn fn, void *ctx, const atomic_int *stop,
		       struct pd_err *err) PD_WUR;

/* A GET through the API server, auth applied (the pod proxy). */
struct pd_kube_get_opts {
	long timeout_ms;     /* 0 = 60 s */
	size_t max_body;     /* 0 = PD_KUBE_MAX_LIST_BYTES; a larger body is PD_ELIMIT */
	const char *accept;  /* Accept header; NULL = any type */
	const atomic_int *stop; /* may be NULL */
};
struct pd_kube_response {
	long status;         /* HTTP status */
	struct pd_buf body;  /* the body as sent (no transparent decompression); pd_buf_free */
	char content_type[128];
	bool timed_out;      /* set (also on PD_EIO) when timeout_ms ran out */
};
/*
 * GET path ("/api/v1/...", query included, already escaped) from the API
 * server. Returns 0 once any HTTP answer arrived — whatever its status: the
 * caller decides (a proxied target's own 500 is not our error) — else a
 * transport error (PD_EIO: connect, TLS, timeout — then resp->timed_out) or
 * PD_ELIMIT. A 401 is retried once after refreshing refreshable credentials.
 */
int pd_kube_get(struct pd_kube_client *c, const char *path, const struct pd_kube_get_opts *o,
		struct pd_kube_response *resp, struct pd_err *err) PD_WUR;
void pd_kube_response_free(struct pd_kube_response *r);

/* The error a non-2xx response means (HTTP status, Status message): the
 * PD_KUBE_* / PD_ENOTFOUND code with err filled as the list/get functions
 * do; what a caller of pd_kube_get uses to report an API error. */
int pd_kube_http_error(const char *what, long status, const void *body, size_t len, struct pd_err *err);

/* ---- workloads (workload.c) -------------------------------------------------- */

/* kubectl's name of a resource type (case-insensitive: pod, po, pods,
 * deployment, deploy, deployments, deployment.apps; statefulset, sts;
 * daemonset, ds; replicaset, rs; ...) -> "pods", "deployments",
 * "statefulsets", "daemonsets" or "replicasets"; NULL for anything else. */
const char *pd_kube_resource(const char *type);
/* "deployments" -> "deployment" (the singular, for messages); NULL if unknown. */
const char *pd_kube_resource_kind(const char *resource);

/*
 * The pods of a workload: its spec.selector (matchLabels, matchExpressions
 * In/NotIn/Exists/DoesNotExist) as a label selector string, as apimachinery
 * prints it ("app=web,tier in (a,b),!canary": requirements sorted by key),
 * malloc'd into *out (caller frees). An empty selector, bad operators and
 * keys or values with characters labels cannot hold are PD_EINVAL.
 */
int pd_kube_workload_selector_parse(const void *json, size_t len, char **out, struct pd_err *err) PD_WUR;
/* GET /apis/apps/v1/namespaces/NS/RESOURCE/NAME (resource: deployments,
 * statefulsets, daemonsets, replicasets) and its selector, as above. A
 * missing workload is PD_ENOTFOUND; other answers as pd_kube_http_error. */
int pd_kube_get_workload_selector(struct pd_kube_client *c, const char *ns, const char *resource, const char *name,
				  char **out, struct pd_err *err) PD_WUR;

/*
 * "/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/{path}" into buf (port 0:
 * no ":port"). path may start with '/' and may carry a "?query" (passed as
 * is); its path part is percent-encoded where needed. ns and name must be
 * Kubernetes names (letters, digits, '-', '.', '_'; not "." or ".."): else
 * PD_EINVAL; buf too small: PD_ELIMIT.
 */
int pd_kube_pod_proxy_path(char *buf, size_t cap, const char *ns, const char *name, unsigned port,
			   const char *path, struct pd_err *err) PD_WUR;

#endif
