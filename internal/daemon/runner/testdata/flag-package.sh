#!/bin/sh
# A vulnerability scan command for the image policy's tests, in forged's
# findings shape (docs/image-policy.md): it reads the CycloneDX SBOM it is
# given (`-- SBOM`) and reports every component named in flag-package.conf,
# beside this script, as a finding of that file's id and severity. Like a
# real scanner's wrapper, it answers from the SBOM alone.
set -eu
[ "$#" -eq 2 ] && [ "$1" = "--" ] || { echo "usage: $0 -- SBOM" >&2; exit 2; }
FLAG_PACKAGE= FLAG_ID= FLAG_SEVERITY=
. "$(dirname "$0")/flag-package.conf"
jq -ce --arg pkg "$FLAG_PACKAGE" --arg id "$FLAG_ID" --arg sev "$FLAG_SEVERITY" '
  if .bomFormat != "CycloneDX" then error("not a CycloneDX SBOM") else . end
  | {findings: ([.components[]? | select(.name == $pkg)
      | {id: $id, package: .name, version: (.version // ""), severity: $sev}] | unique_by(.id))}' "$2"
