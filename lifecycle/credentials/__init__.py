"""SourceCredentials (spec §3.12), decided without I/O: what one may say, what it covers and derives, whether its
halves work, which of its changes wait for a MigrationPlan, its backends' material, and one pass of its controller."""
