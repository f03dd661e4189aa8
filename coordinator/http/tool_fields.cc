#include "coordinator/http/tool_fields.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <utility>

#include "coordinator/http/python_json.h"
#include "worker/sampling/json_schema.h"

namespace bmad::http::internal {
namespace {

constexpr std::string_view kNameRule = "a name of 1 to 64 letters, digits, underscores or dashes";

bool ValidFunctionName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// `fields`' "name": a function name (OpenAI's rule).
Result<std::string> ReadFunctionName(const JsonFields& fields) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> name, fields.String("name"));
  if (!name) return InvalidArgument(Quoted(fields.Name("name")) + " is required");
  if (!ValidFunctionName(*name)) return MustBe(fields.Name("name"), kNameRule, Json(*name));
  return *name;
}

// `fields`' "type", when given, must be "function" (the only kind of tool).
Status CheckFunctionType(const JsonFields& fields) {
  const Json* type = fields.Find("type");
  if (type != nullptr && *type != "function") return MustBe(fields.Name("type"), "\"function\"", *type);
  return Status::Ok();
}

// `fields`' "function": an object.
Result<const Json*> FunctionObject(const JsonFields& fields) {
  const Json* function = fields.Find("function");
  if (function == nullptr) return InvalidArgument(Quoted(fields.Name("function")) + " is required");
  if (!function->is_object()) return MustBe(fields.Name("function"), "an object", *function);
  return function;
}

// A tool's parameters as a part of a larger schema, placed at JSON pointer `at` (tool_choice
// "required"'s list; "" for a schema of its own): its references into itself ("#...") follow it
// there, a root "$id" goes when `root` (only a document's root may have one), and so do the
// annotations the compiler ignores (descriptions, titles, examples), which would only count
// against its size limit. Only schema positions are walked: a "$ref" key inside a const or enum
// value is data.
void EmbedSchema(Json& schema, const std::string& at, bool root) {
  if (!schema.is_object()) return;
  if (root) schema.erase("$id");
  for (const char* annotation :
       {"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"}) {
    schema.erase(annotation);
  }
  if (const auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
    const std::string& target = ref->get_ref<const std::string&>();
    if (target.starts_with("#")) *ref = "#" + at + target.substr(1);
  }
  for (const char* map : {"properties", "$defs", "definitions"}) {
    if (const auto found = schema.find(map); found != schema.end() && found->is_object()) {
      for (auto& [key, value] : found->items()) EmbedSchema(value, at, false);
    }
  }
  for (const char* one : {"items", "additionalProperties"}) {
    if (const auto found = schema.find(one); found != schema.end()) EmbedSchema(*found, at, false);
  }
  for (const char* list : {"anyOf", "oneOf", "allOf"}) {
    if (const auto found = schema.find(list); found != schema.end() && found->is_array()) {
      for (Json& alternative : *found) EmbedSchema(alternative, at, false);
    }
  }
}

struct Tool {
  std::string name;
  Json parameters;  // the schema its arguments follow
};

// One entry of "tools": its name and schema, and its JSON as the template writes it: vLLM's
// rendering of the request's tool (pydantic's model_dump), {"type": "function", "function":
// {"name", "description", "parameters", then the function's other keys}}, null where absent.
Result<Tool> ReadTool(const Json& entry, const std::string& name, std::string& rendered) {
  if (!entry.is_object()) return MustBe(name, "an object {\"type\": \"function\", \"function\": {...}}", entry);
  const JsonFields tool(entry, name + ".");
  BMAD_RETURN_IF_ERROR(CheckFunctionType(tool));
  BMAD_ASSIGN_OR_RETURN(const Json* function_json, FunctionObject(tool));
  const JsonFields function(*function_json, tool.Name("function") + ".");
  Tool out;
  BMAD_ASSIGN_OR_RETURN(out.name, ReadFunctionName(function));
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> description, function.String("description"));
  BMAD_RETURN_IF_ERROR(function.Bool("strict").status());
  const Json* parameters = function.Find("parameters");
  if (parameters != nullptr && !parameters->is_object()) {
    return MustBe(function.Name("parameters"), "an object (a JSON Schema)", *parameters);
  }
  // OpenAI: "Omitting parameters defines a function with an empty parameter list." The
  // schema a call is held to leaves out the annotations the compiler ignores (descriptions
  // would count against its size limit).
  out.parameters = parameters != nullptr ? *parameters : Json{{"type", "object"}, {"additionalProperties", false}};
  EmbedSchema(out.parameters, "", /*root=*/false);
  Json shown{{"name", out.name},
             {"description", description ? Json(*description) : Json(nullptr)},
             {"parameters", parameters != nullptr ? *parameters : Json(nullptr)}};
  for (const auto& [key, value] : function_json->items()) {
    if (key != "name" && key != "description" && key != "parameters") shown[key] = value;
  }
  rendered = PythonJsonDumps(Json{{"type", "function"}, {"function", std::move(shown)}});
  return out;
}

// A tool choice as errors name it.
std::string ChoiceText(const RequestTools& tools) {
  switch (tools.choice) {
    case ToolChoice::kNone: return "\"none\"";
    case ToolChoice::kAuto: return "\"auto\"";
    case ToolChoice::kRequired: return "\"required\"";
    case ToolChoice::kFunction: return "naming function \"" + tools.function + "\"";
  }
  return "";
}

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name"}}.
Status ReadToolChoice(const JsonFields& body, const std::vector<Tool>& tools, RequestTools& out) {
  const Json* choice = body.Find("tool_choice");
  constexpr std::string_view kWhat =
      "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice == nullptr) {
    out.choice = tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
    return Status::Ok();
  }
  if (choice->is_string()) {
    const std::string& text = choice->get_ref<const std::string&>();
    if (text == "none") {
      out.choice = ToolChoice::kNone;
    } else if (text == "auto" || text == "required") {
      out.choice = text == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    } else {
      return MustBe("tool_choice", kWhat, *choice);
    }
  } else if (choice->is_object()) {
    const JsonFields fields(*choice, "tool_choice.");
    BMAD_RETURN_IF_ERROR(CheckFunctionType(fields));
    BMAD_ASSIGN_OR_RETURN(const Json* function, FunctionObject(fields));
    BMAD_ASSIGN_OR_RETURN(out.function, ReadFunctionName(JsonFields(*function, fields.Name("function") + ".")));
    out.choice = ToolChoice::kFunction;
  } else {
    return MustBe("tool_choice", kWhat, *choice);
  }
  if (out.choice != ToolChoice::kNone && tools.empty()) {
    return InvalidArgument("'tool_choice' " + ChoiceText(out) + " needs 'tools', and the request gives none");
  }
  if (out.choice == ToolChoice::kFunction &&
      std::none_of(tools.begin(), tools.end(), [&](const Tool& t) { return t.name == out.function; })) {
    return InvalidArgument("'tool_choice.function.name' \"" + out.function + "\" is not one of the request's tools");
  }
  return Status::Ok();
}

// The schema of tool_choice "required": [{"name": N, "arguments": N's parameters}, ...], the
// calls told apart by their name (a JsonSchema tagged union).
Json RequiredSchema(const std::vector<Tool>& tools, bool parallel_calls) {
  Json alternatives = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    Json parameters = tools[i].parameters;
    const std::string at = tools.size() == 1 ? "/items/properties/arguments"
                                             : "/items/anyOf/" + std::to_string(i) + "/properties/arguments";
    EmbedSchema(parameters, at, /*root=*/true);
    alternatives.push_back(Json{{"type", "object"},
                                {"properties", Json{{"name", Json{{"const", tools[i].name}}},
                                                    {"arguments", std::move(parameters)}}},
                                {"required", Json::array({"name", "arguments"})}});
  }
  Json items = alternatives.size() == 1 ? std::move(alternatives[0]) : Json{{"anyOf", std::move(alternatives)}};
  Json schema{{"type", "array"}, {"items", std::move(items)}, {"minItems", 1}};
  if (!parallel_calls) schema["maxItems"] = 1;
  return schema;
}

}  // namespace

Result<std::string> ReadTools(const JsonFields& body, const std::string& constraint_field,
                              CompletionRequest& request) {
  RequestTools& out = request.tools;
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> parallel, body.Bool("parallel_tool_calls"));
  out.parallel_calls = parallel.value_or(true);
  std::vector<Tool> tools;
  if (const Json* list = body.Find("tools"); list != nullptr) {
    if (!list->is_array()) return MustBe("tools", "an array of tools", *list);
    if (list->size() > kMaxTools) {
      return InvalidArgument("'tools' holds " + std::to_string(list->size()) + " tools; at most " +
                             std::to_string(kMaxTools) + " are allowed");
    }
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string name = "tools[" + std::to_string(i) + "]";
      std::string rendered;
      BMAD_ASSIGN_OR_RETURN(Tool tool, ReadTool((*list)[i], name, rendered));
      if (!names.insert(tool.name).second) {
        return InvalidArgument(Quoted(name + ".function.name") + " \"" + tool.name +
                               "\" names a function an earlier tool already names");
      }
      out.rendered.push_back(std::move(rendered));
      out.names.push_back(tool.name);
      tools.push_back(std::move(tool));
    }
  }
  BMAD_RETURN_IF_ERROR(ReadToolChoice(body, tools, out));
  if (out.choice != ToolChoice::kRequired && out.choice != ToolChoice::kFunction) return std::string();
  if (!constraint_field.empty()) {
    return InvalidArgument(Quoted(constraint_field) + " cannot be combined with 'tool_choice' " + ChoiceText(out) +
                           ", which holds the answer to the tools' calls");
  }
  request.sampling.response_format = proto::ResponseFormat::kJsonSchema;
  if (out.choice == ToolChoice::kFunction) {
    // The function's schema is the constraint itself: the request's validation compiles it, and
    // an error names the field returned.
    const auto tool = std::find_if(tools.begin(), tools.end(), [&](const Tool& t) { return t.name == out.function; });
    request.sampling.json_schema = tool->parameters.dump();
    return "tools[" + std::to_string(tool - tools.begin()) + "].function.parameters";
  }
  // "required" joins every tool's schema: each is compiled alone first, so that an error names
  // the tool it is in.
  for (size_t i = 0; i < tools.size(); ++i) {
    Result<std::shared_ptr<const sampling::JsonSchema>> schema = sampling::JsonSchema::Compile(tools[i].parameters.dump());
    if (!schema.ok()) {
      return InvalidArgument(Quoted("tools[" + std::to_string(i) + "].function.parameters") + " " +
                             schema.status().message());
    }
  }
  request.sampling.json_schema = RequiredSchema(tools, out.parallel_calls).dump();
  if (request.sampling.json_schema.size() > sampling::JsonSchema::kMaxTextBytes) {
    return InvalidArgument("'tools': tool_choice \"required\" holds the answer to every tool's parameters at once, "
                           "a schema of " + std::to_string(request.sampling.json_schema.size()) +
                           " bytes without their descriptions; at most " +
                           std::to_string(sampling::JsonSchema::kMaxTextBytes) +
                           " are supported (send fewer tools, or name the function)");
  }
  return std::string("tools");
}

Result<std::vector<ChatToolCall>> ReadToolCalls(const JsonFields& message) {
  std::vector<ChatToolCall> calls;
  const Json* list = message.Find("tool_calls");
  if (list == nullptr) return calls;
  const std::string name = message.Name("tool_calls");
  if (!list->is_array()) return MustBe(name, "an array of tool calls", *list);
  if (list->size() > kMaxToolCallsPerMessage) {
    return InvalidArgument(Quoted(name) + " holds " + std::to_string(list->size()) + " calls; at most " +
                           std::to_string(kMaxToolCallsPerMessage) + " are allowed");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string call_name = name + "[" + std::to_string(i) + "]";
    const Json& entry = (*list)[i];
    if (!entry.is_object()) return MustBe(call_name, "an object {\"type\": \"function\", \"function\": {...}}", entry);
    const JsonFields call(entry, call_name + ".");
    BMAD_RETURN_IF_ERROR(CheckFunctionType(call));
    BMAD_RETURN_IF_ERROR(call.String("id").status());
    BMAD_ASSIGN_OR_RETURN(const Json* function_json, FunctionObject(call));
    const JsonFields function(*function_json, call.Name("function") + ".");
    ChatToolCall& out = calls.emplace_back();
    BMAD_ASSIGN_OR_RETURN(out.name, ReadFunctionName(function));
    // OpenAI sends the arguments as JSON text; the template writes the value it holds (vLLM
    // parses it first), in its own layout.
    const std::string arguments_name = function.Name("arguments");
    const Json* arguments = function.Find("arguments");
    if (arguments == nullptr) return InvalidArgument(Quoted(arguments_name) + " is required");
    constexpr std::string_view kWhat = "the JSON text of an object (the call's arguments)";
    if (arguments->is_string()) {
      // Bounded as a body is (size and nesting): the text is the client's.
      Result<Json> parsed = ParseJsonObject(arguments->get_ref<const std::string&>(), SIZE_MAX);
      if (!parsed.ok()) return MustBe(arguments_name, kWhat, *arguments);
      out.arguments = PythonJsonDumps(*parsed);
    } else if (arguments->is_object()) {
      out.arguments = PythonJsonDumps(*arguments);
    } else {
      return MustBe(arguments_name, kWhat, *arguments);
    }
  }
  return calls;
}

}  // namespace bmad::http::internal
