/* SPDX-License-Identifier: Apache-2.0 */
/* Write-through of PUT and DELETE to the backend of a remote bucket: what put.c and delete.c use. */
#ifndef TGT_WTHROUGH_H
#define TGT_WTHROUGH_H

#include "cloud/backend.h"
#include "core/lom.h"
#include "target.h"

/*
 * The caller holds o's name with TGT_HOLD_WRITE (core/namelock.h) from the backend request
 * through the local publish or removal, so the cached copy ends up as the backend's last write.
 */

/*
 * PUTs size bytes of the work file "<mp>/.work/<work>" to o's backend and returns once the backend
 * acknowledged them. md5: hex MD5 of the body (sent for the backend to check), ctype: Content-Type
 * or NULL. out gets what the backend stated (ETag, version, mtime). On failure err is filled and
 * the code returned (ft_backend_http_status gives the client's status). Unless the backend clearly
 * refused, a cold GET of o in flight is superseded (tgt_coldget_supersede) before it returns.
 */
ft_backend_err_t tgt_wthrough_put(const tgt_obj_t *o, const char *work, uint64_t size, const char *md5,
				  const char *ctype, ft_backend_meta_t *out, ft_backend_error_t *err);
/*
 * Deletes o on its backend. OK, FT_BACKEND_ENOTFOUND when the backend says it was not there, or the
 * error; as tgt_wthrough_put, supersedes a cold GET of o in flight unless the backend clearly refused.
 */
ft_backend_err_t tgt_wthrough_delete(const tgt_obj_t *o, ft_backend_error_t *err);

/*
 * The largest object o's backend takes in one PUT, which is how tgt_wthrough_put writes (S3 PutObject
 * 5 GiB, Azure Put Blob 5000 MiB, a GCS media upload 5 TiB); 0 for a provider that takes no writes.
 */
uint64_t tgt_wthrough_put_max(const tgt_obj_t *o);

/* Whether a write that ended with code may have reached the backend (OK, or no clear refusal came back). */
int tgt_wthrough_may_have_written(ft_backend_err_t code);

/* Puts what the backend stated about a new write (version, ETag, mtime) into lom, where they fit. */
void tgt_wthrough_lom_meta(ft_lom_t *lom, const ft_backend_meta_t *m);

/* Removes o's cached copy under its name lock, then its mirror copies and EC slices: 1 removed, 0 none, -errno. */
int tgt_wthrough_uncache(const tgt_obj_t *o);

#endif
