// The process's metrics: families of counters, gauges and histograms, rendered in the
// Prometheus text format through prometheus-cpp's serializer.
//
// Every process creates its metrics here, so names and labels follow one set of rules,
// checked when a metric is created (a violation is a programming error and throws
// std::invalid_argument):
//   - names start with "bmad_" and use [a-zA-Z0-9_:];
//   - counters end in "_total"; histograms end in a unit: _seconds, _tokens, _bytes,
//     _sequences, _blocks or _ratio;
//   - every series of a family has the same label names (a histogram's cannot include `le`, its
//     buckets' label), and a family keeps its type, help and buckets.
// Get* returns the same object for the same name and labels, so callers look a metric up once
// and keep the reference; updating it is then one atomic operation.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "common/metrics/metric_types.h"

namespace bmad::metrics {

using Labels = std::map<std::string, std::string>;

class Registry : public prometheus::Collectable {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& GetCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help,
                          const std::vector<double>& buckets, const Labels& labels = {});

  // A gauge under another server's name, for tools that read those names unchanged (llm-d's
  // inference scheduler reads vLLM's `vllm:` gauges). Only the "vllm:" prefix is accepted.
  Gauge& GetCompatibilityGauge(std::string_view name, std::string_view help,
                               const Labels& labels = {});

  // Drops every series of family `name` whose label `label` is `value` (a replica that is
  // gone for good). References to them must not be used afterwards. Returns how many.
  size_t RemoveSeries(std::string_view name, const std::string& label, const std::string& value);

  // prometheus::Collectable: a snapshot of every family, sorted by name.
  std::vector<prometheus::MetricFamily> Collect() const override;

  // The Prometheus text exposition format (version 0.0.4).
  std::string RenderText() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::vector<double> buckets;
    std::vector<std::string> label_names;
    std::map<Labels, Series> series;
  };

  Series& GetSeries(std::string_view name, std::string_view help, Kind kind,
                    const std::vector<double>* buckets, const Labels& labels,
                    bool compatibility = false);

  mutable std::mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
};

// The content type of RenderText's output.
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Sets bmad_build_info{version, labels...} to 1: which build a process runs (Prometheus's
// *_build_info convention; joined onto other series by the process's own labels).
void ExportBuildInfo(Registry& registry, Labels labels = {});

}  // namespace bmad::metrics
