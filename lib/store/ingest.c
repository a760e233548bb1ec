/*
 * ingest.c — the store core's ingest pipeline (prepare.h): bytes to a
 * prepared profile, the same for every backend. Decode, policy, canonical
 * label order, content hashes; no I/O, no locks (a backend calls it
 * before taking any). What is refused here is refused before any
 * partition is touched, with a typed reason.
 *
 * The content hashes are what the stored symbols are keyed by (the h
 * column of every SQLite partition, the keys a second backend would
 * share): their layout below must never change.
 */
#include "prepare.h"
#include "../pprof/ptype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_INLINE_ALL /* the one-shot hashes of small keys inline: no call, no dispatch */
#include <xxhash.h>



_Static_assert(sizeof(struct pd_h128) == sizeof(XXH128_hash_t), "parents hash a content hash as 16 bytes");

static struct pd_h128 h128(const void *p, size_t n, uint64_t seed)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(p, n, seed);
	return (struct pd_h128){h.low64, h.high64};
}

/* tmp emptied with room for n bytes (NULL: out of memory) */
static inline uint8_t *tmp_room(struct pd_buf *tmp, size_t n)
{
	tmp->len = 0;
	if (PD_LIKELY(n < tmp->cap))
		return tmp->ptr;
	return pd_buf_reserve(tmp, n + 1) ? NULL : tmp->ptr;
}

/*
 * The content hash of every symbol. Each is the hash of its children's
 * hashes and its own fields, in a fixed layout (the h column of existing
 * partitions depends on it: never change it):
 *   string    its bytes                                       seed PD_SYM_STR
 *   function  name, system name, file hashes; start line      seed PD_SYM_FN
 *   mapping   size rounded up to 4 KiB, file offset, hash of
 *             build id (or file if none) — pprof's merge key  seed PD_SYM_MAP
 *   location  mapping hash (0 if none), address relative to the mapping,
 *             folded byte; per line: function hash, line, column  PD_SYM_LOC
 *   stack     its location hashes                             seed PD_SYM_STACK
 *   label set per label: key hash, string hash, number, unit hash  PD_SYM_LSET
 * (integers little-endian 8 bytes, hashes 16 bytes low half first).
 */
static int hash_all(struct pd_prepared *pp, struct pd_err *err)
{
	const struct pd_profile *p = pp->p;
	struct pd_buf tmp = PD_BUF_INIT(0);
	int rc = 0;
	for (uint32_t i = 0; i < p->nstrings; i++)
		pp->sh[i] = h128(p->strings[i].ptr, p->strings[i].len, PD_SYM_STR);
	for (uint32_t i = 0; i < p->nfunctions; i++) {
		const struct pd_function *f = &p->functions[i];
		uint8_t hk[3 * sizeof(struct pd_h128) + 8];
		memcpy(hk, &pp->sh[f->name], 16);
		memcpy(hk + 16, &pp->sh[f->system_name], 16);
		memcpy(hk + 32, &pp->sh[f->filename], 16);
		memcpy(hk + 48, &f->start_line, 8);
		pp->fh[i] = h128(hk, sizeof hk, PD_SYM_FN);
	}
	for (uint32_t i = 0; i < p->nmappings; i++) {
		const struct pd_mapping *m = &p->mappings[i];
		uint64_t size = pd_mapping_key_size(m);
		uint8_t hk[16 + sizeof(struct pd_h128)];
		memcpy(hk, &size, 8);
		memcpy(hk + 8, &m->offset, 8);
		memcpy(hk + 16, &pp->sh[pd_mapping_key_file(m)], 16);
		pp->mh[i] = h128(hk, sizeof hk, PD_SYM_MAP);
	}
	for (uint32_t i = 0; i < p->nlocations; i++) {
		const struct pd_location *l = &p->locations[i];
		uint8_t *b = tmp_room(&tmp, 25 + 32 * (size_t)l->nlines);
		if (!b)
			goto oom;
		struct pd_h128 mh = {0, 0};
		uint64_t rel = l->address;
		if (l->mapping != PD_NONE) {
			mh = pp->mh[l->mapping];
			rel = l->address - p->mappings[l->mapping].start;
		}
		memcpy(b, &mh, 16);
		memcpy(b + 16, &rel, 8);
		b[24] = l->is_folded;
		size_t o = 25;
		for (uint32_t j = 0; j < l->nlines; j++, o += 32) {
			const struct pd_line *ln = &l->lines[j];
			memcpy(b + o, &pp->fh[ln->function], 16);
			memcpy(b + o + 16, &ln->line, 8);
			memcpy(b + o + 24, &ln->column, 8);
		}
		pp->lh[i] = h128(b, o, PD_SYM_LOC);
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pd_sample *s = &p->samples[i];
		size_t n = 16 * (size_t)s->nlocs, nl = 56 * (size_t)s->nlabels;
		uint8_t *b = tmp_room(&tmp, n > nl ? n : nl);
		if (!b)
			goto oom;
		for (uint32_t j = 0; j < s->nlocs; j++)
			memcpy(b + 16 * j, &pp->lh[s->locs[j]], 16);
		pp->kh[i] = h128(b, n, PD_SYM_STACK);
		if (!s->nlabels)
			continue;
		/* labels in the order the sample has them (sorted by prepare) */
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pd_label *l = &s->labels[j];
			memcpy(b + 56 * j, &pp->sh[l->key], 16);
			memcpy(b + 56 * j + 16, &pp->sh[l->str], 16);
			memcpy(b + 56 * j + 32, &l->num, 8);
			memcpy(b + 56 * j + 40, &pp->sh[l->num_unit], 16);
		}
		pp->bh[i] = h128(b, nl, PD_SYM_LSET);
	}
	goto out;
oom:
	rc = pd_errf(err, PD_ENOMEM, "out of memory");
out:
	pd_buf_free(&tmp);
	return rc;
}

/* "2026-11-30T12:00:00Z" of t (ns), rounded down to the second. */
static void rfc3339(int64_t t, char *buf, size_t n)
{
	struct tm tm;
	time_t sec = (time_t)(t / 1000000000 - (t % 1000000000 < 0));
	gmtime_r(&sec, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The policy on a decoded profile: type, emptiness, creation time. */
static int check(const struct pd_ingest *in, struct pd_prepared *pp, enum pd_refusal *why, struct pd_err *err)
{
	struct pd_profile *p = pp->p;
	if (p->nsamples == 0) {
		*why = PD_REFUSE_EMPTY;
		return pd_errf(err, PD_EINVAL, "malformed profile: profile is empty: no samples");
	}
	/* the declared type must be what the profile is (a CPU profile stored as
	 * heap would break every heap merge); none declared: inferred */
	int rc = pd_profile_check_type(p, in->type, &pp->type, err);
	if (rc) {
		/* in->type is a known type (checked before decoding): a declared
		 * type is refused for not being the profile's, none for being
		 * ambiguous */
		*why = rc != PD_EINVAL ? PD_REFUSE_NONE : in->type ? PD_REFUSE_TYPE_MISMATCH : PD_REFUSE_AMBIGUOUS_TYPE;
		return rc;
	}
	/* a label set's identity must not depend on the order a client wrote
	 * the labels in (pprof's merge keys them sorted) */
	pd_profile_sort_labels(p);
	int64_t created = in->created_ns ? in->created_ns : p->time_nanos;
	if (!created) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		created = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	/* the id holds 32 bits of unix seconds: a time it cannot hold would be
	 * acknowledged and never found again */
	if (created < 0 || created / 1000000000 > (int64_t)UINT32_MAX) {
		*why = PD_REFUSE_TIME_RANGE;
		return pd_errf(err, PD_EINVAL,
			       "the profile's time (%s %lld ns since the epoch) is outside what profd stores: "
			       "1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z",
			       in->created_ns ? "created_at" : "time_nanos", (long long)created);
	}
	char ts[40];
	if (in->min_created_ns && created < in->min_created_ns) {
		rfc3339(created, ts, sizeof ts);
		*why = PD_REFUSE_TOO_OLD;
		return pd_errf(err, PD_EEXPIRED, "the profile's time %s is older than the retention window: not stored",
			       ts);
	}
	if (in->max_created_ns && created > in->max_created_ns) {
		rfc3339(created, ts, sizeof ts);
		*why = PD_REFUSE_TOO_NEW;
		return pd_errf(err, PD_EINVAL,
			       "the profile's time %s (%s) is too far in the future: more than the allowed clock skew "
			       "(--max-future-skew) ahead of the collector's clock: not stored",
			       ts, in->created_ns ? "created_at" : "time_nanos");
	}
	pp->created_ns = created;
	return 0;
}

int pd_prepare(const struct pd_ingest *in, const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
	       struct pd_prepared *out, enum pd_refusal *why, struct pd_err *err)
{
	enum pd_refusal unused;
	if (!why)
		why = &unused;
	*why = PD_REFUSE_NONE;
	memset(out, 0, sizeof *out);
	out->in = in;
	if (!in->service || !*in->service || strlen(in->service) >= sizeof ((struct pd_profile_meta *)0)->service) {
		*why = PD_REFUSE_SERVICE;
		return pd_errf(err, PD_EINVAL, "service must be 1..%zu bytes",
			       sizeof ((struct pd_profile_meta *)0)->service - 1);
	}
	/* a service is a name that tables, logs and terminals print: no
	 * control characters (a newline or an escape sequence would forge
	 * rows of `profd get services` or recolour the terminal showing it) */
	for (const char *c = in->service; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			*why = PD_REFUSE_SERVICE;
			return pd_errf(err, PD_EINVAL, "service must not contain control characters (byte 0x%02x at %zu)",
				       (unsigned char)*c, (size_t)(c - in->service));
		}
	}
	bool known = !in->type || pd_ptype_find(in->type) >= 0; /* NULL: inferred */
	if (!known) {
		*why = PD_REFUSE_UNKNOWN_TYPE;
		return pd_errf(err, PD_EINVAL, "unknown profile type \"%s\"", in->type ? in->type : "");
	}
	/* decode, within the memory budget (the model and this ingest's own
	 * per-sample and per-symbol arrays) */
	struct pd_pprof_limits dl = *lim;
	dl.extra_per_sample = PD_INGEST_BYTES_PER_SAMPLE;
	dl.extra_per_symbol = PD_INGEST_BYTES_PER_SYMBOL;
	dl.reserve = in->reserve;
	dl.reserve_ctx = in->reserve_ctx;
	int rc = pd_pprof_decode(data, len, &dl, &out->p, err);
	if (rc) {
		if (rc != PD_EBUSY)
			pd_err_prefix(err, rc == PD_ELIMIT ? "profile over a limit" : "malformed profile");
		*why = rc == PD_EINVAL	 ? PD_REFUSE_MALFORMED
		       : rc == PD_ELIMIT ? PD_REFUSE_TOO_LARGE
		       : rc == PD_EBUSY	 ? PD_REFUSE_BUSY
					 : PD_REFUSE_NONE;
		out->p = NULL;
		return rc;
	}
	if ((rc = check(in, out, why, err)))
		goto fail;
	const struct pd_profile *p = out->p;
	size_t nh = (size_t)p->nstrings + p->nfunctions + p->nmappings + p->nlocations + 2 * p->nsamples;
	if (!(out->sh = malloc(nh * sizeof *out->sh + 1))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto fail;
	}
	out->fh = out->sh + p->nstrings, out->mh = out->fh + p->nfunctions, out->lh = out->mh + p->nmappings;
	out->kh = out->lh + p->nlocations, out->bh = out->kh + p->nsamples;
	if ((rc = hash_all(out, err)))
		goto fail;
	return 0;
fail:
	pd_prepared_free(out);
	out->in = in;
	return rc;
}

void pd_prepared_drop_profile(struct pd_prepared *pp)
{
	free(pp->sh);
	pd_profile_free(pp->p);
	pp->p = NULL;
	pp->sh = pp->fh = pp->mh = pp->lh = pp->kh = pp->bh = NULL;
}

void pd_prepared_free(struct pd_prepared *pp)
{
	pd_prepared_drop_profile(pp);
	memset(pp, 0, sizeof *pp);
}

void pd_prepared_meta(const struct pd_prepared *pp, const char *id, size_t stored_bytes,
		      struct pd_profile_meta *out)
{
	const struct pd_ingest *in = pp->in;
	memset(out, 0, sizeof *out);
	snprintf(out->id, sizeof out->id, "%s", id);
	snprintf(out->service, sizeof out->service, "%s", in->service);
	snprintf(out->type, sizeof out->type, "%s", pp->type);
	out->created_ns = pp->created_ns;
	out->stored_bytes = stored_bytes;
	if (in->nlabels) {
		out->labels = calloc(in->nlabels, sizeof *out->labels);
		for (size_t i = 0; out->labels && i < in->nlabels; i++) {
			out->labels[i].key = strdup(in->labels[i].key);
			out->labels[i].value = strdup(in->labels[i].value);
			out->nlabels++;
		}
	}
}
