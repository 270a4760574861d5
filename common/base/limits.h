/* SPDX-License-Identifier: Apache-2.0 */
/* Process limits a daemon raises at start: the open-file soft limit up to the hard one. */
#ifndef FT_LIMITS_H
#define FT_LIMITS_H

/*
 * Raises RLIMIT_NOFILE's soft limit to its hard limit (shells and service managers often start
 * programs at 1024 while allowing far more), as servers do: every client connection, open object
 * and cached file is a descriptor, and nothing here uses select(2). Logs what it did; returns the
 * soft limit now in force (-1 when it cannot be read).
 */
long ft_limits_raise_nofile(void);

#endif
