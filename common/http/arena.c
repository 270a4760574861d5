/* SPDX-License-Identifier: Apache-2.0 */
/* Per-request memory: an arena with an inline first block, freed as a whole, and the request's on_done hooks. */
#include "http/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define ARENA_BLOCK 8192

struct arena_blk {
	struct arena_blk *next;
	size_t cap, used;
	unsigned char data[];
};

void http_oom(void)
{
	ft_error("http: out of memory");
	abort();
}

static void *align16(void *p)
{
	return (void *)(((uintptr_t)p + 15) & ~(uintptr_t)15);
}

void *http_arena_alloc(arena_t *a, size_t size)
{
	unsigned char *p, *lim;
	arena_blk_t *b;
	size_t cap;

	if (size == 0)
		size = 1;
	p = align16(a->inl + a->inl_used);
	lim = a->inl + ARENA_INLINE;
	if (p <= lim && size <= (size_t)(lim - p)) {
		a->inl_used = (size_t)(p - a->inl) + size;
		return p;
	}
	b = a->blks;
	if (b != NULL) {
		p = align16(b->data + b->used);
		lim = b->data + b->cap;
		if (p <= lim && size <= (size_t)(lim - p)) {
			b->used = (size_t)(p - b->data) + size;
			return p;
		}
	}
	cap = size + 16 > ARENA_BLOCK ? size + 16 : ARENA_BLOCK;
	b = malloc(sizeof(*b) + cap);
	if (b == NULL)
		http_oom();
	b->cap = cap;
	p = align16(b->data);
	b->used = (size_t)(p - b->data) + size;
	if (cap > ARENA_BLOCK && a->blks != NULL) {
		/* a big one-off: keep filling the current block */
		b->next = a->blks->next;
		a->blks->next = b;
	} else {
		b->next = a->blks;
		a->blks = b;
	}
	return p;
}

void http_arena_reset(arena_t *a)
{
	arena_blk_t *b, *n;

	for (b = a->blks; b != NULL; b = n) {
		n = b->next;
		free(b);
	}
	a->blks = NULL;
	a->inl_used = 0;
}

char *http_arena_strndup(arena_t *a, const char *s, size_t n)
{
	char *d = http_arena_alloc(a, n + 1);

	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

char *http_arena_vprintf(arena_t *a, const char *fmt, va_list ap)
{
	va_list aq;
	char *d;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		n = 0;
	d = http_arena_alloc(a, (size_t)n + 1);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	return d;
}

void *ft_req_alloc(ft_req_t *r, size_t size)
{
	return http_arena_alloc(&r->arena, size);
}

char *ft_req_strdup(ft_req_t *r, const char *s)
{
	return http_arena_strndup(&r->arena, s, strlen(s));
}

void ft_req_on_done(ft_req_t *r, void (*fn)(void *arg), void *arg)
{
	hook_t *h = http_arena_alloc(&r->arena, sizeof(*h));

	h->fn = fn;
	h->arg = arg;
	h->next = r->hooks;
	r->hooks = h;
}
