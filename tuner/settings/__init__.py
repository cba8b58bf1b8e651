"""Settings: what the operator says, read and checked once — ``tuner.toml`` < ``TUNER_*`` < flags (:mod:`.config`:
the models, :mod:`.config_load`: reading them), the policies (:mod:`.policy`), and the small languages inside them:
durations (:mod:`.durations`), maintenance windows and crontab schedules (:mod:`.schedule`), command templates
(:mod:`.placeholders`); TOML read as user input (:mod:`.tomlfile`) and written back (:mod:`.tomlwriter`)."""
