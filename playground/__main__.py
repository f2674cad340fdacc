"""`python -m playground`: the bench CLI, ended without the interpreter's teardown.

Every command writes what it produces before `main` returns: printed lines, the history store's
rows (each committed as it is added), JSONL records (closed as the command ends) and compile
artifacts. What a normal exit adds is torch's teardown: Python unwinds its daemon threads, some of
which sit in torch's C++ code, and C++ static destructors run, the profiler's among them, whose
exit-time order torch keeps fixing. A `warm` child process has died with "terminate called without
an active exception" after the last line it writes to stderr, the mark of a C++ thread torn down at
exit, so a finished command could end as a crash. The process therefore flushes and leaves: no
atexit handler runs after `main`, so a command must never leave work to one.
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
