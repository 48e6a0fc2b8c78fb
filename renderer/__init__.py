"""Pure core: CUE Application -> validated, per-environment, deterministic Kubernetes objects."""
