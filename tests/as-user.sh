#!/usr/bin/env bash
# nextest's target runner for `make test-nonroot` (tests/run.sh's `nonroot` part), which sets
# it through CARGO_TARGET_<triple>_RUNNER: nextest runs every test binary as
# `tests/as-user.sh BINARY ARGS...` (to list its tests and to run each), and this runs the binary
# as the ordinary user tests/run.sh made, so the tests (and the crewd, crew-box and bubblewrap
# they start) run as that user, from binaries root built.
#
# The user gets no supplementary groups and an environment of its own: its own clean HOME, a
# system PATH (root's ~/.cargo/bin and the like are not the user's), no root session
# (XDG_RUNTIME_DIR, agent and bus sockets), CREW_TEST_TMPDIR (where the box tests keep their
# daemons' directories outside /tmp; cargo's target/tmp belongs to root) and
# CREW_TEST_SANDBOX=required (a test daemon with no `sandbox` of its own boxes every attempt or
# fails it: a real agent that passes here ran in the box, never unboxed by `auto`).
set -euo pipefail
: "${CREW_NONROOT_USER:?}" "${CREW_NONROOT_UID:?}" "${CREW_NONROOT_GID:?}"
: "${CREW_NONROOT_HOME:?}" "${CREW_NONROOT_TMPDIR:?}"
exec setpriv --reuid="$CREW_NONROOT_UID" --regid="$CREW_NONROOT_GID" --clear-groups \
  env -u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u XDG_STATE_HOME -u XDG_DATA_HOME \
  -u XDG_CACHE_HOME -u DBUS_SESSION_BUS_ADDRESS -u SSH_AUTH_SOCK -u CARGO_HOME -u RUSTUP_HOME \
  -u MAIL \
  HOME="$CREW_NONROOT_HOME" USER="$CREW_NONROOT_USER" LOGNAME="$CREW_NONROOT_USER" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  CREW_TEST_TMPDIR="$CREW_NONROOT_TMPDIR" CREW_TEST_SANDBOX=required \
  "$@"
