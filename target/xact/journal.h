/* SPDX-License-Identifier: Apache-2.0 */
/* A job's state on disk (its message and the objects done), so a restarted target resumes it without losing count. */
#ifndef TGT_XACT_JOURNAL_H
#define TGT_XACT_JOURNAL_H

#include <jansson.h>
#include <stdint.h>

typedef struct tgt_journal tgt_journal_t;

/*
 * Creates "<state_dir>/jobs/<id>.json" (msg, written whole: temp file, fsync, rename) and opens
 * "<id>.done" for appending. NULL on failure (the job then runs without a journal).
 */
tgt_journal_t *tgt_journal_create(const char *state_dir, const char *id, const json_t *msg);
/* Reopens the journal of a job found by tgt_journal_load for appending. NULL on failure. */
tgt_journal_t *tgt_journal_reopen(const char *state_dir, const char *id);
/* Notes one object done with its bytes (an append, no fsync; safe from any thread). */
void tgt_journal_done(tgt_journal_t *jl, const char *name, int64_t bytes);
/* Closes; with remove, deletes both files (the job ended: nothing to resume). NULL is fine. */
void tgt_journal_close(tgt_journal_t *jl, int remove);
/*
 * The journals left in "<state_dir>/jobs": calls fn(arg, msg, done) for each, done mapping every
 * object name done to its bytes (both borrowed for the call). A journal that cannot be read is
 * removed. Returns the number found.
 */
int tgt_journal_load(const char *state_dir, void (*fn)(void *arg, const json_t *msg, const json_t *done), void *arg);

#endif
