#!/usr/bin/env bash
# scripts/k8s/test.sh - the Kubernetes engine's tests (package sandbox/kube: the sessions/hosttest
# conformance suite and the Pod faults) against a real single-node cluster: builds the cluster's
# binaries when needed (build.sh), starts it (up.sh, the test images imported into its containerd),
# runs the tests, and takes it down again whatever happens (down.sh: the host as it was).
#
#   K8S_TEST_FLAGS="-race -timeout 20m"   go test flags
#   K8S_TEST_RUN=""                       go test -run pattern
#   K8S_IMAGES="sandboxctl/testbb:1 sandboxctl/sandboxctld:dev"   Docker images imported into the node
set -uo pipefail
cd "$(dirname "$0")/../.."
say() { printf '[k8s-test] %s\n' "$*" >&2; }
GO=${GO:-go}
t0=$SECONDS
K8S_BIN=$(scripts/k8s/build.sh | tail -n 1) || { say "ERROR: scripts/k8s/build.sh failed"; exit 1; }
export K8S_BIN
export K8S_DIR=${K8S_DIR:-${TMPDIR:-/tmp}/sandboxctl-k8s-$$}
trap 'scripts/k8s/down.sh; rm -rf "$K8S_DIR"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
kc=$(K8S_IMPORT_DOCKER=${K8S_IMAGES:-sandboxctl/testbb:1 sandboxctl/sandboxctld:dev} scripts/k8s/up.sh | tail -n 1) \
  || { say "ERROR: scripts/k8s/up.sh failed"; exit 1; }
say "cluster up ($((SECONDS - t0))s since the start); kubeconfig $kc"
# shellcheck disable=SC2086  # word splitting of the flags is wanted
SANDBOXCTL_TEST_KUBECONFIG=$kc SANDBOXCTL_TEST_K8S_DIR=$K8S_DIR SANDBOXCTL_TEST_K8S_BIN=$K8S_BIN \
  "$GO" test ${K8S_TEST_FLAGS:--race -timeout 20m} ${K8S_TEST_RUN:+-run "$K8S_TEST_RUN"} ./sandbox/kube/
rc=$?
say "go test exit status $rc; $((SECONDS - t0))s in all"
exit "$rc"
