"""zckpt quantize's output against bitsandbytes' rules, replayed in PyTorch (nf4_reference.py): every 4-bit
weight of BNB_DIR is the source weight (SRC_DIR, fp32) quantized as bitsandbytes quantize_4bit would, in the
layout bitsandbytes stores (nn.Linear's [out, in]: a GPT-2 Conv1D weight transposed), serialized as
QuantState.as_dict(packed=True) writes it: the packed codes (element 2i in the high nibble), the absmax (or
with double quantization its 8-bit codes and the nested absmax from the stored offset, the blocks' mean within
2 ulp: its last bit depends on the reduction order, on the device too), the quant maps, the quant
state's JSON; config.json's quantization_config says bitsandbytes 4-bit NF4. Every other tensor equals the
source. Exits 77 without PyTorch, 1 naming the first difference.

usage: bnb_format_check.py SRC_DIR BNB_DIR
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"bnb_format_check.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import nf4_reference as ref  # noqa: E402
import st_io  # noqa: E402

STATE = ".quant_state.bitsandbytes__nf4"


def main():
    src_dir, bnb_dir = sys.argv[1:3]
    src, _ = st_io.load(os.path.join(src_dir, "model.safetensors"))
    bnb, _ = st_io.load(os.path.join(bnb_dir, "model.safetensors"))
    config = json.load(open(os.path.join(bnb_dir, "config.json")))
    q = config["quantization_config"]
    assert q["quant_method"] == "bitsandbytes" and q["load_in_4bit"] and q["bnb_4bit_quant_type"] == "nf4", q
    weights = [n[: -len(STATE)] for n in bnb if n.endswith(STATE)]
    assert weights, "no 4-bit weight"
    for w in weights:
        state = json.loads(bytes(bnb[w + STATE].tolist()).decode())
        x = torch.from_numpy(src[w].astype(np.float32))
        if config["model_type"] == "gpt2":
            x = x.T.contiguous()  # Conv1D [in, out] -> nn.Linear [out, in], square ones too
        assert list(x.shape) == state["shape"], (w, list(x.shape), state["shape"])
        assert state["quant_type"] == "nf4" and state["blocksize"] > 0, state
        codes, absmax = ref.blockwise(x.reshape(-1), ref.NF4, state["blocksize"])
        if codes.numel() % 2:
            codes = torch.cat([codes, torch.zeros(1, dtype=torch.int32)])
        packed = ((codes[0::2] << 4) | codes[1::2]).numpy().astype(np.uint8)
        assert np.array_equal(bnb[w].reshape(-1), packed), f"{w}: codes differ"
        assert bnb[w].shape == (packed.size, 1), (w, bnb[w].shape)
        assert np.array_equal(bnb[w + ".quant_map"], ref.NF4.numpy()), f"{w}: quant_map"
        if q["bnb_4bit_use_double_quant"]:
            # The mean's last bit depends on the reduction's order (bitsandbytes takes absmax.mean() on the
            # device; ztrain sums in double and rounds once): within 2 ulp, and the codes from the stored one.
            offset = torch.tensor(np.float32(state["nested_offset"]))
            assert abs(float(offset) - float(absmax.double().mean())) <= 2 * np.spacing(np.float32(offset)), f"{w}: nested_offset"
            q8, absmax8 = ref.blockwise(absmax - offset, ref.dynamic_map(), state["nested_blocksize"])
            assert np.array_equal(bnb[w + ".absmax"], q8.numpy().astype(np.uint8)), f"{w}: absmax codes"
            assert np.array_equal(bnb[w + ".nested_absmax"], absmax8.numpy()), f"{w}: nested_absmax"
            assert np.array_equal(bnb[w + ".nested_quant_map"], ref.dynamic_map().numpy()), f"{w}: nested_quant_map"
        else:
            assert np.array_equal(bnb[w + ".absmax"], absmax.numpy()), f"{w}: absmax"
    companions = {w + s for w in weights for s in (STATE, ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map")}
    kept = [n for n in bnb if n not in companions and n not in weights]
    for n in kept:
        assert np.array_equal(bnb[n], src[n]), f"{n}: differs from the source"
    print(f"ok {bnb_dir}: {len(weights)} 4-bit weights as bitsandbytes stores them"
          f"{' (double quantization)' if q['bnb_4bit_use_double_quant'] else ''}, {len(kept)} other tensors as the source")


if __name__ == "__main__":
    main()
