/* SPDX-License-Identifier: Apache-2.0 */
/* Object metadata given at PUT (Content-Type, x-amz-meta-*, standard headers, S3 checksum): taken from the request, kept in the LOM, sent back on GET/HEAD. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/objmeta.h"

#include "core/acl.h"

#define UMETA_PREFIX "x-amz-meta-"

/* The standard headers S3 keeps with an object (lowercase, as stored). */
static const char *const std_headers[] = {"cache-control", "content-disposition", "content-encoding",
					  "content-language", "expires"};

/* A header value fit to store and send back: printable, no CR/LF. */
static int value_ok(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 && *p != '\t')
			return 0;
	return 1;
}

int tgt_meta_hdr_add(ft_lom_t *lom, const char *name, const char *value)
{
	size_t used = strlen(lom->hdrs);
	int n = snprintf(lom->hdrs + used, sizeof(lom->hdrs) - used, "%s:%s\n", name, value);

	if (n < 0 || (size_t)n >= sizeof(lom->hdrs) - used) {
		lom->hdrs[used] = '\0';
		return -1;
	}
	for (char *c = lom->hdrs + used; *c != ':'; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	return 0;
}

int tgt_meta_hdr_get(const ft_lom_t *lom, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name);

	for (const char *p = lom->hdrs; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
			size_t vlen = len - nlen - 1;
			if (vlen >= cap)
				return -1;
			memcpy(out, p + nlen + 1, vlen);
			out[vlen] = '\0';
			return 0;
		}
		p += len + (nl != NULL);
	}
	return -1;
}

/* The standard headers of r into lom->hdrs (emptied first). 0, or -1 with err. */
static int std_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap)
{
	lom->hdrs[0] = '\0';
	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++) {
		const char *v = ft_req_header(r, std_headers[i]);
		if (v == NULL || *v == '\0')
			continue;
		if (!value_ok(v)) {
			snprintf(err, cap, "header \"%s\" must be printable", std_headers[i]);
			return -1;
		}
		if (tgt_meta_hdr_add(lom, std_headers[i], v) != 0) {
			snprintf(err, cap,
				 "the standard headers (Cache-Control, Expires, ...) are larger than %zu bytes",
				 sizeof(lom->hdrs) - 200);
			return -1;
		}
	}
	if (strlen(lom->hdrs) > sizeof(lom->hdrs) - 200) { /* room for the checksum lines */
		snprintf(err, cap, "the standard headers (Cache-Control, Expires, ...) are larger than %zu bytes",
			 sizeof(lom->hdrs) - 200);
		return -1;
	}
	return tgt_acl_from_req(r, lom, err, cap); /* x-amz-acl: kept with the standard headers (core/acl.h) */
}

int tgt_meta_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap)
{
	const char *ct = ft_req_header(r, "Content-Type");
	size_t used = 0, plen = strlen(UMETA_PREFIX);

	lom->content_type[0] = lom->user_meta[0] = '\0';
	if (std_from_req(r, lom, err, cap) != 0)
		return -1;
	if (ct != NULL && *ct) {
		if (strlen(ct) >= sizeof(lom->content_type) || !value_ok(ct)) {
			snprintf(err, cap, "Content-Type must be printable and shorter than %zu bytes",
				 sizeof(lom->content_type));
			return -1;
		}
		strcpy(lom->content_type, ct);
	}
	for (int i = 0; i < ft_req_header_count(r); i++) {
		const char *name, *value;
		ft_req_header_at(r, i, &name, &value);
		if (strncasecmp(name, UMETA_PREFIX, plen) != 0)
			continue;
		if (name[plen] == '\0' || !value_ok(value)) {
			snprintf(err, cap, "header \"%s\": user metadata needs a name and a printable value", name);
			return -1;
		}
		int n = snprintf(lom->user_meta + used, sizeof(lom->user_meta) - used, "%s:%s\n", name, value);
		if (n < 0 || (size_t)n >= sizeof(lom->user_meta) - used) {
			lom->user_meta[used] = '\0';
			snprintf(err, cap, "user metadata (x-amz-meta-*) is larger than %zu bytes",
				 sizeof(lom->user_meta) - 1);
			return -1;
		}
		for (char *c = lom->user_meta + used; *c != ':'; c++) /* names lowercase */
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		used += (size_t)n;
	}
	return 0;
}

/* Sends each "name:value" line of lines as a response header. */
static void lines_headers(ft_req_t *r, const char *lines)
{
	char line[FT_LOM_UMETA_MAX];

	for (const char *p = lines; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		memcpy(line, p, len);
		line[len] = '\0';
		char *colon = strchr(line, ':');
		if (colon != NULL) {
			*colon = '\0';
			ft_resp_header(r, line, colon + 1);
		}
		p += len + (nl != NULL);
	}
}

void tgt_meta_headers(ft_req_t *r, const ft_lom_t *lom)
{
	lines_headers(r, lom->user_meta);
	lines_headers(r, lom->hdrs);
}

const char *tgt_meta_ctype(const ft_lom_t *lom)
{
	return lom->content_type[0] ? lom->content_type : TGT_CONTENT_TYPE;
}

int tgt_parts_range(const ft_lom_t *lom, long n, uint64_t *off, uint64_t *len, int *count)
{
	const char *p = lom->parts;
	uint64_t at = 0;
	long seen = 0;
	bool found = false;

	if (p[0] == '\0') { /* stored whole: one part */
		*count = 1;
		*off = 0;
		*len = lom->size;
		return n == 1 ? 0 : -ERANGE;
	}
	if (p[0] == '#') {
		*count = atoi(p + 1);
		return -ENODATA;
	}
	while (*p) {
		char *end;
		unsigned long long size = strtoull(p, &end, 10);
		if (*end != '*')
			return -ENODATA;
		long k = strtol(end + 1, &end, 10);
		if (k <= 0 || (*end != ',' && *end != '\0'))
			return -ENODATA;
		if (!found && n > seen && n <= seen + k) {
			*off = at + (uint64_t)(n - seen - 1) * size;
			*len = size;
			found = true;
		}
		at += (uint64_t)k * size;
		seen += k;
		p = *end == ',' ? end + 1 : end;
	}
	*count = (int)seen;
	return found ? 0 : -ERANGE;
}
