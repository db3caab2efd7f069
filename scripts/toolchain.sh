#!/usr/bin/env bash
# Check the build toolchain: Go (the version go.mod asks for) and, for `go test -race`
# (cgo), a C compiler — installed with apt-get (gcc, libc6-dev) when missing and root.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

say() { printf '[toolchain] %s\n' "$*"; }
err() { printf '[toolchain] ERROR: %s\n' "$*" >&2; }

if ! command -v "$GO" >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    err "go is not in PATH, but /usr/local/go/bin/go exists: export PATH=\$PATH:/usr/local/go/bin"
  else
    err "Go is not installed. sandboxctl needs Go $(sed -n 's/^go //p' go.mod) or newer: https://go.dev/dl/"
  fi
  exit 1
fi

want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod | head -n 1)
have=$("$GO" env GOVERSION 2>/dev/null | sed 's/^go//; s/[^0-9.].*//')
if [ -n "$want" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n 1)" != "$want" ]; then
  # A newer toolchain may still be fetched by the go command (GOTOOLCHAIN=auto).
  say "note: go.mod asks for Go $want, the go in PATH is $have (the go command may download $want)"
fi

cc=$("$GO" env CC 2>/dev/null || echo gcc)
if ! command -v "${cc%% *}" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "no C compiler ('$cc'), needed by 'go test -race': installing gcc libc6-dev"
    export DEBIAN_FRONTEND=noninteractive
    log=/tmp/sandboxctl-apt.log
    { apt-get -o DPkg::Lock::Timeout=300 update && \
      apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends gcc libc6-dev; } </dev/null >>"$log" 2>&1 \
      || { tail -n 20 "$log" >&2; err "installing gcc failed (see $log)"; exit 1; }
  else
    err "no C compiler ('$cc'); 'go test -race' needs one (apt-get install gcc libc6-dev)"
    exit 1
  fi
fi

# Programs the tests run on this host, installed when missing (root + apt-get), so no
# test depends on what a machine happens to have: tmux drives the terminal tests, ip
# makes the node tests' network namespaces, curl and ps serve the attack tests, and the
# guard's attack tests (go test -run Security ./sessions/ ./integration/) replay attacks
# through man and less in a PTY, a perl script (shasum), git, vim, zip, unzip, wget and ripgrep; headless
# chromium drives the web console's browser tests (internal/console). Node and npm run
# the official MCP TypeScript SDK against the daemon (internal/mcpserver/testdata/node,
# npm ci from its committed lockfile) and the TypeScript client, prometheus scrapes the
# daemon's /metrics in the metrics test (a private instance on a temporary config and
# port), python3 runs the standard-library client (clients/python), the ssh:// Engine
# test runs its own sshd (openssh-server; the service itself is kept from starting), and
# the snapshot tests and benchmark make btrfs and XFS loop filesystems (btrfs-progs,
# xfsprogs: go test -run 'Snapshot' ./sandbox/).
need=()
for pair in /usr/sbin/sshd:openssh-server ssh:openssh-client tmux:tmux ip:iproute2 curl:curl ps:procps man:man-db less:less perl:perl shasum:perl git:git vim:vim zip:zip unzip:unzip wget:wget rg:ripgrep chromium:chromium node:nodejs npm:npm prometheus:prometheus python3:python3 /usr/sbin/mkfs.btrfs:btrfs-progs /usr/sbin/mkfs.xfs:xfsprogs; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing what the tests run: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    log=/tmp/sandboxctl-apt.log
    # No package may start a service here (openssh-server would start sshd on port 22):
    # policy-rc.d answers "not allowed" for the install, and goes again after it.
    policy="" rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    fi
    { apt-get -o DPkg::Lock::Timeout=300 update && \
      apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends "${need[@]}"; } </dev/null >>"$log" 2>&1 || rc=$?
    [ -z "$policy" ] || rm -f "$policy"
    [ "$rc" = 0 ] || { tail -n 20 "$log" >&2; err "installing ${need[*]} failed (see $log)"; exit 1; }
  else
    err "the tests need: ${need[*]} (apt-get install ${need[*]})"
    exit 1
  fi
fi
if ! man -w ls >/dev/null 2>&1; then
  say "note: no manual page for ls (documentation excluded from this image?); TestSecurityEnvLessRunsCommandInPTY needs one"
fi
