#!/usr/bin/env bash
# Installs the real agent CLIs pinned in tests/agents/package-lock.json (Claude Code, Codex,
# Gemini CLI, opencode) into tests/agents/node_modules, for crates/crewd/tests/real_*.rs.
# Unpacked: Claude Code and Codex ~800 MB with their native binaries, Gemini CLI ~100 MB,
# opencode ~180 MB.
# Idempotent: does nothing when the pinned versions are already there. Needs node >= 18 + npm.
#
# Claude Code's npm package runs a postinstall step (`node install.cjs`) that puts the native
# binary in place of `bin/claude.exe`, a placeholder until then: never install it with
# --ignore-scripts.
set -euo pipefail

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$DIR"

pinned() { node -p "require('./package.json').dependencies[process.argv[1]]" "$1"; }
installed() {
    local manifest="node_modules/$1/package.json"
    [ -f "$manifest" ] && node -p "require(process.argv[1]).version" "./$manifest" 2>/dev/null || true
}

# opencode installs its plugin SDK (@opencode-ai/plugin, the same version) from npm into
# ~/.config/opencode at its first start in a HOME; the tests copy this pinned install into each
# test HOME instead (crates/crewd/tests/real_opencode.rs).
plugin_dir="$DIR/opencode-config"
plugin_ok() {
    [ -f "$plugin_dir/node_modules/@opencode-ai/plugin/package.json" ] &&
        [ "$(node -p "require(process.argv[1]).version" "$plugin_dir/node_modules/@opencode-ai/plugin/package.json")" = "$(pinned opencode-ai)" ]
}
seed_plugin() {
    plugin_ok && return 0
    rm -rf "$plugin_dir"
    mkdir -p "$plugin_dir"
    printf '{"dependencies":{"@opencode-ai/plugin":"%s"}}\n' "$(pinned opencode-ai)" > "$plugin_dir/package.json"
    (cd "$plugin_dir" && npm install --no-audit --no-fund --loglevel=error)
}

ok=1
plugin_ok || ok=0
for pkg in @anthropic-ai/claude-code @openai/codex @google/gemini-cli opencode-ai; do
    [ "$(installed "$pkg")" = "$(pinned "$pkg")" ] || ok=0
done
if [ "$ok" = 1 ] && node_modules/.bin/claude --version >/dev/null 2>&1 \
    && node_modules/.bin/codex --version >/dev/null 2>&1 \
    && node_modules/.bin/gemini --version >/dev/null 2>&1 \
    && node_modules/.bin/opencode --version >/dev/null 2>&1; then
    echo "agent CLIs already installed in $DIR/node_modules"
    exit 0
fi

command -v npm >/dev/null || { echo "setup.sh: npm not found" >&2; exit 1; }
# `npm install --no-save`, not `npm ci`: opencode-ai lists a native package per platform as an
# optional dependency and the lock holds only the ones the registry served when it was made
# (linux x64), which `npm ci` refuses as "not in sync". `--no-save` installs the locked versions
# and leaves package.json and the lock untouched.
npm install --no-save --no-audit --no-fund --loglevel=error
node_modules/.bin/claude --version
node_modules/.bin/codex --version
node_modules/.bin/gemini --version
node_modules/.bin/opencode --version
seed_plugin
echo "agent CLIs installed in $DIR/node_modules"
