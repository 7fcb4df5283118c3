"""maploc - read PyTorch checkpoints without running them, and hand their tensors over by DLPack.

A thin layer over maploc's C API (libmaploc.so, through ctypes): nothing in a file is ever executed, no
torch is needed to import it. maploc.load(path, map_location=...) returns {name: Tensor}, and each Tensor
goes to numpy.from_dlpack, torch.from_dlpack, cupy.from_dlpack, ... without a copy. docs/python.md.
"""
import ctypes

from maploc import _capi
from maploc._capi import Error

__all__ = ["Error", "Tensor", "TensorInfo", "ls", "load", "remap", "convert", "version"]

_HOST = {"view": 0, "copy": 1, "pinned": 2}
_KDLCPU, _KDLCUDA, _KDLCUDAHOST = 1, 2, 3


def version():
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


class TensorInfo:
    """One tensor as the file describes it (maploc.ls)."""
    __slots__ = ("name", "dtype", "kind", "shape", "stride", "storage_offset", "storage", "location",
                 "requires_grad")

    def __init__(self, info):
        _describe(self, info)
        self.storage = None if info.storage < 0 else info.storage
        self.location = _capi.text(info.location)

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, shape={list(self.shape)}, location={self.location!r})"


class _Checkpoint:
    def __init__(self, path):
        handle = ctypes.c_void_p()
        _capi.check(_capi.lib.maploc_open(_capi.path_bytes(path), ctypes.byref(handle)))
        self.handle = handle

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
# Releases a capsule's tensor when no consumer took it (a consumer renames it "used_dltensor"). A C function
# of libmaploc.so, not a ctypes callback: it runs while a consumer's exception is pending (numpy refusing a
# dtype) and at interpreter exit, where a Python callback cannot.
_DESTRUCTOR = ctypes.cast(_capi.lib.maploc_dlpack_capsule_destructor, ctypes.c_void_p)


class Tensor:
    """A placed tensor: its description, and __dlpack__ / __dlpack_device__ for any DLPack consumer.

    The exported tensor holds its storage itself: numpy or torch arrays made from it stay valid after
    this object, the dict and everything else of the load are gone.
    """
    __slots__ = ("_loaded", "_index", "name", "dtype", "kind", "shape", "stride", "storage_offset", "device",
                 "data_ptr", "requires_grad", "_storage")

    def __init__(self, loaded, index):
        info = _capi.TensorInfo()
        _capi.check(_capi.lib.maploc_loaded_tensor(loaded.handle, index, ctypes.byref(info)))
        self._loaded, self._index = loaded, index
        _describe(self, info)
        self.device = _capi.text(info.device)
        self.data_ptr = info.data or 0  # the first element's address (a device pointer on CUDA)
        self._storage = info.storage

    def _device_pair(self):
        if self.device.startswith("cuda:"):
            return (_KDLCUDA, int(self.device[5:]))
        if self.device != "cpu":
            return None  # meta: no bytes to hand over
        if self._storage >= 0:
            storage = _capi.StorageInfo()
            _capi.check(_capi.lib.maploc_loaded_storage(self._loaded.handle, self._storage, ctypes.byref(storage)))
            if storage.pinned:
                return (_KDLCUDAHOST, 0)
        return (_KDLCPU, 0)

    def sha256(self):
        """SHA-256 of the values in row-major order (as the fixture manifests and `maploc ls --hash`)."""
        out = ctypes.create_string_buffer(65)
        _capi.check(_capi.lib.maploc_loaded_tensor_sha256(self._loaded.handle, self._index, out))
        return out.value.decode()

    def __dlpack_device__(self):
        pair = self._device_pair()
        if pair is None:
            raise BufferError(f"tensor '{self.name}' is on {self.device}, which holds no bytes")
        return pair

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # maploc's loads are complete when load() returns, so any consumer stream may read at once.
        if copy:
            raise BufferError("maploc exports its placed tensors without copying (copy=True asked)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"tensor '{self.name}' is on {self.device}; move it with load(map_location=...)")
        managed = ctypes.c_void_p()
        code = _capi.lib.maploc_loaded_dlpack(self._loaded.handle, self._index, ctypes.byref(managed))
        if code != 0:
            raise BufferError(_capi.lib.maploc_last_error_message().decode("utf-8", "replace"))
        try:
            return _API.PyCapsule_New(managed, _DLTENSOR, _DESTRUCTOR)
        except BaseException:
            _capi.lib.maploc_dlpack_free(managed)
            raise

    def __repr__(self):
        return f"maploc.Tensor({self.name!r}, {self.dtype}, shape={list(self.shape)}, device={self.device!r})"


def _spec(map_location):
    """torch.load's map_location as a maploc SPEC (docs/map-location.md)."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        return ",".join(f"{k}->{v}" for k, v in map_location.items())
    if callable(map_location):
        raise TypeError("maploc.load: a callable map_location is not supported; pass a SPEC string or a dict")
    return str(map_location)  # "cpu", "cuda:*->cpu", torch.device("cuda", 1)


def ls(path):
    """The tensors of a checkpoint (any format maploc reads), read without running anything."""
    checkpoint = _Checkpoint(path)
    out = []
    for i in range(_capi.lib.maploc_checkpoint_tensor_count(checkpoint.handle)):
        info = _capi.TensorInfo()
        _capi.check(_capi.lib.maploc_checkpoint_tensor(checkpoint.handle, i, ctypes.byref(info)))
        out.append(TensorInfo(info))
    return out


def load(path, map_location=None, *, host="view", writable=True, populate=False):
    """Loads a checkpoint the safe way: {name: Tensor}, each ready for numpy/torch.from_dlpack.

    map_location: None (the saved tags, as torch), a SPEC string ("cpu", "cuda:*->cpu,name:head.*->cuda:1"),
    a dict {tag: device} or a torch.device. host: "view" (zero-copy pages of the file), "copy" (private
    copies) or "pinned" (page-locked, CUDA builds). writable: views are copy-on-write pages (default), so a
    consumer may write to them; False gives read-only pages, which a write would fault on.
    """
    if host not in _HOST:
        raise ValueError(f"maploc.load: host is one of {sorted(_HOST)}, not {host!r}")
    options = _capi.LoadOptions()
    _capi.lib.maploc_load_options_init(ctypes.byref(options))
    spec = _spec(map_location)
    options.map_location = None if spec is None else spec.encode()
    options.host = _HOST[host]
    options.writable = int(bool(writable))
    options.populate = int(bool(populate))
    loaded = _Loaded(_Checkpoint(path), options)
    count = _capi.lib.maploc_loaded_tensor_count(loaded.handle)
    return {t.name: t for t in (Tensor(loaded, i) for i in range(count))}


def remap(src, dst, map_location):
    """Writes src as a torch.save archive at dst with its storages' location tags rewritten by the SPEC."""
    _capi.check(_capi.lib.maploc_remap(_capi.path_bytes(src), _capi.path_bytes(dst), _spec(map_location).encode()))


def convert(src, dst, to="safetensors"):
    """Writes src (any format maploc reads) as `to`: "safetensors" or "torch" (a torch.save archive)."""
    _capi.check(_capi.lib.maploc_convert(_capi.path_bytes(src), _capi.path_bytes(dst), to.encode()))
