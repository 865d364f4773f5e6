#!/usr/bin/env bash
# Makes sure an etcd server binary is installed, for the fleet's tests
# (internal/testkit/etcdtest starts one on loopback per test, with a data
# directory of its own, and stops it afterwards). On a Debian machine (as
# root) it installs Debian's etcd-server, like scripts/ensure-docker.sh
# installs docker.io. It starts no etcd: the tests do, and an operator runs
# the fleet's etcd as docs/fleet.md describes.
#
# Usage: scripts/ensure-etcd.sh
set -euo pipefail

log() { printf 'ensure-etcd: %s\n' "$*" >&2; }

if command -v etcd >/dev/null 2>&1; then
  log "etcd installed ($(etcd --version 2>/dev/null | head -n 1))"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  log "etcd is missing and not root: install Debian's etcd-server and re-run"
  exit 1
fi
log "installing etcd-server"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq etcd-server >/dev/null
# Debian's package may start a system etcd on 2379; the tests never use it
# (each starts its own on a free port), so leave it as the package set it.
log "etcd installed ($(etcd --version 2>/dev/null | head -n 1))"
