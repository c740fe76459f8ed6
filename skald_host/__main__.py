import sys

from skald_host.cli import main

sys.exit(main())
