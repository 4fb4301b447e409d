#!/usr/bin/env bash
# `make test`: every suite (Rust through nextest, the Node clients, the dashboard in chromium,
# the build-twice check), each run even when an earlier one failed, then one closing line:
#
#   N passed, N failed, N skipped
#
# Tests of a real agent CLI that is not installed are left out with a nextest filter, so they
# count as skipped, never as passed, and the closing line names the CLIs and how to install them.
# (They are also outside nextest's default filter, .config/nextest.toml, so a plain
# `cargo nextest run` reports them skipped too.)
#
# Usage: tests/run.sh [rust|node|ui|build|nonroot]...   (default: the first four)
#
# `nonroot` (`make test-nonroot`, which .ci/run runs after `make test`): as root, the box's tests
# again as an ordinary user (below, `run_nonroot`); not as root, it says the suite already runs
# as one.
# Env: CARGO, NODE, TARGET_DIR (as make passes them), CREW_AGENTS_DIR, CREW_PI_DIR (where the
# pinned CLIs are, as the tests read them), NEXTEST_ARGS (more nextest arguments),
# CREW_TEST_FILTER (a nextest filterset the Rust run is narrowed to, e.g. 'package(crewctl)'),
# NEXTEST_SCOPE (what nextest builds and lists; default --workspace), CREW_NONROOT_USER (the
# ordinary user of the `nonroot` part; default crew-nonroot, made with useradd when missing).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CARGO=${CARGO:-cargo}
NODE=${NODE:-node}
TARGET_DIR=${TARGET_DIR:-$REPO/target}
AGENTS_DIR=${CREW_AGENTS_DIR:-$REPO/tests/agents}
PI_DIR=${CREW_PI_DIR:-$REPO/.cache/pi}

# Which tests need which CLI (nextest filtersets). Every test of a `real_*` binary of crewd is
# in exactly one of these; `coverage` below fails the run when one is not.
declare -A NEEDS=(
  [claude]='binary(/^real_claude/) | (binary(/^real_(ask|mcp)$/) & test(/^claude/))'
  [codex]='binary(/^real_codex/) | (binary(/^real_(ask|mcp)$/) & test(/^codex/))'
  [gemini]='binary(/^real_gemini/) | (binary(=real_ask) & test(/^gemini/))'
  [opencode]='binary(/^real_opencode/) | (binary(=real_ask) & test(/^opencode/))'
  [pi]='binary(/^real_pi/) | binary(=real_respond)'
)
REAL='package(crewd) & binary(/^real_/)'

installed() {
  case "$1" in
    pi) [ -e "$PI_DIR/node_modules/.bin/pi" ] ;;
    *) [ -e "$AGENTS_DIR/node_modules/.bin/$1" ] ;;
  esac
}

passed=0
failed=0
skipped=0
failures=()
missing=()
for cli in claude codex gemini opencode pi; do
  installed "$cli" || missing+=("$cli")
done

# The Slurm placement tests start a real two-node cluster (tests/slurm/start.sh): root and
# Debian's Slurm packages with the JWT plugin. Without them (and no cluster named by
# CREW_SLURM_ENV, as .ci/run starts one) they are left out and counted as skipped.
SLURM_TESTS='package(crewd) & (binary(=slurm) | binary(=real_pi_slurm))'
slurm_ready() {
  [ -n "${CREW_SLURM_ENV:-}" ] && return 0
  [ "$(id -u)" = 0 ] || return 1
  local c
  for c in munged slurmctld slurmd slurmrestd sbatch scontrol; do
    command -v "$c" > /dev/null 2>&1 || return 1
  done
  compgen -G '/usr/lib/*/slurm-wlm/auth_jwt.so' > /dev/null
}
slurm_missing=false
slurm_ready || slurm_missing=true

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crew-test.XXXXXX")
# The ordinary user's HOME and test directories of the `nonroot` part (outside $tmp, which
# only root may enter).
nonroot_base=""
trap 'rm -rf "$tmp" ${nonroot_base:+"$nonroot_base"}' EXIT
# Lines for the closing summary (what a part left out, and why).
notes=()

# Tests that need something of the host beyond the toolchain. Such a test fails where its need
# is missing (it never passes having done nothing); here it is left out and counted skipped,
# and the closing line says what to install. Each need: a probe, and the tests (a filterset).
HOST_TESTS_TTY='package(crewctl) & binary(=tty) & test(/^(a_second_ctrl_c_detaches_at_once|one_key_without_enter_cancels_or_keeps_following|a_plan_is_approved_inline_with_one_key|live_events_draw_while_a_block_is_offered|hostile_text_reaches_the_terminal_escaped)$/)'
# crew-box's tests that start a box (the rest of crew-box's tests need no bubblewrap).
BOX_INIT_TESTS='package(crew-box) & binary(=init) & test(/in_the_box/)'
declare -A HOST=(
  [tmux]="$HOST_TESTS_TTY"
  [valgrind]='package(crew-core) & binary(=linear_parsing) & test(=four_times_the_items_cost_about_four_times_the_instructions)'
  [tmpfs]='(package(crew-journal) & binary(=disk_full) & test(=disk_full_surfaces_as_io_error_and_poisons)) | (package(crewd) & binary(=fulldisk) & test(=full_disk_refuses_writes_keeps_reads_and_recovers)) | (package(crewd) & binary(=storage_errors) & (test(=a_read_only_journal_directory_leaves_calls_answering_and_recovers) | test(=a_task_ready_while_the_journal_cannot_write_waits_for_it)))'
  [root]='(package(crewd) & binary(=socket_paths) & test(=a_directory_of_another_user_is_refused)) | (package(crewd) & binary(=systemd) & test(=a_peer_of_another_uid_is_refused_and_logged))'
  [systemd]='package(crewd) & binary(=systemd) & test(/^(unit_files_pass_systemd_analyze_verify|socket_activation_serves_http_and_websocket)$/)'
  [descriptors]='package(crewd) & binary(=ui_gateway) & test(=idle_dashboard_connections_never_take_the_socket_down)'
  [bubblewrap]="(package(crewd) & binary(=sandbox) & not test(=required_without_the_mechanism_refuses_with_a_clear_message)) | ($BOX_INIT_TESTS)"
)
declare -A HOST_HINT=(
  [tmux]='tmux (Debian package `tmux`)'
  [valgrind]='valgrind (Debian package `valgrind`)'
  [tmpfs]='a tmpfs mounted in an unprivileged user namespace (unshare -rm)'
  [root]='root, with setpriv and curl and a user `nobody`'
  [systemd]='systemd-analyze and systemd-socket-activate (Debian package `systemd`)'
  [descriptors]='prlimit and a hard limit of at least 1356 open files'
  [bubblewrap]='bubblewrap that can make a box here (Debian package `bubblewrap`, unprivileged user namespaces)'
)
host_has() {
  case "$1" in
    tmux) tmux -V > /dev/null 2>&1 ;;
    valgrind) valgrind --version > /dev/null 2>&1 ;;
    tmpfs)
      mkdir -p "$tmp/tmpfs-probe"
      unshare --user --map-root-user --mount sh -c 'mount -t tmpfs -o size=1m tmpfs "$0"' \
        "$tmp/tmpfs-probe" > /dev/null 2>&1
      ;;
    root)
      [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null && command -v curl > /dev/null \
        && id nobody > /dev/null 2>&1
      ;;
    systemd) command -v systemd-analyze > /dev/null && command -v systemd-socket-activate > /dev/null ;;
    descriptors)
      local hard
      hard=$(ulimit -Hn)
      command -v prlimit > /dev/null && { [ "$hard" = unlimited ] || [ "$hard" -ge 1356 ]; }
      ;;
    bubblewrap) bwrap --unshare-all --die-with-parent --ro-bind / / /bin/true > /dev/null 2>&1 ;;
  esac
}
host_missing=()
for need in tmux valgrind tmpfs root systemd descriptors bubblewrap; do
  host_has "$need" || host_missing+=("$need")
done


# nextest's closing "Summary [...] N tests run: N passed, N failed, ..." (timed out is a
# failure). Its "skipped" is not used: a binary whose tests are all filtered out is not even
# listed, so its tests are in no count; the skipped are counted from `nextest list` instead.
count_nextest() {
  local line
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -E '^ *Summary \[' | tail -n 1)
  local n
  for word in passed failed "timed out"; do
    n=$(printf '%s\n' "$line" | grep -oE "[0-9]+ $word" | grep -oE '^[0-9]+' || true)
    n=${n:-0}
    case "$word" in
      passed) passed=$((passed + n)) ;;
      *) failed=$((failed + n)) ;;
    esac
  done
  [ -n "$line" ]
}

# How many tests `nextest list` names for these arguments.
count_listed() {
  # shellcheck disable=SC2086
  "$CARGO" nextest list ${NEXTEST_SCOPE:---workspace} --ignore-default-filter \
    --message-format oneline "$@" 2>> "$tmp/list.err" | grep -c . || true
}

# node --test's TAP totals.
count_tap() {
  local n
  for key in pass fail cancelled skipped todo; do
    n=$(grep -E "^# $key [0-9]+$" "$1" | tail -n 1 | grep -oE '[0-9]+$' || true)
    n=${n:-0}
    case "$key" in
      pass) passed=$((passed + n)) ;;
      fail | cancelled) failed=$((failed + n)) ;;
      *) skipped=$((skipped + n)) ;;
    esac
  done
  grep -qE '^# tests [0-9]+$' "$1"
}

# One check that is not a test runner's: counted as one test.
check() {
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
}

coverage() {
  local all=() union=""
  for cli in "${!NEEDS[@]}"; do all+=("(${NEEDS[$cli]})"); done
  union=$(IFS='|'; echo "${all[*]}")
  local left
  left=$("$CARGO" nextest list -p crewd --ignore-default-filter --message-format oneline \
    -E "$REAL & not ($union)" 2> "$tmp/list.err")
  if [ $? -ne 0 ]; then
    cat "$tmp/list.err" >&2
    return 1
  fi
  if [ -n "$left" ]; then
    echo "tests/run.sh: these real-CLI tests name no CLI in its NEEDS table:" >&2
    echo "$left" >&2
    return 1
  fi
}

# Each HOST filterset still names the tests it was written for (a renamed test would otherwise
# fall out of the table and fail where its need is missing).
host_coverage() {
  local need n
  for need in "${!HOST[@]}"; do
    n=$(count_listed -E "${HOST[$need]}")
    if [ "${n:-0}" -eq 0 ]; then
      echo "tests/run.sh: HOST[$need] names no test" >&2
      return 1
    fi
  done
}

ran_rust=false
run_rust() {
  ran_rust=true
  check "every real-CLI test is in tests/run.sh's NEEDS table" coverage
  check "every HOST filterset of tests/run.sh names a test" host_coverage
  local filter="all()"
  local leave=()
  for cli in "${missing[@]}"; do leave+=("(${NEEDS[$cli]})"); done
  [ "$slurm_missing" = false ] || leave+=("($SLURM_TESTS)")
  for need in "${host_missing[@]}"; do leave+=("(${HOST[$need]})"); done
  if [ ${#leave[@]} -gt 0 ]; then
    filter="not ($(IFS='|'; echo "${leave[*]}"))"
  fi
  [ -z "${CREW_TEST_FILTER:-}" ] || filter="($filter) & ($CREW_TEST_FILTER)"
  # Every test in scope (ignored ones too) against those that will run: the rest is skipped.
  local all torun
  all=$(count_listed --run-ignored all -E "${CREW_TEST_FILTER:-all()}")
  torun=$(count_listed -E "$filter")
  # --ignore-default-filter: the real-CLI tests whose CLI is installed run here.
  # shellcheck disable=SC2086
  "$CARGO" nextest run ${NEXTEST_SCOPE:---workspace} --no-fail-fast --no-tests=pass \
    --ignore-default-filter -E "$filter" \
    ${NEXTEST_ARGS:-} 2> >(tee "$tmp/nextest.err" >&2)
  local rc=$?
  wait
  skipped=$((skipped + all - torun))
  if ! count_nextest "$tmp/nextest.err" || [ $rc -ne 0 ]; then
    [ $rc -ne 0 ] && failures+=("cargo nextest run (exit $rc)")
    # A build failure runs no test: count it as one failure.
    grep -qE '^ *Summary \[' "$tmp/nextest.err" || failed=$((failed + 1))
  fi
}

# The box must not rely on root (issue 34): crew runs as an ordinary user, and its box is
# bubblewrap in unprivileged user namespaces, crew's init a user + PID namespace. CI runs as
# root, where neither needs them, so as root this part runs again, as an ordinary user, the
# hostile-agent box tests (sandbox.rs: every escape fails, own edits and git commit work, a
# read-only role, shared mode), the init and containment tests (crew-box, crewd's contain.rs) and
# real agents in their box against the stub model (pi's default team; Claude Code with its own
# sandbox forced on, which crew turns off inside its box), each when its CLI is installed.
# The user (CREW_NONROOT_USER, default `crew-nonroot`, made once with useradd) runs the
# binaries root built: nextest runs each through tests/as-user.sh (a target runner), with a
# clean HOME and CREW_TEST_SANDBOX=required. Whatever cannot run is counted skipped and said
# why, never passed.
NONROOT_USER=${CREW_NONROOT_USER:-crew-nonroot}
NONROOT_BOX="(package(crewd) & binary(=sandbox)) | ($BOX_INIT_TESTS)"
NONROOT_INIT="(package(crew-box) & not ($BOX_INIT_TESTS)) | (package(crewd) & binary(=contain))"
declare -A NONROOT_REAL=(
  [pi]='package(crewd) & binary(=real_pi) & test(=default_team_on_the_real_pi_cli)'
  [claude]='package(crewd) & binary(=real_claude) & test(=claude_codes_own_sandbox_is_off_inside_crews_box)'
)

as_user() {
  "$REPO/tests/as-user.sh" "$@"
}

# Why the user cannot reach `path` (the first directory on the way it may not enter), or "".
unreachable() {
  local path=$1 dir=""
  local IFS=/
  for part in $path; do
    [ -n "$part" ] || continue
    dir="$dir/$part"
    if ! as_user test -x "$dir"; then
      echo "$dir ($(stat -c '%A %U' "$dir" 2> /dev/null)) is closed to $NONROOT_USER"
      return
    fi
  done
}

run_nonroot() {
  if [ "$(id -u)" != 0 ]; then
    echo "nonroot: this suite runs as uid $(id -u), not root: \`make test\` already runs the box's tests as an ordinary user; nothing to run again"
    notes+=("nonroot: not root, so \`make test\` itself ran the box's tests as an ordinary user (uid $(id -u))")
    return
  fi
  local all_filter="($NONROOT_BOX) | ($NONROOT_INIT) | (${NONROOT_REAL[pi]}) | (${NONROOT_REAL[claude]})"
  local listed all want
  # shellcheck disable=SC2086
  listed=$("$CARGO" nextest list ${NEXTEST_SCOPE:---workspace} --ignore-default-filter \
    --message-format oneline -E "$all_filter" 2>> "$tmp/list.err")
  all=$(grep -c . <<< "$listed" || true)
  # Each filter still names its tests (a renamed test or binary would fall out unseen).
  for want in '^crewd::sandbox a_hostile_agent_in_its_box' '^crew-box::init ' '^crewd::contain ' \
    '^crewd::real_pi default_team_on_the_real_pi_cli$' \
    '^crewd::real_claude claude_codes_own_sandbox_is_off_inside_crews_box$'; do
    if ! grep -qE "$want" <<< "$listed"; then
      echo "tests/run.sh: the nonroot filters name no test matching $want" >&2
      failed=$((failed + 1))
      failures+=("the nonroot filters of tests/run.sh name every test they were written for")
    fi
  done
  # Nothing can run as the user: every test counted skipped, and why.
  local why=""
  if ! command -v setpriv > /dev/null; then
    why="setpriv (Debian package util-linux) is missing"
  elif [[ $REPO == *[[:space:]]* ]]; then
    why="the checkout's path has a space (a target runner is split on spaces): $REPO"
  elif ! id -u "$NONROOT_USER" > /dev/null 2>&1 \
    && ! useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$NONROOT_USER" 2> "$tmp/useradd.err"; then
    why="cannot create the user $NONROOT_USER: $(tr '\n' ' ' < "$tmp/useradd.err")"
  fi
  if [ -z "$why" ] && ! nonroot_base=$(mktemp -d /var/tmp/crew-nonroot.XXXXXX); then
    nonroot_base=""
    why="cannot make a directory in /var/tmp"
  fi
  if [ -z "$why" ]; then
    CREW_NONROOT_USER=$NONROOT_USER
    CREW_NONROOT_UID=$(id -u "$NONROOT_USER")
    CREW_NONROOT_GID=$(id -g "$NONROOT_USER")
    # A clean HOME, and the box tests' directories outside /tmp (the box's /tmp is its own).
    CREW_NONROOT_HOME=$nonroot_base/home
    CREW_NONROOT_TMPDIR=$nonroot_base/tmp
    mkdir -p "$CREW_NONROOT_HOME" "$CREW_NONROOT_TMPDIR"
    chown -R "$CREW_NONROOT_UID:$CREW_NONROOT_GID" "$nonroot_base"
    export CREW_NONROOT_USER CREW_NONROOT_UID CREW_NONROOT_GID CREW_NONROOT_HOME CREW_NONROOT_TMPDIR
    # The binaries root built, open to the user (inside the checkout or /tmp only).
    case "$TARGET_DIR/" in
      "$REPO/"* | /tmp/*)
        chmod o+rx "$TARGET_DIR" "$TARGET_DIR/debug" "$TARGET_DIR/debug/deps" 2> /dev/null
        find "$TARGET_DIR/debug" "$TARGET_DIR/debug/deps" -maxdepth 1 -type f -perm -u+x \
          ! -perm -o+rx -exec chmod o+rx {} + 2> /dev/null
        ;;
    esac
    local p
    for p in "$TARGET_DIR/debug/crewd" "$REPO/crates/crewd"; do
      [ -n "$why" ] || why=$(unreachable "$p")
    done
    [ -z "$why" ] || why="the checkout is not open to an ordinary user: $why"
  fi
  if [ -n "$why" ]; then
    echo "nonroot: SKIPPED, $all tests: $why" >&2
    skipped=$((skipped + all))
    notes+=("skipped: the $all box tests as an ordinary user: $why")
    return
  fi
  # What the user's machine lacks leaves tests out, said why.
  local filter="($NONROOT_INIT)"
  if as_user bwrap --unshare-all --die-with-parent --ro-bind / / /bin/true > "$tmp/bwrap.err" 2>&1; then
    filter="$filter | ($NONROOT_BOX)"
    local cli bin
    for cli in pi claude; do
      bin=$AGENTS_DIR/node_modules/.bin/$cli
      [ "$cli" != pi ] || bin=$PI_DIR/node_modules/.bin/pi
      if ! installed "$cli"; then
        notes+=("skipped: $cli in its box as an ordinary user: $cli is not installed (\`make agents\`)")
      elif ! as_user "$bin" --version > "$tmp/$cli.err" 2>&1; then
        notes+=("skipped: $cli in its box as an ordinary user: $NONROOT_USER cannot run $bin: $(tail -c 300 "$tmp/$cli.err" | tr '\n' ' ')")
      else
        filter="$filter | (${NONROOT_REAL[$cli]})"
      fi
    done
  else
    notes+=("skipped: the box tests as an ordinary user: bubblewrap cannot make a box as $NONROOT_USER: $(tail -c 300 "$tmp/bwrap.err" | tr '\n' ' ')")
  fi
  local torun
  torun=$(count_listed -E "$filter")
  skipped=$((skipped + all - torun))
  local triple var
  triple=$(rustc -vV 2> /dev/null | sed -n 's/^host: //p')
  var="CARGO_TARGET_$(printf '%s' "$triple" | tr 'a-z.-' 'A-Z__')_RUNNER"
  echo "nonroot: $torun tests as $NONROOT_USER (uid $CREW_NONROOT_UID, HOME $CREW_NONROOT_HOME): $filter"
  # shellcheck disable=SC2086
  env "$var=$REPO/tests/as-user.sh" "$CARGO" nextest run ${NEXTEST_SCOPE:---workspace} \
    --no-fail-fast --no-tests=pass --ignore-default-filter -E "$filter" \
    ${NEXTEST_ARGS:-} 2> >(tee "$tmp/nonroot.err" >&2)
  local rc=$?
  wait
  if ! count_nextest "$tmp/nonroot.err" || [ $rc -ne 0 ]; then
    [ $rc -ne 0 ] && failures+=("the box tests as an ordinary user: cargo nextest run (exit $rc)")
    grep -qE '^ *Summary \[' "$tmp/nonroot.err" || failed=$((failed + 1))
  fi
  # Run as root instead, they would pass having shown nothing: nextest says which runner it used.
  if ! grep -q "using target runner .*tests/as-user.sh" "$tmp/nonroot.err"; then
    failed=$((failed + 1))
    failures+=("nextest did not run the box tests through tests/as-user.sh ($var), so not as $NONROOT_USER")
  fi
  rm -rf "$nonroot_base"
  nonroot_base=""
}

# node --test with a TAP copy of its results to count: `node_suite NAME DIR TIMEOUT_MS
# [VAR=value]... -- FILE...`. Node's options go before the test files (after the first file
# node takes every word for a file); a per-test timeout, so a test that waits forever fails
# instead of holding the run.
node_suite() {
  local name=$1 dir=$2 timeout=$3
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  local tap="$tmp/${name//\//-}.tap"
  (cd "$dir" && env "${envs[@]}" "$NODE" --test --test-timeout="$timeout" \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tap" "$@")
  local rc=$?
  if ! count_tap "$tap" 2> /dev/null; then
    failed=$((failed + 1))
  fi
  [ $rc -eq 0 ] || failures+=("$name (exit $rc)")
}

run_node() {
  node_suite "tests/node" tests/node 180000 CREWD_BIN="$TARGET_DIR/debug/crewd" \
    -- schema.test.mjs client.test.mjs examples.test.mjs
  node_suite "tests/mcp" tests/mcp 180000 CREWD_BIN="$TARGET_DIR/debug/crewd" \
    CREWCTL_BIN="$TARGET_DIR/debug/crewctl" -- mcp.test.mjs
  node_suite "clients/pi" clients/pi 180000 CREWD_BIN="$TARGET_DIR/debug/crewd" \
    -- test/real-pi.test.mjs
}

run_ui() {
  check "tsc --checkJs of the dashboard" bash -c 'cd tests/ui && npx --no-install tsc -p tsconfig.json'
  node_suite "tests/ui" tests/ui 300000 CREWD_BIN="$TARGET_DIR/debug/crewd" \
    CREWCTL_BIN="$TARGET_DIR/debug/crewctl" -- dashboard.test.mjs
}

run_build() {
  check "a second cargo build compiles nothing" bash tests/build/twice.sh --workspace --bins
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(build rust node ui)
for p in "${parts[@]}"; do
  case "$p" in
    rust) run_rust ;;
    node) run_node ;;
    ui) run_ui ;;
    build) run_build ;;
    nonroot) run_nonroot ;;
    *) echo "tests/run.sh: unknown part $p (rust, node, ui, build, nonroot)" >&2; exit 64 ;;
  esac
done

echo
for f in "${failures[@]}"; do echo "failed: $f"; done
# What the Rust run left out (the other parts do not run those tests).
[ "$ran_rust" = true ] || { missing=(); slurm_missing=false; host_missing=(); }
if [ ${#missing[@]} -gt 0 ]; then
  echo "skipped: the tests of ${missing[*]} (not installed); install the pinned CLIs with" \
    "\`make agents\` (bash tests/agents/setup.sh and tests/pi/setup.sh, ~1 GB), then \`make test\` runs them"
fi
if [ "$slurm_missing" = true ]; then
  echo "skipped: the Slurm placement tests (no root, or Debian's slurmctld slurmd slurmrestd" \
    "slurm-client munge slurm-wlm-jwt-plugin missing); .ci/run installs them, then \`make test\` runs them"
fi
for need in "${host_missing[@]}"; do
  echo "skipped: the tests that need ${HOST_HINT[$need]}, missing here"
done
for n in "${notes[@]}"; do echo "$n"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
