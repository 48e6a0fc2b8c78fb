"""Registers the MigrationPlan CRD (from compatibility/schema/migrationplan.cue) with the renderer's CRD list."""

from __future__ import annotations

from renderer.crds import register_schema

register_schema("MigrationPlan", "migrationplan.cue", "MigrationPlanSpec", "migrationplans", ["mplan"],
                package_dir="compatibility")
