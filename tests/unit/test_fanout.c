/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the fan-out pool: every index runs once, calls overlap, concurrent batches, 0 and 1 calls. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fanout.h"

#define CALLS 64

typedef struct {
	atomic_int runs[CALLS];
	atomic_int active; /* calls running now */
	atomic_int peak;   /* most calls seen running at once */
	int sleep_us;
} batch_t;

static void count_call(void *arg, int i)
{
	batch_t *b = arg;
	int now = atomic_fetch_add(&b->active, 1) + 1;
	int peak = atomic_load(&b->peak);

	while (now > peak && !atomic_compare_exchange_weak(&b->peak, &peak, now))
		;
	if (b->sleep_us > 0)
		usleep((useconds_t)b->sleep_us);
	atomic_fetch_add(&b->runs[i], 1);
	atomic_fetch_sub(&b->active, 1);
}

static void assert_each_once(batch_t *b, int n)
{
	for (int i = 0; i < CALLS; i++)
		assert_int_equal(atomic_load(&b->runs[i]), i < n ? 1 : 0);
}

static void test_every_index_once(void **state)
{
	static const int sizes[] = {0, 1, 2, 3, 4, 5, 17, CALLS};
	ft_fanout_t *f = ft_fanout_start(4);

	(void)state;
	assert_non_null(f);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		batch_t b;

		memset(&b, 0, sizeof(b));
		ft_fanout_run(f, count_call, &b, sizes[k]);
		assert_each_once(&b, sizes[k]);
		assert_int_equal(atomic_load(&b.active), 0);
	}
	ft_fanout_stop(f);
	ft_fanout_stop(NULL);
}

/* Calls that block overlap: 4 threads plus the caller run 5 sleeping calls at once. */
static void test_calls_overlap(void **state)
{
	ft_fanout_t *f = ft_fanout_start(4);
	batch_t b;

	(void)state;
	assert_non_null(f);
	memset(&b, 0, sizeof(b));
	b.sleep_us = 50000;
	ft_fanout_run(f, count_call, &b, 5);
	assert_each_once(&b, 5);
	assert_true(atomic_load(&b.peak) >= 2);
	ft_fanout_stop(f);
}

typedef struct {
	ft_fanout_t *f;
	batch_t b;
} caller_t;

static void *caller_main(void *arg)
{
	caller_t *c = arg;

	for (int round = 0; round < 50; round++) {
		memset(&c->b, 0, sizeof(c->b));
		ft_fanout_run(c->f, count_call, &c->b, CALLS);
		for (int i = 0; i < CALLS; i++)
			if (atomic_load(&c->b.runs[i]) != 1)
				return (void *)1;
	}
	return NULL;
}

/* Several threads run batches on one pool at once (a pool of 1): each batch still completes whole. */
static void test_concurrent_batches(void **state)
{
	ft_fanout_t *f = ft_fanout_start(1);
	caller_t callers[4];
	pthread_t th[4];

	(void)state;
	assert_non_null(f);
	for (int i = 0; i < 4; i++) {
		callers[i].f = f;
		assert_int_equal(pthread_create(&th[i], NULL, caller_main, &callers[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *rc = (void *)1;

		pthread_join(th[i], &rc);
		assert_null(rc);
	}
	ft_fanout_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_index_once),
		cmocka_unit_test(test_calls_overlap),
		cmocka_unit_test(test_concurrent_batches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
