"""Platform stack: CUE source -> reproducible umbrella Helm chart -> OCI artifact -> cosign signature."""
