/* SPDX-License-Identifier: Apache-2.0 */
/* Validation of bucket and object names: names are never trusted as paths. */
#ifndef FT_NAMES_H
#define FT_NAMES_H

#include <stddef.h>

#define FT_OBJ_NAME_MAX 1024
#define FT_BUCKET_NAME_MAX 64
#define FT_JOB_NAME_MAX 64 /* a hint job's name, NUL included */

/*
 * Object names, as S3 keys: 1..1024 bytes of valid UTF-8 without NUL. '/', "//", a leading or
 * trailing '/', "." and ".." segments and long segments are plain characters (never a path:
 * target/core/keymap.h). Returns 0, or -1 and sets *why to a static message for the client.
 */
int ft_name_check_object(const char *name, size_t len, const char **why);
/* Bucket names: 1..64 bytes of [A-Za-z0-9._-], not starting with '.' or '-'. Same contract. */
int ft_name_check_bucket(const char *name, const char **why);
/* Providers: "ais" today; returns 0 for a known provider name, -1 otherwise. */
int ft_name_check_provider(const char *provider);
/* A job name (order hints): 1..FT_JOB_NAME_MAX-1 bytes of [A-Za-z0-9._-]. 0 or -1. */
int ft_name_check_job(const char *job);
/*
 * An object's unified name as AIStore writes it, "<provider>/@#/<bucket>/<object>" (the global
 * namespace "@#" may be left out): the provider word (not checked, at most 15 bytes), the bucket and
 * the object, each valid, into provider, bucket and *obj (into s). 0; -1 with *why (malformed or an
 * invalid name); -2 for a namespace other than the global one.
 */
int ft_name_parse_uname(const char *s, char provider[16], char bucket[FT_BUCKET_NAME_MAX + 1], const char **obj,
			const char **why);

#endif
