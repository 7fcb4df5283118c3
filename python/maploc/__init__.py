"""maploc - read PyTorch checkpoints without running them, and hand their tensors over by DLPack.

A thin layer over maploc's C API (libmaploc.so, through ctypes): nothing in a file is ever executed, no
torch is needed to import it.

- maploc.load(f, map_location=None, *, weights_only=True, mmap=None): what torch.load(weights_only=True)
  returns (dicts, OrderedDicts, lists, tuples, scalars, strings, None), with maploc.Tensor objects for the
  tensors; maploc.torch.load does the same with torch.Tensors.
- maploc.tensors(f): the flat {name: Tensor} of every tensor (a name collision raises, nothing is dropped).
- maploc.ls(f): the tensors as the file describes them, nothing placed.
Each maploc.Tensor goes to numpy.from_dlpack, torch.from_dlpack, cupy.from_dlpack, ... without a copy.
docs/python.md.
"""
from __future__ import annotations

import ctypes
import os
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, Union

from maploc import _capi, _tree
from maploc._capi import (DeviceUnavailableError, DLPackError, Error, LimitExceededError, NotACheckpointError,
                          UnsafeContentError)
from maploc._tree import Global, Object, PersistentId

__all__ = ["Error", "NotACheckpointError", "UnsafeContentError", "LimitExceededError", "DeviceUnavailableError",
           "DLPackError", "Tensor", "TensorInfo", "Global", "Object", "PersistentId", "ls", "load", "tensors",
           "remap", "convert", "version"]

#: What load(), tensors() and ls() accept as a file: a path or a binary file object.
FileLike = Union[str, bytes, "os.PathLike[str]", IO[bytes]]
#: torch.load's map_location: a device or SPEC string, {tag: device}, a torch.device, or a callable.
MapLocation = Union[None, str, Dict[str, Any], Callable[[Any, str], Any], Any]

_HOST = {"view": 0, "copy": 1, "pinned": 2}
_KDLCPU, _KDLCUDA, _KDLCUDAHOST = 1, 2, 3


def version() -> str:
    """maploc's version ("0.1.0")."""
    return _capi.text(_capi.lib.maploc_version())


__version__ = version()   # the loaded library's, which a wheel builds together with this module


def _describe(obj, info):
    """The fields a listed and a loaded tensor share, from a maploc_tensor_info."""
    obj.name = _capi.text(info.name)
    obj.dtype = _capi.text(info.dtype)
    obj.kind = _capi.text(info.kind)
    obj.shape = tuple(info.shape[:info.ndim]) if info.ndim else ()
    obj.stride = tuple(info.stride[:info.ndim]) if info.ndim and info.stride else ()
    obj.storage_offset = info.storage_offset
    obj.requires_grad = bool(info.requires_grad)
    obj.is_parameter = bool(info.parameter)
    obj.conj = bool(info.conj)
    obj.neg = bool(info.neg)


class TensorInfo:
    """One tensor as the file describes it (maploc.ls): name, dtype, kind, shape, stride, storage_offset,
    storage (index, None for storage-less kinds), location (the saved tag), requires_grad, is_parameter."""
    __slots__ = ("name", "dtype", "kind", "shape", "stride", "storage_offset", "storage", "location",
                 "requires_grad", "is_parameter", "conj", "neg")

    def __init__(self, info):
        _describe(self, info)
        self.storage = None if info.storage < 0 else info.storage
        self.location = _capi.text(info.location)

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, shape={list(self.shape)}, location={self.location!r})"


def _read_source(f):
    """(path, None) for a path, (None, bytes) for a binary file object (read whole into memory)."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return f, None
    if hasattr(f, "read"):
        data = f.read()
        if isinstance(data, str):
            raise TypeError("maploc: the file object must be opened in binary mode ('rb')")
        return None, bytes(data)
    raise TypeError(f"maploc: expected a path or a binary file object, not {type(f).__name__}")


class _Checkpoint:
    def __init__(self, f):
        handle = ctypes.c_void_p()
        path, data = _read_source(f)
        if data is None:
            _capi.check(_capi.lib.maploc_open(_capi.path_bytes(path), ctypes.byref(handle)))
        else:
            name = getattr(f, "name", None)
            name = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else b"<file object>"
            _capi.check(_capi.lib.maploc_open_memory(data, len(data), name, ctypes.byref(handle)))
        self.handle = handle

    def locations(self):
        """The distinct saved location tags of the storages, in order."""
        seen = {}
        info = _capi.StorageInfo()
        for i in range(_capi.lib.maploc_checkpoint_storage_count(self.handle)):
            _capi.check(_capi.lib.maploc_checkpoint_storage(self.handle, i, ctypes.byref(info)))
            seen.setdefault(_capi.text(info.location), None)
        return list(seen)

    def object_buffer(self):
        """The serialised object tree (maploc_checkpoint_object) as bytes."""
        ptr, size = ctypes.c_void_p(), ctypes.c_size_t()
        _capi.check(_capi.lib.maploc_checkpoint_object(self.handle, ctypes.byref(ptr), ctypes.byref(size)))
        try:
            return ctypes.string_at(ptr, size.value)
        finally:
            _capi.lib.maploc_buffer_free(ptr)

    def __del__(self):
        if getattr(self, "handle", None):
            _capi.lib.maploc_checkpoint_free(self.handle)
            self.handle = None


class _Loaded:
    """The C handle; every Tensor of one load holds it, the last one frees it."""

    def __init__(self, checkpoint, options):
        handle = ctypes.c_void_p()
        _capi.check(_capi.lib.maploc_load(checkpoint.handle, ctypes.byref(options), ctypes.byref(handle)))
        self.handle = handle

    def storage_dlpack(self, index):
        """Storage `index` as a 1-D uint8 DLPack capsule over its placed bytes (maploc.torch builds views on it)."""
        managed = ctypes.c_void_p()
        code = _capi.lib.maploc_loaded_storage_dlpack(self.handle, index, ctypes.byref(managed))
        if code != 0:
            raise DLPackError(code, _capi.last_message())
        try:
            return _API.PyCapsule_New(managed, _DLTENSOR, _DESTRUCTOR)
        except BaseException:
            _capi.lib.maploc_dlpack_free(managed)
            raise

    def storage_info(self, index):
        info = _capi.StorageInfo()
        _capi.check(_capi.lib.maploc_loaded_storage(self.handle, index, ctypes.byref(info)))
        return info

    def __del__(self):
        if getattr(self, "handle", None):
            _capi.lib.maploc_loaded_free(self.handle)
            self.handle = None


def _capsule_api():
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return api


_API = _capsule_api()
_DLTENSOR = ctypes.c_char_p(b"dltensor")  # the capsule keeps this pointer: it lives as long as the module
_DLTENSOR_VERSIONED = ctypes.c_char_p(b"dltensor_versioned")
# Releases a capsule's tensor when no consumer took it (a consumer renames it "used_dltensor"). A C function
# of libmaploc.so, not a ctypes callback: it runs while a consumer's exception is pending (numpy refusing a
# dtype) and at interpreter exit, where a Python callback cannot.
_DESTRUCTOR = ctypes.cast(_capi.lib.maploc_dlpack_capsule_destructor, ctypes.c_void_p)
_DESTRUCTOR_VERSIONED = (ctypes.cast(_capi.lib.maploc_dlpack_versioned_capsule_destructor, ctypes.c_void_p)
                         if _capi.has_versioned_dlpack else None)


class Tensor:
    """A placed tensor: its description, and __dlpack__ / __dlpack_device__ for any DLPack consumer.

    Attributes: name (its dotted name on the first path to it), dtype (torch's name: "float32"), kind
    ("dense", "storage", "sparse_coo", ...), shape, stride, storage_offset (elements), device ("cpu",
    "cuda:0", "meta"), data_ptr, requires_grad, is_parameter (torch restores it as an nn.Parameter).
    The exported tensor holds its storage itself: numpy or torch arrays made from it stay valid after
    this object, the dict and everything else of the load are gone.
    """
    __slots__ = ("_loaded", "_index", "name", "dtype", "kind", "shape", "stride", "storage_offset", "device",
                 "data_ptr", "requires_grad", "is_parameter", "conj", "neg", "_storage", "__weakref__")

    def __init__(self, loaded, index):
        info = _capi.TensorInfo()
        _capi.check(_capi.lib.maploc_loaded_tensor(loaded.handle, index, ctypes.byref(info)))
        self._loaded, self._index = loaded, index
        _describe(self, info)
        self.device = _capi.text(info.device)
        self.data_ptr = info.data or 0  # the first element's address (a device pointer on CUDA)
        self._storage = info.storage

    @property
    def storage_index(self) -> Optional[int]:
        """Index of the storage it views (tensors sharing one share their bytes), None for storage-less kinds."""
        return None if self._storage < 0 else self._storage

    def _device_pair(self):
        if self.device.startswith("cuda:"):
            return (_KDLCUDA, int(self.device[5:]))
        if self.device != "cpu":
            return None  # meta: no bytes to hand over
        if self._storage >= 0 and self._loaded.storage_info(self._storage).pinned:
            return (_KDLCUDAHOST, 0)
        return (_KDLCPU, 0)

    def sha256(self) -> str:
        """SHA-256 of the values in row-major order (as the fixture manifests and `maploc ls --hash`)."""
        out = ctypes.create_string_buffer(65)
        _capi.check(_capi.lib.maploc_loaded_tensor_sha256(self._loaded.handle, self._index, out))
        return out.value.decode()

    def numpy(self) -> Any:
        """The tensor as a numpy array over the same memory (CPU tensors; numpy must be installed).
        bool arrives as numpy.bool_ even where DLPack < 0.8 carries it as uint8."""
        import numpy
        array = numpy.from_dlpack(self)
        if self.dtype == "bool" and array.dtype != numpy.bool_:
            array = array.view(numpy.bool_)
        return array

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(device type, device id) as DLPack numbers: (1, 0) CPU, (2, N) cuda:N, (3, 0) pinned host memory."""
        pair = self._device_pair()
        if pair is None:
            raise DLPackError(313, f"tensor '{self.name}' is on {self.device}, which holds no bytes")
        return pair

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of the tensor, zero-copy (the array API standard's protocol).

        max_version >= (1, 0) gives a "dltensor_versioned" capsule (DLPack 1.0: read-only flag, bool as
        kDLBool), the 0.x "dltensor" capsule otherwise (as the protocol allows). copy=True and
        a dl_device other than the tensor's raise BufferError (maploc.DLPackError): maploc exports the
        placement it made; load with map_location= to place it elsewhere. copy=False and copy=None export
        without a copy. stream: maploc's loads are complete when load() returns, so no wait is needed.
        """
        if copy:
            raise DLPackError(313, f"tensor '{self.name}': maploc exports its placed tensors without copying "
                                   "(copy=True asked); copy in the consumer instead")
        if dl_device is not None:
            want = (int(dl_device[0]), int(dl_device[1]))
            if want != self.__dlpack_device__():
                raise DLPackError(313, f"tensor '{self.name}' is on {self.device}, not on DLPack device {want}; "
                                       "load it with map_location= to place it there")
        versioned = (max_version is not None and tuple(max_version)[0] >= 1 and _capi.has_versioned_dlpack)
        managed = ctypes.c_void_p()
        export = _capi.lib.maploc_loaded_dlpack_versioned if versioned else _capi.lib.maploc_loaded_dlpack
        code = export(self._loaded.handle, self._index, ctypes.byref(managed))
        if code != 0:
            raise DLPackError(code, _capi.last_message())
        try:
            if versioned:
                return _API.PyCapsule_New(managed, _DLTENSOR_VERSIONED, _DESTRUCTOR_VERSIONED)
            return _API.PyCapsule_New(managed, _DLTENSOR, _DESTRUCTOR)
        except BaseException:
            if not versioned:
                _capi.lib.maploc_dlpack_free(managed)
            raise

    def __repr__(self):
        return f"maploc.Tensor({self.name!r}, {self.dtype}, shape={list(self.shape)}, device={self.device!r})"


class _StorageStandIn:
    """What a callable map_location receives as its storage: it records where the callable sends it
    (storage.cuda(1), storage.cpu(), storage.to("cuda:0"), or the storage itself: stay on the CPU)."""
    __slots__ = ("device",)

    def __init__(self, device="cpu"):
        self.device = device

    def cpu(self):
        return _StorageStandIn("cpu")

    def cuda(self, device=None, non_blocking=False, **kwargs):
        if device is None:
            return _StorageStandIn("cuda")
        return _StorageStandIn(str(device) if not isinstance(device, int) else f"cuda:{device}")

    def to(self, device, *args, **kwargs):
        return _StorageStandIn(str(device))


def _device_of(result, tag):
    if result is None:
        return None  # torch: keep the default restore (the saved tag)
    if isinstance(result, _StorageStandIn):
        return result.device
    if isinstance(result, (str, int)) or type(result).__name__ == "device":
        text = str(result)
        return f"cuda:{text}" if text.isdigit() else text
    raise TypeError(f"maploc: map_location returned {type(result).__name__} for location {tag!r}; it must "
                    "return a device (a string, a torch.device) or the storage it was given (maploc runs no "
                    "other storage code)")


def _spec(map_location, checkpoint=None):
    """torch.load's map_location as a maploc SPEC (docs/map-location.md)."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        return ",".join(f"{k}->{_device_of(v, k)}" for k, v in map_location.items())
    if callable(map_location) and not isinstance(map_location, str) and type(map_location).__name__ != "device":
        if checkpoint is None:
            raise TypeError("maploc: a callable map_location needs the checkpoint's tags")
        rules = []
        for tag in checkpoint.locations():
            device = _device_of(map_location(_StorageStandIn(), tag), tag)
            if device is not None:
                rules.append(f"{tag}->{device}")
        return ",".join(rules) if rules else None
    return str(map_location)  # "cpu", "cuda:*->cpu", torch.device("cuda", 1)


def _host(host, mmap):
    if mmap is not None:
        host = "view" if mmap else "copy"
    if host not in _HOST:
        raise ValueError(f"maploc: host is one of {sorted(_HOST)}, not {host!r}")
    return _HOST[host]


def _load(f, map_location, host, writable, populate):
    checkpoint = _Checkpoint(f)
    options = _capi.LoadOptions()
    _capi.lib.maploc_load_options_init(ctypes.byref(options))
    spec = _spec(map_location, checkpoint)
    options.map_location = None if spec is None else spec.encode()
    options.host = host
    options.writable = int(bool(writable))
    options.populate = int(bool(populate))
    return checkpoint, _Loaded(checkpoint, options)


def ls(f: FileLike) -> List[TensorInfo]:
    """The tensors of a checkpoint (any format maploc reads; a path or a binary file object), read without
    running anything: a list of TensorInfo in walk order."""
    checkpoint = _Checkpoint(f)
    out = []
    for i in range(_capi.lib.maploc_checkpoint_tensor_count(checkpoint.handle)):
        info = _capi.TensorInfo()
        _capi.check(_capi.lib.maploc_checkpoint_tensor(checkpoint.handle, i, ctypes.byref(info)))
        out.append(TensorInfo(info))
    return out


def _tree_of(checkpoint, make_tensor, global_value=None, call=None):
    buf = checkpoint.object_buffer()
    decoder = _tree.Decoder(buf, make_tensor, global_value, call)
    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # the tree may be as deep as maploc's nesting limit allows
    try:
        return decoder.decode()
    finally:
        sys.setrecursionlimit(limit)


def load(f: FileLike, map_location: MapLocation = None, *, weights_only: bool = True, mmap: Optional[bool] = None,
         host: str = "view", writable: bool = True, populate: bool = False) -> Any:
    """Loads a checkpoint the safe way: the object torch.load(f, weights_only=True) returns, with
    maploc.Tensor objects for its tensors (use maploc.torch.load for torch.Tensors).

    f: a path or a binary file object (read into memory). Every format maploc reads: torch.save zip and
    legacy files, 0.1.x tar, TorchScript archives (their data.pkl, inert), safetensors, sharded sets and
    DCP directories (those three as {name: tensor}).
    map_location: None (the saved tags, as torch), a string (a device, or maploc's SPEC:
    "cuda:*->cpu,name:head.*->cuda:1"), a dict {tag: device}, a torch.device, or a callable
    (storage, location) -> device, called once per saved tag with an inert stand-in storage: it may return
    a device, None (keep the tag), the storage itself (the CPU), storage.cpu(), storage.cuda(n).
    weights_only: accepted for torch.load's signature; maploc never runs anything from the file, so False
    behaves as True: objects torch would rebuild by running code come back as inert maploc.Object values.
    mmap: True maps the file (host="view", zero-copy copy-on-write pages), False makes private copies
    (host="copy"); None keeps `host`. host: "view", "copy" or "pinned" (page-locked, CUDA builds).
    writable: views are copy-on-write pages (default), False read-only ones. populate: map every page first.

    Containers keep their order and type (dict, OrderedDict with its _metadata, list, tuple, set); a tensor
    referenced twice is one Tensor object; shared and cyclic containers stay shared and cyclic.
    """
    del weights_only  # never executes: docs/python.md, "weights_only"
    checkpoint, loaded = _load(f, map_location, _host(host, mmap), writable, populate)
    return _tree_of(checkpoint, lambda i: Tensor(loaded, i))


def tensors(f: FileLike, map_location: MapLocation = None, *, mmap: Optional[bool] = None, host: str = "view",
            writable: bool = True, populate: bool = False) -> Dict[str, "Tensor"]:
    """Every tensor of a checkpoint as a flat {dotted name: Tensor} in walk order (components of sparse
    and nested tensors included under their own names). Two tensors with one name (keys 1 and "1",
    "a.b" and a nested "a"/"b") raise maploc.Error (code 4): nothing is silently overwritten.
    Arguments as load()."""
    _, loaded = _load(f, map_location, _host(host, mmap), writable, populate)
    out = {}
    for i in range(_capi.lib.maploc_loaded_tensor_count(loaded.handle)):
        t = Tensor(loaded, i)
        if t.name in out:
            raise Error(4, f"maploc.tensors: two tensors are named '{t.name}' (use maploc.load for the "
                           "structure, which keeps both)")
        out[t.name] = t
    return out


def remap(src: Union[str, "os.PathLike[str]"], dst: Union[str, "os.PathLike[str]"], map_location: MapLocation) -> None:
    """Writes src as a torch.save archive at dst with its storages' location tags rewritten by the SPEC."""
    _capi.check(_capi.lib.maploc_remap(_capi.path_bytes(src), _capi.path_bytes(dst), _spec(map_location).encode()))


def convert(src: Union[str, "os.PathLike[str]"], dst: Union[str, "os.PathLike[str]"], to: str = "safetensors") -> None:
    """Writes src (any format maploc reads) as `to`: "safetensors" or "torch" (a torch.save archive)."""
    _capi.check(_capi.lib.maploc_convert(_capi.path_bytes(src), _capi.path_bytes(dst), to.encode()))
