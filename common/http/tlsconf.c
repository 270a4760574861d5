/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS keys of a daemon's configuration: checked together, and the client trust they set. */
#include "http/tlsconf.h"

#include "http/http.h"
#include "rpc/client.h"

int ft_tls_config_check(const ft_config_t *c, char *err, size_t errlen)
{
	ft_httpd_opts_t o = {
		.tls_cert = c->tls_cert,
		.tls_key = c->tls_key,
		.tls_client_ca = c->tls_client_ca,
	};

	if (ft_httpd_tls_check(&o, err, errlen) != 0)
		return -1;
	return ft_client_set_tls_ca(c->tls_ca, err, errlen);
}
