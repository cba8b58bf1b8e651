"""Actuating: every persistent change tuner makes, journaled before it is made and put back afterwards.

* :mod:`.journal` — the journal file (owner checks, restoring, recovery after a crash, ``--forget``);
* :mod:`.batch` — a restore in batches: one server's entries over one connection;
* :mod:`.owner` — whether the tuner that wrote a journal still runs;
* :mod:`.journal_lock` — the lock that lets one tuner at a time hold the journal;
* :mod:`.journal_check` — what a journal must look like to be acted on (damaged or crafted ones are refused);
* :mod:`.sysfs` — the ``sysfs`` actuator (:class:`SysfsWriter`: directly as root, or a privileged helper command);
* :mod:`.alter_system` — the ``alter_system`` actuator (a line of the staging server's ``postgresql.auto.conf``);
* :mod:`.entry` — what they share: :class:`JournalError`, :class:`JournalInvalid` and :class:`Restored`.
"""

from tuner.actuate.entry import JournalError, JournalInvalid, Restored
from tuner.actuate.journal import Journal
from tuner.actuate.owner import boot_id, owner_alive, process_start
from tuner.actuate.sysfs import SysfsWriter

__all__ = ["Journal", "JournalError", "JournalInvalid", "Restored", "SysfsWriter", "boot_id", "owner_alive",
           "process_start"]
