import sys

from playground.bench import main

sys.exit(main())
