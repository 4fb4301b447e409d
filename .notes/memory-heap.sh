#!/bin/bash
# memory-heap.sh DIR NAME ARGS...: heaptrack of crewd under DIR/bench-memory ARGS. DIR holds a
# release build's binaries with crewd renamed crewd.real and this wrapper as `crewd`:
#   #!/bin/sh
#   exec heaptrack -o DIR/out/crewd "$(dirname "$0")/crewd.real" "$@"
# crewd is killed with -9 while held, so everything live counts as leaked; DIR/out/NAME.stacks
# are the folded stacks (bytes live per stack), to sum by frame.
d=$1; name=$2; shift 2
mkdir -p "$d/out"; rm -f "$d"/out/crewd*.zst
(CREW_BENCH_HOLD_SECS=600 CREW_BENCH_CONFIG='sandbox = "off"' "$d/bench-memory" "$@" > "$d/out/$name.log" 2>&1 &)
while ! grep -q holding "$d/out/$name.log" 2>/dev/null; do sleep 1; done
p=$(pgrep -f "^$d/crewd.real" | head -1)
grep -E "VmRSS|RssAnon" "/proc/$p/status" >> "$d/out/$name.log"
kill -9 "$p"
sleep 3
while pgrep -f heaptrack_interpret >/dev/null; do sleep 1; done
mv "$d"/out/crewd*.zst "$d/out/$name.zst"
heaptrack_print -f "$d/out/$name.zst" --print-leaks 0 --print-peaks 0 --print-allocators 0 \
  --print-temporary 0 --print-histogram 0 -F "$d/out/$name.stacks" --flamegraph-cost-type leaked -s 0 >/dev/null 2>&1
b=$(pgrep -f "^$d/bench-memory" | head -1); [ -n "$b" ] && kill "$b"
echo "done $name"
