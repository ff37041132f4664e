// What a host recipe's log says while it runs: images/kubernetes/compile.sh (run by
// host.sh) writes one line per phase to stderr, each starting with the recipe's name
// ("kubernetes: compiling kube-apiserver (go1.19.8)"). The build's compile step shows
// them as progress; these functions read them, and are pure.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sprout {

// CompileLog is what the recipe's lines have said so far.
struct CompileLog {
  bool cached = false;   // "cached: FOLDER": the binaries were in the cache, nothing compiled
  std::string folder;    // the folder it named: cached, or "compiled into FOLDER"
  std::string phase;     // the text of its last line, "" before the first
  std::string building;  // the component being compiled now ("compiling NAME (...)")
  std::vector<std::pair<std::string, int>> compiled;  // "compiled NAME in N s", in order
};

// ParseCompileLog reads the lines of log that start with "NAME: " (other lines, such as
// dpkg-source's and the Go compiler's, are skipped).
CompileLog ParseCompileLog(std::string_view log, std::string_view name);

// CompilePhase is the progress line for log: "cache hit", or the phase with "cache miss"
// after a colon, such as "compiling kube-apiserver: cache miss, 2 compiled"; "" before
// the recipe has said anything. The part before the colon names the phase, so a table
// of phase times has one row per component.
std::string CompilePhase(const CompileLog& log);

// CompileSummary is the step's result: "cache hit: FOLDER" or "cache miss: 6 components
// compiled into FOLDER".
std::string CompileSummary(const CompileLog& log);

// CompileTimes lists the compiled components with their times, "kube-apiserver 190 s,
// kubelet 120 s"; "" when nothing was compiled.
std::string CompileTimes(const CompileLog& log);

}  // namespace sprout
