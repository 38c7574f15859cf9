# netregress: the two entry points. Both install what they need themselves.
#   make validate   the validation suite on this machine's embedded default (vcluster as root, else local)
#   make test       the project's own tests (C unit/integration, sanitizers, fuzz, pytest, ReFrame CI subset)
SHELL := /bin/bash
.PHONY: validate test bootstrap clean

validate:
	tools/bootstrap --for validate
	tools/validate

test:
	tools/bootstrap --for test
	tools/run-tests

bootstrap:
	tools/bootstrap --for validate

clean:
	rm -rf build run
