"""``python -m flow_cli``: the ``flow`` command, for an environment whose scripts directory
is not on the ``PATH``. (Not ``python -m flow``: the engine package knows nothing of its
command line.)"""

from flow_cli import main

raise SystemExit(main())
