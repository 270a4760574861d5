/* N-way mirroring of objects on distinct mountpaths of their owner: copies at PUT, removal, the "mirror" job. */
#include <stdio.h>

#include "target.h"

int tgt_mirror_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap)
{
	(void)lom;
	if (o->mirror_copies <= 1)
		return 0;
	snprintf(err, cap, "mirroring (mirror.copies=%d) is not built yet", o->mirror_copies);
	return -1;
}

void tgt_mirror_delete(const tgt_obj_t *o)
{
	(void)o;
}

int tgt_mirror_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	(void)o;
	(void)bytes;
	snprintf(err, cap, "mirroring is not built yet");
	return -1;
}
