#!/usr/bin/env bash
# Tools some tests need beyond Python: headless Chromium renders the simulate
# report, shellcheck lints the kind scripts, and the real-node test runs containerd,
# runc, the CNI plugins and debootstrap (unpacked into a private folder by
# node-tools.sh, not installed). All come from Debian's packages. Where they cannot
# be had (not root, no apt-get, no mirror), the tests that need them skip and say
# why; nothing else depends on them.
set -euo pipefail
"$(dirname "$0")/node-tools.sh" >/dev/null
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test tools: ${missing[*]} missing and apt-get not usable as root; their tests will skip" >&2
  exit 0
fi
echo "test tools: installing ${missing[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
  echo "test tools: apt-get could not install ${missing[*]}; their tests will skip" >&2
fi
