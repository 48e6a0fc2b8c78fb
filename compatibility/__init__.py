"""Pure core: diff and classify changes (application and platform scope) into MigrationPlans.

Public API: application.deployment/classify/plan, platform.PlatformChange/roll_up_platform,
plan.roll_up/spec_hash/plan_json, migrationplan.migration_plan, text.render_text (docs/plan.md).
"""
