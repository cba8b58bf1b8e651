"""tuner — a PostgreSQL I/O auto-tuner that measures before it recommends."""

__version__ = "0.1.0"
