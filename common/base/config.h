/* SPDX-License-Identifier: Apache-2.0 */
/* Daemon configuration: a JSON file plus command-line overrides. */
#ifndef FT_CONFIG_H
#define FT_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "base/log.h"

#define FT_MAX_MOUNTPATHS 16
#define FT_ID_MAX 64
#define FT_HOST_MAX 256
#define FT_URL_MAX 512
#define FT_PATH_MAX 1024
#define FT_REGION_MAX 64

typedef enum {
	FT_SYNC_NONE = 0, /* rename after write; survives a process crash, not a power loss */
	FT_SYNC_DATA,     /* fdatasync the object before rename */
	FT_SYNC_FULL,     /* fsync the object and its directory */
} ft_sync_policy_t;

/*
 * Every key below is also a JSON key of the config file and a command-line flag
 * (`--key value` or `--key=value`); the command line wins over the file.
 * `mountpaths` is a JSON array; on the command line `--mountpath DIR` may repeat
 * (the first occurrence replaces the file's list).
 * Boolean keys take JSON true/false, or on the command line true|false|1|0|yes|no.
 */
typedef struct {
	char id[FT_ID_MAX];             /* node id; "" = target: load/generate under state_dir */
	char bind[FT_HOST_MAX];         /* listen address of both ports, default 127.0.0.1 */
	int public_port;                /* io_uring HTTP port (clients), default 51080 */
	char public_host[FT_HOST_MAX];  /* advertised in the cluster map and redirects; default = bind */
	int control_port;               /* libmicrohttpd port (intra-cluster), default public_port+1 */
	char control_host[FT_HOST_MAX]; /* advertised control address; default = public_host */
	char proxy_url[FT_URL_MAX];     /* target: the primary proxy's control URL, e.g. http://127.0.0.1:51081 */
	char state_dir[FT_PATH_MAX];    /* node state (id file); default "." */
	char public_unix[FT_PATH_MAX]; /* target: public port's Unix socket; "" = <state_dir>/public-<id>.sock, "off" */
	char *mountpaths[FT_MAX_MOUNTPATHS];
	int n_mountpaths;
	ft_log_level_t log_level;   /* key "log_level": debug|info|warn|error, default info */
	ft_log_format_t log_format; /* key "log_format" (flag --log-format): text|json, default text */
	int loop_threads;           /* public-port loop threads; 0 = number of CPUs */
	int worker_threads;         /* worker pool for deferred work (each blocked stream holds one), default 64 */
	int keepalive_ms;           /* target -> proxy keepalive interval, default 2000 */
	ft_sync_policy_t sync;      /* key "sync": none|data|full, default none */
	int64_t reserve_bytes;      /* free space kept on each mountpath, default 64 MiB */
	int mpu_expire_hours;       /* incomplete multipart uploads expire after this; 0 = never; default 168 */
	int http_max_header_bytes;  /* default 16384 */
	int http_max_headers;       /* default 100 */
	int http_idle_timeout_ms;   /* keep-alive idle close, default 60000 */
	int http_header_timeout_ms; /* time to send a full header block, default 10000 */
	int http_body_timeout_ms;   /* max gap between body bytes, default 30000 */
	/* S3 API (proxy) */
	char s3_keys[FT_PATH_MAX];     /* JSON file {"ACCESS_KEY": "SECRET", ...}; "" = no keys */
	int s3_anonymous;              /* bool: accept unsigned S3 requests, default false */
	int s3_root;                   /* bool: serve S3 at / besides /s3, default false */
	char s3_domain[FT_HOST_MAX];   /* virtual-host style for Host <bucket>.<s3_domain>; "" = off */
	char s3_region[FT_REGION_MAX]; /* region of the S3 endpoint, default us-east-1 */
	int s3_relay_timeout_ms;       /* proxy: a target silent this long fails a relayed S3 request; default 30000 */
	/* LRU eviction of cached remote objects (target) */
	int lru_high_pct;        /* usage % of a mountpath that starts eviction, default 90 */
	int lru_low_pct;         /* eviction stops below this %, default 75 (must be < high) */
	int64_t lru_quota_bytes; /* per-mountpath capacity for the marks; 0 = the filesystem's */
	int lru_interval_ms;     /* how often usage is checked, default 10000 */
	/* Epoch order hints (docs/epoch-hints.md) */
	int64_t hint_max_bytes; /* target: memory for all hints it holds; an install past it is 413; default 32 MiB */
	int hint_max_names;     /* proxy: names in one order-hint request; more is 413; default 1000000 */
	int hint_prefetch_inflight; /* target: staging fetches in flight under hints, 0 = none; default 4 */
	int probe_interval_ms;      /* proxy: connect probes of every target (proxy/health.c), 0 = none; default 250 */
	int job_missing_grace_s;    /* proxy: a job with a silent target reads running this long after the rest ended */
	int restore_after_s;        /* proxy: a dead target's slices and copies re-created this long after, 0 = never */
	int open_file_cache; /* target: open object files kept per loop thread (core/fcache.h), 0 = off; default 1024 */
	int job_expiry_s;    /* target: a finished job stays listed this long, default 3600 (docs/jobs.md) */
	/* Shards (docs/shards.md) */
	int64_t shard_max_decoded_bytes;  /* target: bytes one shard read may decode (bombs); default 1 GiB */
	int64_t batch_max_buffered_bytes; /* target: a buffered GetBatch answer's TAR (a work file); default 4 GiB */
	/* Authentication (docs/security.md) */
	int auth;                         /* bool: the public ports need credentials, default false */
	char auth_keys[FT_PATH_MAX];      /* proxy: identity store (JSON); "" = the s3_keys file */
	char cluster_secret[FT_PATH_MAX]; /* file with the cluster secret; signs the control plane; "" = none */
	int insecure;                     /* bool: allow a non-loopback bind with auth off (loudly), default false */
	int auth_anonymous_metrics;       /* bool: /metrics and /v1/daemon without credentials, default false */
	int allow_public_read;            /* bool: public-read ACLs may be set and are honoured, default false */
	int token_ttl_max;                /* proxy: longest token lifetime in seconds, default 604800 (7 days) */
	/* Several proxies (docs/multi-proxy.md) */
	char etcd[FT_URL_MAX];         /* proxy: etcd client URL (http:// or https://host:port); "" = one proxy */
	char etcd_prefix[FT_PATH_MAX]; /* proxy: key prefix of the cluster's keys in etcd, default "/fasttier" */
	int lease_ttl_s;               /* proxy: TTL of the primary's etcd lease in seconds, default 3 */
	char etcd_cert[FT_PATH_MAX];   /* proxy: PEM client certificate for an https etcd ("" = tls_cert) */
	char etcd_key[FT_PATH_MAX];    /* proxy: PEM private key of etcd_cert ("" = tls_key) */
	/* TLS on the public port (docs/security.md) */
	char tls_cert[FT_PATH_MAX];      /* PEM certificate chain: the public port speaks HTTPS; "" = plain HTTP */
	char tls_key[FT_PATH_MAX];       /* PEM private key of tls_cert */
	char tls_client_ca[FT_PATH_MAX]; /* PEM CA: clients of the public port must present a certificate it signed */
	char tls_ca[FT_PATH_MAX];        /* PEM CA trusted (besides the system's) for https URLs of other nodes */
} ft_config_t;

/* Fills defaults. */
void ft_config_defaults(ft_config_t *c);
/*
 * Defaults, then `--config FILE` (if given anywhere in argv), then the other flags.
 * Returns 0; -1 with a message in err on an unknown key, a bad value or an unreadable file.
 * `--help` is not handled here.
 */
int ft_config_load(ft_config_t *c, int argc, char **argv, char *err, size_t errlen);
/*
 * Removes every argv entry equal to flag (a flag without a value, e.g. "--check-config"), shifting the rest down
 * and updating *argc. Returns how many there were.
 */
int ft_config_take_flag(int *argc, char **argv, const char *flag);
/* Frees the mountpath strings. */
void ft_config_free(ft_config_t *c);

#endif
