"""An exponential moving average of the weights, with ignite's ``EMAHandler``.

After every optimizer step, each parameter of the averaged copy becomes
``ema = decay * ema + (1 - decay) * weight`` (ignite's ``momentum`` is ``1 - decay``); buffers are
copied. :class:`ForeachEMAHandler` is ignite's handler with the update done by ``torch._foreach_*``
over parameter lists gathered once: the same arithmetic (bit for bit), without walking the modules
every step (on a small model that walk cost as much as the update; bench/overhead.py).
"""
from __future__ import annotations

import torch
from ignite.engine import Engine, Events
from ignite.handlers import EMAHandler

__all__ = ["EMA_STATE_NAME", "ForeachEMAHandler", "attach_ema"]

#: The name under which the handler publishes its momentum on ``engine.state``.
EMA_STATE_NAME = "ema_momentum"


class ForeachEMAHandler(EMAHandler):
    """ignite's ``EMAHandler`` (``handle_buffers="copy"``) with a list-wise update of the parameters."""

    _pairs: tuple[list[torch.Tensor], list[torch.Tensor], list[tuple[torch.Tensor, torch.Tensor]]] | None = None

    def _update_ema_model(self, engine: Engine, name: str) -> None:
        momentum = getattr(engine.state, name)
        if self._pairs is None:  # the modules' tensors stay the same objects while training
            self._pairs = ([p for p in self.ema_model.parameters()], [p.data for p in self.model.parameters()],
                           list(zip(self.ema_model.buffers(), self.model.buffers())))
        ema, raw, buffers = self._pairs
        torch._foreach_mul_(ema, 1.0 - momentum)
        torch._foreach_add_(ema, raw, alpha=momentum)
        for ema_b, model_b in buffers:
            ema_b.data = model_b.data


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
    ema = ForeachEMAHandler(model, momentum=1.0 - decay)
    ema.attach(engine, name=EMA_STATE_NAME, event=Events.ITERATION_COMPLETED)
    return ema.ema_model
