/* SPDX-License-Identifier: Apache-2.0 */
/* Where a remote bucket's listing resumes after a marker this proxy handed out: the backend's page token. */
#include "s3/s3.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * DESIGN
 * ListObjects (v1) and ListObjectVersions page by a key (marker, key-marker), not by a token, and a
 * remote bucket's backend resumes only at its own opaque page token. Without help each page would
 * read the backend's listing from its start up to the marker. So each truncated page of a remote
 * bucket leaves here the token of the backend page its last key is in, under (provider, bucket,
 * prefix, delimiter, key): the client's next request, with that key as its marker, starts in that page. A
 * fixed table replaced in turn (the oldest entry goes first); a miss, or a token the backend no
 * longer takes (list.c then starts over), only costs reading from the start.
 */

#define MARKS 512

typedef struct {
	char *key;    /* mark_key's, malloc'd; NULL when free */
	char *btoken; /* malloc'd */
} mark_t;

static mark_t marks[MARKS];
static size_t next_slot;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * The listing and the marker as one string, each field length-prefixed (names may hold any byte
 * but NUL): the page a marker ended depends on the delimiter too (a page that ends in a common
 * prefix has skipped the names under it). malloc'd, NULL on OOM.
 */
static char *mark_key(const char *provider, const char *bucket, const char *prefix, const char *delimiter,
		      const char *marker)
{
	char *k = NULL;

	return asprintf(&k, "%zu:%s%zu:%s%zu:%s%zu:%s%zu:%s", strlen(provider), provider, strlen(bucket), bucket,
			strlen(prefix), prefix, strlen(delimiter), delimiter, strlen(marker), marker) < 0
		       ? NULL
		       : k;
}

/* The slot holding key, or -1. Under mu. */
static int find(const char *key)
{
	for (int i = 0; i < MARKS; i++)
		if (marks[i].key != NULL && strcmp(marks[i].key, key) == 0)
			return i;
	return -1;
}

void px_s3_listmark_put(const char *provider, const char *bucket, const char *prefix, const char *delimiter,
			const char *marker, const char *btoken)
{
	char *key = mark_key(provider, bucket, prefix, delimiter, marker), *tok = strdup(btoken);

	if (key == NULL || tok == NULL) {
		free(key);
		free(tok);
		return;
	}
	pthread_mutex_lock(&mu);
	int i = find(key);
	if (i < 0) {
		i = (int)next_slot;
		next_slot = (next_slot + 1) % MARKS;
	}
	free(marks[i].key);
	free(marks[i].btoken);
	marks[i] = (mark_t){.key = key, .btoken = tok};
	pthread_mutex_unlock(&mu);
}

char *px_s3_listmark_get(const char *provider, const char *bucket, const char *prefix, const char *delimiter,
			 const char *marker)
{
	char *key = mark_key(provider, bucket, prefix, delimiter, marker), *tok = NULL;

	if (key == NULL)
		return NULL;
	pthread_mutex_lock(&mu);
	int i = find(key);
	if (i >= 0)
		tok = strdup(marks[i].btoken);
	pthread_mutex_unlock(&mu);
	free(key);
	return tok;
}
