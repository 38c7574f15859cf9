"""Run by Spack, not by ReFrame: ``spack -e ENV python spack_installed.py SPEC...`` (netregress.spack_build).

Prints one JSON object: each SPEC -> the prefix of the environment's one concretized root that satisfies it when
that root is installed, else ''. Spack's own matching (``Spec.satisfies``) and install database decide."""
import json
import sys

import spack.environment as ev

roots = [concrete for _, concrete in ev.active_environment().concretized_specs()]
answer = {}
for text in sys.argv[1:]:
    matches = [spec for spec in roots if spec.satisfies(text)]
    answer[text] = str(matches[0].prefix) if len(matches) == 1 and matches[0].installed else ''
print(json.dumps(answer))
