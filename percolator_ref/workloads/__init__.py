"""Workloads over the reference implementation: the TPC-E-style trading workload (tpce)."""
