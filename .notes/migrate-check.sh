#!/bin/bash
# Old crewd (a debug build of an earlier commit in /tmp/old-target: 1389b36 for the two-tree
# journal, 56716a0 for one event per key) makes runs; the new crewd opens the same state dir.
set -u
OLD=/tmp/old-target/debug; NEW=/work/main/target/debug
T=$(mktemp -d /tmp/crew-migrate.XXXXXX); mkdir -p $T/work; cd $T/work
export CREW_SOCKET=$T/crewd.sock
start() { "$1/crewd" --socket $CREW_SOCKET --state-dir $T/state > $T/$2.log 2>&1 & echo $! > $T/pid; for i in $(seq 100); do "$1/crewctl" daemon status >/dev/null 2>&1 && return; sleep 0.1; done; echo "no ping"; cat $T/$2.log; exit 1; }
start $OLD old
for i in 1 2 3; do $OLD/crewctl run "migrate goal $i" --runtime fake >/dev/null 2>&1; echo "old run $i exit $?"; done
$OLD/crewctl ls > $T/ls.old
for r in $(grep -o 'team_[A-Za-z0-9_]*' $T/ls.old); do $OLD/crewctl logs $r > $T/logs.old.$r 2>&1; done
kill -9 $(cat $T/pid); sleep 0.5
start $NEW new
$NEW/crewctl ls > $T/ls.new
diff <(awk '{print $1, $2}' $T/ls.old) <(awk '{print $1, $2}' $T/ls.new) && echo "ls same"
for r in $(grep -o 'team_[A-Za-z0-9_]*' $T/ls.old); do $NEW/crewctl logs $r > $T/logs.new.$r 2>&1; if diff -q $T/logs.old.$r $T/logs.new.$r >/dev/null; then echo "logs $r same ($(wc -l < $T/logs.new.$r) lines)"; else echo "logs $r DIFFER"; diff $T/logs.old.$r $T/logs.new.$r | head -5; fi; done
$NEW/crewctl run "after migration" --runtime fake >/dev/null 2>&1; echo "new run exit $?"
r=$(grep -o 'team_[A-Za-z0-9_]*' $T/ls.old | head -1); $NEW/crewctl forget $r >/dev/null 2>&1; echo "forget exit $?"; $NEW/crewctl logs $r 2>&1 | head -2
$NEW/crewctl daemon stop >/dev/null 2>&1; sleep 1
grep -iE "error|corrupt|warn" $T/new.log | head -5
echo "dir $T"
