/* SPDX-License-Identifier: Apache-2.0 */
/* S3 ListObjectsV2, ListObjects (v1) and ListObjectVersions: prefix, delimiter and CommonPrefixes, paging, url encoding, over the native fan-out or a remote bucket's backend. */
#include "s3/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "http/util.h"

/*
 * DESIGN
 * Listing walks the bucket in byte order through the host's list_page (one merged page from every target
 * per call). With a delimiter, a name whose rest after the prefix holds the delimiter rolls up into
 * the common prefix ending there; once a common prefix is emitted, the next page starts after
 * every name under it (token = the prefix followed by 0xFF bytes, which no UTF-8 name contains),
 * so a "directory" of a million objects costs one page, not a thousand.
 *
 * Position: listing resumes after a marker (v1 marker, v2 start-after, or the decoded v2
 * continuation token), and the token we hand out is the last key or common prefix returned. A
 * common prefix not greater than the marker is never returned again, which makes a marker that
 * is itself a common prefix skip that whole "directory" - the S3 behaviour.
 *
 * A remote bucket (aws, gcp, azure, ht) is walked through its backend's own listing instead
 * (remote_walk), whose pages only the backend's opaque token reaches: our token then carries the
 * token of the page the walk stopped in and the marker, and the names up to the marker in that
 * page are skipped. A marker with no token (v1, ListObjectVersions, start-after) resumes in
 * the page it is in when this proxy handed it out lately (listmark.c keeps the page), else reads
 * from the backend's first page, which an aws backend starts after the marker (start-after).
 * The delimiter "/" is the backend's (its common prefixes come as entries named by them, in byte
 * order with the names), so a "directory" is one entry there, not a walk over its names; "/" only,
 * the one every backend and emulator rolls up exactly (s3rver cuts multi-byte ones short and loses
 * names holding some others): another delimiter is applied here to the flat listing, name by name.
 * A token says which of the two listings its backend token belongs to. A page that fills up at the end
 * of a backend page is answered truncated without reading the next one: with a delimiter, the
 * next page may then turn out empty (everything left rolls into the last common prefix), which
 * clients take as the end.
 *
 * Memory: at most max-keys (<= 1000) items and one page of entries at a time.
 */

#define LIST_MAX_KEYS 1000
#define LIST_FETCH_MAX 1000
#define SKIP_SUFFIX "\xff\xff\xff\xff"
#define TOKEN_MAGIC "ft1:"
#define RTOKEN_MAGIC "fr1:"     /* a remote bucket's: the length of the backend's page token, ':', it, the marker */
#define RTOKEN_DIR_MAGIC "fr2:" /* the same, of a listing the backend rolls up at "/" (its token is of that listing) */
#define BACKEND_DELIMITER "/"
#define TOKEN_MAX 16384

typedef struct {
	int version; /* 1, 2, or PX_S3_LIST_VERSIONS */
	const char *prefix;
	const char *delimiter; /* "" = none */
	const char *start;     /* list names after this one */
	const char *marker;    /* v1: as given */
	const char *token;     /* v2: as given, NULL if none */
	const char *start_after;
	const char *btoken; /* remote bucket: the backend's token of the page the listing resumes in ("": the first) */
	int max_keys;
	bool url;   /* encoding-type=url */
	bool owner; /* Owner in Contents */
} list_args_t;

typedef struct {
	json_t *entry; /* an object (owned reference), NULL for a common prefix */
	char *prefix;  /* a common prefix (owned), NULL for an object */
} item_t;

typedef struct {
	item_t *v;
	int n;
	bool truncated;
	char *next;   /* the last key or common prefix returned (owned), NULL if none */
	char *btoken; /* remote bucket, truncated: the backend's token of the page it stopped in (owned) */
} result_t;

/*
 * ---- continuation tokens: base64 of "ft1:" + the marker; of a remote bucket's listing, base64 of
 * "fr1:" + the length of the backend's token of the page holding the marker + ':' + that token +
 * the marker ----
 */

/* The delimiter a remote bucket's backend applies to its listing: NULL for a flat listing. */
static const char *backend_delimiter(const list_args_t *a)
{
	return strcmp(a->delimiter, BACKEND_DELIMITER) == 0 ? BACKEND_DELIMITER : NULL;
}

/* The magic of a remote bucket's token: of a flat or a delimited backend listing. */
static const char *remote_magic(const list_args_t *a)
{
	return backend_delimiter(a) != NULL ? RTOKEN_DIR_MAGIC : RTOKEN_MAGIC;
}

/*
 * The token for marker (btoken NULL) or for a remote bucket's marker in the page of btoken; malloc'd,
 * NULL on OOM or when longer than TOKEN_MAX (a backend token of kilobytes).
 */
static char *token_encode(const list_args_t *a, const char *btoken, const char *marker)
{
	char *raw = NULL, *out;
	int n = btoken != NULL ? asprintf(&raw, "%s%zu:%s%s", remote_magic(a), strlen(btoken), btoken, marker)
			       : asprintf(&raw, "%s%s", TOKEN_MAGIC, marker);

	if (n < 0)
		return NULL;
	if (FT_BASE64_LEN((size_t)n) > TOKEN_MAX) /* token_decode would refuse it */
		out = NULL;
	else if ((out = malloc(FT_BASE64_LEN((size_t)n) + 1)) != NULL)
		ft_base64_encode(raw, (size_t)n, out);
	free(raw);
	return out;
}

/*
 * The marker inside a token, in ft_req_alloc memory, and for a remote bucket (btoken not NULL) the
 * backend's page token into *btoken; NULL when the token is not one of ours for this bucket's kind.
 */
static char *token_decode(ft_req_t *r, const list_args_t *a, const char *token, const char **btoken)
{
	const char *magic = btoken != NULL ? remote_magic(a) : TOKEN_MAGIC;
	size_t n = strlen(token), ml = strlen(magic), bl;
	char *raw, *end;
	long len;

	if (n == 0 || n % 4 != 0 || n > TOKEN_MAX)
		return NULL;
	raw = ft_req_alloc(r, n + 1);
	len = ft_base64_decode(token, n, raw, n);
	if (len < 0)
		return NULL;
	raw[len] = '\0';
	if ((size_t)len < ml || memcmp(raw, magic, ml) != 0 || memchr(raw, '\0', (size_t)len) != NULL)
		return NULL;
	if (btoken == NULL)
		return raw + ml;
	if (raw[ml] < '0' || raw[ml] > '9')
		return NULL;
	errno = 0;
	bl = strtoul(raw + ml, &end, 10);
	if (errno != 0 || *end != ':' || bl > strlen(end + 1))
		return NULL;
	char *bt = ft_req_alloc(r, bl + 1);
	memcpy(bt, end + 1, bl);
	bt[bl] = '\0';
	*btoken = bt;
	return end + 1 + bl;
}

/* ---- output ---- */

/* An element holding text, url-encoded when asked (keys, prefixes, markers). */
static void name_elem(px_xml_t *x, const char *tag, const char *s, bool url)
{
	if (!url) {
		px_xml_elem(x, tag, s);
		return;
	}
	char *e = ft_pct_encode_dup(s, strlen(s), FT_PCT_KEEP_SLASH);
	if (e == NULL) {
		x->failed = true;
		return;
	}
	px_xml_elem(x, tag, e);
	free(e);
}

static void contents_xml(px_xml_t *x, const json_t *e, const list_args_t *a)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *etag = json_string_value(json_object_get(e, "etag"));
	const json_t *mtime = json_object_get(e, "mtime");
	char date[40];

	if (etag == NULL || etag[0] == '\0')
		etag = json_string_value(json_object_get(e, "checksum"));
	if (mtime == NULL)
		mtime = json_object_get(e, "atime");
	ft_date_format_iso8601((int64_t)json_integer_value(mtime), date, sizeof(date));
	const char *tag = a->version == PX_S3_LIST_VERSIONS ? "Version" : "Contents";
	px_xml_open(x, tag);
	name_elem(x, "Key", name, a->url);
	if (a->version == PX_S3_LIST_VERSIONS) { /* versioning never enabled: one null version, the latest */
		px_xml_elem(x, "VersionId", "null");
		px_xml_elem(x, "IsLatest", "true");
	}
	px_xml_elem(x, "LastModified", date);
	px_xml_elemf(x, "ETag", "\"%s\"", etag != NULL ? etag : "");
	px_xml_elemf(x, "Size", "%lld", (long long)json_integer_value(json_object_get(e, "size")));
	if (a->owner) {
		px_xml_open(x, "Owner");
		px_xml_elem(x, "ID", "fasttier");
		px_xml_elem(x, "DisplayName", "fasttier");
		px_xml_close(x, "Owner");
	}
	px_xml_elem(x, "StorageClass", "STANDARD");
	px_xml_close(x, tag);
}

static void respond(px_s3_req_t *q, const list_args_t *a, const result_t *res)
{
	px_xml_t x;
	char *next_token = NULL;

	px_xml_init(&x);
	px_xml_open_ns(&x, a->version == PX_S3_LIST_VERSIONS ? "ListVersionsResult" : "ListBucketResult");
	px_xml_elem(&x, "Name", q->bucket);
	/* ListObjects (v1) echoes its Prefix as given: S3 encodes it only in V2 (and clients decode it only there) */
	name_elem(&x, "Prefix", a->prefix, a->url && a->version != 1);
	if (a->delimiter[0] != '\0')
		name_elem(&x, "Delimiter", a->delimiter, a->url);
	px_xml_elemf(&x, "MaxKeys", "%d", a->max_keys);
	if (a->url)
		px_xml_elem(&x, "EncodingType", "url");
	if (a->version == 2)
		px_xml_elemf(&x, "KeyCount", "%d", res->n);
	px_xml_elem(&x, "IsTruncated", res->truncated ? "true" : "false");
	if (a->version == 2) {
		if (a->token != NULL)
			px_xml_elem(&x, "ContinuationToken", a->token);
		if (res->truncated && res->next != NULL) {
			next_token = token_encode(a, res->btoken, res->next);
			if (next_token == NULL)
				x.failed = true;
			else
				px_xml_elem(&x, "NextContinuationToken", next_token);
		}
		if (a->start_after != NULL)
			name_elem(&x, "StartAfter", a->start_after, a->url);
	} else if (a->version == PX_S3_LIST_VERSIONS) {
		name_elem(&x, "KeyMarker", a->marker, a->url);
		px_xml_elem(&x, "VersionIdMarker", ft_req_query(q->r, "version-id-marker") ? "null" : "");
		if (res->truncated && res->next != NULL) {
			name_elem(&x, "NextKeyMarker", res->next, a->url);
			px_xml_elem(&x, "NextVersionIdMarker", "null");
		}
	} else {
		name_elem(&x, "Marker", a->marker, a->url);
		if (res->truncated && res->next != NULL)
			name_elem(&x, "NextMarker", res->next, a->url);
	}
	for (int i = 0; i < res->n; i++)
		if (res->v[i].entry != NULL)
			contents_xml(&x, res->v[i].entry, a);
	for (int i = 0; i < res->n; i++) {
		if (res->v[i].prefix == NULL)
			continue;
		px_xml_open(&x, "CommonPrefixes");
		name_elem(&x, "Prefix", res->v[i].prefix, a->url);
		px_xml_close(&x, "CommonPrefixes");
	}
	px_xml_close(&x, a->version == PX_S3_LIST_VERSIONS ? "ListVersionsResult" : "ListBucketResult");
	free(next_token);
	px_s3_send_xml(q, 200, &x);
}

/* ---- the walk ---- */

static void result_free(result_t *res)
{
	for (int i = 0; i < res->n; i++) {
		json_decref(res->v[i].entry);
		free(res->v[i].prefix);
	}
	free(res->v);
	free(res->next);
	free(res->btoken);
}

/* "<s>" followed by the skip suffix: sorts after every name that starts with s. NULL on OOM. */
static char *after_all_under(const char *s)
{
	char *out = NULL;

	if (asprintf(&out, "%s" SKIP_SUFFIX, s) < 0)
		return NULL;
	return out;
}

/* Replaces *slot with a copy of s (or the "after all under s" form); -1 on OOM. */
static int set_str(char **slot, const char *s, bool after_all)
{
	char *c = after_all ? after_all_under(s) : strdup(s);

	if (c == NULL)
		return -1;
	free(*slot);
	*slot = c;
	return 0;
}

/* The common prefix of name (whose rest after plen holds the delimiter), malloc'd; NULL if none or OOM. */
static char *common_prefix(const char *name, size_t plen, const char *delim, bool *oom)
{
	const char *d;

	*oom = false;
	if (delim[0] == '\0' || (d = strstr(name + plen, delim)) == NULL)
		return NULL;
	char *cp = strndup(name, (size_t)(d - name) + strlen(delim));
	if (cp == NULL)
		*oom = true;
	return cp;
}

typedef enum { WALK_MORE, WALK_FULL, WALK_DONE } walk_state_t;

/*
 * Consumes one page into res. *resume becomes the token for the next page. Returns WALK_FULL once
 * max_keys items are held and another item was seen (res->truncated set), WALK_MORE otherwise;
 * -1 on allocation failure.
 */
static int consume(const list_args_t *a, json_t *entries, result_t *res, char **resume, const char **last_cp)
{
	size_t plen = strlen(a->prefix), i;
	json_t *e;

	json_array_foreach(entries, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		bool oom = false, dir = json_is_true(json_object_get(e, "dir")); /* the backend's common prefix */
		char *cp = dir ? strdup(name) : common_prefix(name, plen, a->delimiter, &oom);
		if (oom || (dir && cp == NULL))
			return -1;
		if (cp != NULL) {
			bool seen = (*last_cp != NULL && strcmp(cp, *last_cp) == 0) || strcmp(cp, a->start) <= 0;
			if (set_str(resume, cp, true) != 0) {
				free(cp);
				return -1;
			}
			if (seen) {
				free(cp);
				continue;
			}
			if (res->n == a->max_keys) {
				free(cp);
				res->truncated = true;
				return WALK_FULL;
			}
			res->v[res->n++] = (item_t){.prefix = cp};
			*last_cp = cp;
			if (set_str(&res->next, cp, false) != 0)
				return -1;
			continue;
		}
		if (res->n == a->max_keys) {
			res->truncated = true;
			return WALK_FULL;
		}
		json_incref(e);
		res->v[res->n++] = (item_t){.entry = e};
		if (set_str(resume, name, false) != 0 || set_str(&res->next, name, false) != 0)
			return -1;
	}
	return WALK_MORE;
}

/* The first fetch token: the start, or past the whole common prefix the start lies in. */
static char *first_token(const list_args_t *a)
{
	size_t plen = strlen(a->prefix);
	bool oom;

	if (strncmp(a->start, a->prefix, plen) == 0) {
		char *cp = common_prefix(a->start, plen, a->delimiter, &oom);
		if (oom)
			return NULL;
		if (cp != NULL) {
			char *t = after_all_under(cp);
			free(cp);
			return t;
		}
	}
	return strdup(a->start);
}

/* The S3 error for a failed listing page's status. */
static px_s3_err_t page_error(int status)
{
	switch (status) {
	case 400:
		return PX_S3_INVALID_ARGUMENT;
	case 403:
		return PX_S3_ACCESS_DENIED;
	case 404:
		return PX_S3_NO_SUCH_BUCKET;
	case 501:
		return PX_S3_NOT_IMPLEMENTED;
	case 502:
	case 503:
	case 504:
		return PX_S3_SERVICE_UNAVAILABLE;
	default:
		return PX_S3_INTERNAL;
	}
}

/* The entries of page named after resume (a new array; NULL on OOM). */
static json_t *after(const json_t *page, const char *resume)
{
	json_t *out = json_array(), *e;
	size_t i;

	json_array_foreach(page, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		if (out != NULL && name != NULL && strcmp(name, resume) > 0 && json_array_append(out, e) != 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/*
 * A remote bucket's walk: its backend's own pages (in byte order, as S3, GCS and Azure list), from
 * the page of a->btoken on, each name not after the resume point skipped (so also the rest of a
 * common prefix). A truncated result keeps the token of the page it stopped in, or of the next
 * page when it filled up at the end of one (no backend call only to learn that more follow). 0, or
 * -1 after responding.
 */
static int remote_walk(px_s3_req_t *q, const list_args_t *a, result_t *res)
{
	/* a marker without a token (v1, versions): the page a truncated answer of ours left it in, if known */
	char *marked = a->btoken[0] == '\0' && a->start[0] != '\0'
			       ? px_s3_listmark_get(q->provider, q->bucket, a->prefix, a->delimiter, a->start)
			       : NULL;
	if (marked != NULL && marked[0] == '\0') { /* it is in the first page: start-after reaches it as well */
		free(marked);
		marked = NULL;
	}
	char *resume = first_token(a), *btoken = marked != NULL ? marked : strdup(a->btoken), *next = NULL;
	const char *last_cp = NULL;
	int status = 0, state = WALK_MORE, rc = -1;
	char why[512];

	if (resume == NULL || btoken == NULL)
		goto oom;
	while (a->max_keys > 0 && state == WALK_MORE) {
		json_t *page = NULL, *fresh;
		/* from the backend's first page: past the start where it can (aws), not every page before it */
		px_s3_rlist_args_t ra = {a->prefix, backend_delimiter(a), btoken[0] == '\0' ? a->start : "", btoken,
					 LIST_FETCH_MAX};
		if (q->host->rlist_page(q->host->ctx, q->provider, q->bucket, &ra, &page, &next, &status, why,
					sizeof(why)) != 0) {
			if (marked != NULL && res->n == 0) { /* a kept token gone stale: once more from the start */
				free(btoken);
				marked = NULL;
				if ((btoken = strdup("")) == NULL)
					goto oom;
				continue;
			}
			px_s3_error(q, page_error(status), "%s", why);
			goto out;
		}
		marked = NULL; /* it worked, or was not used */
		fresh = after(page, resume);
		json_decref(page);
		state = fresh != NULL ? consume(a, fresh, res, &resume, &last_cp) : -1;
		json_decref(fresh);
		if (state < 0)
			goto oom;
		if (state == WALK_FULL) {
			res->btoken = btoken;
			btoken = NULL;
		} else if (next[0] == '\0') {
			break;
		} else if (res->n == a->max_keys) { /* full, and the backend has more: they start in its next page */
			res->truncated = true;
			res->btoken = next;
			next = NULL;
			state = WALK_FULL;
		} else {
			free(btoken);
			btoken = next;
			next = NULL;
		}
		free(next);
		next = NULL;
	}
	if (res->truncated && a->version != 2 && res->next != NULL && res->btoken != NULL)
		px_s3_listmark_put(q->provider, q->bucket, a->prefix, a->delimiter, res->next, res->btoken);
	rc = 0;
	goto out;
oom:
	px_s3_error(q, PX_S3_INTERNAL, "out of memory");
out:
	free(next);
	free(btoken);
	free(resume);
	return rc;
}

static void list_work(px_s3_req_t *q)
{
	const list_args_t *a = q->op;
	result_t res = {0};
	const char *last_cp = NULL;
	char *resume = NULL;
	json_t *entries = NULL;
	bool more = true;
	int status = 0, state = WALK_MORE;
	char why[512];

	res.v = calloc((size_t)a->max_keys + 1, sizeof(*res.v));
	if (res.v == NULL)
		goto oom;
	if (px_s3_remote(q)) {
		if (remote_walk(q, a, &res) == 0)
			respond(q, a, &res);
		goto out;
	}
	resume = first_token(a);
	if (resume == NULL)
		goto oom;
	while (a->max_keys > 0 && more && state == WALK_MORE) {
		int want = a->max_keys - res.n + 1;
		if (want > LIST_FETCH_MAX)
			want = LIST_FETCH_MAX;
		if (q->host->list_page(q->host->ctx, q->bucket, a->prefix, resume, want, &entries, &more, &status, why,
				       sizeof(why)) != 0) {
			px_s3_error(q, page_error(status), "%s", why);
			goto out;
		}
		state = consume(a, entries, &res, &resume, &last_cp);
		json_decref(entries);
		entries = NULL;
		if (state < 0)
			goto oom;
	}
	respond(q, a, &res);
	goto out;
oom:
	px_s3_error(q, PX_S3_INTERNAL, "out of memory");
out:
	free(resume);
	result_free(&res);
}

/* ---- arguments ---- */

/* max-keys: absent = 1000; more than 1000 = 1000. -1 when not a non-negative integer. */
static int parse_max_keys(const char *s)
{
	long v = 0;

	if (s == NULL)
		return LIST_MAX_KEYS;
	if (s[0] == '\0')
		return -1;
	for (const char *c = s; *c != '\0'; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		if (v <= LIST_MAX_KEYS)
			v = v * 10 + (*c - '0');
	}
	return v > LIST_MAX_KEYS ? LIST_MAX_KEYS : (int)v;
}

static const char *query_or(ft_req_t *r, const char *key, const char *dflt)
{
	const char *v = ft_req_query(r, key);

	return v != NULL ? v : dflt;
}

void px_s3_list_objects(px_s3_req_t *q, int version)
{
	ft_req_t *r = q->r;
	list_args_t *a = ft_req_alloc(r, sizeof(*a));
	const char *enc = ft_req_query(r, "encoding-type");
	const char *lt = ft_req_query(r, "list-type");

	memset(a, 0, sizeof(*a));
	a->version = version;
	if (version == 2 && strcmp(lt, "2") != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "list-type must be 2");
		return;
	}
	a->prefix = query_or(r, "prefix", "");
	a->delimiter = query_or(r, "delimiter", "");
	a->max_keys = parse_max_keys(ft_req_query(r, "max-keys"));
	if (a->max_keys < 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "max-keys must be a non-negative integer");
		return;
	}
	if (enc != NULL && strcmp(enc, "url") != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Invalid Encoding Method specified in Request");
		return;
	}
	a->url = enc != NULL;
	if (version == 2) {
		a->token = ft_req_query(r, "continuation-token");
		a->start_after = ft_req_query(r, "start-after");
		a->owner = strcmp(query_or(r, "fetch-owner", "false"), "true") == 0;
		a->start = a->start_after != NULL ? a->start_after : "";
		a->btoken = "";
		if (a->token != NULL) {
			const char *m = token_decode(r, a, a->token, px_s3_remote(q) ? &a->btoken : NULL);
			if (m == NULL) {
				px_s3_error(q, PX_S3_INVALID_ARGUMENT, "The continuation token provided is incorrect");
				return;
			}
			if (strcmp(m, a->start) > 0)
				a->start = m;
		}
	} else if (version == PX_S3_LIST_VERSIONS) {
		a->marker = query_or(r, "key-marker", "");
		const char *vm = ft_req_query(r, "version-id-marker");
		if (vm != NULL && vm[0] != '\0' && (a->marker[0] == '\0' || strcmp(vm, "null") != 0)) {
			px_s3_error(q, PX_S3_INVALID_ARGUMENT,
				    a->marker[0] ? "Invalid version id specified"
						 : "A version-id marker cannot be specified without a key marker.");
			return;
		}
		a->start = a->marker; /* one version a key: the key marker's versions are all listed */
		a->btoken = "";
		a->owner = true;
	} else {
		a->marker = query_or(r, "marker", "");
		a->start = a->marker;
		a->btoken = "";
		a->owner = true;
	}
	if (strcmp(q->provider, "ht") == 0) {
		px_s3_error(q, PX_S3_INVALID_REQUEST, "ht bucket %s cannot be listed: an HTTP origin has no listing",
			    q->bucket);
		return;
	}
	q->op = a;
	px_s3_defer(q, list_work);
}
