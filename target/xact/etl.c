/* SPDX-License-Identifier: Apache-2.0 */
/* Transformers (ETL) on a target: one object through a command (bounded processes) or a transformer server. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "base/redact.h"
#include "http/util.h"
#include "rpc/client.h"
#include "target.h"

/*
 * DESIGN
 * The registry is the BMD's "etl" object (cluster/bmd.h; the proxy checks and distributes it,
 * proxy/etl.c): a transformer is looked up by name for every object, so a registration or a
 * removal takes effect on the next object. A command transformer runs its argv (no shell) once per
 * object in its own process group, with the object file as stdin and a pipe as stdout, copied into
 * the caller's work file; at most "procs" of one transformer run at once on a target (callers wait
 * for a slot), so a job's threads and inline GETs together never fork more. A transformer server
 * gets the object in a POST and its 2xx answer is the result, with the same slots, timeout and
 * output limit. Whatever fails (exit status, signal, timeout, output over the limit, HTTP status)
 * is an error and the caller keeps nothing of the work file: a result is complete or nothing.
 */

#define ETL_STDERR_KEEP 200 /* bytes of a failing command's stderr in the error */
#define ETL_ARGV_MAX 64

static const char *const rc_text[] = {
	[TGT_ETL_OK] = "ok",
	[TGT_ETL_UNKNOWN] = "unknown transformer",
	[TGT_ETL_FAILED] = "transformer failed",
	[TGT_ETL_TIMEOUT] = "transformer timed out",
	[TGT_ETL_TOO_BIG] = "transformer output over its limit",
	[TGT_ETL_INTERNAL] = "internal error",
};

/* A transformer as the BMD holds it, copied out (never a reference into a BMD). */
typedef struct {
	char name[FT_BUCKET_NAME_MAX + 1];
	char *argv[ETL_ARGV_MAX + 1]; /* owned strings; argv[0] NULL for a server */
	char url[FT_URL_MAX];
	int64_t timeout_ms, max_output;
	int procs;
} spec_t;

/* The slots of one transformer on this target (never freed: one per name ever used). */
typedef struct slots {
	struct slots *next;
	char name[FT_BUCKET_NAME_MAX + 1];
	int active;
} slots_t;

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slots_cond = PTHREAD_COND_INITIALIZER;
static slots_t *slots_head;

const char *tgt_etl_strerror(tgt_etl_rc_t rc)
{
	return rc >= 0 && rc <= TGT_ETL_INTERNAL ? rc_text[rc] : "?";
}

int tgt_etl_http_status(tgt_etl_rc_t rc)
{
	switch (rc) {
	case TGT_ETL_OK:
		return 200;
	case TGT_ETL_UNKNOWN:
		return 404;
	case TGT_ETL_TIMEOUT:
		return 504;
	case TGT_ETL_FAILED:
	case TGT_ETL_TOO_BIG:
		return 502;
	default:
		return 500;
	}
}

static void spec_free(spec_t *s)
{
	for (int i = 0; s->argv[i] != NULL; i++)
		free(s->argv[i]);
	s->argv[0] = NULL;
}

/* Copies transformer name out of the current BMD into s; 0, or -1 when unknown (or out of memory). */
static int spec_load(const char *name, spec_t *s)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const json_t *j = bmd != NULL ? json_object_get(bmd->etl, name) : NULL;
	const json_t *cmd = json_object_get(j, "command");
	int rc = -1;

	memset(s, 0, sizeof(*s));
	if (j == NULL)
		goto out;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->url, sizeof(s->url), "%s", json_string_value(json_object_get(j, "url")) ?: "");
	s->timeout_ms = json_integer_value(json_object_get(j, "timeout_ms"));
	s->max_output = json_integer_value(json_object_get(j, "max_output"));
	s->procs = (int)json_integer_value(json_object_get(j, "procs"));
	if (s->timeout_ms <= 0)
		s->timeout_ms = 30000;
	if (s->max_output <= 0)
		s->max_output = 256LL << 20;
	if (s->procs <= 0)
		s->procs = 4;
	for (size_t i = 0; i < json_array_size(cmd) && i < ETL_ARGV_MAX; i++) {
		s->argv[i] = strdup(json_string_value(json_array_get(cmd, i)) ?: "");
		if (s->argv[i] == NULL) {
			spec_free(s);
			goto out;
		}
	}
	rc = s->argv[0] != NULL || s->url[0] != '\0' ? 0 : -1;
out:
	ft_bmd_put(bmd);
	return rc;
}

/* Waits for one of s's slots; returns it (release with slot_put), NULL on allocation failure. */
static slots_t *slot_get(const spec_t *s)
{
	slots_t *p;

	pthread_mutex_lock(&slots_lock);
	for (p = slots_head; p != NULL && strcmp(p->name, s->name) != 0; p = p->next)
		;
	if (p == NULL && (p = calloc(1, sizeof(*p))) != NULL) {
		snprintf(p->name, sizeof(p->name), "%s", s->name);
		p->next = slots_head;
		slots_head = p;
	}
	while (p != NULL && p->active >= s->procs)
		pthread_cond_wait(&slots_cond, &slots_lock);
	if (p != NULL)
		p->active++;
	pthread_mutex_unlock(&slots_lock);
	return p;
}

static void slot_put(slots_t *p)
{
	pthread_mutex_lock(&slots_lock);
	p->active--;
	pthread_cond_broadcast(&slots_cond);
	pthread_mutex_unlock(&slots_lock);
}

/* ---- command transformers ---- */

/* One running command: its pipes, where its output goes, and what it said on stderr. */
typedef struct {
	pid_t pid;
	int out, errp;   /* read ends; -1 once at EOF */
	int dest;        /* the caller's work file */
	int64_t written; /* bytes of stdout so far */
	char stderr_text[ETL_STDERR_KEEP + 1];
	size_t stderr_len;
} proc_t;

/* Starts s's argv with in_fd as stdin, in its own process group. 0, or -errno. */
static int proc_start(const spec_t *s, int in_fd, proc_t *p)
{
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	extern char **environ;

	if (lseek(in_fd, 0, SEEK_SET) < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
		rc = -errno;
		goto fail;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* none of the daemon's descriptors */
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	rc = -posix_spawnp(&p->pid, s->argv[0], &fa, &attr, s->argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0)
		goto fail;
	close(out[1]);
	close(errp[1]);
	p->out = out[0];
	p->errp = errp[0];
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	return rc;
}

/* Reads what is ready on fd of p. 0 more to come, 1 EOF, -1 output over max, -2 a work file error (err set). */
static int proc_drain(proc_t *p, int fd, int64_t max, char *err, size_t cap)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : 1;
	if (n == 0)
		return 1;
	if (fd == p->errp) {
		size_t k = (size_t)n < ETL_STDERR_KEEP - p->stderr_len ? (size_t)n : ETL_STDERR_KEEP - p->stderr_len;
		memcpy(p->stderr_text + p->stderr_len, buf, k);
		p->stderr_len += k;
		return 0;
	}
	if (p->written + n > max) {
		snprintf(err, cap, "output over its limit of %lld bytes", (long long)max);
		return -1;
	}
	int w = ft_pwrite_all(p->dest, buf, (size_t)n, p->written);
	if (w != 0) {
		snprintf(err, cap, "work file: %s", strerror(-w));
		return -2;
	}
	p->written += n;
	return 0;
}

/* Kills p's process group and reaps it. */
static void proc_kill(proc_t *p)
{
	kill(-p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC ms), at least 0. */
static int ms_left(int64_t deadline)
{
	int64_t left = deadline - ft_mono_ms();

	return left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
}

/* The exit of p (stdout and stderr at EOF), waited for until deadline. rc of the transform. */
static tgt_etl_rc_t proc_wait(proc_t *p, int64_t deadline, const spec_t *s, char *err, size_t cap)
{
	int status;

	for (;;) {
		pid_t w = waitpid(p->pid, &status, WNOHANG);
		if (w == p->pid)
			break;
		if (w < 0 && errno != EINTR) {
			snprintf(err, cap, "waiting for the command: %s", strerror(errno));
			return TGT_ETL_INTERNAL;
		}
		if (ft_mono_ms() >= deadline) {
			proc_kill(p);
			snprintf(err, cap, "timed out after %lld ms", (long long)s->timeout_ms);
			return TGT_ETL_TIMEOUT;
		}
		nanosleep(&(struct timespec){.tv_nsec = 5 * 1000000L}, NULL);
	}
	kill(-p->pid, SIGKILL); /* anything it left behind in its group */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return TGT_ETL_OK;
	p->stderr_text[p->stderr_len] = '\0';
	while (p->stderr_len > 0 &&
	       (p->stderr_text[p->stderr_len - 1] == '\n' || p->stderr_text[p->stderr_len - 1] == '\r'))
		p->stderr_text[--p->stderr_len] = '\0';
	if (WIFEXITED(status))
		snprintf(err, cap, "command %s exited with status %d%s%s", s->argv[0], WEXITSTATUS(status),
			 p->stderr_len ? ": " : "", p->stderr_text);
	else
		snprintf(err, cap, "command %s killed by signal %d%s%s", s->argv[0], WTERMSIG(status),
			 p->stderr_len ? ": " : "", p->stderr_text);
	return TGT_ETL_FAILED;
}

/* Runs command s over in_fd into out_fd. */
static tgt_etl_rc_t run_command(const spec_t *s, int in_fd, int out_fd, int64_t *out_size, char *err, size_t cap)
{
	proc_t p = {.out = -1, .errp = -1, .dest = out_fd};
	int64_t deadline = ft_mono_ms() + s->timeout_ms;
	tgt_etl_rc_t rc = TGT_ETL_OK;
	int started = proc_start(s, in_fd, &p);

	if (started != 0) {
		snprintf(err, cap, "cannot run %s: %s", s->argv[0], strerror(-started));
		return TGT_ETL_FAILED;
	}
	while (p.out >= 0 || p.errp >= 0) {
		struct pollfd fds[2] = {{.fd = p.out, .events = POLLIN}, {.fd = p.errp, .events = POLLIN}};
		if (ft_mono_ms() >= deadline) {
			proc_kill(&p);
			snprintf(err, cap, "timed out after %lld ms", (long long)s->timeout_ms);
			rc = TGT_ETL_TIMEOUT;
			goto out;
		}
		if (poll(fds, 2, ms_left(deadline)) < 0 && errno != EINTR) {
			proc_kill(&p);
			snprintf(err, cap, "poll: %s", strerror(errno));
			rc = TGT_ETL_INTERNAL;
			goto out;
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i == 0 ? &p.out : &p.errp;
			if (*fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int d = proc_drain(&p, *fd, s->max_output, err, cap);
			if (d < 0) {
				proc_kill(&p);
				rc = d == -1 ? TGT_ETL_TOO_BIG : TGT_ETL_INTERNAL;
				goto out;
			}
			if (d == 1) {
				close(*fd);
				*fd = -1;
			}
		}
	}
	rc = proc_wait(&p, deadline, s, err, cap);
out:
	if (p.out >= 0)
		close(p.out);
	if (p.errp >= 0)
		close(p.errp);
	*out_size = p.written;
	return rc;
}

/* ---- transformer servers ---- */

typedef struct {
	int in_fd, out_fd;
	int64_t in_off, in_size, written, max;
	bool too_big;
	char body_head[ETL_STDERR_KEEP + 1]; /* start of a failing answer */
	size_t head_len;
} http_io_t;

static size_t http_read(char *buf, size_t size, size_t n, void *arg)
{
	http_io_t *io = arg;
	size_t want = size * n;
	ssize_t got;

	if ((int64_t)want > io->in_size - io->in_off)
		want = (size_t)(io->in_size - io->in_off);
	if (want == 0)
		return 0;
	got = pread(io->in_fd, buf, want, io->in_off);
	if (got <= 0)
		return CURL_READFUNC_ABORT;
	io->in_off += got;
	return (size_t)got;
}

static size_t http_write(char *buf, size_t size, size_t n, void *arg)
{
	http_io_t *io = arg;
	size_t len = size * n;

	if (io->head_len < ETL_STDERR_KEEP) {
		size_t k = len < ETL_STDERR_KEEP - io->head_len ? len : ETL_STDERR_KEEP - io->head_len;
		memcpy(io->body_head + io->head_len, buf, k);
		io->head_len += k;
	}
	if (io->written + (int64_t)len > io->max) {
		io->too_big = true;
		return 0;
	}
	if (ft_pwrite_all(io->out_fd, buf, len, io->written) != 0)
		return 0;
	io->written += (int64_t)len;
	return len;
}

/* POSTs in_size bytes of in_fd to server s; its 2xx answer into out_fd. */
static tgt_etl_rc_t run_http(const spec_t *s, int in_fd, int64_t in_size, int out_fd, int64_t *out_size, char *err,
			     size_t cap)
{
	http_io_t io = {.in_fd = in_fd, .out_fd = out_fd, .in_size = in_size, .max = s->max_output};
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	CURL *c = curl_easy_init();
	tgt_etl_rc_t rc = TGT_ETL_OK;
	long status = 0;
	CURLcode cc;
	char shown[FT_REDACT_URL_MAX]; /* the URL as errors name it: no user:password@, no query values */

	*out_size = 0;
	if (c == NULL || hdrs == NULL) {
		snprintf(err, cap, "out of memory");
		rc = TGT_ETL_INTERNAL;
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, s->url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)in_size);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, http_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &io);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &io);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	ft_client_tls_apply_ca(c); /* an https server: the system's CAs and the cluster's (tls_ca) */
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (io.too_big) {
		snprintf(err, cap, "output over its limit of %lld bytes", (long long)s->max_output);
		rc = TGT_ETL_TOO_BIG;
	} else if (cc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(err, cap, "transformer server %s timed out after %lld ms",
			 ft_redact_url(s->url, shown, sizeof(shown)), (long long)s->timeout_ms);
		rc = TGT_ETL_TIMEOUT;
	} else if (cc != CURLE_OK) {
		snprintf(err, cap, "transformer server %s: %s", ft_redact_url(s->url, shown, sizeof(shown)),
			 curl_easy_strerror(cc));
		rc = TGT_ETL_FAILED;
	} else if (status < 200 || status > 299) {
		io.body_head[io.head_len] = '\0';
		snprintf(err, cap, "transformer server %s answered HTTP %ld%s%.*s",
			 ft_redact_url(s->url, shown, sizeof(shown)), status, io.head_len ? ": " : "",
			 (int)strcspn(io.body_head, "\r\n"), io.body_head);
		rc = TGT_ETL_FAILED;
	}
	*out_size = io.written;
out:
	curl_slist_free_all(hdrs);
	if (c != NULL)
		curl_easy_cleanup(c);
	return rc;
}

tgt_etl_rc_t tgt_etl_transform(const char *name, int in_fd, int64_t in_size, int out_fd, int64_t *out_size,
			       int64_t timeout_ms, char *err, size_t cap)
{
	spec_t s;
	slots_t *slot;
	tgt_etl_rc_t rc;

	*out_size = 0;
	if (spec_load(name, &s) != 0) {
		snprintf(err, cap, "etl \"%s\" does not exist", name);
		return TGT_ETL_UNKNOWN;
	}
	if (timeout_ms > 0)
		s.timeout_ms = timeout_ms; /* the job's own (AIStore's request_timeout) */
	slot = slot_get(&s);
	if (slot == NULL) {
		spec_free(&s);
		snprintf(err, cap, "out of memory");
		return TGT_ETL_INTERNAL;
	}
	if (s.argv[0] != NULL)
		rc = run_command(&s, in_fd, out_fd, out_size, err, cap);
	else
		rc = run_http(&s, in_fd, in_size, out_fd, out_size, err, cap);
	slot_put(slot);
	spec_free(&s);
	if (rc != TGT_ETL_OK)
		*out_size = 0;
	return rc;
}

bool tgt_etl_known(const char *name)
{
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && json_object_get(bmd->etl, name) != NULL;

	ft_bmd_put(bmd);
	return known;
}
