#!/usr/bin/env bash
# Builds the service images of scripts/services.catalogue offline, from
# Debian's packages only: for each entry, mmdebstrap --variant=minbase
# writes a rootfs tar holding the entry's packages, and the engine imports
# it as forged-services/<name>:<recipe hash>. The egress entry is the
# egress proxy's image (squid), which forged runs for public_allowlist.
# An image whose tag already exists in the engine is not built again, so a re-run does nothing but
# print the catalogue.
#
# Usage: scripts/service-images.sh [name...]     (default: every entry)
#
# The service catalogue, forged's operator configuration for services
# (`--service-catalogue FILE`), is printed and written, tab-separated
# (service, ref, image id, size in bytes, packages), to
# $FORGED_SERVICES_FILE (default bin/services.tsv). forged pins each
# service to the image id written there and refuses an attempt whose image
# is missing or has another id; nothing is ever pulled.
#
# Shares its builder with scripts/images.sh (scripts/lib/debian-images.sh). Needs root (mmdebstrap's
# root mode), mmdebstrap (installed when missing) and an engine that answers
# (scripts/ensure-docker.sh). No container registry is involved.
set -euo pipefail
cd "$(dirname "$0")/.."

catalogue=scripts/services.catalogue
out="${FORGED_SERVICES_FILE:-bin/services.tsv}"
suite="${FORGED_IMAGES_SUITE:-bookworm}"
repo_prefix=forged-services
label_kind=service
lock_name=.service-images.lock
log_name=service-images
# The service users, created with fixed ids before the packages install
# (their postinst scripts then reuse them): forged runs each service as
# this uid (dockerops/services.go), never as root.
essential_hook='for u in postgres:999:/var/lib/postgresql:/bin/sh redis:998:/var/lib/redis:/usr/sbin/nologin; do IFS=: read -r n i h sh <<U
$u
U
echo "$n:x:$i:$i::$h:$sh" >>"$1/etc/passwd"; echo "$n:x:$i:" >>"$1/etc/group"; [ ! -f "$1/etc/shadow" ] || echo "$n:*:19000:0:99999:7:::" >>"$1/etc/shadow"; done'
# The package's own default cluster and its config are not used (forged
# initialises a fresh data directory on a tmpfs at every start).
customize_hook='rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15 "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*'

source scripts/lib/debian-images.sh
debian_images_main "$@"
