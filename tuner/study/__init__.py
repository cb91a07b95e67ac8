"""Studies: search spaces, the Optuna objective, storage, the session that opens-or-resumes and runs a study, and
typed read-back (results.py) for analysis and reports."""
