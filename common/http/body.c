/* SPDX-License-Identifier: Apache-2.0 */
/* Request bodies: Content-Length and chunked framing on the loop thread, handed to on_data, buffered, or to a worker. */
#include "http/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define BUF_BODY (64 * 1024)
#define STREAM_RESUME (64 * 1024) /* free body-ring bytes at which the loop is asked to read again */

/* ---- the body ring a worker's ft_req_body_read drains, loop side (see DESIGN in internal.h) ---- */

/* Free bytes in the body ring; none marks the loop paused, so the worker's reads resume it. */
static size_t stream_body_room(conn_t *c)
{
	stream_shared_t *sh = &c->req.sh;
	size_t room;

	pthread_mutex_lock(&c->smu);
	room = STREAM_BUF - sh->b_len;
	if (room == 0)
		sh->b_paused = true;
	pthread_mutex_unlock(&c->smu);
	return room;
}

/* Appends n de-chunked body bytes for the worker; n <= stream_body_room(). */
static void stream_body_put(conn_t *c, const char *p, size_t n)
{
	ft_req_t *r = &c->req;
	size_t pos;

	pthread_mutex_lock(&c->smu);
	pos = (r->sh.b_rd + r->sh.b_len) % STREAM_BUF;
	pthread_mutex_unlock(&c->smu);
	http_stream_ring_put(r->b_ring, pos, p, n); /* free space: only the loop writes there */
	pthread_mutex_lock(&c->smu);
	r->sh.b_len += n;
	http_stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/* The body ended (err = 0) or failed; the worker sees it after the bytes already in the ring. */
static void stream_body_end(conn_t *c, int err)
{
	stream_shared_t *sh = &c->req.sh;

	pthread_mutex_lock(&c->smu);
	if (err == 0)
		sh->b_eof = true;
	else if (sh->b_err == 0)
		sh->b_err = err;
	http_stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/* ---- request body ---- */

void http_body_end(conn_t *c, int err)
{
	ft_req_t *r = &c->req;

	r->body_state = err != 0 ? BODY_FAILED : BODY_DONE;
	if (err != 0) {
		c->must_close = true;
		c->linger = err != -ECONNRESET;
	}
	c->refs++; /* the callback may answer and the connection end meanwhile */
	if (r->all_done != NULL) {
		char *body = r->all_buf;

		if (body == NULL) {
			body = http_arena_alloc(&r->arena, 1);
			body[0] = 0;
		} else {
			body[r->all_len] = 0;
		}
		r->all_done(r, r->body_arg, body, r->all_len, err);
	} else if (r->body_stream) {
		stream_body_end(c, err);
	} else {
		r->on_end(r, r->body_arg, err);
	}
	if (err == 0 && !c->closed)
		http_watch_close(c);
	http_conn_unref(c);
}

/* Hands body bytes to the handler; returns -1 when reading stops. */
static int deliver(conn_t *c, const char *p, size_t n)
{
	ft_req_t *r = &c->req;
	size_t want;
	int rc;

	r->m_recv += n;
	if (r->body_stream) {
		stream_body_put(c, p, n);
		return 0;
	}
	if (r->all_done != NULL) {
		if (n > r->all_max - r->all_len) {
			r->body_state = BODY_FAILED;
			http_server_error(c, 413, "request body too large");
			return -1;
		}
		if (r->all_len + n + 1 > r->all_cap) {
			want = r->all_cap ? r->all_cap * 2 : 64 * 1024;
			if (want < r->all_len + n + 1)
				want = r->all_len + n + 1;
			if (want > r->all_max + 1)
				want = r->all_max + 1;
			r->all_buf = realloc(r->all_buf, want);
			if (r->all_buf == NULL)
				http_oom();
			r->all_cap = want;
		}
		memcpy(r->all_buf + r->all_len, p, n);
		r->all_len += n;
		return 0;
	}
	rc = r->on_data(r, r->body_arg, p, n);
	if (r->responded) {
		/* the handler answered from on_data: no more callbacks for this request */
		r->body_state = BODY_FAILED;
		c->must_close = true;
		c->linger = true;
		return -1;
	}
	if (rc != 0) {
		http_body_end(c, -ECANCELED);
		return -1;
	}
	return 0;
}

/* Feeds buffered body bytes to the handler, then reads more if the body is not complete. */
void http_body_feed(conn_t *c)
{
	ft_req_t *r = &c->req;
	const char *p, *d;
	size_t avail, n, used, dl, room;
	ft_hp_chunk_result_t rc;

	while (r->body_state == BODY_ACTIVE && c->start < c->end) {
		p = c->buf + c->start;
		avail = c->end - c->start;
		if (r->body_stream) {
			/* never more than the worker's ring takes (de-chunked bytes <= input bytes) */
			room = stream_body_room(c);
			if (room == 0)
				return; /* paused: the worker's EV_FEED resumes */
			if (avail > room)
				avail = room;
		}
		if (r->chunked) {
			rc = ft_hp_chunked_decode(&r->chunk, p, avail, &used, &d, &dl);
			c->start += used;
			if (dl > 0 && deliver(c, d, dl) != 0)
				return;
			if (rc == FT_HP_CHUNK_DONE) {
				http_body_end(c, 0);
				return;
			}
			if (rc == FT_HP_CHUNK_BAD) {
				http_body_end(c, -EBADMSG);
				return;
			}
		} else {
			n = avail < r->body_left ? avail : (size_t)r->body_left;
			c->start += n;
			r->body_left -= n;
			if (deliver(c, p, n) != 0)
				return;
			if (r->body_left == 0) {
				http_body_end(c, 0);
				return;
			}
		}
	}
	if (r->body_state != BODY_ACTIVE)
		return;
	if (c->closed) {
		http_body_end(c, -ECONNRESET);
		return;
	}
	if (r->body_stream && stream_body_room(c) == 0)
		return; /* no more reading until the worker drains */
	http_recv_arm(c);
}

void http_body_start(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool large;

	r->body_state = BODY_ACTIVE;
	if (c->closed) {
		http_body_end(c, -ECONNRESET);
		return;
	}
	if (!r->chunked && r->content_length == 0) {
		http_body_end(c, 0);
		return;
	}
	if (r->all_done != NULL && !r->chunked && (uint64_t)r->content_length > r->all_max) {
		r->body_state = BODY_FAILED;
		http_server_error(c, 413, "request body too large");
		return;
	}
	r->body_left = r->chunked ? 0 : (uint64_t)r->content_length;
	ft_hp_chunked_init(&r->chunk);
	/* not after a stream's final head: a 100 must precede it */
	if (r->expect_continue && r->minor >= 1 && c->start == c->end && !c->send_inflight && !r->st_head)
		http_send_continue(c);
	large = r->chunked || r->body_left > (uint64_t)(c->cap - (c->end - c->start));
	if (large && !c->recv_inflight)
		http_buf_grow(c, BUF_BODY);
	c->body_since = c->L->now;
	http_body_feed(c);
}

/* ---- body API ---- */

static bool body_call_ok(ft_req_t *r, const char *what)
{
	if (r->body_called || r->responded) {
		ft_error("http: %s called twice or after the response", what);
		return false;
	}
	r->body_called = true;
	return true;
}

void ft_req_read_body(ft_req_t *r, ft_body_data_fn on_data, ft_body_end_fn on_end, void *arg)
{
	if (!body_call_ok(r, "ft_req_read_body"))
		return;
	r->on_data = on_data;
	r->on_end = on_end;
	r->body_arg = arg;
	http_req_notify(r, EV_BODY);
}

void ft_req_read_body_all(ft_req_t *r, size_t max, ft_body_all_fn done, void *arg)
{
	if (!body_call_ok(r, "ft_req_read_body_all"))
		return;
	r->all_done = done;
	r->all_max = max;
	r->body_arg = arg;
	http_req_notify(r, EV_BODY);
}

/* ---- the body ring, worker side ---- */

ssize_t ft_req_body_read(ft_req_t *r, void *buf, size_t cap)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	bool resume = false;
	size_t pos, n;
	ssize_t rc;

	if (http_on_loop_thread("ft_req_body_read"))
		return -EDEADLK;
	if (!r->body_stream) {
		if (!r->chunked && r->content_length == 0)
			return 0;
		if (!body_call_ok(r, "ft_req_body_read"))
			return -EINVAL;
		r->b_ring = http_stream_buf_take(c->L->s);
		r->body_stream = true;
		http_req_notify(r, EV_BODY); /* the loop starts reading (and sends "100 Continue") */
	}
	if (cap == 0)
		return -EINVAL;
	pthread_mutex_lock(&c->smu);
	while (sh->b_len == 0 && !sh->b_eof && sh->b_err == 0)
		http_stream_wait(c);
	if (sh->b_len == 0) {
		rc = sh->b_eof ? 0 : sh->b_err;
		pthread_mutex_unlock(&c->smu);
		return rc;
	}
	pos = sh->b_rd;
	n = sh->b_len < cap ? sh->b_len : cap;
	pthread_mutex_unlock(&c->smu);
	http_stream_ring_get(r->b_ring, pos, buf, n); /* filled space: only this thread frees it */
	pthread_mutex_lock(&c->smu);
	sh->b_rd = (pos + n) % STREAM_BUF;
	sh->b_len -= n;
	if (sh->b_paused && STREAM_BUF - sh->b_len >= STREAM_RESUME) {
		sh->b_paused = false;
		resume = true;
	}
	pthread_mutex_unlock(&c->smu);
	if (resume)
		http_req_notify(r, EV_FEED);
	return (ssize_t)n;
}
