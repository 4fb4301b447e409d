#!/bin/bash
# memory-ab.sh NAME... : for each NAME in turn, `bench-memory` (defaults) from target/ab/NAME,
# a directory holding a release build's bench-memory, crewd, crew-box and crew-fake-agent (the
# bench finds crewd beside itself). Box off, as in the earlier per-task-cost figures.
ab=${AB:-target/ab}
for n in "$@"; do
  echo "== $n $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
  CREW_BENCH_CONFIG='sandbox = "off"' "$ab/$n/bench-memory" 2>&1
done
