"""netregress_postrun: what reads finished runs. It makes no figure, so editing it leaves host baselines valid.

Modules:
  runreport   the run-report model every reader uses (last attempts, case names, perf values, declarations)
  runsummary  the verdict of a run report (failures, what was asserted)
  coverage    which nodes Slurm could not use and which no passing check used
  history     ReFrame's results storage: comparisons with the last pass and the baseline
  changepoints  persistent shifts in one figure's stored history (rank-sum binary segmentation)
  report      tools/report (reportmodel, reportplots, reporthistory, reportwriters; templates/); seed004
  refstool    tools/refs's command line; refswrite: run reports into reference files; refsaccept: accept a
              deliberate change; refsbaseline: record, show and reset the host baseline
  postmaint   ci/post-maintenance
  drill       tools/drill: injected faults that must be caught and named
"""
