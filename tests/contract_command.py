"""The contract's scripted system as a program (the `command:` kind): the request on stdin, the reply on stdout;
a refusal exits 3 and an error 1, each saying why on stderr."""

import json
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])  # the tests folder: the scripted system beside this file

import contract_system

from tuner.systems import Rejected

request = json.load(sys.stdin)
try:
    print(json.dumps(contract_system.answer(request["question"], request["params"])))
except Rejected as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(1)
