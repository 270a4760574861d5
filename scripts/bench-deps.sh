#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages `make bench` needs (nginx, wrk, gnuplot), only the missing ones (idempotent).
set -euo pipefail

# Debian 12's nginx carries the DAV module (dav_methods PUT) built in; libnginx-mod-http-dav-ext adds only
# PROPFIND/OPTIONS, which the bench does not use, so it is not installed here.
# linux-perf is optional: bench/run.py collects perf counters when `perf stat` works, and says so when not.
PACKAGES=(
	nginx
	wrk
	gnuplot-nox
	iproute2
)

die() {
	echo "bench-deps.sh: $*" >&2
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

# The nginx package or another flavour: any nginx with the DAV module does.
have_nginx_with_dav() {
	command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || return 1
	/usr/sbin/nginx -V 2>&1 | grep -q -- '--with-http_dav_module'
}

# missing_packages, minus nginx when some other nginx with DAV is already there.
still_needed() {
	local p dav=0
	have_nginx_with_dav && dav=1
	while read -r p; do
		[ -n "$p" ] || continue
		[ "$p" = nginx ] && [ "$dav" -eq 1 ] && continue
		echo "$p"
	done < <(missing_packages)
}

command -v dpkg-query >/dev/null 2>&1 ||
	die "dpkg-query not found: this script supports Debian 12 (install by hand: ${PACKAGES[*]})"

mapfile -t missing < <(still_needed)
if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi

echo "bench-deps.sh: installing missing packages: ${missing[*]}"
# env inside sudo: sudo resets the environment, and apt must not ask questions.
# Lock timeout: another apt-get (a colleague's deps.sh) may hold the dpkg lock for a while.
APT=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "not root and no sudo: run as root: apt-get install ${missing[*]}"
	APT=(sudo "${APT[@]}")
fi
"${APT[@]}" update -qq ||
	die "apt-get update failed (network or apt sources?); then run: apt-get install ${missing[*]}"
# --no-install-recommends: nginx's recommends would pull in a system service we never use.
"${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}" ||
	die "apt-get install failed for: ${missing[*]}"

mapfile -t still < <(still_needed)
if [ "${#still[@]}" -ne 0 ]; then
	die "still missing after apt-get install: ${still[*]}"
fi
have_nginx_with_dav || die "nginx has no DAV module (need --with-http_dav_module for the PUT baseline)"
echo "bench-deps.sh: installed ${missing[*]}"
