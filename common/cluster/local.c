/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes on one machine: this machine's id, and a node's public port reached through its Unix socket. */
#include "cluster/local.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"

static char host_id[FT_HOST_ID_MAX];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_read(void)
{
	char boot[40] = "", ns[32];
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);

	if (f != NULL) {
		if (fgets(boot, sizeof(boot), f) == NULL)
			boot[0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		fclose(f);
	}
	if (boot[0] == '\0' || n <= 0)
		return; /* unknown: no node is taken for a neighbour */
	ns[n] = '\0';
	snprintf(host_id, sizeof(host_id), "%s/%s", boot, ns);
}

const char *ft_host_id(void)
{
	pthread_once(&host_once, host_read);
	return host_id;
}

/* Whether url ("http://host:port/...", or https:// when https) names hostport. */
static bool url_is(const char *url, const char *hostport, bool https)
{
	const char *scheme = https ? "https://" : "http://";
	size_t n = strlen(hostport);

	if (strncmp(url, scheme, strlen(scheme)) != 0)
		return false;
	url += strlen(scheme);
	return strncmp(url, hostport, n) == 0 && (url[n] == '\0' || url[n] == '/');
}

bool ft_local_path(const char *hostport, bool https, char *path, size_t cap)
{
	ft_smap_t *m = ft_smap_current();
	bool found = false;

	if (m == NULL)
		return false;
	for (int i = 0; i < m->n_targets && !found; i++) {
		const ft_node_t *n = &m->targets[i];

		if (n->public_unix[0] == '\0' || n->host_id[0] == '\0' || !url_is(n->public_url, hostport, https))
			continue;
		found = ft_host_id()[0] != '\0' && strcmp(n->host_id, ft_host_id()) == 0 &&
			strlen(n->public_unix) < cap;
		if (found)
			memcpy(path, n->public_unix, strlen(n->public_unix) + 1);
		break;
	}
	ft_smap_put(m);
	return found;
}

bool ft_local_peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return false;
	if (cr.uid != geteuid()) { /* another user's process holds a node's socket path: nothing goes to it */
		ft_warn("the Unix socket of a node on this machine is held by uid %u, pid %d, not by this user: not used",
			(unsigned)cr.uid, (int)cr.pid);
		return false;
	}
	/* nor this process: no node dials itself, and a dead node's entry may name a path that is now ours */
	return cr.pid != getpid();
}

bool ft_local_known(const char *hostport, bool https)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

	return ft_local_path(hostport, https, path, sizeof(path));
}

int ft_local_dial(const char *hostport, bool https, bool nonblock)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (!ft_local_path(hostport, https, a.sun_path, sizeof(a.sun_path)))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	/* non-blocking: a listener whose backlog is full (a stopped or wedged target) answers EAGAIN at once */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || !ft_local_peer_ok(fd) ||
	    (!nonblock && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)) {
		close(fd);
		return -1;
	}
	return fd;
}
