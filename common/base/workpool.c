/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-size pthread worker pool with an intrusive FIFO of work items (see workpool.h). */
#include "base/workpool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct ft_workpool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ft_work_t *head, *tail;
	bool draining; /* destroy called: exit once the queue is empty */
	int nthreads;
	pthread_t *threads;
};

static ft_work_t *pop_locked(ft_workpool_t *p)
{
	ft_work_t *w = p->head;

	if (w != NULL) {
		p->head = w->next;
		if (p->head == NULL)
			p->tail = NULL;
		w->next = NULL;
	}
	return w;
}

static void *worker_main(void *arg)
{
	ft_workpool_t *p = arg;
	ft_work_t *w;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		w = pop_locked(p);
		if (w == NULL) {
			if (p->draining)
				break;
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		w->fn(w);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

ft_workpool_t *ft_workpool_create(int nthreads, const char *name)
{
	ft_workpool_t *p;
	char tname[16];
	int i;

	if (nthreads < 1)
		nthreads = 1;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->threads = calloc((size_t)nthreads, sizeof(*p->threads));
	if (p->threads == NULL)
		goto fail;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0)
			break;
		snprintf(tname, sizeof(tname), "%.10s-%d", name ? name : "work", i % 1000);
		pthread_setname_np(p->threads[i], tname);
		p->nthreads++;
	}
	if (p->nthreads == 0) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	return p;
fail:
	free(p->threads);
	free(p);
	return NULL;
}

void ft_workpool_submit(ft_workpool_t *p, ft_work_t *w)
{
	w->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->tail != NULL)
		p->tail->next = w;
	else
		p->head = w;
	p->tail = w;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void ft_workpool_destroy(ft_workpool_t *p)
{
	int i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->draining = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
}
