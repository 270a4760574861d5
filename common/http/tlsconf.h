/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS keys of a daemon's configuration: checked together, and the client trust they set. */
#ifndef FT_HTTP_TLSCONF_H
#define FT_HTTP_TLSCONF_H

#include <stddef.h>

#include "base/config.h"

/*
 * Loads what the tls_* keys of c name, as startup uses them: the public port's certificate, key and
 * client CA (ft_httpd_tls_check) and the CA trusted for other nodes' https URLs (ft_client_set_tls_ca,
 * which stays in effect). Returns 0, or -1 with a message naming the key and the file in err.
 */
int ft_tls_config_check(const ft_config_t *c, char *err, size_t errlen);

#endif
