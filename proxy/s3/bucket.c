/* SPDX-License-Identifier: Apache-2.0 */
/* S3 bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation, configuration probes. */
#include "s3/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "cluster/bmd.h"
#include "http/util.h"

/*
 * DESIGN
 * Buckets created through S3 are native "ais" buckets: CreateBucket and DeleteBucket go through the
 * same BMD mutations as the native API (the host's bucket_create / bucket_destroy); ListBuckets
 * lists them. A remote bucket created with the native API is reached by its name too (route.c),
 * but neither listed nor created nor deleted here. Buckets created
 * through S3 get MD5 checksums, because every S3 PUT computes the MD5 for the ETag anyway: the
 * target then hashes each object once instead of twice.
 */

#define OWNER_ID PX_S3_OWNER_ID
#define CREATE_BODY_MAX (64 * 1024)

static void owner_xml(px_xml_t *x)
{
	px_xml_open(x, "Owner");
	px_xml_elem(x, "ID", OWNER_ID);
	px_xml_elem(x, "DisplayName", OWNER_ID);
	px_xml_close(x, "Owner");
}

/* ---- names ---- */

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* "a.b.c.d" with four decimal groups: S3 refuses bucket names formatted as IP addresses. */
static bool looks_like_ip(const char *s)
{
	int groups = 0, digits = 0;

	for (; *s != '\0'; s++) {
		if (*s >= '0' && *s <= '9') {
			if (++digits > 3)
				return false;
		} else if (*s == '.' && digits > 0) {
			groups++;
			digits = 0;
		} else {
			return false;
		}
	}
	return groups == 3 && digits > 0;
}

int px_s3_check_bucket_name(const char *name, const char **why)
{
	size_t n = strlen(name);

	if (n < 3 || n > 63) {
		*why = "Bucket names must be 3 to 63 characters long";
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!lower_alnum(c) && c != '.' && c != '-') {
			*why = "Bucket names may contain only lowercase letters, digits, '.' and '-'";
			return -1;
		}
		if (c == '.' && i > 0 && (name[i - 1] == '.' || name[i - 1] == '-')) {
			*why = "Bucket names must not contain \"..\" or \"-.\"";
			return -1;
		}
		if (c == '-' && i > 0 && name[i - 1] == '.') {
			*why = "Bucket names must not contain \".-\"";
			return -1;
		}
	}
	if (!lower_alnum(name[0]) || !lower_alnum(name[n - 1])) {
		*why = "Bucket names must begin and end with a letter or digit";
		return -1;
	}
	if (looks_like_ip(name)) {
		*why = "Bucket names must not be formatted as an IP address";
		return -1;
	}
	if (strncmp(name, "xn--", 4) == 0 || (n > 8 && strcmp(name + n - 8, "-s3alias") == 0)) {
		*why = "Bucket names must not start with \"xn--\" or end with \"-s3alias\"";
		return -1;
	}
	return 0;
}

/* ---- ListBuckets ---- */

#define LIST_BUCKETS_MAX 10000 /* S3's largest max-buckets */

typedef struct {
	const char *name;
	int64_t created_ns;
	bool ais;
} bucket_row_t;

/* By name; of rows of one name, the ais bucket (the one S3 reaches), then the oldest, first. */
static int bucket_row_cmp(const void *a, const void *b)
{
	const bucket_row_t *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	if (x->ais != y->ais)
		return x->ais ? -1 : 1;
	return (x->created_ns > y->created_ns) - (x->created_ns < y->created_ns);
}

/*
 * The names the S3 API reaches after `after` and under prefix, each once, sorted, in rows; their count: every ais
 * bucket's, and a remote bucket's unless remote buckets of several providers share it with no ais one (409 there).
 */
static int bucket_rows(px_s3_req_t *q, const char *after, const char *prefix, bucket_row_t **out)
{
	ft_bmd_t *bmd = ft_bmd_current();
	int n = 0, total = bmd != NULL ? bmd->n : 0;
	bucket_row_t *rows = ft_req_alloc(q->r, (size_t)(total + 1) * sizeof(*rows));

	for (int i = 0; i < total; i++) {
		const ft_bucket_t *b = &bmd->buckets[i];
		if (strcmp(b->name, after) <= 0)
			continue;
		if (prefix != NULL && strncmp(b->name, prefix, strlen(prefix)) != 0)
			continue;
		size_t len = strlen(b->name) + 1;
		char *copy = ft_req_alloc(q->r, len);
		memcpy(copy, b->name, len);
		rows[n++] = (bucket_row_t){copy, b->created_ns, strcmp(b->provider, "ais") == 0};
	}
	ft_bmd_put(bmd);
	qsort(rows, (size_t)n, sizeof(*rows), bucket_row_cmp);
	int kept = 0;
	for (int i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && strcmp(rows[j].name, rows[i].name) == 0; j++)
			;
		if (rows[i].ais || j - i == 1) /* the ais bucket comes first among its name's */
			rows[kept++] = rows[i];
	}
	*out = rows;
	return kept;
}

/* The continuation token of a page that ended at name (base64url of it), into out; "" when it does not fit. */
static void bucket_token(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	out[0] = '\0';
	if (FT_BASE64_LEN(n) + 1 <= cap)
		ft_base64url_encode((const uint8_t *)name, n, out);
}

/* The bucket name a token stands for, into out; 0, or -1 when it is not one of ours. */
static int bucket_token_name(const char *token, char *out, size_t cap)
{
	long n = ft_base64url_decode(token, strlen(token), (uint8_t *)out, cap - 1);

	if (n <= 0)
		return -1;
	out[n] = '\0';
	return strlen(out) == (size_t)n ? 0 : -1;
}

/* ListBuckets: the names the S3 API reaches (ais and remote buckets, each name once), sorted, paged with max-buckets
 * and continuation-token, filtered by prefix. */
void px_s3_list_buckets(px_s3_req_t *q)
{
	const char *qmax = ft_req_query(q->r, "max-buckets"), *token = ft_req_query(q->r, "continuation-token");
	const char *prefix = ft_req_query(q->r, "prefix");
	char after[FT_BUCKET_NAME_MAX * 2 + 8] = "", next[FT_BASE64_LEN(FT_BUCKET_NAME_MAX * 2) + 8];
	long max = LIST_BUCKETS_MAX;

	if (qmax != NULL) {
		char *end = NULL;
		max = strtol(qmax, &end, 10);
		if (!*qmax || *end != '\0' || max < 1 || max > LIST_BUCKETS_MAX) {
			px_s3_error(q, PX_S3_INVALID_ARGUMENT, "max-buckets must be an integer between 1 and 10000");
			return;
		}
	}
	if (token != NULL && bucket_token_name(token, after, sizeof(after)) != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "The continuation token provided is incorrect");
		return;
	}
	bucket_row_t *rows;
	int n = bucket_rows(q, after, prefix, &rows);

	char date[40];
	px_xml_t x;
	px_xml_init(&x);
	px_xml_open_ns(&x, "ListAllMyBucketsResult");
	owner_xml(&x);
	px_xml_open(&x, "Buckets");
	int shown = n < max ? n : (int)max;
	for (int i = 0; i < shown; i++) {
		ft_date_format_iso8601(rows[i].created_ns, date, sizeof(date));
		px_xml_open(&x, "Bucket");
		px_xml_elem(&x, "Name", rows[i].name);
		px_xml_elem(&x, "CreationDate", date);
		px_xml_elem(&x, "BucketRegion", q->host->cfg->s3_region);
		px_xml_close(&x, "Bucket");
	}
	px_xml_close(&x, "Buckets");
	if (prefix != NULL)
		px_xml_elem(&x, "Prefix", prefix);
	if (shown < n) {
		bucket_token(rows[shown - 1].name, next, sizeof(next));
		px_xml_elem(&x, "ContinuationToken", next);
	}
	px_xml_close(&x, "ListAllMyBucketsResult");
	px_s3_send_xml(q, 200, &x);
}

/* ---- CreateBucket ---- */

/* An optional CreateBucketConfiguration; PX_S3_OK or MalformedXML (with *why). */
static px_s3_err_t check_create_body(const char *body, size_t len, const char **why)
{
	size_t i = 0;
	px_xml_doc_t *doc;

	while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
		i++;
	if (i == len)
		return PX_S3_OK;
	doc = px_xml_parse(body, len, why);
	if (doc == NULL)
		return PX_S3_MALFORMED_XML;
	bool ok = strcmp(px_xml_root(doc)->name, "CreateBucketConfiguration") == 0;
	px_xml_doc_free(doc);
	if (!ok) {
		*why = "the root element must be CreateBucketConfiguration";
		return PX_S3_MALFORMED_XML;
	}
	/* Any LocationConstraint is accepted: the cluster is one location. */
	return PX_S3_OK;
}

static void create_work(px_s3_req_t *q)
{
	const char *why = NULL;
	char *body = NULL;
	size_t len = 0;
	px_s3_err_t e = px_s3_body_all(q, CREATE_BODY_MAX, &body, &len);

	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	e = check_create_body(body, len, &why);
	free(body);
	if (e != PX_S3_OK) {
		px_s3_error(q, e, "%s", why);
		return;
	}
	/* a remote bucket of the name is the one S3 clients reach by it: it exists, nothing is created to shadow it */
	char provider[16], all[64];
	int rc = px_s3_bucket_lookup(q->bucket, provider, all, sizeof(all)) > 0 && strcmp(provider, "ais") != 0
			 ? -EEXIST
			 : q->host->bucket_create(q->host->ctx, q->bucket, FT_CKSUM_MD5);
	if (rc == -EEXIST && strcmp(q->host->cfg->s3_region, "us-east-1") != 0) {
		px_s3_error(q, PX_S3_BUCKET_EXISTS_OWNED, NULL);
		return;
	}
	/* In us-east-1 S3 answers 200 to recreating a bucket one owns (and changes nothing). */
	if (rc == -EAGAIN) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "cannot change the bucket metadata now: try again");
		return;
	}
	if (rc != 0 && rc != -EEXIST) {
		px_s3_error(q, PX_S3_INTERNAL, "cannot update the bucket metadata");
		return;
	}
	if (rc == 0 && q->acl == PX_S3_ACL_PUBLIC_READ && q->host->bucket_set_acl(q->host->ctx, q->bucket, true) != 0) {
		px_s3_error(q, PX_S3_INTERNAL, "the bucket was created, but its ACL could not be set");
		return;
	}
	ft_resp_headerf(q->r, "Location", "/%s", q->bucket);
	px_s3_send_empty(q, 200);
}

void px_s3_bucket_create(px_s3_req_t *q)
{
	const char *why = NULL;

	if (px_s3_check_bucket_name(q->bucket, &why) != 0) {
		px_s3_error(q, PX_S3_INVALID_BUCKET_NAME, "%s", why);
		return;
	}
	if (px_s3_acl_header(q))
		px_s3_defer(q, create_work);
}

/* ---- HeadBucket, GetBucketLocation ---- */

void px_s3_bucket_head(px_s3_req_t *q)
{
	ft_resp_header(q->r, "x-amz-bucket-region", q->host->cfg->s3_region);
	px_s3_send_empty(q, 200);
}

void px_s3_bucket_location(px_s3_req_t *q)
{
	const char *region = q->host->cfg->s3_region;
	px_xml_t x;

	px_xml_init(&x);
	px_xml_open_ns(&x, "LocationConstraint");
	/* S3 reports its original region as an empty constraint; clients map that to us-east-1. */
	if (strcmp(region, "us-east-1") != 0)
		px_xml_text(&x, region, strlen(region));
	px_xml_close(&x, "LocationConstraint");
	px_s3_send_xml(q, 200, &x);
}

/* ---- DeleteBucket ---- */

static void delete_work(px_s3_req_t *q)
{
	json_t *entries = NULL;
	bool more = false;
	int status = 0;
	char why[512];

	if (q->host->list_page(q->host->ctx, q->bucket, "", "", 1, &entries, &more, &status, why, sizeof(why)) != 0) {
		px_s3_error(q, status == 503 ? PX_S3_SERVICE_UNAVAILABLE : PX_S3_INTERNAL, "%s", why);
		return;
	}
	size_t n = json_array_size(entries);
	json_decref(entries);
	if (n > 0) {
		px_s3_error(q, PX_S3_BUCKET_NOT_EMPTY, NULL);
		return;
	}
	int rc = q->host->bucket_destroy(q->host->ctx, q->bucket);
	if (rc == -ENOENT)
		px_s3_error(q, PX_S3_NO_SUCH_BUCKET, NULL);
	else if (rc == -EAGAIN)
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "cannot change the bucket metadata now: try again");
	else if (rc != 0)
		px_s3_error(q, PX_S3_INTERNAL, "cannot update the bucket metadata");
	else
		px_s3_send_empty(q, 204);
}

void px_s3_bucket_delete(px_s3_req_t *q)
{
	px_s3_defer(q, delete_work);
}

/* ---- configuration subresources ---- */

/* GET answers for configurations that are never set here: what S3 says when they are unset. */
typedef struct {
	const char *sub;
	const char *empty_doc; /* root element of an empty 200 document, or NULL */
	px_s3_err_t unset;     /* the 404 S3 gives when unset (when empty_doc is NULL) */
} probe_t;

static const probe_t probes[] = {
	{"versioning", "VersioningConfiguration", PX_S3_OK},
	{"logging", "BucketLoggingStatus", PX_S3_OK},
	{"notification", "NotificationConfiguration", PX_S3_OK},
	{"accelerate", "AccelerateConfiguration", PX_S3_OK},
	{"policy", NULL, PX_S3_NO_SUCH_POLICY},
	{"policyStatus", NULL, PX_S3_NO_SUCH_POLICY},
	{"lifecycle", NULL, PX_S3_NO_SUCH_LIFECYCLE},
	{"cors", NULL, PX_S3_NO_SUCH_CORS},
	{"tagging", NULL, PX_S3_NO_SUCH_TAG_SET},
	{"website", NULL, PX_S3_NO_SUCH_WEBSITE},
	{"encryption", NULL, PX_S3_NO_ENCRYPTION},
	{"object-lock", NULL, PX_S3_NO_OBJECT_LOCK},
	{"replication", NULL, PX_S3_NO_REPLICATION},
	{"ownershipControls", NULL, PX_S3_NO_OWNERSHIP_CONTROLS},
	{"publicAccessBlock", NULL, PX_S3_NO_PUBLIC_ACCESS_BLOCK},
};

/* The owner has FULL_CONTROL ("private"); public-read adds READ for AllUsers. */
void px_s3_send_acl(px_s3_req_t *q, bool public_read)
{
	px_xml_t x;

	px_xml_init(&x);
	px_xml_open_ns(&x, "AccessControlPolicy");
	owner_xml(&x);
	px_xml_open(&x, "AccessControlList");
	px_xml_open(&x, "Grant");
	/* px_xml_open writes the tag as given: here with the attributes a Grantee needs */
	px_xml_open(&x, "Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\"");
	px_xml_elem(&x, "ID", OWNER_ID);
	px_xml_elem(&x, "DisplayName", OWNER_ID);
	px_xml_close(&x, "Grantee");
	px_xml_elem(&x, "Permission", "FULL_CONTROL");
	px_xml_close(&x, "Grant");
	if (public_read) {
		px_xml_open(&x, "Grant");
		px_xml_open(&x, "Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"Group\"");
		px_xml_elem(&x, "URI", "http://acs.amazonaws.com/groups/global/AllUsers");
		px_xml_close(&x, "Grantee");
		px_xml_elem(&x, "Permission", "READ");
		px_xml_close(&x, "Grant");
	}
	px_xml_close(&x, "AccessControlList");
	px_xml_close(&x, "AccessControlPolicy");
	px_s3_send_xml(q, 200, &x);
}

static void empty_doc(px_s3_req_t *q, const char *root)
{
	px_xml_t x;

	px_xml_init(&x);
	px_xml_open_ns(&x, root);
	if (strcmp(root, "RequestPaymentConfiguration") == 0)
		px_xml_elem(&x, "Payer", "BucketOwner");
	px_xml_close(&x, root);
	px_s3_send_xml(q, 200, &x);
}

void px_s3_bucket_subresource(px_s3_req_t *q, const char *sub)
{
	ft_method_t m = ft_req_method(q->r);

	if ((m == FT_HTTP_GET || m == FT_HTTP_PUT) && strcmp(sub, "acl") == 0) {
		px_s3_bucket_acl(q); /* acl.c */
		return;
	}
	if (m == FT_HTTP_GET && strcmp(sub, "requestPayment") == 0) {
		empty_doc(q, "RequestPaymentConfiguration");
		return;
	}
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		if (strcmp(probes[i].sub, sub) != 0)
			continue;
		if (m == FT_HTTP_GET && probes[i].empty_doc != NULL)
			empty_doc(q, probes[i].empty_doc);
		else if (m == FT_HTTP_GET)
			px_s3_error(q, probes[i].unset, NULL);
		else if (m == FT_HTTP_DELETE && probes[i].empty_doc == NULL)
			px_s3_send_empty(q, 204); /* nothing is ever set, so deleting it succeeds */
		else
			break;
		return;
	}
	px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "%s ?%s is not implemented", ft_req_method_name(q->r), sub);
}
