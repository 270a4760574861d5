#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Mechanical whitespace check of the sources: trailing blanks, indentation mixes, final newline.
# Checks *.c *.h *.py *.sh, the Makefile and the extension-less scripts (scripts/*, .ci/*).
# Prints "file:line: problem" for every offender and exits 1 if there is any.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2

list_files() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files --cached --others --exclude-standard
	else
		find . -path ./build -prune -o -path ./run -prune -o -path ./.git -prune -o -type f -print |
			sed 's|^\./||'
	fi
}

bad=0
report() {
	echo "$1"
	bad=1
}

# grep -n output "N:text" -> "file:N: why"
flag_lines() {
	local file=$1 why=$2 pattern=$3
	local hits
	hits=$(grep -nP -- "$pattern" "$file" | cut -d: -f1) || return 0
	local n
	for n in $hits; do
		report "$file:$n: $why"
	done
}

while IFS= read -r f; do
	[ -f "$f" ] || continue
	kind=
	case "$f" in
	*.c | *.h) kind="c" ;;
	*.py) kind="py" ;;
	*.sh) kind="sh" ;;
	Makefile | */Makefile | *.mk) kind="make" ;;
	scripts/* | .ci/*)
		first=$(head -c 64 "$f" | head -n 1)
		case "$first" in
		'#!'*python*) kind="py" ;;
		'#!'*sh*) kind="sh" ;;
		esac
		;;
	esac
	[ -n "$kind" ] || continue
	if [ ! -s "$f" ]; then
		continue
	fi
	flag_lines "$f" "trailing whitespace" '[ \t\r]+$'
	case "$kind" in
	c | sh | make) flag_lines "$f" "space before tab in indentation" '^\t* +\t' ;;
	py) flag_lines "$f" "tab in indentation" '^ *\t' ;;
	esac
	if [ "$(tail -c 1 "$f" | od -An -tx1 | tr -d ' \n')" != "0a" ]; then
		report "$f: no newline at end of file"
	fi
	if [ "$(tail -c 2 "$f" | od -An -tx1 | tr -d ' \n')" = "0a0a" ]; then
		report "$f: blank line at end of file"
	fi
done < <(list_files | sort -u)

if [ "$bad" -ne 0 ]; then
	echo "whitespace-check: offenders listed above" >&2
	exit 1
fi
echo "whitespace-check: ok"
