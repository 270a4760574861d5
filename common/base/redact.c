/* SPDX-License-Identifier: Apache-2.0 */
/* URLs as logs and error messages show them: the query's values and any user:password@ left out. */
#include "base/redact.h"

#include <stdbool.h>
#include <string.h>

/* Query keys of the cluster's own URLs whose values say where, never who: kept in messages. */
static const char *const kept_keys[] = {"provider", "mpu", "part"};

typedef struct {
	char *p;
	size_t cap, len; /* len < cap: room for the NUL always */
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
	size_t room = o->cap - 1 - o->len;

	if (n > room)
		n = room;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static bool kept(const char *key, size_t n)
{
	for (size_t i = 0; i < sizeof(kept_keys) / sizeof(kept_keys[0]); i++)
		if (strlen(kept_keys[i]) == n && memcmp(kept_keys[i], key, n) == 0)
			return true;
	return false;
}

/* The query q[0..n) (after the '?'), each value not kept written as FT_REDACTED. */
static void put_query(out_t *o, const char *q, size_t n)
{
	for (size_t i = 0; i < n;) {
		const char *item = q + i, *amp = memchr(item, '&', n - i);
		size_t len = amp != NULL ? (size_t)(amp - item) : n - i;
		const char *eq = memchr(item, '=', len);

		if (i > 0)
			put(o, "&", 1);
		if (eq == NULL) {
			put(o, len > 0 ? FT_REDACTED : "", len > 0 ? strlen(FT_REDACTED) : 0);
		} else if (kept(item, (size_t)(eq - item))) {
			put(o, item, len);
		} else {
			put(o, item, (size_t)(eq - item) + 1);
			put(o, FT_REDACTED, strlen(FT_REDACTED));
		}
		i += len + 1;
	}
}

/* The host part of an authority that starts at a: past a "user:password@" (the last '@' ends it). */
static const char *after_userinfo(const char *a)
{
	size_t auth = strcspn(a, "/?#");
	const char *at = NULL;

	for (size_t i = 0; i < auth; i++)
		if (a[i] == '@')
			at = a + i;
	return at != NULL ? at + 1 : a;
}

const char *ft_redact_url(const char *url, char *out, size_t cap)
{
	out_t o = {.p = out, .cap = cap};
	const char *p = url, *scheme;
	size_t end;

	if (cap == 0)
		return out;
	out[0] = '\0';
	if (url == NULL)
		return out;
	scheme = strstr(url, "://");
	if (scheme != NULL && (size_t)(scheme - url) < strcspn(url, "/?#")) {
		put(&o, url, (size_t)(scheme - url) + 3);
		p = after_userinfo(scheme + 3);
	} else if (url[0] == '/' && url[1] == '/') { /* scheme-relative ("//host/path", e.g. a Location) */
		put(&o, "//", 2);
		p = after_userinfo(url + 2);
	}
	end = strcspn(p, "?#");
	put(&o, p, end);
	p += end;
	if (*p == '?') {
		size_t qn = strcspn(p + 1, "#");
		put(&o, "?", 1);
		put_query(&o, p + 1, qn);
	}
	return out;
}
