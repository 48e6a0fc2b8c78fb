# redis: the cache Argo CD's components share, as install.yaml runs it (`--save "" --appendonly no --requirepass
# ...` as arguments of the image's redis-server), from Debian's redis-server package on the local base (built
# with `make images`; BASE is tools/base-image.sh --with ...,redis-server, the Argo CD image's base). It stands in
# for the public redis image install.yaml names; any Redis >= 6 serves Argo CD.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="redis" \
      org.opencontainers.image.description="Debian's redis-server for Argo CD, on the local Debian base" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="BSD-3-Clause" \
      org.opencontainers.image.base.name="${BASE}"

# install.yaml runs it as uid 999 on a read-only root: nothing is persisted, the working directory is never written.
USER 999
WORKDIR /tmp
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
