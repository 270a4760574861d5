/* SPDX-License-Identifier: Apache-2.0 */
/* Conditional requests on the target: ETag list matching and write preconditions checked under the name lock. */
#include "core/cond.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mountpath.h"

const char *tgt_lom_etag(const ft_lom_t *lom)
{
	return lom->etag[0] ? lom->etag : lom->cksum;
}

bool tgt_etag_listed(const char *hdr, const char *tag, bool weak)
{
	size_t tlen = strlen(tag);
	const char *p = hdr;

	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		bool is_weak = strncmp(p, "W/", 2) == 0;
		if (is_weak)
			p += 2;
		if (*p != '"')
			return false; /* malformed: matches nothing */
		const char *end = strchr(p + 1, '"');
		if (!end)
			return false;
		if ((!is_weak || weak) && (size_t)(end - p - 1) == tlen && memcmp(p + 1, tag, tlen) == 0)
			return true;
		p = end + 1;
	}
	return false;
}

/* The object stored at o's path: 1 with *lom (zeroed when its metadata is unreadable), 0 when absent. */
static int stored_object(const tgt_obj_t *o, ft_lom_t *lom)
{
	struct stat st;
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	memset(lom, 0, sizeof(*lom));
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EISDIR ? 0 : 1;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return 0; /* a directory of other objects is no object */
	}
	if (ft_lom_fget(fd, lom) != 0)
		memset(lom, 0, sizeof(*lom));
	close(fd);
	return 1;
}

tgt_cond_t tgt_write_precondition(const tgt_obj_t *o, const char *if_match, const char *if_none_match)
{
	ft_lom_t lom;
	int present;

	if (if_match == NULL && if_none_match == NULL)
		return TGT_COND_OK;
	present = stored_object(o, &lom);
	if (if_none_match != NULL && present)
		return TGT_COND_FAILED;
	if (if_match != NULL) {
		if (!present)
			return TGT_COND_ABSENT;
		const char *tag = tgt_lom_etag(&lom);
		bool bare = if_match[0] != '"' && if_match[0] != '*' && strncmp(if_match, "W/", 2) != 0;
		/* S3 takes the ETag with or without its quotes */
		if (bare ? strcmp(if_match, tag) != 0 || tag[0] == '\0' : !tgt_etag_listed(if_match, tag, false))
			return TGT_COND_FAILED;
	}
	return TGT_COND_OK;
}
