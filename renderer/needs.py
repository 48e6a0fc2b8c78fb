"""The platform's need types and the connection fields a claim reference may name for each."""

from __future__ import annotations

# Kept in step with schema/inject.cue (_apprafterNeedFields); a test checks the two agree.
NEED_FIELDS: dict[str, tuple[str, ...]] = {
    "pg": ("url", "host", "port", "user", "password", "db"),
    "redis": ("url", "host", "port", "password"),
    "jetstream": ("url", "host", "port", "user", "password"),
    "clickhouse": ("url", "host", "port", "user", "password", "db"),
    "s3": ("url", "host", "port", "user", "password", "bucket"),
    "disk": (),
}
