"""Schedule generators, one module per family. Each is a function ``(P, M, V) -> Schedule``
that raises ValueError naming the rule broken; ``pplab.registry`` lists them by name."""
