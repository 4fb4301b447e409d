#!/usr/bin/env bash
# Crash soak of crewd (issue 8). Builds crewd and the fake agent, then soaks for a bounded time.
#
#   tests/soak/run.sh                    # 10 minutes
#   tests/soak/run.sh --duration 120     # the CI variant
#   tests/soak/run.sh --duration 60 --seed 42 --max-rss-mb 300
#
# Prints the counts (cycles, runs, kills, violations) and exits non-zero on any violation.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The same build as `make build`: a subset of packages would resolve features differently and
# rebuild shared dependencies.
cargo build --workspace --bins
exec target/debug/crew-soak --crewd target/debug/crewd "$@"
