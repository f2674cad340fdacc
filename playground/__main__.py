"""`python -m playground`: the bench CLI, ended without the interpreter's teardown.

Everything a command produces (printed lines, the history store's rows, compile artifacts) is
written before `main` returns. What follows in a normal exit is torch's teardown: Python stops
daemon threads by unwinding them (some sit in torch's C++ code) and C++ static destructors run,
among them the profiler's, whose destruction order torch still fixes release by release. A `warm`
child process died now and then on a 2-core CI machine with "terminate called without an active
exception" after the last line it writes to stderr, the signature of a C++ thread torn down at
exit; here it did not reproduce in 40 runs. A finished command should not end as a crash, so the
process flushes and leaves.
"""

import logging
import os
import sys

from playground.bench import main

code = main()
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code or 0)
