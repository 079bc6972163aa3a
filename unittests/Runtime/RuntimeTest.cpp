//===- RuntimeTest.cpp - Tests of the runtime (no GPU needed) -------------===//

#include "flashlight/Runtime/CudaDriver.h"
#include "flashlight/Runtime/DType.h"
#include "flashlight/Runtime/Gemm.h"
#include "flashlight/Runtime/Kernel.h"
#include "flashlight/Runtime/Reference.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <unistd.h>

using namespace flashlight::runtime;
using json = nlohmann::json;

namespace {

/// Writes `j` to a temporary manifest file and loads it.
KernelManifest manifestFrom(const json &j, size_t attention = 0) {
  // Unique per process and call: ctest runs test cases in parallel.
  static int counter = 0;
  std::string path = "flashlight-test-manifest-" + std::to_string(getpid()) +
                     "-" + std::to_string(counter++) + ".json";
  // Removed also when loading throws (the bad-manifest cases).
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  std::ofstream(path) << j.dump();
  return KernelManifest::load(path, attention);
}

json param(const std::string &name, const std::string &dir,
           std::vector<int64_t> shape) {
  return {{"name", name},   {"direction", dir}, {"dtype", "f32"},
          {"shape", shape}, {"index", 0},       {"strides", json::array()}};
}

/// A one-head attention over M = 2 queries and N = 3 keys of dim 2.
json tinyManifest(const json &program) {
  return {
      {"manifest_version", 1},
      {"name", "tiny"},
      {"kernel", "tiny"},
      {"block_m", 4},
      {"block", {128, 1, 1}},
      {"params",
       {param("q0", "in", {1, 1, 2, 2}), param("k0", "in", {1, 1, 3, 2}),
        param("v", "in", {1, 1, 3, 2}), param("out", "out", {1, 1, 2, 2}),
        param("lse0", "out", {1, 1, 2})}},
      {"archs",
       {{"sm_80", {{"ptx", "tiny.sm_80.ptx"}, {"cubin", "tiny.sm_80.cubin"}}},
        {"sm_90a",
         {{"ptx", "tiny.sm_90a.ptx"}, {"cubin", "tiny.sm_90a.cubin"}}}}},
      {"program", program}};
}

json program(const std::string &normalizer, const json &mask) {
  return {{"branches", 1},
          {"normalizer", normalizer},
          {"scale", {0.5}},
          {"queries", {0}},
          {"keys", {1}},
          {"value", 2},
          {"sinks", json::array()},
          {"captures", json::array()},
          {"num_lse", 1},
          {"score", nullptr},
          {"mask", mask},
          {"epilogue", nullptr}};
}

std::vector<HostTensor> tinyInputs() {
  return {{{1, 1, 2, 2}, {1, 0, 0, 2}},
          {{1, 1, 3, 2}, {1, 1, 2, 0, 0, -1}},
          {{1, 1, 3, 2}, {1, 2, 3, 4, 5, 6}},
          {{1, 1, 2, 2}, {}},
          {{1, 1, 2}, {}}};
}

} // namespace

TEST_CASE("bf16 and f16 encodings round to nearest even", "[runtime]") {
  CHECK(roundToDType(1.0, "bf16") == 1.0);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: even wins.
  CHECK(roundToDType(1.0 + std::ldexp(1, -8), "bf16") == 1.0);
  CHECK(roundToDType(1.0 + 3 * std::ldexp(1, -9), "bf16") ==
        1.0 + std::ldexp(1, -7));
  CHECK(roundToDType(-2.5, "f16") == -2.5);
  CHECK(roundToDType(65504.0, "f16") == 65504.0);
  CHECK(std::isinf(roundToDType(70000.0, "f16")));
  CHECK(roundToDType(std::ldexp(1, -24), "f16") == std::ldexp(1, -24));
  CHECK(roundToDType(1.0 + std::ldexp(1, -11), "f16") == 1.0);
  CHECK(std::isnan(roundToDType(NAN, "bf16")));
  CHECK(roundToDType(-7.0, "i32") == -7.0);
  CHECK_THROWS_AS(roundToDType(1.0, "f8"), ManifestError);
}

TEST_CASE("the artifact matches the device's arch", "[runtime]") {
  KernelManifest m = manifestFrom(tinyManifest(nullptr));
  CHECK(chooseArtifact(m, 90) == "tiny.sm_90a.cubin");
  CHECK(chooseArtifact(m, 80) == "tiny.sm_80.cubin");
  // An Ada GPU runs the sm_80 PTX through the driver's JIT.
  CHECK(chooseArtifact(m, 89) == "tiny.sm_80.ptx");
  // A Blackwell GPU too: sm_90a PTX (wgmma) cannot be JIT-compiled there.
  CHECK(chooseArtifact(m, 100) == "tiny.sm_80.ptx");
  CHECK(chooseArtifact(m, 120) == "tiny.sm_80.ptx");
  CHECK_THROWS_AS(chooseArtifact(m, 75), ManifestError);
}

TEST_CASE("bad manifests are errors, not crashes", "[runtime]") {
  CHECK_THROWS_AS(KernelManifest::load("/nonexistent/m.json"), ManifestError);
  json noQuery = tinyManifest(nullptr);
  noQuery["params"][0]["name"] = "x";
  CHECK_THROWS_AS(manifestFrom(noQuery), ManifestError);
  json badDtype = tinyManifest(nullptr);
  badDtype["params"][0]["dtype"] = "f8";
  CHECK_THROWS_AS(manifestFrom(badDtype), ManifestError);
  json missing = tinyManifest(nullptr);
  missing.erase("block");
  CHECK_THROWS_AS(manifestFrom(missing), ManifestError);
}

TEST_CASE("a program without attention says how to run it", "[runtime]") {
  // The reference path only (no attention found): the manifest has no
  // kernel for this runtime; its entry steps run through call_entry.
  json m = tinyManifest(nullptr);
  m["kernel"] = nullptr;
  CHECK_THROWS_WITH(manifestFrom(m),
                    Catch::Matchers::Contains("has no attention kernel"));
}

TEST_CASE("attention k of a version-2 manifest is its own kernel",
          "[runtime]") {
  json m = tinyManifest(program("softmax", nullptr));
  json second = {{"kernel", "tiny_attention1"},
                 {"params", m["params"]},
                 {"archs", m["archs"]},
                 {"program", program("sigmoid", nullptr)}};
  second["params"][0]["shape"] = {1, 1, 4, 2};
  m["manifest_version"] = 2;
  m["attentions"] = {{{"kernel", "tiny"},
                      {"params", m["params"]},
                      {"archs", m["archs"]},
                      {"program", m["program"]}},
                     second};
  CHECK(manifestFrom(m).kernel == "tiny");
  KernelManifest k1 = manifestFrom(m, 1);
  CHECK(k1.kernel == "tiny_attention1");
  CHECK(k1.find("q0")->shape == std::vector<int64_t>{1, 1, 4, 2});
  CHECK(k1.program["normalizer"] == "sigmoid");
  CHECK_THROWS_WITH(manifestFrom(m, 2), Catch::Contains("has no attention 2"));
  m.erase("attentions");
  m["manifest_version"] = 1;
  CHECK_THROWS_WITH(manifestFrom(m, 1), Catch::Contains("has no attention 1"));
}

TEST_CASE("dynamic shared memory comes from the manifest", "[runtime]") {
  // Older manifests have none; the tensor-core kernel's tiles need it.
  json m = tinyManifest(nullptr);
  CHECK(manifestFrom(m).dynamicSharedMemory == 0);
  m["dynamic_shared_memory"] = 69632;
  CHECK(manifestFrom(m).dynamicSharedMemory == 69632);
  m["dynamic_shared_memory"] = "big";
  CHECK_THROWS_AS(manifestFrom(m), ManifestError);
}

TEST_CASE("launch pointers are checked against the manifest's alignment",
          "[runtime]") {
  // Tensor-core kernels copy 16 bytes at a time and store element pairs:
  // their manifests ask for 16-byte aligned tensors; older ones for none.
  json m = tinyManifest(nullptr);
  std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 2, 2}, {1, 1, 3, 2}, {1, 1, 3, 2}, {1, 1, 2, 2}, {1, 1, 2}};
  std::vector<CUdeviceptr> aligned(5, 0x1000), offByFour = aligned;
  offByFour[3] += 4;
  KernelManifest plain = manifestFrom(m);
  CHECK(plain.pointerAlignment == 1);
  CHECK_NOTHROW(plain.checkLaunch(offByFour, shapes));
  m["archs"]["sm_90a"]["pointer_alignment"] = 16;
  KernelManifest hopper = manifestFrom(m).forArtifact("tiny.sm_90a.cubin");
  CHECK(hopper.pointerAlignment == 16);
  CHECK_NOTHROW(hopper.checkLaunch(aligned, shapes));
  CHECK_THROWS_WITH(hopper.checkLaunch(offByFour, shapes),
                    Catch::Contains("out: pointer not aligned to 16 bytes"));
  // f32 elements: 2 bytes off is misaligned whatever the manifest says.
  offByFour[3] -= 2;
  CHECK_THROWS_WITH(plain.checkLaunch(offByFour, shapes),
                    Catch::Contains("not aligned to its f32 elements"));
  shapes[0] = {1, 1, 2, 3};
  CHECK_THROWS_WITH(plain.checkLaunch(aligned, shapes),
                    Catch::Contains("q0: dim 3 is 3, expected 2"));
}

TEST_CASE("strides are checked against what the kernel reads", "[runtime]") {
  // q0 [B = 1, H = 2, M = 4, D = 8] f32 as a [B, M, H, D] buffer's view:
  // strides (64, 8, 16, 1).
  json m = tinyManifest(nullptr);
  m["params"] = {
      param("q0", "in", {1, 2, 4, 8}), param("k0", "in", {1, 2, 4, 8}),
      param("v", "in", {1, 2, 4, 8}), param("out", "out", {1, 2, 4, 8}),
      param("lse0", "out", {1, 2, 4})};
  std::vector<std::vector<int64_t>> shapes = {
      {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4}};
  std::vector<std::vector<int64_t>> dense(5), bnhd = dense;
  bnhd[0] = bnhd[3] = {64, 8, 16, 1};
  KernelManifest fixed = manifestFrom(m);
  CHECK_NOTHROW(fixed.checkStrides(shapes, dense));
  CHECK_THROWS_WITH(fixed.checkStrides(shapes, bnhd),
                    Catch::Contains("q0: strides (64, 8, 16, 1) are not dense "
                                    "row-major, and this kernel was compiled "
                                    "with static strides"));
  m["runtime_strides"] = true;
  m["pointer_alignment"] = 16;
  KernelManifest strided = manifestFrom(m);
  CHECK_NOTHROW(strided.checkStrides(shapes, bnhd));
  // Row-major strides given explicitly are the dense layout.
  dense[0] = {64, 32, 8, 1};
  CHECK_NOTHROW(fixed.checkStrides(shapes, dense));
  std::vector<std::vector<int64_t>> bad = bnhd;
  bad[0] = {64, 32, 8, 2};
  CHECK_THROWS_WITH(strided.checkStrides(shapes, bad),
                    Catch::Contains("q0: strides (64, 32, 8, 2) leave the "
                                    "innermost dim strided"));
  bad[0] = {64, 9, 18, 1};
  CHECK_THROWS_WITH(strided.checkStrides(shapes, bad),
                    Catch::Contains("not multiples of 16 bytes"));
  bad = bnhd;
  bad[3] = {32, 8, 8, 1}; // rows of the two heads on top of each other
  CHECK_THROWS_WITH(strided.checkStrides(shapes, bad),
                    Catch::Contains("out: strides (32, 8, 8, 1) make the "
                                    "output overlap itself"));
  // An output the kernel adds to is zeroed whole first: no gaps.
  m["params"][3]["zero"] = true;
  KernelManifest zeroed = manifestFrom(m);
  CHECK_NOTHROW(zeroed.checkStrides(shapes, bnhd));
  bad[3] = {128, 8, 32, 1};
  CHECK_THROWS_WITH(zeroed.checkStrides(shapes, bad),
                    Catch::Contains("leave gaps in an output"));
  CHECK_THROWS_WITH(strided.checkStrides(shapes, {{}, {}}),
                    Catch::Contains("2 stride lists for 5 tensors"));
}

TEST_CASE("each arch's artifact launches with that arch's geometry",
          "[runtime]") {
  // sm_90a's wgmma kernel takes 256 threads and more shared memory than the
  // sm_80 kernel; entries without their own geometry keep the top level's.
  json m = tinyManifest(nullptr);
  m["dynamic_shared_memory"] = 18432;
  m["archs"]["sm_90a"]["block"] = {256, 1, 1};
  m["archs"]["sm_90a"]["block_m"] = 128;
  m["archs"]["sm_90a"]["dynamic_shared_memory"] = 99328;
  KernelManifest manifest = manifestFrom(m);
  KernelManifest hopper = manifest.forArtifact("tiny.sm_90a.cubin");
  CHECK(hopper.block == std::array<unsigned, 3>{256, 1, 1});
  CHECK(hopper.blockM == 128);
  CHECK(hopper.dynamicSharedMemory == 99328);
  CHECK(hopper.grid({{3, 5, 300, 2}, {3, 5, 3, 2}, {3, 5, 3, 2}, {}, {}}) ==
        std::array<unsigned, 3>{3, 5, 3});
  for (const char *artifact : {"tiny.sm_80.ptx", "tiny.sm_80.cubin"}) {
    KernelManifest ampere = manifest.forArtifact(artifact);
    CHECK(ampere.block == std::array<unsigned, 3>{128, 1, 1});
    CHECK(ampere.blockM == 4);
    CHECK(ampere.dynamicSharedMemory == 18432);
  }
  m["archs"]["sm_90a"]["block"] = "wide";
  CHECK_THROWS_AS(manifestFrom(m).forArtifact("tiny.sm_90a.cubin"),
                  ManifestError);
}

TEST_CASE("a persistent kernel launches about one block per SM", "[runtime]") {
  // 3 query tiles x 5 heads x 3 batches = 45 work tiles.
  json m = tinyManifest(nullptr);
  m["archs"]["sm_90a"]["block_m"] = 128;
  m["archs"]["sm_90a"]["persistent"] = true;
  KernelManifest manifest = manifestFrom(m);
  std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 300, 2}, {3, 5, 3, 2}, {3, 5, 3, 2}, {}, {}};
  KernelManifest hopper = manifest.forArtifact("tiny.sm_90a.cubin");
  CHECK(hopper.persistent);
  CHECK(hopper.launchGrid(shapes, 132) == std::array<unsigned, 3>{45, 1, 1});
  CHECK(hopper.launchGrid(shapes, 16) == std::array<unsigned, 3>{16, 1, 1});
  // No SM count (a failed query) is an error, not an empty grid.
  CHECK_THROWS_WITH(hopper.launchGrid(shapes, 0),
                    Catch::Contains("needs the device's SM count"));
  // The sm_80 kernel keeps a work tile per block.
  KernelManifest ampere = manifest.forArtifact("tiny.sm_80.ptx");
  CHECK_FALSE(ampere.persistent);
  CHECK(ampere.launchGrid(shapes, 16) == ampere.grid(shapes));
}

TEST_CASE("runtime extents bind from the shapes, within max_extent",
          "[runtime]") {
  json m = tinyManifest(nullptr);
  auto dynamic = [&](int i, std::vector<int64_t> shape,
                     std::vector<std::string> extents) {
    m["params"][i]["shape"] = shape;
    m["params"][i]["extents"] = extents;
  };
  dynamic(0, {-1, 1, -1, 2}, {"B", "", "M", ""});
  dynamic(1, {-1, 1, -1, 2}, {"B", "", "N", ""});
  dynamic(2, {-1, 1, -1, 2}, {"B", "", "N", ""});
  dynamic(3, {-1, 1, -1, 2}, {"B", "", "M", ""});
  dynamic(4, {-1, 1, -1}, {"B", "", "M"});
  // Without a bound, a manifest with runtime extents is refused.
  CHECK_THROWS_AS(manifestFrom(m), ManifestError);
  m["max_extent"] = 1000;
  KernelManifest manifest = manifestFrom(m);
  CHECK(manifest.hasRuntimeShapes());
  std::vector<std::vector<int64_t>> shapes = {
      {2, 1, 7, 2}, {2, 1, 9, 2}, {2, 1, 9, 2}, {2, 1, 7, 2}, {2, 1, 7}};
  CHECK(manifest.bindExtents(shapes) ==
        std::map<std::string, int64_t>{{"B", 2}, {"M", 7}, {"N", 9}});
  shapes[2][2] = 8; // V's length differs from K's: both are N.
  CHECK_THROWS_WITH(manifest.bindExtents(shapes),
                    Catch::Matchers::Contains("both are extent N"));
  shapes[2][2] = 9;
  shapes[0][2] = shapes[3][2] = shapes[4][2] = 1001;
  CHECK_THROWS_WITH(manifest.bindExtents(shapes),
                    Catch::Matchers::Contains("up to 1000"));
  KernelManifest fixed = manifest.withExtents({{"B", 2}, {"M", 7}, {"N", 9}});
  CHECK(fixed.params[1].shape == std::vector<int64_t>{2, 1, 9, 2});
  CHECK_THROWS_AS(manifest.withExtents({{"B", 2}, {"M", 7}}), ManifestError);
}

TEST_CASE("a TMA kernel's tensor maps come from its arch's entry",
          "[runtime]") {
  // sm_90a's kernel takes maps of K and V (parameters 1 and 2; boxes of
  // one 64-column atom by 128 rows); its aligned variant lists its own.
  json m = tinyManifest(nullptr);
  json maps = {{{"param", 1}, {"box", {64, 128}}},
               {{"param", 2}, {"box", {64, 128}}}};
  m["archs"]["sm_90a"]["tensor_maps"] = maps;
  m["archs"]["sm_90a"]["aligned"] = {{"kernel", "tiny_aligned"},
                                     {"block", {384, 1, 1}},
                                     {"tensor_maps", {maps[0]}}};
  KernelManifest hopper = manifestFrom(m).forArtifact("tiny.sm_90a.cubin");
  REQUIRE(hopper.tensorMaps.size() == 2);
  CHECK(hopper.tensorMaps[1].param == 2);
  CHECK(hopper.tensorMaps[1].boxColumns == 64);
  CHECK(hopper.tensorMaps[1].boxRows == 128);
  CHECK(hopper.tensorMaps[1].swizzled);
  std::optional<KernelManifest> aligned = hopper.alignedVariant();
  REQUIRE(aligned);
  CHECK(aligned->tensorMaps.size() == 1);
  // The sm_80 kernel takes none.
  CHECK(manifestFrom(m).forArtifact("tiny.sm_80.ptx").tensorMaps.empty());
  // A map of a parameter the kernel does not have, or a box TMA cannot
  // copy, is a manifest error.
  m["archs"]["sm_90a"]["tensor_maps"] = {{{"param", 9}, {"box", {64, 128}}}};
  CHECK_THROWS_WITH(manifestFrom(m).forArtifact("tiny.sm_90a.cubin"),
                    Catch::Contains("tensor map of parameter 9"));
  m["archs"]["sm_90a"]["tensor_maps"] = {{{"param", 1}, {"box", {64, 512}}}};
  CHECK_THROWS_AS(manifestFrom(m).forArtifact("tiny.sm_90a.cubin"),
                  ManifestError);
  // A staged row's map: no swizzle ("swizzle": 0); another width is an
  // error.
  m["archs"]["sm_90a"]["tensor_maps"] = {
      {{"param", 1}, {"box", {128, 1}}, {"swizzle", 0}}};
  KernelManifest rows = manifestFrom(m).forArtifact("tiny.sm_90a.cubin");
  REQUIRE(rows.tensorMaps.size() == 1);
  CHECK_FALSE(rows.tensorMaps[0].swizzled);
  m["archs"]["sm_90a"]["tensor_maps"] = {
      {{"param", 1}, {"box", {128, 1}}, {"swizzle", 64}}};
  CHECK_THROWS_WITH(manifestFrom(m).forArtifact("tiny.sm_90a.cubin"),
                    Catch::Contains("swizzle must be 0 or 128"));
}

TEST_CASE("lengths whole tiles divide take the aligned kernel's geometry",
          "[runtime]") {
  json m = tinyManifest(nullptr);
  m["archs"]["sm_90a"]["block_m"] = 128;
  m["archs"]["sm_90a"]["block_n"] = 64;
  m["archs"]["sm_90a"]["aligned"] = {{"kernel", "tiny_aligned"},
                                     {"block", {384, 1, 1}},
                                     {"block_m", 128},
                                     {"block_n", 64},
                                     {"dynamic_shared_memory", 4096},
                                     {"block_mask", nullptr}};
  KernelManifest hopper = manifestFrom(m).forArtifact("tiny.sm_90a.cubin");
  std::optional<KernelManifest> aligned = hopper.alignedVariant();
  REQUIRE(aligned);
  CHECK(aligned->kernel == "tiny_aligned");
  CHECK(aligned->block == std::array<unsigned, 3>{384, 1, 1});
  CHECK(aligned->dynamicSharedMemory == 4096);
  CHECK(aligned->tilesDivide(
      {{1, 1, 256, 2}, {1, 1, 128, 2}, {1, 1, 128, 2}, {}, {}}));
  CHECK_FALSE(aligned->tilesDivide(
      {{1, 1, 256, 2}, {1, 1, 100, 2}, {1, 1, 100, 2}, {}, {}}));
  CHECK_FALSE(manifestFrom(m).forArtifact("tiny.sm_80.ptx").alignedVariant());
}

TEST_CASE("the launch grid is (query tiles, heads, batch)", "[runtime]") {
  KernelManifest m = manifestFrom(tinyManifest(nullptr));
  std::array<unsigned, 3> grid =
      m.grid({{3, 5, 9, 2}, {3, 5, 3, 2}, {3, 5, 3, 2}, {}, {}});
  CHECK(grid == std::array<unsigned, 3>{3, 5, 3});
}

TEST_CASE("the block mask is [B or 1, Hq or 1, query tiles, KV tiles] per "
          "arch",
          "[runtime]") {
  json m = tinyManifest(nullptr);
  std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 300, 2}, {3, 5, 129, 2}, {3, 5, 129, 2}, {}, {}};
  // No block mask: nothing to allocate.
  CHECK(manifestFrom(m).blockMaskShape(shapes).empty());
  m["block_n"] = 32;
  m["block_mask"] = {{"kernel", "tiny_block_mask"},
                     {"block", {128, 1, 1}},
                     {"batch", true},
                     {"heads", false}};
  // sm_90a: its own tiles and a mask that also reads the head.
  m["archs"]["sm_90a"]["block_m"] = 128;
  m["archs"]["sm_90a"]["block_n"] = 64;
  m["archs"]["sm_90a"]["block_mask"] = {{"kernel", "tiny_block_mask"},
                                        {"block", {128, 1, 1}},
                                        {"batch", false},
                                        {"heads", true}};
  KernelManifest manifest = manifestFrom(m);
  CHECK(manifest.forArtifact("tiny.sm_80.ptx").blockMaskShape(shapes) ==
        std::vector<int64_t>{3, 1, 75, 5});
  CHECK(manifest.forArtifact("tiny.sm_90a.cubin").blockMaskShape(shapes) ==
        std::vector<int64_t>{1, 5, 3, 3});
  m["block_mask"]["batch"] = "yes";
  CHECK_THROWS_AS(manifestFrom(m).blockMaskShape(shapes), ManifestError);
  // Malformed entries are refused when the manifest is read, with the
  // runtime's error, not the JSON library's.
  m["block_mask"] = "tiny_block_mask";
  CHECK_THROWS_AS(manifestFrom(m), ManifestError);
  m["block_mask"] = nullptr;
  m["archs"]["sm_90a"]["block_mask"] = {{"kernel", "tiny_block_mask"},
                                        {"block", {128, 1}},
                                        {"batch", false},
                                        {"heads", true}};
  CHECK_THROWS_AS(manifestFrom(m).forArtifact("tiny.sm_90a.cubin"),
                  ManifestError);
}

TEST_CASE("reference softmax matches a hand computation", "[reference]") {
  KernelManifest m = manifestFrom(tinyManifest(program("softmax", nullptr)));
  std::vector<HostTensor> out = evaluateReference(m, tinyInputs(), {});
  REQUIRE(out.size() == 2);
  // Row 0: q = (1, 0): s = 0.5 * (1, 2, 0) = (0.5, 1, 0).
  double e[] = {std::exp(0.5), std::exp(1.0), std::exp(0.0)};
  double den = e[0] + e[1] + e[2];
  CHECK(out[0].data[0] == Approx((e[0] * 1 + e[1] * 3 + e[2] * 5) / den));
  CHECK(out[0].data[1] == Approx((e[0] * 2 + e[1] * 4 + e[2] * 6) / den));
  CHECK(out[1].data[0] == Approx(std::log(den)));
}

TEST_CASE("reference rounds half to even in a score region", "[reference]") {
  // score = roundeven(s) (args: s, b, h, q, kv -> ids 0..4): TOSA's
  // float-to-int casts round so.
  json score = {
      {"num_args", 5},
      {"ops", {{{"op", "math.roundeven"}, {"type", "f32"}, {"operands", {0}}}}},
      {"yield", {5}}};
  json p = program("softmax", nullptr);
  p["score"] = score;
  KernelManifest m = manifestFrom(tinyManifest(p));
  std::vector<HostTensor> out = evaluateReference(m, tinyInputs(), {});
  // Row 0: s = (0.5, 1, 0) rounds to (0, 1, 0): 0.5 goes to 0, not 1.
  double e = std::exp(1.0);
  CHECK(out[0].data[0] == Approx((1 + 3 * e + 5) / (2 + e)));
}

TEST_CASE("reference applies the mask region and sigmoid", "[reference]") {
  // keep = kv <= q  (args: b, h, q, kv -> ids 0..3)
  json causal = {{"num_args", 4},
                 {"ops",
                  {{{"op", "arith.cmpi"},
                    {"type", "i1"},
                    {"operands", {3, 2}},
                    {"predicate", "sle"}}}},
                 {"yield", {4}}};
  KernelManifest m = manifestFrom(tinyManifest(program("softmax", causal)));
  std::vector<HostTensor> out = evaluateReference(m, tinyInputs(), {0});
  // Row 0 sees key 0 only: output = v[0]; row 1 was not computed (NaN).
  CHECK(out[0].data[0] == Approx(1.0));
  CHECK(out[0].data[1] == Approx(2.0));
  CHECK(std::isnan(out[0].data[2]));
  CHECK(out[1].data[0] == Approx(0.5));

  KernelManifest s = manifestFrom(tinyManifest(program("sigmoid", causal)));
  out = evaluateReference(s, tinyInputs(), {0});
  CHECK(out[0].data[0] == Approx(1.0 / (1.0 + std::exp(-0.5))));
}

TEST_CASE("reference value_columns: each branch writes its own columns",
          "[reference]") {
  // Two branches on the same Q and K, scales 0.5 and 1, no normalizer:
  // branch 0 weighs V's column 0, branch 1 column 1.
  json p = program("none", nullptr);
  p["branches"] = 2;
  p["scale"] = {0.5, 1.0};
  p["queries"] = {0, 0};
  p["keys"] = {1, 1};
  p["num_lse"] = 0;
  p["value_columns"] = {1, 1};
  KernelManifest m = manifestFrom(tinyManifest(p));
  std::vector<HostTensor> out = evaluateReference(m, tinyInputs(), {0});
  // Row 0: q.k = (1, 2, 0); V = [[1, 2], [3, 4], [5, 6]].
  CHECK(out[0].data[0] == Approx(0.5 * 1 + 1.0 * 3)); // 0.5 q.k . V[:, 0]
  CHECK(out[0].data[1] == Approx(1.0 * 2 + 2.0 * 4)); // q.k . V[:, 1]
}

TEST_CASE("without a driver, the runtime says so", "[runtime]") {
  try {
    CudaDriver::get();
    SUCCEED("a CUDA driver is installed here");
  } catch (const CudaError &e) {
    CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
  }
}

TEST_CASE("driver entry points resolve to the versions cuda.h names",
          "[runtime]") {
  // cuda.h maps these to their _v2, which keep the declared signatures.
  CHECK(driverSymbol("cuMemAlloc") == "cuMemAlloc_v2");
  CHECK(driverSymbol("cuMemcpyDtoH") == "cuMemcpyDtoH_v2");
  CHECK(driverSymbol("cuEventDestroy") == "cuEventDestroy_v2");
  CHECK(driverSymbol("cuMemcpyDtoDAsync") == "cuMemcpyDtoDAsync_v2");
  CHECK(driverSymbol("cuMemsetD8Async") == "cuMemsetD8Async");
  // cuCtxSynchronize_v2 takes a context: calling it as cuCtxSynchronize()
  // passed a stale register as the context and crashed the driver at
  // random (flashlight-run, gqa M = N = 17 on an H100/H200, a third of
  // runs). The unversioned entry point is the one declared.
  CHECK(driverSymbol("cuCtxSynchronize") == "cuCtxSynchronize");
  CHECK(driverSymbol("cuLaunchKernel") == "cuLaunchKernel");
}

namespace {

/// `einsum` over random a and b the naive way, and as the GEMM planGemm
/// plans (column-major, op(A) op(B), batched by strides) computed on the
/// CPU; the largest difference, or -1 when there is no plan.
double gemmPlanError(const std::string &einsum, std::vector<int64_t> a,
                     std::vector<int64_t> b, std::vector<int64_t> out) {
  std::optional<GemmPlan> plan = planGemm(einsum, a, b, out);
  if (!plan)
    return -1;
  auto count = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  std::vector<double> x(count(a)), y(count(b)), want(count(out), 0),
      got(count(out), 0);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = double((i * 7919) % 13) - 6;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = double((i * 104729) % 11) - 5;
  // Naive: every assignment of the letters.
  size_t comma = einsum.find(','), arrow = einsum.find("->");
  std::string la = einsum.substr(0, comma),
              lb = einsum.substr(comma + 1, arrow - comma - 1),
              lo = einsum.substr(arrow + 2);
  std::string letters;
  std::map<char, int64_t> size;
  for (auto [l, s] : {std::pair{la, a}, {lb, b}, {lo, out}})
    for (size_t d = 0; d < l.size(); ++d)
      if (size.emplace(l[d], s[d]).second)
        letters += l[d];
  std::map<char, int64_t> at;
  for (char c : letters)
    at[c] = 0;
  auto offset = [&](const std::string &l, const std::vector<int64_t> &s) {
    int64_t o = 0;
    for (size_t d = 0; d < l.size(); ++d)
      o = o * s[d] + at[l[d]];
    return o;
  };
  while (true) {
    want[offset(lo, out)] += x[offset(la, a)] * y[offset(lb, b)];
    size_t d = 0;
    for (; d < letters.size(); ++d) {
      if (++at[letters[d]] < size[letters[d]])
        break;
      at[letters[d]] = 0;
    }
    if (d == letters.size())
      break;
  }
  // The plan.
  const std::vector<double> &p = plan->swapped ? y : x,
                            &q = plan->swapped ? x : y;
  for (int64_t t = 0; t < plan->batch; ++t)
    for (int64_t i = 0; i < plan->m; ++i)
      for (int64_t j = 0; j < plan->n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < plan->k; ++l) {
          int64_t ia = plan->transA ? l + i * plan->lda : i + l * plan->lda;
          int64_t ib = plan->transB ? j + l * plan->ldb : l + j * plan->ldb;
          sum += p[t * plan->strideA + ia] * q[t * plan->strideB + ib];
        }
        got[t * plan->strideC + i + j * plan->ldc] += sum;
      }
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(want[i] - got[i]));
  return worst;
}

} // namespace

TEST_CASE("einsum steps plan as cuBLAS GEMMs that compute them", "[runtime]") {
  // Projections, attention-shaped batched products, transposed operands,
  // batch dims between the matrix dims, unit dims.
  CHECK(gemmPlanError("abd,cd->abc", {2, 3, 4}, {5, 4}, {2, 3, 5}) == 0);
  CHECK(gemmPlanError("abc,cd->abd", {2, 3, 4}, {4, 5}, {2, 3, 5}) == 0);
  CHECK(gemmPlanError("bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5},
                      {2, 3, 4, 6}) == 0);
  CHECK(gemmPlanError("bhqk,bhkd->bhqd", {2, 3, 4, 6}, {2, 3, 6, 5},
                      {2, 3, 4, 5}) == 0);
  CHECK(gemmPlanError("ji,jk->ik", {3, 4}, {3, 5}, {4, 5}) == 0);
  CHECK(gemmPlanError("ij,kj->ki", {4, 3}, {5, 3}, {5, 4}) == 0);
  CHECK(gemmPlanError("bij,bjk->ibk", {2, 3, 4}, {2, 4, 5}, {3, 2, 5}) == 0);
  CHECK(gemmPlanError("bhd,bd->bh", {2, 3, 4}, {2, 4}, {2, 3}) == 0);
  CHECK(gemmPlanError("abc,abd->cd", {2, 3, 4}, {2, 3, 5}, {4, 5}) == 0);
  CHECK(gemmPlanError("bhqd,bkd->bhqk", {2, 3, 4, 5}, {2, 6, 5},
                      {2, 3, 4, 6}) == 0);
  CHECK(gemmPlanError("ij,jk->ik", {1, 3}, {3, 1}, {1, 1}) == 0);
  // Row (column) letters split by a contracted one: the leading ones
  // batch, the other operand broadcast (Gemma's output projection).
  CHECK(gemmPlanError("abc,bd->acd", {2, 3, 4}, {3, 5}, {2, 4, 5}) == 0);
  CHECK(gemmPlanError("abfc,def->abcde", {2, 3, 4, 5}, {6, 7, 4},
                      {2, 3, 5, 6, 7}) == 0);
  CHECK(gemmPlanError("cd,adb->cab", {4, 3}, {2, 3, 5}, {4, 2, 5}) == 0);
  CHECK(gemmPlanError("abe,ced->abcd", {2, 3, 4}, {5, 4, 6}, {2, 3, 5, 6}) ==
        0);
  // Not a matrix product of these buffers: no plan (the step's kernel).
  // (Split rows where the other operand holds batch letters: its batch
  // would need two strides.)
  CHECK(gemmPlanError("xabc,xbd->xacd", {2, 3, 4, 5}, {2, 4, 6},
                      {2, 3, 5, 6}) == -1);
  CHECK(gemmPlanError("ab,b->", {2, 3}, {3}, {}) == -1);
  CHECK(gemmPlanError("ii,ij->j", {3, 3}, {3, 4}, {4}) == -1);
  CHECK(gemmPlanError("bij,bjk->bki", {2, 3, 4}, {2, 4, 5}, {2, 5, 3}) == 0);
  CHECK(gemmPlanError("ibj,jk->kbi", {3, 2, 4}, {4, 5}, {5, 2, 3}) == -1);
}
