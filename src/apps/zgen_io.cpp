// zgen's sample lines out (zgen_io.hpp).
#include "apps/zgen_io.hpp"

namespace zt::apps {

std::string output_line(const PromptLine& p, int sample, const Completion& c, const std::optional<std::string>& text,
                        const Scored* scored) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();  // "id" first, as written
  out["id"] = p.id;
  if (sample >= 0) out["sample"] = sample;
  if (text) out["text"] = *text;
  out["token_ids"] = c.tokens;
  out["logprobs"] = c.logprobs;
  out["finish_reason"] = gen::finish_name(c.finish);
  if (scored) {
    out["answer"] = scored->answer ? nlohmann::ordered_json(*scored->answer) : nlohmann::ordered_json(nullptr);
    out["reference"] = scored->reference;
    out["score"] = scored->score;
  }
  return out.dump();
}

}  // namespace zt::apps
