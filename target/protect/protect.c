/* SPDX-License-Identifier: Apache-2.0 */
/* A bucket's redundancy for a version just published: mirror copies under the name lock, EC slices after it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "protect/mirror.h"
#include "protect/protect.h"
#include "target.h"

int tgt_protect_local(const tgt_obj_t *o, const ft_lom_t *lom, int *fd, char *err, size_t cap)
{
	*fd = -1;
	if (tgt_mirror_put(o, lom, err, cap) != 0)
		return -1;
	if (o->ec_data <= 0)
		return 0;
	*fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0) {
		snprintf(err, cap, "cannot reopen the stored object: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int tgt_protect_remote(const tgt_obj_t *o, int fd, const ft_lom_t *lom, char *err, size_t cap)
{
	if (fd < 0)
		return 0;
	int rc = tgt_ec_put_fd(o, fd, lom, err, cap);
	close(fd);
	return rc == 0 ? 0 : -1;
}
