/* SPDX-License-Identifier: Apache-2.0 */
/* Control-port HTTP server (intra-cluster messages) on libmicrohttpd. */
#ifndef FT_CTL_H
#define FT_CTL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define FT_CTL_MAX_BODY (16u << 20)

typedef struct ft_ctl ft_ctl_t;

typedef struct {
	const char *method; /* "GET", "POST", ... */
	const char *path;   /* URL path without the query */
	const char *body;   /* whole request body, NUL-terminated (NULL if none) */
	size_t body_len;
	void *conn; /* internal: for ft_ctl_query */
} ft_ctl_req_t;

typedef struct {
	int status;   /* default 200 */
	json_t *json; /* response body, stolen by the server; NULL = empty body */
	/* set by ft_ctl_send_fd: the body is file_len bytes of file_fd from file_off instead of json */
	int file_set;
	int file_fd;
	uint64_t file_off, file_len;
} ft_ctl_resp_t;

/* Called on a libmicrohttpd pool thread once the whole body is in; may block on the network. */
typedef void (*ft_ctl_handler_fn)(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* Starts a thread-pool server on bind:port. Returns NULL and fills err on failure. */
ft_ctl_t *ft_ctl_start(const char *bind, int port, int threads, ft_ctl_handler_fn fn, void *ctx, char *err,
		       size_t errlen);
void ft_ctl_stop(ft_ctl_t *s);
/* URL-decoded query argument, or NULL. */
const char *ft_ctl_query(const ft_ctl_req_t *req, const char *key);
/*
 * Makes the body len bytes of fd from off (application/octet-stream, sent from the file without a
 * copy). fd is the server's from now on: it closes it once sent, or at once on failure.
 */
void ft_ctl_send_fd(ft_ctl_resp_t *resp, int status, int fd, uint64_t off, uint64_t len);
/* Fills resp with {"status": status, "message": ...}. */
void ft_ctl_error(ft_ctl_resp_t *resp, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
