#!/bin/sh
# Failure injection at 2 and 4 ranks: an error raised on one rank in the middle of a case, after one collective and before the next.
# The whole job must end within the timeout + a margin, with a non-zero
# exit status, and the first rank to speak must name the failed rank and the case (a rank waiting for it
# in the next collective, which its failure note ends at once).
. "$(dirname "$0")/lib.sh"
inject none 2 1
inject none 4 3
inject error 2 1
inject error 4 3
# the same with mpirun's orte_abort_non_zero_exit off: ranks must end the job by MPI_Abort (Open MPI 4)
INJECT_ABORT0=1
inject error 4 3
INJECT_ABORT0=
finish
