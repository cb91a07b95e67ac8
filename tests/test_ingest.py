"""`tuner data ingest`: a folder of real files of every type -> a BEIR corpus, every left-out file with its reason."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.helpers import one_line_error, tuner
from tuner.data import load_dataset
from tuner.data.ingest import READERS, Reader, Unreadable, ingest, read_file
from tuner.errors import DataError


def tiny_pdf(*pages: list[str], title: str = "") -> bytes:
    """A real PDF (Helvetica text, one content stream per page) written byte by byte, offsets and all."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", None, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        shown = b" 0 -16 Td ".join(b"(" + line.encode("latin-1") + b") Tj" for line in lines)
        stream = b"BT /F1 12 Tf 72 720 Td " + shown + b" ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % len(objects))
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    info = b""
    if title:
        objects.append(b"<< /Title (" + title.encode("latin-1") + b") >>")
        info = b" /Info %d 0 R" % len(objects)
    out, offsets = io.BytesIO(b"%PDF-1.4\n"), []
    out.seek(0, io.SEEK_END)
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref))
    return out.getvalue()


def encrypted(pdf: bytes) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_file(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Boiler manual", level=1)
    document.add_paragraph("The boiler heats water for the radiators.")
    document.add_heading("Safety", level=2)
    document.add_paragraph("Turn the gas off before opening the case.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Pressure", "1.5 bar"
    document.save(str(path))


NAV_PAGE = """<!doctype html><html><head><title>Pump guide</title><style>p{color:red}</style>
<script>var tracking = "do not index me";</script></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop everything</a></nav>
<header>Site banner text</header>
<main><h1>Pump guide</h1><p>The pump moves   water
through the circuit.</p><h2>Priming</h2><p>Fill the housing before the first start.</p>
<ul><li>Open the valve</li><li>Start the pump</li></ul></main>
<div role="navigation">Related: other pumps</div><footer>Copyright 2026</footer></body></html>"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Real files of every type the issue names, the good and the bad."""
    root = tmp_path / "docs"
    (root / "guides" / "deep").mkdir(parents=True)
    (root / "readme.txt").write_text("Plain notes about the heating system.\nIt runs on gas.\n", encoding="utf-8")
    (root / "guides" / "setup.md").write_text("# Setup\n\nConnect the pipes.\n\n## Wiring\n\nUse 2.5 mm cable.\n",
                                              encoding="utf-8")
    (root / "guides" / "pump.html").write_text(NAV_PAGE, encoding="utf-8")
    (root / "guides" / "deep" / "spec.pdf").write_bytes(tiny_pdf(
        ["Thermostat specification", "The thermo-", "stat switches at twenty degrees."], ["Second page text."],
        title="Thermostat spec"))
    docx_file(root / "guides" / "boiler.docx")
    (root / "legacy.txt").write_bytes("Caf\xe9 menu: cr\xe8me br\xfbl\xe9e".encode("cp1252"))
    # the bad ones
    (root / "empty.md").write_bytes(b"")
    (root / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "locked.pdf").write_bytes(encrypted(tiny_pdf(["Secret plans"])))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf at all\n")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 not text")
    (root / "scan.pdf").write_bytes(tiny_pdf([]))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def test_every_file_type_is_read_and_every_bad_file_is_listed_with_its_reason(folder: Path, tmp_path: Path):
    out = tmp_path / "corpus"
    report = ingest(folder, out)

    rows = {row["_id"]: row for row in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    assert set(rows) == {"readme.txt", "guides/setup.md", "guides/pump.html", "guides/deep/spec.pdf",
                         "guides/boiler.docx", "legacy.txt"}
    # titles: first heading, <title>, metadata title, file name
    assert rows["guides/setup.md"]["title"] == "Setup"
    assert rows["guides/pump.html"]["title"] == "Pump guide"
    assert rows["guides/deep/spec.pdf"]["title"] == "Thermostat spec"
    assert rows["guides/boiler.docx"]["title"] == "Boiler manual"
    assert rows["readme.txt"]["title"] == "readme"
    # HTML: navigation, banner, footer, scripts and styles gone; headings as markdown lines; whitespace tidy
    html = rows["guides/pump.html"]["text"]
    assert "# Pump guide" in html and "## Priming" in html and "The pump moves water through the circuit." in html
    for chrome in ("Shop everything", "Site banner", "tracking", "color:red", "Copyright", "Related: other"):
        assert chrome not in html
    # PDF: both pages, the line-end hyphen repaired
    pdf = rows["guides/deep/spec.pdf"]["text"]
    assert "thermostat switches at twenty degrees" in pdf and "Second page text." in pdf
    # docx: heading styles as markdown lines, the table's row
    word = rows["guides/boiler.docx"]["text"]
    assert "## Safety" in word and "Pressure | 1.5 bar" in word
    assert rows["legacy.txt"]["text"] == "Café menu: crème brûlée"

    reasons = {left.path: left.reason for left in report.left_out}
    assert set(reasons) == {"empty.md", "image.txt", "locked.pdf", "broken.pdf", "photo.jpg", "scan.pdf"}
    assert reasons["empty.md"] == "empty file"
    assert "binary" in reasons["image.txt"]
    assert "encrypted" in reasons["locked.pdf"]
    assert "broken PDF" in reasons["broken.pdf"]
    assert "unknown type (.jpg)" in reasons["photo.jpg"]
    assert "no text layer" in reasons["scan.pdf"]
    assert report.hidden == 1 and report.documents == 6 and report.read == 6

    # the corpus loads as a dataset without questions, and its markdown headings reach the sections chunker
    dataset = load_dataset(out, require_questions=False)
    assert len(dataset.documents) == 6 and not dataset.questions


def test_a_rerun_reads_only_changed_files_and_drops_removed_ones(folder: Path, tmp_path: Path, monkeypatch):
    out = tmp_path / "corpus"
    ingest(folder, out)
    (folder / "readme.txt").write_text("New notes: the heating system now runs on a heat pump.\n")
    (folder / "legacy.txt").unlink()
    (folder / "new.md").write_text("# Added\n\nA new page.\n")
    parsed = []
    real = read_file
    monkeypatch.setattr("tuner.data.ingest.read_file", lambda path: parsed.append(path.name) or real(path))

    report = ingest(folder, out)

    assert sorted(parsed) == ["new.md", "readme.txt"]  # nothing else parsed again, not even the left-out ones
    assert (report.read, report.unchanged, report.removed, report.documents) == (2, 4, 1, 6)
    rows = {row["_id"]: row for row in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    assert "heat pump" in rows["readme.txt"]["text"] and "legacy.txt" not in rows and "new.md" in rows


@pytest.mark.parametrize("reader", READERS, ids=lambda r: type(r).__name__)
def test_every_reader_keeps_the_contract(reader: Reader, folder: Path):
    """Each reader reads a real file of its type to a titled text, and says why for an empty or broken one."""
    good = {".txt": "readme.txt", ".html": "guides/pump.html", ".pdf": "guides/deep/spec.pdf",
            ".docx": "guides/boiler.docx"}
    suffix = next(s for s in reader.suffixes if s in good)
    parsed = reader.read(folder / good[suffix])
    assert parsed.title.strip() and parsed.text.strip() and parsed.text == parsed.text.strip()
    broken = folder / f"broken-sample{suffix}"
    broken.write_bytes(b"\x00\x01\x02 not a real file" if suffix != ".html" else b"\x00\x00")
    with pytest.raises(Unreadable):
        reader.read(broken)


def test_bad_folders_are_one_line(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    one_line_error(tuner("data", "ingest", "empty", "--out", "o", cwd=tmp_path), "empty: no files to read")
    one_line_error(tuner("data", "o", cwd=tmp_path), "o: dataset not found")
    with pytest.raises(DataError, match="no files to read"):
        ingest(tmp_path / "empty", tmp_path / "o")
    with pytest.raises(DataError, match="not a folder"):
        ingest(tmp_path / "missing", tmp_path / "o")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.bin").write_bytes(b"\x00")
    with pytest.raises(DataError, match="nothing readable.*a.bin: unknown type"):
        ingest(tmp_path / "junk", tmp_path / "o")
    assert not (tmp_path / "o").exists()
    # a corpus ingest did not write is never overwritten
    (tmp_path / "beir").mkdir()
    (tmp_path / "beir" / "corpus.jsonl").write_text('{"_id": "1", "text": "x"}\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("hello")
    with pytest.raises(DataError, match="did not write"):
        ingest(tmp_path / "docs", tmp_path / "beir")


def test_the_command_lists_what_it_left_out_and_the_data_command_shows_the_corpus(folder: Path, tmp_path: Path):
    out = tmp_path / "corpus"
    result = tuner("data", "ingest", str(folder), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "6 documents" in result.stdout and "6 files left out" in result.stdout
    assert "locked.pdf" in result.stdout and "encrypted" in result.stdout
    assert "1 hidden" in result.stderr
    shown = tuner("data", str(out), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "│ documents              │     6 │" in shown.stdout and "tuner data generate" in shown.stdout
    assert tuner("data", cwd=tmp_path).returncode == 0  # bare `tuner data`: the demo, as before


def test_many_left_out_files_are_grouped_by_reason_and_all_listed_in_the_manifest(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nRead me.\n")
    for n in range(15):
        (docs / f"shot{n}.png").write_bytes(b"\x89PNG")
    for n in range(10):
        (docs / f"log{n}.gz").write_bytes(b"\x1f\x8b")
    result = tuner("data", "ingest", "docs", "--out", "data", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "25 files left out" in result.stdout and "(.png) 15, (.gz) 10" in result.stdout
    assert "shot3.png" not in result.stdout  # not 25 rows: the manifest has them
    manifest = json.loads((tmp_path / "data" / "ingest.json").read_text())
    assert sum(bool(entry["left_out"]) for entry in manifest["files"].values()) == 25
