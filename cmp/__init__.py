"""Argo CD Config Management Plugin adapter: Argo CD env -> renderer call -> YAML stream on stdout."""
