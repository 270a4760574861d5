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
for f in "${files[@]}"; do
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "$f: not formatted (scripts/format-check.sh --fix)"
		bad=1
	fi
done
# Every source names its license in its first lines (LICENSE: Apache-2.0).
mapfile -t sources < <(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.py' '*.sh' | grep -v node_modules)
for f in "${sources[@]}"; do
	if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
		echo "$f: no SPDX-License-Identifier line in its first 3 lines"
		bad=1
	fi
done
[ "$bad" -eq 0 ] && echo "format-check: ok"
exit "$bad"
