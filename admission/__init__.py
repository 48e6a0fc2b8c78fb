"""Admission webhook edge: AdmissionReview in, the core's verdict out, served over TLS."""
