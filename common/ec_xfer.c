/* Slice transfer helpers for erasure coding: binary POSTs on a per-thread libcurl handle, base64 codecs. */
#include "ec_xfer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "client.h"
#include "strbuf.h"

/*
 * DESIGN
 * common/client.c speaks JSON bodies only; slices are bytes. This keeps its own per-thread easy
 * handle (a pthread key, cleaned up at thread exit) so that the slices of one PUT, sent one after
 * another from one worker thread, reuse connections. Replies are the control port's JSON.
 */

#define XFER_MAX_RESPONSE (1u << 20)

static pthread_key_t xfer_key;
static pthread_once_t xfer_once = PTHREAD_ONCE_INIT;
static int xfer_init_rc = -1;

static void handle_destroy(void *h)
{
	curl_easy_cleanup(h);
}

static void xfer_init_once(void)
{
	if (ft_client_global_init() != 0) /* curl_global_init, once per process */
		return;
	if (pthread_key_create(&xfer_key, handle_destroy) != 0)
		return;
	xfer_init_rc = 0;
}

static CURL *thread_handle(void)
{
	CURL *h;

	pthread_once(&xfer_once, xfer_init_once);
	if (xfer_init_rc != 0)
		return NULL;
	h = pthread_getspecific(xfer_key);
	if (h != NULL)
		return h;
	h = curl_easy_init();
	if (h != NULL && pthread_setspecific(xfer_key, h) != 0) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	ft_strbuf_t *b = userdata;
	size_t n = size * nmemb;

	if (n > XFER_MAX_RESPONSE - b->len)
		return 0;
	ft_strbuf_add(b, ptr, n);
	return b->failed ? 0 : n;
}

int ft_ec_xfer_post(const char *url, const void *body, size_t len, int timeout_ms, long *status, json_t **resp,
		    char *err, size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL;
	ft_strbuf_t buf = { 0 };
	CURL *h = thread_handle();
	CURLcode cc;
	int rc = -1;

	*status = 0;
	*resp = NULL;
	if (h == NULL) {
		snprintf(err, errlen, "POST %s: cannot initialize libcurl", url);
		return -1;
	}
	headers = curl_slist_append(NULL, "Expect:");
	if (headers != NULL) {
		struct curl_slist *h2 = curl_slist_append(headers, "Content-Type: application/octet-stream");
		if (h2 == NULL) {
			curl_slist_free_all(headers);
			headers = NULL;
		}
	}
	if (headers == NULL) {
		snprintf(err, errlen, "POST %s: out of memory", url);
		return -1;
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, len > 0 ? body : "");
	if (timeout_ms > 0) {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	}
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "POST %s: %s", url, curl_err[0] != '\0' ? curl_err : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	if (buf.len > 0 && !buf.failed)
		*resp = json_loadb(buf.p, buf.len, JSON_DECODE_ANY, NULL);
	rc = 0;
out:
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
	curl_slist_free_all(headers);
	ft_strbuf_free(&buf);
	return rc;
}

char *ft_ec_xfer_escape(const char *s)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;

	if (out == NULL)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c)) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = digits[c >> 4];
			*o++ = digits[c & 15];
		}
	}
	*o = '\0';
	return out;
}

char *ft_ec_b64_encode(const void *buf, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out != NULL)
		EVP_EncodeBlock((unsigned char *)out, buf, (int)len);
	return out;
}

long ft_ec_b64_decode(const char *text, size_t text_len, uint8_t *out, size_t cap)
{
	size_t pad = 0;
	int n;

	if (text_len % 4 != 0 || text_len / 4 * 3 > cap)
		return -1;
	if (text_len == 0)
		return 0;
	pad = (text[text_len - 1] == '=') + (text[text_len - 2] == '=');
	n = EVP_DecodeBlock(out, (const unsigned char *)text, (int)text_len);
	if (n < 0 || (size_t)n < pad)
		return -1;
	return (long)((size_t)n - pad);
}
