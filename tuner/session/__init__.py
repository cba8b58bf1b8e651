"""The session flow: one tuning session from start to end (:mod:`.runner`), the servers it may probe, learnt and
cleared (:mod:`.endpoints`), ``tuner check``: what a session would decide, decided the same way and nothing changed
(:mod:`.check`), and the stop request the session checks between probes (:mod:`.stop`)."""
