/* SPDX-License-Identifier: Apache-2.0 */
/* ft object get-batch: many objects and shard members as one TAR (GetBatch, POST /v1/batch), to a file or stdout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft.h"

/*
 * DESIGN
 * The request is POST /v1/batch's body: built from BUCKET/NAME arguments (plain objects), or read
 * whole from --spec FILE ("-": stdin) for members, ranges and anything else the API takes
 * (docs/shards.md). The TAR streams into FILE.ft-part (as ft object get writes), renamed to FILE only when the answer ended
 * whole: a batch cut short (a missing item met after the stream started, an owner lost) leaves
 * no file that looks like a whole TAR. To stdout it streams as it comes (a cut shows as exit 1).
 */

/* The spec file's request, or NULL after printing why. */
static json_t *spec_request(const char *path)
{
	json_error_t je;
	json_t *doc = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(path, 0, &je);

	if (doc == NULL) {
		cli_fail(FT_EXIT_USAGE, "--spec %s: %s (line %d)", path, je.text, je.line);
		return NULL;
	}
	if (!json_is_array(json_object_get(doc, "in")) || json_array_size(json_object_get(doc, "in")) == 0) {
		cli_fail(FT_EXIT_USAGE, "--spec %s: expected {\"in\":[{\"bucket\",\"objname\",...}...]}", path);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* The request of BUCKET/NAME arguments (from args[2] on), or NULL after printing why. */
static json_t *args_request(const ft_cli_t *c)
{
	json_t *doc = json_pack("{s:[]}", "in"), *in = json_object_get(doc, "in");

	for (int i = 2; doc != NULL && i < c->n_args; i++) {
		cli_bucket_t b;
		const char *name;
		if (cli_object_split(c->args[i], &b, &name, true) != 0) {
			json_decref(doc);
			return NULL;
		}
		json_array_append_new(
			in, json_pack("{s:s, s:s, s:s}", "bucket", b.name, "provider", b.provider, "objname", name));
	}
	return doc;
}

static json_t *request_of(const ft_cli_t *c)
{
	const char *spec = cli_opt(c, "spec");
	json_t *doc;

	if ((spec != NULL) == (c->n_args > 2)) {
		cli_fail(FT_EXIT_USAGE, "object get-batch needs BUCKET/NAME... or --spec FILE, not both "
					"(ft object get-batch --help)");
		return NULL;
	}
	doc = spec != NULL ? spec_request(spec) : args_request(c);
	if (doc != NULL && cli_flag(c, "continue-on-error"))
		json_object_set_new(doc, "continue_on_error", json_true());
	if (doc != NULL && cli_flag(c, "only-objname"))
		json_object_set_new(doc, "only_objname", json_true());
	return doc;
}

/* Streams the batch of doc into out; the exit code (failures printed). */
static int fetch(const json_t *doc, FILE *out, int64_t *bytes)
{
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (cli_post_to("/v1/batch", doc, out, bytes, &r) != 0 || r.status != 200)
		rc = cli_resp_fail(&r, "get-batch");
	else if (fflush(out) != 0 || ferror(out))
		rc = cli_fail(FT_EXIT_FAIL, "get-batch: writing the TAR: %s", strerror(errno));
	cli_resp_free(&r);
	return rc;
}

/* Into path through path.ft-part, renamed only after a whole answer. */
static int fetch_to_file(const ft_cli_t *c, const json_t *doc, const char *path)
{
	char part[4096];
	int64_t bytes = 0;
	FILE *out;
	int rc;

	if (snprintf(part, sizeof(part), "%s.ft-part", path) >= (int)sizeof(part))
		return cli_fail(FT_EXIT_USAGE, "%s: path too long", path);
	if ((out = fopen(part, "wb")) == NULL)
		return cli_fail(FT_EXIT_FAIL, "%s: %s", part, strerror(errno));
	rc = fetch(doc, out, &bytes);
	if (fclose(out) != 0 && rc == FT_EXIT_OK)
		rc = cli_fail(FT_EXIT_FAIL, "%s: %s", part, strerror(errno));
	if (rc == FT_EXIT_OK && rename(part, path) != 0)
		rc = cli_fail(FT_EXIT_FAIL, "%s: %s", path, strerror(errno));
	if (rc != FT_EXIT_OK) {
		unlink(part);
		return rc;
	}
	size_t n = json_array_size(json_object_get(doc, "in"));
	if (c->json) {
		json_t *j =
			json_pack("{s:s, s:I, s:I}", "file", path, "items", (json_int_t)n, "bytes", (json_int_t)bytes);
		cli_print_json(j);
		json_decref(j);
	} else {
		printf("get-batch: %zu items, %lld bytes of TAR -> %s\n", n, (long long)bytes, path);
	}
	return FT_EXIT_OK;
}

int cli_object_get_batch(ft_cli_t *c)
{
	const char *path = cli_opt(c, "output") != NULL ? cli_opt(c, "output") : cli_opt(c, "o");
	json_t *doc;
	int rc;

	if (path == NULL || strcmp(path, "-") == 0) {
		if (isatty(STDOUT_FILENO))
			return cli_fail(FT_EXIT_USAGE, "get-batch writes a TAR: give -o FILE, or redirect stdout");
		path = NULL;
	}
	if ((doc = request_of(c)) == NULL)
		return FT_EXIT_USAGE;
	rc = path != NULL ? fetch_to_file(c, doc, path) : fetch(doc, stdout, NULL);
	json_decref(doc);
	return rc;
}
