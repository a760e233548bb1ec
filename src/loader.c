/*
 * loader.c — parallel, in-order pprof file loader (see loader.h).
 *
 * File i goes to ring slot i % K. A worker claims the next file index, waits
 * until the consumer has taken file i - K (so the slot is free and cannot be
 * claimed by anyone else), decodes, and marks the slot ready; the consumer waits for slot (next % K) to be ready.
 */
#include "loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slot {
	int file;  /* which file occupies the slot, -1 = free */
	bool ready;
	int rc;
	struct pd_profile *p;
	struct pd_err err;
};

struct pd_loader {
	char **files;
	int n, k, next_claim, next_take;
	bool stop;
	struct slot *slots;
	pthread_t *threads;
	int nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void *worker(void *arg)
{
	struct pd_loader *l = arg;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		if (l->stop || l->next_claim >= l->n)
			break;
		int i = l->next_claim++;
		struct slot *s = &l->slots[i % l->k];
		/* Slot i % K is ours once the consumer has taken file i - K; waiting
		 * for "slot free" alone would let file i + K steal it. */
		while (!l->stop && i - l->next_take >= l->k)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->stop)
			break;
		s->file = i;
		s->ready = false;
		pthread_mutex_unlock(&l->mu);
		struct pd_profile *p = NULL;
		struct pd_err err = {0};
		int rc = pd_pprof_decode_file(l->files[i], NULL, &p, &err);
		pthread_mutex_lock(&l->mu);
		s->p = p;
		s->rc = rc;
		s->err = err;
		s->ready = true;
		pthread_cond_broadcast(&l->cv);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

struct pd_loader *pd_loader_start(char **files, int n, int workers)
{
	if (workers <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		workers = c < 1 ? 1 : c > 8 ? 8 : (int)c;
	}
	if (workers > n)
		workers = n > 0 ? n : 1;
	struct pd_loader *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->files = files;
	l->n = n;
	l->k = 2 * workers;
	l->slots = calloc((size_t)l->k, sizeof *l->slots);
	l->threads = calloc((size_t)workers, sizeof *l->threads);
	if (!l->slots || !l->threads) {
		free(l->slots);
		free(l->threads);
		free(l);
		return NULL;
	}
	for (int i = 0; i < l->k; i++)
		l->slots[i].file = -1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&l->threads[i], NULL, worker, l))
			break;
		l->nthreads++;
	}
	if (l->nthreads == 0) {
		pd_loader_stop(l);
		return NULL;
	}
	return l;
}

int pd_loader_next(struct pd_loader *l, struct pd_profile **p, int *index, struct pd_err *err)
{
	*p = NULL;
	pthread_mutex_lock(&l->mu);
	if (l->next_take >= l->n) {
		pthread_mutex_unlock(&l->mu);
		return 1;
	}
	int i = l->next_take; /* advanced only once taken: workers key on it */
	struct slot *s = &l->slots[i % l->k];
	while (!(s->file == i && s->ready))
		pthread_cond_wait(&l->cv, &l->mu);
	int rc = s->rc;
	*p = s->p;
	if (rc && err)
		*err = s->err;
	s->p = NULL;
	s->file = -1;
	s->ready = false;
	l->next_take++;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	*index = i;
	return rc;
}

void pd_loader_stop(struct pd_loader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	for (int i = 0; i < l->nthreads; i++)
		pthread_join(l->threads[i], NULL);
	for (int i = 0; i < l->k; i++)
		pd_profile_free(l->slots[i].p);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l->slots);
	free(l->threads);
	free(l);
}
