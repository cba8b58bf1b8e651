"""Knob families: each plans, probes, confirms and recommends one group of knobs."""
