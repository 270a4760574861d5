/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the shard header walks (target/shard/tar.c, zip.c): any bytes as a TAR and as a ZIP. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard/walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
	const uint8_t *data;
	size_t len;
} mem_t;

static int mem_read(void *arg, void *buf, size_t len, uint64_t off)
{
	const mem_t *m = arg;

	if (off > m->len || len > m->len - off)
		return -1;
	memcpy(buf, m->data + off, len);
	return 0;
}

/* Every member a walk reports lies inside the file and has a NUL-terminated name of bounded length. */
static int check(void *arg, const tgt_walk_member_t *m)
{
	const mem_t *f = arg;

	if (strlen(m->name) > TGT_SHARD_NAME_MAX)
		abort();
	if (m->data_off >= 0 && m->regular &&
	    ((uint64_t)m->data_off > f->len || m->size > f->len - (uint64_t)m->data_off))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mem_t m = {data, size};
	char err[256];
	uint64_t end;

	if (tgt_tar_walk(mem_read, &m, size, check, &m, &end, err, sizeof(err)) == 0 && end > size)
		abort();
	tgt_zip_walk(mem_read, &m, size, check, &m, err, sizeof(err));
	return 0;
}
