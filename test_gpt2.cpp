// CPU parity test program (tests/cpu/check_cpu_parity.sh drives it):
//   test_gpt2 make-case --config DESC --vocab V --padded VP --seed S --B B --T T --version 3|5
//                       --model FILE --tokens FILE
//       writes a random model (GPT-2 init, then biases and layernorm parameters perturbed so none
//       is trivially 0 or 1) and B*T+1 random tokens (int32) for dev/pytorch/gpt2_reference.py.
//   test_gpt2 check --model FILE --tokens FILE --expected FILE --B B --T T --steps N --lr LR --wd WD
//       runs the CPU backend on the same model and batch and compares with the reference's float64
//       logits, loss, gradients and AdamW step losses (bars of docs/contract.md); also checks that the
//       gradients are bit-identical with 1, 2 and 3 OpenMP threads.
//   test_gpt2 bench --config DESC --B B --T T --steps N
//       times training steps (forward, backward, AdamW) on a random model with the real vocabulary.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/gpt2.h"
#include "llmc/io/model_file.h"
#include "llmc/rng.h"

using namespace llmc;

namespace {

constexpr double kLossBar = 1e-5, kLogitsBar = 1e-5, kGradBar = 1e-4, kStepLossBar = 1e-4;

struct Args {
  std::map<std::string, std::string> values;
  std::string get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) throw std::runtime_error(fmt::format("missing flag --{}", key));
    return it->second;
  }
  int get_int(const std::string& key) const {
    return get_number<int>(key, [](const std::string& s, size_t* used) { return std::stoi(s, used); }, "an integer");
  }
  float get_float(const std::string& key) const {
    return get_number<float>(key, [](const std::string& s, size_t* used) { return std::stof(s, used); }, "a number");
  }
  // The whole value parsed by parse (std::stoi, std::stof); trailing text is an error too.
  template <class Number, class Parse>
  Number get_number(const std::string& key, Parse parse, const char* what) const {
    const std::string s = get(key);
    size_t used = 0;
    Number v = 0;
    try {
      v = parse(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty()) throw std::runtime_error(fmt::format("--{} wants {}, got '{}'", key, what, s));
    return v;
  }
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 2; i < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc)
      throw std::runtime_error(fmt::format("expected '--flag value' pairs, got '{}'", key));
    args.values[key.substr(2)] = argv[i + 1];
  }
  return args;
}

std::vector<int> read_tokens(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(fmt::format("cannot open token file '{}'", path));
  if (size_t(in.tellg()) != count * 4)
    throw std::runtime_error(fmt::format("token file '{}' is not {} int32 tokens", path, count));
  in.seekg(0);
  std::vector<int> tokens(count);
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(count * 4));
  return tokens;
}

// The reference's output (format in dev/pytorch/gpt2_reference.py).
std::map<std::string, std::vector<double>> read_expected(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open expected file '{}'", path));
  char magic[8];
  int64_t count = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&count), 8);
  if (!in || std::memcmp(magic, "GPT2REF1", 8) != 0 || count < 0 || count > 1000)
    throw std::runtime_error(fmt::format("expected file '{}' has a bad header", path));
  std::map<std::string, std::vector<double>> arrays;
  for (int64_t i = 0; i < count; ++i) {
    int64_t name_len = 0, numel = 0;
    in.read(reinterpret_cast<char*>(&name_len), 8);
    if (!in || name_len < 0 || name_len > 256) throw std::runtime_error(fmt::format("expected file '{}' is corrupt", path));
    std::string name(size_t(name_len), '\0');
    in.read(name.data(), name_len);
    in.read(reinterpret_cast<char*>(&numel), 8);
    if (!in || numel < 0 || numel > (int64_t(1) << 32))
      throw std::runtime_error(fmt::format("expected file '{}' is corrupt at array '{}'", path, name));
    std::vector<double> values(static_cast<size_t>(numel));
    in.read(reinterpret_cast<char*>(values.data()), std::streamsize(numel * 8));
    if (!in) throw std::runtime_error(fmt::format("expected file '{}' is truncated in array '{}'", path, name));
    arrays[name] = std::move(values);
  }
  return arrays;
}

const std::vector<double>& array_of(const std::map<std::string, std::vector<double>>& arrays,
                                    const std::string& name, size_t numel) {
  auto it = arrays.find(name);
  if (it == arrays.end()) throw std::runtime_error(fmt::format("expected file lacks array '{}'", name));
  if (it->second.size() != numel)
    throw std::runtime_error(fmt::format("expected array '{}' has {} values, wanted {}", name, it->second.size(), numel));
  return it->second;
}

// ||got - want|| / ||want||, over values taken from `got` by index mapping.
template <typename Got>
double rel_l2(const std::vector<double>& want, Got got) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got(i)) - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

void perturb(std::vector<float>& params, const GPT2Config& config, uint64_t seed) {
  Rng rng(seed);
  auto layout = param_layout(config);
  for (int t : {kLn1w, kLn2w, kLnfw, kLn1b, kLn2b, kLnfb, kQkvb, kAttprojb, kFcb, kFcprojb}) {
    for (size_t i = 0; i < layout[t].numel; ++i) params[layout[t].offset + i] += 0.1f * rng.normal();
  }
}

int make_case(const Args& args) {
  GPT2Config config = config_from_descriptor(args.get("config"));
  config.vocab_size = args.get_int("vocab");
  config.padded_vocab_size = args.get_int("padded");
  const int seed = args.get_int("seed"), B = args.get_int("B"), T = args.get_int("T");
  std::vector<float> params = init_parameters(config, uint64_t(seed));
  perturb(params, config, uint64_t(seed) + 1000);
  save_model(args.get("model"), config, params.data(), args.get_int("version"));
  Rng rng(uint64_t(seed) + 2000);
  std::vector<int> tokens(size_t(B) * T + 1);
  for (int& t : tokens) t = int(rng.below(uint64_t(config.vocab_size)));
  std::ofstream out(args.get("tokens"), std::ios::binary);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
  if (!out) throw std::runtime_error(fmt::format("cannot write token file '{}'", args.get("tokens")));
  fmt::print("wrote L{} H{} C{} maxT {} vocab {}/{} model ({} params) and {} tokens\n", config.num_layers,
             config.num_heads, config.channels, config.max_seq_len, config.vocab_size,
             config.padded_vocab_size, num_parameters(config), tokens.size());
  return 0;
}

int check(const Args& args) {
  const ModelFile model = load_model(args.get("model"));
  const GPT2Config& config = model.config;
  const int B = args.get_int("B"), T = args.get_int("T"), steps = args.get_int("steps");
  const std::vector<int> tokens = read_tokens(args.get("tokens"), size_t(B) * T + 1);
  const int* inputs = tokens.data();
  const int* targets = tokens.data() + 1;
  const auto expected = read_expected(args.get("expected"));
  const size_t N = size_t(B) * T, V = config.vocab_size, Vp = config.padded_vocab_size;
  bool ok = true;
  auto verdict = [&ok](double err, double bar) {
    ok = ok && err < bar;
    return err < bar ? "ok" : "FAIL";
  };

  CpuBackend backend(config);
  backend.set_parameters(model.params.data());
  const float* logits = backend.forward_logits(inputs, B, T);
  const double logits_err = rel_l2(array_of(expected, "logits", N * V),
                                   [&](size_t i) { return logits[(i / V) * Vp + i % V]; });
  fmt::print("logits   rel L2 err {:.3e}  {}\n", logits_err, verdict(logits_err, kLogitsBar));

  backend.zero_grad();
  backend.forward_backward(inputs, targets, B, T, 1.0f);
  const double want_loss = array_of(expected, "loss", 1)[0];
  const double loss_err = std::fabs(backend.accumulated_loss() - want_loss) / std::fabs(want_loss);
  fmt::print("loss     {:.7f} vs {:.7f}  rel err {:.3e}  {}\n", backend.accumulated_loss(), want_loss, loss_err,
             verdict(loss_err, kLossBar));

  const std::vector<float> grads(backend.gradients(), backend.gradients() + num_parameters(config));
  double max_grad_err = 0.0;
  for (const ParamTensor& t : param_layout(config)) {
    const double err = rel_l2(array_of(expected, std::string("grad/") + t.name, t.numel),
                              [&](size_t i) { return grads[t.offset + i]; });
    max_grad_err = std::max(max_grad_err, err);
    fmt::print("grad {:<9} rel L2 err {:.3e}  {}\n", t.name, err, verdict(err, kGradBar));
  }

  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    backend.zero_grad();
    backend.forward_backward(inputs, targets, B, T, 1.0f);
    const bool same = std::memcmp(grads.data(), backend.gradients(), grads.size() * sizeof(float)) == 0;
    ok = ok && same;
    fmt::print("gradients with {} thread(s) bit-identical: {}\n", threads, same ? "ok" : "FAIL");
  }

  const auto& want_steps = array_of(expected, "step_losses", size_t(steps));
  OptimizerStep update;
  update.weight_decay = args.get_float("wd");
  update.lr = args.get_float("lr");
  backend.set_parameters(model.params.data());
  double max_step_err = 0.0;
  for (int step = 1; step <= steps; ++step) {
    backend.zero_grad();
    backend.forward_backward(inputs, targets, B, T, 1.0f);
    const double loss = backend.accumulated_loss();
    const double norm = std::sqrt(double(backend.grad_sum_of_squares()));
    update.t = step;
    update.grad_scale = float(std::min(1.0, 1.0 / norm));
    backend.optimizer_step(update);
    const double err = std::fabs(loss - want_steps[step - 1]) / std::fabs(want_steps[step - 1]);
    max_step_err = std::max(max_step_err, err);
    fmt::print("step {:2d}  loss {:.7f} vs {:.7f}  rel err {:.3e}  {}\n", step, loss, want_steps[step - 1], err,
               verdict(err, kStepLossBar));
  }
  fmt::print("{}: loss err {:.1e}, max grad err {:.1e}, max step-loss err {:.1e}\n", ok ? "PASS" : "FAIL",
             loss_err, max_grad_err, max_step_err);
  return ok ? 0 : 1;
}

int bench(const Args& args) {
  const GPT2Config config = config_from_descriptor(args.get("config"));
  const int B = args.get_int("B"), T = args.get_int("T"), steps = args.get_int("steps");
  CpuBackend backend(config);
  backend.set_parameters(init_parameters(config, 1).data());
  Rng rng(7);
  std::vector<int> tokens(size_t(B) * T + 1);
  for (int& t : tokens) t = int(rng.below(uint64_t(config.vocab_size)));
  OptimizerStep update;
  update.weight_decay = 0.1f;
  update.lr = 1e-4f;
  double total_ms = 0.0;
  for (int step = 0; step <= steps; ++step) {  // step 0 warms up (allocations, page faults)
    const auto start = std::chrono::steady_clock::now();
    backend.zero_grad();
    backend.forward_backward(tokens.data(), tokens.data() + 1, B, T, 1.0f);
    const float norm = std::sqrt(backend.grad_sum_of_squares());
    update.t = step + 1;
    update.grad_scale = std::min(1.0f, 1.0f / norm);
    backend.optimizer_step(update);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step > 0) total_ms += ms;
    fmt::print("step {} loss {:.6f} {:.1f} ms\n", step, backend.accumulated_loss(), ms);
  }
  fmt::print("{} B{} T{} threads {}: {:.1f} ms/step\n", args.get("config"), B, T, omp_get_max_threads(),
             total_ms / std::max(steps, 1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    const Args args = parse_args(argc, argv);
    if (mode == "make-case") return make_case(args);
    if (mode == "check") return check(args);
    if (mode == "bench") return bench(args);
    throw std::runtime_error("usage: test_gpt2 make-case|check|bench --flag value ... (see test_gpt2.cpp)");
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
