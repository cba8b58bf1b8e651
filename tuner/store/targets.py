"""A target's identity in the store (its id, the key of its advisory lock), and a target recorded before any of its
sessions is (the daemon watches it, and its drift events refer to it)."""

from __future__ import annotations

import hashlib

from tuner.store.backend import Repository, now


def target_id(system_identifier: str | None, data_directory: str | None, label: str) -> str:
    """A target's identity: its system identifier and data directory (a clone shares the first, not both)."""
    basis = f"{system_identifier}|{data_directory}" if system_identifier else f"label|{label}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def lock_key(target: str) -> int:
    """A signed 64-bit advisory-lock key for a target id."""
    return int.from_bytes(hashlib.sha256(f"tuner-target|{target}".encode()).digest()[:8], "big", signed=True)


class Targets(Repository):
    """The targets the store knows."""

    async def ensure(self, target: str, system_identifier: str | None, data_directory: str | None,
                     label: str) -> None:
        """Record a target the daemon watches before any of its sessions is stored (drift events refer to it)."""
        await self.db.write([(
            "INSERT INTO targets (id, system_identifier, data_directory, label, first_seen, last_seen) "
            "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO UPDATE SET last_seen = $5",
            (target, system_identifier, data_directory, label, now()))])
