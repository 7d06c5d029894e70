"""``python -m pplab.cli``: the same as the ``pplab`` command."""
import sys

from . import main

sys.exit(main())
