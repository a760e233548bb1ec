/*
 * ingest_floor.c — what an upload costs a server that does nothing with it
 * (issue 18: ingest per server CPU-second), to tell what profd spends from
 * what this machine's HTTP and disk cost anyway.
 *
 *   ingest_floor [-m http|fsync|sqlite] [-d DIR] [-t THREADS] [-k BYTES]
 *
 * Listens on 127.0.0.1 on a free port, prints "listening on port N" to
 * stderr, and answers POST /api/0/profiles as profd does (200, a JSON body
 * with the profefe shape) and GET /readyz until SIGTERM or SIGINT. libmicrohttpd is set up
 * as profd serve sets it up: an internal epoll pool of THREADS workers
 * (default 16, profd's), the same connection memory limit. Per mode:
 *
 *   http    the body is read into memory and dropped: HTTP alone;
 *   fsync   each body is appended to DIR/floor.log, and a 200 waits for
 *           fdatasync, group-committed as profd's store does (the first
 *           waiter that finds no commit at work writes and syncs every
 *           body queued, its own included);
 *   sqlite  each body is inserted as a row (id, service, created, body)
 *           into DIR/floor.db, WAL, synchronous=FULL, one transaction per
 *           group as above: the least any SQLite-backed store can do.
 *
 * -k keeps at most BYTES of each body (fsync, sqlite): the disk's share of
 * the cost without the bytes of the whole upload (profd stores a tenth).
 * Nothing is decoded, checked, compressed or indexed: bench/serve.sh runs
 * it beside profd on the same files and prints both rates.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX ((size_t)64 << 20)

enum mode { M_HTTP, M_FSYNC, M_SQLITE };
static enum mode mode = M_HTTP;
static int logfd = -1;
static off_t logoff;
static sqlite3 *db;
static sqlite3_stmt *ins, *begin, *commit;
static uint64_t seq;
static size_t keep = SIZE_MAX;

struct req {
	char *body;
	size_t len, cap;
	bool toobig;
};

/* ---- group commit (as lib/store/sqlite_commit.c: sq_submit) ------------------------- */

struct job {
	struct job *next;
	const char *body;
	size_t len;
	uint64_t id;
	int rc;
	bool done;
	pthread_cond_t cv;
};

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static struct job *qhead, **qtail = &qhead;
static bool committing;

static int commit_batch(struct job *batch)
{
	if (mode == M_FSYNC) {
		for (struct job *j = batch; j; j = j->next) {
			if (pwrite(logfd, j->body, j->len, logoff) != (ssize_t)j->len)
				return -1;
			logoff += (off_t)j->len;
		}
		return fdatasync(logfd);
	}
	if (sqlite3_step(begin) != SQLITE_DONE)
		return sqlite3_reset(begin), -1;
	sqlite3_reset(begin);
	int rc = 0;
	for (struct job *j = batch; j && !rc; j = j->next) {
		char id[24];
		snprintf(id, sizeof id, "%020llu", (unsigned long long)j->id);
		sqlite3_bind_text(ins, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 2, "bench", -1, SQLITE_STATIC);
		sqlite3_bind_int64(ins, 3, (int64_t)time(NULL) * 1000000000);
		sqlite3_bind_blob(ins, 4, j->body, (int)j->len, SQLITE_STATIC);
		rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : -1;
		sqlite3_reset(ins);
	}
	if (rc) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	rc = sqlite3_step(commit) == SQLITE_DONE ? 0 : -1;
	sqlite3_reset(commit);
	return rc;
}

static int submit(struct job *j)
{
	pthread_cond_init(&j->cv, NULL);
	pthread_mutex_lock(&qmu);
	j->next = NULL;
	j->done = false;
	j->id = ++seq;
	*qtail = j;
	qtail = &j->next;
	while (!j->done) {
		if (committing) {
			pthread_cond_wait(&j->cv, &qmu);
			continue;
		}
		committing = true;
		struct job *batch = qhead;
		qhead = NULL;
		qtail = &qhead;
		pthread_mutex_unlock(&qmu);
		int rc = commit_batch(batch);
		pthread_mutex_lock(&qmu);
		for (struct job *b = batch, *next; b; b = next) {
			next = b->next;
			b->rc = rc;
			b->done = true;
			if (b != j)
				pthread_cond_signal(&b->cv);
		}
		committing = false;
		if (qhead)
			pthread_cond_signal(&qhead->cv);
	}
	pthread_mutex_unlock(&qmu);
	pthread_cond_destroy(&j->cv);
	return j->rc;
}

/* ---- HTTP ----------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **ctx)
{
	(void)cls, (void)version;
	struct req *q = *ctx;
	if (!q) {
		if (!(q = calloc(1, sizeof *q)))
			return MHD_NO;
		*ctx = q;
		return MHD_YES;
	}
	if (*upload_size) {
		if (q->len + *upload_size > BODY_MAX)
			q->toobig = true;
		else {
			if (q->len + *upload_size > q->cap) {
				size_t cap = q->cap ? q->cap : 16384;
				while (cap < q->len + *upload_size)
					cap *= 2;
				char *b = realloc(q->body, cap);
				if (!b)
					return MHD_NO;
				q->body = b, q->cap = cap;
			}
			memcpy(q->body + q->len, upload, *upload_size);
			q->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (!strcmp(method, "GET") && !strcmp(url, "/readyz"))
		return reply(c, MHD_HTTP_OK, "{\"code\":200}");
	if (strcmp(method, "POST") || strcmp(url, "/api/0/profiles"))
		return reply(c, MHD_HTTP_NOT_FOUND, "{\"code\":404,\"error\":\"not found\"}");
	if (q->toobig)
		return reply(c, 413, "{\"code\":413,\"error\":\"too big\"}");
	uint64_t id = 0;
	if (mode != M_HTTP) {
		struct job j = {.body = q->body, .len = q->len < keep ? q->len : keep};
		if (submit(&j))
			return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "{\"code\":500,\"error\":\"write failed\"}");
		id = j.id;
	}
	char out[256];
	snprintf(out, sizeof out,
		 "{\"code\":200,\"body\":{\"id\":\"%020llu\",\"type\":\"cpu\",\"service\":\"bench\",\"labels\":[]}}",
		 (unsigned long long)id);
	return reply(c, MHD_HTTP_OK, out);
}

static void on_done(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode t)
{
	(void)cls, (void)c, (void)t;
	struct req *q = *ctx;
	if (q) {
		free(q->body);
		free(q);
	}
	*ctx = NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ingest_floor [-m http|fsync|sqlite] [-d DIR] [-t THREADS] [-k BYTES]\n"
		   "  Answers POST /api/0/profiles as profd serve does, doing nothing else\n"
		   "  (http), or only appending the body durably (fsync), or only inserting it\n"
		   "  as a SQLite row (sqlite); see the top of bench/ingest_floor.c.\n");
}

int main(int argc, char **argv)
{
	const char *dir = ".";
	unsigned threads = 16;
	int o;
	while ((o = getopt(argc, argv, "m:d:t:k:h")) != -1) {
		switch (o) {
		case 'm':
			if (!strcmp(optarg, "http"))
				mode = M_HTTP;
			else if (!strcmp(optarg, "fsync"))
				mode = M_FSYNC;
			else if (!strcmp(optarg, "sqlite"))
				mode = M_SQLITE;
			else {
				fprintf(stderr, "ingest_floor: -m %s: not http, fsync or sqlite\n", optarg);
				return 2;
			}
			break;
		case 'd': dir = optarg; break;
		case 't': threads = (unsigned)atoi(optarg); break;
		case 'k': keep = (size_t)strtoull(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	char path[4096];
	if (mode == M_FSYNC) {
		snprintf(path, sizeof path, "%s/floor.log", dir);
		if ((logfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
			fprintf(stderr, "ingest_floor: %s: %s\n", path, strerror(errno));
			return 1;
		}
	} else if (mode == M_SQLITE) {
		snprintf(path, sizeof path, "%s/floor.db", dir);
		unlink(path);
		if (sqlite3_open(path, &db) != SQLITE_OK ||
		    sqlite3_exec(db,
				 "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
				 "CREATE TABLE profiles(id TEXT NOT NULL, service TEXT NOT NULL, created INTEGER NOT NULL,"
				 " body BLOB NOT NULL)",
				 NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_prepare_v2(db, "INSERT INTO profiles VALUES (?1, ?2, ?3, ?4)", -1, &ins, NULL) ||
		    sqlite3_prepare_v2(db, "BEGIN", -1, &begin, NULL) ||
		    sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL)) {
			fprintf(stderr, "ingest_floor: %s: %s\n", path, sqlite3_errmsg(db));
			return 1;
		}
	}
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC, 0, NULL,
						NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
						MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
						MHD_OPTION_THREAD_POOL_SIZE, threads,
						MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10), MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "ingest_floor: libmicrohttpd did not start\n");
		return 1;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	fprintf(stderr, "ingest_floor: listening on port %u\n", di ? di->port : 0);
	int sig;
	sigwait(&ss, &sig);
	MHD_stop_daemon(d);
	if (db) {
		sqlite3_finalize(ins);
		sqlite3_finalize(begin);
		sqlite3_finalize(commit);
		sqlite3_close(db);
	}
	if (logfd >= 0)
		close(logfd);
	return 0;
}
