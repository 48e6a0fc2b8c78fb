"""A domain-free controller runtime on lightkube: kubeconfig, discovery, a dict client, informers, a work queue,
leader election, a manager, probes, events and metrics. It knows no AppRafter kind and imports nothing of ours
above toolchain/ (tests/test_layers.py holds that)."""
