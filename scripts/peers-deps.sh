#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the backend peers the integration suite starts: nginx (Debian) and the npm emulators pinned by tests/peers/package-lock.json.
# Idempotent: does nothing when everything is there. npm ci runs with --ignore-scripts: the only
# native build in the tree (re2, an optional dependency of firebase-tools' hosting code) takes
# minutes and the storage emulator never loads it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=$ROOT/tests/peers
BINS=(s3rver azurite-blob firebase)

die() {
	echo "peers-deps.sh: $*" >&2
	exit 1
}

apt_install() {
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root: apt-get install $*"
		apt=(sudo "${apt[@]}")
	fi
	"${apt[@]}" update -qq || die "apt-get update failed; then run: apt-get install $*"
	"${apt[@]}" install -y -qq "$@" || die "apt-get install failed for: $*"
}

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -ne 0 ]; then
	echo "peers-deps.sh: installing ${missing[*]}"
	apt_install "${missing[@]}"
fi

# node_modules is complete when every binary is there and it was installed from this lock file.
stamp=$PEERS/node_modules/.ft-lock.sha256
want=$(sha256sum "$PEERS/package-lock.json" | cut -d' ' -f1)
complete=1
for b in "${BINS[@]}"; do
	[ -x "$PEERS/node_modules/.bin/$b" ] || complete=0
done
if [ "$complete" -eq 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi

echo "peers-deps.sh: npm ci in tests/peers (s3rver, azurite, firebase-tools; about a minute with a warm cache)"
start=$(date +%s)
(cd "$PEERS" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
	die "npm ci failed in $PEERS (is the npm registry reachable?)"
for b in "${BINS[@]}"; do
	[ -x "$PEERS/node_modules/.bin/$b" ] || die "npm ci did not install $b"
done
echo "$want" >"$stamp"
echo "peers-deps.sh: installed in $(($(date +%s) - start)) s"
