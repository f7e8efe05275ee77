"""What runs beside the student's code, in the sandboxed child (and in the notebook's self-check)."""
