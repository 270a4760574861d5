/* SPDX-License-Identifier: Apache-2.0 */
/* Member names of shards: the check of an addressable (and writable) name, WebDataset sample keys, archregx matching. */
#include <stdio.h>
#include <string.h>

#include "shard/shard.h"

int tgt_shard_member_check(const char *name, const char **why)
{
	size_t n = strlen(name);

	if (n == 0) {
		*why = "empty member name";
		return -1;
	}
	if (n > TGT_SHARD_NAME_MAX) {
		*why = "member name longer than 4096 bytes";
		return -1;
	}
	if (name[0] == '/') {
		*why = "absolute member name";
		return -1;
	}
	if (name[n - 1] == '/') {
		*why = "member name ends in '/' (a directory)";
		return -1;
	}
	for (const char *s = name; *s;) {
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 0) {
			*why = "empty segment in member name";
			return -1;
		}
		if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
			*why = "\".\" or \"..\" segment in member name";
			return -1;
		}
		if (!e)
			break;
		s = e + 1;
	}
	return 0;
}

size_t tgt_shard_wdskey_len(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	const char *dot = strchr(base, '.');

	return dot ? (size_t)(dot - name) : strlen(name);
}

int tgt_shard_match_init(tgt_shard_match_t *m, const char *mode, const char *pattern, char *err, size_t cap)
{
	static const struct {
		const char *name;
		tgt_match_mode_t mode;
	} modes[] = {{"regexp", TGT_MATCH_REGEXP},
		     {"prefix", TGT_MATCH_PREFIX},
		     {"suffix", TGT_MATCH_SUFFIX},
		     {"substr", TGT_MATCH_SUBSTR},
		     {"wdskey", TGT_MATCH_WDSKEY}};
	size_t i;

	memset(m, 0, sizeof(*m));
	m->pattern = pattern;
	m->pattern_len = strlen(pattern);
	if (mode == NULL || *mode == '\0')
		mode = "regexp";
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(mode, modes[i].name) == 0)
			break;
	if (i == sizeof(modes) / sizeof(modes[0])) {
		snprintf(err, cap, "unknown archmode \"%s\" (expected regexp, prefix, suffix, substr or wdskey)", mode);
		return -1;
	}
	m->mode = modes[i].mode;
	if (m->mode == TGT_MATCH_REGEXP) {
		int rc = regcomp(&m->re, pattern, REG_EXTENDED | REG_NOSUB);
		if (rc != 0) {
			char msg[128];
			regerror(rc, &m->re, msg, sizeof(msg));
			snprintf(err, cap, "bad archregx \"%s\": %s", pattern, msg);
			return -1;
		}
		m->re_live = true;
	}
	return 0;
}

bool tgt_shard_match(const tgt_shard_match_t *m, const char *name)
{
	size_t n = strlen(name), k = m->pattern_len;

	switch (m->mode) {
	case TGT_MATCH_PREFIX:
		return strncmp(name, m->pattern, k) == 0;
	case TGT_MATCH_SUFFIX:
		return n >= k && memcmp(name + n - k, m->pattern, k) == 0;
	case TGT_MATCH_SUBSTR:
		return strstr(name, m->pattern) != NULL;
	case TGT_MATCH_WDSKEY:
		return tgt_shard_wdskey_len(name) == k && memcmp(name, m->pattern, k) == 0;
	case TGT_MATCH_REGEXP:
	default:
		return regexec(&m->re, name, 0, NULL, 0) == 0;
	}
}

void tgt_shard_match_fini(tgt_shard_match_t *m)
{
	if (m->re_live)
		regfree(&m->re);
	m->re_live = false;
}
