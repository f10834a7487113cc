"""The control plane. Importing it installs the native twin core when a current build exists
(see ``control.native``; ``LEGATO_NATIVE=0`` turns it off)."""

from control import native

native.install()
