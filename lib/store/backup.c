/*
 * backup.c — `profd store backup` / `restore`: copies of a data directory's
 * day files made with SQLite's online backup API, so that a backup taken
 * while the collector serves is a consistent snapshot of each day (the
 * copy reads in one read transaction: a commit in between is either all
 * in it or not at all), then verified as `profd store check` verifies.
 */
#include "store.h"
#include "codec.h"
#include "../util/pdsqlite.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void pd_store_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int pd_store_day_files(const char *dir, char ***out, size_t *nout, struct pd_err *err)
{
	*out = NULL;
	*nout = 0;
	DIR *d = opendir(dir);
	if (!d)
		return pd_errf(err, PD_EIO, "store: %s: %s", dir, strerror(errno));
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "profd-", 6) || l < 9 || strcmp(e->d_name + l - 3, ".db"))
			continue;
		if (pd_grow((void **)&names, &cap, n + 1, sizeof *names) || !(names[n] = strdup(e->d_name))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (rc) {
		pd_store_names_free(names, n);
		return rc;
	}
	if (n)
		qsort(names, n, sizeof *names, cmp_name);
	*out = names;
	*nout = n;
	return 0;
}

static int fsync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	close(fd);
	return r;
}

/* Copy src (a day file, maybe being written in WAL mode) to dst with the
 * backup API: written to dst.tmp, synced, renamed over dst. replace: the
 * -wal and -shm of the dst it replaces belong to the old file and are
 * removed just before the rename (not before the copy: a copy that fails
 * leaves the old day whole, its newest commits in its -wal). */
static int copy_db(const char *src, const char *dst, bool replace, size_t *bytes, struct pd_err *err)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", dst);
	unlink(tmp);
	sqlite3 *s = NULL, *d = NULL;
	int rc = 0;
	char wal[4200], why[300];
	snprintf(wal, sizeof wal, "%s-wal", src);
	if (pd_wal_damaged(wal, why, sizeof why)) { /* SQLite would copy the day without those commits */
		rc = pd_errf(err, PD_EIO, "store: %s: %s", src, why);
		goto out;
	}
	if (sqlite3_open_v2(src, &s, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: opening: %s", src, s ? sqlite3_errmsg(s) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(s, 10000);
	if (sqlite3_open_v2(tmp, &d, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
		rc = pd_errf(err, PD_EIO, "store: %s: creating: %s", tmp, d ? sqlite3_errmsg(d) : "out of memory");
		goto out;
	}
	sqlite3_backup *b = sqlite3_backup_init(d, "main", s, "main");
	if (!b) {
		rc = pd_errf(err, PD_EIO, "store: %s: backup: %s", src, sqlite3_errmsg(d));
		goto out;
	}
	int r, tries = 0;
	/* all pages in one step: one read transaction on the source, so the copy
	 * is the day as of one commit; busy (a checkpoint) is retried */
	while ((r = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || r == SQLITE_LOCKED) {
		if (++tries > 200)
			break;
		usleep(50000);
	}
	int fr = sqlite3_backup_finish(b);
	if (r != SQLITE_DONE || fr != SQLITE_OK) {
		rc = pd_errf(err, r == SQLITE_FULL || fr == SQLITE_FULL ? PD_ENOSPC : PD_EIO, "store: %s: backup: %s",
		             src, sqlite3_errstr(r != SQLITE_DONE ? r : fr));
		goto out;
	}
	/* a self-contained file: the copy's own journal is not WAL (the restored
	 * file goes back to WAL when the collector opens it) */
	sqlite3_exec(d, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
out:
	sqlite3_close(s);
	if (sqlite3_close(d) != SQLITE_OK && !rc)
		rc = pd_errf(err, PD_EIO, "store: %s: closing the copy", tmp);
	struct stat st;
	if (!rc && (fsync_path(tmp, false) || stat(tmp, &st)))
		rc = pd_errf(err, errno == ENOSPC ? PD_ENOSPC : PD_EIO, "store: %s: %s", dst, strerror(errno));
	if (!rc && replace) {
		char aux[4300];
		snprintf(aux, sizeof aux, "%s-wal", dst);
		unlink(aux);
		snprintf(aux, sizeof aux, "%s-shm", dst);
		unlink(aux);
	}
	if (!rc && rename(tmp, dst))
		rc = pd_errf(err, PD_EIO, "store: %s: %s", dst, strerror(errno));
	if (rc) {
		unlink(tmp);
		char aux[4300];
		snprintf(aux, sizeof aux, "%s-journal", tmp);
		unlink(aux);
	} else if (bytes) {
		*bytes = (size_t)st.st_size;
	}
	return rc;
}

/* Every day file names[] of from into to, counted in out (restore: a
 * replaced day's stale -wal and -shm removed as it is replaced). */
static int copy_days(const char *from, const char *to, char **names, size_t n, bool restore, pd_store_copied_fn fn,
                     void *ctx, struct pd_store_copy *out, struct pd_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		char a[4096], b[4096];
		snprintf(a, sizeof a, "%s/%s", from, names[i]);
		snprintf(b, sizeof b, "%s/%s", to, names[i]);
		size_t bytes = 0;
		if (!(rc = copy_db(a, b, restore, &bytes, err))) {
			out->files++;
			out->bytes += bytes;
			if (fn)
				fn(ctx, names[i], bytes);
		}
	}
	return rc;
}

/* dir exists and is empty, or does not exist (then made, mode 0700). */
static int empty_dir(const char *dir, bool make, struct pd_err *err)
{
	DIR *d = opendir(dir);
	if (!d) {
		if (errno != ENOENT || !make)
			return pd_errf(err, PD_EIO, "store: %s: %s", dir, strerror(errno));
		if (mkdir(dir, 0700))
			return pd_errf(err, PD_EIO, "store: %s: creating: %s", dir, strerror(errno));
		return 0;
	}
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	if (!empty)
		return pd_errf(err, PD_EUSAGE, "store: %s is not empty: back up into a new directory", dir);
	return 0;
}

int pd_store_backup_dir(const char *src, const char *dst, pd_store_copied_fn fn, void *ctx, struct pd_store_copy *out,
                        struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	char **names;
	size_t n;
	int rc = pd_store_day_files(src, &names, &n, err);
	if (rc)
		return rc;
	if (!n) {
		pd_store_names_free(names, n);
		return pd_errf(err, PD_ENOTFOUND, "store: %s has no day file (profd-YYYYMMDD.db): nothing to back up",
		               src);
	}
	if ((rc = empty_dir(dst, true, err))) {
		pd_store_names_free(names, n);
		return rc;
	}
	rc = copy_days(src, dst, names, n, false, fn, ctx, out, err);
	pd_store_names_free(names, n);
	if (!rc) { /* what it is, for a person who finds the directory */
		char path[4096];
		snprintf(path, sizeof path, "%s/BACKUP", dst);
		FILE *f = fopen(path, "w");
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		if (f) {
			fprintf(f,
			        "profd backup of %s, made %04d-%02d-%02dT%02d:%02d:%02dZ: %zu day files, %zu bytes.\n"
			        "Restore: profd store restore --data-dir DIR %s (the collector stopped).\n",
			        src, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			        out->files, out->bytes, dst);
			fclose(f);
		}
		if (fsync_path(dst, true))
			rc = pd_errf(err, PD_EIO, "store: %s: %s", dst, strerror(errno));
	}
	return rc;
}

int pd_store_restore_dir(const char *backup, const char *dst, bool force, pd_store_copied_fn fn, void *ctx,
                         struct pd_store_copy *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	char **names;
	size_t n;
	int rc = pd_store_day_files(backup, &names, &n, err);
	if (rc)
		return rc;
	if (!n) {
		pd_store_names_free(names, n);
		return pd_errf(err, PD_ENOTFOUND, "store: %s has no day file (profd-YYYYMMDD.db): not a backup",
		               backup);
	}
	if (mkdir(dst, 0700) && errno != EEXIST) {
		pd_store_names_free(names, n);
		return pd_errf(err, PD_EIO, "store: %s: creating: %s", dst, strerror(errno));
	}
	/* a collector serving dst keeps writing the files it has open (a day
	 * replaced under it loses what it acknowledges after), and a backup
	 * restored onto itself would lose its own -wal: both refused. The
	 * lock is the collector's (one process per data dir), held to the
	 * end so that none starts meanwhile. */
	struct stat sb, sd;
	if (!stat(backup, &sb) && !stat(dst, &sd) && sb.st_dev == sd.st_dev && sb.st_ino == sd.st_ino) {
		pd_store_names_free(names, n);
		return pd_errf(err, PD_EUSAGE, "store: %s is the data directory itself: restore from a backup made elsewhere",
			       backup);
	}
	char lp[4200];
	snprintf(lp, sizeof lp, "%s/.lock", dst);
	int lock = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB)) {
		int e = errno;
		if (lock >= 0)
			close(lock);
		pd_store_names_free(names, n);
		return e == EWOULDBLOCK ? pd_errf(err, PD_EUSAGE,
						  "store: %s is in use by a running profd (%s is locked): stop the "
						  "collector first",
						  dst, lp)
					: pd_errf(err, PD_EIO, "store: %s: %s", lp, strerror(e));
	}
	/* nothing is overwritten unless asked: a day that exists is named */
	for (size_t i = 0; i < n && !force && !rc; i++) {
		char b[4096];
		struct stat st;
		snprintf(b, sizeof b, "%s/%s", dst, names[i]);
		if (!stat(b, &st))
			rc = pd_errf(
			    err, PD_EUSAGE,
			    "store: %s already has %s: restoring would replace that day (its profiles since the "
			    "backup are lost): move it away, or give --force",
			    dst, names[i]);
	}
	if (!rc)
		rc = copy_days(backup, dst, names, n, true, fn, ctx, out, err);
	pd_store_names_free(names, n);
	if (!rc && fsync_path(dst, true))
		rc = pd_errf(err, PD_EIO, "store: %s: %s", dst, strerror(errno));
	close(lock); /* releases the flock */
	return rc;
}
