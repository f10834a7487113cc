"""The SimPy digital twin. ``control`` is imported first so that the native-core hook is in place
before any twin module is (some are compiled with the core; see ``control.native``)."""

import control  # noqa: F401  (installs the native hook)
