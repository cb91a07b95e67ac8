"""Stop latency as a user meets it: a command running in a terminal (tmux), a stop signal sent, seconds until the
shell prints its prompt line again.

Each command runs in a tmux window as `tuner …; echo END $?`; once it is busy (its progress shows a question being
worked on, or a fixed wait for a model load), the bench sends Ctrl-C (tmux send-keys C-c), or SIGTERM / SIGHUP to
the tuner process (kill), and times until `END <code>` appears on the screen. The in-process runs use the 0.5B
generator and judge (llama.cpp in this process: a stop often lands inside a native call); the endpoint runs use a
local server that answers after 3 s with `concurrency: 8` (calls in flight at the stop).

    python bench/stops.py                       # every command x signal
    python bench/stops.py --commands eval --signals INT
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fakes import FakeEndpoint  # noqa: E402  (the local OpenAI-compatible server the tests use)

TUNER = str(Path(sys.executable).with_name("tuner"))
LOCAL = {"generator": {"model": "qwen2.5-0.5b", "n_ctx": 4096}}
COMMANDS = {
    # name: (arguments, what on the screen says the command is busy)
    "optimize": (["optimize", "--config", "tuner.yaml", "--limit", "6", "--trials", "3", "--judge-check", "off",
                  "--search-space", "quick", "--study", "stops"], "trial 0"),
    "eval": (["eval", "--config", "tuner.yaml", "--limit", "6", "--metrics", "faithfulness"], ": generate"),
    "judge check": (["judge", "check", "--config", "tuner.yaml", "--limit", "6", "--quick"], "judging with"),
}
SIGNALS = {"INT": None, "TERM": signal.SIGTERM, "HUP": signal.SIGHUP}
console = Console(width=200)


def screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", session], capture_output=True,
                          text=True).stdout


def wait_for(session: str, text: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in screen(session):
            return True
        time.sleep(0.05)
    return False


def tuner_pid(folder: Path) -> int:
    found = subprocess.run(["pgrep", "-f", f"{TUNER} "], capture_output=True, text=True).stdout.split()
    for pid in found:  # the Python process in the folder, not the shell that started it there
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if Path(f"/proc/{pid}/cwd").resolve() == folder.resolve() and b"python" in Path(argv[0].decode()).name.encode():
            return int(pid)
    raise RuntimeError("the tuner process was not found")


def measure(command: str, name: str, folder: Path, busy_after: float) -> tuple[float, str]:
    args, busy = COMMANDS[command]
    session = f"stops-{int(time.time() * 1000)}"
    shell = f"cd {shlex.quote(str(folder))} && {shlex.join([TUNER, *args])}; echo END $?"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", shell + "; sleep 600"],
                   check=True)
    try:
        if not wait_for(session, busy, 600):
            raise RuntimeError(f"{command} never showed {busy!r}: {screen(session)[-800:]}")
        time.sleep(busy_after)  # inside its work, a model call most likely under way
        if re.search(r"END \d+", screen(session)):
            raise RuntimeError(f"{command} ended before the signal: lower --busy-after")
        sent = time.monotonic()
        if SIGNALS[name] is None:
            subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        else:
            subprocess.run(["kill", f"-{name}", str(tuner_pid(folder))], check=True)
        if not wait_for(session, "END ", 120):  # then its exit code
            raise RuntimeError(f"{command} did not stop: {screen(session)[-800:]}")
        took = time.monotonic() - sent
        code = re.search(r"END (\d+)", screen(session)).group(1)
        return took, code
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=list(COMMANDS))
    parser.add_argument("--signals", nargs="+", default=list(SIGNALS), choices=list(SIGNALS))
    parser.add_argument("--backends", nargs="+", default=["in-process", "endpoint"],
                        choices=["in-process", "endpoint"])
    parser.add_argument("--busy-after", type=float, default=3.0, help="seconds into the work before the signal")
    options = parser.parse_args()
    # a session of its own keeps the tmux server up: killing a server's last session takes it down, and the next
    # new-session can be refused while it goes
    subprocess.run(["tmux", "kill-session", "-t", "stops-keeper"], capture_output=True)
    subprocess.run(["tmux", "new-session", "-d", "-s", "stops-keeper", "sleep 3600"], check=True)
    table = Table(title="seconds from the stop signal to the shell's next line (tmux), exit code")
    for column in ("backend", "command", *options.signals):
        table.add_column(column, justify="left" if column in ("backend", "command") else "right")
    with FakeEndpoint("scripted", delay=3.0) as server, tempfile.TemporaryDirectory() as scratch:
        endpoint = {"backend": "openai-compatible", "base_url": server.url, "model": "m", "concurrency": 8}
        configs = {"in-process": LOCAL, "endpoint": {"generator": endpoint, "judge": endpoint}}
        for backend in options.backends:
            for command in options.commands:
                cells = []
                for name in options.signals:
                    folder = Path(scratch) / f"{backend}-{command}-{name}".replace(" ", "_")
                    folder.mkdir()
                    (folder / "tuner.yaml").write_text(yaml.safe_dump(configs[backend]))
                    took, code = measure(command, name, folder, options.busy_after)
                    cells.append(f"{took:.2f} s ({code})")
                    console.print(f"{backend} {command} SIG{name}: {cells[-1]}", highlight=False)
                table.add_row(backend, command, *cells)
    subprocess.run(["tmux", "kill-session", "-t", "stops-keeper"], capture_output=True)
    console.print(table)


if __name__ == "__main__":
    main()
