#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages FastTier needs to build and test, only the missing ones (idempotent).
set -euo pipefail

PACKAGES=(
	build-essential pkg-config
	liburing-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libjansson-dev
	libisal-dev libxxhash-dev libcmocka-dev libarchive-dev libmsgpack-dev
	clang libclang-rt-14-dev clang-format
	python3-pytest python3-pytest-xdist python3-requests python3-boto3
	attr iproute2
	awscli s3cmd rclone curl python3-torch
	etcd-server etcd-client prometheus yamllint tmux lz4
)
# kubectl (for `kubectl kustomize`): Debian's kubernetes-client unless a kubectl is already installed (another
# package that ships /usr/bin/kubectl conflicts with it).
command -v kubectl >/dev/null 2>&1 || PACKAGES+=(kubernetes-client)

die() {
	echo "deps.sh: $*" >&2
	exit 1
}

# Prints the packages of PACKAGES that dpkg does not report as installed.
missing_packages() {
	local installed
	# dpkg-query exits non-zero when some package is unknown to it; its output still lists the rest.
	installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null |
		awk '$2 == "installed" { print $1 }' || true)
	local p
	for p in "${PACKAGES[@]}"; do
		if ! grep -qxF "$p" <<<"$installed"; then
			echo "$p"
		fi
	done
}

command -v dpkg-query >/dev/null 2>&1 ||
	die "dpkg-query not found: this script supports Debian 12 (install by hand: ${PACKAGES[*]})"

mapfile -t missing < <(missing_packages)
if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi

echo "deps.sh: installing missing packages: ${missing[*]}"
# env inside sudo: sudo resets the environment, and apt must not ask questions.
APT=(env DEBIAN_FRONTEND=noninteractive apt-get)
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "not root and no sudo: run as root: apt-get install ${missing[*]}"
	APT=(sudo "${APT[@]}")
fi
"${APT[@]}" update -qq ||
	die "apt-get update failed (network or apt sources?); then run: apt-get install ${missing[*]}"
"${APT[@]}" install -y -qq "${missing[@]}" ||
	die "apt-get install failed for: ${missing[*]}"

mapfile -t still < <(missing_packages)
if [ "${#still[@]}" -ne 0 ]; then
	die "still missing after apt-get install: ${still[*]}"
fi
echo "deps.sh: installed ${missing[*]}"
