"""The ``torch_dynamo_backends`` entry point of ``polyir``.

dynamo imports this module the first time ``torch.compile(...,
backend="polyir")`` names the backend; from then on, a process that ends
without dynamo ever calling the backend logs a warning saying so
(:func:`polyir.frontends.backend_summary.note_lookup`).
"""
from __future__ import annotations

from polyir.frontends.backend_summary import note_lookup
from polyir.frontends.dynamo import polyir_backend

note_lookup()

__all__ = ["polyir_backend"]
