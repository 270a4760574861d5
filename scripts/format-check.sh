#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Formatting check of the C sources against .clang-format (clang-format 14, Debian 12), and of the SPDX line of
# every source; prints the offenders.
# Usage: scripts/format-check.sh [--fix]   (--fix rewrites the files in place)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
command -v clang-format >/dev/null 2>&1 || { echo "format-check: clang-format not found (make deps installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.c' '*.h')
if [ "${1:-}" = "--fix" ]; then
	clang-format -i "${files[@]}"
	exit 0
fi
bad=0
# One clang-format run per half of the files (a run per file forked 300 processes); each offence is a
# "file:line:col: error: ..." line, the files are named once each.
offenders=$(printf '%s\0' "${files[@]}" | xargs -0 -r -P 2 -n $(((${#files[@]} + 1) / 2)) \
	clang-format --dry-run --Werror 2>&1 >/dev/null | grep -oE '^[^:]+\.[ch]:[0-9]+:[0-9]+: error' | cut -d: -f1 | sort -u)
for f in $offenders; do
	echo "$f: not formatted (scripts/format-check.sh --fix)"
	bad=1
done
# Every source names its license in its first lines (LICENSE: Apache-2.0).
mapfile -t sources < <(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.py' '*.sh' | grep -v node_modules)
unlicensed=$(awk 'BEGIN {
	for (i = 1; i < ARGC; i++) {
		found = 0
		for (n = 0; n < 3 && (getline line < ARGV[i]) > 0; n++)
			if (line ~ /SPDX-License-Identifier: Apache-2.0/)
				found = 1
		close(ARGV[i])
		if (!found)
			print ARGV[i]
	}
}' "${sources[@]}")
for f in $unlicensed; do
	echo "$f: no SPDX-License-Identifier line in its first 3 lines"
	bad=1
done
[ "$bad" -eq 0 ] && echo "format-check: ok"
exit "$bad"
