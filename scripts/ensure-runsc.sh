#!/usr/bin/env bash
# Installs gVisor's runsc (Debian's package) and registers it with the
# running Docker engine as the runtime "runsc", without restarting the
# engine and without touching its other runtimes or settings: the entry
# runtimes.runsc is merged into /etc/docker/daemon.json (created when
# absent; every other key is kept), the merged file is validated as JSON
# and swapped in atomically, and dockerd reloads its runtimes on SIGHUP.
# The script then waits until `docker info` lists runsc.
#
# The runtime's arguments (docs/gvisor.md says why):
#   --platform=ptrace  kvm hung in this VM although /dev/kvm is present;
#   --network=none     runsc's netstack refuses to start on a bridge network
#                      ("cannot run with network enabled in root network
#                      namespace"), so forged runs only network-less
#                      attempts under gVisor.
#
# Usage: scripts/ensure-runsc.sh   (as root; does nothing else)
set -euo pipefail

log() { printf 'ensure-runsc: %s\n' "$*" >&2; }

DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
RUNSC=/usr/bin/runsc

registered() { timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

if [ "$(id -u)" -ne 0 ]; then
  if registered; then
    log "runsc is registered"
    exit 0
  fi
  log "not root: runsc is not installed or registered (the gVisor tests fail under CI=true)"
  exit 0
fi

if [ ! -x "$RUNSC" ]; then
  log "installing Debian's runsc"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq runsc >/dev/null
fi

# Merge runtimes.runsc into daemon.json. A file that is not valid JSON is
# left alone: the engine would refuse it on its next start anyway, and
# overwriting it would lose the operator's settings.
mkdir -p "$(dirname "$DAEMON_JSON")"
tmp=$(mktemp "$DAEMON_JSON.XXXXXX")
trap 'rm -f "$tmp"' EXIT
changed=$(python3 - "$DAEMON_JSON" "$tmp" "$RUNSC" <<'EOF'
import json, os, sys
path, out, runsc = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read()
    if text.strip():
        cfg = json.loads(text)
if not isinstance(cfg, dict):
    sys.exit(path + " is not a JSON object")
want = {"path": runsc, "runtimeArgs": ["--platform=ptrace", "--network=none"]}
runtimes = cfg.setdefault("runtimes", {})
if runtimes.get("runsc") == want:
    print("no")
    sys.exit(0)
runtimes["runsc"] = want
with open(out, "w") as f:
    json.dump(cfg, f, indent=2, sort_keys=True)
    f.write("\n")
json.load(open(out))
print("yes")
EOF
)
if [ "$changed" = yes ]; then
  chmod 0644 "$tmp"
  mv "$tmp" "$DAEMON_JSON"
  log "registered runsc in $DAEMON_JSON"
fi

if registered; then
  log "runsc is registered ($("$RUNSC" --version 2>/dev/null | head -1))"
  exit 0
fi

pid=$(cat /run/docker.pid 2>/dev/null || cat /var/run/docker.pid 2>/dev/null || true)
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
  log "no dockerd pid file: reload the engine's configuration (SIGHUP) and re-run"
  exit 1
fi
log "reloading dockerd's configuration (SIGHUP to $pid)"
kill -HUP "$pid"
for _ in $(seq 1 30); do
  if registered; then
    log "runsc is registered ($("$RUNSC" --version 2>/dev/null | head -1))"
    exit 0
  fi
  sleep 1
done
log "dockerd did not list runsc after SIGHUP: see its log"
exit 1
