"""What a judged metric raises when the judge's reply is no verdict: its own module, so that the metrics the registry
builds lazily (graded.py) raise it without importing the registry back."""


class JudgeOutputError(ValueError):
    """The judge's reply could not be parsed into what RAGAS asked for (even after re-asking), or a yes/no verdict
    said neither."""
