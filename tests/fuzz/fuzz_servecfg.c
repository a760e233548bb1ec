/*
 * fuzz_servecfg.c — libFuzzer driver for `profd serve --config FILE`
 * (src/serve_config.c): the YAML mapping of serve's flags and its scrape:
 * section, handed on to the scraper's parser with its lines kept where they
 * are in the file.
 *
 * Input: the file's bytes (written to a temporary file, as serve reads it).
 * serve_config.c is compiled into this driver (it lives in src/, not in
 * the library), with the few CLI functions it calls stubbed and its stderr
 * caught. Properties beyond "no crash, no leak, no UB":
 *   - the answer is 0, or 2 (a usage error) with a message naming the file
 *     ("profd serve: FILE:LINE:COL: ..."), or 1 (only when a read or an
 *     allocation failed);
 *   - a 0 gives argv = argv[0] and then the file's flags: each one a flag
 *     of the table, never --help, --config or --print-config, followed by
 *     its value when it takes one; NULL-terminated;
 *   - a scrape: section is handed on whole (NUL-terminated, its length
 *     given) and as many lines into the copy as into the file, so that the
 *     scraper's errors about it, which this driver provokes by parsing it,
 *     name lines that exist in the file.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* serve_config.c's messages go here, not onto the fuzzer's terminal */
static FILE *fuzz_err;
#undef stderr
#define stderr fuzz_err
#include "../../src/serve_config.c"
#undef stderr
#define stderr stderr

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- what serve_config.c needs from the rest of src/ ---- */
const char *cli_prog = "profd";

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(fuzz_err, "%s: ", cli_prog);
	vfprintf(fuzz_err, fmt, ap);
	fputc('\n', fuzz_err);
	va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	(void)cmd;
	(void)fmt;
	PD_ASSERT(!"the driver's command line is never wrong");
	return EXIT_USAGE;
}

static const char *preset_text;
static size_t preset_len;

void scrape_cmd_preset_config(const char *name, const char *text, size_t n)
{
	(void)name;
	preset_text = text;
	preset_len = n;
}

/* ---- the driver ---- */
static const struct option opts[] = {
    {"addr", required_argument, NULL, 'a'},         {"data-dir", required_argument, NULL, 'd'},
    {"retention", required_argument, NULL, 'r'},    {"max-body", required_argument, NULL, 'b'},
    {"tokens", required_argument, NULL, 't'},       {"metrics-open", no_argument, NULL, 'm'},
    {"quiet", no_argument, NULL, 'q'},              {"help", no_argument, NULL, 'h'},
    {"config", required_argument, NULL, 'c'},       {"print-config", no_argument, NULL, 'p'},
    {"scrape-interval", optional_argument, NULL, 'i'}, {NULL, 0, NULL, 0},
};

static char path[64];
static int fd = -1;

/* Line breaks as YAML (libyaml) counts them: \n, \r\n, a lone \r, and NEL,
 * LS, PS in UTF-8. The copy's lines are the file's in that counting. */
static size_t count_lines(const char *sv, size_t n)
{
	const unsigned char *s = (const unsigned char *)sv;
	size_t l = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\n' || (s[i] == '\r' && (i + 1 == n || s[i + 1] != '\n')))
			l++;
		else if (s[i] == 0xc2 && i + 1 < n && s[i + 1] == 0x85)
			l++;
		else if (s[i] == 0xe2 && i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9))
			l++;
	return l;
}

static void check_ok(const struct serve_cfg *c)
{
	PD_ASSERT(c->argc >= 1 && c->argv[c->argc] == NULL && !strcmp(c->argv[0], "profd"));
	for (int i = 1; i < c->argc; i++) {
		const char *a = c->argv[i];
		PD_ASSERT(a && !strncmp(a, "--", 2));
		const struct option *o = find_opt(opts, a + 2, strlen(a + 2));
		PD_ASSERT(o && !not_a_key(o->name));
		if (o->has_arg != no_argument) {
			PD_ASSERT(i + 1 < c->argc);
			i++; /* the value: anything the flag's own parser will judge */
		}
	}
}

/* The scraper's errors about the copied section name a line of the file. */
static void check_scrape(const uint8_t *d, size_t n)
{
	PD_ASSERT(preset_text && preset_text[preset_len] == 0);
	size_t file_lines = count_lines((const char *)d, n) + 1;
	PD_ASSERT(count_lines(preset_text, preset_len) < file_lines);
	struct pd_scrape_cfg_flags fl = {
	    .types = PD_ST_ALL,
	    .interval_ns = PD_SCRAPE_INTERVAL_NS,
	    .cpu_ns = PD_SCRAPE_CPU_NS,
	    .timeout_ns = PD_SCRAPE_TIMEOUT_NS,
	};
	struct pd_scrape_file f;
	struct pd_err err = {0, ""};
	if (pd_scrape_parse_yaml("cfg.yaml", preset_text, preset_len, &fl, &f, &err)) {
		unsigned long line = 0;
		if (sscanf(err.msg, "cfg.yaml:%lu:", &line) == 1)
			PD_ASSERT(line >= 1 && line <= file_lines);
		return;
	}
	pd_scrape_file_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 262144)
		return 0;
	if (fd < 0) {
		snprintf(path, sizeof path, "/tmp/fuzz_servecfg.%d.yaml", (int)getpid());
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		PD_ASSERT(fd >= 0);
		unlink(path); /* gone when the process is; read through /proc */
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	PD_ASSERT(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size);
	char msg[4096];
	memset(msg, 0, sizeof msg);
	fuzz_err = fmemopen(msg, sizeof msg - 1, "w");
	PD_ASSERT(fuzz_err);
	preset_text = NULL;
	preset_len = 0;
	char *argv[] = {(char *)"profd", (char *)"--config", path, NULL};
	struct serve_cfg c;
	int rc = serve_config_expand(3, argv, opts, &c);
	fclose(fuzz_err);
	fuzz_err = NULL;
	if (rc == 0) {
		PD_ASSERT(!msg[0]);
		check_ok(&c);
		if (c.scrape)
			check_scrape(data, size);
		else
			PD_ASSERT(!preset_text);
	} else {
		PD_ASSERT(rc == EXIT_USAGE || rc == EXIT_INPUT);
		char want[96];
		snprintf(want, sizeof want, "profd serve: %s:", path);
		if (rc == EXIT_USAGE)
			PD_ASSERT(!strncmp(msg, want, strlen(want)));
		else
			PD_ASSERT(!strncmp(msg, "profd: serve: ", 14));
	}
	serve_config_free(&c);
	return 0;
}
