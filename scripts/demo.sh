#!/usr/bin/env bash
# The main job of `make run`: a command in a fresh sandbox, the sandbox's hardening,
# then a backgrounded command polled until it exits. Cleans up after itself.
#
#   STATE=.state/demo scripts/demo.sh
#
# Needs a running Docker Engine, the images (make images) and the binaries in
# ./bin/ (make build: sandboxctl, the sandboxctld it hands serve and sandbox
# to, the supervisor); `make run` takes care of all three.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${SANDBOXCTL_BIN:-./bin/sandboxctl}
STATE=${STATE:-$PWD/.state/demo}
AGENT=demo

if [ -t 1 ]; then B=$'\033[1m' N=$'\033[0m'; else B="" N=""; fi
say() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
die() { printf 'demo: ERROR: %s\n' "$*" >&2; exit 1; }

[ -x "$BIN" ] || die "$BIN is missing; build it with 'make build'"
command -v jq >/dev/null 2>&1 || JQ_MISSING=1
mkdir -p "$STATE"

sbx() { "$BIN" --state "$STATE" "$@"; }

cleanup() {
  local rc=$?
  set +e
  say "cleanup: remove the demo sandbox, stop the demo daemon"
  sbx sandbox rm --agent "$AGENT"
  if ! sbx serve stop 2>/dev/null; then
    if [ -f "$STATE/daemon.pid" ]; then
      pid=$(cat "$STATE/daemon.pid")
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
      fi
      rm -f "$STATE/daemon.pid"
    fi
  fi
  if [ "$rc" = 0 ]; then
    say "demo finished"
  else
    printf '\ndemo: FAILED (exit %s)\n' "$rc" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Start from a fresh sandbox even if an earlier run was interrupted.
sbx sandbox rm --agent "$AGENT" >/dev/null 2>&1 || true

say "1. a command in a fresh sandbox (agent '$AGENT')"
printf '%s\n' "\$ sandboxctl exec --agent $AGENT -- 'uname -a; id; cat /proc/1/cmdline | tr \"\\0\" \" \"; echo; ls -la /workspace'"
sbx exec --agent "$AGENT" -- 'uname -a; id; cat /proc/1/cmdline | tr "\0" " "; echo; ls -la /workspace'

say "2. the sandbox's container and its hardening"
echo "\$ sandboxctl sandbox explain --agent $AGENT"
sbx sandbox explain --agent "$AGENT"

say "3. a command started in the background"
echo "\$ sandboxctl exec --agent $AGENT --background --json -- 'for i in 1 2 3; do echo tick \$i; sleep 1; done'"
out=$(sbx exec --agent "$AGENT" --background --json -- 'for i in 1 2 3; do echo tick $i; sleep 1; done')
printf '%s\n' "$out"
id=""
if [ -z "${JQ_MISSING:-}" ]; then
  id=$(printf '%s' "$out" | jq -r '.details.sessionId // .details.session_id // .details.id // empty' 2>/dev/null || true)
  if [ -z "$id" ]; then
    id=$(printf '%s' "$out" | jq -r '[.content[]?.text // empty] | join("\n")' 2>/dev/null \
      | grep -oE 'session [A-Za-z0-9_.-]+' | head -n 1 | cut -d' ' -f2 || true)
  fi
fi
if [ -z "$id" ]; then
  id=$(printf '%s' "$out" | grep -oE 'session [A-Za-z0-9_.-]+' | head -n 1 | cut -d' ' -f2 || true)
fi
[ -n "$id" ] || die "could not find the session id in the exec output above"
echo "session id: $id"

say "4. poll the background session until it exits"
deadline=$((SECONDS + 60))
while :; do
  echo "\$ sandboxctl process poll $id --agent $AGENT --timeout-ms 5000"
  # Sessions are scoped by agent: poll in the scope that started the session.
  poll=$(sbx process poll "$id" --agent "$AGENT" --timeout-ms 5000) \
    || { printf '%s\n' "$poll"; die "process poll $id failed"; }
  printf '%s\n' "$poll"
  if printf '%s' "$poll" | grep -qiE 'exited|completed|failed'; then
    break
  fi
  [ "$SECONDS" -lt "$deadline" ] || die "session $id did not exit within 60 s"
done
