#!/bin/bash
# Box start cost pieces, interleaved: N starts each.
# Usage (from the workspace, after cargo build -p crew-box): .notes/box-start.sh 60
N=${1:-40}
BOX=$(readlink -f "${CREW_BOX:-target/debug/crew-box}")
DIR=$(mktemp -d)
H=$HOME
OLD="--ro-bind-try /usr /usr --ro-bind-try /bin /bin --ro-bind-try /sbin /sbin --ro-bind-try /lib /lib --ro-bind-try /lib32 /lib32 --ro-bind-try /lib64 /lib64 --ro-bind-try /libx32 /libx32 --ro-bind-try /etc /etc --ro-bind-try /opt /opt"
NEW="--symlink usr/bin /bin --symlink usr/sbin /sbin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind-try /usr /usr --ro-bind-try /lib32 /lib32 --ro-bind-try /libx32 /libx32 --ro-bind-try /etc /etc --ro-bind-try /opt /opt"
REST="--ro-bind-try $H/.cargo $H/.cargo --bind-try $H/.cargo/registry $H/.cargo/registry --bind-try $H/.cargo/git $H/.cargo/git --ro-bind-try $H/.rustup $H/.rustup --bind-try $H/.npm $H/.npm --bind-try $H/.cache $H/.cache --ro-bind-try $H/.local/bin $H/.local/bin --ro-bind-try $H/.nvm $H/.nvm --bind-try $H/.pi $H/.pi --ro-bind-try $H/.pi/agent/settings.json $H/.pi/agent/settings.json --ro-bind-try $H/.pi/agent/extensions $H/.pi/agent/extensions --ro-bind-try $H/.pi/agent/models.json $H/.pi/agent/models.json --bind $DIR $DIR --ro-bind-try $(dirname $BOX) $(dirname $BOX)"
HEAD="bwrap --die-with-parent --unshare-all --new-session --share-net --proc /proc --dev /dev --tmpfs /tmp"
TAIL="--remount-ro / --chdir $DIR"
declare -A cmd
cmd[1_true]="/bin/true"
cmd[2_bwrap_old]="$HEAD $OLD $REST $TAIL /bin/true"
cmd[3_bwrap_new]="$HEAD $NEW $REST $TAIL /bin/true"
cmd[4_inner_init_new]="$HEAD $NEW $REST $TAIL $BOX --reaper -- /bin/true"
declare -A tot
for k in "${!cmd[@]}"; do tot[$k]=0; done
for i in $(seq $N); do
  for k in "${!cmd[@]}"; do
    s=$(date +%s%N); ${cmd[$k]} >/dev/null || echo "FAIL $k"; e=$(date +%s%N)
    tot[$k]=$(( ${tot[$k]} + e - s ))
  done
done
for k in "${!cmd[@]}"; do echo "$k $(( ${tot[$k]} / N / 1000 )) us"; done | sort
