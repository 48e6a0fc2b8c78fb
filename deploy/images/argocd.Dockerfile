# argocd: Argo CD's own image rebuilt here (docs/images.md): the pinned `argocd` binary the set-up
# builds from Argo CD's Go module (ARGOCD_VERSION), laid out as upstream's Dockerfile lays it out (the binary in
# /usr/local/bin with one link per component, the scripts it runs beside it, helm and kustomize, user 999, tini as
# the entrypoint), so Argo CD's install.yaml runs it unchanged once its image names point here.
#
# Build with `make images` (tools/images.sh): BASE is the local Debian base with the packages upstream's image
# installs (tools/base-image.sh --with git,tini,gpg,gpg-agent,openssh-client,redis-server); the context holds
# bin/ (argocd, helm and kustomize from the tools cache, gpg-wrapper.sh and git-verify-wrapper.sh from the Argo CD
# module) and entrypoint.sh. Not shipped: git-lfs, tzdata, connect-proxy (upstream has them; nothing here uses them).
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG ARGOCD_VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="argocd" \
      org.opencontainers.image.description="Argo CD ${ARGOCD_VERSION} built from its Go module on the local Debian base" \
      org.opencontainers.image.version="${ARGOCD_VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"

# As upstream's image: every component is the one multi-call binary under its own name (argv[0]); the install's
# init containers copy /usr/local/bin/argocd into the pods (the plugin sidecar's argocd-cmp-server), so it stays
# there. /app/config is where install.yaml mounts the TLS, SSH and GnuPG settings.
RUN --mount=type=bind,source=.,target=/context \
    install -m 0755 /context/bin/* /usr/local/bin/ \
 && for name in server repo-server cmp-server application-controller dex notifications \
                applicationset-controller k8s-auth commit-server; do \
      ln -s /usr/local/bin/argocd "/usr/local/bin/argocd-$name"; \
    done \
 && ln -s /usr/local/bin/entrypoint.sh /usr/local/bin/uid_entrypoint.sh \
 && echo 'argocd:x:999:999:Argo CD:/home/argocd:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'argocd:x:999:' >> /etc/group \
 && install -d -o 999 -g 0 -m 0775 /home/argocd \
 && install -d /app/config/ssh /app/config/tls /app/config/gpg/source \
 && install -d -o 999 -m 0700 /app/config/gpg/keys \
 && touch /app/config/ssh/ssh_known_hosts \
 && ln -sf /app/config/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts

ENV USER=argocd \
    GRPC_ENABLE_TXT_SERVICE_CONFIG=false
USER 999
WORKDIR /home/argocd
ENTRYPOINT ["/usr/bin/tini", "--"]
