"""The target: how tuner connects to a PostgreSQL server, what it learns about it, and whether it may probe it."""
