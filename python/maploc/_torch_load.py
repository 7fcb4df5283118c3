"""maploc._torch_load - maploc.torch's implementation: maploc.load returning torch.Tensors, a drop-in for
torch.load(weights_only=True) that runs nothing from the file and also reads what weights_only=True refuses
(legacy, tar, TorchScript archives).

The only module of the package that imports torch; maploc.torch imports it on first use, so that
`import maploc.torch` works where torch is not installed. docs/python.md, "maploc.torch".
"""
from __future__ import annotations

from typing import Any, Optional

import ctypes as _ctypes
import gc as _gc
import struct as _struct
import inspect as _inspect
import json as _json

import torch as _torch

import maploc as _maploc
from maploc import _capi

__all__ = ["load", "WrapperSubclass"]


class WrapperSubclass(dict):
    """A wrapper tensor subclass of the file (torchao's quantized weights, TwoTensor, ...), which torch.load
    rebuilds by importing its class and calling its __tensor_unflatten__: maploc.torch never imports a class
    named in a file, so it returns this inert stand-in instead. It is a dict of the inner tensors
    ({attribute: torch.Tensor}, e.g. {"qdata": ..., "scale": ...} or {"a": ..., "b": ...}), in file order, with
    `cls` (the class's "module.Name", a string), `attributes` (its tensor-free state, JSON-decoded:
    {"block_size": [1, 64], ...}), and the outer tensor's `shape`, `dtype`, `device` and `requires_grad`.
    Code that trusts the class can rebuild it itself (e.g. cls.__tensor_unflatten__(inner, attributes, ...))."""

    def __init__(self, inner, *, cls, attributes, shape, dtype, device, requires_grad):
        super().__init__(inner)
        self.cls = cls
        self.attributes = attributes
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.requires_grad = requires_grad

    def __repr__(self):
        return (f"maploc.torch.WrapperSubclass({self.cls}, shape={tuple(self.shape)}, dtype={self.dtype}, "
                f"inner={list(self)}, attributes={self.attributes})")

_DTYPES = {name: getattr(_torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "complex32", "complex64", "complex128", "int64", "int32",
    "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool", "qint8", "quint8", "qint32", "quint4x2",
    "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    "bits8", "bits16") if isinstance(getattr(_torch, name, None), _torch.dtype)}


def _torch_dtype(name):
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise _maploc.Error(313, f"maploc.torch: this torch ({_torch.__version__}) has no dtype {name}")
    return dtype


# Sparse layouts: their components' roles in order, and the factory taking them (then size=).
_SPARSE = {
    "sparse_coo": (("indices", "values"), "sparse_coo_tensor"),
    "sparse_csr": (("crow_indices", "col_indices", "values"), "sparse_csr_tensor"),
    "sparse_csc": (("ccol_indices", "row_indices", "values"), "sparse_csc_tensor"),
    "sparse_bsr": (("crow_indices", "col_indices", "values"), "sparse_bsr_tensor"),
    "sparse_bsc": (("ccol_indices", "row_indices", "values"), "sparse_bsc_tensor"),
}


def _global_value(module, name):
    """torch's dtypes (torch.float32 in an optimizer state, a config) as the dtype objects themselves."""
    if module == "torch":
        value = getattr(_torch, name, None)
        if isinstance(value, _torch.dtype):
            return value
    return None


def _call(callable_, args):
    """The plain-data calls torch's weights-only unpickler also allows: torch.Size, torch.device."""
    if callable_.module == "torch":
        try:
            if callable_.name == "Size" and len(args) == 1 and isinstance(args[0], (tuple, list)):
                return _torch.Size(args[0])
            if callable_.name == "device" and 1 <= len(args) <= 2 and all(isinstance(a, (str, int)) for a in args):
                return _torch.device(*args)
        except (TypeError, RuntimeError, ValueError):
            return NotImplemented
    return NotImplemented


def _untyped(t):
    if hasattr(t, "untyped_storage"):   # torch >= 2.0
        return t.untyped_storage()
    s = t.storage()                     # torch 1.13: a TypedStorage over the untyped one
    for attribute in ("_untyped_storage", "_storage"):
        if hasattr(s, attribute):
            return getattr(s, attribute)
    return s._untyped()


class _Builder:
    """torch.Tensors over one load: each storage exported once by DLPack (a 1-D uint8 tensor over its
    placed bytes), each tensor a dtype view of it with the file's geometry, so tensors that share a storage
    share one torch storage (same untyped_storage().data_ptr()). A tensor alone on its storage, contiguous
    and covering all of its bytes is exported by itself instead (the same torch storage, one torch call)."""

    def __init__(self, loaded):
        self.loaded = loaded
        self.bases = {}
        self.raw = _capi.TensorInfo()
        self.raw_ref = _ctypes.byref(self.raw)
        self.raw_addr = _ctypes.addressof(self.raw)
        self.strings = {}   # C string address -> str, for this load (the strings live as long as it does)
        self.get = _capi.lib.maploc_loaded_tensor
        self.handle = loaded.handle
        self.held = None
        self.infos = None   # every tensor's maploc_tensor_info, unpacked once (the fast path's pre-pass)
        self.uses = None    # storage index -> how many tensors view it
        self.storage_raw = _capi.StorageInfo()
        self.storage_ref = _ctypes.byref(self.storage_raw)
        self.get_storage = _capi.lib.maploc_loaded_storage
        self.export = _capi.lib.maploc_loaded_dlpack
        self.managed = _ctypes.c_void_p()
        self.managed_ref = _ctypes.byref(self.managed)

    def _scan(self):
        """Reads every tensor's struct once (one ctypes call and one struct.unpack each) and counts the tensors
        of each storage: a tensor alone on its storage and covering it exactly is exported by itself."""
        get, handle, raw, raw_ref = self.get, self.handle, self.raw, self.raw_ref
        infos = []
        uses = {}
        for index in range(_capi.lib.maploc_loaded_tensor_count(handle)):
            code = get(handle, index, raw_ref)
            if code:
                infos.append(None)   # the general way raises the error where the tree asks for it
                continue
            info = _INFO_UNPACK(raw)
            infos.append(info)
            storage = info[7]
            uses[storage] = uses.get(storage, 0) + 1
        self.infos, self.uses = infos, uses

    def _string(self, address):
        s = self.strings.get(address)
        if s is None:
            s = self.strings[address] = _ctypes.string_at(address).decode("utf-8", "surrogateescape")
        return s

    def fast(self, index):
        """The common tensor (dense, placed, no conj/neg bits) from one snapshot of the C struct: one ctypes
        call and one struct.unpack instead of a dozen ctypes field reads; others go the general way."""
        infos = self.infos
        if infos is None:
            self._scan()
            infos = self.infos
        info = infos[index] if index < len(infos) else None
        if info is None:
            return self.general(index)
        (_, dtype, kind, ndim, shape, stride, offset, storage, requires_grad, conj, neg, _, _, data,
         parameter) = info
        if not data or conj or neg or storage < 0 or not kind \
                or (self.strings.get(kind) or self._string(kind)) != "dense":
            return self.general(index)
        dt = _DTYPES.get(self.strings.get(dtype) or self._string(dtype))
        if dt is None:
            return self.general(index)
        t = None
        if not offset and self.uses[storage] == 1 and (stride or not ndim):
            # Alone on its storage: when it is contiguous and covers the storage's bytes exactly, its own
            # DLPack export gives torch the same storage (pointer, bytes) and geometry as the storage-wide
            # export followed by view(dtype) and as_strided: one torch call instead of three, and no read of
            # its shape and strides here (torch reads them from the export; checked on the result).
            itemsize = _EXACT.get(dt)
            if itemsize is not None and self.get_storage(self.handle, storage, self.storage_ref) == 0:
                nbytes = self.storage_raw.nbytes
                if nbytes:
                    t = self._own(index, dt, itemsize, nbytes)
        if t is None:
            if ndim:
                unpack = _I64N.get(ndim)
                if unpack is None:
                    unpack = _I64N[ndim] = _struct.Struct(f"@{ndim}q").unpack
                if not stride:
                    return self.general(index)
                size = 8 * ndim
                sizes = unpack(_ctypes.string_at(shape, size))
                if 0 in sizes:
                    # empty tensors the general way (a storage of no bytes has nothing to export)
                    return self.general(index)
                strides = unpack(_ctypes.string_at(stride, size))
            else:
                sizes = strides = ()
            base = self.bases.get(storage)
            if base is None:
                base = self.bases[storage] = _FROM_DLPACK(self.loaded.storage_dlpack(storage))
            t = (base.view(dt) if dt is not _torch.uint8 else base).as_strided(sizes, strides, offset)
        if parameter:
            return _torch.nn.Parameter(t, requires_grad=bool(requires_grad))
        if requires_grad:
            t.requires_grad_(True)
        return t

    def _own(self, index, dt, itemsize, nbytes):
        """Tensor `index` by its own DLPack export (0.x capsule) when torch makes of it a contiguous tensor of
        dtype `dt` spanning exactly `nbytes` (then its storage is the file storage's bytes, as the storage-wide
        way gives), else None (the storage-wide way then decides)."""
        if self.export(self.handle, index, self.managed_ref) != 0:
            return None
        managed = self.managed.value
        try:
            capsule = _NEW_CAPSULE(managed, _DLTENSOR, _DESTRUCTOR)
        except BaseException:
            _capi.lib.maploc_dlpack_free(managed)
            raise
        t = _FROM_DLPACK(capsule)
        if t.dtype is dt and t.is_contiguous() and t.numel() * itemsize == nbytes:
            return t
        return None

    def base(self, storage, device, numel):
        b = self.bases.get(storage)
        if b is None:
            # A storage of no bytes has no data pointer to export; only an empty tensor can view it.
            if numel == 0 and self.loaded.storage_info(storage).nbytes == 0:
                b = _torch.empty(0, dtype=_torch.uint8, device=device)
            else:
                b = _torch.utils.dlpack.from_dlpack(self.loaded.storage_dlpack(storage))
            self.bases[storage] = b
        return b

    def info(self, index):
        """Tensor `index`'s description, read straight from the C struct (one ctypes call, few decodes)."""
        raw = self.raw
        _capi.check(_capi.lib.maploc_loaded_tensor(self.loaded.handle, index, self.raw_ref))
        i = _Info()
        i.kind = _text(raw.kind)
        i.dtype = _text(raw.dtype)
        n = raw.ndim
        i.shape = tuple(raw.shape[:n]) if n else ()
        i.stride = tuple(raw.stride[:n]) if n and raw.stride else ()
        i.storage_offset = raw.storage_offset
        i.storage_index = None if raw.storage < 0 else raw.storage
        i.requires_grad = bool(raw.requires_grad)
        i.is_parameter = bool(raw.parameter)
        i.conj, i.neg = bool(raw.conj), bool(raw.neg)
        i.device = _text(raw.device)
        i.index = index
        i.loaded = self.loaded
        return i

    def sparse(self, index, info):
        """A sparse tensor from its components, which follow it in the tensor list (docs/torch.md)."""
        roles, make = _SPARSE[info.kind]
        parts = []
        for k, role in enumerate(roles):
            part = _maploc.Tensor(self.loaded, index + 1 + k)
            if part.name != f"{info.name}.{role}" or part.kind != "dense":
                raise _maploc.Error(313, f"maploc.torch: sparse tensor '{info.name}' has no component {role}")
            parts.append(self.tensor(index + 1 + k))
        factory = getattr(_torch, make, None)
        if factory is None:
            raise _maploc.Error(313, f"maploc.torch: tensor '{info.name}' is {info.kind}, which this torch "
                                     f"({_torch.__version__}) cannot build (no torch.{make})")
        t = factory(*parts, size=info.shape, dtype=_torch_dtype(info.dtype))
        if info.requires_grad:
            t.requires_grad_(True)
        return t

    def extra(self, index):
        """What maploc_tensor_info does not say (maploc_loaded_tensor_extra): quantizer, subclass, counts."""
        e = _capi.TensorExtra()
        _capi.check(_capi.lib.maploc_loaded_tensor_extra(self.loaded.handle, index, _ctypes.byref(e)))
        return e

    def components(self, index, extra):
        """{role: tensor index} of a composite's components."""
        out = {}
        role, tensor = _ctypes.c_char_p(), _ctypes.c_size_t()
        for k in range(extra.component_count):
            _capi.check(_capi.lib.maploc_loaded_tensor_component(self.loaded.handle, index, k, _ctypes.byref(role),
                                                                 _ctypes.byref(tensor)))
            out[_capi.text(role.value)] = tensor.value
        return out

    def attributes(self, index, extra):
        """{name: JSON-decoded value} of a tensor's tensor-free state."""
        out = {}
        name, text = _ctypes.c_char_p(), _ctypes.c_char_p()
        for k in range(extra.attribute_count):
            _capi.check(_capi.lib.maploc_loaded_tensor_attribute(self.loaded.handle, index, k, _ctypes.byref(name),
                                                                 _ctypes.byref(text)))
            out[_capi.text(name.value)] = _json.loads(_capi.text(text.value))
        return out

    def composite(self, index, info):
        if info.kind == "quantized":
            return self.quantized(index, info)
        if info.kind == "nested_jagged":
            return self.jagged(index, info)
        if info.kind == "wrapper_subclass":
            return self.wrapper(index, info)
        if info.kind == "nested" and hasattr(_torch, "_nested_view_from_buffer"):
            # torch's own _rebuild_nested_tensor is this call on the four components.
            parts = self.components(index, self.extra(index))
            return _torch._nested_view_from_buffer(*(self.tensor(parts[role]) for role in
                                                     ("buffer", "sizes", "strides", "storage_offsets")))
        raise _maploc.Error(313, f"maploc.torch: tensor '{info.name}' is {info.kind}, which maploc.torch does not "
                                 f"rebuild with this torch ({_torch.__version__}: no constructor takes its parts; "
                                 "maploc.load returns it as a maploc.Tensor, its components as tensors of their own)")

    def quantized(self, index, info):
        """torch's _rebuild_qtensor with torch's own constructors: an empty quantized tensor of the file's
        quantizer, set_ to the file's storage, size, stride and offset (so the storage stays shared)."""
        e = self.extra(index)
        qscheme = _capi.text(e.qscheme)
        dtype = _torch_dtype(info.dtype)
        if info.storage_index is None or info.device == "meta":
            raise _maploc.Error(313, f"maploc.torch: quantized tensor '{info.name}' has no storage on the CPU or "
                                     "a GPU to view")
        if qscheme in ("per_tensor_affine", "per_tensor_symmetric"):
            t = _torch._empty_affine_quantized([0], scale=e.q_scale, zero_point=e.q_zero_point, dtype=dtype,
                                               device=info.device)
        elif qscheme.startswith("per_channel_"):
            parts = self.components(index, e)
            t = _torch._empty_per_channel_affine_quantized(
                [0], scales=self.tensor(parts["scales"]), zero_points=self.tensor(parts["zero_points"]),
                axis=e.q_axis, dtype=dtype, device=info.device)
        else:
            raise _maploc.Error(313, f"maploc.torch: quantized tensor '{info.name}' has qscheme {qscheme}, which "
                                     "maploc.torch does not rebuild")
        base = self.base(info.storage_index, info.device, 1)
        t.set_(_untyped(base), info.storage_offset, info.shape, info.stride)
        if info.requires_grad:
            t.requires_grad_(True)
        return t

    def jagged(self, index, info):
        """torch.nested.nested_tensor_from_jagged over the file's values/offsets[/lengths] (torch >= 2.3)."""
        make = getattr(getattr(_torch, "nested", None), "nested_tensor_from_jagged", None)
        if make is None:
            raise _maploc.Error(313, f"maploc.torch: tensor '{info.name}' is a jagged nested tensor, which this "
                                     f"torch ({_torch.__version__}) cannot build (torch.nested.nested_tensor_from_jagged "
                                     "needs torch >= 2.3)")
        e = self.extra(index)
        parts = self.components(index, e)
        attributes = self.attributes(index, e)
        kwargs = {"offsets": self.tensor(parts["offsets"])}
        if "lengths" in parts:
            kwargs["lengths"] = self.tensor(parts["lengths"])
        try:
            accepted = set(_inspect.signature(make).parameters)
        except (TypeError, ValueError):
            accepted = {"jagged_dim"}
        for name, attribute in (("jagged_dim", "ragged_idx"), ("min_seqlen", "min_seqlen"),
                                ("max_seqlen", "max_seqlen")):
            if attribute in attributes and name in accepted:
                kwargs[name] = attributes[attribute]
        t = make(self.tensor(parts["values"]), **kwargs)
        if info.requires_grad:
            t.requires_grad_(True)
        return t

    def wrapper(self, index, info):
        """A wrapper subclass (torchao's quantized weights, TwoTensor) as an inert maploc.torch.WrapperSubclass:
        the class is never imported."""
        e = self.extra(index)
        if self.held is None:   # tensor -> its inner tensors, built once per load
            self.held = {}
            count = _capi.lib.maploc_loaded_tensor_count(self.loaded.handle)
            for k in range(count):
                held_by = self.extra(k).held_by
                if held_by >= 0:
                    self.held.setdefault(held_by, []).append(k)
        prefix = _maploc.Tensor(self.loaded, index).name + "."
        inner = {}
        for k in self.held.get(index, ()):
            name = _maploc.Tensor(self.loaded, k).name
            inner[name[len(prefix):] if name.startswith(prefix) else name] = self.tensor(k)
        return WrapperSubclass(inner, cls=_capi.text(e.subclass), attributes=self.attributes(index, e),
                               shape=_torch.Size(info.shape), dtype=_torch_dtype(info.dtype),
                               device=_capi.text(e.device) or info.device, requires_grad=info.requires_grad)

    def tensor(self, index):
        return self.fast(index) if _INFO_UNPACK is not None else self.general(index)

    def general(self, index):
        info = self.info(index)
        if info.kind in _SPARSE:
            return self.sparse(index, info)
        if info.kind not in ("dense", "storage"):
            return self.composite(index, info)
        dtype = _torch_dtype(info.dtype)
        if info.device == "meta" or info.storage_index is None:
            t = _torch.empty_strided(info.shape, info.stride or None, dtype=dtype, device="meta") \
                if info.stride else _torch.empty(info.shape, dtype=dtype, device="meta")
        else:
            numel = 1
            for size in info.shape:
                numel *= size
            base = self.base(info.storage_index, info.device, numel)
            typed = base.view(dtype) if dtype != _torch.uint8 else base
            if info.kind == "storage":
                return _typed_storage(typed, dtype)
            t = typed.as_strided(info.shape, info.stride, info.storage_offset)
        if info.conj:
            t = t.conj()
        if info.neg:
            t = _torch._neg_view(t)
        if info.is_parameter:
            return _torch.nn.Parameter(t, requires_grad=info.requires_grad)
        if info.requires_grad:
            t.requires_grad_(True)
        return t


class _Info:
    """What maploc.torch needs of one tensor (a lighter maploc.Tensor); `name` is read when asked."""
    __slots__ = ("kind", "dtype", "shape", "stride", "storage_offset", "storage_index", "requires_grad",
                 "is_parameter", "conj", "neg", "device", "index", "loaded")

    @property
    def name(self):
        return _maploc.Tensor(self.loaded, self.index).name


_TEXT = {}

# dtypes a 0.x DLPack capsule carries to every torch this package supports as themselves (not bool: Debian's
# DLPack 0.6 has no kDLBool, the capsule says uint8; not the unsigned 16-64 bit ones: torch < 2.3 refuses
# them), with their sizes: the dtypes for which the fast path exports a tensor by itself.
_EXACT = {getattr(_torch, name): size for name, size in (
    ("float64", 8), ("float32", 4), ("float16", 2), ("bfloat16", 2), ("complex64", 8), ("complex128", 16),
    ("int64", 8), ("int32", 4), ("int16", 2), ("int8", 1), ("uint8", 1))}
_FROM_DLPACK = getattr(_torch._C, "_from_dlpack", None) or _torch.utils.dlpack.from_dlpack
_NEW_CAPSULE = _maploc._API.PyCapsule_New
_DLTENSOR = _maploc._DLTENSOR
_DESTRUCTOR = _maploc._DESTRUCTOR

# maploc_tensor_info as native struct fields (C layout and alignment, as ctypes lays out _capi.TensorInfo):
# name, dtype, kind, ndim, shape, stride, storage_offset, storage, requires_grad, conj, neg, location,
# device, data, parameter.
_INFO = _struct.Struct("@PPPiPPqqiiiPPPi0P")   # 0P: the trailing padding to pointer alignment
_INFO_SIZE = _ctypes.sizeof(_capi.TensorInfo)
_INFO_UNPACK = _INFO.unpack_from if _INFO.size == _INFO_SIZE else None
_I64N = {}


def _text(b):
    """Decoded C strings of the few values dtype, kind and device take, cached."""
    t = _TEXT.get(b)
    if t is None:
        t = _TEXT[b] = _capi.text(b)
    return t


def _typed_storage(typed, dtype):
    """A bare storage of the file as torch.load returns it: a TypedStorage of its dtype."""
    untyped = _untyped(typed)
    try:
        return _torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
    except TypeError:
        return _torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype)


def load(f: _maploc.FileLike, map_location: _maploc.MapLocation = None, *, weights_only: bool = True,
         mmap: Optional[bool] = None, host: str = "view", writable: bool = True, populate: bool = False) -> Any:
    """torch.load(f, map_location, weights_only=True) without running anything from the file: the same
    nested structure (dict, OrderedDict with its _metadata, list, tuple, str, bytes, int, float, bool, None,
    torch.Size, torch dtypes) with torch.Tensors, nn.Parameters and requires_grad as torch restores them.

    CPU tensors are views of the file's pages (copy-on-write, mmap=True or None with host="view") or private
    copies (mmap=False, host="copy"); CUDA tensors are placed by maploc's own pipeline (map_location) and
    handed over by DLPack. Tensors that shared a storage share one torch storage. Arguments as maploc.load:
    a path or a binary file object; map_location as a string, dict, torch.device or callable; weights_only
    is accepted and changes nothing (objects torch would run code to rebuild come back as maploc.Object).
    Raises maploc.Error (its subclasses by code) for what maploc refuses, and (code 313) for nested tensors a
    torch this old cannot build (jagged ones under torch < 2.3). Sparse tensors are rebuilt from their
    components (a COO tensor's coalesced flag is not restored), quantized tensors with torch's quantizer
    constructors, jagged nested tensors with torch.nested.nested_tensor_from_jagged, strided nested ones with
    torch._nested_view_from_buffer (as torch.load does); wrapper subclasses (torchao, TwoTensor) come back as
    inert maploc.torch.WrapperSubclass containers of their inner tensors (the class is never imported).
    """
    del weights_only
    checkpoint, loaded = _maploc._load(f, map_location, _maploc._host(host, mmap), writable, populate)
    builder = _Builder(loaded)
    # The tree is acyclic but for what the file makes cyclic, and built in one go: the cyclic collector's
    # passes over the (torch-sized) heap while tens of thousands of tensors are made are pure cost (a
    # generation-2 pass on the 30,000-tensor bench file), so it is paused for the build, as when
    # unpickling large structures.
    collecting = _gc.isenabled()
    _gc.disable()
    try:
        return _maploc._tree_of(checkpoint, builder.fast if _INFO_UNPACK is not None else builder.tensor,
                                _global_value, _call)
    finally:
        if collecting:
            _gc.enable()
