"""The endpoint contract without Docker: any local executable that follows it runs
directly inside the testbed's namespaces (`--impl-cmd CMD`, or an entry with
"command" in docker/stacks.json), so implementers can test a working tree before
they build an image.

A command gets the QUIC Interop Runner's variables (ROLE, TESTCASE, REQUESTS,
SSLKEYLOGFILE, QLOGDIR, SERVER_PARAMS / CLIENT_PARAMS), the server listens on UDP
443 as in the runner, and the runner's directories come as variables, since a local
process cannot have /www mounted: LL_WWW (/www), LL_DOWNLOADS (/downloads) and
LL_CERTS (/certs). The link is up before either role starts, so there is no `sim`
to wait for: LL_NETWORK_READY=1 says so. docs/docker.md has the whole table.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from pathlib import Path

from harness.endpoints import Stack, StackError

#: The command given by --impl-cmd (the pytest plugin and the CLI set it), read for every run.
IMPL_CMD_ENV = "LONGLOOK_IMPL_CMD"


def parse(text: str, where: str, base: Path | None = None) -> tuple[str, ...]:
    """The argv of command line `text`, its program made absolute (the endpoint runs
    in its role's directory, not where it was named). `where` names the input in
    errors; relative program paths are taken from `base` (default: the working
    directory). StackError says what is wrong and how to fix it."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise StackError(f"{where}: cannot split {text!r} into words ({e}); check its quotes") from None
    if not argv:
        raise StackError(f"{where}: the command is empty; give the program that follows docs/endpoints.md")
    program = argv[0]
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else (base or Path.cwd()) / program
        if not path.is_file() or not os.access(path, os.X_OK):
            state = "is not an executable file" if path.exists() else "does not exist"
            raise StackError(f"{where}: {path} {state}; give a built program (chmod +x for a script)")
        program = str(path.resolve())
    else:
        found = shutil.which(program)
        if found is None:
            raise StackError(f"{where}: {program!r} is not on PATH; give its path, e.g. ./{program}")
        program = found
    return (program, *argv[1:])


def with_command(stack: Stack, text: str, where: str = "--impl-cmd") -> Stack:
    """`stack` (its CC list and qlog dialect) run through the command `text` instead of its own endpoint."""
    return dataclasses.replace(stack, command=parse(text, where))


def describe(stack: Stack) -> str:
    """How a command stack is named in messages: its command line, shortened."""
    line = shlex.join(stack.command or ())
    return line if len(line) <= 120 else line[:117] + "..."
