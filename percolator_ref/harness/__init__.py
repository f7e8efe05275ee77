"""Harnesses around the stores: local server processes, client worker processes, crash helpers."""
