# The AppRafter CUE plugin sidecar for argocd-repo-server (see docs/argocd.md); the admission webhook runs the
# same image as `apprafter webhook` (deploy/admission/, docs/admission.md).
# Build: docker build -t ghcr.io/apprafter/cmp-cue:0.1.0 .
# Pins: Go and Python bases by version tag (pin digests in your registry mirror), cue by module version.

FROM golang:1.26-bookworm AS cue
ARG CUE_VERSION=v0.17.1
RUN CGO_ENABLED=0 GOBIN=/out go install -trimpath "cuelang.org/go/cmd/cue@${CUE_VERSION}"

FROM python:3.11.14-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY tools/versions.env tools/versions.env
COPY apprafter apprafter
COPY toolchain toolchain
COPY renderer renderer
COPY compatibility compatibility
COPY platform_stack platform_stack
COPY cmp cmp
COPY admission admission
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm
COPY --from=cue /out/cue /usr/local/bin/cue
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
 && python -c "import renderer.render, cmp.commands, admission.server"
COPY plugin.yaml /home/argocd/cmp-server/config/plugin.yaml
# Argo CD requires uid 999 for the plugin socket; HOME and cue's cache must be writable (an emptyDir on /tmp).
ENV HOME=/tmp \
    APPRAFTER_CUE=/usr/local/bin/cue \
    APPRAFTER_CUE_TIMEOUT=20 \
    APPRAFTER_CUE_MEMORY_MB=1024 \
    PYTHONDONTWRITEBYTECODE=1
USER 999
# argocd-cmp-server is copied into /var/run/argocd by the repo-server's init container: do not ship one.
ENTRYPOINT ["/var/run/argocd/argocd-cmp-server"]
