/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP helpers shared by both daemons: ranges, URL paths, JSON responses. */
#ifndef FT_HTTPUTIL_H
#define FT_HTTPUTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "http/http.h"

typedef enum {
	FT_RANGE_NONE = 0,  /* no Range header: whole object */
	FT_RANGE_OK = 1,    /* *off, *len set */
	FT_RANGE_UNSAT = 2, /* 416, Content-Range: bytes * /size */
	FT_RANGE_BAD = 3,   /* malformed: 400 */
} ft_range_result_t;

/*
 * Parses a single-range "bytes=a-b", "bytes=a-", "bytes=-n" against size (RFC 9110):
 * b past the end is clamped; a >= size, or n == 0, or an empty object -> UNSAT.
 * Multiple ranges ("bytes=0-1,5-6") -> BAD. hdr NULL -> NONE.
 */
ft_range_result_t ft_range_parse(const char *hdr, uint64_t size, uint64_t *off, uint64_t *len);

/* Sends a JSON body (stolen) with status. */
void ft_resp_json(ft_req_t *r, int status, json_t *body);

/*
 * Splits a decoded path "/v1/<kind>/<bucket>/<object...>" after the "/v1/<kind>" prefix:
 * sets *bucket (NUL-terminated copy in ft_req_alloc memory, "" if absent) and *obj / *obj_len
 * (pointer into path, may hold NUL bytes; obj_len 0 if absent). Returns 0, -1 if the prefix differs.
 */
int ft_path_split(ft_req_t *r, const char *path, size_t len, const char *prefix, char **bucket, const char **obj,
		  size_t *obj_len);

/* Current time in ns since the epoch (CLOCK_REALTIME) and monotonic ms. */
int64_t ft_now_ns(void);
int64_t ft_mono_ms(void);

#endif
