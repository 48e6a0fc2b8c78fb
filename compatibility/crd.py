"""The MigrationPlan CRD source (compatibility/schema/migrationplan.cue), generated like the renderer's CRDs."""

from __future__ import annotations

from compatibility.authority import migration_plan_cel
from renderer.crds import AGE, RENDERER_CRDS, Column, CrdSource

MIGRATION_PLAN = CrdSource(
    "MigrationPlan", "compatibility", "migrationplan.cue", "MigrationPlanSpec", "migrationplans", ("mplan",),
    status_definition="MigrationPlanStatus",
    # Spec written once; phases move only along compatibility.authority's table (who moves them is the webhook's).
    patches=migration_plan_cel(),
    columns=(Column("Scope", ".spec.scope.type"), Column("Application", ".spec.scope.application.ref.name"),
             Column("Environment", ".spec.scope.application.environment"),
             Column("Class", ".spec.risks.classification"), Column("Phase", ".status.phase"),
             Column("Approved-By", ".status.approvedBy", priority=1), AGE),
)
ALL_CRDS = (*RENDERER_CRDS, MIGRATION_PLAN)
