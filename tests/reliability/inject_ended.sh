#!/bin/sh
# Failure injection at 2 and 4 ranks: a rank whose script has ended while the others, after the cases
# (top-level code, no case's timeout), enter a collective over it.  It sat in MPI_Finalize and they
# waited for ever; the job must end within the limit, with a non-zero status, and the first rank to
# speak must name the rank that ended.
. "$(dirname "$0")/lib.sh"
inject none 2 1
inject none 4 2
inject ended 2 1
inject ended 4 2
finish
