"""`manifests` mode: the Kubernetes objects the reconciler applies for one environment of an Application."""
