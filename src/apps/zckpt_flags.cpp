// zckpt's commands and flags, one table (config/command_line.hpp): --help is generated from it, and a
// flag a command does not take is refused naming the command that takes it. In a library of their own
// so a unit test walks them (every number ranged).
#include "apps/app_flags.hpp"

namespace zt::apps {

const config::cli::Spec& zckpt_spec() {
  static const config::cli::Spec spec = [] {
    using config::cli::Type;
    config::cli::Spec s;
    s.program = "zckpt";
    s.about = "Outputs are built beside their path and renamed into place. Exit codes: 0 done (verify: sound), 1 a problem "
              "found or a failure, 2 usage.";
    s.commands = {
        {.name = "info", .positionals = {"DIR"}, .flags = {},
         .usage = "info DIR                              step, world size, ZeRO stage, run id, files, config"},
        {.name = "verify", .positionals = {"DIR"}, .flags = {},
         .usage = "verify DIR                            exit 0 if sound, 1 naming each problem (an\n"
                  "                                                   interrupted save too), 2 if DIR is no checkpoint"},
        {.name = "export", .positionals = {"DIR"}, .flags = {"out", "adapter", "merge", "critic", "dtype", "max-shard-size", "overwrite"},
         .usage = "export DIR --out FILE.safetensors     HF GPT2LMHeadModel or LlamaForCausalLM weights, fp32 (+ config.json)\n"
                  "export DIR --out HFDIR [--dtype bf16|fp32] [--max-shard-size 5GB]\n"
                  "                                                   a directory from_pretrained loads: config.json, weights\n"
                  "                                                   (default bf16), shards + index past --max-shard-size\n"
                  "export DIR --adapter ADIR             a LoRA checkpoint's adapters in PEFT's layout\n"
                  "                                                   (adapter_model.safetensors + adapter_config.json)\n"
                  "export DIR --merge --out OUT [--dtype bf16|fp32] [--max-shard-size 5GB]\n"
                  "                                                   a LoRA checkpoint merged into its base (init.from): the\n"
                  "                                                   fine-tuned model, written as export --out writes one\n"
                  "export DIR --critic --out OUT [--dtype bf16|fp32]\n"
                  "                                                   a PPO checkpoint's critic: the family's sequence-\n"
                  "                                                   classification model with one label (score.weight)"},
        {.name = "reshard", .positionals = {"DIR"}, .flags = {"world", "out", "overwrite"},
         .usage = "reshard DIR --world N --out DIR2      the same checkpoint for N ranks"},
        {.name = "quantize", .positionals = {"HFDIR"}, .flags = {"out", "block", "double-quant", "dtype", "overwrite"},
         .usage = "quantize HFDIR --out DIR [--block 64] [--double-quant] [--dtype bf16|fp32]\n"
                  "                                                   a Hugging Face model's blocks' matmul weights as\n"
                  "                                                   bitsandbytes 4-bit NF4 (what transformers saves for a\n"
                  "                                                   load_in_4bit model): an NF4 LoRA base (lora.base_dtype=nf4)\n"
                  "                                                   loads it as stored, any run dequantized"},
    };
    s.flags = {
        {.name = "out", .value_name = "PATH",
         .help = "export: FILE.safetensors or a Hugging Face directory; reshard: the new checkpoint directory"},
        {.name = "adapter", .value_name = "DIR", .help = "export a LoRA checkpoint's adapters alone, in PEFT's layout"},
        {.name = "merge", .type = Type::kSwitch, .help = "export a LoRA checkpoint merged into its base (init.from)"},
        {.name = "critic", .type = Type::kSwitch,
         .help = "export a PPO checkpoint's critic (critic/): the body and its value head, score.weight [1, C], as "
                 "transformers' <Family>ForSequenceClassification with one label (TRL's value model)"},
        {.name = "dtype", .type = Type::kChoice, .value_name = "bf16|fp32",
         .help = "export --out HFDIR: the weights' type (default bf16; a .safetensors file is fp32); quantize: the "
                 "unquantized tensors' type and the quant state's compute dtype (default bf16)",
         .choices = {"bf16", "fp32"}},
        {.name = "max-shard-size", .value_name = "SIZE",
         .help = "export --out HFDIR: shards + index past this size (5GB, 500MB, 2GiB or bytes; transformers' default)",
         .default_value = "5GB"},
        {.name = "overwrite", .type = Type::kSwitch,
         .help = "export, reshard: replace an existing output (a directory with everything in it, or the files); without it "
                 "an existing non-empty output is refused. Never the checkpoint, its run's init.from, LoRA base, data or "
                 "metrics: an output on, inside or holding those is always refused"},
        {.name = "world", .type = Type::kInt, .value_name = "N", .help = "reshard: the ranks of the new checkpoint",
         .min = 1, .max = 1 << 20},
        {.name = "block", .type = Type::kInt, .value_name = "N",
         .help = "quantize: elements per NF4 block, a power of two (bitsandbytes' blocksize); ztrain's NF4 base "
                 "(lora.base_dtype=nf4) takes the codes as stored in blocks of 64 only, and quantizes others again",
         .default_value = "64", .min = 32, .max = 4096},
        {.name = "double-quant", .type = Type::kSwitch,
         .help = "quantize: the blocks' scales as 8-bit codes in blocks of 256 (bnb_4bit_use_double_quant)"},
    };
    return s;
  }();
  return spec;
}

}  // namespace zt::apps
