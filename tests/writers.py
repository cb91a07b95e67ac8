"""Scripted models and folders for the test-set generator's tests (tests/test_testset.py, tests/test_anchors.py):
a writer that answers from the prompt like an obliging model, one that pools gold, and the demo as files."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tuner.data import DEMO_PATH
from tuner.models.llms import LLM, Completion


class WriterLLM(LLM):
    """Writes from the prompt like an obliging model: a question naming the document, an answer from its passage;
    judges every answer supported, no single passage enough, no unanswerable question answered. Documents whose
    title starts with one of the letters `leaning` get a question that leans on its passage. `stop_after`: a Ctrl-C
    at that call."""

    name = "writer"

    def __init__(self, leaning: str = "ABCDEFGHIJKLM", stop_after: int | None = None, answers_all: bool = False):
        self.leaning, self.stop_after, self.paid = leaning, stop_after, 0
        self.answers_all = answers_all  # judges every unanswerable question answered by the corpus

    def _pay(self):
        if self.stop_after is not None and self.paid >= self.stop_after:
            raise KeyboardInterrupt
        self.paid += 1

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        self._pay()
        prompt = messages[-1]["content"]
        if REWRITE in prompt:  # a user's wording: as it was
            return Completion(json.dumps({"question": rewritten(prompt)}), 20, 10)
        title = re.search(r"Document(?: 1)?: (.+)", prompt).group(1)
        if "does NOT answer" in prompt:
            reply = {"question": f"How many people visited {title} in the winter of 1950?"}
        elif "Passage 1" in prompt:
            other = re.search(r"Document 2: (.+)", prompt).group(1)
            reply = {"question": f"What connects {title} with {other} in the records?", "answer": "Both."}
        elif title[0] in self.leaning:
            reply = {"question": f"According to the passage, what is {title}?", "answer": "A festival."}
        elif "already asked" in prompt:  # a second pass over a small corpus: another fact
            reply = {"question": f"Which year saw the largest change at {title}?", "answer": "1887."}
        else:
            passage = prompt.split("Passage:\n", 1)[1].split("\n", 2)
            reply = {"question": f"What is known about {title}?", "answer": passage[-1][:80]}
        return Completion(json.dumps(reply), 40, 12)

    def yes_probability(self, messages, reuse_prefix=False):
        self._pay()
        prompt = messages[-1]["content"]
        answered = "Proposed answer" in prompt or (self.answers_all and "Do these passages answer" in prompt)
        return Completion("0.9" if answered else "0.1", 30, 0)


#: what only the rewrite prompt says, and the question it asks to rewrite
REWRITE = "types this question into a search box:"


def rewritten(prompt: str) -> str:
    return prompt.split(REWRITE + "\n", 1)[1].split("\n", 1)[0]


def writer_on(folder: Path, llm: LLM, cache: Path, embedder):
    """A QuestionWriter over `folder`'s documents with `llm` writing and judging (RAGAS and DSPy load here)."""
    from tuner.config import ProjectConfig
    from tuner.data import load_dataset
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.models.provider import Models
    from tuner.testset.generate import QuestionWriter
    from tuner.workspace import open_workspace

    dataset = load_dataset(folder, require_questions=False)
    workspace = open_workspace(ProjectConfig(cache_dir=cache), dataset=dataset, embedder=embedder)
    return QuestionWriter(RagRunner(workspace, models=Models(llm, llm)), dataset)


def demo_as_files(folder: Path, count: int | None = None) -> Path:
    """The demo's documents as a folder of markdown files (one an HTML page): what a newcomer has."""
    folder.mkdir()
    for row in map(json.loads, (DEMO_PATH / "corpus.jsonl").read_text().splitlines()[:count]):
        if row["_id"] == "velmora":
            (folder / "velmora.html").write_text(f"<html><head><title>{row['title']}</title></head><body><nav>Home"
                                                 f"</nav><p>{row['text']}</p></body></html>")
        else:
            (folder / f"{row['_id']}.md").write_text(f"# {row['title']}\n\n{row['text']}\n")
    return folder


class PoolingLLM(WriterLLM):
    """Judges that any passage naming a question's subject answers it alone."""

    def yes_probability(self, messages, reuse_prefix=False):
        prompt = messages[-1]["content"]
        if "alone fully answer" not in prompt:
            return super().yes_probability(messages, reuse_prefix)
        self._pay()
        subject = re.search(r"Question: What is known about (.+)\?", prompt)
        passage = prompt.split("Passage:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        return Completion("0.9" if subject and subject.group(1) in passage else "0.1", 30, 0)


def anchors_file(path: Path, count: int = 10, ids=lambda doc: doc, within: int | None = None) -> Path:
    """The demo's first `count` questions as anchor questions; `ids` maps a demo document id to the corpus's;
    `within`: only questions answered by the demo's first `within` documents."""
    from tuner.data import load_dataset

    demo = load_dataset(DEMO_PATH)
    held = {d.id for d in demo.documents[:within]}
    rows = [{"question": q.text, "documents": sorted(map(ids, q.relevant_ids)), "answer": q.answers[0]}
            for q in demo.questions if q.relevant_ids and q.relevant_ids <= held][:count]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def as_files(doc: str) -> str:
    """A demo document's id once demo_as_files has made it a file and `tuner data ingest` has read it."""
    return "velmora.html" if doc == "velmora" else f"{doc}.md"
