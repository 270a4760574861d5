/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the target core on real directories: object identity, the name lock and holds, publish, replica choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/hrw.h"
#include "core/keymap.h"
#include "core/lom.h"
#include "core/mountpath.h"
#include "core/namelock.h"
#include "core/obj.h"
#include "core/publish.h"
#include "core/replica.h"

#define N_MP 4

/* A target with N_MP mountpaths under a fresh temporary directory. */
typedef struct {
	char root[64];
	char mp[N_MP][96];
	tgt_t t;
	ft_bucket_t b;
} fixture_t;

static int setup(void **state)
{
	fixture_t *f = calloc(1, sizeof(*f));
	char err[256];

	snprintf(f->root, sizeof(f->root), "/tmp/ft-test-tcore-XXXXXX");
	if (mkdtemp(f->root) == NULL)
		return -1;
	snprintf(f->t.cfg.state_dir, sizeof(f->t.cfg.state_dir), "%s", f->root);
	for (int i = 0; i < N_MP; i++) {
		snprintf(f->mp[i], sizeof(f->mp[i]), "%s/mp%d", f->root, i);
		f->t.cfg.mountpaths[i] = f->mp[i];
	}
	f->t.cfg.n_mountpaths = N_MP;
	if (tgt_mountpaths_open(&f->t, err, sizeof(err)) != 0 || tgt_namelock_init(&f->t) != 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	snprintf(f->b.name, sizeof(f->b.name), "photos");
	snprintf(f->b.provider, sizeof(f->b.provider), "ais");
	f->b.created_ns = 42;
	f->b.mirror_copies = 3;
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	fixture_t *f = *state;

	tgt_namelock_fini(&f->t);
	tgt_mountpaths_close(&f->t);
	nftw(f->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* ---- object identity ---- */

static void test_obj_identity(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o;

	assert_int_equal(tgt_obj_init(&o, &f->t, &f->b, "a/b.jpg", 7), 0);
	assert_string_equal(o.provider, "ais");
	assert_string_equal(o.bucket, "photos");
	assert_string_equal(o.rel, "ais/photos/a/b.jpg");
	assert_int_equal(o.bucket_created, 42);
	assert_int_equal(o.mirror_copies, 3);
	assert_int_equal(o.mirror_targets, 0);
	assert_int_equal(o.ec_data, 0);
	assert_true(o.hash == ft_hrw_name_hash("ais", "photos", "a/b.jpg", 7));

	/* copies on targets: no copy on the owner's mountpaths, EC's whole replicas on 2 other targets */
	ft_bucket_t bt = f->b;
	bt.mirror_scope = FT_MIRROR_SCOPE_TARGETS;
	tgt_obj_props(&o, &bt);
	assert_int_equal(o.mirror_targets, 1);
	assert_int_equal(o.mirror_copies, 1);
	assert_int_equal(o.ec_data, 1);
	assert_int_equal(o.ec_parity, 2);
	assert_true(o.ec_objsize_limit == INT64_MAX);
	bt.mirror_copies = 1; /* one copy: nothing anywhere else */
	tgt_obj_props(&o, &bt);
	assert_int_equal(o.mirror_targets, 0);
	assert_int_equal(o.ec_data, 0);
	tgt_obj_props(&o, &f->b);
	assert_ptr_equal(o.mp, tgt_mountpath_pick(&f->t, "ais", "photos", "a/b.jpg", 7));

	/* a name longer than any object name is refused */
	size_t len = TGT_REL_MAX;
	char *long_name = malloc(len + 1);
	memset(long_name, 'x', len);
	long_name[len] = '\0';
	assert_int_equal(tgt_obj_init(&o, &f->t, &f->b, long_name, len), -1);
	free(long_name);
}

/* ---- holds: one holder per (name, kind); other names and kinds go on ---- */

typedef struct {
	const tgt_obj_t *o;
	tgt_hold_kind_t kind;
	atomic_int got;
} hold_arg_t;

static void *hold_thread(void *arg)
{
	hold_arg_t *a = arg;
	tgt_hold_t h;

	tgt_name_hold(a->o, a->kind, &h);
	atomic_store(&a->got, 1);
	tgt_name_release(&h);
	return NULL;
}

/* Whether a thread holding (o, kind) gets it within ~200 ms while the test keeps its own hold. */
static int hold_blocks(const tgt_obj_t *o, tgt_hold_kind_t kind, pthread_t *th, hold_arg_t *a)
{
	a->o = o;
	a->kind = kind;
	atomic_store(&a->got, 0);
	assert_int_equal(pthread_create(th, NULL, hold_thread, a), 0);
	for (int i = 0; i < 40 && !atomic_load(&a->got); i++)
		usleep(5000);
	return !atomic_load(&a->got);
}

static void test_holds(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o, same, other;
	tgt_hold_t mine;
	pthread_t th;
	hold_arg_t a;

	tgt_obj_init(&o, &f->t, &f->b, "x", 1);
	tgt_obj_init(&same, &f->t, &f->b, "x", 1);
	tgt_obj_init(&other, &f->t, &f->b, "y", 1);
	tgt_name_hold(&o, TGT_HOLD_WRITE, &mine);

	assert_false(hold_blocks(&other, TGT_HOLD_WRITE, &th, &a)); /* another name */
	pthread_join(th, NULL);
	assert_false(hold_blocks(&same, TGT_HOLD_RESTORE, &th, &a)); /* another kind */
	pthread_join(th, NULL);
	assert_true(hold_blocks(&same, TGT_HOLD_WRITE, &th, &a)); /* the same name and kind waits */
	tgt_name_release(&mine);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&a.got), 1);
}

static void *lock_thread(void *arg)
{
	hold_arg_t *a = arg;

	tgt_name_lock(a->o);
	atomic_store(&a->got, 1);
	tgt_name_unlock(a->o);
	return NULL;
}

static void test_name_lock(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o, same;
	pthread_t th;
	hold_arg_t a = {.o = &same};

	tgt_obj_init(&o, &f->t, &f->b, "x", 1);
	tgt_obj_init(&same, &f->t, &f->b, "x", 1);
	tgt_name_lock(&o);
	assert_int_equal(pthread_create(&th, NULL, lock_thread, &a), 0);
	usleep(100000);
	assert_int_equal(atomic_load(&a.got), 0); /* another request of the same name waits */
	tgt_name_unlock(&o);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&a.got), 1);
}

/* ---- publish ---- */

/* A work file on o's mountpath holding text with a LOM of version ver; its name in work[64]. */
static void make_work(const tgt_obj_t *o, const char *text, const char *ver, char *work)
{
	int fd = tgt_work_create(o->mp, work, 64);
	ft_lom_t lom;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	memset(&lom, 0, sizeof(lom));
	lom.size = strlen(text);
	snprintf(lom.version, sizeof(lom.version), "%s", ver);
	assert_int_equal(ft_lom_fset(fd, &lom), 0);
	close(fd);
}

static void test_publish(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o, child;
	char work[64], ver[32];

	tgt_obj_init(&o, &f->t, &f->b, "dir/obj", 7);
	tgt_next_version(&o, ver, sizeof(ver));
	assert_string_equal(ver, "1"); /* nothing stored yet */
	make_work(&o, "hello", "1", work);
	assert_int_equal(tgt_publish_rename(&o, work, FT_SYNC_NONE), 0);
	assert_string_equal(work, ""); /* renamed: nothing left to drop */
	assert_int_equal(faccessat(o.mp->root_fd, "ais/photos/dir/obj", F_OK, 0), 0);
	tgt_next_version(&o, ver, sizeof(ver));
	assert_string_equal(ver, "2");

	/* "dir/obj/child": a component of its path is an object, so it goes to its hashed file */
	tgt_obj_init(&child, &f->t, &f->b, "dir/obj/child", 13);
	child.mp = o.mp; /* same mountpath, so the conflict is on disk */
	assert_int_equal(tgt_obj_locate(&child), 0);
	assert_string_equal(child.rel, "ais/photos/dir/obj/child");
	make_work(&child, "x", "1", work);
	assert_int_equal(tgt_publish_rename(&child, work, FT_SYNC_NONE), 0);
	assert_true(child.keyed);
	assert_int_equal(strncmp(child.rel, "ais/photos/.ft-keys/", 20), 0);
	int fd = openat(child.mp->root_fd, child.rel, O_RDONLY);
	assert_true(fd >= 0 && tgt_key_holds(fd, "dir/obj/child", 13));
	close(fd);
	/* a lookup now finds it there; the plain object is where it was */
	tgt_obj_t again;
	tgt_obj_init(&again, &f->t, &f->b, "dir/obj/child", 13);
	again.mp = o.mp;
	assert_int_equal(tgt_obj_locate(&again), 0);
	assert_true(again.keyed && strcmp(again.rel, child.rel) == 0);
	assert_int_equal(tgt_obj_locate(&o), 0);
	assert_false(o.keyed);

	/* "dir": the name is a directory of others: hashed too; the objects below stay */
	tgt_obj_t top;
	tgt_obj_init(&top, &f->t, &f->b, "dir", 3);
	top.mp = o.mp;
	assert_int_equal(tgt_obj_locate(&top), 0);
	make_work(&top, "t", "1", work);
	assert_int_equal(tgt_publish_rename(&top, work, FT_SYNC_NONE), 0);
	assert_true(top.keyed);
	assert_int_equal(faccessat(o.mp->root_fd, "ais/photos/dir/obj", F_OK, 0), 0);
}

/* A name that is no path: published under its hashed file name, named by its xattr; never over another name. */
static void test_publish_hashed(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o, other;
	char work[64], name[FT_OBJ_NAME_MAX + 1];

	tgt_obj_init(&o, &f->t, &f->b, "a//../b/", 8);
	assert_string_equal(o.rel,
			    "ais/photos/.ft-keys/77/77121c93c7522db1c1b87fb1fa3559f25a25003f3bea70b7060d6e7962652208");
	make_work(&o, "hello", "1", work);
	assert_int_equal(tgt_publish_rename(&o, work, FT_SYNC_NONE), 0);
	int fd = openat(o.mp->root_fd, o.rel, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(tgt_key_fget(fd, name, sizeof(name)), 8);
	assert_string_equal(name, "a//../b/");
	close(fd);
	assert_int_not_equal(faccessat(o.mp->root_fd, "ais/b", F_OK, 0), 0); /* nothing outside */

	/* two names, one file name (forced here): the file keeps the name it has */
	tgt_obj_init(&other, &f->t, &f->b, "x/", 2);
	other.mp = o.mp;
	memcpy(other.rel, o.rel, sizeof(o.rel));
	make_work(&other, "other", "1", work);
	assert_int_equal(tgt_publish_rename(&other, work, FT_SYNC_NONE), -EEXIST);
	tgt_work_drop(other.mp, &(int){-1}, work);
	fd = openat(o.mp->root_fd, o.rel, O_RDONLY);
	assert_true(fd >= 0 && tgt_key_holds(fd, "a//../b/", 8));
	close(fd);
}

static void test_publish_bucket_gone(void **state)
{
	fixture_t *f = *state;
	tgt_obj_t o;
	char work[64];

	/* no BMD is installed in this process: the bucket o was accepted into is gone */
	tgt_obj_init(&o, &f->t, &f->b, "late", 4);
	assert_int_equal(tgt_bucket_alive(&o), 0);
	make_work(&o, "data", "1", work);
	assert_int_equal(tgt_publish(&o, work, FT_SYNC_NONE), -ESTALE);
	assert_string_not_equal(work, ""); /* still the caller's to drop */
	tgt_work_drop(o.mp, &(int){-1}, work);
	assert_int_not_equal(faccessat(o.mp->root_fd, o.rel, F_OK, 0), 0);
}

/* ---- replica choice ---- */

static void test_replicas(void **state)
{
	fixture_t *f = *state;
	tgt_replica_t reps[FT_MAX_MOUNTPATHS], again[FT_MAX_MOUNTPATHS];
	tgt_obj_t o;

	for (int k = 0; k < 50; k++) {
		char name[32];
		snprintf(name, sizeof(name), "obj-%d", k);
		tgt_obj_init(&o, &f->t, &f->b, name, strlen(name));
		int n = tgt_mirror_replicas(&o, reps);
		assert_int_equal(n, 3);
		assert_false(reps[0].copy);
		assert_int_equal(reps[0].mp_index, (int)(o.mp - f->t.mountpaths));
		for (int i = 1; i < n; i++) {
			assert_true(reps[i].copy);
			for (int j = 0; j < i; j++)
				assert_int_not_equal(reps[i].mp_index, reps[j].mp_index); /* distinct mountpaths */
		}
		assert_int_equal(tgt_mirror_replicas(&o, again), n); /* every reader computes the same places */
		for (int i = 0; i < n; i++) {
			assert_int_equal(again[i].mp_index, reps[i].mp_index);
			assert_int_equal(again[i].copy, reps[i].copy);
		}
	}
	o.mirror_copies = 9; /* more than there are mountpaths: one per mountpath */
	assert_int_equal(tgt_mirror_replicas(&o, reps), N_MP);
	o.mirror_copies = 0;
	assert_int_equal(tgt_mirror_replicas(&o, reps), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_obj_identity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_holds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_publish_hashed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_publish_bucket_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replicas, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
