/*
 * clickhouse.c — the ClickHouse store backend (issue 13): profd's store
 * model (store.h) on ClickHouse tables over its HTTP interface (ch.h), so
 * that any number of stateless `profd serve --store clickhouse://...`
 * share one store.
 *
 * Tables (schema version CH_SCHEMA, in the URL's database):
 *
 *   profd_schema  (version UInt32)                    which schema the tables have
 *   profiles      (day Date, service, type, created_ns Int64, id,
 *                  label_keys, label_values Array(String),
 *                  header, block, refs String, stored_bytes UInt64)
 *                 ReplacingMergeTree PARTITION BY day ORDER BY (service, type, created_ns, id)
 *   symbols       (day Date, kind UInt8, h FixedString(16), data String)
 *                 ReplacingMergeTree PARTITION BY day ORDER BY (kind, h)
 *   deleted       (day Date, id String)  ReplacingMergeTree PARTITION BY day ORDER BY id
 *
 * A profile is stored as the embedded store stores it (DESIGN.md): its
 * strings, functions, mappings, locations, stacks and label sets are
 * symbols, content-addressed by the store core's 128-bit hashes
 * (prepare.h), so two collectors that store the same stack write the same
 * symbols row, which ReplacingMergeTree keeps once; the profile row holds
 * the codec's header and sample block (codec.h, checksummed and seeded with
 * the id as in the embedded store), whose string, mapping, stack and label
 * set numbers are indexes into the row's refs (their hashes). A symbol's
 * data is the embedded store's layout with 16-byte hashes where that one
 * has seqs. Reading turns hashes into per-request seqs and materialises
 * with the embedded store's code (mat.h).
 *
 * Every table is partitioned by the UTC day of the profile's creation
 * (symbols too: a day's symbols are those its profiles use), so retention
 * is ALTER TABLE ... DROP PARTITION and needs no other bookkeeping.
 *
 * Writes: symbols first, then the profile row; an upload is acknowledged
 * only once ClickHouse acknowledged both (a retry writes the same rows,
 * which collapse). A profile row is never visible before its symbols.
 * DELETE writes a tombstone (deleted); retention drops both.
 *
 * Only SQL that Debian's ClickHouse 18.16 runs: no TTL, codecs, query
 * parameters, LowCardinality or mutations; strings are sent as
 * '\xHH...' literals, so nothing a client sends is parsed as SQL.
 */
#define _GNU_SOURCE
#include "ch.h"
#include "codec.h"
#include "mat.h"
#include "prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define CH_SCHEMA         1
#define DAY_NS            (86400LL * 1000000000LL)
#define CH_MAX_ANSWER     ((size_t)1 << 30)
#define CH_KNOWN_MAX      (1u << 20) /* symbols remembered as written, before the set is cleared */
#define CH_MAX_DAY        49672      /* 2105-12-31: the last date ClickHouse 18.16 parses */
#define CH_QUERY_SETTINGS "max_query_size=268435456&max_ast_elements=10000000&wait_end_of_query=1"

struct chs {
	struct pd_store base;
	struct pd_ch *ch;
	struct pd_pprof_limits lim;
	char *cluster;
	/* symbols this process wrote (day, kind, hash): not sent again */
	pthread_mutex_t mu;
	uint64_t *known;
	size_t kmask, kn;
	/* the last look for /readyz */
	int64_t health_at; /* CLOCK_MONOTONIC ns, 0 = never */
	bool health_bad;
	char health_msg[512];
};

static inline int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

static int nomem(struct pd_err *err)
{
	return pd_errf(err, PD_ENOMEM, "out of memory");
}

/* ---- the set of written symbols ---------------------------------------- */

static uint64_t known_key(int64_t day, int kind, struct pd_h128 h)
{
	uint64_t k = pd_hash_u64(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)day << 8 | (uint64_t)kind));
	return k ? k : 1;
}

static bool known_has(struct chs *s, uint64_t k)
{
	for (size_t i = k & s->kmask;; i = (i + 1) & s->kmask) {
		if (s->known[i] == k)
			return true;
		if (!s->known[i])
			return false;
	}
}

static void known_put(struct chs *s, uint64_t k)
{
	if (s->kn >= CH_KNOWN_MAX) {
		memset(s->known, 0, (s->kmask + 1) * sizeof *s->known);
		s->kn = 0;
	}
	size_t i = k & s->kmask;
	while (s->known[i] && s->known[i] != k)
		i = (i + 1) & s->kmask;
	if (!s->known[i]) {
		s->known[i] = k;
		s->kn++;
	}
}

/* ---- SQL ------------------------------------------------------------------ */

static int q(struct chs *s, const char *sql, struct pd_buf *out, struct pd_err *err)
{
	return pd_ch_query(s->ch, sql, NULL, 0, CH_QUERY_SETTINGS, out, err);
}

static int create_schema(struct chs *s, struct pd_err *err)
{
	static const char *const ddl[] = {
	    "CREATE TABLE IF NOT EXISTS profd_schema (version UInt32) ENGINE = MergeTree ORDER BY version",
	    "CREATE TABLE IF NOT EXISTS profiles (day Date, service String, type String, created_ns Int64, id String, "
	    "label_keys Array(String), label_values Array(String), header String, block String, refs String, "
	    "stored_bytes UInt64) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (service, type, created_ns, "
	    "id)",
	    "CREATE TABLE IF NOT EXISTS symbols (day Date, kind UInt8, h FixedString(16), data String) "
	    "ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (kind, h)",
	    "CREATE TABLE IF NOT EXISTS deleted (day Date, id String) ENGINE = ReplacingMergeTree PARTITION BY day "
	    "ORDER BY id",
	};
	struct pd_buf out = PD_BUF_INIT(1 << 20);
	int rc = 0;
	for (size_t i = 0; i < sizeof ddl / sizeof *ddl && !rc; i++)
		rc = q(s, ddl[i], NULL, err);
	if (!rc)
		rc = q(s, "SELECT toUInt32(max(version)), toUInt64(count()) FROM profd_schema FORMAT RowBinary", &out,
		       err);
	if (!rc) {
		struct pd_rb_rd r = {out.ptr, out.ptr + out.len, false};
		uint32_t ver = pd_rb_get_u16(&r);
		ver |= (uint32_t)pd_rb_get_u16(&r) << 16; /* UInt32, little-endian */
		uint64_t n = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse at %s: unreadable answer about the schema version",
			             pd_ch_where(s->ch));
		else if (n && ver > CH_SCHEMA)
			rc = pd_errf(
			    err, PD_EUSAGE,
			    "ClickHouse at %s: the tables have schema version %u, newer than this profd knows (%d): "
			    "upgrade profd, or use another database",
			    pd_ch_where(s->ch), ver, CH_SCHEMA);
		else if (!n)
			rc = q(s, "INSERT INTO profd_schema VALUES (1)", NULL, err);
	}
	pd_buf_free(&out);
	return rc;
}

/* ---- ingest ------------------------------------------------------------------ */

static int put_h(struct pd_buf *b, struct pd_h128 h)
{
	uint8_t x[16];
	memcpy(x, &h.lo, 8);
	memcpy(x + 8, &h.hi, 8);
	return pd_buf_append(b, x, 16);
}

static int put_v(struct pd_buf *b, uint64_t v)
{
	return pd_rb_len(b, v);
}

struct ing {
	struct chs *s;
	struct pd_prepared *pp;
	int64_t day;
	struct pd_buf rows; /* symbols, RowBinary */
	struct pd_buf data; /* one symbol's data */
	size_t nrows;
	uint64_t *keys; /* known keys of the rows, marked written after the insert */
	size_t nkeys, ckeys;
	/* refs: the header's strings and mappings, the stacks and label sets */
	struct pd_hidx ix[4];
	struct pd_h128 *ref[4];
	size_t nref[4], cref[4];
};
enum { R_STR, R_MAP, R_STK, R_LS };

static bool ref_eq(void *ctx, uint32_t v)
{
	void **c = ctx;
	const struct pd_h128 *arr = c[0], *k = c[1];
	return arr[v].lo == k->lo && arr[v].hi == k->hi;
}

/* The 1-based local number of hash h in refs table t (added if new). */
static int ref_of(struct ing *g, int t, struct pd_h128 h, int64_t *out)
{
	uint64_t hk = h.lo ^ h.hi;
	void *ctx[2] = {g->ref[t], &h};
	uint32_t v = pd_hidx_find(&g->ix[t], hk, ref_eq, ctx);
	if (v != PD_NONE) {
		*out = (int64_t)v + 1;
		return 0;
	}
	if (pd_grow((void **)&g->ref[t], &g->cref[t], g->nref[t] + 1, sizeof *g->ref[t]) ||
	    pd_hidx_insert(&g->ix[t], hk, (uint32_t)g->nref[t]))
		return PD_ENOMEM;
	g->ref[t][g->nref[t]] = h;
	*out = (int64_t)++g->nref[t];
	return 0;
}

/* Whether (kind, h) was written by this process before (then it is not
 * encoded nor sent again); if not, its key is kept for after the insert. */
static int sym_known(struct ing *g, int kind, struct pd_h128 h, bool *known)
{
	uint64_t k = known_key(g->day, kind, h);
	pthread_mutex_lock(&g->s->mu);
	*known = known_has(g->s, k);
	pthread_mutex_unlock(&g->s->mu);
	if (*known)
		return 0;
	if (pd_grow((void **)&g->keys, &g->ckeys, g->nkeys + 1, sizeof *g->keys))
		return PD_ENOMEM;
	g->keys[g->nkeys++] = k;
	return 0;
}

/* Queue symbol (kind, h) with g->data as its data. */
static int sym_row(struct ing *g, int kind, struct pd_h128 h)
{
	uint8_t hb[16];
	memcpy(hb, &h.lo, 8);
	memcpy(hb + 8, &h.hi, 8);
	if (pd_rb_u16(&g->rows, (uint16_t)g->day) || pd_rb_u8(&g->rows, (uint8_t)kind) ||
	    pd_rb_fixed(&g->rows, hb, 16) || pd_rb_str(&g->rows, g->data.ptr, g->data.len))
		return PD_ENOMEM;
	g->nrows++;
	return 0;
}

/* The symbols rows of every symbol of the profile (each once). */
static int enc_symbols(struct ing *g)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	struct pd_buf *d = &g->data;
	int rc = 0;
	struct pd_h128 *all[] = {pp->sh, pp->fh, pp->mh, pp->lh, pp->kh, pp->bh};
	size_t counts[] = {p->nstrings, p->nfunctions, p->nmappings, p->nlocations, p->nsamples, p->nsamples};
	for (int k = PD_SYM_STR; k < PD_SYM_NKINDS && !rc; k++) {
		struct pd_hidx seen;
		if (pd_hidx_init(&seen, counts[k] + 16))
			return PD_ENOMEM;
		for (size_t i = 0; i < counts[k] && !rc; i++) {
			if (k == PD_SYM_LSET && !p->samples[i].nlabels)
				continue;
			struct pd_h128 h = all[k][i];
			void *ctx[2] = {all[k], &h};
			if (pd_hidx_find(&seen, h.lo ^ h.hi, ref_eq, ctx) != PD_NONE)
				continue;
			bool known = false;
			if (pd_hidx_insert(&seen, h.lo ^ h.hi, (uint32_t)i) || sym_known(g, k, h, &known))
				rc = PD_ENOMEM;
			if (rc || known)
				continue;
			d->len = 0;
			switch (k) {
			case PD_SYM_STR: rc = rc || pd_buf_append(d, p->strings[i].ptr, p->strings[i].len); break;
			case PD_SYM_FN: {
				const struct pd_function *f = &p->functions[i];
				rc = rc || put_h(d, pp->sh[f->name]) || put_h(d, pp->sh[f->system_name]) ||
				     put_h(d, pp->sh[f->filename]) || put_v(d, pd_zz(f->start_line));
				break;
			}
			case PD_SYM_MAP: {
				const struct pd_mapping *m = &p->mappings[i];
				uint64_t flags = (uint64_t)m->has_functions | (uint64_t)m->has_filenames << 1 |
				                 (uint64_t)m->has_line_numbers << 2 |
				                 (uint64_t)m->has_inline_frames << 3;
				rc = rc || put_v(d, pd_mapping_key_size(m)) || put_v(d, m->offset) ||
				     put_h(d, pp->sh[pd_mapping_key_file(m)]) || put_v(d, m->start) ||
				     put_v(d, m->limit) || put_h(d, pp->sh[m->filename]) ||
				     put_h(d, pp->sh[m->build_id]) || put_v(d, flags);
				break;
			}
			case PD_SYM_LOC: {
				const struct pd_location *l = &p->locations[i];
				uint64_t rel = l->address;
				bool hm = l->mapping != PD_NONE;
				if (hm)
					rel = l->address - p->mappings[l->mapping].start;
				rc = rc || pd_rb_u8(d, hm) || (hm && put_h(d, pp->mh[l->mapping])) || put_v(d, rel) ||
				     put_v(d, l->is_folded) || put_v(d, l->nlines);
				for (uint32_t j = 0; j < l->nlines && !rc; j++)
					rc = put_h(d, pp->fh[l->lines[j].function]) ||
					     put_v(d, pd_zz(l->lines[j].line)) || put_v(d, pd_zz(l->lines[j].column));
				break;
			}
			case PD_SYM_STACK: {
				const struct pd_sample *sm = &p->samples[i];
				for (uint32_t j = 0; j < sm->nlocs && !rc; j++)
					rc = put_h(d, pp->lh[sm->locs[j]]);
				break;
			}
			case PD_SYM_LSET: {
				const struct pd_sample *sm = &p->samples[i];
				for (uint32_t j = 0; j < sm->nlabels && !rc; j++) {
					const struct pd_label *l = &sm->labels[j];
					rc = put_h(d, pp->sh[l->key]) || put_h(d, pp->sh[l->str]) ||
					     put_v(d, pd_zz(l->num)) || put_h(d, pp->sh[l->num_unit]);
				}
				break;
			}
			}
			if (!rc)
				rc = sym_row(g, k, h);
		}
		pd_hidx_free(&seen);
	}
	return rc ? PD_ENOMEM : 0;
}

/* The header (codec.h) with the profile's strings and mappings as refs. */
static int enc_header(struct ing *g, struct pd_buf *out, struct pd_err *err)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	struct pd_shdr h = {0};
	int rc = 0;
	h.nst = p->nsample_types;
	h.ncomments = p->ncomments;
	h.nmaps = p->nmappings;
	h.stypes = calloc(2 * (size_t)h.nst + 1, sizeof *h.stypes);
	h.comments = calloc((size_t)h.ncomments + 1, sizeof *h.comments);
	h.maps = calloc((size_t)h.nmaps + 1, sizeof *h.maps);
	if (!h.stypes || !h.comments || !h.maps)
		rc = PD_ENOMEM;
	for (uint32_t i = 0; i < h.nst && !rc; i++)
		rc = ref_of(g, R_STR, pp->sh[p->sample_types[i].type], &h.stypes[2 * i]) ||
		     ref_of(g, R_STR, pp->sh[p->sample_types[i].unit], &h.stypes[2 * i + 1]);
	for (uint32_t i = 0; i < h.ncomments && !rc; i++)
		rc = ref_of(g, R_STR, pp->sh[p->comments[i]], &h.comments[i]);
	for (uint32_t i = 0; i < h.nmaps && !rc; i++)
		rc = ref_of(g, R_MAP, pp->mh[i], &h.maps[i]);
	if (!rc)
		rc = ref_of(g, R_STR, pp->sh[p->period_type.type], &h.ptype) ||
		     ref_of(g, R_STR, pp->sh[p->period_type.unit], &h.punit) ||
		     ref_of(g, R_STR, pp->sh[p->drop_frames], &h.drop) ||
		     ref_of(g, R_STR, pp->sh[p->keep_frames], &h.keep) ||
		     ref_of(g, R_STR, pp->sh[p->default_sample_type], &h.dflt) ||
		     ref_of(g, R_STR, pp->sh[p->doc_url], &h.doc);
	h.period = p->period;
	h.time = p->time_nanos;
	h.duration = p->duration_nanos;
	if (!rc)
		rc = pd_enc_header(&h, out, err);
	else
		rc = nomem(err);
	pd_shdr_free(&h);
	return rc;
}

/* The sample block (codec.h): stacks and label sets as refs. */
static int enc_block(struct ing *g, struct pd_buf *out, struct pd_err *err)
{
	const struct pd_prepared *pp = g->pp;
	const struct pd_profile *p = pp->p;
	size_t n = p->nsamples;
	int64_t *stk = malloc((n + 1) * sizeof *stk), *ls = malloc((n + 1) * sizeof *ls);
	int rc = stk && ls ? 0 : PD_ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = ref_of(g, R_STK, pp->kh[i], &stk[i]);
		ls[i] = 0;
		if (!rc && p->samples[i].nlabels)
			rc = ref_of(g, R_LS, pp->bh[i], &ls[i]);
	}
	if (rc)
		rc = nomem(err);
	else {
		ZSTD_CCtx *z = ZSTD_createCCtx();
		rc = z ? pd_enc_block(z, p, stk, ls, out, err) : nomem(err);
		ZSTD_freeCCtx(z);
	}
	free(stk);
	free(ls);
	return rc;
}

/* refs: for each of strings, mappings, stacks, label sets: a varint
 * count, then that many 16-byte hashes. */
static int enc_refs(struct ing *g, struct pd_buf *out)
{
	for (int t = 0; t < 4; t++) {
		if (put_v(out, g->nref[t]))
			return PD_ENOMEM;
		for (size_t i = 0; i < g->nref[t]; i++)
			if (put_h(out, g->ref[t][i]))
				return PD_ENOMEM;
	}
	return 0;
}

static void ing_free(struct ing *g)
{
	pd_buf_free(&g->rows);
	pd_buf_free(&g->data);
	free(g->keys);
	for (int t = 0; t < 4; t++) {
		pd_hidx_free(&g->ix[t]);
		free(g->ref[t]);
	}
}

/* A framed blob (codec.h) of payload into out. */
static int framed(const struct pd_buf *payload, const char *id, enum pd_blob_role role, struct pd_buf *out)
{
	size_t start = out->len;
	if (pd_blob_begin(out) || pd_buf_append(out, payload->ptr, payload->len))
		return PD_ENOMEM;
	pd_blob_seal(out, start, pd_blob_seed(id, strlen(id), role));
	return 0;
}

static int ch_ingest(struct pd_store *base, const struct pd_ingest *in, const uint8_t *data, size_t len,
                     struct pd_profile_meta *out, enum pd_refusal *why, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	memset(out, 0, sizeof *out);
	if (why)
		*why = PD_REFUSE_NONE;
	for (size_t i = 0; i < in->nlabels; i++)
		if (!in->labels[i].key || !in->labels[i].value)
			return pd_errf(err, PD_EINVAL, "insert label %s: no value",
			               in->labels[i].key ? in->labels[i].key : "(null)");
	struct pd_prepared pp;
	int rc = pd_prepare(in, data, len, &s->lim, &pp, why, err);
	if (rc)
		return rc;
	struct ing g;
	memset(&g, 0, sizeof g);
	g.s = s;
	g.pp = &pp;
	g.day = floor_div(pp.created_ns, DAY_NS);
	g.rows.max = 0;
	char id[PD_STORE_ID_LEN + 1];
	pd_xid_new(pp.created_ns, id);
	struct pd_buf hdr = PD_BUF_INIT(0), blk = PD_BUF_INIT(0), refs = PD_BUF_INIT(0), row = PD_BUF_INIT(0),
	              fh = PD_BUF_INIT(0), fb = PD_BUF_INIT(0);
	for (int t = 0; t < 4 && !rc; t++)
		rc = pd_hidx_init(&g.ix[t], t == R_STK ? pp.p->nsamples + 16 : 64) ? nomem(err) : 0;
	if (!rc && enc_symbols(&g))
		rc = nomem(err);
	if (!rc)
		rc = enc_header(&g, &hdr, err);
	if (!rc)
		rc = enc_block(&g, &blk, err);
	if (!rc &&
	    (enc_refs(&g, &refs) || framed(&hdr, id, PD_BLOB_HEADER, &fh) || framed(&blk, id, PD_BLOB_BLOCK, &fb)))
		rc = nomem(err);
	if (rc)
		goto out;
	if (fb.len > PD_STORE_MAX_BLOCK) {
		if (why)
			*why = PD_REFUSE_TOO_LARGE;
		rc = pd_errf(err, PD_ELIMIT, "store: sample block over %u bytes", PD_STORE_MAX_BLOCK);
		goto out;
	}
	/* the profile row */
	const struct pd_ingest *gi = pp.in;
	bool ok = !pd_rb_u16(&row, (uint16_t)g.day) && !pd_rb_str(&row, gi->service, strlen(gi->service)) &&
	          !pd_rb_str(&row, pp.type, strlen(pp.type)) && !pd_rb_u64(&row, (uint64_t)pp.created_ns) &&
	          !pd_rb_str(&row, id, strlen(id)) && !pd_rb_len(&row, gi->nlabels);
	/* series labels sorted by key, as the metadata has them */
	struct pd_profile_meta m;
	pd_prepared_meta(&pp, id, fb.len, &m);
	for (size_t i = 0; ok && i < m.nlabels; i++)
		ok = !pd_rb_str(&row, m.labels[i].key, strlen(m.labels[i].key));
	ok = ok && !pd_rb_len(&row, m.nlabels);
	for (size_t i = 0; ok && i < m.nlabels; i++)
		ok = !pd_rb_str(&row, m.labels[i].value, strlen(m.labels[i].value));
	ok = ok && !pd_rb_str(&row, fh.ptr, fh.len) && !pd_rb_str(&row, fb.ptr, fb.len) &&
	     !pd_rb_str(&row, refs.ptr, refs.len) && !pd_rb_u64(&row, fb.len);
	if (!ok || m.nlabels != gi->nlabels) {
		pd_meta_clear(&m);
		rc = nomem(err);
		goto out;
	}
	pd_prepared_drop_profile(&pp);
	/* symbols first: a profile row is never visible before them */
	if (g.nrows && (rc = pd_ch_query(s->ch, "INSERT INTO symbols FORMAT RowBinary", g.rows.ptr, g.rows.len,
	                                 CH_QUERY_SETTINGS, NULL, err)))
		goto fail;
	if ((rc = pd_ch_query(s->ch, "INSERT INTO profiles FORMAT RowBinary", row.ptr, row.len, CH_QUERY_SETTINGS, NULL,
	                      err)))
		goto fail;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < g.nkeys; i++)
		known_put(s, g.keys[i]);
	pthread_mutex_unlock(&s->mu);
	*out = m;
	goto out;
fail:
	pd_meta_clear(&m);
	pd_err_prefix(err, "store");
out:
	pd_buf_free(&hdr), pd_buf_free(&blk), pd_buf_free(&refs), pd_buf_free(&row), pd_buf_free(&fh), pd_buf_free(&fb);
	ing_free(&g);
	pd_prepared_free(&pp);
	return rc;
}

/* ---- find ---------------------------------------------------------------------- */

/* " AND day BETWEEN 'A' AND 'B'" for [from, to] (ns) */
static int days_clause(struct pd_buf *b, int64_t from, int64_t to)
{
	char a[16], z[16];
	int64_t d0 = floor_div(from < 0 ? 0 : from, DAY_NS), d1 = floor_div(to, DAY_NS);
	if (d1 > CH_MAX_DAY) /* ids end in 2106; ClickHouse 18.16 parses no later date */
		d1 = CH_MAX_DAY;
	if (d0 > d1)
		d0 = d1;
	pd_store_day_name(d0, a);
	pd_store_day_name(d1, z);
	return pd_buf_appendf(b, " AND day BETWEEN '%s' AND '%s'", a, z);
}

static int ch_find(struct pd_store *base, const struct pd_store_query *fq, pd_meta_fn fn, void *ctx,
                   struct pd_store_skipped *skipped, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	(void)skipped; /* ClickHouse has no damaged day to skip: it answers or fails */
	if (!fq->service || !*fq->service)
		return pd_errf(err, PD_EINVAL, "missing \"service\"");
	if (fq->to_ns < fq->from_ns)
		return pd_errf(err, PD_EINVAL, "\"from\" is after \"to\"");
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	bool ok = !pd_buf_appendf(&sql, "SELECT id, service, type, created_ns, label_keys, label_values, stored_bytes "
	                                "FROM profiles FINAL WHERE service = ") &&
	          !pd_ch_lit_s(&sql, fq->service);
	if (ok && fq->type)
		ok = !pd_buf_appendf(&sql, " AND type = ") && !pd_ch_lit_s(&sql, fq->type);
	ok = ok &&
	     !pd_buf_appendf(&sql, " AND created_ns BETWEEN %lld AND %lld", (long long)fq->from_ns,
	                     (long long)fq->to_ns) &&
	     !days_clause(&sql, fq->from_ns, fq->to_ns);
	for (size_t i = 0; ok && i < fq->nlabels; i++) {
		const char *k = fq->labels[i].key, *v = fq->labels[i].value ? fq->labels[i].value : "";
		ok = !pd_buf_appendf(&sql, " AND has(label_keys, ") && !pd_ch_lit_s(&sql, k) &&
		     !pd_buf_appendf(&sql, ") AND label_values[indexOf(label_keys, ") && !pd_ch_lit_s(&sql, k) &&
		     !pd_buf_appendf(&sql, ")] = ") && !pd_ch_lit_s(&sql, v);
	}
	ok = ok && !pd_buf_appendf(&sql, " AND id NOT IN (SELECT id FROM deleted WHERE 1") &&
	     !days_clause(&sql, fq->from_ns, fq->to_ns) && !pd_buf_appendf(&sql, ")");
	if (ok && fq->limit)
		ok = !pd_buf_appendf(&sql, " ORDER BY created_ns DESC, id DESC LIMIT %zu", fq->limit);
	else if (ok)
		ok = !pd_buf_appendf(&sql, " ORDER BY created_ns, id");
	ok = ok && !pd_buf_appendf(&sql, " FORMAT RowBinary") && !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	if (rc) {
		pd_buf_free(&ans);
		return rc;
	}
	/* parse every row first (the newest-first answer of a limit is then
	 * walked backwards), then call fn in ascending time */
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	size_t n = 0, cap = 0;
	const uint8_t **starts = NULL;
	while (r.p < r.end && !r.bad) {
		if (pd_grow((void **)&starts, &cap, n + 1, sizeof *starts)) {
			rc = nomem(err);
			break;
		}
		starts[n++] = r.p;
		size_t len;
		(void)pd_rb_get_str(&r, &len), (void)pd_rb_get_str(&r, &len), (void)pd_rb_get_str(&r, &len);
		(void)pd_rb_get_u64(&r);
		for (int a = 0; a < 2; a++)
			for (uint64_t k = pd_rb_get_len(&r); k-- && !r.bad;)
				(void)pd_rb_get_str(&r, &len);
		(void)pd_rb_get_u64(&r);
	}
	if (!rc && r.bad)
		rc = pd_errf(err, PD_EIO, "ClickHouse at %s: a malformed answer to a query of profiles",
		             pd_ch_where(s->ch));
	for (size_t j = 0; j < n && !rc; j++) {
		struct pd_rb_rd x = {fq->limit ? starts[n - 1 - j] : starts[j], ans.ptr + ans.len, false};
		struct pd_profile_meta m;
		memset(&m, 0, sizeof m);
		size_t len;
		const uint8_t *v = pd_rb_get_str(&x, &len);
		snprintf(m.id, sizeof m.id, "%.*s", (int)len, (const char *)v);
		v = pd_rb_get_str(&x, &len);
		snprintf(m.service, sizeof m.service, "%.*s", (int)len, (const char *)v);
		v = pd_rb_get_str(&x, &len);
		snprintf(m.type, sizeof m.type, "%.*s", (int)len, (const char *)v);
		m.created_ns = (int64_t)pd_rb_get_u64(&x);
		uint64_t nk = pd_rb_get_len(&x);
		if (nk > 4096 || !(m.labels = calloc(nk + 1, sizeof *m.labels))) {
			rc = nk > 4096 ? pd_errf(err, PD_EIO, "ClickHouse: a profile with %llu labels",
			                         (unsigned long long)nk)
			               : nomem(err);
			break;
		}
		for (uint64_t k = 0; k < nk && !rc; k++) {
			v = pd_rb_get_str(&x, &len);
			if (!(m.labels[k].key = strndup((const char *)v, len)))
				rc = nomem(err);
			m.nlabels = k + 1;
		}
		uint64_t nvl = pd_rb_get_len(&x);
		for (uint64_t k = 0; k < nvl && !rc; k++) {
			v = pd_rb_get_str(&x, &len);
			if (k < nk && !(m.labels[k].value = strndup((const char *)v, len)))
				rc = nomem(err);
		}
		for (size_t k = 0; k < m.nlabels && !rc; k++)
			if (!m.labels[k].value && !(m.labels[k].value = strdup("")))
				rc = nomem(err);
		m.stored_bytes = (size_t)pd_rb_get_u64(&x);
		if (!rc && x.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed profile row");
		if (!rc)
			rc = fn(ctx, &m);
		pd_meta_clear(&m);
	}
	free(starts);
	pd_buf_free(&ans);
	return rc;
}

/* ---- remove, services, retention, stats ------------------------------------- */

static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n != PD_STORE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'v')))
			return false;
	return true;
}

/* How many live (not deleted) profiles have this id (0 or 1). */
static int live(struct chs *s, const char *id, int64_t day, uint64_t *n, struct pd_err *err)
{
	char dn[16];
	pd_store_day_name(day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(1 << 16);
	int rc = pd_buf_appendf(&sql,
	                        "SELECT toUInt64(count()) FROM profiles WHERE day = '%s' AND id = '%s' AND id NOT IN "
	                        "(SELECT id FROM deleted WHERE day = '%s') FORMAT RowBinary",
	                        dn, id, dn) ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : q(s, (const char *)sql.ptr, &ans, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		*n = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	return rc;
}

static int ch_remove(struct pd_store *base, const char *id, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	int64_t t = id_ok(id) ? pd_xid_time(id) : -1;
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "no profile %s", id);
	int64_t day = floor_div(t, DAY_NS);
	uint64_t n = 0;
	int rc = live(s, id, day, &n, err);
	if (rc)
		return rc;
	if (!n)
		return pd_errf(err, PD_ENOTFOUND, "no profile %s", id);
	struct pd_buf row = PD_BUF_INIT(0);
	rc = pd_rb_u16(&row, (uint16_t)day) || pd_rb_str(&row, id, strlen(id))
	         ? nomem(err)
	         : pd_ch_query(s->ch, "INSERT INTO deleted FORMAT RowBinary", row.ptr, row.len, CH_QUERY_SETTINGS, NULL,
	                       err);
	pd_buf_free(&row);
	return rc;
}

static int ch_services(struct pd_store *base, char ***out, size_t *n, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	*n = 0;
	struct pd_buf ans = PD_BUF_INIT(CH_MAX_ANSWER);
	int rc = q(s,
	           "SELECT DISTINCT service FROM profiles WHERE id NOT IN (SELECT id FROM deleted) ORDER BY service "
	           "FORMAT RowBinary",
	           &ans, err);
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	size_t cap = 0;
	char **v = NULL;
	while (!rc && r.p < r.end) {
		size_t len;
		const uint8_t *p = pd_rb_get_str(&r, &len);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
			break;
		}
		if (pd_grow((void **)&v, &cap, *n + 1, sizeof *v) || !(v[*n] = strndup((const char *)p, len))) {
			rc = nomem(err);
			break;
		}
		(*n)++;
	}
	if (rc) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
	} else {
		*out = v;
	}
	pd_buf_free(&ans);
	return rc;
}

/* The days (partitions) present in our tables, ascending. */
static int days_present(struct chs *s, int64_t **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	int rc = pd_buf_appendf(
	             &sql, "SELECT DISTINCT toUInt16(min_date) AS d FROM system.parts WHERE active AND database = ") ||
	                 pd_ch_lit_s(&sql, pd_ch_database(s->ch)) ||
	                 pd_buf_appendf(
	                     &sql, " AND table IN ('profiles', 'symbols', 'deleted') ORDER BY d FORMAT RowBinary") ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : q(s, (const char *)sql.ptr, &ans, err);
	size_t cap = 0;
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		uint16_t d = pd_rb_get_u16(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
		else if (pd_grow((void **)out, &cap, *n + 1, sizeof **out))
			rc = nomem(err);
		else
			(*out)[(*n)++] = d;
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static int ch_retain(struct pd_store *base, int64_t cutoff, size_t *dropped, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*dropped = 0;
	int64_t *days;
	size_t n;
	int rc = days_present(s, &days, &n, err);
	static const char *const tables[] = {"profiles", "symbols", "deleted"};
	for (size_t i = 0; i < n && !rc; i++) {
		if ((days[i] + 1) * DAY_NS > cutoff) /* the day ends after the cutoff: kept */
			continue;
		char dn[16], sql[160];
		pd_store_day_name(days[i], dn);
		for (size_t t = 0; t < 3 && !rc; t++) {
			snprintf(sql, sizeof sql, "ALTER TABLE %s DROP PARTITION '%s'", tables[t], dn);
			rc = q(s, sql, NULL, err);
		}
		if (!rc)
			(*dropped)++;
	}
	free(days);
	return rc;
}

static int ch_stats(struct pd_store *base, struct pd_store_stats *st, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	memset(st, 0, sizeof *st);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(1 << 16);
	int rc = pd_buf_appendf(&sql,
	                        "SELECT toUInt64(uniqExact(partition)), toUInt64(sum(bytes_on_disk)) FROM system.parts "
	                        "WHERE active AND database = ") ||
	                 pd_ch_lit_s(&sql, pd_ch_database(s->ch)) ||
	                 pd_buf_appendf(&sql, " AND table IN ('profiles', 'symbols', 'deleted') FORMAT RowBinary") ||
	                 pd_buf_append(&sql, "", 1)
	             ? nomem(err)
	             : q(s, (const char *)sql.ptr, &ans, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		st->partitions = pd_rb_get_u64(&r);
		st->disk_bytes = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	if (!rc)
		rc = q(s,
		       "SELECT toUInt64(count()) FROM profiles FINAL WHERE id NOT IN (SELECT id FROM deleted) FORMAT "
		       "RowBinary",
		       &ans, err);
	if (!rc) {
		struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
		st->profiles = pd_rb_get_u64(&r);
		if (r.bad)
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer");
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	return rc;
}

/* ---- reading: hashes to seqs, symbols fetched a level at a time ---------------- */

/* One day's symbols as a request sees them: every hash met gets a seq
 * (from 1, per kind), its data once fetched (the ClickHouse layout). */
struct csym {
	struct pd_h128 h;
	uint32_t off, len; /* data in day.bytes */
	bool have, want;   /* fetched; asked for in the next round */
};
struct cday {
	struct chs *s;
	int64_t day;
	struct pd_hidx ix[PD_SYM_NKINDS];
	struct csym *v[PD_SYM_NKINDS];
	size_t n[PD_SYM_NKINDS], cap[PD_SYM_NKINDS];
	size_t nwant;
	struct pd_buf bytes;
	struct pd_err *err;
};

static bool csym_eq(void *ctx, uint32_t v)
{
	void **c = ctx;
	const struct csym *arr = c[0];
	const struct pd_h128 *k = c[1];
	return arr[v].h.lo == k->lo && arr[v].h.hi == k->hi;
}

static int cday_init(struct cday *d, struct chs *s, int64_t day, struct pd_err *err)
{
	memset(d, 0, sizeof *d);
	d->s = s;
	d->day = day;
	d->err = err;
	for (int k = 0; k < PD_SYM_NKINDS; k++)
		if (pd_hidx_init(&d->ix[k], 256))
			return nomem(err);
	return 0;
}

static void cday_free(struct cday *d)
{
	for (int k = 0; k < PD_SYM_NKINDS; k++) {
		pd_hidx_free(&d->ix[k]);
		free(d->v[k]);
	}
	pd_buf_free(&d->bytes);
}

/* The seq of (kind, h), assigned if new (and then wanted). */
static int cday_seq(struct cday *d, int k, struct pd_h128 h, int64_t *seq)
{
	void *ctx[2] = {d->v[k], &h};
	uint32_t v = pd_hidx_find(&d->ix[k], h.lo ^ h.hi, csym_eq, ctx);
	if (v == PD_NONE) {
		if (pd_grow((void **)&d->v[k], &d->cap[k], d->n[k] + 1, sizeof *d->v[k]) ||
		    pd_hidx_insert(&d->ix[k], h.lo ^ h.hi, (uint32_t)d->n[k]))
			return PD_ENOMEM;
		v = (uint32_t)d->n[k]++;
		d->v[k][v] = (struct csym){h, 0, 0, false, true};
		d->nwant++;
	}
	*seq = (int64_t)v + 1;
	return 0;
}

static struct pd_h128 rd_h(struct pd_rd *r)
{
	struct pd_h128 h = {0, 0};
	if (r->bad || r->end - r->p < 16) {
		r->bad = true;
		return h;
	}
	memcpy(&h.lo, r->p, 8);
	memcpy(&h.hi, r->p + 8, 8);
	r->p += 16;
	return h;
}

/* Convert symbol (k, seq)'s data to the embedded store's layout (mat.h:
 * children as seqs) into out, assigning seqs to its children. */
static int convert(struct cday *d, int k, const struct csym *c, struct pd_buf *out)
{
	struct pd_rd r = {d->bytes.ptr + c->off, d->bytes.ptr + c->off + c->len, false};
	out->len = 0;
	if (k == PD_SYM_STR)
		return pd_buf_append(out, r.p, c->len) ? PD_ENOMEM : 0;
	if (pd_buf_reserve(out, (size_t)c->len + 64))
		return PD_ENOMEM;
	int64_t sq;
	int rc = 0;
#define CHILD(kind)                                                                                                    \
	do {                                                                                                           \
		struct pd_h128 h_ = rd_h(&r);                                                                          \
		if (r.bad || (rc = cday_seq(d, (kind), h_, &sq)) || (rc = put_v(out, (uint64_t)sq)))                   \
			goto done;                                                                                     \
	} while (0)
#define VAL()                                                                                                          \
	do {                                                                                                           \
		uint64_t v_ = pd_rd_v(&r);                                                                             \
		if (r.bad || (rc = put_v(out, v_)))                                                                    \
			goto done;                                                                                     \
	} while (0)
	switch (k) {
	case PD_SYM_FN:
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		VAL();
		break;
	case PD_SYM_MAP:
		VAL();
		VAL();
		CHILD(PD_SYM_STR);
		VAL();
		VAL();
		CHILD(PD_SYM_STR);
		CHILD(PD_SYM_STR);
		VAL();
		break;
	case PD_SYM_LOC: {
		if (r.p >= r.end) {
			r.bad = true;
			break;
		}
		bool hm = *r.p++ != 0;
		if (hm)
			CHILD(PD_SYM_MAP);
		else if ((rc = put_v(out, 0)))
			goto done;
		VAL();
		VAL();
		uint64_t nl = pd_rd_v(&r);
		if (r.bad || nl > c->len || (rc = put_v(out, nl)))
			goto done;
		for (uint64_t j = 0; j < nl; j++) {
			CHILD(PD_SYM_FN);
			VAL();
			VAL();
		}
		break;
	}
	case PD_SYM_STACK:
		while (r.p < r.end)
			CHILD(PD_SYM_LOC);
		break;
	case PD_SYM_LSET:
		while (r.p < r.end) {
			CHILD(PD_SYM_STR);
			CHILD(PD_SYM_STR);
			VAL();
			CHILD(PD_SYM_STR);
		}
		break;
	}
#undef CHILD
#undef VAL
done:
	if (!rc && (r.bad || r.p != r.end))
		rc = PD_EIO;
	return rc;
}

/* Take a symbols answer (rows of kind, h, data) into d: the rows asked
 * for become fetched, and their children are named (wanted next); *got =
 * rows taken. */
static int absorb(struct cday *d, const uint8_t *p, size_t n, size_t *got, struct pd_buf *tmp, const char *dn)
{
	int rc = 0;
	struct pd_rb_rd r = {p, p + n, false};
	while (r.p < r.end && !rc) {
		int k = pd_rb_get_u8(&r);
		uint8_t hb[16];
		pd_rb_get_fixed(&r, hb, 16);
		size_t len;
		const uint8_t *data = pd_rb_get_str(&r, &len);
		if (r.bad || k >= PD_SYM_NKINDS) {
			rc = pd_errf(d->err, PD_EIO, "ClickHouse: a malformed answer to a query of symbols");
			break;
		}
		struct pd_h128 h;
		memcpy(&h.lo, hb, 8);
		memcpy(&h.hi, hb + 8, 8);
		void *ctx[2] = {d->v[k], &h};
		uint32_t v = pd_hidx_find(&d->ix[k], h.lo ^ h.hi, csym_eq, ctx);
		if (v == PD_NONE || d->v[k][v].have) /* not asked for, or a duplicate not yet merged away */
			continue;
		if (d->bytes.len + len > UINT32_MAX) {
			rc = pd_errf(d->err, PD_ELIMIT, "ClickHouse: the symbols of one query are over 4 GB");
			break;
		}
		struct csym *c = &d->v[k][v];
		c->off = (uint32_t)d->bytes.len;
		c->len = (uint32_t)len;
		c->have = true;
		(*got)++;
		if (pd_buf_append(&d->bytes, data, len)) {
			rc = nomem(d->err);
			break;
		}
		/* name its children now: they are fetched in the next round */
		if (k != PD_SYM_STR) {
			int cr = convert(d, k, c, tmp);
			if (cr == PD_ENOMEM)
				rc = nomem(d->err);
			else if (cr)
				rc = pd_errf(d->err, PD_EIO, "ClickHouse: corrupt %s symbol in %s",
				             k == PD_SYM_FN      ? "function"
				             : k == PD_SYM_MAP   ? "mapping"
				             : k == PD_SYM_LOC   ? "location"
				             : k == PD_SYM_STACK ? "stack"
				                                 : "label set",
				             dn);
		}
	}
	return rc;
}

/* Fetch every wanted symbol, and then those they name, until none is
 * wanted (a stack's locations, their functions and mappings, their
 * strings: four rounds at most). */
static int cday_fetch(struct cday *d)
{
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER), tmp = PD_BUF_INIT(0),
	              want = PD_BUF_INIT(0);
	int rc = 0;
	char dn[16];
	pd_store_day_name(d->day, dn);
	for (int round = 0; d->nwant && !rc; round++) {
		if (round > 8) {
			rc = pd_errf(d->err, PD_EIO, "ClickHouse: symbols of %s nest too deep", dn);
			break;
		}
		/* the wanted (kind, h) as an external table (no IN list to parse:
		 * measured 3x faster on 18.16 for 20,000 hashes) */
		sql.len = 0;
		want.len = 0;
		bool ok =
		    !pd_buf_appendf(
		        &sql,
		        "SELECT kind, h, data FROM symbols WHERE day = '%s' AND (kind, h) IN want FORMAT RowBinary",
		        dn) &&
		    !pd_buf_append(&sql, "", 1);
		for (int k = 0; k < PD_SYM_NKINDS && ok; k++)
			for (size_t i = 0; i < d->n[k] && ok; i++) {
				struct csym *c = &d->v[k][i];
				if (!c->want)
					continue;
				uint8_t hb[16];
				memcpy(hb, &c->h.lo, 8);
				memcpy(hb + 8, &c->h.hi, 8);
				ok = !pd_rb_u8(&want, (uint8_t)k) && !pd_rb_fixed(&want, hb, 16);
			}
		if (!ok) {
			rc = nomem(d->err);
			break;
		}
		size_t asked = d->nwant;
		if ((rc = pd_ch_query_ext(d->s->ch, (const char *)sql.ptr, "want", "kind UInt8, h FixedString(16)",
		                          want.ptr, want.len, CH_QUERY_SETTINGS, &ans, d->err)))
			break;
		/* what was asked for is no longer wanted; what the answers name is */
		for (int k = 0; k < PD_SYM_NKINDS; k++)
			for (size_t i = 0; i < d->n[k]; i++)
				d->v[k][i].want = false;
		d->nwant = 0;
		size_t got = 0;
		rc = absorb(d, ans.ptr, ans.len, &got, &tmp, dn);
		if (!rc && got < asked)
			rc = pd_errf(d->err, PD_EIO, "ClickHouse: %zu of the %zu symbols asked for in %s are missing",
			             asked - got, asked, dn);
	}
	pd_buf_free(&sql);
	pd_buf_free(&ans);
	pd_buf_free(&tmp);
	pd_buf_free(&want);
	return rc;
}

/* mat.h's symbol source over a fetched day */
static int src_get(void *ctx, int k, int64_t seq, struct pd_buf *out, struct pd_err *err)
{
	struct cday *d = ctx;
	if (seq < 1 || (size_t)seq > d->n[k] || !d->v[k][seq - 1].have)
		return pd_errf(err, PD_EIO, "ClickHouse: symbol %d #%lld was not fetched", k, (long long)seq);
	int rc = convert(d, k, &d->v[k][seq - 1], out);
	if (rc == PD_ENOMEM)
		return nomem(err);
	return rc ? pd_errf(err, PD_EIO, "ClickHouse: corrupt symbol") : 0;
}

/* A stored profile row read back: header and rows with seqs of day d. */
struct crow {
	struct pd_shdr h;
	int64_t *rows;
	size_t nrows;
	uint32_t nv;
};

/* Decode a profile row's header, block and refs into r, its refs turned
 * into seqs of d (wanted: cday_fetch gets them). */
static int load_row(struct cday *d, const char *id, const uint8_t *hb, size_t hn, const uint8_t *bb, size_t bn,
                    const uint8_t *rb, size_t rn, struct crow *r, struct pd_err *err)
{
	memset(r, 0, sizeof *r);
	const uint8_t *pl;
	size_t pn;
	bool checked;
	int rc = pd_blob_open(hb, hn, pd_blob_seed(id, strlen(id), PD_BLOB_HEADER), &pl, &pn, &checked, err);
	if (!rc)
		rc = pd_dec_header(pl, pn, &r->h, err);
	if (rc) {
		pd_err_prefix(err, "profile %s: header", id);
		return rc;
	}
	if ((rc = pd_blob_open(bb, bn, pd_blob_seed(id, strlen(id), PD_BLOB_BLOCK), &pl, &pn, &checked, err))) {
		pd_err_prefix(err, "profile %s: sample block", id);
		return rc;
	}
	ZSTD_DCtx *z = ZSTD_createDCtx();
	rc = z ? pd_dec_block(z, pl, pn, &r->rows, &r->nrows, &r->nv, err) : nomem(err);
	ZSTD_freeDCtx(z);
	if (rc) {
		pd_err_prefix(err, "profile %s: sample block", id);
		return rc;
	}
	/* refs: strings, mappings, stacks, label sets */
	static const int kinds[4] = {PD_SYM_STR, PD_SYM_MAP, PD_SYM_STACK, PD_SYM_LSET};
	int64_t *map[4] = {NULL, NULL, NULL, NULL};
	size_t cnt[4] = {0, 0, 0, 0};
	struct pd_rd x = {rb, rb + rn, false};
	for (int t = 0; t < 4 && !rc; t++) {
		cnt[t] = pd_rd_v(&x);
		if (x.bad || cnt[t] > rn / 16) {
			rc = pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
			break;
		}
		if (!(map[t] = malloc((cnt[t] + 1) * sizeof *map[t]))) {
			rc = nomem(err);
			break;
		}
		for (size_t i = 0; i < cnt[t] && !rc; i++) {
			struct pd_h128 h = rd_h(&x);
			if (x.bad)
				rc = pd_errf(err, PD_EIO, "profile %s: corrupt refs", id);
			else if (cday_seq(d, kinds[t], h, &map[t][i]))
				rc = nomem(err);
		}
	}
	/* local numbers (1-based; 0 = none) to seqs */
#define XL(t, v)                                                                                                       \
	do {                                                                                                           \
		int64_t v_ = (v);                                                                                      \
		if (v_ < 0 || (uint64_t)v_ > cnt[t]) {                                                                 \
			rc = pd_errf(err, PD_EIO, "profile %s: a reference out of range", id);                         \
			goto out;                                                                                      \
		}                                                                                                      \
		(v) = v_ ? map[t][v_ - 1] : 0;                                                                         \
	} while (0)
	if (rc)
		goto out;
	for (uint32_t i = 0; i < 2 * r->h.nst; i++)
		XL(0, r->h.stypes[i]);
	for (uint32_t i = 0; i < r->h.ncomments; i++)
		XL(0, r->h.comments[i]);
	XL(0, r->h.ptype);
	XL(0, r->h.punit);
	XL(0, r->h.drop);
	XL(0, r->h.keep);
	XL(0, r->h.dflt);
	XL(0, r->h.doc);
	for (uint32_t i = 0; i < r->h.nmaps; i++)
		XL(1, r->h.maps[i]);
	for (size_t i = 0; i < r->nrows; i++) {
		int64_t *row = r->rows + i * (2 + r->nv);
		XL(2, row[0]);
		XL(3, row[1]);
	}
#undef XL
out:
	for (int t = 0; t < 4; t++)
		free(map[t]);
	return rc;
}

static void crow_free(struct crow *r)
{
	pd_shdr_free(&r->h);
	free(r->rows);
	memset(r, 0, sizeof *r);
}

/* The rows of ids (all of one day d) into out[i] (same order); a missing
 * or deleted id is PD_ENOTFOUND. */
static int load_rows(struct cday *d, const char *const *ids, size_t n, struct crow *out, struct pd_err *err)
{
	char dn[16];
	pd_store_day_name(d->day, dn);
	struct pd_buf sql = PD_BUF_INIT(0), ans = PD_BUF_INIT(CH_MAX_ANSWER);
	bool ok = !pd_buf_appendf(
	    &sql, "SELECT id, header, block, refs FROM profiles FINAL WHERE day = '%s' AND id IN (", dn);
	for (size_t i = 0; i < n && ok; i++)
		ok = !pd_buf_appendf(&sql, "%s'%s'", i ? ", " : "", ids[i]);
	ok = ok &&
	     !pd_buf_appendf(&sql, ") AND id NOT IN (SELECT id FROM deleted WHERE day = '%s') FORMAT RowBinary", dn) &&
	     !pd_buf_append(&sql, "", 1);
	int rc = ok ? q(d->s, (const char *)sql.ptr, &ans, err) : nomem(err);
	pd_buf_free(&sql);
	bool *have = rc ? NULL : calloc(n + 1, sizeof *have);
	if (!rc && !have)
		rc = nomem(err);
	struct pd_rb_rd r = {ans.ptr, ans.ptr + ans.len, false};
	while (!rc && r.p < r.end) {
		size_t idn, hn, bn, rn;
		const uint8_t *idp = pd_rb_get_str(&r, &idn), *hp = pd_rb_get_str(&r, &hn),
		              *bp = pd_rb_get_str(&r, &bn), *rp = pd_rb_get_str(&r, &rn);
		if (r.bad) {
			rc = pd_errf(err, PD_EIO, "ClickHouse: a malformed answer to a query of profiles");
			break;
		}
		for (size_t i = 0; i < n && !rc; i++)
			if (!have[i] && strlen(ids[i]) == idn && !memcmp(ids[i], idp, idn)) {
				have[i] = true;
				rc = load_row(d, ids[i], hp, hn, bp, bn, rp, rn, &out[i], err);
			}
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (!have[i])
			rc = pd_errf(err, PD_ENOTFOUND, "no profile %s", ids[i]);
	free(have);
	pd_buf_free(&ans);
	return rc;
}

static int ch_get(struct pd_store *base, const char *id, struct pd_profile **out, struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	int64_t t = id_ok(id) ? pd_xid_time(id) : -1;
	if (t < 0)
		return pd_errf(err, PD_ENOTFOUND, "no profile %s", id);
	struct cday d;
	struct crow r;
	memset(&r, 0, sizeof r);
	struct pd_mat m;
	memset(&m, 0, sizeof m);
	int rc = cday_init(&d, s, floor_div(t, DAY_NS), err);
	if (!rc)
		rc = load_rows(&d, &id, 1, &r, err);
	if (!rc)
		rc = cday_fetch(&d);
	struct pd_symsrc src = {src_get, NULL, &d};
	if (!rc)
		rc = pd_mat_start(&m, &src, &r.h, r.nrows, err);
	for (size_t i = 0; i < r.nrows && !rc; i++) {
		const int64_t *row = r.rows + i * (2 + r.nv);
		rc = pd_mat_sample(&m, row[0], row[1], row + 2, r.nv);
	}
	if (!rc)
		rc = pd_mat_finish(&m, out);
	pd_mat_free(&m);
	crow_free(&r);
	cday_free(&d);
	return rc;
}

struct idday {
	int64_t day;
	size_t i; /* its place in the caller's ids */
};
static int cmp_idday(const void *a, const void *b)
{
	const struct idday *x = a, *y = b;
	if (x->day != y->day)
		return x->day < y->day ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int ch_merge(struct pd_store *base, const char *const *ids, size_t n, struct pd_profile **out,
                    struct pd_err *err)
{
	struct chs *s = (struct chs *)base;
	*out = NULL;
	if (n == 0)
		return pd_errf(err, PD_EINVAL, "no profiles to merge");
	struct idday *v = malloc(n * sizeof *v);
	if (!v)
		return nomem(err);
	for (size_t i = 0; i < n; i++) {
		int64_t t = id_ok(ids[i]) ? pd_xid_time(ids[i]) : -1;
		if (t < 0) {
			free(v);
			return pd_errf(err, PD_ENOTFOUND, "no profile %s", ids[i]);
		}
		v[i] = (struct idday){floor_div(t, DAY_NS), i};
	}
	qsort(v, n, sizeof *v, cmp_idday);
	struct pd_merger *mg = NULL;
	struct pd_profile *single = NULL;
	size_t ndays = 0;
	int rc = 0;
	const char **dids = malloc(n * sizeof *dids);
	struct crow *rows = calloc(n, sizeof *rows);
	if (!dids || !rows)
		rc = nomem(err);
	for (size_t a = 0; a < n && !rc;) {
		size_t b = a;
		while (b < n && v[b].day == v[a].day)
			b++;
		/* one day: its rows aggregated on seqs, materialised once */
		for (size_t i = a; i < b; i++)
			dids[i - a] = ids[v[i].i];
		struct cday d;
		struct pd_pmerge pm;
		memset(&pm, 0, sizeof pm);
		rc = cday_init(&d, s, v[a].day, err);
		if (!rc)
			rc = load_rows(&d, dids, b - a, rows, err);
		struct pd_symsrc src = {src_get, NULL, &d};
		pm.src = src;
		for (size_t i = 0; i < b - a && !rc; i++)
			rc = pd_pm_add(&pm, dids[i], &rows[i].h, rows[i].rows, rows[i].nrows, rows[i].nv, false, err);
		if (!rc)
			rc = cday_fetch(&d);
		struct pd_profile *part = NULL;
		if (!rc && pm.have)
			rc = pd_pm_profile(&pm, &part, err);
		for (size_t i = 0; i < b - a; i++)
			crow_free(&rows[i]);
		pd_pmerge_free(&pm);
		cday_free(&d);
		if (!rc && part) {
			if (ndays == 0) {
				single = part;
			} else {
				if (!mg && !(mg = pd_merger_new()))
					rc = nomem(err);
				if (!rc && single) {
					rc = pd_merger_add_partial(mg, single, err);
					pd_profile_free(single);
					single = NULL;
				}
				if (!rc)
					rc = pd_merger_add_partial(mg, part, err);
				pd_profile_free(part);
			}
			ndays++;
		} else {
			pd_profile_free(part);
		}
		a = b;
	}
	if (!rc && mg)
		rc = pd_merger_finish(mg, out, err);
	else if (!rc)
		*out = single, single = NULL;
	pd_profile_free(single);
	pd_merger_free(mg);
	free(dids);
	free(rows);
	free(v);
	return rc;
}

/* ---- open, close ---------------------------------------------------------------- */

static void ch_close(struct pd_store *base)
{
	struct chs *s = (struct chs *)base;
	pd_ch_close(s->ch);
	pthread_mutex_destroy(&s->mu);
	free(s->known);
	free(s->cluster);
	free(s);
}

/* /readyz: whether ClickHouse answers (SELECT 1 within 2 s), asked at
 * most once a second. */
static void ch_health(struct pd_store *base, struct pd_store_health *out)
{
	struct chs *s = (struct chs *)base;
	memset(out, 0, sizeof *out);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	pthread_mutex_lock(&s->mu);
	bool fresh = s->health_at && now - s->health_at < 1000000000LL;
	if (fresh) {
		out->cannot_write = s->health_bad;
		snprintf(out->write_error, sizeof out->write_error, "%s", s->health_msg);
	}
	pthread_mutex_unlock(&s->mu);
	if (fresh)
		return;
	struct pd_err err = {0};
	struct pd_buf ans = PD_BUF_INIT(4096);
	int rc = pd_ch_query_to(s->ch, "SELECT 1", NULL, 0, NULL, &ans, 2000, &err);
	pd_buf_free(&ans);
	pthread_mutex_lock(&s->mu);
	s->health_at = now;
	s->health_bad = rc != 0;
	snprintf(s->health_msg, sizeof s->health_msg, "%s", rc ? err.msg : "");
	out->cannot_write = s->health_bad;
	snprintf(out->write_error, sizeof out->write_error, "%s", s->health_msg);
	pthread_mutex_unlock(&s->mu);
}

static const struct pd_store_ops ch_ops = {
    .name = "clickhouse",
    .ingest = ch_ingest,
    .find = ch_find,
    .get = ch_get,
    .merge = ch_merge,
    .remove = ch_remove,
    .services = ch_services,
    .retain = ch_retain,
    .stats = ch_stats,
    .close = ch_close,
    .health = ch_health,
};

int pd_store_open_clickhouse(const char *url, const struct pd_store_ch_opts *o, const struct pd_pprof_limits *lim,
                             struct pd_store **out, struct pd_err *err)
{
	*out = NULL;
	struct pd_ch_url u;
	int rc = pd_ch_url_parse(url, &u, err);
	if (rc)
		return rc;
	if (o && o->password) {
		free(u.password);
		if (!(u.password = strdup(o->password))) {
			pd_ch_url_free(&u);
			return nomem(err);
		}
	}
	if (u.cluster) {
		pd_ch_url_free(&u);
		return pd_errf(err, PD_EUSAGE,
		               "store URL: ?cluster= is not supported yet (one ClickHouse server or a "
		               "load balancer in front of replicas)");
	}
	struct chs *s = calloc(1, sizeof *s);
	if (!s) {
		pd_ch_url_free(&u);
		return nomem(err);
	}
	s->base.ops = &ch_ops;
	pthread_mutex_init(&s->mu, NULL);
	s->kmask = (CH_KNOWN_MAX * 2) - 1;
	s->known = calloc(s->kmask + 1, sizeof *s->known);
	if (lim)
		s->lim = *lim;
	else
		pd_pprof_limits_default(&s->lim);
	struct pd_ch_opts co = {o ? o->cacert : NULL, o ? o->insecure : false, o ? o->timeout_ms : 0};
	rc = s->known ? pd_ch_open(&u, &co, &s->ch, err) : nomem(err);
	pd_ch_url_free(&u);
	if (!rc)
		rc = create_schema(s, err);
	if (rc) {
		ch_close(&s->base);
		return rc;
	}
	*out = &s->base;
	return 0;
}

/* ---- for the fuzzer ------------------------------------------------------------- */

int pd_store_ch_fuzz(const uint8_t *data, size_t n)
{
	/* byte 0: which parser; then a symbols answer (every row's hash asked
	 * for, then taken, then each symbol read as mat.h reads it), or a
	 * profile row (id, header, block, refs) */
	if (n < 1)
		return 0;
	struct pd_err err = {0};
	struct cday d;
	if (cday_init(&d, NULL, 20000, &err))
		return 0;
	const uint8_t *p = data + 1;
	size_t len = n - 1;
	if (data[0] & 1) {
		struct pd_rb_rd r = {p, p + len, false};
		size_t idn, hn, bn, rn;
		const uint8_t *idp = pd_rb_get_str(&r, &idn), *hp = pd_rb_get_str(&r, &hn),
		              *bp = pd_rb_get_str(&r, &bn), *rp = pd_rb_get_str(&r, &rn);
		char id[64];
		snprintf(id, sizeof id, "%.*s", (int)(idn < 40 ? idn : 40), (const char *)idp);
		struct crow row;
		if (!r.bad) {
			(void)load_row(&d, id, hp, hn, bp, bn, rp, rn, &row, &err);
			crow_free(&row);
		}
	} else {
		struct pd_rb_rd r = {p, p + len, false};
		while (r.p < r.end && !r.bad) { /* ask for every row's hash */
			int k = pd_rb_get_u8(&r);
			struct pd_h128 h;
			uint8_t hb[16];
			pd_rb_get_fixed(&r, hb, 16);
			memcpy(&h.lo, hb, 8);
			memcpy(&h.hi, hb + 8, 8);
			size_t dl;
			(void)pd_rb_get_str(&r, &dl);
			int64_t seq;
			if (r.bad || k >= PD_SYM_NKINDS || cday_seq(&d, k, h, &seq))
				break;
		}
		struct pd_buf tmp = PD_BUF_INIT(0);
		size_t got = 0;
		if (!absorb(&d, p, len, &got, &tmp, "fuzz"))
			for (int k = 0; k < PD_SYM_NKINDS; k++)
				for (size_t i = 0; i < d.n[k]; i++)
					if (d.v[k][i].have)
						(void)src_get(&d, k, (int64_t)i + 1, &tmp, &err);
		pd_buf_free(&tmp);
	}
	cday_free(&d);
	return 0;
}
