/*
 * fuzz_scrapecfg.c — libFuzzer driver for the scraper's configuration:
 * the YAML config file (lib/scrape/scrape_config.c, from memory), Kubernetes label
 * selectors, and the one-target-per-line format (lib/scrape/target.c).
 *
 * The first byte picks the parser (low 2 bits) and a parameter (the rest);
 * the remaining bytes are its input. Properties beyond "no crash, no leak,
 * no UB":
 *   - every error has a negative code and a message; a config error names
 *     the file first ("cfg.yaml:LINE:COLUMN: ..." or "cfg.yaml: ...");
 *   - a parsed config is sane: every target has types, a schedule the
 *     scraper accepts (interval >= 1s, whole CPU seconds, timeout >= 1ms),
 *     an http(s) base URL without a trailing '/', at most 64 labels, a
 *     unique key; every entry's settings too; parsing again gives the same;
 *   - format detection never reads past the input;
 *   - a parsed selector matches without crashing, and "" matches all.
 */
#include "../../lib/scrape/scrape.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const struct pd_err *err)
{
	PD_ASSERT(rc < 0 && err->code == rc && err->msg[0]);
}

static void check_settings(const struct pd_scrape_settings *s)
{
	PD_ASSERT(s->types && !(s->types & ~PD_ST_ALL));
	PD_ASSERT(s->interval_ns >= 1000000000LL && s->cpu_ns >= 1000000000LL && s->cpu_ns % 1000000000LL == 0);
	PD_ASSERT(s->timeout_ns >= 1000000LL);
	PD_ASSERT(s->has_keep || !s->nkeep);
	for (size_t i = 0; i < s->nlabels; i++)
		PD_ASSERT(s->labels[i].key[0] && s->labels[i].value);
}

/* Labels of a fake pod, from the input. */
static const char *fake_label(void *ctx, const char *key)
{
	const char *s = ctx;
	return strlen(key) % 3 == 0 ? NULL : (*key == 'a' ? s : "web");
}

static void fuzz_yaml(const uint8_t *d, size_t n, unsigned param)
{
	struct pd_kv flabels[] = {{(char *)"env", (char *)"fuzz"}, {(char *)"team", (char *)"x"}};
	struct pd_scrape_cfg_flags fl = {
		.service = param & 1 ? "dflt" : NULL,
		.labels = param & 2 ? flabels : NULL,
		.nlabels = param & 2 ? 2 : 0,
		.types = PD_ST_ALL,
		.interval_ns = PD_SCRAPE_INTERVAL_NS,
		.cpu_ns = PD_SCRAPE_CPU_NS,
		.timeout_ns = PD_SCRAPE_TIMEOUT_NS,
		.given = (param >> 2) & 15,
		.once = param & 64,
	};
	(void)pd_scrape_config_is_yaml("cfg", (const char *)d, n);
	struct pd_scrape_file f, again;
	struct pd_err err = {0, ""};
	int rc = pd_scrape_parse_yaml("cfg.yaml", d, n, &fl, &f, &err);
	if (rc) {
		check_err(rc, &err);
		PD_ASSERT(rc == PD_ENOMEM || !strncmp(err.msg, "cfg.yaml:", 9));
		PD_ASSERT(!f.targets.n && !f.nrules && !f.global.labels);
		return;
	}
	check_settings(&f.global);
	for (size_t i = 0; i < f.targets.n; i++) {
		const struct pd_scrape_target *t = &f.targets.v[i];
		PD_ASSERT(t->types && !(t->types & ~PD_ST_ALL) && t->service[0]);
		PD_ASSERT(t->interval_ns >= 1000000000LL && t->cpu_ns >= 1000000000LL && t->timeout_ns >= 1000000LL);
		PD_ASSERT(!strncmp(t->url, "http://", 7) || !strncmp(t->url, "https://", 8));
		/* the path has no trailing '/' (a query, ?debug=1, may end with anything) */
		size_t pl = strcspn(t->url, "?");
		PD_ASSERT(pl > 0 && t->url[pl - 1] != '/' && !strcmp(t->key, t->url));
		PD_ASSERT(t->nlabels <= PD_SCRAPE_MAX_LABELS);
		for (size_t k = 0; k < i; k++)
			PD_ASSERT(strcmp(f.targets.v[k].key, t->key));
	}
	char val[32];
	size_t vn = n < sizeof val - 1 ? n : sizeof val - 1;
	memcpy(val, d, vn);
	val[vn] = 0;
	for (size_t i = 0; i < f.nrules; i++) {
		const struct pd_scrape_kube_rule *r = &f.rules[i];
		check_settings(&r->set);
		PD_ASSERT(r->where && !strncmp(r->where, "cfg.yaml:", 9));
		PD_ASSERT(!r->all_namespaces || !r->nnamespaces);
		(void)pd_scrape_selector_match(r->selector, fake_label, val);
	}
	(void)pd_scrape_kube_rule_match(f.rules, f.nrules, "shop", fake_label, val);
	PD_ASSERT(!f.kube_namespace || !f.kube_all);
	rc = pd_scrape_parse_yaml("cfg.yaml", d, n, &fl, &again, &err);
	PD_ASSERT(rc == 0 && again.targets.n == f.targets.n && again.nrules == f.nrules &&
		  again.global.types == f.global.types && again.global.nlabels == f.global.nlabels);
	pd_scrape_file_free(&again);
	pd_scrape_file_free(&f);
}

static void fuzz_selector(const uint8_t *d, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		return;
	memcpy(s, d, n);
	s[n] = 0;
	struct pd_scrape_selector *sel = NULL;
	struct pd_err err = {0, ""};
	int rc = pd_scrape_selector_parse(s, &sel, &err);
	if (rc) {
		check_err(rc, &err);
		PD_ASSERT(sel == NULL);
	} else {
		(void)pd_scrape_selector_match(sel, fake_label, s);
		pd_scrape_selector_free(sel);
	}
	free(s);
	rc = pd_scrape_selector_parse("", &sel, &err);
	PD_ASSERT(rc == 0 && pd_scrape_selector_match(sel, fake_label, NULL));
	pd_scrape_selector_free(sel);
}

static void fuzz_lines(const uint8_t *d, size_t n, unsigned param)
{
	char *s = malloc(n + 1);
	if (!s)
		return;
	memcpy(s, d, n);
	s[n] = 0;
	struct pd_kv dl[] = {{(char *)"env", (char *)"fuzz"}};
	struct pd_scrape_targets l = {0};
	struct pd_err err = {0, ""};
	int rc = pd_scrape_parse_config(s, "t.txt", param & 1 ? "dflt" : NULL, dl, param & 2 ? 1 : 0, &l, &err);
	if (rc)
		check_err(rc, &err);
	for (size_t i = 0; i < l.n; i++)
		PD_ASSERT(!strncmp(l.v[i].url, "http://", 7) || !strncmp(l.v[i].url, "https://", 8));
	pd_scrape_targets_free(&l);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 262144)
		return 0;
	unsigned sel = data[0] & 3, param = data[0] >> 2;
	const uint8_t *d = data + 1;
	size_t n = size - 1;
	switch (sel) {
	case 0:
	case 1: fuzz_yaml(d, n, param | (sel << 6)); break;
	case 2: fuzz_selector(d, n); break;
	default: fuzz_lines(d, n, param); break;
	}
	return 0;
}
