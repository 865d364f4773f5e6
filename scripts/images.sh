#!/usr/bin/env bash
# Builds the images of scripts/images.catalogue offline, from Debian's
# packages only: for each entry, mmdebstrap --variant=minbase writes a
# rootfs tar holding the entry's packages, and the engine imports it as
# forged-images/<name>:<recipe hash>. An image whose tag already exists in
# the engine is not built again, so a re-run does nothing but print the
# catalogue.
#
# Usage: scripts/images.sh [name...]     (default: every entry)
#
# Missing images are built $FORGED_IMAGES_JOBS at a time (default 2).
#
# The catalogue with image ids (every entry whose image exists, asked for
# or not) is printed and written, tab-separated (name, ref, image id, size
# in bytes, packages), to $FORGED_IMAGES_FILE (default bin/images.tsv); the
# toolchain tests read it from there.
#
# Needs root (mmdebstrap's root mode), mmdebstrap (installed when missing)
# and an engine that answers (scripts/ensure-docker.sh). Nothing is pulled
# from a container registry.
set -euo pipefail
cd "$(dirname "$0")/.."

catalogue=scripts/images.catalogue
out="${FORGED_IMAGES_FILE:-bin/images.tsv}"
suite="${FORGED_IMAGES_SUITE:-bookworm}"
repo_prefix=forged-images
label_kind=image
lock_name=.images.lock
log_name=images

source scripts/lib/debian-images.sh
debian_images_main "$@"
