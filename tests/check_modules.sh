#!/bin/sh
# The layers of src/ and the calls between its modules (check_modules.py):
# no header included from a layer above, no circle of calls.
CHECK_NAME=check_modules
# shellcheck source=tests/checklib.sh
. "$(dirname "$0")/checklib.sh"
need python3
python3 "$(dirname "$0")/check_modules.py" "${BUILD:-build}"
exit $?
