"""Notifications and observers (paper §2.4): the notification protocol and one observer
run (:mod:`.notifications`), and the worker that scans for notifications (:mod:`.worker`)."""
from .notifications import *  # noqa: F401,F403  (the old path percolator_ref.observers)
