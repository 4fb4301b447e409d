#!/usr/bin/env bash
# Installs the real `pi` CLI (pinned) into <repo>/.cache/pi for crates/crewd/tests/real_pi.rs.
# Idempotent: does nothing when the pinned version is already installed. Needs node >= 20.6 + npm.
set -euo pipefail

PI_VERSION="${PI_VERSION:-0.73.1}"
PACKAGE="@mariozechner/pi-coding-agent"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PREFIX="${CREW_PI_DIR:-$ROOT/.cache/pi}"
MANIFEST="$PREFIX/node_modules/$PACKAGE/package.json"

installed_version() {
    [ -f "$MANIFEST" ] && node -p "require(process.argv[1]).version" "$MANIFEST" 2>/dev/null || true
}

if [ "$(installed_version)" = "$PI_VERSION" ] && [ -x "$PREFIX/node_modules/.bin/pi" ]; then
    echo "pi $PI_VERSION already installed in $PREFIX"
    exit 0
fi

command -v npm >/dev/null || { echo "setup.sh: npm not found (need node >= 20.6)" >&2; exit 1; }
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "$PACKAGE@$PI_VERSION"
"$PREFIX/node_modules/.bin/pi" --version
echo "pi $PI_VERSION installed in $PREFIX"
