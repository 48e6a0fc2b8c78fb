# traefik: the node tier's Gateway API implementation (tests/testbed/traefik.py), standing in for Cilium's Gateway
# there: the pinned `traefik` binary the set-up builds from Traefik's Go module (TRAEFIK_VERSION, tools/setup.sh
# build_traefik), laid out as upstream's image lays it out (the binary on PATH, `traefik` as the command), on the
# local Debian base (its ca-certificates; upstream's is Alpine with ca-certificates and tzdata).
#
# Build with `make images` (tools/images.sh): the context holds bin/traefik from the tools cache. Not shipped: the
# web UI's assets (the module carries a placeholder; no Node.js here), so the dashboard stays off.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG TRAEFIK_VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="traefik" \
      org.opencontainers.image.description="Traefik ${TRAEFIK_VERSION} built from its Go module on the local Debian base" \
      org.opencontainers.image.version="${TRAEFIK_VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.base.name="${BASE}"

RUN --mount=type=bind,source=.,target=/context install -m 0755 /context/bin/traefik /usr/local/bin/traefik

# Upstream's chart runs it as 65532 on a read-only root with /data and /tmp as emptyDirs; nothing here writes the
# image. Binding 80/443 as that user takes the pod's net.ipv4.ip_unprivileged_port_start (tests/testbed/traefik.py).
USER 65532
WORKDIR /tmp
EXPOSE 80 443
ENTRYPOINT ["/usr/local/bin/traefik"]
