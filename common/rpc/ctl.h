/* Control-port HTTP server (intra-cluster messages) on libmicrohttpd. */
#ifndef FT_CTL_H
#define FT_CTL_H

#include <jansson.h>
#include <stddef.h>

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
} ft_ctl_resp_t;

/* Called on a libmicrohttpd pool thread once the whole body is in; may block on the network. */
typedef void (*ft_ctl_handler_fn)(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* Starts a thread-pool server on bind:port. Returns NULL and fills err on failure. */
ft_ctl_t *ft_ctl_start(const char *bind, int port, int threads, ft_ctl_handler_fn fn, void *ctx, char *err,
		       size_t errlen);
void ft_ctl_stop(ft_ctl_t *s);
/* URL-decoded query argument, or NULL. */
const char *ft_ctl_query(const ft_ctl_req_t *req, const char *key);
/* Fills resp with {"status": status, "message": ...}. */
void ft_ctl_error(ft_ctl_resp_t *resp, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
