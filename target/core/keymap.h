/* SPDX-License-Identifier: Apache-2.0 */
/* Object names that are no path (odd segments, long segments, a name under another object): a hashed file name. */
#ifndef TGT_CORE_KEYMAP_H
#define TGT_CORE_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>

/*
 * DESIGN
 * An object name is stored as the path "<provider>/<bucket>/<name>" whenever it can be one: no
 * leading or trailing '/', no "//", no "." or ".." segment, no segment over 255 bytes, and a first
 * segment other than TGT_KEYS_DIR. Every other name S3 accepts (folder markers "a/", "a//b", "/a",
 * "a/../b", a 300-byte segment) is stored as "<provider>/<bucket>/.ft-keys/<hh>/<sha256 hex>", the
 * SHA-256 of the name, with the name itself in the file's TGT_KEY_XATTR (tgt_key_hashed: a pure
 * function of the name).
 * A name that could be a path may still find its path taken: "a/b" when the object "a" is a file,
 * "a" when "a/b" made it a directory. Such a name goes to its hashed file too, at the publishing
 * rename that finds the path blocked (core/publish.c), and stays there until deleted; a lookup
 * takes the path when it is a file and the hashed file otherwise (core/obj.c), so a name lives
 * in one place and names that fit keep today's layout. A GET, HEAD or GetBatch item looks up by
 * its open of the path (tgt_obj_name_unlocated), so a warm read costs no more than before; a
 * write or delete in one place removes an older version in the other (tgt_publish_drop_other).
 * Mirror copies (.copies) and EC slices (.ec) follow the same rule in their own trees.
 * The xattr is set on the work file before the publishing rename, so the name is there whenever
 * the file is. Walkers (listing, jobs, rebalance, LRU, EC) read the name back from the xattr and
 * take it only when it hashes to the file name; a reader opening a hashed file checks that its
 * xattr names the object asked for, and a publish never replaces a hashed file that names another
 * object (two names hashing alike: the xattr decides).
 */

#define TGT_KEYS_DIR ".ft-keys"      /* in a bucket directory: the hashed names */
#define TGT_KEY_XATTR "user.ft.name" /* a hashed file's object name */
#define TGT_KEY_HEX 64               /* hex digits of a hashed file name */
/* ".ft-keys/<hh>/<64 hex>" plus NUL */
#define TGT_KEY_REL_MAX (sizeof(TGT_KEYS_DIR) + 3 + TGT_KEY_HEX + 1)

/* Whether name[0..len) cannot be stored as its own path below the bucket directory. */
bool tgt_key_hashed(const char *name, size_t len);
/*
 * The path of name[0..len) relative to its bucket directory: the name itself, or
 * ".ft-keys/<hh>/<hex>" when tgt_key_hashed. 0, or -1 when it does not fit in cap or the name is
 * longer than FT_OBJ_NAME_MAX.
 */
int tgt_key_path(char *buf, size_t cap, const char *name, size_t len);
/* The hashed path ".ft-keys/<hh>/<hex>" of any name[0..len), even one that could be a path. 0 or -1. */
int tgt_key_path_hashed(char *buf, size_t cap, const char *name, size_t len);
/* Writes the object name held by the hashed file fd (its xattr) into name[cap]; length, or -1 when absent. */
long tgt_key_fget(int fd, char *name, size_t cap);
/* Stores name[0..len) as fd's hashed-name xattr. 0 or -errno. */
int tgt_key_fset(int fd, const char *name, size_t len);
/*
 * The object name of the file leaf (a SHA-256 hex file name) in directory dfd, read from its xattr
 * and accepted only when it hashes to leaf (a name that could be a path too: its path was taken).
 * Length, or -1.
 */
long tgt_key_read(int dfd, const char *leaf, char *name, size_t cap);
/* Whether the hashed file fd holds name[0..len) (its xattr is exactly that name). */
bool tgt_key_holds(int fd, const char *name, size_t len);

/*
 * Calls fn for every hashed object in the bucket directory bdfd (not consumed): the directory fd
 * and file name of the hashed file and its object name. Non-zero from fn stops the walk and is
 * returned; 0 when complete.
 */
typedef int (*tgt_key_walk_fn)(void *arg, int dfd, const char *leaf, const char *name, size_t len);
int tgt_key_walk(int bdfd, tgt_key_walk_fn fn, void *arg);

#endif
