/* SPDX-License-Identifier: Apache-2.0 */
/* Archive jobs on a target: objects of any targets packed into one shard, or into WebDataset shards of a size. */
#include "xact/archive.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/names.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "shard/shard.h"
#include "xact/xfer.h"

/*
 * DESIGN
 * Every target gets the job; the owner (HRW in the job's Smap) of the first output shard does the
 * work and the others end at once with nothing to do. The packer takes the source objects in
 * order (one shard: as listed; with shard_size: grouped by WebDataset sample key, keys in byte
 * order, names in byte order within a key), GETs each from its owner's public port (itself
 * included) into an unnamed work file, and writes it as a member through the shared shard writer
 * (shard/writer.c) into a second unnamed work file on the output's mountpath. A finished shard is
 * PUT to its owner's public port, which publishes it like any PUT (work file, rename, next
 * version; the bucket's mirror copies and EC slices): a reader sees the old object or the new one.
 * With shard_size, a shard is closed before the sample that would take its members' bytes past
 * shard_size (a sample larger than that gets a shard of its own): a sample is never split.
 * A source that cannot be read fails the job (nothing more is published) or, with
 * continue_on_error, counts as an error and is left out.
 */

#define ARCH_FMT_MAX 16
#define ARCH_INDEX_WIDTH 5 /* "<stem>-00000<ext>" when archname has no "{N..}" */
#define ARCH_COPY_BUF (256 * 1024)

struct tgt_archive {
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char to_bucket[FT_BUCKET_NAME_MAX + 1];
	char *archname;
	tgt_shard_fmt_t fmt;
	bool include_src, coe;
	int64_t shard_size; /* 0: one shard named archname */
	json_t *names;      /* the source objects, as sent */
	pthread_mutex_t lock;
	json_t *shards; /* guarded by lock: names of the shards written */
};

/* One source object in packing order. */
typedef struct {
	const char *name;
	size_t key_len;
} src_t;

/* A fetched member waiting to be written: its work file and size. */
typedef struct {
	const char *name;
	int fd;
	int64_t size;
} member_t;

/* The packer's state for one run. */
typedef struct {
	tgt_archive_t *a;
	tgt_t *t;
	const ft_smap_t *smap;
	tgt_run_t *r;
	const tgt_mountpath_t *mp; /* work files */
	int out_fd;                /* the shard being written; -1 none */
	struct archive *w;
	int index;                /* of the shard being written */
	int64_t members, payload; /* of the shard being written */
	char *buf;
} packer_t;

/* The extension of name among the shard formats' ("" when none). */
static const char *arch_ext(const char *name)
{
	static const char *const exts[] = {".tar.gz", ".tar.lz4", ".tgz", ".tar", ".zip"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t k = strlen(exts[i]);
		if (n > k && strcasecmp(name + n - k, exts[i]) == 0)
			return name + n - k;
	}
	return name + n;
}

/*
 * The name of output shard i into buf: archname itself (one shard); "pre{N..}post" -> pre, N + i
 * zero padded to N's width, post; else archname's stem, "-", i in 5 digits, its extension.
 * 0, or -1 (a malformed "{N..}", or too long).
 */
static int out_name(const tgt_archive_t *a, int i, char *buf, size_t cap)
{
	const char *open = strchr(a->archname, '{'), *ext;
	int n;

	if (a->shard_size == 0)
		n = snprintf(buf, cap, "%s", a->archname);
	else if (open != NULL) {
		size_t digits = strspn(open + 1, "0123456789");
		const char *close = open + 1 + digits;
		if (digits == 0 || digits > 9 || strncmp(close, "..}", 3) != 0 || strchr(close + 3, '{') != NULL ||
		    strchr(close + 3, '}') != NULL || memchr(a->archname, '}', (size_t)(open - a->archname)) != NULL)
			return -1;
		long start = strtol(open + 1, NULL, 10);
		n = snprintf(buf, cap, "%.*s%0*ld%s", (int)(open - a->archname), a->archname, (int)digits, start + i,
			     close + 3);
	} else {
		ext = arch_ext(a->archname);
		n = snprintf(buf, cap, "%.*s-%0*d%s", (int)(ext - a->archname), a->archname, ARCH_INDEX_WIDTH, i, ext);
	}
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

void tgt_archive_free(tgt_archive_t *a)
{
	if (a == NULL)
		return;
	free(a->archname);
	json_decref(a->names);
	json_decref(a->shards);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The format of "format" (or archname's extension without it); TGT_SHARD_NONE with why. */
static tgt_shard_fmt_t parse_fmt(const json_t *msg, const char *archname, char *why, size_t cap)
{
	const char *f = json_string_value(json_object_get(msg, "format"));
	tgt_shard_fmt_t by_name = tgt_shard_fmt_of_name(archname), fmt = by_name;

	if (f != NULL && *f != '\0') {
		fmt = tgt_shard_fmt_parse(f);
		if (fmt == TGT_SHARD_NONE)
			snprintf(why, cap, "unknown format \"%s\" (.tar, .tgz, .tar.gz, .zip or .tar.lz4)", f);
		else if (by_name != TGT_SHARD_NONE && by_name != fmt) {
			snprintf(why, cap, "archname \"%s\" says %s, format says %s", archname,
				 tgt_shard_fmt_name(by_name), tgt_shard_fmt_name(fmt));
			fmt = TGT_SHARD_NONE;
		}
	} else if (fmt == TGT_SHARD_NONE) {
		snprintf(why, cap,
			 "archname \"%s\" has no archive extension (.tar, .tgz, .tar.gz, .zip, .tar.lz4): "
			 "name the format",
			 archname);
	}
	return fmt;
}

/* The names, destination and options of msg into a; 0, or the status with why. */
static int parse_into(tgt_archive_t *a, const json_t *msg, const ft_bmd_t *bmd, char *why, size_t cap)
{
	const json_t *names = json_object_get(msg, "objnames"), *size = json_object_get(msg, "shard_size");
	const char *to = json_string_value(json_object_get(msg, "to_bucket"));
	const char *arch = json_string_value(json_object_get(msg, "archname")), *w = NULL;
	char probe[FT_OBJ_NAME_MAX + 1];

	if (!json_is_array(names) || json_array_size(names) == 0) {
		snprintf(why, cap, "an archive job needs a non-empty objnames array");
		return 400;
	}
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *n = json_string_value(json_array_get(names, i));
		if (n == NULL || ft_name_check_object(n, strlen(n), &w) != 0) {
			snprintf(why, cap, "bad objnames[%zu]: %s", i, n == NULL ? "not a string" : w);
			return 400;
		}
	}
	if (to == NULL || strlen(to) > FT_BUCKET_NAME_MAX || arch == NULL ||
	    ft_name_check_object(arch, strlen(arch), &w) != 0) {
		snprintf(why, cap, "an archive job needs to_bucket and a valid archname%s%s", w ? ": " : "",
			 w ? w : "");
		return 400;
	}
	if (size != NULL && (!json_is_integer(size) || json_integer_value(size) < 0)) {
		snprintf(why, cap, "shard_size must be an integer >= 0");
		return 400;
	}
	snprintf(a->to_bucket, sizeof(a->to_bucket), "%s", to);
	if (ft_bmd_find(bmd, "ais", to) == NULL) {
		snprintf(why, cap, "destination bucket ais/%s does not exist", to);
		return 404;
	}
	a->names = json_incref((json_t *)names);
	a->archname = strdup(arch);
	a->shard_size = json_integer_value(size);
	a->include_src = json_is_true(json_object_get(msg, "include_src_bucket_name"));
	a->coe = json_is_true(json_object_get(msg, "continue_on_error"));
	if (a->archname == NULL) {
		snprintf(why, cap, "out of memory");
		return 500;
	}
	a->fmt = parse_fmt(msg, arch, why, cap);
	if (a->fmt == TGT_SHARD_NONE)
		return 400;
	if (out_name(a, 0, probe, sizeof(probe)) != 0 || ft_name_check_object(probe, strlen(probe), &w) != 0) {
		snprintf(why, cap, "archname \"%s\": %s", arch,
			 w ? w : "a shard name template is \"pre{N..}post\" (N: the first index, its width kept)");
		return 400;
	}
	return 0;
}

tgt_archive_t *tgt_archive_parse(const json_t *msg, const ft_bmd_t *bmd, int *status, char *why, size_t cap)
{
	tgt_archive_t *a = calloc(1, sizeof(*a));
	const char *provider = json_string_value(json_object_get(msg, "provider"));
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));

	if (a == NULL) {
		*status = 500;
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->shards = json_array();
	snprintf(a->provider, sizeof(a->provider), "%s", provider ? provider : "");
	snprintf(a->bucket, sizeof(a->bucket), "%s", bucket ? bucket : "");
	*status = parse_into(a, msg, bmd, why, cap);
	if (*status != 0) {
		tgt_archive_free(a);
		return NULL;
	}
	return a;
}

void tgt_archive_json(tgt_archive_t *a, json_t *doc)
{
	json_object_set_new(doc, "to", json_pack("{s:s, s:s}", "provider", "ais", "bucket", a->to_bucket));
	json_object_set_new(doc, "archname", json_string(a->archname));
	json_object_set_new(doc, "format", json_string(tgt_shard_fmt_name(a->fmt)));
	pthread_mutex_lock(&a->lock);
	json_object_set_new(doc, "shards", json_deep_copy(a->shards));
	pthread_mutex_unlock(&a->lock);
}

/* Packing order: by sample key, then name (shard_size); kept as listed otherwise. */
static int src_cmp(const void *x, const void *y)
{
	const src_t *a = x, *b = y;
	size_t k = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->name, b->name, k);

	if (c != 0)
		return c;
	if (a->key_len != b->key_len)
		return a->key_len < b->key_len ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The sources in packing order (caller frees); NULL on allocation failure. */
static src_t *sources(const tgt_archive_t *a, size_t *n)
{
	src_t *s;

	*n = json_array_size(a->names);
	s = calloc(*n, sizeof(*s));
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < *n; i++) {
		s[i].name = json_string_value(json_array_get(a->names, i));
		s[i].key_len = tgt_shard_wdskey_len(s[i].name);
	}
	if (a->shard_size > 0)
		qsort(s, *n, sizeof(*s), src_cmp);
	return s;
}

static int work_file(const tgt_mountpath_t *mp, char *err, size_t cap)
{
	int fd = tgt_work_anon(mp);

	if (fd < 0)
		snprintf(err, cap, "work file: %s", strerror(-fd));
	return fd;
}

/* GETs source name from its owner into a new work file (m). 0; -1 with err. */
static int fetch_member(packer_t *p, const char *name, member_t *m, char *err, size_t cap)
{
	const ft_node_t *owner = ft_smap_owner(p->smap, p->a->provider, p->a->bucket, name, strlen(name));
	char url[TGT_XFER_URL_MAX];
	long status = 0;

	m->name = name;
	m->size = 0;
	m->fd = -1;
	if (owner == NULL ||
	    tgt_xfer_obj_url(url, sizeof(url), owner->public_url, p->a->provider, p->a->bucket, name) != 0) {
		snprintf(err, cap, owner == NULL ? "no target owns it" : "name too long for a URL");
		return -1;
	}
	m->fd = work_file(p->mp, err, cap);
	if (m->fd < 0)
		return -1;
	if (tgt_xfer_get(url, m->fd, &m->size, &status, err, cap) == 0)
		return 0;
	if (status == 404)
		snprintf(err, cap, "no such object %s/%s", p->a->bucket, name);
	close(m->fd);
	m->fd = -1;
	return -1;
}

/* A new shard's writer over a new work file. 0; -1 with err. */
static int shard_open(packer_t *p, char *err, size_t cap)
{
	p->out_fd = work_file(p->mp, err, cap);
	if (p->out_fd < 0)
		return -1;
	p->w = tgt_shard_writer_new(p->a->fmt, &p->out_fd);
	if (p->w == NULL) {
		snprintf(err, cap, "cannot write %s", tgt_shard_fmt_name(p->a->fmt));
		close(p->out_fd);
		p->out_fd = -1;
		return -1;
	}
	p->members = p->payload = 0;
	return 0;
}

static void shard_drop(packer_t *p)
{
	if (p->w != NULL)
		archive_write_free(p->w);
	if (p->out_fd >= 0)
		close(p->out_fd);
	p->w = NULL;
	p->out_fd = -1;
}

/* Finishes the shard being written and PUTs it to its owner; the next one gets the next index. 0; -1 with err. */
static int shard_publish(packer_t *p, char *err, size_t cap)
{
	char name[FT_OBJ_NAME_MAX + 1], url[TGT_XFER_URL_MAX];
	const ft_node_t *owner;
	tgt_xfer_head_t h;
	struct stat st;
	int rc = -1;

	if (archive_write_close(p->w) != ARCHIVE_OK) {
		snprintf(err, cap, "encoding: %s", archive_error_string(p->w));
		goto out;
	}
	if (out_name(p->a, p->index, name, sizeof(name)) != 0 || fstat(p->out_fd, &st) != 0) {
		snprintf(err, cap, "shard %d: no name or no size", p->index);
		goto out;
	}
	owner = ft_smap_owner(p->smap, "ais", p->a->to_bucket, name, strlen(name));
	if (owner == NULL || tgt_xfer_obj_url(url, sizeof(url), owner->public_url, "ais", p->a->to_bucket, name) != 0) {
		snprintf(err, cap, "shard %s: no owner", name);
		goto out;
	}
	if (tgt_xfer_put(url, p->out_fd, (int64_t)st.st_size, NULL, false, &h, err, cap) != 0)
		goto out;
	pthread_mutex_lock(&p->a->lock);
	json_array_append_new(p->a->shards, json_string(name));
	pthread_mutex_unlock(&p->a->lock);
	ft_info("archive: shard ais/%s/%s: %lld members, %lld bytes", p->a->to_bucket, name, (long long)p->members,
		(long long)st.st_size);
	p->index++;
	rc = 0;
out:
	shard_drop(p);
	return rc;
}

/* Writes fetched member m into the open shard. 0; -1 with err. */
static int write_member(packer_t *p, const member_t *m, char *err, size_t cap)
{
	char path[FT_BUCKET_NAME_MAX + FT_OBJ_NAME_MAX + 2];
	int64_t off = 0;

	if (p->a->include_src)
		snprintf(path, sizeof(path), "%s/%s", p->a->bucket, m->name);
	else
		snprintf(path, sizeof(path), "%s", m->name);
	if (tgt_shard_writer_header(p->w, path, (uint64_t)m->size, time(NULL)) != 0) {
		snprintf(err, cap, "encoding %.300s: %s", path, archive_error_string(p->w));
		return -1;
	}
	while (off < m->size) {
		ssize_t n = pread(m->fd, p->buf, ARCH_COPY_BUF, off);
		if (n <= 0) {
			snprintf(err, cap, "reading the fetched %s: %s", m->name, n < 0 ? strerror(errno) : "short");
			return -1;
		}
		if (archive_write_data(p->w, p->buf, (size_t)n) != n) {
			snprintf(err, cap, "encoding %.300s: %s", path, archive_error_string(p->w));
			return -1;
		}
		off += n;
	}
	p->members++;
	p->payload += m->size;
	return 0;
}

static void members_close(member_t *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].fd >= 0)
			close(m[i].fd);
}

/*
 * One sample (src[0..n), one key; n is 1 without shard_size): fetched, then written, after closing
 * the current shard when it would grow past shard_size. 0; 1 skipped members counted; -1 failed.
 */
static int pack_group(packer_t *p, const src_t *src, size_t n)
{
	member_t *m = calloc(n, sizeof(*m));
	char err[512];
	int64_t bytes = 0;
	size_t got = 0;
	int rc = 0;

	if (m == NULL) {
		tgt_run_error(p->r, src[0].name, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (fetch_member(p, src[i].name, &m[got], err, sizeof(err)) == 0) {
			bytes += m[got++].size;
			continue;
		}
		if (!p->a->coe) {
			tgt_run_error(p->r, src[i].name, err);
			rc = -1;
			goto out;
		}
		strncat(err, " (left out: continue_on_error)", sizeof(err) - strlen(err) - 1);
		tgt_run_error(p->r, src[i].name, err);
	}
	if (got == 0)
		goto out;
	if (p->w != NULL && p->a->shard_size > 0 && p->members > 0 && p->payload + bytes > p->a->shard_size &&
	    shard_publish(p, err, sizeof(err)) != 0) {
		tgt_run_error(p->r, "publishing", err);
		rc = -1;
		goto out;
	}
	if (p->w == NULL && shard_open(p, err, sizeof(err)) != 0) {
		tgt_run_error(p->r, "shard", err);
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < got; i++) {
		if (write_member(p, &m[i], err, sizeof(err)) != 0) {
			tgt_run_error(p->r, m[i].name, err);
			rc = -1;
			goto out;
		}
		atomic_fetch_add(&tgt_run_stats(p->r)->objects, 1);
		atomic_fetch_add(&tgt_run_stats(p->r)->bytes, m[i].size);
	}
out:
	members_close(m, got);
	free(m);
	return rc;
}

/* Packs every source; 0 done, 1 aborted, -1 failed (counted). */
static int pack_all(packer_t *p, const src_t *src, size_t n)
{
	char err[512];

	for (size_t i = 0; i < n;) {
		size_t k = 1;
		if (tgt_run_aborted(p->r))
			return 1;
		while (p->a->shard_size > 0 && i + k < n && src[i + k].key_len == src[i].key_len &&
		       memcmp(src[i + k].name, src[i].name, src[i].key_len) == 0)
			k++;
		if (pack_group(p, src + i, k) != 0)
			return -1;
		i += k;
	}
	if (p->w == NULL && p->index == 0) {
		tgt_run_error(p->r, p->a->archname, "nothing to archive: no source object could be read");
		return -1;
	}
	if (p->w != NULL && shard_publish(p, err, sizeof(err)) != 0) {
		tgt_run_error(p->r, "publishing", err);
		return -1;
	}
	return 0;
}

void tgt_archive_run(tgt_archive_t *a, tgt_t *t, const ft_smap_t *smap, tgt_run_t *r)
{
	packer_t p = {.a = a, .t = t, .smap = smap, .r = r, .out_fd = -1};
	char first[FT_OBJ_NAME_MAX + 1];
	const ft_node_t *owner;
	src_t *src = NULL;
	size_t n = 0;

	if (out_name(a, 0, first, sizeof(first)) != 0)
		return; /* checked at the parse */
	owner = ft_smap_owner(smap, "ais", a->to_bucket, first, strlen(first));
	if (owner == NULL || strcmp(owner->id, t->id) != 0)
		return; /* another target packs */
	tgt_run_body_total(r, (int64_t)json_array_size(a->names));
	p.mp = tgt_mountpath_pick(t, "ais", a->to_bucket, first, strlen(first));
	src = sources(a, &n);
	p.buf = malloc(ARCH_COPY_BUF);
	if (src == NULL || p.buf == NULL || p.mp == NULL) {
		tgt_run_error(r, a->archname, p.mp == NULL ? "no mountpath" : "out of memory");
		tgt_run_body_fail(r);
	} else {
		int rc = pack_all(&p, src, n);
		if (rc < 0)
			tgt_run_body_fail(r);
		else if (rc > 0)
			tgt_run_body_cut(r); /* aborted: the shard being written is dropped */
	}
	shard_drop(&p);
	free(p.buf);
	free(src);
}
