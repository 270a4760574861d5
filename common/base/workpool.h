/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-size pthread worker pool running intrusive work items (used by the HTTP server's defer). */
#ifndef FT_WORKPOOL_H
#define FT_WORKPOOL_H

/*
 * A work item is embedded in its owner's struct (no allocation on submit). fn(w) runs once on
 * some worker thread; from then on the item belongs to fn again (it may free or resubmit it).
 */
typedef struct ft_work {
	struct ft_work *next;
	void (*fn)(struct ft_work *w);
} ft_work_t;

typedef struct ft_workpool ft_workpool_t;

/* Starts nthreads (>= 1) workers named "<name>-<i>". NULL on failure. */
ft_workpool_t *ft_workpool_create(int nthreads, const char *name);
/* Queues w (FIFO). Safe from any thread, including a worker; allowed while destroy drains. */
void ft_workpool_submit(ft_workpool_t *p, ft_work_t *w);
/* Runs every queued item (including ones submitted meanwhile), joins the workers and frees p. */
void ft_workpool_destroy(ft_workpool_t *p);

#endif
