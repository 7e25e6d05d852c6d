"""`python -m tools.conformance ...`: see `tools.conformance.runner`."""

import sys

from tools.conformance.runner import main

sys.exit(main())
