/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes on one machine: this machine's id, and a node's public port reached through its Unix socket. */
#ifndef FT_LOCAL_H
#define FT_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster/smap.h"

/*
 * The id of the filesystem view this process has of this machine: the kernel's boot id and the
 * mount namespace, read once; "" when unknown. Two nodes with the same id see the same files, so a
 * Unix socket path one advertises names the same socket for the other (containers of one machine
 * have the same boot id but their own mount namespaces).
 */
const char *ft_host_id(void);
/*
 * A stream socket connected to the public Unix socket of the target whose public URL's "host:port"
 * is hostport in the current map (an https:// URL when https, else http://), when that target has
 * this process's ft_host_id; -1 otherwise (no such target, no socket, another machine or mount
 * namespace, a listener of another user, or a connect that did not complete at once, e.g. a full
 * backlog: the caller dials TCP, with TLS when https). The socket speaks plain HTTP either way. The
 * connect never blocks; nonblock: the socket stays O_NONBLOCK.
 */
int ft_local_dial(const char *hostport, bool https, bool nonblock);
/* Whether ft_local_dial(hostport, https, ...) would try a Unix socket (a map lookup, no connect). */
bool ft_local_known(const char *hostport, bool https);
/*
 * The parts of ft_local_dial for a caller that connects the socket itself (libcurl): the path of
 * that target's Unix socket into path (false when ft_local_dial would not try one, or the path
 * does not fit cap), and whether the peer of the connected Unix socket fd runs as this process's
 * user and is not this process (a listener of someone else, or a socket that is not connected, is
 * not ours: nothing may be sent on it).
 */
bool ft_local_path(const char *hostport, bool https, char *path, size_t cap);
bool ft_local_peer_ok(int fd);

#endif
