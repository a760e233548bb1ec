/*
 * test_query.c — lib/query (selectors, selection over a store, flame graph,
 * fleet top) and the API v1 handlers (lib/http/api1) called directly,
 * without HTTP.
 *   - the selector parser: what it accepts, escapes, what it refuses and the
 *     byte offset its message points at, caps, canonical formatting;
 *   - matching: Prometheus semantics (missing label = "", anchored regexes);
 *   - pd_query_select over a real SQLite store with several services, types
 *     and labels: filters, order, the cap;
 *   - the flame graph: totals preserved at every node, max_nodes, "other";
 *   - fleet top = pd_top_compute of all the services' profiles merged;
 *   - pd_api1_handle: every bad parameter class is a 4xx with a message.
 */
#include "testutil.h"
#include "../../lib/query/query.h"
#include "../../lib/http/api1.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SEC 1000000000LL
#define T0 (1764374400LL * SEC) /* 2025-11-29T00:00:00Z */

/* ---- parser ------------------------------------------------------------------------ */

static struct pd_selector parse_ok(const char *s)
{
	struct pd_selector sel;
	struct pd_err err = {0};
	int rc = pd_selector_parse(s, &sel, &err);
	if (rc)
		fail_msg("parse(%s): %s", s, err.msg);
	return sel;
}

/* Parsing s fails with code and a message containing want. */
static void parse_bad(const char *s, int code, const char *want)
{
	struct pd_selector sel;
	struct pd_err err = {0};
	int rc = pd_selector_parse(s, &sel, &err);
	if (rc == 0)
		fail_msg("parse(%s) accepted", s);
	if (rc != code || !strstr(err.msg, want))
		fail_msg("parse(%s): rc %d msg '%s', want rc %d and '%s'", s, rc, err.msg, code, want);
	assert_null(sel.m);
	assert_null(sel.type);
}

static void test_parse_accepts(void **state)
{
	(void)state;
	struct pd_selector s = parse_ok("cpu");
	assert_string_equal(s.type, "cpu");
	assert_int_equal(s.n, 0);
	pd_selector_free(&s);
	s = parse_ok(" cpu { } ");
	assert_string_equal(s.type, "cpu");
	assert_int_equal(s.n, 0);
	pd_selector_free(&s);
	s = parse_ok("{}");
	assert_null(s.type);
	pd_selector_free(&s);
	s = parse_ok("cpu{service=\"auth\", version=~\"1\\\\..*\", pod!=\"x\", env!~'dev|test',}");
	assert_int_equal(s.n, 4);
	assert_string_equal(s.m[0].name, "service");
	assert_int_equal(s.m[0].op, PD_MATCH_EQ);
	assert_string_equal(s.m[0].value, "auth");
	assert_string_equal(s.m[1].name, "version");
	assert_int_equal(s.m[1].op, PD_MATCH_RE);
	assert_string_equal(s.m[1].value, "1\\..*");
	assert_true(s.m[1].has_re);
	assert_int_equal(s.m[2].op, PD_MATCH_NE);
	assert_int_equal(s.m[3].op, PD_MATCH_NRE);
	assert_string_equal(s.m[3].value, "dev|test");
	assert_string_equal(pd_selector_service(&s), "auth");
	pd_selector_free(&s);
	/* label names: identifiers with . : / -, or quoted */
	s = parse_ok("heap{app.kubernetes.io/name=\"x\",\"weird name\"=`raw\\n`}");
	assert_string_equal(s.type, "heap");
	assert_string_equal(s.m[0].name, "app.kubernetes.io/name");
	assert_string_equal(s.m[1].name, "weird name");
	assert_string_equal(s.m[1].value, "raw\\n"); /* backquotes: no escapes */
	assert_null(pd_selector_service(&s));
	pd_selector_free(&s);
	for (const char *const *t = pd_query_types; *t; t++) {
		s = parse_ok(*t);
		assert_string_equal(s.type, *t);
		pd_selector_free(&s);
	}
	/* __name__ is Prometheus' metric name: the type ({__name__="cpu"} = cpu{}) */
	s = parse_ok("{service=\"auth\", __name__=\"cpu\"}");
	assert_string_equal(s.type, "cpu");
	assert_int_equal(s.n, 1);
	assert_string_equal(s.m[0].name, "service");
	pd_selector_free(&s);
	s = parse_ok("{__name__=~\"cpu|heap\"}");
	assert_null(s.type);
	assert_int_equal(s.n, 1);
	pd_selector_free(&s);
	/* the canonical text parses back: the type stays inside with __name__ matchers */
	char buf[128];
	s = parse_ok("{service=\"a\",__name__=\"cpu\",__name__!~\"c.*\"}");
	assert_string_equal(pd_selector_format(&s, buf, sizeof buf),
			    "{__name__=\"cpu\",service=\"a\",__name__!~\"c.*\"}");
	pd_selector_free(&s);
	s = parse_ok(buf);
	assert_string_equal(s.type, "cpu");
	assert_int_equal(s.n, 2);
	pd_selector_free(&s);
}

static void test_parse_escapes(void **state)
{
	(void)state;
	struct pd_selector s = parse_ok("cpu{a=\"x\\\"y\\\\z\", b='it\\'s', c=\"\\n\\t\\x41\\101\\u00e9\\U0001F600\"}");
	assert_string_equal(s.m[0].value, "x\"y\\z");
	assert_string_equal(s.m[1].value, "it's");
	assert_string_equal(s.m[2].value, "\n\tAA\xc3\xa9\xf0\x9f\x98\x80");
	char buf[256];
	pd_selector_format(&s, buf, sizeof buf);
	assert_string_equal(buf, "cpu{a=\"x\\\"y\\\\z\",b=\"it's\",c=\"\\n\\x09AA\xc3\xa9\xf0\x9f\x98\x80\"}");
	/* the canonical form parses back to itself */
	struct pd_selector s2 = parse_ok(buf);
	char buf2[256];
	assert_string_equal(pd_selector_format(&s2, buf2, sizeof buf2), buf);
	pd_selector_free(&s2);
	pd_selector_free(&s);
}

static void test_parse_rejects(void **state)
{
	(void)state;
	struct pd_selector ok;
	parse_bad("", PD_EINVAL, "at 0: empty query");
	parse_bad("   ", PD_EINVAL, "at 3: empty query");
	parse_bad("foo", PD_EINVAL, "at 0: unknown profile type \"foo\" (valid: cpu, heap");
	parse_bad("CPU{}", PD_EINVAL, "unknown profile type \"CPU\"");
	parse_bad("trace", PD_EINVAL, "\"trace\" is not supported");
	parse_bad("cpu{a=~\"(\"}", PD_EINVAL, "bad query \"cpu{a=~\"(\"}\": at 7: regex \"(\" does not compile");
	parse_bad("cpu{", PD_EINVAL, "at 4: expected a label name, got end of query");
	parse_bad("cpu{a}", PD_EINVAL, "at 5: expected one of = != =~ !~ after label \"a\", got '}'");
	parse_bad("cpu{a=}", PD_EINVAL, "at 6: expected a quoted value after =, got '}'");
	parse_bad("cpu{a=b}", PD_EINVAL, "at 6: expected a quoted value");
	parse_bad("cpu{a=\"x}", PD_EINVAL, "at 6: unterminated string");
	parse_bad("cpu{a=\"x\" b=\"y\"}", PD_EINVAL, "at 10: expected ',' or '}' after a matcher, got 'b'");
	parse_bad("cpu{}x", PD_EINVAL, "at 5: unexpected 'x' after '}'");
	parse_bad("cpu x", PD_EINVAL, "at 4: expected '{' or end of query, got 'x'");
	/* as Prometheus: "metric name must not be set twice" */
	parse_bad("cpu{__name__=\"cpu\"}", PD_EINVAL, "at 4: the profile type is given twice");
	parse_bad("heap{a=\"b\",__name__=~\"c.*\"}", PD_EINVAL, "at 11: the profile type is given twice");
	parse_bad("{__name__=\"cpux\"}", PD_EINVAL, "at 1: unknown profile type \"cpux\"");
	parse_bad("=\"x\"", PD_EINVAL, "at 0: expected a profile type or '{'");
	parse_bad("cpu{a==\"x\"}", PD_EINVAL, "at 6: expected a quoted value after =, got '='");
	parse_bad("cpu{a=\"\\q\"}", PD_EINVAL, "at 7: unknown escape \\q");
	parse_bad("cpu{a=\"\\x4\"}", PD_EINVAL, "want 2 hex digits");
	parse_bad("cpu{a=\"\\x00\"}", PD_EINVAL, "NUL byte");
	parse_bad("cpu{a=\"\\000\"}", PD_EINVAL, "NUL byte");
	parse_bad("cpu{a=\"\\uD800\"}", PD_EINVAL, "not a valid code point");
	parse_bad("cpu{a=\"\\'\"}", PD_EINVAL, "unknown escape \\' in \"-quoted string");
	parse_bad("cpu{a=\"x\ny\"}", PD_EINVAL, "newline in string");
	parse_bad("cpu{\"\"=\"x\"}", PD_EINVAL, "at 4: empty label name");
	parse_bad("cpu{a=~\"a)|(b\"}", PD_EINVAL, "does not compile");
	parse_bad("cpu{a=~\"x\\\\\"}", PD_EINVAL, "does not compile"); /* regex x\ */
	/* as RE2 (Go's repeatIsValid): nested {n,m} counts multiply to at most 1000 */
	parse_bad("cpu{a=~\"(a{100}){100}\"}", PD_EINVAL, "invalid repeat count {100} (nested counts multiply");
	parse_bad("cpu{a=~\"(a{1,999}){20}\"}", PD_EINVAL, "invalid repeat count");
	parse_bad("cpu{a=~\"(((((a{9}){9}){9}){9}){9})\"}", PD_EINVAL, "invalid repeat count");
	parse_bad("cpu{a=~\"a{1001}\"}", PD_EINVAL, "invalid repeat count {1001} (at most 1000)");
	parse_bad("cpu{a=~\"a{3,2}\"}", PD_EINVAL, "invalid repeat count");
	parse_bad("cpu{a=~\"a+++++++++++++++++\"}", PD_EINVAL, "unsupported in RE2/Prometheus selector syntax: possessive");
	parse_bad("cpu{a=~\"a**\"}", PD_EINVAL, "invalid nested repetition operator");
	parse_bad("cpu{a=~\"a.*++\"}", PD_EINVAL, "possessive quantifier");
	parse_bad("cpu{a=~\"a*??\"}", PD_EINVAL, "invalid nested repetition operator");
	parse_bad("cpu{a=~\"a{2}*\"}", PD_EINVAL, "invalid nested repetition operator");
	parse_bad("cpu{a=~\"((a{1,20}){1,20}){1,20}\"}", PD_EINVAL, "invalid repeat count");
	parse_bad("cpu{a=~\"(a)\\\\1\"}", PD_EINVAL,
		  "regex \"(a)\\1\": unsupported in RE2/Prometheus selector syntax: back-reference \\1");
	/* + and * do not count: deep nesting is fine (the match is bounded) */
	ok = parse_ok("cpu{a=~\"((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)\"}");
	pd_selector_free(&ok);
	/* long but linear regexes are fine */
	ok = parse_ok("cpu{a=~\"a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p+q+r+s+t+u+v+w+x+y+z+[a-z]{1,64}x{500}\"}");
	pd_selector_free(&ok);
	ok = parse_ok("cpu{a=~\"a*?b+?(c|d)??[*+?{]+\\\\*+(x*)*\"}"); /* lazy, bracketed and escaped operators */
	pd_selector_free(&ok);
	parse_bad("cpu{a=\"x\"}}", PD_EINVAL, "at 10: unexpected '}'");
	parse_bad("cpu{a=\"\x01\"}x", PD_EINVAL, "at 10: unexpected 'x'");
	parse_bad("cpu\x01", PD_EINVAL, "got byte 0x01");
	/* caps */
	char big[PD_QUERY_MAX_LEN + 2];
	memset(big, ' ', sizeof big - 1);
	big[sizeof big - 1] = 0;
	parse_bad(big, PD_ELIMIT, "over the limit of 8192");
	char re[PD_QUERY_MAX_REGEX + 32];
	snprintf(re, sizeof re, "cpu{a=~\"%0*d\"}", PD_QUERY_MAX_REGEX + 1, 0);
	parse_bad(re, PD_ELIMIT, "regex of 1025 bytes: over the limit of 1024");
	char many[2048] = "cpu{";
	for (int i = 0; i <= PD_QUERY_MAX_MATCHERS; i++)
		strcat(many, "a=\"b\",");
	strcat(many, "}");
	parse_bad(many, PD_ELIMIT, "more than 64 matchers");
	/* long input is truncated in the message */
	char longq[600];
	memset(longq, 'x', sizeof longq - 1);
	longq[sizeof longq - 1] = 0;
	longq[0] = '{';
	parse_bad(longq, PD_EINVAL, "xxx...\": at 599: expected one of");
}

/* ---- matching ---------------------------------------------------------------------- */

static struct pd_profile_meta meta(const char *svc, const char *type, struct pd_kv *l, size_t nl)
{
	struct pd_profile_meta m = {0};
	snprintf(m.service, sizeof m.service, "%s", svc);
	snprintf(m.type, sizeof m.type, "%s", type);
	m.labels = l;
	m.nlabels = nl;
	return m;
}

static bool matches(const char *q, const struct pd_profile_meta *m)
{
	struct pd_selector s = parse_ok(q);
	bool r = pd_selector_match(&s, m);
	pd_selector_free(&s);
	return r;
}

static void test_match(void **state)
{
	(void)state;
	struct pd_kv l[] = {{"env", "prod"}, {"version", "1.2"}};
	struct pd_profile_meta a = meta("auth", "cpu", l, 2), b = meta("search", "heap", NULL, 0);
	assert_true(matches("cpu", &a));
	assert_false(matches("cpu", &b));
	assert_true(matches("{}", &b));
	assert_true(matches("cpu{service=\"auth\"}", &a));
	assert_false(matches("cpu{service=\"aut\"}", &a));
	assert_true(matches("{service=~\"a.*|s.*\"}", &b));
	/* anchoring: the whole value */
	assert_true(matches("cpu{version=~\"1\\\\.2\"}", &a));
	assert_false(matches("cpu{version=~\"1\\\\.\"}", &a));
	assert_false(matches("cpu{version=~\"\\\\.2\"}", &a));
	assert_true(matches("cpu{env=~\"prod|dev\"}", &a));
	assert_false(matches("cpu{env=~\"pro|dev\"}", &a));
	assert_true(matches("cpu{env!~\"dev|test\"}", &a));
	assert_false(matches("cpu{env!~\"p.*\"}", &a));
	/* a missing label reads as "" */
	assert_true(matches("cpu{pod!=\"x\"}", &a));
	assert_true(matches("cpu{pod=\"\"}", &a));
	assert_false(matches("cpu{env=\"\"}", &a));
	assert_false(matches("cpu{pod=~\".+\"}", &a));
	assert_true(matches("cpu{pod=~\"\"}", &a));
	assert_true(matches("cpu{pod=~\".*\"}", &a));
	assert_true(matches("{version!~\"1\\\\..*\"}", &b));
	/* AND */
	assert_true(matches("cpu{env=\"prod\",version=\"1.2\"}", &a));
	assert_false(matches("cpu{env=\"prod\",version=\"1.3\"}", &a));
	assert_true(matches("cpu{env=\"prod\",env!=\"dev\"}", &a));
	/* a label twice (API v0 keeps duplicate keys): =, =~ one value; !=, !~ none */
	struct pd_kv l2[] = {{"env", "dev"}, {"env", "prod"}};
	struct pd_profile_meta d = meta("auth", "cpu", l2, 2);
	assert_true(matches("{env=\"prod\"}", &d));
	assert_true(matches("{env=\"dev\"}", &d));
	assert_true(matches("{env=~\"pr.*\"}", &d));
	assert_false(matches("{env!=\"prod\"}", &d));
	assert_false(matches("{env!~\"d.*\"}", &d));
	assert_true(matches("{env!=\"test\"}", &d));
	assert_false(matches("{env=\"\"}", &d));
	/* __name__: the type */
	assert_true(matches("{__name__=\"cpu\"}", &a));
	assert_false(matches("{__name__=\"cpu\"}", &b));
	assert_true(matches("{__name__=~\"cpu|heap\"}", &b));
	assert_false(matches("{__name__!~\"h.*\"}", &b));
	assert_true(matches("{__name__!=\"heap\"}", &a));
	assert_false(matches("{__name__=\"cpu\",__name__=\"heap\"}", &a));
	/* glibc ERE extensions */
	assert_true(matches("cpu{version=~\"\\\\w\\\\.\\\\w\"}", &a));
	/* service pre-filter */
	struct pd_selector s = parse_ok("cpu{service!~\"a.*\",env=\"x\"}");
	assert_false(pd_selector_match_service(&s, "auth"));
	assert_true(pd_selector_match_service(&s, "search"));
	pd_selector_free(&s);
}

/* ---- a store with several services ---------------------------------------------------- */


/* ---- RE2 syntax (PCRE2 underneath) --------------------------------------------------- */

/* pd_regex_match of re on v (NUL-terminated); a regex that does not compile fails the test. */
static int rmatch(const char *re, const char *v, size_t vlen)
{
	struct pd_regex *r;
	char why[300];
	if (pd_regex_compile(re, &r, why, sizeof why))
		fail_msg("compile(%s)%s", re, why);
	int m = pd_regex_match(r, v, vlen);
	pd_regex_free(r);
	return m;
}
#define RM(re, v) rmatch(re, v, strlen(v))

/* re is refused with a message containing want. */
static void re_bad(const char *re, const char *want)
{
	struct pd_regex *r = NULL;
	char why[300];
	int rc = pd_regex_compile(re, &r, why, sizeof why);
	if (rc == 0) {
		pd_regex_free(r);
		fail_msg("compile(%s) accepted", re);
	}
	if (rc != PD_EINVAL || !strstr(why, want))
		fail_msg("compile(%s): rc %d '%s', want '%s'", re, rc, why, want);
	assert_null(r);
}

static void test_re2_syntax(void **state)
{
	(void)state;
	/* what POSIX ERE got wrong: \d, (?i), \w */
	assert_int_equal(RM("1\\.\\d", "1.2"), 1);
	assert_int_equal(RM("1\\.\\d", "1.d"), 0);
	assert_int_equal(RM("1\\.\\d", "1x2"), 0);
	assert_int_equal(RM("(?i)AUTH", "auth"), 1);
	assert_int_equal(RM("(?i)AUTH", "AuTh"), 1);
	assert_int_equal(RM("(?i:a)B", "Ab"), 0); /* the flag's scope */
	/* (?i) folds ASCII classes as RE2 does: k and s bring U+212A (Kelvin) and U+017F (long s) */
	static const char *const kelvin = "\xe2\x84\xaa", *const longs = "\xc5\xbf";
	static const char *const folded[] = {"(?i)\\w", "(?i)[\\w]", "(?i)[[:alpha:]]", "(?i)[[:lower:]]", "(?i)[[:upper:]]",
					     "(?i)[[:word:]]", "(?i)[[:ascii:]]", "(?i)[^\\W]", "(?i)[^[:^alnum:]]"};
	for (size_t i = 0; i < sizeof folded / sizeof *folded; i++) {
		assert_int_equal(RM(folded[i], kelvin), 1);
		assert_int_equal(RM(folded[i], longs), 1);
		assert_int_equal(RM(folded[i], "\xc3\xa9"), 0);
	}
	static const char *const unfolded[] = {"(?i)\\W", "(?i)[\\W]", "(?i)[[:^alpha:]]", "(?i)[^[:upper:]]",
					       "(?i)[^\\w]", "(?i)[\\W\\d]", "(?i:x)\\w", "\\w", "[[:alpha:]]"};
	for (size_t i = 0; i < sizeof unfolded / sizeof *unfolded; i++) {
		assert_int_equal(RM(unfolded[i], kelvin), 0);
		assert_int_equal(RM(unfolded[i], longs), 0);
	}
	assert_int_equal(RM("(?i)[\\W\\d]", "7"), 1);
	assert_int_equal(RM("(?i)\\n\\t\\r\\f\\a\\d", "\n\t\r\f\a7"), 1); /* the other escapes stay themselves */
	assert_int_equal(RM("(?i)\\n", "a"), 0);
	assert_int_equal(RM("(?i)[\\t]", "a"), 0);
	assert_int_equal(RM("(?i)\\W", "a"), 0);
	assert_int_equal(RM("(?i)\\w", "Q"), 1);
	/* \p{Script} is the Script property, as RE2's (PCRE2's bare name is Script_Extensions) */
	assert_int_equal(RM("\\p{Greek}", "\xce\xb1"), 1);
	assert_int_equal(RM("\\p{Greek}", "\xcd\x82"), 0); /* U+0342: Inherited, Greek only by extension */
	assert_int_equal(RM("\\P{Greek}", "\xcd\x82"), 1);
	assert_int_equal(RM("[^\\p{^Greek}]", "\xcd\x82"), 0);
	assert_int_equal(RM("\\p{Han}", "\xe3\x80\x81"), 0); /* U+3001: Common */
	assert_int_equal(RM("\\p{Common}", "\xe3\x80\x81"), 1);
	re_bad("\\p{scx:Greek}", "does not compile");
	/* a '-' after a class in a class is literal in RE2 ([\s-a] is not " " to "a") */
	assert_int_equal(RM("[\\s-a]", "A"), 0);
	assert_int_equal(RM("[\\s-a]", "-"), 1);
	assert_int_equal(RM("[\\s-a]", "a"), 1);
	assert_int_equal(RM("[\\d-z]+", "1-z"), 1);
	assert_int_equal(RM("[\\d-z]", "a"), 0);
	assert_int_equal(RM("[[:alpha:]-z]", "-"), 1);
	assert_int_equal(RM("[\\pL-z]", "-"), 1);
	assert_int_equal(RM("[\\d--]", "-"), 1);
	/* RE2 folds \p{Lu} under (?i), PCRE2 does not: refused */
	re_bad("(?i)\\p{Lu}", "unsupported in RE2/Prometheus selector syntax: \\p{Lu} under (?i)");
	re_bad("x(?i:[\\P{^Ll}])", "\\P{^Ll} under (?i)");
	assert_int_equal(RM("(?i:x)\\p{Lu}", "xA"), 1);
	assert_int_equal(RM("(?i:x)\\p{Lu}", "xa"), 0);
	assert_int_equal(RM("\\w+", "ab_19Z"), 1);
	assert_int_equal(RM("\\w+", "ab-1"), 0);
	assert_int_equal(RM("\\w+", "h\xc3\xa9llo"), 0); /* \w is ASCII in RE2 */
	assert_int_equal(RM("[[:alpha:]]+", "abcXYZ"), 1);
	assert_int_equal(RM("[[:alpha:]]+", "abc1"), 0);
	assert_int_equal(RM("[^[:space:]x]+", "ab"), 1);
	assert_int_equal(RM("\\pL+", "h\xc3\xa9llo"), 1);
	assert_int_equal(RM("\\p{Greek}+", "\xce\xb1\xce\xb2\xce\xb3"), 1);
	assert_int_equal(RM("\\PL", "1"), 1);
	/* fully anchored: a|b is ^(?:a|b)$ */
	assert_int_equal(RM("a|b", "a"), 1);
	assert_int_equal(RM("a|b", "b"), 1);
	assert_int_equal(RM("a|b", "ab"), 0);
	assert_int_equal(RM("a", "ba"), 0);
	assert_int_equal(RM("a", "a\n"), 0); /* $ is the very end */
	assert_int_equal(RM("a$", "a\n"), 0);
	assert_int_equal(RM("(?m)a$\\n", "a\n"), 1);
	assert_int_equal(RM("", ""), 1);
	assert_int_equal(RM("", "x"), 0);
	/* '.' and newlines: Prometheus compiles ^(?s:re)$, so . matches \n unless (?-s) */
	assert_int_equal(RM(".*", "a\nb"), 1);
	assert_int_equal(RM("a.b", "a\nb"), 1);
	assert_int_equal(RM("(?-s).*", "a\nb"), 0);
	assert_int_equal(RM("(?-s:a.)b", "a\nb"), 0);
	assert_int_equal(RM("[^a]", "\n"), 1);
	/* Unicode: one code point per '.', case folding beyond ASCII */
	assert_int_equal(RM("h.llo", "h\xc3\xa9llo"), 1);
	assert_int_equal(RM(".{5}", "h\xc3\xa9llo"), 1);
	assert_int_equal(RM("(?i)\xc3\x89T\xc3\x89", "\xc3\xa9t\xc3\xa9"), 1);
	assert_int_equal(RM("[\xce\xb1-\xcf\x89]+", "\xce\xbb\xce\xbc"), 1);
	assert_int_equal(RM("\\x{3bb}", "\xce\xbb"), 1);
	/* an invalid UTF-8 value reads as U+FFFD per bad byte, as in Go */
	assert_int_equal(RM(".", "\xff"), 1);
	assert_int_equal(RM("a\\x{fffd}\\x{fffd}b", "a\xff\xc3" "b"), 1);
	assert_int_equal(RM("a.b", "a\xed\xa0\x80" "b"), 0); /* a surrogate: 3 bad bytes */
	/* escapes RE2 reads differently from PCRE2 */
	assert_int_equal(RM("a\\sb", "a\vb"), 0); /* RE2's \s has no \v */
	assert_int_equal(RM("a\\sb", "a\tb"), 1);
	assert_int_equal(RM("a\\Sb", "a\vb"), 1);
	assert_int_equal(RM("a[\\S]b", "a\vb"), 1);
	assert_int_equal(RM("a[\\S]b", "a b"), 0);
	assert_int_equal(RM("a[\\s]b", "a\vb"), 0);
	assert_int_equal(RM("\\v", "\v"), 1);  /* the vertical tab only */
	assert_int_equal(RM("\\v", "\n"), 0);
	assert_int_equal(RM("\\101\\0", "A"), 0);
	assert_int_equal(rmatch("\\101\\0", "A\0", 2), 1); /* octal */
	assert_int_equal(RM("\\12", "\n"), 1);
	assert_int_equal(RM("\\Q.*+\\E", ".*+"), 1);
	assert_int_equal(RM("\\Q.*+\\E", "ab"), 0);
	assert_int_equal(RM("a{,2}", "a{,2}"), 1); /* not a repetition in RE2: literal */
	assert_int_equal(RM("a{2", "a{2"), 1);
	assert_int_equal(RM("a{2}", "aa"), 1);
	assert_int_equal(RM("[]a]+", "]a"), 1);
	assert_int_equal(RM("[[.a.]]", "[.a.]"), 0); /* [ and . and a, then ]: one char then ']' */
	assert_int_equal(RM("[[.a.]]", "a]"), 1);
	assert_int_equal(RM("(?P<v>1)\\.(?<minor>\\d+)(?P<9x>)", "1.22"), 1); /* names never matter */
	assert_int_equal(RM("(?U)a+", "aaa"), 1);
	assert_int_equal(RM("a*?b+?", "aab"), 1);
	assert_int_equal(RM("\\bfoo\\b", "foo"), 1);
	assert_int_equal(RM("\\Afoo\\z", "foo"), 1);

	/* what PCRE2 would accept with a meaning RE2 does not have */
	const char *const unsup[][2] = {
		{"(a)\\1", "back-reference \\1"},
		{"(a)\\9", "back-reference \\9"},
		{"(?P<n>a)(?P=n)", "back-reference (?P=n"},
		{"(a)\\g1", "back-reference"},
		{"(?<n>a)\\k<n>", "back-reference"},
		{"(?=a)a", "lookahead (?="},
		{"(?!b)a", "negative lookahead (?!"},
		{"(?<=a)b", "lookbehind (?<="},
		{"(?<!a)b", "lookbehind (?<!"},
		{"(?>a+)b", "atomic group (?>"},
		{"a++", "possessive quantifier"},
		{"a*+b", "possessive quantifier"},
		{"a{2}+", "possessive quantifier"},
		{"\\C", "\\C (one code unit)"},
		{"(?R)", "recursion (?R)"},
		{"(a)(?1)", "recursion"},
		{"(?&n)", "recursion"},
		{"(?P>n)", "recursion (?P>name)"},
		{"(?(1)a|b)", "conditional group"},
		{"(?|a)", "branch reset"},
		{"(?#x)a", "comment"},
		{"(*UTF)a", "(*...) verbs"},
		{"(*LIMIT_MATCH=9)a", "(*...) verbs"},
		{"(?C1)a", "callout"},
		{"a\\Kb", "match start reset"},
		{"\\Ga", "\\G anchor"},
		{"a\\Z", "\\Z"},
		{"\\R", "\\R"},
		{"\\X", "\\X"},
		{"\\h", "horizontal-space"},
		{"\\N", "\\N"},
		{"\\ca", "\\c control"},
		{"\\e", "\\e escape"},
		{"(?x) a", "flag 'x'"},
		{"(?J)a", "flag 'J'"},
		{"(?^)a", "flag '^'"},
	};
	for (size_t i = 0; i < ARRAY_LEN(unsup); i++) {
		char want[200];
		snprintf(want, sizeof want, ": unsupported in RE2/Prometheus selector syntax: %s", unsup[i][1]);
		re_bad(unsup[i][0], want);
	}
	/* what RE2 refuses */
	re_bad("\\y", "does not compile: invalid escape sequence \\y");
	re_bad("[\\b]", "does not compile: invalid escape sequence \\b in a character class");
	re_bad("\\x4", "does not compile: invalid escape sequence \\x");
	re_bad("a\\", "trailing backslash");
	re_bad("(", "does not compile: missing closing parenthesis");
	re_bad("a)", "does not compile");
	re_bad("[a", "missing closing ]");
	re_bad("[[:foo:]]", "invalid character class range [:foo:]");
	re_bad("*a", "does not compile");
	re_bad("(?i-)a", "invalid or unsupported Perl syntax");
	re_bad("\xff", "does not compile: UTF-8 error");
	re_bad("a{1001}", "invalid repeat count");
	re_bad("\\x{d800}", "is a surrogate");
	re_bad("(a{10}){101}", "nested counts multiply to over 1000");
	struct pd_regex *r;
	char why[300];
	assert_int_equal(pd_regex_compile("(a{10}){100}", &r, why, sizeof why), 0);
	pd_regex_free(r);
	assert_int_equal(pd_regex_compile("((a{10}){100})*", &r, why, sizeof why), 0);
	pd_regex_free(r);

	/* through the selector parser: the message of the 400 */
	parse_bad("cpu{v=~\"(a)\\\\1\"}", PD_EINVAL,
		  "at 7: regex \"(a)\\1\": unsupported in RE2/Prometheus selector syntax: back-reference \\1");
	parse_bad("cpu{v=~'(?=x)'}", PD_EINVAL, "unsupported in RE2/Prometheus selector syntax: lookahead");
	struct pd_kv l[] = {{"version", "1.2"}, {"team", "Auth"}};
	struct pd_profile_meta a = meta("auth", "cpu", l, 2);
	assert_true(matches("cpu{version=~\"1\\\\.\\\\d\"}", &a));
	assert_true(matches("cpu{team=~\"(?i)AUTH\"}", &a));
	assert_false(matches("cpu{team=~\"AUTH\"}", &a));
	assert_true(matches("cpu{team!~\"(?i)search\"}", &a));
	assert_true(matches("cpu{service=~`\\w+`}", &a));
}

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * SEC + t.tv_nsec;
}

/* A catastrophic regex ends within the match bound, and the selection says so. */
static void test_re2_limits(void **state)
{
	(void)state;
	char v[4096 + 2];
	memset(v, 'a', 4096);
	v[4096] = 'b';
	v[4097] = 0;
	const char *const evil[] = {"(a+)+$", "(a|aa)+", "(a*)*c", "(?:a|a)*c", "((a+)+)+x"};
	for (size_t i = 0; i < ARRAY_LEN(evil); i++) {
		struct pd_regex *r;
		char why[300];
		assert_int_equal(pd_regex_compile(evil[i], &r, why, sizeof why), 0);
		int64_t t0 = mono_ns();
		int m = pd_regex_match(r, v, strlen(v));
		int64_t dt = mono_ns() - t0;
		if (m != 0 && m != PD_ELIMIT)
			fail_msg("%s: %d", evil[i], m);
		if (dt > 2 * SEC)
			fail_msg("%s took %.1f s", evil[i], (double)dt / 1e9);
		if (m == PD_ELIMIT) {
			assert_true(pd_regex_limited(r));
			assert_int_equal(pd_regex_match(r, "aa", 2), PD_ELIMIT); /* stays limited: no more work */
		}
		pd_regex_free(r);
	}
	/* (a+)+$ on a^4096 b is over the bound; a short value still matches */
	assert_int_equal(rmatch("(a+)+$", "aaaa", 4), 1);
	assert_int_equal(rmatch("(a+)+$", v, strlen(v)), PD_ELIMIT);
	/* long values of a linear regex are fine */
	assert_int_equal(rmatch("(?:a|b)*b", v, strlen(v)), 1);
	assert_int_equal(rmatch(".*b", v, strlen(v)), 1);
	/* through a selector: no match, then pd_selector_check names the regex */
	struct pd_kv l[] = {{"pod", v}};
	struct pd_profile_meta m = meta("auth", "cpu", l, 1);
	struct pd_selector s = parse_ok("cpu{pod=~\"(a+)+$\"}");
	struct pd_err err = {0};
	assert_int_equal(pd_selector_check(&s, &err), 0);
	assert_false(pd_selector_match(&s, &m));
	assert_int_equal(pd_selector_check(&s, &err), PD_EINVAL);
	assert_non_null(strstr(err.msg, "regex \"(a+)+$\" of label \"pod\" hit the match limit"));
	pd_selector_free(&s);
	s = parse_ok("cpu{pod!~\"(a+)+$\"}"); /* !~ does not turn a hit bound into a match */
	assert_false(pd_selector_match(&s, &m));
	assert_int_equal(pd_selector_check(&s, &err), PD_EINVAL);
	pd_selector_free(&s);
}
static char tmpdir[256];

TU_TMPDIR_FIXTURES(tmpdir, "query")

/* A CPU (or heap) profile whose functions are "<prefix>.f0".."<prefix>.f4"
 * plus shared "main.main" and "runtime.x"; deterministic from seed. */
static struct pd_buf make_profile(const char *prefix, bool heap, int seed)
{
	char names[TU_APP_NFN][64];
	struct pb p;
	pb_init(&p);
	pb_heap_or_cpu_header(&p, heap);
	tu_app_functions(&p, prefix, names);
	uint64_t rs = 99991 + (uint64_t)seed;
	for (int i = 0; i < 12; i++) {
		uint64_t locs[5];
		size_t n = 1 + tu_xorshift(&rs) % 3;
		for (size_t j = 0; j < n; j++)
			locs[j] = 3 + tu_xorshift(&rs) % 5;
		locs[n++] = (i % 3) ? 1 : 2; /* root: main.main or runtime.x */
		int64_t vals[2] = {1 + (int64_t)(tu_xorshift(&rs) % 5), 10000000 * (1 + (int64_t)(tu_xorshift(&rs) % 7))};
		pb_sample(&p, locs, n, vals, 2, NULL, 0);
	}
	pb_finish(&p);
	struct pd_profile *q = pb_decode(&p);
	struct pd_buf out = PD_BUF_INIT(0);
	struct pd_err err;
	assert_int_equal(pd_pprof_encode(q, 1, &out, &err), 0);
	pd_profile_free(q);
	pb_free(&p);
	return out;
}

static void ingest(struct pd_store *st, const char *svc, const char *type, const char *version, int64_t t, int seed)
{
	struct pd_kv kv[] = {{"env", "prod"}, {"version", (char *)version}};
	struct pd_ingest in = {.service = svc, .type = type, .labels = kv, .nlabels = 2, .created_ns = t, .min_created_ns = 0};
	struct pd_buf b = make_profile(svc, !strcmp(type, "heap"), seed);
	struct pd_profile_meta m;
	struct pd_err err;
	if (pd_store_ingest(st, &in, b.ptr, b.len, &m, &err))
		fail_msg("ingest: %s", err.msg);
	pd_meta_clear(&m);
	pd_buf_free(&b);
}

static struct pd_store *fleet_store(void)
{
	struct pd_store *st;
	struct pd_err err;
	if (pd_store_open_sqlite(tmpdir, NULL, &st, &err))
		fail_msg("open: %s", err.msg);
	/* auth: 3 cpu (v1.0, 1.0, 1.1) + 1 heap; search: 2 cpu (v2.0); ingest: 1 cpu (v1.1);
	 * cache: 1 heap (v3.0) */
	ingest(st, "auth", "cpu", "1.0", T0 + 10 * SEC, 1);
	ingest(st, "search", "cpu", "2.0", T0 + 11 * SEC, 2);
	ingest(st, "auth", "cpu", "1.0", T0 + 20 * SEC, 3);
	ingest(st, "ingest", "cpu", "1.1", T0 + 21 * SEC, 4);
	ingest(st, "auth", "cpu", "1.1", T0 + 30 * SEC, 5);
	ingest(st, "search", "cpu", "2.0", T0 + 31 * SEC, 6);
	ingest(st, "auth", "heap", "1.0", T0 + 40 * SEC, 7);
	ingest(st, "cache", "heap", "3.0", T0 + 45 * SEC, 8);
	return st;
}

static size_t sel_count(struct pd_store *st, const char *q, int64_t from, int64_t to, struct pd_profile_meta **out)
{
	struct pd_selector s = parse_ok(q);
	struct pd_profile_meta *v;
	size_t n;
	struct pd_err err;
	if (pd_query_select(st, &s, from, to, 0, &v, &n, &err))
		fail_msg("select %s: %s", q, err.msg);
	for (size_t i = 1; i < n; i++)
		assert_true(v[i - 1].created_ns <= v[i].created_ns);
	pd_selector_free(&s);
	if (out)
		*out = v;
	else
		pd_query_metas_free(v, n);
	return n;
}

static void test_select(void **state)
{
	(void)state;
	struct pd_store *st = fleet_store();
	int64_t a = T0, b = T0 + 100 * SEC;
	assert_int_equal(sel_count(st, "cpu", a, b, NULL), 6);
	assert_int_equal(sel_count(st, "{}", a, b, NULL), 8);
	assert_int_equal(sel_count(st, "heap", a, b, NULL), 2);
	assert_int_equal(sel_count(st, "goroutine", a, b, NULL), 0);
	assert_int_equal(sel_count(st, "cpu{service=\"auth\"}", a, b, NULL), 3);
	assert_int_equal(sel_count(st, "cpu{service=\"nope\"}", a, b, NULL), 0);
	assert_int_equal(sel_count(st, "cpu{service=~\"auth|search\"}", a, b, NULL), 5);
	assert_int_equal(sel_count(st, "cpu{service!=\"auth\"}", a, b, NULL), 3);
	assert_int_equal(sel_count(st, "cpu{version=~\"1\\\\..*\"}", a, b, NULL), 4);
	assert_int_equal(sel_count(st, "cpu{version=\"1.1\"}", a, b, NULL), 2);
	assert_int_equal(sel_count(st, "cpu{version=\"1.1\",service=\"auth\"}", a, b, NULL), 1);
	assert_int_equal(sel_count(st, "cpu{env=\"prod\",pod!=\"x\"}", a, b, NULL), 6);
	assert_int_equal(sel_count(st, "cpu{pod=~\".+\"}", a, b, NULL), 0);
	assert_int_equal(sel_count(st, "cpu{env=\"\"}", a, b, NULL), 0);
	/* __name__ is the type, never a label pushed to the store */
	assert_int_equal(sel_count(st, "{__name__=\"cpu\"}", a, b, NULL), 6);
	assert_int_equal(sel_count(st, "{__name__=~\"cpu|heap\"}", a, b, NULL), 8);
	assert_int_equal(sel_count(st, "{__name__=\"heap\",__name__=\"heap\"}", a, b, NULL), 2);
	assert_int_equal(sel_count(st, "{__name__!=\"cpu\",service=\"auth\"}", a, b, NULL), 1);
	/* window [from, to], inclusive */
	assert_int_equal(sel_count(st, "cpu", T0 + 20 * SEC, T0 + 30 * SEC, NULL), 3);
	assert_int_equal(sel_count(st, "cpu", T0 + 30 * SEC, T0 + 20 * SEC, NULL), 0);
	/* ascending time across services */
	struct pd_profile_meta *v;
	size_t n = sel_count(st, "cpu", a, b, &v);
	static const char *const order[] = {"auth", "search", "auth", "ingest", "auth", "search"};
	for (size_t i = 0; i < n; i++)
		assert_string_equal(v[i].service, order[i]);
	assert_int_equal(v[0].nlabels, 2);
	assert_string_equal(v[0].labels[1].value, "1.0");
	pd_query_metas_free(v, n);
	/* the cap */
	struct pd_selector s = parse_ok("cpu");
	struct pd_err err;
	assert_int_equal(pd_query_select(st, &s, a, b, 5, &v, &n, &err), PD_ELIMIT);
	assert_non_null(strstr(err.msg, "more than 5 profiles match"));
	assert_null(v);
	assert_int_equal(n, 0);
	assert_int_equal(pd_query_select(st, &s, a, b, 6, &v, &n, &err), 0);
	assert_int_equal(n, 6);
	pd_query_metas_free(v, n);
	pd_selector_free(&s);
	pd_store_close(st);
}

/* ---- flame graph ---------------------------------------------------------------------- */

static int64_t check_node(const struct pd_flame *f, uint32_t i)
{
	const struct pd_flame_node *n = &f->v[i];
	int64_t sum = n->self;
	for (uint32_t k = 0; k < n->nkids; k++) {
		const struct pd_flame_node *c = &f->v[f->kids[n->kids + k]];
		if (k > 0) { /* ordered by value, "other" last */
			const struct pd_flame_node *pc = &f->v[f->kids[n->kids + k - 1]];
			assert_true(c->other || (!pc->other && pc->value >= c->value));
		}
		if (c->other) {
			assert_int_equal(c->nkids, 0);
			assert_int_equal(c->self, c->value);
		}
		sum += check_node(f, f->kids[n->kids + k]);
	}
	assert_int_equal(sum, n->value);
	return n->value;
}

static void test_flame(void **state)
{
	(void)state;
	struct pd_buf b = make_profile("svc", false, 42);
	struct pd_profile *p;
	struct pd_err err;
	assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &p, &err), 0);
	struct pd_top t;
	assert_int_equal(pd_top_compute(p, 1, false, &t, &err), 0);
	struct pd_flame f;
	assert_int_equal(pd_flame_build(p, 1, 100000, &f, &err), 0);
	assert_false(f.truncated);
	assert_int_equal(f.n, f.frames);
	assert_int_equal(f.v[0].value, t.total);
	assert_true(pd_str_eq(f.v[0].name, "root"));
	check_node(&f, 0);
	size_t full = f.n;
	pd_flame_free(&f);
	for (size_t cap = 1; cap < full; cap++) {
		assert_int_equal(pd_flame_build(p, 1, cap, &f, &err), 0);
		assert_true(f.truncated);
		size_t real = 0, other = 0;
		for (size_t i = 0; i < f.n; i++)
			f.v[i].other ? other++ : real++;
		assert_int_equal(real, cap);
		assert_true(other >= 1);
		assert_int_equal(f.v[0].value, t.total);
		check_node(&f, 0);
		pd_flame_free(&f);
	}
	pd_top_free(&t);
	pd_profile_free(p);
	pd_buf_free(&b);
}

/* ---- fleet top ---------------------------------------------------------------------- */

static void test_fleet_top(void **state)
{
	(void)state;
	const char *svcs[] = {"auth", "search", "ingest"};
	struct pd_profile *ps[3];
	struct pd_fleet_input in[3];
	struct pd_err err;
	for (int i = 0; i < 3; i++) {
		struct pd_buf b = make_profile(svcs[i], false, i * 7);
		assert_int_equal(pd_pprof_decode(b.ptr, b.len, NULL, &ps[i], &err), 0);
		pd_buf_free(&b);
		in[i] = (struct pd_fleet_input){svcs[i], ps[i], 1};
	}
	struct pd_profile *all;
	assert_int_equal(pd_pprof_merge(ps, 3, &all, &err), 0);
	for (int by_cum = 0; by_cum < 2; by_cum++) {
		struct pd_fleet_top ft;
		struct pd_top t;
		assert_int_equal(pd_fleet_top(in, 3, by_cum, &ft, &err), 0);
		assert_int_equal(pd_top_compute(all, 1, by_cum, &t, &err), 0);
		assert_int_equal(ft.total, t.total);
		assert_int_equal(ft.totals[0] + ft.totals[1] + ft.totals[2], t.total);
		assert_int_equal(ft.nfns, t.n);
		for (size_t i = 0; i < t.n; i++) {
			assert_int_equal(ft.fns[i].name.len, t.rows[i].name.len);
			assert_memory_equal(ft.fns[i].name.ptr, t.rows[i].name.ptr, t.rows[i].name.len);
			assert_int_equal(ft.fns[i].flat, t.rows[i].flat);
			assert_int_equal(ft.fns[i].cum, t.rows[i].cum);
			int64_t sf = 0, sc = 0;
			for (uint32_t k = 0; k < ft.fns[i].nby; k++) {
				sf += ft.fns[i].by[k].flat;
				sc += ft.fns[i].by[k].cum;
			}
			assert_int_equal(sf, ft.fns[i].flat);
			assert_int_equal(sc, ft.fns[i].cum);
		}
		/* main.main is in all three services, auth.f0 in one */
		for (size_t i = 0; i < ft.nfns; i++) {
			if (pd_str_eq(ft.fns[i].name, "main.main"))
				assert_int_equal(ft.fns[i].nby, 3);
			if (pd_str_eq(ft.fns[i].name, "auth.f0")) {
				assert_int_equal(ft.fns[i].nby, 1);
				assert_int_equal(ft.fns[i].by[0].service, 0);
			}
		}
		pd_top_free(&t);
		pd_fleet_top_free(&ft);
	}
	/* negative values (a diff uploaded as a profile): the percentages are of
	 * pprof's total, the sum of the magnitudes, as go tool pprof -top's */
	struct pd_profile *q = ps[0];
	int64_t mag = 0, sum = 0;
	for (size_t i = 0; i < q->nsamples; i++) {
		if (i % 2)
			q->samples[i].values[1] = -q->samples[i].values[1];
		mag += q->samples[i].values[1] < 0 ? -q->samples[i].values[1] : q->samples[i].values[1];
		sum += q->samples[i].values[1];
	}
	assert_true(q->nsamples > 1 && mag != sum);
	struct pd_fleet_top ft;
	assert_int_equal(pd_fleet_top(in, 1, false, &ft, &err), 0);
	assert_int_equal(ft.total, mag);
	assert_int_equal(ft.totals[0], mag);
	pd_fleet_top_free(&ft);
	pd_profile_free(all);
	for (int i = 0; i < 3; i++)
		pd_profile_free(ps[i]);
}

/* ---- API v1 handlers, without HTTP ------------------------------------------------------ */

struct params {
	const char *kv[16][2];
};

static const char *pget(void *ctx, const char *key)
{
	struct params *p = ctx;
	for (int i = 0; i < 16 && p->kv[i][0]; i++)
		if (!strcmp(p->kv[i][0], key))
			return p->kv[i][1];
	return NULL;
}

static void call(struct pd_store *st, const char *path, struct params *p, struct pd_api1_resp *r)
{
	struct pd_api1_config cfg = {st, 6, 0, 0};
	pd_api1_handle(&cfg, "GET", path, pget, p, T0 + 60 * SEC, r);
}

static void expect_status(struct pd_store *st, const char *path, struct params p, int status, const char *want)
{
	struct pd_api1_resp r;
	call(st, path, &p, &r);
	if (r.status != status || (want && !strstr(r.error, want)))
		fail_msg("%s: status %d '%s', want %d '%s'", path, r.status, r.error, status, want ? want : "");
	pd_api1_resp_free(&r);
}

static char *json_of(struct pd_api1_resp *r)
{
	assert_int_equal(r->kind, PD_API1_JSON);
	return json_dumps(r->json, JSON_COMPACT);
}

static void test_api1(void **state)
{
	(void)state;
	struct pd_store *st = fleet_store();
#define P(...) ((struct params){{__VA_ARGS__}})
	const char *F = "2025-11-29T00:00:00Z", *TO = "2025-11-29T00:01:00Z";
	/* bad parameters */
	expect_status(st, "top", P({"from", F}), 400, "missing \"query\"");
	expect_status(st, "top", P({"query", "cpu{a=~\"(\"}"}), 400, "bad query \"cpu{a=~\"(\"}\": at 7: regex");
	expect_status(st, "top", P({"query", "cpux"}), 400, "unknown profile type \"cpux\"");
	expect_status(st, "top", P({"query", "cpu{service=\"auth\""}), 400, "at 18: expected ',' or '}'");
	expect_status(st, "top", P({"query", "cpu"}, {"from", TO}, {"to", F}), 400, "\"from\" after \"to\"");
	expect_status(st, "top", P({"query", "cpu"}, {"from", "0"}), 400, "range over the limit");
	expect_status(st, "top", P({"query", "cpu"}, {"from", "yesterday"}), 400, "bad \"from\" timestamp");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"n", "0"}), 400, "bad \"n\" \"0\"");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"n", "1001"}), 400, "[1, 1000]");
	/* past int64 (19 and 20 nines): refused, no overflow on the way (UBSan) */
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"n", "9999999999999999999"}), 400, "[1, 1000]");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"n", "99999999999999999999"}), 400, "[1, 1000]");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"n", "9223372036854775807"}), 400, "[1, 1000]");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"by", "pod"}), 400, "bad \"by\" \"pod\"");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"value", "x"}), 400, "bad \"value\"");
	expect_status(st, "top", P({"query", "cpu"}, {"from", F}, {"si", "nope"}), 400, "bad \"si\" \"nope\"");
	expect_status(st, "top", P({"query", "{}"}, {"from", F}), 413, "more than 6 profiles");
	expect_status(st, "top", P({"query", "{service=\"auth\"}"}, {"from", F}), 400, "service \"auth\"");
	expect_status(st, "top", P({"query", "{version=~\"2.0|3.0\"}"}, {"from", F}), 400,
		      "services \"cache\" (alloc_space/bytes) and \"search\" (cpu/nanoseconds) have different sample types");
	expect_status(st, "merge", P({"query", "cpu"}, {"from", F}, {"format", "svg"}), 400, "bad \"format\" \"svg\"");
	expect_status(st, "merge", P({"query", "goroutine"}, {"from", F}), 404, "no profiles match goroutine in");
	expect_status(st, "merge", P({"query", "cpu{service=\"auth\"}"}, {"from", F}, {"format", "flamegraph"},
				     {"max_nodes", "x"}),
		      400, "bad \"max_nodes\"");
	expect_status(st, "nope", P({NULL, NULL}), 404, "no API v1 route /api/1/nope");
	expect_status(st, "labels/x", P({NULL, NULL}), 404, "no API v1 route");
	struct pd_api1_resp r;
	struct params pp = P({"from", F});
	struct pd_api1_config cfg = {st, 6, 0, 0};
	pd_api1_handle(&cfg, "POST", "labels", pget, &pp, T0, &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET, HEAD");
	pd_api1_resp_free(&r);

	/* metadata routes (default window: the last hour before "now") */
	pp = P({"from", F});
	call(st, "labels", &pp, &r);
	char *s = json_of(&r);
	assert_string_equal(s, "[\"env\",\"service\",\"version\"]");
	free(s);
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu{service!=\"search\"}"});
	call(st, "labels/version/values", &pp, &r);
	s = json_of(&r);
	assert_string_equal(s, "[\"1.0\",\"1.1\"]");
	free(s);
	pd_api1_resp_free(&r);
	call(st, "labels/service/values", &pp, &r);
	s = json_of(&r);
	assert_string_equal(s, "[\"auth\",\"ingest\"]");
	free(s);
	pd_api1_resp_free(&r);
	/* __name__'s values are the types, as a selector reads __name__ */
	pp = P({"from", F}, {"query", "{__name__=~\"cpu|heap\"}"});
	call(st, "labels/__name__/values", &pp, &r);
	s = json_of(&r);
	assert_string_equal(s, "[\"cpu\",\"heap\"]");
	free(s);
	pd_api1_resp_free(&r);
	pp = P({NULL, NULL});
	call(st, "types", &pp, &r);
	s = json_of(&r);
	assert_string_equal(s, "[{\"type\":\"cpu\",\"profiles\":6,\"services\":3},"
			       "{\"type\":\"heap\",\"profiles\":2,\"services\":2}]");
	free(s);
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu{version=\"1.1\"}"});
	call(st, "profiles", &pp, &r);
	assert_int_equal(json_array_size(r.json), 2);
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu{version=\"9\"}"});
	call(st, "profiles", &pp, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(r.json), 0);
	pd_api1_resp_free(&r);

	/* top: every row's services add up; by=service ranks the totals */
	pp = P({"query", "cpu"}, {"n", "1000"}, {"value", "cum"});
	call(st, "top", &pp, &r);
	assert_int_equal(r.status, 200);
	json_t *rows = json_object_get(r.json, "rows");
	assert_true(json_array_size(rows) > 5);
	assert_int_equal(json_integer_value(json_object_get(r.json, "profiles")), 6);
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		json_int_t sf = 0, sc = 0;
		size_t k;
		json_t *c;
		json_array_foreach(json_object_get(row, "services"), k, c) {
			sf += json_integer_value(json_object_get(c, "flat"));
			sc += json_integer_value(json_object_get(c, "cum"));
		}
		assert_int_equal(sf, json_integer_value(json_object_get(row, "flat")));
		assert_int_equal(sc, json_integer_value(json_object_get(row, "cum")));
		if (i)
			assert_true(json_integer_value(json_object_get(json_array_get(rows, i - 1), "cum")) >=
				    json_integer_value(json_object_get(row, "cum")));
	}
	assert_string_equal(json_string_value(json_object_get(r.json, "sample_type")), "cpu");
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu"}, {"by", "service"});
	call(st, "top", &pp, &r);
	rows = json_object_get(r.json, "rows");
	assert_int_equal(json_array_size(rows), 3);
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu"}, {"by", "function,service"}, {"n", "3"}, {"si", "samples"});
	call(st, "top", &pp, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "rows")), 3);
	assert_string_equal(json_string_value(json_object_get(r.json, "sample_type")), "samples");
	pd_api1_resp_free(&r);

	/* merge formats */
	pp = P({"query", "cpu{service=\"auth\"}"}, {"format", "folded"});
	call(st, "merge", &pp, &r);
	assert_int_equal(r.kind, PD_API1_TEXT);
	assert_int_equal(r.merged, 3);
	assert_true(r.text.len > 10);
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu{service=\"auth\"}"});
	call(st, "merge", &pp, &r);
	assert_int_equal(r.kind, PD_API1_PPROF);
	assert_non_null(r.profile);
	assert_string_equal(r.filename, "cpu.pb.gz");
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu"}, {"format", "flamegraph"}, {"max_nodes", "4"});
	call(st, "merge", &pp, &r);
	assert_int_equal(r.status, 200);
	assert_true(json_is_true(json_object_get(r.json, "truncated")));
	json_t *root = json_object_get(r.json, "root");
	assert_int_equal(json_integer_value(json_object_get(root, "value")),
			 json_integer_value(json_object_get(r.json, "total")));
	pd_api1_resp_free(&r);
	pp = P({"query", "cpu"}, {"format", "top"}, {"n", "2"});
	call(st, "merge", &pp, &r);
	assert_int_equal(json_array_size(json_object_get(r.json, "rows")), 2);
	pd_api1_resp_free(&r);
#undef P
	pd_store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_accepts),
		cmocka_unit_test(test_parse_escapes),
		cmocka_unit_test(test_parse_rejects),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_re2_syntax),
		cmocka_unit_test(test_re2_limits),
		cmocka_unit_test_setup_teardown(test_select, setup, teardown),
		cmocka_unit_test(test_flame),
		cmocka_unit_test(test_fleet_top),
		cmocka_unit_test_setup_teardown(test_api1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
