import sys

from bnpmix.pipeline.cli import main

sys.exit(main())
