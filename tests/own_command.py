"""The tests' own system (own_system.py) as a program, the way a script in any language is tuned: the request on
stdin, the reply on stdout."""

import json
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import own_system

request = json.load(sys.stdin)
json.dump(own_system.answer(request["question"], request["params"]), sys.stdout)
