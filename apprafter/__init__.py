"""The `apprafter` command: a thin front door that maps argv onto the core libraries."""
