/* SPDX-License-Identifier: Apache-2.0 */
/* Growable byte/string buffer with doubling growth and a sticky allocation-failure flag. */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRBUF_MIN_CAP 256

int ft_strbuf_reserve(ft_strbuf_t *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (b->failed)
		return -1;
	if (extra > (size_t)-1 / 2 - b->len - 1) {
		b->failed = true;
		return -1;
	}
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap != 0 ? b->cap : STRBUF_MIN_CAP;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (p == NULL) {
		b->failed = true;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void ft_strbuf_add(ft_strbuf_t *b, const void *s, size_t n)
{
	if (ft_strbuf_reserve(b, n) != 0)
		return;
	if (n > 0)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void ft_strbuf_adds(ft_strbuf_t *b, const char *s)
{
	ft_strbuf_add(b, s, strlen(s));
}

void ft_strbuf_addc(ft_strbuf_t *b, char c)
{
	if (!b->failed && b->len + 2 <= b->cap) { /* the common case of byte-by-byte loops */
		b->p[b->len++] = c;
		b->p[b->len] = '\0';
		return;
	}
	ft_strbuf_add(b, &c, 1);
}

/* Formats straight into the buffer: a first try in the room left, a second after growing to the exact size. */
void ft_strbuf_addf(ft_strbuf_t *b, const char *fmt, ...)
{
	va_list ap;
	size_t room;
	int n;

	if (b->failed || ft_strbuf_reserve(b, 0) != 0)
		return;
	room = b->cap - b->len;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->p[b->len] = '\0';
		b->failed = true;
		return;
	}
	if ((size_t)n >= room) {
		if (ft_strbuf_reserve(b, (size_t)n) != 0) {
			b->p[b->len] = '\0';
			return;
		}
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

char *ft_strbuf_take(ft_strbuf_t *b)
{
	char *p = b->p;

	memset(b, 0, sizeof(*b));
	return p;
}

void ft_strbuf_free(ft_strbuf_t *b)
{
	free(ft_strbuf_take(b));
}
