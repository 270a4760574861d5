/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader GetBatch (-get-batchsize): the POST /v1/batch body, the target it goes to, and the check of the TAR answer. */
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "tarwalk.h"

/*
 * DESIGN
 * A worker in batch mode owns one ld_batch_t, allocated when the engine starts: the items of its
 * batch in flight (pointers into the object list), the JSON body (grown when a batch needs more,
 * then reused: no allocation per request once it fits), a vote counter per target for -direct, and
 * a TAR walker (tarwalk.c) that checks the answer as it arrives. The request is AIStore's
 * GetBatch as FastTier serves it (docs/shards.md, target/shard/batch.c):
 *   {"in":[{"bucket":B,"provider":P,"objname":NAME},...],"format":".tar"}
 * answered 200 with a chunked TAR stream, one member "<bucket>/<objname>" per item in the order
 * asked. A missing item is a 404 before the stream starts, or a stream cut short after it: either
 * way the batch fails (no continue_on_error, so no "__404__/" members).
 */

#define BODY_START (64 * 1024)
#define TEXT_MAX 240 /* bytes of an error answer kept for the message */

struct ld_batch {
	const ld_opts_t *o;
	size_t max;            /* -get-batchsize */
	const ld_obj_t **objs; /* the items of the batch in flight, in order */
	size_t n;
	char *body;
	size_t body_len, body_cap;
	char item_head[1700]; /* {"bucket":"<B>","provider":"<P>","objname":" (B of 255 bytes escaped) */
	size_t item_head_len;
	size_t bucket_len;
	uint32_t *votes; /* -direct: items per target of the batch being built */
	int ntargets;
	ld_tarwalk_t tar;
	bool bad;
	char text[TEXT_MAX + 1];
	size_t text_len;
	char why[300];
	char label[300];
	char name[LD_NAME_MAX + 1]; /* a generated name */
};

/*
 * s[0..n) as the inside of a JSON string, at out (room for 6 * n bytes): '"', '\' and control
 * characters escaped, every other byte as it is (names are UTF-8). Returns the bytes written.
 */
static size_t json_escape(char *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			out[k++] = '\\';
			out[k++] = (char)c;
		} else if (c < 0x20) {
			memcpy(out + k, "\\u00", 4);
			out[k + 4] = hex[c >> 4];
			out[k + 5] = hex[c & 15];
			k += 6;
		} else {
			out[k++] = (char)c;
		}
	}
	return k;
}

ld_batch_t *ld_batch_new(const ld_opts_t *o)
{
	ld_batch_t *b = calloc(1, sizeof(*b));
	char *h;
	size_t k;

	if (b == NULL)
		return NULL;
	b->o = o;
	b->max = o->get_batchsize > 0 ? (size_t)o->get_batchsize : 1;
	b->bucket_len = strlen(o->bucket);
	b->ntargets = ld_route_targets();
	b->objs = calloc(b->max, sizeof(*b->objs));
	b->body_cap = BODY_START;
	b->body = malloc(b->body_cap);
	b->votes = calloc(b->ntargets > 0 ? (size_t)b->ntargets : 1, sizeof(*b->votes));
	if (b->objs == NULL || b->body == NULL || b->votes == NULL) {
		ld_batch_free(b);
		return NULL;
	}
	/* the bucket and provider are the same in every item: escaped once */
	h = b->item_head;
	memcpy(h, "{\"bucket\":\"", 11);
	k = 11 + json_escape(h + 11, o->bucket, strnlen(o->bucket, sizeof(o->bucket) - 1));
	memcpy(h + k, "\",\"provider\":\"", 14);
	k += 14;
	k += json_escape(h + k, o->provider, strnlen(o->provider, sizeof(o->provider) - 1));
	memcpy(h + k, "\",\"objname\":\"", 13);
	b->item_head_len = k + 13;
	ld_tarwalk_init(&b->tar);
	return b;
}

void ld_batch_free(ld_batch_t *b)
{
	if (b == NULL)
		return;
	free(b->objs);
	free(b->body);
	free(b->votes);
	free(b);
}

/* The name of item object obj (the list's own string, or a generated one formatted into b->name). */
static const char *name_of(ld_batch_t *b, const ld_obj_t *obj, size_t *len)
{
	if (obj->name != NULL) {
		*len = strlen(obj->name);
		return obj->name;
	}
	*len = ld_obj_name(obj, b->name, sizeof(b->name));
	return b->name;
}

/* Room for more bytes at the end of the body (grown by doubling). 0, or -1 when out of memory. */
static int reserve(ld_batch_t *b, size_t more)
{
	size_t cap = b->body_cap;
	char *p;

	if (cap - b->body_len >= more)
		return 0;
	while (cap - b->body_len < more)
		cap *= 2;
	if ((p = realloc(b->body, cap)) == NULL)
		return -1;
	b->body = p;
	b->body_cap = cap;
	return 0;
}

static void append(ld_batch_t *b, const char *s, size_t n)
{
	memcpy(b->body + b->body_len, s, n);
	b->body_len += n;
}

int ld_batch_next(ld_batch_t *b, ld_job_t *j, int64_t now_ns, uint64_t *rng, int *host, char *err, size_t errlen)
{
	static const char tail[] = "],\"format\":\".tar\"}";
	int best = -1;

	b->n = ld_job_next_gets(j, now_ns, rng, b->objs, b->max);
	if (b->n == 0)
		return 0;
	b->body_len = 0;
	b->label[0] = '\0';
	if (reserve(b, 8) != 0)
		goto fail;
	append(b, "{\"in\":[", 7);
	for (size_t i = 0; i < b->n; i++) {
		size_t len;
		const char *name = name_of(b, b->objs[i], &len);
		if (reserve(b, 1 + b->item_head_len + 6 * len + 2 + sizeof(tail)) != 0)
			goto fail;
		if (i > 0)
			append(b, ",", 1);
		append(b, b->item_head, b->item_head_len);
		b->body_len += json_escape(b->body + b->body_len, name, len);
		append(b, "\"}", 2);
		/* -direct: the target owning most items assembles the batch (the first item's owner on a
		 * tie), as the proxy plans it (proxy/batch.c) */
		int t = ld_route_owner(b->o, name, len);
		if (t >= 0) {
			b->votes[t]++;
			if (best < 0 || b->votes[t] > b->votes[best])
				best = t;
		}
	}
	append(b, tail, sizeof(tail) - 1);
	if (best >= 0)
		memset(b->votes, 0, (size_t)b->ntargets * sizeof(*b->votes));
	*host = ld_route_host_of(best);
	return (int)b->n;
fail:
	if (b->ntargets > 0)
		memset(b->votes, 0, (size_t)b->ntargets * sizeof(*b->votes));
	snprintf(err, errlen, "out of memory for the request body of %zu items", b->n);
	return -1;
}

const char *ld_batch_body(const ld_batch_t *b, size_t *len)
{
	*len = b->body_len;
	return b->body;
}

const char *ld_batch_label(ld_batch_t *b)
{
	if (b->label[0] == '\0' && b->n > 0) {
		size_t len;
		const char *first = name_of(b, b->objs[0], &len);
		snprintf(b->label, sizeof(b->label), "[%zu item%s from \"%.*s\"]", b->n, b->n == 1 ? "" : "s",
			 (int)(len > 200 ? 200 : len), first);
	}
	return b->label;
}

void ld_batch_answer_reset(ld_batch_t *b)
{
	ld_tarwalk_init(&b->tar);
	b->bad = false;
	b->text_len = 0;
	b->text[0] = '\0';
}

/* A member of the answer: the next item asked, named "<bucket>/<objname>", a regular file. */
static int check_member(void *ctx, const ld_tar_member_t *m, char *err, size_t errlen)
{
	ld_batch_t *b = ctx;
	size_t len, bl = b->bucket_len;
	const char *name;

	if (m->index >= b->n) {
		snprintf(err, errlen, "more members than the %zu items asked (member %llu \"%.100s\")", b->n,
			 (unsigned long long)m->index, m->name);
		return -1;
	}
	name = name_of(b, b->objs[m->index], &len);
	if (m->name_len != bl + 1 + len || memcmp(m->name, b->o->bucket, bl) != 0 || m->name[bl] != '/' ||
	    memcmp(m->name + bl + 1, name, len) != 0) {
		snprintf(err, errlen, "member %llu is \"%.70s\" where item %llu \"%s/%.70s\" belongs",
			 (unsigned long long)m->index, m->name, (unsigned long long)m->index, b->o->bucket, name);
		return -1;
	}
	if (m->type != '0' && m->type != '\0') {
		snprintf(err, errlen, "member %llu \"%.100s\" is not a regular file (type '%c')",
			 (unsigned long long)m->index, m->name, m->type);
		return -1;
	}
	return 0;
}

void ld_batch_answer_feed(ld_batch_t *b, int status, const char *p, size_t n)
{
	if (status == 200) {
		if (!b->bad && ld_tarwalk_feed(&b->tar, p, n, check_member, b) != 0)
			b->bad = true;
		return;
	}
	if (status >= 300 && status < 400)
		return; /* a redirect's body: nothing to say */
	size_t k = TEXT_MAX - b->text_len < n ? TEXT_MAX - b->text_len : n;
	memcpy(b->text + b->text_len, p, k);
	b->text_len += k;
	b->text[b->text_len] = '\0';
}

const char *ld_batch_answer_error(const ld_batch_t *b)
{
	return b->bad ? b->tar.err : NULL;
}

const char *ld_batch_answer_end(ld_batch_t *b)
{
	if (b->bad || ld_tarwalk_end(&b->tar) != 0) {
		b->bad = true;
		return b->tar.err;
	}
	if (b->tar.members != b->n) {
		snprintf(b->why, sizeof(b->why), "the TAR answer holds %llu members for %zu items asked",
			 (unsigned long long)b->tar.members, b->n);
		return b->why;
	}
	return NULL;
}

const char *ld_batch_answer_text(ld_batch_t *b)
{
	while (b->text_len > 0 && (b->text[b->text_len - 1] == '\n' || b->text[b->text_len - 1] == '\r'))
		b->text[--b->text_len] = '\0';
	return b->text;
}

uint64_t ld_batch_members(const ld_batch_t *b)
{
	return b->tar.members;
}
