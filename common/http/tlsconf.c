/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS keys of a daemon's configuration: checked together, and the client trust they set. */
#include "http/tlsconf.h"

#include <stdio.h>
#include <string.h>

#include "http/http.h"
#include "rpc/client.h"

int ft_tls_config_check(const ft_config_t *c, char *err, size_t errlen)
{
	ft_httpd_opts_t o = {
		.tls_cert = c->tls_cert,
		.tls_key = c->tls_key,
		.tls_client_ca = c->tls_client_ca,
	};

	bool etcd_tls = strncmp(c->etcd, "https://", 8) == 0;

	if (ft_httpd_tls_check(&o, err, errlen) != 0 || ft_client_set_tls_ca(c->tls_ca, err, errlen) != 0)
		return -1;
	if ((c->etcd_cert[0] != '\0') != (c->etcd_key[0] != '\0')) {
		snprintf(err, errlen, "etcd_cert and etcd_key go together");
		return -1;
	}
	/* an https etcd gets the node's own certificate unless etcd_cert names another */
	if (c->etcd_cert[0] != '\0')
		return ft_client_set_tls_cert(c->etcd_cert, c->etcd_key, err, errlen);
	return etcd_tls ? ft_client_set_tls_cert(c->tls_cert, c->tls_key, err, errlen) : 0;
}
