"""Leaves a namespace pair and a running emulator behind when SIGKILLed.

Used by the cleanup test: it creates a pair and starts ``longlook-link``,
prints ``{"client": .., "server": .., "link_pid": ..}`` and sleeps. Killing
this process with SIGKILL skips every ``finally``, exactly like a crashed run,
so what it made is left for ``harness.testbed.netns.sweep_stale``. Its lifeline is
off (harness/testbed/lifeline.py): it stands for a run killed together with its
reaper, whose leftovers only the sweep removes.
"""

import json
import os
import sys
import time

os.environ["LONGLOOK_LIFELINE"] = "off"

from harness.testbed.link import Link
from harness.testbed.netns import namespace_pair
from harness.schedule import LinkSettings, Schedule


def main(workdir: str) -> None:
    """Create the pair and the link, report them, then wait to be killed."""
    schedule = Schedule.constant(seed=1, settings=LinkSettings(delay_us=1000))
    with namespace_pair() as (client, server):
        with Link(schedule, client, server, workdir) as link:
            print(json.dumps({"client": client, "server": server, "link_pid": link.pid}), flush=True)
            time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1])
