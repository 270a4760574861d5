/* SPDX-License-Identifier: Apache-2.0 */
/* Content-Type and x-amz-meta-* given at PUT, kept in the LOM and served back. */
#ifndef TGT_CORE_OBJMETA_H
#define TGT_CORE_OBJMETA_H

#include "core/lom.h"
#include "http/http.h"

#define TGT_CONTENT_TYPE "application/octet-stream" /* served when no Content-Type was stored */

/*
 * Fills lom->content_type, lom->user_meta and lom->hdrs (Cache-Control, Content-Disposition,
 * Content-Encoding, Content-Language, Expires) from r's headers. 0, or -1 with err (the PUT answers 400).
 */
int tgt_meta_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap);
/* Appends "name:value" (name lowercased) to lom->hdrs. 0, or -1 when it does not fit (nothing added). */
int tgt_meta_hdr_add(ft_lom_t *lom, const char *name, const char *value);
/* The value of name in lom->hdrs into out. 0, or -1 when absent or longer than cap. */
int tgt_meta_hdr_get(const ft_lom_t *lom, const char *name, char *out, size_t cap);
/*
 * Part n (1-based) of lom's multipart layout (lom->parts: "<size>*<count>" runs joined by ',';
 * "#<count>" when the layout was too long to keep; "" for an object stored whole, which is its
 * one part). Sets *off, *len and *count (the number of parts). 0, -ERANGE (no such part), or
 * -ENODATA (the layout was not kept).
 */
int tgt_parts_range(const ft_lom_t *lom, long n, uint64_t *off, uint64_t *len, int *count);
/* Adds the stored x-amz-meta-* headers, standard headers and S3 checksum to the response. */
void tgt_meta_headers(ft_req_t *r, const ft_lom_t *lom);
/* The Content-Type to serve: the stored one, else TGT_CONTENT_TYPE. */
const char *tgt_meta_ctype(const ft_lom_t *lom);

#endif
