# Shared by scripts/images.sh (toolchain images) and
# scripts/service-images.sh (service images): builds the images of a
# catalogue offline, from Debian's packages only. For each entry,
# mmdebstrap --variant=minbase writes a rootfs tar holding the entry's
# packages, and the engine imports it as <repo_prefix>/<name>:<recipe hash>.
# An image whose tag already exists in the engine is not built again.
#
# The caller sets, then calls debian_images_main "$@":
#   catalogue      the catalogue file (one "name packages" a line)
#   out            where the catalogue with image ids is written (TSV)
#   suite          the Debian suite
#   repo_prefix    the images' repository prefix
#   label_kind     the import labels' kind: org.forged.<kind>.name/packages
#   lock_name      the lock file's name beside $out
#   log_name       the log lines' prefix
#   essential_hook, customize_hook   optional mmdebstrap hooks (part of
#                  the recipe, so a changed hook names a new image)
# Missing images are built $FORGED_IMAGES_JOBS at a time (default 2).

log() { printf '%s: %s\n' "$log_name" "$*" >&2; }

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
# names the image. Hooks appear only when set (the toolchain images have
# none, and their tags predate the hooks).
recipe() {
  printf 'recipe %s\nsuite %s\nvariant minbase\nname %s\npackages %s\npath %s\n' \
    "$recipe_version" "$suite" "$1" "$2" "$image_path"
  printf 'dpkgopt %s\n' "${dpkg_excludes[@]}"
  if [ -n "${essential_hook:-}" ] || [ -n "${customize_hook:-}" ]; then
    printf 'hook %s\n' "${essential_hook:-}" "${customize_hook:-}"
  fi
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
  [ -z "${essential_hook:-}" ] || args+=(--essential-hook="$essential_hook")
  [ -z "${customize_hook:-}" ] || args+=(--customize-hook="$customize_hook")
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
    --change "LABEL org.forged.$label_kind.name=$name" \
    --change "LABEL org.forged.$label_kind.packages=$packages" \
    --message "$log_name: $name ($packages, $suite minbase)" \
    "$tmp/rootfs.tar" "$ref" >/dev/null
  log "built $ref in $(( $(date +%s) - start ))s (rootfs tar $(du -m "$tmp/rootfs.tar" | cut -f1) MiB)"
  rm -rf "$tmp"
}

# debian_images_main [name...] builds the missing images (default: every
# entry) and writes the catalogue.
debian_images_main() {
  timeout 10 docker version >/dev/null 2>&1 || { log "no docker engine answers (run scripts/ensure-docker.sh)"; exit 1; }

  declare -A wanted=()
  for n in "$@"; do wanted[$n]=1; done

  mkdir -p "$(dirname "$out")"
  # One builder at a time on this machine; the lock is released on exit.
  exec 9>"$(dirname "$out")/$lock_name"
  flock 9

  tmp_out="$out.tmp.$$"
  # Scratch space for the rootfs tars (hundreds of MiB each), removed on exit.
  work=$(mktemp -d "${TMPDIR:-/tmp}/forged-$log_name.XXXXXX")
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
  awk -F'\t' '{ printf "%-8s %-42s %s %6.0f MiB\n", $1, $2, substr($3, 1, 19), $4 / 1048576 }' "$out"
}
