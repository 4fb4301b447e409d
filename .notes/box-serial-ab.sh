#!/bin/bash
# A/B of one boxed task start at a time: old (bfb8e8b) vs new (4891525), alternating.
for pair in 1 2 3; do
  for b in old new; do
    sleep 40
    echo "pair $pair $b (load $(cut -d' ' -f1 /proc/loadavg)): $(/work/main/target/ab/$b/bench-dispatch --rounds 1 --serial 200 --pueue-tasks 0 2>&1 | grep -E 'one task start alone|crew with the box:' | sed 's/(target.*//' | tr '\n' ' ')"
  done
done
