"""A system that is a program, in any language: run once per question in the config file's folder, the request as
JSON on its stdin (`{"question": {"id", "text"}, "params": {...}}`), the reply as JSON on its stdout; exit 3 refuses
the knobs (its last stderr line says why), any other failing exit fails that question."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tuner.config import CommandSystemConfig
from tuner.errors import ConfigError
from tuner.systems._base import BadReply, BadShape, Rejected, System

#: the exit status by which a program refuses the trial's knobs
REFUSED = 3


class CommandSystem(System):
    def __init__(self, config: CommandSystemConfig, argv: Sequence[str] | None = None):
        """`argv`: what runs, where a subclass runs the command otherwise (the config's `command` by default)."""
        self.name = config.entry
        self.timeout = config.timeout
        self.folder = config.path
        self.argv = list(argv or config.command)
        program, beside = self.argv[0], Path(self.folder or ".") / self.argv[0]
        if shutil.which(program) is None:
            if not beside.is_file():
                raise ConfigError(f"system {config.entry}: no program {program!r} on PATH or in "
                                  f"{beside.parent.absolute()}")
            self.argv[0] = str(beside.absolute())  # a script beside the config: run as its path, not looked up

    def ask(self, question: Mapping[str, str], params: Mapping[str, Any]) -> Any:
        request = json.dumps({"question": dict(question), "params": dict(params)})
        try:
            done = subprocess.run(self.argv, input=request, capture_output=True, text=True, timeout=self.timeout,
                                  cwd=self.folder)
        except subprocess.TimeoutExpired:  # run() has killed it
            raise BadReply(f"the system did not reply within {self.timeout:g} s (raise system.timeout for a slow "
                           f"system)") from None
        if done.returncode == REFUSED:
            raise Rejected(_last_line(done.stderr) or f"the command exited {REFUSED}: it refuses these knobs")
        if done.returncode:
            raise BadReply(f"the command exited {done.returncode}: {_last_line(done.stderr) or 'it said nothing'}")
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            shown = _last_line(done.stdout)
            raise BadShape(f"the reply is not JSON ({shown[:80]!r}); the command prints its reply alone on stdout"
                           if shown else "the command printed nothing on stdout") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
