#!/bin/sh
# A syft-compatible SBOM command for the unit tests: it checks forged's
# argv (scan docker-archive:TAR --output cyclonedx-json=OUT), reads the
# archive and writes a CycloneDX document naming one component per line of
# it.
set -eu
[ "$#" -eq 4 ] && [ "$1" = scan ] && [ "$3" = --output ] || { echo "bad argv: $*" >&2; exit 2; }
archive=${2#docker-archive:}
out=${4#cyclonedx-json=}
[ -f "$archive" ] || { echo "no archive $archive" >&2; exit 3; }
{
  printf '{"bomFormat":"CycloneDX","specVersion":"1.6","components":['
  sep=
  while IFS= read -r name; do printf '%s{"type":"library","name":"%s"}' "$sep" "$name"; sep=,; done < "$archive"
  printf ']}\n'
} > "$out"
