"""``python -m llmp``: the ``llmp`` command, for a checkout that is not the installed one."""

import sys

from llmp.cli import main

sys.exit(main())
