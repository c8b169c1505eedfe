#!/bin/sh
# build-static.sh OUTDIR: what the image holds besides its configuration,
# built the one way both the Dockerfile (its build stage) and the
# daemonless build (go run ./tools/mkimage) build it:
#
#   OUTDIR/wtrace  the static binary: pure Go (CGO_ENABLED=0), paths
#                  trimmed, no symbol table, no VCS stamp, the version
#                  from $WTRACE_VERSION (default devel)
#   OUTDIR/tmp     an empty directory for TMPDIR (replay --from's slices)
#   OUTDIR/data    an empty directory: the working directory, where a
#                  session is mounted or fetched and --out written
#
# Run it from the repository root. With the same Go version (the
# Dockerfile's golang image tag; tools/mkimage's test checks they agree)
# the binary is the same, byte for byte.
set -eu
out=${1:?usage: tools/build-static.sh OUTDIR}
mkdir -p "$out/tmp" "$out/data"
chmod 1777 "$out/tmp"
chmod 0755 "$out/data"
CGO_ENABLED=0 GOOS=linux GOFLAGS= go build -trimpath -buildvcs=false \
  -ldflags="-s -w -X main.version=${WTRACE_VERSION:-devel}" \
  -o "$out/wtrace" ./cmd/wtrace
