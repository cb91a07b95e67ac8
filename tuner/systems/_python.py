"""A system that is a Python function in the user's project: `module:function`, called in process."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.config import PythonSystemConfig
from tuner.errors import ConfigError, described
from tuner.systems._base import BadReply, Rejected, System, raised


class PythonSystem(System):
    def __init__(self, config: PythonSystemConfig):
        self.name = config.entry
        self.timeout = config.timeout
        self.function = load_entry(config.python, config.path)
        # a function that does not say it is thread-safe is called by one thread at a time: a system with shared
        # state (a retriever's last query, a chain's memory) asked from several would mix their questions up
        self.one_at_a_time = contextlib.nullcontext() if config.thread_safe else threading.Lock()

    def ask(self, question: Mapping[str, str], params: Mapping[str, Any]) -> Any:
        # the call runs in a thread of its own so a hung one can be given up on after `timeout` (Python cannot stop
        # it: it runs on unseen, and its reply is dropped)
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                with self.one_at_a_time:
                    outcome["reply"] = self.function(dict(question), dict(params))
            except BaseException as exc:  # noqa: B036 - handed to the asking thread, which decides
                outcome["error"] = exc

        worker = threading.Thread(target=call, name=f"system {question.get('id')}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise BadReply(f"the system did not reply within {self.timeout:g} s (raise system.timeout for a slow "
                           f"system)")
        error = outcome.get("error")
        if isinstance(error, (Rejected, KeyboardInterrupt)):
            raise error
        if error is not None:
            raise BadReply(raised(error))
        return outcome.get("reply")


def load_entry(entry: str, path: Path | None) -> Any:
    """The function `module:function` names, imported with `path` first on sys.path; ConfigError in one line when it
    does not import, is not there, or does not take (question, params)."""
    module_name, _, function_name = entry.partition(":")
    where = f"system python:{entry}"
    if path is not None and str(path) not in sys.path:
        sys.path.insert(0, str(path))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"{where}: no module {module_name!r} in {path or 'the Python path'} (system.path "
                              f"sets the folder it is imported from)") from None
        raise ConfigError(f"{where}: importing {module_name} failed: {described(exc)}") from None
    except SystemExit as exc:  # a module that exits when imported (a script's top level): tuner would exit with it
        raise ConfigError(f"{where}: importing {module_name} called sys.exit({exc.code!r}); a system's module "
                          f"must import without running (put a script's work under `if __name__ == "
                          f"\"__main__\":`)") from None
    except Exception as exc:
        raise ConfigError(f"{where}: importing {module_name} failed: {described(exc)}") from None
    function = getattr(module, function_name, None)
    if function is None:
        raise ConfigError(f"{where}: module {module_name} has no {function_name!r}")
    if not callable(function):
        raise ConfigError(f"{where}: {function_name} is a {type(function).__name__}, not a function")
    try:
        inspect.signature(function).bind({}, {})
    except TypeError:
        raise ConfigError(f"{where}: {function_name}{inspect.signature(function)} cannot be called as "
                          f"{function_name}(question, params): a system takes the question and the trial's knobs"
                          ) from None
    except ValueError:  # a builtin without a signature: called as is
        pass
    return function
