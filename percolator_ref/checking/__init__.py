"""Checking what ran: the recorded history of transactions and the snapshot-isolation
checker (:mod:`.checker`)."""
