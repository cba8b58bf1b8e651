"""Knobs: the catalogue of settings tuner knows (as data) and the search spaces built from it."""
