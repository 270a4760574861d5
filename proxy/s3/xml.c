/* SPDX-License-Identifier: Apache-2.0 */
/* S3 XML: the error table, response document building and escaping, and a minimal strict reader for request bodies. */
#include "s3/s3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * DESIGN
 * Builder: one growable malloc'd buffer per document; an allocation failure sets failed and turns
 * every later append into a no-op, so callers check once at the end (px_s3_send_xml does).
 *
 * Reader: request bodies are small (DeleteObjects, CompleteMultipartUpload,
 * CreateBucketConfiguration), so a recursive-descent reader over the whole buffer builds a tiny
 * tree. It implements only what those documents use and refuses everything else: no DTD (so no
 * entity expansion or external entities, the classic XML attack surface), bounded depth and
 * element count. Written here instead of linking libxml2: 300 lines we can fuzz are a smaller
 * risk than a general parser whose dangerous features must be switched off one by one.
 */

/* ---- the error table ---- */

typedef struct {
	const char *code;
	int status;
	const char *message;
} err_info_t;

static const err_info_t errors[PX_S3_ERR_COUNT] = {
	[PX_S3_OK] = {"OK", 200, "OK"},
	[PX_S3_ACCESS_DENIED] = {"AccessDenied", 403, "Access denied"},
	[PX_S3_AUTH_HEADER_MALFORMED] = {"AuthorizationHeaderMalformed", 400, "The Authorization header is malformed"},
	[PX_S3_AUTH_QUERY_ERROR] = {"AuthorizationQueryParametersError", 400,
				    "The presigned query parameters are malformed"},
	[PX_S3_BAD_DIGEST] = {"BadDigest", 400, "The Content-MD5 does not match the body received"},
	[PX_S3_BUCKET_EXISTS_OWNED] = {"BucketAlreadyOwnedByYou", 409, "The bucket exists and you own it"},
	[PX_S3_BUCKET_NOT_EMPTY] = {"BucketNotEmpty", 409, "The bucket is not empty"},
	[PX_S3_ENTITY_TOO_LARGE] = {"EntityTooLarge", 400, "The request body is larger than allowed"},
	[PX_S3_ENTITY_TOO_SMALL] = {"EntityTooSmall", 400, "A part is smaller than the minimum part size"},
	[PX_S3_INCOMPLETE_BODY] = {"IncompleteBody", 400, "The body is shorter than its declared length"},
	[PX_S3_INSUFFICIENT_STORAGE] = {"InsufficientStorage", 507, "Not enough free space to store the object"},
	[PX_S3_INTERNAL] = {"InternalError", 500, "Internal error; please retry"},
	[PX_S3_INVALID_ACCESS_KEY] = {"InvalidAccessKeyId", 403, "The access key id is not known"},
	[PX_S3_INVALID_ARGUMENT] = {"InvalidArgument", 400, "Invalid argument"},
	[PX_S3_INVALID_BUCKET_NAME] = {"InvalidBucketName", 400, "The bucket name is not valid"},
	[PX_S3_INVALID_DIGEST] = {"InvalidDigest", 400, "The Content-MD5 is not valid base64 of 16 bytes"},
	[PX_S3_INVALID_PART] = {"InvalidPart", 400, "A listed part was not uploaded or its ETag differs"},
	[PX_S3_INVALID_PART_ORDER] = {"InvalidPartOrder", 400, "The parts are not listed in ascending order"},
	[PX_S3_INVALID_RANGE] = {"InvalidRange", 416, "The requested range is not satisfiable"},
	[PX_S3_INVALID_PART_NUMBER] = {"InvalidPartNumber", 416, "The requested partnumber is not satisfiable"},
	[PX_S3_INVALID_REQUEST] = {"InvalidRequest", 400, "Invalid request"},
	[PX_S3_KEY_TOO_LONG] = {"KeyTooLongError", 400, "The key is too long"},
	[PX_S3_MALFORMED_XML] = {"MalformedXML", 400, "The XML body is not well-formed or not the expected document"},
	[PX_S3_METADATA_TOO_LARGE] = {"MetadataTooLarge", 400,
				      "The user metadata (x-amz-meta-*) exceeds the 2 KiB allowed"},
	[PX_S3_METHOD_NOT_ALLOWED] = {"MethodNotAllowed", 405, "The method is not allowed on this resource"},
	[PX_S3_MISSING_CONTENT_LENGTH] = {"MissingContentLength", 411, "Content-Length is required"},
	[PX_S3_NO_SUCH_BUCKET] = {"NoSuchBucket", 404, "The bucket does not exist"},
	[PX_S3_AMBIGUOUS_BUCKET] = {"InvalidBucketState", 409,
				    "Remote buckets of several providers have this name: the S3 API cannot tell which"},
	[PX_S3_NO_SUCH_KEY] = {"NoSuchKey", 404, "The key does not exist"},
	[PX_S3_NO_SUCH_UPLOAD] = {"NoSuchUpload", 404, "The multipart upload does not exist"},
	[PX_S3_NOT_IMPLEMENTED] = {"NotImplemented", 501, "This operation is not implemented"},
	[PX_S3_PRECONDITION_FAILED] = {"PreconditionFailed", 412, "A precondition does not hold"},
	[PX_S3_REQUEST_TIMEOUT] = {"RequestTimeout", 400, "The body stalled for too long"},
	[PX_S3_TIME_SKEWED] = {"RequestTimeTooSkewed", 403,
			       "The request time differs from the server time by more than 15 minutes"},
	[PX_S3_SERVICE_UNAVAILABLE] = {"ServiceUnavailable", 503, "The service is unavailable; please retry"},
	[PX_S3_SIGNATURE_MISMATCH] = {"SignatureDoesNotMatch", 403,
				      "The signature does not match the request; check the key and signing method"},
	[PX_S3_SHA256_MISMATCH] = {"XAmzContentSHA256Mismatch", 400,
				   "The x-amz-content-sha256 does not match the body received"},
	[PX_S3_CHECKSUM_MISMATCH] = {"BadDigest", 400,
				     "The x-amz-checksum-* value does not match the checksum of the body received"},
	[PX_S3_INVALID_CHECKSUM] = {"InvalidRequest", 400,
				    "The x-amz-checksum-* value is not the base64 of one digest of its algorithm"},
	[PX_S3_HEADER_TOO_LARGE] = {"RequestHeaderSectionTooLarge", 400, "The request head is larger than allowed"},
	[PX_S3_NO_SUCH_POLICY] = {"NoSuchBucketPolicy", 404, "The bucket has no policy"},
	[PX_S3_NO_SUCH_LIFECYCLE] = {"NoSuchLifecycleConfiguration", 404, "The bucket has no lifecycle configuration"},
	[PX_S3_NO_SUCH_CORS] = {"NoSuchCORSConfiguration", 404, "The bucket has no CORS configuration"},
	[PX_S3_NO_SUCH_TAG_SET] = {"NoSuchTagSet", 404, "The bucket has no tags"},
	[PX_S3_NO_SUCH_WEBSITE] = {"NoSuchWebsiteConfiguration", 404, "The bucket has no website configuration"},
	[PX_S3_NO_ENCRYPTION] = {"ServerSideEncryptionConfigurationNotFoundError", 404,
				 "The bucket has no encryption configuration"},
	[PX_S3_NO_OBJECT_LOCK] = {"ObjectLockConfigurationNotFoundError", 404,
				  "The bucket has no object lock configuration"},
	[PX_S3_NO_REPLICATION] = {"ReplicationConfigurationNotFoundError", 404,
				  "The bucket has no replication configuration"},
	[PX_S3_NO_OWNERSHIP_CONTROLS] = {"OwnershipControlsNotFoundError", 404, "The bucket has no ownership controls"},
	[PX_S3_NO_PUBLIC_ACCESS_BLOCK] = {"NoSuchPublicAccessBlockConfiguration", 404,
					  "The bucket has no public access block configuration"},
};

static const err_info_t *err_info(px_s3_err_t e)
{
	if ((int)e < 0 || e >= PX_S3_ERR_COUNT || errors[e].code == NULL)
		e = PX_S3_INTERNAL;
	return &errors[e];
}

const char *px_s3_err_code(px_s3_err_t e)
{
	return err_info(e)->code;
}

int px_s3_err_status(px_s3_err_t e)
{
	return err_info(e)->status;
}

const char *px_s3_err_message(px_s3_err_t e)
{
	return err_info(e)->message;
}

/* ---- building ---- */

void px_xml_init(px_xml_t *x)
{
	memset(x, 0, sizeof(*x));
	ft_strbuf_adds(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
}

void px_xml_free(px_xml_t *x)
{
	ft_strbuf_free(x);
}

void px_xml_open(px_xml_t *x, const char *tag)
{
	ft_strbuf_adds(x, "<");
	ft_strbuf_adds(x, tag);
	ft_strbuf_adds(x, ">");
}

void px_xml_open_ns(px_xml_t *x, const char *tag)
{
	ft_strbuf_adds(x, "<");
	ft_strbuf_adds(x, tag);
	ft_strbuf_adds(x, " xmlns=\"" PX_S3_XMLNS "\">");
}

void px_xml_close(px_xml_t *x, const char *tag)
{
	ft_strbuf_adds(x, "</");
	ft_strbuf_adds(x, tag);
	ft_strbuf_adds(x, ">");
}

void px_xml_text(px_xml_t *x, const char *text, size_t len)
{
	size_t run = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		const char *rep = NULL;
		char num[16];

		switch (c) {
		case '&':
			rep = "&amp;";
			break;
		case '<':
			rep = "&lt;";
			break;
		case '>':
			rep = "&gt;";
			break;
		case '"':
			rep = "&quot;";
			break;
		case '\'':
			rep = "&apos;";
			break;
		default:
			if (c < 0x20) { /* keeps \t \n \r intact through parsers' newline normalization */
				snprintf(num, sizeof(num), "&#%u;", c);
				rep = num;
			}
			break;
		}
		if (rep == NULL)
			continue;
		ft_strbuf_add(x, text + run, i - run);
		ft_strbuf_adds(x, rep);
		run = i + 1;
	}
	ft_strbuf_add(x, text + run, len - run);
}

void px_xml_elem_n(px_xml_t *x, const char *tag, const char *text, size_t len)
{
	px_xml_open(x, tag);
	px_xml_text(x, text, len);
	px_xml_close(x, tag);
}

void px_xml_elem(px_xml_t *x, const char *tag, const char *text)
{
	px_xml_elem_n(x, tag, text, strlen(text));
}

void px_xml_elemf(px_xml_t *x, const char *tag, const char *fmt, ...)
{
	char small[256];
	char *big = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		x->failed = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		px_xml_elem_n(x, tag, small, (size_t)n);
		return;
	}
	va_start(ap, fmt);
	n = vasprintf(&big, fmt, ap);
	va_end(ap);
	if (n < 0) {
		x->failed = true;
		return;
	}
	px_xml_elem_n(x, tag, big, (size_t)n);
	free(big);
}

void px_xml_error_doc(px_xml_t *x, px_s3_err_t e, const char *message, const char *resource, const char *request_id)
{
	px_xml_init(x);
	px_xml_open(x, "Error");
	px_xml_elem(x, "Code", px_s3_err_code(e));
	px_xml_elem(x, "Message", message != NULL && message[0] != '\0' ? message : px_s3_err_message(e));
	if (resource != NULL)
		px_xml_elem(x, "Resource", resource);
	px_xml_elem(x, "RequestId", request_id != NULL ? request_id : "");
	px_xml_close(x, "Error");
}

/* ---- reading ---- */

#define XML_MAX_DEPTH 64
#define XML_MAX_NODES 200000

struct px_xml_doc {
	px_xml_node_t *root;
	int nodes;
};

typedef struct {
	const char *p, *end;
	px_xml_doc_t *doc;
	const char *why;
} reader_t;

static bool at(const reader_t *rd, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(rd->end - rd->p) >= n && memcmp(rd->p, s, n) == 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void skip_space(reader_t *rd)
{
	while (rd->p < rd->end && is_space(*rd->p))
		rd->p++;
}

static int reject(reader_t *rd, const char *why)
{
	if (rd->why == NULL)
		rd->why = why;
	return -1;
}

/* Skips past the first occurrence of term; -1 when it never comes. */
static int skip_past(reader_t *rd, const char *term, const char *why)
{
	size_t n = strlen(term);

	while ((size_t)(rd->end - rd->p) >= n) {
		if (memcmp(rd->p, term, n) == 0) {
			rd->p += n;
			return 0;
		}
		rd->p++;
	}
	return reject(rd, why);
}

static bool name_char(unsigned char c)
{
	return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.' || c == ':';
}

/* Reads a name; *start and *len point into the input. */
static int read_name(reader_t *rd, const char **start, size_t *len)
{
	const char *s = rd->p;

	while (rd->p < rd->end && name_char((unsigned char)*rd->p))
		rd->p++;
	if (rd->p == s)
		return reject(rd, "expected an element name");
	*start = s;
	*len = (size_t)(rd->p - s);
	return 0;
}

/* Text of a node: appends n bytes. */
static int text_append(reader_t *rd, px_xml_node_t *node, const char *s, size_t n)
{
	if (n == 0)
		return 0;
	char *t = realloc(node->text, node->text_len + n + 1);
	if (t == NULL)
		return reject(rd, "out of memory");
	memcpy(t + node->text_len, s, n);
	node->text_len += n;
	t[node->text_len] = '\0';
	node->text = t;
	return 0;
}

/* UTF-8 of code point cp into out (4 bytes); returns the length, 0 for an invalid code point. */
static size_t utf8_encode(unsigned long cp, char *out)
{
	if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* At '&': decodes one reference into node's text. */
static int read_reference(reader_t *rd, px_xml_node_t *node)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {
		{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''},
	};
	char buf[4];

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (at(rd, named[i].name)) {
			rd->p += strlen(named[i].name);
			return node != NULL ? text_append(rd, node, &named[i].c, 1) : 0;
		}
	}
	if (!at(rd, "&#"))
		return reject(rd, "unknown entity reference");
	rd->p += 2;
	int base = 10;
	if (rd->p < rd->end && *rd->p == 'x') {
		base = 16;
		rd->p++;
	}
	unsigned long cp = 0;
	int digits = 0;
	while (rd->p < rd->end && *rd->p != ';') {
		char c = *rd->p;
		int d = c >= '0' && c <= '9'                 ? c - '0'
			: base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
			: base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
							     : -1;
		if (d < 0 || ++digits > 8)
			return reject(rd, "bad character reference");
		cp = cp * (unsigned long)base + (unsigned long)d;
		rd->p++;
	}
	if (rd->p >= rd->end || digits == 0)
		return reject(rd, "bad character reference");
	rd->p++;
	size_t n = utf8_encode(cp, buf);
	if (n == 0)
		return reject(rd, "bad character reference");
	return node != NULL ? text_append(rd, node, buf, n) : 0;
}

/* Skips the attributes up to '>' or "/>"; *empty set for "/>". */
static int read_attributes(reader_t *rd, bool *empty)
{
	for (;;) {
		skip_space(rd);
		if (at(rd, "/>")) {
			rd->p += 2;
			*empty = true;
			return 0;
		}
		if (at(rd, ">")) {
			rd->p++;
			*empty = false;
			return 0;
		}
		const char *n;
		size_t nlen;
		if (read_name(rd, &n, &nlen) != 0)
			return -1;
		skip_space(rd);
		if (!at(rd, "="))
			return reject(rd, "attribute without a value");
		rd->p++;
		skip_space(rd);
		if (rd->p >= rd->end || (*rd->p != '"' && *rd->p != '\''))
			return reject(rd, "attribute value not quoted");
		char quote = *rd->p++;
		while (rd->p < rd->end && *rd->p != quote) {
			if (*rd->p == '<')
				return reject(rd, "'<' in an attribute value");
			if (*rd->p == '&') {
				if (read_reference(rd, NULL) != 0)
					return -1;
				continue;
			}
			rd->p++;
		}
		if (rd->p >= rd->end)
			return reject(rd, "unterminated attribute value");
		rd->p++;
	}
}

static void node_free(px_xml_node_t *n)
{
	while (n != NULL) {
		px_xml_node_t *next = n->next;
		node_free(n->child);
		free((char *)n->name);
		free(n->text);
		free(n);
		n = next;
	}
}

static int read_element(reader_t *rd, px_xml_node_t **out, int depth);

/* Content of an element up to its end tag "</name>". */
static int read_content(reader_t *rd, px_xml_node_t *node, const char *qname, size_t qlen, int depth)
{
	px_xml_node_t **tail = &node->child;

	while (rd->p < rd->end) {
		if (at(rd, "</")) {
			rd->p += 2;
			const char *n;
			size_t nlen;
			if (read_name(rd, &n, &nlen) != 0)
				return -1;
			if (nlen != qlen || memcmp(n, qname, qlen) != 0)
				return reject(rd, "mismatched end tag");
			skip_space(rd);
			if (!at(rd, ">"))
				return reject(rd, "malformed end tag");
			rd->p++;
			return 0;
		}
		if (at(rd, "<!--")) {
			if (skip_past(rd, "-->", "unterminated comment") != 0)
				return -1;
			continue;
		}
		if (at(rd, "<![CDATA[")) {
			rd->p += 9;
			const char *s = rd->p;
			if (skip_past(rd, "]]>", "unterminated CDATA section") != 0)
				return -1;
			if (text_append(rd, node, s, (size_t)(rd->p - 3 - s)) != 0)
				return -1;
			continue;
		}
		if (at(rd, "<!") || at(rd, "<?"))
			return reject(rd, "markup declarations and processing instructions are not accepted");
		if (at(rd, "<")) {
			/* Linked before it is read: on failure the tree still owns (and frees) it. */
			if (read_element(rd, tail, depth + 1) != 0)
				return -1;
			tail = &(*tail)->next;
			continue;
		}
		if (*rd->p == '&') {
			if (read_reference(rd, node) != 0)
				return -1;
			continue;
		}
		const char *s = rd->p;
		while (rd->p < rd->end && *rd->p != '<' && *rd->p != '&') {
			if (*rd->p == '\0')
				return reject(rd, "NUL byte in the document");
			rd->p++;
		}
		if (text_append(rd, node, s, (size_t)(rd->p - s)) != 0)
			return -1;
	}
	return reject(rd, "unclosed element");
}

/* At '<' of a start tag: reads the element and its content. */
static int read_element(reader_t *rd, px_xml_node_t **out, int depth)
{
	const char *qname, *local;
	size_t qlen, llen;
	bool empty;
	px_xml_node_t *node;

	if (depth > XML_MAX_DEPTH)
		return reject(rd, "elements nested too deeply");
	if (++rd->doc->nodes > XML_MAX_NODES)
		return reject(rd, "too many elements");
	rd->p++;
	if (read_name(rd, &qname, &qlen) != 0)
		return -1;
	local = memchr(qname, ':', qlen);
	local = local != NULL ? local + 1 : qname;
	llen = qlen - (size_t)(local - qname);
	if (llen == 0)
		return reject(rd, "empty local name");
	node = calloc(1, sizeof(*node));
	char *name = node != NULL ? strndup(local, llen) : NULL;
	if (name == NULL) {
		free(node);
		return reject(rd, "out of memory");
	}
	node->name = name;
	*out = node; /* owned by the caller's tree from here on, also on failure */
	if (read_attributes(rd, &empty) != 0)
		return -1;
	if (empty)
		return 0;
	return read_content(rd, node, qname, qlen, depth);
}

/* Skips whitespace, comments and (before the root) the XML declaration. */
static int skip_misc(reader_t *rd, bool prolog)
{
	for (;;) {
		skip_space(rd);
		if (at(rd, "<!--")) {
			if (skip_past(rd, "-->", "unterminated comment") != 0)
				return -1;
		} else if (prolog && at(rd, "<?xml")) {
			if (skip_past(rd, "?>", "unterminated XML declaration") != 0)
				return -1;
			prolog = false;
		} else {
			return 0;
		}
	}
}

px_xml_doc_t *px_xml_parse(const char *buf, size_t len, const char **why)
{
	reader_t rd = {.p = buf, .end = buf + len};

	rd.doc = calloc(1, sizeof(*rd.doc));
	if (rd.doc == NULL) {
		*why = "out of memory";
		return NULL;
	}
	if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
		rd.p += 3; /* byte order mark */
	if (skip_misc(&rd, true) != 0)
		goto fail;
	if (!at(&rd, "<") || at(&rd, "<!") || at(&rd, "<?")) {
		reject(&rd, rd.p == rd.end ? "empty document" : "expected the root element");
		goto fail;
	}
	if (read_element(&rd, &rd.doc->root, 1) != 0)
		goto fail;
	if (skip_misc(&rd, false) != 0)
		goto fail;
	if (rd.p != rd.end) {
		reject(&rd, "content after the root element");
		goto fail;
	}
	return rd.doc;
fail:
	*why = rd.why != NULL ? rd.why : "malformed XML";
	px_xml_doc_free(rd.doc);
	return NULL;
}

const px_xml_node_t *px_xml_root(const px_xml_doc_t *d)
{
	return d != NULL ? d->root : NULL;
}

const px_xml_node_t *px_xml_child(const px_xml_node_t *n, const char *name)
{
	for (const px_xml_node_t *c = n != NULL ? n->child : NULL; c != NULL; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

void px_xml_doc_free(px_xml_doc_t *d)
{
	if (d == NULL)
		return;
	node_free(d->root);
	free(d);
}

/* Text of a node without surrounding whitespace; "" when empty or absent. */
static const char *trimmed(const px_xml_node_t *n, size_t *len)
{
	const char *s = n != NULL && n->text != NULL ? n->text : "";
	size_t l = n != NULL ? n->text_len : 0;

	while (l > 0 && is_space(*s)) {
		s++;
		l--;
	}
	while (l > 0 && is_space(s[l - 1]))
		l--;
	*len = l;
	return s;
}

/* ---- documents ---- */

#define DELETE_MAX_KEYS 1000

int px_s3_parse_delete(const char *body, size_t len, px_s3_delete_req_t *out, const char **why)
{
	const px_xml_node_t *root, *c;
	size_t n;

	memset(out, 0, sizeof(*out));
	out->doc = px_xml_parse(body, len, why);
	root = px_xml_root(out->doc);
	if (root == NULL)
		goto fail;
	if (strcmp(root->name, "Delete") != 0) {
		*why = "the root element must be Delete";
		goto fail;
	}
	const px_xml_node_t *quiet = px_xml_child(root, "Quiet");
	if (quiet != NULL) {
		const char *q = trimmed(quiet, &n);
		if (n == 4 && strncasecmp(q, "true", 4) == 0)
			out->quiet = true;
		else if (!(n == 5 && strncasecmp(q, "false", 5) == 0)) {
			*why = "Quiet must be true or false";
			goto fail;
		}
	}
	int count = 0;
	for (c = root->child; c != NULL; c = c->next)
		if (strcmp(c->name, "Object") == 0)
			count++;
	if (count == 0 || count > DELETE_MAX_KEYS) {
		*why = count == 0 ? "no Object to delete" : "more than 1000 objects in one request";
		goto fail;
	}
	out->keys = calloc((size_t)count, sizeof(*out->keys));
	out->key_lens = calloc((size_t)count, sizeof(*out->key_lens));
	if (out->keys == NULL || out->key_lens == NULL) {
		*why = "out of memory";
		goto fail;
	}
	for (c = root->child; c != NULL; c = c->next) {
		if (strcmp(c->name, "Object") != 0)
			continue;
		const px_xml_node_t *k = px_xml_child(c, "Key");
		if (k == NULL) {
			*why = "an Object without a Key";
			goto fail;
		}
		/* Keys keep their whitespace: it is part of the name. */
		out->keys[out->n] = k->text != NULL ? k->text : "";
		out->key_lens[out->n] = k->text_len;
		out->n++;
	}
	return 0;
fail:
	px_s3_delete_req_free(out);
	return -1;
}

void px_s3_delete_req_free(px_s3_delete_req_t *d)
{
	free(d->keys);
	free(d->key_lens);
	px_xml_doc_free(d->doc);
	memset(d, 0, sizeof(*d));
}

/* Whole-string decimal in 1..10000; -1 otherwise. */
static int part_number(const char *s, size_t n)
{
	int v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= PX_S3_MAX_PARTS ? v : -1;
}

/* The Checksum<ALG> child of a Part into out ("" without one); 0, or -1 when it is too long. */
static int part_checksum(const px_xml_node_t *part, char *out, size_t cap)
{
	static const char *const names[] = {"ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1",
					    "ChecksumSHA256"};

	out[0] = '\0';
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		size_t len;
		const char *v = trimmed(px_xml_child(part, names[k]), &len);
		if (v == NULL || len == 0)
			continue;
		if (len >= cap)
			return -1;
		memcpy(out, v, len);
		out[len] = '\0';
	}
	return 0;
}

int px_s3_parse_complete(const char *body, size_t len, px_s3_part_t **parts, int *n, const char **why)
{
	px_xml_doc_t *doc = px_xml_parse(body, len, why);
	const px_xml_node_t *root = px_xml_root(doc), *c;
	px_s3_part_t *v = NULL;
	int count = 0, i = 0;

	*parts = NULL;
	*n = 0;
	if (root == NULL)
		goto fail;
	if (strcmp(root->name, "CompleteMultipartUpload") != 0) {
		*why = "the root element must be CompleteMultipartUpload";
		goto fail;
	}
	for (c = root->child; c != NULL; c = c->next)
		if (strcmp(c->name, "Part") == 0)
			count++;
	if (count == 0 || count > PX_S3_MAX_PARTS) {
		*why = count == 0 ? "no Part listed" : "more than 10000 parts";
		goto fail;
	}
	v = calloc((size_t)count, sizeof(*v));
	if (v == NULL) {
		*why = "out of memory";
		goto fail;
	}
	for (c = root->child; c != NULL; c = c->next) {
		if (strcmp(c->name, "Part") != 0)
			continue;
		size_t nl, el;
		const char *num = trimmed(px_xml_child(c, "PartNumber"), &nl);
		const char *etag = trimmed(px_xml_child(c, "ETag"), &el);
		v[i].part = part_number(num, nl);
		if (v[i].part < 0) {
			*why = "a Part without a PartNumber in 1..10000";
			goto fail;
		}
		if (el >= 2 && etag[0] == '"' && etag[el - 1] == '"') {
			etag++;
			el -= 2;
		}
		if (el == 0 || el >= sizeof(v[i].etag)) {
			*why = "a Part without a valid ETag";
			goto fail;
		}
		memcpy(v[i].etag, etag, el);
		v[i].etag[el] = '\0';
		if (part_checksum(c, v[i].checksum, sizeof(v[i].checksum)) != 0) {
			*why = "a Part with a malformed checksum";
			goto fail;
		}
		i++;
	}
	px_xml_doc_free(doc);
	*parts = v;
	*n = count;
	return 0;
fail:
	free(v);
	px_xml_doc_free(doc);
	return -1;
}
