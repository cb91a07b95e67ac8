"""Prompt compilation: DSPy's optimizers tune the answer program against tuner's own cached judge.

`compile_program` takes training questions with contexts from one fixed retrieval configuration, runs a
`ProgramCompiler` (bootstrap, mipro, gepa) under a budget of paid LLM calls, and saves the program
(`program.save`) with a sidecar JSON saying how it was made. A saved program is a `program` choice like
`default` and `strict`.
"""

from tuner.compile._base import ProgramCompiler
from tuner.compile.metric import CompileMetric
from tuner.compile.optimizers import COMPILERS
from tuner.compile.run import CompileSettings, Compiled, compile_program, compiled_programs, read_sidecar

__all__ = ["COMPILERS", "CompileMetric", "CompileSettings", "Compiled", "ProgramCompiler", "compile_program",
           "compiled_programs", "read_sidecar"]
