/* SPDX-License-Identifier: Apache-2.0 */
/* Conditional requests on the target: ETag lists (If-Match, If-None-Match) and the preconditions of a write. */
#ifndef TGT_CORE_COND_H
#define TGT_CORE_COND_H

#include <stdbool.h>

#include "core/lom.h"
#include "core/obj.h"

/* The ETag of a stored object: the S3 one (MD5) when kept, else the checksum. */
const char *tgt_lom_etag(const ft_lom_t *lom);
/*
 * Whether the If-Match / If-None-Match list hdr names tag: "*" matches any object; W/ tags match
 * only with weak comparison (If-None-Match); a malformed list matches nothing.
 */
bool tgt_etag_listed(const char *hdr, const char *tag, bool weak);

typedef enum {
	TGT_COND_OK = 0,
	TGT_COND_FAILED, /* 412: If-None-Match: * and the object exists, or If-Match names another ETag */
	TGT_COND_ABSENT, /* 404: If-Match and no object */
} tgt_cond_t;

/*
 * The preconditions of a write of o (either header may be NULL: no condition), against the
 * version stored at o's path now. The caller holds the name lock through the publish, so that
 * no other write of the name comes between the check and the rename: of two racing conditional
 * creates exactly one succeeds. An unreadable stored object counts as present with no ETag.
 */
tgt_cond_t tgt_write_precondition(const tgt_obj_t *o, const char *if_match, const char *if_none_match);

#endif
