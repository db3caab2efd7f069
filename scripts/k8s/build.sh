#!/usr/bin/env bash
# scripts/k8s/build.sh - the binaries of the single-node test cluster (kube-apiserver, kubelet,
# kube-scheduler, kube-controller-manager, kubectl, etcd, pause), built from the Go module proxy
# (the scratch module in build/) into a cache directory, and the Debian packages the cluster runs
# on (containerd with its CRI plugin, runc, the CNI plugins), installed with apt-get when missing.
#
# Up to date binaries (same build/ inputs) are kept: ~6 min cold on 2 cores, a second when warm.
# Prints the binary directory on the last line of stdout.
#
#   K8S_CACHE=${XDG_CACHE_HOME:-~/.cache}/sandboxctl/k8s   GOCACHE and bin/ live here
#   K8S_BIN=$K8S_CACHE/bin                                  where the binaries go
set -euo pipefail
cd "$(dirname "$0")"
CACHE=${K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandboxctl/k8s}
export K8S_BIN=${K8S_BIN:-$CACHE/bin}
say() { printf '[k8s-build] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} (apt-get install ${need[*]})"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=/tmp/sandboxctl-apt-k8s.log
  { apt-get -o DPkg::Lock::Timeout=300 update && \
    apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends "${need[@]}"; } </dev/null >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "apt-get install ${need[*]} failed (see $log)"; }
fi
# Debian's containerd package starts the system containerd: the cluster runs its own instance
# (up.sh), and the system one is left as the package set it up.

want=$(cat build/go.mod build/go.sum build/build.sh build/pause/main.go | sha256sum | cut -d' ' -f1)
stamp=$K8S_BIN/.inputs
ok=1
for b in kube-apiserver kubelet kube-scheduler kube-controller-manager kubectl etcd pause; do
  [ -x "$K8S_BIN/$b" ] || ok=0
done
if [ "$ok" = 1 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "binaries up to date in $K8S_BIN"
else
  mkdir -p "$CACHE" "$K8S_BIN"
  say "building into $K8S_BIN (GOCACHE $CACHE/gocache; about 6 min cold)"
  t0=$SECONDS
  GOCACHE=$CACHE/gocache build/build.sh >"$CACHE/build.log" 2>&1 || { tail -n 30 "$CACHE/build.log" >&2; die "build failed (see $CACHE/build.log)"; }
  echo "$want" >"$stamp"
  say "built in $((SECONDS - t0))s"
fi
echo "$K8S_BIN"
