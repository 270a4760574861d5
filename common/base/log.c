/* SPDX-License-Identifier: Apache-2.0 */
/* Leveled logging to stderr: one write(2) per line, UTC timestamps with milliseconds. */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * A line is built in a stack buffer and handed to the kernel with one write(2), so lines from
 * different threads never interleave (stderr is a pipe or a file opened with O_APPEND in
 * practice; lines up to PIPE_BUF are atomic on a pipe). Longer messages are cut and end in "...".
 */
#define LOG_LINE_MAX 4096
#define LOG_NAME_MAX 64

static char log_name[LOG_NAME_MAX] = "ft";
static int log_level = FT_LOG_INFO; /* read and written with __atomic builtins */

static const char level_letter[] = {
	[FT_LOG_DEBUG] = 'D',
	[FT_LOG_INFO] = 'I',
	[FT_LOG_WARN] = 'W',
	[FT_LOG_ERROR] = 'E',
};

static const char *const level_word[] = {
	[FT_LOG_DEBUG] = "debug",
	[FT_LOG_INFO] = "info",
	[FT_LOG_WARN] = "warn",
	[FT_LOG_ERROR] = "error",
};

/* Not thread-safe with concurrent ft_log() calls: call it once at startup. */
void ft_log_init(const char *name, ft_log_level_t level)
{
	if (name != NULL && name[0] != '\0')
		snprintf(log_name, sizeof(log_name), "%s", name);
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

int ft_log_level_parse(const char *s, ft_log_level_t *out)
{
	if (s == NULL)
		return -1;
	for (int i = FT_LOG_DEBUG; i <= FT_LOG_ERROR; i++) {
		if (strcmp(s, level_word[i]) == 0) {
			*out = (ft_log_level_t)i;
			return 0;
		}
	}
	return -1;
}

/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ" into buf; returns its length. */
static int format_time(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	return snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
}

/* One write(2); retried only when interrupted or short, which stderr on a pipe or file does not do. */
static void write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(STDERR_FILENO, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

void ft_log(ft_log_level_t level, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	size_t len, room;
	va_list ap;
	int n;

	if ((int)level < __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	if ((int)level < FT_LOG_DEBUG || (int)level > FT_LOG_ERROR)
		level = FT_LOG_ERROR;

	int saved_errno = errno; /* callers may log and then inspect errno */
	n = format_time(line, sizeof(line));
	len = (size_t)n;
	n = snprintf(line + len, sizeof(line) - len, " %c %s: ", level_letter[level], log_name);
	len += (size_t)n;

	/* Keep one byte for '\n'. */
	room = sizeof(line) - len - 1;
	va_start(ap, fmt);
	n = vsnprintf(line + len, room + 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > room) {
		len += room;
		memcpy(line + len - 3, "...", 3);
	} else {
		len += (size_t)n;
	}
	/* A message ending in '\n' does not get a second one. */
	if (len == 0 || line[len - 1] != '\n')
		line[len++] = '\n';
	write_all(line, len);
	errno = saved_errno;
}
