/* SPDX-License-Identifier: Apache-2.0 */
/* Object names that are no path: the pure name-to-path mapping, the name xattr, and the walk over hashed names. */
#include "core/keymap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/names.h"

#define SEGMENT_MAX 255 /* NAME_MAX of the file systems under a mountpath */

bool tgt_key_hashed(const char *name, size_t len)
{
	size_t start = 0;

	if (len == 0)
		return true;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && name[i] != '/')
			continue;
		const char *s = name + start;
		size_t n = i - start;
		if (n == 0 || n > SEGMENT_MAX || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return true;
		if (start == 0 && n == sizeof(TGT_KEYS_DIR) - 1 && memcmp(s, TGT_KEYS_DIR, n) == 0)
			return true;
		start = i + 1;
	}
	return false;
}

static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md; /* fetched once: EVP_sha256() costs a provider lookup per digest (3x the hash) */

/* At exit, before OpenSSL's own cleanup (registered earlier, so run later). */
static void sha256_free(void)
{
	EVP_MD_free(sha256_md);
	sha256_md = NULL;
}

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (sha256_md != NULL)
		atexit(sha256_free);
}

/* The lowercase hex SHA-256 of name[0..len) into hex[TGT_KEY_HEX + 1]. 0 or -1. */
static int key_hex(const char *name, size_t len, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	pthread_once(&sha256_once, sha256_fetch);
	if (EVP_Digest(name, len, md, &mdlen, sha256_md ? sha256_md : EVP_sha256(), NULL) != 1 ||
	    mdlen * 2 != TGT_KEY_HEX)
		return -1;
	for (unsigned int i = 0; i < mdlen; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[TGT_KEY_HEX] = '\0';
	return 0;
}

int tgt_key_path_hashed(char *buf, size_t cap, const char *name, size_t len)
{
	char hex[TGT_KEY_HEX + 1];
	int n;

	if (len > FT_OBJ_NAME_MAX || key_hex(name, len, hex) != 0)
		return -1;
	n = snprintf(buf, cap, "%s/%.2s/%s", TGT_KEYS_DIR, hex, hex);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int tgt_key_path(char *buf, size_t cap, const char *name, size_t len)
{
	if (len > FT_OBJ_NAME_MAX)
		return -1;
	if (tgt_key_hashed(name, len))
		return tgt_key_path_hashed(buf, cap, name, len);
	if (len >= cap)
		return -1;
	memcpy(buf, name, len);
	buf[len] = '\0';
	return 0;
}

long tgt_key_fget(int fd, char *name, size_t cap)
{
	ssize_t n = fgetxattr(fd, TGT_KEY_XATTR, name, cap > 0 ? cap - 1 : 0);

	if (n < 0 || (size_t)n >= cap || n > FT_OBJ_NAME_MAX)
		return -1;
	name[n] = '\0';
	return (long)n;
}

int tgt_key_fset(int fd, const char *name, size_t len)
{
	return fsetxattr(fd, TGT_KEY_XATTR, name, len, 0) == 0 ? 0 : -errno;
}

long tgt_key_read(int dfd, const char *leaf, char *name, size_t cap)
{
	char hex[TGT_KEY_HEX + 1];
	int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	long n;

	if (fd < 0)
		return -1;
	n = tgt_key_fget(fd, name, cap);
	close(fd);
	if (n < 0 || key_hex(name, (size_t)n, hex) != 0 || strcmp(hex, leaf) != 0)
		return -1;
	return n;
}

bool tgt_key_holds(int fd, const char *name, size_t len)
{
	char got[FT_OBJ_NAME_MAX + 1];
	long n = tgt_key_fget(fd, got, sizeof(got));

	return n >= 0 && (size_t)n == len && memcmp(got, name, len) == 0;
}

/* Opens the directory name under dfd; fd or -1. */
static int open_dir(int dfd, const char *name)
{
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The hashed files of one fan-out directory (fd consumed). */
static int walk_fan(int fd, tgt_key_walk_fn fn, void *arg)
{
	char name[FT_OBJ_NAME_MAX + 1];
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fd);
		return 0;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strlen(de->d_name) != TGT_KEY_HEX || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		long n = tgt_key_read(dirfd(d), de->d_name, name, sizeof(name));
		if (n >= 0)
			rc = fn(arg, dirfd(d), de->d_name, name, (size_t)n);
	}
	closedir(d);
	return rc;
}

int tgt_key_walk(int bdfd, tgt_key_walk_fn fn, void *arg)
{
	int kfd = open_dir(bdfd, TGT_KEYS_DIR);
	struct dirent *de;
	int rc = 0;

	if (kfd < 0)
		return 0;
	DIR *d = fdopendir(kfd);
	if (!d) {
		close(kfd);
		return 0;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strlen(de->d_name) != 2 || strspn(de->d_name, "0123456789abcdef") != 2)
			continue;
		int fd = open_dir(dirfd(d), de->d_name);
		if (fd >= 0)
			rc = walk_fan(fd, fn, arg);
	}
	closedir(d);
	return rc;
}
