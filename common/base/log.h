/* SPDX-License-Identifier: Apache-2.0 */
/* Leveled logging to stderr, shared by every daemon and tool. */
#ifndef FT_LOG_H
#define FT_LOG_H

typedef enum {
	FT_LOG_DEBUG = 0,
	FT_LOG_INFO,
	FT_LOG_WARN,
	FT_LOG_ERROR,
} ft_log_level_t;

typedef enum {
	FT_LOG_TEXT = 0, /* 2026-11-21T21:35:00.123Z I name: message */
	FT_LOG_JSON,     /* {"time":"2026-11-21T21:35:00.123Z","level":"info","name":"name","msg":"message"} */
} ft_log_format_t;

/* Sets the process name printed in every line and the lowest level printed. */
void ft_log_init(const char *name, ft_log_level_t level);
/* Chooses the line format (default text); call it at startup, like ft_log_init. */
void ft_log_set_format(ft_log_format_t format);
/* Parses "text|json"; returns 0, or -1 for an unknown word. */
int ft_log_format_parse(const char *s, ft_log_format_t *out);
/* Parses "debug|info|warn|error"; returns 0, or -1 for an unknown word. */
int ft_log_level_parse(const char *s, ft_log_level_t *out);
/* Prints one line in the chosen format to stderr (thread-safe, one write). */
void ft_log(ft_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ft_debug(...) ft_log(FT_LOG_DEBUG, __VA_ARGS__)
#define ft_info(...) ft_log(FT_LOG_INFO, __VA_ARGS__)
#define ft_warn(...) ft_log(FT_LOG_WARN, __VA_ARGS__)
#define ft_error(...) ft_log(FT_LOG_ERROR, __VA_ARGS__)

#endif
