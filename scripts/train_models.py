"""Train, from nothing downloaded, the target and the coding/agentic draft model that
`+sweep=cpu_lesson` serves with real vLLM on a CPU (recipe: engines/trained_models.py).

Run it with an engine environment's python (scripts/engine_envs.sh), e.g.

    .venv-engines/bin/python scripts/train_models.py  # -> <tiny-models cache>/trained-<digest>
    .venv-engines/bin/python scripts/train_models.py --out DIR --steps-scale 0.01

Seeded and deterministic on one machine (fixed seed, fixed torch thread count, deterministic
algorithms): the same recipe and text give the same weights, whose sha256 manifest.json lists.
A folder whose manifest matches its files is reused as it is. The last line printed is the
output folder.

Layout:
    target/              LlamaForCausalLM, 4 layers, trained on all five domains + tokenizer
    drafter/             LlamaForCausalLM, 1 layer, trained on coding + agentic rows only
    drafter_train.jsonl  those rows, unchanged (what `model.drafter.train_data` reads)
    ladder/noise-X/      the target with noise X (a fraction of each tensor's std) on every
                         weight: the draft-model ladder (LADDER_RECIPE), built from target/
                         whenever ladder/manifest.json does not match; ladder/ladder.json has
                         each rung's greedy agreement with the target
    recipe.json          the recipe, loss curves, per-domain loss of each model, wall times
    manifest.json        per-file sha256 and size
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from tiny_models import build_tokenizer, save_llama  # noqa: E402

from engines.tiny_models import complete, sha256  # noqa: E402
from engines.trained_models import (  # noqa: E402
    LADDER_RECIPE,
    SEPARATOR,
    TEXT_TEMPLATE,
    TRAIN_RECIPE,
    documents,
    ladder_name,
    trained_root,
    write_drafter_data,
)

EVAL_DOMAINS = ("coding", "agentic", "math", "chat", "encyclopedic")
LOG_EVERY = 50


def token_stream(tokenizer, docs: list[str]):
    import torch

    ids: list[int] = []
    for doc in docs:
        ids.append(tokenizer.bos_token_id)
        ids.extend(tokenizer.encode(doc + SEPARATOR, add_special_tokens=False))
    return torch.tensor(ids, dtype=torch.long)


def config_for(tokenizer, shape: dict):
    import torch
    from transformers import LlamaConfig

    r = TRAIN_RECIPE
    return LlamaConfig(
        vocab_size=r["vocab_size"], hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"], num_hidden_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["num_attention_heads"],
        num_key_value_heads=shape["num_key_value_heads"], head_dim=shape["head_dim"],
        max_position_embeddings=r["max_position_embeddings"], rope_theta=r["rope_theta"],
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        dtype=torch.float32)


def train(name: str, tokenizer, stream, steps: int, seed: int):
    """AdamW, linear warm-up then cosine decay to a tenth; random windows of the stream."""
    import torch
    from transformers import LlamaForCausalLM

    r = TRAIN_RECIPE
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config_for(tokenizer, r[name])).train()
    opt = torch.optim.AdamW(model.parameters(), lr=r["lr"], betas=(0.9, 0.95),
                            weight_decay=r["weight_decay"])

    def lr_at(step: int) -> float:
        if step < r["warmup_steps"]:
            return (step + 1) / r["warmup_steps"]
        done = (step - r["warmup_steps"]) / max(1, steps - r["warmup_steps"])
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    gen = torch.Generator().manual_seed(seed + 1)
    n, curve, t0, running = r["seq_len"], [], time.monotonic(), 0.0
    for step in range(steps):
        starts = torch.randint(0, len(stream) - n, (r["batch_size"],), generator=gen)
        batch = torch.stack([stream[s:s + n] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % LOG_EVERY == 0 or step + 1 == steps:
            k = (step % LOG_EVERY) + 1
            curve.append({"step": step + 1, "loss": round(running / k, 4)})
            print(f"train_models: {name} step {step + 1}/{steps} loss {running / k:.3f} "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            running = 0.0
    return model.eval(), curve, time.monotonic() - t0


def domain_losses(model, tokenizer) -> dict[str, float]:
    """Mean next-token loss on each domain's benchmark prompts (what the sweep sends)."""
    import torch

    out = {}
    for domain in EVAL_DOMAINS:
        rows = [json.loads(line) for line in
                (REPO / "workloads/prompts" / f"{domain}.jsonl").read_text().splitlines()
                if line.strip()]
        total = count = 0.0
        with torch.no_grad():
            for row in rows:
                ids = torch.tensor([[tokenizer.bos_token_id]
                                    + tokenizer.encode(row["text"], add_special_tokens=False)])
                ids = ids[:, :TRAIN_RECIPE["seq_len"] * 4]
                loss = model(input_ids=ids, labels=ids).loss
                total += float(loss) * (ids.shape[1] - 1)
                count += ids.shape[1] - 1
        out[domain] = round(total / count, 4)
    return out


def greedy_agreement(target, draft, tokenizer, tokens: int = 32) -> float:
    """Share of the target's greedy continuations (agentic prompts, `tokens` each) whose next
    token the draft also ranks first, teacher-forced: a rung's per-draft acceptance, roughly
    (vLLM's chain accepts a run of them, so its accept length falls faster than this)."""
    import torch

    rows = [json.loads(line) for line in
            (REPO / "workloads/prompts/agentic.jsonl").read_text().splitlines() if line.strip()]
    agree = total = 0
    with torch.no_grad():
        for row in rows[:24]:
            ids = torch.tensor([[tokenizer.bos_token_id]
                                + tokenizer.encode(row["text"], add_special_tokens=False)[:96]])
            full = target.generate(ids, max_new_tokens=tokens, do_sample=False,
                                   pad_token_id=tokenizer.pad_token_id)
            want = full[0, ids.shape[1]:]
            got = draft(input_ids=full[:, :-1]).logits[0, ids.shape[1] - 1:].argmax(-1)
            agree += int((got == want).sum())
            total += len(want)
    return agree / total


def build_ladder(out: Path) -> None:
    """The draft-model ladder under out/ladder/ (LADDER_RECIPE), unless its manifest matches:
    each rung the trained target with seeded Gaussian noise on every tensor, scaled by that
    tensor's own standard deviation (so the noise hurts every layer alike)."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    root = out / "ladder"
    if complete(root):
        return
    t0 = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ladder-", dir=out))
    try:
        tokenizer = AutoTokenizer.from_pretrained(out / "target")
        target = LlamaForCausalLM.from_pretrained(out / "target", dtype=torch.float32).eval()
        gen = torch.Generator().manual_seed(LADDER_RECIPE["seed"])
        rungs = {}
        for noise in LADDER_RECIPE["noise"]:
            rung = copy.deepcopy(target)
            with torch.no_grad():
                for p in rung.parameters():
                    scale = float(p.float().std()) if p.numel() > 1 else 0.0
                    p.add_(torch.randn(p.shape, generator=gen) * noise * scale)
            name = ladder_name(noise).split("/", 1)[1]
            rungs[name] = {"noise": noise,
                           "greedy_agreement": round(greedy_agreement(target, rung, tokenizer), 4)}
            save_llama(rung, tokenizer, tmp / name)
            print(f"train_models: ladder {name}: greedy agreement "
                  f"{rungs[name]['greedy_agreement']}", file=sys.stderr, flush=True)
        (tmp / "ladder.json").write_text(json.dumps(
            {"recipe": LADDER_RECIPE, "rungs": rungs,
             "wall_seconds": round(time.monotonic() - t0, 1)}, indent=2) + "\n")
        files = {str(p.relative_to(tmp)): {"sha256": sha256(p), "size": p.stat().st_size}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        (tmp / "manifest.json").write_text(json.dumps({"files": files}, indent=2) + "\n")
        os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="output folder (default: "
                    "~/.cache/specgrid/tiny-models/trained-<recipe-digest>)")
    ap.add_argument("--steps-scale", type=float, default=1.0,
                    help="multiply both models' steps (a quick check; the default folder is "
                         "only used at 1.0)")
    ap.add_argument("--force", action="store_true", help="train again even when complete")
    args = ap.parse_args(argv)
    if args.steps_scale != 1.0 and args.out is None:
        ap.error("--steps-scale other than 1 needs --out (the cache holds the recipe's models)")
    out = (args.out or trained_root()).expanduser().resolve()
    if complete(out) and not args.force:
        print(f"train_models: {out} is complete", file=sys.stderr)
        build_ladder(out)
        print(out)
        return 0

    import torch
    import transformers
    torch.set_num_threads(TRAIN_RECIPE["torch_threads"])
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.disable_progress_bar()
    t0 = time.monotonic()
    target_docs, drafter_docs = documents("target"), documents("drafter")
    tokenizer = build_tokenizer([line for doc in target_docs for line in doc.splitlines()
                                 if line.strip()])
    tokenizer.chat_template = TEXT_TEMPLATE
    record: dict = {"recipe": TRAIN_RECIPE, "steps_scale": args.steps_scale, "models": {}}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".trained-", dir=out.parent))
    try:
        seed = TRAIN_RECIPE["seed"]
        for i, (name, docs) in enumerate((("target", target_docs), ("drafter", drafter_docs))):
            stream = token_stream(tokenizer, docs)
            steps = max(1, round(TRAIN_RECIPE[name]["steps"] * args.steps_scale))
            model, curve, wall = train(name, tokenizer, stream, steps, seed + 10 * i)
            record["models"][name] = {
                "documents": len(docs), "tokens": len(stream), "steps": steps,
                "parameters": sum(p.numel() for p in model.parameters()),
                "train_seconds": round(wall, 1), "loss_curve": curve,
                "loss_by_domain": domain_losses(model, tokenizer)}
            save_llama(model, tokenizer, tmp / name)
        write_drafter_data(tmp / "drafter_train.jsonl")
        record["built_with"] = {"torch": torch.__version__,
                                "transformers": transformers.__version__}
        record["wall_seconds"] = round(time.monotonic() - t0, 1)
        (tmp / "recipe.json").write_text(json.dumps(record, indent=2) + "\n")
        files = {str(p.relative_to(tmp)): {"sha256": sha256(p), "size": p.stat().st_size}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        weights = sorted(f for f in files if f.endswith(".safetensors"))
        manifest = {"files": files,
                    "weights_sha256": {f: files[f]["sha256"] for f in weights}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    build_ladder(out)
    for name, m in record["models"].items():
        print(f"train_models: {name}: {m['parameters']} parameters, {m['tokens']} tokens, "
              f"{m['steps']} steps in {m['train_seconds']} s, final loss "
              f"{m['loss_curve'][-1]['loss']}, by domain {m['loss_by_domain']}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
