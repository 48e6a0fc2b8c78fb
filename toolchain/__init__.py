"""Finds the pinned external tools (cue, helm, cosign, ...) the project runs, and checks their versions."""
