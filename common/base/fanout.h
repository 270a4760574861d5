/* SPDX-License-Identifier: Apache-2.0 */
/* Fan-out: a few persistent threads that run a batch of blocking calls (one per node, slice, ...) in parallel. */
#ifndef FT_FANOUT_H
#define FT_FANOUT_H

typedef struct ft_fanout ft_fanout_t;

/* Starts nthreads threads (at least 1). NULL on failure. */
ft_fanout_t *ft_fanout_start(int nthreads);
/* Joins the threads and frees the pool (NULL is a no-op); no ft_fanout_run may be in progress. */
void ft_fanout_stop(ft_fanout_t *p);
/*
 * Runs fn(arg, i) for every i in [0, n) in parallel and returns when all have returned.
 * The calling thread runs some of the calls itself, so a batch always makes progress even
 * when every pool thread is busy with other batches; calls of one batch may run on any thread.
 */
void ft_fanout_run(ft_fanout_t *p, void (*fn)(void *arg, int i), void *arg, int n);

#endif
