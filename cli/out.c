/* SPDX-License-Identifier: Apache-2.0 */
/* ft's output: aligned tables, human sizes and durations, JSON, and the progress bar or plain progress lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "ft.h"

#define PLAIN_EVERY_NS (2LL * 1000000000LL) /* a plain progress line at most this often */

const char *cli_size(int64_t n, char *buf, size_t cap)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	if (n < 0) {
		snprintf(buf, cap, "-");
		return buf;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%lld B", (long long)n);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
	return buf;
}

const char *cli_duration(int64_t s, char *buf, size_t cap)
{
	if (s < 0)
		snprintf(buf, cap, "-");
	else if (s >= 3600)
		snprintf(buf, cap, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(buf, cap, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else
		snprintf(buf, cap, "%llds", (long long)s);
	return buf;
}

struct cli_table {
	int cols, rows, cap;
	char **cells; /* rows x cols, row 0 the header */
};

cli_table_t *cli_table_new(int n_cols, const char *const *header)
{
	cli_table_t *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->cols = n_cols;
	cli_table_row(t, header);
	return t;
}

void cli_table_row(cli_table_t *t, const char *const *cells)
{
	if (t == NULL)
		return;
	if (t->rows == t->cap) {
		int cap = t->cap ? t->cap * 2 : 16;
		char **p = realloc(t->cells, sizeof(*p) * (size_t)cap * (size_t)t->cols);
		if (p == NULL)
			return;
		t->cells = p;
		t->cap = cap;
	}
	for (int i = 0; i < t->cols; i++)
		t->cells[t->rows * t->cols + i] = strdup(cells[i] != NULL ? cells[i] : "");
	t->rows++;
}

void cli_table_print(cli_table_t *t, FILE *out)
{
	int width[32] = {0};

	if (t == NULL)
		return;
	for (int r = 0; r < t->rows; r++)
		for (int c = 0; c < t->cols && c < 32; c++) {
			int w = (int)strlen(t->cells[r * t->cols + c]);
			if (w > width[c])
				width[c] = w;
		}
	for (int r = 0; r < t->rows; r++) {
		for (int c = 0; c < t->cols; c++) {
			const char *cell = t->cells[r * t->cols + c];
			if (c == t->cols - 1)
				fprintf(out, "%s\n", cell);
			else
				fprintf(out, "%-*s  ", width[c < 32 ? c : 31], cell);
		}
	}
	for (int i = 0; i < t->rows * t->cols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

void cli_print_json(const json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);

	if (s != NULL)
		printf("%s\n", s);
	free(s);
}

int64_t cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void cli_progress_init(cli_progress_t *p, const ft_cli_t *c)
{
	struct winsize ws;

	memset(p, 0, sizeof(*p));
	p->tty = isatty(STDERR_FILENO) && !cli_flag(c, "no-progress");
	p->enabled = !c->json || p->tty;
	p->start_ns = cli_now_ns();
	p->width = 80;
	if (p->tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
		p->width = ws.ws_col;
}

void cli_progress_show(cli_progress_t *p, const char *label, int64_t done, int64_t total, int64_t bytes, int64_t rate,
		       int64_t eta, bool final)
{
	int64_t now = cli_now_ns();
	double secs = (double)(now - p->start_ns) / 1e9;
	char sb[32], rb[32], eb[32], counts[64], tail[160];

	if (!p->enabled || (!p->tty && !final && now - p->last_ns < PLAIN_EVERY_NS))
		return;
	p->last_ns = now;
	if (rate < 0)
		rate = secs > 0 ? (int64_t)((double)bytes / secs) : 0;
	if (eta < 0 && total > 0 && done > 0 && secs > 0)
		eta = (int64_t)((double)(total - done) * secs / (double)done);
	if (total >= 0)
		snprintf(counts, sizeof(counts), "%lld/%lld", (long long)done, (long long)total);
	else
		snprintf(counts, sizeof(counts), "%lld", (long long)done);
	snprintf(tail, sizeof(tail), "%s objects  %s  %s/s  ETA %s", counts, cli_size(bytes, sb, sizeof(sb)),
		 cli_size(rate, rb, sizeof(rb)), final ? "0s" : cli_duration(eta, eb, sizeof(eb)));
	if (!p->tty) {
		fprintf(stderr, "%s: %s\n", label, tail);
		return;
	}
	int bar = p->width - (int)strlen(label) - (int)strlen(tail) - 12;
	if (bar > 40)
		bar = 40;
	char cells[64] = "";
	if (bar >= 10) {
		int fill = total > 0 ? (int)((double)bar * (double)done / (double)total) : (final ? bar : 0);
		if (fill > bar)
			fill = bar;
		for (int i = 0; i < bar; i++)
			cells[i] = i < fill ? '#' : '.';
		cells[bar] = '\0';
	}
	int pct = total > 0 ? (int)(100.0 * (double)done / (double)total) : (final ? 100 : 0);
	fprintf(stderr, "\r\033[K%s [%s] %3d%% %s", label, cells, pct > 100 ? 100 : pct, tail);
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}
