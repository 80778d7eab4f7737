#!/bin/sh
# Failure injection at 2 and 4 ranks: a rank that spins in a busy loop past the per-case timeout.
# The whole job must end within the timeout + a margin, with a non-zero
# exit status, and the first rank to speak must name itself and the case.
. "$(dirname "$0")/lib.sh"
inject none 2 1
inject none 4 3
inject hang 2 1
inject hang 4 3
finish
