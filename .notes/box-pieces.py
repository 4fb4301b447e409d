# The box's pieces timed alone (needs /tmp/bb/{home/.pi/agent/extensions,work,run/prompts,run/sessions/t} and the musl init in /tmp/static for full-musl).
import subprocess, time, sys, statistics, os
B='/tmp/bb'; H=B+'/home'
head=['/usr/bin/bwrap','--unshare-all','--new-session','--share-net','--proc','/proc','--dev','/dev','--tmpfs','/tmp']
sysm=['--symlink','usr/bin','/bin','--symlink','usr/sbin','/sbin','--symlink','usr/lib','/lib','--symlink','usr/lib64','/lib64','--ro-bind-try','/usr','/usr','--ro-bind-try','/lib32','/lib32','--ro-bind-try','/libx32','/libx32','--ro-bind-try','/etc','/etc','--ro-bind-try','/opt','/opt']
def rb(p,w=False): return ['--bind-try' if w else '--ro-bind-try',p,p]
user=rb(B+'/work')+rb(H+'/.cargo')+rb(H+'/.rustup')+rb(H+'/.nvm')+rb('/work/main/target/release')+rb(H+'/.npm',1)+rb(H+'/.cache',1)+rb(H+'/.pi',1)+rb(H+'/.local/bin')+rb(H+'/.cargo/registry',1)+rb(H+'/.cargo/git',1)+rb(H+'/.pi/agent/settings.json')+rb(H+'/.pi/agent/extensions')+rb(H+'/.pi/agent/models.json')+rb(B+'/run/prompts')+rb(B+'/run/skills')+rb(B+'/run/extensions')+rb(B+'/run/sessions/t',1)
tail=['--remount-ro','/','--chdir','/']
init=['--as-pid-1','--','/work/main/target/release/crew-box','--reaper','--','/bin/true']
plain=['--','/bin/true']
M='/tmp/static/x86_64-unknown-linux-musl/release'
initm=['--as-pid-1','--',M+'/crew-box','--reaper','--','/bin/true']
V={
 'full-musl':head+sysm+user+rb(M)+tail+initm,
 'true':['/bin/true'],
 'full':head+sysm+user+rb(M)+tail+init,
 'full-noinit':head+sysm+user+tail+plain,
 'nouser':head+sysm+tail+plain,
 'noproc-nodev':[a for a in head if a not in('--proc','/proc','--dev','/dev')]+sysm+tail+plain,
 'min':['/usr/bin/bwrap','--ro-bind','/','/','/bin/true'],
 'min-unshare-user-pid':['/usr/bin/bwrap','--unshare-user','--unshare-pid','--ro-bind','/','/','/bin/true'],
}
n=int(sys.argv[1])
res={k:[] for k in V}
for i in range(n):
    for k,c in V.items():
        t=time.perf_counter(); r=subprocess.run(c); res[k].append(time.perf_counter()-t)
        if r.returncode: print(k,'rc',r.returncode); sys.exit(1)
for k,v in res.items():
    v.sort(); print('%-22s median %.3f ms p25 %.3f p75 %.3f'%(k,statistics.median(v)*1e3, v[len(v)//4]*1e3, v[3*len(v)//4]*1e3))
