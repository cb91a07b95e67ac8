"""People's labels of real answers as a labels file `tuner judge check --labels` and bench/judge.py read: RAGTruth's
claim-level test split, as published processed in augustoafleal/ragtruth-publichearingbr-nli
(`data/processed/ragtruth_textual/test.jsonl`: one JSON line per claim of an answer written by GPT-4, GPT-3.5,
Llama-2 7/13/70B or Mistral-7B to a CNN/DM or recent-news summary task or an MS MARCO question, with the four passages
of its source nearest the claim and a word-level human label folded into "hallucinated or not").

One label per claim: `supported` is the people's verdict (a claim they marked hallucinated is not supported), the
claim is the answer, and its passages are the contexts (empty ones left out). Claims whose truth the people only
implied (`implicit_true`) or whose label rests on a missing reference (`due_to_null`) are left out, as they are not
a plain verdict on the claim against its passages. The task and the model that wrote the claim ride along, so
bench/judge.py can break figures down by them. The validation split is the release measurement: it is refused.

The data stays where bench/ reads it from, never in the repository: download test.jsonl where the network reaches
(or read it in pages; every complete line of a page is a claim), then

    python bench/ragtruth.py test.jsonl --out ~/.cache/tuner/datasets/ragtruth/dev-labels.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

TASKS = ("QA", "Summary")


def claims(path: Path) -> list[dict]:
    """Every complete claim line of `path` (a page's torn first and last lines are not claims: skipped)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and {"example_id", "claim", "label", "evidence"} <= row.keys():
            out.append(row)
    return out


def label(row: dict) -> dict:
    """A claim as a line of a labels file (tuner.evaluation.labels.Label's fields, and where it came from)."""
    return {"key": f"ragtruth:{row['example_id']}", "question_id": str(row["example_id"]),
            "supported": not row["label"], "trial": None, "question": "", "answer": row["claim"],
            "contexts": [text for text in row["evidence"] if text.strip()],
            "task": row.get("task_type"), "writer": row.get("generator_model")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="RAGTruth's processed test.jsonl (or pages of it)")
    parser.add_argument("--out", type=Path, required=True, help="the labels file to write")
    args = parser.parse_args()
    if "validation" in args.source.name:
        sys.exit("error: the validation split is the release measurement; build the development set from test.jsonl")
    rows = [r for r in claims(args.source) if r.get("task_type") in TASKS
            and not r.get("implicit_true") and not r.get("due_to_null")]
    if not rows:
        sys.exit(f"error: {args.source}: no RAGTruth claim line (example_id, claim, label, evidence)")
    labels = list({row["example_id"]: label(row) for row in rows}.values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in labels), encoding="utf-8")
    unsupported = Counter(x["task"] for x in labels if not x["supported"])
    print(f"{len(labels)} claims ({', '.join(f'{t} {n}' for t, n in Counter(x['task'] for x in labels).items())}), "
          f"{sum(unsupported.values())} hallucinated ({', '.join(f'{t} {n}' for t, n in unsupported.items())}) "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
