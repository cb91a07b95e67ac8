"""A tuned pipeline as it transfers to a Weaviate deployment: the hybrid query's parameters, a runnable
weaviate-client (v4) snippet, and the knobs that have no Weaviate counterpart, said out loud.

tuner's relative_score and ranked fusions and its autocut are copies of Weaviate's, so alpha, fusion, limit and
auto_limit carry over as they were measured. Each knob's own facts (config.KNOBS) say whether it transfers, is
carried by the chunks or the prompt, or is lost; the export names every lost one that is active.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.config import KNOBS, WEAVIATE_FUSIONS, Bm25Config, PipelineConfig, ProjectConfig
from tuner.errors import ConfigError


@dataclass(frozen=True)
class WeaviateExport:
    params: dict[str, object]  # hybrid()'s keyword arguments
    not_transferred: list[str]  # knobs of the tuned pipeline Weaviate cannot reproduce
    snippet: str


def weaviate_export(pipeline: PipelineConfig, project: ProjectConfig, collection: str = "Chunk") -> WeaviateExport:
    """The hybrid query that reproduces `pipeline`'s retrieval in Weaviate. A fusion Weaviate lacks is refused
    (its alpha would mean something else there), and so is the user's own system (its knobs are its own: `tuner
    best -o` writes them)."""
    from tuner.evaluation.answerers import answerer_kind  # the pipeline's modules: only to export

    answerer_kind(project).refusal(project, "export")
    if pipeline.fusion not in WEAVIATE_FUSIONS:
        raise ConfigError(f"this configuration fuses with {pipeline.fusion!r}, which Weaviate does not have (only "
                          f"{' and '.join(WEAVIATE_FUSIONS)}): export another trial (--trial N), or search a space "
                          f"whose fusion choices are Weaviate's")
    params: dict[str, object] = {}
    lost = []
    for name, knob in KNOBS.items():
        value = getattr(pipeline, name)
        if knob.weaviate and value is not None:
            params[knob.weaviate] = WEAVIATE_FUSIONS[value] if name == "fusion" else value
        elif knob.lost and knob.is_active(name, pipeline, project):
            lost.append(knob.says_lost(name, pipeline))
    index = project.index_settings(pipeline)
    if index.writes:
        lost.append(f"the index ({index.describe()}) holds text the generator wrote: ingest tuner's chunks, not "
                    f"your own chunking")
    bm25 = project.backend.bm25
    if bm25 != Bm25Config() and project.backend.type != "weaviate":  # a weaviate backend's collection has them
        lost.append(f"BM25 stemmer {bm25.stemmer}, stopwords {bm25.stopwords}, k1 {bm25.k1:g}, b {bm25.b:g} "
                    f"(Weaviate's are word tokens, en, 1.2, 0.75 unless its collection is configured alike; alpha "
                    f"was tuned against these)")
    if project.backend.candidates != 100:
        lost.append(f"backend.candidates {project.backend.candidates} (Weaviate fetches 100 per side)")
    embedder = project.embedder_named(index.embedder)  # the trial's: its chunks were stored with its vectors
    if (embedder.backend, embedder.precision) != ("torch", "fp32"):
        lost.append(f"embedder {embedder.backend} {embedder.precision} (the snippet embeds questions with torch fp32: "
                    f"a close vector, not the same one)")
    return WeaviateExport(params, lost, _snippet(params, embedder.model, collection))


def _snippet(params: dict[str, object], embedder: str, collection: str) -> str:
    arguments = "".join(f"        {name}={f'HybridFusion.{value}' if name == 'fusion_type' else repr(value)},\n"
                        for name, value in params.items())
    return (
        "import weaviate\n"
        "from sentence_transformers import SentenceTransformer\n"
        "from weaviate.classes.query import HybridFusion, MetadataQuery\n\n"
        f"# the chunks were stored with tuner's vectors ({embedder}): embed the question the same way\n"
        f"embedder = SentenceTransformer({embedder!r})\n"
        'question = "your question"\n\n'
        "with weaviate.connect_to_local() as client:  # or weaviate.connect_to_weaviate_cloud(...)\n"
        f"    chunks = client.collections.get({collection!r})\n"
        "    result = chunks.query.hybrid(\n"
        "        query=question,\n"
        "        vector=embedder.encode(question, normalize_embeddings=True).tolist(),\n"
        f"{arguments}"
        "        return_metadata=MetadataQuery(score=True),\n"
        "    )\n"
        "    for chunk in result.objects:\n"
        "        print(round(chunk.metadata.score, 4), chunk.properties)\n"
    )
