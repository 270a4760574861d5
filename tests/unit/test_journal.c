/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for job journals: written, appended, read back (a torn last line ignored), removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xact/journal.h"

typedef struct {
	int calls;
	json_t *msg, *done;
} seen_t;

static void collect(void *arg, const json_t *msg, const json_t *done)
{
	seen_t *s = arg;

	s->calls++;
	json_decref(s->msg);
	json_decref(s->done);
	s->msg = json_deep_copy(msg);
	s->done = json_deep_copy(done);
}

static char *tempdir(void)
{
	char *d = strdup("/tmp/ft-journal-XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rmtree(const char *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

static void test_roundtrip_and_resume(void **state)
{
	(void)state;
	char *dir = tempdir();
	json_t *msg = json_pack("{s:s, s:s}", "id", "j-1", "kind", "download");
	tgt_journal_t *jl = tgt_journal_create(dir, "j-1", msg);
	seen_t s = {0};

	assert_non_null(jl);
	tgt_journal_done(jl, "a/b c.tar", 100);
	tgt_journal_done(jl, "name\nwith newline", 7);
	tgt_journal_done(jl, "x%y", 0);
	tgt_journal_close(jl, 0); /* a stop: kept */
	/* a torn line after a crash is ignored */
	char path[512];
	snprintf(path, sizeof(path), "%s/jobs/j-1.done", dir);
	int fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "55 torn", 7), 7);
	close(fd);
	assert_int_equal(tgt_journal_load(dir, collect, &s), 1);
	assert_int_equal(s.calls, 1);
	assert_string_equal(json_string_value(json_object_get(s.msg, "kind")), "download");
	assert_int_equal(json_object_size(s.done), 3);
	assert_int_equal(json_integer_value(json_object_get(s.done, "a/b c.tar")), 100);
	assert_int_equal(json_integer_value(json_object_get(s.done, "name\nwith newline")), 7);
	assert_non_null(json_object_get(s.done, "x%y"));
	/* reopened, appended, then removed when the job ends */
	jl = tgt_journal_reopen(dir, "j-1");
	assert_non_null(jl);
	tgt_journal_done(jl, "later", 1);
	tgt_journal_close(jl, 1);
	s.calls = 0;
	assert_int_equal(tgt_journal_load(dir, collect, &s), 0);
	assert_int_equal(s.calls, 0);
	json_decref(s.msg);
	json_decref(s.done);
	json_decref(msg);
	rmtree(dir);
	free(dir);
}

static void test_bad_message_is_removed(void **state)
{
	(void)state;
	char *dir = tempdir(), path[512];
	seen_t s = {0};

	snprintf(path, sizeof(path), "%s/jobs", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/jobs/j-2.json", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("{not json", f);
	fclose(f);
	assert_int_equal(tgt_journal_load(dir, collect, &s), 0);
	assert_int_equal(access(path, F_OK), -1);
	/* no jobs directory at all: nothing */
	rmtree(dir);
	assert_int_equal(tgt_journal_load(dir, collect, &s), 0);
	free(dir);
}

static int mode_of(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(stat(path, &st), 0);
	return (int)(st.st_mode & 07777);
}

/* A download's message keeps presigned URLs whole: the journal is the owner's only, even with umask 0. */
static void test_journal_is_private(void **state)
{
	(void)state;
	char *dir = tempdir(), path[512];
	json_t *msg = json_pack("{s:s, s:[s]}", "kind", "download", "urls", "https://h/o?X-Amz-Signature=S");
	mode_t old = umask(0);
	tgt_journal_t *jl;

	jl = tgt_journal_create(dir, "j-2", msg);
	assert_non_null(jl);
	tgt_journal_close(jl, 0);
	assert_int_equal(mode_of(dir, "jobs"), 0700);
	assert_int_equal(mode_of(dir, "jobs/j-2.json"), 0600);
	assert_int_equal(mode_of(dir, "jobs/j-2.done"), 0600);
	/* a journal an older version left readable is made private when its job resumes */
	snprintf(path, sizeof(path), "%s/jobs/j-2.json", dir);
	assert_int_equal(chmod(path, 0644), 0);
	snprintf(path, sizeof(path), "%s/jobs/j-2.done", dir);
	assert_int_equal(chmod(path, 0644), 0);
	jl = tgt_journal_reopen(dir, "j-2");
	assert_non_null(jl);
	tgt_journal_close(jl, 0);
	assert_int_equal(mode_of(dir, "jobs/j-2.json"), 0600);
	assert_int_equal(mode_of(dir, "jobs/j-2.done"), 0600);
	umask(old);
	json_decref(msg);
	rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_and_resume),
		cmocka_unit_test(test_bad_message_is_removed),
		cmocka_unit_test(test_journal_is_private),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
