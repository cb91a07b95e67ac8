"""RAPTOR (Sarthi et al., 2024) as a chunker: the leaves are sentence windows (as `sentences` cuts them); their
embeddings are clustered, the generator summarises each cluster, and the summaries are clustered and summarised
once more. Every summary is indexed beside the leaves (the paper's "collapsed tree"), so one search sees every level.

Choices that differ from the paper, and why:
- a Gaussian mixture as the paper, on the embeddings reduced by PCA to at most 10 dimensions (the paper reduces with
  UMAP, which is not among our dependencies), each chunk in its most likely cluster (the paper lets a chunk join
  several);
- the number of clusters is the nodes / CLUSTER_SIZE where the paper picks it by BIC: what a build costs in LLM
  calls is then known before it starts (about n/6 + n/36 summaries over n leaves), which a study's cost needs.
A summary covers the documents under it, most-represented first; the id-based metrics count it as the gold ones
among them (retrieval_eval.docs).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from tuner.models.llms import LLM, PromptTooLong
from tuner.pipeline.chunking import Chunk

#: the mean number of nodes a summary covers
CLUSTER_SIZE = 6
#: summary levels above the leaves
LEVELS = 2
#: characters of a cluster's text the summariser reads (a small model's window holds ~4k tokens)
SUMMARY_INPUT_CHARS = 6000
#: tokens a summary may take
SUMMARY_TOKENS = 160

#: (the texts of a cluster) -> their summary ("" when the model wrote none)
Summarize = Callable[[Sequence[str]], str]
#: (texts) -> their embeddings
Embed = Callable[[list[str]], np.ndarray]


def summarizing(llm: LLM) -> Summarize:
    def summarize(texts: Sequence[str]) -> str:
        context, used = "", 0
        for text in texts:  # the cluster's nodes in corpus order, as many as the window holds
            if used and len(context) + len(text) > SUMMARY_INPUT_CHARS:
                break
            context, used = context + text + "\n\n", used + 1
        prompt = (f"Write a summary of the following, including as many key details as possible:\n\n"
                  f"{context[:SUMMARY_INPUT_CHARS].strip()}")
        try:
            reply = llm.chat([{"role": "user", "content": prompt}], max_tokens=SUMMARY_TOKENS).text
        except PromptTooLong:
            return ""
        return " ".join(reply.split())

    return summarize


def clusters(vectors: np.ndarray, size: int = CLUSTER_SIZE) -> list[list[int]]:
    """Groups of node positions (each in corpus order, groups by their first node); a node alone in its cluster
    gets no summary, it is already indexed."""
    count = len(vectors)
    if count < 2:
        return []
    k = math.ceil(count / size)
    if k == 1:
        return [list(range(count))]
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    reduced = PCA(min(10, count - 1, vectors.shape[1]), random_state=0).fit_transform(vectors)
    labels = GaussianMixture(k, covariance_type="diag", reg_covar=1e-4, random_state=0).fit_predict(reduced)
    groups: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        groups.setdefault(int(label), []).append(position)
    return [members for members in groups.values() if len(members) > 1]


def summaries(leaves: Sequence[Chunk], vectors: np.ndarray, summarize: Summarize, embed: Embed,
              on_summary: Callable[[int, int], None] | None = None) -> tuple[list[Chunk], np.ndarray]:
    """The summary chunks of up to LEVELS levels over `leaves` (embedded as `vectors`), and their embeddings;
    `on_summary(done, total)` after each summary of a level."""
    nodes, node_vectors = list(leaves), vectors
    under = [Counter(leaf.doc_ids) for leaf in leaves]  # per node: leaves under it per document
    written: list[Chunk] = []
    written_vectors: list[np.ndarray] = []
    for level in range(1, LEVELS + 1):
        groups = clusters(node_vectors)
        level_nodes: list[Chunk] = []
        level_under: list[Counter] = []
        for done, members in enumerate(groups, 1):
            text = summarize([nodes[i].text for i in members])
            if text:
                documents = sum((under[i] for i in members), Counter())
                covers = tuple(doc for doc, _ in documents.most_common())
                level_nodes.append(Chunk(f"raptor{level}#{len(level_nodes)}", covers[0], text, covers, level))
                level_under.append(documents)
            if on_summary:
                on_summary(done, len(groups))
        if not level_nodes:
            break
        node_vectors = embed([c.text for c in level_nodes])
        written += level_nodes
        written_vectors.append(node_vectors)
        nodes, under = level_nodes, level_under
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    return written, np.concatenate(written_vectors) if written_vectors else np.zeros((0, dim), dtype=np.float32)
