#!/usr/bin/env bash
# Install the peers benchmarks/speed.py compares llmp with into their own venv,
# benchmarks/.peers-venv (gitignored), never into llmp's environment:
#   llm-analysis  pinned in requirements.txt (PyPI);
#   Calculon      calculon-ai/calculon at the commit the published-set peer predictions used
#                 (../shared/data/peers/README.md), installed editable from git so that the
#                 system files it ships (systems/*.json) stay beside the package. Where git
#                 hosting is not reachable, point CALCULON_SRC at a checkout of that commit.
#
#   bash benchmarks/peers/setup.sh                      # or: CALCULON_SRC=/path/to/calculon bash ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../.peers-venv"
calculon_commit=caa4b11f8fe1fee3ba57adaacb7590d7deabd053

"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet -r "$here/requirements.txt"

if [ -n "${CALCULON_SRC:-}" ]; then
  head="$(git -C "$CALCULON_SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
  [ "$head" = "$calculon_commit" ] || echo "note: $CALCULON_SRC is at $head, not the pinned $calculon_commit" >&2
  "$venv/bin/pip" install --quiet -e "$CALCULON_SRC"
elif ! "$venv/bin/pip" install --quiet --src "$venv/src" \
    -e "git+https://github.com/calculon-ai/calculon@$calculon_commit#egg=calculon"; then
  echo "Calculon not installed (its git repository is unreachable from here):" \
       "rerun with CALCULON_SRC=/path/to/a/calculon/checkout; speed.py reports it as not installed." >&2
fi
echo "peers installed in $venv"
