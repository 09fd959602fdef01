"""Checks zckpt's LoRA exports against the base they were trained on (numpy only):

  lora_export_check.py BASE.safetensors ADAPTER_DIR MERGED_DIR ARCH RANK ALPHA RSLORA TARGET_PATHS N_LAYER

ADAPTER_DIR must hold PEFT's layout: adapter_config.json (peft_type LORA, r, lora_alpha, use_rslora,
target_modules, base_model_name_or_path = BASE) and adapter_model.safetensors with exactly
base_model.model.<HF module>.lora_A.weight [r, in] and .lora_B.weight [out, r] for every block and target
path (e.g. attn.c_attn); B must have trained away from 0. MERGED_DIR/model.safetensors must equal the base
plus scale * dW on the adapted weights (dW = B A, transposed for GPT-2's Conv1D [in, out]) within 1e-6,
and the base exactly everywhere else. Exit 0 when all hold, 1 naming the first that does not.
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import st_io  # noqa: E402


def main():
    base_path, adapter_dir, merged_dir, arch, rank, alpha, rslora, paths, n_layer = sys.argv[1:10]
    r, alpha, rslora, n_layer = int(rank), float(alpha), rslora == "true", int(n_layer)
    cfg = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    expect = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "use_rslora": rslora,
              "base_model_name_or_path": base_path}
    for k, v in expect.items():
        assert cfg[k] == v, f"adapter_config.json: {k} = {cfg[k]!r}, expected {v!r}"
    base, _ = st_io.load(base_path)
    adapters, _ = st_io.load(os.path.join(adapter_dir, "adapter_model.safetensors"))
    merged, _ = st_io.load(os.path.join(merged_dir, "model.safetensors"))
    prefix = "transformer.h" if arch == "gpt2" else "model.layers"
    names = set()
    scale = alpha / math.sqrt(r) if rslora else alpha / r
    expected = {n: w.astype(np.float64) for n, w in base.items() if n != "lm_head.weight" or arch != "gpt2"}
    for layer in range(n_layer):
        for path in paths.split(","):
            module = f"{prefix}.{layer}.{path}"
            a_name, b_name = (f"base_model.model.{module}.lora_{x}.weight" for x in "AB")
            names |= {a_name, b_name}
            A, B = adapters[a_name].astype(np.float64), adapters[b_name].astype(np.float64)
            W = base[module + ".weight"]
            fan_in, fan_out = W.shape if arch == "gpt2" else W.shape[::-1]
            assert A.shape == (r, fan_in) and B.shape == (fan_out, r), f"{module}: A {A.shape}, B {B.shape}"
            assert np.abs(B).max() > 0, f"{b_name} is still zero: nothing trained"
            delta = B @ A
            expected[module + ".weight"] += scale * (delta.T if arch == "gpt2" else delta)
    assert set(adapters) == names, f"adapter tensors {sorted(set(adapters) ^ names)} unexpected or missing"
    for n, want in expected.items():
        got = merged[n].astype(np.float64)
        d = np.abs(got - want).max()
        assert d <= 1e-6, f"merged {n} differs from base + scale * dW by {d:.2e}"
        if n not in {m + ".weight" for m in (f"{prefix}.{l}.{p}" for l in range(n_layer) for p in paths.split(","))}:
            assert np.array_equal(merged[n], base[n]), f"merged {n} is not the base's"
    print(f"lora_export_check: {len(names)} adapter tensors in PEFT's layout; merged = base + {scale:g} dW on "
          f"{len(names) // 2} weights, the other {len(expected) - len(names) // 2} tensors the base's")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
