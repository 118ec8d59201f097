import sys

from grid.report import main

sys.exit(main())
