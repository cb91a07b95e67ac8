"""A system with shared state, as many are written (a retriever object that remembers its last query): called from
two threads at once it answers one question with another's retrieval. Its log says how many calls overlapped."""

from __future__ import annotations

import threading
import time

last_query = {"text": ""}
in_call = {"now": 0, "most": 0}
_count = threading.Lock()


def answer(question: dict, params: dict) -> dict:
    with _count:
        in_call["now"] += 1
        in_call["most"] = max(in_call["most"], in_call["now"])
    last_query["text"] = question["text"]  # the retriever's state
    time.sleep(0.05)
    retrieved = last_query["text"]  # another thread may have moved it
    with _count:
        in_call["now"] -= 1
    return {"answer": f"about {retrieved}", "contexts": [{"text": retrieved, "id": question["id"]}]}
