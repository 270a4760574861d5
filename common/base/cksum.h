/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming object checksums: xxhash64 (default) and md5. */
#ifndef FT_CKSUM_H
#define FT_CKSUM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	FT_CKSUM_NONE = 0,
	FT_CKSUM_XXHASH = 1,
	FT_CKSUM_MD5 = 2,
} ft_cksum_type_t;

#define FT_CKSUM_HEX_MAX 65 /* longest hex value + NUL */

typedef struct {
	ft_cksum_type_t type;
	void *state; /* XXH64_state_t or EVP_MD_CTX, owned */
} ft_cksum_t;

/* Returns 0, -1 on allocation failure. */
int ft_cksum_init(ft_cksum_t *c, ft_cksum_type_t type);
void ft_cksum_update(ft_cksum_t *c, const void *buf, size_t len);
/* Writes the lowercase hex digest ("" for NONE) and releases the state. */
void ft_cksum_final(ft_cksum_t *c, char hex[FT_CKSUM_HEX_MAX]);
/* Releases the state without a result (error paths); safe after final. */
void ft_cksum_abort(ft_cksum_t *c);
/* "none", "xxhash", "md5". */
const char *ft_cksum_name(ft_cksum_type_t type);
/* Returns 0, or -1 for an unknown name. */
int ft_cksum_parse(const char *name, ft_cksum_type_t *out);

#endif
