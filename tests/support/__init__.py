"""Helpers that drive a real consumer of tuner's output from the tests (headless Chromium for the HTML pages)."""
