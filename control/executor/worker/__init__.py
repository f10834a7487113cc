"""The worker side of the local executor: what runs inside a worker process, one per device.

:mod:`.main` is the entry point the host spawns (:func:`~.main.worker_main`); :mod:`.process`
is the worker's serve loop and threads; :mod:`.batches` runs batches on the loaded adapters;
:mod:`.inbox` queues the host's messages; :mod:`.payloads` holds outputs and moves them. It
imports nothing of the host side (``.importlinter``).
"""
