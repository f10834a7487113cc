"""The old home of ``fast_init``, kept for the never-compiled classes that still import it from
here (``control/executor/base.py``). Value classes are declared with ``@value`` or ``@record``
from :mod:`control.core.values`; this module goes once nothing imports it."""

from control.core.values import fast_init as fast_init
