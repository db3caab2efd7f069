#!/usr/bin/env bash
# Stop the Docker daemon that scripts/docker-up.sh started — and only that one.
#
#   scripts/docker-down.sh
#
# Reads $SANDBOXCTL_DOCKERD_PIDFILE (default /tmp/sandboxctl-dockerd.pid) and its marker
# (<pidfile>.owner). The pid must still be a dockerd with the start time recorded by
# docker-up (so a reused pid is never killed). Sends SIGTERM, waits for dockerd (it
# stops its containers and the containerd it spawned) and for that containerd to exit;
# SIGKILL after a grace period. A daemon docker-up did not start is left alone.
set -euo pipefail

PIDFILE=${SANDBOXCTL_DOCKERD_PIDFILE:-/tmp/sandboxctl-dockerd.pid}
MARKER=$PIDFILE.owner
GRACE=${SANDBOXCTL_DOCKERD_STOP_GRACE:-45}

say() { printf '[docker-down] %s\n' "$*"; }

alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
comm() { cat "/proc/$1/comm" 2>/dev/null || true; }

# Direct children of $1 whose command is containerd (dockerd's managed containerd).
containerd_children() {
  local d ppid c
  for d in /proc/[0-9]*; do
    { read -r c <"$d/comm"; } 2>/dev/null || continue
    [ "$c" = containerd ] || continue
    ppid=$(sed 's/.*) //' "$d/stat" 2>/dev/null | cut -d' ' -f2) || continue
    [ "$ppid" = "$1" ] && echo "${d#/proc/}"
  done
  return 0
}

# wait_gone SECONDS PID... : true when all are gone.
wait_gone() {
  local secs=$1 p any i
  shift
  for ((i = 0; i < secs * 4; i++)); do
    any=0
    for p in "$@"; do alive "$p" && any=1; done
    [ "$any" = 0 ] && return 0
    sleep 0.25
  done
  return 1
}

if [ ! -f "$MARKER" ] && [ ! -f "$PIDFILE" ]; then
  say "no Docker daemon was started by scripts/docker-up.sh; nothing to stop"
  exit 0
fi

mode=$(sed -n 's/^mode=//p' "$MARKER" 2>/dev/null || true)
if [ "$mode" = systemd ]; then
  say "stopping the docker service docker-up started (systemctl stop docker)"
  systemctl stop docker.socket docker 2>/dev/null || systemctl stop docker || true
  rm -f "$MARKER" "$PIDFILE"
  exit 0
fi

pid=$(cat "$PIDFILE" 2>/dev/null || true)
want_start=$(sed -n 's/^starttime=//p' "$MARKER" 2>/dev/null || true)
if [ -z "$pid" ] || ! alive "$pid"; then
  say "dockerd from $PIDFILE (pid ${pid:-?}) is not running; removing the stale record"
  rm -f "$PIDFILE" "$MARKER"
  exit 0
fi
if [ "$(comm "$pid")" != dockerd ] || { [ -n "$want_start" ] && [ "$(starttime "$pid")" != "$want_start" ]; }; then
  say "pid $pid is no longer the dockerd docker-up started (pid reused); leaving it alone"
  rm -f "$PIDFILE" "$MARKER"
  exit 0
fi

kids=$(containerd_children "$pid")
say "stopping dockerd (pid $pid${kids:+, its containerd: ${kids//$'\n'/ }})"
kill -TERM "$pid" 2>/dev/null || true
t0=$SECONDS
# shellcheck disable=SC2086
if ! wait_gone "$GRACE" "$pid"; then
  say "dockerd did not exit within ${GRACE}s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone 5 "$pid" || true
fi
if [ -n "$kids" ]; then
  # dockerd stops the containerd it spawned on its way out; make sure it is gone.
  # shellcheck disable=SC2086
  if ! wait_gone 15 $kids; then
    say "containerd (${kids//$'\n'/ }) still running; sending SIGTERM"
    # shellcheck disable=SC2086
    kill -TERM $kids 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 10 $kids || { kill -KILL $kids 2>/dev/null || true; }
  fi
fi
rm -f "$PIDFILE" "$MARKER"
say "dockerd stopped after $((SECONDS - t0))s"
