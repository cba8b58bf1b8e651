"""Which directories are a sandbox of tuner's, and the one rule for "this server is tuner's own sandbox".

A sandbox directory is one tuner created (:func:`tuner.sandbox.stale.new_root`): its name starts with
:data:`PREFIX` and it carries :data:`OWNER_FILE`. Only a server whose data directory lies inside such a directory
may be changed with ALTER SYSTEM while it is a hot standby — the concurrency family's screen and the journal's
write-back ask this same question, so it is answered here once.
"""

from __future__ import annotations

from pathlib import Path

PREFIX = "tuner-sandbox-"
OWNER_FILE = "tuner-sandbox.json"


def is_own_sandbox(data_directory: str | None, sandbox_dir: object) -> bool:
    """``data_directory`` (a server's, as it reports it) lies inside ``sandbox_dir``, and that directory is a sandbox
    of tuner's (its name and its owner file), still there.

    Both paths are resolved, symbolic links followed, and must exist: a link cannot make a foreign data directory
    look inside the sandbox, nor a sandbox's name be borrowed. Containment is by path components
    (:meth:`pathlib.PurePath.is_relative_to`), so ``/var/tmp/sb10`` is not inside ``/var/tmp/sb1``. ``None``, an
    empty string or anything not a string (a journal entry read back from disk) is not a sandbox."""
    if not data_directory or not isinstance(sandbox_dir, str) or not sandbox_dir:
        return False
    try:
        root = Path(sandbox_dir).resolve(strict=True)
        if not root.name.startswith(PREFIX) or not (root / OWNER_FILE).is_file():
            return False
        return Path(data_directory).resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop on Python < 3.13
        return False
