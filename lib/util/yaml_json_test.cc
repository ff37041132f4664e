#include "util/yaml_json.h"

#include <catch2/catch.hpp>

using namespace sprout;

namespace {

std::string Json(const std::string& yaml, Diagnostics& d) {
  auto j = YamlToJson(YAML::Load(yaml), "m.yaml", 0, d);
  return j ? j->dump() : "-";
}

std::string Json(const std::string& yaml) {
  Diagnostics d;
  std::string out = Json(yaml, d);
  INFO(d.Render());
  CHECK_FALSE(d.has_errors());
  return out;
}

}  // namespace

TEST_CASE("plain scalars resolve as go-yaml v2 (kubectl's YAML) resolves them", "[yaml]") {
  CHECK(ResolvePlainScalar("yes")->dump() == "true");
  CHECK(ResolvePlainScalar("Off")->dump() == "false");
  CHECK(ResolvePlainScalar("~")->dump() == "null");
  CHECK(ResolvePlainScalar("80")->dump() == "80");
  CHECK(ResolvePlainScalar("-3")->dump() == "-3");
  CHECK(ResolvePlainScalar("0644")->dump() == "420");  // octal, as a Secret's defaultMode
  CHECK(ResolvePlainScalar("0x1F")->dump() == "31");
  CHECK(ResolvePlainScalar("0b101")->dump() == "5");
  CHECK(ResolvePlainScalar("1_000")->dump() == "1000");
  CHECK(ResolvePlainScalar("1e3")->dump() == "1000");  // a float that is whole is written as Go writes it
  CHECK(ResolvePlainScalar("0.5")->dump() == "0.5");
  CHECK(ResolvePlainScalar(".5")->dump() == "0.5");
  CHECK(ResolvePlainScalar("08")->dump() == "8");  // not octal, so go-yaml's float rule takes it
  CHECK(ResolvePlainScalar("18446744073709551615")->dump() == "18446744073709551615");
  CHECK(ResolvePlainScalar("1.2.3")->dump() == "\"1.2.3\"");
  CHECK(ResolvePlainScalar("2026-12-04")->dump() == "\"2026-12-04\"");  // timestamps stay text
  CHECK(ResolvePlainScalar("1:20")->dump() == "\"1:20\"");              // no sexagesimal
  CHECK(ResolvePlainScalar("v1")->dump() == "\"v1\"");
  CHECK(ResolvePlainScalar("-")->dump() == "\"-\"");
  CHECK_FALSE(ResolvePlainScalar(".inf"));
  CHECK_FALSE(ResolvePlainScalar(".NaN"));
  // Out of a double's range, Go's ParseFloat fails and go-yaml keeps the text.
  CHECK(ResolvePlainScalar(".5e999")->dump() == "\".5e999\"");
  CHECK(ResolvePlainScalar("1e999")->dump() == "\"1e999\"");
}

TEST_CASE("quoted scalars and block text stay text; order is kept", "[yaml]") {
  CHECK(Json("b: '80'\na: \"yes\"\nc: |\n  x\nd: !!str 5\n") == R"({"b":"80","a":"yes","c":"x\n","d":"5"})");
  CHECK(Json("ports: [80, {port: 443}]\nempty:\nlist: []\n") ==
        R"({"ports":[80,{"port":443}],"empty":null,"list":[]})");
}

TEST_CASE("keys are written as sigs.k8s.io/yaml writes resolved keys", "[yaml]") {
  CHECK(Json("1: a\ntrue: b\nx: c\n") == R"({"1":"a","true":"b","x":"c"})");
}

TEST_CASE("merge keys merge, the mapping's own keys winning", "[yaml]") {
  CHECK(Json("base: &b {a: 1, b: 2}\nx:\n  b: 3\n  <<: *b\n  c: 4\n") ==
        R"({"base":{"a":1,"b":2},"x":{"b":3,"a":1,"c":4}})");
  CHECK(Json("p: &p {a: 1}\nq: &q {a: 2, z: 0}\nx:\n  <<: [*p, *q]\n") ==
        R"({"p":{"a":1},"q":{"a":2,"z":0},"x":{"a":1,"z":0}})");
}

TEST_CASE("what JSON cannot hold is an error at its line, offset into the file", "[yaml]") {
  Diagnostics d;
  auto j = YamlToJson(YAML::Load("a: 1\na: 2\n? [k]\n: v\nf: .inf\n"), "m.yaml", 10, d);
  CHECK_FALSE(j);
  const std::string out = d.Render();
  INFO(out);
  CHECK(d.error_count() == 3);
  CHECK_THAT(out, Catch::Contains("m.yaml:12:1: error: key 'a' appears twice in this mapping"));
  CHECK_THAT(out, Catch::Contains("m.yaml:13:3: error: a key here is a list, which JSON cannot hold"));
  CHECK_THAT(out, Catch::Contains("m.yaml:15:4: error: '.inf' is a floating-point value that JSON cannot hold"));
}
