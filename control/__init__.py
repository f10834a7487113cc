"""The control plane. Importing it activates nothing: the entry points that want the compiled
twin core call ``control.native.install()`` first (see ``control.native``)."""
