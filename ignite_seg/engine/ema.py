"""An exponential moving average of the weights, with ignite's ``EMAHandler``.

After every optimizer step, each parameter (and buffer) of the averaged copy becomes
``ema = decay * ema + (1 - decay) * weight`` (ignite's ``momentum`` is ``1 - decay``).
"""
from __future__ import annotations

import torch
from ignite.engine import Engine, Events
from ignite.handlers import EMAHandler

__all__ = ["EMA_STATE_NAME", "attach_ema"]

#: The name under which the handler publishes its momentum on ``engine.state``.
EMA_STATE_NAME = "ema_momentum"


def attach_ema(engine: Engine, model: torch.nn.Module, decay: float | None) -> torch.nn.Module:
    """Average ``model``'s weights on ``engine`` with ``decay``; return the model to evaluate and save.

    ``decay=None`` attaches nothing and returns ``model`` itself. Attach it before the handlers that
    evaluate on ``Events.ITERATION_COMPLETED``, so they see the average of that step. The averaged copy
    starts from ``model``'s weights at this call; the handler is attached once per engine.
    """
    if decay is None:
        return model
    for handler, *_ in engine._event_handlers.get(Events.ITERATION_COMPLETED, []):  # (handler, args, kwargs)
        owner = getattr(handler, "__self__", None)
        if isinstance(owner, EMAHandler) and owner.model is model:
            return owner.ema_model
    ema = EMAHandler(model, momentum=1.0 - decay)
    ema.attach(engine, name=EMA_STATE_NAME, event=Events.ITERATION_COMPLETED)
    return ema.ema_model
