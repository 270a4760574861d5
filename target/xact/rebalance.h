/* SPDX-License-Identifier: Apache-2.0 */
/* Internal header of rebalance and resilver (xact/rebalance*.c, resilver.c, walk.c): state and helpers. */
#ifndef TGT_XACT_REBALANCE_H
#define TGT_XACT_REBALANCE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/lom.h"
#include "target.h"
#include "xact/runner.h"

#define RB_THREADS 2
#define RB_CHUNK (8u << 20)
#define RB_HISTORY 3
#define RB_RANKED 3 /* next targets in HRW order asked by a pull */
#define RB_PULL_WINDOW_NS (600LL * 1000000000LL)
#define RB_CONNECT_MS 3000L
#define RB_XFER_MS 120000L
#define RB_ASK_MS 30000 /* a pull's request to a previous owner, its transfer included (also connect) */
#define RB_ID_MAX 64
#define RB_XFER_MAX 96
#define RB_SEND_ATTEMPTS 3
#define RB_BUSY_TRIES 40 /* a 503 (receiver without the BMD yet) is retried every RB_BUSY_MS */
#define RB_BUSY_MS 250

enum { ST_IDLE = 0, ST_RUNNING, ST_FINISHED, ST_ABORTED };

/*
 * The module's state, one per target (t->rebalance, tgt_rebalance_init .. tgt_rebalance_fini).
 * Strings and samples under lock, counters atomic; hist holds one reference per entry.
 */
struct tgt_rebalance {
	pthread_mutex_t lock;
	tgt_service_t manager; /* runs the requested walks, one at a time (runner.c) */
	tgt_run_t *run;        /* the walk running now (under lock), NULL between walks */
	int run_gen;           /* its generation; -1: only a stop aborts it */
	int stop;
	int disabled;  /* POST /v1/rebalance {"action":"disable"}: map changes are only noted */
	int missed;    /* a map change came while disabled */
	int want_walk; /* a walk is requested */
	char want_id[RB_ID_MAX];
	char want_kind[16];
	int detach_pending[FT_MAX_MOUNTPATHS];
	atomic_int gen;              /* bumped by every request; a walk of an older generation stops */
	atomic_int stopping;         /* set by tgt_rebalance_fini: transfers and walks end now */
	ft_smap_t *hist[RB_HISTORY]; /* previous maps, newest first */
	int64_t last_change_ns;
	/* status of the current or last run (strings and samples under lock, counters atomic) */
	char id[RB_ID_MAX];
	char kind[16];
	char mode[8]; /* "local" (this walker) or "job" (tgt_jobs_start_local) */
	atomic_int state;
	atomic_llong scanned, total;
	tgt_run_stats_t stats;            /* objects, bytes, errors and their samples */
	atomic_llong pulled, pull_misses; /* since start: objects a GET miss pulled here, pulls that found none */
	int64_t start_ns, end_ns;
	char note[256];
	atomic_uint_fast64_t xfer_counter; /* unique transfer and work-file names */
	atomic_int pulls_running;          /* rb_pull_now threads; tgt_rebalance_fini waits for them */
	atomic_int resilver_seq;           /* ids "resilver-<n>" */
};

/* ---- rebalance.c: shared helpers ---- */
/* Counts an error of the current run and keeps a sample for its status. */
void rb_note_error(tgt_t *t, const char *what, const char *msg);
/* Fills o for name of bucket b found on mp (rel built; -1 if it does not fit). */
int rb_obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const tgt_mountpath_t *mp, const char *name);
/* The LOM of rel on mp (and its inode); 0, or -errno (-ENOENT: no object there). */
int rb_lom_at(const tgt_mountpath_t *mp, const char *rel, ft_lom_t *lom, ino_t *ino);
/* Checksum of fd's first size bytes, as type, into hex. 0 or -errno. */
int rb_file_cksum(int fd, uint64_t size, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX]);
int rb_sync_fd(const tgt_t *t, int fd);
/* Asks the manager for a walk (rb->lock held); starts it on first use. */
void rb_request_walk_locked(tgt_t *t, const char *kind, const char *id);
json_t *rb_status_json(tgt_t *t);
int rb_query_i64(const ft_ctl_req_t *req, const char *key, int64_t *out);
/* The object named by the query; 0, or -1 after answering 400/404/503. */
int rb_query_obj(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp, tgt_obj_t *o);
/* Refuses (409) to take or give away o when this target owns it in a map at least as new as peer_v. */
int rb_ownership_conflict(tgt_t *t, const tgt_obj_t *o, int64_t peer_v, int want_owner, ft_ctl_resp_t *resp);

/* ---- resilver.c ---- */
/* Moves o (on o->mp) to dst on this target. 0 when moved or superseded, 1 when o is gone, -1 with err. */
int resilver_local_move(tgt_obj_t *o, const tgt_mountpath_t *dst, int64_t *bytes, char *err, size_t cap);
/* Detaches slot after a complete walk: seal, sweep what was published meanwhile, close. */
void resilver_finish_detach(tgt_t *t, int slot);
json_t *resilver_mountpaths_json(tgt_t *t);
void resilver_mountpath_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- walk.c ---- */
/* Walks srcs and moves what is misplaced. Returns 0 when complete, 1 when aborted. */
int rb_walk_move(tgt_t *t, const tgt_mountpath_t **srcs, int n_src, int gen);
/* Objects still stored on mp (for a detach: what the walk could not move). */
size_t rb_walk_count(tgt_t *t, const tgt_mountpath_t *mp);

/* ---- rebalance_send.c ---- */
/* "<base>/v1/rebalance/<what>?provider=..&bucket=..&obj=.." plus extra (starting with '&'); NULL on OOM. */
char *rb_obj_url(const char *base, const char *what, const tgt_obj_t *o, const char *extra);
/* Moves o (on o->mp) to the target at dest_url. 0 when moved, 1 when o is not here, -1 with err. */
int rb_send_move(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int64_t *bytes, char *err, size_t cap);
/* Like rb_send_move, but keeps the local copy (a target in maintenance serving a pull). */
int rb_send_copy(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int64_t *bytes, char *err, size_t cap);
void rb_send_for_peer(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- rebalance_recv.c ---- */
void rb_recv_chunk(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
void rb_recv_abort(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/*
 * Removes the partial transfer work files (.work/rb.<xfer>) whose sender is not a target of cur: a sender that
 * died or left mid-object never sends the rest, nor the DELETE that drops them (it comes back, if ever, as a
 * new process with new transfers).
 */
void rb_recv_sweep(tgt_t *t, const ft_smap_t *cur);

/* ---- rebalance_pull.c ---- */
void rb_pull_now(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

#endif
