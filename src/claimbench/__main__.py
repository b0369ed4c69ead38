import sys

from claimbench.cli import main

sys.exit(main())
