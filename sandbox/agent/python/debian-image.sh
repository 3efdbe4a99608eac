#!/usr/bin/env bash
# Makes a Debian image with Python on an engine that can pull nothing:
# debootstrap a minimal bookworm root filesystem with python3 and
# python3-requests from Debian's packages, then `docker import` it.
# The image is kept on the engine: a second call does nothing.
#
#   sandbox/agent/python/debian-image.sh [TAG]   (needs root and debootstrap)
set -euo pipefail
tag="${1:-overnight-test/debian-python:bookworm}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "debian-image: $tag is on the engine already"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debian-image: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
root="$(mktemp -d /tmp/overnight-debian-XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "debian-image: debootstrap bookworm (minbase, python3) into $root; this takes a few minutes"
debootstrap --variant=minbase --include=python3,python3-requests bookworm "$root" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
tar -C "$root" -c . | docker import --change 'CMD ["python3"]' - "$tag"
echo "debian-image: $tag imported"
