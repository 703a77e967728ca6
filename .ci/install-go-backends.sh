#!/usr/bin/env bash
# Build the real backends that are Go programs, from their official Go modules (see
# shared/reference/stack.md): no binary is downloaded, only modules through the Go module proxy.
#
# Usage: .ci/install-go-backends.sh
#
#   otelcol     the OpenTelemetry Collector distribution of .ci/otelcol/ (its builder manifest and the sources
#               the builder generated from it, committed: see .ci/otelcol/README.md)
#   jaeger      Jaeger v2: github.com/jaegertracing/jaeger/cmd/jaeger, the Go tool of .ci/jaeger/go.mod
#   prometheus  Prometheus 3: github.com/prometheus/prometheus/cmd/prometheus, the tool of .ci/prometheus/go.mod
#
#   STACK_CACHE  cache folder (default: $PWD/.cache; git-ignored). The programs go to
#                $STACK_CACHE/go-backends/<name>-<version>/, with a stamp of the hash of the files they were
#                built from: a build is skipped while its stamp matches, redone when a go.mod, go.sum or
#                source changes.
#
# The module and build caches are Go's own (`go env GOMODCACHE GOCACHE`, or the variables if set): they
# outlive a fresh clone, whose .cache/ starts empty, so such a clone relinks the programs from the build
# cache instead of compiling everything again. Cold (both caches empty) the three builds take many minutes
# (timings in README.md, "Run the tests"); warm, this script takes a second. Builds run one at a time under
# `nice -n 19`. Progress and timings go to stderr; stdout gets one `NAME=PATH` line per program
# (OTELCOL_BIN, JAEGER_BIN, PROMETHEUS3_BIN), suitable for `eval`.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${STACK_CACHE:-$PWD/.cache}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
command -v go >/dev/null || { printf 'install-go-backends: go not found on PATH\n' >&2; exit 2; }

# Read-write module cache (removable with rm -rf); the toolchain on PATH, never one downloaded for a go line.
export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN=local

log() { printf 'install-go-backends: %s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# module_version DIR MODULE: the version DIR/go.mod requires of MODULE.
module_version() {
    awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1/go.mod"
}

# build NAME VERSION DIR PACKAGE LDFLAGS [TAGS]: `go build` PACKAGE inside the module DIR into
# $cache/go-backends/NAME-VERSION/NAME unless the stamp there matches DIR's files; prints the path.
build() {
    local name=$1 version=$2 dir=$3 pkg=$4 ldflags=$5 tags=${6:-}
    local out="$cache/go-backends/$name-$version"
    local key
    key="$( (cd "$dir" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort \
        | xargs sha256sum; go version; printf '%s\n' "$pkg" "$ldflags"; [[ -z "$tags" ]] || printf '%s\n' "$tags") | sha256sum | cut -d' ' -f1)"
    if [[ -x "$out/$name" && "$(cat "$out/stamp" 2>/dev/null)" == "$key" ]]; then
        log "$name $version already built in $out"
    else
        local t0
        t0=$(now)
        log "building $name $version ($pkg)"
        mkdir -p "$out"
        rm -f "$out/stamp"
        (cd "$dir" && nice -n 19 go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$out/$name.tmp" "$pkg") >&2
        mv "$out/$name.tmp" "$out/$name"
        echo "$key" >"$out/stamp"
        log "$name $version built in $(elapsed "$t0")"
    fi
    printf '%s\n' "$out/$name"
}

# The Collector: the version its manifest gives the distribution.
otelcol_version="$(awk '$1 == "version:" { print $2; exit }' "$here/otelcol/builder-config.yaml")"
otelcol="$(build otelcol "$otelcol_version" "$here/otelcol/src" . "-s -w")"
"$otelcol" --version >&2

# Jaeger: module v1.MM.P is Jaeger v2.(MM-63).P (both lines are tagged on one commit: v1.74.0 / v2.11.0 in its
# CHANGELOG), so v1.75.0 is v2.12.0.
jaeger_version="$(module_version "$here/jaeger" github.com/jaegertracing/jaeger)"
jaeger_v2="v2.$(( $(cut -d. -f2 <<<"${jaeger_version#v}") - 63 )).$(cut -d. -f3 <<<"$jaeger_version")"
jaeger="$(build jaeger "$jaeger_v2" "$here/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger \
    "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=$jaeger_v2")"
"$jaeger" version >&2; echo >&2

# Prometheus: module v0.316.0 is Prometheus 3.16.0 (v0.3MM.P = 3.MM.P). Built with the tag `remove_all_sd` (its
# README's way to leave out the optional service discoveries; file, HTTP and static targets stay): the tests scrape
# static targets only. Measured cold (empty build cache) on 2 cores: 334 s and 105 MB without it, 124 s and 52 MB.
prom_module="$(module_version "$here/prometheus" github.com/prometheus/prometheus)"
prom_version="3.$(( $(cut -d. -f2 <<<"$prom_module") - 300 )).$(cut -d. -f3 <<<"$prom_module")"
prometheus="$(build prometheus "$prom_version" "$here/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
    "-s -w -X github.com/prometheus/common/version.Version=$prom_version" remove_all_sd)"
"$prometheus" --version >&2

printf 'OTELCOL_BIN=%s\n' "$otelcol"
printf 'JAEGER_BIN=%s\n' "$jaeger"
printf 'PROMETHEUS3_BIN=%s\n' "$prometheus"
