"""Every platform-service backend as a pure core on one contract (contract.py), registered in registry.py."""
