#!/usr/bin/env bash
# The sandboxctl packages one `sandboxctl exec -- true` crosses, counted from
# the call stacks perf samples (Go keeps frame pointers): in the CLI, the
# stacks through the waiting exec (cli.runWaiting, on the main goroutine)
# and through the socket write (apiclient.Unix.RoundTrip, on the goroutine
# it starts); in the daemon, the stacks that reach the supervisor's Open
# (supervisor.(*Client).Open). The supervisor in the container adds
# sandbox/supervisor (its server). docs/architecture.md, "The path of one
# exec", quotes the result.
#
#   scripts/exec-path.sh            # 60 execs
#   N=200 scripts/exec-path.sh
#
# Needs perf, a running Docker Engine and the test image (make images).
# Builds its own binaries (with symbols), starts its own daemon on a
# temporary state directory and removes it and its sandbox at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${N:-60}
IMAGE=${SANDBOXCTL_TEST_IMAGE:-sandboxctl/testbb:1}
command -v perf >/dev/null || { echo "exec-path: perf is not installed" >&2; exit 1; }

DIR=$(mktemp -d)
PREFIX="sbxpath-$$-"
BIN=$DIR/bin
mkdir -p "$BIN" "$DIR/ws"
for c in sandboxctl sandboxctld sandboxctl-supervisor; do
  CGO_ENABLED=0 go build -trimpath -o "$BIN/$c" "./cmd/$c"
done
cat >"$DIR/sandboxctl.yaml" <<EOF
exec:
  host: sandbox
  security: full
  ask: "off"
sandbox:
  workspaceRoot: $DIR/ws
  docker:
    image: $IMAGE
    containerPrefix: $PREFIX
EOF
S=(--state "$DIR/state" --config "$DIR/sandboxctl.yaml")
run() { "$BIN/sandboxctl" "${S[@]}" exec --agent path -- true; }

cleanup() {
  set +e
  "$BIN/sandboxctl" "${S[@]}" serve stop >/dev/null 2>&1
  docker ps -aq --filter "name=$PREFIX" | xargs -r docker rm -f >/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

SANDBOXCTL_SUPERVISOR= "$BIN/sandboxctl" "${S[@]}" serve >"$DIR/serve.log" 2>&1 &
for _ in $(seq 100); do run >/dev/null 2>&1 && break; sleep 0.2; done
run || { echo "exec-path: no exec; daemon log:" >&2; tail -5 "$DIR/serve.log" >&2; exit 1; }
DPID=$(cat "$DIR/state/daemon.pid")

perf record -q -F 20000 -g -p "$DPID" -o "$DIR/daemon.data" -- sleep 600 >/dev/null 2>&1 &
PERF=$!
sleep 0.5
perf record -q -F 20000 -g -o "$DIR/cli.data" -- bash -c "for i in \$(seq $N); do $(printf '%q ' "$BIN/sandboxctl" "${S[@]}") exec --agent path -- true; done" >/dev/null 2>&1
kill -INT "$PERF"
wait "$PERF" 2>/dev/null || true

# The sandboxctl packages on the stacks in perf data $1 that hold the
# frame $2 (a regular expression on its symbol).
# A frame of package main counts as $3.
packages() {
  perf script -i "$1" 2>/dev/null | awk -v want="$2" -v main="$3" '
    /^[^ \t]/ { flush(); n = 0; next }
    /^$/ { flush(); n = 0; next }
    { f[++n] = $2 }
    function flush(   i, p, hit) {
      hit = 0
      for (i = 1; i <= n; i++) if (f[i] ~ want) hit = 1
      if (!hit) return
      for (i = 1; i <= n; i++) {
        if (f[i] ~ /^main\./) seen[main] = 1
        if (f[i] !~ /^github.com\/sandboxctl\/sandboxctl\//) continue
        p = f[i]; sub(/^github.com\/sandboxctl\/sandboxctl\//, "", p)
        sub(/\.[^\/]*$/, "", p)
        seen[p] = 1
      }
    }
    END { flush(); for (p in seen) print p }' | sort
}

echo "CLI (stacks through cli.runWaiting or apiclient.Unix.RoundTrip):"
{ packages "$DIR/cli.data" 'internal/cli[.]runWaiting[+]' cmd/sandboxctl; packages "$DIR/cli.data" 'apiclient[.].*Unix[).]*[.]RoundTrip[+]' cmd/sandboxctl; } | sort -u | tee "$DIR/cli.pkgs" | sed 's/^/  /'
echo "daemon (stacks through supervisor.(*Client).Open):"
packages "$DIR/daemon.data" 'sandbox/supervisor[.][(][*]Client[)][.]Open[+]' cmd/sandboxctld | tee "$DIR/daemon.pkgs" | sed 's/^/  /'
echo "supervisor (in the container): sandbox/supervisor"
TOTAL=$(cat "$DIR/cli.pkgs" "$DIR/daemon.pkgs" | sort -u | wc -l)
echo "packages on the path of an exec: $((TOTAL + 1)) (sandbox/supervisor counted twice: the client in the daemon, the server in the container)"
