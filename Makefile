# netregress: the two entry points. Both install what they need themselves.
#   make validate   the validation suite on this machine's embedded default (vcluster as root, else local)
#   make test       the project's own tests (C unit/integration, sanitizers, fuzz, pytest, ReFrame CI subset)
#   make drill      inject known faults into the virtual cluster and check each is caught and named (root)
#   make onboard    a centre's onboarding end to end, on a copy of the virtual cluster's site (root; docs/site.md)
SHELL := /bin/bash
.PHONY: validate test drill onboard bootstrap clean

# validate: bootstrap inside tools/validate, so its last line times set-up, measurement and post-run, and a failed
# set-up (a Spack phase that failed, say) ends it with one line before anything is measured
validate:
	tools/validate --bootstrap

test:
	tools/bootstrap --for test
	tools/run-tests

drill:
	tools/bootstrap --for validate
	tools/drill

onboard:
	tools/bootstrap --for validate
	tests/site/onboard-vcluster

bootstrap:
	tools/bootstrap --for validate

# clean: build trees and run results; the host's history stays, run/state (baselines, ReFrame's results database:
# docs/history.md). To forget it too: rm -rf run/state (tools/refs reset --system S forgets one baseline).
clean:
	rm -rf build
	if [ -d run ]; then find run -mindepth 1 -maxdepth 1 ! -name state -exec rm -rf {} +; fi
