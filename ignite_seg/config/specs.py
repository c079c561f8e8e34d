"""Loader specs: recipes that build the model, the datasets and the loss in any process.

Trials run in other processes, or on other machines, so user objects travel as recipes, never
as live objects. A recipe is the seed's tuple ``(module, attrname, args, kwargs)`` or any
picklable callable. ``"__main__"`` is resolved to the running script's importable module name.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import os
import pickle
import pickletools
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..exceptions import ConfigError, ConfigTypeError

__all__ = ["LoaderSpec", "normalize_spec", "resolve_main_module", "refers_to_main"]

_FORM = "(module, attrname, args, kwargs)"
#: An example of each loader argument, in the messages that say how to write one.
_EXAMPLES = {
    "model_loader": "('mytask', 'model', (), {}) or mytask.model",
    "dataset_loader": "('mytask', 'dataset', (), {}) or mytask.dataset",
    "loss_loader": "('torch.nn', 'CrossEntropyLoss', (), {}) or torch.nn.CrossEntropyLoss",
}
#: The example for any other spec (a handler, a metric): what builds it.
_ANY_EXAMPLE = "('mytask', 'make_it', (), {}) or a top-level function mytask.make_it"

#: Longest ``describe`` recorded in run.json (a summary for people; the fingerprint compares).
DESCRIBE_MAX = 300
#: Largest pickled recipe kept in run.json for ``load_model(trust_recipe=True)``; a larger one
#: (a loader given a big array) is left out, and the model must then be passed to ``load_model``.
PICKLE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class LoaderSpec:
    """A normalized recipe: either ``module.attr(*args, **kwargs)`` or ``fn(*args, **kwargs)``.

    ``path`` is a folder that must be on ``sys.path`` to import ``module`` (set when the
    module is the user's script, resolved from ``"__main__"``).
    """

    module: str | None = None
    attr: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    fn: Callable[..., Any] | None = None
    path: str | None = None

    def resolve(self) -> Callable[..., Any]:
        """Import and return the callable this spec names."""
        if self.fn is not None:
            return self.fn
        assert self.module is not None and self.attr is not None
        if self.path and self.path not in sys.path:
            sys.path.insert(0, self.path)
        main = sys.modules.get("__main__")
        if main is not None and _main_module_name(main) == self.module:
            module: Any = main  # the caller's own script: never import it a second time here
        else:
            module = importlib.import_module(self.module)
        obj: Any = module
        for part in self.attr.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[no-any-return]

    def build(self) -> Any:
        """Call the recipe and return what it builds."""
        return self.resolve()(*self.args, **dict(self.kwargs))

    def describe(self, limit: int | None = None) -> str:
        """A readable summary; cut to ``limit`` characters (with ``...``) when given."""
        target = f"{self.module}.{self.attr}" if self.fn is None else _qualified_name(self.fn)
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        text = f"{target}({', '.join(arguments)})"  # as the call is written: digits.model(), mlp(8, n_out=3)
        return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."

    def fingerprint(self) -> str:
        """sha256 of the recipe's content: equal in every process for equal recipes.

        Unlike ``repr``, it sees every element of an array, orders sets and dicts, and ignores
        object addresses, so two runs compare by what they would build.
        """
        digest = hashlib.sha256()
        _feed(digest, (self.module, self.attr, self.args, dict(self.kwargs), self.fn), set())
        return digest.hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The ``run.json`` record: a summary, the fingerprint, and the pickled recipe if small."""
        data: dict[str, Any] = {
            "describe": self.describe(DESCRIBE_MAX), "fingerprint": self.fingerprint(), "path": self.path,
        }
        if self.fn is None:
            data.update(module=self.module, attr=self.attr)
        blob = pickle.dumps((self.module, self.attr, self.args, dict(self.kwargs), self.fn))
        data["pickle"] = base64.b64encode(blob).decode("ascii") if len(blob) <= PICKLE_MAX_BYTES else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoaderSpec:
        """Rebuild a spec from its ``run.json`` record. **Runs code**: unpickling can import and
        call anything, so use it only on a folder you trust (``load_model(trust_recipe=True)``).
        """
        if not data.get("pickle"):
            raise ConfigError(
                f"the recorded recipe {data.get('describe')} was too large to keep in run.json; "
                "pass the model to load_model(model=...) instead."
            )
        path = data.get("path")
        if path and path not in sys.path:
            sys.path.insert(0, path)
        module, attr, args, kwargs, fn = pickle.loads(base64.b64decode(data["pickle"]))
        return cls(module=module, attr=attr, args=tuple(args), kwargs=kwargs, fn=fn, path=path)


def _qualified_name(fn: Any) -> str:
    if isinstance(fn, functools.partial):
        return f"partial({_qualified_name(fn.func)})"
    if not hasattr(fn, "__qualname__"):  # a callable instance: its class, never its address
        return f"{type(fn).__module__}.{type(fn).__qualname__} instance"
    return f"{getattr(fn, '__module__', '?')}.{fn.__qualname__}"


def _feed(digest: Any, obj: Any, seen: set[int]) -> None:
    """Feed a canonical encoding of ``obj`` to ``digest`` (see :meth:`LoaderSpec.fingerprint`)."""
    tag = type(obj).__qualname__
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        digest.update(f"{tag}:{obj!r};".encode())
    elif isinstance(obj, (list, tuple, set, frozenset, dict)):
        _feed_container(digest, obj, seen)
    elif (arr := _as_array(obj)) is not None:
        digest.update(f"{tag}:{arr.dtype.str}:{arr.shape}:".encode())
        if arr.dtype == object:
            _feed(digest, arr.tolist(), seen)
        else:
            digest.update(arr.tobytes())
    elif isinstance(obj, functools.partial):
        _feed(digest, ("partial", obj.func, obj.args, dict(obj.keywords)), seen)
    elif isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        digest.update(f"ref:{getattr(obj, '__module__', '?')}.{obj.__qualname__};".encode())
    elif id(obj) in seen:
        digest.update(b"cycle;")
    else:
        seen.add(id(obj))
        try:  # (callable, args, state, list items, dict items): the content without addresses
            reduced = obj.__reduce_ex__(4)
            parts: Any = [*reduced[1:3], *(None if it is None else list(it) for it in reduced[3:5])]
        except Exception:  # an object that refuses to reduce: its pickle is all there is
            parts = pickle.dumps(obj)
        _feed(digest, (f"obj:{type(obj).__module__}.{tag}", parts), seen)


def _as_array(obj: Any) -> np.ndarray | None:
    """``obj`` as a contiguous numpy array when it is one (or a torch tensor), else ``None``."""
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return np.ascontiguousarray(obj.detach().cpu().numpy())
    return None


def _feed_container(digest: Any, obj: Any, seen: set[int]) -> None:
    if isinstance(obj, dict):
        items = sorted(((_digest_of(k, seen), v) for k, v in obj.items()), key=lambda item: item[0])
        digest.update(f"dict:{len(items)}[".encode())
        for kd, v in items:
            digest.update(kd.encode())
            _feed(digest, v, seen)
    elif isinstance(obj, (set, frozenset)):
        digest.update(f"set:{len(obj)}[".encode())
        for d in sorted(_digest_of(v, seen) for v in obj):
            digest.update(d.encode())
    else:
        digest.update(f"{type(obj).__qualname__}:{len(obj)}[".encode())
        for v in obj:
            _feed(digest, v, seen)
    digest.update(b"]")


def _digest_of(obj: Any, seen: set[int]) -> str:
    d = hashlib.sha256()
    _feed(d, obj, seen)
    return d.hexdigest()


def _main_module_name(main: Any) -> str | None:
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    file = getattr(main, "__file__", None)
    if file:
        return os.path.splitext(os.path.basename(str(file)))[0]
    return None


def refers_to_main(spec: LoaderSpec) -> bool:
    """Whether a worker needs the running script to build ``spec``: it names the script's module,
    or its pickle (callable, args, kwargs) holds an object defined in ``__main__``."""
    main = sys.modules.get("__main__")
    name = _main_module_name(main) if main is not None else None
    if name is not None and spec.module == name:
        return True
    blob = pickle.dumps((spec.args, dict(spec.kwargs), spec.fn))
    strings = {arg for _, arg, _ in pickletools.genops(blob) if isinstance(arg, str)}
    return "__main__" in strings or any(s.startswith("__main__ ") for s in strings)


def resolve_main_module(argname: str) -> tuple[str, str | None]:
    """Return ``(module_name, sys_path_entry)`` under which ``__main__`` can be imported."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name), os.getcwd()
    file = getattr(main, "__file__", None)
    if not file:
        raise ConfigError(
            f"{argname} refers to '__main__', but the main program is interactive (no script "
            "file), so worker processes cannot import it. Move the loader into a module (a .py "
            "file) and name that module instead."
        )
    name = os.path.splitext(os.path.basename(file))[0]
    if not name.isidentifier():
        raise ConfigError(
            f"{argname} refers to '__main__', whose file {file!r} is not importable under a "
            f"module name ({name!r} is not an identifier). Rename the script, e.g. to "
            f"{name.replace('-', '_')!r}.py."
        )
    return name, os.path.dirname(os.path.abspath(file))


def normalize_spec(value: Any, argname: str) -> LoaderSpec:
    """Check one loader argument of ``train()`` and turn it into a :class:`LoaderSpec`.

    Raises:
        ConfigTypeError: the value is neither a 4-tuple of the documented form nor a callable.
        ConfigError: ``__main__`` cannot be resolved, or the callable cannot be pickled.
    """
    if isinstance(value, LoaderSpec):
        return value
    example = _EXAMPLES.get(argname, _ANY_EXAMPLE)
    if _is_built_module(value):
        raise ConfigTypeError(
            f"{argname} is a built {type(value).__name__} (a torch.nn.Module instance); pass what builds it: "
            f"the function or class itself, not the result of calling it, e.g. {example}. Trials build "
            "their own in worker processes."
        )
    if isinstance(value, (tuple, list)):
        if not any(isinstance(v, str) for v in value):  # not meant as (module, attrname, ...): objects
            raise ConfigTypeError(
                f"{argname} must be a loader: a 4-tuple {_FORM} or a picklable callable, e.g. {example}; got "
                f"{_summary(value)}." + (" To hand over datasets, pass a function that returns them, e.g. "
                                         "def dataset(): return train_set, val_set" if argname == "dataset_loader"
                                         else "")
            )
        return _from_tuple(value, argname)
    if callable(value):
        return _from_callable(value, argname)
    raise ConfigTypeError(
        f"{argname} must be a loader: a 4-tuple {_FORM} or a picklable callable, e.g. {example}; got "
        f"{_summary(value)}" + (" (for datasets, pass a function that returns (train_set, val_set))."
                                if argname == "dataset_loader" else ".")
    )


def _is_built_module(value: Any) -> bool:
    """Whether ``value`` is a ``torch.nn.Module`` instance (without importing torch here)."""
    return any(c.__name__ == "Module" and c.__module__ == "torch.nn.modules.module" for c in type(value).__mro__)


def _summary(value: Any) -> str:
    """A short description of a bad loader argument: its type, and the types inside a tuple."""
    if isinstance(value, (tuple, list)):
        inner = ", ".join(type(v).__name__ for v in value[:6]) + (", ..." if len(value) > 6 else "")
        return f"a {type(value).__name__} of {len(value)} item(s) ({inner})"
    text = repr(value)
    return f"{text if len(text) <= 80 else text[:77] + '...'} ({type(value).__name__})"


def _from_tuple(value: tuple[Any, ...] | list[Any], argname: str) -> LoaderSpec:
    if len(value) != 4:
        raise ConfigTypeError(
            f"{argname} must be a 4-tuple {_FORM}, e.g. {_EXAMPLES.get(argname, _ANY_EXAMPLE)}; got "
            f"{len(value)} items: {tuple(value)!r}."
        )
    module, attr, args, kwargs = value
    if not isinstance(module, str) or not module:
        raise ConfigTypeError(f"{argname}[0] (module) must be a module name string, got {module!r}.")
    if not isinstance(attr, str) or not attr:
        raise ConfigTypeError(f"{argname}[1] (attrname) must be an attribute name string, got {attr!r}.")
    if not isinstance(args, (tuple, list)):
        raise ConfigTypeError(f"{argname}[2] (args) must be a tuple, got {args!r}; use () for none.")
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ConfigTypeError(
            f"{argname}[3] (kwargs) must be a dict with string keys, got {kwargs!r}; use {{}} for none."
        )
    path = None
    if module == "__main__":
        module, path = resolve_main_module(argname)
    spec = LoaderSpec(module=module, attr=attr, args=tuple(args), kwargs=dict(kwargs), path=path)
    _check_picklable(spec, argname, "its args and kwargs")
    return spec


def _from_callable(fn: Callable[..., Any], argname: str) -> LoaderSpec:
    if isinstance(fn, functools.partial):
        inner = _from_callable(fn.func, argname)
        return LoaderSpec(
            module=inner.module,
            attr=inner.attr,
            fn=inner.fn,
            path=inner.path,
            args=inner.args + tuple(fn.args),
            kwargs={**inner.kwargs, **fn.keywords},
        )
    qualname = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if qualname and "<" not in qualname and module:
        if module == "__main__":
            name, path = resolve_main_module(argname)
            return LoaderSpec(module=name, attr=qualname, path=path)
        spec = LoaderSpec(module=module, attr=qualname)
        try:
            if spec.resolve() is fn:
                return spec
        except (ImportError, AttributeError):
            pass
    spec = LoaderSpec(fn=fn)
    _check_picklable(spec, argname, "the callable")
    return spec


def _check_picklable(spec: LoaderSpec, argname: str, what: str) -> None:
    try:
        pickle.dumps(spec)
    except Exception as exc:  # pickling raises many types (PicklingError, TypeError, AttributeError)
        raise ConfigError(
            f"{argname}={spec.describe()}: {what} cannot be pickled ({exc}), so it cannot be "
            "sent to worker processes. Use a top-level function or class (not a lambda or a "
            "local function), or a loader tuple (module, attrname, args, kwargs)."
        ) from None
