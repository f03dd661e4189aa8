#include "worker/sampling/json_schema.h"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/json_nesting.h"

namespace bmad::sampling {

using Json = nlohmann::ordered_json;  // properties are written in the order the schema declares

namespace {

constexpr int kUnbounded = 1 << 20;
// Nesting of the schema document itself that the compiler follows (its recursion).
constexpr size_t kMaxSchemaNesting = 128;

// Keywords that say nothing about which values are valid.
const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "format", "$schema", "$id", "$comment",
    "$defs", "definitions", "deprecated", "readOnly", "writeOnly", "contentEncoding",
    "contentMediaType", "additionalProperties"};
const std::set<std::string, std::less<>> kEnforced = {
    "type", "properties", "required", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum"};
constexpr std::string_view kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

std::bitset<256> ValueStarts() {
  std::bitset<256> s;
  for (char c : std::string_view("\"-0123456789{[tfn")) s.set(static_cast<uint8_t>(c));
  return s;
}

// Objects and arrays nested in the schema's text: a schema nested kMaxSchemaNesting deep
// ("properties" and a name per level) fits.
constexpr size_t kMaxTextNesting = 2 * kMaxSchemaNesting + 16;

std::string Where(const std::string& path) { return "at " + (path.empty() ? std::string("the root") : path); }

std::string Escape(std::string_view token) {  // a JSON pointer reference token (RFC 6901)
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

bool ValueHasType(const Json& v, std::string_view t) {
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (!v.is_number_float()) return v.is_number_integer();
    const double d = v.get<double>();
    return std::isfinite(d) && std::trunc(d) == d;  // 2.0 is an integer in JSON Schema
  }
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

}  // namespace

class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(const Json& document) : document_(document) {}

  Status Run() {
    // "#" is the root: known by the first node compiled, which is the root's.
    pending_.push_back("");
    resolving_.insert("");
    BMAD_ASSIGN_OR_RETURN(schema_->root_, Compile(document_, "", 0));
    BMAD_RETURN_IF_ERROR(ResolveUnions());
    ComputeMinDepths();
    const int need = schema_->nodes_[schema_->root_].min_depth;
    if (need >= kUnbounded) return InvalidArgument("the schema admits no finite JSON value");
    if (need > JsonSchema::kMaxDepth) {
      return InvalidArgument("every value of the schema nests " + std::to_string(need) +
                             " objects and arrays; at most " + std::to_string(JsonSchema::kMaxDepth) +
                             " are supported");
    }
    return Status::Ok();
  }

  std::shared_ptr<JsonSchema> schema_ = std::make_shared<JsonSchema>();

 private:
  using Node = JsonSchema::Node;
  using Kind = JsonSchema::Kind;

  Result<uint16_t> NewNode(const std::string& path) {
    if (schema_->nodes_.size() >= JsonSchema::kMaxNodes) {
      return InvalidArgument(Where(path) + ": the schema has more than " +
                             std::to_string(JsonSchema::kMaxNodes) + " parts");
    }
    schema_->nodes_.emplace_back();
    paths_.push_back(path);
    const auto index = static_cast<uint16_t>(schema_->nodes_.size() - 1);
    // A $ref target is known by its pointer from its first node on, so that a reference back to
    // it from inside (recursion) finds it.
    for (const std::string& pointer : pending_) by_pointer_.emplace(pointer, index);
    pending_.clear();
    return index;
  }

  Result<uint16_t> Store(Node node, const std::string& path) {
    BMAD_ASSIGN_OR_RETURN(const uint16_t index, NewNode(path));
    schema_->nodes_[index] = std::move(node);
    return index;
  }

  // The node for the schema `s` found at `path`.
  Result<uint16_t> Compile(const Json& s, const std::string& path, size_t nesting) {
    if (nesting > kMaxSchemaNesting) {
      return InvalidArgument(Where(path) + ": the schema nests more than " +
                             std::to_string(kMaxSchemaNesting) + " levels deep");
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) return InvalidArgument(Where(path) + ": the schema false admits no value");
      return Store(Node{}, path);
    }
    if (!s.is_object()) return InvalidArgument(Where(path) + ": a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (!kAnnotations.contains(key) && !kEnforced.contains(key)) {
        return InvalidArgument(Where(path) + ": keyword '" + key + "' is not supported");
      }
    }
    // A nested $id would change the base its "#/..." references resolve against.
    if (&s != &document_ && s.contains("$id")) {
      return InvalidArgument(Where(path) + ": '$id' is supported at the root only");
    }
    const auto constraining_besides = [&](std::string_view keyword) -> std::string {
      for (const auto& [key, value] : s.items()) {
        if (key != keyword && kEnforced.contains(key)) return key;
      }
      return "";
    };
    for (std::string_view only : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(only)) continue;
      if (const std::string other = constraining_besides(only); !other.empty()) {
        return InvalidArgument(Where(path) + ": '" + std::string(only) + "' beside '" + other +
                               "' is not supported" +
                               (only == "$ref" ? std::string() : "; move '" + other + "' into each alternative"));
      }
    }
    if (s.contains("$ref")) return Reference(s["$ref"], path, nesting);
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return InvalidArgument(Where(path) + ": 'allOf' is supported with one schema only");
      }
      return Compile(all[0], path + "/allOf/0", nesting + 1);
    }
    for (std::string_view keyword : {"anyOf", "oneOf"}) {
      if (!s.contains(keyword)) continue;
      BMAD_ASSIGN_OR_RETURN(const uint16_t index,
                            Alternatives(s[std::string(keyword)], path + "/" + std::string(keyword), nesting));
      if (keyword == "oneOf") one_of_.insert(index);
      return index;
    }
    return Typed(s, path, nesting);
  }

  Result<uint16_t> Reference(const Json& ref, const std::string& path, size_t nesting) {
    if (!ref.is_string() || !ref.get<std::string>().starts_with("#")) {
      return InvalidArgument(Where(path) + ": '$ref' must be \"#\" or \"#/...\" (a place in this schema)");
    }
    const std::string pointer = ref.get<std::string>().substr(1);
    if (const auto found = by_pointer_.find(pointer); found != by_pointer_.end()) return found->second;
    if (!resolving_.insert(pointer).second) {
      return InvalidArgument(Where(path) + ": '$ref' \"#" + pointer + "\" refers to itself");
    }
    const Json* target = nullptr;
    try {
      target = &document_.at(Json::json_pointer(pointer));
    } catch (const Json::exception&) {
      return InvalidArgument(Where(path) + ": '$ref' \"#" + pointer + "\" names nothing in the schema");
    }
    pending_.push_back(pointer);
    Result<uint16_t> index = Compile(*target, pointer, nesting + 1);
    std::erase(pending_, pointer);  // a target that is a reference to a node compiled before
    resolving_.erase(pointer);
    if (index.ok()) by_pointer_.emplace(pointer, *index);
    return index;
  }

  Result<uint16_t> Alternatives(const Json& list, const std::string& path, size_t nesting) {
    if (!list.is_array() || list.empty()) {
      return InvalidArgument(Where(path) + ": must be a non-empty array of schemas");
    }
    BMAD_ASSIGN_OR_RETURN(const uint16_t index, NewNode(path));
    for (size_t i = 0; i < list.size(); ++i) {
      BMAD_ASSIGN_OR_RETURN(const uint16_t alt, Compile(list[i], path + "/" + std::to_string(i), nesting + 1));
      alternatives_[index].push_back(alt);
    }
    schema_->nodes_[index].kind = Kind::kUnion;
    return index;
  }

  Result<std::vector<std::string>> Types(const Json& s, const std::string& path) {
    std::vector<std::string> types;
    if (!s.contains("type")) return types;
    const Json& t = s["type"];
    const auto add = [&](const Json& one) -> Status {
      static const std::set<std::string, std::less<>> kTypes = {"object", "array", "string", "number",
                                                              "integer", "boolean", "null"};
      if (!one.is_string() || !kTypes.contains(one.get<std::string>())) {
        return InvalidArgument(Where(path) + ": 'type' " + one.dump() + " is not a JSON Schema type");
      }
      if (std::find(types.begin(), types.end(), one.get<std::string>()) == types.end()) {
        types.push_back(one.get<std::string>());
      }
      return Status::Ok();
    };
    if (t.is_array()) {
      if (t.empty()) return InvalidArgument(Where(path) + ": 'type' is an empty list");
      for (const Json& one : t) BMAD_RETURN_IF_ERROR(add(one));
    } else {
      BMAD_RETURN_IF_ERROR(add(t));
    }
    // "number" already holds every integer.
    if (std::count(types.begin(), types.end(), "number") > 0) std::erase(types, "integer");
    return types;
  }

  Result<uint16_t> Typed(const Json& s, const std::string& path, size_t nesting) {
    BMAD_ASSIGN_OR_RETURN(std::vector<std::string> types, Types(s, path));
    if (s.contains("enum") || s.contains("const")) return Literals(s, types, path);
    if (types.empty()) {
      // No type: the values the keywords describe, else anything. Values of the other types
      // would be valid too; writing only these is still valid, except under oneOf (see there).
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
        types = {"object"};
      } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
        types = {"array"};
      } else if (s.contains("minLength") || s.contains("maxLength")) {
        types = {"string"};
      } else if (std::any_of(std::begin(kBounds), std::end(kBounds),
                             [&](std::string_view b) { return s.contains(b); })) {
        types = {"integer"};
      } else {
        return Store(Node{}, path);
      }
      BMAD_ASSIGN_OR_RETURN(const uint16_t index, OneType(s, types[0], path, nesting));
      inferred_.insert(index);
      return index;
    }
    if (types.size() == 1) return OneType(s, types[0], path, nesting);
    BMAD_ASSIGN_OR_RETURN(const uint16_t index, NewNode(path));
    for (const std::string& type : types) {
      BMAD_ASSIGN_OR_RETURN(const uint16_t alt, OneType(s, type, path, nesting));
      alternatives_[index].push_back(alt);
    }
    schema_->nodes_[index].kind = Kind::kUnion;
    return index;
  }

  Result<uint16_t> OneType(const Json& s, const std::string& type, const std::string& path, size_t nesting) {
    Node node;
    if (type == "string") {
      node.kind = Kind::kString;
      BMAD_RETURN_IF_ERROR(CountRange(s, "minLength", "maxLength", path, node.min_length, node.max_length));
    }
    if (type == "number") {
      node.kind = Kind::kNumber;
      for (std::string_view bound : kBounds) {
        if (s.contains(bound)) {
          return InvalidArgument(Where(path) + ": '" + std::string(bound) + "' is supported on type \"integer\" "
                                 "only, not \"number\"");
        }
      }
    }
    if (type == "integer") {
      node.kind = Kind::kInteger;
      BMAD_RETURN_IF_ERROR(Range(s, path, node));
    }
    if (type == "boolean") node = LiteralNode({"false", "true"});
    if (type == "null") node = LiteralNode({"null"});
    if (type == "object") return Object(s, path, nesting);
    if (type == "array") return Array(s, path, nesting);
    return Store(std::move(node), path);
  }

  static Node LiteralNode(std::vector<std::string> literals) {
    Node node;
    node.kind = Kind::kLiterals;
    std::sort(literals.begin(), literals.end());
    literals.erase(std::unique(literals.begin(), literals.end()), literals.end());
    node.literals = std::move(literals);
    return node;
  }

  Result<uint16_t> Literals(const Json& s, const std::vector<std::string>& types, const std::string& path) {
    for (std::string_view other :
         {"properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
          "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(other)) {
        return InvalidArgument(Where(path) + ": '" + std::string(s.contains("enum") ? "enum" : "const") +
                               "' beside '" + std::string(other) + "' is not supported");
      }
    }
    std::vector<Json> values;
    if (s.contains("enum")) {
      const Json& list = s["enum"];
      if (!list.is_array() || list.empty()) return InvalidArgument(Where(path) + ": 'enum' must be a non-empty array");
      if (list.size() > JsonSchema::kMaxEnumValues) {
        return InvalidArgument(Where(path) + ": 'enum' has " + std::to_string(list.size()) +
                               " values; at most " + std::to_string(JsonSchema::kMaxEnumValues) + " are supported");
      }
      values.assign(list.begin(), list.end());
    }
    if (s.contains("const")) {
      const Json& c = s["const"];
      if (values.empty()) values.push_back(c);
      else std::erase_if(values, [&](const Json& v) { return v != c; });
    }
    std::vector<std::string> literals;
    for (const Json& v : values) {
      if (std::none_of(types.begin(), types.end(), [&](const std::string& t) { return ValueHasType(v, t); }) &&
          !types.empty()) {
        continue;
      }
      literals.push_back(v.dump());
    }
    if (literals.empty()) return InvalidArgument(Where(path) + ": no value of 'enum'/'const' has the schema's 'type'");
    return Store(LiteralNode(std::move(literals)), path);
  }

  // The counts `low_keyword` and `high_keyword` (minItems and maxItems, say) into `low` and
  // `high`, each left as it is when its keyword is absent.
  Status CountRange(const Json& s, const char* low_keyword, const char* high_keyword, const std::string& path,
                    uint32_t& low, uint32_t& high) {
    if (s.contains(low_keyword)) {
      BMAD_ASSIGN_OR_RETURN(low, Count(s, low_keyword, path));
    }
    if (s.contains(high_keyword)) {
      BMAD_ASSIGN_OR_RETURN(high, Count(s, high_keyword, path));
    }
    if (low > high) {
      return InvalidArgument(Where(path) + ": '" + low_keyword + "' is larger than '" + high_keyword + "'");
    }
    return Status::Ok();
  }

  // The integers the bounds allow, as an inclusive range (2020-12: exclusiveMinimum and
  // exclusiveMaximum are numbers; draft 4's booleans are refused).
  Status Range(const Json& s, const std::string& path, Node& node) {
    // Integers in a double are exact below 2^53; from there on neither the bound nor a
    // validator's comparison with it is (nor is the bound plus or minus one here).
    constexpr double kExact = 9007199254740992.0;
    std::optional<double> low, high;
    for (std::string_view bound : kBounds) {
      if (!s.contains(bound)) continue;
      const Json& v = s[std::string(bound)];
      if (!v.is_number()) {
        return InvalidArgument(Where(path) + ": '" + std::string(bound) + "' must be a number, got " + v.dump());
      }
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::abs(d) >= kExact) {
        return InvalidArgument(Where(path) + ": '" + std::string(bound) + "' of 2^53 or more (either sign) is not supported");
      }
      if (bound == "minimum") low = std::max(low.value_or(-kExact), std::ceil(d));
      if (bound == "exclusiveMinimum") low = std::max(low.value_or(-kExact), std::floor(d) + 1);
      if (bound == "maximum") high = std::min(high.value_or(kExact), std::floor(d));
      if (bound == "exclusiveMaximum") high = std::min(high.value_or(kExact), std::ceil(d) - 1);
    }
    if (low) node.minimum = static_cast<int64_t>(*low);
    if (high) node.maximum = static_cast<int64_t>(*high);
    if (node.minimum > node.maximum) return InvalidArgument(Where(path) + ": no integer is within the bounds");
    return Status::Ok();
  }

  Result<uint32_t> Count(const Json& s, const char* keyword, const std::string& path) {
    const Json& v = s[keyword];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return InvalidArgument(Where(path) + ": '" + std::string(keyword) + "' must be a non-negative integer");
    }
    return static_cast<uint32_t>(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX));
  }

  Result<uint16_t> Array(const Json& s, const std::string& path, size_t nesting) {
    Node node;
    node.kind = Kind::kArray;
    BMAD_RETURN_IF_ERROR(CountRange(s, "minItems", "maxItems", path, node.min_items, node.max_items));
    BMAD_ASSIGN_OR_RETURN(const uint16_t index, NewNode(path));
    static const Json kAnyItem = true;
    const Json& items = s.contains("items") ? s["items"] : kAnyItem;
    if (items.is_boolean() && !items.get<bool>()) {
      node.max_items = 0;  // only []
      if (node.min_items > 0) return InvalidArgument(Where(path) + ": 'minItems' with 'items' false admits no value");
    } else {
      BMAD_ASSIGN_OR_RETURN(node.items, Compile(items, path + "/items", nesting + 1));
    }
    schema_->nodes_[index] = std::move(node);
    return index;
  }

  Result<uint16_t> Object(const Json& s, const std::string& path, size_t nesting) {
    Node node;
    node.kind = Kind::kObject;
    const Json none = Json::object();
    const Json& properties = s.contains("properties") ? s["properties"] : none;
    if (!properties.is_object()) return InvalidArgument(Where(path) + ": 'properties' must be an object");
    if (properties.size() > JsonSchema::kMaxProperties) {
      return InvalidArgument(Where(path) + ": 'properties' has " + std::to_string(properties.size()) +
                             " entries; at most " + std::to_string(JsonSchema::kMaxProperties) + " are supported");
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& list = s["required"];
      if (!list.is_array()) return InvalidArgument(Where(path) + ": 'required' must be an array of names");
      for (const Json& name : list) {
        if (!name.is_string()) return InvalidArgument(Where(path) + ": 'required' must be an array of names");
        if (!properties.contains(name.get<std::string>())) {
          return InvalidArgument(Where(path) + ": required property '" + name.get<std::string>() +
                                 "' is not in 'properties'");
        }
        required.insert(name.get<std::string>());
      }
    }
    const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (properties.empty()) {
      if (additional == nullptr || *additional == Json(true) || *additional == Json::object()) {
        node.kind = Kind::kAnyObject;
        return Store(std::move(node), path);
      }
      if (*additional != Json(false)) {
        return InvalidArgument(Where(path) + ": 'additionalProperties' with a schema is supported only "
                               "beside 'properties' (whose keys are then the only ones written)");
      }
    }
    BMAD_ASSIGN_OR_RETURN(const uint16_t index, NewNode(path));
    for (const auto& [name, value] : properties.items()) {
      // A property whose schema is false must be absent: it is never written.
      if (value == Json(false) && !required.contains(name)) continue;
      JsonSchema::Property p;
      p.key = Json(name).dump();
      p.required = required.contains(name);
      BMAD_ASSIGN_OR_RETURN(p.node, Compile(value, path + "/properties/" + Escape(name), nesting + 1));
      node.properties.push_back(std::move(p));
    }
    const size_t n = node.properties.size();
    node.next_required.assign(n + 1, static_cast<uint16_t>(n));
    for (size_t i = n; i-- > 0;) {
      node.next_required[i] = node.properties[i].required ? static_cast<uint16_t>(i) : node.next_required[i + 1];
    }
    schema_->nodes_[index] = std::move(node);
    return index;
  }

  // The bytes a value of node `index` can start with (a union's: its alternatives'). Each
  // union's is worked out once: alternatives shared through $ref are not walked again.
  Result<std::bitset<256>> FirstBytes(uint16_t index) {
    const Node& node = schema_->nodes_[index];
    std::bitset<256> s;
    switch (node.kind) {
      case Kind::kAny: return ValueStarts();
      case Kind::kAnyObject:
      case Kind::kObject: s.set('{'); return s;
      case Kind::kArray: s.set('['); return s;
      case Kind::kString: s.set('"'); return s;
      case Kind::kNumber:
      case Kind::kInteger:
        for (char c : std::string_view("-0123456789")) s.set(static_cast<uint8_t>(c));
        return s;
      case Kind::kLiterals:
        for (const std::string& l : node.literals) s.set(static_cast<uint8_t>(l[0]));
        return s;
      case Kind::kUnion:
        if (const auto known = first_bytes_.find(index); known != first_bytes_.end()) return known->second;
        if (!visiting_.insert(index).second) {
          return InvalidArgument(Where(paths_[index]) + ": the alternatives refer back to themselves "
                                 "before any value starts");
        }
        for (uint16_t alt : alternatives_[index]) {
          BMAD_ASSIGN_OR_RETURN(const std::bitset<256> a, FirstBytes(alt));
          s |= a;
        }
        visiting_.erase(index);
        first_bytes_.emplace(index, s);
        return s;
    }
    return s;
  }

  // Each union's table: which alternative a first byte picks (through nested unions).
  Status ResolveUnions() {
    for (auto& [index, alts] : alternatives_) {
      std::array<uint16_t, 256> table;
      table.fill(JsonSchema::kNoNode);
      if (one_of_.contains(index)) BMAD_RETURN_IF_ERROR(CheckOneOf(index));
      visiting_ = {index};
      std::vector<uint16_t> objects;  // the alternatives that start with '{'
      for (size_t i = 0; i < alts.size(); ++i) {
        BMAD_ASSIGN_OR_RETURN(const std::bitset<256> bytes, FirstBytes(alts[i]));
        if (bytes.test('{')) objects.push_back(alts[i]);
        for (int b = 0; b < 256; ++b) {
          if (!bytes.test(static_cast<size_t>(b))) continue;
          if (table[static_cast<size_t>(b)] != JsonSchema::kNoNode && b != '{') {
            return InvalidArgument(Where(paths_[index]) + ": two alternatives can both start with '" +
                                   std::string(1, static_cast<char>(b)) + "'; " + std::string(kUnionRule));
          }
          table[static_cast<size_t>(b)] = alts[i];
        }
      }
      if (objects.size() > 1) {
        BMAD_ASSIGN_OR_RETURN(table['{'], TaggedUnion(index, objects));
      }
      schema_->nodes_[index].by_first_byte = table;
    }
    return Status::Ok();
  }

  static constexpr std::string_view kUnionRule =
      "only alternatives that differ in their first byte (different JSON types), or objects that each "
      "open with the same required property set to a different constant string, are supported";

  // Objects among a union's alternatives (`objects`, two or more) that each open with the same
  // required property, set to a different constant string ("const", or an "enum" of one): a
  // tagged union. Its node reads that property and goes on as the alternative its value names.
  Result<uint16_t> TaggedUnion(uint16_t union_index, const std::vector<uint16_t>& objects) {
    const auto refuse = [&](std::string_view why) {
      return InvalidArgument(Where(paths_[union_index]) + ": two alternatives can both start with '{' (" +
                             std::string(why) + "); " + std::string(kUnionRule));
    };
    std::string key;
    std::vector<std::pair<std::string, uint16_t>> tags;  // the tag's JSON text, its alternative
    for (const uint16_t alt : objects) {
      const Node& object = schema_->nodes_[alt];
      if (object.kind != Kind::kObject) return refuse("one is not an object with properties");
      if (object.properties.empty() || !object.properties[0].required) {
        return refuse("an object's first property is not required");
      }
      const JsonSchema::Property& first = object.properties[0];
      const Node& value = schema_->nodes_[first.node];
      if (value.kind != Kind::kLiterals || value.literals.size() != 1 || value.literals[0][0] != '"') {
        return refuse("an object's first property is not one constant string");
      }
      if (!key.empty() && first.key != key) return refuse("the objects' first properties differ");
      key = first.key;
      tags.emplace_back(value.literals[0], alt);
    }
    std::sort(tags.begin(), tags.end());
    for (size_t i = 1; i < tags.size(); ++i) {
      if (tags[i].first == tags[i - 1].first) return refuse("two objects have the tag " + tags[i].first);
    }
    Node literal;
    literal.kind = Kind::kLiterals;
    Node tagged;
    tagged.kind = Kind::kObject;
    for (auto& [text, alt] : tags) {
      literal.literals.push_back(text);
      tagged.tagged.push_back(alt);
    }
    const std::string path = paths_[union_index];  // a copy: storing nodes grows paths_
    BMAD_ASSIGN_OR_RETURN(const uint16_t literal_index, Store(std::move(literal), path));
    tagged.properties.push_back({key, literal_index, true});
    tagged.next_required = {0, 1};
    return Store(std::move(tagged), path);
  }

  // Alternatives that differ in their first byte hold oneOf's "exactly one" only when each
  // admits its own types alone: one whose type was inferred from its keywords ({"properties":
  // ...} with no "type") admits every value of the other types too, so a value the others
  // allow would match two.
  Status CheckOneOf(uint16_t one_of) {
    std::vector<uint16_t> todo = alternatives_[one_of];
    std::set<uint16_t> seen;
    while (!todo.empty()) {
      const uint16_t index = todo.back();
      todo.pop_back();
      if (!seen.insert(index).second) continue;
      if (inferred_.contains(index)) {
        return InvalidArgument(Where(paths_[index]) + ": an alternative of 'oneOf' needs a 'type' (without "
                               "one it admits values of every other type too)");
      }
      if (const auto alts = alternatives_.find(index); alts != alternatives_.end()) {
        todo.insert(todo.end(), alts->second.begin(), alts->second.end());
      }
    }
    return Status::Ok();
  }

  // The fewest containers each node's values need (kUnbounded: no finite value), found by
  // lowering every estimate until none changes.
  void ComputeMinDepths() {
    auto& nodes = schema_->nodes_;
    for (Node& n : nodes) n.min_depth = kUnbounded;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        Node& n = nodes[i];
        int d = 0;
        if (n.kind == Kind::kObject && !n.tagged.empty()) {
          // As a union's: the shallowest alternative (the automaton offers only the tags whose
          // alternatives fit where the object is).
          d = kUnbounded;
          for (const uint16_t alt : n.tagged) d = std::min(d, nodes[alt].min_depth);
        } else if (n.kind == Kind::kObject) {
          for (const JsonSchema::Property& p : n.properties) {
            if (p.required) d = std::max(d, nodes[p.node].min_depth);
          }
          d = std::min(d + 1, kUnbounded);
        } else if (n.kind == Kind::kArray) {
          d = n.min_items > 0 ? std::min(nodes[n.items].min_depth + 1, kUnbounded) : 1;
        } else if (n.kind == Kind::kUnion) {
          d = kUnbounded;
          for (uint16_t alt : alternatives_[static_cast<uint16_t>(i)]) d = std::min(d, nodes[alt].min_depth);
        }
        if (d < n.min_depth) {
          n.min_depth = d;
          changed = true;
        }
      }
    }
  }

  const Json& document_;
  std::vector<std::string> paths_;                    // each node's place, for errors
  std::map<uint16_t, std::vector<uint16_t>> alternatives_;  // each union's alternatives
  std::map<std::string, uint16_t> by_pointer_;        // $ref targets compiled
  std::set<std::string> resolving_;                   // $ref targets being compiled
  std::vector<std::string> pending_;                  // $ref targets waiting for their first node
  std::set<uint16_t> inferred_;                       // nodes whose type came from their keywords
  std::set<uint16_t> one_of_;                         // unions from oneOf (the rest are anyOf, types)
  std::map<uint16_t, std::bitset<256>> first_bytes_;  // each union's, once known
  std::set<uint16_t> visiting_;                       // unions whose first bytes are being found
};

uint16_t JsonSchema::Resolve(uint16_t index, uint8_t byte) const {
  // Unions nest at most as deep as the schema has nodes: a table entry is never a union.
  while (index != kNoNode && nodes_[index].kind == Kind::kUnion) index = nodes_[index].by_first_byte[byte];
  return index;
}

Result<std::shared_ptr<const JsonSchema>> JsonSchema::Compile(std::string_view text) {
  if (text.size() > kMaxTextBytes) {
    return InvalidArgument("the schema is " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(kMaxTextBytes) + " are supported");
  }
  // Checked before parsing: the JSON library copies, compares and writes values recursively.
  if (const size_t nesting = JsonNestingDepth(text); nesting > kMaxTextNesting) {
    return InvalidArgument("the schema text nests " + std::to_string(nesting) + " objects and arrays deep; at most " +
                           std::to_string(kMaxTextNesting) + " are supported");
  }
  Json document = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return InvalidArgument("the schema is not valid JSON");
  JsonSchemaCompiler compiler(document);
  BMAD_RETURN_IF_ERROR(compiler.Run());
  return std::shared_ptr<const JsonSchema>(std::move(compiler.schema_));
}

std::shared_ptr<const JsonSchema> JsonSchema::AnyObject() {
  static const std::shared_ptr<const JsonSchema> any_object = [] {
    auto schema = std::make_shared<JsonSchema>();
    schema->nodes_.emplace_back();
    schema->nodes_[0].kind = Kind::kAnyObject;
    schema->root_ = 0;
    return std::shared_ptr<const JsonSchema>(schema);
  }();
  return any_object;
}

}  // namespace bmad::sampling
