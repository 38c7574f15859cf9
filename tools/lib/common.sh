# Sourced by the tools: the venv's Python and ReFrame, the library on PYTHONPATH, and the site layer.
#   nr_take_site "$@"   takes --site DIR (or --site=DIR) out of the arguments into NETREGRESS_SITE, loads the site
#                       (netregress.sitecheck: one line naming what is wrong, exit 2), leaves the rest in NR_ARGS,
#                       and makes RFM_PREFIX, unless set, where the site's runs go (its settings; docs/site.md)
#   nr_config_args      the ReFrame -C arguments: config/settings.py, then the site's settings.py (and -c of the
#                       site's checks/ directory when it has one)
#   nr_pick_python      sets nr_py: the venv's Python, else NETREGRESS_PYTHON, else python3 (again once tools/bootstrap
#                       has made the venv); bench/benchenv.py picks a bench script's Python in the same order
#   nr_need_reframe     (nr_take_site calls it) one line and exit 2 when nr_py is not the venv's and has no ReFrame:
#                       no venv, or one this user cannot run (a shared install whose interpreter is in a private home)
root=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
NR_DEPS=${NETREGRESS_DEPS:-$root/.deps}
nr_pick_python() {
  local cand
  nr_py=python3
  for cand in "$NR_DEPS/venv/bin/python" "${NETREGRESS_PYTHON:-}"; do
    [ -n "$cand" ] && [ -x "$cand" ] && { nr_py=$cand; break; }
  done
  return 0
}
nr_pick_python
export PYTHONPATH="$root/reframe_tests${PYTHONPATH:+:$PYTHONPATH}"

nr_need_reframe() {
  local venv=$NR_DEPS/venv/bin/python why
  [ "$nr_py" = "$venv" ] && return 0
  "$nr_py" -c 'import reframe' 2>/dev/null && return 0
  if [ -e "$venv" ] || [ -L "$venv" ]; then
    why="$venv is there but $(id -un) cannot run it (it, or the interpreter it links to, is not readable for $(id -un))"
  else
    why="no venv in $NR_DEPS (tools/bootstrap makes it)"
  fi
  echo "${0##*/}: no Python with ReFrame: $why, and $nr_py has no ReFrame; set NETREGRESS_DEPS to a venv you may" \
       "run, or NETREGRESS_PYTHON" >&2
  exit 2
}

nr_take_site() {
  nr_need_reframe
  NR_ARGS=()
  while [ $# -gt 0 ]; do
    case $1 in
      --site) [ $# -ge 2 ] || { echo "${0##*/}: --site needs a directory" >&2; exit 2; }
              export NETREGRESS_SITE=$2; shift 2 ;;
      --site=*) export NETREGRESS_SITE=${1#--site=}; shift ;;
      --) NR_ARGS+=("$@"); break ;;
      *) NR_ARGS+=("$1"); shift ;;
    esac
  done
  if [ -n "${NETREGRESS_SITE:-}" ]; then
    # loaded once: a wrong site is one line; what it says is where a tool writes unless told (RFM_PREFIX)
    local run
    run=$("$nr_py" -m netregress.sitecheck load --run-dir) || exit 2
    NETREGRESS_SITE=$(cd "$NETREGRESS_SITE" && pwd)
    NR_SITE_RUN=$run
    [ -n "${RFM_PREFIX:-}" ] || export RFM_PREFIX=$run
  fi
}

nr_config_args() {
  NR_CONFIG=(-C "$root/config/settings.py")
  [ -n "${NETREGRESS_SITE:-}" ] && NR_CONFIG+=(-C "$NETREGRESS_SITE/settings.py")
  # a site's own checks, beside ours (docs/site.md)
  [ -n "${NETREGRESS_SITE:-}" ] && [ -d "$NETREGRESS_SITE/checks" ] && NR_CONFIG+=(-c "$NETREGRESS_SITE/checks")
  return 0
}
