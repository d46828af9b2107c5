import sys

from uwbench.cli import main

sys.exit(main())
