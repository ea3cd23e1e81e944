"""Background and long-running jobs: the durable task queue worker and re-embedding."""
