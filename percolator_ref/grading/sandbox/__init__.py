"""The grading child's lockdown (its entry, Landlock, privileges) and the parent's launcher."""
