/* SPDX-License-Identifier: Apache-2.0 */
/* Leveled logging to stderr: one write(2) per line, UTC timestamps with milliseconds, as text or JSON lines. */
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
static int log_level = FT_LOG_INFO;  /* read and written with __atomic builtins */
static int log_format = FT_LOG_TEXT; /* set once at startup */

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

void ft_log_set_format(ft_log_format_t format)
{
	__atomic_store_n(&log_format, (int)format, __ATOMIC_RELAXED);
}

int ft_log_format_parse(const char *s, ft_log_format_t *out)
{
	if (s != NULL && strcmp(s, "text") == 0)
		*out = FT_LOG_TEXT;
	else if (s != NULL && strcmp(s, "json") == 0)
		*out = FT_LOG_JSON;
	else
		return -1;
	return 0;
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

/*
 * The JSON form of one message: {"time":...,"level":...,"name":...,"msg":...} and '\n', into line (LOG_LINE_MAX).
 * msg is escaped as a JSON string (control bytes as \u00XX; other bytes as they are, so UTF-8 stays UTF-8); a
 * message that does not fit is cut and ends in "...". Returns the line's length.
 */
static size_t format_json(char *line, const char *ts, ft_log_level_t level, const char *msg)
{
	static const char hex[] = "0123456789abcdef";
	size_t len, room = LOG_LINE_MAX - 8; /* the tail: "...", '"', '}', '\n' */
	const unsigned char *p;

	len = (size_t)snprintf(line, LOG_LINE_MAX, "{\"time\":\"%s\",\"level\":\"%s\",\"name\":\"%s\",\"msg\":\"", ts,
			       level_word[level], log_name);
	for (p = (const unsigned char *)msg; *p != '\0'; p++) {
		if (*p == '\n' && p[1] == '\0')
			break; /* the line's own end */
		if (len + 6 > room) {
			memcpy(line + len, "...", 3);
			len += 3;
			break;
		}
		if (*p == '"' || *p == '\\') {
			line[len++] = '\\';
			line[len++] = (char)*p;
		} else if (*p < 0x20) {
			memcpy(line + len, "\\u00", 4);
			line[len + 4] = hex[*p >> 4];
			line[len + 5] = hex[*p & 15];
			len += 6;
		} else {
			line[len++] = (char)*p;
		}
	}
	memcpy(line + len, "\"}\n", 3);
	return len + 3;
}

static void log_json(ft_log_level_t level, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX], line[LOG_LINE_MAX], ts[40];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	format_time(ts, sizeof(ts));
	write_all(line, format_json(line, ts, level, msg));
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
	if (__atomic_load_n(&log_format, __ATOMIC_RELAXED) == FT_LOG_JSON) {
		va_start(ap, fmt);
		log_json(level, fmt, ap);
		va_end(ap);
		errno = saved_errno;
		return;
	}
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
