// Test tool: the fake-quantized twin of a Hugging Face model directory, the reference of an NF4 LoRA run
// (lora.base_dtype=nf4): every weight an NF4 base holds in 4 bits (model::nf4_quantized: the blocks'
// matmul weights) quantized and dequantized in fp32 (model::nf4_fake_quantized), the rest unchanged.
//   fake_quantize_nf4 IN_DIR OUT_DIR SEQ_LEN [--double-quant]
// SEQ_LEN is the runs' model.seq_len (GPT-2's position table is read and written with that many rows).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "config/hf_config.hpp"
#include "model/from_config.hpp"
#include "model/hf_dir.hpp"
#include "model/nf4_params.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fake_quantize_nf4 IN_DIR OUT_DIR SEQ_LEN [--double-quant]\n");
    return 2;
  }
  try {
    zt::config::Config c;
    c.init.from = argv[1];
    c.model.seq_len = std::atoll(argv[3]);
    zt::config::apply_hf_config(c, {"model.seq_len"});
    const zt::model::ParamTable table(zt::model::model_shape(c.model));
    std::vector<float> flat(table.numel());
    zt::model::load_pretrained(argv[1], table, flat.data());
    const bool nested = argc > 4 && std::string(argv[4]) == "--double-quant";
    const std::vector<float> fake = zt::model::nf4_fake_quantized(table, flat, {.block = 64, .double_quant = nested});
    zt::model::export_hf_directory(argv[2], table, fake.data(), /*bf16=*/false, ~std::uint64_t{0});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_quantize_nf4: %s\n", e.what());
    return 1;
  }
  return 0;
}
