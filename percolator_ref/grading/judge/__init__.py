"""The trusted side: the world that owns every piece of state, the checks, their verdicts."""
