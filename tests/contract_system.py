"""A scripted system for the system contract (tests/test_system_contract.py): its `behave` knob decides how it
replies, the same for every kind of system that serves it. Each call is logged to CONTRACT_CALLS (a file), one line
per (question id, knobs) it answered, so a test counts what reached the system."""

from __future__ import annotations

import json
import os
import time

from tuner.systems import Rejected


def answer(question: dict, params: dict) -> object:
    behave = params.get("behave", "ok")
    with open(os.environ["CONTRACT_CALLS"], "a", encoding="utf-8") as log:
        log.write(json.dumps([question["id"], params], sort_keys=True) + "\n")
    time.sleep(float(params.get("delay", 0.0)))
    if behave == "refuse":
        raise Rejected(f"k={params.get('k')} is more than this index holds")
    if behave == "raise":
        raise KeyError("embedding")
    reply = {"answer": f"the answer to {question['text']}",
             "contexts": [{"text": f"a passage about {question['text']}", "id": f"doc-{question['id']}"}, "bare"],
             "usage": {"prompt_tokens": 120, "completion_tokens": 8}}
    if behave == "no answer":
        del reply["answer"]
    elif behave == "number context":
        reply["contexts"][0] = 42
    return reply
