#!/usr/bin/python3
"""Writes a random-weight Llama model as GGUF, for generation benchmarks (bench/generation.sh).

    /usr/bin/python3 tools/make_llama_gguf.py OUT.gguf [--layers 12 --dim 768 --ff 2048
        --heads 12 --kv-heads HEADS --ctx 4096 --seed 13 --tokenizer-from GGUF --llama-source DIR]

The defaults give 134M parameters (two 32000 x 768 embedding matrices and twelve blocks of
7.1M), 268 MB: big enough that a decode step costs what a small real model's does, so that a
server's own per-token overhead is measured against a realistic engine step rather than
against a 1-layer toy's microseconds.

The weights are random, so the text is gibberish, but the tokenizer is real: every
tokenizer.ggml.* key (and tokenizer.chat_template, if there is one) is copied from
--tokenizer-from, by default the Llama-2 32k SentencePiece tokenizer of
../shared/models/llama-2-tiny-random.gguf. Prompts therefore tokenize as a Llama-2 model's would,
and both servers compared see the same token counts.

F16 weights (the 1-D norm weights F32, as llama.cpp's converters write them): F16 is what an
unquantized GGUF is in practice, and llama.cpp's CPU kernels read it with F16C, so the engine
does a real model's work per token; F32 would double the file and the memory read per token
for no realism gained. Matrices are N(0, 0.02), norm weights 1.

Reproducible: one numpy PCG64 generator seeded with --seed draws every tensor in a fixed order,
and the writer adds no time or id, so the same arguments (and numpy version) give the same
bytes. The file is written as OUT.partial and renamed when complete.

gguf-py, the writer and reader, is the `gguf` package in llama.cpp's source (the version Harrier
links, v0.4.0), which tools/llama_source.sh checks out once into the benchmark cache; numpy is
Debian's (python3-numpy). Nothing else is needed.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TOKENIZER = os.path.join(HERE, "..", "..", "shared", "models", "llama-2-tiny-random.gguf")


def llama_source(directory):
    """The llama.cpp checkout's path, made by tools/llama_source.sh if it is not there yet."""
    args = [os.path.join(HERE, "llama_source.sh")] + ([directory] if directory else [])
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def tensor_shapes(args, vocab):
    """(name, numpy shape, dtype) for every tensor of the model, in file order. numpy's shape is
    (rows, columns); GGUF stores it reversed, so a (vocab, dim) array is llama.cpp's
    {dim, vocab}, the layout its converters write."""
    head_dim = args.dim // args.heads
    kv_dim = head_dim * args.kv_heads
    shapes = [("token_embd.weight", (vocab, args.dim), np.float16)]
    for i in range(args.layers):
        b = f"blk.{i}."
        shapes += [
            (b + "attn_norm.weight", (args.dim,), np.float32),
            (b + "attn_q.weight", (args.dim, args.dim), np.float16),
            (b + "attn_k.weight", (kv_dim, args.dim), np.float16),
            (b + "attn_v.weight", (kv_dim, args.dim), np.float16),
            (b + "attn_output.weight", (args.dim, args.dim), np.float16),
            (b + "ffn_norm.weight", (args.dim,), np.float32),
            (b + "ffn_gate.weight", (args.ff, args.dim), np.float16),
            (b + "ffn_up.weight", (args.ff, args.dim), np.float16),
            (b + "ffn_down.weight", (args.dim, args.ff), np.float16),
        ]
    shapes += [
        ("output_norm.weight", (args.dim,), np.float32),
        ("output.weight", (vocab, args.dim), np.float16),
    ]
    return shapes


def copy_tokenizer(gguf, reader, writer):
    """Copies the tokenizer's keys with their GGUF types (arrays keep their element type).
    Returns the vocabulary size."""
    vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        value = field.contents()
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, value, gguf.GGUFValueType.ARRAY,
                                 sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, value, field.types[0])
        if field.name == "tokenizer.ggml.tokens":
            vocab = len(value)
    if vocab == 0:
        sys.exit("make_llama_gguf: the tokenizer model has no tokenizer.ggml.tokens")
    return vocab


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the GGUF file to write")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--dim", type=int, default=768, help="embedding size")
    p.add_argument("--ff", type=int, default=2048, help="feed-forward size")
    p.add_argument("--heads", type=int, default=12, help="attention heads")
    p.add_argument("--kv-heads", type=int, default=0, help="key/value heads (default: --heads)")
    p.add_argument("--ctx", type=int, default=4096, help="training context (llama.context_length)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--tokenizer-from", default=DEFAULT_TOKENIZER,
                   help="the GGUF whose tokenizer.* keys are copied (default: the tiny Llama-2)")
    p.add_argument("--llama-source", default="",
                   help="llama.cpp checkout (default: tools/llama_source.sh's, made if missing)")
    args = p.parse_args()
    args.kv_heads = args.kv_heads or args.heads
    if args.dim % args.heads or args.heads % args.kv_heads:
        p.error("--dim must be a multiple of --heads, and --heads of --kv-heads")

    sys.path.insert(0, os.path.join(llama_source(args.llama_source), "gguf-py"))
    import gguf  # noqa: E402 (only importable once the checkout is on the path)

    started = time.monotonic()
    partial = args.out + ".partial"
    writer = gguf.GGUFWriter(partial, "llama")
    vocab = copy_tokenizer(gguf, gguf.GGUFReader(args.tokenizer_from), writer)
    shapes = tensor_shapes(args, vocab)
    params = sum(int(np.prod(shape)) for _, shape, _ in shapes)

    writer.add_name(f"harrier-bench random llama {params / 1e6:.0f}M seed {args.seed}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(args.ctx)
    writer.add_embedding_length(args.dim)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(args.ff)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.kv_heads)
    writer.add_rope_dimension_count(args.dim // args.heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)

    # Tensor infos first, then each tensor drawn and written in turn, so that memory holds one
    # tensor at a time (the embedding, 49 MB) rather than the whole model.
    for name, shape, dtype in shapes:
        writer.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(args.seed)
    for name, shape, dtype in shapes:
        if len(shape) == 1:
            tensor = np.ones(shape, dtype=np.float32)
        else:
            tensor = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype)
        writer.write_tensor_data(tensor)
    writer.close()
    os.replace(partial, args.out)
    print(f"make_llama_gguf: {args.out}: {params:,} parameters, {os.path.getsize(args.out):,} bytes, "
          f"{args.layers} layers, dim {args.dim}, ff {args.ff}, {args.heads} heads "
          f"({args.kv_heads} kv), vocab {vocab}, seed {args.seed}, "
          f"{time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
