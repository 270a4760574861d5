/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes on one machine: this machine's id, and a node's public port reached through its Unix socket. */
#ifndef FT_LOCAL_H
#define FT_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster/smap.h"

/*
 * This machine's id (the kernel's boot id), read once; "" when unknown. Two nodes with the same id
 * may share a Unix socket (containers of one machine share it only where they share the path).
 */
const char *ft_host_id(void);
/*
 * A stream socket connected to the public Unix socket of the target whose public URL's "host:port"
 * is hostport in the current map, when that target runs on this machine; -1 otherwise (no such
 * target, no socket, another machine, or the connect failed: the caller dials TCP). nonblock: the
 * socket is O_NONBLOCK (a Unix connect completes at once or fails).
 */
int ft_local_dial(const char *hostport, bool nonblock);
/*
 * For a URL "http://host:port/...": the Unix socket path of the target there when it runs on this
 * machine (as ft_local_dial decides), into path; false otherwise.
 */
bool ft_local_url_path(const char *url, char *path, size_t cap);

#endif
