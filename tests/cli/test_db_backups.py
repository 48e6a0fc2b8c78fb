"""What `apprafter db backups` prints as text (apprafter/db_backups.py), from the report the node test reads as JSON
(tests/reconciler/test_pg_backup_node.py runs the command against a real Cluster): the window, the problem when
there is one, the generation the app uses and the kept ones with the command that drops each."""

from __future__ import annotations

from typing import Any

from apprafter.db_backups import _text

REPORT: dict[str, Any] = {
    "app": "shop", "environment": "prod", "namespace": "shop-prod", "provider": "pg-integrated",
    "cluster": {"name": "platform-postgres", "namespace": "apprafter-pg"}, "earliest": "2026-05-02T03:00:41Z",
    "latest": "2026-05-09T12:00:00Z", "lastBackup": "2026-05-09T03:00:40Z", "archiving": True, "problem": None,
    "generation": {"number": 1, "database": "shop-prod.shop-pg"}, "kept": []}


def test_the_window_is_said_from_the_first_recoverable_point_to_now() -> None:
    assert _text(REPORT).splitlines() == [
        "shop (prod, namespace shop-prod): pg on Cluster apprafter-pg/platform-postgres (ServiceProvider "
        "pg-integrated)",
        "  earliest:     2026-05-02T03:00:41Z",
        "  latest:       2026-05-09T12:00:00Z (now: WAL is archived continuously, at most 5 minutes behind)",
        "  last backup:  2026-05-09T03:00:40Z",
        "  generation:   1 (database shop-prod.shop-pg, the app's)"]


def test_what_is_wrong_is_said_and_an_unknown_point_is_a_dash() -> None:
    lines = _text({**REPORT, "earliest": None, "latest": None, "lastBackup": None, "archiving": False,
                   "problem": "no backups configured for this Cluster"}).splitlines()
    assert lines[1:5] == ["  earliest:     —", "  latest:       —", "  last backup:  —",
                          "  problem:      no backups configured for this Cluster"]


def test_the_kept_generations_are_listed_with_the_command_that_drops_each() -> None:
    lines = _text({**REPORT, "generation": {"number": 3, "database": "shop-prod.shop-pg~3"},
                   "kept": [{"number": 1, "database": "shop-prod.shop-pg"},
                            {"number": 2, "database": "shop-prod.shop-pg~2"}]}).splitlines()
    assert lines[4:] == [
        "  generation:   3 (database shop-prod.shop-pg~3, the app's)",
        "  kept:         1 (database shop-prod.shop-pg; `apprafter db drop-generation shop -e prod --generation 1` "
        "drops it)",
        "  kept:         2 (database shop-prod.shop-pg~2; `apprafter db drop-generation shop -e prod --generation 2` "
        "drops it)"]
