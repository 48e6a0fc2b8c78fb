# postgresql: the PostgreSQL image CloudNativePG's instance pods run (docs/images.md), from Debian's packages
# (postgresql-15, bookworm's major, and barman-cli-cloud) on the local base (tools/base-image.sh --with
# postgresql-15,barman-cli-cloud), laid out the way CloudNativePG expects of an operand image:
#   - the server's binaries on PATH (initdb, pg_ctl, postgres, pg_controldata, pg_basebackup, pg_rewind,
#     pg_isready, psql): the instance manager runs them by name; Debian keeps them in /usr/lib/postgresql/15/bin;
#   - a user `postgres` with uid/gid 26, CloudNativePG's default postgresUID/postgresGID (the pod runs as 26:26
#     with fsGroup 26; initdb refuses a uid without a passwd entry); Debian's package makes a dynamic system uid;
#   - the tag starting with the major version (`.../postgresql:15`): CloudNativePG reads the major from the tag;
#   - C.UTF-8 as the locale (glibc's own, no `locales` package): the Cluster's initdb defaults to
#     `--encoding UTF8 --lc-collate C --lc-ctype C`; another locale needs `locales` and the locale generated;
#   - barman-cloud on PATH (Debian's barman-cli-cloud 3.4, with python3-boto3 and python3-psycopg2): with a
#     Cluster's spec.backup.barmanObjectStore the instance manager runs barman-cloud-wal-archive (every WAL segment),
#     barman-cloud-check-wal-archive (once, before the first), barman-cloud-backup (a Backup, which needs barman
#     >= 3.3 for --name), barman-cloud-backup-show/-list/-delete (the catalog, retention) and, on recovery,
#     barman-cloud-restore and barman-cloud-wal-restore, each by name in this container.
# The cluster Debian's postinst creates (15/main) is dropped: CloudNativePG runs initdb itself into its volume.
# Not in it (upstream's images have them): pgaudit, pgvector, pg_failover_slots.
ARG BASE
FROM ${BASE}
ARG BASE
ARG VERSION
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH

LABEL org.opencontainers.image.title="postgresql" \
      org.opencontainers.image.description="Debian's PostgreSQL 15 and barman-cloud for CloudNativePG, on the local Debian base" \
      org.opencontainers.image.version="15" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="PostgreSQL" \
      org.opencontainers.image.base.name="${BASE}"

# barman-cloud-backup --name is what CloudNativePG passes (barman >= 3.3): checked here, so an older barman fails the
# build. Debian's base-passwd gives gid 26 to `tape` (unused in a container): it makes way for postgres.
RUN pg_dropcluster 15 main 2>/dev/null || true \
 && barman-cloud-backup --help | grep -q -- --name && command -v barman-cloud-backup-show barman-cloud-wal-archive \
      barman-cloud-check-wal-archive barman-cloud-restore barman-cloud-wal-restore barman-cloud-backup-delete >/dev/null \
 && groupdel tape && groupmod -g 26 postgres && usermod -u 26 -g 26 postgres \
 && rm -rf /var/lib/postgresql/15 /etc/postgresql/15 && chown -R 26:26 /var/lib/postgresql

ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
USER 26:26
WORKDIR /var/lib/postgresql
EXPOSE 5432
