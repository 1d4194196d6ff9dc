#!/usr/bin/env bash
# The project's test command: the serial suite, then the MPI suite at 3 and 4 ranks.
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest tests "$@"
for n in 3 4; do
    mpiexec -n "$n" python -m pytest --with-mpi -q -p no:cacheprovider tests/mpi "$@"
done
