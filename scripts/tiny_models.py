"""Build, from nothing, the tiny models specgrid runs real vLLM / SGLang servers with on a CPU.

Run it with an engine environment's python (scripts/engine_envs.sh), e.g.

    .venv-vllm/bin/python scripts/tiny_models.py     # -> ~/.cache/specgrid/tiny-models/<digest>
    .venv-vllm/bin/python scripts/tiny_models.py --out DIR

Nothing is downloaded: the weights are seeded random numbers (or derived from the target), the
byte-level BPE tokenizer is trained here on the project's own shipped text. Everything is
deterministic, so the output folder is named by a digest of the recipe (and of the training
text); a folder whose manifest.json lists files that are all present with the recorded sha256
is reused as it is. The last line printed is the output folder.

Layout (each a few MB, bf16):
    target/         LlamaForCausalLM, 4 layers, + tokenizer and chat template
    draft-near/     target + small seeded weight noise  (draft_model; ~40 % accepted, k=4)
    draft-1layer/   target cut to its first layer  (draft_model; a genuine small draft, ~1 %)
    eagle3-random/  EAGLE-3 head (LlamaForCausalLMEagle3), random weights   (~0 acceptance)
    eagle3-repeat/  EAGLE-3 head that computes the target's own logits from the target's final
                    hidden state: it keeps proposing the token the target just produced, so it is
                    accepted exactly as often as the target's greedy output repeats itself
                    (~18 % with k=3 on the shipped prompts; ngram gets ~80 %)
    manifest.json   recipe, per-file sha256 and size
Acceptance measured with vLLM 0.32.0 on CPU, 32 greedy requests of 64 tokens.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the recipe lives in the package (the driver reads it too)
from engines.tiny_models import (  # noqa: E402
    CHAT_TEMPLATE,
    RECIPE,
    SPECIALS,
    cache_root,
    complete,
    corpus_lines,
    digest,
    sha256,
)


def build_tokenizer(lines: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=RECIPE["vocab_size"], special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # all 256 bytes: nothing is <unk>
    tok.train_from_iterator(lines, trainer=trainer)
    assert tok.get_vocab_size() == RECIPE["vocab_size"], tok.get_vocab_size()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>",
        unk_token="<|unk|>", model_max_length=RECIPE["max_position_embeddings"])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def llama_config(tokenizer, num_layers: int):
    import torch
    from transformers import LlamaConfig

    r = RECIPE
    return LlamaConfig(
        vocab_size=r["vocab_size"], hidden_size=r["hidden_size"],
        intermediate_size=r["intermediate_size"], num_hidden_layers=num_layers,
        num_attention_heads=r["num_attention_heads"], num_key_value_heads=r["num_key_value_heads"],
        head_dim=r["head_dim"], max_position_embeddings=r["max_position_embeddings"],
        rope_theta=r["rope_theta"], initializer_range=r["init_std"], rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        dtype=torch.bfloat16)


def save_llama(model, tokenizer, out: Path) -> None:
    model.to(dtype=__import__("torch").bfloat16).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    model.generation_config.save_pretrained(out)


def build_llamas(tokenizer, root: Path):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(RECIPE["seed"])
    target = LlamaForCausalLM(llama_config(tokenizer, RECIPE["num_hidden_layers"])).eval()
    save_llama(target, tokenizer, root / "target")

    # draft-near: identical architecture, every weight + N(0, near_noise_std) from its own seed.
    near = LlamaForCausalLM(llama_config(tokenizer, RECIPE["num_hidden_layers"])).eval()
    near.load_state_dict(target.state_dict())
    gen = torch.Generator().manual_seed(RECIPE["seed"] + 1)
    with torch.no_grad():
        for p in near.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * RECIPE["near_noise_std"])
    save_llama(near, tokenizer, root / "draft-near")

    # draft-1layer: the target's embedding, first decoder layer, final norm and lm_head: a
    # genuinely smaller model that shares the target's vocabulary and tokenizer. The missing
    # three random layers move the logits enough that it rarely agrees (vLLM draft_model, k=4,
    # greedy: ~1 % of draft tokens accepted, against ~40 % for draft-near).
    small = LlamaForCausalLM(llama_config(tokenizer, 1)).eval()
    state = {k: v for k, v in target.state_dict().items()
             if not k.startswith("model.layers.") or k.startswith("model.layers.0.")}
    small.load_state_dict(state)
    save_llama(small, tokenizer, root / "draft-1layer")
    return target


def save_eagle3(tensors: dict, tokenizer, out: Path) -> None:
    """An EAGLE-3 head in the layout vLLM's LlamaForCausalLMEagle3 loads."""
    from safetensors.torch import save_file

    r = RECIPE
    out.mkdir(parents=True)
    save_file({k: v.to(__import__("torch").bfloat16).contiguous() for k, v in tensors.items()},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    config = llama_config(tokenizer, 1).to_dict()
    config.update({
        "architectures": ["LlamaForCausalLMEagle3"],
        # Trap 1: draft_vocab_size == vocab_size, so no d2t/t2d tensors are written (vLLM
        # rejects them then: "no module or parameter named 'draft_id_to_target_id'").
        "draft_vocab_size": r["vocab_size"],
        # Trap 2: vLLM's default aux layers are (2, L//2, L-3) = (2, 2, 1) for L=4, only two
        # distinct ones, and the first request dies on a [-1, 384] reshape. Name them (vLLM
        # reads the top-level key, and eagle_config's).
        "eagle_aux_hidden_state_layer_ids": r["eagle3_aux_layers"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": r["eagle3_aux_layers"]},
        "torch_dtype": "bfloat16",
    })
    config.pop("dtype", None)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(out)


def build_eagle3(target, tokenizer, root: Path) -> None:
    import torch

    r = RECIPE
    h, i, hd = r["hidden_size"], r["intermediate_size"], r["head_dim"]
    q, kv = r["num_attention_heads"] * hd, r["num_key_value_heads"] * hd
    gen = torch.Generator().manual_seed(r["seed"] + 2)

    def rand(*shape):
        return torch.randn(shape, generator=gen) * r["init_std"]
    # The midlayer's attention reads [input embedding ; hidden state] = 2h wide; fc folds the
    # three captured target hidden states (3h) into one.
    shapes = {"fc.weight": (h, 3 * h),
              "midlayer.self_attn.q_proj.weight": (q, 2 * h),
              "midlayer.self_attn.k_proj.weight": (kv, 2 * h),
              "midlayer.self_attn.v_proj.weight": (kv, 2 * h),
              "midlayer.self_attn.o_proj.weight": (h, q),
              "midlayer.mlp.gate_proj.weight": (i, h),
              "midlayer.mlp.up_proj.weight": (i, h),
              "midlayer.mlp.down_proj.weight": (h, i),
              "lm_head.weight": (r["vocab_size"], h)}
    norms = ["midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
             "midlayer.post_attention_layernorm.weight", "norm.weight"]
    random_head = {k: rand(*s) for k, s in shapes.items()} | {k: torch.ones(h) for k in norms}
    save_eagle3(random_head, tokenizer, root / "eagle3-random")

    # eagle3-repeat: attention and MLP write nothing (o_proj = down_proj = 0), so the head's
    # output is its residual = fc(aux states); fc passes through the third aux state (id 4: the
    # target's last hidden state before its norm) and the head ends in the target's own final
    # norm and lm_head. At position i it thus reproduces the target's logits at i, i.e. it
    # proposes x[i+1] (the token the target just produced) as x[i+2]; later draft steps get the
    # same hidden state back and propose it again.
    sd = target.state_dict()
    fc = torch.zeros(h, 3 * h)
    fc[:, 2 * h:] = torch.eye(h)
    repeat_head = dict(random_head)
    repeat_head.update({"fc.weight": fc,
                        "midlayer.self_attn.o_proj.weight": torch.zeros(h, q),
                        "midlayer.mlp.down_proj.weight": torch.zeros(h, i),
                        "norm.weight": sd["model.norm.weight"].float(),
                        "lm_head.weight": sd["lm_head.weight"].float()})
    save_eagle3(repeat_head, tokenizer, root / "eagle3-repeat")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Layout: target/ draft-near/ draft-1layer/ "
                                        "eagle3-random/ eagle3-repeat/ manifest.json")
    ap.add_argument("--out", type=Path, help="output folder (default: "
                    "~/.cache/specgrid/tiny-models/<recipe-digest>)")
    ap.add_argument("--force", action="store_true", help="rebuild even when complete")
    args = ap.parse_args(argv)

    lines = corpus_lines()
    dig = digest(lines)
    out = (args.out or cache_root() / dig).expanduser().resolve()
    if complete(out) and not args.force:
        print(f"tiny_models: {out} is complete (recipe {dig})", file=sys.stderr)
        print(out)
        return 0

    import tokenizers
    import torch
    import transformers
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.disable_progress_bar()  # no "Writing model shards" bars
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-models-", dir=out.parent))
    try:
        tokenizer = build_tokenizer(lines)
        target = build_llamas(tokenizer, tmp)
        build_eagle3(target, tokenizer, tmp)
        files = {str(p.relative_to(tmp)): {"sha256": sha256(p), "size": p.stat().st_size}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {"recipe": RECIPE, "recipe_digest": dig, "corpus_lines": len(lines),
                    "chat_template": CHAT_TEMPLATE, "files": files,
                    "built_with": {"torch": torch.__version__,
                                   "transformers": transformers.__version__,
                                   "tokenizers": tokenizers.__version__}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)  # appears complete or not at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(m["size"] for m in files.values())
    print(f"tiny_models: built {len(files)} files, {total / 1e6:.1f} MB (recipe {dig})",
          file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
