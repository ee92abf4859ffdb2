//go:build pytorch && cgo

// shim.cpp: the one C++ file of the PyTorch runtime (keep it one file: it
// takes ~30 s and ~0.9 GB to compile). See shim.h for the API.

#include "shim.h"

#include <caffe2/serialize/read_adapter_interface.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/script.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// message is an exception's text without the C++ backtrace c10 appends.
std::string message(const std::exception& e) {
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) {
    return ce->what_without_backtrace();
  }
  return e.what();
}

// Reads the model bytes in place: no copy of the caller's buffer.
class MemoryReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  MemoryReader(const void* data, size_t len) : data_(static_cast<const char*>(data)), len_(len) {}
  size_t size() const override { return len_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= len_) return 0;
    if (n > len_ - pos) n = len_ - pos;
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* data_;
  size_t len_;
};

// FdReader reads a model file through its descriptor (pread), so that
// libtorch copies each record from the page cache straight into its own
// buffers: no copy of the file is held in memory, or mapped, while it
// loads. The caller keeps fd open during the load.
class FdReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  FdReader(int fd, size_t len) : fd_(fd), len_(len) {}
  size_t size() const override { return len_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= len_) return 0;
    if (n > len_ - pos) n = len_ - pos;
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // libtorch reports the short read
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  int fd_;
  size_t len_;
};

bool to_scalar_type(int32_t dtype, at::ScalarType* st) {
  switch (dtype) {
    case PT_DOUBLE: *st = at::kDouble; return true;
    case PT_FLOAT: *st = at::kFloat; return true;
    case PT_INT8: *st = at::kChar; return true;
    case PT_INT16: *st = at::kShort; return true;
    case PT_INT32: *st = at::kInt; return true;
    case PT_INT64: *st = at::kLong; return true;
    case PT_BOOL: *st = at::kBool; return true;
    case PT_UINT8: *st = at::kByte; return true;
    case PT_HALF: *st = at::kHalf; return true;
  }
  return false;
}

int32_t from_scalar_type(at::ScalarType st) {
  switch (st) {
    case at::kDouble: return PT_DOUBLE;
    case at::kFloat: return PT_FLOAT;
    case at::kChar: return PT_INT8;
    case at::kShort: return PT_INT16;
    case at::kInt: return PT_INT32;
    case at::kLong: return PT_INT64;
    case at::kBool: return PT_BOOL;
    case at::kByte: return PT_UINT8;
    case at::kHalf: return PT_HALF;
    default: return 0;
  }
}

// allowed are nodes libtorch counts as side effects that are harmless here:
// raising only fails the request (models use it for input checks), and
// aten::wait only joins a torch.jit.fork (whose subgraph is checked too).
bool allowed(const torch::jit::Node* n) {
  return n->kind() == c10::prim::RaiseException || n->kind() == c10::aten::wait;
}

// Side effects a served model must not have, searched through blocks (if,
// loop) and subgraphs (fork).
void find_side_effects(torch::jit::Block* b, std::vector<std::string>* bad) {
  for (torch::jit::Node* n : b->nodes()) {
    if (!allowed(n) && n->hasSideEffects()) {
      std::string k = n->kind().toQualString();
      bool seen = false;
      for (const auto& s : *bad) seen = seen || s == k;
      if (!seen) bad->push_back(k);
    }
    for (torch::jit::Block* sb : n->blocks()) find_side_effects(sb, bad);
    for (c10::Symbol name : n->attributeNames()) {
      if (n->kindOf(name) == torch::jit::AttributeKind::g) {
        find_side_effects(n->g(name)->block(), bad);
      } else if (n->kindOf(name) == torch::jit::AttributeKind::gs) {
        for (const auto& g : n->gs(name)) find_side_effects(g->block(), bad);
      }
    }
  }
}

void collect_nodes(torch::jit::Block* b, std::vector<torch::jit::Node*>* nodes) {
  for (torch::jit::Node* n : b->nodes()) {
    nodes->push_back(n);
    for (torch::jit::Block* sb : n->blocks()) collect_nodes(sb, nodes);
  }
}

// Writes into the frozen module's constants, searched through blocks and
// subgraphs (fork), each with its own alias analysis. Freezing folds into
// constants the attributes it sees no write to, and a tensor held in a list
// or dict attribute and written in place through __getitem__ is folded
// too: the write would then change, for every later call, a constant all
// calls read (state crossing requests). A node writes where its schema
// marks an argument written (a!); what it writes must hold nothing a
// constant holds. A method's own arguments (inputs true) are exempt: each
// call's are copies, which alias analysis cannot tell from a list element
// (a subgraph's may be the method's constants).
void find_constant_writes(const std::shared_ptr<torch::jit::Graph>& g, bool inputs, std::vector<std::string>* bad) {
  std::vector<torch::jit::Node*> nodes;
  collect_nodes(g->block(), &nodes);
  std::vector<torch::jit::Value*> consts;
  for (torch::jit::Node* n : nodes) {
    if (n->kind() == c10::prim::Constant) consts.push_back(n->output());
  }
  torch::jit::AliasDb db(g);
  for (torch::jit::Node* n : nodes) {
    for (c10::Symbol name : n->attributeNames()) {
      if (n->kindOf(name) == torch::jit::AttributeKind::g) {
        find_constant_writes(n->g(name), false, bad);
      } else if (n->kindOf(name) == torch::jit::AttributeKind::gs) {
        for (const auto& sg : n->gs(name)) find_constant_writes(sg, false, bad);
      }
    }
    const c10::FunctionSchema* schema = n->maybeSchema();
    if (schema == nullptr || consts.empty()) continue;
    const auto& args = schema->arguments();
    for (size_t i = 0; i < args.size() && i < n->inputs().size(); i++) {
      const c10::AliasInfo* ai = args[i].alias_info();
      if (ai == nullptr || !ai->isWrite()) continue;
      torch::jit::Value* v = n->input(i);
      if (inputs && v->node()->kind() == c10::prim::Param) continue;
      if (db.mayContainAlias(consts, n->inputs().slice(i, 1))) {
        std::string k = n->kind().toQualString();
        bool seen = false;
        for (const auto& b : *bad) seen = seen || b == k;
        if (!seen) bad->push_back(k);
      }
    }
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) {
    if (i > 0) s += ", ";
    s += v[i];
  }
  return s;
}

struct Outputs {
  std::vector<at::Tensor> tensors;
  std::vector<pt_output> views;
};

std::mutex threads_mu;
int32_t interop_threads_set = 0;

}  // namespace

static char* take_outputs(const c10::IValue& result, const std::string& what, pt_outputs* out, int32_t* kind);

struct pt_model {
  torch::jit::Module module;
  std::optional<torch::jit::Method> forward;
  // initial_state is the module's exported initial_state() method, if any
  // (the state convention of stateful models, doc.go).
  std::optional<torch::jit::Method> initial_state;
  std::vector<std::string> input_names;
  int32_t num_inputs = -1;
};

extern "C" {

char* pt_set_threads(int32_t intraop, int32_t interop) {
  try {
    std::lock_guard<std::mutex> lock(threads_mu);
    // Inter-op first: libtorch wants it set before any parallel work.
    if (interop > 0) {
      if (interop_threads_set == 0) {
        at::set_num_interop_threads(interop);
        interop_threads_set = interop;
      } else if (interop_threads_set != interop) {
        return dup_string("num_interop_threads can be set once per process: already " +
                          std::to_string(interop_threads_set) + ", asked for " + std::to_string(interop));
      }
    }
    if (intraop > 0) at::set_num_threads(intraop);
    return nullptr;
  } catch (const std::exception& e) {
    return dup_string("setting libtorch threads: " + message(e));
  } catch (...) {
    return dup_string("setting libtorch threads: unknown C++ exception");
  }
}

static char* load_from(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> reader, pt_model** out);

char* pt_load(const void* data, size_t len, pt_model** out) {
  return load_from(std::make_shared<MemoryReader>(data, len), out);
}

char* pt_load_fd(int fd, size_t len, pt_model** out) {
  return load_from(std::make_shared<FdReader>(fd, len), out);
}

static char* load_from(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> reader, pt_model** out) {
  *out = nullptr;
  std::unique_ptr<pt_model> m(new pt_model());
  torch::jit::Module loaded;
  try {
    loaded = torch::jit::load(reader, c10::Device(c10::kCPU));
    loaded.eval();
  } catch (const std::exception& e) {
    return dup_string("not a TorchScript module: " + message(e));
  } catch (...) {
    return dup_string("not a TorchScript module: unknown C++ exception");
  }
  try {
    if (!loaded.find_method("forward")) return dup_string("the module has no forward() method");
    if (loaded.find_method("initial_state")) {
      m->module = torch::jit::freeze(loaded, std::vector<std::string>{"initial_state"});
    } else {
      m->module = torch::jit::freeze(loaded);
    }
  } catch (const std::exception& e) {
    return dup_string("the module cannot be frozen (torch::jit::freeze): " + message(e));
  } catch (...) {
    return dup_string("the module cannot be frozen (torch::jit::freeze): unknown C++ exception");
  }
  try {
    // Freezing inlines every attribute that forward() only reads; what is
    // left is state that forward() mutates, which concurrent requests would
    // share.
    std::vector<std::string> attrs;
    for (const auto& a : m->module.named_attributes(/*recurse=*/true)) attrs.push_back(a.name);
    if (!attrs.empty()) {
      return dup_string("the module is stateful: attributes remain after freezing (" + join(attrs) +
                        "); forward() must not mutate the module");
    }
    auto method = m->module.find_method("forward");
    if (!method) return dup_string("the frozen module has no forward() method");
    std::vector<std::string> bad;
    find_side_effects(method->graph()->block(), &bad);
    if (!bad.empty()) {
      return dup_string("forward() has side-effect operations (" + join(bad) +
                        "): printing, saving files and other side effects are not allowed");
    }
    find_constant_writes(method->graph(), true, &bad);
    if (!bad.empty()) {
      return dup_string("the module is stateful: forward() writes in place (" + join(bad) +
                        ") into a tensor the frozen module holds (in a list, dict or tuple attribute): "
                        "forward() must not mutate the module");
    }
    const c10::FunctionSchema& schema = method->function().getSchema();
    const auto& args = schema.arguments();
    bool fixed = !schema.is_vararg();
    // args[0] is self.
    for (size_t i = 1; i < args.size(); i++) {
      const auto& a = args[i];
      if (a.default_value().has_value()) {
        fixed = false;
        continue;
      }
      if (!a.type()->isSubtypeOf(*c10::TensorType::get())) {
        return dup_string("forward() argument " + std::to_string(i - 1) + " (" + a.name() + ") has type " +
                          a.type()->str() + ": only Tensor arguments can be passed");
      }
      m->input_names.push_back(a.name());
    }
    m->num_inputs = fixed ? static_cast<int32_t>(m->input_names.size()) : -1;
    m->forward.emplace(*method);
    if (auto init = m->module.find_method("initial_state")) {
      std::vector<std::string> bad_init;
      find_side_effects(init->graph()->block(), &bad_init);
      if (!bad_init.empty()) {
        return dup_string("initial_state() has side-effect operations (" + join(bad_init) + ")");
      }
      find_constant_writes(init->graph(), true, &bad_init);
      if (!bad_init.empty()) {
        return dup_string("initial_state() writes in place (" + join(bad_init) +
                          ") into a tensor the frozen module holds: it must not mutate the module");
      }
      if (init->function().getSchema().arguments().size() != 1) {
        return dup_string("initial_state() must take no arguments");
      }
      m->initial_state.emplace(*init);
    }
  } catch (const std::exception& e) {
    return dup_string("validating the frozen module: " + message(e));
  } catch (...) {
    return dup_string("validating the frozen module: unknown C++ exception");
  }
  *out = m.release();
  return nullptr;
}

int32_t pt_num_inputs(const pt_model* m) { return m->num_inputs; }

const char* pt_input_name(const pt_model* m, int32_t i) {
  if (i < 0 || static_cast<size_t>(i) >= m->input_names.size()) return "";
  return m->input_names[i].c_str();
}

char* pt_forward(pt_model* m, const pt_input* inputs, int32_t n, pt_outputs* out, int32_t* kind) {
  out->n = 0;
  out->tensors = nullptr;
  out->priv = nullptr;
  *kind = PT_ERR_INPUT;
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(n);
    for (int32_t i = 0; i < n; i++) {
      const pt_input& in = inputs[i];
      at::ScalarType st;
      if (!to_scalar_type(in.dtype, &st)) {
        return dup_string("input " + std::to_string(i) + ": unsupported dtype code " + std::to_string(in.dtype));
      }
      // A copy, not from_blob: a model may write into its inputs in place,
      // and the caller's buffer must neither change nor be kept.
      at::Tensor t = at::empty(c10::IntArrayRef(in.shape, in.ndim), at::TensorOptions().dtype(st));
      std::memcpy(t.data_ptr(), in.data, t.nbytes());
      args.emplace_back(std::move(t));
    }
    *kind = PT_ERR_EXECUTION;
    c10::IValue result = (*m->forward)(std::move(args));
    *kind = PT_ERR_OUTPUT;
    return take_outputs(result, "forward()", out, kind);
  } catch (const std::exception& e) {
    return dup_string(message(e));
  } catch (...) {
    return dup_string("unknown C++ exception");
  }
}

int32_t pt_has_initial_state(const pt_model* m) { return m->initial_state.has_value() ? 1 : 0; }

char* pt_initial_state(pt_model* m, pt_outputs* out, int32_t* kind) {
  out->n = 0;
  out->tensors = nullptr;
  out->priv = nullptr;
  *kind = PT_ERR_EXECUTION;
  if (!m->initial_state) return dup_string("the module has no initial_state() method");
  try {
    c10::InferenceMode guard;
    c10::IValue result = (*m->initial_state)(std::vector<c10::IValue>{});
    *kind = PT_ERR_OUTPUT;
    return take_outputs(result, "initial_state()", out, kind);
  } catch (const std::exception& e) {
    return dup_string(message(e));
  } catch (...) {
    return dup_string("unknown C++ exception");
  }
}

}  // extern "C"

// take_outputs converts a method's result (a tensor or a flat tuple of
// tensors) into out.
static char* take_outputs(const c10::IValue& result, const std::string& what, pt_outputs* out, int32_t* kind) {
  try {
    std::vector<c10::IValue> items;
    if (result.isTensor()) {
      items.push_back(result);
    } else if (result.isTuple()) {
      for (const auto& e : result.toTupleRef().elements()) items.push_back(e);
    } else {
      return dup_string(what + " returned " + result.type()->str() +
                        ": only a tensor or a flat tuple of tensors can be returned");
    }
    std::unique_ptr<Outputs> o(new Outputs());
    o->tensors.reserve(items.size());
    for (size_t i = 0; i < items.size(); i++) {
      const c10::IValue& iv = items[i];
      std::string where = "output " + std::to_string(i);
      if (!iv.isTensor()) {
        return dup_string(where + " is " + iv.type()->str() + ": only tensors can be returned (no nested tuples, lists, dicts or scalars)");
      }
      at::Tensor t = iv.toTensor();
      if (!t.defined()) return dup_string(where + " is an undefined tensor");
      if (t.layout() != at::kStrided) return dup_string(where + " is not a dense tensor");
      if (!t.device().is_cpu()) return dup_string(where + " is not on the CPU");
      if (from_scalar_type(t.scalar_type()) == 0) {
        return dup_string(where + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                          ": only Double, Float, Char (int8), Short (int16), Int (int32) and Long (int64) can be returned");
      }
      o->tensors.push_back(t.contiguous());
    }
    o->views.resize(o->tensors.size());
    for (size_t i = 0; i < o->tensors.size(); i++) {
      const at::Tensor& t = o->tensors[i];
      pt_output& v = o->views[i];
      v.dtype = from_scalar_type(t.scalar_type());
      v.ndim = static_cast<int32_t>(t.dim());
      v.shape = t.sizes().data();
      v.data = t.data_ptr();
      v.numel = t.numel();
    }
    out->n = static_cast<int32_t>(o->views.size());
    out->tensors = o->views.data();
    out->priv = o.release();
    *kind = PT_OK;
    return nullptr;
  } catch (const std::exception& e) {
    return dup_string(message(e));
  } catch (...) {
    return dup_string("unknown C++ exception");
  }
}

extern "C" {

void pt_free_outputs(pt_outputs* out) {
  if (out == nullptr) return;
  delete static_cast<Outputs*>(out->priv);
  out->n = 0;
  out->tensors = nullptr;
  out->priv = nullptr;
}

void pt_free_model(pt_model* m) { delete m; }

void pt_free_string(char* s) { std::free(s); }

}  // extern "C"
