# versitygw: the s3 backend's gateway (lifecycle/backends/s3.py runs it for an integrated s3 ServiceProvider): the
# pinned `versitygw` binary the set-up builds from its Go module (VERSITYGW_VERSION, tools/setup.sh build_versitygw),
# on the local Debian base (its /bin/sh: the Deployment makes the volume's iam/ and buckets/ directories, then execs
# versitygw's posix backend on them).
#
# Build with `make images` (tools/images.sh): the context holds bin/versitygw from the tools cache.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG VERSITYGW_VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="versitygw" \
      org.opencontainers.image.description="versitygw ${VERSITYGW_VERSION} built from its Go module on the local Debian base" \
      org.opencontainers.image.version="${VERSITYGW_VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"

RUN --mount=type=bind,source=.,target=/context install -m 0755 /context/bin/versitygw /usr/local/bin/versitygw

# The backend runs it as uid 999 on a read-only root; its data and IAM are on the volume at /data.
USER 999
WORKDIR /tmp
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/versitygw"]
