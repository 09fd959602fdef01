// Flat parameter/gradient sources and the views that cut units and parameters out of flat buffers.
#include "model/param_source.hpp"

#include <cstddef>

#include "core/error.hpp"

namespace zt::model {

using backend::Tensor;

Tensor unit_view(const ParamTable& table, const Tensor& flat, int u) {
  ZT_CHECK(u >= 0 && u < table.n_units(), "unit ", u, " outside [0, ", table.n_units(), ")");
  ZT_CHECK_EQ(static_cast<std::size_t>(flat.numel()), table.numel(), "flat buffer size does not match the model");
  const Unit& unit = table.units()[u];
  return Tensor(static_cast<std::byte*>(flat.data) + unit.offset * dtype_size(flat.dtype), flat.dtype,
                {static_cast<std::int64_t>(unit.numel)});
}

Tensor param_view(const ParamTable& table, const Tensor& unit_flat, std::size_t p) {
  const ParamInfo& info = table.params()[p];
  ZT_CHECK_EQ(static_cast<std::size_t>(unit_flat.numel()), table.units()[info.unit].numel, "unit ", info.unit,
              " view has the wrong size for ", info.name);
  return param_view_in_piece(table, unit_flat, p);
}

Tensor param_view_in_piece(const ParamTable& table, const Tensor& piece, std::size_t p) {
  const ParamInfo& info = table.params()[p];
  const std::size_t first = info.offset - table.units()[info.unit].offset;
  ZT_CHECK(first + info.numel <= static_cast<std::size_t>(piece.numel()), "a piece of ", piece.numel(),
           " elements of unit ", info.unit, " does not hold ", info.name);
  Tensor t(static_cast<std::byte*>(piece.data) + first * dtype_size(piece.dtype), piece.dtype, {});
  for (std::int64_t d : info.shape) t.shape[t.rank++] = d;
  return t;
}

Tensor assemble_pieces(ParamSource& src, int u, backend::Backend& be, std::int64_t numel, DType dtype,
                       backend::Buffer& whole) {
  whole = be.allocate(static_cast<std::size_t>(numel) * dtype_size(dtype));
  std::size_t at = 0;  // bytes copied so far
  for (int i = 0; i < src.pieces(u); ++i) {
    const Tensor piece = src.piece(u, i);
    ZT_CHECK(piece.dtype == dtype && at + piece.bytes() <= whole.bytes(), "unit ", u, ": piece ", i, " does not fit the ",
             numel, " elements of the unit");
    be.copy(static_cast<std::byte*>(whole.data()) + at, piece.data, piece.bytes());
    at += piece.bytes();
    src.release_piece(u, i);
  }
  ZT_CHECK_EQ(at, whole.bytes(), "unit ", u, ": its pieces do not fill it");
  return whole.view(dtype, {numel});
}

// A source that never splits: the whole unit is its one piece.
Tensor ParamSource::piece(int u, int i) {
  ZT_CHECK(i == 0 && pieces(u) == 1, "parameter unit ", u, ": piece ", i, " of a source that hands it out whole");
  return unit(u);
}
void ParamSource::release_piece(int u, int) { release(u); }
Tensor GradSink::piece(int u, int i) {  // a frozen unit (empty) has no gradient in any piece
  const Tensor whole = unit(u);
  ZT_CHECK(i == 0 || whole.empty(), "gradient unit ", u, ": piece ", i, " of a sink that takes it whole");
  return whole;
}
void GradSink::piece_done(int u, int) { unit_done(u); }

FlatParams::FlatParams(const ParamTable& table, Tensor flat) : table_(table), flat_(flat) {
  ZT_CHECK_EQ(static_cast<std::size_t>(flat.numel()), table.numel(), "FlatParams: buffer size");
}
Tensor FlatParams::unit(int u) { return unit_view(table_, flat_, u); }

FlatGrads::FlatGrads(const ParamTable& table, Tensor flat) : table_(table), flat_(flat) {
  ZT_CHECK_EQ(static_cast<std::size_t>(flat.numel()), table.numel(), "FlatGrads: buffer size");
}
Tensor FlatGrads::unit(int u) { return unit_view(table_, flat_, u); }

}  // namespace zt::model
