# Needs /tmp/rp made as in .notes/bench-results.md ("The box's 6.7 ms, taken apart"): mkdir -p /tmp/rp/home/.pi/agent/extensions /tmp/rp/work /tmp/rp/run/{prompts,extensions,sessions/t}; touch /tmp/rp/home/.pi/agent/{settings,models}.json; echo x > /tmp/rp/run/prompts/_system-x.md; echo x > /tmp/rp/run/extensions/crew-ask.ts
import subprocess, time, sys, statistics, os
B='/tmp/rp'; H=B+'/home'; R=B+'/run'; REL='/work/main/target/release'
FAKE=[REL+'/crew-fake-agent','--mode','json','-p','--session',R+'/sessions/t/attempt-1.jsonl','--no-extensions','--extension',R+'/extensions/crew-ask.ts','--no-skills','--tools','read,grep,find,ls,ask_user','--system-prompt',R+'/prompts/_system-x.md','Task: Goal: bench\n\nItem 1.\n']
def rb(p,w=False): return ['--bind-try' if w else '--ro-bind-try',p,p]
head=['/usr/bin/bwrap','--unshare-all','--new-session','--share-net','--proc','/proc','--dev','/dev','--tmpfs','/tmp','--symlink','usr/bin','/bin','--symlink','usr/sbin','/sbin','--symlink','usr/lib','/lib','--symlink','usr/lib64','/lib64']+rb('/usr')+rb('/lib32')+rb('/libx32')+rb('/etc')+rb('/opt')
user=rb(B+'/work')+rb(H+'/.cargo')+rb(H+'/.rustup')+rb(H+'/.nvm')+rb(REL)+rb(H+'/.npm',1)+rb(H+'/.cache',1)+rb(H+'/.pi',1)+rb(H+'/.local/bin')+rb(H+'/.cargo/registry',1)+rb(H+'/.cargo/git',1)+rb(H+'/.pi/agent/settings.json')+rb(H+'/.pi/agent/extensions')+rb(H+'/.pi/agent/models.json')+rb(R+'/prompts')+rb(R+'/skills')+rb(R+'/extensions')+rb(R+'/sessions/t',1)
tail=['--remount-ro','/','--chdir',B+'/work','--as-pid-1','--',REL+'/crew-box','--reaper','--']
V={
 'fake-alone':FAKE,
 'pidns':[REL+'/crew-box','--pidns','--']+FAKE,
 'boxed':head+user+tail+FAKE,
 'pidns-true':[REL+'/crew-box','--pidns','--','/bin/true'],
 'boxed-true':head+user+tail+['/bin/true'],
 'boxed-noinit':head+user+tail[:-4]+['--']+FAKE,
}
env=dict(os.environ); env['HOME']=H
n=int(sys.argv[1]); res={k:[] for k in V}
for i in range(n):
    for k,c in V.items():
        t=time.perf_counter()
        p=subprocess.Popen(c,stdout=subprocess.PIPE,stdin=subprocess.DEVNULL,cwd=B+'/work',env=env)
        out=p.stdout.read(); p.wait()
        res[k].append(time.perf_counter()-t)
        if p.returncode: print(k,'rc',p.returncode); sys.exit(1)
for k,v in res.items(): print('%-12s median %.3f ms'%(k,statistics.median(v)*1e3))
