"""Root pytest configuration.

The exercise notebooks hold stubs that raise NotImplementedError by design: learners fill
them in, the grader (``python -m minitransformer.grading``) runs them. Their worked
versions in ``solutions/`` are what nbval executes.
"""

# solutions/_drafts holds tasks not yet merged into a solution notebook: not run either.
collect_ignore_glob = ["exercises/*", "solutions/_drafts/*"]
