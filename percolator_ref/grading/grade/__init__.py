"""``percolator grade``: the grader, its read policy, results, submissions, answers, generation."""
