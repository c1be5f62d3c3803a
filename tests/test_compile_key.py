"""A stage's compile cache key means what it says: its source, the
structure of its operations, the code it reaches (and nothing else), the
ABI of the kernels it calls, and the versions and CPU its machine code is
for; each stage's first call is one log record saying what happened."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from slipstream.compiler import ArraySource, Pipeline, codegen
from slipstream.ops import Normalize, RandomHorizontalFlip


def images() -> np.ndarray:
    return np.arange(4 * 6 * 5 * 3, dtype=np.uint8).reshape(4, 6, 5, 3)


def keys(pipeline: list) -> list[str]:
    compiled = Pipeline(pipeline).compile(4)
    return [codegen.fingerprint(compiled.graph, source) for source in compiled.sources]


def test_a_module_the_stage_does_not_reach_is_not_in_its_key(monkeypatch):
    """Editing detection.py (not reached by a flip and a normalize) keeps
    the key; editing augment.py, which defines the flip, changes it."""
    pipeline = [ArraySource(images()), RandomHorizontalFlip(), Normalize()]
    before = keys(pipeline)
    real = codegen._file_digest

    def edited(name: str):
        return lambda path: "edited" if path is not None and path.endswith(name) else real(path)

    monkeypatch.setattr(codegen, "_file_digest", edited(os.path.join("ops", "detection.py")))
    assert keys(pipeline) == before
    monkeypatch.setattr(codegen, "_file_digest", edited(os.path.join("ops", "augment.py")))
    assert keys(pipeline) != before


def test_the_abi_version_of_a_called_kernel_is_in_the_key(monkeypatch):
    """Normalize calls the native slip_pack: a new ABI version is a new
    key; a stage that calls no kernel keeps its key."""
    from slipstream import _native

    with_kernel = [ArraySource(images()), Normalize()]
    without = [ArraySource(images()), RandomHorizontalFlip()]
    before = keys(with_kernel), keys(without)
    monkeypatch.setattr(_native, "ABI_VERSION", _native.ABI_VERSION + 1)
    assert keys(with_kernel) != before[0]
    assert keys(without) == before[1]


def test_the_key_is_the_same_in_every_process(tmp_path):
    script = "from test_compile_key import images, keys; from slipstream.ops import RandomHorizontalFlip, Normalize;" \
             "from slipstream.compiler import ArraySource;" \
             "print(keys([ArraySource(images()), RandomHorizontalFlip(), Normalize()]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout == f"{keys([ArraySource(images()), RandomHorizontalFlip(), Normalize()])}\n"


USER_OPERATION = '''
import dataclasses
from slipstream.compiler import Operation


@dataclasses.dataclass(frozen=True)
class Shifted(Operation):
    def declare(self, state):
        return state, None

    def generate_code(self):
        def shifted(x, key):
            flat = x.reshape(-1)
            for j in range(flat.size):
                flat[j] = flat[j] + {amount}
            return x

        return shifted
'''

RUN = '''
import logging, sys
import numpy as np
sys.path.insert(0, ".")
import unrelated  # imported by the program, read by no stage
from userop import Shifted
from slipstream.compiler import ArraySource, Pipeline
outcomes = []
handler = logging.Handler()
handler.emit = lambda record: outcomes.append(record.outcome)
logging.getLogger("slipstream.compiler").addHandler(handler)
logging.getLogger("slipstream.compiler").setLevel(logging.INFO)
batch = Pipeline([ArraySource(np.zeros((4, 3), np.uint8)), Shifted()]).compile(4)(np.arange(4))
print(" ".join(outcomes), int(batch[0, 0]))
'''


def test_editing_an_unrelated_module_compiles_nothing_and_editing_the_code_compiles(tmp_path):
    """Real processes: the stage is compiled once, loaded after a module
    the stage does not reach changed, compiled again after its own
    operation's code changed; each first call is one log record."""
    (tmp_path / "userop.py").write_text(USER_OPERATION.format(amount=1))
    (tmp_path / "unrelated.py").write_text("VALUE = 1\n")
    (tmp_path / "run.py").write_text(RUN)
    env = {**os.environ, "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> str:
        done = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run() == "compiled 1"
    (tmp_path / "unrelated.py").write_text("VALUE = 2  # edited\n")
    assert run() == "loaded 1"
    (tmp_path / "userop.py").write_text(USER_OPERATION.format(amount=7))
    assert run() == "compiled 7"


def test_explain_says_where_the_machine_code_of_each_stage_is(caplog):
    compiled = Pipeline([ArraySource(images()), RandomHorizontalFlip(0.25)]).compile(4)
    with caplog.at_level(logging.INFO, logger="slipstream.compiler"):
        compiled(np.arange(4))
    (record,) = [r for r in caplog.records if r.name == "slipstream.compiler"]
    assert record.stage == 0 and record.pipelines == ["output"] and record.outcome in ("compiled", "loaded", "reused")
    assert record.seconds >= 0 and "stage 0 of pipeline 'output'" in record.getMessage()
    assert "# machine code: in this process" in compiled.explain()


def test_explain_before_the_first_batch_says_whether_the_stage_is_in_the_cache(tmp_path, monkeypatch):
    """A stage another process compiled is in the cache; one no process
    compiled (samples of a shape no other test uses) is still to compile."""
    monkeypatch.setenv("SLIPSTREAM_COMPILE_CACHE_DIR", str(tmp_path))
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy as np;"
              "from test_compile_key import images; from slipstream.compiler import Pipeline, ArraySource;"
              "from slipstream.ops import Normalize;"
              "Pipeline([ArraySource(images()[:, :5]), Normalize(dtype=np.float16)]).compile(4)(np.arange(4))")
    done = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], capture_output=True, text=True,
                          env=os.environ, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cached = Pipeline([ArraySource(images()[:, :5]), Normalize(dtype=np.float16)]).compile(4).explain()
    assert f"# machine code: in the compile cache at {tmp_path}" in cached
    cold = Pipeline([ArraySource(images()[:, :3]), Normalize(dtype=np.float16)]).compile(4).explain()
    assert "# machine code: not compiled yet: compiled on the first batch" in cold
