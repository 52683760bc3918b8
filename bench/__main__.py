"""`python -m bench`: the whole suite (bench/run.py)."""

import sys

from bench.run import main

sys.exit(main())
