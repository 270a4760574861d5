/* SPDX-License-Identifier: Apache-2.0 */
/* Fan-out thread pool: runs a batch of blocking node-to-node calls in parallel on persistent threads. */
#include "base/fanout.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/*
 * DESIGN
 * A batch lives on the caller's stack. It is queued while some of its indices are unclaimed;
 * pool threads and the caller itself claim indices under the pool mutex. The caller returns
 * only once done == n, and a pool thread's last touch of the batch is the done increment and
 * signal under the mutex, so the stack memory outlives every use.
 * Persistent threads keep the node client's per-thread keep-alive connections warm.
 */

typedef struct fanout_batch {
	void (*fn)(void *arg, int i);
	void *arg;
	int n;
	int next; /* next unclaimed index */
	int done; /* finished calls */
	pthread_cond_t finished;
	struct fanout_batch *qnext; /* queue link while next < n */
} fanout_batch_t;

struct ft_fanout {
	pthread_mutex_t lock;
	pthread_cond_t work;
	fanout_batch_t *head, *tail; /* batches with unclaimed indices */
	bool stopping;
	int nthreads;
	pthread_t *threads;
};

/* Removes b from the queue (b is in it). Lock held. */
static void queue_remove(ft_fanout_t *p, fanout_batch_t *b)
{
	fanout_batch_t **pp = &p->head;
	fanout_batch_t *prev = NULL;

	while (*pp != b) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	*pp = b->qnext;
	if (p->tail == b)
		p->tail = prev;
	b->qnext = NULL;
}

/* Claims the next index of b, dequeuing b when it was the last one. Lock held; b->next < b->n. */
static int claim(ft_fanout_t *p, fanout_batch_t *b)
{
	int i = b->next++;

	if (b->next == b->n)
		queue_remove(p, b);
	return i;
}

/* Runs call i of b without the lock, then records it. Called with the lock held; returns with it held. */
static void run_one(ft_fanout_t *p, fanout_batch_t *b, int i)
{
	pthread_mutex_unlock(&p->lock);
	b->fn(b->arg, i);
	pthread_mutex_lock(&p->lock);
	if (++b->done == b->n)
		pthread_cond_signal(&b->finished);
}

static void *fanout_main(void *arg)
{
	ft_fanout_t *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->head == NULL)
			break; /* stopping and nothing queued */
		fanout_batch_t *b = p->head;
		run_one(p, b, claim(p, b));
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

ft_fanout_t *ft_fanout_start(int nthreads)
{
	ft_fanout_t *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	if (nthreads < 1)
		nthreads = 1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	p->threads = calloc((size_t)nthreads, sizeof(pthread_t));
	if (p->threads == NULL)
		goto fail;
	for (int i = 0; i < nthreads; i++) {
		if (pthread_create(&p->threads[i], NULL, fanout_main, p) != 0)
			goto fail;
		p->nthreads++;
	}
	return p;
fail:
	ft_fanout_stop(p);
	return NULL;
}

void ft_fanout_stop(ft_fanout_t *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void ft_fanout_run(ft_fanout_t *p, void (*fn)(void *arg, int i), void *arg, int n)
{
	fanout_batch_t b = {.fn = fn, .arg = arg, .n = n};

	if (n <= 0)
		return;
	if (n == 1) { /* nothing to overlap: skip the hand-off */
		fn(arg, 0);
		return;
	}
	pthread_cond_init(&b.finished, NULL);
	pthread_mutex_lock(&p->lock);
	if (p->tail != NULL)
		p->tail->qnext = &b;
	else
		p->head = &b;
	p->tail = &b;
	if (n - 1 >= p->nthreads)
		pthread_cond_broadcast(&p->work);
	else
		for (int k = 0; k < n - 1; k++)
			pthread_cond_signal(&p->work);
	/* Claim what the pool has not taken yet, then wait for the calls it did take. */
	while (b.next < b.n)
		run_one(p, &b, claim(p, &b));
	while (b.done < b.n)
		pthread_cond_wait(&b.finished, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_cond_destroy(&b.finished);
}
