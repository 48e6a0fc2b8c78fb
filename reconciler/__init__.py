"""The operator's edge: Kubernetes I/O for the reconcilers (`apprafter operator`); every decision is the core's."""
