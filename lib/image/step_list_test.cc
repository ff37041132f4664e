#include "image/step_list.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

using namespace sprout;

namespace {

std::vector<std::string> Names(const std::vector<BuildStep>& steps) {
  std::vector<std::string> out;
  for (auto s : steps) out.emplace_back(StepName(s));
  return out;
}

// Made is a step's output in these tests; Run finds its Summary by argument lookup.
struct Made {
  int n;
};
std::string Summary(const Made& m) { return "made " + std::to_string(m.n); }

}  // namespace

TEST_CASE("a raw-only build runs ten steps, the manifest last", "[steps]") {
  CHECK(Names(BuildSteps({Format::kRaw})) ==
        std::vector<std::string>{"resolve profile", "prepare base OS", "preload container images",
                                 "assemble root and pack squashfs", "build verity hash tree", "make initrd", "make ESP",
                                 "make state partition", "write raw disk", "write manifest, SBOM and checksums"});
}

TEST_CASE("a profile whose kubelet comes from a recipe compiles it in a step of its own, second", "[steps]") {
  auto steps = BuildSteps({Format::kRaw}, true);
  REQUIRE(steps.size() == 11);
  CHECK(Names({steps.begin(), steps.begin() + 3}) ==
        std::vector<std::string>{"resolve profile", "compile Kubernetes (kubelet recipe)", "prepare base OS"});
  CHECK(BuildSteps({Format::kRaw}, false).size() == 10);
  CHECK(BuildSteps({Format::kRaw, Format::kIso}, true).size() == 12);
}

TEST_CASE("a profile with workloads renders them right after the profile, before any long step", "[steps]") {
  auto steps = BuildSteps({Format::kRaw}, true, true);
  REQUIRE(steps.size() == 12);
  CHECK(Names({steps.begin(), steps.begin() + 4}) == std::vector<std::string>{"resolve profile", "render workloads",
                                                                              "compile Kubernetes (kubelet recipe)",
                                                                              "prepare base OS"});
  CHECK(Names(BuildSteps({Format::kRaw}, false, true))[1] == "render workloads");
  CHECK(BuildSteps({Format::kRaw}, false, false).size() == 10);
}

TEST_CASE("each medium beyond the raw disk adds its step, in a fixed order", "[steps]") {
  auto all = BuildSteps({Format::kQcow2, Format::kPxe, Format::kRaw, Format::kIso});
  REQUIRE(all.size() == 13);
  CHECK(Names({all.begin() + 9, all.end()}) == std::vector<std::string>{"write hybrid ISO", "write PXE bundle",
                                                                        "convert to qcow2",
                                                                        "write manifest, SBOM and checksums"});
  // The raw disk is written even when it is not kept: every other medium comes from it.
  CHECK(BuildSteps({Format::kQcow2}).size() == 11);
  CHECK(Names(BuildSteps({Format::kQcow2}))[8] == "write raw disk");
  // A format named twice is one medium, one step.
  CHECK(BuildSteps({Format::kIso, Format::kIso}).size() == 11);
  CHECK(MediaSteps({Format::kRaw}).empty());
  CHECK(MediaSteps({Format::kPxe, Format::kIso}) == std::vector<BuildStep>{BuildStep::kIso, BuildStep::kPxe});
}

TEST_CASE("StepProgress counts through the step list it was given", "[steps]") {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  REQUIRE(out != nullptr);
  {
    StepProgress steps(false, BuildSteps({Format::kRaw, Format::kIso}), out);
    for (auto s : BuildSteps({Format::kRaw, Format::kIso})) {
      steps.Begin(s);
      steps.End("ok");
    }
    CHECK(steps.Table().find("write hybrid ISO") != std::string::npos);
  }
  std::fclose(out);
  std::string text(buf, len);
  std::free(buf);
  CHECK(text.starts_with("[1/11] resolve profile ...\n[1/11] resolve profile: done in "));
  CHECK(text.find("[10/11] write hybrid ISO: done in ") != std::string::npos);
  CHECK(text.find("[11/11] write manifest, SBOM and checksums: done in ") != std::string::npos);
  CHECK(text.find("/10]") == std::string::npos);
}

TEST_CASE("StepProgress::Run shows a step around its work and its summary", "[steps]") {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  REQUIRE(out != nullptr);
  {
    StepProgress steps(false, BuildSteps({Format::kRaw}), out);
    auto made = steps.Run(
        BuildStep::kResolveProfile, [](int n) -> Result<Made> { return Made{n}; }, 7);
    REQUIRE(made);
    CHECK(made->n == 7);
    auto failed = steps.Run(BuildStep::kPrepareBase, []() -> Result<Made> { return Fail("no base"); });
    CHECK(failed.error() == "no base");
  }
  std::fclose(out);
  std::string text(buf, len);
  std::free(buf);
  CHECK(text.find("[1/10] resolve profile: done in ") != std::string::npos);
  CHECK(text.find(", made 7\n") != std::string::npos);
  CHECK(text.find("[2/10] prepare base OS ...\n") != std::string::npos);
  CHECK(text.find("prepare base OS: done") == std::string::npos);  // a failed step is not done
}
