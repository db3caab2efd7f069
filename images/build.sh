#!/usr/bin/env bash
# Build sandboxctl's container images without any registry access.
#
#   images/build.sh [--force] [sandbox|testbb|daemon|all]
#
#   sandbox  sandboxctl/sandbox:bookworm  Debian bookworm rootfs from debootstrap
#            (bash coreutils procps git curl jq python3 nodejs ripgrep ca-certificates),
#            docker-imported. ~1 min.
#   testbb   sandboxctl/testbb:1          FROM-scratch style image: Debian's static
#            busybox plus its applet symlinks, docker-imported. ~1 s.
#
# Both images are made by `docker import` of a tarred rootfs, so no Dockerfile build,
# no BuildKit/buildx and no base image from Docker Hub are needed; it works with any
# docker CLI (Debian's 20.10 or a newer one) against Engine API >= 1.41.
#
# An image that already exists is skipped unless --force (or FORCE=1) is given.
#
# Environment:
#   FORCE=1            same as --force
#   DOCKER             docker CLI to use (default: docker)
#   DEBIAN_MIRROR      debootstrap mirror (default: http://deb.debian.org/debian)
#   SANDBOX_IMAGE      default sandboxctl/sandbox:bookworm
#   TESTBB_IMAGE       default sandboxctl/testbb:1
#   DAEMON_IMAGE       default sandboxctl/sandboxctld:dev
#   GO                 go command for the daemon image (default: go)
#   IMAGES_DEB_CACHE   debootstrap's .deb cache, reused by rebuilds
#                      (default: /var/cache/sandboxctl/debootstrap; "none" disables)
#   IMAGES_WORKDIR     parent of the temporary build dir (default: $TMPDIR or /var/tmp)
set -euo pipefail

DOCKER=${DOCKER:-docker}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SANDBOX_IMAGE=${SANDBOX_IMAGE:-sandboxctl/sandbox:bookworm}
TESTBB_IMAGE=${TESTBB_IMAGE:-sandboxctl/testbb:1}
DAEMON_IMAGE=${DAEMON_IMAGE:-sandboxctl/sandboxctld:dev}
GO=${GO:-go}
REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
SUITE=bookworm
SANDBOX_PACKAGES=bash,coreutils,procps,git,curl,jq,python3,nodejs,ripgrep,ca-certificates
DEB_CACHE=${IMAGES_DEB_CACHE-/var/cache/sandboxctl/debootstrap}
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

force=0
case "${FORCE:-}" in 1|yes|true) force=1 ;; esac
target=all

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -f|--force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    sandbox|testbb|daemon|all) target=$1 ;;
    *) echo "images/build.sh: unknown argument '$1' (want [--force] [sandbox|testbb|daemon|all])" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '[images] %s\n' "$*"; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- preflight
command -v "$DOCKER" >/dev/null 2>&1 || die "no docker CLI ('$DOCKER') in PATH; run scripts/docker-up.sh first"
if ! timeout 20 "$DOCKER" version >/dev/null 2>&1 </dev/null; then
  die "the Docker daemon does not answer ('$DOCKER version' failed); start it with scripts/docker-up.sh (or 'make docker-up')"
fi

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (run as root, e.g. 'sudo make images')"
}

apt_updated=0
apt_install() {
  need_root "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  if [ "$apt_updated" = 0 ]; then
    say "apt-get update"
    apt-get update -qq </dev/null >"$workdir/apt.log" 2>&1 || { tail -n 20 "$workdir/apt.log" >&2; die "apt-get update failed"; }
    apt_updated=1
  fi
  say "apt-get install $*"
  apt-get install -y -qq --no-install-recommends "$@" </dev/null >>"$workdir/apt.log" 2>&1 \
    || { tail -n 20 "$workdir/apt.log" >&2; die "apt-get install $* failed"; }
}

image_exists() { "$DOCKER" image inspect "$1" >/dev/null 2>&1 </dev/null; }

# ---------------------------------------------------------------- temp dir
parent=${IMAGES_WORKDIR:-${TMPDIR:-/var/tmp}}
mkdir -p "$parent"
workdir=$(mktemp -d "$parent/sandboxctl-images.XXXXXX")

cleanup() {
  local rc=$?
  # debootstrap mounts proc/sys (and more) inside the target while it works; if it
  # was interrupted, unmount everything under the work dir before deleting it.
  if [ -d "$workdir" ]; then
    local m pg
    if [ -s "$workdir/debootstrap.pid" ]; then
      pg=$(cat "$workdir/debootstrap.pid")
      say "stopping debootstrap (process group $pg)"
      kill -TERM -- "-$pg" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.5; done
      kill -KILL -- "-$pg" 2>/dev/null || true
      sleep 0.5
    fi
    while read -r m; do
      [ -n "$m" ] && umount -l "$m" 2>/dev/null || true
    done < <(awk -v p="$workdir/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r)
    rm -rf --one-file-system "$workdir" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# Common skeleton for both rootfs trees: the directories sandboxctl bind-mounts onto
# (/workspace, /agent), mount points for the tmpfs the containers get (/tmp, /var/tmp,
# /run), and an unprivileged "sandbox" user (uid/gid 1000) for `sandbox.docker.user`.
skeleton() {
  local root=$1
  mkdir -p "$root"/{workspace,agent,tmp,var/tmp,run,proc,sys,dev,etc,root,home/sandbox}
  chmod 1777 "$root/tmp" "$root/var/tmp"
  chmod 0755 "$root/workspace" "$root/agent"
  chmod 0700 "$root/root"
}

add_sandbox_user() {
  local root=$1 shell=$2
  grep -q '^sandbox:' "$root/etc/passwd" 2>/dev/null \
    || echo "sandbox:x:1000:1000:sandbox:/home/sandbox:$shell" >>"$root/etc/passwd"
  grep -q '^sandbox:' "$root/etc/group" 2>/dev/null \
    || echo "sandbox:x:1000:" >>"$root/etc/group"
  chown 1000:1000 "$root/home/sandbox"
}

# tar the rootfs to `docker import` with the common image config (CMD: $4, a
# JSON array, default sleep infinity).
import_rootfs() {
  local root=$1 image=$2 kind=$3 cmd=${4:-'["sleep","infinity"]'}
  say "$kind: docker import -> $image"
  tar -C "$root" --numeric-owner --xattrs \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
      --exclude='./run/*' --exclude='./tmp/*' --exclude='./var/tmp/*' \
      -cf - . \
    | "$DOCKER" import \
        --change "ENV PATH=$IMAGE_PATH" \
        --change 'ENV LANG=C.UTF-8' \
        --change 'WORKDIR /workspace' \
        --change "CMD $cmd" \
        --change "LABEL sandboxctl.image=$kind" \
        --change "LABEL org.opencontainers.image.title=$image" \
        --change "LABEL org.opencontainers.image.source=https://github.com/sandboxctl/sandboxctl" \
        --message "sandboxctl images/build.sh $kind" \
        - "$image" >/dev/null
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---------------------------------------------------------------- testbb
static_busybox() {
  # Prefer the host's busybox if it is static (Debian's busybox-static package puts one
  # at /bin/busybox); otherwise fetch busybox-static with apt and unpack it into the
  # work dir, without installing it on the host (it conflicts with the `busybox` package).
  local b
  for b in /bin/busybox /usr/bin/busybox; do
    [ -x "$b" ] || continue
    case "$(LC_ALL=C ldd "$b" 2>&1 || true)" in
      *"not a dynamic executable"*|*"statically linked"*) echo "$b"; return 0 ;;
    esac
  done
  command -v apt-get >/dev/null 2>&1 || die "no static busybox found and no apt-get to fetch busybox-static"
  if [ "$apt_updated" = 0 ]; then
    need_root "apt-get update"
    say "testbb: no static busybox on this host; fetching Debian's busybox-static" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null >"$workdir/apt.log" 2>&1 \
      || { tail -n 20 "$workdir/apt.log" >&2; die "apt-get update failed"; }
    apt_updated=1
  fi
  mkdir -p "$workdir/deb"
  (cd "$workdir/deb" && apt-get download busybox-static </dev/null >>"$workdir/apt.log" 2>&1) \
    || { tail -n 20 "$workdir/apt.log" >&2; die "apt-get download busybox-static failed"; }
  dpkg-deb -x "$workdir"/deb/busybox-static_*.deb "$workdir/deb/x"
  [ -x "$workdir/deb/x/bin/busybox" ] || die "busybox-static package has no bin/busybox"
  echo "$workdir/deb/x/bin/busybox"
}

build_testbb() {
  local start=$SECONDS root="$workdir/testbb" bb applet n=0
  say "testbb: building $TESTBB_IMAGE (static busybox, FROM scratch)"
  bb=$(static_busybox)
  say "testbb: using $bb ($("$bb" 2>&1 | head -n 1 | awk '{print $1, $2}'))"
  skeleton "$root"
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin}
  install -m 0755 "$bb" "$root/bin/busybox"
  if [ "$(id -u)" = 0 ] && chroot "$root" /bin/busybox --install -s 2>"$workdir/install.log"; then
    n=$(find "$root" -type l | wc -l)
  else
    # Same result as `busybox --install -s` inside the rootfs, without a chroot.
    while read -r applet; do
      case "$applet" in ""|linuxrc|bin/busybox) continue ;; esac
      mkdir -p "$root/$(dirname "$applet")"
      [ -e "$root/$applet" ] || { ln -s /bin/busybox "$root/$applet"; n=$((n + 1)); }
    done < <("$bb" --list-full)
  fi
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  add_sandbox_user "$root" /bin/sh
  say "testbb: rootfs ready ($n applet links)"
  import_rootfs "$root" "$TESTBB_IMAGE" testbb
  rm -rf "$root"
  say "testbb: built $TESTBB_IMAGE in $(fmt_secs $((SECONDS - start)))"
}

# ---------------------------------------------------------------- daemon
build_daemon() {
  local start=$SECONDS root="$workdir/daemon" cid
  say "daemon: building $DAEMON_IMAGE (the testbb rootfs + sandboxctl binaries from $REPO_ROOT)"
  command -v "$GO" >/dev/null 2>&1 || die "daemon: no go command ('$GO') in PATH; run scripts/toolchain.sh"
  # The busybox rootfs of testbb (built first when missing) gives the
  # gateway host its /bin/sh without another busybox download (an existing
  # testbb is used as it is, even with --force).
  image_exists "$TESTBB_IMAGE" || build_testbb
  mkdir -p "$root"
  cid=$("$DOCKER" create "$TESTBB_IMAGE" </dev/null) || die "daemon: docker create $TESTBB_IMAGE failed"
  "$DOCKER" export "$cid" </dev/null | tar -C "$root" -xf - || { "$DOCKER" rm "$cid" >/dev/null 2>&1; die "daemon: docker export failed"; }
  "$DOCKER" rm "$cid" >/dev/null 2>&1 </dev/null || true
  mkdir -p "$root"/{usr/local/bin,usr/local/lib/sandboxctl,etc/sandboxctl,var/lib/sandboxctl}
  chmod 0700 "$root/var/lib/sandboxctl"
  say "daemon: go build (static, -trimpath, stripped, as make build)"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags='-s -w' -o "$root/usr/local/bin/" ./cmd/sandboxctl ./cmd/sandboxctld \
    && CGO_ENABLED=0 "$GO" build -trimpath -ldflags='-s -w' -o "$root/usr/local/lib/sandboxctl/" ./cmd/sandboxctl-supervisor) \
    >"$workdir/go-build.log" 2>&1 || { tail -n 30 "$workdir/go-build.log" >&2; die "daemon: go build failed"; }
  import_rootfs "$root" "$DAEMON_IMAGE" daemon '["/usr/local/bin/sandboxctl","serve"]'
  rm -rf "$root"
  say "daemon: built $DAEMON_IMAGE in $(fmt_secs $((SECONDS - start)))"
}

# ---------------------------------------------------------------- sandbox
# Print one progress line per debootstrap phase; everything goes to the log.
debootstrap_progress() {
  local logf=$1 t0=$SECONDS last="" p line n=0
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$logf"
    p=""
    case "$line" in
      "I: Retrieving InRelease"*|"I: Retrieving Release"*|"I: Retrieving Packages"*|"I: Validating Packages"*|\
      "I: Checking Release"*|"I: Valid Release"*|"I: Resolving"*|"I: Checking component"*|"I: Found"*)
        p="reading package indexes, resolving dependencies" ;;
      "I: Retrieving "*) p="downloading and checking packages" ;;
      "I: Validating "*) n=$((n + 1)); p="downloading and checking packages" ;;
      "I: Extracting "*) p="extracting $n packages" ;;
      "I: Installing required"*|"I: Unpacking required"*|"I: Configuring required"*) p="installing required packages" ;;
      "I: Unpacking the base system"*|"I: Configuring the base system"*) p="installing base packages and the --include extras" ;;
      "I: Base system installed"*) p="base system installed" ;;
      "E: "*|"W: "*) printf '[images] sandbox:   debootstrap: %s\n' "$line" ;;
    esac
    if [ -n "$p" ] && [ "$p" != "$last" ]; then
      printf '[images] sandbox:   debootstrap: %s (+%ds)\n' "$p" $((SECONDS - t0))
      last=$p
    fi
  done
}

build_sandbox() {
  local start=$SECONDS root="$workdir/sandbox-rootfs" log="$workdir/debootstrap.log" rc=0
  say "sandbox: building $SANDBOX_IMAGE (debootstrap $SUITE minbase from $DEBIAN_MIRROR)"
  need_root "debootstrap"
  if ! command -v debootstrap >/dev/null 2>&1; then
    apt_install debootstrap
  fi
  local keyring=()
  if [ -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
    keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
  else
    apt_install debian-archive-keyring
    keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
  fi
  local cache=()
  if [ -n "$DEB_CACHE" ] && [ "$DEB_CACHE" != none ] && mkdir -p "$DEB_CACHE" 2>/dev/null; then
    cache=(--cache-dir="$DEB_CACHE")
  fi
  say "sandbox: debootstrap (details go to a log; about a minute, longer on a slow mirror)"
  # In its own process group (pid recorded), so that an interrupted build can end
  # debootstrap and everything it started in the chroot before deleting the rootfs.
  # The pipeline runs in the background and we `wait` for it, so that a signal to this
  # script is handled at once (bash defers traps until a foreground command ends).
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$workdir/debootstrap.pid" \
      debootstrap --variant=minbase "${keyring[@]}" "${cache[@]}" \
      --include="$SANDBOX_PACKAGES" \
      "$SUITE" "$root" "$DEBIAN_MIRROR" </dev/null 2>&1 \
    | debootstrap_progress "$log" &
  wait $! || rc=$?
  rm -f "$workdir/debootstrap.pid"
  if [ "$rc" != 0 ] || [ ! -x "$root/bin/bash" ]; then
    printf '[images] sandbox: debootstrap failed (exit %s); last lines of its log:\n' "$rc" >&2
    tail -n 30 "$log" >&2 || true
    [ -f "$root/debootstrap/debootstrap.log" ] && { echo "--- $root/debootstrap/debootstrap.log:" >&2; tail -n 30 "$root/debootstrap/debootstrap.log" >&2; }
    die "debootstrap of $SUITE from $DEBIAN_MIRROR failed (mirror reachable? root? disk space?)"
  fi
  say "sandbox: debootstrap done in $(fmt_secs $((SECONDS - start)))"

  say "sandbox: cleaning apt caches and logs"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/archives/partial/* \
         "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
         "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old \
         "$root"/debootstrap "$root"/usr/share/doc/*/changelog* "$root"/usr/share/man/* \
         "$root"/root/.bash_history "$root"/usr/share/info/* "$root"/usr/share/locale/*
  find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete 2>/dev/null || true
  # Docker provides these at run time; do not bake the build host's copies in.
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  rm -f "$root/etc/machine-id" && : >"$root/etc/machine-id"
  skeleton "$root"
  add_sandbox_user "$root" /bin/bash
  local missing=()
  for b in bash jq rg python3 node git curl ps sleep; do
    [ -x "$root/usr/bin/$b" ] || [ -x "$root/bin/$b" ] || missing+=("$b")
  done
  [ ${#missing[@]} = 0 ] || die "sandbox rootfs lacks: ${missing[*]}"
  say "sandbox: rootfs ready ($(du -sh --one-file-system "$root" | cut -f1))"
  import_rootfs "$root" "$SANDBOX_IMAGE" sandbox
  rm -rf --one-file-system "$root"
  say "sandbox: built $SANDBOX_IMAGE in $(fmt_secs $((SECONDS - start)))"
}

# ---------------------------------------------------------------- main
build_one() {
  local kind=$1 image
  case "$kind" in
    sandbox) image=$SANDBOX_IMAGE ;;
    testbb) image=$TESTBB_IMAGE ;;
    daemon) image=$DAEMON_IMAGE ;;
  esac
  if [ "$force" = 0 ] && image_exists "$image"; then
    say "$kind: $image already exists, skipping (force a rebuild with --force or 'make images FORCE=1')"
    return 0
  fi
  local old_id
  old_id=$("$DOCKER" image inspect --format '{{.Id}}' "$image" 2>/dev/null </dev/null || true)
  "build_$kind"
  # A forced rebuild leaves the previous image dangling; drop it unless something uses it.
  if [ -n "$old_id" ] && [ "$old_id" != "$("$DOCKER" image inspect --format '{{.Id}}' "$image" 2>/dev/null </dev/null)" ]; then
    "$DOCKER" image rm "$old_id" >/dev/null 2>&1 </dev/null || true
  fi
}

total=$SECONDS
case "$target" in
  all) build_one testbb; build_one sandbox ;;
  *) build_one "$target" ;;
esac
say "done in $(fmt_secs $((SECONDS - total)))"
