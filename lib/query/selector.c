/*
 * selector.c — the selector parser (grammar in query.h), matching of
 * profile metadata, and selection over a store (pd_query_select).
 *
 * The parser is a hand-written scanner over a NUL-terminated string: every
 * error names the byte offset where the offending token starts. Regexes are
 * checked on their own first (so a regex cannot unbalance the anchoring
 * group), their size is capped (length, and the size glibc would expand
 * repetitions to: re_check), then compiled anchored as ^(re)$.
 *
 * Selection asks the store per service (the store indexes service, type,
 * time and exact labels) with the exact, non-empty label matchers pushed
 * down, and checks every matcher again on what comes back.
 */
#include "query.h"

#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const pd_query_types[] = {"cpu", "heap", "allocs", "block", "mutex", "goroutine", "threadcreate", "other",
				      NULL};

static const char *const op_names[] = {"=", "!=", "=~", "!~"};

/* ---- parser ------------------------------------------------------------------ */

struct ps {
	const char *s;
	size_t i;
	struct pd_err *err;
};

static int perr(struct ps *p, size_t at, int code, const char *fmt, ...) PD_PRINTF(4, 5);
static int perr(struct ps *p, size_t at, int code, const char *fmt, ...)
{
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return pd_errf(p->err, code, "bad query \"%.200s%s\": at %zu: %s", p->s, strlen(p->s) > 200 ? "..." : "", at,
		       why);
}

static void skip_ws(struct ps *p)
{
	while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
		p->i++;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name(char c) { return is_alpha(c) || is_digit(c) || c == '.' || c == ':' || c == '/' || c == '-'; }

/* What the character at i looks like, for messages. */
static const char *what(const struct ps *p, size_t i, char *buf, size_t n)
{
	unsigned char c = (unsigned char)p->s[i];
	if (!c)
		snprintf(buf, n, "end of query");
	else if (c < 0x20 || c >= 0x7f)
		snprintf(buf, n, "byte 0x%02x", c);
	else
		snprintf(buf, n, "'%c'", c);
	return buf;
}

static int hexval(char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static size_t put_utf8(char *o, uint32_t r)
{
	if (r < 0x80) {
		o[0] = (char)r;
		return 1;
	}
	if (r < 0x800) {
		o[0] = (char)(0xc0 | (r >> 6));
		o[1] = (char)(0x80 | (r & 0x3f));
		return 2;
	}
	if (r < 0x10000) {
		o[0] = (char)(0xe0 | (r >> 12));
		o[1] = (char)(0x80 | ((r >> 6) & 0x3f));
		o[2] = (char)(0x80 | (r & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (r >> 18));
	o[1] = (char)(0x80 | ((r >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((r >> 6) & 0x3f));
	o[3] = (char)(0x80 | (r & 0x3f));
	return 4;
}

/* A quoted string at p->i ("..." or '...' with Go escapes, `...` raw) into a
 * malloc'd *out. The decoded text is never longer than the quoted one. */
static int parse_string(struct ps *p, char **out)
{
	size_t start = p->i;
	char q = p->s[p->i];
	*out = NULL;
	const char *b = p->s + p->i + 1;
	size_t len = 0;
	while (b[len] && b[len] != q) {
		if (b[len] == '\\' && q != '`' && b[len + 1])
			len++;
		len++;
	}
	if (!b[len])
		return perr(p, start, PD_EINVAL, "unterminated string (missing closing %c)", q);
	char *o = malloc(len + 1);
	if (!o)
		return pd_errf(p->err, PD_ENOMEM, "out of memory");
	size_t k = 0;
	int rc = 0;
	for (size_t j = 0; j < len && !rc; j++) {
		size_t at = start + 1 + j;
		char c = b[j];
		if (c == '\n' && q != '`') {
			rc = perr(p, at, PD_EINVAL, "newline in string (use \\n)");
			break;
		}
		if (c != '\\' || q == '`') {
			o[k++] = c;
			continue;
		}
		char e = b[++j];
		switch (e) {
		case 'a': o[k++] = '\a'; break;
		case 'b': o[k++] = '\b'; break;
		case 'f': o[k++] = '\f'; break;
		case 'n': o[k++] = '\n'; break;
		case 'r': o[k++] = '\r'; break;
		case 't': o[k++] = '\t'; break;
		case 'v': o[k++] = '\v'; break;
		case '\\': o[k++] = '\\'; break;
		case '"':
		case '\'':
			if (e != q) {
				rc = perr(p, at, PD_EINVAL, "unknown escape \\%c in %c-quoted string", e, q);
				break;
			}
			o[k++] = e;
			break;
		case 'x':
		case 'u':
		case 'U': {
			int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
			uint32_t v = 0;
			for (int d = 0; d < nd; d++) {
				int h = j + 1 + (size_t)d < len ? hexval(b[j + 1 + (size_t)d]) : -1;
				if (h < 0) {
					rc = perr(p, at, PD_EINVAL, "bad escape \\%c: want %d hex digits", e, nd);
					break;
				}
				v = v << 4 | (uint32_t)h;
			}
			if (rc)
				break;
			j += (size_t)nd;
			if (e != 'x' && (v > 0x10ffff || (v >= 0xd800 && v < 0xe000))) {
				rc = perr(p, at, PD_EINVAL, "bad escape: U+%04X is not a valid code point", v);
				break;
			}
			if (v == 0) {
				rc = perr(p, at, PD_EINVAL, "NUL byte in string");
				break;
			}
			if (e == 'x')
				o[k++] = (char)v;
			else
				k += put_utf8(o + k, v); /* \uHHHH (6 bytes) >= 3 bytes of UTF-8 */
			break;
		}
		default:
			if (e >= '0' && e <= '7') {
				uint32_t v = 0;
				for (int d = 0; d < 3; d++) {
					char c2 = j + (size_t)d < len ? b[j + (size_t)d] : 0;
					if (c2 < '0' || c2 > '7') {
						rc = perr(p, at, PD_EINVAL, "bad escape: want 3 octal digits");
						break;
					}
					v = v * 8 + (uint32_t)(c2 - '0');
				}
				if (rc)
					break;
				if (v > 255 || v == 0) {
					rc = perr(p, at, PD_EINVAL, v ? "bad escape: octal value over 255" : "NUL byte in string");
					break;
				}
				o[k++] = (char)v;
				j += 2;
				break;
			}
			rc = perr(p, at, PD_EINVAL, "unknown escape \\%c", e ? e : '0');
		}
	}
	if (rc) {
		free(o);
		return rc;
	}
	o[k] = 0;
	p->i = start + 1 + len + 1;
	*out = o;
	return 0;
}

/*
 * The size glibc's regcomp would give the regex's syntax tree, estimated
 * from its structure: glibc duplicates the operand of "+" (a+ = a a*) and
 * of "{m,n}" (max(m, n) copies), so nested repetitions grow exponentially
 * (a+++++++ or ((a{9}){9}){9}) and a short regex can take gigabytes. Sums
 * over sequences and alternatives, multiplies through repetitions, and
 * saturates at PD_QUERY_MAX_RE_SIZE + 1. Also refuses back-references
 * (\1..\9: glibc supports them in ERE and matches them by backtracking).
 * Stacked repetition operators (a**, .*++++) are refused as RE2 refuses
 * them: glibc's epsilon closures over them explode even when the tree is
 * small. Returns 0, or 1 for too big, 2 for a back-reference, 3 for a
 * stacked repetition.
 */
#define RE_DEPTH 256
static uint64_t sat(uint64_t x) { return x > PD_QUERY_MAX_RE_SIZE ? PD_QUERY_MAX_RE_SIZE + 1 : x; }

static int re_check(const char *re)
{
	uint64_t total[RE_DEPTH + 1], last[RE_DEPTH + 1];
	size_t d = 0;
	int rep = 0; /* the previous token: 0 not a repetition, 1 a repetition, 2 one made lazy by '?' */
	total[0] = last[0] = 0;
	for (const char *c = re; *c; c++) {
		uint64_t mult = 0;
		bool is_rep = *c == '*' || *c == '+' || *c == '?' || *c == '{';
		if (is_rep && rep) {
			/* as RE2: one '?' after a repetition (lazy in Go; the same
			 * whole-value matches), nothing else stacks (a** a+* a*+?) */
			if (*c != '?' || rep == 2)
				return 3;
			rep = 2;
			continue;
		}
		rep = is_rep;
		switch (*c) {
		case '(':
			if (d == RE_DEPTH)
				return 1;
			total[d] = sat(total[d] + last[d]);
			last[d] = 0;
			d++;
			total[d] = last[d] = 0;
			continue;
		case ')':
			if (d == 0) { /* unbalanced: regcomp says so */
				total[0] = sat(total[0] + last[0]);
				last[0] = 1;
				continue;
			}
			d--;
			last[d] = sat(total[d + 1] + last[d + 1] + 1);
			continue;
		case '|':
			total[d] = sat(total[d] + last[d] + 1);
			last[d] = 0;
			continue;
		case '*':
		case '?': mult = 1; break;
		case '+': mult = 2; break;
		case '{': {
			uint64_t m = 0, n = 0;
			const char *e = c + 1;
			while (*e >= '0' && *e <= '9' && m <= PD_QUERY_MAX_RE_SIZE)
				m = m * 10 + (uint64_t)(*e++ - '0');
			if (*e == ',') {
				e++;
				if (*e == '}')
					n = m + 1; /* {m,} = m copies and a star */
				while (*e >= '0' && *e <= '9' && n <= PD_QUERY_MAX_RE_SIZE)
					n = n * 10 + (uint64_t)(*e++ - '0');
			}
			mult = m > n ? m : n;
			if (mult < 1)
				mult = 1;
			while (*e && *e != '}')
				e++;
			c = *e ? e : e - 1;
			break;
		}
		case '[': {
			/* bracket expression: ] first is literal; [:x:] [=x=] [.x.] inside */
			const char *e = c + 1;
			if (*e == '^')
				e++;
			if (*e == ']')
				e++;
			while (*e && *e != ']') {
				if (*e == '[' && (e[1] == ':' || e[1] == '=' || e[1] == '.')) {
					char k = e[1];
					const char *f = e + 2;
					while (*f && !(f[0] == k && f[1] == ']'))
						f++;
					e = *f ? f + 2 : f;
					continue;
				}
				e++;
			}
			c = *e ? e : e - 1;
			total[d] = sat(total[d] + last[d]);
			last[d] = 2;
			continue;
		}
		case '\\':
			if (c[1] >= '1' && c[1] <= '9')
				return 2;
			if (c[1])
				c++;
			/* fall through */
		default:
			total[d] = sat(total[d] + last[d]);
			last[d] = 1;
			continue;
		}
		/* a repetition of the last item */
		if (last[d] == 0)
			last[d] = 1;
		last[d] = sat(last[d] * mult + 1);
	}
	while (d > 0) { /* unclosed groups: regcomp refuses them */
		d--;
		last[d] = sat(total[d + 1] + last[d + 1] + 1);
	}
	return sat(total[0] + last[0]) > PD_QUERY_MAX_RE_SIZE ? 1 : 0;
}

static int compile_re(struct ps *p, size_t at, struct pd_matcher *m)
{
	size_t len = strlen(m->value);
	if (len > PD_QUERY_MAX_REGEX)
		return perr(p, at, PD_ELIMIT, "regex of %zu bytes: over the limit of %d", len, PD_QUERY_MAX_REGEX);
	int chk = re_check(m->value);
	if (chk == 2)
		return perr(p, at, PD_EINVAL, "regex \"%.100s\": back-references (\\1..\\9) are not supported", m->value);
	if (chk == 3)
		return perr(p, at, PD_EINVAL,
			    "regex \"%.100s\": invalid nested repetition operator (e.g. a** or a+*; group it: (a*)*)",
			    m->value);
	if (chk)
		return perr(p, at, PD_EINVAL,
			    "regex \"%.100s\" is too complex: its repetitions (+, {m,n}) expand to more than %d "
			    "states",
			    m->value, PD_QUERY_MAX_RE_SIZE);
	regex_t t;
	int r = regcomp(&t, m->value, REG_EXTENDED | REG_NOSUB);
	if (r) {
		char why[160];
		regerror(r, &t, why, sizeof why);
		return perr(p, at, PD_EINVAL, "regex \"%.100s\" does not compile: %s", m->value, why);
	}
	regfree(&t);
	char *a = malloc(len + 5);
	if (!a)
		return pd_errf(p->err, PD_ENOMEM, "out of memory");
	a[0] = '^';
	a[1] = '(';
	memcpy(a + 2, m->value, len);
	memcpy(a + 2 + len, ")$", 3);
	r = regcomp(&m->re, a, REG_EXTENDED | REG_NOSUB);
	free(a);
	if (r) {
		char why[160];
		regerror(r, &m->re, why, sizeof why);
		return perr(p, at, PD_EINVAL, "regex \"%.100s\" does not compile: %s", m->value, why);
	}
	m->has_re = true;
	return 0;
}

static void matcher_free(struct pd_matcher *m)
{
	free(m->name);
	free(m->value);
	if (m->has_re)
		regfree(&m->re);
	memset(m, 0, sizeof *m);
}

void pd_selector_free(struct pd_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++)
		matcher_free(&sel->m[i]);
	free(sel->m);
	free(sel->type);
	memset(sel, 0, sizeof *sel);
}

static int parse_matcher(struct ps *p, struct pd_selector *sel)
{
	char buf[24];
	size_t at = p->i;
	if (sel->n >= PD_QUERY_MAX_MATCHERS)
		return perr(p, at, PD_ELIMIT, "more than %d matchers", PD_QUERY_MAX_MATCHERS);
	struct pd_matcher m = {0};
	int rc = 0;
	char c = p->s[p->i];
	if (c == '"' || c == '\'' || c == '`') {
		if ((rc = parse_string(p, &m.name)))
			goto out;
		if (!m.name[0]) {
			rc = perr(p, at, PD_EINVAL, "empty label name");
			goto out;
		}
	} else if (is_alpha(c)) {
		size_t e = p->i;
		while (is_name(p->s[e]))
			e++;
		m.name = strndup(p->s + p->i, e - p->i);
		if (!m.name) {
			rc = pd_errf(p->err, PD_ENOMEM, "out of memory");
			goto out;
		}
		p->i = e;
	} else {
		rc = perr(p, at, PD_EINVAL, "expected a label name, got %s", what(p, at, buf, sizeof buf));
		goto out;
	}
	skip_ws(p);
	size_t opat = p->i;
	const char *o = p->s + p->i;
	if (o[0] == '=' && o[1] == '~')
		m.op = PD_MATCH_RE, p->i += 2;
	else if (o[0] == '!' && o[1] == '~')
		m.op = PD_MATCH_NRE, p->i += 2;
	else if (o[0] == '!' && o[1] == '=')
		m.op = PD_MATCH_NE, p->i += 2;
	else if (o[0] == '=')
		m.op = PD_MATCH_EQ, p->i += 1;
	else {
		rc = perr(p, opat, PD_EINVAL, "expected one of = != =~ !~ after label \"%.100s\", got %s", m.name,
			  what(p, opat, buf, sizeof buf));
		goto out;
	}
	skip_ws(p);
	size_t vat = p->i;
	c = p->s[p->i];
	if (c != '"' && c != '\'' && c != '`') {
		rc = perr(p, vat, PD_EINVAL, "expected a quoted value after %s, got %s", op_names[m.op],
			  what(p, vat, buf, sizeof buf));
		goto out;
	}
	if ((rc = parse_string(p, &m.value)))
		goto out;
	if ((m.op == PD_MATCH_RE || m.op == PD_MATCH_NRE) && (rc = compile_re(p, vat, &m)))
		goto out;
	if (pd_grow((void **)&sel->m, &(size_t){sel->n}, sel->n + 1, sizeof *sel->m)) {
		rc = pd_errf(p->err, PD_ENOMEM, "out of memory");
		goto out;
	}
	sel->m[sel->n++] = m;
	return 0;
out:
	matcher_free(&m);
	return rc;
}

int pd_selector_parse(const char *s, struct pd_selector *out, struct pd_err *err)
{
	memset(out, 0, sizeof *out);
	struct ps p = {s ? s : "", 0, err};
	char buf[24];
	size_t len = strlen(p.s);
	if (len > PD_QUERY_MAX_LEN)
		return pd_errf(err, PD_ELIMIT, "bad query: %zu bytes, over the limit of %d", len, PD_QUERY_MAX_LEN);
	int rc = 0;
	skip_ws(&p);
	if (!p.s[p.i])
		return perr(&p, p.i, PD_EINVAL, "empty query (want e.g. cpu{service=\"auth\"})");
	if (is_alpha(p.s[p.i])) {
		size_t at = p.i, e = p.i;
		while (is_alpha(p.s[e]) || is_digit(p.s[e]) || p.s[e] == ':')
			e++;
		size_t k;
		for (k = 0; pd_query_types[k]; k++)
			if (strlen(pd_query_types[k]) == e - at && !memcmp(pd_query_types[k], p.s + at, e - at))
				break;
		if (!pd_query_types[k]) {
			if (e - at == 5 && !memcmp(p.s + at, "trace", 5))
				return perr(&p, at, PD_EINVAL,
					    "profile type \"trace\" is not supported: profd stores pprof profiles only "
					    "(valid: cpu, heap, allocs, block, mutex, goroutine, threadcreate, other)");
			return perr(&p, at, PD_EINVAL,
				    "unknown profile type \"%.*s\" (valid: cpu, heap, allocs, block, mutex, goroutine, "
				    "threadcreate, other)",
				    (int)(e - at > 64 ? 64 : e - at), p.s + at);
		}
		if (!(out->type = strdup(pd_query_types[k])))
			return pd_errf(err, PD_ENOMEM, "out of memory");
		p.i = e;
		skip_ws(&p);
		if (!p.s[p.i])
			return 0;
	}
	if (p.s[p.i] != '{') {
		rc = perr(&p, p.i, PD_EINVAL, "expected %s, got %s", out->type ? "'{' or end of query" : "a profile type or '{'",
			  what(&p, p.i, buf, sizeof buf));
		goto out;
	}
	p.i++;
	for (;;) {
		skip_ws(&p);
		if (p.s[p.i] == '}')
			break;
		if ((rc = parse_matcher(&p, out)))
			goto out;
		skip_ws(&p);
		if (p.s[p.i] == ',') {
			p.i++;
			continue;
		}
		if (p.s[p.i] == '}')
			break;
		rc = perr(&p, p.i, PD_EINVAL, "expected ',' or '}' after a matcher, got %s", what(&p, p.i, buf, sizeof buf));
		goto out;
	}
	p.i++; /* '}' */
	skip_ws(&p);
	if (p.s[p.i])
		rc = perr(&p, p.i, PD_EINVAL, "unexpected %s after '}'", what(&p, p.i, buf, sizeof buf));
out:
	if (rc)
		pd_selector_free(out);
	return rc;
}

/* ---- matching -------------------------------------------------------------------- */

static bool match1(const struct pd_matcher *m, const char *v)
{
	switch (m->op) {
	case PD_MATCH_EQ: return strcmp(v, m->value) == 0;
	case PD_MATCH_NE: return strcmp(v, m->value) != 0;
	case PD_MATCH_RE: return regexec(&m->re, v, 0, NULL, 0) == 0;
	default: return regexec(&m->re, v, 0, NULL, 0) != 0;
	}
}

static const char *label_of(const struct pd_profile_meta *m, const char *name)
{
	if (!strcmp(name, "service"))
		return m->service;
	for (size_t i = 0; i < m->nlabels; i++)
		if (!strcmp(m->labels[i].key, name))
			return m->labels[i].value;
	return "";
}

bool pd_selector_match(const struct pd_selector *sel, const struct pd_profile_meta *m)
{
	if (sel->type && strcmp(sel->type, m->type))
		return false;
	for (size_t i = 0; i < sel->n; i++)
		if (!match1(&sel->m[i], label_of(m, sel->m[i].name)))
			return false;
	return true;
}

bool pd_selector_match_service(const struct pd_selector *sel, const char *service)
{
	for (size_t i = 0; i < sel->n; i++)
		if (!strcmp(sel->m[i].name, "service") && !match1(&sel->m[i], service))
			return false;
	return true;
}

const char *pd_selector_service(const struct pd_selector *sel)
{
	for (size_t i = 0; i < sel->n; i++)
		if (sel->m[i].op == PD_MATCH_EQ && sel->m[i].value[0] && !strcmp(sel->m[i].name, "service"))
			return sel->m[i].value;
	return NULL;
}

/* Append s to buf[*o..n) escaped as a Go double-quoted string. */
static void put_quoted(char *buf, size_t n, size_t *o, const char *s)
{
	char t[8];
	for (const char *c = s;; c++) {
		const char *piece = t;
		if (!*c)
			piece = "\"";
		else if (*c == '"' || *c == '\\')
			snprintf(t, sizeof t, "\\%c", *c);
		else if (*c == '\n')
			piece = "\\n";
		else if ((unsigned char)*c < 0x20 || *c == 0x7f)
			snprintf(t, sizeof t, "\\x%02x", (unsigned char)*c);
		else
			t[0] = *c, t[1] = 0;
		size_t l = strlen(piece);
		if (*o + l < n) {
			memcpy(buf + *o, piece, l);
			*o += l;
			buf[*o] = 0;
		}
		if (!*c)
			return;
	}
}

const char *pd_selector_format(const struct pd_selector *sel, char *buf, size_t n)
{
	if (!n)
		return buf;
	size_t o = (size_t)snprintf(buf, n, "%s{", sel->type ? sel->type : "");
	if (o >= n)
		return buf;
	for (size_t i = 0; i < sel->n; i++) {
		const struct pd_matcher *m = &sel->m[i];
		bool plain = is_alpha(m->name[0]);
		for (const char *c = m->name; plain && *c; c++)
			plain = is_name(*c);
		if (i && o + 1 < n)
			buf[o++] = ',', buf[o] = 0;
		if (plain) {
			int w = snprintf(buf + o, n - o, "%s", m->name);
			o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
		} else {
			if (o + 1 < n)
				buf[o++] = '"', buf[o] = 0;
			put_quoted(buf, n, &o, m->name);
		}
		int w = snprintf(buf + o, n - o, "%s\"", op_names[m->op]);
		o = w < 0 || (size_t)w >= n - o ? n - 1 : o + (size_t)w;
		put_quoted(buf, n, &o, m->value);
	}
	if (o + 1 < n)
		buf[o++] = '}', buf[o] = 0;
	return buf;
}

/* ---- selection ------------------------------------------------------------------- */

int pd_meta_copy(struct pd_profile_meta *dst, const struct pd_profile_meta *src)
{
	*dst = *src;
	dst->labels = NULL;
	dst->nlabels = 0;
	if (!src->nlabels)
		return 0;
	struct pd_kv *l = calloc(src->nlabels, sizeof *l);
	if (!l)
		return PD_ENOMEM;
	dst->labels = l;
	for (size_t i = 0; i < src->nlabels; i++) {
		l[i].key = strdup(src->labels[i].key);
		l[i].value = strdup(src->labels[i].value);
		dst->nlabels = i + 1;
		if (!l[i].key || !l[i].value) {
			pd_meta_clear(dst);
			return PD_ENOMEM;
		}
	}
	return 0;
}

void pd_query_metas_free(struct pd_profile_meta *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		pd_meta_clear(&v[i]);
	free(v);
}

struct each_ctx {
	const struct pd_selector *sel;
	pd_meta_fn fn;
	void *ctx;
	int rc; /* fn's non-zero return */
};

static int each_one(void *ctx, const struct pd_profile_meta *m)
{
	struct each_ctx *c = ctx;
	if (!pd_selector_match(c->sel, m))
		return 0;
	return c->rc = c->fn(c->ctx, m);
}

int pd_query_each(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, pd_meta_fn fn,
		  void *ctx, struct pd_err *err)
{
	char **svcs = NULL;
	size_t nsvc = 0;
	struct pd_kv *kv = NULL;
	int rc = 0;
	if (from_ns > to_ns)
		return 0;
	const char *one = pd_selector_service(sel);
	if (one) {
		if (!(svcs = calloc(1, sizeof *svcs)) || !(svcs[0] = strdup(one))) {
			rc = pd_errf(err, PD_ENOMEM, "out of memory");
			goto out;
		}
		nsvc = 1;
	} else if ((rc = pd_store_services(st, &svcs, &nsvc, err))) {
		goto out;
	}
	/* exact non-empty label matchers go to the store's index */
	if (!(kv = calloc(sel->n + 1, sizeof *kv))) {
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
		goto out;
	}
	size_t nkv = 0;
	for (size_t i = 0; i < sel->n; i++)
		if (sel->m[i].op == PD_MATCH_EQ && sel->m[i].value[0] && strcmp(sel->m[i].name, "service")) {
			kv[nkv].key = sel->m[i].name;
			kv[nkv].value = sel->m[i].value;
			nkv++;
		}
	struct each_ctx ec = {sel, fn, ctx, 0};
	for (size_t i = 0; i < nsvc && !rc; i++) {
		if (!pd_selector_match_service(sel, svcs[i]))
			continue;
		struct pd_store_query q = {svcs[i], sel->type, kv, nkv, from_ns, to_ns, 0};
		ec.rc = 0;
		rc = pd_store_find(st, &q, each_one, &ec, err);
	}
out:
	for (size_t i = 0; svcs && i < nsvc; i++)
		free(svcs[i]);
	free(svcs);
	free(kv);
	return rc;
}

struct sel_ctx {
	struct pd_profile_meta *v;
	size_t n, cap, max;
};

static int sel_add(void *ctx, const struct pd_profile_meta *m)
{
	struct sel_ctx *c = ctx;
	if (c->max && c->n >= c->max)
		return PD_ELIMIT;
	if (pd_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v))
		return PD_ENOMEM;
	if (pd_meta_copy(&c->v[c->n], m))
		return PD_ENOMEM;
	c->n++;
	return 0;
}

static int meta_cmp(const void *a, const void *b)
{
	const struct pd_profile_meta *x = a, *y = b;
	if (x->created_ns != y->created_ns)
		return x->created_ns < y->created_ns ? -1 : 1;
	int c = strcmp(x->service, y->service);
	return c ? c : strcmp(x->id, y->id);
}

int pd_query_select(struct pd_store *st, const struct pd_selector *sel, int64_t from_ns, int64_t to_ns, size_t max,
		    struct pd_profile_meta **out, size_t *n, struct pd_err *err)
{
	*out = NULL;
	*n = 0;
	struct sel_ctx c = {NULL, 0, 0, max};
	int rc = pd_query_each(st, sel, from_ns, to_ns, sel_add, &c, err);
	if (rc == PD_ELIMIT)
		rc = pd_errf(err, PD_ELIMIT,
			     "more than %zu profiles match: over the limit of profiles per query (%zu); "
			     "narrow the selector or the time range",
			     max, max);
	else if (rc == PD_ENOMEM)
		rc = pd_errf(err, PD_ENOMEM, "out of memory");
	if (rc) {
		pd_query_metas_free(c.v, c.n);
		return rc;
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof *c.v, meta_cmp);
	*out = c.v;
	*n = c.n;
	return 0;
}
