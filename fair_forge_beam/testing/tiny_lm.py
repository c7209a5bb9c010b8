"""A tiny randomly initialised causal LM for tests and demos — no download.

``tiny_gpt2(seed=0)`` returns ``(model, tokenizer)``: a 2-layer GPT-2 built from a
``GPT2Config`` (16-dim embeddings, 2 heads) with weights from ``torch.manual_seed(seed)``,
and a word-level fast tokenizer over a fixed vocabulary (whitespace split, unknown words →
``[UNK]``). Its attributions mean nothing; they are reproducible.
"""
from __future__ import annotations

__all__ = ["tiny_gpt2", "VOCAB_WORDS"]

VOCAB_WORDS = tuple("the cat sat on a mat . dog ran fast is big small red blue hello world what how why who answer question "
                    "refund order plan price cancel account please thanks yes no".split())


def tiny_gpt2(seed: int = 0):
    """``(GPT2LMHeadModel in eval mode, PreTrainedTokenizerFast)``; same seed → same weights."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}
    for w in VOCAB_WORDS:
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]")
    cfg = GPT2Config(vocab_size=len(vocab), n_positions=128, n_embd=16, n_layer=2, n_head=2,
                     pad_token_id=1, eos_token_id=2, bos_token_id=2)
    gen = torch.random.fork_rng()
    with gen:
        torch.manual_seed(int(seed))
        model = GPT2LMHeadModel(cfg)
    return model.eval(), tok
