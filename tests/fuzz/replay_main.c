/*
 * replay_main.c — runs a libFuzzer driver over every file of the corpus
 * directories given on the command line, once each, without libFuzzer (so
 * `make test` replays corpora with gcc, and under ASan+UBSan with
 * SANITIZE=1). Prints how many inputs ran; a crash fails the test.
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	size_t r;
	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		}
	}
	fclose(f);
	if (!buf)
		return -1;
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		if (!d) { /* a single file */
			if (run_file(argv[i]))
				return 1;
			count++;
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			if (run_file(path)) {
				closedir(d);
				return 1;
			}
			count++;
		}
		closedir(d);
	}
	if (count == 0) {
		fprintf(stderr, "no corpus inputs found\n");
		return 1;
	}
	printf("%zu inputs replayed\n", count);
	return 0;
}
