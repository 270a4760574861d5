/* SPDX-License-Identifier: Apache-2.0 */
/* Canned ACLs of objects: "private" or "public-read", kept as one line of the LOM's standard headers. */
#include "core/acl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth/auth.h"
#include "core/objmeta.h"

int tgt_acl_parse(const char *v, bool *public_read)
{
	if (v == NULL)
		return -1;
	if (strcmp(v, "private") == 0 || strcmp(v, "public-read") == 0) {
		*public_read = v[1] == 'u';
		return 0;
	}
	return -1;
}

bool tgt_acl_public(const ft_lom_t *lom)
{
	char v[16];

	return tgt_meta_hdr_get(lom, TGT_ACL_HEADER, v, sizeof(v)) == 0 && strcmp(v, "public-read") == 0;
}

/* Removes the ACL line from lom->hdrs. */
static void acl_remove(ft_lom_t *lom)
{
	size_t nlen = strlen(TGT_ACL_HEADER);

	for (char *p = lom->hdrs; *p;) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
		if (len > nlen && p[nlen] == ':' && strncasecmp(p, TGT_ACL_HEADER, nlen) == 0) {
			memmove(p, p + len, strlen(p + len) + 1);
			continue;
		}
		p += len;
	}
}

int tgt_acl_set(ft_lom_t *lom, bool public_read)
{
	char saved[FT_LOM_HDRS_MAX];

	memcpy(saved, lom->hdrs, sizeof(saved));
	acl_remove(lom);
	if (public_read && tgt_meta_hdr_add(lom, TGT_ACL_HEADER, "public-read") != 0) {
		memcpy(lom->hdrs, saved, sizeof(saved));
		return -1;
	}
	return 0;
}

int tgt_acl_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap)
{
	const char *v = ft_req_header(r, TGT_ACL_HEADER);
	bool pub = false;

	if (v == NULL)
		return 0;
	if (tgt_acl_parse(v, &pub) != 0) {
		snprintf(err, cap, "x-amz-acl \"%.40s\": only the canned ACLs private and public-read are supported",
			 v);
		return -1;
	}
	if (pub && !ft_auth()->public_read) {
		snprintf(err, cap,
			 "public-read is not allowed on this cluster: public access is off (config allow_public_read)");
		return -1;
	}
	if (tgt_acl_set(lom, pub) != 0) {
		snprintf(err, cap, "the standard headers leave no room for the ACL");
		return -1;
	}
	return 0;
}
