"""Actuating: every persistent change tuner makes, journaled before it is made and put back afterwards.

* :mod:`.journal` — the journal file (format, owner and lock checks, restoring and recovery after a crash);
* :mod:`.sysfs` — the ``sysfs`` actuator (:class:`SysfsWriter`: directly as root, or a privileged helper command);
* :mod:`.alter_system` — the ``alter_system`` actuator (a line of the staging server's ``postgresql.auto.conf``);
* :mod:`.entry` — what they share: :class:`JournalError` and :class:`Restored`.
"""

from tuner.actuate.entry import JournalError, Restored
from tuner.actuate.journal import Journal, boot_id, owner_alive, process_start
from tuner.actuate.sysfs import SysfsWriter

__all__ = ["Journal", "JournalError", "Restored", "SysfsWriter", "boot_id", "owner_alive", "process_start"]
