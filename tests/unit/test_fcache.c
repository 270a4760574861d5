/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the open-file cache (target/core/fcache.c) on a real loop thread: admission, validation, eviction, sweep, the batch items' shared table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "core/fcache.h"
#include "http/http.h"

/*
 * The cache works on loop threads only, so each scenario runs inside a request handler of a real
 * server with one loop thread; it answers "ok" or the first check that failed (cmocka's asserts
 * cannot run off the test's thread). Files live in a fresh temporary directory.
 */

static tgt_t tgt;
static char dir[64];
static ft_httpd_t *srv;
static int srv_port;

#define SMALL 100

/* A file name of dir. */
static void path_of(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", dir, name);
}

/* Writes size bytes of ch to dir/name through a new file renamed over it (as a PUT publishes). */
static int write_file(const char *name, char ch, size_t size)
{
	char path[128], tmp[160];
	char *buf = malloc(size);
	int fd, rc = -1;

	path_of(path, sizeof(path), name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	memset(buf, ch, size);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && write(fd, buf, size) == (ssize_t)size && rename(tmp, path) == 0)
		rc = 0;
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* Opens dir/name as get.c would: fd with *st and *lom (size, a checksum, version 7), or -1. */
static int open_obj(const char *name, struct stat *st, ft_lom_t *lom)
{
	char path[128];

	path_of(path, sizeof(path), name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st) != 0)
		return -1;
	memset(lom, 0, sizeof(*lom));
	lom->size = (uint64_t)st->st_size;
	lom->cksum_type = FT_CKSUM_XXHASH;
	snprintf(lom->cksum, sizeof(lom->cksum), "%016llx", (unsigned long long)st->st_ino);
	snprintf(lom->version, sizeof(lom->version), "7");
	return fd;
}

static void obj_init(tgt_obj_t *o, const char *name, uint64_t hash)
{
	memset(o, 0, sizeof(*o));
	o->t = &tgt;
	o->hash = hash;
	snprintf(o->rel, sizeof(o->rel), "ais/b/%s", name);
}

typedef tgt_fcache_ref_t *(*put_fn)(const tgt_obj_t *, int, unsigned long, int, const ft_lom_t *, const struct stat *,
				    bool);

/* Inserts dir/name for o with put (the first miss is only remembered: put twice). The reference, or NULL. */
static tgt_fcache_ref_t *keep_with(put_fn put, const tgt_obj_t *o, const char *name, int *fd_out)
{
	struct stat st;
	ft_lom_t lom;
	int fd = open_obj(name, &st, &lom);
	tgt_fcache_ref_t *ref;

	if (fd < 0)
		return NULL;
	ref = put(o, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false);
	if (ref == NULL)
		ref = put(o, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false);
	if (ref == NULL)
		close(fd);
	else
		*fd_out = fd;
	return ref;
}

/* keep_with in the loop thread's table. */
static tgt_fcache_ref_t *keep(const tgt_obj_t *o, const char *name, int *fd_out)
{
	return keep_with(tgt_fcache_put, o, name, fd_out);
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			snprintf(fail, cap, "line %d: %s", __LINE__, #cond); \
			goto out;                                            \
		}                                                            \
	} while (0)

/* The scenario of GET /basic, on the loop thread: "ok" or what failed. */
static void basic(char *fail, size_t cap)
{
	tgt_obj_t o1, o2, o3;
	struct stat st;
	ft_lom_t lom;
	ft_lom_t got;
	tgt_fcache_ref_t *ref, *held;
	int fd, fd2, fd3, hit;

	obj_init(&o1, "one", 1);
	obj_init(&o2, "two", 2);
	obj_init(&o3, "three", 3);
	CHECK(write_file("one", 'a', SMALL) == 0 && write_file("two", 'b', SMALL) == 0 &&
	      write_file("three", 'c', SMALL) == 0);

	/* admission: the first miss is remembered, the second keeps the file */
	fd = open_obj("one", &st, &lom);
	CHECK(fd >= 0);
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);
	CHECK(tgt_fcache_put(&o1, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false) == NULL);
	ref = tgt_fcache_put(&o1, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	ref = tgt_fcache_get(&o1, 0, &hit, &got);
	CHECK(ref != NULL && hit == fd && got.size == SMALL && strcmp(got.version, "7") == 0);
	tgt_fcache_release(ref);
	CHECK(tgt_fcache_get(&o1, 1, &hit, &got) == NULL); /* another mountpath: another key */

	/* replaced by a rename (a PUT): missed, and its file closed */
	CHECK(write_file("one", 'A', SMALL) == 0);
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);
	CHECK(!fd_open(fd));

	/* a generation change retires the entry */
	ref = keep(&o1, "one", &fd);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	tgt_fcache_invalidate(&tgt);
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);
	CHECK(!fd_open(fd));

	/* an xattr written in place (an ACL change) moves ctime: missed */
	ref = keep(&o1, "one", &fd);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	CHECK(fsetxattr(fd, "user.ft.test", "1", 1, 0) == 0);
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);

	/* bytes written in place move mtime: missed */
	ref = keep(&o1, "one", &fd);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	{
		char path[128];
		path_of(path, sizeof(path), "one");
		int w = open(path, O_WRONLY);
		CHECK(w >= 0 && pwrite(w, "Z", 1, 0) == 1);
		close(w);
	}
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);

	/* eviction beyond the capacity (2) while a response holds the evicted entry */
	ref = keep(&o1, "one", &fd);
	CHECK(ref != NULL);
	held = ref; /* a response still sending from fd */
	ref = keep(&o2, "two", &fd2);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	ref = keep(&o3, "three", &fd3); /* evicts o1, the least recently used */
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	CHECK(tgt_fcache_get(&o1, 0, &hit, &got) == NULL);
	CHECK(fd_open(fd)); /* still read by the held response */
	tgt_fcache_release(held);
	CHECK(!fd_open(fd));
	ref = tgt_fcache_get(&o2, 0, &hit, &got);
	CHECK(ref != NULL && hit == fd2);
	tgt_fcache_release(ref);

	/* large objects are never kept */
	{
		char path[128];
		path_of(path, sizeof(path), "big");
		int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		CHECK(w >= 0 && ftruncate(w, 2 << 20) == 0);
		close(w);
		tgt_obj_t ob;
		obj_init(&ob, "big", 4);
		CHECK(keep(&ob, "big", &fd) == NULL);
	}

	/* admission remembers misses in sets: two keys of one set (hashes 33 and 49) both get in */
	{
		tgt_obj_t oa, ob;
		int fa, fb;
		obj_init(&oa, "nine", 33);
		obj_init(&ob, "ten", 49);
		CHECK(write_file("nine", 'n', SMALL) == 0 && write_file("ten", 't', SMALL) == 0);
		fa = open_obj("nine", &st, &lom);
		CHECK(fa >= 0);
		CHECK(tgt_fcache_put(&oa, 0, tgt_fcache_gen(&tgt), fa, &lom, &st, false) == NULL);
		struct stat stb;
		ft_lom_t lomb;
		fb = open_obj("ten", &stb, &lomb);
		CHECK(fb >= 0);
		CHECK(tgt_fcache_put(&ob, 0, tgt_fcache_gen(&tgt), fb, &lomb, &stb, false) == NULL);
		close(fb);
		ref = tgt_fcache_put(&oa, 0, tgt_fcache_gen(&tgt), fa, &lom, &st, false);
		if (ref == NULL)
			close(fa);
		CHECK(ref != NULL); /* "ten" did not make the cache forget "nine" */
		tgt_fcache_release(ref);
	}
	snprintf(fail, cap, "ok");
	return;
out:
	return;
}

/* GET /sweep: keeps dir/four, then deletes it without a GET: the sweep must close it. */
static void sweep_setup(char *fail, size_t cap)
{
	tgt_obj_t o4;
	tgt_fcache_ref_t *ref;
	char path[128];
	int fd;

	obj_init(&o4, "four", 5);
	CHECK(write_file("four", 'd', SMALL) == 0);
	ref = keep(&o4, "four", &fd);
	CHECK(ref != NULL);
	tgt_fcache_release(ref);
	path_of(path, sizeof(path), "four");
	CHECK(unlink(path) == 0);
	snprintf(fail, cap, "ok");
out:
	return;
}

static void handler(ft_req_t *r, void *ctx)
{
	char out[160] = "unknown path";
	const char *p = ft_req_path(r, NULL);

	(void)ctx;
	if (strcmp(p, "/basic") == 0)
		basic(out, sizeof(out));
	else if (strcmp(p, "/sweep") == 0)
		sweep_setup(out, sizeof(out));
	else if (strcmp(p, "/share") == 0) {
		tgt_fcache_share(&tgt); /* on the loop thread, which will sweep it */
		snprintf(out, sizeof(out), "ok");
	}
	ft_resp_bytes(r, 200, "text/plain", out, strlen(out));
}

/* One request to the server: its body (NUL-terminated) in buf. */
static void request(const char *path, char *buf, size_t cap)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv_port)};
	char req[128];
	size_t got = 0;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
	assert_int_equal(write(s, req, (size_t)n), n);
	for (ssize_t k; got + 1 < cap && (k = read(s, buf + got, cap - 1 - got)) > 0;)
		got += (size_t)k;
	buf[got] = '\0';
	close(s);
	char *body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	memmove(buf, body + 4, strlen(body + 4) + 1);
}

/* fds of this process that name a deleted file of dir. */
static int deleted_in_dir(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char link[256], path[300];
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (strncmp(link, dir, strlen(dir)) == 0 && strstr(link, "(deleted)") != NULL)
			n++;
	}
	if (d != NULL)
		closedir(d);
	return n;
}

static void test_scenarios(void **state)
{
	char body[4096];

	(void)state;
	request("/basic", body, sizeof(body));
	assert_string_equal(body, "ok");
	request("/sweep", body, sizeof(body));
	assert_string_equal(body, "ok");
	assert_int_equal(deleted_in_dir(), 1);
	for (int i = 0; i < 40 && deleted_in_dir() > 0; i++)
		usleep(100 * 1000); /* the sweep runs every second */
	assert_int_equal(deleted_in_dir(), 0);
}

static void test_not_on_other_threads(void **state)
{
	tgt_obj_t o;
	ft_lom_t got;
	struct stat st;
	ft_lom_t lom;
	int hit;

	(void)state;
	obj_init(&o, "five", 6);
	assert_int_equal(write_file("five", 'e', SMALL), 0);
	int fd = open_obj("five", &st, &lom);
	assert_true(fd >= 0);
	/* the test's thread is no loop thread (a worker's case): nothing kept, the fd stays the caller's */
	assert_null(tgt_fcache_put(&o, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false));
	assert_null(tgt_fcache_put(&o, 0, tgt_fcache_gen(&tgt), fd, &lom, &st, false));
	assert_null(tgt_fcache_get(&o, 0, &hit, &got));
	assert_true(fd_open(fd));
	close(fd);
}

/* keep_with in the shared table (from any thread). */
static tgt_fcache_ref_t *keep_shared(const tgt_obj_t *o, const char *name, int *fd_out)
{
	return keep_with(tgt_fcache_put_shared, o, name, fd_out);
}

#define READERS 4
#define READS 3000

/* A batch's reader: the shared entry of "six" (or its file opened and kept), one byte read, released. */
static void *shared_reader(void *arg)
{
	tgt_obj_t o;
	long bad = 0;

	(void)arg;
	obj_init(&o, "six", 6);
	for (int i = 0; i < READS; i++) {
		ft_lom_t lom;
		struct stat st;
		char c = 0;
		int fd;
		tgt_fcache_ref_t *ref = tgt_fcache_get_shared(&o, 0, &fd, &lom);
		if (ref == NULL) {
			unsigned long gen = tgt_fcache_gen(&tgt);
			if ((fd = open_obj("six", &st, &lom)) < 0)
				continue; /* between a rename's unlink and link: never, but not this test's point */
			ref = tgt_fcache_put_shared(&o, 0, gen, fd, &lom, &st, false);
			if (ref == NULL) {
				bad += pread(fd, &c, 1, 0) != 1 || c < 'a' || c > 'z';
				close(fd);
				continue;
			}
		}
		bad += pread(fd, &c, 1, 0) != 1 || c < 'a' || c > 'z' || lom.size != SMALL;
		tgt_fcache_release(ref);
	}
	return (void *)bad;
}

/* The first byte of dir/name through the shared table (a hit, or opened and offered to it), as a batch reads it. */
static int read_shared(const tgt_obj_t *o, const char *name)
{
	ft_lom_t lom;
	struct stat st;
	char c = 0;
	int fd;
	tgt_fcache_ref_t *ref = tgt_fcache_get_shared(o, 0, &fd, &lom);

	if (ref == NULL) {
		unsigned long gen = tgt_fcache_gen(&tgt);
		if ((fd = open_obj(name, &st, &lom)) < 0)
			return -1;
		ref = tgt_fcache_put_shared(o, 0, gen, fd, &lom, &st, false);
	}
	if (pread(fd, &c, 1, 0) != 1)
		c = -1;
	if (ref != NULL)
		tgt_fcache_release(ref);
	else
		close(fd);
	return c;
}

static void test_shared_table(void **state)
{
	tgt_obj_t o;
	pthread_t th[READERS];
	ft_lom_t got;
	char body[256];
	int fd, hit;
	tgt_fcache_ref_t *ref;

	(void)state;
	obj_init(&o, "six", 6);
	assert_int_equal(write_file("six", 'a', SMALL), 0);
	/* before a loop thread made it, there is no shared table: nothing kept, the fd stays the caller's */
	assert_null(keep_shared(&o, "six", &fd));
	request("/share", body, sizeof(body));
	assert_string_equal(body, "ok");
	/* from this thread (no loop thread), kept and hit */
	ref = keep_shared(&o, "six", &fd);
	assert_non_null(ref);
	tgt_fcache_release(ref);
	ref = tgt_fcache_get_shared(&o, 0, &hit, &got);
	assert_non_null(ref);
	assert_int_equal(hit, fd);
	assert_int_equal(got.size, SMALL);
	tgt_fcache_release(ref);
	assert_null(tgt_fcache_get(&o, 0, &hit, &got)); /* the loops' own tables are apart (and this is none) */

	/* readers at once while the file is replaced: every read a whole byte of some version, no leak; and
	 * after each replacement, a lookup (a hit validated by fstat, or a new open) reads the new version */
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, shared_reader, NULL), 0);
	for (char c = 'b'; c <= 'z'; c++) {
		assert_int_equal(write_file("six", c, SMALL), 0);
		assert_int_equal(read_shared(&o, "six"), c);
		usleep(2000);
	}
	for (int i = 0; i < READERS; i++) {
		void *bad;
		assert_int_equal(pthread_join(th[i], &bad), 0);
		assert_int_equal((long)bad, 0);
	}
	/* the last version is what a hit now reads */
	ref = keep_shared(&o, "six", &fd);
	if (ref == NULL)
		ref = tgt_fcache_get_shared(&o, 0, &fd, &got);
	assert_non_null(ref);
	char c = 0;
	assert_int_equal(pread(fd, &c, 1, 0), 1);
	assert_int_equal(c, 'z');
	tgt_fcache_release(ref);

	/* unlinked while kept: the loop that made the table sweeps it within about a second */
	char path[128];
	path_of(path, sizeof(path), "six");
	assert_int_equal(unlink(path), 0);
	assert_int_equal(deleted_in_dir(), 1);
	for (int i = 0; i < 40 && deleted_in_dir() > 0; i++)
		usleep(100 * 1000);
	assert_int_equal(deleted_in_dir(), 0);
}

static int setup(void **state)
{
	char err[256];
	ft_httpd_opts_t o = {.bind = "127.0.0.1",
			     .threads = 1,
			     .workers = 1,
			     .max_header_bytes = 16384,
			     .max_headers = 100,
			     .idle_timeout_ms = 10000,
			     .header_timeout_ms = 10000,
			     .body_timeout_ms = 10000,
			     .handler = handler};

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ft-test-fcache-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	tgt.cfg.open_file_cache = 2;
	tgt.cfg.loop_threads = 1;
	if (tgt_fcache_init(&tgt) != 0)
		return -1;
	srv = ft_httpd_start(&o, err, sizeof(err));
	if (srv == NULL) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	srv_port = ft_httpd_port(srv);
	return 0;
}

static int teardown(void **state)
{
	char path[128];
	static const char *const names[] = {"one", "two", "three", "four", "five", "six", "nine", "ten", "big"};

	(void)state;
	ft_httpd_stop(srv);
	tgt_fcache_stop(&tgt);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_of(path, sizeof(path), names[i]);
		unlink(path);
	}
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scenarios),
		cmocka_unit_test(test_not_on_other_threads),
		cmocka_unit_test(test_shared_table),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
