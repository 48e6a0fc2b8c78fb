"""The MigrationPlan CRD source (compatibility/schema/migrationplan.cue), generated like the renderer's CRDs."""

from __future__ import annotations

from renderer.crds import RENDERER_CRDS, CrdSource

MIGRATION_PLAN = CrdSource("MigrationPlan", "compatibility", "migrationplan.cue", "MigrationPlanSpec",
                           "migrationplans", ("mplan",))
ALL_CRDS = (*RENDERER_CRDS, MIGRATION_PLAN)
