/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for the control-port server (common/rpc/ctl.c): stopping it while requests keep arriving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpc/ctl.h"

/* Enough stops to lose libmicrohttpd's epoll race in about every other run; fewer under ThreadSanitizer (5x slower). */
#if defined(__SANITIZE_THREAD__)
#define STOP_ROUNDS 60
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STOP_ROUNDS 60
#endif
#endif
#ifndef STOP_ROUNDS
#define STOP_ROUNDS 500
#endif
#define CLIENTS 6

static atomic_int g_handled;    /* handler calls */
static atomic_int g_answered;   /* "200" status lines the clients read */
static atomic_int g_bad_status; /* other status lines */
static atomic_bool g_clients_stop;

static void echo_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	(void)ctx;
	atomic_fetch_add(&g_handled, 1);
	resp->json = json_pack("{s:s}", "path", req->path);
}

/* A loopback port nothing listens on just now (the kernel's pick for an ephemeral bind). */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* One request on a new connection; the status line's code is counted (a refused or cut connection is not). */
static void one_request(int port)
{
	static const char req[] = "GET /v1/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char buf[512];
	ssize_t n;
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons((uint16_t)port);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0) {
		close(fd);
		return;
	}
	while (got < sizeof(buf) - 1 && (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	if (got >= 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0)
		atomic_fetch_add(&g_answered, 1);
	else if (got >= 12)
		atomic_fetch_add(&g_bad_status, 1);
}

static void *client_loop(void *arg)
{
	int port = *(int *)arg;

	while (!atomic_load(&g_clients_stop))
		one_request(port);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * A daemon stops its control port while peers keep sending: the stop must never take the process down
 * (libmicrohttpd's epoll mode raced its own workers there and aborted), and every request is either
 * answered 200 or refused/cut, never answered with anything else.
 */
static void test_stop_under_load(void **state)
{
	pthread_t th[CLIENTS];
	char err[256];
	int round, i, port;

	(void)state;
	for (round = 0; round < STOP_ROUNDS; round++) {
		ft_ctl_t *s = NULL;

		for (i = 0; i < 5 && s == NULL; i++) { /* the free port may be taken again in between */
			port = free_port();
			s = ft_ctl_start("127.0.0.1", port, 4, echo_handler, NULL, err, sizeof(err));
		}
		assert_non_null(s);
		atomic_store(&g_clients_stop, false);
		for (i = 0; i < CLIENTS; i++)
			assert_int_equal(pthread_create(&th[i], NULL, client_loop, &port), 0);
		sleep_ms(1 + round % 3);
		ft_ctl_stop(s);
		atomic_store(&g_clients_stop, true);
		for (i = 0; i < CLIENTS; i++)
			pthread_join(th[i], NULL);
	}
	assert_true(atomic_load(&g_handled) > 0);
	assert_true(atomic_load(&g_answered) > 0);
	assert_int_equal(atomic_load(&g_bad_status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stop_under_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
