#include "common/metrics/registry.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <stdexcept>

#include "common/utf8.h"
#include "common/version.h"

namespace bmad::metrics {
namespace {

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                       (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

void CheckName(std::string_view name, std::string_view kind_suffix_rule, bool is_counter,
               bool is_histogram) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("metric '" + std::string(name) + "': " + why);
  };
  if (!name.starts_with("bmad_")) fail("name must start with bmad_");
  if (!ValidName(name, true)) fail("name has characters outside [a-zA-Z0-9_:]");
  if (is_counter && !name.ends_with("_total")) fail("a counter's name must end in _total");
  if (is_histogram) {
    static constexpr std::string_view kUnits[] = {"_seconds", "_tokens",  "_bytes",
                                                  "_sequences", "_blocks", "_ratio"};
    bool has_unit = false;
    for (auto unit : kUnits) has_unit = has_unit || name.ends_with(unit);
    if (!has_unit) fail(std::string("a histogram's name must end in its unit ") +
                        std::string(kind_suffix_rule));
  }
}

std::vector<std::string> LabelNames(const Labels& labels, bool is_histogram) {
  std::vector<std::string> names;
  for (const auto& [k, v] : labels) {
    if (!ValidName(k, false) || k.starts_with("__")) {
      throw std::invalid_argument("invalid label name '" + k + "'");
    }
    if (is_histogram && k == "le") {
      throw std::invalid_argument("label name 'le' is a histogram's bucket label");
    }
    names.push_back(k);
  }
  return names;
}

// A label value as it is exported: UTF-8, which Prometheus requires (one invalid value makes
// it drop the whole scrape). Values from outside (a replica's id, a model's name) may not be;
// each byte that is not UTF-8 is written as the text \xNN, so that two values differing there
// stay two series.
std::string ValidUtf8Value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size();) {
    const Utf8Scan scan = ScanUtf8(v.substr(i));
    if (scan.status == Utf8Status::kComplete) {
      out.append(v.substr(i, scan.length));
    } else {
      AppendHexEscaped(out, v.substr(i, scan.length));
    }
    i += scan.length;
  }
  return out;
}

bool IsValidUtf8(std::string_view v) {
  for (size_t i = 0; i < v.size();) {
    const Utf8Scan scan = ScanUtf8(v.substr(i));
    if (scan.status != Utf8Status::kComplete) return false;
    i += scan.length;
  }
  return true;
}

// `labels` as exported; copied only when a value must change (a lookup per request, such as the
// coordinator's routed-requests counter, then allocates nothing).
const Labels& ValidUtf8Labels(const Labels& labels, Labels& storage) {
  if (std::all_of(labels.begin(), labels.end(), [](const auto& kv) { return IsValidUtf8(kv.second); })) return labels;
  storage.clear();
  for (const auto& [k, v] : labels) storage.emplace(k, ValidUtf8Value(v));
  return storage;
}

// HELP text as the exposition format wants it (the serializer writes it as it is): a backslash
// and a line feed escaped, or the rest of the line would be a line Prometheus cannot parse.
std::string EscapedHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<prometheus::ClientMetric::Label> ToPrometheus(const Labels& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  for (const auto& [k, v] : labels) out.push_back({k, v});
  return out;
}

}  // namespace

Registry::Series& Registry::GetSeries(std::string_view name, std::string_view help, Kind kind,
                                      const std::vector<double>* buckets, const Labels& labels,
                                      bool compatibility) {
  if (compatibility) {
    if (!name.starts_with("vllm:") || !ValidName(name, true)) {
      throw std::invalid_argument("compatibility metric '" + std::string(name) +
                                  "' must be a valid name starting with vllm:");
    }
  } else {
    CheckName(name, "(_seconds, _tokens, _bytes, _sequences, _blocks, _ratio)",
              kind == Kind::kCounter, kind == Kind::kHistogram);
  }
  std::vector<std::string> label_names = LabelNames(labels, kind == Kind::kHistogram);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    Family family{kind, EscapedHelp(help), buckets ? *buckets : std::vector<double>{},
                  label_names, {}};
    it = families_.emplace(std::string(name), std::move(family)).first;
  }
  Family& family = it->second;
  if (family.kind != kind) {
    throw std::invalid_argument("metric '" + std::string(name) + "' exists with another type");
  }
  if (family.label_names != label_names) {
    throw std::invalid_argument("metric '" + std::string(name) +
                                "': every series must have the same label names");
  }
  if (buckets && family.buckets != *buckets) {
    throw std::invalid_argument("metric '" + std::string(name) + "' exists with other buckets");
  }
  Labels storage;
  const Labels& valid = ValidUtf8Labels(labels, storage);
  auto [sit, inserted] = family.series.try_emplace(valid);
  Series& series = sit->second;
  if (inserted) {
    series.labels = valid;
    switch (kind) {
      case Kind::kCounter: series.counter = std::make_unique<Counter>(); break;
      case Kind::kGauge: series.gauge = std::make_unique<Gauge>(); break;
      case Kind::kHistogram: series.histogram = std::make_unique<Histogram>(family.buckets); break;
    }
  }
  return series;
}

size_t Registry::RemoveSeries(std::string_view name, const std::string& label, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  const std::string exported = ValidUtf8Value(value);
  return std::erase_if(it->second.series, [&](const auto& entry) {
    const auto found = entry.first.find(label);
    return found != entry.first.end() && found->second == exported;
  });
}

Counter& Registry::GetCounter(std::string_view name, std::string_view help, const Labels& labels) {
  return *GetSeries(name, help, Kind::kCounter, nullptr, labels).counter;
}

Gauge& Registry::GetGauge(std::string_view name, std::string_view help, const Labels& labels) {
  return *GetSeries(name, help, Kind::kGauge, nullptr, labels).gauge;
}

Histogram& Registry::GetHistogram(std::string_view name, std::string_view help,
                                  const std::vector<double>& buckets, const Labels& labels) {
  return *GetSeries(name, help, Kind::kHistogram, &buckets, labels).histogram;
}

Gauge& Registry::GetCompatibilityGauge(std::string_view name, std::string_view help,
                                       const Labels& labels) {
  return *GetSeries(name, help, Kind::kGauge, nullptr, labels, /*compatibility=*/true).gauge;
}

std::vector<prometheus::MetricFamily> Registry::Collect() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families_.size());
  for (const auto& [name, family] : families_) {
    prometheus::MetricFamily mf;
    mf.name = name;
    mf.help = family.help;
    switch (family.kind) {
      case Kind::kCounter: mf.type = prometheus::MetricType::Counter; break;
      case Kind::kGauge: mf.type = prometheus::MetricType::Gauge; break;
      case Kind::kHistogram: mf.type = prometheus::MetricType::Histogram; break;
    }
    for (const auto& [labels, series] : family.series) {
      prometheus::ClientMetric m;
      m.label = ToPrometheus(labels);
      switch (family.kind) {
        case Kind::kCounter: m.counter.value = series.counter->Value(); break;
        case Kind::kGauge: m.gauge.value = series.gauge->Value(); break;
        case Kind::kHistogram: {
          const Histogram::Snapshot s = series.histogram->Read();
          m.histogram.sample_count = s.count;
          m.histogram.sample_sum = s.sum;
          for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
            m.histogram.bucket.push_back({s.cumulative_counts[i], s.upper_bounds[i]});
          }
          m.histogram.bucket.push_back(
              {s.count, std::numeric_limits<double>::infinity()});
          break;
        }
      }
      mf.metric.push_back(std::move(m));
    }
    out.push_back(std::move(mf));
  }
  return out;
}

std::string Registry::RenderText() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(Collect());
}

void ExportBuildInfo(Registry& registry, Labels labels) {
  labels["version"] = std::string(Version());
  registry.GetGauge("bmad_build_info", "The bmad version this process runs (always 1).", labels).Set(1);
}

}  // namespace bmad::metrics
