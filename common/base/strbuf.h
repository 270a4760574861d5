/* SPDX-License-Identifier: Apache-2.0 */
/* Growable byte/string buffer: one owner, always NUL-terminated, sticky failure after an allocation error. */
#ifndef FT_STRBUF_H
#define FT_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Zero-initialize ({ 0 }) before use. p is NULL until the first append, then holds len bytes followed by a NUL
 * (the bytes may themselves contain NULs). When an allocation fails, failed is set, the contents are left as they
 * were (incomplete) and every later append is a no-op; callers check failed once at the end.
 */
typedef struct {
	char *p;
	size_t len, cap;
	bool failed;
} ft_strbuf_t;

/* Ensures room for extra more bytes plus the NUL; sets failed and returns -1 when that cannot be had. */
int ft_strbuf_reserve(ft_strbuf_t *b, size_t extra);
void ft_strbuf_add(ft_strbuf_t *b, const void *s, size_t n);
void ft_strbuf_adds(ft_strbuf_t *b, const char *s);
void ft_strbuf_addc(ft_strbuf_t *b, char c);
void ft_strbuf_addf(ft_strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes (malloc'd, NUL-terminated, possibly NULL when nothing was added) to the caller; resets b. */
char *ft_strbuf_take(ft_strbuf_t *b);
/* Frees the bytes and resets b to empty (failed cleared). */
void ft_strbuf_free(ft_strbuf_t *b);

#endif
