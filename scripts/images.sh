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

log() { printf 'images: %s\n' "$*" >&2; }

# The recipe version: bump it when the way images are built changes, so
# that every tag changes with it.
recipe_version=1
# Documentation, manuals and translations are left out of every image.
dpkg_excludes=(
  'path-exclude=/usr/share/doc/*'
  'path-include=/usr/share/doc/*/copyright'
  'path-exclude=/usr/share/man/*'
  'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/locale/*'
)
# The image's environment (docker import --change).
image_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# recipe NAME PACKAGES prints everything the image depends on; its sha256
# names the image.
recipe() {
  printf 'recipe %s\nsuite %s\nvariant minbase\nname %s\npackages %s\npath %s\n' \
    "$recipe_version" "$suite" "$1" "$2" "$image_path"
  printf 'dpkgopt %s\n' "${dpkg_excludes[@]}"
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

# build NAME PACKAGES REF imports a fresh rootfs as REF (as root, with
# mmdebstrap installed).
build() {
  local name=$1 packages=$2 ref=$3
  local tmp="$work/$name" start
  mkdir -p "$tmp"
  start=$(date +%s)
  local args=(--variant=minbase --include="$packages" --quiet)
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
    --change "LABEL org.forged.image.name=$name" \
    --change "LABEL org.forged.image.packages=$packages" \
    --message "forged images: $name ($packages, $suite minbase)" \
    "$tmp/rootfs.tar" "$ref" >/dev/null
  log "built $ref in $(( $(date +%s) - start ))s (rootfs tar $(du -m "$tmp/rootfs.tar" | cut -f1) MiB)"
  rm -rf "$tmp"
}

timeout 10 docker version >/dev/null 2>&1 || { log "no docker engine answers (run scripts/ensure-docker.sh)"; exit 1; }

declare -A wanted=()
for n in "$@"; do wanted[$n]=1; done

mkdir -p "$(dirname "$out")"
# One builder at a time on this machine; the lock is released on exit.
exec 9>"$(dirname "$out")/.images.lock"
flock 9

tmp_out="$out.tmp.$$"
# Scratch space for the rootfs tars (hundreds of MiB each), removed on exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/forged-images.XXXXXX")
trap 'rm -f "$tmp_out"; rm -rf "$work"' EXIT
: >"$tmp_out"

# First pass: read the catalogue, name every image, and list the missing
# ones that were asked for.
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

# Second pass: build the missing images, $jobs at a time (the downloads
# and dpkg runs of one build leave the machine mostly idle).
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

# Third pass: the catalogue of every image that exists, asked for or not.
for i in "${!names[@]}"; do
  docker image inspect "${refs[$i]}" >/dev/null 2>&1 || continue
  read -r id size < <(docker image inspect --format '{{.Id}} {{.Size}}' "${refs[$i]}")
  printf '%s\t%s\t%s\t%s\t%s\n' "${names[$i]}" "${refs[$i]}" "$id" "$size" "${packages_of[$i]}" >>"$tmp_out"
done
mv "$tmp_out" "$out"
log "catalogue written to $out"
awk -F'\t' '{ printf "%-8s %-40s %s %6.0f MiB\n", $1, $2, substr($3, 1, 19), $4 / 1048576 }' "$out"
