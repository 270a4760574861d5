/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ft-loader's URL splitting and host table: http and https URLs, one host per scheme and authority. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "loader.h"

static void split_ok(const char *url, const char *auth_want, const char *path_want, bool tls_want)
{
	const char *auth, *path;
	size_t alen;
	bool tls = !tls_want;

	assert_int_equal(ld_url_split(url, &auth, &alen, &path, &tls), 0);
	if (auth_want == NULL) {
		assert_null(auth);
	} else {
		assert_int_equal(alen, strlen(auth_want));
		assert_memory_equal(auth, auth_want, alen);
	}
	assert_string_equal(path, path_want);
	assert_int_equal(tls, tls_want);
}

static void test_url_split(void **state)
{
	const char *auth, *path;
	size_t alen;
	bool tls;

	(void)state;
	split_ok("http://127.0.0.1:80/v1/objects/b/o?x=1", "127.0.0.1:80", "/v1/objects/b/o?x=1", false);
	split_ok("https://127.0.0.1:51082/v1/objects/b/o", "127.0.0.1:51082", "/v1/objects/b/o", true);
	split_ok("HTTPS://h:1", "h:1", "/", true);
	split_ok("https://[::1]:9/x", "[::1]:9", "/x", true);
	split_ok("/v1/objects/b/o", NULL, "/v1/objects/b/o", false);
	assert_int_equal(ld_url_split("ftp://h/x", &auth, &alen, &path, &tls), -1);
	assert_int_equal(ld_url_split("https:///x", &auth, &alen, &path, &tls), -1);
	assert_int_equal(ld_url_split("httpss://h/x", &auth, &alen, &path, &tls), -1);
}

static int port_of(const ld_host_t *h)
{
	return ntohs(((const struct sockaddr_in *)&h->addr)->sin_port);
}

static void test_hosts_per_scheme(void **state)
{
	char err[256];
	int plain, tls, again, bare_tls, bare_plain, alias;

	(void)state;
	plain = ld_host_get("127.0.0.1:8080", 14, false, err, sizeof(err));
	tls = ld_host_get("127.0.0.1:8080", 14, true, err, sizeof(err));
	assert_true(plain >= 0 && tls >= 0);
	assert_int_not_equal(plain, tls); /* never a plain connection to a TLS host or the reverse */
	assert_false(ld_host_at(plain)->tls);
	assert_true(ld_host_at(tls)->tls);
	again = ld_host_get("127.0.0.1:8080", 14, true, err, sizeof(err));
	assert_int_equal(again, tls);
	assert_string_equal(ld_host_at(tls)->name, "127.0.0.1");

	/* a URL with user:password@ is refused without repeating the password */
	assert_int_equal(ld_host_get("u:S3CRET@127.0.0.1:8080", 23, false, err, sizeof(err)), -1);
	assert_null(strstr(err, "S3CRET"));
	assert_non_null(strstr(err, "user:password@"));

	bare_tls = ld_host_get("127.0.0.1", 9, true, err, sizeof(err));
	bare_plain = ld_host_get("127.0.0.1", 9, false, err, sizeof(err));
	assert_int_equal(port_of(ld_host_at(bare_tls)), 443);
	assert_int_equal(port_of(ld_host_at(bare_plain)), 80);

	/* an S3 virtual-hosted alias keeps the endpoint's TLS and certificate name */
	alias = ld_host_alias("bkt.127.0.0.1:8080", 18, tls, err, sizeof(err));
	assert_true(alias >= 0 && ld_host_at(alias)->tls);
	assert_string_equal(ld_host_at(alias)->name, "127.0.0.1");
	assert_string_equal(ld_host_at(alias)->authority, "bkt.127.0.0.1:8080");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_split),
		cmocka_unit_test(test_hosts_per_scheme),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
