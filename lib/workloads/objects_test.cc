#include "workloads/objects.h"

#include <catch2/catch.hpp>

#include "util/sha256.h"

using namespace sprout;
using namespace sprout::workloads;

namespace {

std::vector<Object> Parse(const std::string& text, Diagnostics& d, std::size_t workload = 0) {
  return ParseObjects(text, Text{"m.yaml", false, false, workload}, d);
}

std::vector<Object> Parse(const std::string& text, std::size_t workload = 0) {
  Diagnostics d;
  auto out = Parse(text, d, workload);
  INFO(d.Render());
  CHECK_FALSE(d.has_errors());
  return out;
}

const char* kDeployment = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      initContainers:
        - {name: init, image: localhost/sprout/busybox:1.35}
      containers:
        - {name: httpd, image: localhost/sprout/busybox:1.35, imagePullPolicy: IfNotPresent}
        - {name: side, image: "registry.example:5000/tools/side:2"}
)";

}  // namespace

TEST_CASE("a stream splits at '---' lines; empty documents are dropped; lines are the file's", "[workloads]") {
  auto objects = Parse(
      "# a comment only\n"
      "---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {port: 80, on: yes, mode: 0644}\n"
      "---\n"
      "---   # nothing here\n"
      "--- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n"
      "...\n");
  REQUIRE(objects.size() == 2);
  CHECK(objects[0].kind == "ConfigMap");
  CHECK(objects[0].line == 3);
  CHECK(objects[0].file == "m.yaml");
  // Typed as kubectl reads it.
  CHECK(objects[0].body["data"].dump() == R"({"port":80,"true":true,"mode":420})");
  CHECK(objects[1].kind == "Secret");
  CHECK(objects[1].line == 9);
}

TEST_CASE("a v1 List is its items", "[workloads]") {
  auto objects = Parse(
      "apiVersion: v1\nkind: List\nitems:\n"
      "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
      "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n");
  REQUIRE(objects.size() == 2);
  CHECK(objects[1].name == "b");
}

TEST_CASE("bad documents are each reported with the file's line, and the rest is kept", "[workloads]") {
  Diagnostics d;
  auto objects = Parse(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"       // 1
      "---\n"                                                         // 4
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [x\n"        // 5-7: not YAML
      "---\n"                                                         // 8
      "kind: ConfigMap\nmetadata: {name: c}\n"                        // 9: no apiVersion
      "---\n"                                                         // 11
      "apiVersion: v1\nkind: Secret\nmetadata: {generateName: s-}\n"  // 12
      "---\n"                                                         // 15
      "- just\n- a list\n",                                           // 16
      d);
  const std::string out = d.Render();
  INFO(out);
  REQUIRE(objects.size() == 1);
  CHECK(d.error_count() == 4);
  CHECK_THAT(out, Catch::Contains("m.yaml:8:1: error: this is not valid YAML"));
  CHECK_THAT(out, Catch::Contains("m.yaml:9:1: error: this object has no apiVersion"));
  CHECK_THAT(out, Catch::Contains("hint: every object names its 'apiVersion' and 'kind'"));
  CHECK_THAT(out, Catch::Contains("m.yaml:12:1: error: Secret has a metadata.generateName, but no metadata.name"));
  CHECK_THAT(out, Catch::Contains("m.yaml:16:1: error: a manifest must be a mapping (one Kubernetes object), but this "
                                  "document is a list"));
}

TEST_CASE("a chart's output names each object's template, not a line of it", "[workloads]") {
  Diagnostics d;
  const std::string text =
      "---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
      "---\n# Source: demo/templates/bad.yaml\napiVersion: v1\nmetadata: {name: b}\n";
  auto folder = ParseObjects(text, Text{"charts/demo", true, true, 0}, d);
  REQUIRE(folder.size() == 1);
  CHECK(folder[0].file == "charts/demo/templates/cm.yaml");
  CHECK(folder[0].line == 0);
  CHECK_THAT(d.Render(), Catch::Contains("charts/demo/templates/bad.yaml: error: this object has no kind (line 1 of "
                                         "what the chart renders for demo/templates/bad.yaml)"));
  Diagnostics e;
  auto packaged = ParseObjects(text, Text{"demo-0.1.0.tgz", true, false, 0}, e);
  REQUIRE(packaged.size() == 1);
  CHECK(packaged[0].file == "demo-0.1.0.tgz: demo/templates/cm.yaml");
}

TEST_CASE("Helm hooks are known by their annotation", "[workloads]") {
  auto objects = Parse(
      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, annotations: {helm.sh/hook: pre-install}}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {a: b}}\n");
  REQUIRE(objects.size() == 2);
  CHECK(IsHelmHook(objects[0]));
  CHECK_FALSE(IsHelmHook(objects[1]));
}

TEST_CASE("served APIs: 1.36's table, CRDs of the set, and a fix for what is not served", "[workloads]") {
  ServedApis apis;
  REQUIRE(apis.Find("apps/v1", "Deployment"));
  CHECK(apis.Find("apps/v1", "Deployment")->namespaced);
  CHECK_FALSE(apis.Find("rbac.authorization.k8s.io/v1", "ClusterRole")->namespaced);
  CHECK_FALSE(apis.Find("v1", "Namespace")->namespaced);
  CHECK_FALSE(apis.Find("apps/v1beta2", "Deployment"));
  CHECK_FALSE(apis.Find("policy/v1beta1", "PodDisruptionBudget"));
  CHECK(apis.Suggest("extensions/v1beta1", "Ingress") ==
        "use 'apiVersion: networking.k8s.io/v1'; Kubernetes 1.36 serves Ingress there");
  CHECK(apis.Suggest("autoscaling/v2beta2", "HorizontalPodAutoscaler") ==
        "use 'apiVersion: autoscaling/v2'; Kubernetes 1.36 serves HorizontalPodAutoscaler there");
  CHECK(apis.Suggest("batch/v1beta1", "CronJob") == "use 'apiVersion: batch/v1'; Kubernetes 1.36 serves CronJob there");
  CHECK(apis.Suggest("apps/v1", "Deploymnet") == "did you mean 'Deployment'?");
  CHECK_THAT(apis.Suggest("policy/v1beta1", "PodSecurityPolicy"), Catch::Contains("removed in Kubernetes 1.25"));
  CHECK_THAT(apis.Suggest("demo.example.com/v1", "Greeting"),
             Catch::Contains("no CustomResourceDefinition in the workloads defines Greeting in demo.example.com/v1"));

  Diagnostics d;
  auto crds = Parse(R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.demo.example.com}
spec:
  group: demo.example.com
  scope: Cluster
  names: {kind: Greeting, plural: greetings}
  versions:
    - {name: v1alpha1, served: true, storage: true}
    - {name: v1alpha0, served: false, storage: false}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: wrong.example.com}
spec:
  group: demo.example.com
  scope: Namespaced
  names: {kind: Other, plural: others}
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: empties.example.com}
spec: {group: example.com}
)");
  AddCrds(crds, apis, d);
  const std::string out = d.Render();
  INFO(out);
  CHECK(d.error_count() == 2);
  CHECK_THAT(out, Catch::Contains("m.yaml:12:1: error: CustomResourceDefinition wrong.example.com must be named "
                                  "others.demo.example.com"));
  CHECK_THAT(out, Catch::Contains("m.yaml:21:1: error: CustomResourceDefinition empties.example.com has no "
                                  "spec.names.kind, spec.names.plural, spec.scope (Namespaced or Cluster), a version "
                                  "with 'served: true' in spec.versions"));
  REQUIRE(apis.Find("demo.example.com/v1alpha1", "Greeting"));
  CHECK_FALSE(apis.Find("demo.example.com/v1alpha1", "Greeting")->namespaced);
  CHECK_FALSE(apis.Find("demo.example.com/v1alpha0", "Greeting"));
  CHECK_FALSE(apis.Find("demo.example.com/v1", "Other"));
  auto helm = apis.HelmApiVersions();
  CHECK(std::find(helm.begin(), helm.end(), "demo.example.com/v1alpha1/Greeting") != helm.end());
  CHECK(std::find(helm.begin(), helm.end(), "apps/v1") != helm.end());
  CHECK(std::find(helm.begin(), helm.end(), "v1/ConfigMap") != helm.end());
}

TEST_CASE("CheckServed names the object, the API and the fix; requests are refused", "[workloads]") {
  Diagnostics d;
  auto objects = Parse(
      "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: web, namespace: demo}\n---\n"
      "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nmetadata: {name: r}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n");
  CheckServed(objects, ServedApis(), d);
  const std::string out = d.Render();
  INFO(out);
  CHECK(d.error_count() == 2);
  CHECK_THAT(out, Catch::Contains("m.yaml:1:1: error: Ingress demo/web: Kubernetes 1.36 does not serve Ingress in "
                                  "extensions/v1beta1"));
  CHECK_THAT(out, Catch::Contains("hint: use 'apiVersion: networking.k8s.io/v1'"));
  CHECK_THAT(out, Catch::Contains("m.yaml:5:1: error: SubjectAccessReview r: a SubjectAccessReview is a request the "
                                  "API answers, not an object it keeps"));
}

TEST_CASE("namespaces: filled for namespaced objects, dropped from cluster-scoped ones, made when missing",
          "[workloads]") {
  ServedApis apis;
  apis.AddCrd("demo.example.com", "Greeting", "Namespaced", {"v1alpha1"});
  auto objects = Parse(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: other}\n---\n"
      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: demo}\n---\n"
      "apiVersion: demo.example.com/v1alpha1\nkind: Greeting\nmetadata: {name: g}\n---\n"
      "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n"
      "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: kube-system}\n");
  FillNamespaces(objects, {"demo"}, apis);
  CHECK(objects[0].ns == "demo");
  CHECK(objects[0].body["metadata"]["namespace"] == "demo");
  CHECK(objects[1].ns == "other");
  CHECK(objects[2].ns.empty());
  CHECK_FALSE(objects[2].body["metadata"].contains("namespace"));
  CHECK(objects[3].ns == "demo");
  CHECK(objects[4].ns.empty());
  // demo is made; other has its Namespace object; kube-system is Kubernetes' own.
  auto made = MissingNamespaces(objects);
  REQUIRE(made.size() == 1);
  CHECK(made[0].name == "demo");
  CHECK(made[0].body.dump() == R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}})");
}

TEST_CASE("an object that is in the set twice is an error at the second, naming the first", "[workloads]") {
  Diagnostics d;
  auto objects = Parse(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: demo}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
      "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n",
      d);
  FillNamespaces(objects, {"demo"}, ServedApis());
  CheckDuplicates(objects, d);
  INFO(d.Render());
  CHECK(d.error_count() == 1);
  CHECK_THAT(d.Render(), Catch::Contains("m.yaml:5:1: error: ConfigMap demo/a is already in the workloads (m.yaml:1)"));
}

TEST_CASE("images: every container of every pod-making kind", "[workloads]") {
  auto objects = Parse(std::string(kDeployment) + R"(---
apiVersion: batch/v1
kind: CronJob
metadata: {name: c}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, image: localhost/cron:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: a, image: localhost/a:1}]
  ephemeralContainers: [{name: debug, image: localhost/debug:1}]
  volumes: [{name: data, image: {reference: localhost/data:1, pullPolicy: IfNotPresent}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: nothing}
data: {image: localhost/not-an-image:1}
)");
  REQUIRE(objects.size() == 4);
  auto web = PodImages(objects[0]);
  REQUIRE(web.size() == 3);
  CHECK(web[0].where == "spec.template.spec.initContainers[0]");
  CHECK(web[0].container == "init");
  CHECK(web[1].pull_policy == "IfNotPresent");
  CHECK(web[2].image == "registry.example:5000/tools/side:2");
  auto cron = PodImages(objects[1]);
  REQUIRE(cron.size() == 1);
  CHECK(cron[0].where == "spec.jobTemplate.spec.template.spec.containers[0]");
  auto pod = PodImages(objects[2]);
  REQUIRE(pod.size() == 3);
  CHECK(pod[1].where == "spec.ephemeralContainers[0]");
  CHECK(pod[2].where == "spec.volumes[0].image");
  CHECK(pod[2].image == "localhost/data:1");
  CHECK(PodImages(objects[3]).empty());
}

TEST_CASE("images are compared as the runtime resolves them", "[workloads]") {
  CHECK(CanonicalImage("nginx") == "docker.io/library/nginx:latest");
  CHECK(CanonicalImage("nginx:1.27") == "docker.io/library/nginx:1.27");
  CHECK(CanonicalImage("bitnami/redis:7") == "docker.io/bitnami/redis:7");
  CHECK(CanonicalImage("localhost/sprout/busybox:1.35") == "localhost/sprout/busybox:1.35");
  CHECK(CanonicalImage("registry.example:5000/app") == "registry.example:5000/app:latest");
  CHECK_FALSE(CanonicalImage("Not An Image"));
}

TEST_CASE("an image the profile does not preload fails, naming the object, the file and the image", "[workloads]") {
  Diagnostics d;
  auto objects = Parse(std::string(kDeployment) + R"(---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: demo}
spec:
  containers:
    - {name: a, image: "nginx:1.27"}
    - {name: b, image: "localhost/pinned@sha256:)" +
                           std::string(64, 'a') + R"("}
    - {name: c, image: "localhost/always:1", imagePullPolicy: Always}
    - {name: d, image: "localhost/floating"}
)",
                       d);
  FillNamespaces(objects, {"demo"}, ServedApis());
  CheckImages(objects,
              {"localhost/sprout/busybox:1.35", "docker.io/library/nginx:1.27",
               "localhost/pinned:v2@sha256:" + std::string(64, 'a'), "localhost/always:1", "localhost/floating:latest"},
              d);
  const std::string out = d.Render();
  INFO(out);
  CHECK(d.error_count() == 3);
  CHECK_THAT(out, Catch::Contains("m.yaml:1:1: error: Deployment demo/web: container 'side' "
                                  "(spec.template.spec.containers[1]) runs image 'registry.example:5000/tools/side:2', "
                                  "which the profile does not preload"));
  CHECK_THAT(out, Catch::Contains("hint: add '- ref: registry.example:5000/tools/side:2' to the profile's 'images:'"));
  CHECK_THAT(out, Catch::Contains("m.yaml:13:1: error: Pod demo/p: container 'c' (spec.containers[2]) has "
                                  "imagePullPolicy Always"));
  CHECK_THAT(out, Catch::Contains("container 'd' (spec.containers[3]) runs 'localhost/floating' (the tag latest) with "
                                  "no imagePullPolicy"));
  REQUIRE(objects[0].images.size() == 2);
  CHECK(objects[0].images[0] == "localhost/sprout/busybox:1.35");
  CHECK(objects[0].images[1] == "registry.example:5000/tools/side:2");
  CHECK(objects[1].images.size() == 4);
}

TEST_CASE("order: CRDs, then Namespaces, then the rest as rendered; the index and files as the nodes read them",
          "[workloads]") {
  auto objects = Parse(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n---\n"
      "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n---\n"
      "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gs.example.com}\n---\n"
      "apiVersion: v1\nkind: Secret\nmetadata: {name: second}\n");
  auto more = Parse("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: b.c}\n", 1);
  objects.insert(objects.end(), more.begin(), more.end());
  FillNamespaces(objects, {"demo", "default"}, ServedApis());
  Order(objects);
  std::vector<std::string> names;
  names.reserve(objects.size());
  for (const auto& o : objects) names.push_back(o.name);
  CHECK(names == std::vector<std::string>{"gs.example.com", "b.c", "demo", "first", "second"});

  auto baked = Bake(
      {{"demo", "chart", "charts/demo", "demo", "demo", "0.1.0"}, {"extra", "manifests", "b.yaml", "", "default", ""}},
      objects);
  REQUIRE(baked.objects.size() == 5);
  CHECK(
      baked.objects[0] ==
      R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gs.example.com"}})"
      "\n");
  CHECK(baked.objects[3] == R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"first","namespace":"demo"}})"
                            "\n");
  std::string all;
  for (const auto& f : baked.objects) all += f;
  CHECK(baked.digest == "sha256:" + Sha256Hex(all));
  auto index = nlohmann::ordered_json::parse(baked.index_json);
  CHECK(index["version"] == 1);
  CHECK(index["digest"] == baked.digest);
  REQUIRE(index["workloads"].size() == 2);
  const auto& demo = index["workloads"][0];
  CHECK(
      demo.dump() ==
      R"({"name":"demo","type":"chart","source":"charts/demo","release":"demo","namespace":"demo","chartVersion":"0.1.0","objects":[)"
      R"({"file":"objects/0001.json","apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","namespace":"","name":"gs.example.com","images":[]},)"
      R"({"file":"objects/0003.json","apiVersion":"v1","kind":"Namespace","namespace":"","name":"demo","images":[]},)"
      R"({"file":"objects/0004.json","apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"first","images":[]},)"
      R"({"file":"objects/0005.json","apiVersion":"v1","kind":"Secret","namespace":"demo","name":"second","images":[]}]})");
  CHECK(index["workloads"][1]["objects"][0]["file"] == "objects/0002.json");
  CHECK(index["workloads"][1]["release"] == "");
  CHECK(ObjectFile(9999) == "objects/10000.json");
  // The same input gives the same bytes.
  CHECK(Bake({{"demo", "chart", "charts/demo", "demo", "demo", "0.1.0"},
              {"extra", "manifests", "b.yaml", "", "default", ""}},
             objects)
            .index_json == baked.index_json);
}

TEST_CASE("objects of the wrong shapes are reported or passed over, never thrown", "[workloads]") {
  Diagnostics d;
  std::vector<Object> objects;
  REQUIRE_NOTHROW(
      objects = Parse(
          "just a scalar\n---\n"
          "apiVersion: v1\nkind: ConfigMap\nmetadata: a string\n---\n"
          "apiVersion: v1\nkind: List\nitems: {not: a list}\n---\n"
          "apiVersion: v1\nkind: List\nitems: [1, {apiVersion: v1, kind: Secret, metadata: {name: s}}]\n---\n"
          "apiVersion: [v1]\nkind: Pod\nmetadata: {name: p}\n---\n"
          "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: {containers: a string}\n---\n"
          "apiVersion: v1\nkind: Pod\nmetadata: {name: r}\nspec: {containers: [1, {image: 2}], volumes: [3]}\n---\n"
          "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: []}\n---\n"
          "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.y}\n"
          "spec: {versions: [1, {served: yes}], names: []}\n",
          d));
  ServedApis apis;
  REQUIRE_NOTHROW(AddCrds(objects, apis, d));
  REQUIRE_NOTHROW(FillNamespaces(objects, {"demo"}, apis));
  REQUIRE_NOTHROW(CheckServed(objects, apis, d));
  REQUIRE_NOTHROW(CheckImages(objects, {"localhost/a:1"}, d));
  REQUIRE_NOTHROW(Order(objects));
  REQUIRE_NOTHROW(Bake({{"w", "manifests", "m.yaml", "", "demo", ""}}, objects));
  INFO(d.Render());
  // The Secret of the List, the Pods q and r, the CronJob and the CRD are objects; r's
  // containers have no image it can name.
  CHECK(objects.size() == 5);
  CHECK_THAT(d.Render(), Catch::Contains("a manifest must be a mapping (one Kubernetes object), but this document is "
                                         "a single value"));
  CHECK_THAT(d.Render(), Catch::Contains("ConfigMap has no metadata.name"));
  CHECK_THAT(d.Render(), Catch::Contains("this List has no 'items'"));
  CHECK_THAT(d.Render(), Catch::Contains("Pod demo/r: container '' (spec.containers[0]) names no image"));
}
