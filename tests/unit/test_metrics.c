/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/base/metrics: sharded adds from many threads, histograms, labels, roles and collectors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/metrics.h"

#define THREADS 8
#define ADDS 100000

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		ft_metric_add(FT_M_HTTP_REQUESTS, FT_M_OP_PUT, 1, 1);
		ft_metric_add(FT_M_HTTP_OPEN_CONNECTIONS, 0, 0, 1);
		ft_metric_add(FT_M_HTTP_OPEN_CONNECTIONS, 0, 0, (uint64_t)-1);
	}
	return NULL;
}

static void test_threads_lose_no_add(void **state)
{
	pthread_t th[THREADS];
	int64_t before = ft_metric_value(FT_M_HTTP_REQUESTS, FT_M_OP_PUT, 1);

	(void)state;
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, adder, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(ft_metric_value(FT_M_HTTP_REQUESTS, FT_M_OP_PUT, 1) - before, (int64_t)THREADS * ADDS);
	assert_int_equal(ft_metric_value(FT_M_HTTP_OPEN_CONNECTIONS, 0, 0), 0); /* a gauge goes up and down */
}

/* The value of the sample line that starts with prefix (followed by a space) in text; -1 when absent. */
static double sample(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
			return atof(p + n + 1);
	return -1;
}

static void test_histogram_is_cumulative(void **state)
{
	ft_strbuf_t out = {0};

	(void)state;
	ft_metric_observe_ns(FT_M_HTTP_DURATION, FT_M_OP_GET, FT_M_CACHE_COLD, 300000);       /* 0.3 ms */
	ft_metric_observe_ns(FT_M_HTTP_DURATION, FT_M_OP_GET, FT_M_CACHE_COLD, 20000000);     /* 20 ms */
	ft_metric_observe_ns(FT_M_HTTP_DURATION, FT_M_OP_GET, FT_M_CACHE_COLD, 100000000000); /* 100 s */
	ft_metrics_render(&out);
	assert_false(out.failed);
	const char *h = "ft_http_request_duration_seconds";
	char key[200];
	snprintf(key, sizeof(key), "%s_bucket{op=\"GET\",cache=\"cold\",le=\"0.0005\"}", h);
	assert_true(sample(out.p, key) == 1);
	snprintf(key, sizeof(key), "%s_bucket{op=\"GET\",cache=\"cold\",le=\"0.025\"}", h);
	assert_true(sample(out.p, key) == 2);
	snprintf(key, sizeof(key), "%s_bucket{op=\"GET\",cache=\"cold\",le=\"30\"}", h);
	assert_true(sample(out.p, key) == 2);
	snprintf(key, sizeof(key), "%s_bucket{op=\"GET\",cache=\"cold\",le=\"+Inf\"}", h);
	assert_true(sample(out.p, key) == 3);
	snprintf(key, sizeof(key), "%s_count{op=\"GET\",cache=\"cold\"}", h);
	assert_true(sample(out.p, key) == 3);
	snprintf(key, sizeof(key), "%s_sum{op=\"GET\",cache=\"cold\"}", h);
	assert_true(sample(out.p, key) > 100.02 && sample(out.p, key) < 100.03);
	assert_non_null(strstr(out.p, "# TYPE ft_http_request_duration_seconds histogram\n"));
	ft_strbuf_free(&out);
}

static void test_label_index_and_other(void **state)
{
	(void)state;
	unsigned ht = ft_metric_label_index(FT_M_COLDGET_BYTES, "ht");
	unsigned other = ft_metric_label_index(FT_M_COLDGET_BYTES, "nope");
	assert_int_not_equal(ht, other);
	assert_int_equal(ft_metric_label_index(FT_M_COLDGET_BYTES, NULL), other);
	assert_int_equal(ft_metric_label_index(FT_M_JOB_OBJECTS, "rebalance"), 0);
	/* a label past the family's values lands on its last value, never outside the family */
	int64_t before = ft_metric_value(FT_M_COLDGET_BYTES, other, 0);
	ft_metric_add(FT_M_COLDGET_BYTES, 1000, 7, 5);
	assert_int_equal(ft_metric_value(FT_M_COLDGET_BYTES, other, 0) - before, 5);
}

static void collect(ft_strbuf_t *out, void *arg)
{
	ft_metrics_family(out, "ft_test_gauge", "A test gauge.", "gauge");
	ft_strbuf_adds(out, "ft_test_gauge{path=\"");
	ft_metrics_escape(out, arg);
	ft_strbuf_adds(out, "\"} 1\n");
}

static void test_roles_and_collectors(void **state)
{
	ft_strbuf_t out = {0};

	(void)state;
	ft_metrics_set_role(FT_M_ROLE_PROXY);
	assert_int_equal(ft_metrics_add_collector(collect, "a\"b\\c\nd"), 0);
	ft_metrics_render(&out);
	assert_null(strstr(out.p, "ft_cache_hits_total"));
	assert_non_null(strstr(out.p, "ft_s3_relay_retries_total 0\n"));
	assert_non_null(strstr(out.p, "ft_test_gauge{path=\"a\\\"b\\\\c\\nd\"} 1\n"));
	ft_strbuf_free(&out);
	ft_metrics_remove_collector(collect, "a\"b\\c\nd");
	ft_metrics_set_role(FT_M_ROLE_TARGET);
	ft_metrics_render(&out);
	assert_null(strstr(out.p, "ft_test_gauge"));
	assert_null(strstr(out.p, "ft_s3_relay_retries_total"));
	assert_non_null(strstr(out.p, "ft_cache_hits_total 0\n"));
	ft_strbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_lose_no_add),
		cmocka_unit_test(test_histogram_is_cumulative),
		cmocka_unit_test(test_label_index_and_other),
		cmocka_unit_test(test_roles_and_collectors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
