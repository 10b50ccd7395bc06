"""What the properties judge with: one example run and observed (``runner``: the
``longlook`` fixture's ``run()`` and the Observation it yields), the measures drawn
from a trace and the ground truth (``analysis``), bounds derived from a schedule
(``bounds``), the Hypothesis profile in force (``profiles``) and the recorded findings
(``findings``, from spec/findings.toml). It reads runs and observations; it never
starts a testbed itself, and nothing below it imports it."""
