# One image for every role of Breakpoint Manager: web (the default), worker, beat, migrate
# and manage (deploy/entrypoint.sh; docs/deploy.md). Build it with `make image`.
#
# Behind a TLS-intercepting proxy, pip needs the proxy's CA: the host's bundle is mounted
# for the one step that runs pip, as a build secret (never in a layer), and PIP_CERT names
# it (deploy/build-image.sh does this for docker and podman alike):
#   docker build --secret id=host-ca,src="$PIP_CERT" --build-arg PIP_CERT=/run/secrets/host-ca .
# PIP_INDEX_URL (a build argument) points pip at another package index.

# --- build: the virtualenv, the collected static files -------------------------------------
FROM debian:bookworm-slim AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv \
 && apt-get clean && rm -rf /var/lib/apt/lists/*

# Only the dependencies' layer depends on pyproject.toml: a code change reuses it.
ARG PIP_CERT=
ARG PIP_INDEX_URL=
COPY pyproject.toml /app/pyproject.toml
COPY deploy/build-venv.sh /usr/local/bin/build-venv
RUN --mount=type=secret,id=host-ca build-venv /opt/venv /app/pyproject.toml

COPY . /app
WORKDIR /app
# Static files are collected now, so nothing is written or fetched when a container starts
# (the key is for this command only; DEBUG off: WhiteNoise's compressed, hashed files).
RUN DEBUG=0 SECRET_KEY=collectstatic-only-not-a-secret /opt/venv/bin/python manage.py \
      collectstatic --noinput --verbosity 0 \
 && /opt/venv/bin/python -m compileall -q -j 0 /app \
 && chmod 0755 deploy/entrypoint.sh

# --- the image: Debian's Python, the virtualenv, the code; no compiler, no pip -------------
FROM debian:bookworm-slim

# ca-certificates: webhooks, Slack and JIRA are reached over HTTPS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 bpm \
 && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin bpm

COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
# The data directory (BPM_VAR_DIR: the receipt key when BPM_RECEIPT_KEYS is unset) is the
# only place the service writes; compose.yaml shares it between the containers.
RUN mkdir -p /app/var && chown bpm:bpm /app/var

# deploy/build-image.sh passes the version from pyproject.toml and the git commit.
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="Breakpoint Manager" \
      org.opencontainers.image.description="Human-in-the-loop approval service for AI agents: web, worker, beat, migrate and manage in one image" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim" \
      org.opencontainers.image.documentation="docs/deploy.md"

ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH=/app/clients/python/src \
    DEBUG=0 \
    PORT=8000 \
    BPM_VAR_DIR=/app/var \
    STATIC_ROOT=/app/staticfiles
WORKDIR /app
USER 10001:10001
EXPOSE 8000
STOPSIGNAL SIGTERM

# The web role's liveness; other roles serve no HTTP and pass it (compose.yaml gives the
# worker a check of its own and turns this one off for beat and migrate).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "/app/deploy/healthcheck.py"]

ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
