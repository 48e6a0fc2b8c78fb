# cnpg: CloudNativePG's operator image rebuilt here (docs/images.md): the pinned `manager` binary the set-up builds
# from CloudNativePG's Go module (CNPG_VERSION, tools/setup.sh build_cnpg_manager), laid out as upstream's
# Dockerfile lays it out (/operator/manager_<arch>, and /manager a link to it), run as upstream's release manifest runs it
# (`/manager controller ...`, uid 10001 from the Deployment, upstream's image user 65532). Every instance pod runs
# this image too, in its `bootstrap-controller` init container (`/manager bootstrap /controller/manager`: it copies
# itself into the pod, where the PostgreSQL image's container runs it as the instance manager).
#
# Build with `make images` (tools/images.sh): BASE is the local Debian base (upstream's is distroless static; the
# binary is static, CGO off, so it needs nothing of either); the context holds bin/cnpg-manager.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG CNPG_VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="cnpg" \
      org.opencontainers.image.description="CloudNativePG ${CNPG_VERSION} built from its Go module on the local Debian base" \
      org.opencontainers.image.version="${CNPG_VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"

# Upstream's layout exactly: the operator lists `operator/manager_<arch>` (relative to / , its working directory) to
# learn which architectures its instance manager exists for, and refuses a Cluster otherwise ("invalid
# architecture: amd64"); /manager is the link its Deployment and the instances' init container run.
RUN --mount=type=bind,source=.,target=/context \
    install -D -m 0755 /context/bin/cnpg-manager "/operator/manager_$(dpkg --print-architecture)" \
 && ln -s "operator/manager_$(dpkg --print-architecture)" /manager

USER 65532:65532
WORKDIR /
ENTRYPOINT ["/manager"]
