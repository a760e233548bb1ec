/*
 * test_auth.c — lib/http/auth: the tokens file (syntax, mode, limits, every
 * refusal names FILE:LINE and never the token) and the Authorization header
 * (Bearer, basic auth's password, unknown, malformed).
 */
#include "testutil.h"
#include "../../lib/http/auth.h"

#include <sys/stat.h>

static char tmpdir[256];

TU_TMPDIR_FIXTURES(tmpdir, "auth")

#define TOK_R "r3ad-0123456789abcdef"
#define TOK_W "wr1te-0123456789abcdef"
#define TOK_A "adm1n-0123456789abcdef"

static const char *write_file(const char *name, const char *text, mode_t mode)
{
	static char path[400];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void load_err(const char *text, mode_t mode, const char *want)
{
	struct pd_tokens *t;
	struct pd_err err;
	const char *p = write_file("bad", text, mode);
	int rc = pd_tokens_load(p, &t, &err);
	if (rc == 0)
		fail_msg("loaded, want \"%s\"", want);
	assert_null(t);
	if (!strstr(err.msg, want))
		fail_msg("message \"%s\", want \"%s\"", err.msg, want);
	/* a refusal never shows a token */
	assert_null(strstr(err.msg, "0123456789abcdef"));
}

static char *basic(const char *user, const char *pass, char *out, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char in[300];
	snprintf(in, sizeof in, "%s:%s", user, pass);
	size_t len = strlen(in), o = (size_t)snprintf(out, n, "Basic ");
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < len)
			v |= (unsigned char)in[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? b64[v & 63] : '=';
	}
	out[o] = 0;
	return out;
}

static void test_load_and_check(void **state)
{
	(void)state;
	const char *p = write_file("tokens",
				   "# profd tokens\n"
				   "\n" TOK_R " read dashboards\n" TOK_W " write agents   # the profefe agents\n"
				   "\t" TOK_A "  read,write,admin\n",
				   0600);
	struct pd_tokens *t;
	struct pd_err err;
	assert_int_equal(pd_tokens_load(p, &t, &err), 0);
	assert_int_equal(pd_tokens_count(t), 3);
	const char *name;
	assert_int_equal(pd_tokens_check(t, "Bearer " TOK_R, &name), PD_SCOPE_READ);
	assert_string_equal(name, "dashboards");
	assert_int_equal(pd_tokens_check(t, "bearer  " TOK_W " ", &name), PD_SCOPE_WRITE);
	assert_string_equal(name, "agents");
	assert_int_equal(pd_tokens_check(t, "Bearer " TOK_A, &name), PD_SCOPE_READ | PD_SCOPE_WRITE | PD_SCOPE_ADMIN);
	assert_string_equal(name, "line 5");
	char b[600];
	assert_int_equal(pd_tokens_check(t, basic("kube-profefe", TOK_W, b, sizeof b), &name), PD_SCOPE_WRITE);
	assert_int_equal(pd_tokens_check(t, basic("", TOK_R, b, sizeof b), NULL), PD_SCOPE_READ);
	/* unknown, truncated, extended, wrong scheme, malformed */
	assert_int_equal(pd_tokens_check(t, "Bearer " TOK_R "x", &name), 0);
	assert_null(name);
	assert_int_equal(pd_tokens_check(t, "Bearer r3ad-0123456789abcde", NULL), 0);
	assert_int_equal(pd_tokens_check(t, "Token " TOK_R, NULL), 0);
	assert_int_equal(pd_tokens_check(t, TOK_R, NULL), 0);
	assert_int_equal(pd_tokens_check(t, "Bearer ", NULL), 0);
	assert_int_equal(pd_tokens_check(t, "Basic !!!!", NULL), 0);
	assert_int_equal(pd_tokens_check(t, basic(TOK_R, "", b, sizeof b), NULL), 0); /* the token as the user */
	assert_int_equal(pd_tokens_check(t, NULL, NULL), 0);
	assert_int_equal(pd_tokens_check(NULL, "Bearer " TOK_R, NULL), 0);
	char s[32];
	assert_string_equal(pd_scopes_str(PD_SCOPE_READ | PD_SCOPE_ADMIN, s, sizeof s), "read,admin");
	assert_string_equal(pd_scopes_str(0, s, sizeof s), "none");
	pd_tokens_free(t);
}

static void test_refusals(void **state)
{
	(void)state;
	load_err(TOK_R " read\n", 0644, "readable by group or others (mode 0644)");
	load_err(TOK_R " read\n", 0640, "chmod 600");
	load_err("# nothing\n\n", 0600, "holds no token");
	load_err("short read\n", 0600, ":1: the token is 5 characters: want 16..256");
	load_err("\n" TOK_R "\n", 0600, ":2: want TOKEN SCOPE[,SCOPE] [NAME]: no scope");
	load_err(TOK_R " reed\n", 0600, ":1: bad scope list \"reed\"");
	load_err(TOK_R " read,\n", 0600, "bad scope list");
	/* a token where the scopes go (NAME TOKEN SCOPE) is not quoted */
	load_err("dashboards-readonly " TOK_R " read\n", 0600, ":1: bad scope list (21 characters, not shown");
	load_err(TOK_R " read a b\n", 0600, "more than 3 fields");
	load_err(TOK_R " read one\n" TOK_R " write two\n", 0600, ":2: the same token as \"one\"");
	load_err("ab:cdefghijklmnopq read\n", 0600, "not printable ASCII (or ':')");
	struct pd_tokens *t;
	struct pd_err err;
	char path[400];
	snprintf(path, sizeof path, "%s/none", tmpdir);
	assert_int_equal(pd_tokens_load(path, &t, &err), PD_EIO);
	assert_non_null(strstr(err.msg, "No such file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_load_and_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
