/* SPDX-License-Identifier: Apache-2.0 */
/* Canned ACLs of objects: parsing "private"/"public-read" and keeping an object's ACL in its LOM. */
#ifndef TGT_CORE_ACL_H
#define TGT_CORE_ACL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/lom.h"
#include "http/http.h"

/*
 * DESIGN
 * An object's ACL is one line of its LOM's standard headers, "x-amz-acl:public-read", present only
 * for a public object: private is the absence, so every object stored before ACLs existed, and
 * every new version written without x-amz-acl, is private. GET/HEAD send the line back as the
 * x-amz-acl header (the native API's way to read an object's ACL).
 */

#define TGT_ACL_HEADER "x-amz-acl"

/* Parses a canned ACL: "private" (*public_read false) or "public-read" (true). 0, or -1. */
int tgt_acl_parse(const char *v, bool *public_read);
/* Whether lom's own ACL is public-read. */
bool tgt_acl_public(const ft_lom_t *lom);
/* Sets lom's ACL (replacing any). 0, or -1 when lom->hdrs has no room (lom unchanged). */
int tgt_acl_set(ft_lom_t *lom, bool public_read);
/*
 * The x-amz-acl header of r (if any) into lom->hdrs. 0; -1 with err for another value, or for
 * public-read when the cluster does not allow public data (allow_public_read).
 */
int tgt_acl_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap);

#endif
