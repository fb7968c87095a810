#!/usr/bin/env bash
# Build the image (`make image`) with docker or podman, whichever is installed and works:
#
#   deploy/build-image.sh [TAG]        TAG default breakpoint-manager:latest
#
# CONTAINER_ENGINE=docker|podman picks one. The base, debian:bookworm-slim, is pulled when
# missing; where no registry answers it is made with debootstrap (deploy/debian-base.sh,
# as root). Behind a TLS-intercepting proxy the host's CA bundle (the file PIP_CERT names)
# is mounted for the pip step only (a build secret); pip uses the host's index
# (PIP_INDEX_URL, else `pip config get global.index-url`, else PyPI). Podman builds with
# the host's network (--network=host) and, without systemd, runc and cgroupfs.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-breakpoint-manager:latest}
base=docker.io/library/debian:bookworm-slim

# The engine, and the global options it needs on this machine.
engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  else
    echo "build-image: neither a working docker nor podman is installed" >&2
    exit 1
  fi
fi
engine_cmd=("$engine")
if [ "$engine" = podman ] && [ ! -d /run/systemd/system ]; then
  engine_cmd+=(--cgroup-manager=cgroupfs)
  if command -v runc >/dev/null; then engine_cmd+=(--runtime runc); fi
fi

if ! "${engine_cmd[@]}" image inspect "$base" >/dev/null 2>&1; then
  if ! "${engine_cmd[@]}" pull "$base" 2>/dev/null; then
    echo "build-image: cannot pull $base; making it with debootstrap"
    deploy/debian-base.sh "$engine"
  fi
fi

index_url=${PIP_INDEX_URL:-$(pip3 config get global.index-url 2>/dev/null || true)}
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
args=(build --network=host -t "$tag" --build-arg "PIP_INDEX_URL=$index_url"
  --build-arg "VERSION=$version" --build-arg "REVISION=$revision")
if [ -n "${PIP_CERT:-}" ] && [ -r "$PIP_CERT" ]; then
  # A build secret: mounted for the pip step only, in no layer of the image.
  args+=(--secret "id=host-ca,src=$PIP_CERT" --build-arg PIP_CERT=/run/secrets/host-ca)
fi
if [ "$engine" = podman ]; then
  # The docker format keeps HEALTHCHECK (OCI images have none).
  args+=(--format docker --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
fi

start=$SECONDS
"${engine_cmd[@]}" "${args[@]}" .
size=$("${engine_cmd[@]}" image inspect --format '{{.Size}}' "$tag")
base_size=$("${engine_cmd[@]}" image inspect --format '{{.Size}}' "$base")
echo "build-image: built $tag with $engine in $((SECONDS - start)) s;" \
  "$(((size - base_size) / 1000000)) MB over $base"
