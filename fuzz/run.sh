#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) under libFuzzer for FUZZ_SECONDS each (default 30).
#
#   fuzz/run.sh                      # all targets, 30 s each
#   FUZZ_SECONDS=300 fuzz/run.sh cron rpc_request
#
# Stable toolchain only: cargo-fuzz's default build needs nightly (-Zsanitizer), so the targets
# are built with cargo directly, with the same SanitizerCoverage instrumentation cargo-fuzz
# asks for, all of it stable `-C` flags; libfuzzer-sys compiles libFuzzer itself with the
# system C++ compiler. No AddressSanitizer: the code under test is safe Rust, and panics
# (including integer overflow, turned on below) are what the targets report.
#
# Inputs that crash a target are copied to fuzz/regressions/<target>/, where
# `cargo test -p crew-fuzz` replays them from then on; the script then exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-30}
ALL=(resource project bundle cron rpc_request rpc_params stream_pi stream_claude stream_codex stream_gemini stream_opencode stream_command stream_claude_live stream_codex_live stream_gemini_live stream_opencode_live worker_env)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL[@]}"); fi

# Own target directory: the instrumented build must not invalidate the normal one.
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-target/fuzz}
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros (they must not be
# instrumented: nothing links libFuzzer into them).
HOST=$(rustc -vV | sed -n 's/^host: //p')
# FUZZ_EXTRA_FEATURES (e.g. serde_json/float_roundtrip) lets a run look past a known finding.
cargo build --release -p crew-fuzz --features "libfuzzer ${FUZZ_EXTRA_FEATURES:-}" --bins --target "$HOST"

mkdir -p fuzz/logs
failed=0
printf '%-16s %10s %8s %8s %8s  %s\n' target execs exec/s cov corpus result
for t in "${TARGETS[@]}"; do
    bin="$CARGO_TARGET_DIR/$HOST/release/fuzz_$t"
    [ -x "$bin" ] || { echo "unknown target $t (known: ${ALL[*]})" >&2; exit 2; }
    # Earlier findings are already in fuzz/regressions/: only this run's count.
    rm -rf "fuzz/artifacts/$t"
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" "fuzz/regressions/$t"
    log="fuzz/logs/$t.log"
    set +e
    "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
        "fuzz/corpus/$t" "fuzz/seeds/$t" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    result=ok
    found=$(find "fuzz/artifacts/$t" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
        result="FAILED (exit $rc; see $log)"
        failed=1
        find "fuzz/artifacts/$t" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
            -exec cp {} "fuzz/regressions/$t/" \;
    fi
    printf '%-16s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$corpus" "$result"
done
if [ "$failed" -ne 0 ]; then
    echo "crashing inputs were copied to fuzz/regressions/<target>/: fix them, then cargo test -p crew-fuzz" >&2
fi
exit "$failed"
