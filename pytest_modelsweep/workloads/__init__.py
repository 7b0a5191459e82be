"""Workloads: what to send to an endpoint, and how its answers become records."""
