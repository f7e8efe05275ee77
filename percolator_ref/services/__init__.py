"""Services the protocol uses (paper §2.2-2.3): the timestamp oracle and its state file,
the lock service holding liveness tokens, and the clocks."""
