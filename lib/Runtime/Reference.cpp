//===- Reference.cpp - fp64 reference of an attention program -------------===//

#include "flashlight/Runtime/Reference.h"
#include "flashlight/Runtime/DType.h"

#include <cmath>
#include <limits>
#include <unordered_map>

using namespace flashlight::runtime;
using json = nlohmann::json;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// One serialized region, interpreted op by op over doubles (integers are
/// exact up to 2^53, far beyond any index).
class RegionProgram {
public:
  RegionProgram() = default;
  explicit RegionProgram(const json &j) {
    if (j.is_null())
      return;
    present = true;
    numArgs = j.at("num_args");
    for (const json &op : j.at("ops")) {
      Op o;
      o.name = op.at("op");
      o.operands = op.at("operands").get<std::vector<int>>();
      std::string type = op.at("type");
      o.type = type;
      o.isInt = type[0] == 'i';
      o.bits = type == "index" ? 64 : o.isInt ? std::stoi(type.substr(1)) : 0;
      o.value = op.value("value", 0.0);
      if (op.contains("operand_types") && !op["operand_types"].empty()) {
        std::string t = op["operand_types"][0];
        o.operandBits = t == "index"  ? 64
                        : t[0] == 'i' ? std::stoi(t.substr(1))
                                      : 0;
      }
      o.predicate = op.value("predicate", "");
      ops.push_back(o);
    }
    yields = j.at("yield").get<std::vector<int>>();
  }

  bool present = false;
  int numArgs = 0;

  /// Runs the region; `args` are the block arguments (captures are passed
  /// as their position, resolved through `captures`).
  std::vector<double> run(const std::vector<double> &args,
                          const std::vector<const HostTensor *> &captures,
                          int firstCapture) const {
    std::vector<double> v(args);
    v.reserve(args.size() + ops.size());
    for (const Op &op : ops) {
      double x = eval(op, v, captures, firstCapture);
      // Region ops are typed: evaluate them at their declared precision (a
      // bucket index computed in f32 must match f32, not f64, arithmetic).
      if (!op.isInt && !op.type.empty() && op.type != "f64")
        x = roundToDType(x, op.type);
      v.push_back(x);
    }
    std::vector<double> out;
    for (int y : yields)
      out.push_back(v.at(y));
    return out;
  }

private:
  struct Op {
    std::string name, predicate, type;
    std::vector<int> operands;
    bool isInt = false;
    int bits = 0, operandBits = 0;
    double value = 0;
  };
  std::vector<Op> ops;
  std::vector<int> yields;

  /// Wraps an integer result to the op's width (two's complement).
  static double wrap(int64_t x, int bits) {
    if (bits == 1)
      return double(x & 1);
    if (bits >= 64)
      return double(x);
    int64_t m = int64_t(1) << bits;
    x &= m - 1;
    if (x >= m / 2)
      x -= m;
    return double(x);
  }

  static bool compare(const std::string &p, double a, double b) {
    bool unord = std::isnan(a) || std::isnan(b);
    if (p == "eq" || p == "oeq")
      return !unord && a == b;
    if (p == "ne" || p == "one")
      return !unord && a != b;
    if (p == "une")
      return unord || a != b;
    if (p == "slt" || p == "olt")
      return !unord && a < b;
    if (p == "sle" || p == "ole")
      return !unord && a <= b;
    if (p == "sgt" || p == "ogt")
      return !unord && a > b;
    if (p == "sge" || p == "oge")
      return !unord && a >= b;
    if (p == "ult" || p == "ule" || p == "ugt" || p == "uge") {
      uint64_t x = uint64_t(int64_t(a)), y = uint64_t(int64_t(b));
      return p == "ult"   ? x < y
             : p == "ule" ? x <= y
             : p == "ugt" ? x > y
                          : x >= y;
    }
    if (p == "ord")
      return !unord;
    if (p == "uno")
      return unord;
    if (p == "true")
      return true;
    if (p == "false")
      return false;
    throw ManifestError("reference: unsupported predicate " + p);
  }

  double eval(const Op &op, const std::vector<double> &v,
              const std::vector<const HostTensor *> &captures,
              int firstCapture) const {
    auto in = [&](int i) { return v.at(op.operands.at(i)); };
    auto i64 = [&](int i) { return int64_t(in(i)); };
    const std::string &n = op.name;
    if (n == "arith.constant")
      return op.value;
    if (n == "tensor.extract") {
      const HostTensor &t = *captures.at(op.operands[0] - firstCapture);
      int64_t offset = 0;
      for (size_t d = 0; d < t.shape.size(); ++d) {
        int64_t i = i64(d + 1);
        if (i < 0 || i >= t.shape[d])
          throw ManifestError("reference: capture index out of bounds");
        offset = offset * t.shape[d] + i;
      }
      return t.data[offset];
    }
    // Float arithmetic and math.
    if (n == "arith.addf")
      return in(0) + in(1);
    if (n == "arith.subf")
      return in(0) - in(1);
    if (n == "arith.mulf")
      return in(0) * in(1);
    if (n == "arith.divf")
      return in(0) / in(1);
    if (n == "arith.remf")
      return std::fmod(in(0), in(1));
    if (n == "arith.negf")
      return -in(0);
    if (n == "arith.maximumf")
      return std::isnan(in(0)) || std::isnan(in(1)) ? NAN
                                                    : std::max(in(0), in(1));
    if (n == "arith.minimumf")
      return std::isnan(in(0)) || std::isnan(in(1)) ? NAN
                                                    : std::min(in(0), in(1));
    if (n == "arith.maxnumf")
      return std::fmax(in(0), in(1));
    if (n == "arith.minnumf")
      return std::fmin(in(0), in(1));
    if (n == "math.exp")
      return std::exp(in(0));
    if (n == "math.exp2")
      return std::exp2(in(0));
    if (n == "math.expm1")
      return std::expm1(in(0));
    if (n == "math.log")
      return std::log(in(0));
    if (n == "math.log2")
      return std::log2(in(0));
    if (n == "math.log1p")
      return std::log1p(in(0));
    if (n == "math.tanh")
      return std::tanh(in(0));
    if (n == "math.sqrt")
      return std::sqrt(in(0));
    if (n == "math.rsqrt")
      return 1.0 / std::sqrt(in(0));
    if (n == "math.absf")
      return std::fabs(in(0));
    if (n == "math.powf")
      return std::pow(in(0), in(1));
    if (n == "math.sin")
      return std::sin(in(0));
    if (n == "math.cos")
      return std::cos(in(0));
    if (n == "math.erf")
      return std::erf(in(0));
    if (n == "math.floor")
      return std::floor(in(0));
    if (n == "math.trunc")
      return std::trunc(in(0));
    if (n == "math.copysign")
      return std::copysign(in(0), in(1));
    if (n == "math.ceil")
      return std::ceil(in(0));
    // Half to even (the default rounding mode), and half away from zero.
    if (n == "math.roundeven")
      return std::nearbyint(in(0));
    if (n == "math.round")
      return std::round(in(0));
    if (n == "math.fma")
      return in(0) * in(1) + in(2);
    // Conversions.
    if (n == "arith.extf" || n == "arith.truncf" || n == "arith.sitofp")
      return in(0);
    if (n == "arith.uitofp")
      return double(uint64_t(i64(0)));
    if (n == "arith.fptosi" || n == "arith.fptoui")
      return wrap(int64_t(std::trunc(in(0))), op.bits);
    if (n == "arith.index_cast" || n == "arith.index_castui" ||
        n == "arith.extsi" || n == "arith.trunci")
      return wrap(i64(0), op.bits);
    if (n == "arith.extui") {
      // The operand's two's-complement bits, read as unsigned.
      int64_t x = i64(0);
      return op.operandBits >= 64 || x >= 0
                 ? double(x)
                 : double(x + (int64_t(1) << op.operandBits));
    }
    // Integer arithmetic.
    if (n == "arith.addi")
      return wrap(i64(0) + i64(1), op.bits);
    if (n == "arith.subi")
      return wrap(i64(0) - i64(1), op.bits);
    if (n == "arith.muli")
      return wrap(i64(0) * i64(1), op.bits);
    if (n == "arith.divsi" || n == "arith.divui" || n == "arith.floordivsi" ||
        n == "arith.ceildivsi" || n == "arith.remsi" || n == "arith.remui") {
      int64_t a = i64(0), b = i64(1);
      if (b == 0)
        throw ManifestError("reference: integer division by zero");
      if (n == "arith.divsi")
        return double(a / b);
      if (n == "arith.divui")
        return double(uint64_t(a) / uint64_t(b));
      if (n == "arith.remsi")
        return double(a % b);
      if (n == "arith.remui")
        return double(uint64_t(a) % uint64_t(b));
      int64_t q = a / b, r = a % b;
      if (n == "arith.floordivsi")
        return double(r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q);
      return double(r != 0 && ((r < 0) == (b < 0)) ? q + 1 : q);
    }
    if (n == "arith.maxsi")
      return double(std::max(i64(0), i64(1)));
    if (n == "arith.minsi")
      return double(std::min(i64(0), i64(1)));
    if (n == "arith.maxui")
      return double(std::max(uint64_t(i64(0)), uint64_t(i64(1))));
    if (n == "arith.minui")
      return double(std::min(uint64_t(i64(0)), uint64_t(i64(1))));
    if (n == "arith.andi")
      return wrap(i64(0) & i64(1), op.bits);
    if (n == "arith.ori")
      return wrap(i64(0) | i64(1), op.bits);
    if (n == "arith.xori")
      return wrap(i64(0) ^ i64(1), op.bits);
    if (n == "arith.shli" || n == "arith.shrsi" || n == "arith.shrui") {
      int64_t a = i64(0), k = i64(1);
      if (k < 0 || k >= op.bits) // poison in MLIR: refuse rather than guess
        throw ManifestError("reference: shift by " + std::to_string(k) +
                            " of a " + std::to_string(op.bits) +
                            "-bit integer");
      if (n == "arith.shli")
        return wrap(int64_t(uint64_t(a) << k), op.bits);
      if (n == "arith.shrsi")
        return double(a >> k);
      uint64_t mask =
          op.bits == 64 ? ~uint64_t(0) : (uint64_t(1) << op.bits) - 1;
      return double((uint64_t(a) & mask) >> k);
    }
    if (n == "math.absi")
      return double(std::llabs(i64(0)));
    if (n == "arith.cmpi" || n == "arith.cmpf")
      return compare(op.predicate, in(0), in(1)) ? 1 : 0;
    if (n == "arith.select")
      return in(0) != 0 ? in(1) : in(2);
    throw ManifestError("reference: unsupported op " + n);
  }
};

const HostTensor &tensorAt(const std::vector<HostTensor> &tensors,
                           int64_t index) {
  return tensors.at(size_t(index));
}

double at4(const HostTensor &t, int64_t a, int64_t b, int64_t c, int64_t d) {
  const auto &s = t.shape;
  return t.data[((a * s[1] + b) * s[2] + c) * s[3] + d];
}

/// The reference's outputs in manifest order and which is which: out
/// [B, Hq, M, Dv], lse_r [B, Hq, M] (NaN until written), key_side
/// [B, Hkv, N, Dqk] and the terms (sums over every row: zeros first).
struct ReferenceOutputs {
  std::vector<HostTensor> tensors;
  HostTensor *out = nullptr, *keySide = nullptr;
  std::vector<HostTensor *> lse, terms;
};

ReferenceOutputs
allocateOutputs(const KernelManifest &manifest, int nb,
                const std::vector<int64_t> &outShape,
                const std::vector<int64_t> &keySideShape,
                const std::vector<std::vector<int64_t>> &termShapes) {
  ReferenceOutputs r;
  r.lse.assign(nb, nullptr);
  r.terms.assign(termShapes.size(), nullptr);
  auto termIndex = [](const std::string &name) -> int {
    return name.rfind("term", 0) == 0 ? std::stoi(name.substr(4)) : -1;
  };
  std::vector<int64_t> rowShape(outShape.begin(), outShape.end() - 1);
  for (const ParamInfo &param : manifest.params) {
    if (!param.output)
      continue;
    HostTensor t;
    int term = termIndex(param.name);
    t.shape = param.name == "out"        ? outShape
              : param.name == "key_side" ? keySideShape
              : term >= 0                ? termShapes.at(size_t(term))
                                         : rowShape;
    int64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    bool sum = param.name == "key_side" || term >= 0;
    t.data.assign(size_t(n), sum ? 0.0 : NAN);
    r.tensors.push_back(std::move(t));
  }
  size_t pos = 0;
  for (const ParamInfo &param : manifest.params) {
    if (!param.output)
      continue;
    if (param.name == "out")
      r.out = &r.tensors[pos];
    else if (param.name == "key_side")
      r.keySide = &r.tensors[pos];
    else if (param.name.rfind("lse", 0) == 0)
      r.lse.at(std::stoi(param.name.substr(3))) = &r.tensors[pos];
    else if (int term = termIndex(param.name); term >= 0)
      r.terms.at(size_t(term)) = &r.tensors[pos];
    ++pos;
  }
  return r;
}

} // namespace

std::vector<HostTensor>
flashlight::runtime::evaluateReference(const KernelManifest &manifest,
                                       const std::vector<HostTensor> &tensors,
                                       const std::vector<int64_t> &rows) {
  const json &p = manifest.program;
  if (p.is_null())
    throw ManifestError("manifest " + manifest.name +
                        " carries no program for the reference");
  int nb = p.at("branches");
  std::string normalizer = p.at("normalizer");
  std::vector<double> scale = p.at("scale").get<std::vector<double>>();
  std::vector<int64_t> qIdx = p.at("queries").get<std::vector<int64_t>>();
  std::vector<int64_t> kIdx = p.at("keys").get<std::vector<int64_t>>();
  std::vector<int64_t> sinkIdx = p.at("sinks").get<std::vector<int64_t>>();
  std::vector<const HostTensor *> captures;
  for (int64_t c : p.at("captures").get<std::vector<int64_t>>())
    captures.push_back(&tensorAt(tensors, c));
  const HostTensor &v = tensorAt(tensors, p.at("value").get<int64_t>());
  RegionProgram score(p.at("score")), mask(p.at("mask")),
      epilogue(p.at("epilogue"));

  // value_columns: branch r writes its block of the output's columns.
  std::vector<int> owner;
  if (p.contains("value_columns")) {
    std::vector<int64_t> widths =
        p.at("value_columns").get<std::vector<int64_t>>();
    for (size_t r = 0; r < widths.size(); ++r)
      owner.insert(owner.end(), size_t(widths[r]), int(r));
  }
  const HostTensor &q0 = tensorAt(tensors, qIdx[0]);
  int64_t B = q0.shape[0], Hq = q0.shape[1], M = q0.shape[2];
  int64_t Hkv = v.shape[1], N = v.shape[2], Dv = v.shape[3];
  int64_t group = Hq / Hkv;

  // The key-side product's branch, -1 without one.
  int ksBranch = p.value("key_side_branch", -1);
  int64_t ksD = ksBranch < 0 ? 0 : tensorAt(tensors, qIdx[ksBranch]).shape[3];

  // The terms: the dims each keeps of (b, h, q_idx, kv_idx).
  std::vector<std::vector<int64_t>> termDims, termShapes;
  if (p.contains("term_dims"))
    termDims = p.at("term_dims").get<std::vector<std::vector<int64_t>>>();
  for (const std::vector<int64_t> &dims : termDims) {
    int64_t extents[] = {B, Hq, M, N};
    std::vector<int64_t> shape;
    for (int64_t d : dims)
      shape.push_back(extents[d]);
    termShapes.push_back(shape);
  }

  ReferenceOutputs result = allocateOutputs(manifest, nb, {B, Hq, M, Dv},
                                            {B, Hkv, N, ksD}, termShapes);
  std::vector<HostTensor *> &lse = result.lse;
  HostTensor *out = result.out, *keySide = result.keySide;
  if (!out)
    throw ManifestError("reference: manifest has no 'out' parameter");
  // term_e[kept dims] += keep ? y_{nb + e} : 0
  auto addTerm = [&](size_t e, const int64_t(&at)[4], double y) {
    HostTensor *t = result.terms.at(e);
    if (!t)
      return;
    size_t flat = 0;
    for (size_t k = 0; k < termDims[e].size(); ++k)
      flat = flat * size_t(t->shape[k]) + size_t(at[termDims[e][k]]);
    t->data[flat] += y;
  };

  // Every key's row of the key side and the terms sum over every query
  // row: a sample of rows cannot check them.
  std::vector<int64_t> todo =
      keySide || !termDims.empty() ? std::vector<int64_t>() : rows;
  if (todo.empty())
    for (int64_t i = 0; i < M; ++i)
      todo.push_back(i);

  // Region argument prefixes are (leading..., b, h, q, kv|d); captures follow.
  std::vector<std::vector<double>> s(nb, std::vector<double>(N));
  std::vector<char> keep(N);
  std::vector<double> args, y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i : todo) {
        int64_t hk = h / group;
        for (int r = 0; r < nb; ++r) {
          const HostTensor &q = tensorAt(tensors, qIdx[r]);
          const HostTensor &k = tensorAt(tensors, kIdx[r]);
          int64_t D = q.shape[3];
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < D; ++c)
              acc += at4(q, b, h, i, c) * at4(k, b, hk, j, c);
            s[r][j] = scale[r] * acc;
          }
        }
        for (int64_t j = 0; j < N; ++j) {
          if (score.present) {
            args.clear();
            for (int r = 0; r < nb; ++r)
              args.push_back(s[r][j]);
            args.insert(args.end(),
                        {double(b), double(h), double(i), double(j)});
            for (size_t c = 0; c < captures.size(); ++c)
              args.push_back(double(c));
            y = score.run(args, captures, nb + 4);
            for (int r = 0; r < nb; ++r)
              s[r][j] = y[r];
          }
          keep[j] = 1;
          if (mask.present) {
            args = {double(b), double(h), double(i), double(j)};
            for (size_t c = 0; c < captures.size(); ++c)
              args.push_back(double(c));
            keep[j] = mask.run(args, captures, 4)[0] != 0;
          }
          for (size_t e = 0; keep[j] && e < termDims.size(); ++e)
            addTerm(e, {b, h, i, j}, y.at(size_t(nb) + e));
        }
        // o_r[d] = sum_j p_r[j] V[j, d], with p from the normalizer.
        std::vector<std::vector<double>> o(nb, std::vector<double>(Dv, 0.0));
        for (int r = 0; r < nb; ++r) {
          std::vector<double> weight(N, 0.0);
          double lseValue = -kInf;
          if (normalizer == "softmax") {
            double m = -kInf;
            for (int64_t j = 0; j < N; ++j)
              if (keep[j] && s[r][j] > -kInf)
                m = std::max(m, s[r][j]);
            double sink =
                sinkIdx.empty() ? -kInf : tensorAt(tensors, sinkIdx[r]).data[h];
            m = std::max(m, sink);
            double den = 0;
            if (m > -kInf) {
              for (int64_t j = 0; j < N; ++j)
                if (keep[j] && s[r][j] > -kInf)
                  den += (weight[j] = std::exp(s[r][j] - m));
              if (sink > -kInf)
                den += std::exp(sink - m);
              for (double &w : weight)
                w /= den;
              lseValue = m + std::log(den);
            }
          } else {
            for (int64_t j = 0; j < N; ++j)
              if (keep[j])
                weight[j] = normalizer == "sigmoid"
                                ? 1.0 / (1.0 + std::exp(-s[r][j]))
                                : s[r][j];
          }
          for (int64_t j = 0; j < N; ++j)
            if (weight[j] != 0)
              for (int64_t d = 0; d < Dv; ++d)
                o[r][d] += weight[j] * at4(v, b, hk, j, d);
          // key_side[b, hk, j, c] += p_r[j] * Q_r[b, h, i, c]
          if (keySide && r == ksBranch)
            for (int64_t j = 0; j < N; ++j)
              for (int64_t c = 0; weight[j] != 0 && c < ksD; ++c)
                keySide->data[size_t(((b * Hkv + hk) * N + j) * ksD + c)] +=
                    weight[j] * at4(tensorAt(tensors, qIdx[r]), b, h, i, c);
          if (lse[r])
            lse[r]->data[size_t((b * Hq + h) * M + i)] = lseValue;
        }
        for (int64_t d = 0; d < Dv; ++d) {
          double value = owner.empty() ? o[0][d] : o.at(owner.at(d))[d];
          if (epilogue.present) {
            args.clear();
            for (int r = 0; r < nb; ++r)
              args.push_back(o[r][d]);
            args.insert(args.end(),
                        {double(b), double(h), double(i), double(d)});
            for (size_t c = 0; c < captures.size(); ++c)
              args.push_back(double(c));
            value = epilogue.run(args, captures, nb + 4)[0];
          }
          out->data[size_t(((b * Hq + h) * M + i) * Dv + d)] = value;
        }
      }
  return std::move(result.tensors);
}
