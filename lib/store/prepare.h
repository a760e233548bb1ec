/*
 * prepare.h — the store core's ingest pipeline (issue 13), the same for
 * every backend: bytes in, a *prepared profile* out. Preparing decodes
 * (gunzip included) within the memory budget, applies the ingest policy
 * (service name, type whitelist, not empty, the declared type is the
 * profile's, creation time within what an id holds, the retention window
 * and the allowed clock skew), puts sample labels in canonical order and
 * computes the 128-bit content hash of every string, function, mapping,
 * location, stack and label set. A refusal comes with a typed reason
 * (enum pd_refusal), never only a message.
 *
 * A backend then only stores: it resolves the hashes to its own ids,
 * encodes the header and the sample block (codec.h) and commits. The
 * hashes are partition- and backend-independent: the same stack has the
 * same hash everywhere. Internal to lib/store (and its tests).
 */
#ifndef PD_STORE_PREPARE_H
#define PD_STORE_PREPARE_H

#include "store.h"

/* A 128-bit content hash: XXH3-128 of the symbol's content, seeded with
 * its kind. Laid out as xxhash's XXH128_hash_t (low half first), which is
 * how parents hash it (16 bytes). */
struct pd_h128 {
	uint64_t lo, hi;
};

/* The kinds of symbol; each is also its content hash's seed (the h column
 * of existing partitions depends on them: never change them). */
enum pd_sym_kind { PD_SYM_STR, PD_SYM_FN, PD_SYM_MAP, PD_SYM_LOC, PD_SYM_STACK, PD_SYM_LSET, PD_SYM_NKINDS };

struct pd_prepared {
	const struct pd_ingest *in; /* service, series labels: borrowed, valid while in is */
	struct pd_profile *p;       /* decoded, checked, sample labels sorted (owned) */
	const char *type;           /* the type to store it as: declared or inferred (static) */
	int64_t created_ns;         /* its creation time, within in's bounds */
	/* content hashes (one allocation): per string, function, mapping and
	 * location of p; per sample its stack (kh) and label set (bh, set
	 * only for a sample with labels) */
	struct pd_h128 *sh, *fh, *mh, *lh, *kh, *bh;
};

/* Prepare data (pprof, gzip or raw) for storing as in says, decoding
 * within lim (the backend's; the ingest's own per-sample and per-symbol
 * bytes and in->reserve are added here). 0 and *out (pd_prepared_free);
 * or an error, *out empty and *why (may be NULL) saying why: PD_EINVAL,
 * PD_ELIMIT, PD_EEXPIRED and PD_EBUSY always come with a reason,
 * PD_ENOMEM with PD_REFUSE_NONE. */
int pd_prepare(const struct pd_ingest *in, const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
	       struct pd_prepared *out, enum pd_refusal *why, struct pd_err *err) PD_WUR;
void pd_prepared_free(struct pd_prepared *pp);
/* Free the model and the hashes (p, sh...: NULL), keeping what the
 * metadata needs (in, type, created_ns): once a backend has encoded the
 * profile, before it waits for its commit. */
void pd_prepared_drop_profile(struct pd_prepared *pp);

/* The metadata of pp once stored as id, in stored_bytes (labels copied:
 * pd_meta_clear; out of memory leaves labels short, as before). */
void pd_prepared_meta(const struct pd_prepared *pp, const char *id, size_t stored_bytes,
		      struct pd_profile_meta *out);

/* A mapping's identity, pprof's merge key: its size rounded up to 4 KiB,
 * its file offset and its build id (or, without one, its file name). The
 * content hash and a backend's stored key must agree on it. */
static inline uint64_t pd_mapping_key_size(const struct pd_mapping *m)
{
	uint64_t size = m->limit - m->start;
	return (size + 0xfff) - ((size + 0xfff) % 0x1000);
}
static inline uint32_t pd_mapping_key_file(const struct pd_mapping *m)
{
	return m->build_id ? m->build_id : m->filename;
}

#endif
