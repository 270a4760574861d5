/* SPDX-License-Identifier: Apache-2.0 */
/* Process limits a daemon raises at start: the open-file soft limit up to the hard one. */
#include "base/limits.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"

long ft_limits_raise_nofile(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur == rl.rlim_max)
		return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
	was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		ft_warn("open files limit stays %llu: raising it to %llu failed: %s", (unsigned long long)was,
			(unsigned long long)rl.rlim_max, strerror(errno));
		return (long)was;
	}
	ft_info("open files limit raised from %llu to %llu", (unsigned long long)was, (unsigned long long)rl.rlim_max);
	return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}
