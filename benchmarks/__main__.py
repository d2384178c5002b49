"""``python -m benchmarks``: see ``benchmarks.suite``."""

import sys

from benchmarks.suite import main
from cvs_tasks.errors import CvsError

try:
    code = main()
except CvsError as exc:
    print(exc, file=sys.stderr)
    code = exc.exit_code
sys.exit(code)
