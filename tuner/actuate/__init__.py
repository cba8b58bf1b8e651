from tuner.journal import Journal, SysfsWriter  # TEMP until split-sbx lands
