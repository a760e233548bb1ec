/*
 * test_util.c — lib/util: arenas, capped buffers, the hash index, error
 * messages, gzip (multi-member, caps), byte formatting, file helpers.
 */
#include "testutil.h"
#include "../../lib/pprof/ptype.h"
#include "../../lib/util/pdcurl.h"
#include "../../lib/util/pdpcre2.h"
#include "../../lib/util/pdsqlite.h"
#include "../../lib/util/pdyaml.h"
#include "../../lib/util/pdzstd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- libcurl, loaded on first use ------------------------------------------ */

/* Nothing before this loads libcurl (it is not linked); the first curl_*
 * call does, and the calls go to the real library. */
static void test_curl_loaded_on_first_use(void **state)
{
	(void)state;
	assert_false(pd_curl_loaded());
	CURL *h = curl_easy_init();
	assert_non_null(h);
	assert_true(pd_curl_loaded());
	char *e = curl_easy_escape(h, "a b/c", 0);
	assert_non_null(e);
	assert_string_equal(e, "a%20b%2Fc");
	curl_free(e);
	assert_int_equal(curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
	assert_string_equal(curl_easy_strerror(CURLE_COULDNT_CONNECT), "Couldn't connect to server");
	curl_easy_cleanup(h);
}

/* SQLite likewise: nothing before this opens a store. */
static void test_sqlite_loaded_on_first_use(void **state)
{
	(void)state;
	assert_false(pd_sqlite_loaded());
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	assert_true(pd_sqlite_loaded());
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (41 + 1)", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT x FROM t", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(st, 0), 42);
	sqlite3_finalize(st);
	assert_string_equal(sqlite3_errstr(SQLITE_BUSY), "database is locked");
	sqlite3_close(db);
}

/* zstd, libyaml and PCRE2 likewise: a round trip through each. */
static void test_small_libs_loaded_on_first_use(void **state)
{
	(void)state;
	assert_false(pd_zstd_loaded());
	char raw[256], z[512], back[256];
	memset(raw, 'p', sizeof raw);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	assert_true(pd_zstd_loaded());
	assert_non_null(c);
	size_t zn = ZSTD_compress2(c, z, sizeof z, raw, sizeof raw);
	ZSTD_freeCCtx(c);
	assert_false(ZSTD_isError(zn));
	assert_true(zn < sizeof raw);
	ZSTD_DCtx *d = ZSTD_createDCtx();
	assert_int_equal(ZSTD_decompressDCtx(d, back, sizeof back, z, zn), sizeof raw);
	assert_memory_equal(back, raw, sizeof raw);
	ZSTD_freeDCtx(d);

	assert_false(pd_yaml_loaded());
	yaml_parser_t yp;
	assert_true(yaml_parser_initialize(&yp));
	assert_true(pd_yaml_loaded());
	static const char doc[] = "a: [1, 2]\n";
	yaml_parser_set_input_string(&yp, (const unsigned char *)doc, sizeof doc - 1);
	yaml_document_t yd;
	assert_true(yaml_parser_load(&yp, &yd));
	yaml_node_t *root = yaml_document_get_root_node(&yd);
	assert_non_null(root);
	assert_int_equal(root->type, YAML_MAPPING_NODE);
	yaml_document_delete(&yd);
	yaml_parser_delete(&yp);

	assert_false(pd_pcre2_loaded());
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR) "^ab+c$", PCRE2_ZERO_TERMINATED, 0, &ec, &eo, NULL);
	assert_true(pd_pcre2_loaded());
	assert_non_null(re);
	pcre2_match_data *md = pcre2_match_data_create(4, NULL);
	assert_true(pcre2_match(re, (PCRE2_SPTR) "abbbc", 5, 0, 0, md, NULL) > 0);
	assert_true(pcre2_match(re, (PCRE2_SPTR) "ac", 2, 0, 0, md, NULL) < 0);
	pcre2_match_data_free(md);
	pcre2_code_free(re);
}

/* ---- arena ---------------------------------------------------------------- */

static void test_arena_many_allocs(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(0); /* 0 = default chunk size */
	assert_non_null(a);
	enum { N = 100000 };
	uint8_t **ptrs = malloc(N * sizeof *ptrs);
	assert_non_null(ptrs);
	size_t total = 0;
	for (size_t i = 0; i < N; i++) {
		size_t n = 1 + (i * 37) % 200;
		ptrs[i] = pd_arena_alloc(a, n);
		assert_non_null(ptrs[i]);
		assert_int_equal((uintptr_t)ptrs[i] % 8, 0);
		memset(ptrs[i], (int)(i & 0xff), n);
		total += n;
	}
	/* nothing overlapped */
	for (size_t i = 0; i < N; i++) {
		size_t n = 1 + (i * 37) % 200;
		for (size_t j = 0; j < n; j++)
			if (ptrs[i][j] != (uint8_t)(i & 0xff))
				fail_msg("allocation %zu byte %zu overwritten", i, j);
	}
	assert_true(pd_arena_used(a) >= total);
	free(ptrs);
	pd_arena_free(a);
	pd_arena_free(NULL);
}

static void test_arena_big_allocs(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(4096);
	assert_non_null(a);
	uint8_t *small1 = pd_arena_alloc(a, 16);
	assert_non_null(small1);
	memset(small1, 1, 16);
	static const size_t sizes[] = {1000, 1025, 4096, 5000, 1 << 20, 10 << 20, 3, 64 << 10};
	uint8_t *big[ARRAY_LEN(sizes)];
	for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
		big[i] = pd_arena_alloc(a, sizes[i]);
		assert_non_null(big[i]);
		assert_int_equal((uintptr_t)big[i] % 8, 0);
		memset(big[i], (int)(0x10 + i), sizes[i]);
		/* small allocations keep working between big ones */
		uint8_t *s = pd_arena_alloc(a, 24);
		assert_non_null(s);
		memset(s, 0x77, 24);
	}
	for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
		assert_int_equal(big[i][0], 0x10 + i);
		assert_int_equal(big[i][sizes[i] - 1], 0x10 + i);
	}
	for (int i = 0; i < 16; i++)
		assert_int_equal(small1[i], 1);
	/* zero-byte allocations are distinct, valid pointers */
	void *z1 = pd_arena_alloc(a, 0), *z2 = pd_arena_alloc(a, 0);
	assert_non_null(z1);
	assert_non_null(z2);
	assert_ptr_not_equal(z1, z2);
	pd_arena_free(a);
}

static void test_arena_calloc_dup(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(1024);
	assert_non_null(a);
	for (int round = 0; round < 3; round++) {
		/* dirty the arena, then calloc must still hand back zeros */
		uint8_t *d = pd_arena_alloc(a, 300);
		assert_non_null(d);
		memset(d, 0xff, 300);
		uint64_t *z = pd_arena_calloc(a, 100, sizeof *z);
		assert_non_null(z);
		for (int i = 0; i < 100; i++)
			assert_int_equal(z[i], 0);
	}
	assert_null(pd_arena_calloc(a, SIZE_MAX / 2, 4)); /* n * size overflows */
	const char msg[] = "hello arena";
	char *c = pd_arena_dup(a, msg, sizeof msg);
	assert_non_null(c);
	assert_ptr_not_equal(c, msg);
	assert_string_equal(c, msg);
	assert_non_null(pd_arena_dup(a, msg, 0));
	pd_arena_free(a);
}

/* A request whose size cannot be represented must fail, not hand back a
 * tiny block ("NULL on OOM", util.h). */
static void test_arena_alloc_overflow(void **state)
{
	(void)state;
	struct pd_arena *a = pd_arena_new(1024);
	assert_non_null(a);
	void *p1 = pd_arena_alloc(a, SIZE_MAX);
	void *p2 = pd_arena_alloc(a, SIZE_MAX - 3);
	pd_arena_free(a);
	assert_null(p1);
	assert_null(p2);
}

/* ---- pd_buf ------------------------------------------------------------------ */

static void test_buf_caps(void **state)
{
	(void)state;
	struct pd_buf b = PD_BUF_INIT(10);
	assert_int_equal(pd_buf_append(&b, "0123456789", 10), 0);
	assert_int_equal(b.len, 10);
	assert_true(b.cap <= 10);
	assert_int_equal(pd_buf_append(&b, "x", 1), PD_ELIMIT);
	assert_int_equal(b.len, 10);
	assert_memory_equal(b.ptr, "0123456789", 10);
	assert_int_equal(pd_buf_append(&b, "", 0), 0);
	assert_int_equal(pd_buf_reserve(&b, SIZE_MAX), PD_ELIMIT);
	pd_buf_free(&b);
	assert_null(b.ptr);
	assert_int_equal(b.len, 0);

	/* partial fill then over */
	struct pd_buf c = PD_BUF_INIT(300);
	for (int i = 0; i < 30; i++)
		assert_int_equal(pd_buf_append(&c, "0123456789", 10), 0);
	assert_int_equal(pd_buf_append(&c, "0123456789", 10), PD_ELIMIT);
	assert_int_equal(c.len, 300);
	assert_true(c.cap <= 300);
	pd_buf_free(&c);

	/* max 0 = unlimited; growth keeps the contents */
	struct pd_buf u = PD_BUF_INIT(0);
	for (uint32_t i = 0; i < 100000; i++)
		assert_int_equal(pd_buf_append(&u, &i, sizeof i), 0);
	for (uint32_t i = 0; i < 100000; i++) {
		uint32_t x;
		memcpy(&x, u.ptr + i * sizeof x, sizeof x);
		assert_int_equal(x, i);
	}
	assert_int_equal(pd_buf_reserve(&u, SIZE_MAX), PD_ELIMIT); /* len + extra overflows */
	pd_buf_free(&u);
}

/* ---- hash index ------------------------------------------------------------ */

struct eqctx {
	const uint64_t *keys; /* value -> key */
	uint64_t want;
	unsigned calls;
};

static bool eq_key(void *ctx, uint32_t v)
{
	struct eqctx *c = ctx;
	c->calls++;
	return c->keys[v] == c->want;
}

static void test_hidx_collisions(void **state)
{
	(void)state;
	enum { N = 2000 };
	uint64_t *keys = malloc(N * sizeof *keys);
	assert_non_null(keys);
	struct pd_hidx h;
	assert_int_equal(pd_hidx_init(&h, 1), 0);
	/* every value under the same hash; the index grows several times */
	for (uint32_t i = 0; i < N; i++) {
		keys[i] = i * 3 + 1;
		assert_int_equal(pd_hidx_insert(&h, 42, i), 0);
	}
	assert_int_equal(h.n, N);
	struct eqctx c = {keys, 0, 0};
	for (uint32_t i = 0; i < N; i += 97) {
		c.want = keys[i];
		assert_int_equal(pd_hidx_find(&h, 42, eq_key, &c), i);
	}
	c.want = 2; /* no such key */
	assert_int_equal(pd_hidx_find(&h, 42, eq_key, &c), UINT32_MAX);
	c.want = keys[5];
	assert_int_equal(pd_hidx_find(&h, 43, eq_key, &c), UINT32_MAX);
	pd_hidx_free(&h);

	/* hash 0 is remapped to 1: both live side by side */
	assert_int_equal(pd_hidx_init(&h, 0), 0);
	keys[0] = 100;
	keys[1] = 200;
	assert_int_equal(pd_hidx_insert(&h, 0, 0), 0);
	assert_int_equal(pd_hidx_insert(&h, 1, 1), 0);
	c.want = 100;
	assert_int_equal(pd_hidx_find(&h, 0, eq_key, &c), 0);
	assert_int_equal(pd_hidx_find(&h, 1, eq_key, &c), 0);
	c.want = 200;
	assert_int_equal(pd_hidx_find(&h, 0, eq_key, &c), 1);
	pd_hidx_free(&h);

	/* many distinct hashes, including ones colliding in the low bits */
	assert_int_equal(pd_hidx_init(&h, 16), 0);
	uint64_t *k2 = malloc(100000 * sizeof *k2);
	assert_non_null(k2);
	for (uint32_t i = 0; i < 100000; i++) {
		k2[i] = i;
		uint64_t hash = (i % 16) ? pd_hash_u64(i) : (uint64_t)i << 40;
		assert_int_equal(pd_hidx_insert(&h, hash, i), 0);
	}
	struct eqctx c2 = {k2, 0, 0};
	for (uint32_t i = 0; i < 100000; i++) {
		c2.want = i;
		uint64_t hash = (i % 16) ? pd_hash_u64(i) : (uint64_t)i << 40;
		assert_int_equal(pd_hidx_find(&h, hash, eq_key, &c2), i);
	}
	pd_hidx_free(&h);
	free(k2);
	free(keys);
}

/* The inverse of pd_hash_u64 (each of its steps undone, last first). */
static uint64_t unshift33(uint64_t x) { return x ^ (x >> 33); } /* x ^= x >> 33 is its own inverse for 64 bits */
static uint64_t mul_inverse(uint64_t a) /* a odd: Newton's iteration, 6 steps give 64 bits */
{
	uint64_t y = a;
	for (int i = 0; i < 6; i++)
		y *= 2 - a * y;
	return y;
}
static uint64_t unhash_u64(uint64_t h)
{
	h = unshift33(h);
	h *= mul_inverse(0xc4ceb9fe1a85ec53ULL);
	h = unshift33(h);
	h *= mul_inverse(0xff51afd7ed558ccdULL);
	return unshift33(h);
}

static void test_hidx_find_u64(void **state)
{
	(void)state;
	/* pd_hash_u64 is a bijection: the premise of pd_hidx_find_u64 */
	for (uint64_t k = 0; k < 100000; k++)
		assert_true(unhash_u64(pd_hash_u64(k * 0x9e3779b97f4a7c15ULL)) == k * 0x9e3779b97f4a7c15ULL);
	enum { N = 50000 };
	uint64_t *keys = malloc((N + 2) * sizeof *keys);
	assert_non_null(keys);
	struct pd_hidx h;
	assert_int_equal(pd_hidx_init(&h, 16), 0);
	/* keys 0 and k1 (whose hash is 1) share the stored hash 1; the others
	 * are told apart by their hash alone */
	uint64_t k1 = unhash_u64(1);
	assert_true(pd_hash_u64(k1) == 1 && pd_hash_u64(0) == 0 && k1 != 0);
	keys[0] = 0;
	keys[1] = k1;
	for (uint32_t i = 2; i < N + 2; i++)
		keys[i] = (uint64_t)i << 32 | (i * 7u);
	for (uint32_t i = 0; i < N + 2; i++)
		assert_int_equal(pd_hidx_insert(&h, pd_hash_u64(keys[i]), i), 0);
	struct eqctx c = {keys, 0, 0};
	for (uint32_t i = 2; i < N + 2; i++) {
		c.want = keys[i];
		assert_int_equal(pd_hidx_find_u64(&h, pd_hash_u64(keys[i]), eq_key, &c), i);
	}
	assert_int_equal(c.calls, 0); /* no stored key was read */
	c.want = 0;
	assert_int_equal(pd_hidx_find_u64(&h, pd_hash_u64(0), eq_key, &c), 0);
	c.want = k1;
	assert_int_equal(pd_hidx_find_u64(&h, pd_hash_u64(k1), eq_key, &c), 1);
	assert_true(c.calls >= 2);
	/* absent keys: not found (the shared hash asks eq) */
	c.want = 12345;
	assert_int_equal(pd_hidx_find_u64(&h, pd_hash_u64(12345), eq_key, &c), UINT32_MAX);
	pd_hidx_free(&h);
	assert_int_equal(pd_hidx_init(&h, 16), 0);
	assert_int_equal(pd_hidx_insert(&h, pd_hash_u64(k1), 1), 0);
	c.want = 0; /* only k1 stored: 0 has its stored hash, and is not it */
	assert_int_equal(pd_hidx_find_u64(&h, pd_hash_u64(0), eq_key, &c), UINT32_MAX);
	pd_hidx_free(&h);
	free(keys);
}

static void test_hash(void **state)
{
	(void)state;
	assert_true(pd_hash("abc", 3, 0) == pd_hash("abc", 3, 0));
	assert_true(pd_hash("abc", 3, 0) != pd_hash("abc", 3, 1));
	assert_true(pd_hash("abc", 3, 0) != pd_hash("abd", 3, 0));
	assert_true(pd_hash_u64(1) != pd_hash_u64(2));
	(void)pd_hash(NULL, 0, 0);
}

/* ---- errors ------------------------------------------------------------------ */

static void test_err_prefix_truncation(void **state)
{
	(void)state;
	struct pd_err e;
	char longmsg[2000];
	memset(longmsg, 'm', sizeof longmsg - 1);
	longmsg[sizeof longmsg - 1] = 0;
	assert_int_equal(pd_errf(&e, PD_EINVAL, "%s", longmsg), PD_EINVAL);
	assert_int_equal(e.code, PD_EINVAL);
	assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
	pd_err_prefix(&e, "file %s", "x.pb.gz");
	assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
	assert_true(strncmp(e.msg, "file x.pb.gz: mmm", 17) == 0);
	assert_int_equal(e.code, PD_EINVAL);

	/* a prefix longer than the whole message buffer */
	char longpre[1500];
	memset(longpre, 'p', sizeof longpre - 1);
	longpre[sizeof longpre - 1] = 0;
	pd_errf(&e, PD_EIO, "short");
	pd_err_prefix(&e, "%s", longpre);
	assert_true(strlen(e.msg) < sizeof e.msg);
	assert_true(e.msg[0] == 'p');

	/* many prefixes in a row */
	pd_errf(&e, PD_ELIMIT, "root cause");
	for (int i = 0; i < 200; i++)
		pd_err_prefix(&e, "level %d", i);
	assert_true(strlen(e.msg) < sizeof e.msg);
	assert_true(strncmp(e.msg, "level 199: level 198: ", 22) == 0);
	assert_int_equal(e.code, PD_ELIMIT);

	/* short ones compose exactly */
	pd_errf(&e, PD_EINVAL, "bad %d", 7);
	pd_err_prefix(&e, "b");
	pd_err_prefix(&e, "a");
	assert_string_equal(e.msg, "a: b: bad 7");

	/* NULL err is allowed */
	assert_int_equal(pd_errf(NULL, PD_ENOMEM, "x"), PD_ENOMEM);
	pd_err_prefix(NULL, "x");
}

static void test_strerror(void **state)
{
	(void)state;
	static const int codes[] = {PD_OK, PD_EINVAL, PD_ENOMEM, PD_ELIMIT, PD_EIO, PD_EINCOMPAT, PD_ENOTFOUND, PD_EUSAGE};
	for (size_t i = 0; i < ARRAY_LEN(codes); i++) {
		assert_non_null(pd_strerror(codes[i]));
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(pd_strerror(codes[i]), pd_strerror(codes[j]));
	}
	assert_string_equal(pd_strerror(-999), "unknown error");
}

/* ---- gzip ----------------------------------------------------------------------- */

static void gz_append(struct pd_buf *out, const char *s, size_t n, int level)
{
	struct pd_err err;
	assert_int_equal(pd_gzip((const uint8_t *)s, n, level, out, &err), 0);
}

static void test_gunzip_multi_member(void **state)
{
	(void)state;
	struct pd_buf gz = PD_BUF_INIT(0);
	gz_append(&gz, "hello ", 6, 6);
	gz_append(&gz, "", 0, 1); /* an empty member */
	gz_append(&gz, "world", 5, 12);
	uint8_t *out = NULL;
	size_t n = 0;
	struct pd_err err;
	assert_int_equal(pd_gunzip(gz.ptr, gz.len, 1 << 20, &out, &n, &err), 0);
	assert_int_equal(n, 11);
	assert_memory_equal(out, "hello world", 11);
	free(out);
	/* the cap counts all members together */
	struct pd_buf two = PD_BUF_INIT(0);
	char fifty[50];
	memset(fifty, 'q', sizeof fifty);
	gz_append(&two, fifty, 50, 6);
	gz_append(&two, fifty, 50, 6);
	assert_int_equal(pd_gunzip(two.ptr, two.len, 80, &out, &n, &err), PD_ELIMIT);
	assert_null(out);
	assert_int_equal(pd_gunzip(two.ptr, two.len, 100, &out, &n, &err), 0);
	assert_int_equal(n, 100);
	free(out);
	pd_buf_free(&two);
	/* exactly at the cap, then an empty member */
	struct pd_buf full = PD_BUF_INIT(0);
	char hundred[100];
	memset(hundred, 'h', sizeof hundred);
	gz_append(&full, hundred, 100, 6);
	gz_append(&full, "", 0, 6);
	assert_int_equal(pd_gunzip(full.ptr, full.len, 100, &out, &n, &err), 0);
	assert_int_equal(n, 100);
	free(out);
	pd_buf_free(&full);
	/* garbage after the last member */
	assert_int_equal(pd_buf_append(&gz, "\x1f", 1), 0);
	assert_int_equal(pd_gunzip(gz.ptr, gz.len, 1 << 20, &out, &n, &err), PD_EINVAL);
	assert_null(out);
	assert_contains(err.msg, "trailing garbage");
	pd_buf_free(&gz);

	/* many larger members; the ISIZE hint of the last one is small */
	struct pd_buf big = PD_BUF_INIT(0);
	char *chunk = malloc(100000);
	assert_non_null(chunk);
	for (int i = 0; i < 5; i++) {
		for (size_t j = 0; j < 100000; j++)
			chunk[j] = (char)('a' + (j * (size_t)(i + 1)) % 26);
		gz_append(&big, chunk, 100000, 6);
	}
	gz_append(&big, "!", 1, 6);
	assert_int_equal(pd_gunzip(big.ptr, big.len, 1 << 20, &out, &n, &err), 0);
	assert_int_equal(n, 500001);
	assert_int_equal(out[500000], '!');
	assert_int_equal(out[100000 + 1], (char)('a' + 2 % 26));
	free(out);
	free(chunk);
	pd_buf_free(&big);
}

/* "At most max_out bytes are produced; more is PD_ELIMIT" (gz.h), also
 * for caps under 64 bytes. */
static void test_gunzip_small_cap(void **state)
{
	(void)state;
	struct pd_buf gz = PD_BUF_INIT(0);
	gz_append(&gz, "hello world", 11, 6);
	uint8_t *out = NULL;
	size_t n = 0;
	struct pd_err err;
	int rc = pd_gunzip(gz.ptr, gz.len, 8, &out, &n, &err);
	free(out);
	pd_buf_free(&gz);
	if (rc != PD_ELIMIT)
		fail_msg("11 bytes with max_out 8: rc %d, %zu bytes produced", rc, n);
}

static void test_gunzip_errors(void **state)
{
	(void)state;
	uint8_t *out = (uint8_t *)1;
	size_t n = 7;
	struct pd_err err;
	assert_int_equal(pd_gunzip((const uint8_t *)"plain", 5, 100, &out, &n, &err), PD_EINVAL);
	assert_null(out);
	assert_int_equal(n, 0);
	assert_int_equal(pd_gunzip((const uint8_t *)"\x1f\x8b", 2, 100, &out, &n, &err), PD_EINVAL);
	assert_null(out);
	struct pd_buf gz = PD_BUF_INIT(0);
	gz_append(&gz, "some text to compress, some text to compress", 44, 6);
	for (size_t len = 2; len < gz.len; len++) {
		uint8_t *c = malloc(len);
		assert_non_null(c);
		memcpy(c, gz.ptr, len);
		int rc = pd_gunzip(c, len, 1 << 20, &out, &n, &err);
		if (rc != PD_EINVAL)
			fail_msg("prefix %zu: rc %d", len, rc);
		assert_null(out);
		free(c);
	}
	pd_buf_free(&gz);
	/* pd_gzip into a capped buffer */
	struct pd_buf small = PD_BUF_INIT(4);
	assert_int_equal(pd_gzip((const uint8_t *)"abcdef", 6, 6, &small, &err), PD_ELIMIT);
	pd_buf_free(&small);
	assert_true(pd_is_gzip((const uint8_t *)"\x1f\x8b", 2));
	assert_false(pd_is_gzip((const uint8_t *)"\x1f", 1));
	assert_false(pd_is_gzip((const uint8_t *)"\x8b\x1f", 2));
}

/* ---- misc ------------------------------------------------------------------------ */

static void test_fmt_bytes(void **state)
{
	(void)state;
	char buf[32];
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 0), "0 B");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1), "1 B");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1023), "1023 B");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1024), "1.0 KiB");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1536), "1.5 KiB");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1.5 * 1024 * 1024), "1.5 MiB");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 3.0 * (1 << 30)), "3.0 GiB");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1099511627776.0), "1.0 TiB");
	assert_string_equal(pd_fmt_bytes(buf, sizeof buf, 1024.0 * 1099511627776.0), "1024.0 TiB");
	/* a small buffer truncates safely */
	char tiny[4];
	memset(tiny, 'x', sizeof tiny);
	const char *r = pd_fmt_bytes(tiny, sizeof tiny, 123456789);
	assert_ptr_equal(r, tiny);
	assert_int_equal(strlen(tiny), 3);
}

static void test_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/profd_test_util_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/out.bin", dir);
	struct pd_err err;
	uint8_t data[5000];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(i * 13);
	assert_int_equal(pd_write_file(path, data, sizeof data, &err), 0);
	struct pd_buf b = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_read_file(&b, path, &err), 0);
	assert_int_equal(b.len, sizeof data);
	assert_memory_equal(b.ptr, data, sizeof data);
	pd_buf_free(&b);
	/* over the cap */
	struct pd_buf c = PD_BUF_INIT(4999);
	assert_int_equal(pd_buf_read_file(&c, path, &err), PD_ELIMIT);
	assert_contains(err.msg, path);
	pd_buf_free(&c);
	struct pd_buf d = PD_BUF_INIT(5001);
	assert_int_equal(pd_buf_read_file(&d, path, &err), 0);
	assert_int_equal(d.len, 5000);
	pd_buf_free(&d);
	/* overwrite atomically, no temp file left behind */
	assert_int_equal(pd_write_file(path, "new", 3, &err), 0);
	struct pd_buf e = PD_BUF_INIT(0);
	assert_int_equal(pd_buf_read_file(&e, path, &err), 0);
	assert_int_equal(e.len, 3);
	pd_buf_free(&e);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
	assert_int_equal(system(cmd), 0);
	/* missing file / unwritable directory */
	struct pd_buf f = PD_BUF_INIT(0);
	char missing[300];
	snprintf(missing, sizeof missing, "%s/missing", dir);
	assert_int_equal(pd_buf_read_file(&f, missing, &err), PD_EIO);
	assert_contains(err.msg, "missing");
	pd_buf_free(&f);
	assert_int_equal(pd_write_file("/nonexistent-dir/x", "a", 1, &err), PD_EIO);
	/* a path that is not a regular file (a FIFO here; /dev/null) is written
	 * in place, not replaced by a regular file */
	char fifo[300];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	int rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(rfd >= 0);
	assert_int_equal(pd_write_file(fifo, "pipe", 4, &err), 0);
	char got[8] = {0};
	assert_int_equal(read(rfd, got, sizeof got), 4);
	assert_memory_equal(got, "pipe", 4);
	close(rfd);
	struct stat st;
	assert_int_equal(stat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	unlink(fifo);
	unlink(path);
	rmdir(dir);
	assert_true(pd_now() > 0);
}

/* A file of exactly b->max bytes is within the cap (stdin/pipes get it
 * right; regular files reserve size + 1 and fail with "out of memory"). */
static void test_read_file_exact_cap(void **state)
{
	(void)state;
	char path[] = "/tmp/profd_test_util_cap_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	char data[100];
	memset(data, 'z', sizeof data);
	assert_int_equal(write(fd, data, sizeof data), (ssize_t)sizeof data);
	close(fd);
	struct pd_buf b = PD_BUF_INIT(100);
	struct pd_err err = {0, ""};
	int rc = pd_buf_read_file(&b, path, &err);
	size_t len = b.len;
	pd_buf_free(&b);
	unlink(path);
	if (rc != 0)
		fail_msg("100-byte file with a 100-byte cap: rc %d (%s)", rc, err.msg);
	assert_int_equal(len, 100);
}

/* Parallel gzip: the same bytes for any thread count, several members for a
 * large input, and it inflates back to the input (with our gunzip and, by
 * construction, any multi-member gzip reader). */
static void test_gzip_mt(void **state)
{
	(void)state;
	size_t n = 3 * 1024 * 1024 + 12345;
	uint8_t *in = malloc(n);
	assert_non_null(in);
	uint64_t x = 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		in[i] = (uint8_t)((x >> 60) + 'a'); /* compressible but not trivial */
	}
	struct pd_err err;
	struct pd_buf one = PD_BUF_INIT(0);
	assert_int_equal(pd_gzip_mt(in, n, 6, 1, &one, &err), 0);
	for (int t = 2; t <= 8; t *= 2) {
		struct pd_buf b = PD_BUF_INIT(0);
		assert_int_equal(pd_gzip_mt(in, n, 6, t, &b, &err), 0);
		assert_int_equal(b.len, one.len);
		assert_memory_equal(b.ptr, one.ptr, b.len);
		pd_buf_free(&b);
	}
	/* several members: a gzip header appears again after the first */
	size_t members = 0;
	for (size_t i = 0; i + 3 < one.len; i++)
		members += one.ptr[i] == 0x1f && one.ptr[i + 1] == 0x8b && one.ptr[i + 2] == 8;
	assert_true(members >= 2);
	uint8_t *back;
	size_t blen;
	assert_int_equal(pd_gunzip(one.ptr, one.len, n, &back, &blen, &err), 0);
	assert_int_equal(blen, n);
	assert_memory_equal(back, in, n);
	free(back);
	/* a small input stays one member */
	struct pd_buf small = PD_BUF_INIT(0);
	assert_int_equal(pd_gzip_mt(in, 1000, 6, 4, &small, &err), 0);
	assert_int_equal(pd_gunzip(small.ptr, small.len, 1000, &back, &blen, &err), 0);
	assert_int_equal(blen, 1000);
	free(back);
	pd_buf_free(&small);
	pd_buf_free(&one);
	free(in);
}

/* The profile type table (lib/pprof/ptype.h): its names list is its names,
 * lookups find each, and the kinds are Go's. */
static void test_ptype_table(void **state)
{
	(void)state;
	for (int i = 0; i < PD_PT_N; i++) {
		assert_string_equal(pd_ptype_names[i], pd_ptypes[i].name);
		assert_int_equal(pd_ptype_find(pd_ptypes[i].name), i);
		assert_false(pd_ptypes[i].gauge && pd_ptypes[i].cumulative);
	}
	assert_null(pd_ptype_names[PD_PT_N]);
	assert_int_equal(pd_ptype_find("trace"), -1);
	assert_int_equal(pd_ptype_find(NULL), -1);
	assert_int_equal(pd_ptype_find("Cpu"), -1);
	assert_string_equal(pd_ptype_name(99), "other");
	assert_true(pd_ptypes[PD_PT_HEAP].gauge && pd_ptypes[PD_PT_GOROUTINE].gauge && pd_ptypes[PD_PT_THREADCREATE].gauge);
	assert_true(pd_ptypes[PD_PT_ALLOCS].cumulative && pd_ptypes[PD_PT_BLOCK].cumulative && pd_ptypes[PD_PT_MUTEX].cumulative);
	assert_false(pd_ptypes[PD_PT_CPU].gauge || pd_ptypes[PD_PT_CPU].cumulative || !pd_ptypes[PD_PT_CPU].scraped);
	assert_false(pd_ptypes[PD_PT_OTHER].scraped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptype_table),
		cmocka_unit_test(test_arena_many_allocs),
		cmocka_unit_test(test_arena_big_allocs),
		cmocka_unit_test(test_arena_calloc_dup),
		cmocka_unit_test(test_arena_alloc_overflow),
		cmocka_unit_test(test_buf_caps),
		cmocka_unit_test(test_hidx_collisions),
		cmocka_unit_test(test_hidx_find_u64),
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_err_prefix_truncation),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_gunzip_multi_member),
		cmocka_unit_test(test_gunzip_small_cap),
		cmocka_unit_test(test_gunzip_errors),
		cmocka_unit_test(test_fmt_bytes),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_read_file_exact_cap),
		cmocka_unit_test(test_gzip_mt),
		cmocka_unit_test(test_curl_loaded_on_first_use),
		cmocka_unit_test(test_sqlite_loaded_on_first_use),
		cmocka_unit_test(test_small_libs_loaded_on_first_use),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
