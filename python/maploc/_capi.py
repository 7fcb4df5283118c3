"""_capi.py - libmaploc.so through ctypes: finding it, the C structs, and errors as maploc.Error."""
import ctypes
import ctypes.util
import os

_ENV = "MAPLOC_LIBRARY"
_NAMES = ("libmaploc.so", "libmaploc.so.0")


class Error(Exception):
    """A maploc failure. `code` is maploc's stable error number (an int: docs/api.md, include/maploc/error.h),
    `code_name` its symbolic name ("kTorchNotCheckpoint"), `message` says what and where."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = int(code)
        self.message = message

    @property
    def code_name(self):
        """The symbolic name of `code` ("kTorchNotCheckpoint", "kInternal"; "unknown" for others)."""
        return code_name(self.code)

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class NotACheckpointError(Error):
    """The content is no checkpoint maploc reads (300 kTorchNotCheckpoint: an HTML page, a git-lfs pointer, ...;
    301 a preview-release archive; 302 a torch format maploc does not read)."""


class UnsafeContentError(Error):
    """Content maploc refuses to interpret: an opcode that needs Python (201, 207), a persistent id no loader
    resolves (216, 305), or, in strict mode, a rebuild function or storage maploc does not know (318)."""


class LimitExceededError(Error):
    """A safety bound (maploc::Limits) was reached: memory (6), zip entries or record size (109, 117), pickle
    stack, nesting, memo, string, item or total bounds (210-215), tensor count, name or walk bytes (314-317)."""


class DeviceUnavailableError(Error):
    """A storage cannot be placed: no usable CUDA (400), no such device (401), not enough free memory (405),
    a build without CUDA (406), the CUDA runtime failed (407)."""


class DLPackError(Error, BufferError):
    """__dlpack__ could not export a tensor (what DLPack cannot describe, a copy or device it cannot honour):
    a BufferError, as the DLPack protocol asks, that keeps maploc's code."""


_NOT_CHECKPOINT = {300, 301, 302}
_UNSAFE = {201, 207, 216, 305, 318}
_LIMIT = {6, 109, 117, 210, 211, 212, 213, 214, 215, 314, 315, 316, 317}
_DEVICE = {400, 401, 405, 406, 407}


def error_class(code):
    """The Error subclass for a code (Error itself for the codes no subclass names)."""
    if code in _NOT_CHECKPOINT:
        return NotACheckpointError
    if code in _UNSAFE:
        return UnsafeContentError
    if code in _LIMIT:
        return LimitExceededError
    if code in _DEVICE:
        return DeviceUnavailableError
    return Error


def make_error(code, message):
    """maploc's exception for a C API error code."""
    return error_class(code)(code, message)


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("kind", ctypes.c_char_p),
                ("ndim", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("stride", ctypes.POINTER(ctypes.c_int64)), ("storage_offset", ctypes.c_int64),
                ("storage", ctypes.c_int64), ("requires_grad", ctypes.c_int32), ("conj", ctypes.c_int32),
                ("neg", ctypes.c_int32), ("location", ctypes.c_char_p), ("device", ctypes.c_char_p),
                ("data", ctypes.c_void_p), ("parameter", ctypes.c_int32)]


class StorageInfo(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("nbytes", ctypes.c_uint64),
                ("location", ctypes.c_char_p), ("device", ctypes.c_char_p), ("data", ctypes.c_void_p),
                ("writable", ctypes.c_int32), ("pinned", ctypes.c_int32)]


class TensorExtra(ctypes.Structure):
    _fields_ = [("subclass", ctypes.c_char_p), ("qscheme", ctypes.c_char_p), ("q_scale", ctypes.c_double),
                ("q_zero_point", ctypes.c_int64), ("q_axis", ctypes.c_int64), ("held_by", ctypes.c_int64),
                ("is_component", ctypes.c_int32), ("device", ctypes.c_char_p), ("component_count", ctypes.c_size_t),
                ("attribute_count", ctypes.c_size_t)]


class LoadOptions(ctypes.Structure):
    _fields_ = [("map_location", ctypes.c_char_p), ("host", ctypes.c_int32), ("writable", ctypes.c_int32),
                ("populate", ctypes.c_int32), ("host_threads", ctypes.c_uint32),
                ("cuda_stream_device", ctypes.c_int32), ("cuda_stream", ctypes.c_void_p)]


def _candidates():
    """Where libmaploc.so is looked for, in order (docs/python.md, "Finding libmaploc.so")."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _NAMES:   # the wheel's (pip install .), built together with this module: always first
        packaged = os.path.join(here, name)
        if os.path.exists(packaged):
            yield packaged
            return
    if os.environ.get(_ENV):
        yield os.environ[_ENV]
        return
    for folder in (os.path.join(here, "..", "..", ".."),        # <prefix>/lib/pythonX/site-packages/maploc
                   os.path.join(here, "..", "..", "build")):    # python/maploc in a source tree built in build/
        for name in _NAMES:
            path = os.path.normpath(os.path.join(folder, name))
            if os.path.exists(path):
                yield path
    yield ctypes.util.find_library("maploc") or "libmaploc.so.0"   # the system loader's search


def _open():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("maploc: libmaploc.so not found; set MAPLOC_LIBRARY to its path (tried: "
                      + "; ".join(tried) + ")")


lib, library_path = _open()   # library_path: the file it was loaded from

_P = ctypes.c_void_p
_SIGNATURES = {
    "maploc_last_error_code": (ctypes.c_int, []),
    "maploc_last_error_message": (ctypes.c_char_p, []),
    "maploc_version": (ctypes.c_char_p, []),
    "maploc_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "maploc_checkpoint_free": (None, [_P]),
    "maploc_checkpoint_format": (ctypes.c_char_p, [_P]),
    "maploc_checkpoint_tensor_count": (ctypes.c_size_t, [_P]),
    "maploc_checkpoint_storage_count": (ctypes.c_size_t, [_P]),
    "maploc_checkpoint_tensor": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfo)]),
    "maploc_checkpoint_storage": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(StorageInfo)]),
    "maploc_load_options_init": (None, [ctypes.POINTER(LoadOptions)]),
    "maploc_load": (ctypes.c_int, [_P, ctypes.POINTER(LoadOptions), ctypes.POINTER(_P)]),
    "maploc_loaded_free": (None, [_P]),
    "maploc_loaded_tensor_count": (ctypes.c_size_t, [_P]),
    "maploc_loaded_tensor": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfo)]),
    "maploc_loaded_storage": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(StorageInfo)]),
    "maploc_loaded_to": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    "maploc_loaded_tensor_sha256": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_char_p]),
    "maploc_loaded_dlpack": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "maploc_dlpack_free": (None, [_P]),
    "maploc_dlpack_capsule_destructor": (None, [_P]),
    "maploc_remap": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "maploc_convert": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "maploc_open_memory": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "maploc_checkpoint_object": (ctypes.c_int, [_P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t)]),
    "maploc_buffer_free": (None, [_P]),
    "maploc_error_code_name": (ctypes.c_char_p, [ctypes.c_int]),
    "maploc_loaded_storage_dlpack": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "maploc_loaded_tensor_extra": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(TensorExtra)]),
    "maploc_loaded_tensor_component": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]),
    "maploc_loaded_tensor_attribute": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]),
}
# Present only when libmaploc.so was built against DLPack >= 1.0 (MAPLOC_C_DLPACK_VERSIONED).
_OPTIONAL = {
    "maploc_loaded_dlpack_versioned": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "maploc_dlpack_versioned_capsule_destructor": (None, [_P]),
}
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _restype
    _f.argtypes = _argtypes
for _name, (_restype, _argtypes) in _OPTIONAL.items():
    _f = getattr(lib, _name, None)
    if _f is not None:
        _f.restype = _restype
        _f.argtypes = _argtypes
has_versioned_dlpack = hasattr(lib, "maploc_loaded_dlpack_versioned") and \
    hasattr(lib, "maploc_dlpack_versioned_capsule_destructor")


def code_name(code):
    """The symbolic name of an error code ("kTorchNotCheckpoint")."""
    return text(lib.maploc_error_code_name(int(code)))


def last_message():
    return lib.maploc_last_error_message().decode("utf-8", "replace")


def check(code):
    """Raises maploc.Error (the subclass for its code) for a non-zero return code of a C API call."""
    if code != 0:
        raise make_error(code, last_message())


def text(b):
    return None if b is None else b.decode("utf-8", "surrogateescape")


def path_bytes(path):
    return os.fsencode(os.fspath(path))
