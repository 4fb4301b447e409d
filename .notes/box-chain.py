# The boxed chain alone, old (an init outside the box) against new (bubblewrap started directly),
# interleaved; /tmp/bx/args.sh is a pi worker's box written out by hand (see bench-results.md).
import os, subprocess, time, statistics, shlex, sys
env = {}
src = open('/tmp/bx/args.sh').read()
out = subprocess.run(['bash','-c', '. /tmp/bx/args.sh; echo "$HEAD"; echo "$SYS"; echo "$USER"; echo "$TAIL"'], capture_output=True, text=True).stdout.splitlines()
HEAD, SYS, USER, TAIL = out
R='/work/main/target/release'
old = shlex.split(f"{R}/crew-box-old --boxed -- {HEAD} {SYS} {USER} {TAIL} --as-pid-1 -- {R}/crew-box-old --reaper --stdout-fd -- /bin/true")
new = shlex.split(f"{HEAD.replace('--die-with-parent ','')} {SYS} {USER} {TAIL} --as-pid-1 -- {R}/crew-box --reaper --lifeline 6 --stdout-fd 5 -- /bin/true")
plain_true = ['/bin/true']
r, w = os.pipe()
os.dup2(r, 6); os.set_inheritable(6, True)
n5 = os.open('/dev/null', os.O_WRONLY); os.dup2(n5, 5); os.set_inheritable(5, True)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
res = {'old': [], 'new': [], 'true': []}
for i in range(N):
    for name, argv in (('old', old), ('new', new), ('true', plain_true)):
        t = time.perf_counter()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, pass_fds=(5, 6), close_fds=False)
        res[name].append((time.perf_counter() - t) * 1000)
        assert p.returncode == 0, (name, p.returncode)
for k, v in res.items():
    v.sort()
    print(f"{k}: median {statistics.median(v):.2f} ms, p25 {v[len(v)//4]:.2f}, p75 {v[3*len(v)//4]:.2f}")
print("load", open('/proc/loadavg').read().split()[0])
