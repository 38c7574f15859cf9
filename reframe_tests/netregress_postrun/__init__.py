"""netregress_postrun: what reads finished runs. It makes no figure, so editing it leaves host baselines valid.

Modules:
  runsummary  the verdict of a run report (last attempts, failures, what was asserted)
  coverage    which nodes Slurm could not use and which no passing check used
  history     ReFrame's results storage: comparisons with the last pass and the baseline
  report      the comparison report page (tools/report); seed004: seed 004's comparison made again
  refstool    tools/refs: write, accept, record and show references
  postmaint   ci/post-maintenance
  drill       tools/drill: injected faults that must be caught and named
"""
