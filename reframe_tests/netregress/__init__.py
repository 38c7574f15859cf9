"""netregress: the ReFrame library shared by every netregress check.

The package holds no site data. What a site has (systems, partitions, MPI builds, interface names) comes from
``config/settings.py`` and the partition/environment ``extras``; how an interconnect is forced for an MPI family comes
from ``config/interconnects.yaml``; what a result must reach comes from ``reference_values/``.

Modules:
  paths          repository-relative locations (config, reference values, run directory, prebuilt kernels)
  results        the one helper that reads a kernel's JSON result (sanity + performance)
  references     reference lookup: missing reference -> error, never a silent pass
  interconnects  loader for the interconnect x MPI-family table
  provenance     /proc/net/dev arithmetic and MPI transport reports
  launch         a launcher built from the environment's launch template
  build          build fixtures (prebuilt | cmake | spack seam)
  base           abstract checks: NetregressCheck -> KernelCheck -> MPI/TCP benchmark bases
"""
