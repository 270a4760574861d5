/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/base/redact: URLs as messages show them, without signatures, tokens or passwords. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/redact.h"

static void check(const char *url, const char *want)
{
	char out[FT_REDACT_URL_MAX];

	assert_ptr_equal(ft_redact_url(url, out, sizeof(out)), out);
	assert_string_equal(out, want);
}

static void test_presigned_s3(void **state)
{
	(void)state;
	check("https://b.s3.amazonaws.com/k/o.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20240101"
	      "&X-Amz-Security-Token=FwoG&X-Amz-Signature=abcdef0123&X-Amz-SignedHeaders=host",
	      "https://b.s3.amazonaws.com/k/o.bin?X-Amz-Algorithm=***&X-Amz-Credential=***&X-Amz-Security-Token=***"
	      "&X-Amz-Signature=***&X-Amz-SignedHeaders=***");
	check("http://h/o?AWSAccessKeyId=AKIA&Signature=c2ln&Expires=1", "http://h/o?AWSAccessKeyId=***&Signature=***"
									 "&Expires=***");
}

static void test_sas_and_cluster_urls(void **state)
{
	(void)state;
	check("https://acct.blob.core.windows.net/c/o?sv=2020&sig=SAS%2Bsig%3D#frag",
	      "https://acct.blob.core.windows.net/c/o?sv=***&sig=***");
	/* the cluster's own keys stay, its signature does not */
	check("http://127.0.0.1:8081/v1/objects/b/o?provider=aws&mpu=u1&part=3&ft_exp=1700000000&ft_sig=0123abcd",
	      "http://127.0.0.1:8081/v1/objects/b/o?provider=aws&mpu=u1&part=3&ft_exp=***&ft_sig=***");
	check("http://h/o?secrettoken&x=", "http://h/o?***&x=***");
}

static void test_userinfo_path_and_plain(void **state)
{
	(void)state;
	check("https://user:p%40ss@origin.example:8443/a/b?token=T", "https://origin.example:8443/a/b?token=***");
	check("http://origin/a@b/c", "http://origin/a@b/c"); /* an '@' in the path is no user information */
	check("http://origin/plain/path", "http://origin/plain/path");
	check("/v1/objects/b/o?ft_sig=x", "/v1/objects/b/o?ft_sig=***");
	check("//user:pw@host/p?sig=abc", "//host/p?sig=***"); /* scheme-relative, as a Location may be */
	check("", "");
	check("http://h/o?", "http://h/o?");
}

static void test_cut_to_cap(void **state)
{
	char out[24], mid[30];

	(void)state;
	ft_redact_url("http://h/aaaaaaaaaa?sig=SECRETSECRETSECRET", out, sizeof(out));
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_null(strstr(out, "SECRET"));
	/* a buffer that ends where the value begins: the cut is of the redacted URL, never of the secret */
	ft_redact_url("http://h/aaaaaaaaaa?sig=SECRETSECRETSECRET", mid, sizeof(mid));
	assert_string_equal(mid, "http://h/aaaaaaaaaa?sig=***");
	ft_redact_url("http://h/aaaaaaaaaa?sig=SECRETSECRETSECRET", mid, 27);
	assert_string_equal(mid, "http://h/aaaaaaaaaa?sig=**");
	ft_redact_url("http://h/o", out, 1);
	assert_string_equal(out, "");
	assert_string_equal(ft_redact_url(NULL, out, sizeof(out)), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_presigned_s3),
		cmocka_unit_test(test_sas_and_cluster_urls),
		cmocka_unit_test(test_userinfo_path_and_plain),
		cmocka_unit_test(test_cut_to_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
