"""The PyPI side of the test environment (tests/requirements.txt, installed by
scripts/deps.sh into build/venv): every pinned package is importable at its
pinned version, Debian's torch and numpy are still the ones in use (the venv
must not shadow them: the parity references are written against them), and
the peers the next suites lean on really work here:

- onnxruntime (the frame-serving peer) runs every model of ../shared/vision/
  on the CPU and reproduces the golden outputs that onnxruntime 1.30 made
  (../shared/vision/golden/index.json), max abs error <= 1e-4;
- transformers (the reference for architectures) builds a tiny llama and a
  tiny BERT on Debian's torch and runs them;
- tritonclient's HTTP client builds an Open Inference Protocol request.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, run  # noqa: E402

REQS = os.path.join(os.path.dirname(__file__), "..", "requirements.txt")
VISION = os.path.join(SHARED, "vision")


def pins():
    out = {}
    with open(REQS) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s#]+)", line)
            if m:
                out[m.group(1)] = m.group(3)
    return out


def require(module):
    try:
        return __import__(module)
    except ImportError as e:
        raise AssertionError("python package %r is missing (%s): run scripts/deps.sh and run this suite with "
                             "build/venv/bin/python (tests/run.sh does)" % (module, e))


def test_pinned_versions_are_installed():
    from importlib import metadata
    p = pins()
    for name in ("openai", "onnxruntime", "tritonclient", "transformers"):
        assert name in p, "%s is not pinned in %s" % (name, REQS)
        try:
            got = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise AssertionError("%s (pinned %s) is not installed: run scripts/deps.sh" % (name, p[name]))
        assert got == p[name], "%s %s installed, %s pinned" % (name, got, p[name])


def test_debian_torch_and_numpy_are_in_use():
    torch = require("torch")
    numpy = require("numpy")
    for m in (torch, numpy):
        assert m.__file__.startswith("/usr/lib/python3/dist-packages/"), \
            "%s comes from %s, not Debian's python3-* package (the venv shadows it)" % (m.__name__, m.__file__)


def test_onnxruntime_reproduces_the_vision_goldens():
    ort = require("onnxruntime")
    np = require("numpy")
    index_path = os.path.join(VISION, "golden", "index.json")
    assert os.path.exists(index_path), "shared vision goldens missing: %s (set HEARTH_SHARED)" % index_path
    with open(index_path) as f:
        index = json.load(f)
    assert len(index) >= 3, index.keys()
    for name, case in index.items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(os.path.join(VISION, case["model"]), opts, providers=["CPUExecutionProvider"])
        feeds = {i["name"]: np.fromfile(os.path.join(VISION, "golden", i["file"]), dtype="<f4").reshape(i["shape"])
                 for i in case["inputs"]}
        names = [o["name"] for o in case["outputs"]]
        for o, got in zip(case["outputs"], sess.run(names, feeds)):
            want = np.fromfile(os.path.join(VISION, "golden", o["file"]), dtype="<f4").reshape(o["shape"])
            assert got.shape == want.shape, (name, o["name"], got.shape, want.shape)
            err = float(np.max(np.abs(got - want)))
            # same library, other version and machine: rounding-level differences only
            assert err <= 1e-4, "%s output %s: max abs error %g > 1e-4" % (name, o["name"], err)


def test_transformers_runs_on_debian_torch():
    torch = require("torch")
    require("transformers")
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    logits = llama(torch.tensor([[1, 2, 3]])).logits
    assert tuple(logits.shape) == (1, 3, 64) and bool(torch.isfinite(logits).all()), logits.shape
    bert = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                intermediate_size=64))
    h = bert(torch.tensor([[1, 2]])).last_hidden_state
    assert tuple(h.shape) == (1, 2, 32), h.shape


def test_tritonclient_builds_an_infer_request():
    np = require("numpy")
    require("tritonclient")
    import tritonclient.http as th
    x = th.InferInput("input", [1, 3], "FP32")
    x.set_data_from_numpy(np.array([[1, 2, 3]], dtype=np.float32), binary_data=True)
    body, json_len = th.InferenceServerClient.generate_request_body([x], outputs=[th.InferRequestedOutput("out")])
    head = json.loads(body[:json_len])
    assert head["inputs"][0]["name"] == "input" and head["inputs"][0]["datatype"] == "FP32", head
    assert head["inputs"][0]["parameters"]["binary_data_size"] == 12 and len(body) == json_len + 12, head


if __name__ == "__main__":
    run([test_pinned_versions_are_installed, test_debian_torch_and_numpy_are_in_use,
         test_onnxruntime_reproduces_the_vision_goldens, test_transformers_runs_on_debian_torch,
         test_tritonclient_builds_an_infer_request])
