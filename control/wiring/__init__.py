"""The one composition root: where the live product is built from the settings and the database.

Read this package first to see how the parts fit. Every other package receives what it needs
through constructors; only here (and in the thin ``control/commands`` that call it) are the
settings read and the concrete classes chosen.

- :mod:`control.wiring.services`: the database's session factory and the services bundle.
- :mod:`control.wiring.executor`: the executor the settings select (local or Ray).
- :mod:`control.wiring.live`: fleet state -> core blueprint -> ``LiveRuntime`` ->
  ``InferenceService`` (with the rollout recorder and the live-config feed), for the gateway.
- :mod:`control.wiring.serve`: the ``LiveRuntime`` alone over the selected executor
  (``legato serve``).
- :mod:`control.wiring.gateway`: the FastAPI app over those parts, with a lifespan that starts
  and stops the live runtime (``legato api``).

Callbacks between layers are passed to constructors here, in dependency order: the gateway's
metrics before the inference service (``on_settled``), the rollout recorder before the runtime
(``on_rollout``). No package below imports this one (``.importlinter``).
"""
