# pgbouncer: the image CloudNativePG's Pooler pods run (docs/images.md, docs/platform-services.md), from Debian's
# pgbouncer package (bookworm's 1.18) on the local base (tools/base-image.sh --with pgbouncer), laid out as
# CloudNativePG v1.26's Pooler Deployment expects of its pgbouncer image (pkg/specs/pgbouncer/deployments.go,
# internal/cmd/manager/pgbouncer/run/cmd.go):
#   - the container runs `/controller/manager pgbouncer run`: CloudNativePG's own instance manager, copied into the
#     pod's scratch volume (/controller) by the `bootstrap-controller` init container from the operator image, so
#     this image needs none of CloudNativePG; the manager writes pgbouncer.ini, pg_hba.conf, userlist.txt and the
#     TLS files under /controller/configs, puts the Unix socket in /controller/run, and starts `/usr/bin/pgbouncer
#     /controller/configs/pgbouncer.ini` by that path: Debian installs it in /usr/sbin, so a link;
#   - a user `pgbouncer` with uid 998 and gid 996 (the pod's runAsUser/runAsGroup): the admin console is reached
#     over the socket with `local pgbouncer pgbouncer peer`, which looks the caller's uid up by name, and the
#     manager's metrics exporter logs in that way;
#   - a read-only root: pgbouncer writes only to the scratch volume and logs to stderr (no pidfile, no logfile).
# Debian's own service (/etc/pgbouncer, user postgres) is not used.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="pgbouncer" \
      org.opencontainers.image.description="Debian's PgBouncer for CloudNativePG's Pooler, on the local Debian base" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="ISC" \
      org.opencontainers.image.base.name="${BASE}"

RUN ln -s /usr/sbin/pgbouncer /usr/bin/pgbouncer && /usr/bin/pgbouncer --version \
 && groupadd --system --gid 996 pgbouncer && useradd --system --uid 998 --gid 996 --no-create-home \
      --home-dir /controller --shell /usr/sbin/nologin pgbouncer

USER 998:996
WORKDIR /controller
EXPOSE 5432
