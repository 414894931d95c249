"""The deterministic simulator around the implementation: clock, network, faults, operator."""
