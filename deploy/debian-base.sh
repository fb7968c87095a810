#!/usr/bin/env bash
# Make the image the Dockerfile starts FROM, debian:bookworm-slim, where no container
# registry can be reached: `debootstrap --variant=minbase bookworm` from the Debian mirror
# this machine's apt already uses, trimmed as the official slim image is (no manuals, docs
# or locales installed later), imported as docker.io/library/debian:bookworm-slim.
#
#   deploy/debian-base.sh [ENGINE]     ENGINE: podman (default) or docker
#
# Does nothing when the image is already there (a pulled one, or the one made last time).
# Needs root and debootstrap (apt-get install debootstrap). DEBIAN_MIRROR overrides the
# mirror read from /etc/apt/sources.list(.d); without one, deb.debian.org.
set -euo pipefail

engine=${1:-podman}
image=docker.io/library/debian:bookworm-slim
suite=bookworm

if "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "debian-base: $image is already there"
  exit 0
fi
command -v debootstrap >/dev/null || {
  echo "debian-base: $image is missing and debootstrap is not installed" \
    "(apt-get install debootstrap, or pull $image)" >&2
  exit 1
}

# The first URI apt uses for SUITE, from deb822 .sources files and one-line .list files.
apt_uri_for() {
  local want=$1
  {
    for file in /etc/apt/sources.list.d/*.sources; do
      [ -e "$file" ] || continue
      awk -v want="$want" '
        function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uris != "") { split(uris, u, " "); print u[1] } types = suites = uris = "" }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
        /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
        END { flush() }' "$file"
    done
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      if [ -e "$file" ]; then cat "$file"; fi
    done | sed -e 's/#.*//' -e 's/\[[^]]*\]//' |
      awk -v want="$want" '$1 == "deb" && $3 == want { print $2 }'
  } | head -n1 || true
}

mirror=${DEBIAN_MIRROR:-$(apt_uri_for "$suite")}
mirror=${mirror:-http://deb.debian.org/debian}
security=$(apt_uri_for "$suite-security")
work=$(mktemp -d "${TMPDIR:-/tmp}/debian-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs

echo "debian-base: debootstrap --variant=minbase $suite from $mirror"
start=$SECONDS
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}

# As the official slim image: packages installed later leave out manuals, docs and locales.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/groff/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
CONF
# As the official image too: apt keeps no downloaded packages once they are installed.
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
{
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  if [ -n "$security" ]; then echo "deb $security $suite-security main"; fi
} >"$rootfs/etc/apt/sources.list"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete

tar --numeric-owner -C "$rootfs" -c . |
  "$engine" import --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >"$work/import.log" 2>&1 || {
    cat "$work/import.log" >&2
    exit 1
  }
echo "debian-base: imported $image in $((SECONDS - start)) s"
