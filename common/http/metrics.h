/* SPDX-License-Identifier: Apache-2.0 */
/* GET /metrics on the public port: the metrics registry's text (base/metrics.h) for Prometheus. */
#ifndef FT_HTTP_METRICS_H
#define FT_HTTP_METRICS_H

#include <stdbool.h>

#include "http/http.h"

#define FT_METRICS_PATH "/metrics"

/*
 * Answers r when its path is FT_METRICS_PATH (GET or HEAD: the text, rendered on a worker; other methods: 405)
 * and returns true; false for any other path (r untouched). A daemon's router calls it where an access check
 * for the path would go.
 */
bool ft_metrics_route(ft_req_t *r);

#endif
