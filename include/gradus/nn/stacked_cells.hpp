// gradus/nn/stacked_cells.hpp — MultiRNNCell: several cells stacked into one (the cell of StackedLSTM,
// StackedGRU, ...), with dropout between them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradus/nn/recurrent_cells.hpp"

namespace gradus::nn {

// ------------------------------------------------------------------------------ stacked cells

namespace detail {

/// The cells of a MultiRNNCell, children "0", "1", ... (owned, so they keep their place when the
/// MultiRNNCell moves).
template <class Cell>
class CellList : public Module<typename Cell::value_type> {
 public:
  CellList() = default;
  void add(Cell cell) {
    items_.push_back(&this->register_module(std::to_string(items_.size()), std::make_unique<Cell>(std::move(cell))));
  }
  Cell& operator[](size_t k) { return *items_[k]; }
  const Cell& operator[](size_t k) const { return *items_[k]; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<Cell*> items_;
};

}  // namespace detail

/// Options of `MultiRNNCell`.
struct MultiRNNCellOptions {
  double dropout = 0;  ///< dropout rate on the h passed from each cell to the next (training only; one mask per call)
};

/// Cells of one type stacked in depth (tf.nn.rnn_cell.MultiRNNCell, Keras' StackedRNNCells): at
/// each step cell 0 reads x_t, cell k reads cell k-1's new h; the output is the top cell's h.
/// State = one state per cell (bottom first); the cells are children "cells.0", "cells.1", ...,
/// so parameters read "cells.0.kernel", ... Cell k's `in` must equal cell k-1's `units`; cell 0
/// must be built (an LSTMCell with `.in`). With `.dropout`, one mask [N, units_k] per call and
/// per junction (variational, as Keras' recurrent dropout) multiplies the h between cells in
/// training mode; `rng` (which must then outlive the cell) is registered as "rng".
/// Use it as the cell of a sequence layer (Recurrent, StackedLSTM, ...):
///   std::vector<gd::nn::LSTMCell<float>> cells;
///   cells.emplace_back(gd::nn::LSTMCellOptions{.in = 8, .units = 16}, rng);
///   cells.emplace_back(gd::nn::LSTMCellOptions{.in = 16, .units = 16}, rng);
///   gd::nn::Recurrent<gd::nn::MultiRNNCell<gd::nn::LSTMCell<float>>> rnn(
///       gd::nn::MultiRNNCell<gd::nn::LSTMCell<float>>(std::move(cells), rng), {.return_sequences = true});
template <class Cell>
class MultiRNNCell : public Module<typename Cell::value_type, MultiRNNCell<Cell>> {
 public:
  using T = typename Cell::value_type;
  using State = std::vector<typename Cell::State>;

  MultiRNNCell(std::vector<Cell> cells, Rng& rng, const MultiRNNCellOptions& o = {}) : dropout_(o.dropout) {
    GRADUS_CHECK(value_error, !cells.empty(), "MultiRNNCell: needs at least one cell");
    GRADUS_CHECK(value_error, o.dropout >= 0 && o.dropout < 1, "MultiRNNCell: dropout must be in [0, 1), got ",
                 o.dropout);
    GRADUS_CHECK(value_error, cells[0].in() > 0, "MultiRNNCell: cell 0 must be built (give its .in)");
    for (size_t k = 1; k < cells.size(); ++k)
      GRADUS_CHECK(shape_error, cells[k].in() == cells[k - 1].units(), "MultiRNNCell: cell ", k, " takes in = ",
                   cells[k].in(), " but cell ", k - 1, " has units = ", cells[k - 1].units());
    for (Cell& c : cells) cells_.add(std::move(c));
    this->register_module("cells", cells_);
    if (o.dropout > 0) rng_ = &this->register_generator("rng", rng);
  }

  /// One step: x_t [N, in], a state per cell -> the new states.
  template <Expression X>
  State step(const X& x, const State& s) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in(), "MultiRNNCell", "in");
    if (xv.rank() == 2) check_state(s, xv.shape()[0], "MultiRNNCell: step", "state");
    return step_projected(project(xv), s);
  }
  /// Cell 0's projection of the input: [..., in] -> [..., G].
  Var<T> project(const Var<T>& x) const { return cells_[0].project(x); }
  /// One step from cell 0's projected input xp [N, G].
  State step_projected(const Var<T>& xp, const State& s) const {
    GRADUS_CHECK(shape_error, s.size() == cells_.size(), "MultiRNNCell: step: the state must hold ", cells_.size(),
                 " cell states, got ", s.size());
    State out;
    out.reserve(s.size());
    out.push_back(cells_[0].step_projected(xp, s[0]));
    for (size_t k = 1; k < cells_.size(); ++k) {
      Var<T> h = detail::hidden_of(out.back());
      if (between_[k - 1].defined()) h = Var<T>(h * between_[k - 1]);
      out.push_back(cells_[k].step_projected(cells_[k].project(h), s[k]));
    }
    return out;
  }
  /// The zero state of every cell.
  State initial_state(int64_t batch) const {
    State out;
    for (size_t k = 0; k < cells_.size(); ++k) out.push_back(cells_[k].initial_state(batch));
    return out;
  }
  /// Throws shape_error unless `s` holds one state per cell, each for `batch` sequences.
  void check_state(const State& s, int64_t batch, const char* layer, const char* role = "initial state") const {
    GRADUS_CHECK(shape_error, s.size() == cells_.size(), layer, ": ", role, " must hold ", cells_.size(),
                 " cell states, got ", s.size());
    for (size_t k = 0; k < cells_.size(); ++k) cells_[k].check_state(s[k], batch, layer, role);
  }
  /// Draws this call's masks (every cell's, and the ones between cells); see the cells.
  void draw_masks(int64_t batch) {
    between_.assign(cells_.size() - 1, Tensor<T>());
    for (size_t k = 0; k < cells_.size(); ++k) {
      cells_[k].draw_masks(batch);
      if (k + 1 < cells_.size() && rng_ && this->is_training())
        between_[k] = detail::dropout_mask<T>({batch, cells_[k].units()}, dropout_, *rng_, this->device());
    }
  }
  void clear_masks() {
    between_.clear();
    for (size_t k = 0; k < cells_.size(); ++k) cells_[k].clear_masks();
  }

  Cell& cell(size_t k) { return cells_[k]; }
  const Cell& cell(size_t k) const { return cells_[k]; }
  size_t size() const { return cells_.size(); }
  int64_t in() const { return cells_[0].in(); }
  int64_t units() const { return cells_[cells_.size() - 1].units(); }  ///< the top cell's
  double dropout() const { return dropout_; }

 private:
  detail::CellList<Cell> cells_;
  double dropout_;
  Rng* rng_ = nullptr;
  std::vector<Tensor<T>> between_;  ///< this call's masks between cells
};

}  // namespace gradus::nn
