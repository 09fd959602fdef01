"""Two safetensors files hold the same tensors within a relative tolerance (per tensor, max |a-b| / max |a|),
or, with --drop FILE NAME, rewrite FILE without tensor NAME (its bytes removed, the later tensors' offsets
moved down: a valid safetensors file, which the safetensors library reads, that lacks the tensor)."""
import json
import struct
import sys

import torch


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), f.read()


def tensors(path):
    head, data = header(path)
    kinds = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    out = {}
    for name, e in head.items():
        if name == "__metadata__":
            continue
        b, f = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:f]), dtype=kinds[e["dtype"]]).float().reshape(e["shape"])
    return out


def drop(path, name):
    head, data = header(path)
    b, f = head.pop(name)["data_offsets"]
    data = data[:b] + data[f:]
    for key, e in head.items():
        if key != "__metadata__" and e["data_offsets"][0] >= f:
            e["data_offsets"] = [e["data_offsets"][0] - (f - b), e["data_offsets"][1] - (f - b)]
    text = json.dumps(head).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    if sys.argv[1] == "--drop":
        return drop(sys.argv[2], sys.argv[3])
    a, b, tol = tensors(sys.argv[1]), tensors(sys.argv[2]), float(sys.argv[3])
    assert sorted(a) == sorted(b), f"names differ: {sorted(set(a) ^ set(b))}"
    worst = 0.0
    for name in a:
        assert a[name].shape == b[name].shape, f"{name}: {a[name].shape} vs {b[name].shape}"
        rel = ((a[name] - b[name]).abs().max() / a[name].abs().max().clamp_min(1e-30)).item()
        worst = max(worst, rel)
        assert rel <= tol, f"{name}: relative difference {rel:.3e} > {tol}"
    assert worst > 0, "bf16 copy identical to fp32: the export did not round"
    print(f"max relative difference {worst:.2e} over {len(a)} tensors")


sys.exit(main())
