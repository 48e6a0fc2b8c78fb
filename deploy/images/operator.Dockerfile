# apprafter-operator: `apprafter operator` (the reconcilers) and `apprafter webhook` (the admission webhook),
# deployed by the chart deploy/charts/apprafter-operator/ (docs/install.md).
#
# Built by `make images` like the sidecar (the root Dockerfile): tools/images.sh stages the context (this
# package as a wheel, deploy/images/requirements.txt, deploy/images/install-venv.sh, the pinned `cue` and
# `cosign`) and runs `buildah bud --isolation chroot --timestamp $SOURCE_DATE_EPOCH --secret id=ca,src=<CA>`.
# The operator evaluates the CUE schema once at start (cue); the PlatformStack controller verifies
# signatures in the operator process (cosign). BASE: as in the root Dockerfile.
ARG BASE=docker.io/library/python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
FROM ${BASE}
ARG BASE
ARG VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="apprafter-operator" \
      org.opencontainers.image.description="AppRafter operator (apprafter operator) and admission webhook (apprafter webhook)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="AppRafter" \
      org.opencontainers.image.base.name="${BASE}"

# The venv with cue and cosign (deploy/images/install-venv.sh); a user entry for uid 999, which owns nothing.
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    --mount=type=bind,source=.,target=/context \
    /context/install-venv.sh \
 && echo 'apprafter:x:999:999:AppRafter operator:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'apprafter:x:999:' >> /etc/group

# The root filesystem is read-only in the pod: HOME and cue's and cosign's scratch space are /tmp (an emptyDir).
ENV PATH=/opt/apprafter/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    APPRAFTER_CUE=/opt/apprafter/bin/cue \
    APPRAFTER_COSIGN=/opt/apprafter/bin/cosign \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 999:999
WORKDIR /tmp
# No shell needed: the chart's args are `operator ...` or `webhook ...`.
ENTRYPOINT ["/opt/apprafter/bin/apprafter"]
CMD ["operator"]
