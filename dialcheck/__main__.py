"""`python -m dialcheck` = the `dialcheck` command."""
import sys

from dialcheck.cli import main

sys.exit(main())
