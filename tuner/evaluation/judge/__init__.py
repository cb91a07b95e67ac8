"""The judge's own home: the labelled cases of its check (cases.py), agreement statistics (agreement.py), the check
itself (check.py), where a graded verdict reads as supported (cut.py) and its alignment with people's labels
(align.py)."""
