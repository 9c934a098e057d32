#!/usr/bin/env bash
# Runs the README's two quick-start commands on a bare Debian 12, as a new
# user would: a minimal root made by debootstrap, a clean clone of the commit
# in it, each command through chroot as root with an empty environment. A
# package that setup forgets fails here instead of on a user's machine.
#
#   scripts/check-fresh.sh [--full] [--ref REF]
#
# By default the first command (scripts/demo.sh) runs in full and the second
# (scripts/test.sh) through setup, configuring and the Python package
# (NORMKIT_TEST_STAGES=install); --full runs the whole test suite too. REF is
# the commit to check [HEAD]. Needs root.
#
# Kept between runs, outside the checkout, in $NORMKIT_FRESH_CACHE
# [/var/cache/normkit-fresh]: the debootstrapped base as a tarball, and the
# downloaded .deb, pip and uv files and ccache's compile results, bound into
# the root. ccache replays a compiler run only for identical input, headers
# included, so a package the root lacks still fails its build. Nothing else
# of the host enters it but its network settings (name servers, the site's
# CA certificates and pip's configuration), without which nothing downloads.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
full=0
ref=HEAD
while (($#)); do
  case "$1" in
    --full) full=1 ;;
    --ref) ref="${2:?--ref needs a commit}"; shift ;;
    *) echo "usage: scripts/check-fresh.sh [--full] [--ref REF]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "check-fresh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --verify "$ref^{commit}")
cache="${NORMKIT_FRESH_CACHE:-/var/cache/normkit-fresh}"
root="$cache/root"
base="$cache/bookworm-minbase.tar"
mkdir -p "$cache/apt-archives/partial" "$cache/pip" "$cache/uv" "$cache/ccache" "$cache/debootstrap"

# The Debian mirror the host's own apt sources name (one-line or deb822 form).
mirror=$(
  { sed -E 's/\[[^]]*\]//' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" && $3 == "bookworm" { print $2 }'
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -e "$f" ] && awk 'BEGIN { RS = ""; FS = "\n" }
        /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|\n|$)/ {
          for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); print a[2] } }' "$f"
    done
  } | head -n 1)
[ -n "$mirror" ] || { echo "check-fresh: no bookworm mirror in the host's apt sources" >&2; exit 1; }

mounted_under() { findmnt -rn -o TARGET | awk -v r="$1" 'index($0, r "/") == 1 || $0 == r'; }

cleanup() {
  # Processes left inside the root (an apt helper, a daemon) would keep its
  # mounts busy.
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
  done
  local m
  for m in $(mounted_under "$root" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
}
trap cleanup EXIT

if [ ! -s "$base" ]; then
  command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  echo "check-fresh: making a minimal Debian 12 root from $mirror (once; kept as $base)"
  tmp="$cache/base.tmp"
  [ -z "$(mounted_under "$tmp")" ] || { echo "check-fresh: $tmp has mounts; not touching it" >&2; exit 1; }
  rm -rf "$tmp"
  debootstrap --variant=minbase --cache-dir="$cache/debootstrap" bookworm "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log"; exit 1; }
  tar -C "$tmp" -cf "$base.tmp" . && mv "$base.tmp" "$base"
  rm -rf "$tmp"
fi

# A new root from the base for every run: nothing from an earlier run stays.
if [ -n "$(mounted_under "$root")" ]; then
  echo "check-fresh: $root still has mounts; unmount them first:" >&2
  mounted_under "$root" >&2
  exit 1
fi
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$base"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod +x "$root/usr/sbin/policy-rc.d"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
git clone -q --no-hardlinks "$repo" "$root/root/normkit"
git -C "$root/root/normkit" checkout -q --detach "$commit"

# Fresh kernel file systems, not the host's: proc, sysfs, and a tmpfs /dev
# with just the device nodes a build needs.
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
for d in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
  set -- $d
  mknod -m 666 "$root/dev/$1" c "$2" "$3"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir -m 1777 "$root/dev/shm"
mkdir "$root/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"  # apt's terminal log
ln -s pts/ptmx "$root/dev/ptmx"
mkdir -p "$root/root/.cache/pip" "$root/root/.cache/uv" "$root/root/.cache/ccache"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
mount --bind "$cache/pip" "$root/root/.cache/pip"
mount --bind "$cache/uv" "$root/root/.cache/uv"
mount --bind "$cache/ccache" "$root/root/.cache/ccache"

failed=0
run() {
  local what="$1" t0 rc
  shift
  echo
  echo "check-fresh: [$what] $*"
  t0=$(date +%s)
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" \
    /bin/bash -c "cd /root/normkit && $what" </dev/null
  rc=$?
  set -e
  echo "check-fresh: [$what] exited $rc after $(($(date +%s) - t0)) s"
  ((rc == 0)) || failed=1
}

echo "check-fresh: commit $commit on a bare Debian 12 ($mirror)"
run "bash scripts/demo.sh"
if ((full)); then
  run "bash scripts/test.sh"
else
  run "bash scripts/test.sh" NORMKIT_TEST_STAGES=install
fi

cleanup
trap - EXIT
if ((failed)); then
  echo "check-fresh: FAILED; the root is kept for inspection: $root" >&2
  exit 1
fi
[ -z "$(mounted_under "$root")" ] && rm -rf "$root"
echo "check-fresh: both README commands passed on a bare Debian 12"
