/*
 * queue.c — the delivery queue (bounded FIFO, drops the oldest) and the
 * schedule math (phase from the key, next due time, retry and collector
 * backoff). No I/O, no clock: callers pass the times.
 *
 * Queue invariants: items are in ascending seq order; bytes is the sum of
 * the queued items' cost and never exceeds max_bytes after a push or a
 * requeue returns (the evicted items are handed back, oldest first).
 */
#include "scrape.h"

#include <stdlib.h>
#include <string.h>

void pd_queue_init(struct pd_queue *q, size_t max_bytes)
{
	memset(q, 0, sizeof *q);
	q->max_bytes = max_bytes;
	q->next_seq = 1;
}

static void unlink_item(struct pd_queue *q, struct pd_queue_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		q->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		q->tail = it->prev;
	it->prev = it->next = NULL;
	q->n--;
	q->bytes -= it->cost;
}

/* Insert by seq, searching from the head (requeued items are old). */
static void insert_sorted(struct pd_queue *q, struct pd_queue_item *it)
{
	struct pd_queue_item *after = NULL, *p = q->head;
	while (p && p->seq < it->seq) {
		after = p;
		p = p->next;
	}
	it->prev = after;
	it->next = p;
	if (after)
		after->next = it;
	else
		q->head = it;
	if (p)
		p->prev = it;
	else
		q->tail = it;
	q->n++;
	q->bytes += it->cost;
}

/* Evict from the head until the queue fits; returns the evicted list. */
static struct pd_queue_item *evict(struct pd_queue *q)
{
	struct pd_queue_item *first = NULL, *last = NULL;
	while (q->head && q->bytes > q->max_bytes) {
		struct pd_queue_item *it = q->head;
		unlink_item(q, it);
		q->dropped++;
		q->dropped_bytes += it->cost;
		if (last)
			last->next = it;
		else
			first = it;
		last = it;
	}
	return first;
}

struct pd_queue_item *pd_queue_push(struct pd_queue *q, struct pd_queue_item *it)
{
	it->seq = q->next_seq++;
	it->cost = it->len + (it->url ? strlen(it->url) + 1 : 0) + sizeof *it;
	it->prev = NULL;
	it->next = NULL;
	if (q->tail) {
		q->tail->next = it;
		it->prev = q->tail;
	} else {
		q->head = it;
	}
	q->tail = it;
	q->n++;
	q->bytes += it->cost;
	return evict(q);
}

struct pd_queue_item *pd_queue_pop(struct pd_queue *q)
{
	struct pd_queue_item *it = q->head;
	if (it)
		unlink_item(q, it);
	return it;
}

struct pd_queue_item *pd_queue_requeue(struct pd_queue *q, struct pd_queue_item *it)
{
	insert_sorted(q, it);
	return evict(q);
}

void pd_queue_item_free(struct pd_queue_item *it)
{
	if (!it)
		return;
	free(it->url);
	free(it->body);
	free(it);
}

void pd_queue_clear(struct pd_queue *q)
{
	struct pd_queue_item *it;
	while ((it = pd_queue_pop(q)))
		pd_queue_item_free(it);
}

/* ---- schedule math ------------------------------------------------------------------- */

int64_t pd_sched_phase(const char *key, int64_t interval_ns)
{
	if (interval_ns <= 0)
		return 0;
	uint64_t h = pd_hash(key, strlen(key), 0x70726f6664ULL);
	return (int64_t)(h % (uint64_t)interval_ns);
}

int64_t pd_sched_next(int64_t after, int64_t phase, int64_t interval_ns)
{
	if (interval_ns <= 0)
		return after + 1;
	/* r = (after - phase) mod interval, in [0, interval) */
	int64_t r = (after - phase) % interval_ns;
	if (r < 0)
		r += interval_ns;
	return after - r + interval_ns;
}

int64_t pd_sched_backoff(unsigned fails)
{
	if (!fails)
		return 0;
	int64_t d = PD_SCRAPE_RETRY_MIN_NS;
	for (unsigned i = 1; i < fails && d < PD_SCRAPE_RETRY_MAX_NS; i++)
		d *= 2;
	return d < PD_SCRAPE_RETRY_MAX_NS ? d : PD_SCRAPE_RETRY_MAX_NS;
}

int64_t pd_sched_retry(int64_t now, unsigned fails, int64_t next_due)
{
	int64_t t = now + pd_sched_backoff(fails ? fails : 1);
	return t < next_due ? t : next_due;
}
