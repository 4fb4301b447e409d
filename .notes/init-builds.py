# Times crew-box builds: glibc dynamic (target/release), static-pie (/tmp/static/x86_64-unknown-linux-gnu) and musl (/tmp/static/x86_64-unknown-linux-musl; needs main to read its argv, not std::env).
import subprocess, time, sys, statistics
R='/work/main/target/release/crew-box'; S='/tmp/static/x86_64-unknown-linux-gnu/release/crew-box'; M='/tmp/static/x86_64-unknown-linux-musl/release/crew-box'
cmds = {
 'true': ['/bin/true'],
 'dyn': [R,'--reaper','--','/bin/true'],
 'static': [S,'--reaper','--','/bin/true'],
 'musl': [M,'--reaper','--','/bin/true'],
 'dyn-pidns': [R,'--pidns','--','/bin/true'],
 'musl-pidns': [M,'--pidns','--','/bin/true'],
}
n=int(sys.argv[1])
res={k:[] for k in cmds}
for i in range(n):
    for k,c in cmds.items():
        t=time.perf_counter(); r=subprocess.run(c); res[k].append(time.perf_counter()-t)
        if r.returncode: print(k,'rc',r.returncode); sys.exit(1)
for k,v in res.items():
    v.sort(); print('%-12s median %.3f ms p25 %.3f p75 %.3f'%(k,statistics.median(v)*1e3, v[len(v)//4]*1e3, v[3*len(v)//4]*1e3))
