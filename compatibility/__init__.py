"""Pure core: diff and classify changes (application and platform scope) into MigrationPlans."""
