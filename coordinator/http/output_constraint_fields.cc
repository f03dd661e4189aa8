#include "coordinator/http/output_constraint_fields.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bmad::http::internal {
namespace {

// One constraint as a field of the body asked for it.
struct Constraint {
  std::string field;  // as the client named it: "guided_regex", "structured_outputs.json", ...
  proto::ResponseFormat format = proto::ResponseFormat::kText;
  std::string text;   // the schema's JSON text (kJsonSchema) or the pattern (kRegex)
  std::string value_field;  // where `text` came from, when not `field` itself
};
using Found = std::vector<Constraint>;

// A choice as a regular expression (RegexNfa's syntax) matching it literally: ASCII
// punctuation and spaces escaped, letters, digits and other characters as they are.
std::string LiteralPattern(std::string_view text) {
  std::string pattern;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80 && !std::isalnum(b)) pattern += '\\';
    pattern += c;
  }
  return pattern;
}

// A JSON Schema: an object or a boolean, or its JSON text.
Status AddSchema(std::string field, const Json* value, Found& found) {
  if (value == nullptr) return Status::Ok();
  std::string text;
  if (value->is_string()) {
    text = value->get<std::string>();
  } else if (value->is_object() || value->is_boolean()) {
    text = value->dump();
  } else {
    return MustBe(field, "a JSON Schema (an object, or its JSON text)", *value);
  }
  found.push_back({std::move(field), proto::ResponseFormat::kJsonSchema, std::move(text)});
  return Status::Ok();
}

Status AddRegex(std::string field, const Json* value, Found& found) {
  if (value == nullptr) return Status::Ok();
  if (!value->is_string()) return MustBe(field, "a string (a regular expression)", *value);
  if (value->get_ref<const std::string&>().empty()) return Status::Ok();
  found.push_back({std::move(field), proto::ResponseFormat::kRegex, value->get<std::string>()});
  return Status::Ok();
}

Status AddChoice(std::string field, const Json* value, Found& found) {
  if (value == nullptr || (value->is_array() && value->empty())) return Status::Ok();
  if (!value->is_array()) return MustBe(field, "an array of strings", *value);
  std::string pattern;
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& option = (*value)[i];
    if (!option.is_string()) return MustBe(field + "[" + std::to_string(i) + "]", "a string", option);
    if (i > 0) pattern += '|';
    pattern += LiteralPattern(option.get_ref<const std::string&>());
  }
  found.push_back({std::move(field), proto::ResponseFormat::kRegex, std::move(pattern)});
  return Status::Ok();
}

// OpenAI's json_schema response format: {"name": ..., "description": ..., "schema": {...},
// "strict": ...}. The schema is always enforced (strict or not); which keywords are is
// sampling::JsonSchema's business, checked with the other sampling parameters.
Status AddJsonSchemaFormat(const Json& format, Found& found) {
  const auto spec = format.find("json_schema");
  if (spec == format.end() || !spec->is_object()) {
    return InvalidArgument("'response_format.json_schema' must be an object holding the schema "
                           "under \"schema\"");
  }
  const JsonFields fields(*spec, "response_format.json_schema.");
  BMAD_RETURN_IF_ERROR(fields.String("name").status());
  BMAD_RETURN_IF_ERROR(fields.String("description").status());
  BMAD_RETURN_IF_ERROR(fields.Bool("strict").status());
  const Json* schema = fields.Find("schema");
  if (schema == nullptr) return InvalidArgument("'response_format.json_schema.schema' is required");
  if (!schema->is_object() && !schema->is_boolean()) {
    return MustBe("response_format.json_schema.schema", "an object or a boolean (a JSON Schema)", *schema);
  }
  found.push_back({"response_format", proto::ResponseFormat::kJsonSchema, schema->dump(),
                   "response_format.json_schema.schema"});
  return Status::Ok();
}

Status AddResponseFormat(const JsonFields& body, Found& found) {
  const Json* format = body.Find("response_format");
  if (format == nullptr) return Status::Ok();
  if (!format->is_object()) return MustBe("response_format", "an object", *format);
  const auto type = format->find("type");
  if (type == format->end()) {
    return InvalidArgument("'response_format.type' is required: \"text\", \"json_object\" or \"json_schema\"");
  }
  if (*type == "text") return Status::Ok();
  if (*type == "json_object") {
    found.push_back({"response_format", proto::ResponseFormat::kJsonObject, ""});
    return Status::Ok();
  }
  if (*type == "json_schema") return AddJsonSchemaFormat(*format, found);
  return InvalidArgument("'response_format' of type " + DescribeJsonValue(*type) +
                         " is not supported; \"text\", \"json_object\" and \"json_schema\" are");
}

// vLLM's StructuredOutputsParams. Its constraints are counted with the other fields' (two in
// it are refused like two anywhere); its options must leave the output as this server makes it.
Status AddStructuredOutputs(const JsonFields& body, Found& found, bool& compact) {
  const Json* spec = body.Find("structured_outputs");
  if (spec == nullptr || (spec->is_object() && spec->empty())) return Status::Ok();
  if (!spec->is_object()) return MustBe("structured_outputs", "an object", *spec);
  const JsonFields fields(*spec, "structured_outputs.");
  constexpr std::string_view kFields[] = {
      "json", "regex", "choice", "json_object", "grammar", "structural_tag", "whitespace_pattern",
      "disable_fallback", "disable_any_whitespace", "disable_additional_properties"};
  for (const auto& [key, value] : spec->items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) {
      return InvalidArgument(Quoted(fields.Name(key)) +
                             " is not a structured_outputs field: json, regex, choice and json_object "
                             "name a constraint; disable_fallback, disable_any_whitespace, "
                             "disable_additional_properties and whitespace_pattern are options");
    }
  }
  for (const std::string_view key : {"grammar", "structural_tag"}) {
    if (const Json* value = fields.Find(key); value != nullptr && !(value->is_string() && value->empty())) {
      return InvalidArgument(Quoted(fields.Name(key)) +
                             " is not supported: json, regex, choice and json_object are");
    }
  }
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> whitespace, fields.String("whitespace_pattern"));
  if (whitespace && !whitespace->empty()) {
    return InvalidArgument("'structured_outputs.whitespace_pattern' is not supported: JSON output "
                           "takes up to a few whitespace bytes wherever JSON allows them");
  }
  BMAD_RETURN_IF_ERROR(fields.Bool("disable_fallback").status());  // one backend: nothing to fall back on
  // Whitespace-free JSON (the schema's or JSON mode's, whichever constraint is given); a regex
  // or a choice is its own text.
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> no_whitespace, fields.Bool("disable_any_whitespace"));
  compact = no_whitespace.value_or(false);
  // vLLM adds "additionalProperties": false to each object that declares properties and says
  // nothing of others. Such an object here never gets a key it does not declare, with the flag
  // or without it (json_schema.h), so both values give what vLLM gives with it set.
  BMAD_RETURN_IF_ERROR(fields.Bool("disable_additional_properties").status());
  BMAD_RETURN_IF_ERROR(AddSchema(fields.Name("json"), fields.Find("json"), found));
  BMAD_RETURN_IF_ERROR(AddRegex(fields.Name("regex"), fields.Find("regex"), found));
  BMAD_RETURN_IF_ERROR(AddChoice(fields.Name("choice"), fields.Find("choice"), found));
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> json_object, fields.Bool("json_object"));
  if (json_object.value_or(false)) {
    found.push_back({fields.Name("json_object"), proto::ResponseFormat::kJsonObject, ""});
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadOutputConstraint(const JsonFields& body, proto::SamplingParams& sampling) {
  Found found;
  BMAD_RETURN_IF_ERROR(AddRegex("guided_regex", body.Find("guided_regex"), found));
  BMAD_RETURN_IF_ERROR(AddChoice("guided_choice", body.Find("guided_choice"), found));
  BMAD_RETURN_IF_ERROR(AddSchema("guided_json", body.Find("guided_json"), found));
  bool compact = false;
  BMAD_RETURN_IF_ERROR(AddStructuredOutputs(body, found, compact));
  BMAD_RETURN_IF_ERROR(AddResponseFormat(body, found));
  if (found.size() > 1) {
    const std::string& first = found[0].field;
    const std::string& second = found[1].field;
    if (second == "response_format") {
      return InvalidArgument(Quoted(first) + " cannot be used with a 'response_format' other than \"text\": "
                             "give one constraint");
    }
    return InvalidArgument(Quoted(second) + " cannot be used with " + Quoted(first) + ": give one constraint");
  }
  if (found.empty()) return std::string();
  Constraint& c = found.front();
  sampling.response_format = c.format;
  if (c.format == proto::ResponseFormat::kJsonSchema) sampling.json_schema = std::move(c.text);
  if (c.format == proto::ResponseFormat::kRegex) sampling.regex = std::move(c.text);
  sampling.disable_any_whitespace = compact && (c.format == proto::ResponseFormat::kJsonObject ||
                                                c.format == proto::ResponseFormat::kJsonSchema);
  return c.value_field.empty() ? c.field : c.value_field;
}

}  // namespace bmad::http::internal
