"""The backends' clients (their I/O: a Redis, an S3 gateway), registered in registry.py beside the cores' table."""
