/* SPDX-License-Identifier: Apache-2.0 */
/* Download jobs on a target: one URL fetched into a work file with retries, then stored as its object here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xact/copy.h"
#include "xact/xfer.h"

/*
 * DESIGN
 * The proxy names each URL's object (the last segment of its path) and every target keeps the
 * URLs whose object it owns. A URL is fetched into an unnamed work file (O_TMPFILE) on the
 * object's mountpath, so a crash leaves nothing behind; only a complete answer (200, the whole
 * body) is then PUT through this target's own public port, which stores it like any PUT (checksum,
 * mirror, EC, write-through to a remote bucket). Connection errors, 408, 429 and 5xx are tried
 * again after 0.5 s, 1 s, 2 s, ...; other answers fail the object at once.
 */

/* Sleeps ms milliseconds in short steps; 1 when run was aborted meanwhile. */
static int pause_ms(const tgt_run_t *run, int ms)
{
	for (int slept = 0; slept < ms; slept += 50) {
		if (run != NULL && tgt_run_aborted(run))
			return 1;
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000L}, NULL);
	}
	return run != NULL && tgt_run_aborted(run);
}

int tgt_download_obj(tgt_obj_t *o, const char *url, int attempts, const tgt_run_t *run, tgt_download_slot_t *slot,
		     int64_t *bytes, char *err, size_t cap)
{
	char dest[TGT_XFER_URL_MAX];
	tgt_xfer_head_t h;
	int64_t got = 0;
	long status = 0;
	int retry = 0, rc = -1, fd;

	*bytes = 0;
	if (tgt_xfer_obj_url(dest, sizeof(dest), o->t->public_url, o->provider, o->bucket, o->obj) != 0) {
		snprintf(err, cap, "name too long for a URL");
		return -1;
	}
	fd = tgt_work_anon(o->mp);
	if (fd < 0) {
		snprintf(err, cap, "work file: %s", strerror(-fd));
		return -1;
	}
	for (int i = 0; i < attempts; i++) {
		if (i > 0 && pause_ms(run, 500 << (i - 1))) {
			snprintf(err, cap, "aborted");
			goto out;
		}
		if (slot != NULL)
			atomic_store(&slot->bytes, 0);
		if (tgt_xfer_fetch(url, fd, slot != NULL ? &slot->bytes : NULL, &got, &status, &retry, err, cap) == 0)
			break;
		if (!retry)
			goto out;
		got = -1;
	}
	if (got < 0) {
		size_t n = strlen(err);
		snprintf(err + n, cap - n, " (after %d attempts)", attempts);
		goto out;
	}
	if (tgt_xfer_put(dest, fd, got, NULL, false, &h, err, cap) != 0)
		goto out;
	*bytes = got;
	rc = 0;
out:
	close(fd);
	return rc;
}
