#!/usr/bin/env bash
# Builds the service images of scripts/services.catalogue offline, from
# Debian's packages only: for each entry, mmdebstrap --variant=minbase
# writes a rootfs tar holding the entry's packages, and the engine imports
# it as forged-services/<name>:<recipe hash>. The egress entry is the
# egress proxy's image (squid), which forged runs for public_allowlist. An image whose tag already
# exists in the engine is not built again, so a re-run does nothing but
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
# Mirrors scripts/images.sh (the toolchain images). Needs root (mmdebstrap's
# root mode), mmdebstrap (installed when missing) and an engine that answers
# (scripts/ensure-docker.sh). No container registry is involved.
set -euo pipefail
cd "$(dirname "$0")/.."

catalogue=scripts/services.catalogue
out="${FORGED_SERVICES_FILE:-bin/services.tsv}"
suite="${FORGED_IMAGES_SUITE:-bookworm}"
repo_prefix=forged-services

log() { printf 'service-images: %s\n' "$*" >&2; }

# The recipe version: bump it when the way images are built changes, so
# that every tag changes with it.
recipe_version=1
dpkg_excludes=(
  'path-exclude=/usr/share/doc/*'
  'path-include=/usr/share/doc/*/copyright'
  'path-exclude=/usr/share/man/*'
  'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/locale/*'
)
image_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The service users, created with fixed ids before the packages install
# (their postinst scripts then reuse them): forged runs each service as
# this uid (dockerops/services.go), never as root.
users_hook='for u in postgres:999:/var/lib/postgresql:/bin/sh redis:998:/var/lib/redis:/usr/sbin/nologin; do IFS=: read -r n i h sh <<U
$u
U
echo "$n:x:$i:$i::$h:$sh" >>"$1/etc/passwd"; echo "$n:x:$i:" >>"$1/etc/group"; [ ! -f "$1/etc/shadow" ] || echo "$n:*:19000:0:99999:7:::" >>"$1/etc/shadow"; done'
# The package's own default cluster and its config are not used (forged
# initialises a fresh data directory on a tmpfs at every start).
cleanup_hook='rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15 "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*'

recipe() {
  printf 'recipe %s\nsuite %s\nvariant minbase\nname %s\npackages %s\npath %s\n' \
    "$recipe_version" "$suite" "$1" "$2" "$image_path"
  printf 'dpkgopt %s\n' "${dpkg_excludes[@]}"
  printf 'hook %s\n' "$users_hook" "$cleanup_hook"
}

ensure_mmdebstrap() {
  command -v mmdebstrap >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "mmdebstrap is missing and this is not root: install it and re-run"
    exit 1
  fi
  log "installing mmdebstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq mmdebstrap >/dev/null
}

build() {
  local name=$1 packages=$2 ref=$3
  local tmp="$work/$name" start
  mkdir -p "$tmp"
  start=$(date +%s)
  local args=(--variant=minbase --include="$packages" --quiet
    --essential-hook="$users_hook" --customize-hook="$cleanup_hook")
  local opt
  for opt in "${dpkg_excludes[@]}"; do args+=(--dpkgopt="$opt"); done
  log "building $ref ($packages)"
  if ! mmdebstrap "${args[@]}" "$suite" "$tmp/rootfs.tar" >"$tmp/mmdebstrap.log" 2>&1; then
    tail -n 40 "$tmp/mmdebstrap.log" >&2
    log "mmdebstrap failed for $name"
    return 1
  fi
  docker import \
    --change "ENV PATH=$image_path" \
    --change "LABEL org.forged.service.name=$name" \
    --change "LABEL org.forged.service.packages=$packages" \
    --message "forged services: $name ($packages, $suite minbase)" \
    "$tmp/rootfs.tar" "$ref" >/dev/null
  log "built $ref in $(( $(date +%s) - start ))s (rootfs tar $(du -m "$tmp/rootfs.tar" | cut -f1) MiB)"
  rm -rf "$tmp"
}

timeout 10 docker version >/dev/null 2>&1 || { log "no docker engine answers (run scripts/ensure-docker.sh)"; exit 1; }

declare -A wanted=()
for n in "$@"; do wanted[$n]=1; done

mkdir -p "$(dirname "$out")"
exec 9>"$(dirname "$out")/.service-images.lock"
flock 9

tmp_out="$out.tmp.$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/forged-service-images.XXXXXX")
trap 'rm -f "$tmp_out"; rm -rf "$work"' EXIT
: >"$tmp_out"

names=() packages_of=() refs=() missing=()
found=0
while read -r name packages rest; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -z "$packages" ] || [ -n "$rest" ]; then
    log "$catalogue: want 'name packages' in the line for ${name}"
    exit 1
  fi
  tag=$(recipe "$name" "$packages" | sha256sum | cut -c1-16)
  names+=("$name") packages_of+=("$packages") refs+=("$repo_prefix/$name:$tag")
  if [ $# -eq 0 ] || [ -n "${wanted[$name]:-}" ]; then
    found=$((found + 1))
    docker image inspect "${refs[-1]}" >/dev/null 2>&1 || missing+=($((${#names[@]} - 1)))
  fi
done <"$catalogue"
if [ $# -gt 0 ] && [ "$found" -ne $# ]; then
  log "asked for $# images, the catalogue names $found of them"
  exit 1
fi

jobs="${FORGED_IMAGES_JOBS:-2}"
case "$jobs" in ''|*[!0-9]*|0) log "FORGED_IMAGES_JOBS must be a positive number"; exit 1 ;; esac
if [ ${#missing[@]} -gt 0 ]; then
  ensure_mmdebstrap
  if [ "$(id -u)" -ne 0 ]; then
    log "building images needs root (mmdebstrap root mode)"
    exit 1
  fi
fi
running=() failed=0
for i in "${missing[@]}"; do
  if [ ${#running[@]} -ge "$jobs" ]; then
    wait "${running[0]}" || failed=1
    running=("${running[@]:1}")
  fi
  build "${names[$i]}" "${packages_of[$i]}" "${refs[$i]}" &
  running+=($!)
done
for pid in "${running[@]}"; do
  wait "$pid" || failed=1
done
[ "$failed" -eq 0 ] || { log "some images failed to build"; exit 1; }

for i in "${!names[@]}"; do
  docker image inspect "${refs[$i]}" >/dev/null 2>&1 || continue
  read -r id size < <(docker image inspect --format '{{.Id}} {{.Size}}' "${refs[$i]}")
  printf '%s\t%s\t%s\t%s\t%s\n' "${names[$i]}" "${refs[$i]}" "$id" "$size" "${packages_of[$i]}" >>"$tmp_out"
done
mv "$tmp_out" "$out"
log "catalogue written to $out"
awk -F'\t' '{ printf "%-8s %-42s %s %6.0f MiB\n", $1, $2, substr($3, 1, 19), $4 / 1048576 }' "$out"
