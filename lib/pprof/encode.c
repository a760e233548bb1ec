/*
 * encode.c — the model of pprof.h back to profile.proto (optionally gzip).
 *
 * Sizes of nested messages are computed first, so the output is written in
 * one pass into a buffer reserved to the exact size (no per-field bounds
 * checks, no shifting). Field order and the packing rule (packed when a
 * repeated scalar has more than two elements) follow the upstream encoder,
 * which also always writes default_sample_type. Ids are the model's own, so
 * decode -> encode preserves them.
 */
#include "pprof.h"
#include "wire.h"
#include "../util/gz.h"

#include <stdlib.h>

#define VL(v) pd_varint_len((uint64_t)(v))
/* size of an optional varint field (omitted when zero), tag < 16 */
#define OPT(v) ((v) ? 1 + VL(v) : 0)

static size_t vtype_size(const struct pd_vtype *vt) { return OPT(vt->type) + OPT(vt->unit); }

static size_t label_size(const struct pd_label *l)
{
	return OPT(l->key) + OPT(l->str) + OPT(l->num) + OPT(l->num_unit);
}

static size_t repeated_size(size_t payload, size_t n)
{
	if (n > 2)
		return 1 + VL(payload) + payload;
	return payload + n; /* one tag byte per element */
}

/* A location's id: when the ids are 1..n in order (every merge result,
 * most decoded profiles), the index says it without a look at the
 * location (a random access per frame: 440,000 of them, twice, for a
 * merge of 200 profiles). */
struct enc {
	const struct pd_profile *p;
	bool dense;
};
static inline uint64_t loc_id(const struct enc *e, uint32_t li)
{
	return e->dense ? (uint64_t)li + 1 : e->p->locations[li].id;
}

static size_t sample_size(const struct enc *e, const struct pd_sample *s)
{
	const struct pd_profile *p = e->p;
	size_t lp = 0, vp = 0, z = 0;
	for (uint32_t i = 0; i < s->nlocs; i++)
		lp += VL(loc_id(e, s->locs[i]));
	for (uint32_t i = 0; i < p->nsample_types; i++)
		vp += VL(s->values[i]);
	if (s->nlocs)
		z += repeated_size(lp, s->nlocs);
	if (p->nsample_types)
		z += repeated_size(vp, p->nsample_types);
	for (uint32_t i = 0; i < s->nlabels; i++) {
		size_t ls = label_size(&s->labels[i]);
		z += 1 + VL(ls) + ls;
	}
	return z;
}

static size_t mapping_size(const struct pd_mapping *m)
{
	return OPT(m->id) + OPT(m->start) + OPT(m->limit) + OPT(m->offset) + OPT(m->filename) +
	       OPT(m->build_id) + (m->has_functions ? 2 : 0) + (m->has_filenames ? 2 : 0) +
	       (m->has_line_numbers ? 2 : 0) + (m->has_inline_frames ? 2 : 0);
}

static inline uint64_t fn_id(const struct pd_profile *p, uint32_t fi) { return p->functions[fi].id; }
static inline uint64_t map_id(const struct pd_profile *p, uint32_t mi)
{
	return mi == PD_NONE ? 0 : p->mappings[mi].id;
}

static size_t line_size(const struct pd_profile *p, const struct pd_line *ln)
{
	return OPT(fn_id(p, ln->function)) + OPT(ln->line) + OPT(ln->column);
}

static size_t location_size(const struct pd_profile *p, const struct pd_location *l)
{
	size_t z = OPT(l->id) + OPT(map_id(p, l->mapping)) + OPT(l->address) + (l->is_folded ? 2 : 0);
	for (uint32_t i = 0; i < l->nlines; i++) {
		size_t ls = line_size(p, &l->lines[i]);
		z += 1 + VL(ls) + ls;
	}
	return z;
}

static size_t function_size(const struct pd_function *f)
{
	return OPT(f->id) + OPT(f->name) + OPT(f->system_name) + OPT(f->filename) + OPT(f->start_line);
}

#define MSG(sz) (1 + VL(sz) + (sz))

/* ---- writers (buffer pre-reserved) ---- */

static inline uint8_t *put_tag(uint8_t *w, uint32_t field, uint32_t wt)
{
	return pd_put_varint(w, (uint64_t)field << 3 | wt);
}

static inline uint8_t *put_opt(uint8_t *w, uint32_t field, uint64_t v)
{
	if (!v)
		return w;
	w = put_tag(w, field, WT_VARINT);
	return pd_put_varint(w, v);
}

static inline uint8_t *put_len(uint8_t *w, uint32_t field, size_t len)
{
	w = put_tag(w, field, WT_LEN);
	return pd_put_varint(w, len);
}

static uint8_t *put_vtype(uint8_t *w, uint32_t field, const struct pd_vtype *vt)
{
	w = put_len(w, field, vtype_size(vt));
	w = put_opt(w, 1, vt->type);
	return put_opt(w, 2, vt->unit);
}

/* sz: its sample_size (computed once, for the total) */
static uint8_t *put_sample(uint8_t *w, const struct enc *e, const struct pd_sample *s, size_t sz)
{
	const struct pd_profile *p = e->p;
	w = put_len(w, 2, sz);
	if (s->nlocs > 2) {
		size_t lp = 0;
		for (uint32_t i = 0; i < s->nlocs; i++)
			lp += VL(loc_id(e, s->locs[i]));
		w = put_len(w, 1, lp);
		for (uint32_t i = 0; i < s->nlocs; i++)
			w = pd_put_varint(w, loc_id(e, s->locs[i]));
	} else {
		for (uint32_t i = 0; i < s->nlocs; i++) {
			w = put_tag(w, 1, WT_VARINT);
			w = pd_put_varint(w, loc_id(e, s->locs[i]));
		}
	}
	uint32_t nv = p->nsample_types;
	if (nv > 2) {
		size_t vp = 0;
		for (uint32_t i = 0; i < nv; i++)
			vp += VL(s->values[i]);
		w = put_len(w, 2, vp);
		for (uint32_t i = 0; i < nv; i++)
			w = pd_put_varint(w, (uint64_t)s->values[i]);
	} else {
		for (uint32_t i = 0; i < nv; i++) {
			w = put_tag(w, 2, WT_VARINT);
			w = pd_put_varint(w, (uint64_t)s->values[i]);
		}
	}
	for (uint32_t i = 0; i < s->nlabels; i++) {
		const struct pd_label *l = &s->labels[i];
		w = put_len(w, 3, label_size(l));
		w = put_opt(w, 1, l->key);
		w = put_opt(w, 2, l->str);
		w = put_opt(w, 3, (uint64_t)l->num);
		w = put_opt(w, 4, l->num_unit);
	}
	return w;
}

static uint8_t *put_mapping(uint8_t *w, const struct pd_mapping *m)
{
	w = put_len(w, 3, mapping_size(m));
	w = put_opt(w, 1, m->id);
	w = put_opt(w, 2, m->start);
	w = put_opt(w, 3, m->limit);
	w = put_opt(w, 4, m->offset);
	w = put_opt(w, 5, m->filename);
	w = put_opt(w, 6, m->build_id);
	w = put_opt(w, 7, m->has_functions);
	w = put_opt(w, 8, m->has_filenames);
	w = put_opt(w, 9, m->has_line_numbers);
	return put_opt(w, 10, m->has_inline_frames);
}

static uint8_t *put_location(uint8_t *w, const struct pd_profile *p, const struct pd_location *l)
{
	w = put_len(w, 4, location_size(p, l));
	w = put_opt(w, 1, l->id);
	w = put_opt(w, 2, map_id(p, l->mapping));
	w = put_opt(w, 3, l->address);
	for (uint32_t i = 0; i < l->nlines; i++) {
		const struct pd_line *ln = &l->lines[i];
		w = put_len(w, 4, line_size(p, ln));
		w = put_opt(w, 1, fn_id(p, ln->function));
		w = put_opt(w, 2, (uint64_t)ln->line);
		w = put_opt(w, 3, (uint64_t)ln->column);
	}
	return put_opt(w, 5, l->is_folded);
}

static uint8_t *put_function(uint8_t *w, const struct pd_function *f)
{
	w = put_len(w, 5, function_size(f));
	w = put_opt(w, 1, f->id);
	w = put_opt(w, 2, f->name);
	w = put_opt(w, 3, f->system_name);
	w = put_opt(w, 4, f->filename);
	return put_opt(w, 5, (uint64_t)f->start_line);
}

int pd_pprof_encode(const struct pd_profile *p, int gzip_level, struct pd_buf *out, struct pd_err *err)
{
	return pd_pprof_encode_mt(p, gzip_level, 1, out, err);
}

int pd_pprof_encode_mt(const struct pd_profile *p, int gzip_level, int threads, struct pd_buf *out,
		       struct pd_err *err)
{
	size_t total = 0;
	struct enc e = {p, true};
	for (uint32_t i = 0; i < p->nlocations && e.dense; i++)
		e.dense = p->locations[i].id == (uint64_t)i + 1;
	uint32_t *ssz = malloc((p->nsamples + 1) * sizeof *ssz);
	if (!ssz)
		return pd_errf(err, PD_ENOMEM, "encode: out of memory");
	for (uint32_t i = 0; i < p->nsample_types; i++)
		total += MSG(vtype_size(&p->sample_types[i]));
	for (size_t i = 0; i < p->nsamples; i++) {
		size_t z = sample_size(&e, &p->samples[i]);
		ssz[i] = z <= UINT32_MAX ? (uint32_t)z : 0;
		total += MSG(z);
	}
	for (uint32_t i = 0; i < p->nmappings; i++)
		total += MSG(mapping_size(&p->mappings[i]));
	for (uint32_t i = 0; i < p->nlocations; i++)
		total += MSG(location_size(p, &p->locations[i]));
	for (uint32_t i = 0; i < p->nfunctions; i++)
		total += MSG(function_size(&p->functions[i]));
	for (uint32_t i = 0; i < p->nstrings; i++)
		total += MSG(p->strings[i].len);
	total += OPT(p->drop_frames) + OPT(p->keep_frames) + OPT(p->time_nanos) + OPT(p->duration_nanos);
	size_t pt = vtype_size(&p->period_type);
	if (pt)
		total += MSG(pt);
	total += OPT(p->period);
	size_t cp = 0;
	for (uint32_t i = 0; i < p->ncomments; i++)
		cp += VL(p->comments[i]);
	if (p->ncomments)
		total += repeated_size(cp, p->ncomments);
	total += 1 + VL(p->default_sample_type) + OPT(p->doc_url);

	struct pd_buf raw = PD_BUF_INIT(0);
	struct pd_buf *dst = gzip_level > 0 ? &raw : out;
	int rc = pd_buf_reserve(dst, total);
	if (rc) {
		free(ssz);
		return pd_errf(err, rc, "encode: cannot reserve %zu bytes", total);
	}
	uint8_t *w0 = dst->ptr + dst->len, *w = w0;

	for (uint32_t i = 0; i < p->nsample_types; i++)
		w = put_vtype(w, 1, &p->sample_types[i]);
	for (size_t i = 0; i < p->nsamples; i++)
		w = put_sample(w, &e, &p->samples[i], ssz[i] ? ssz[i] : sample_size(&e, &p->samples[i]));
	free(ssz);
	for (uint32_t i = 0; i < p->nmappings; i++)
		w = put_mapping(w, &p->mappings[i]);
	for (uint32_t i = 0; i < p->nlocations; i++)
		w = put_location(w, p, &p->locations[i]);
	for (uint32_t i = 0; i < p->nfunctions; i++)
		w = put_function(w, &p->functions[i]);
	for (uint32_t i = 0; i < p->nstrings; i++) {
		w = put_len(w, 6, p->strings[i].len);
		if (p->strings[i].len)
			memcpy(w, p->strings[i].ptr, p->strings[i].len);
		w += p->strings[i].len;
	}
	w = put_opt(w, 7, p->drop_frames);
	w = put_opt(w, 8, p->keep_frames);
	w = put_opt(w, 9, (uint64_t)p->time_nanos);
	w = put_opt(w, 10, (uint64_t)p->duration_nanos);
	if (pt)
		w = put_vtype(w, 11, &p->period_type);
	w = put_opt(w, 12, (uint64_t)p->period);
	if (p->ncomments > 2)
		w = put_len(w, 13, cp);
	for (uint32_t i = 0; i < p->ncomments; i++) {
		if (p->ncomments <= 2)
			w = put_tag(w, 13, WT_VARINT);
		w = pd_put_varint(w, p->comments[i]);
	}
	w = put_tag(w, 14, WT_VARINT);
	w = pd_put_varint(w, p->default_sample_type);
	w = put_opt(w, 15, p->doc_url);
	PD_ASSERT((size_t)(w - w0) == total);
	dst->len += total;

	if (gzip_level > 0) {
		rc = pd_gzip_mt(raw.ptr, raw.len, gzip_level, threads, out, err);
		pd_buf_free(&raw);
	}
	return rc;
}
