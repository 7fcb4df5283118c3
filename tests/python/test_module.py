"""test_module.py - the maploc Python module without any consumer: ls, load with map_location, errors,
remap, convert, and files that try to run code (nothing runs). Usage: python3 test_module.py FIXTURES_DIR."""
import json
import os
import sys
import tempfile
import unittest

import maploc

FIXTURES = sys.argv.pop(1)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def manifest(file):
    return read_json(fixture("checkpoints", file + ".manifest.json"))


class ModuleTest(unittest.TestCase):
    def test_import_needs_no_torch(self):
        self.assertNotIn("torch", sys.modules)
        self.assertRegex(maploc.version(), r"^\d+\.\d+\.\d+$")
        # maploc.torch imports torch on first use only: `import maploc.torch` works where torch is missing
        # (here: made unimportable in a child interpreter), and its load() then says what is missing.
        import subprocess
        child = ("import sys; sys.modules['torch'] = None\n"
                 "import maploc.torch\n"
                 "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
                 "try:\n    maploc.torch.load(sys.argv[1])\nexcept ImportError as e:\n    print(e)\n")
        out = subprocess.run([sys.executable, "-c", child, fixture("checkpoints", "gpu_tagged.t113.pt")],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("maploc.torch needs torch", out.stdout)

    def test_ls_lists_torch_geometry_and_tags(self):
        want = manifest("gpu_tagged.t113.pt")["tensors"]
        got = {t.name: t for t in maploc.ls(fixture("checkpoints", "gpu_tagged.t113.pt"))}
        for w in want:
            t = got[w["name"]]
            self.assertEqual((t.dtype, list(t.shape), list(t.stride), t.storage_offset, t.location),
                             (w["dtype"], w["shape"], w["stride"], w["storage_offset"], w["location"]))

    def test_load_maps_locations_and_hashes_equal_torch(self):
        path = fixture("checkpoints", "gpu_tagged.t113.pt")
        want = manifest("gpu_tagged.t113.pt")["tensors"]
        for spec in ("cpu", "cuda:*->cpu", {"cuda:0": "cpu", "cuda:1": "cpu"}):
            tensors = maploc.tensors(path, map_location=spec)
            for w in want:
                t = tensors[w["name"]]
                self.assertEqual(t.device, "cpu")
                self.assertEqual(t.__dlpack_device__(), (1, 0))
                self.assertEqual(t.sha256(), w["sha256"])

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(maploc.Error) as e:
            maploc.load("/nonexistent/model.pt")
        self.assertEqual(e.exception.code, 1)
        self.assertIn("/nonexistent/model.pt", str(e.exception))
        with self.assertRaises(maploc.Error) as e:
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location="cuda:*->nowhere")
        self.assertEqual(e.exception.code, 403)
        with self.assertRaises(TypeError):  # a callable must return a device or the storage it was given
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location=lambda s, loc: 1.5)
        with self.assertRaises(ValueError):
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), host="nowhere")

    def test_remap_rewrites_tags(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cpu.pt")
            maploc.remap(fixture("checkpoints", "gpu_tagged.t113.pt"), out, "cuda:*->cpu")
            self.assertEqual({t.location for t in maploc.ls(out)}, {"cpu"})
            tensors = maploc.tensors(out)  # no map_location needed any more
            for w in manifest("gpu_tagged.t113.pt")["tensors"]:
                self.assertEqual(tensors[w["name"]].sha256(), w["sha256"])

    def test_convert_to_safetensors_and_back(self):
        want = manifest("nested_training.t2x.pt")["tensors"]
        with tempfile.TemporaryDirectory() as tmp:
            st = os.path.join(tmp, "model.safetensors")
            maploc.convert(fixture("checkpoints", "nested_training.t2x.pt"), st)
            pt = os.path.join(tmp, "model.pt")
            maploc.convert(st, pt, to="torch")
            for path in (st, pt):
                tensors = maploc.tensors(path, map_location="cpu")
                for w in want:
                    self.assertEqual(tensors[w["name"]].sha256(), w["sha256"], path)
            with self.assertRaises(maploc.Error) as e:
                maploc.convert(st, pt, to="onnx")
            self.assertEqual(e.exception.code, 4)

    def test_files_that_try_to_run_code_run_nothing(self):
        # Every checkpoint of the malicious corpus read with the default limits (the module takes no
        # Limits; entries that lower one are the C++ corpus test's): nothing runs, and each gives the
        # outcome its manifest entry names, read as the C++ corpus test reads it: a "checkpoint" entry
        # opened (maploc.ls), a "load" entry loaded and every tensor hashed (maploc.tensors, sha256).
        # A file refused when opened is refused by the loads too, with the same code; maploc.load of
        # every file is run as well, for the canary.
        security = read_json(fixture("malicious", "manifest.json"))
        canary = security["canary"]
        if os.path.exists(canary):
            os.remove(canary)

        def outcome(call, path):
            try:
                call(path)
                return "ok"
            except maploc.Error as e:
                return e.code_name

        def load(path):
            return maploc.load(path, map_location="cpu")

        def hashed(path):
            for t in maploc.tensors(path, map_location="cpu").values():
                t.sha256()

        tried, refused, payloads = 0, 0, 0
        for entry in security["entries"]:
            if entry["reader"] not in ("checkpoint", "load") or entry.get("limits"):
                continue
            path = fixture("malicious", entry["file"])
            if entry["reader"] == "load":
                calls = {"tensors, sha256": hashed}
            elif entry["expect"] == "ok":
                calls = {"ls": maploc.ls}
            else:
                calls = {"ls": maploc.ls, "load": load, "tensors, sha256": hashed}
            for name, call in calls.items():
                with self.subTest(file=entry["file"], call=name, why=entry["why"]):
                    self.assertEqual(outcome(call, path), entry["expect"])
            outcome(load, path)  # whatever it gives, nothing may run
            tried += 1
            refused += entry["expect"] != "ok"
            payloads += bool(entry.get("globals"))
        self.assertGreater(tried, 40)
        self.assertGreater(refused, 25)
        self.assertGreater(payloads, 15)
        self.assertFalse(os.path.exists(canary), "a payload ran")

    def test_error_classes_and_code_names(self):
        with self.assertRaises(maploc.Error) as e:
            maploc.load("/nonexistent/model.pt")
        self.assertEqual((e.exception.code, e.exception.code_name), (1, "kIoOpen"))
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            f.write(b"<!DOCTYPE html><html><body>not a model</body></html>\n")
            f.flush()
            with self.assertRaises(maploc.NotACheckpointError) as e:
                maploc.load(f.name)
            self.assertEqual((e.exception.code, e.exception.code_name), (300, "kTorchNotCheckpoint"))
        # No machine has a cuda:4095: kRemapCudaUnavailable (400) without CUDA, kRemapNoSuchDevice (401) with it.
        with self.assertRaises(maploc.Error) as e:
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location="cuda:*->cuda:4095")
        self.assertIsInstance(e.exception, maploc.DeviceUnavailableError)
        self.assertIn(e.exception.code_name, ("kRemapCudaUnavailable", "kRemapNoSuchDevice"))
        for cls in (maploc.NotACheckpointError, maploc.UnsafeContentError, maploc.LimitExceededError,
                    maploc.DeviceUnavailableError, maploc.DLPackError):
            self.assertTrue(issubclass(cls, maploc.Error))
        self.assertTrue(issubclass(maploc.DLPackError, BufferError))

    def test_load_returns_the_structure(self):
        path = fixture("checkpoints", "nested_training.t2x.pt")
        obj = maploc.load(path)
        flat = maploc.tensors(path)
        self.assertIsInstance(obj, dict)
        seen = []

        def walk(v):
            if isinstance(v, maploc.Tensor):
                seen.append(v)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
        walk(obj)
        self.assertTrue(seen)
        self.assertEqual({t.name for t in seen} - set(flat), set())
        for t in seen:
            self.assertEqual(t.sha256(), flat[t.name].sha256())

    def test_file_objects_and_callable_map_location(self):
        path = fixture("checkpoints", "gpu_tagged.t113.pt")
        want = {w["name"]: w["sha256"] for w in manifest("gpu_tagged.t113.pt")["tensors"]}
        with open(path, "rb") as f:
            tensors = maploc.tensors(f, map_location="cpu")
        self.assertEqual({n: t.sha256() for n, t in tensors.items() if n in want}, want)
        calls = []

        def to_cpu(storage, location):
            calls.append(location)
            return storage
        for map_location in (to_cpu, lambda s, loc: "cpu", lambda s, loc: s.cpu()):
            for t in maploc.tensors(path, map_location=map_location).values():
                self.assertEqual(t.device, "cpu")
        self.assertTrue(calls)
        self.assertTrue(all(isinstance(c, str) for c in calls))
        with open(path, "rb") as f:
            obj = maploc.load(f, map_location=to_cpu, weights_only=False, mmap=False)
        self.assertIsInstance(obj, dict)

    def test_dlpack_protocol_arguments(self):
        tensors = maploc.tensors(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location="cpu")
        t = next(iter(tensors.values()))
        for kwargs in ({"copy": True}, {"dl_device": (2, 0)}):
            with self.assertRaises(BufferError) as e:
                t.__dlpack__(**kwargs)
            self.assertIsInstance(e.exception, maploc.Error)
            self.assertEqual(e.exception.code, 313)
        for kwargs in ({}, {"max_version": (1, 0)}, {"max_version": (0, 8)}, {"copy": False},
                       {"dl_device": (1, 0)}, {"stream": None}):
            self.assertIn(type(t.__dlpack__(**kwargs)).__name__, ("PyCapsule",))

    def test_dlpack_versioned_capsule(self):
        """max_version >= (1, 0): a "dltensor_versioned" capsule holding DLPack 1.0's struct (version 1.0,
        read-only flag on a mapped view, bool as kDLBool, strides set); below: the 0.x "dltensor"."""
        import ctypes
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

        class Managed(ctypes.Structure):  # DLManagedTensorVersioned up to dl_tensor's dtype and shape
            _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("ctx", ctypes.c_void_p),
                        ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("data", ctypes.c_void_p),
                        ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                        ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p)]
        tensors = maploc.tensors(fixture("checkpoints", "dtypes.t113.pt"), map_location="cpu", writable=False)
        flag = tensors["bool"]
        self.assertEqual(api.PyCapsule_GetName(flag.__dlpack__()), b"dltensor")
        self.assertEqual(api.PyCapsule_GetName(flag.__dlpack__(max_version=(0, 8))), b"dltensor")
        capsule = flag.__dlpack__(max_version=(1, 0))
        self.assertEqual(api.PyCapsule_GetName(capsule), b"dltensor_versioned")
        m = Managed.from_address(api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"))
        self.assertEqual((m.major, m.minor), (1, 0))
        self.assertEqual(m.flags & 1, 1)  # a read-only view of the file's pages (writable=False)
        writable = maploc.tensors(fixture("checkpoints", "dtypes.t113.pt"), writable=True)["bool"]
        w = Managed.from_address(api.PyCapsule_GetPointer(keep := writable.__dlpack__(max_version=(1, 0)),
                                                          b"dltensor_versioned"))
        self.assertEqual(w.flags & 1, 0)
        del keep
        self.assertEqual((m.code, m.bits, m.lanes), (6, 8, 1))  # kDLBool
        self.assertEqual(m.ndim, len(flag.shape))
        self.assertTrue(m.strides)
        del capsule  # never consumed: the capsule's destructor releases the export

    def test_url_sources_load_as_files(self):
        # A URL (here the loopback range server of tests/remote) reads as the file does (docs/remote.md).
        import subprocess
        # Beside fixtures/ in the source tree (this file also runs from a copy, against the installed wheel).
        server = os.path.join(os.path.dirname(os.path.abspath(FIXTURES)), "tests", "remote", "range_server.py")
        self.assertTrue(os.path.isfile(server), "no range server at %s" % server)
        proc = subprocess.Popen([sys.executable, server, FIXTURES], stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            self.assertTrue(line.startswith("PORT "), "the range server did not start: %r" % line)
            port = int(line.split()[1])
            url = "http://127.0.0.1:%d/ok/checkpoints/gpu_tagged.t113.pt" % port
            want = manifest("gpu_tagged.t113.pt")["tensors"]
            for host in ("view", "copy"):
                tensors = maploc.tensors(url, map_location="cuda:*->cpu", host=host)
                self.assertEqual({w["name"]: w["sha256"] for w in want},
                                 {w["name"]: tensors[w["name"]].sha256() for w in want})
            self.assertEqual(sorted(maploc.load(url, map_location="cpu")),
                             sorted(maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location="cpu")))
            with self.assertRaises(maploc.Error) as missing:
                maploc.load(url.replace("gpu_tagged", "no_such"))
            self.assertIn("no_such", str(missing.exception))
        finally:
            proc.terminate()
            proc.wait()
            proc.stdout.close()

    def test_public_names_have_docstrings(self):
        for name in maploc.__all__:
            self.assertTrue(getattr(maploc, name).__doc__, name)
        here = os.path.dirname(maploc.__file__)
        self.assertTrue(os.path.exists(os.path.join(here, "py.typed")))


if __name__ == "__main__":
    unittest.main(verbosity=1)
