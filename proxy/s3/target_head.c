/* SPDX-License-Identifier: Apache-2.0 */
/* A target's answer as the S3 object relays read it: response heads, error bodies, forwarded request headers. */
#include "s3/object.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/names.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/* Appends "Name: value" to a curl header list when the request has the header (under from). */
struct curl_slist *px_s3_forward_header(struct curl_slist *l, ft_req_t *r, const char *from, const char *to)
{
	const char *v = ft_req_header(r, from);
	char *line = NULL;

	if (v == NULL || asprintf(&line, "%s: %s", to, v) < 0)
		return l;
	struct curl_slist *n = curl_slist_append(l, line);
	free(line);
	return n != NULL ? n : l;
}

void px_s3_keep_errbody(char *dst, size_t *len, const char *buf, size_t n)
{
	size_t take = n < PX_S3_ERRBODY_MAX - *len ? n : PX_S3_ERRBODY_MAX - *len;

	memcpy(dst + *len, buf, take);
	*len += take;
	dst[*len] = '\0';
}

/* The "message" and "code" of a target's JSON error body, into reply. */
void px_s3_error_reply(const char *body, size_t len, px_s3_target_reply_t *reply)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));
	const char *code = json_string_value(json_object_get(j, "code"));

	snprintf(reply->message, sizeof(reply->message), "%s", m != NULL ? m : "");
	snprintf(reply->code, sizeof(reply->code), "%s", code != NULL ? code : "");
	json_decref(j);
}

/* Copies the value of h into out (cap bytes; cut to fit, NUL-terminated). */
static void header_copy(char *out, size_t cap, const ft_hp_header_t *h)
{
	size_t len = h->value_len < cap ? h->value_len : cap - 1;

	memcpy(out, h->value, len);
	out[len] = '\0';
}

/* Appends the x-amz-meta-* header h to t->meta as the line "name: value\n". */
static void meta_add(px_s3_target_head_t *t, const ft_hp_header_t *h)
{
	size_t len = h->name_len + 2 + h->value_len;

	if (len + 1 >= sizeof(t->meta) - t->meta_len) {
		t->meta_cut = true;
		return;
	}
	memcpy(t->meta + t->meta_len, h->name, h->name_len);
	memcpy(t->meta + t->meta_len + h->name_len, ": ", 2);
	memcpy(t->meta + t->meta_len + h->name_len + 2, h->value, h->value_len);
	t->meta_len += len;
	t->meta[t->meta_len++] = '\n';
	t->meta[t->meta_len] = '\0';
}

/* Whether h is one of the headers an object keeps that the S3 answer relays as they come. */
static bool kept_header(const ft_hp_header_t *h)
{
	static const char *const std[] = {"cache-control",    "content-disposition",
					  "content-encoding", "content-language",
					  "expires",          "x-amz-mp-parts-count"};

	if (h->name_len > PX_S3_UMETA_PREFIX_LEN && strncasecmp(h->name, "x-amz-meta-", PX_S3_UMETA_PREFIX_LEN) == 0)
		return true;
	if (h->name_len > PX_S3_CK_PREFIX_LEN && strncasecmp(h->name, "x-amz-checksum-", PX_S3_CK_PREFIX_LEN) == 0)
		return true;
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (ft_hp_token_eq(h->name, h->name_len, std[i]))
			return true;
	return false;
}

/* Replaces t with what GET, HEAD and the copy's source use of a target's parsed response head. */
void px_s3_target_head_fill(px_s3_target_head_t *t, const ft_hp_resp_head_t *h, const ft_hp_header_t *hdrs)
{
	memset(t, 0, sizeof(*t));
	t->status = h->status;
	t->length = h->content_length;
	for (size_t i = 0; i < h->nheaders; i++) {
		const ft_hp_header_t *x = &hdrs[i];

		if (ft_hp_token_eq(x->name, x->name_len, "etag"))
			header_copy(t->etag, sizeof(t->etag), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "last-modified"))
			header_copy(t->last_modified, sizeof(t->last_modified), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "content-range"))
			header_copy(t->content_range, sizeof(t->content_range), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "content-type"))
			header_copy(t->content_type, sizeof(t->content_type), x);
		else if (kept_header(x))
			meta_add(t, x);
	}
	/* interim (1xx) and redirect heads are followed by another */
	t->headers_done = t->status >= 200 && !(t->status >= 300 && t->status < 400);
}

/*
 * Header-callback work shared by GET and the copy's source: gathers the lines of a head in l and,
 * at its empty line, parses it into t (a head that does not parse leaves t with status 0). Returns
 * true at the end of a final head; lines after it (trailers) are ignored.
 */
bool px_s3_target_head_line(px_s3_target_head_t *t, px_s3_head_lines_t *l, const char *buf, size_t n)
{
	ft_hp_header_t hdrs[PX_S3_TARGET_HEADERS_MAX];
	ft_hp_resp_head_t h;

	if (t->headers_done)
		return false;
	if (n > sizeof(l->buf) - l->len) {
		l->overflow = true;
	} else {
		memcpy(l->buf + l->len, buf, n);
		l->len += n;
	}
	if (n == 0 || n > 2 || (buf[0] != '\r' && buf[0] != '\n'))
		return false; /* not the empty line yet */
	if (!l->overflow &&
	    ft_hp_parse_resp_head(l->buf, l->len, sizeof(l->buf), hdrs, PX_S3_TARGET_HEADERS_MAX, &h) == FT_HP_DONE) {
		px_s3_target_head_fill(t, &h, hdrs);
	} else {
		ft_warn("s3: unreadable response head from a target");
		memset(t, 0, sizeof(*t));
		t->length = -1;
	}
	l->len = 0;
	l->overflow = false;
	return t->headers_done;
}
