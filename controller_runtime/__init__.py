"""A domain-free controller runtime on lightkube: kubeconfig, discovery, a dict client, informers, a work queue,
leader election, a manager, probes, events, metrics and the write steps of a reconcile (ensure, the status, exact
prune, finalizers). It knows no kind of the program it runs, names no product (metric prefix, logger root and Lease
name are the program's: telemetry.py) and imports nothing of ours above toolchain/ (tests/test_layers.py holds that).
"""
