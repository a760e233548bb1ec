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

void pd_xid_new(int64_t t_ns, char out[PD_STORE_ID_LEN + 1])
{
	/* the counter's seed, the machine id and the pid: once, as rs/xid does
	 * (they were a gethostname and a getpid per id: two system calls per
	 * upload, seen with strace) */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, xid_init);
	uint32_t secs = (uint32_t)(t_ns / 1000000000), mid = xid_mid, pid = xid_pid;
	uint32_t c = atomic_fetch_add(&xid_counter, 1) & 0xffffff;
	uint8_t b[12] = {(uint8_t)(secs >> 24), (uint8_t)(secs >> 16), (uint8_t)(secs >> 8), (uint8_t)secs,
			 (uint8_t)(mid >> 16),  (uint8_t)(mid >> 8),   (uint8_t)mid,         (uint8_t)(pid >> 8),
			 (uint8_t)pid,          (uint8_t)(c >> 16),    (uint8_t)(c >> 8),    (uint8_t)c};
	/* 96 bits -> 20 base32 digits (the last one carries 1 bit, padded) */
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

int64_t pd_xid_time(const char *id)
{
	if (!id || strlen(id) != PD_STORE_ID_LEN)
		return -1;
	/* the first 7 digits hold 35 bits: the 32 bits of seconds and 3 more */
	uint64_t acc = 0;
	for (int i = 0; i < 7; i++) {
		const char *p = strchr(b32, id[i]);
		if (!p || !id[i])
			return -1;
		acc = acc << 5 | (uint64_t)(p - b32);
	}
	for (int i = 7; i < PD_STORE_ID_LEN; i++)
		if (!id[i] || !strchr(b32, id[i]))
			return -1;
	return (int64_t)(acc >> 3) * 1000000000;
}
