/*
 * pprof.h — Go's pprof profile (profile.proto) in C: model, codec, merge.
 *
 * The model mirrors profile.proto, with two differences that make it fast
 * and safe to use:
 *  - every reference is resolved at decode time to an array index
 *    (sample -> locations, location -> mapping, line -> function), and every
 *    string field is an index into `strings`, checked to be in range. Code
 *    holding a decoded struct pd_profile never has to validate again.
 *  - everything lives in one arena owned by the profile; strings point into
 *    the (decompressed) input, which the profile owns too. Free it all with
 *    pd_profile_free.
 * Original ids of mappings, locations and functions are kept so that
 * decode -> encode reproduces the same profile for `go tool pprof -raw`.
 *
 * Merge follows github.com/google/pprof/profile.Merge (see merge.c). The
 * aggregation core (agg.h) is separate: it sums value rows keyed by integer
 * (stack id, label-set id), so a store can merge without re-parsing pprof.
 */
#ifndef PD_PPROF_H
#define PD_PPROF_H

#include "../util/util.h"

#define PD_NONE UINT32_MAX

struct pd_str {
	const char *ptr; /* not NUL-terminated */
	uint32_t len;
};

struct pd_vtype {
	uint32_t type, unit; /* string indexes */
};

struct pd_label {
	uint32_t key;      /* string index */
	uint32_t str;      /* string index; 0 = numeric label */
	int64_t num;
	uint32_t num_unit; /* string index */
};

struct pd_sample {
	uint32_t *locs; /* location indexes, leaf first */
	int64_t *values; /* nvalues == p->nsample_types once validated */
	struct pd_label *labels;
	uint32_t nlocs, nlabels;
};

struct pd_mapping {
	uint64_t id, start, limit, offset;
	uint32_t filename, build_id; /* string indexes */
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct pd_line {
	uint32_t function; /* function index */
	int64_t line, column;
};

struct pd_location {
	uint64_t id, address;
	uint32_t mapping; /* mapping index or PD_NONE */
	uint32_t nlines;
	struct pd_line *lines; /* lines[0] innermost (inlined), last = caller */
	bool is_folded;
};

struct pd_function {
	uint64_t id;
	uint32_t name, system_name, filename; /* string indexes */
	int64_t start_line;
};

struct pd_profile {
	struct pd_arena *arena;
	struct pd_str *strings; /* strings[0] is "" */
	struct pd_vtype *sample_types;
	struct pd_sample *samples;
	struct pd_mapping *mappings;
	struct pd_location *locations;
	struct pd_function *functions;
	uint32_t *comments; /* string indexes */
	uint32_t nstrings, nsample_types, nmappings, nlocations, nfunctions, ncomments;
	size_t nsamples;
	uint32_t drop_frames, keep_frames, default_sample_type, doc_url; /* string indexes */
	int64_t time_nanos, duration_nanos, period;
	struct pd_vtype period_type;
	void *owned; /* decompressed input, freed with the profile */
	/* Profiles parsed from a legacy text format (legacy.h): the Go type
	 * their header names when the model cannot tell ("mutex" for `--- mutex:`,
	 * "block" for `--- contention:`), else NULL. Static string. */
	const char *go_type_hint;
	/* ... and which legacy format it was ("heap profile", "legacy CPU
	 * profile", ...); NULL for protobuf. Static string. */
	const char *legacy_format;
};

/* Caps on what a decode may produce. Anything over a cap is PD_ELIMIT with a
 * message naming the cap. Zero fields take the defaults below. */
struct pd_pprof_limits {
	size_t max_compressed;   /* input bytes */
	size_t max_decompressed; /* bytes of raw protobuf after gunzip */
	size_t max_samples;
	size_t max_locations, max_functions, max_mappings;
	size_t max_strings, max_string_bytes;
	size_t max_stack_depth;  /* location ids in one sample */
	size_t max_labels;       /* labels in one sample */
	size_t max_lines;        /* lines in one location */
	size_t max_sample_types;
	/* Memory: what one decode may hold (the input's raw copy, pass 1's
	 * field list, the model) plus what the caller says it will allocate
	 * per sample and per symbol after it (ingest: hashes and ids),
	 * estimated from pass 1's counts before anything big is allocated,
	 * so a small gzip of millions of tiny samples is refused in
	 * milliseconds instead of costing a GiB. 0 = PD_DEFAULT_MAX_MEMORY. */
	size_t max_memory;
	size_t extra_per_sample, extra_per_symbol;
	/* Optional shared budget: called with the bytes this decode is about to
	 * hold (once after gunzip, once after pass 1); non-zero refuses the
	 * decode with PD_EBUSY. The caller releases what was reserved. */
	int (*reserve)(void *ctx, size_t bytes);
	void *reserve_ctx;
	/* Errors never quote the input, for bytes from a source that must not
	 * write into our logs and tables (a scraped target): a legacy-format
	 * error names its line but not the line's text, and bytes in no format
	 * are described (pd_pprof_describe_body), never excerpted. */
	bool no_quotes;
};
#define PD_DEFAULT_MAX_MEMORY ((size_t)4 << 30)
#define PD_DEFAULT_MAX_COMPRESSED (256u << 20)
#define PD_DEFAULT_MAX_DECOMPRESSED (256u << 20)
#define PD_DEFAULT_MAX_SAMPLES (16u << 20)
#define PD_DEFAULT_MAX_LOCATIONS (16u << 20)
#define PD_DEFAULT_MAX_FUNCTIONS (16u << 20)
#define PD_DEFAULT_MAX_MAPPINGS (1u << 20)
#define PD_DEFAULT_MAX_STRINGS (16u << 20)
#define PD_DEFAULT_MAX_STRING_BYTES (512u << 20)
#define PD_DEFAULT_MAX_STACK_DEPTH 65536
#define PD_DEFAULT_MAX_LABELS 4096
#define PD_DEFAULT_MAX_LINES 4096
#define PD_DEFAULT_MAX_SAMPLE_TYPES 64

/* Fill zero fields of *l with defaults. */
void pd_pprof_limits_default(struct pd_pprof_limits *l);

/*
 * Decode a profile: gzip (sniffed by magic 1f 8b) or raw profile.proto, or
 * (as profile.Parse does when the protobuf decode fails) one of the legacy
 * formats of legacy.h; anything else is refused with a message saying what
 * it looks like (an HTML page, JSON, text, binary data).
 * The input is copied or decompressed into memory the profile owns, so it
 * may be freed right after. lim may be NULL (defaults). On error *out is
 * NULL and err says what and where ("sample #12: location id 99 not
 * found", "field 6 (string_table) at offset 1234: ...").
 */
int pd_pprof_decode(const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
		    struct pd_profile **out, struct pd_err *err) PD_WUR;
/*
 * Streaming decode: everything but the samples is decoded into *out as
 * usual (validated the same way); then on_header(ctx, p) is called once,
 * and on_sample(ctx, p, s) for each sample instead of storing it
 * (p->nsamples stays 0; s and its arrays are valid only during the call).
 * A non-zero return from a callback stops the decode and is returned. This
 * is how a merge or an ingest consumes a profile without materialising its
 * samples.
 */
typedef int (*pd_header_fn)(void *ctx, const struct pd_profile *p, struct pd_err *err);
typedef int (*pd_sample_fn)(void *ctx, const struct pd_profile *p, const struct pd_sample *s,
			    struct pd_err *err);
int pd_pprof_decode_stream(const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
			   pd_header_fn on_header, pd_sample_fn on_sample, void *ctx, struct pd_profile **out,
			   struct pd_err *err) PD_WUR;

/*
 * What bytes that are not a profile look like (the classification behind
 * the decoder's refusals): an empty body, white space, an HTML page, JSON,
 * a goroutine dump (Go's debug=2), other text, gzip data, a Go execution
 * trace (/debug/pprof/trace), binary data.
 */
enum pd_body_kind {
	PD_BODY_EMPTY,
	PD_BODY_SPACE,
	PD_BODY_HTML,
	PD_BODY_JSON,
	PD_BODY_DUMP,
	PD_BODY_TEXT,
	PD_BODY_GZIP,
	PD_BODY_TRACE,
	PD_BODY_BINARY,
};
int pd_pprof_body_kind(const uint8_t *buf, size_t len);
/* The same as a phrase that quotes none of the bytes: "an HTML page (1234
 * bytes)", "JSON (56 bytes)", "a goroutine dump (debug=2, 800 bytes)",
 * "text (57 bytes)", "gzip data (99 bytes)", "a Go execution trace (4096
 * bytes)", "binary data (4096 bytes)",
 * "white space (3 bytes)", "an empty body"; written to out, returned. */
const char *pd_pprof_describe_body(const uint8_t *buf, size_t len, char *out, size_t cap);
/* How every refusal of bytes in no profile format begins ("not a profile:
 * the body is an HTML page (93 bytes) — ..."). */
#define PD_PPROF_REFUSED "not a profile: "

/* Decode a file ("-" = stdin). Messages are prefixed with the path. */
int pd_pprof_decode_file(const char *path, const struct pd_pprof_limits *lim,
			 struct pd_profile **out, struct pd_err *err) PD_WUR;
void pd_profile_free(struct pd_profile *p);
/* Put every sample's labels in pprof's canonical order (the order of
 * profile.Merge's sample key and of pprof's encoder): string labels sorted
 * by key, then numeric labels sorted by key; values of one key keep their
 * order. Samples that differ only in label order then compare equal. */
void pd_profile_sort_labels(struct pd_profile *p);

/*
 * Encode to profile.proto, appended to out; gzip_level 0 = raw protobuf,
 * 1..12 = gzip (libdeflate levels; 6 is zlib's default).
 */
int pd_pprof_encode(const struct pd_profile *p, int gzip_level, struct pd_buf *out,
		    struct pd_err *err) PD_WUR;
/* The same, compressing large outputs on up to `threads` threads (as
 * consecutive gzip members; see pd_gzip_mt). */
int pd_pprof_encode_mt(const struct pd_profile *p, int gzip_level, int threads, struct pd_buf *out,
		       struct pd_err *err) PD_WUR;

/* Convenience accessors. */
static inline struct pd_str pd_profile_str(const struct pd_profile *p, uint32_t i)
{
	return p->strings[i];
}
/* Index of the sample type a tool shows by default: default_sample_type if
 * it names one, else the last (as pprof does). */
uint32_t pd_profile_default_index(const struct pd_profile *p);
/* Resolve a sample index name like pprof's -sample_index: a type name, the
 * same name without an "inuse_" prefix, or a number. -1 if none. */
int pd_profile_sample_index(const struct pd_profile *p, const char *name);
/* Compare a string-table entry with a C string. */
bool pd_str_eq(struct pd_str s, const char *c);
/* Byte-wise order of two strings (memcmp, then length), like Go's < on strings. */
int pd_str_cmp(struct pd_str a, struct pd_str b);

/* ---- merge -------------------------------------------------------------- */

/*
 * Streaming merge with the semantics of pprof's profile.Merge: add profiles
 * one by one (each may be freed right after pd_merger_add), then finish.
 * Memory is proportional to the distinct strings, functions, locations,
 * stacks and label sets seen, not to the input.
 */
struct pd_merger;
struct pd_merger *pd_merger_new(void);
void pd_merger_free(struct pd_merger *m);
/* PD_EINCOMPAT with a message naming both sample/period types if p cannot
 * be merged with the profiles added before. */
int pd_merger_add(struct pd_merger *m, const struct pd_profile *p, struct pd_err *err) PD_WUR;
/* Decode an encoded profile (gzip or raw) straight into the merger: its
 * samples are merged as they are decoded, never stored. Same result as
 * decode + pd_merger_add, less memory traffic. Errors are the decoder's or
 * the merge's (PD_EINCOMPAT). An error found after the first sample leaves
 * part of the profile merged: discard the merger then (or decode first
 * when bad inputs must be skipped). */
int pd_merger_add_encoded(struct pd_merger *m, const uint8_t *data, size_t len, const struct pd_pprof_limits *lim,
			  struct pd_err *err) PD_WUR;
size_t pd_merger_count(const struct pd_merger *m);
/* Build the merged, compacted profile (caller frees). At least one profile
 * must have been added. */
int pd_merger_finish(struct pd_merger *m, struct pd_profile **out, struct pd_err *err) PD_WUR;

/*
 * Parallel merge in two levels, identical in result to one sequential
 * merge: merge consecutive runs of the inputs into partial results (mergers
 * with pd_merger_set_partial(m, true): their finish keeps rows that sum to
 * zero, so they keep their first-seen place), then add the partials in
 * order with pd_merger_add_partial (which, unlike pd_merger_add, does not
 * skip zero rows) into a normal merger.
 */
void pd_merger_set_partial(struct pd_merger *m, bool partial);
/* Whether a new profile's locations are looked up all at once before its
 * samples (the default) or one at a time as samples first use them: the
 * result is the same either way (tests compare the two). */
void pd_merger_set_premap(struct pd_merger *m, bool on);
int pd_merger_add_partial(struct pd_merger *m, const struct pd_profile *partial, struct pd_err *err) PD_WUR;
/* Merge as go tool pprof does, not as profile.Merge: sample and period types
 * of the same names whose units differ but are of one kind (ms and ns,
 * bytes and kilobytes) are converted to the finest unit seen (Go's
 * measurement.ScaleProfiles) instead of refused. Off by default. */
void pd_merger_set_scale_units(struct pd_merger *m, bool on);

/* Merge an array of decoded profiles. */
int pd_pprof_merge(struct pd_profile *const *ps, size_t n, struct pd_profile **out,
		   struct pd_err *err) PD_WUR;
/* Compact: merge of one profile (drops unreferenced entities, sums equal
 * samples, drops zero samples, renumbers ids densely). */
int pd_pprof_compact(const struct pd_profile *p, struct pd_profile **out, struct pd_err *err) PD_WUR;

/*
 * Delta of two snapshots of a cumulative profile (Go's allocs, block, mutex;
 * heap's alloc_* types): cur - prev with the semantics of
 * `go tool pprof -base prev cur` (prev negated, then Merge of [cur, -prev]):
 * same sample types required (PD_EINCOMPAT), rows that cancel out are
 * dropped (as Merge drops zero samples). The result's time is cur's and its duration the time
 * between the two snapshots. Check pd_pprof_counter_reset first: after a
 * restart the counters start again and cur itself is the delta.
 */
int pd_pprof_delta(const struct pd_profile *cur, const struct pd_profile *prev, struct pd_profile **out,
		   struct pd_err *err) PD_WUR;
/* The same, units of one kind converted as go tool pprof -base converts
 * them (pd_merger_set_scale_units): for files of any producer. */
int pd_pprof_delta_units(const struct pd_profile *cur, const struct pd_profile *prev, struct pd_profile **out,
			 struct pd_err *err) PD_WUR;
/* go tool pprof's factor of a unit to the base unit of its kind (bytes,
 * nanoseconds, GCU; its aliases, case and a trailing "s" aside), 0 for a
 * unit it does not know; *kind (if not NULL) tells the kinds apart. */
double pd_unit_factor(struct pd_str unit, int *kind);
/* True if cur cannot follow prev as a later snapshot of the same counters:
 * a counter type (not inuse_*) whose total went down (the process
 * restarted); totals in units of one kind are compared converted. False for
 * profiles of other sample types: pd_pprof_delta refuses those with
 * PD_EINCOMPAT. */
bool pd_pprof_counter_reset(const struct pd_profile *cur, const struct pd_profile *prev);

/*
 * Scale every value of p by num/den (den > 0) in place, as pprof's
 * Profile.Scale(num/den): each value rounded half away from zero (exactly:
 * no float64 rounding), samples whose values all become 0 dropped. num ==
 * den leaves p untouched. pd_scale_value is the rounding of one value
 * (saturating at the int64 range).
 */
void pd_profile_scale(struct pd_profile *p, int64_t num, int64_t den);
int64_t pd_scale_value(int64_t v, int64_t num, int64_t den);

/* The Go profile kind these types denote: "cpu", "heap", "allocs",
 * "block/mutex", "goroutine", "threadcreate" or "unknown". */
const char *pd_kind_name(struct pd_str period_type, struct pd_str first_sample_type, struct pd_str default_sample_type);
const char *pd_profile_kind(const struct pd_profile *p);
/*
 * The API type name of a profile as Go's runtime/pprof writes it: "cpu",
 * "heap", "allocs", "block", "mutex", "goroutine" or "threadcreate"; NULL
 * for anything else. Block and mutex profiles have the same sample types;
 * they are told apart by their stacks: a mutex profile's stacks end in the
 * Unlock that released a contended lock, a block profile's in the call that
 * blocked (Lock, a channel operation, select, Wait...). NULL when no stack
 * says (no samples, no symbols).
 */
const char *pd_profile_go_type(const struct pd_profile *p);

/*
 * The type to store p as, given the type a client declared (an API type
 * name; NULL or "" = infer it): a declared Go type must be what p's sample
 * and period types say it is (heap and allocs are the same profile with
 * another default, block and mutex the same types: either is accepted);
 * "other" takes anything. Inferred: pd_profile_go_type, "other" for a
 * profile of no Go kind. *out is a static string. PD_EINVAL naming both
 * types on a mismatch, or when block/mutex cannot be told apart.
 */
int pd_profile_check_type(const struct pd_profile *p, const char *declared, const char **out,
			  struct pd_err *err) PD_WUR;

/* Human-readable "type/unit" list for error messages, e.g. "[samples/count cpu/nanoseconds]". */
void pd_profile_describe_types(const struct pd_profile *p, char *buf, size_t n);

#endif
