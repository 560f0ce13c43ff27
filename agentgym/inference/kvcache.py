"""How a transformers model's forward takes its KV cache.

transformers 5.24 renamed the forward argument ``past_key_values`` to ``cache``; the old name
warns (``FutureWarning``) and goes away in 5.40. The engine and the trainers pass a
``DynamicCache`` object under whichever name the model's own forward declares, so a model whose
forward still names ``past_key_values`` (remote code, an older transformers) keeps working.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["cache_keyword"]


def cache_keyword(model: Any) -> str:
    """``"cache"``, or ``"past_key_values"`` where ``model.forward`` declares only that name."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # a forward inspect cannot read: assume the current name
        return "cache"
    if "past_key_values" in parameters and "cache" not in parameters:
        return "past_key_values"
    return "cache"
