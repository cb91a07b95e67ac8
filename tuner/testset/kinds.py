"""The kinds of generated question and their default shares (a leaf: the CLI reads them without the model stack)."""

KINDS = ("single-hop", "multi-hop", "unanswerable")
DEFAULT_SHARES = {"single-hop": 0.6, "multi-hop": 0.25, "unanswerable": 0.15}
