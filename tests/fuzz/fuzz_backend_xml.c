/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the backends' XML: cloud/xml.c's reader, error documents, S3 and Azure listing results. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/internal.h"

/*
 * The same bytes go to every reader. The event reader's callback checks what it is handed (a
 * NUL-terminated path below the reader's limit, text NUL-terminated at its length, every end
 * matching the start before it) and stops the walk at an event the input's first byte chooses, so
 * the early exit frees what it holds too. The error reader must always leave two NUL-terminated
 * strings within their caps; the listing parsers must leave a page that frees cleanly, and every
 * entry of an accepted page has a name.
 */

#define PATH_MAX_LEN 512 /* cloud/xml.c MAX_PATH */
#define DEPTH_MAX 16     /* cloud/xml.c MAX_DEPTH */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
	size_t open[DEPTH_MAX + 1]; /* path length at each open element */
	int depth;
	unsigned events, stop_at;
} walk_t;

static int on_event(void *ctx, const char *path, const char *text, size_t len)
{
	walk_t *w = ctx;
	size_t n = strlen(path);

	if (n == 0 || n >= PATH_MAX_LEN)
		abort();
	if (text == NULL) {
		if (w->depth >= DEPTH_MAX)
			abort();
		if (w->depth > 0 && (n <= w->open[w->depth - 1] || path[w->open[w->depth - 1]] != '/'))
			abort(); /* a child's path extends its parent's */
		w->open[w->depth++] = n;
	} else {
		if (w->depth == 0 || w->open[w->depth - 1] != n || text[len] != '\0')
			abort();
		w->depth--;
	}
	return ++w->events == w->stop_at ? 1 : 0;
}

static void check_error_doc(const char *doc, size_t len, size_t cap)
{
	char code[64], message[64];

	memset(code, 'x', sizeof(code));
	memset(message, 'x', sizeof(message));
	ft_be_xml_error(doc, len, code, cap, message, cap);
	if (strnlen(code, cap) >= cap || strnlen(message, cap) >= cap)
		abort();
}

static void check_page(ft_backend_err_t rc, ft_backend_page_t *page)
{
	if (rc != FT_BACKEND_OK && rc != FT_BACKEND_EPROTO && rc != FT_BACKEND_ENOMEM)
		abort();
	if (page->n < 0 || (page->n > 0 && page->entries == NULL))
		abort();
	for (int i = 0; i < page->n; i++) {
		if (page->entries[i].name == NULL)
			abort();
		if (rc == FT_BACKEND_OK && page->entries[i].name[0] == '\0')
			abort();
		if (strnlen(page->entries[i].etag, sizeof(page->entries[i].etag)) >= sizeof(page->entries[i].etag))
			abort();
		if (page->entries[i].dir && page->entries[i].size != -1) /* a common prefix has no size */
			abort();
	}
	ft_backend_page_free(page);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *doc = (const char *)data;
	walk_t w = {.stop_at = size > 0 ? data[0] % 32 : 0};
	ft_backend_page_t page;
	int truncated = 0;
	int rc;

	/* The reader sees the bytes without a NUL after them (heap copy of exactly size bytes). */
	char *copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, doc, size);
	doc = copy;

	rc = ft_be_xml_parse(doc, size, on_event, &w);
	if (rc == 0 && w.depth != 0)
		abort(); /* a complete walk closes every element */
	if (rc != 0 && rc != -1 && rc != 1)
		abort();
	if (rc == 1 && w.events != w.stop_at)
		abort();

	check_error_doc(doc, size, 64);
	check_error_doc(doc, size, 8);
	check_error_doc(doc, size, 1);

	memset(&page, 0, sizeof(page));
	check_page(ft_be_aws_list_parse(doc, size, &page, &truncated), &page);
	memset(&page, 0, sizeof(page));
	check_page(ft_be_azure_list_parse(doc, size, &page), &page);

	free(copy);
	return 0;
}
