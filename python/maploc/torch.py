"""maploc.torch - maploc.load returning torch.Tensors: a drop-in for torch.load(weights_only=True) that runs
nothing from the file and also reads what weights_only=True refuses (legacy, tar, TorchScript archives).

Importing this module needs no torch (the wheel depends on neither torch nor numpy): torch is imported on
the first call of load() or the first use of WrapperSubclass (maploc._torch_load, the implementation), and
an ImportError saying so is raised there where torch is missing. docs/python.md, "maploc.torch".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import maploc as _maploc

if TYPE_CHECKING:
    from maploc._torch_load import WrapperSubclass

__all__ = ["load", "WrapperSubclass"]


def _impl() -> Any:
    try:
        from maploc import _torch_load
    except ImportError as e:
        if getattr(e, "name", None) != "torch":
            raise
        raise ImportError("maploc.torch needs torch, which is not importable here (%s); install torch, or use "
                          "maploc.load, which returns maploc.Tensor objects without it" % e) from e
    return _torch_load


def load(f: _maploc.FileLike, map_location: _maploc.MapLocation = None, *, weights_only: bool = True,
         mmap: Optional[bool] = None, host: str = "view", writable: bool = True, populate: bool = False) -> Any:
    """torch.load(f, map_location, weights_only=True) without running anything from the file: the same
    nested structure with torch.Tensors, nn.Parameters and requires_grad as torch restores them. Arguments
    and errors: maploc._torch_load.load (docs/python.md, "maploc.torch"); torch is imported here, on the
    first call (ImportError naming torch where it is missing)."""
    return _impl().load(f, map_location, weights_only=weights_only, mmap=mmap, host=host, writable=writable,
                        populate=populate)


def __getattr__(name: str) -> Any:
    """WrapperSubclass (the inert stand-in for wrapper tensor subclasses) comes from the implementation."""
    if name == "WrapperSubclass":
        return _impl().WrapperSubclass
    raise AttributeError("module 'maploc.torch' has no attribute %r" % name)
