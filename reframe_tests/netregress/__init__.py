"""netregress: the library every netregress check builds on, in three packages by role.

``measure/``
    what makes a figure: the abstract checks (``base``, ``mpicheck``, ``tcppair``, ``peers``, ``iperf``,
    ``roundtrip``, ``allpairs``, ``nodeprobe``), build fixtures (``build``, ``spack_build``), launchers (``launch``),
    the interconnect table (``interconnects``) and the site layer that finds it (``site``), provenance witnesses
    (``provenance``, ``cpulimit``), output parsers (``results``, ``osu_npb``), Slurm's view (``slurm``) and the
    link test's plans (``linkplan``).
``judge/``
    what a figure is and what it is held to: ``figures``, ``references``, ``baselines``, ``bandrules``, ``bands``,
    ``linknames``, ``linkverdict``, ``linkjob``.
``setup/``
    what prepares a machine and makes no figure: the Spack environment split (``spackparts``), carried locks
    (``carriedlock``), source snapshots (``snapshots``).

At the root: ``paths`` (repository locations), ``statefiles`` (files that must survive), ``measurement`` (the
measurement version: a hash of ``measure/``, the checks, the kernel sources, the settings and the virtual
cluster's fabric; a change elsewhere starts no new host baseline) and ``sitecheck`` (``--site`` checked by the
tools). No module here imports ``netregress_postrun``, the package that reads finished runs (test_packages).
"""
