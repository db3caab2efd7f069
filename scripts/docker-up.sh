#!/usr/bin/env bash
# Make sure a Docker Engine answers; install and start one if it does not.
#
#   scripts/docker-up.sh
#
# Idempotent:
#   1. If `docker version` reaches a daemon, there is nothing to do.
#   2. If dockerd is missing, install Debian's docker.io with apt-get
#      (service auto-start during the install is suppressed, so nothing starts behind
#      our back).
#   3. Start the daemon: with systemctl when systemd is running, else `dockerd` in the
#      background with its log in $SANDBOXCTL_DOCKERD_LOG. Then wait (up to
#      $SANDBOXCTL_DOCKERD_WAIT seconds) for the socket and for `docker version`.
#   4. Record that we started it ($SANDBOXCTL_DOCKERD_PIDFILE + a marker) so that
#      scripts/docker-down.sh stops exactly that daemon and nothing else.
#   5. gVisor: make sure the Engine lists the runtimes "runsc" and "runsc-net"
#      (sandbox.docker.runtime). If not, install Debian's runsc (and jq), add
#        {"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]},
#                     "runsc-net":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host"]}}}
#      to the daemon's config file (merged into what it holds; an existing entry of
#      either name is left as it is), and reload the daemon's runtimes with SIGHUP (no
#      restart: running containers are not touched). Skipped with SANDBOXCTL_RUNSC=0.
#      runsc has no network interface at all (the sandbox default, network none);
#      runsc-net has the container's network, which an egress allowlist sandbox
#      needs (docs/egress.md, "gVisor"). Its --network=host is gVisor's name for
#      "the host kernel's network stack of the network namespace the sandbox runs
#      in": the container's own namespace that Docker made, not the host's. gVisor's
#      own stack (--network=sandbox) is not used: Debian's runsc (20221219) takes
#      every namespace for the host's on current kernels ("cannot run with network
#      enabled in root network namespace"), and Docker's resolver (127.0.0.11)
#      would be gVisor's own loopback there.
#
# Environment:
#   DOCKER                        docker CLI (default: docker)
#   DOCKER_HOST                   if set to a non-unix address, only checked, never started
#   SANDBOXCTL_DOCKERD_LOG        default /tmp/sandboxctl-dockerd.log
#   SANDBOXCTL_DOCKERD_PIDFILE    default /tmp/sandboxctl-dockerd.pid (marker: <pidfile>.owner)
#   SANDBOXCTL_DOCKERD_WAIT       seconds to wait for the daemon (default 60)
#   SANDBOXCTL_DOCKERD_ARGS       extra dockerd arguments, e.g. "--iptables=false"
#   SANDBOXCTL_RUNSC              0 skips step 5 (gVisor)
#   SANDBOXCTL_DOCKERD_CONFIG     the daemon's config file when it cannot be told from its
#                                 command line (default /etc/docker/daemon.json)
set -euo pipefail

PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
DOCKER=${DOCKER:-docker}
LOG=${SANDBOXCTL_DOCKERD_LOG:-/tmp/sandboxctl-dockerd.log}
PIDFILE=${SANDBOXCTL_DOCKERD_PIDFILE:-/tmp/sandboxctl-dockerd.pid}
MARKER=$PIDFILE.owner
WAIT=${SANDBOXCTL_DOCKERD_WAIT:-60}
APTLOG=/tmp/sandboxctl-apt.log

say() { printf '[docker-up] %s\n' "$*"; }
err() { printf '[docker-up] ERROR: %s\n' "$*" >&2; }

# The socket the CLI will use: DOCKER_HOST=unix:///path, else the default.
SOCK=/var/run/docker.sock
case "${DOCKER_HOST:-}" in
  "") ;;
  unix://*) SOCK=${DOCKER_HOST#unix://} ;;
  *) REMOTE=1 ;;
esac

server_version() {
  command -v "$DOCKER" >/dev/null 2>&1 || return 1
  timeout 10 "$DOCKER" version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' </dev/null 2>/dev/null
}

hand_start_help() {
  cat >&2 <<EOF
[docker-up] To start Docker by hand (as root), run:
[docker-up]     dockerd >/tmp/dockerd.log 2>&1 &
[docker-up]   then check 'docker version' and /tmp/dockerd.log. Common causes of failure:
[docker-up]   not root; iptables missing or unusable (try SANDBOXCTL_DOCKERD_ARGS=--iptables=false);
[docker-up]   cgroups not mounted (apt-get install cgroupfs-mount; cgroupfs-mount);
[docker-up]   overlayfs unsupported here (try SANDBOXCTL_DOCKERD_ARGS=--storage-driver=vfs).
EOF
}

pid_of_dockerd() {
  # Any running dockerd (not a zombie). Prints pids.
  local d comm
  for d in /proc/[0-9]*; do
    { read -r comm <"$d/comm"; } 2>/dev/null || continue
    [ "$comm" = dockerd ] || continue
    alive "${d#/proc/}" && echo "${d#/proc/}"
  done
  return 0
}

alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)
  [ "$state" != Z ]
}

starttime() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; }

apt_install() {
  command -v apt-get >/dev/null 2>&1 || { err "no apt-get to install $*; install it by hand."; return 1; }
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l NEEDRESTART_SUSPEND=1
  say "apt-get install $* (apt log: $APTLOG)"
  if ! apt-get install -y -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "$@" </dev/null >>"$APTLOG" 2>&1; then
    say "apt-get install failed; apt-get update and once more"
    apt-get -o DPkg::Lock::Timeout=300 update </dev/null >>"$APTLOG" 2>&1 || true
    if ! apt-get install -y -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
          "$@" </dev/null >>"$APTLOG" 2>&1; then
      tail -n 20 "$APTLOG" >&2; err "apt-get install $* failed (see $APTLOG)"; return 1
    fi
  fi
  hash -r
}

engine_runtimes() { timeout 10 "$DOCKER" info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' </dev/null 2>/dev/null; }

# The gVisor runtimes this script registers: name and runtimeArgs (JSON).
GVISOR_RUNTIMES=(runsc runsc-net)
gvisor_args() {
  case "$1" in
    runsc) echo '["--network=none"]' ;;
    runsc-net) echo '["--network=host"]' ;;
  esac
}

has_runsc() {
  local have n
  have=" $(engine_runtimes) "
  for n in "${GVISOR_RUNTIMES[@]}"; do
    [[ "$have" == *" $n "* ]] || return 1
  done
}

# The pid of the dockerd serving $SOCK: on the default socket its pid file, else the
# only dockerd running; on another socket only the daemon this script started.
serving_dockerd() {
  local p
  case "$SOCK" in
    /var/run/docker.sock|/run/docker.sock) ;;
    *)
      p=$(cat "$PIDFILE" 2>/dev/null || true)
      if [ -n "$p" ] && alive "$p"; then echo "$p"; fi
      return 0 ;;
  esac
  p=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -n "$p" ] && alive "$p" && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dockerd ]; then
    echo "$p"; return 0
  fi
  p=$(pid_of_dockerd)
  [ "$(printf '%s\n' "$p" | grep -c .)" = 1 ] && echo "$p"
}

# The config file of dockerd $1: its --config-file argument, else the default.
dockerd_config() {
  local prev="" a
  if [ -n "${1:-}" ] && [ -r "/proc/$1/cmdline" ]; then
    while IFS= read -r -d '' a; do
      case "$a" in
        --config-file=*) echo "${a#--config-file=}"; return 0 ;;
      esac
      if [ "$prev" = --config-file ]; then echo "$a"; return 0; fi
      prev=$a
    done <"/proc/$1/cmdline"
  fi
  echo "${SANDBOXCTL_DOCKERD_CONFIG:-/etc/docker/daemon.json}"
}

# 5. gVisor: the Engine lists "runsc" and "runsc-net", or we install and register them.
ensure_runsc() {
  [ "${SANDBOXCTL_RUNSC:-1}" = 0 ] && { say "SANDBOXCTL_RUNSC=0: gVisor (runsc) not set up"; return 0; }
  if has_runsc; then
    say "gVisor: the Engine lists the runtimes ${GVISOR_RUNTIMES[*]}; nothing to do"
    return 0
  fi
  if [ "${REMOTE:-0}" = 1 ]; then
    err "gVisor: the Engine at $DOCKER_HOST lacks a runtime of ${GVISOR_RUNTIMES[*]}, and it is not this machine's to set up; register them there (or SANDBOXCTL_RUNSC=0)."
    return 1
  fi
  if [ "$(id -u)" != 0 ]; then
    err "gVisor: the Engine lacks a runtime of ${GVISOR_RUNTIMES[*]}, and installing/registering them needs root: run 'sudo scripts/docker-up.sh' (or SANDBOXCTL_RUNSC=0 to go without)."
    return 1
  fi
  local need=()
  [ -x /usr/bin/runsc ] || need+=(runsc)
  command -v jq >/dev/null 2>&1 || need+=(jq)
  if [ "${#need[@]}" -gt 0 ]; then
    apt_install "${need[@]}" || return 1
  fi
  [ -x /usr/bin/runsc ] || { err "gVisor: /usr/bin/runsc missing after installing runsc"; return 1; }
  local pid conf dir tmp
  pid=$(serving_dockerd || true)
  conf=$(dockerd_config "$pid")
  dir=$(dirname "$conf")
  mkdir -p "$dir"
  if [ -s "$conf" ] && ! jq -e 'type == "object"' "$conf" >/dev/null 2>&1; then
    err "gVisor: $conf is not a JSON object; fix it, then run this again (nothing was changed)."
    return 1
  fi
  local name
  for name in "${GVISOR_RUNTIMES[@]}"; do
    if [ -s "$conf" ] && jq -e --arg n "$name" '.runtimes[$n] != null' "$conf" >/dev/null 2>&1; then
      say "gVisor: $conf already has a runtime $name ($(jq -c --arg n "$name" '.runtimes[$n]' "$conf")); left as it is"
      continue
    fi
    tmp=$(mktemp "$dir/.daemon.json.XXXXXX")
    if ! { if [ -s "$conf" ]; then cat "$conf"; else echo '{}'; fi; } |
        jq --arg n "$name" --argjson a "$(gvisor_args "$name")" '.runtimes[$n] = {"path": "/usr/bin/runsc", "runtimeArgs": $a}' >"$tmp"; then
      rm -f "$tmp"; err "gVisor: could not merge the $name runtime into $conf"; return 1
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "$conf"
    say "gVisor: registered $name in $conf"
  done
  # Reload the runtimes: SIGHUP (systemd: reload, which sends it). No restart.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker 2>/dev/null; then
    say "gVisor: systemctl reload docker"
    systemctl reload docker || { err "gVisor: systemctl reload docker failed"; return 1; }
  elif [ -n "$pid" ]; then
    say "gVisor: SIGHUP to dockerd (pid $pid) to reload its runtimes"
    kill -HUP "$pid"
  else
    err "gVisor: cannot tell which dockerd serves unix://$SOCK; send it SIGHUP (or restart it) to load the gVisor runtimes."
    return 1
  fi
  local t0=$SECONDS
  until has_runsc; do
    if [ $((SECONDS - t0)) -ge 15 ]; then
      err "gVisor: the Engine still does not list ${GVISOR_RUNTIMES[*]} 15s after the reload; see the daemon's log (a bad $conf is reported there)."
      return 1
    fi
    sleep 0.3
  done
  say "gVisor: the Engine lists ${GVISOR_RUNTIMES[*]} ($(/usr/bin/runsc --version 2>/dev/null | head -n 1))"
}

# finish: the Engine answers; set up gVisor, then exit with its outcome.
finish() {
  if ensure_runsc; then exit 0; fi
  exit 1
}

# 1. Already up?
if v=$(server_version); then
  say "Docker Engine $v answers on ${DOCKER_HOST:-unix://$SOCK}"
  finish
fi

if [ "${REMOTE:-0}" = 1 ]; then
  err "DOCKER_HOST=$DOCKER_HOST does not answer ('$DOCKER version' failed), and it is not a local socket this script could start a daemon for."
  exit 1
fi

if [ "$(id -u)" != 0 ]; then
  err "no Docker daemon answers on unix://$SOCK, and installing/starting one needs root."
  err "Run 'sudo scripts/docker-up.sh' (or 'sudo make docker-up'), or start Docker yourself."
  exit 1
fi

# 2. Install docker.io if dockerd is missing. (If only the CLI is missing, say so rather
# than install docker.io over another Docker packaging such as docker-ce.)
if command -v dockerd >/dev/null 2>&1 && ! command -v "$DOCKER" >/dev/null 2>&1; then
  err "dockerd is installed but there is no docker CLI ('$DOCKER'); install one (apt-get install docker.io, or docker-ce-cli) or set DOCKER=/path/to/docker."
  exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { err "dockerd is not installed and there is no apt-get; install Docker Engine first."; exit 1; }
  say "dockerd is not installed: installing Debian's docker.io (apt log: $APTLOG)"
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l NEEDRESTART_SUSPEND=1
  # Keep the package scripts from starting services (dockerd, containerd) on their
  # own; we start exactly one daemon below and record it.
  policy=/usr/sbin/policy-rc.d
  added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# temporary, written by sandboxctl scripts/docker-up.sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    added_policy=1
    trap '[ "$added_policy" = 1 ] && rm -f "$policy"' EXIT
  fi
  t0=$SECONDS
  say "apt-get update"
  if ! apt-get -o DPkg::Lock::Timeout=300 update </dev/null >"$APTLOG" 2>&1; then
    tail -n 20 "$APTLOG" >&2; err "apt-get update failed (see $APTLOG)"; exit 1
  fi
  say "apt-get install docker.io"
  if ! apt-get install -y -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        docker.io </dev/null >>"$APTLOG" 2>&1; then
    tail -n 20 "$APTLOG" >&2; err "apt-get install docker.io failed (see $APTLOG)"; exit 1
  fi
  if [ "$added_policy" = 1 ]; then rm -f "$policy"; added_policy=0; fi
  hash -r
  say "installed docker.io in $((SECONDS - t0))s: $(dockerd --version 2>/dev/null || echo '?')"
  command -v "$DOCKER" >/dev/null 2>&1 || DOCKER=/usr/bin/docker
  if v=$(server_version); then
    say "Docker Engine $v answers"
    finish
  fi
fi

# Wait for the socket and `docker version`; $1 = pid to watch ("" = none).
wait_ready() {
  local pid=$1 start=$SECONDS next=5
  while :; do
    if [ -S "$SOCK" ] && v=$(server_version); then
      return 0
    fi
    if [ -n "$pid" ] && ! alive "$pid"; then
      err "dockerd (pid $pid) exited during start-up."
      return 1
    fi
    if [ $((SECONDS - start)) -ge "$WAIT" ]; then
      err "no answer from the Docker daemon on unix://$SOCK after ${WAIT}s."
      return 1
    fi
    if [ $((SECONDS - start)) -ge "$next" ]; then
      say "still waiting for the daemon ($((SECONDS - start))s; socket $([ -S "$SOCK" ] && echo present || echo 'not there yet'))"
      next=$((next + 5))
    fi
    sleep 0.5
  done
}

show_log_tail() {
  [ -s "$1" ] || return 0
  if grep -qE 'level=(error|fatal)|^failed to start' "$1"; then
    printf '[docker-up] errors in %s:\n' "$1" >&2
    grep -E 'level=(error|fatal)|^failed to start' "$1" | tail -n 8 | sed 's/^/    /' >&2
  fi
  printf '[docker-up] last lines of %s:\n' "$1" >&2
  tail -n 12 "$1" | sed 's/^/    /' >&2
}

# 3a. A dockerd is running but does not answer (yet): wait for it, never start a second
# one on the default socket. (A custom DOCKER_HOST socket may get its own daemon.)
running=""
case "$SOCK" in
  /var/run/docker.sock|/run/docker.sock) running=$(pid_of_dockerd | head -n 1 || true) ;;
esac
if [ -n "$running" ]; then
  say "a dockerd (pid $running) is already running but does not answer yet; waiting up to ${WAIT}s"
  if wait_ready "$running"; then
    say "Docker Engine $v answers (daemon pid $running, not started by this script)"
    finish
  fi
  err "the running dockerd (pid $running) does not answer on unix://$SOCK; stop it or fix it, then retry."
  hand_start_help
  exit 1
fi

# 3b. systemd machines: let systemd own the daemon.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  say "systemd is running: systemctl start docker"
  if ! systemctl start docker; then
    err "systemctl start docker failed"
    systemctl status docker --no-pager 2>&1 | tail -n 15 >&2 || true
    exit 1
  fi
  printf 'mode=systemd\nstarted=%s\n' "$(date -u +%FT%TZ)" >"$MARKER"
  rm -f "$PIDFILE"
  if wait_ready ""; then
    say "Docker Engine $v is up (started with systemctl; scripts/docker-down.sh stops it)"
    finish
  fi
  journalctl -u docker --no-pager -n 25 >&2 2>/dev/null || true
  hand_start_help
  exit 1
fi

# 3c. No init system to ask (containers, CI VMs without systemd): start dockerd ourselves.
# A stale /var/run/docker.pid that names some other process makes dockerd refuse to start.
if [ -f /var/run/docker.pid ]; then
  old=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$old" ] || ! alive "$old" || [ "$(cat "/proc/$old/comm" 2>/dev/null)" != dockerd ]; then
    say "removing stale /var/run/docker.pid (${old:-empty})"
    rm -f /var/run/docker.pid
  fi
fi

# start_dockerd ARGS... : start, record, wait. True when the daemon answers; on failure
# the half-started daemon is stopped again and the record removed.
start_dockerd() {
  say "starting dockerd${*:+ $*} (log: $LOG)"
  : >"$LOG"
  # setsid: own session, so a Ctrl-C at the terminal that ran `make` does not hit the
  # daemon; stdin from /dev/null so it never holds a terminal or a CI pipe open.
  setsid dockerd "$@" </dev/null >>"$LOG" 2>&1 &
  pid=$!
  echo "$pid" >"$PIDFILE"
  printf 'mode=pid\npid=%s\nstarttime=%s\nstarted=%s\nlog=%s\n' \
    "$pid" "$(starttime "$pid" 2>/dev/null || true)" "$(date -u +%FT%TZ)" "$LOG" >"$MARKER"
  local t0=$SECONDS
  if wait_ready "$pid"; then
    say "Docker Engine $v is up after $((SECONDS - t0))s (dockerd pid $pid, log $LOG; scripts/docker-down.sh stops it)"
    return 0
  fi
  show_log_tail "$LOG"
  if alive "$pid"; then
    say "stopping the dockerd that did not come up (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do alive "$pid" || break; sleep 0.5; done
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$PIDFILE" "$MARKER"
  return 1
}

# shellcheck disable=SC2206
args=(${SANDBOXCTL_DOCKERD_ARGS:-})
if start_dockerd "${args[@]}"; then
  finish
fi
# sandboxes run with network "none", so a host whose iptables cannot be used (nftables
# in a container, missing modules) still works with dockerd's iptables management off.
if grep -qiE 'iptables|nf_tables|NAT chain' "$LOG" && [[ " ${args[*]} " != *" --iptables"* ]]; then
  say "dockerd failed on iptables; retrying once with --iptables=false"
  if start_dockerd "${args[@]}" --iptables=false; then
    finish
  fi
fi
hand_start_help
exit 1
