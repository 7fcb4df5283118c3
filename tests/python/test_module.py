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
            tensors = maploc.load(path, map_location=spec)
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
        with self.assertRaises(TypeError):
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), map_location=lambda s, loc: s)
        with self.assertRaises(ValueError):
            maploc.load(fixture("checkpoints", "gpu_tagged.t113.pt"), host="nowhere")

    def test_remap_rewrites_tags(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cpu.pt")
            maploc.remap(fixture("checkpoints", "gpu_tagged.t113.pt"), out, "cuda:*->cpu")
            self.assertEqual({t.location for t in maploc.ls(out)}, {"cpu"})
            tensors = maploc.load(out)  # no map_location needed any more
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
                tensors = maploc.load(path, map_location="cpu")
                for w in want:
                    self.assertEqual(tensors[w["name"]].sha256(), w["sha256"], path)
            with self.assertRaises(maploc.Error) as e:
                maploc.convert(st, pt, to="onnx")
            self.assertEqual(e.exception.code, 4)

    def test_files_that_try_to_run_code_run_nothing(self):
        security = read_json(fixture("malicious", "manifest.json"))
        canary = security["canary"]
        if os.path.exists(canary):
            os.remove(canary)
        tried = 0
        for entry in security["entries"]:
            if entry["reader"] != "checkpoint" or not entry.get("globals"):
                continue
            try:
                maploc.load(fixture("malicious", entry["file"]), map_location="cpu")
            except maploc.Error:
                pass
            tried += 1
        self.assertGreater(tried, 3)
        self.assertFalse(os.path.exists(canary), "a payload ran")


if __name__ == "__main__":
    unittest.main(verbosity=1)
