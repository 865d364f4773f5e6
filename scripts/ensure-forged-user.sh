#!/usr/bin/env bash
# Makes this machine able to run forged the way contrib/forged.service does
# (for TestUnitDeploymentBoundsAWriter in cmd/forged, which emulates the
# unit with setpriv): a system user forged in the groups docker and disk,
# and loop devices that the disk group may open read-write.
#
# On a Debian host udev gives every block device, and /dev/loop-control,
# the group disk and mode 0660 (50-udev-default.rules). Machines without
# udev (containers, this CI's VM) have only devtmpfs's root:root 0600 nodes,
# so this script does what udev would: it sets group disk and mode 0660 on
# /dev/loop-control and on /dev/loop0 to /dev/loop$((LOOP_DEVICES-1)),
# making the missing ones. A loop device the kernel adds later (every one
# of these busy) gets devtmpfs's mode again, and forged reports that
# device's EACCES when it attaches an image there.
#
# Usage: scripts/ensure-forged-user.sh   (as root; does nothing else)
set -euo pipefail

log() { printf 'ensure-forged-user: %s\n' "$*" >&2; }

LOOP_DEVICES=${LOOP_DEVICES:-64}

if [ "$(id -u)" -ne 0 ]; then
  log "not root: the unit's user is not set up (its test skips, or fails under CI=true)"
  exit 0
fi
getent group docker >/dev/null || groupadd --system docker
getent group disk >/dev/null || groupadd --system disk
if ! getent passwd forged >/dev/null; then
  log "adding the system user forged"
  useradd --system --user-group --no-create-home --home-dir /var/lib/forged --shell /usr/sbin/nologin forged
fi
usermod -a -G docker,disk forged

# udev's rule for loop devices, by hand.
[ -e /dev/loop-control ] || mknod -m 0660 /dev/loop-control c 10 237
chgrp disk /dev/loop-control
chmod 0660 /dev/loop-control
for i in $(seq 0 $((LOOP_DEVICES - 1))); do
  dev=/dev/loop$i
  [ -b "$dev" ] || mknod -m 0660 "$dev" b 7 "$i"
  chgrp disk "$dev"
  chmod 0660 "$dev"
  # Opening the node makes the kernel add the device, so that
  # LOOP_CTL_GET_FREE hands out these nodes before making new ones.
  [ -e "/sys/block/loop$i" ] || { : <"$dev"; } 2>/dev/null || true
done
log "user forged ($(id forged)); /dev/loop-control and ${LOOP_DEVICES} loop devices are root:disk 0660"
