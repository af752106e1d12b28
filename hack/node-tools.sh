#!/usr/bin/env bash
# The container runtime of the real-node tests, from Debian's packages, unpacked into
# a private folder instead of installed: containerd, runc, the CNI plugins and
# debootstrap. Nothing is installed system-wide and no service is started, so the
# machine's own containerd (if any) is never touched. The folder's name carries the
# package versions; a second run with the same versions does nothing.
# Prints the folder on stdout. Exits 0 without output where apt-get is unusable;
# the real-node tests then skip and say why.
set -euo pipefail
packages=(containerd runc containernetworking-plugins debootstrap)
root="${PODIUM_CACHE:-$HOME/.cache/podium}"
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "node tools: apt-get/dpkg-deb not found; the real-node tests will skip" >&2
  exit 0
fi
versions() {
  apt-cache policy "${packages[@]}" 2>/dev/null | awk '/^[^ ]/{p=$1} /Candidate:/{print p $2}'
}
candidates="$(versions)"
if [ "$(grep -c -v '(none)' <<<"$candidates")" -ne ${#packages[@]} ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  candidates="$(versions)"
fi
if [ "$(grep -c -v '(none)' <<<"$candidates")" -ne ${#packages[@]} ]; then
  echo "node tools: ${packages[*]} not all available from apt; the real-node tests will skip" >&2
  exit 0
fi
key="$(sha256sum <<<"$candidates" | cut -c1-10)"
dest="$root/node-tools-$key"
if [ -f "$dest/.complete" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$root"
tmp="$(mktemp -d "$root/.node-tools-$key.tmp-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q "${packages[@]}" >&2 2>/dev/null) || {
  echo "node tools: apt-get download failed; the real-node tests will skip" >&2
  exit 0
}
for deb in "$tmp"/*.deb; do
  dpkg-deb -x "$deb" "$tmp/root"
done
printf '%s\n' "$candidates" >"$tmp/root/VERSIONS"
rm -f "$tmp"/*.deb
touch "$tmp/root/.complete"
rm -rf "$dest"
mv "$tmp/root" "$dest"
echo "$dest"
