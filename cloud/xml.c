/* SPDX-License-Identifier: Apache-2.0 */
/* Tiny event XML reader for backend responses (S3 ListObjectsV2, Azure List Blobs, error documents). */
#include "cloud/internal.h"

#include <stdlib.h>
#include <string.h>

/*
 * DESIGN
 * Backend responses are small machine-written documents, so the reader walks the buffer once and
 * reports element starts and ends with their slash-joined path and character data. It refuses
 * what those documents never contain: DOCTYPE (so no entity declarations or expansion), more
 * than MAX_DEPTH levels, mismatched end tags. Attributes are skipped; namespace prefixes are
 * kept in names. Written here rather than shared with proxy/s3_xml.c, which belongs to the
 * proxy daemon and parses request bodies into a tree.
 */

#define MAX_DEPTH 16
#define MAX_PATH 512

typedef struct {
	const char *p, *end;
	char path[MAX_PATH];
	size_t path_len;
	size_t mark[MAX_DEPTH]; /* path length before each open element */
	int depth;
	ft_strbuf_t text; /* character data of the innermost open element */
	ft_be_xml_fn fn;
	void *ctx;
} xml_t;

static int starts(const xml_t *x, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

static int skip_past(xml_t *x, const char *term)
{
	size_t n = strlen(term);

	for (; x->end - x->p >= (ptrdiff_t)n; x->p++) {
		if (memcmp(x->p, term, n) == 0) {
			x->p += n;
			return 0;
		}
	}
	return -1;
}

static int name_char(unsigned char c)
{
	return c > ' ' && c != '/' && c != '>' && c != '=' && c != '<' && c != '"' && c != '\'';
}

static void utf8_put(ft_strbuf_t *b, unsigned long cp)
{
	char out[4];
	size_t n;

	if (cp < 0x80) {
		out[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		out[0] = (char)(0xF0 | (cp >> 18));
		out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	ft_strbuf_add(b, out, n);
}

/* Decodes one reference at x->p ('&' ... ';') into the text. */
static int reference(xml_t *x)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
	const char *semi = memchr(x->p, ';', (size_t)(x->end - x->p) < 12 ? (size_t)(x->end - x->p) : 12);

	if (semi == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (starts(x, named[i].name)) {
			ft_strbuf_add(&x->text, &named[i].c, 1);
			x->p = semi + 1;
			return 0;
		}
	}
	if (x->p[1] == '#') {
		char *end;
		unsigned long cp = x->p[2] == 'x' ? strtoul(x->p + 3, &end, 16) : strtoul(x->p + 2, &end, 10);

		if (end != semi || cp == 0 || cp > 0x10FFFF)
			return -1;
		utf8_put(&x->text, cp);
		x->p = semi + 1;
		return 0;
	}
	return -1;
}

/* Empties the character data: the next element's text starts from nothing, NUL-terminated. */
static void text_reset(xml_t *x)
{
	x->text.len = 0;
	if (x->text.p != NULL)
		x->text.p[0] = '\0';
}

static int open_element(xml_t *x, const char *name, size_t n)
{
	if (x->depth >= MAX_DEPTH || x->path_len + n + 2 > sizeof(x->path))
		return -1;
	x->mark[x->depth++] = x->path_len;
	if (x->path_len > 0)
		x->path[x->path_len++] = '/';
	memcpy(x->path + x->path_len, name, n);
	x->path_len += n;
	x->path[x->path_len] = '\0';
	text_reset(x);
	return x->fn(x->ctx, x->path, NULL, 0);
}

static int close_element(xml_t *x, const char *name, size_t n)
{
	size_t start;
	int rc;

	if (x->depth == 0)
		return -1;
	start = x->mark[x->depth - 1] + (x->depth > 1 ? 1 : 0);
	if (name != NULL && (x->path_len - start != n || memcmp(x->path + start, name, n) != 0))
		return -1;
	if (x->text.failed)
		return -1;
	rc = x->fn(x->ctx, x->path, x->text.p != NULL ? x->text.p : "", x->text.len);
	x->depth--;
	x->path_len = x->mark[x->depth];
	x->path[x->path_len] = '\0';
	text_reset(x);
	return rc;
}

/* At '<' of a start or end tag. */
static int tag(xml_t *x)
{
	int closing = 0, empty = 0, rc;
	const char *name;
	size_t n;

	x->p++;
	if (x->p < x->end && *x->p == '/') {
		closing = 1;
		x->p++;
	}
	name = x->p;
	while (x->p < x->end && name_char((unsigned char)*x->p))
		x->p++;
	n = (size_t)(x->p - name);
	if (n == 0)
		return -1;
	/* Attributes: skipped, quoted values may hold '>' or '/'. */
	while (x->p < x->end && *x->p != '>') {
		if (*x->p == '"' || *x->p == '\'') {
			const char *q = memchr(x->p + 1, *x->p, (size_t)(x->end - x->p - 1));

			if (q == NULL)
				return -1;
			x->p = q + 1;
			continue;
		}
		if (*x->p == '/' && x->p + 1 < x->end && x->p[1] == '>')
			empty = 1;
		x->p++;
	}
	if (x->p >= x->end)
		return -1;
	x->p++;
	if (closing)
		return close_element(x, name, n);
	rc = open_element(x, name, n);
	if (rc == 0 && empty)
		rc = close_element(x, NULL, 0);
	return rc;
}

/* Whitespace, or a UTF-8 byte order mark, may stand outside the root element. */
static int blank_or_bom(const char *s, size_t n)
{
	if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
		s += 3;
		n -= 3;
	}
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return 0;
	return 1;
}

int ft_be_xml_parse(const char *doc, size_t len, ft_be_xml_fn fn, void *ctx)
{
	xml_t x = {.p = doc, .end = doc + len, .fn = fn, .ctx = ctx};
	int rc = 0, seen_root = 0;

	if (memchr(doc, '\0', len) != NULL)
		return -1; /* no XML character: a name with one would be cut short, or empty, where it is copied */

	while (rc == 0 && x.p < x.end) {
		if (starts(&x, "<?")) {
			rc = skip_past(&x, "?>");
		} else if (starts(&x, "<!--")) {
			rc = skip_past(&x, "-->");
		} else if (starts(&x, "<![CDATA[")) {
			const char *s = x.p + 9;

			rc = skip_past(&x, "]]>");
			if (rc == 0)
				ft_strbuf_add(&x.text, s, (size_t)(x.p - 3 - s));
		} else if (starts(&x, "<!")) {
			rc = -1; /* DOCTYPE and other declarations */
		} else if (*x.p == '<') {
			if (x.depth == 0 && seen_root)
				rc = -1; /* a second root */
			seen_root = 1;
			rc = rc != 0 ? rc : tag(&x);
		} else if (*x.p == '&') {
			rc = x.depth > 0 ? reference(&x) : -1;
		} else {
			const char *s = x.p;

			while (x.p < x.end && *x.p != '<' && *x.p != '&')
				x.p++;
			if (x.depth > 0)
				ft_strbuf_add(&x.text, s, (size_t)(x.p - s));
			else if (!blank_or_bom(s, (size_t)(x.p - s)))
				rc = -1; /* text outside the root */
		}
	}
	if (rc == 0 && (x.depth != 0 || !seen_root))
		rc = -1;
	ft_strbuf_free(&x.text);
	return rc;
}

typedef struct {
	char *code, *message;
	size_t code_cap, message_cap;
} error_doc_t;

static void copy_text(char *out, size_t cap, const char *text, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(out, text, len);
	out[len] = '\0';
}

static int on_error_doc(void *ctx, const char *path, const char *text, size_t len)
{
	error_doc_t *d = ctx;

	if (text == NULL)
		return 0;
	if (strcmp(path, "Error/Code") == 0)
		copy_text(d->code, d->code_cap, text, len);
	else if (strcmp(path, "Error/Message") == 0)
		copy_text(d->message, d->message_cap, text, len);
	return 0;
}

void ft_be_xml_error(const char *doc, size_t len, char *code, size_t code_cap, char *message, size_t message_cap)
{
	error_doc_t d = {code, message, code_cap, message_cap};

	code[0] = '\0';
	message[0] = '\0';
	if (doc != NULL && len > 0)
		(void)ft_be_xml_parse(doc, len, on_error_doc, &d);
}

/* ---- name lists (the account listings) ---- */

typedef struct {
	const char *name_path, *token_path;
	ft_backend_page_t *page;
	int cap;
	int oom;
} names_doc_t;

static int on_names_doc(void *ctx, const char *path, const char *text, size_t len)
{
	names_doc_t *d = ctx;

	if (text == NULL)
		return 0;
	if (strcmp(path, d->name_path) == 0) {
		if (len == 0)
			return -1;
		if (ft_be_page_add(d->page, &d->cap, text, len) != 0) {
			d->oom = 1;
			return 1;
		}
	} else if (strcmp(path, d->token_path) == 0 && len > 0) {
		free(d->page->next_token);
		d->page->next_token = strndup(text, len);
		if (d->page->next_token == NULL) {
			d->oom = 1;
			return 1;
		}
	}
	return 0;
}

ft_backend_err_t ft_be_xml_names_parse(const char *doc, size_t len, const char *name_path, const char *token_path,
				       ft_backend_page_t *page)
{
	names_doc_t d = {.name_path = name_path, .token_path = token_path, .page = page};

	if (doc == NULL || ft_be_xml_parse(doc, len, on_names_doc, &d) != 0)
		return d.oom ? FT_BACKEND_ENOMEM : FT_BACKEND_EPROTO;
	return FT_BACKEND_OK;
}
