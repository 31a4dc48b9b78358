#include "llmc/dist/abort_hooks.h"

#include <algorithm>

namespace llmc {

AbortHooks::Id AbortHooks::add(std::function<void()> hook) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const Id id = next_id_++;
  hooks_.emplace_back(id, std::move(hook));
  return id;
}

void AbortHooks::remove(Id id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  hooks_.erase(std::remove_if(hooks_.begin(), hooks_.end(), [id](const auto& h) { return h.first == id; }),
               hooks_.end());
}

void AbortHooks::run() {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& h : hooks_) h.second();
}

AbortHooks& abort_hooks() {
  static AbortHooks hooks;
  return hooks;
}

}  // namespace llmc
