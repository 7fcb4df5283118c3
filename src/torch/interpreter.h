// interpreter.h - the object tree of a checkpoint to named tensors (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "maploc/pickle/value.h"
#include "support/flat_index.h"
#include "state.h"

namespace maploc::torch {

/// Walks a pickle tree depth-first, naming values by dict keys, indices and
/// attributes joined with '.', and turns every rebuild call torch writes
/// (pytorch-format.md §4.6) into State::tensors. Unknown objects stay
/// inert: only their BUILD state is walked, as attributes.
class Interpreter {
 public:
  explicit Interpreter(Checkpoint::State& state);

  /// Walks v, naming what it finds under `name`.
  void walk(const pickle::Value& v, const std::string& name, std::size_t depth);

 private:
  // interpret.cpp: containers and objects.
  /// Records that the walk named `tensor` at `v` (State::origins).
  void name_origin(const pickle::Value& v, std::size_t tensor);
  void walk_object(const pickle::Value& v, const std::string& name, std::size_t depth);
  void walk_state(const pickle::Value& state, const std::string& name, std::size_t depth);
  void note_unknown_rebuild(const pickle::Value& callable);
  void step(const std::string& name, std::size_t depth);
  static bool module_state(const pickle::Value& state);
  void walk_module(const pickle::Value& state, const std::string& name, std::size_t depth);

  // rebuild.cpp: tensors.
  /// Whether v is (or wraps) a tensor torch would rebuild; then adds it.
  std::optional<std::size_t> try_tensor(const pickle::Value& v, const std::string& name, std::size_t depth);
  /// callable(*args) for a rebuild function (globals.h); nullopt if callable is none.
  std::optional<std::size_t> rebuild(const pickle::Value& callable, const pickle::Value& args,
                                     const std::string& name, std::size_t depth);
  /// The tensor a value must be (a rebuild argument); kTorchBadTensor otherwise.
  std::size_t require_tensor(const pickle::Value& v, const std::string& name, std::size_t depth);
  std::size_t strided(const pickle::Value& storage, const pickle::Value& offset, const pickle::Value& size,
                      const pickle::Value& stride, std::optional<DType> dtype, const std::string& name);
  std::size_t storage_object(const pickle::Value& v, const std::string& name);
  std::size_t tensor_v2(const pickle::Value& args, bool v3, const std::string& name);
  std::optional<std::size_t> from_type(const pickle::Value& args, const std::string& name, std::size_t depth);
  std::size_t nested(const pickle::Value& args, const std::string& name, std::size_t depth);
  std::size_t nested_jagged(const pickle::Value& args, const std::string& name, std::size_t depth);
  std::size_t meta(const pickle::Value& args, const std::string& name);
  std::size_t wrapper_subclass(const pickle::Value& args, const std::string& name);
  std::size_t device_tensor(const pickle::Value& args, bool from_cpu, const std::string& name, std::size_t depth);
  void set_grad(std::size_t tensor, const pickle::Value& requires_grad);
  // tensor_state.cpp: a tensor's __dict__/slots (_rebuild_from_type_v2, _rebuild_parameter_with_state).
  /// Walks the state of tensor `tensor` (named `name`): tensors in it are named `<name>.<attribute>`
  /// by walk(), attributes holding no tensor become Tensor::attributes.
  void tensor_state(std::size_t tensor, const pickle::Value& state, const std::string& name, std::size_t depth);
  void state_items(std::size_t tensor, const pickle::Value& dict, const std::string& name, std::size_t depth,
                   bool walked_before);
  /// Whether a graph node's walk found no tensor (Mark::kTensorFree).
  bool tensor_free(const void* node) const;
  /// The inert JSON text of a tensor-free value (docs/torch.md, "Tensor state"), counted against
  /// Limits::torch_max_walk_bytes.
  std::string attribute_json(const pickle::Value& v, const std::string& name);
  DType dtype_argument(const pickle::Value& v, const std::string& name) const;
  std::size_t sparse(const pickle::Value& args, const std::string& name, std::size_t depth);
  std::size_t qtensor(const pickle::Value& args, const std::string& name, std::size_t depth);
  std::size_t old_style(const pickle::Value& state, const std::string& name, std::size_t depth);
  std::size_t push(Tensor t);
  void add_component(std::size_t composite, const std::string& role, const pickle::Value& v,
                     const std::string& name, std::size_t depth);
  [[noreturn]] void bad(const std::string& name, const std::string& why) const;

  Checkpoint::State& state_;
  std::uint64_t steps_ = 0;
  std::uint64_t walk_bytes_ = 0;  ///< names formed and tensors listed (Limits::torch_max_walk_bytes)
  void account(std::uint64_t bytes, const std::string& name);
  void admit(const std::string& name);  ///< before a tensor is made: Limits::torch_max_tensors and its bytes

  // The object graph (docs/torch.md, "Names"): containers and objects by node identity, walked as
  // Tarjan's strongly connected components. An object on a cycle is walked once, under the first path
  // that reaches it; a path that returns to an object being walked (or walked on a cycle not yet closed)
  // is not followed. An object on no cycle is walked once per path (tied weights keep a name per path),
  // unless its walk found no tensor: then it is not walked again, so a memo-shared tree of plain data
  // (billion laughs) costs one walk per node, not one per path.
  enum class Mark : std::uint8_t { kNew, kOpen, kCyclic, kTensorFree };
  struct NodeMark {
    const void* node;
    std::uint64_t index = 0;  ///< order of entry (Tarjan's index)
    std::uint64_t low = 0;    ///< lowest index of an open object its walk returned to
    Mark mark = Mark::kNew;
    bool self_loop = false;   ///< it holds itself
  };
  struct Entered {
    std::uint32_t slot;
    std::size_t tensors_before;
    std::optional<std::uint32_t> outer;
  };
  /// Before walking a node's contents: nullopt where it is not to be walked (see above).
  std::optional<Entered> enter(const void* node);
  /// After its contents: closes its component when it is the component's first object.
  void leave(const Entered& entered);
  std::vector<NodeMark> marks_;
  detail::FlatIndex mark_index_;
  std::vector<std::uint32_t> open_;        ///< Tarjan's stack: entered objects whose component is not closed
  std::optional<std::uint32_t> current_;   ///< the innermost object being walked
  std::uint64_t next_index_ = 0;
};

/// Python's str() of a dict key, for names (pickle::key_str); a class by its dotted path;
/// an int beyond max_int_digits (Limits::pickle_max_int_digits) as Python's hex().
std::string key_text(const pickle::Value& key, std::uint64_t max_int_digits);

/// Joins a name and a key the way the fixture manifests do: "a" + "b" -> "a.b", "" + "b" -> "b".
std::string join_name(const std::string& prefix, const std::string& key);

}  // namespace maploc::torch
