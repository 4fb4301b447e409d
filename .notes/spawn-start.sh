#!/bin/bash
# Sequential start cost of the init around /bin/true vs util-linux unshare (idle machine).
# Usage from the workspace after a release build of crew-box and crew-fake-agent: bash .notes/spawn-start.sh
N=${N:-500}
t() { local s=$(date +%s%N); for i in $(seq $N); do "$@" >/dev/null 2>&1; done; local e=$(date +%s%N); echo "$(( (e-s)/N/1000 )) us  $*" | cut -c1-110; }
t /bin/true
t unshare --pid --fork /bin/true
t target/release/crew-box --pidns -- /bin/true
t target/release/crew-box --reaper -- /bin/true
t target/release/crew-fake-agent --help
