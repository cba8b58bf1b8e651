"""Rendering a report for people (terminal table) and for config management (SQL, JSON)."""
