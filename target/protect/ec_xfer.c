/* SPDX-License-Identifier: Apache-2.0 */
/* Slice transfer for erasure coding: binary POSTs through the node client, binary GETs streamed to a sink. */
#include "protect/ec_xfer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "rpc/client.h"

/*
 * DESIGN
 * Slices are bytes, not JSON, both ways. A slice goes to its holder through ft_client_send, on
 * common/client.c's per-thread keep-alive handle: its framed header (ec_codec.h) then its
 * payload, in POSTs of at most the control port's body limit. It comes back (restore, survey) as
 * the body of a GET: the holder sends the slice file itself, framed header first, so the
 * metadata travels before the bytes; ft_ec_xfer_get hands the body to a sink as it arrives, on a
 * keep-alive handle of its own per thread. Error replies are the control port's JSON.
 */

#define XFER_CONNECT_MS 5000L
#define XFER_ERRBODY_MAX 2048

int ft_ec_xfer_post(const char *url, const void *body, size_t len, int timeout_ms, long *status, json_t **resp,
		    char *err, size_t errlen)
{
	static const char *const headers[] = {"Content-Type: application/octet-stream", NULL};

	return ft_client_send("POST", url, headers, body, len, timeout_ms, status, resp, err, errlen);
}

/* One keep-alive GET handle per thread, freed when the thread exits. */
static pthread_key_t get_key;
static pthread_once_t get_once = PTHREAD_ONCE_INIT;
static int get_key_ok;

static void get_handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void get_key_init(void)
{
	get_key_ok = ft_client_global_init() == 0 && pthread_key_create(&get_key, get_handle_free) == 0;
}

static CURL *get_handle(void)
{
	pthread_once(&get_once, get_key_init);
	if (!get_key_ok)
		return NULL;
	CURL *h = pthread_getspecific(get_key);
	if (h) {
		curl_easy_reset(h); /* keeps the connections */
		ft_client_tls_apply(h);
		return h;
	}
	h = curl_easy_init();
	if (h && pthread_setspecific(get_key, h) != 0) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	ft_client_tls_apply(h);
	return h;
}

typedef struct {
	CURL *h;
	ft_ec_sink_fn sink;
	void *arg;
	long status; /* 0 until the first body byte */
	int sink_failed;
	char *err;
	size_t errlen;
	char errbody[XFER_ERRBODY_MAX]; /* a non-200 reply's body (JSON) */
	size_t errbody_len;
} get_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	get_t *g = arg;
	size_t len = size * n;

	if (g->status == 0)
		curl_easy_getinfo(g->h, CURLINFO_RESPONSE_CODE, &g->status);
	if (g->status != 200) {
		size_t room = sizeof(g->errbody) - 1 - g->errbody_len;
		memcpy(g->errbody + g->errbody_len, p, len < room ? len : room);
		g->errbody_len += len < room ? len : room;
		g->errbody[g->errbody_len] = '\0';
		return len;
	}
	if (g->sink(g->arg, (const uint8_t *)p, len, g->err, g->errlen) != 0) {
		g->sink_failed = 1;
		return 0; /* aborts the transfer */
	}
	return len;
}

int ft_ec_xfer_get(const char *url, int idle_ms, ft_ec_sink_fn sink, void *arg, long *status, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	get_t g = {.sink = sink, .arg = arg, .err = err, .errlen = errlen};

	g.h = get_handle();
	if (!g.h) {
		snprintf(err, errlen, "no HTTP client handle");
		return -1;
	}
	err[0] = '\0';
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (ft_client_sign_headers(&hdrs, "GET", url, NULL, 0) != 0) { /* the control plane is signed */
		curl_slist_free_all(hdrs);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	curl_easy_setopt(g.h, CURLOPT_URL, url);
	curl_easy_setopt(g.h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(g.h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(g.h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(g.h, CURLOPT_WRITEDATA, &g);
	curl_easy_setopt(g.h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(g.h, CURLOPT_PROXY, "");
	curl_easy_setopt(g.h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(g.h, CURLOPT_CONNECTTIMEOUT_MS, XFER_CONNECT_MS);
	if (idle_ms > 0) { /* a large slice may take long: only a stall fails it */
		curl_easy_setopt(g.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(g.h, CURLOPT_LOW_SPEED_TIME, (long)(idle_ms + 999) / 1000);
	}
	CURLcode cc = curl_easy_perform(g.h);
	curl_easy_setopt(g.h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	if (g.sink_failed)
		return -1; /* err from the sink */
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s", curl_easy_strerror(cc));
		return -1;
	}
	curl_easy_getinfo(g.h, CURLINFO_RESPONSE_CODE, status);
	if (*status != 200) {
		json_t *j = json_loads(g.errbody, 0, NULL);
		const char *m = json_string_value(json_object_get(j, "message"));
		snprintf(err, errlen, "%s", m ? m : "");
		json_decref(j);
	}
	return 0;
}
