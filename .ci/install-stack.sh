#!/usr/bin/env bash
# Install the real backends the stack tests run against, without Docker (see
# shared/reference/stack.md): nothing here needs an engine or a non-registry download.
#
# Usage: .ci/install-stack.sh [--with-phoenix] [--with-browser] [--all]
#
#   always          prometheus 2.42 + promtool, prometheus-alertmanager 0.25 + amtool (Debian 12 apt);
#                   victoria-metrics 1.112 (+ vmalert, vmalert-tool) and docker-compose 2.26.1,
#                   fetched as Debian 13 .debs by their pinned SHA-256 and unpacked (never installed)
#                   into $STACK_CACHE/deb13/root
#   --with-phoenix  arize-phoenix==20.26.1 in its own venv $STACK_CACHE/phoenix-venv (~4 min cold, ~850 MB)
#   --with-browser  chromium + fonts-dejavu-core (apt) and npm playwright-core@1 in $STACK_CACHE/playwright
#
#   STACK_CACHE     cache folder (default: $PWD/.cache; git-ignored)
#   PHOENIX_PYTHON  interpreter used to create the Phoenix venv (default: python3)
#
# Idempotent: every part is skipped when its binaries are already there. Must run as root
# (or with sudo-less apt rights). Progress and timings go to stderr; stdout gets one
# `NAME=PATH` line per binary, suitable for `eval "$(.ci/install-stack.sh)"` / `export`.
set -euo pipefail

VM_VERSION="1.112.0+ds1-2"
COMPOSE_VERSION="2.26.1-4"
# SHA-256 of each amd64 .deb, from trixie's Packages index (`apt-cache show PKG=VERSION`).
VM_SHA256="1d3717f1a8ab5bf690271095dd286730f6fb0761cc8c09c0fc8f529c9838f346"
COMPOSE_SHA256="47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea"
PHOENIX_VERSION="20.26.1"
PLAYWRIGHT_SPEC="playwright-core@1"

with_phoenix=0
with_browser=0
for arg in "$@"; do
    case "$arg" in
        --with-phoenix) with_phoenix=1 ;;
        --with-browser) with_browser=1 ;;
        --all) with_phoenix=1; with_browser=1 ;;
        -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
        *) printf 'install-stack: unknown argument %q (try --help)\n' "$arg" >&2; exit 2 ;;
    esac
done

cache="${STACK_CACHE:-$PWD/.cache}"
mkdir -p "$cache"
# apt needs absolute Dir::* paths; and the physical path, not one through a link: the scratch clone of .ci/run
# reaches the cache through a link that is deleted after the run, and a venv made through it names it in its
# scripts' #! lines (the next run's Phoenix then failed to start: FileNotFoundError on an existing file).
cache="$(cd "$cache" && pwd -P)"

log() { printf 'install-stack: %s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

apt_updated=0
apt_install() {
    # Install Debian 12 packages that are missing; `apt-get update` only when something is.
    local missing=()
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    if ((!apt_updated)); then
        apt-get -o APT::Sandbox::User=root update -qq >&2
        apt_updated=1
    fi
    # Recommends would pull node-exporter & co.; policy-rc.d (if present) keeps daemons from starting.
    DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# --- 1. Prometheus 2.42 + promtool, Alertmanager 0.25 + amtool -------------------------------------
t0=$(now)
# Debian names the Alertmanager binary prometheus-alertmanager.
alertmanager_bin() { command -v prometheus-alertmanager || command -v alertmanager || true; }
if command -v promtool >/dev/null && command -v prometheus >/dev/null \
    && [[ -n "$(alertmanager_bin)" ]] && command -v amtool >/dev/null; then
    log "prometheus/promtool/alertmanager/amtool already installed"
else
    log "apt-get install prometheus prometheus-alertmanager"
    apt_install prometheus prometheus-alertmanager
fi
# The Debian package ships a service; make sure no stray instance holds :9090 when the
# machine does start daemons (containers with policy-rc.d never start it).
if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    systemctl disable --now prometheus prometheus-alertmanager >/dev/null 2>&1 || true
fi
log "prometheus: $(elapsed "$t0")"

# --- 2. VictoriaMetrics + docker-compose from Debian 13 .debs, unpacked only --------------------
# Each .deb is fetched from the Debian mirror by its pool path and checked against the SHA-256 that trixie's signed
# Packages index gives for it (pinned below), then unpacked. Not through apt: apt checks the index's signature as
# its `_apt` user, and on a CI machine where that user could not open /dev/null, apt-key said gpgv was missing and
# the run failed (stop 39). The pinned hash checks the same bytes with no signature step to fail.
t0=$(now)
deb13="$cache/deb13"
deb13_root="$deb13/root"
# What the unpacked tree was made from: a new pin unpacks anew, and an unpack cut short (no stamp) is redone.
deb13_stamp="$VM_VERSION $VM_SHA256 $COMPOSE_VERSION $COMPOSE_SHA256"
if [[ "$(cat "$deb13/stamp" 2>/dev/null)" == "$deb13_stamp" && -x "$deb13_root/usr/bin/victoria-metrics" \
    && -x "$deb13_root/usr/bin/docker-compose" ]]; then
    log "victoria-metrics/docker-compose already unpacked in $deb13_root"
else
    log "fetching victoria-metrics=$VM_VERSION docker-compose=$COMPOSE_VERSION (Debian 13 .debs)"
    # The system's mirror when it is a plain http(s) one (apt's mirror+, tor+ and lists of several are apt's own).
    uri="$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
    [[ "$uri" =~ ^https?:// ]] || uri=http://deb.debian.org/debian
    mkdir -p "$deb13"
    rm -rf "$deb13"/*.deb "$deb13/stamp" "$deb13_root" "$deb13_root.tmp"
    while read -r pool sha; do
        f="$deb13/${pool##*/}"
        curl -fsSL --retry 3 --connect-timeout 20 --max-time 900 -o "$f" "$uri/$pool"
        echo "$sha  $f" | sha256sum -c --quiet - >&2
        dpkg -x "$f" "$deb13_root.tmp"
    done <<DEBS
pool/main/v/victoriametrics/victoria-metrics_${VM_VERSION/+/%2b}_amd64.deb $VM_SHA256
pool/main/d/docker-compose/docker-compose_${COMPOSE_VERSION}_amd64.deb $COMPOSE_SHA256
DEBS
    mv "$deb13_root.tmp" "$deb13_root"
    echo "$deb13_stamp" >"$deb13/stamp"
fi
"$deb13_root/usr/bin/victoria-metrics" -version >/dev/null
"$deb13_root/usr/bin/docker-compose" version >/dev/null
log "victoria-metrics/docker-compose: $(elapsed "$t0")"

# --- 3. Arize Phoenix in its own venv (optional) --------------------------------------------------
phoenix_venv="$cache/phoenix-venv"
if ((with_phoenix)); then
    t0=$(now)
    installed="$("$phoenix_venv/bin/python" -c \
        'import importlib.metadata as m; print(m.version("arize-phoenix"))' 2>/dev/null || true)"
    # Its script runs only if the interpreter its #! line names is there (a venv made through a gone link is not).
    # (`|| true`: with pipefail, a venv not made yet fails `head`, and `set -e` would end the script silently.)
    shebang="$(head -n1 "$phoenix_venv/bin/phoenix" 2>/dev/null | sed 's/^#!//' || true)"
    if [[ -x "$phoenix_venv/bin/phoenix" && -x "$shebang" && "$installed" == "$PHOENIX_VERSION" ]]; then
        log "arize-phoenix==$PHOENIX_VERSION already in $phoenix_venv"
    else
        log "installing arize-phoenix==$PHOENIX_VERSION into $phoenix_venv (~4 min cold)"
        rm -rf "$phoenix_venv"
        "${PHOENIX_PYTHON:-python3}" -m venv "$phoenix_venv"
        "$phoenix_venv/bin/pip" install -q --disable-pip-version-check \
            "arize-phoenix==$PHOENIX_VERSION" >&2
    fi
    log "phoenix: $(elapsed "$t0")"
fi

# --- 4. Headless browser (optional) -------------------------------------------------------------
playwright_dir="$cache/playwright"
if ((with_browser)); then
    t0=$(now)
    apt_install chromium fonts-dejavu-core
    if [[ -f "$playwright_dir/node_modules/playwright-core/package.json" ]]; then
        log "playwright-core already in $playwright_dir"
    else
        command -v npm >/dev/null || { log "npm not found on PATH"; exit 2; }
        mkdir -p "$playwright_dir"
        [[ -f "$playwright_dir/package.json" ]] \
            || printf '{\n  "name": "playwright-cache",\n  "private": true\n}\n' >"$playwright_dir/package.json"
        npm install --prefix "$playwright_dir" --no-save --no-audit --no-fund --loglevel=error \
            "$PLAYWRIGHT_SPEC" >&2
    fi
    log "browser: $(elapsed "$t0")"
fi

# --- paths ---------------------------------------------------------------------------------------
printf 'PROMETHEUS_BIN=%s\n' "$(command -v prometheus)"
printf 'PROMTOOL_BIN=%s\n' "$(command -v promtool)"
printf 'ALERTMANAGER_BIN=%s\n' "$(alertmanager_bin)"
printf 'AMTOOL_BIN=%s\n' "$(command -v amtool)"
printf 'VICTORIA_METRICS_BIN=%s\n' "$deb13_root/usr/bin/victoria-metrics"
printf 'VMALERT_TOOL_BIN=%s\n' "$deb13_root/usr/bin/vmalert-tool"
printf 'DOCKER_COMPOSE_BIN=%s\n' "$deb13_root/usr/bin/docker-compose"
if ((with_phoenix)); then
    printf 'PHOENIX_BIN=%s\n' "$phoenix_venv/bin/phoenix"
fi
if ((with_browser)); then
    printf 'CHROMIUM_BIN=%s\n' "$(command -v chromium)"
    printf 'PLAYWRIGHT_CORE_DIR=%s\n' "$playwright_dir/node_modules/playwright-core"
fi
