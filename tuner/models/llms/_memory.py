"""Memory for in-process models: what a GGUF model takes once loaded, and which models stay loaded. A study whose
generator knob names several GGUF models loads each on first use; one that would not fit beside the others
unloads the least recently used first (it loads again when next asked), so two models that do not fit together
are never both resident.

A loaded model's footprint is estimated before it loads, from its file and header: llama.cpp maps the weights and
keeps a repacked copy of most of them for its CPU kernels (measured here at n_ctx 4096: 0.5B Q4_K_M +645 MiB for a
469 MiB file, 1.5B +1,827 MiB for 1,066 MiB), so twice the file, plus the KV cache at n_ctx, plus the prefix states
fast decoding keeps (at most its `prefix_memory`)."""

from __future__ import annotations

import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from tuner.errors import ConfigError
from tuner.models.llms._llama_decoding import STATE_BUDGET_MIB

log = logging.getLogger(__name__)

#: bytes the loaded models may take together; unset: what the machine has available
BUDGET_ENV = "TUNER_MODEL_MEMORY"
GIB = 1 << 30


def prefix_budget(decoding: str, prefix_memory: int) -> int:
    """Bytes the saved prompt prefixes may take: `prefix_memory` MiB under fast decoding, none under plain."""
    return prefix_memory << 20 if decoding == "fast" else 0


def footprint(path: Path, n_ctx: int, decoding: str, prefix_memory: int = STATE_BUDGET_MIB) -> int:
    """Bytes a GGUF model takes loaded with `n_ctx` and its saved prefixes (see the module's note)."""
    header = read_header(path)
    arch = str(header.get("general.architecture", ""))

    def number(key: str, default: int = 0) -> int:
        value = header.get(f"{arch}.{key}", default)
        return value if isinstance(value, int) else default

    heads = max(1, number("attention.head_count", 1))
    head_size = number("embedding_length") // heads
    kv_cache = 2 * number("block_count") * n_ctx * number("attention.head_count_kv", heads) * head_size * 2  # f16
    return 2 * path.stat().st_size + kv_cache + prefix_budget(decoding, prefix_memory)


#: GGUF value types: struct formats of the scalars; 8 is a string, 9 an array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
#: the header keys a footprint reads (the rest, the tokenizer's vocabulary above all, is skipped)
_WANTED = ("general.architecture", ".block_count", ".embedding_length", ".attention.head_count",
           ".attention.head_count_kv")


class NotGGUF(ValueError):
    pass


def read_header(path: Path) -> dict[str, object]:
    """The scalar metadata at the head of a GGUF file, up to the keys a footprint needs. Raises NotGGUF for a file
    that is not one (no magic, or a header cut short)."""
    import struct

    found: dict[str, object] = {}
    with path.open("rb") as handle:
        def read(fmt: str):
            size = struct.calcsize("<" + fmt)
            data = handle.read(size)
            if len(data) < size:
                raise NotGGUF(f"{path}: the GGUF header is cut short")
            return struct.unpack("<" + fmt, data)[0]

        def text() -> str:
            return handle.read(read("Q")).decode("utf-8", "replace")

        def value(kind: int):
            if kind in _SCALARS:
                return read(_SCALARS[kind])
            if kind == 8:
                return text()
            if kind == 9:
                item, count = read("I"), read("Q")
                if item in _SCALARS:
                    handle.seek(count * struct.calcsize(_SCALARS[item]), 1)
                else:
                    for _ in range(count):
                        value(item)
                return None
            raise NotGGUF(f"{path}: unknown GGUF value type {kind}")

        if handle.read(4) != b"GGUF":
            raise NotGGUF(f"{path}: not a GGUF file (it does not start with the GGUF magic)")
        read("I")  # version
        read("Q")  # tensors
        for _ in range(read("Q")):
            key = text()
            found[key] = value(read("I"))
            if all(any(k.endswith(w) for k in found) for w in _WANTED):
                break
    return found


def available() -> int:
    """Bytes the machine can give without swapping (MemAvailable), or the `TUNER_MODEL_MEMORY` budget if set."""
    budget = os.environ.get(BUDGET_ENV)
    if budget:
        return parse_size(budget)
    try:
        meminfo = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:  # not Linux: no figure to hold models to
        return 1 << 62
    found = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M)
    return int(found.group(1)) * 1024 if found else 1 << 62


def room_said(room: int) -> str:
    """What holds models to `room` bytes, and the way out, as a refusal ends."""
    budget = os.environ.get(BUDGET_ENV)
    if budget:
        return f"{BUDGET_ENV}={budget} allows {gib(room)}: choose smaller models (or raise {BUDGET_ENV})"
    return (f"this machine has {gib(room)} available: choose smaller models (or set {BUDGET_ENV} if more is free "
            f"than it seems)")


def parse_size(text: str) -> int:
    """`3G`, `2.5GiB`, `800M` or a number of bytes."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text, re.I)
    if not found:
        raise ConfigError(f"{BUDGET_ENV}={text!r}: expected a size such as 6G or 800M")
    return int(float(found.group(1)) * 1024 ** "_kmgt".index((found.group(2) or "_").lower()))


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


class Resident:
    """The in-process models in memory, least recently used first, with their footprints."""

    def __init__(self) -> None:
        self._models: OrderedDict[int, tuple[int, Callable[[], None], str]] = OrderedDict()

    def make_room(self, need: int, name: str) -> None:
        """Before a model of `need` bytes loads: unload the least recently used until it fits in what is available
        now plus what they hold (all of them, if it fits beside none)."""
        budget = parse_size(os.environ[BUDGET_ENV]) if os.environ.get(BUDGET_ENV) else self.held + available()
        while self._models and self.held + need > budget:
            _, (size, unload, other) = self._models.popitem(last=False)
            log.info(f"unloading {other} ({gib(size)}) to make room for {name} ({gib(need)})")
            unload()

    def used(self, key: int, size: int, unload: Callable[[], None], name: str) -> None:
        self._models[key] = (size, unload, name)
        self._models.move_to_end(key)

    def forget(self, key: int) -> None:
        self._models.pop(key, None)

    @property
    def held(self) -> int:
        return sum(size for size, _, _ in self._models.values())

    def __contains__(self, key: int) -> bool:
        return key in self._models


#: every in-process model of this process
RESIDENT = Resident()
