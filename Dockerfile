# argocd-cue-cmp: the AppRafter CUE plugin sidecar for argocd-repo-server (docs/install.md).
#
# Build with `make images`: tools/images.sh stages the build context (this package as a wheel, its
# dependencies pinned with hashes in deploy/images/requirements.txt, the pinned `cue` binary, plugin.yaml,
# deploy/images/install-venv.sh) and runs `buildah bud --isolation chroot --timestamp $SOURCE_DATE_EPOCH
# --secret id=ca,src=<CA bundle>`. BASE is any Debian-based image with python3 and python3-venv. The default
# is the public Python image, pinned by the digest of its multi-architecture index; `make images` passes the
# local base built from Debian packages by tools/base-image.sh (no container registry needed).
ARG BASE=docker.io/library/python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
FROM ${BASE}
ARG BASE
ARG VERSION
ARG REVISION=unknown
# Set by `make images` from the last commit: pinned mtimes, fixed creation time, hash-based .pyc files.
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="argocd-cue-cmp" \
      org.opencontainers.image.description="Argo CD Config Management Plugin sidecar rendering AppRafter apprafter/Application.cue with CUE" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="AppRafter" \
      org.opencontainers.image.base.name="${BASE}"

# deploy/images/install-venv.sh (shared with the operator image) makes the venv /opt/apprafter with the pinned
# cue in it; the CA bundle pip needs is a build secret (never a layer) and the context is bind-mounted, not
# copied. User 999 is the one Argo CD requires of sidecars; its entry lets tools that look up the user work.
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    --mount=type=bind,source=.,target=/context \
    /context/install-venv.sh \
 && echo 'argocd:x:999:999:Argo CD plugin:/home/argocd:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'argocd:x:999:' >> /etc/group \
 && install -d -o 999 -g 999 /home/argocd /home/argocd/cmp-server /home/argocd/cmp-server/plugins

COPY plugin.yaml /home/argocd/cmp-server/config/plugin.yaml

# Argo CD requires uid 999 for the plugin socket. The root filesystem is read-only in the pod: HOME, cue's
# cache and Argo CD's unpacked repositories live in /tmp (an emptyDir).
ENV PATH=/opt/apprafter/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    APPRAFTER_CUE=/opt/apprafter/bin/cue \
    APPRAFTER_CUE_TIMEOUT=20 \
    APPRAFTER_CUE_MEMORY_MB=1024 \
    PYTHONDONTWRITEBYTECODE=1
USER 999:999
WORKDIR /home/argocd
# argocd-cmp-server is copied into /var/run/argocd by the repo-server's init container: do not ship one.
ENTRYPOINT ["/var/run/argocd/argocd-cmp-server"]
