/* SPDX-License-Identifier: Apache-2.0 */
/* Canned ACLs on the native API: which anonymous requests may go on (public-read data), and the public-access switch. */
#include "proxy.h"

#include <string.h>

#include "auth/auth.h"
#include "base/log.h"

/*
 * DESIGN
 * With auth on, a request without credentials normally gets 401. Public access (allow_public_read)
 * lets an anonymous GET or HEAD through in two cases: an object, which the proxy redirects
 * unsigned, so that only its target may serve it, after reading the bucket's and the object's
 * ACL (target/obj/acl.c); and a bucket whose ACL is public-read in the BMD (its listing, its
 * HEAD). Nothing else is ever anonymous: writes, jobs, ACL changes, cluster state.
 */

bool px_acl_anonymous(ft_req_t *r)
{
	return ft_req_header(r, "Authorization") == NULL && ft_req_query(r, "X-Amz-Signature") == NULL;
}

/* Whether bucket (provider "ais" or the query's) has the public-read ACL. */
static bool bucket_public(ft_req_t *r, const char *bucket)
{
	const char *provider = ft_req_query(r, "provider");
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b;
	bool pub;

	if (provider == NULL || provider[0] == '\0')
		provider = "ais";
	b = bmd != NULL ? ft_bmd_find(bmd, provider, bucket) : NULL;
	pub = b != NULL && b->public_read;
	ft_bmd_put(bmd);
	return pub;
}

bool px_acl_anonymous_ok(ft_req_t *r, const char *rule_path, const char *bucket)
{
	ft_method_t m = ft_req_method(r);

	if (!ft_auth()->public_read || (m != FT_HTTP_GET && m != FT_HTTP_HEAD) || bucket[0] == '\0')
		return false;
	if (strcmp(rule_path, "/v1/objects/") == 0)
		return ft_req_query(r, "mpu") == NULL && ft_req_query(r, "uploadId") == NULL; /* no multipart calls */
	if (strcmp(rule_path, "/v1/buckets/") != 0 || !bucket_public(r, bucket))
		return false;
	if (m == FT_HTTP_HEAD)
		return ft_req_query(r, "bsumm_remote") == NULL && ft_req_query(r, "uuid") == NULL; /* no summary jobs */
	return ft_req_content_length(r) <= 0; /* a listing by query; AIStore's action messages need credentials */
}

bool px_acl_refused(ft_req_t *r, const char *acl)
{
	if (acl == NULL || strcmp(acl, "public-read") != 0 || ft_auth()->public_read)
		return false;
	ft_info("acl: public-read refused on %s: public access is off (allow_public_read)", ft_req_path(r, NULL));
	ft_resp_error(r, 403,
		      "public-read is not allowed on this cluster: public access is off (config "
		      "allow_public_read)");
	return true;
}
