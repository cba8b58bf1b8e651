"""Probes: workloads, cache control and measurement."""
