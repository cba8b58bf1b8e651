-- A setting's value in this session, as set_config takes it back (tuner.probes.workload.own_settings).
SELECT current_setting($1)
