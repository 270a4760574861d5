/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's state files (smap.json, bmd.json): atomic write (temp + fsync + rename) and load. */
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

/* Writes all of buf to fd; 0 or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* fsyncs the directory holding path, so the rename itself is durable. */
static int sync_parent(const char *path)
{
	char dir[FT_PATH_MAX + 16];
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s", path);
	int fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

int px_persist_save(const char *path, const json_t *j)
{
	char tmp[FT_PATH_MAX + 32];
	char *text = NULL;
	int fd;
	int rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	text = json_dumps(j, JSON_COMPACT);
	if (text == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	/*
	 * The owner's only: bmd.json holds transformer URLs whole (user:password@, tokens) and, without
	 * a cluster secret, remote buckets' keys unsealed. fchmod covers a temp file of another mode.
	 */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = fchmod(fd, 0600) != 0 ? -errno : 0;
	if (rc == 0)
		rc = write_all(fd, text, strlen(text));
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc == 0)
		rc = sync_parent(path);
out:
	if (rc != 0)
		unlink(tmp); /* harmless when it was never created or already renamed */
	free(text);
	return rc;
}

int px_persist_load(const char *path, json_t **out, char *err, size_t errlen)
{
	json_error_t jerr;

	*out = NULL;
	if (access(path, F_OK) != 0 && errno == ENOENT)
		return 1;
	*out = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (*out == NULL) {
		snprintf(err, errlen, "%s: %s (line %d)", path, jerr.text, jerr.line);
		return -1;
	}
	return 0;
}

int px_persist_smap(px_t *px, const ft_smap_t *m)
{
	if (px->cfg.etcd[0] != '\0')
		return px_primary_commit_smap(px, m) == 0 ? 0 : -EAGAIN;
	json_t *j = ft_smap_to_json(m);
	int rc = j != NULL ? px_persist_save(px->smap_path, j) : -ENOMEM;

	json_decref(j);
	if (rc != 0) {
		ft_error("cannot persist cluster map v%lld to %s: %s", (long long)m->version, px->smap_path,
			 strerror(-rc));
		return -1;
	}
	return 0;
}

int px_persist_bmd(px_t *px, const ft_bmd_t *b)
{
	if (px->cfg.etcd[0] != '\0')
		return px_primary_commit_bmd(px, b) == 0 ? 0 : -EAGAIN;
	json_t *j = ft_bmd_to_json(b);
	int rc = j != NULL ? px_persist_save(px->bmd_path, j) : -ENOMEM;

	json_decref(j);
	if (rc != 0) {
		ft_error("cannot persist bucket metadata v%lld to %s: %s", (long long)b->version, px->bmd_path,
			 strerror(-rc));
		return -1;
	}
	return 0;
}
