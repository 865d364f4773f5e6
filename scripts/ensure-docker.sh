#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine, and that the tools the
# example needs are installed. On a fresh Debian machine (as root) it
# installs Debian's docker.io, busybox-static (the example's base image),
# git and e2fsprogs (mkfs.ext4 and debugfs, for the bounded attempt
# volumes), and starts dockerd in the background. Nothing here pulls an
# image or reaches beyond Debian's package mirror.
#
# Usage: scripts/ensure-docker.sh [PACKAGE...]
#
# Each PACKAGE is one more Debian package the caller needs (scripts/test.sh
# asks for chromium, which the console's browser test drives); it is
# installed, in the same apt run, unless a command of its name or the
# package is already there. The image scripts install mmdebstrap themselves,
# and only when they have an image to build.
set -euo pipefail

log() { printf 'ensure-docker: %s\n' "$*" >&2; }

engine_answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker version >/dev/null 2>&1; }

need_packages=()
command -v dockerd >/dev/null 2>&1 || need_packages+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || need_packages+=(busybox-static)
command -v git >/dev/null 2>&1 || need_packages+=(git)
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || need_packages+=(e2fsprogs)
for pkg in "$@"; do
  command -v "$pkg" >/dev/null 2>&1 || dpkg -s "$pkg" >/dev/null 2>&1 || need_packages+=("$pkg")
done

if [ ${#need_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing packages (${need_packages[*]}) and not root: install them and re-run"
    exit 1
  fi
  log "installing ${need_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_packages[@]}" >/dev/null
fi

if engine_answers; then
  log "docker engine answers ($(docker version --format '{{.Server.Version}} API {{.Server.APIVersion}}'))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  log "no docker engine answers and not root: start dockerd and re-run"
  exit 1
fi

log "starting dockerd"
mkdir -p /var/log
nohup dockerd >/var/log/forged-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if engine_answers; then
    log "docker engine answers ($(docker version --format '{{.Server.Version}} API {{.Server.APIVersion}}'))"
    exit 0
  fi
  sleep 1
done
log "dockerd did not answer within 60s; its log:"
tail -n 50 /var/log/forged-dockerd.log >&2 || true
exit 1
