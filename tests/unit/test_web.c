/*
 * test_web.c — lib/http/web.c: lookup of the embedded UI files, names that
 * could leave the directory, Content-Types, the prefix check and the <base>
 * that index.html gets under a prefix (and its gzip, which must inflate to
 * the same page).
 */
#include "testutil.h"

#include <libdeflate.h>
#include <unistd.h>

#include "../../lib/http/web.h"

static const unsigned char idx[] = "<!doctype html><html><head><meta charset=\"utf-8\"></head><body>x</body></html>";
static const unsigned char js[] = "export const a = 1;\n";
static const struct pd_web_asset assets[] = {
	{"index.html", idx, sizeof idx - 1, NULL, 0, "\"1\""},
	{"app.js", js, sizeof js - 1, NULL, 0, "\"2\""},
	{"views/flame.js", js, sizeof js - 1, NULL, 0, "\"3\""},
	{0},
};

static void test_lookup(void **state)
{
	(void)state;
	struct pd_web *w;
	struct pd_err err;
	assert_int_equal(pd_web_open(assets, 3, NULL, NULL, &w, &err), 0);
	assert_string_equal(pd_web_prefix(w), "");
	struct pd_web_file f;
	assert_int_equal(pd_web_get(w, "index.html", &f, &err), 0);
	assert_ptr_equal(f.data, idx); /* no prefix: the embedded bytes themselves */
	assert_string_equal(f.ctype, "text/html; charset=utf-8");
	assert_string_equal(f.etag, "\"1\"");
	assert_false(f.owned);
	assert_int_equal(pd_web_get(w, "views/flame.js", &f, &err), 0);
	assert_string_equal(f.ctype, "text/javascript; charset=utf-8");
	const char *bad[] = {"", "..", "../x", "views/../app.js", ".hidden", "views/.x", "a//b", "views/", "/app.js",
			     "a\\b", "app.js\n", "x y", "missing.js"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(pd_web_get(w, bad[i], &f, &err), PD_ENOTFOUND);
		assert_null(f.data);
	}
	pd_web_free(w);
}

static void test_ctype(void **state)
{
	(void)state;
	assert_string_equal(pd_web_ctype("a.css"), "text/css; charset=utf-8");
	assert_string_equal(pd_web_ctype("a.SVG"), "image/svg+xml");
	assert_string_equal(pd_web_ctype("a.png"), "image/png");
	assert_string_equal(pd_web_ctype("a"), "application/octet-stream");
	assert_string_equal(pd_web_ctype("a.js.map"), "application/octet-stream");
}

static void test_prefix(void **state)
{
	(void)state;
	struct pd_web *w;
	struct pd_err err;
	const char *bad[] = {"profd", "/", "/profd/", "//x", "/a/../b", "/a/./b", "/a b", "/a\"b", "/a<b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(pd_web_open(assets, 3, bad[i], NULL, &w, &err), PD_EUSAGE);
		assert_non_null(strstr(err.msg, "--web-prefix"));
	}
	assert_int_equal(pd_web_open(assets, 3, "/ops/profd", NULL, &w, &err), 0);
	struct pd_web_file f;
	assert_int_equal(pd_web_get(w, "index.html", &f, &err), 0);
	const char *want = "<!doctype html><html><head><base href=\"/ops/profd/\"><meta charset=\"utf-8\"></head>"
			   "<body>x</body></html>";
	assert_int_equal(f.len, strlen(want));
	assert_memory_equal(f.data, want, f.len);
	assert_string_not_equal(f.etag, "\"1\""); /* another page, another tag */
	assert_non_null(f.gz);
	char out[512];
	size_t got = 0;
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	assert_int_equal(libdeflate_gzip_decompress(d, f.gz, f.gzlen, out, sizeof out, &got), LIBDEFLATE_SUCCESS);
	libdeflate_free_decompressor(d);
	assert_int_equal(got, f.len);
	assert_memory_equal(out, want, got);
	/* the other files are untouched */
	assert_int_equal(pd_web_get(w, "app.js", &f, &err), 0);
	assert_ptr_equal(f.data, js);
	pd_web_free(w);
}

static void test_dir(void **state)
{
	(void)state;
	char dir[] = "/tmp/profd-webtest-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[300];
	snprintf(path, sizeof path, "%s/index.html", dir);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("<html><HEAD lang=en><title>t</title></HEAD></html>", fp);
	fclose(fp);
	struct pd_web *w;
	struct pd_err err;
	assert_int_equal(pd_web_open(assets, 3, "/p", dir, &w, &err), 0);
	struct pd_web_file f;
	assert_int_equal(pd_web_get(w, "index.html", &f, &err), 0);
	assert_true(f.owned);
	const char *want = "<html><HEAD lang=en><base href=\"/p/\"><title>t</title></HEAD></html>";
	assert_int_equal(f.len, strlen(want));
	assert_memory_equal(f.data, want, f.len);
	free((void *)f.data);
	assert_int_equal(pd_web_get(w, "app.js", &f, &err), PD_ENOTFOUND); /* the directory's files, not the table's */
	assert_non_null(strstr(err.msg, "app.js"));
	pd_web_free(w);
	unlink(path);
	rmdir(dir);
	assert_int_equal(pd_web_open(assets, 3, NULL, dir, &w, &err), PD_EUSAGE);
	assert_non_null(strstr(err.msg, "--web-dir"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_ctype),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
