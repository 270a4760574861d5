/* SPDX-License-Identifier: Apache-2.0 */
/* Shard formats: recognised by the object name's extension or an explicit archmime query value. */
#include <string.h>
#include <strings.h>

#include "http/util.h"
#include "shard/shard.h"

static const struct {
	const char *word; /* an extension (also matched as the name's ending) or a MIME type */
	tgt_shard_fmt_t fmt;
	int ext;
} formats[] = {
	{".tar.lz4", TGT_SHARD_TLZ4, 1},
	{".tar.gz", TGT_SHARD_TGZ, 1},
	{".tgz", TGT_SHARD_TGZ, 1},
	{".tar", TGT_SHARD_TAR, 1},
	{".zip", TGT_SHARD_ZIP, 1},
	{"application/x-tar", TGT_SHARD_TAR, 0},
	{"application/tar", TGT_SHARD_TAR, 0},
	{"application/gzip", TGT_SHARD_TGZ, 0},
	{"application/x-gzip", TGT_SHARD_TGZ, 0},
	{"application/x-tar+gzip", TGT_SHARD_TGZ, 0},
	{"application/x-compressed-tar", TGT_SHARD_TGZ, 0},
	{"application/zip", TGT_SHARD_ZIP, 0},
	{"application/x-zip-compressed", TGT_SHARD_ZIP, 0},
	{"application/x-lz4", TGT_SHARD_TLZ4, 0},
	{"application/x-tar+lz4", TGT_SHARD_TLZ4, 0},
};

static const char *const names[] = {
	[TGT_SHARD_NONE] = "none", [TGT_SHARD_TAR] = ".tar",      [TGT_SHARD_TGZ] = ".tgz",
	[TGT_SHARD_ZIP] = ".zip",  [TGT_SHARD_TLZ4] = ".tar.lz4",
};

const char *tgt_shard_fmt_name(tgt_shard_fmt_t f)
{
	return f <= TGT_SHARD_TLZ4 ? names[f] : "?";
}

tgt_shard_fmt_t tgt_shard_fmt_of_name(const char *obj)
{
	size_t n = strlen(obj);

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]) && formats[i].ext; i++) {
		size_t k = strlen(formats[i].word);
		if (n > k && strcasecmp(obj + n - k, formats[i].word) == 0 && obj[n - k - 1] != '/')
			return formats[i].fmt;
	}
	return TGT_SHARD_NONE;
}

tgt_shard_fmt_t tgt_shard_fmt_parse(const char *mime)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		const char *w = formats[i].word;
		if (strcasecmp(mime, w) == 0 || (formats[i].ext && strcasecmp(mime, w + 1) == 0))
			return formats[i].fmt;
	}
	if (strcasecmp(mime, "tar.gz") == 0 || strcasecmp(mime, "gz") == 0)
		return TGT_SHARD_TGZ;
	return TGT_SHARD_NONE;
}

int tgt_shard_fmt_req(ft_req_t *r, const tgt_obj_t *o, tgt_shard_fmt_t *f)
{
	const char *mime = ft_req_query(r, "archmime");

	if (mime != NULL && *mime) {
		*f = tgt_shard_fmt_parse(mime);
		if (*f == TGT_SHARD_NONE) {
			ft_resp_error(r, 400,
				      "unknown archmime \"%s\" (expected .tar, .tgz, .tar.gz, .zip, .tar.lz4 or their "
				      "MIME types)",
				      mime);
			return -1;
		}
		return 0;
	}
	*f = tgt_shard_fmt_of_name(o->obj);
	if (*f == TGT_SHARD_NONE) {
		ft_resp_error(r, 400,
			      "object \"%s/%s\" is not an archive: archpath and archregx need a name ending in .tar, "
			      ".tgz, .tar.gz, .zip or .tar.lz4, or an archmime query",
			      o->bucket, o->obj);
		return -1;
	}
	return 0;
}
