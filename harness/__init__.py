"""longlook's harness: namespaces, the link emulator, schedules, ground truth.

Modules: ``netns`` (namespace pair and cleanup), ``link`` (the ``longlook-link``
process), ``schedule`` (typed impairment schedules), ``groundtruth`` (the
emulator's per-packet log).
"""
