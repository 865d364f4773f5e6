#!/usr/bin/env bash
# Builds the Debian root filesystem image the package test installs
# forged's .deb into (scripts/package-root.catalogue), offline from Debian's
# packages only, and writes its catalogue to bin/package-root.tsv. Cached:
# an image whose tag exists is not built again. Shares its builder with
# scripts/images.sh (scripts/lib/debian-images.sh). Needs root
# (mmdebstrap's root mode) and an engine that answers.
set -euo pipefail
cd "$(dirname "$0")/.."

catalogue=scripts/package-root.catalogue
out="${FORGED_PACKAGE_ROOT_FILE:-bin/package-root.tsv}"
suite="${FORGED_IMAGES_SUITE:-bookworm}"
repo_prefix=forged-package-root
label_kind=packageroot
lock_name=.package-root.lock
log_name=package-root
customize_hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*'

source scripts/lib/debian-images.sh
debian_images_main "$@"
