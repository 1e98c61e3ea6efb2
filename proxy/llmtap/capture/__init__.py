"""Capture: the event-loop tee (:mod:`.tee`) and the worker-side record builder (:mod:`.build`).

Also here: the provider error taxonomy (:mod:`.taxonomy`), response-header facts
(:mod:`.headers`) and token estimation (:mod:`.estimate`).
"""

from __future__ import annotations

from .build import CallContext, build
from .estimate import TokenEstimator
from .tee import Capture, End, RequestFacts

__all__ = ["CallContext", "Capture", "End", "RequestFacts", "TokenEstimator", "build"]
