# Needs /tmp/rp made as in .notes/bench-results.md ("The box's 6.7 ms, taken apart"): mkdir -p /tmp/rp/home/.pi/agent/extensions /tmp/rp/work /tmp/rp/run/{prompts,extensions,sessions/t}; touch /tmp/rp/home/.pi/agent/{settings,models}.json; echo x > /tmp/rp/run/prompts/_system-x.md; echo x > /tmp/rp/run/extensions/crew-ask.ts
import subprocess, time, sys, statistics, os
B='/tmp/rp'; H=B+'/home'; R=B+'/run'; REL='/work/main/target/release'
def rb(p,w=False): return ['--bind-try' if w else '--ro-bind-try',p,p]
ns=['--unshare-all','--new-session','--share-net']
pd=['--proc','/proc','--dev','/dev','--tmpfs','/tmp']
links=['--symlink','usr/bin','/bin','--symlink','usr/sbin','/sbin','--symlink','usr/lib','/lib','--symlink','usr/lib64','/lib64']
sysb=rb('/usr')+rb('/lib32')+rb('/libx32')+rb('/etc')+rb('/opt')
missing=rb(H+'/.cargo')+rb(H+'/.rustup')+rb(H+'/.nvm')+rb(H+'/.npm',1)+rb(H+'/.cache',1)+rb(H+'/.local/bin')+rb(H+'/.cargo/registry',1)+rb(H+'/.cargo/git',1)+rb(R+'/skills')
present=rb(B+'/work')+rb(REL)+rb(H+'/.pi',1)+rb(H+'/.pi/agent/settings.json')+rb(H+'/.pi/agent/extensions')+rb(H+'/.pi/agent/models.json')+rb(R+'/prompts')+rb(R+'/extensions')+rb(R+'/sessions/t',1)
tail=['--remount-ro','/','--chdir',B+'/work','--as-pid-1','--',REL+'/crew-box','--reaper','--','/bin/true']
bw=['/usr/bin/bwrap']
V={
 'all': bw+ns+pd+links+sysb+missing+present+tail,
 'no-missing': bw+ns+pd+links+sysb+present+tail,
 'no-present': bw+ns+pd+links+sysb+missing+rb(REL)+tail[:2]+['--chdir','/']+tail[4:],
 'no-dev': bw+ns+['--proc','/proc','--tmpfs','/tmp']+links+sysb+missing+present+tail,
 'no-proc': bw+ns+['--dev','/dev','--tmpfs','/tmp']+links+sysb+missing+present+tail,
 'no-tmp': bw+ns+['--proc','/proc','--dev','/dev']+links+sysb+missing+present+tail,
 'no-remount': bw+ns+pd+links+sysb+missing+present+tail[2:],
 'newsession-off': bw+['--unshare-all','--share-net']+pd+links+sysb+missing+present+tail,
 'pidns-true': [REL+'/crew-box','--pidns','--','/bin/true'],
}
n=int(sys.argv[1]); res={k:[] for k in V}
for i in range(n):
    for k,c in V.items():
        t=time.perf_counter()
        r=subprocess.run(c,stdin=subprocess.DEVNULL,cwd=B+'/work')
        res[k].append(time.perf_counter()-t)
        if r.returncode: print(k,'rc',r.returncode); sys.exit(1)
base=statistics.median(res['all'])
for k,v in res.items(): print('%-16s median %.3f ms (%+.3f)'%(k,statistics.median(v)*1e3,(statistics.median(v)-base)*1e3))
