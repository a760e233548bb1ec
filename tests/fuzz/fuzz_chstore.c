/*
 * fuzz_chstore.c — libFuzzer driver for what the ClickHouse store backend
 * reads back from ClickHouse (lib/store/clickhouse.c): the RowBinary
 * answers of symbol queries, each symbol's data as the materialiser reads
 * it, and profile rows (header, sample block, refs). A damaged or hostile
 * ClickHouse must give errors, never a crash, a leak or UB.
 *
 * Input: byte 0 selects the parser (bit 0: profile row, else symbols); the
 * rest is the answer. Also the store URL parser on the input as text.
 */
#include "../../lib/store/store.h"
#include "../../lib/store/ch.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	(void)pd_store_ch_fuzz(data, size);
	char *url = malloc(size + 1);
	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = 0;
	struct pd_ch_url u;
	struct pd_err err;
	if (!pd_ch_url_parse(url, &u, &err))
		pd_ch_url_free(&u);
	free(url);
	return 0;
}
