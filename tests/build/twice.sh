#!/usr/bin/env bash
# A second `cargo build` with nothing changed compiles nothing (issue 33): builds with the
# given cargo arguments (default: make build's `--workspace --bins`), then again, and fails if
# the second build compiled any crate (cargo reports every crate, fresh or not, so this sees a
# crate rebuilt because its build script ran again). A build script that names a missing file
# in `rerun-if-changed` runs on every build and recompiles everything after it.
set -euo pipefail
cd "$(dirname "$0")/../.."
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--workspace --bins)
cargo build "${args[@]}" --quiet
second=$(cargo build "${args[@]}" --message-format=json 2> /dev/null)
stale=$(printf '%s\n' "$second" | node -e '
  const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
  const out = [];
  for (const l of lines) {
    const m = JSON.parse(l);
    if (m.reason === "compiler-artifact" && m.fresh === false) out.push(`compiled ${m.target.name}`);
  }
  console.log(out.join("\n"));')
if [ -n "$stale" ]; then
  echo "build twice (cargo build ${args[*]}): the second build did work:" >&2
  echo "$stale" >&2
  exit 1
fi
echo "build twice (cargo build ${args[*]}): the second build compiled nothing"
