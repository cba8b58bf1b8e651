"""What tuner reports, as data: a session's :class:`~tuner.report.model.Report` and the values it is made of
(:mod:`.model`), the families' sections of a policy and a report split among them (:mod:`.by_family`), a report
read back checked like user input (:mod:`.validate`, from a file: :mod:`.file`), outside text shown on one line
(:mod:`.text`), and what ``tuner check`` finds (:mod:`.preflight`). No rendering: that is :mod:`tuner.emit`."""
