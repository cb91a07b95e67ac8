"""Project configuration: one YAML file, validated by pydantic, with one-line errors.

A project config says where the data is and how to index it (dataset, chunking, embedder,
backend, cache) and which pipeline configuration to run (`pipeline:` — the knobs a study tunes).
Relative paths inside a file are resolved against the file's own folder.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from tuner.errors import ConfigError, first_line
from tuner.files import refuse_special
from tuner.legacy import FLAT_LLM_DEFAULTS, UNNAMED_BACKEND, pipeline_as_now
from tuner.metrics import DEFAULT_METRICS, MetricName
from tuner.text import CHUNK_WORDS

log = logging.getLogger(__name__)

FusionType = Literal["relative_score", "ranked", "zscore", "dbsf"]
#: the fusions a Weaviate hybrid query offers, by their HybridFusion names; the others are tuner's own
WEAVIATE_FUSIONS = {"relative_score": "RELATIVE_SCORE", "ranked": "RANKED"}
#: Weaviate's fixed k in ranked fusion's weight / (rank + k)
WEAVIATE_RANK_CONSTANT = 60


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data: Any) -> Any:
        """`top_k: true` is a typo, not 1: pydantic's lax mode would take it (and YAML's yes/no)."""
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                if isinstance(value, bool) and field is not None and _numeric(field.annotation):
                    raise ValueError(f"{name}: expected a number, got {str(value).lower()}")
        return data


def _http_url(value: str) -> str:
    """An http(s) URL a client can open: a scheme, a host, and a port that is a number (urllib and httpx would
    otherwise fail at the first call, as "cannot reach" after every retry or as a defect)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - it raises for a port that is no number
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s)://host[:port]/... URL")
    return value


#: an http(s) URL, checked as the clients will read it
HttpUrl = Annotated[str, AfterValidator(_http_url)]


def _numeric(annotation: Any) -> bool:
    """int or float, alone or in a union (`int | None`), and not bool."""
    if annotation in (int, float):
        return True
    args = getattr(annotation, "__args__", ())
    return bool not in args and any(a in (int, float) for a in args)


class DatasetConfig(_Strict):
    path: Path | None = Field(None, description="dataset folder or file; none = the bundled demo")
    format: Literal["auto", "beir", "ragas", "hotpotqa"] = "auto"
    limit: int | None = Field(None, ge=1, description="use only the first N questions")
    holdout: float | None = Field(None, ge=0, lt=1, description="share of questions a study holds out for its "
                                  "verdict; none = 0.3 from 20 questions on, else 0")


ChunkerName = Literal["words", "sentences", "sections", "raptor"]
StemmerName = Literal["none", "english"]
ContextualName = Literal["none", "title", "title_path", "llm"]
QueryName = Literal["none", "hyde", "decomposition", "multi_query"]


class ChunkingConfig(_Strict):
    """The project's index settings; a pipeline's chunk_size, chunk_overlap, chunker and contextual override them
    (a study can search them: each distinct index is built once)."""

    size: int = Field(150, ge=8, description="words per chunk (150 words stay inside MiniLM's 256-token window)")
    overlap: int = Field(30, ge=0, description="words shared by consecutive chunks (sentences and sections: the "
                         "last whole sentences of the chunk before, at most two, within this many words)")
    chunker: ChunkerName = Field("words", description="words = fixed word windows; sentences = windows cut at "
                                 "sentence ends; sections = split at markdown headings and paragraph breaks, then "
                                 "packed to size; raptor = sentence windows plus generator-written summaries of "
                                 "clusters of them, two levels (RAPTOR)")
    contextual: ContextualName = Field("title", description="what each chunk carries about its document: none, its "
                                       "title (a first line), title_path (title and heading path), or llm (a "
                                       "sentence the generator writes per chunk, situating it in its document)")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class IndexSettings(_Strict):
    """What one index is built with: a project's chunking and BM25 stemmer, with a pipeline's overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_size: int
    chunk_overlap: int
    chunker: ChunkerName
    stemmer: StemmerName
    contextual: ContextualName
    #: the model the chunks' vectors come from: an index per embedder, its vectors cached under the model's name
    embedder: str

    @property
    def writes(self) -> bool:
        """Whether building this index calls the generator (LLM-written contexts, RAPTOR's summaries)."""
        return any(str(value) in KNOBS[name].generator for name, value in self)

    def describe(self) -> str:
        """"words 150/30, stemmer none, contextual title, embedder all-MiniLM-L6-v2": the chunking, then every other
        setting by name (an index knob added later is said with no change here)."""
        rest = [f"{name.removeprefix('chunk_')} {value}" for name, value in self
                if name not in ("chunker", "chunk_size", "chunk_overlap")]
        return ", ".join([f"{self.chunker} {self.chunk_size}/{self.chunk_overlap}", *rest])


class EmbedderConfig(_Strict):
    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers name or local path")
    backend: Literal["torch", "openvino"] = Field(
        "torch", description="sentence-transformers' inference backend; openvino (pip install 'rag-tuner[openvino]') "
        "exports the model once; each backend's and precision's vectors are cached apart")
    precision: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "fp32", description="auto: bf16 on CPUs with AMX/AVX512-BF16 (2.4x faster here, same nDCG@10, but a "
        "vector depends a little on its batch), fp32 elsewhere; int8: torch's dynamic quantisation or OpenVINO's "
        "int8 weights")
    batch_size: int = Field(32, ge=1)
    threads: int | None = Field(None, ge=1, description="inference threads; unset: the backend's default")


class Bm25Config(_Strict):
    """How the keyword index tokenises and scores; a change re-indexes, so these are not trial knobs."""

    stemmer: Literal["none", "english"] = Field(
        "none", description="none = Weaviate's word tokenisation (a tuned alpha transfers to Weaviate); english = "
        "Snowball (Porter 2) stems, as the BM25 of most RAG toolkits")
    stopwords: Literal["en", "none"] = Field("en", description="English stopwords left out of queries and chunks")
    k1: float = Field(1.2, gt=0, description="term-frequency saturation (Weaviate: 1.2)")
    b: float = Field(0.75, ge=0, le=1, description="length normalisation (Weaviate: 0.75)")


class WeaviateConfig(_Strict):
    """Where the weaviate backend keeps the chunks. The API key is read from the environment only (never a file)."""

    url: str | None = Field(None, description="http(s)://host[:port] of the REST API; unset: $WEAVIATE_URL")
    grpc_port: int = Field(50051, ge=1, le=65535, description="the gRPC port (Weaviate Cloud: 443)")
    grpc_host: str | None = Field(None, description="the gRPC host when it is not the URL's host")
    api_key_env: str = Field("WEAVIATE_API_KEY", description="the environment variable holding the API key, if any")
    collection_prefix: str = Field("Tuner", pattern=r"^[A-Z][A-Za-z0-9_]*$",
                                   description="collections are named PREFIX_<corpus fingerprint>")


class BackendConfig(_Strict):
    type: Literal["embedded", "weaviate"] = Field(
        "embedded", description="embedded = in-process (numpy + bm25s); weaviate = a Weaviate server (weaviate-client "
        "v4), ingested with tuner's vectors")
    candidates: int = Field(100, ge=1, description="candidates fetched per side before fusion (Weaviate: 100)")
    bm25: Bm25Config = Bm25Config()
    weaviate: WeaviateConfig = WeaviateConfig()


class GraphConfig(_Strict):
    links: Literal["auto", "titles", "entities", "both"] = Field(
        "auto", description="what a hop follows: a chunk naming another document's title to that document's lead "
        "(titles), capitalised names shared by chunks (entities), or both; auto = titles when the corpus has any "
        "such link, else entities")
    max_entity_share: float = Field(
        0.05, gt=0, le=1, description="entities in more than this share of chunks are too common to link"
    )


class RerankerConfig(_Strict):
    cross_encoder_model: str | None = Field(None, description="name or path of a sentence-transformers CrossEncoder")
    embedding_midpoint: float = Field(0.42, description="cosine at which the embedding reranker is 50% confident")
    embedding_temperature: float = Field(0.08, gt=0, description="cosine spread of the embedding reranker's sigmoid")


class _LLMSettings(_Strict):
    """What every LLM backend has. A backend's own settings live on its own class, so a setting belongs to the
    backend that reads it (`models/llms` maps each backend to its factory)."""

    model: str = Field("qwen2.5-1.5b", description="named local model, GGUF path, or the endpoint's model name")
    max_tokens: int | None = Field(None, ge=1, description="completion budget per call (default: 384 for answers, "
                                                            "1024 for judge verdicts, which list every statement)")

    @model_validator(mode="before")
    @classmethod
    def _other_backends_settings(cls, data: Any, info: ValidationInfo) -> Any:
        """Another backend's setting is refused in one line. A record tuner wrote (study.json: `record` in the
        context) may hold a flat dump from before the settings were typed by backend: its other backends' keys did
        nothing then, and are dropped (with a warning when not at their old default), so old studies load."""
        if not isinstance(data, dict):
            return data
        record = bool(info.context and info.context.get("record"))
        for key in data:
            owner = next((other for other in LLM_BACKENDS if key in other.model_fields), cls)
            if key not in cls.model_fields and owner is not cls and not (record and key in FLAT_LLM_DEFAULTS):
                raise ValueError(f"{key} is a setting of backend {owner.tag()} only")
        foreign = {key: value for key, value in data.items() if key not in cls.model_fields and record
                   and key in FLAT_LLM_DEFAULTS}
        for key, value in foreign.items():
            if value != FLAT_LLM_DEFAULTS[key]:
                log.warning(f"{key} is not a setting of LLM backend {data.get('backend', UNNAMED_BACKEND)}: ignored")
        return {key: value for key, value in data.items() if key not in foreign}

    @classmethod
    def tag(cls) -> str:
        """The `backend:` value that names this class."""
        return cls.model_fields["backend"].default

    @model_serializer(mode="wrap")
    def _always_name_the_backend(self, handler: Any) -> Any:
        """A dump without defaults (`tuner best --out`) still says which backend: without it, an endpoint's config
        would load back as llama.cpp."""
        data = handler(self)
        return {"backend": self.backend, **data} if isinstance(data, dict) else data


#: `speculative` values that name no draft model (any other names one, or its GGUF file)
NO_DRAFT_MODEL = ("none", "prompt-lookup")
#: the most MiB of prompt prefixes a model may keep (64 GiB): a larger budget is a typo, not a machine
MOST_PREFIX_MEMORY = 65536


class LlamaCppConfig(_LLMSettings):
    """A GGUF model run in process by llama.cpp."""

    backend: Literal["llama-cpp"] = "llama-cpp"
    path: Path | None = Field(None, description="llama-cpp: GGUF file (wins over the named model's packages)")
    n_ctx: int = Field(4096, ge=512, description="llama-cpp: context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="llama-cpp: CPU threads (default: the cores it may use)")
    decoding: Literal["fast", "plain"] = Field(
        "fast", description="llama-cpp: fast = resume saved prompt prefixes, check the JSON grammar after sampling, "
        "stop a block repeated three times (greedy output otherwise the same); plain = llama-cpp-python's own")
    prefix_memory: int = Field(
        1024, ge=0, le=MOST_PREFIX_MEMORY, description="llama-cpp, decoding fast: MiB for the KV states of prompt "
        "prefixes kept across calls, so a question's passages are evaluated once per study (a 1.5B model's state is "
        "~28 KB a token, a 0.5B's ~12 KB: 1024 holds ~36k or ~85k tokens); 0 = keep none. It sets the pace; a "
        "prompt resumed rather than evaluated whole can round differently and so change a greedy token, and which "
        "prompts resume depends on the budget and on what the study asked before (docs/configuration.md)")
    speculative: str = Field(
        "none", description="llama-cpp, decoding fast: how free-text answers are drafted, each draft checked in one "
        "batch: prompt-lookup = from their own prompt (the tokens that followed the latest earlier occurrence of the "
        "last three); a named model or GGUF path (qwen2.5-0.5b for the 1.5B) = written ahead by that smaller model "
        "of the same vocabulary; none = token by token. It sets the pace, and a batch rounds differently, so a "
        "greedy token can change (docs/performance.md)")

    @model_validator(mode="after")
    def _drafts_are_fast_decoding(self) -> LlamaCppConfig:
        if self.speculative != "none" and self.decoding != "fast":
            raise ValueError(f"speculative: {self.speculative} needs decoding: fast")
        return self


class EndpointConfig(_LLMSettings):
    """Any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp's server, Ollama, OpenAI...)."""

    backend: Literal["openai-compatible"] = "openai-compatible"
    base_url: HttpUrl | None = Field(None, description="openai-compatible: e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(None, description="openai-compatible: NAME of the env var holding the key")
    timeout: float = Field(120.0, gt=0, description="openai-compatible: seconds per request")
    concurrency: int = Field(1, ge=1, le=64, description="openai-compatible: questions in flight at once (each "
                             "question's calls stay in order; results are recorded in question order)")

    @model_validator(mode="after")
    def _endpoint_needs_url(self) -> EndpointConfig:
        if not self.base_url:
            raise ValueError("backend openai-compatible needs base_url (e.g. http://127.0.0.1:8000/v1)")
        return self


#: a value a knob of the user's own system takes (`system.knobs`)
SystemScalar = Union[bool, int, float, str]
#: a declared knob's `type` -> the Python type its values are checked as
SYSTEM_KNOB_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


class SystemKnob(_Strict):
    """A setting of the user's own system that a study may search: its type and the value trial 0 runs with."""

    type: Literal["int", "float", "str", "bool"]
    default: SystemScalar = Field(description="the baseline's value; also what a trial passes when the space does "
                                  "not search the knob")

    @model_validator(mode="after")
    def _default_of_its_type(self) -> SystemKnob:
        self.default = self.check(self.default)
        if isinstance(self.default, float) and not math.isfinite(self.default):  # a study records its baseline's
            # knobs and compares them on resume: NaN never equals itself, so such a study could never be resumed
            raise ValueError(f"default: expected a finite number, got {self.default!r}")
        return self

    def check(self, value: Any) -> SystemScalar:
        """`value` as this knob's type (an int is a float too), or ValueError naming what it expected."""
        wanted = SYSTEM_KNOB_TYPES[self.type]
        if isinstance(value, bool) != (wanted is bool) or not isinstance(value, (int, float) if wanted is float
                                                                          else wanted):
            raise ValueError(f"expected {self.type}, got {value!r}")
        return float(value) if wanted is float else value


class _Kinded(_Strict):
    """A config typed by the one key that names its kind (`python:` or `http:` for a system, `lexical:` for a
    checker): each kind a class with its own settings, listed in its family's tuple, naming the class that
    implements it. A new kind is that class, its config class and a tuple entry."""

    #: the key that names this kind and holds what it runs (a module:function, a URL, what it counts, ...)
    kind: ClassVar[str]
    #: how that key is written, for the one line that says a config names no kind
    written: ClassVar[str]
    #: the class that implements it, as module:Class (imported, and given this config, when a run uses it)
    implementation: ClassVar[str]
    #: what the family is called ("system"), for the lines that refuse a config naming no kind or another's setting
    family: ClassVar[str]

    @classmethod
    def kinds(cls) -> tuple[type[_Kinded], ...]:
        """Every kind of the family."""
        raise NotImplementedError

    @model_validator(mode="before")
    @classmethod
    def _other_kinds_settings(cls, data: Any) -> Any:
        """Another kind's setting is refused in one line, naming the kind it belongs to."""
        if isinstance(data, dict):
            for key in data:
                owner = next((other for other in cls.kinds() if key in other.model_fields), cls)
                if key not in cls.model_fields and owner is not cls:
                    raise ValueError(f"{key} is a setting of {owner.kind}: {cls.family}s only")
        return data

    @property
    def entry(self) -> str:
        """What runs, as written: `python:module:function`, the URL, `lexical:words`, ..."""
        return str(getattr(self, self.kind))

    def implemented(self) -> Any:
        """The class its kind names, built from this config."""
        module, _, name = self.implementation.partition(":")
        return getattr(importlib.import_module(module), name)(self)


def kinds_union(kinds: tuple[type[_Kinded], ...], family: str) -> Any:
    """The union of a family's kinds, chosen by the one key that names a kind; naming none or two is one line."""
    def kind_of(data: Any) -> str | None:
        if not isinstance(data, dict):
            return getattr(data, "kind", None)
        named = [kind.kind for kind in kinds if kind.kind in data]
        return named[0] if len(named) == 1 else None

    return Annotated[Union[tuple(Annotated[c, Tag(c.kind)] for c in kinds)], Discriminator(
        kind_of, custom_error_type=f"{family}_kind", custom_error_message=(
            f"a {family} names exactly one kind: " + " or ".join(c.written for c in kinds)))]


class _SystemSettings(_Kinded):
    """What every kind of system has. A kind's own settings live on its own class, the key that names the kind
    (`python:`, `http:`) among them; `tuner/systems` builds the kind's `System` from it (`implementation`: a
    `System` subclass under tuner/systems)."""

    version: str = Field(min_length=1, description="bump it when the system's code or data change: replies are "
                         "cached under the entry point or URL and this version, and a study refuses another")
    knobs: dict[str, SystemKnob] = Field({}, description="the system's own settings a search space may name")
    answers: bool = Field(True, description="false: the system returns contexts only (retrieval targets)")
    timeout: float = Field(120.0, gt=0, description="seconds a reply may take")
    concurrency: int = Field(1, ge=1, le=64, description="questions asked at once (replies are recorded in "
                             "question order)")
    family: ClassVar[str] = "system"

    @classmethod
    def kinds(cls) -> tuple[type[_Kinded], ...]:
        return SYSTEM_KINDS

    @property
    def at_once(self) -> int:
        """Questions it is asked at once: its `concurrency` (a kind that cannot take them so says less)."""
        return self.concurrency

    @property
    def identity(self) -> str:
        """What its replies are cached and its studies recorded under."""
        return f"{self.entry} version {self.version}"

    def located(self, base: Path) -> _SystemSettings:
        """This config with its folder (a kind's `path`, where it has one) read from `base`, the config file's
        folder; unset: that folder."""
        if "path" not in type(self).model_fields or (self.path is not None and self.path.is_absolute()):
            return self
        return self.model_copy(update={"path": base / (self.path or ".")})

    def knob_values(self, given: Mapping[str, Any]) -> dict[str, SystemScalar]:
        """Every declared knob at `given`'s value or its default, checked; an undeclared name is refused."""
        unknown = [name for name in given if name not in self.knobs]
        if unknown:
            raise ValueError(f"system knob {unknown[0]!r} is not declared under system.knobs "
                             f"({', '.join(self.knobs) or 'none declared'})")
        values = {}
        for name, knob in self.knobs.items():
            try:
                values[name] = knob.check(given.get(name, knob.default))
            except ValueError as exc:
                raise ValueError(f"system knob {name}: {exc}") from None
        return values


class PythonSystemConfig(_SystemSettings):
    """A Python function in the user's project, called in process."""

    kind: ClassVar[str] = "python"
    written: ClassVar[str] = "python: module:function"
    implementation: ClassVar[str] = "tuner.systems._python:PythonSystem"
    python: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                        description="module:function, imported from `path` (the config file's folder)")
    path: Path | None = Field(None, description="python: the folder its module is imported from; unset: the "
                              "config file's folder")
    thread_safe: bool = Field(False, description="python: the function may be called from several threads at "
                              "once (no state shared between calls); false: it is asked one question at a time, "
                              "whatever concurrency says")

    @property
    def at_once(self) -> int:
        return self.concurrency if self.thread_safe else 1

    @property
    def entry(self) -> str:
        return f"python:{self.python}"


#: a placeholder in an HTTP system's request template
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _placeholders(template: Any) -> list[str]:
    """Every placeholder name in a request template (its strings, nested anywhere)."""
    if isinstance(template, str):
        return PLACEHOLDER.findall(template)
    if isinstance(template, dict):
        return [n for key, value in template.items() for n in _placeholders(key) + _placeholders(value)]
    if isinstance(template, list):
        return [n for value in template for n in _placeholders(value)]
    return []


class HttpResponsePaths(_Strict):
    """Where a service's reply holds what tuner reads: dotted paths (`data.reply`, `sources`, `meta.doc`), a number
    an index into a list (`choices.0.text`)."""

    answer: str | None = Field(None, description="the answer's path; none: the service returns contexts only")
    contexts: str = Field(description="the path of the list of contexts")
    text: str | None = Field(None, description="a context's text, within each context; none: the context is text")
    id: str | None = Field(None, description="a context's document id, within each context")
    usage: str | None = Field(None, description="the object of the reply's prompt_tokens and completion_tokens (the "
                              "system's own LLM use, counted as tuner counts its own); none: not counted")


class HttpSystemConfig(_SystemSettings):
    """An HTTP endpoint speaking tuner's JSON."""

    kind: ClassVar[str] = "http"
    written: ClassVar[str] = "http: URL"
    implementation: ClassVar[str] = "tuner.systems._http:HttpSystem"
    http: HttpUrl = Field(description="URL tuner POSTs each question to (JSON)")
    api_key_env: str | None = Field(None, description="http: NAME of the env var holding a bearer token")
    method: Literal["POST", "PUT", "GET"] = Field("POST", description="http: how a question is sent (GET: the "
                                                  "request's fields as the query string)")
    request: Any = Field(None, description="http: the body as the service takes it, any JSON with placeholders: "
                         "\"{question}\", \"{question_id}\" and each knob's \"{name}\" (a whole string becomes the "
                         "value, inside text its words); none = tuner's JSON")
    headers: dict[str, str] = Field({}, description="http: headers sent with each question; ${NAME} is read from "
                                    "the environment when sent, never stored")
    response: HttpResponsePaths | None = Field(None, description="http: where the reply holds the answer and the "
                                               "contexts (dotted paths); none = tuner's JSON")

    @model_validator(mode="after")
    def _placeholders_known(self) -> HttpSystemConfig:
        known = {"question", "question_id", *self.knobs}
        for name in _placeholders(self.request):
            if name not in known:
                raise ValueError(f"request: {{{name}}} names no knob and is not {{question}} or {{question_id}} "
                                 f"(knobs: {', '.join(self.knobs) or 'none declared'})")
        if self.response is not None and self.response.answer is None and self.answers:
            raise ValueError("response: give the answer's path (response.answer), or answers: false for a service "
                             "that returns contexts only")
        if self.method == "GET" and self.request is not None and not (
                isinstance(self.request, dict) and all(not isinstance(v, (dict, list)) for v in self.request.values())):
            raise ValueError("request: a GET sends its fields as the query string, so its request is one flat "
                             "mapping")
        return self


class CommandSystemConfig(_SystemSettings):
    """A program run once per question, in any language: the request as JSON on its stdin, the reply as JSON on its
    stdout, exit 3 when it refuses the knobs (as promptfoo's exec: provider runs one)."""

    kind: ClassVar[str] = "command"
    written: ClassVar[str] = "command: [PROGRAM, ARG, ...]"
    implementation: ClassVar[str] = "tuner.systems._command:CommandSystem"
    command: list[str] = Field(min_length=1, description="command: the program and its arguments, run per question "
                               "(a string is split as a shell splits it)")
    path: Path | None = Field(None, description="the folder it is imported from (python:) or runs in (command:); "
                              "unset: the config file's folder")

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @property
    def entry(self) -> str:
        return f"command:{shlex.join(self.command)}"


#: every kind of the user's own system; the union below, its tags and the refusal of another kind's setting read it
SYSTEM_KINDS: tuple[type[_SystemSettings], ...] = (PythonSystemConfig, HttpSystemConfig, CommandSystemConfig)


#: the user's own system, typed by the one key that names its kind
SystemConfig = kinds_union(SYSTEM_KINDS, "system")


#: settings that decide how fast a model answers (or how long tuner waits for it), never what: not part of a study's
#: identity (a study resumed with more in flight, or a shorter timeout, is the same study)
SPEED_ONLY = ("concurrency", "timeout", "prefix_memory", "speculative", "thread_safe")
#: every LLM backend's config class; the union below, its tags and the backend refusal all read this
LLM_BACKENDS: tuple[type[_LLMSettings], ...] = (LlamaCppConfig, EndpointConfig)


def _backend(data: Any) -> str:
    return data.get("backend", UNNAMED_BACKEND) if isinstance(data, dict) else getattr(data, "backend",
                                                                                         UNNAMED_BACKEND)


#: one language model, typed by its `backend` (in-process llama.cpp when none is given)
LLMConfig = Annotated[Union[tuple(Annotated[c, Tag(c.tag())] for c in LLM_BACKENDS)],
                      Discriminator(_backend)]
#: the tags the union puts in an error's key path: not keys the user wrote
_TAGS = tuple(c.tag() for c in LLM_BACKENDS)


#: the answer programs tuner ships (tuner/prompts/programs.py holds them); any other program is a saved .json file
BUILTIN_PROGRAM_NAMES = ("default", "strict")



def _program_name(value: str) -> str:
    """A name a search space or `--set` may give: checked as a knob value, before any trial."""
    if value not in BUILTIN_PROGRAM_NAMES and not value.endswith(".json"):
        raise ValueError(f"expected {', '.join(BUILTIN_PROGRAM_NAMES)} or a saved program .json file")
    return value




class VerdictDemo(_Strict):
    """A labelled example a graded verdict is shown before its own: a passage (an excerpt), a statement, the
    label."""

    context: str = Field(min_length=1)
    statement: str = Field(min_length=1)
    supported: bool


class JudgeAlignment(_Strict):
    """The graded judge aligned with people's labels (`tuner judge align` writes it; `evaluation.alignment` names
    the file): the verdict's wording and the demonstrations shown before every verdict, chosen for agreement with
    the labels and adopted because agreement rose on labels they were not chosen on. A study records it whole."""

    prompt: Literal["support", "nli"]
    demos: list[VerdictDemo] = Field(default_factory=list, max_length=8)
    cut: float | None = Field(None, gt=0, lt=1, description="the labels' best cut under this alignment")
    labels: int = Field(ge=0, description="how many labels it was aligned on")
    held_out: str = Field("", description="what cross-validation measured, in words")
    judge: str | None = Field(None, description="the judge it was aligned for (its cache name); its cut is that "
                              "judge's scale, and another judge reads its scores elsewhere")

    def fits(self, judge: str) -> bool:
        """Whether it was aligned for `judge` (a cache name; how the model decodes aside), or for no judge named."""
        def model(name: str) -> str:
            return name.removesuffix(":fast")

        return self.judge is None or model(self.judge) == model(judge)

    @property
    def digest(self) -> str:
        """What the judge is shown, hashed: the wording and the demos (the figures are not part of it)."""
        body = json.dumps([self.prompt, [d.model_dump() for d in self.demos]], ensure_ascii=False)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]

    def __repr__(self) -> str:  # what a refused resume prints: the identity, not every demo's text
        return f"alignment {self.digest}"


class _CheckerSettings(_Kinded):
    """What every kind of checker has: it reads whether passages support a claim, P(supported) per claim, where
    graded verdicts of faithfulness and context recall are the judge's P(yes) otherwise (`evaluation.checker`). A
    kind's own settings live on its own class, the key that names the kind among them; `tuner/metrics/checkers`
    builds the kind's `Checker` from it (`implementation`)."""

    family: ClassVar[str] = "checker"

    @classmethod
    def kinds(cls) -> tuple[type[_Kinded], ...]:
        return CHECKER_KINDS

    @property
    def identity(self) -> str:
        """What results and the judge's setting record it as: `lexical:words`."""
        return f"{self.kind}:{self.entry}"

    def __repr__(self) -> str:  # what a refused resume prints
        return self.identity


class LexicalCheckerConfig(_CheckerSettings):
    """No model and no call: the share of a claim's words (or of its facts: numbers and names) the passages hold."""

    kind: ClassVar[str] = "lexical"
    written: ClassVar[str] = "lexical: words or facts"
    implementation: ClassVar[str] = "tuner.metrics.checkers._lexical:LexicalChecker"
    lexical: Literal["words", "facts"] = Field(description="lexical: what it looks for in the passages: the claim's "
                                               "content words, or only its numbers and names")


class ClassifierCheckerConfig(_CheckerSettings):
    """A fact-checking classifier (MiniCheck RoBERTa or DeBERTa, an NLI cross-encoder), read as its authors read it:
    the passages in chunks, the claim's score the best chunk's."""

    kind: ClassVar[str] = "classifier"
    written: ClassVar[str] = "classifier: MODEL (a folder or Hub id)"
    implementation: ClassVar[str] = "tuner.metrics.checkers._classifier:ClassifierChecker"
    classifier: str = Field(description="classifier: a folder holding a sequence-classification model (config.json, "
                            "weights, tokenizer), or its Hub id where the Hub is reachable (tuner sets "
                            "HF_HUB_OFFLINE=1 unless you set it)")
    reads: Literal["minicheck", "nli"] = Field(
        "minicheck", description="classifier: how its authors read it: minicheck (a chunk, the tokenizer's end token "
        "and the claim as one text; P(label 1)), nli (premise and hypothesis as a pair; P(the label its config "
        "names entailment))")
    chunk_words: int = Field(CHUNK_WORDS, ge=16, description="classifier: the passages are read in chunks of at "
                             "most this many words (about 400 tokens: MiniCheck's chunk), the claim's score the best "
                             "chunk's")


#: every kind of checker; the union below, its tags and the refusal of another kind's setting read it
CHECKER_KINDS: tuple[type[_CheckerSettings], ...] = (LexicalCheckerConfig, ClassifierCheckerConfig)
#: a checker, typed by the one key that names its kind
CheckerConfig = kinds_union(CHECKER_KINDS, "checker")


class EvaluationConfig(_Strict):
    metrics: list[MetricName] = Field(list(DEFAULT_METRICS), min_length=1)
    strictness: int = Field(3, ge=1, le=10, description="questions generated per answer for answer_relevancy")
    retries: int = Field(2, ge=0, le=5, description="re-asks of the judge after unparsable output")
    empty_judgement: Literal["unsupported", "exclude"] = Field(
        "unsupported", description="a judge that keeps extracting nothing from a non-empty answer: score 0 and "
        "count it (unsupported), or leave the question out of the mean as RAGAS does (exclude)")
    refusal: Literal["zero_if_answerable", "zero", "exclude"] = Field(
        "zero_if_answerable", description="an answer that declines to answer: score it 0 on faithfulness and answer "
        "relevancy when the selected contexts held a gold document (or the data names none), always, or leave it "
        "out of the mean; either way it is counted")
    min_scored: float = Field(0.8, ge=0, le=1, description="a trial whose target is scored on fewer than this share "
                              "of its questions is infeasible: a configuration cannot win on the few it got through")
    llm_rerank_top_n: int = Field(5, ge=1, description="candidates the LLM reranker scores (it is slow)")
    verdicts: Literal["sampled", "graded"] = Field(
        "graded", description="the verdicts of faithfulness, context precision and context recall: sampled = "
        "RAGAS's own (the judge writes a reason and a 0/1 verdict per statement or passage); graded = the "
        "probability the judge gives to 'yes' per statement or passage, read from one token's log-probabilities, "
        "contexts first so a question's verdicts share one prefix (an endpoint without logprobs falls back to its "
        "sampled yes/no, and says so)")
    statements: Literal["judge", "sentences"] = Field(
        "sentences", description="what faithfulness checks: the statements the judge extracts from the answer "
        "(RAGAS), or the answer's sentences (no call; graded verdicts only, so judge when verdicts: sampled)")
    verdict_contexts: Literal["joined", "numbered", "each", "chunks"] = Field(
        "joined", description="graded verdicts of faithfulness and context recall: one verdict per statement on "
        "the contexts joined, or joined and numbered as the answer prompt shows them (numbered: the default with "
        "answer_layout context-first, whose passages the verdicts then resume), or one per passage with the "
        "statement's verdict the best of them (each), or one per chunk of about 300 words, short passages sharing "
        "one and a long passage split, the best of them (chunks, as MiniCheck reads long evidence)")
    verdict_prompt: Literal["support", "nli", "minicheck", "granite-guardian"] = Field(
        "support", description="the graded verdict's question: does the context support the statement (support), or "
        "is every fact of the claim stated in the document or implied by it, a claim that states no fact counting "
        "as supported (nli), or a checker LLM's own format behind an endpoint: Bespoke-MiniCheck's (minicheck: "
        "its instructions, then 'Document: … Claim: …', read as P(Yes)) or Granite Guardian 3.0–3.2's groundedness "
        "check (granite-guardian: the risk named in the system message, the passages as a 'context' turn and the "
        "statement as the assistant's, read as P(No): its Yes says the statement is not grounded)")
    blend: Literal["none", "lexical"] = Field(
        "none", description="graded faithfulness: the judge's score of an answer as it is (none), or blended with the "
        "shares of the answer's content words and of its numbers and names that the passages hold, by the "
        "coefficients measured on people's labels for this judge model and setting (lexical: the chance people call "
        "the answer supported; a judge with none measured is refused before the first trial)")
    cut: float | None = Field(
        None, gt=0, lt=1, description="where a graded P(supported) reads as supported: the judge check's accuracy, "
        "compile's feedback on unsupported sentences, the judge's agreement with labels (default: the cut measured "
        "on people's labels for a known judge model and setting, else 0.5; `tuner judge check --labels` prints "
        "the one your labels give)")
    alignment: JudgeAlignment | None = Field(
        None, description="a judge alignment `tuner judge align` wrote (its file, read when the config is): the "
        "wording and labelled demonstrations every graded verdict is shown; recorded whole in a study")
    checker: CheckerConfig | None = Field(
        None, description="what reads graded verdicts of faithfulness and context recall in place of the judge's "
        "P(yes): a checker, typed by the key that names its kind (lexical: words or facts); none = the judge")

    @model_validator(mode="after")
    def _sentences_are_graded(self) -> EvaluationConfig:
        if self.verdicts == "sampled" and "statements" not in self.model_fields_set:
            self.statements = "judge"  # RAGAS's own, whole: `verdicts: sampled` is all it takes
        if self.statements == "sentences" and self.verdicts != "graded":
            raise ValueError("statements: sentences needs verdicts: graded (RAGAS's sampled verdicts check the "
                             "judge's own statements)")
        if self.alignment is not None:
            if "verdict_prompt" in self.model_fields_set and self.verdict_prompt != self.alignment.prompt:
                raise ValueError(f"verdict_prompt: {self.verdict_prompt} contradicts the alignment's wording "
                                 f"({self.alignment.prompt}); leave verdict_prompt out")
            self.verdict_prompt = self.alignment.prompt
        graded_only = [f for f in ("alignment", "verdict_contexts", "verdict_prompt", "cut", "checker")
                       if getattr(self, f) != type(self).model_fields[f].default]
        if self.verdicts != "graded" and graded_only:
            raise ValueError(f"{graded_only[0]} is a setting of graded verdicts (verdicts: graded)")
        judges_own = [f for f in graded_only if f in ("alignment", "verdict_contexts", "verdict_prompt")]
        if self.checker is not None and judges_own:
            raise ValueError(f"{judges_own[0]} is a setting of the judge's own verdicts; checker "
                             f"{self.checker.identity} reads the passages its own way")
        return self


class PipelineConfig(_Strict):
    """One point of the search space: everything a trial may change."""

    top_k: int = Field(5, ge=1, le=100)
    alpha: float = Field(0.5, ge=0, le=1, description="1 = pure vector, 0 = pure BM25 (Weaviate)")
    fusion: FusionType = Field(
        "relative_score", description="relative_score and ranked as Weaviate's hybrid; zscore and dbsf (normalised "
        "by mean and deviation) are tuner's own and do not exist in Weaviate")
    rank_constant: int = Field(60, ge=1, le=1000, description="ranked fusion: k in weight / (rank + k); Weaviate "
                               "fixes it at 60")
    hops: int = Field(0, ge=0, le=3, description="graph-expansion hops over shared entities")
    hop_decay: float = Field(0.3, gt=0, le=1, description="a linked chunk moves from its own score towards its "
                             "seed's by hop_decay^hop of the gap")
    reranker: Literal["none", "embedding", "cross-encoder", "llm"] = "none"
    confidence_threshold: float | None = Field(
        None, ge=0, le=1, description="dynamic K: keep chunks at or above this confidence; none = keep top_k"
    )
    min_docs: int = Field(1, ge=1)
    max_docs: int = Field(8, ge=1)
    autocut: int | None = Field(
        None, ge=1, description="Weaviate's autocut (auto_limit): cut the top_k before the Nth jump in their scores; "
        "none = keep top_k")
    program: Annotated[str, AfterValidator(_program_name)] = Field(
        "default", description="answer program: default, strict, or a saved DSPy program JSON")
    query: QueryName = Field("none", description="what a question is searched as: none, hyde (a passage the "
                             "generator writes), decomposition (2-4 sub-questions) or multi_query (3 paraphrases), "
                             "the lists of several searches merged by RRF; all but none call the generator")
    # index knobs: none = the project's (chunking:, backend.bm25.stemmer); another value retrieves from an index
    # built with it (once, then kept)
    chunk_size: int | None = Field(None, ge=8, description="words per chunk; none = chunking.size")
    chunk_overlap: int | None = Field(None, ge=0, description="words shared by consecutive chunks; none = "
                                      "chunking.overlap")
    chunker: ChunkerName | None = Field(None, description="words, sentences, sections or raptor; none = "
                                        "chunking.chunker")
    stemmer: StemmerName | None = Field(None, description="BM25 stemming; none = backend.bm25.stemmer")
    contextual: ContextualName | None = Field(None, description="none, title, title_path or llm; none = "
                                              "chunking.contextual")
    # model knobs: none = the project's model; a study settles them first (`--rounds`). The judge is no knob:
    # scores by two judges do not compare
    generator: str | None = Field(None, description="the model that answers (and writes query rewrites): a name "
                                  "under the project's generators:, a named local model, a GGUF path, or a model "
                                  "of the project's endpoint; none = the project's generator")
    embedder: str | None = Field(None, description="the retrieval embedder: a sentence-transformers name or local "
                                 "folder (an index per embedder); none = embedder.model")
    reranker_model: str | None = Field(None, description="the reranker's model: a CrossEncoder for cross-encoder, a "
                                       "sentence-transformers embedder for embedding; none = "
                                       "rerankers.cross_encoder_model, or the trial's embedder")

    def knobs(self) -> dict[str, Any]:
        """Every knob of tuner's by name, as a search space names them (a project's section holds more)."""
        return self.model_dump(include=set(PipelineConfig.model_fields))

    def with_params(self, params: Mapping[str, Any]) -> PipelineConfig:
        """This pipeline with a trial's parameters applied, validated (e.g. min_docs <= max_docs)."""
        try:
            return PipelineConfig.model_validate({**self.knobs(), **params})
        except ValidationError as exc:
            raise ConfigError(f"trial parameters: {describe_validation_error(exc)}") from None

    @classmethod
    def from_record(cls, stored: Any) -> PipelineConfig | None:
        """A trial's recorded pipeline (one from before a knob existed has its default); None when this version
        no longer takes it."""
        try:
            return cls.model_validate(pipeline_as_now(stored))
        except ValidationError:
            return None

    @model_validator(mode="after")
    def _docs_range(self) -> PipelineConfig:
        if self.min_docs > self.max_docs:
            raise ValueError(f"min_docs ({self.min_docs}) must not exceed max_docs ({self.max_docs})")
        if self.chunk_size is not None and self.chunk_overlap is not None and self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                             f"({self.chunk_size})")
        if self.autocut is not None and self.confidence_threshold is not None:
            raise ValueError("autocut and confidence_threshold both choose K: set one of them")
        return self


@dataclass(frozen=True)
class Knob:
    """What tuner knows about a pipeline knob besides its type and range: one home, read by export, the study's
    generator check, the index settings and the analysis. Exactly one of `weaviate`, `carried` and `lost` says how
    the knob reaches a Weaviate deployment (`tests/test_export.py` holds every knob to it)."""

    #: hybrid()'s keyword argument it transfers as
    weaviate: str = ""
    #: what carries it outside the hybrid query, nothing lost (the chunks you ingest, your prompt)
    carried: str = ""
    #: what `tuner export` says when the knob is active and Weaviate cannot reproduce it; {value} is its value
    lost: str = ""
    #: whether it does anything at this pipeline and project; None: its value is not the default
    active: Callable[[PipelineConfig, ProjectConfig], bool] | None = None
    #: values at which it calls the generator, and how often
    generator: frozenset[str] = frozenset()
    generator_calls: str = ""
    #: an index knob: the project setting it overrides ("chunking.size"); another value retrieves from another
    #: index (built once). `IndexSettings` has a field per index knob, and the project's index reads these paths
    index: str = ""
    explore: tuple[Any, ...] = ()
    #: a model knob: rounds settle these before the rest of the pipeline (Greedy-M)
    model: bool = False
    #: the largest value a next round extends a range to, where the field sets no limit of its own
    most: float | None = None

    def is_active(self, name: str, pipeline: PipelineConfig, project: ProjectConfig) -> bool:
        if self.active is not None:
            return self.active(pipeline, project)
        return getattr(pipeline, name) != type(pipeline).model_fields[name].default

    def says_lost(self, name: str, pipeline: PipelineConfig) -> str:
        value = getattr(pipeline, name)
        return self.lost.format(value=f"{value:g}" if isinstance(value, float) else value)


_INGESTED = "the chunks you ingest (tuner's own chunking)"
#: every PipelineConfig field -> its facts
KNOBS: dict[str, Knob] = {
    "top_k": Knob(weaviate="limit"),
    "alpha": Knob(weaviate="alpha"),
    "fusion": Knob(weaviate="fusion_type"),  # a fusion Weaviate lacks is refused by the export
    "rank_constant": Knob(lost="rank_constant {value} (Weaviate's ranked fusion uses 60)",
                          active=lambda p, _: p.fusion == "ranked" and p.rank_constant != WEAVIATE_RANK_CONSTANT),
    "hops": Knob(lost="hops {value} (graph expansion: add linked chunks in your application)"),
    "hop_decay": Knob(lost="hop_decay {value} (how graph expansion scores a linked chunk)",
                      active=lambda p, _: p.hops > 0),
    "reranker": Knob(lost="reranker {value} (rerank Weaviate's results in your application, or use a Weaviate "
                          "reranker module)"),
    "confidence_threshold": Knob(lost="confidence_threshold {value} (dynamic K from reranker scores)"),
    "min_docs": Knob(lost="min_docs {value} (dynamic K's floor)",
                     active=lambda p, _: p.confidence_threshold is not None, most=10),
    "max_docs": Knob(lost="max_docs {value} (dynamic K's ceiling)",
                     active=lambda p, _: p.confidence_threshold is not None, most=20),
    "autocut": Knob(weaviate="auto_limit"),
    "program": Knob(carried="your application's answer prompt (the program's instructions and demos)"),
    "query": Knob(lost="query {value} (rewrite the question with your generator before searching, as tuner's query "
                       "strategy does)", generator=frozenset({"hyde", "decomposition", "multi_query"}),
                  generator_calls="once per question"),
    "chunk_size": Knob(carried=_INGESTED, index="chunking.size", explore=(100, 150, 250, 400)),
    "chunk_overlap": Knob(carried=_INGESTED, index="chunking.overlap"),
    "chunker": Knob(carried=_INGESTED, index="chunking.chunker", explore=("words", "sentences", "sections"),
                    generator=frozenset({"raptor"}), generator_calls="once per cluster of chunks"),
    "stemmer": Knob(lost="stemmer {value} (Weaviate's BM25 does not stem; alpha was tuned against stemmed BM25)",
                    active=lambda p, project: p.stemmer == "english" and project.backend.type != "weaviate",
                    index="backend.bm25.stemmer", explore=("none", "english")),
    "contextual": Knob(carried=_INGESTED, index="chunking.contextual", generator=frozenset({"llm"}),
                       generator_calls="once per chunk"),
    "generator": Knob(carried="your application's generator model", model=True),
    "embedder": Knob(carried="the vectors you ingest and search with (this embedding model)", index="embedder.model",
                     model=True),
    "reranker_model": Knob(lost="reranker model {value} (rerank with it in your application)",
                           active=lambda p, _: p.reranker_model is not None and p.reranker != "none", model=True),
}
#: the knobs that choose a model
MODEL_KNOBS = tuple(name for name, knob in KNOBS.items() if knob.model)
#: the knobs that choose an index, each with its project setting
INDEX_KNOBS = {name: knob.index for name, knob in KNOBS.items() if knob.index}
if set(INDEX_KNOBS) != set(IndexSettings.model_fields):  # an index knob is a field of the index it builds
    raise TypeError(f"IndexSettings fields {sorted(IndexSettings.model_fields)} are not the index knobs "
                    f"{sorted(INDEX_KNOBS)}")


class SystemTrial(_Strict):
    """One point of the search space of the user's own system: its knobs' values, every declared one spelled out
    (a trial's draw replaces some). Dumped under `system`, as trials held them beside tuner's knobs before they
    had a class of their own, so a study from then keeps its repeats."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: dict[str, SystemScalar] = {}

    def knobs(self) -> dict[str, Any]:
        return dict(self.system)

    def with_params(self, params: Mapping[str, Any]) -> SystemTrial:
        return SystemTrial(system={**self.system, **params})

    @classmethod
    def from_record(cls, stored: Any) -> SystemTrial | None:
        try:
            return cls(system=stored.get("system", {}))  # a trial of then: tuner's unused knobs beside it
        except (AttributeError, ValidationError):
            return None


#: what a trial configures: tuner's pipeline, or the user's own system
TrialConfig = Union[PipelineConfig, SystemTrial]


class PipelineSection(PipelineConfig):
    """The project's `pipeline:`: tuner's knobs, and the values of the user's own system's knobs (`best -o` writes
    them here); a trial configures one or the other (`TrialConfig`)."""

    system: dict[str, SystemScalar] = Field({}, description="the knobs of the project's own system (system.knobs), "
                                            "by name; unset ones take their declared default")

    def tuners(self) -> PipelineConfig:
        """Tuner's knobs alone."""
        return PipelineConfig.model_validate(self.knobs())


def setting_at(config: BaseModel, path: str) -> Any:
    """The value of a dotted setting ("backend.bm25.stemmer")."""
    for part in path.split("."):
        config = getattr(config, part)
    return config


class ProjectConfig(_Strict):
    dataset: DatasetConfig = DatasetConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    backend: BackendConfig = BackendConfig()
    graph: GraphConfig = GraphConfig()
    rerankers: RerankerConfig = RerankerConfig()
    cache_dir: Path = Path("studies/.cache")
    generator: LLMConfig = LlamaCppConfig()
    generators: dict[str, LLMConfig] = Field({}, description="models a search space's generator knob may name, "
                                             "beside named local models and GGUF paths (an endpoint's models, or "
                                             "local ones with settings of their own)")
    judge: LLMConfig | None = Field(None, description="the RAGAS judge; none = the project's generator (never a "
                                    "trial's: the judge stays fixed while the generator knob varies)")
    evaluation: EvaluationConfig = EvaluationConfig()
    answer_layout: Literal["context-first", "passages-first", "instructions-first"] = Field(
        "instructions-first", description="the answer prompt: instructions-first is DSPy's own layout (instructions "
        "in the system message); passages-first puts them after the question and its passages, so trials that "
        "change only the program resume the passages' prefix (measured: the small models then wrote longer answers "
        "that cost more than the prefix saved; docs/performance.md); context-first begins with the numbered "
        "passages as the judge's verdicts do (verdict_contexts: numbered), so a model that answers and judges "
        "computes them once. Default: context-first where the generator is the judge and tuner writes the answers "
        "with the judge's default verdicts, else instructions-first")
    pipeline: PipelineSection = PipelineSection()
    system: SystemConfig | None = Field(None, description="your own RAG system, answering instead of tuner's "
                                        "pipeline; none = tuner's built-in pipeline")

    @field_validator("pipeline", mode="before")
    @classmethod
    def _a_pipeline_is_a_section(cls, value: Any) -> Any:
        """A `PipelineConfig` given in code (tuner's knobs alone) is the section with no system values."""
        return value.knobs() if isinstance(value, PipelineConfig) and not isinstance(value, PipelineSection) else value

    @model_validator(mode="after")
    def _system_knobs_declared(self) -> ProjectConfig:
        if self.pipeline.system:
            if self.system is None:
                raise ValueError("pipeline.system sets knobs of an own system, and no system: is configured")
            self.system.knob_values(self.pipeline.system)
        return self

    @model_validator(mode="after")
    def _one_read_of_the_passages(self) -> ProjectConfig:
        """Where one model answers and judges and neither layout is chosen, the answer prompt and the verdicts begin
        with the same numbered passages: the judge resumes what the answer computed (a study records both, so one
        begun under the old layouts resumes under them)."""
        evaluation = self.evaluation
        if "answer_layout" in self.model_fields_set or "verdict_contexts" in evaluation.model_fields_set:
            return self
        one_model = self.judge is None or self.judge == self.generator
        default_verdicts = evaluation.verdicts == "graded" and evaluation.verdict_prompt == "support" and \
            evaluation.alignment is None and evaluation.checker is None and evaluation.blend == "none"
        if one_model and default_verdicts and self.system is None:
            self.answer_layout = "context-first"
            self.evaluation = evaluation.model_copy(update={"verdict_contexts": "numbered"})
        return self

    def index_settings(self, pipeline: PipelineConfig | None = None) -> IndexSettings:
        """The index `pipeline` retrieves from: the project's settings, overridden by the pipeline's index knobs."""
        pipeline = pipeline or self.pipeline
        settings = {name: setting_at(self, path) for name, path in INDEX_KNOBS.items()}
        settings.update({k: v for k, v in pipeline.model_dump(include=set(settings)).items() if v is not None})
        if self.backend.type == "weaviate" and settings["stemmer"] != "none":
            raise ConfigError(f"stemmer {settings['stemmer']}: Weaviate does not stem; use the embedded backend")
        if settings["chunk_overlap"] >= settings["chunk_size"]:
            raise ConfigError(f"chunk_overlap {settings['chunk_overlap']} is not below chunk_size "
                              f"{settings['chunk_size']} (with the project's chunking where the pipeline sets none)")
        return IndexSettings(**settings)

    def resolved(self, pipeline: PipelineConfig | None = None) -> PipelineConfig:
        """`pipeline` (default: the project's) with its index knobs set to the index it retrieves from, and its
        generator named (a space's generator choices then include the project's own by its name)."""
        pipeline = pipeline or self.pipeline.tuners()
        named = {"generator": pipeline.generator or str(getattr(self.generator, "path", None) or self.generator.model)}
        return pipeline.model_copy(update={**self.index_settings(pipeline).model_dump(), **named})

    def system_trial(self) -> SystemTrial:
        """The project's own system at its `pipeline.system` values, every declared knob spelled out."""
        return SystemTrial(system=self.system_values(self.pipeline.system))

    def system_values(self, given: Mapping[str, Any]) -> dict[str, SystemScalar]:
        """The system's knobs at `given`'s values and their defaults elsewhere; ConfigError for a bad one."""
        try:
            return self.system.knob_values(given)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def generator_named(self, name: str | None) -> LLMConfig:
        """The model a generator knob's value names: a name under generators:, else a model of the project's
        backend (a named local model or GGUF path for llama.cpp, a model of the endpoint); None: the generator."""
        if name is None:
            return self.generator
        if name in self.generators:
            return self.generators[name]
        return self.generator.model_copy(update={"model": name, **({"path": None} if hasattr(self.generator, "path")
                                                                   else {})})

    def embedder_named(self, name: str) -> EmbedderConfig:
        """The project's embedder settings with another model."""
        return self.embedder if name == self.embedder.model else self.embedder.model_copy(update={"model": name})

    @property
    def judge_llm(self) -> LLMConfig:
        return self.judge or self.generator

    @property
    def answer_tokens(self) -> int:
        return self.generator.max_tokens or 384

    @property
    def judge_tokens(self) -> int:
        # not inherited from the generator: a verdict list outgrows an answer budget and would be cut mid-JSON
        return (self.judge.max_tokens if self.judge else None) or 1024


def with_overrides(pipeline: PipelineConfig, assignments: list[str]) -> PipelineConfig:
    """`key=value` pairs (`--set`; values parsed as YAML scalars) applied to a pipeline config, validated."""
    values: dict[str, Any] = pipeline.model_dump()
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or key.strip() not in values:
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE with KEY one of {', '.join(values)}")
        try:
            values[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise ConfigError(f"--set {assignment!r}: the value is not a YAML scalar") from None
    try:
        return type(pipeline).model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"--set: {describe_validation_error(exc)}") from None


def load_config(path: Path | str | None) -> ProjectConfig:
    """Read and validate a project config; no path gives the defaults (bundled demo)."""
    if path is None:
        return ProjectConfig()
    path = Path(path)
    raw = _read_alignment(read_yaml(path), path.parent)
    try:
        config = ProjectConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc)}") from None
    return _resolve_paths(config, path.parent)


def _read_alignment(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """`evaluation.alignment: FILE` (relative to the config's folder) replaced by the file's content: a study
    records the alignment itself, so a later edit of the file cannot change what its trials were judged by."""
    evaluation = raw.get("evaluation")
    if not isinstance(evaluation, dict) or not isinstance(evaluation.get("alignment"), str):
        return raw
    where = base / evaluation["alignment"]
    refuse_special(where, ConfigError)
    if not where.is_file():
        raise ConfigError(f"evaluation.alignment: {where}: file not found (`tuner judge align` writes one)")
    try:
        content = json.loads(where.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"evaluation.alignment: {where}: not a judge alignment ({first_line(exc)})") from None
    return {**raw, "evaluation": {**evaluation, "alignment": content}}


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping, turning every failure into a one-line ConfigError naming the file."""
    refuse_special(path, ConfigError)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or first_line(exc)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, got {type(raw).__name__}")
    return raw


#: a kinded config's tags, by the key that holds it
_KIND_TAGS = {"system": tuple(c.kind for c in SYSTEM_KINDS), "checker": tuple(c.kind for c in CHECKER_KINDS)}


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem as 'key.path: what was expected (got X)', plus a count of the rest."""
    errors = exc.errors()
    first = errors[0]
    message = first["msg"].removeprefix("Value error, ")
    # a whole-model check names its own key ("top_k: expected a number"); the rest get the key path here
    loc = first["loc"]
    where = ".".join(str(part) for n, part in enumerate(loc) if part not in _TAGS and not (
        n and part in _KIND_TAGS.get(loc[n - 1], ()))) or (
        "" if first["type"] == "value_error" else "(top level)")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif "input" in first and not isinstance(first["input"], dict):
        message += f" (got {first['input']!r})"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def absolute_paths(config: ProjectConfig) -> ProjectConfig:
    """`config` with every relative path made absolute from the current folder (where tuner reads them), for a
    config written into a file the user may move."""
    return _resolve_paths(config, Path.cwd())


def _resolve_paths(config: ProjectConfig, base: Path) -> ProjectConfig:
    updates: dict[str, Any] = {}
    if config.dataset.path is not None and not config.dataset.path.is_absolute():
        updates["dataset"] = config.dataset.model_copy(update={"path": base / config.dataset.path})
    if "cache_dir" in config.model_fields_set and not config.cache_dir.is_absolute():
        updates["cache_dir"] = base / config.cache_dir
    def located(llm: LLMConfig | None) -> LLMConfig | None:
        if getattr(llm, "path", None) is not None and not llm.path.is_absolute():
            llm = llm.model_copy(update={"path": base / llm.path})
        draft = getattr(llm, "speculative", "none")
        if draft not in NO_DRAFT_MODEL and (draft.endswith(".gguf") or os.sep in draft) and \
                not Path(draft).is_absolute():  # a GGUF path, not a named model
            llm = llm.model_copy(update={"speculative": str(base / draft)})
        return llm

    for role in ("generator", "judge"):
        if located(getattr(config, role)) is not getattr(config, role):
            updates[role] = located(getattr(config, role))
    if any(located(llm) is not llm for llm in config.generators.values()):
        updates["generators"] = {name: located(llm) for name, llm in config.generators.items()}
    if config.system is not None and config.system.located(base) is not config.system:
        updates["system"] = config.system.located(base)
    program = config.pipeline.program
    if program.endswith(".json") and not Path(program).is_absolute():
        updates["pipeline"] = config.pipeline.model_copy(update={"program": str(base / program)})
    model = config.rerankers.cross_encoder_model
    if model and _local_folder(model, base):
        updates["rerankers"] = config.rerankers.model_copy(update={"cross_encoder_model": str(base / model)})
    checker = config.evaluation.checker
    if isinstance(checker, ClassifierCheckerConfig) and _local_folder(checker.classifier, base):
        updates["evaluation"] = config.evaluation.model_copy(update={"checker": checker.model_copy(
            update={"classifier": str(base / checker.classifier)})})
    return config.model_copy(update=updates)


def _local_folder(model: str, base: Path) -> bool:
    """Whether a model that may be a folder or a Hub id ("org/name") names a folder relative to `base`: one that
    exists there, or a path that says it is one ("./x", "../x")."""
    return not Path(model).is_absolute() and (model.startswith(".") or (base / model).exists())
