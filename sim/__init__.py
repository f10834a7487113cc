"""The SimPy digital twin. Some of its modules are compiled with the core: an entry point that
wants the compiled ones calls ``control.native.install()`` before importing them (see
``control.native``)."""
