#!/usr/bin/env bash
# Builds forged's Debian package with dpkg-deb: DIR/forged_VERSION_ARCH.deb
# (default DIR dist/), and prints its path.
#
# Usage: scripts/deb.sh [--version VERSION] [--out DIR]
#
# The package holds:
#   /usr/bin/forged, /usr/bin/forged-worker   static binaries (CGO off)
#   /usr/bin/forged-fleet                     forged's fleet build (-tags fleet),
#                                             which forged hands fleet commands to
#   /lib/systemd/system/forged.service        contrib/forged.service
#   /usr/lib/tmpfiles.d/forged.conf           contrib/forged.tmpfiles.conf
#   /etc/forged/forged.yaml                   contrib/forged.yaml (a conffile)
#   /usr/share/forged/{grafana,prometheus}/   the dashboard and alert rules
# and its maintainer scripts create the `forged` system user and group,
# the state root /var/lib/forged (0700), the build-log directory under it
# (0700) and the lock root /run/lock/forged (0700), all forged's. forged
# logs to stderr (the journal, under the unit); it writes no log file
# outside its state root. Nothing is started: the operator lists the
# repositories in the config and runs `systemctl enable --now forged`
# (docs/operations.md, "Running forged as a service").
#
# VERSION defaults to `git describe` (a leading v dropped), or
# 0.0~git<date>.<commit> when there is no tag.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

version="${FORGED_VERSION:-}" out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "deb.sh: unknown argument $1 (want --version VERSION, --out DIR)" >&2; exit 2 ;;
  esac
done
if [ -z "$version" ]; then
  if tag=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
    version=${tag#v}
  else
    version="0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=12 HEAD)"
  fi
fi
# A Debian version starts with a digit and holds no '_' or spaces.
if ! [[ "$version" =~ ^[0-9][A-Za-z0-9.+~-]*$ ]]; then
  echo "deb.sh: $version is not a Debian version (digits first; letters, digits and .+~- only)" >&2
  exit 2
fi
arch=$(go env GOARCH)
command -v dpkg-deb >/dev/null || { echo "deb.sh: dpkg-deb is missing (apt-get install dpkg)" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/tmp}/forged-deb.XXXXXX")
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"

for bin in forged forged-worker; do
  CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$version" \
    -o "$root/usr/bin/$bin" "./cmd/$bin"
done
# The fleet build: forged given fleet settings runs it (docs/fleet.md).
CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags fleet -ldflags "-s -w -X main.version=$version" \
  -o "$root/usr/bin/forged-fleet" ./cmd/forged
# The unit as shipped in contrib/ names /usr/local/bin (a manual
# install); the package installs to /usr/bin.
install -d -m0755 "$root/lib/systemd/system" "$root/usr/lib/tmpfiles.d" "$root/etc/forged" \
  "$root/usr/share/forged/grafana" "$root/usr/share/forged/prometheus" "$root/usr/share/doc/forged" "$root/DEBIAN"
sed 's#/usr/local/bin/#/usr/bin/#g' contrib/forged.service >"$root/lib/systemd/system/forged.service"
install -m0644 contrib/forged.tmpfiles.conf "$root/usr/lib/tmpfiles.d/forged.conf"
install -m0640 contrib/forged.yaml "$root/etc/forged/forged.yaml"
install -m0644 contrib/grafana/forged-dashboard.json "$root/usr/share/forged/grafana/"
install -m0644 contrib/prometheus/forged-alerts.yml contrib/prometheus/forged-alerts.test.yml "$root/usr/share/forged/prometheus/"
chmod 0644 "$root/lib/systemd/system/forged.service"
chmod 0755 "$root/usr/bin/forged" "$root/usr/bin/forged-worker" "$root/usr/bin/forged-fleet"
cat >"$root/usr/share/doc/forged/README.Debian" <<'DOC'
forged for Debian
=================

The package installs forged, forged-worker and forged-fleet (forged's
fleet build, which forged runs when given fleet settings) in /usr/bin, the systemd
unit forged.service (not enabled), /etc/forged/forged.yaml, and the
Grafana dashboard and Prometheus alert rules in /usr/share/forged/.
It creates the forged system user and group, and the state root
/var/lib/forged and lock root /run/lock/forged (both 0700, forged's).

Before `systemctl enable --now forged`: list the repositories forged may
prepare input from in ReadWritePaths= (systemctl edit forged) and in the
config, and read docs/operations.md, "Running forged as a service".
DOC

installed_kib=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: forged
Version: $version
Architecture: $arch
Maintainer: forged developers <dev@forged.invalid>
Section: admin
Priority: optional
Installed-Size: $installed_kib
Depends: git, e2fsprogs, passwd
Recommends: docker.io | docker-ce
Homepage: https://github.com/forgedev/forged
Description: runs untrusted coding-agent jobs in hardened Docker sandboxes
 forged is a daemon for runner hosts: it admits sandbox attempts into
 capacity slots, builds or reuses their images, runs each one in a
 hardened container with health-gated services and an allowlisting egress
 proxy, enforces a fenced lease, imports the result through a quarantine,
 and always tears everything down, with a durable ledger and a reaper.
CONTROL
echo /etc/forged/forged.yaml >"$root/DEBIAN/conffiles"

cat >"$root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
# forged's postinst: the system user and group, and the directories the
# unit and tmpfiles.d name, with forged's modes.
set -e
if [ "$1" = configure ]; then
  getent group forged >/dev/null || groupadd --system forged
  getent passwd forged >/dev/null || useradd --system --gid forged --home-dir /var/lib/forged \
    --no-create-home --shell /usr/sbin/nologin --comment "forged sandbox runner" forged
  install -d -m0700 -o forged -g forged /var/lib/forged /var/lib/forged/build-logs
  if [ -d /run/lock ]; then install -d -m0700 -o forged -g forged /run/lock/forged; fi
  chgrp forged /etc/forged/forged.yaml
  chmod 0640 /etc/forged/forged.yaml
  if [ -d /run/systemd/system ]; then
    systemd-tmpfiles --create forged.conf || true
    systemctl daemon-reload || true
  fi
fi
exit 0
SCRIPT
cat >"$root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
# forged's prerm: a running service is stopped (it drains: see the unit).
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop forged.service || true
fi
exit 0
SCRIPT
cat >"$root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
# forged's postrm: purge removes the lock root and the configuration
# directory. The state root /var/lib/forged is left in place: it may hold
# the ledgers of attempts whose Docker resources `forged reap` still has to
# remove. The forged user stays too, as Debian does for system users.
set -e
if [ "$1" = purge ]; then
  rm -rf /run/lock/forged
  rmdir /etc/forged 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
SCRIPT
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/forged_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
