"""The pure core: search and confirmation loops, the search space, the one decision path, statistics."""
