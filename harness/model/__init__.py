"""The TLA+ model's bridge: running TLC (tlc), traces as TLA+ modules (tracefile),
trace validation (validate) and model coverage (coverage). See docs/model.md."""
