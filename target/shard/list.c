/* SPDX-License-Identifier: Apache-2.0 */
/* Members of a shard for the object listing with archive=true: name order, sizes, resumable after any name. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/lom.h"
#include "shard/shard.h"

struct tgt_shard_list {
	tgt_t *t;
	tgt_shard_index_t *ix;
	uint32_t *names; /* indexes into ix->m of the listable members, in name order */
	size_t n;
};

tgt_shard_list_t *tgt_shard_list_open(tgt_t *t, const char *provider, const char *bucket, const char *obj,
				      const tgt_mountpath_t *mp)
{
	tgt_shard_fmt_t fmt = tgt_shard_fmt_of_name(obj);
	tgt_shard_list_t *l = NULL;
	tgt_obj_t o = {.t = t, .mp = mp, .obj = obj, .obj_len = strlen(obj)};
	ft_lom_t lom;
	char err[300] = "";
	const char *why;
	int fd;

	if (fmt == TGT_SHARD_NONE)
		return NULL;
	snprintf(o.provider, sizeof(o.provider), "%s", provider);
	snprintf(o.bucket, sizeof(o.bucket), "%s", bucket);
	if (tgt_obj_locate(&o) != 0)
		return NULL;
	fd = openat(mp->root_fd, o.rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (ft_lom_fget(fd, &lom) != 0)
		goto out;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		goto out;
	l->t = t;
	int rc = tgt_shard_index_get(&o, fd, &lom, fmt, true, &l->ix, err, sizeof(err));
	if (rc != 0) {
		ft_warn("list %s/%s: members of shard %s not listed: %s", provider, bucket, obj, err);
		free(l);
		l = NULL;
		goto out;
	}
	l->names = malloc((l->ix->n ? l->ix->n : 1) * sizeof(*l->names));
	if (l->names == NULL) {
		tgt_shard_list_close(l);
		l = NULL;
		goto out;
	}
	for (size_t i = 0; i < l->ix->n; i++) {
		uint32_t k = l->ix->by_name[i];
		if (tgt_shard_member_check(l->ix->m[k].name, &why) == 0)
			l->names[l->n++] = k;
	}
out:
	close(fd);
	return l;
}

size_t tgt_shard_list_count(const tgt_shard_list_t *l)
{
	return l->n;
}

const char *tgt_shard_list_name(const tgt_shard_list_t *l, size_t i, uint64_t *size)
{
	const tgt_shard_member_t *m = &l->ix->m[l->names[i]];

	*size = m->size;
	return m->name;
}

size_t tgt_shard_list_after(const tgt_shard_list_t *l, const char *key)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(l->ix->m[l->names[mid]].name, key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void tgt_shard_list_close(tgt_shard_list_t *l)
{
	if (l == NULL)
		return;
	tgt_shard_index_put(l->t, l->ix);
	free(l->names);
	free(l);
}
