/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for configuration: defaults, file + flag precedence, --mountpath, derived keys, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <unistd.h>

#include "base/config.h"

#define ARGV(...) ((char *[]){"ft-test", __VA_ARGS__, NULL})

static int argc_of(char **argv)
{
	int n = 0;

	while (argv[n] != NULL)
		n++;
	return n;
}

#define MAX_TEMP_FILES 64
static char temp_files[MAX_TEMP_FILES][64];
static int n_temp_files;

/* Writes text to a fresh temp file; returns its path (removed at the end of the run). */
static const char *write_file(const char *text)
{
	char *path;
	FILE *f;
	int fd;

	assert_true(n_temp_files < MAX_TEMP_FILES);
	path = temp_files[n_temp_files++];
	snprintf(path, sizeof(temp_files[0]), "/tmp/ft-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Loads argv and expects success. */
static void load_ok(ft_config_t *c, char **argv)
{
	char err[256] = "";

	if (ft_config_load(c, argc_of(argv), argv, err, sizeof(err)) != 0)
		fail_msg("load failed: %s", err);
}

/* Loads argv, expects failure with a message containing needle (the key at fault). */
static void load_fails(char **argv, const char *needle)
{
	ft_config_t c;
	char err[256] = "";

	if (ft_config_load(&c, argc_of(argv), argv, err, sizeof(err)) == 0)
		fail_msg("accepted: %s %s", argv[1], argv[2] != NULL ? argv[2] : "");
	ft_config_free(&c);
	if (strstr(err, needle) == NULL)
		fail_msg("message \"%s\" does not name \"%s\"", err, needle);
}

static void test_defaults(void **state)
{
	ft_config_t c;

	(void)state;
	load_ok(&c, (char *[]){"ft-test", NULL});
	assert_string_equal(c.id, "");
	assert_string_equal(c.bind, "127.0.0.1");
	assert_int_equal(c.public_port, 51080);
	assert_string_equal(c.public_host, "127.0.0.1");
	assert_int_equal(c.control_port, 51081);
	assert_string_equal(c.control_host, "127.0.0.1");
	assert_string_equal(c.proxy_url, "");
	assert_string_equal(c.state_dir, ".");
	assert_int_equal(c.n_mountpaths, 0);
	assert_int_equal(c.log_level, FT_LOG_INFO);
	assert_int_equal(c.loop_threads, 0);
	assert_int_equal(c.worker_threads, 64);
	assert_int_equal(c.keepalive_ms, 2000);
	assert_int_equal(c.sync, FT_SYNC_NONE);
	assert_true(c.reserve_bytes == 64 << 20);
	assert_int_equal(c.http_max_header_bytes, 16384);
	assert_int_equal(c.http_max_headers, 100);
	assert_int_equal(c.http_idle_timeout_ms, 60000);
	assert_int_equal(c.http_header_timeout_ms, 10000);
	assert_int_equal(c.http_body_timeout_ms, 30000);
	assert_int_equal(c.s3_relay_timeout_ms, 30000);
	ft_config_free(&c);

	/* ft_config_defaults alone gives the same values. */
	ft_config_defaults(&c);
	assert_int_equal(c.control_port, 51081);
	assert_string_equal(c.public_host, "127.0.0.1");
	ft_config_free(&c);
}

static void test_file_then_flags(void **state)
{
	const char *path =
		write_file("{\"id\": \"t1\", \"bind\": \"0.0.0.0\", \"public_port\": 9000,"
			   " \"public_host\": \"10.0.0.5\", \"proxy_url\": \"http://p:1\","
			   " \"mountpaths\": [\"/m1\", \"/m2\"], \"log_level\": \"warn\", \"sync\": \"data\","
			   " \"worker_threads\": 3, \"reserve_bytes\": 1099511627776,"
			   " \"http_max_headers\": 50}");
	ft_config_t c;

	(void)state;
	/* File only. */
	load_ok(&c, ARGV("--config", (char *)path));
	assert_string_equal(c.id, "t1");
	assert_string_equal(c.bind, "0.0.0.0");
	assert_int_equal(c.public_port, 9000);
	assert_int_equal(c.control_port, 9001); /* derived from the file's public_port */
	assert_string_equal(c.public_host, "10.0.0.5");
	assert_string_equal(c.control_host, "10.0.0.5"); /* follows public_host */
	assert_string_equal(c.proxy_url, "http://p:1");
	assert_int_equal(c.n_mountpaths, 2);
	assert_string_equal(c.mountpaths[0], "/m1");
	assert_string_equal(c.mountpaths[1], "/m2");
	assert_int_equal(c.log_level, FT_LOG_WARN);
	assert_int_equal(c.sync, FT_SYNC_DATA);
	assert_int_equal(c.worker_threads, 3);
	assert_true(c.reserve_bytes == 1099511627776LL);
	assert_int_equal(c.http_max_headers, 50);
	ft_config_free(&c);

	/* The --config=FILE spelling, with a flag before it that still wins. */
	char flag[128];
	snprintf(flag, sizeof(flag), "--config=%s", path);
	load_ok(&c, ARGV("--public_port=7000", flag));
	assert_int_equal(c.public_port, 7000);
	assert_int_equal(c.control_port, 7001);
	assert_string_equal(c.id, "t1");
	ft_config_free(&c);
	load_fails(ARGV("--config="), "config");
}

static void test_flags_override_file(void **state)
{
	const char *path = write_file("{\"public_port\": 9000, \"control_port\": 9500, \"log_level\": \"warn\","
				      " \"mountpaths\": [\"/m1\", \"/m2\"], \"sync\": \"full\"}");
	ft_config_t c;

	(void)state;
	load_ok(&c, ARGV("--public_port=7000", "--log_level", "debug", "--config", (char *)path, "--sync=none",
			 "--public-host", "h.example"));
	assert_int_equal(c.public_port, 7000);
	assert_int_equal(c.control_port, 9500); /* explicit in the file: not derived */
	assert_int_equal(c.log_level, FT_LOG_DEBUG);
	assert_int_equal(c.sync, FT_SYNC_NONE);
	assert_string_equal(c.public_host, "h.example");
	assert_string_equal(c.control_host, "h.example");
	assert_string_equal(c.bind, "127.0.0.1");
	assert_int_equal(c.n_mountpaths, 2); /* untouched without --mountpath */
	ft_config_free(&c);
}

static void test_mountpath_flags(void **state)
{
	const char *path = write_file("{\"mountpaths\": [\"/file1\", \"/file2\", \"/file3\"]}");
	ft_config_t c;

	(void)state;
	/* The first --mountpath replaces the file's list; later ones append. */
	load_ok(&c, ARGV("--config", (char *)path, "--mountpath", "/a", "--mountpath=/b", "--id", "x", "--mountpath",
			 "/c"));
	assert_int_equal(c.n_mountpaths, 3);
	assert_string_equal(c.mountpaths[0], "/a");
	assert_string_equal(c.mountpaths[1], "/b");
	assert_string_equal(c.mountpaths[2], "/c");
	ft_config_free(&c);
	assert_int_equal(c.n_mountpaths, 0);
	ft_config_free(&c); /* twice is harmless */

	/* Without a file. */
	load_ok(&c, ARGV("--mountpath", "/only"));
	assert_int_equal(c.n_mountpaths, 1);
	assert_string_equal(c.mountpaths[0], "/only");
	ft_config_free(&c);

	/* Duplicates and too many are rejected. */
	load_fails(ARGV("--mountpath", "/a", "--mountpath", "/a"), "mountpaths");
	char *many[2 * FT_MAX_MOUNTPATHS + 4];
	char names[FT_MAX_MOUNTPATHS + 1][16];
	int n = 0;
	many[n++] = "ft-test";
	for (int i = 0; i <= FT_MAX_MOUNTPATHS; i++) {
		snprintf(names[i], sizeof(names[i]), "/m%d", i);
		many[n++] = "--mountpath";
		many[n++] = names[i];
	}
	many[n] = NULL;
	load_fails(many, "mountpaths");
	many[n - 2] = NULL; /* exactly FT_MAX_MOUNTPATHS is fine */
	load_ok(&c, many);
	assert_int_equal(c.n_mountpaths, FT_MAX_MOUNTPATHS);
	ft_config_free(&c);
	load_fails(ARGV("--mountpath="), "mountpaths");
}

static void test_derived_ports(void **state)
{
	ft_config_t c;

	(void)state;
	load_ok(&c, ARGV("--public_port", "6000"));
	assert_int_equal(c.control_port, 6001);
	ft_config_free(&c);
	load_ok(&c, ARGV("--public_port", "6000", "--control_port", "7000"));
	assert_int_equal(c.control_port, 7000);
	ft_config_free(&c);
	load_ok(&c, ARGV("--bind", "10.1.2.3"));
	assert_string_equal(c.public_host, "10.1.2.3");
	assert_string_equal(c.control_host, "10.1.2.3");
	ft_config_free(&c);
	load_ok(&c, ARGV("--bind", "10.1.2.3", "--control_host", "c.example"));
	assert_string_equal(c.public_host, "10.1.2.3");
	assert_string_equal(c.control_host, "c.example");
	ft_config_free(&c);
	load_ok(&c, ARGV("--public_port", "65534"));
	assert_int_equal(c.control_port, 65535);
	ft_config_free(&c);
	/* 65535 + 1 does not exist: the message says which key to set. */
	load_fails(ARGV("--public_port", "65535"), "control_port");
	load_ok(&c, ARGV("--public_port", "65535", "--control_port", "1"));
	ft_config_free(&c);
	load_fails(ARGV("--public_port", "7000", "--control_port", "7000"), "control_port");
}

static void test_bad_values(void **state)
{
	(void)state;
	load_fails(ARGV("--public_port", "0"), "public_port");
	load_fails(ARGV("--public_port", "65536"), "public_port");
	load_fails(ARGV("--public_port", "-1"), "public_port");
	load_fails(ARGV("--public_port", "80x"), "public_port");
	load_fails(ARGV("--public_port", ""), "public_port");
	load_fails(ARGV("--public_port", " 80"), "public_port");
	load_fails(ARGV("--public_port", "99999999999999999999"), "public_port");
	load_fails(ARGV("--control_port", "70000"), "control_port");
	load_fails(ARGV("--sync", "always"), "sync");
	load_fails(ARGV("--sync", "FULL"), "sync");
	load_fails(ARGV("--log_level", "verbose"), "log_level");
	load_fails(ARGV("--log-format", "xml"), "log_format");
	load_fails(ARGV("--worker_threads", "0"), "worker_threads");
	load_fails(ARGV("--loop_threads", "-2"), "loop_threads");
	load_fails(ARGV("--reserve_bytes", "-1"), "reserve_bytes");
	load_fails(ARGV("--s3_relay_timeout_ms", "99"), "s3_relay_timeout_ms");
	load_fails(ARGV("--s3_relay_timeout_ms", "3600001"), "s3_relay_timeout_ms");
	load_fails(ARGV("--bind", ""), "bind");
	load_fails(ARGV("--state_dir="), "state_dir");
	load_fails(ARGV("--nonsense", "1"), "nonsense");
	load_fails(ARGV("--help"), "help");
	load_fails(ARGV("positional"), "positional");
	load_fails(ARGV("--id"), "id");
	char longid[FT_ID_MAX + 8];
	memset(longid, 'i', FT_ID_MAX);
	longid[FT_ID_MAX] = '\0';
	load_fails(ARGV("--id", longid), "id");
	longid[FT_ID_MAX - 1] = '\0'; /* 63 bytes fit */
	ft_config_t c;
	load_ok(&c, ARGV("--id", longid));
	assert_int_equal(strlen(c.id), FT_ID_MAX - 1);
	ft_config_free(&c);
}

static void test_urls(void **state)
{
	ft_config_t c;

	(void)state;
	load_fails(ARGV("--proxy_url", "localhost:51081"), "proxy_url");
	load_fails(ARGV("--proxy_url", "http://a:1,b:1"), "proxy_url");
	load_fails(ARGV("--proxy_url", "http://a:1,"), "comma");
	load_fails(ARGV("--proxy_url", "http://"), "proxy_url");
	load_fails(ARGV("--proxy_url", "http://a:1,,http://b:1"), "proxy_url");
	load_fails(ARGV("--etcd", "127.0.0.1:2379"), "etcd");
	load_fails(ARGV("--etcd", "ftp://e:2379"), "etcd");
	load_fails(ARGV("--etcd", "http://a:1,http://b:1"), "etcd");
	load_ok(&c, ARGV("--proxy_url", "http://a:1,https://b:2/x", "--etcd", "http://e:2379"));
	assert_string_equal(c.proxy_url, "http://a:1,https://b:2/x");
	assert_string_equal(c.etcd, "http://e:2379");
	ft_config_free(&c);
	load_ok(&c, ARGV("--etcd", "https://e:2379", "--etcd_cert", "/c.pem", "--etcd_key", "/c.key"));
	assert_string_equal(c.etcd, "https://e:2379");
	assert_string_equal(c.etcd_cert, "/c.pem");
	assert_string_equal(c.etcd_key, "/c.key");
	ft_config_free(&c);
	load_ok(&c, ARGV("--proxy_url", ""));
	assert_string_equal(c.proxy_url, "");
	ft_config_free(&c);
}

static void test_log_format_and_take_flag(void **state)
{
	char a0[] = "ft", a1[] = "--check-config", a2[] = "--log-format", a3[] = "json", a4[] = "--check-config";
	char *argv[] = {a0, a1, a2, a3, a4, NULL};
	int argc = 5;
	ft_config_t c;

	(void)state;
	assert_int_equal(ft_config_take_flag(&argc, argv, "--check-config"), 2);
	assert_int_equal(argc, 3);
	assert_string_equal(argv[1], "--log-format");
	assert_string_equal(argv[2], "json");
	assert_null(argv[3]);
	assert_int_equal(ft_config_take_flag(&argc, argv, "--check-config"), 0);
	ft_config_defaults(&c);
	assert_int_equal(c.log_format, FT_LOG_TEXT);
	char err[256] = "";
	assert_int_equal(ft_config_load(&c, argc, argv, err, sizeof(err)), 0);
	assert_int_equal(c.log_format, FT_LOG_JSON);
	ft_config_free(&c);
}

static void test_bad_files(void **state)
{
	(void)state;
	load_fails(ARGV("--config", "/nonexistent/ft.json"), "/nonexistent/ft.json");
	load_fails(ARGV("--config", (char *)write_file("{\"public_port\": 80,")), "config file");
	load_fails(ARGV("--config", (char *)write_file("[1, 2]")), "JSON object");
	load_fails(ARGV("--config", (char *)write_file("{\"public_port\": \"80\"}")), "public_port");
	load_fails(ARGV("--config", (char *)write_file("{\"public_port\": 0}")), "public_port");
	load_fails(ARGV("--config", (char *)write_file("{\"public_port\": 8.5}")), "public_port");
	load_fails(ARGV("--config", (char *)write_file("{\"log_level\": 1}")), "log_level");
	load_fails(ARGV("--config", (char *)write_file("{\"sync\": \"sometimes\"}")), "sync");
	load_fails(ARGV("--config", (char *)write_file("{\"mountpaths\": \"/m\"}")), "mountpaths");
	load_fails(ARGV("--config", (char *)write_file("{\"mountpaths\": [\"/m\", 3]}")), "mountpaths");
	load_fails(ARGV("--config", (char *)write_file("{\"bogus\": 1}")), "bogus");
	load_fails(ARGV("--config", (char *)write_file("{\"id\": null}")), "id");
	load_fails(ARGV("--config", (char *)write_file("{\"id\": \"a\", \"id\": \"b\"}")), "config file");
	/* A bad flag is reported even when the file is fine. */
	const char *ok = write_file("{\"public_port\": 9000}");
	load_fails(ARGV("--config", (char *)ok, "--sync", "x"), "sync");
	load_fails(ARGV("--config", (char *)ok, "--config", (char *)ok), "config");
}

static int remove_temp_files(void **state)
{
	(void)state;
	for (int i = 0; i < n_temp_files; i++)
		unlink(temp_files[i]);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_file_then_flags),
		cmocka_unit_test(test_flags_override_file),
		cmocka_unit_test(test_mountpath_flags),
		cmocka_unit_test(test_derived_ports),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_log_format_and_take_flag),
	};
	return cmocka_run_group_tests(tests, NULL, remove_temp_files);
}
