"""The README and docs/ stay true to the tree: every relative link resolves (files and #anchors), the two
newcomer commands the README prints exist in the Makefile that `.ci/run` calls, and every config key and literal
value is in the configuration page's full example (and every knob in the guide's table)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, create_model

from tuner.config import PipelineConfig, ProjectConfig

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_the_readme_s_two_commands_are_make_targets_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert f"make {target}\n" in readme and re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150  # a newcomer's page: the manual lives in docs/


def config_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every key of a config model, dotted, with its annotation; nested models walked into."""
    for name, field in model.model_fields.items():
        yield prefix + name, field.annotation
        for sub in models_in(field.annotation):
            yield from config_fields(sub, f"{prefix}{name}.")


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds: itself, or the members of a (tagged) union."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in models_in(arg)]


def literal_values(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(v) for v in get_args(annotation)]
    return [v for arg in get_args(annotation) for v in literal_values(arg)]


def full_example() -> dict[str, Any]:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", page, re.S).group(1))


def documented(example: dict[str, Any], dotted: str) -> bool:
    node: Any = example
    for part in dotted.split("."):
        if node is None or node == {}:  # `judge: null`, `generators: {}`: the generator's keys, said once
            return True
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


#: keys whose values are a registry's entries, each described where it is registered (a new metric touches
#: tuner/metrics/__init__.py and its own module only)
REGISTRY_VALUES = ("evaluation.metrics",)


def undocumented(config: type[BaseModel]) -> list[str]:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example, missing = full_example(), []
    for dotted, annotation in config_fields(config):
        if not documented(example, dotted):
            missing.append(dotted)
        if dotted in REGISTRY_VALUES:
            continue
        missing += [f"{dotted}: {v}" for v in literal_values(annotation) if not re.search(rf"\b{re.escape(v)}\b", page)]
    return missing


def test_every_config_key_and_value_is_in_the_configuration_page_s_full_example():
    assert undocumented(ProjectConfig) == []


def test_the_docs_check_finds_a_planted_field():
    planted = create_model("Planted", __base__=ProjectConfig, warmup=(Literal["never", "eagerly"], "never"))
    assert undocumented(planted) == ["warmup", "warmup: eagerly"]


def test_every_knob_and_its_values_are_in_the_guide_s_knob_table():
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    rows = {name: line for line in guide.splitlines() if line.startswith("| `")
            for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    missing = [name for name in PipelineConfig.model_fields if name not in rows]
    missing += [f"{name}: {value}" for name, field in PipelineConfig.model_fields.items() if name in rows
                for value in literal_values(field.annotation) if f"`{value}`" not in rows[name]]
    assert missing == []
