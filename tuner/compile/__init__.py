"""Prompt compilation: DSPy's optimizers tune the answer program against tuner's own cached judge.

`compile_program` takes training questions with contexts from one fixed retrieval configuration, runs a
`ProgramCompiler` (bootstrap, mipro, gepa) under a budget of paid LLM calls, and saves the program
(`program.save`) with a sidecar JSON saying how it was made. A saved program is a `program` choice like
`default` and `strict`.

Modules: `run` (compile_program), `optimizers` (COMPILERS), `metric` (CompileMetric), `saved` (program files
and sidecars; imports no model stack, so studies can list compiled programs cheaply).
"""
