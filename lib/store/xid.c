/*
 * xid.c — profile ids in the format of github.com/rs/xid (what profefe
 * hands out): 12 bytes = 4 bytes of seconds since the epoch (big-endian),
 * 3 bytes of machine id, 2 bytes of process id, 3 bytes of a counter;
 * written as 20 characters of lower-case base32hex. The time part is the
 * profile's creation time, which names its partition.
 */
#include "store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char b32[] = "0123456789abcdefghijklmnopqrstuv";

static uint32_t machine_id(void)
{
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	return (uint32_t)pd_hash(host, strlen(host), 0x71d) & 0xffffff;
}

static atomic_uint xid_counter;
static uint32_t xid_mid, xid_pid;

static void xid_init(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	atomic_store(&xid_counter, (unsigned)pd_hash_u64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32));
	xid_mid = machine_id();
	xid_pid = (uint32_t)getpid() & 0xffff;
}

/* 12 bytes -> 20 base32hex digits (the last one carries 1 bit, padded) */
static void xid_encode(const uint8_t b[12], char out[PD_STORE_ID_LEN + 1])
{
	int bits = 0, o = 0;
	uint32_t acc = 0;
	for (int i = 0; i < 12; i++) {
		acc = acc << 8 | b[i];
		bits += 8;
		while (bits >= 5) {
			out[o++] = b32[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	if (bits)
		out[o++] = b32[(acc << (5 - bits)) & 31];
	out[o] = 0;
}

void pd_xid_make(int64_t t_ns, uint64_t tail, char out[PD_STORE_ID_LEN + 1])
{
	uint32_t secs = (uint32_t)(t_ns / 1000000000);
	uint8_t b[12] = {(uint8_t)(secs >> 24), (uint8_t)(secs >> 16), (uint8_t)(secs >> 8), (uint8_t)secs};
	for (int i = 0; i < 8; i++)
		b[4 + i] = (uint8_t)(tail >> (56 - 8 * i));
	xid_encode(b, out);
}

uint64_t pd_xid_new(int64_t t_ns, char out[PD_STORE_ID_LEN + 1])
{
	/* the counter's seed, the machine id and the pid: once, as rs/xid does
	 * (they were a gethostname and a getpid per id: two system calls per
	 * upload, seen with strace) */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, xid_init);
	uint32_t mid = xid_mid, pid = xid_pid;
	uint32_t c = atomic_fetch_add(&xid_counter, 1) & 0xffffff;
	uint64_t tail = (uint64_t)mid << 40 | (uint64_t)pid << 24 | c;
	pd_xid_make(t_ns, tail, out);
	return tail;
}

/* 20 base32hex digits -> their 12 bytes (the last digit's padding bit
 * dropped); -1 if id is not 20 such digits. */
static int xid_decode(const char *id, uint8_t b[12])
{
	if (!id || strlen(id) != PD_STORE_ID_LEN)
		return -1;
	int bits = 0, o = 0;
	uint32_t acc = 0;
	for (int i = 0; i < PD_STORE_ID_LEN; i++) {
		const char *p = id[i] ? strchr(b32, id[i]) : NULL;
		if (!p)
			return -1;
		acc = acc << 5 | (uint32_t)(p - b32);
		bits += 5;
		if (bits >= 8 && o < 12) {
			b[o++] = (uint8_t)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	return 0;
}

int pd_xid_tail(const char *id, uint64_t *tail)
{
	uint8_t b[12];
	if (xid_decode(id, b))
		return -1;
	uint64_t t = 0;
	for (int i = 4; i < 12; i++)
		t = t << 8 | b[i];
	/* only the digits pd_xid_new writes: the last one's padding bits 0
	 * (another spelling of the same bytes is another id) */
	char again[PD_STORE_ID_LEN + 1];
	xid_encode(b, again);
	if (memcmp(again, id, PD_STORE_ID_LEN))
		return -1;
	*tail = t;
	return 0;
}

int64_t pd_xid_time(const char *id)
{
	uint8_t b[12];
	if (xid_decode(id, b))
		return -1;
	return (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]) * 1000000000;
}
