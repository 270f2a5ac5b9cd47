#!/bin/sh
# The layers of src/ and the calls between its modules (check_modules.py):
# no header included from a layer above, no circle of calls.
exec python3 "$(dirname "$0")/check_modules.py" "${BUILD:-build}"
