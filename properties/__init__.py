"""longlook's properties: one file per concern, each test a rule with its source."""
