/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/cluster/local: which targets are dialed on their Unix socket, and that the dial never blocks. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/local.h"
#include "cluster/smap.h"

static char dir[64];
static int version = 1;

/* Installs a map whose one target listens at scheme://127.0.0.1:port, with the given socket path and host id. */
static void install_scheme(const char *scheme, int port, const char *path, const char *host)
{
	ft_smap_t *m = ft_smap_new();
	ft_node_t n = {0};

	assert_non_null(m);
	m->version = version++;
	snprintf(n.id, sizeof(n.id), "t1");
	n.type = FT_NODE_TARGET;
	snprintf(n.public_url, sizeof(n.public_url), "%s://127.0.0.1:%d", scheme, port);
	snprintf(n.control_url, sizeof(n.control_url), "http://127.0.0.1:%d", port + 1);
	snprintf(n.public_unix, sizeof(n.public_unix), "%s", path);
	snprintf(n.host_id, sizeof(n.host_id), "%s", host);
	assert_int_equal(ft_smap_add(m, &n), 0);
	assert_int_equal(ft_smap_install(m), 0);
}

static void install(int port, const char *path, const char *host)
{
	install_scheme("http", port, path, host);
}

/* A listener at path with the given backlog, never accepting. */
static int listener(const char *path, int backlog)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	return fd;
}

typedef struct {
	pid_t pid;
	int ctl; /* closing it ends the child */
} child_t;

/* A listener at path in a child process (a node is never dialed by itself), until child_end. */
static child_t child_listener(const char *path, int backlog)
{
	int ready[2], ctl[2];
	child_t c;
	char b;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(ctl), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(ready[0]);
		close(ctl[1]);
		int l = listener(path, backlog);
		if (write(ready[1], "r", 1) != 1 || read(ctl[0], &b, 1) < 0)
			_exit(1);
		close(l);
		_exit(0);
	}
	close(ready[1]);
	close(ctl[0]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	c.ctl = ctl[1];
	return c;
}

static void child_end(child_t c)
{
	int st;

	close(c.ctl);
	assert_int_equal(waitpid(c.pid, &st, 0), c.pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_host_id(void **state)
{
	char ns[64], want[128];
	ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);

	(void)state;
	assert_true(n > 0);
	ns[n] = '\0';
	const char *id = ft_host_id();
	assert_int_equal(strlen(id), 36 + 1 + strlen(ns)); /* boot id, "/", the mount namespace */
	snprintf(want, sizeof(want), "/%s", ns);
	assert_string_equal(id + 36, want);
}

/* A child listening at <dir>/name (its path into path), installed as the target at scheme://127.0.0.1:port. */
static child_t local_target(const char *name, const char *scheme, int port, char path[128])
{
	snprintf(path, 128, "%s/%s", dir, name);
	child_t l = child_listener(path, 16);
	install_scheme(scheme, port, path, ft_host_id());
	return l;
}

/* The target at that host:port, with this host id, is dialed on its socket: blocking unless asked otherwise. */
static void test_dial_local(void **state)
{
	char path[128];
	int fd;

	(void)state;
	child_t l = local_target("a.sock", "http", 40001, path);
	fd = ft_local_dial("127.0.0.1:40001", false, false);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	fd = ft_local_dial("127.0.0.1:40001", false, true);
	assert_true(fd >= 0);
	assert_int_not_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	/* another port, another host id, no socket path, a dead socket: TCP (-1) */
	assert_int_equal(ft_local_dial("127.0.0.1:40003", false, false), -1);
	assert_int_equal(ft_local_dial("127.0.0.1:4000", false, false), -1);
	install(40001, path, "0ac1c000-0000-0000-0000-000000000000/mnt:[1]");
	assert_int_equal(ft_local_dial("127.0.0.1:40001", false, false), -1);
	install(40001, "", ft_host_id());
	assert_int_equal(ft_local_dial("127.0.0.1:40001", false, false), -1);
	child_end(l);
	install(40001, path, ft_host_id());
	assert_int_equal(ft_local_dial("127.0.0.1:40001", false, false), -1); /* refused: nobody listens */
	/* this very process listening there (a dead node's path now ours): not taken for that node */
	int own = listener(path, 16);
	assert_int_equal(ft_local_dial("127.0.0.1:40001", false, false), -1);
	close(own);
	unlink(path);
}

/* A target whose public URL is https: its socket is dialed only when asked for https, and the other way round. */
static void test_dial_https(void **state)
{
	char path[128];
	int fd;

	(void)state;
	child_t l = local_target("h.sock", "https", 40021, path);
	assert_true(ft_local_known("127.0.0.1:40021", true));
	assert_false(ft_local_known("127.0.0.1:40021", false));
	assert_int_equal(ft_local_dial("127.0.0.1:40021", false, false), -1); /* an http caller: not this target */
	fd = ft_local_dial("127.0.0.1:40021", true, false);
	assert_true(fd >= 0);
	close(fd);
	install(40021, path, ft_host_id());
	assert_false(ft_local_known("127.0.0.1:40021", true));
	assert_int_equal(ft_local_dial("127.0.0.1:40021", true, false), -1);
	assert_true(ft_local_known("127.0.0.1:40021", false));
	child_end(l);
	unlink(path);
}

/* A listener that does not accept (a stopped target) with a full backlog: the dial gives up at once. */
static void test_dial_full_backlog(void **state)
{
	char path[128];
	int held[64], n = 0, fd;
	child_t l;
	double t0;

	(void)state;
	snprintf(path, sizeof(path), "%s/b.sock", dir);
	l = child_listener(path, 0);
	install(40011, path, ft_host_id());
	while (n < 64 && (fd = ft_local_dial("127.0.0.1:40011", false, true)) >= 0)
		held[n++] = fd;
	assert_true(n < 64); /* the backlog filled */
	t0 = now_s();
	assert_int_equal(ft_local_dial("127.0.0.1:40011", false, false), -1);
	assert_true(now_s() - t0 < 1.0);
	while (n > 0)
		close(held[--n]);
	child_end(l);
	unlink(path);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ft-test-local-XXXXXX");
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_id),
		cmocka_unit_test(test_dial_local),
		cmocka_unit_test(test_dial_https),
		cmocka_unit_test(test_dial_full_backlog),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
