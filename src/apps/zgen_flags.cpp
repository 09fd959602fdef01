// zgen's flags, one table: --help is generated from it and the parser checks every value against it
// (config/command_line.hpp). In a library of their own so a unit test walks them (every number ranged).
#include "apps/app_flags.hpp"

namespace zt::apps {
namespace {

constexpr const char* kAbout =
    "usage: [mpirun -np N] zgen --model DIR --prompts IN.jsonl --out OUT.jsonl [options]\n"
    "Generates continuations of prompts with a KV cache and continuous batching (--slots sequences in\n"
    "flight; a finished one's slot goes to the next prompt at once), on the GPU or the CPU.\n"
    "--model DIR: a ztrain checkpoint (step_N/, a LoRA run's adapters merged into their base) or a Hugging\n"
    "Face model directory (config.json + safetensors: GPT-2, Llama, Mistral, Qwen2, Qwen3).\n"
    "IN.jsonl: one JSON object per line with an \"id\" (echoed) and one of \"prompt\" (text, encoded with the\n"
    "tokenizer, its BOS first where it has one), \"messages\" ([{\"role\", \"content\"}, ...], rendered by\n"
    "the model's chat template (tokenizer_config.json's: Qwen2's, Qwen2.5's or Qwen3's ChatML, Llama 3's, 3.1's or\n"
    "3.2's; another is refused, not rendered another way) or --chat-template, with the assistant's header) or \"prompt_ids\"\n"
    "(token ids, used as given).\n"
    "OUT.jsonl: one line per sample, in input order whatever the ranks: {\"id\", [\"sample\",] \"text\" (with a\n"
    "tokenizer), \"token_ids\", \"logprobs\", \"finish_reason\": \"stop\"|\"length\"}; with --answer-rule also\n"
    "\"answer\", \"reference\", \"score\". Written when every prompt is done (built beside, renamed into place).\n"
    "The tokenizer: --tokenizer, else DIR/tokenizer.json, else a checkpoint's data.vocab or its init.from's\n"
    "tokenizer.json; without one only\n"
    "prompt_ids lines are taken and no text is written. Sequences stop at a stop token (generation_config.json's\n"
    "eos_token_id, the tokenizer's end of text, the chat template's end of turn, unless --ignore-eos; --stop-id\n"
    "adds ids), a --stop string (the text is cut before it), --max-new-tokens or the context (--max-len).\n"
    "Sampling: greedy by default (--temperature 0); else temperature, top-k, then top-p. Every draw is a pure\n"
    "function of (--seed, the prompt's index and sample, the token's position): the same text whatever\n"
    "--slots, the ranks or the device.\n"
    "Evaluation: --answer-rule RULE takes the final answer from each text and scores it against the\n"
    "reference in field --answer-field (its answer by the same rule when it holds one, else its text):\n"
    "accuracy and pass@k (k = 1 and --samples) on stderr and in --summary FILE.json.\n"
    "Under mpirun the prompts are spread over --tp-sized groups of ranks (data parallel); each group runs\n"
    "the model in tensor parallel.\n"
    "Exit: 0 done, 1 runtime error, 2 usage or bad input (named).\n";

config::cli::Spec make_zgen_spec() {
  using config::cli::Type;
  config::cli::Spec s;
  s.program = "zgen";
  s.about = kAbout;
  s.flags = {
      {.name = "model", .value_name = "DIR", .help = "a ztrain checkpoint directory, a Hugging Face model directory, or a PEFT LoRA adapter directory (merged into its base at load)"},
      {.name = "prompts", .value_name = "IN.jsonl", .help = "the prompts, one JSON object per line (.gz/.zst too); a glob reads every match in byte order"},
      {.name = "out", .value_name = "OUT.jsonl", .help = "the samples, one JSON object per line"},
      {.name = "tokenizer", .value_name = "PATH",
       .help = "GPT-2's encoder.json + vocab.bpe directory, a tokenizer.json or a tiktoken rank file (as ztok --vocab)"},
      {.name = "pattern", .type = Type::kChoice, .value_name = "gpt2|cl100k|o200k",
       .help = "pre-tokenisation of a tiktoken rank file that is no known encoding (as ztok --pattern; with --special)",
       .choices = {"gpt2", "cl100k", "o200k"}},
      {.name = "special", .type = Type::kList, .value_name = "NAME=ID[,..]",
       .help = "special tokens the tokenizer lacks (the chat template's, as ztok --special); of a rank file that is no "
               "known encoding, its own"},
      {.name = "chat-template", .type = Type::kChoice, .value_name = "chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2",
       .help = "how \"messages\" prompts are rendered (default: the model's, its tokenizer_config.json chat_template, "
               "else the one whose specials the tokenizer has)",
       .choices = {"chatml", "qwen2.5", "qwen3", "llama3", "llama3.1", "llama3.2"}},
      {.name = "max-new-tokens", .type = Type::kInt, .value_name = "N", .help = "new tokens per sample at most",
       .default_value = "256", .min = 1, .max = 1 << 24},
      {.name = "temperature", .type = Type::kNum, .value_name = "T", .help = "0: greedy", .default_value = "0",
       .min = 0, .max = 100},
      {.name = "top-k", .type = Type::kInt, .value_name = "K", .help = "0: every id", .default_value = "0", .min = 0,
       .max = 1 << 24},
      {.name = "top-p", .type = Type::kNum, .value_name = "P", .help = "nucleus sampling, (0, 1]",
       .default_value = "1", .min = 1e-9, .max = 1},
      {.name = "seed", .type = Type::kInt, .value_name = "S", .help = "the draws' seed", .default_value = "0", .min = 0,
       .max = 9.007199254740992e15},
      {.name = "samples", .type = Type::kInt, .value_name = "N",
       .help = "samples per prompt (pass@k; each its own stream of draws)", .default_value = "1", .min = 1, .max = 1 << 16},
      {.name = "stop", .type = Type::kList, .value_name = "TEXT", .help = "a stop string (repeatable)"},
      {.name = "stop-id", .type = Type::kList, .value_name = "ID[,..]", .help = "stop token ids (repeatable)"},
      {.name = "ignore-eos", .type = Type::kSwitch,
       .help = "no default stop tokens (end of text, end of turn): only --stop-id, --stop and the lengths"},
      {.name = "answer-rule", .value_name = "RULE",
       .help = "evaluate: gsm8k, gsm8k-flexible, boxed, exact or regex:PATTERN (gen/answers.hpp)"},
      {.name = "answer-field", .value_name = "NAME", .help = "evaluate: the input field holding the reference",
       .default_value = "answer"},
      {.name = "summary", .value_name = "FILE.json", .help = "evaluate: accuracy and pass@k written here too"},
      {.name = "max-len", .type = Type::kInt, .value_name = "N",
       .help = "tokens per sequence (prompt + new): the cache's length; default the longest prompt + --max-new-tokens, "
               "at most the model's context",
       .min = 2, .max = 1 << 24},
      {.name = "slots", .type = Type::kInt, .value_name = "N", .help = "sequences decoded together (the cache's slots; at most a rank's prompts x --samples)",
       .default_value = "32", .min = 1, .max = 1 << 16},
      {.name = "prefill-chunk", .type = Type::kInt, .value_name = "N", .help = "prompt tokens per prefill forward",
       .default_value = "256", .min = 1, .max = 1 << 20},
      {.name = "prefill-rows", .type = Type::kInt, .value_name = "N", .help = "prompts prefilled together",
       .default_value = "4", .min = 1, .max = 1 << 16},
      {.name = "device", .type = Type::kChoice, .value_name = "auto|cpu|cuda",
       .help = "auto: a GPU when one is visible and this build has CUDA", .default_value = "auto",
       .choices = {"auto", "cpu", "cuda"}},
      {.name = "dtype", .type = Type::kChoice, .value_name = "auto|fp32|bf16",
       .help = "weights, activations and cache: auto is bf16 on a GPU, fp32 on the CPU", .default_value = "auto",
       .choices = {"auto", "fp32", "bf16"}},
      {.name = "tp", .type = Type::kInt, .value_name = "N", .help = "tensor-parallel ranks per model copy",
       .default_value = "1", .min = 1, .max = 1 << 16},
      {.name = "threads", .type = Type::kInt, .value_name = "N",
       .help = "CPU threads per rank (default: the cores divided by the ranks on the node)", .default_value = "0",
       .min = 0, .max = 65536},
      {.name = "memory-gb", .type = Type::kNum, .value_name = "G",
       .help = "plan the weights and the cache against G GiB per rank (0: the GPU's memory less 2 GiB for the CUDA "
               "context and NCCL, or the host's available memory shared by the node's ranks)",
       .default_value = "0", .min = 0, .max = 1 << 20},
      {.name = "timeout-s", .type = Type::kNum, .value_name = "S",
       .help = "under mpirun: how long a rank waits for a silent peer (a rank that gives no sign of life for S seconds "
               "ends the job, exit 1; one still generating is waited for)",
       .default_value = "600", .min = 1, .max = 1e6},
      {.name = "quiet", .type = Type::kSwitch, .help = "no progress lines on stderr", .short_name = 'q'},
  };
  return s;
}

}  // namespace

const config::cli::Spec& zgen_spec() {
  static const config::cli::Spec spec = make_zgen_spec();
  return spec;
}

}  // namespace zt::apps
