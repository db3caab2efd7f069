#!/usr/bin/env bash
# Static checks, all from the Go toolchain and the tools pinned in go.mod (`tool`
# directives), so nothing is installed by hand:
#   go mod tidy -diff, gofmt, go vet, staticcheck, govulncheck,
# for this module and for the nested testcontainers module (its own go.mod, which
# ./... of this one does not reach; the tools are the ones pinned here).
# Every check runs; the exit status is non-zero if any failed.
#
# govulncheck needs its vulnerability database. GOVULNDB names it (default
# https://vuln.go.dev; a mirror or a file:// copy works too). When the database cannot
# be reached, govulncheck is reported as NOT RUN (loudly) rather than failing: machines
# without that network access still lint everything else.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
GOVULNDB=${GOVULNDB:-https://vuln.go.dev}

say() { printf '[lint] %s\n' "$*"; }
failed=()

run() { # name command...
  local name=$1 t0=$SECONDS out
  shift
  if out=$("$@" 2>&1); then
    say "$name: ok ($((SECONDS - t0))s)"
  else
    say "$name: FAILED ($((SECONDS - t0))s)"
    printf '%s\n' "$out" | sed 's/^/    /'
    failed+=("$name")
  fi
}

gofmt_check() {
  local files
  files=$(git ls-files -co --exclude-standard '*.go' 2>/dev/null | grep -v '/testdata/' | xargs -r gofmt -l)
  [ -z "$files" ] && return 0
  echo "these files need 'gofmt -w':"; echo "$files"
  return 1
}

vulndb_reachable() {
  case "$GOVULNDB" in
    file://*) [ -d "${GOVULNDB#file://}" ] ;;
    http://*|https://*)
      local host=${GOVULNDB#*://}; host=${host%%/*}; host=${host%%:*}
      getent hosts "$host" >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

run "go mod tidy -diff" "$GO" mod tidy -diff
run gofmt gofmt_check
run "go vet" "$GO" vet ./...
run staticcheck "$GO" tool staticcheck ./...
# The nested module, with the tools built from this module's pins.
submodule() { # command... run in testcontainers/
  (cd testcontainers && "$@")
}
tooldir=$(mktemp -d)
trap 'rm -rf "$tooldir"' EXIT
if "$GO" build -o "$tooldir/" honnef.co/go/tools/cmd/staticcheck golang.org/x/vuln/cmd/govulncheck 2>"$tooldir/build.log"; then
  run "testcontainers: go mod tidy -diff" submodule "$GO" mod tidy -diff
  run "testcontainers: go vet" submodule "$GO" vet ./...
  run "testcontainers: staticcheck" submodule "$tooldir/staticcheck" ./...
else
  say "testcontainers: FAILED to build the pinned tools"; sed 's/^/    /' "$tooldir/build.log"; failed+=("testcontainers tools")
fi

if vulndb_reachable; then
  run govulncheck "$GO" tool govulncheck -db "$GOVULNDB" ./...
  [ -x "$tooldir/govulncheck" ] && run "testcontainers: govulncheck" submodule "$tooldir/govulncheck" -db "$GOVULNDB" ./...
else
  say "govulncheck: NOT RUN: the vulnerability database $GOVULNDB cannot be reached from this machine (set GOVULNDB to a reachable mirror or a file:// copy)"
fi

if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "all checks passed"
