#include "kube/workloads.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace sprout::kube {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');
const std::string kDigest2 = "sha256:" + std::string(64, 'b');

std::string Index(const std::string& objects, const std::string& extra = "") {
  return R"({"version":1,"digest":")" + kDigest + "\"" + extra +
         R"(,"workloads":[{"name":"demo","type":"chart","source":"charts/demo","release":"demo","namespace":"demo","chartVersion":"0.1.0","objects":[)" +
         objects + "]}]}";
}

const std::string kObjects =
    R"({"file":"objects/0001.json","apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","namespace":"","name":"widgets.example.com","images":[]},)"
    R"({"file":"objects/0002.json","apiVersion":"v1","kind":"Namespace","namespace":"","name":"demo","images":[]},)"
    R"({"file":"objects/0003.json","apiVersion":"apps/v1","kind":"Deployment","namespace":"demo","name":"web","images":["localhost/web:1"]},)"
    R"({"file":"objects/0004.json","apiVersion":"example.com/v1","kind":"Widget","namespace":"demo","name":"w1","images":[]})";

ObjectRef Ref(const std::string& v, const std::string& k, const std::string& ns, const std::string& n) {
  return {v, k, ns, n};
}

TEST_CASE("workloads: index.json is read with every object and its images") {
  auto index = ParseWorkloadIndex(Index(kObjects), "/usr/lib/sprout/workloads/index.json");
  REQUIRE(index.ok());
  CHECK(index->digest == kDigest);
  CHECK(index->serial == 0);
  REQUIRE(index->workloads.size() == 1);
  const auto& w = index->workloads[0];
  CHECK(w.name == "demo");
  CHECK(w.type == "chart");
  CHECK(w.release == "demo");
  CHECK(w.chart_version == "0.1.0");
  REQUIRE(w.objects.size() == 4);
  CHECK(w.objects[2].ref == Ref("apps/v1", "Deployment", "demo", "web"));
  CHECK(w.objects[2].images == std::vector<std::string>{"localhost/web:1"});
  CHECK(RefsOf(*index).size() == 4);
  auto with_serial = ParseWorkloadIndex(Index(kObjects, R"(,"serial":1700000001)"), "index.json");
  REQUIRE(with_serial.ok());
  CHECK(with_serial->serial == 1700000001);
}

TEST_CASE("workloads: a bad index is one error naming the file and every problem, never a throw") {
  const std::string file = "/usr/lib/sprout/workloads/index.json";
  auto error = [&](const std::string& text) {
    auto r = ParseWorkloadIndex(text, file);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().starts_with(file + ": "));
    return r.error();
  };
  CHECK(error("{not json").find("not a JSON object") != std::string::npos);
  CHECK(error("[1,2]").find("not a JSON object") != std::string::npos);
  CHECK(error(R"({"version":"1","digest":8,"workloads":{}})") ==
        file + ": no version number; digest '' is not sha256:<64 hex digits>; workloads is not a list");
  CHECK(error(R"({"version":2,"digest":")" + kDigest + R"(","workloads":[]})").find("version 2 is not 1") !=
        std::string::npos);
  const std::string bad =
      error(Index(R"({"file":"../etc/passwd","apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"a"},)"
                  R"({"file":"objects/0002.json","apiVersion":"v1","namespace":"demo","name":7},)"
                  R"({"file":"objects/0003.json","apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"a"},)"
                  R"(17)"));
  CHECK(bad.find("workloads[0].objects[0] (../etc/passwd): the file must be a relative path") != std::string::npos);
  CHECK(bad.find("workloads[0].objects[1] (objects/0002.json): no kind, no name") != std::string::npos);
  CHECK(bad.find("workloads[0].objects[2] (objects/0003.json): ConfigMap demo/a is listed twice (also "
                 "workloads[0].objects[0] (../etc/passwd))") != std::string::npos);
  CHECK(bad.find("workloads[0].objects[3] is not an object") != std::string::npos);
  CHECK(error(R"({"version":1,"digest":")" + kDigest + R"(","workloads":[{"name":"x","type":"helm","objects":[]}]})")
            .find("type 'helm' is neither chart nor manifests") != std::string::npos);
  CHECK(error(Index("", R"(,"serial":-4)")).find("serial is not a whole number") != std::string::npos);
}

TEST_CASE("workloads: an object's identity is its group, kind, namespace and name, not its version") {
  CHECK(GroupOf("v1") == "");
  CHECK(GroupOf("apps/v1") == "apps");
  CHECK(IdentityOf(Ref("autoscaling/v1", "HorizontalPodAutoscaler", "demo", "h")) ==
        IdentityOf(Ref("autoscaling/v2", "HorizontalPodAutoscaler", "demo", "h")));
  CHECK(IdentityOf(Ref("v1", "ConfigMap", "a", "x")) != IdentityOf(Ref("v1", "ConfigMap", "b", "x")));
  CHECK(Describe(Ref("v1", "Namespace", "", "demo")) == "Namespace demo");
  CHECK(Describe(Ref("apps/v1", "Deployment", "demo", "web")) == "Deployment demo/web");
}

TEST_CASE("workloads: REST paths, core and group, namespaced and cluster-scoped") {
  auto path = [](const ObjectRef& r) {
    auto res = BuiltinResource(GroupOf(r.api_version), r.kind);
    REQUIRE(res);
    auto p = ObjectPath(r, *res);
    REQUIRE(p.ok());
    return *p;
  };
  CHECK(path(Ref("v1", "ConfigMap", "demo", "c")) == "/api/v1/namespaces/demo/configmaps/c");
  CHECK(path(Ref("v1", "Namespace", "", "demo")) == "/api/v1/namespaces/demo");
  CHECK(path(Ref("apps/v1", "Deployment", "demo", "web")) == "/apis/apps/v1/namespaces/demo/deployments/web");
  CHECK(path(Ref("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r")) ==
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/r");
  CHECK(path(Ref("networking.k8s.io/v1", "Ingress", "demo", "i")) ==
        "/apis/networking.k8s.io/v1/namespaces/demo/ingresses/i");
  CHECK(path(Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com")) ==
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com");
  // A cluster-scoped kind ignores a namespace it was given.
  CHECK(path(Ref("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "demo", "b")) ==
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/b");
  auto cm = BuiltinResource("", "ConfigMap");
  REQUIRE(cm);
  auto no_ns = ObjectPath(Ref("v1", "ConfigMap", "", "c"), *cm);
  REQUIRE_FALSE(no_ns.ok());
  CHECK(no_ns.error() == "ConfigMap c: the kind ConfigMap is namespaced, and the object names no namespace");
  CHECK_FALSE(ObjectPath(Ref("apps/v1", "ConfigMap", "d", "c"), *cm).ok());
  CHECK_FALSE(BuiltinResource("example.com", "Widget"));
  CHECK(CollectionPath("v1", *cm, "") == "/api/v1/configmaps");
}

nlohmann::json Crd(const std::string& scope = "Namespaced") {
  return nlohmann::json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.example.com"},
    "spec":{"group":"example.com","scope":")" +
                               scope + R"(","names":{"kind":"Widget","plural":"widgets","singular":"widget"},
      "versions":[{"name":"v1alpha1","served":true,"storage":false},{"name":"v1","served":true,"storage":true}]}})");
}

std::vector<LoadedObject> Loaded() {
  auto index = ParseWorkloadIndex(Index(kObjects), "index.json");
  REQUIRE(index.ok());
  std::vector<LoadedObject> out;
  for (const auto& o : index->workloads[0].objects) {
    LoadedObject l;
    l.workload = "demo";
    l.entry = o;
    l.body = o.ref.kind == "CustomResourceDefinition"
                 ? Crd()
                 : nlohmann::json{{"apiVersion", o.ref.api_version},
                                  {"kind", o.ref.kind},
                                  {"metadata", {{"name", o.ref.name}, {"namespace", o.ref.ns}}}};
    out.push_back(l);
  }
  return out;
}

TEST_CASE("workloads: a CRD in the set gives its kind's plural and scope") {
  auto c = CrdResource(Crd());
  REQUIRE(c);
  CHECK(c->name == "widgets.example.com");
  CHECK(c->resource.plural == "widgets");
  CHECK(c->resource.namespaced);
  CHECK(c->version == "v1");
  CHECK_FALSE(CrdResource(Crd("Cluster"))->resource.namespaced);
  CHECK_FALSE(CrdResource(nlohmann::json{{"kind", "ConfigMap"}}));
  CHECK_FALSE(CrdResource(nlohmann::json::parse(
      R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","spec":{"names":7}})")));

  const auto loaded = Loaded();
  ResourceTable table(loaded);
  auto widget = table.Find("example.com", "Widget");
  REQUIRE(widget);
  auto p = ObjectPath(Ref("example.com/v1", "Widget", "demo", "w1"), *widget);
  REQUIRE(p.ok());
  CHECK(*p == "/apis/example.com/v1/namespaces/demo/widgets/w1");
  CHECK_FALSE(table.Find("example.com", "Gadget"));
  table.Add({"example.com", "Gadget", "gadgets", false});
  CHECK(table.Find("example.com", "Gadget")->plural == "gadgets");
}

TEST_CASE("workloads: discovery answers are read for kinds neither table knows") {
  auto list = ParseApiResourceList(R"({"kind":"APIResourceList","groupVersion":"example.com/v1","resources":[
    {"name":"gadgets","namespaced":false,"kind":"Gadget","verbs":["get","list","create"]},
    {"name":"gadgets/status","namespaced":false,"kind":"Gadget","verbs":["get","patch"]},
    {"name":"reviews","namespaced":true,"kind":"Review","verbs":["create"]}]})");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].group == "example.com");
  CHECK((*list)[0].plural == "gadgets");
  CHECK_FALSE((*list)[0].namespaced);
  CHECK_FALSE(ParseApiResourceList("{}").ok());
  auto groups = ParseApiGroupList(
      R"({"kind":"APIGroupList","groups":[{"name":"apps","preferredVersion":{"groupVersion":"apps/v1"}},{"name":"x"}]})");
  REQUIRE(groups.ok());
  CHECK(*groups == std::vector<std::string>{"apps/v1"});
}

TEST_CASE("workloads: CRDs go first, then Namespaces, then the rest, each in the index's order") {
  auto loaded = Loaded();
  // The index as a build might wrongly give it: the Deployment before its Namespace.
  std::swap(loaded[0], loaded[2]);  // Deployment, Namespace, CRD, Widget
  auto steps = ApplyOrder(loaded);
  REQUIRE(steps.size() == 4);
  std::vector<std::string> kinds;
  for (const auto& s : steps) kinds.push_back(loaded[s.object].entry.ref.kind);
  CHECK(kinds == std::vector<std::string>{"CustomResourceDefinition", "Namespace", "Deployment", "Widget"});
  CHECK(steps[0].phase == Phase::kCrd);
  CHECK(steps[3].crd == "widgets.example.com");  // the Widget waits for its CRD
  CHECK(steps[2].crd.empty());
}

TEST_CASE("workloads: an object file must match its index entry") {
  WorkloadObject e{"objects/0003.json", Ref("apps/v1", "Deployment", "demo", "web"), {}};
  CHECK(CheckObject(e,
                    nlohmann::json::parse(
                        R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"demo"}})"))
            .empty());
  CHECK(
      CheckObject(e, nlohmann::json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}})"))
          .empty());
  CHECK(CheckObject(e, nlohmann::json::parse(R"({"apiVersion":"v1","kind":"Deployment","metadata":{"name":"db"}})")) ==
        "the file holds apiVersion 'v1', name 'db' where the index says Deployment demo/web (apps/v1); the image's "
        "workloads are damaged (rebuild it)");
  CHECK(CheckObject(e, nlohmann::json::array()) == "the file does not hold one JSON object");
}

TEST_CASE("workloads: the applied body is the baked object with the workload's annotation") {
  auto body = nlohmann::json::parse(
      ApplyBody(nlohmann::json::parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}})"), "demo"));
  CHECK(body["metadata"]["annotations"]["sprout/workload"] == "demo");
  CHECK(body["metadata"]["name"] == "demo");
  auto kept = nlohmann::json::parse(ApplyBody(
      nlohmann::json::parse(R"({"kind":"ConfigMap","metadata":{"name":"c","annotations":{"a":"b"}},"data":{"k":"v"}})"),
      "site"));
  CHECK(kept["metadata"]["annotations"] == nlohmann::json({{"a", "b"}, {"sprout/workload", "site"}}));
  CHECK(kept["data"]["k"] == "v");
  auto fixed = nlohmann::json::parse(
      ApplyBody(nlohmann::json::parse(R"({"kind":"ConfigMap","metadata":{"name":"c","annotations":null}})"), "w"));
  CHECK(fixed["metadata"]["annotations"]["sprout/workload"] == "w");
}

TEST_CASE("workloads: Established, the API's message, sprout's own objects") {
  CHECK(CrdEstablished(
      R"({"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}})"));
  CHECK_FALSE(CrdEstablished(R"({"status":{"conditions":[{"type":"Established","status":"False"}]}})"));
  CHECK_FALSE(CrdEstablished(R"({"status":{}})"));
  CHECK_FALSE(CrdEstablished("garbage"));
  CHECK(ApiMessage(422, R"({"kind":"Status","status":"Failure","message":"ConfigMap \"Bad\" is invalid"})") ==
        "ConfigMap \"Bad\" is invalid");
  CHECK(ApiMessage(502, "bad\ngateway") == "HTTP 502: bad gateway");
  CHECK(ApiMessage(500, "") == "HTTP 500");
  CHECK(AppliedBySprout(nlohmann::json::parse(
      R"({"metadata":{"managedFields":[{"manager":"kube-controller-manager"},{"manager":"sprout","operation":"Apply"}]}})")));
  CHECK_FALSE(AppliedBySprout(
      nlohmann::json::parse(R"({"metadata":{"managedFields":[{"manager":"kubectl-create","operation":"Update"}]}})")));
  CHECK_FALSE(AppliedBySprout(nlohmann::json::parse(R"({"metadata":{"managedFields":7}})")));
}

TEST_CASE("workloads: the record reads back as written") {
  WorkloadRecord r;
  r.digest = kDigest;
  r.serial = 1700000001;
  r.node = "node-2";
  r.objects = {Ref("v1", "Namespace", "", "demo"), Ref("apps/v1", "Deployment", "demo", "web")};
  r.status = {{"demo", "applied (2 objects)"}, {"other", "failed: 1 of 3 objects: ConfigMap x/y: nope"}};
  auto back = ParseRecord(RecordConfigMap(r));
  REQUIRE(back.ok());
  CHECK(back->digest == r.digest);
  CHECK(back->serial == r.serial);
  CHECK(back->node == "node-2");
  CHECK(back->objects == r.objects);
  CHECK(back->status == r.status);
  auto cm = nlohmann::json::parse(RecordConfigMap(r));
  CHECK(cm["metadata"]["namespace"] == "kube-system");
  CHECK(cm["metadata"]["name"] == "sprout-workloads");
  CHECK(cm["data"]["status"] == "demo: applied (2 objects)\nother: failed: 1 of 3 objects: ConfigMap x/y: nope\n");
  CHECK_FALSE(ParseRecord("nope").ok());
  CHECK_FALSE(ParseRecord(R"({"data":{"objects":"[{\"kind\":\"ConfigMap\"}]"}})").ok());
  CHECK_FALSE(ParseRecord(R"({"data":{"serial":"x1","objects":"[]"}})").ok());
  CHECK(ParseRecord(R"({"data":{"objects":"[]"}})").ok());
}

TEST_CASE("workloads: prune only what the record holds and the index no longer carries") {
  const std::vector<ObjectRef> record = {
      Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "old.example.com"),
      Ref("v1", "Namespace", "", "old"),
      Ref("v1", "ConfigMap", "demo", "kept"),
      Ref("apps/v1", "Deployment", "demo", "gone"),
      Ref("autoscaling/v1", "HorizontalPodAutoscaler", "demo", "h"),
  };
  const std::vector<ObjectRef> index = {
      Ref("v1", "ConfigMap", "demo", "kept"),
      Ref("autoscaling/v2", "HorizontalPodAutoscaler", "demo", "h"),  // a new version of the same object
      Ref("v1", "ConfigMap", "demo", "new"),
  };
  auto prune = PruneSet(record, index);
  std::vector<std::string> names;
  for (const auto& p : prune) names.push_back(Describe(p));
  // The rest first, then Namespaces, then CRDs; nothing the index carries; nothing the
  // record does not hold (ConfigMap demo/new, or anything made by hand).
  CHECK(names ==
        std::vector<std::string>{"Deployment demo/gone", "Namespace old", "CustomResourceDefinition old.example.com"});
  CHECK(PruneSet({}, index).empty());
  CHECK(PruneSet(index, index).empty());
}

TEST_CASE("workloads: the next record holds what sprout applied and has not pruned") {
  const std::vector<ObjectRef> old_record = {Ref("v1", "ConfigMap", "demo", "a"), Ref("v1", "ConfigMap", "demo", "b"),
                                             Ref("v1", "ConfigMap", "demo", "c")};
  const std::vector<ObjectRef> index = {Ref("v1", "ConfigMap", "demo", "a"), Ref("v1", "ConfigMap", "demo", "d"),
                                        Ref("v1", "ConfigMap", "demo", "e")};
  // a failed now but was applied before: kept. d applied now. e failed and never was: not
  // recorded. b pruned: forgotten. c's delete failed: kept, to try again.
  const std::set<std::string> applied = {IdentityOf(index[1])};
  const std::set<std::string> forgotten = {IdentityOf(old_record[1])};
  auto next = NextRecord(old_record, index, applied, forgotten);
  std::vector<std::string> names;
  for (const auto& n : next) names.push_back(n.name);
  CHECK(names == std::vector<std::string>{"a", "d", "c"});
}

TEST_CASE("workloads: what a Namespace or CRD would take with it that sprout did not apply") {
  const auto cm = *BuiltinResource("", "ConfigMap");
  const std::string list = R"({"kind":"ConfigMapList","items":[
    {"metadata":{"name":"kube-root-ca.crt","namespace":"demo"}},
    {"metadata":{"name":"mine","namespace":"demo"}},
    {"metadata":{"name":"owned","namespace":"demo","ownerReferences":[{"kind":"Deployment","name":"x"}]}},
    {"metadata":{"name":"by-hand","namespace":"demo"}}]})";
  const std::set<std::string> sprout_set = {IdentityOf(Ref("v1", "ConfigMap", "demo", "mine"))};
  CHECK(ForeignObjects(list, "v1", cm, sprout_set) == std::vector<std::string>{"ConfigMap demo/by-hand"});
  CHECK(ForeignObjects(R"({"items":[{"metadata":{"name":"x","namespace":"demo"}}]})", "v1",
                       *BuiltinResource("", "Event"), {})
            .empty());
  CHECK(ForeignObjects(R"({"items":[{"metadata":{"name":"default","namespace":"demo"}}]})", "v1",
                       *BuiltinResource("", "ServiceAccount"), {})
            .empty());
  CHECK(ForeignObjects("garbage", "v1", cm, {}).empty());
}

TEST_CASE("workloads: when to apply") {
  WorkloadIndex image;
  image.digest = kDigest;
  image.serial = 20;
  CHECK(Decide(std::nullopt, image, false).decision == Decision::kApply);  // a fresh cluster, or a restore
  WorkloadRecord same{kDigest, 20, "node-1", {}, {}};
  CHECK(Decide(same, image, true).decision == Decision::kApply);  // at every start
  CHECK(Decide(same, image, false).decision == Decision::kInSync);
  WorkloadRecord older{kDigest2, 10, "node-1", {}, {}};
  CHECK(Decide(older, image, false).decision == Decision::kApply);  // an update brought new versions
  WorkloadRecord newer{kDigest2, 30, "node-3", {}, {}};
  auto d = Decide(newer, image, true);  // this node is not updated yet: never bring the old versions back
  CHECK(d.decision == Decision::kSkip);
  CHECK(d.why.find("newer build (serial 30") != std::string::npos);
  WorkloadRecord twin{kDigest2, 20, "node-2", {}, {}};  // the same serial, another digest
  CHECK(Decide(twin, image, false).decision == Decision::kSkip);
  CHECK(Decide(twin, image, true).decision == Decision::kApply);
  WorkloadIndex unknown;  // builds without serials: the digest decides, at start
  unknown.digest = kDigest;
  WorkloadRecord other{kDigest2, 0, "", {}, {}};
  CHECK(Decide(other, unknown, true).decision == Decision::kApply);
  CHECK(Decide(other, unknown, false).decision == Decision::kSkip);
}

TEST_CASE("workloads: a workload's state in one line") {
  const auto loaded = Loaded();
  std::vector<ObjectResult> results(4, {ObjectState::kApplied, ""});
  const std::vector<std::size_t> all = {0, 1, 2, 3};
  CHECK(StatusLine(all, loaded, results) == "applied (4 objects)");
  CHECK(StateOf(StatusLine(all, loaded, results)) == "applied");
  results[3] = {ObjectState::kPending, "waiting for CRD widgets.example.com to be established"};
  CHECK(StatusLine(all, loaded, results) ==
        "pending: 1 of 4 objects: Widget demo/w1: waiting for CRD widgets.example.com to be established");
  results[2] = {ObjectState::kFailed, "Deployment.apps \"web\" is invalid"};
  CHECK(StatusLine(all, loaded, results) ==
        "failed: 1 of 4 objects: Deployment demo/web: Deployment.apps \"web\" is invalid");
  CHECK(StateOf("failed: x") == "failed");
  CHECK(StateOf("") == "unknown");
  CHECK(StatusLine({1}, loaded, std::vector<ObjectResult>(4, {ObjectState::kApplied, ""})) == "applied (1 object)");
}

TEST_CASE("workloads: the Lease: one holder, taken over only once it stopped renewing") {
  LeaseSeen seen;
  CHECK(DecideLease(std::nullopt, "node-1", 0, seen) == LeaseStep::kCreate);
  LeaseView mine{"node-1", 60, "5", 0, ""};
  CHECK(DecideLease(mine, "node-1", 0, seen) == LeaseStep::kRenew);
  LeaseView released{"", 60, "6", 1, ""};
  CHECK(DecideLease(released, "node-2", 0, seen) == LeaseStep::kTakeOver);
  LeaseView theirs{"node-1", 60, "7", 1, ""};
  CHECK(DecideLease(theirs, "node-2", 100, seen) == LeaseStep::kWait);  // first seen now
  CHECK(DecideLease(theirs, "node-2", 159, seen) == LeaseStep::kWait);
  theirs.resource_version = "8";  // renewed: the wait starts again
  CHECK(DecideLease(theirs, "node-2", 159, seen) == LeaseStep::kWait);
  CHECK(DecideLease(theirs, "node-2", 218, seen) == LeaseStep::kWait);
  CHECK(DecideLease(theirs, "node-2", 219, seen) == LeaseStep::kTakeOver);

  auto body = nlohmann::json::parse(LeaseBody("node-2", 60, "8", 2, "t0", "2026-12-04T18:40:00.000000Z"));
  CHECK(body["spec"]["holderIdentity"] == "node-2");
  CHECK(body["metadata"]["resourceVersion"] == "8");
  auto back = ParseLease(body.dump());
  REQUIRE(back.ok());
  CHECK(back->holder == "node-2");
  CHECK(back->duration == 60);
  CHECK(back->transitions == 2);
  CHECK(back->resource_version == "8");
  auto released_body = nlohmann::json::parse(LeaseBody("", 60, "9", 2, "", "x"));
  CHECK_FALSE(released_body["spec"].contains("holderIdentity"));
  CHECK_FALSE(ParseLease(R"({"kind":"Status"})").ok());
}

TEST_CASE("workloads: Events about the record, and the retry backoff") {
  auto e =
      nlohmann::json::parse(EventBody("ApplyFailed", "workload demo: failed", true, "node-1", "2026-12-04T00:00:00Z"));
  CHECK(e["type"] == "Warning");
  CHECK(e["involvedObject"]["name"] == "sprout-workloads");
  CHECK(e["involvedObject"]["namespace"] == "kube-system");
  CHECK(e["metadata"]["generateName"] == "sprout-workloads.");
  CHECK(e["source"]["host"] == "node-1");
  CHECK(RetryDelay(1) == 5);
  CHECK(RetryDelay(2) == 10);
  CHECK(RetryDelay(6) == 160);
  CHECK(RetryDelay(7) == 300);
  CHECK(RetryDelay(40) == 300);
}

}  // namespace
}  // namespace sprout::kube
