#!/usr/bin/env bash
# Tools some tests need beyond Python: headless Chromium renders the simulate
# report, shellcheck lints the kind scripts, Prometheus (and its promtool) checks and
# evaluates the chart's alert rules and dashboard queries, and the real-node test runs containerd,
# runc, the CNI plugins and debootstrap (unpacked into a private folder by
# node-tools.sh, not installed). All come from Debian's packages. Where they cannot
# be had (not root, no apt-get, no mirror), the tests that need them skip and say
# why; nothing else depends on them.
set -euo pipefail
"$(dirname "$0")/node-tools.sh" >/dev/null
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test tools: ${missing[*]} missing and apt-get not usable as root; their tests will skip" >&2
  exit 0
fi
echo "test tools: installing ${missing[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
# No package may start a system service (Debian's prometheus would hold port 9090 for
# good): a policy-rc.d that refuses every start, unless the host already has one.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
if ! { apt-get update -qq &&
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
  echo "test tools: apt-get could not install ${missing[*]}; their tests will skip" >&2
fi
# Under systemd, deb-systemd-helper still enables the unit for the next boot.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
