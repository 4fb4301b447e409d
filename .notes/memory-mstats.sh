#!/bin/bash
# memory-mstats.sh PID LOG: glibc's malloc_stats() of a held crewd (gdb; it prints to crewd's
# stderr, i.e. LOG, the bench's crewd.log) and its anonymous RSS split from /proc/PID/smaps.
# Hold the daemon with CREW_BENCH_HOLD_SECS=N bench-memory ... first.
p=$1; log=$2
n=$(wc -l < "$log")
timeout 60 gdb -p "$p" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1
tail -n +$((n+1)) "$log"
python3 - "$p" <<'PY'
import re, sys
p=sys.argv[1]; cur=None; rows=[]
for line in open(f'/proc/{p}/smaps'):
    m=re.match(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$', line)
    if m: cur={'kb':(int(m.group(2),16)-int(m.group(1),16))//1024,'name':m.group(4),'anon':0}; rows.append(cur)
    elif line.startswith('Anonymous:'): cur['anon']=int(line.split()[1])
tot=sum(r['anon'] for r in rows)
heap=sum(r['anon'] for r in rows if r['name']=='[heap]')
stacks=sum(r['anon'] for r in rows if r['kb'] in (2048, 8192) and r['name']=='')
big=sorted([r for r in rows if r['name']=='' and r['anon']>0], key=lambda r:-r['anon'])[:4]
print(f"anon {tot} kB: [heap] {heap}, 2 MiB thread-stack maps {stacks}, largest anonymous maps (anon kB, size kB) {[(r['anon'], r['kb']) for r in big]}")
PY
