#!/bin/sh
# Failure injection at 2 and 4 ranks: a rank that calls os.exit(0) in the middle of a case.
# The whole job must end within the timeout + a margin, with a non-zero
# exit status, and the first rank to speak must name itself and the case.
. "$(dirname "$0")/lib.sh"
inject none 2 1
inject none 4 2
inject exit 2 1
inject exit 4 2
finish
