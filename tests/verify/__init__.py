"""The interleaving checker (docs/engine.md, "Every interleaving checked"): the real engine
code, stopped at each of its scheduling points (:mod:`core.seam`), run in real processes on a
real file system in the order a scheduler chooses, every order of two processes' steps with a
crash at every step, and bounded random orders of three and four; peers' protocols as modeled
actors. ``python -m tests.verify`` (``make verify``, ``make verify-mutants``)."""
