/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon's authentication state: the cluster secret and the keys derived from it, the identity store, the checks at start. */
#ifndef FT_AUTH_AUTH_H
#define FT_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth/identity.h"
#include "auth/role.h"
#include "base/config.h"

#define FT_AUTH_KEY_LEN 32
#define FT_SECRET_MIN 32 /* bytes of a cluster secret */

/* Read-only after ft_auth_init. */
typedef struct {
	bool enabled;           /* public ports need credentials (key "auth") */
	bool have_secret;       /* a cluster secret is loaded: the keys below are set, the control plane is signed */
	bool anonymous_metrics; /* /metrics and /v1/daemon without credentials */
	bool public_read;       /* public-read ACLs may be set and are honoured (key "allow_public_read") */
	int token_ttl_max;
	uint8_t jwt_key[FT_AUTH_KEY_LEN];  /* signs access tokens */
	uint8_t url_key[FT_AUTH_KEY_LEN];  /* signs redirect URLs */
	uint8_t ctl_key[FT_AUTH_KEY_LEN];  /* signs control-plane requests */
	uint8_t seal_key[FT_AUTH_KEY_LEN]; /* encrypts backend secrets in the BMD */
	ft_ident_store_t *ids;             /* with_ids: auth_keys, else s3_keys; NULL when neither */
} ft_auth_t;

/*
 * Sets up the process's state from c: loads the cluster secret (cluster_secret; required when auth
 * is on) and derives the keys; with with_ids loads the identity store; refuses a non-loopback bind
 * with auth off unless insecure (then warns loudly). Returns 0, or -1 with err filled (never with a
 * secret in it).
 */
int ft_auth_init(const ft_config_t *c, bool with_ids, char *err, size_t errlen);
/* The state (zeroed before ft_auth_init: everything off). */
const ft_auth_t *ft_auth(void);
void ft_auth_fini(void);
/* Whether bind is a loopback address (127.0.0.0/8, ::1, localhost). */
bool ft_auth_is_loopback(const char *bind);
/* Derives a 32-byte key for label from secret (HMAC-SHA256(secret, label)); 0 or -1. */
int ft_auth_derive(const void *secret, size_t len, const char *label, uint8_t out[FT_AUTH_KEY_LEN]);
/* Reads a secret file (trimmed; at least FT_SECRET_MIN bytes) into out (cap); its length, or -1 with err. */
long ft_auth_read_secret(const char *path, char *out, size_t cap, char *err, size_t errlen);

/*
 * Authenticates an "Authorization: Bearer <token>" value (authz may be NULL) against the token
 * key: 0 with *p filled (clear it with ft_principal_clear), 1 when authz is not a Bearer value,
 * -1 with *why when the token is bad.
 */
int ft_auth_bearer(const char *authz, time_t now, ft_principal_t *p, const char **why);

#endif
