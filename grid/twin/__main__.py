import sys

from grid.twin.cli import main

sys.exit(main())
