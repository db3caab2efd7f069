#!/bin/bash
# up.sh - start a real single-node Kubernetes cluster from locally built binaries:
#   etcd (bin/etcd built by build.sh, else Debian etcd-server 3.4) + kube-apiserver
#   + a private containerd instance (Debian containerd 1.6, CRI plugin, own socket/root/state)
#   + kubelet (+ kube-scheduler + kube-controller-manager unless K8S_MINIMAL=1).
# Idempotent: components already running (pid file alive) are left alone.
# Prints the admin kubeconfig path on the last line of stdout.
#
# Environment (all optional):
#   K8S_DIR=$TMPDIR/sandboxctl-k8s            base dir; state/ and logs/ go there
#   K8S_BIN=$K8S_DIR/bin        kube-apiserver, kubelet, pause, [kube-scheduler, kube-controller-manager,
#                               etcd, kubectl] from build/build.sh; etcd/kubectl fall back to PATH
#   K8S_NODE_NAME=localhost     node name; the apiserver reaches the kubelet via this hostname,
#                               so it must resolve to 127.0.0.1 (keeps all traffic on loopback)
#   K8S_API_PORT=16443 K8S_ETCD_PORT=23791 K8S_ETCD_PEER_PORT=23801
#   K8S_KUBELET_PORT=20250 K8S_KUBELET_HEALTHZ_PORT=20248
#   K8S_RUNTIME=runc            OCI runtime used by containerd (crun 1.8 refuses this machine's hybrid
#                               cgroup v1 + v2 layout: "cgroups in hybrid mode not supported")
#   K8S_MINIMAL=1               no scheduler/controller-manager: pods must set spec.nodeName;
#                               up.sh then creates SA "default" + ConfigMap kube-root-ca.crt in
#                               namespace default itself
#   K8S_IMPORT_DOCKER="img:tag ..."  docker images to `docker save | ctr import` into the node
#   K8S_IMPORT_TARS="a.tar ..."      image tarballs (docker save / OCI) to import
#   K8S_TIMEOUT=180             seconds to wait for each component
set -euo pipefail

T0=$(date +%s.%N)
K=${K8S_DIR:-${TMPDIR:-/tmp}/sandboxctl-k8s}
BIN=${K8S_BIN:-$K/bin}
ST=$K/state
RUN=$ST/run
PKI=$ST/pki
LOGS=$K/logs
NODE=${K8S_NODE_NAME:-localhost}
API_PORT=${K8S_API_PORT:-16443}
ETCD_PORT=${K8S_ETCD_PORT:-23791}
ETCD_PEER_PORT=${K8S_ETCD_PEER_PORT:-23801}
KUBELET_PORT=${K8S_KUBELET_PORT:-20250}
KUBELET_HEALTHZ_PORT=${K8S_KUBELET_HEALTHZ_PORT:-20248}
RUNTIME=${K8S_RUNTIME:-runc}
MINIMAL=${K8S_MINIMAL:-0}
TIMEOUT=${K8S_TIMEOUT:-180}
PAUSE_IMAGE=registry.k8s.io/pause:3.10
CTR="ctr -a $RUN/containerd.sock -n k8s.io"
export KUBECONFIG=$ST/admin.kubeconfig
export PATH=$BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { printf '[up %6.1fs] %s\n' "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for b in kube-apiserver kubelet pause; do [ -x "$BIN/$b" ] || die "$BIN/$b missing: run scripts/k8s/build.sh"; done
if [ "$MINIMAL" != 1 ]; then
  for b in kube-scheduler kube-controller-manager; do [ -x "$BIN/$b" ] || die "$BIN/$b missing (or set K8S_MINIMAL=1)"; done
fi
for b in etcd containerd containerd-shim-runc-v2 ctr "$RUNTIME" openssl curl kubectl findmnt /usr/lib/cni/bridge /usr/lib/cni/host-local; do
  command -v "$b" >/dev/null || die "$b not found (apt-get install containerd runc containernetworking-plugins openssl curl; etcd and kubectl come from build.sh or apt etcd-server / kubectl)"
done
case "$(getent hosts "$NODE" | awk '{print $1}' | head -1)" in
  127.*|::1) ;; *) die "node name $NODE must resolve to loopback (see K8S_NODE_NAME)";;
esac
mkdir -p "$RUN" "$PKI" "$LOGS" "$ST/images"

# put FILE: write stdin to FILE atomically, only if the content changed (containerd watches the CNI dir)
put() { local t; t=$(mktemp "$1.XXXXXX"); cat >"$t"; if cmp -s "$t" "$1"; then rm -f "$t"; else mv -f "$t" "$1"; fi; }
# running PID: process exists, is not a zombie (PID 1 here reaps orphans only every ~2 s) and is
# one of ours (its command line mentions $ST), so a stale pid file is never taken for a live process.
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ] &&
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$ST/"; }
alive() { [ -s "$RUN/$1.pid" ] && running "$(cat "$RUN/$1.pid")"; }
# start NAME CMD... : run in its own session, log to $LOGS/NAME.log, pid in $RUN/NAME.pid
start() {
  local name=$1; shift
  if alive "$name"; then log "$name already running (pid $(cat "$RUN/$name.pid"))"; return 0; fi
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
  log "started $name (pid $!)"
}
# wait_for NAME DESC CMD... : poll CMD until it succeeds
wait_for() {
  local name=$1 desc=$2; shift 2
  local end=$(( $(date +%s) + TIMEOUT ))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$name"; then tail -n 30 "$LOGS/$name.log" >&2 || true; die "$name exited while waiting for $desc"; fi
    if [ "$(date +%s)" -ge $end ]; then tail -n 30 "$LOGS/$name.log" >&2 || true; die "timeout waiting for $desc"; fi
    sleep 0.2
  done
  log "$desc ok"
}

# ---------------------------------------------------------------- PKI
cert() { # cert NAME SUBJECT EKU [SANS]
  local n=$1
  openssl genrsa -out "$n.key" 2048 2>/dev/null
  openssl req -new -key "$n.key" -subj "$2" -out "$n.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$3"
    [ -n "${4:-}" ] && echo "subjectAltName=$4"
  } >"$n.ext"
  openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
  rm -f "$n.csr" "$n.ext"
}
if [ ! -f "$PKI/.done" ]; then
  rm -f "$LOGS"/*.log   # fresh cluster: fresh logs
  ( cd "$PKI"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=k8s-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" -out ca.crt
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    cert apiserver "/CN=kube-apiserver" serverAuth \
      "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
    cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    cert kubelet "/O=system:nodes/CN=system:node:$NODE" clientAuth
    cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
    cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
    touch .done )
  log "PKI generated in $PKI"
fi
kubeconfig() { # kubeconfig FILE CERTNAME
  put "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: local
  context: {cluster: local, user: $2, namespace: default}
current-context: local
EOF
}
kubeconfig "$ST/admin.kubeconfig" admin
kubeconfig "$ST/kubelet.kubeconfig" kubelet
kubeconfig "$ST/kube-scheduler.kubeconfig" kube-scheduler
kubeconfig "$ST/kube-controller-manager.kubeconfig" kube-controller-manager

# ---------------------------------------------------------------- etcd
start etcd etcd --name k8s --data-dir "$ST/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "k8s=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --quota-backend-bytes 2147483648

# ---------------------------------------------------------------- containerd (own instance, CRI plugin)
mkdir -p "$ST/cni/net.d" "$ST/containerd"
put "$ST/cni/net.d/10-k8s-test.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "k8s-test",
  "plugins": [
    { "type": "bridge", "bridge": "k8stest0", "isGateway": false, "ipMasq": false, "hairpinMode": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.244.77.0/24" }]], "dataDir": "$ST/cni/ipam" } }
  ]
}
EOF
put "$ST/containerd/config.toml" <<EOF
version = 2
root = "$ST/containerd/root"
state = "$ST/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$RUN/containerd.sock"
[ttrpc]
  address = "$RUN/containerd.sock.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$ST/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    netns_mounts_under_state_dir = true
    # This VM withholds CAP_SYS_RESOURCE: oom_score_adj < 0 is refused (runc: "failed to update
    # /proc/self/oom_score_adj: Permission denied"). Clamp to containerd's own value instead.
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$ST/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "$(command -v "$RUNTIME")"
          Root = "$RUN/$RUNTIME"
          SystemdCgroup = false
EOF
start containerd containerd --config "$ST/containerd/config.toml"

# ---------------------------------------------------------------- kube-apiserver
wait_for etcd "etcd health" curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
start kube-apiserver kube-apiserver \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --secure-port="$API_PORT" --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none \
  --service-cluster-ip-range=10.96.0.0/24 \
  --client-ca-file="$PKI/ca.crt" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false

# ---------------------------------------------------------------- images
wait_for containerd "containerd socket" $CTR version
if [ ! -f "$ST/images/pause.tar" ]; then
  ( d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
    mkdir "$d/root" "$d/img"; cp "$BIN/pause" "$d/root/pause"
    tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$d/root" -cf "$d/layer.tar" pause
    L=$(sha256sum "$d/layer.tar" | cut -d' ' -f1); mkdir "$d/img/$L"; mv "$d/layer.tar" "$d/img/$L/layer.tar"
    printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$L" >"$d/cfg.json"
    C=$(sha256sum "$d/cfg.json" | cut -d' ' -f1); mv "$d/cfg.json" "$d/img/$C.json"
    printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$C" "$PAUSE_IMAGE" "$L" >"$d/img/manifest.json"
    tar -C "$d/img" -cf "$ST/images/pause.tar" manifest.json "$C.json" "$L" )
fi
$CTR images import "$ST/images/pause.tar" >/dev/null
for img in ${K8S_IMPORT_DOCKER:-}; do
  docker save "$img" | $CTR images import - >/dev/null || die "import of docker image $img failed"
  log "imported docker image $img"
done
for t in ${K8S_IMPORT_TARS:-}; do
  $CTR images import "$t" >/dev/null || die "import of $t failed"
  log "imported $t"
done

# ---------------------------------------------------------------- kubelet
# The kubelet sets these kernel tunables; remember the host's values so down.sh can restore them.
[ -f "$ST/sysctl.orig" ] || sysctl -e vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes | sed 's/ = /=/' >"$ST/sysctl.orig"
mkdir -p "$ST/kubelet" "$ST/pod-logs"
# Paths the kubelet/CNI create outside $ST whatever the flags (device-plugins socket dir, CNI result
# cache, log dirs): remember which ones did not exist before, down.sh removes exactly those.
for d in /var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers; do
  [ -e "$d" ] || grep -qx "$d" "$ST/created-dirs" 2>/dev/null || echo "$d" >>"$ST/created-dirs"
done
put "$ST/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$RUN/containerd.sock
podLogsDirectory: $ST/pod-logs
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
EOF
wait_for kube-apiserver "kube-apiserver /readyz" kubectl get --raw /readyz
start kubelet kubelet --config="$ST/kubelet-config.yaml" --kubeconfig="$ST/kubelet.kubeconfig" \
  --root-dir="$ST/kubelet" --cert-dir="$ST/kubelet/pki" --hostname-override="$NODE" --v=1

# ---------------------------------------------------------------- scheduler + controller-manager
if [ "$MINIMAL" != 1 ]; then
  start kube-scheduler kube-scheduler --kubeconfig="$ST/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$ST/kube-scheduler.kubeconfig" --authorization-kubeconfig="$ST/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false
  start kube-controller-manager kube-controller-manager --kubeconfig="$ST/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$ST/kube-controller-manager.kubeconfig" --authorization-kubeconfig="$ST/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
    --use-service-account-credentials=true --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range=10.96.0.0/24
fi

node_ready() { [ "$(kubectl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for kubelet "node $NODE Ready" node_ready
if [ "$MINIMAL" = 1 ]; then
  kubectl -n default get sa default >/dev/null 2>&1 || kubectl -n default create sa default >/dev/null
  kubectl -n default get cm kube-root-ca.crt >/dev/null 2>&1 || kubectl -n default create cm kube-root-ca.crt --from-file=ca.crt="$PKI/ca.crt" >/dev/null
else
  wait_for kube-controller-manager "ServiceAccount default/default" kubectl -n default get sa default
  wait_for kube-controller-manager "ConfigMap default/kube-root-ca.crt" kubectl -n default get cm kube-root-ca.crt
  wait_for kube-scheduler "scheduler running" alive kube-scheduler
  untainted() { [ -z "$(kubectl get node "$NODE" -o 'jsonpath={.spec.taints}')" ]; }
  wait_for kube-controller-manager "node $NODE untainted" untainted
fi
log "cluster up; logs in $LOGS"
echo "$ST/admin.kubeconfig"
