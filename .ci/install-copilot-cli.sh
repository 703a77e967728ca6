#!/usr/bin/env bash
# Install the real GitHub Copilot CLI into a local cache folder (never globally) and
# print the path of its native binary on stdout.
#
# Usage: .ci/install-copilot-cli.sh
#   COPILOT_CLI_DIR      cache folder (default: $PWD/.cache/copilot-cli)
#   COPILOT_CLI_VERSION  npm version of @github/copilot (default: 1.0.102)
#
# Idempotent: when the pinned version is already installed, nothing is downloaded.
# Progress goes to stderr so `bin=$(.ci/install-copilot-cli.sh)` captures just the path.
# Tests find the binary at the default location, or via COPILOT_CLI_BIN=<printed path>.
set -euo pipefail

version="${COPILOT_CLI_VERSION:-1.0.102}"
dir="${COPILOT_CLI_DIR:-$PWD/.cache/copilot-cli}"

log() { printf 'install-copilot-cli: %s\n' "$*" >&2; }

case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) log "unsupported OS: $(uname -s)"; exit 2 ;;
esac
case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) log "unsupported CPU: $(uname -m)"; exit 2 ;;
esac
platform_pkg="@github/copilot-${os}-${arch}"
bin="$dir/node_modules/$platform_pkg/copilot"

# The version actually installed, read from the package manifests (empty if none).
installed_version() {
    local manifest="$dir/node_modules/@github/copilot/package.json"
    [[ -f "$manifest" && -x "$bin" ]] || return 0
    node -p "require(process.argv[1]).version" "$manifest" 2>/dev/null || true
}

if [[ "$(installed_version)" == "$version" ]]; then
    log "@github/copilot@$version already installed in $dir"
else
    command -v npm >/dev/null || { log "npm not found on PATH"; exit 2; }
    log "installing @github/copilot@$version into $dir (~190 MB)"
    mkdir -p "$dir"
    if [[ ! -f "$dir/package.json" ]]; then
        printf '{\n  "name": "copilot-cli-cache",\n  "private": true\n}\n' >"$dir/package.json"
    fi
    # --prefix keeps everything inside $dir; --no-save leaves package.json alone so reruns stay clean.
    npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error \
        "@github/copilot@$version" >&2
    if [[ "$(installed_version)" != "$version" ]]; then
        log "install finished but $bin is missing or not version $version"
        exit 1
    fi
fi

# Sanity check: the native binary runs and reports the pinned version. It unpacks itself
# (~235 MB) into $XDG_CACHE_HOME on a first start, so give it a throw-away HOME and cache.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
reported="$(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$scratch" XDG_CACHE_HOME="$scratch/cache" \
    COPILOT_AUTO_UPDATE=false "$bin" --version 2>&1 | head -n 1)"
case "$reported" in
    *"$version"*) log "$reported" ;;
    *) log "unexpected --version output from $bin: $reported"; exit 1 ;;
esac

printf '%s\n' "$bin"
