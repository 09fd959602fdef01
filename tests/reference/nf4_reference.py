"""Golden NF4 blocks as bitsandbytes stores a QLoRA base, replayed in PyTorch from its rules.

usage: nf4_reference.py OUT.safetensors
The rules (bitsandbytes' quantize_4bit and quantize_blockwise, QLoRA section 3): per block the absmax
(float32) and x times its reciprocal clamped to [-1, 1]; the code of the nearest level by bucketize over
the midpoints of the ascending levels (a midpoint goes to the lower level); two codes a byte, element 2i
in the high nibble; double quantization: the blocks' absmax less their mean, 8-bit codes of the signed
dynamic map in blocks of 256. The dynamic map is rebuilt here from its definition (create_dynamic_map:
for exponents 10^-6 .. 10^0, 2^i linear steps over (0.1, 1], both signs, 0 and 1). Exits 77 without torch.
"""
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"nf4_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402

NF4 = torch.tensor([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                    0.7229568362236023, 1.0], dtype=torch.float32)


def dynamic_map():
    data = []
    for i in range(7):
        b = torch.linspace(0.1, 1, 2 ** i + 1, dtype=torch.float32)
        m = (b[:-1] + b[1:]) / 2.0
        data += (10 ** (-6 + i) * m).tolist() + (-(10 ** (-6 + i)) * m).tolist()
    data += [0.0, 1.0]
    return torch.tensor(sorted(data), dtype=torch.float32)


def blockwise(x, code, block):
    n = x.numel()
    blocks = (n + block - 1) // block
    pad = torch.zeros(blocks * block, dtype=torch.float32)
    pad[:n] = x
    absmax = pad.view(blocks, block).abs().max(dim=1).values
    scaled = torch.clamp(pad.view(blocks, block) * (1.0 / absmax.clamp(min=1e-38)).view(-1, 1), -1, 1).reshape(-1)[:n]
    q = torch.bucketize(scaled, (code[:-1] + code[1:]) / 2).to(torch.int32)
    return q, absmax


def main():
    rng = np.random.RandomState(31)
    out = {"dynamic_map": dynamic_map().numpy()}
    cases = {
        "normal": (rng.standard_normal(4 * 64 * 256 + 37) * 0.02).astype(np.float32),  # odd count, short last block
        "outliers": np.concatenate([(rng.standard_normal(1000) * 0.05), [3.0, -7.5, 0.0]]).astype(np.float32),
        "zeros_then_values": np.concatenate([np.zeros(64), rng.uniform(-1, 1, 64)]).astype(np.float32),
    }
    for name, x in cases.items():
        t = torch.from_numpy(x)
        codes, absmax = blockwise(t, NF4, 64)
        if codes.numel() % 2:  # bitsandbytes pads with the value 0.0: code 7
            codes = torch.cat([codes, torch.full((1,), 7, dtype=torch.int32)])
        packed = (codes[0::2] << 4) | codes[1::2]
        offset = absmax.mean()
        q8, absmax8 = blockwise(absmax - offset, dynamic_map(), 256)
        out[f"{name}.x"] = x
        out[f"{name}.packed"] = packed.numpy().astype(np.int32)
        out[f"{name}.absmax"] = absmax.numpy()
        out[f"{name}.offset"] = np.array([offset.item()], dtype=np.float32)
        out[f"{name}.nested_codes"] = q8.numpy().astype(np.int32)
        out[f"{name}.nested_absmax"] = absmax8.numpy()
    st_io.save(sys.argv[1], out)


if __name__ == "__main__":
    main()
