#include "common/http_body_guard.h"

#include <httplib.h>

#include <strings.h>

#include <memory>

#include "common/http_connection.h"

namespace bmad::http_body {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 501: return "Not Implemented";
    default: return "Error";
  }
}

// Answers `res` and closes the connection, so that what is left of the body is not read as
// further requests (HttpConnection::AnswerAndClose). Where the socket is not found, httplib
// answers as usual.
void AnswerAndClose(const httplib::Request& req, httplib::Response& res, const BodyPolicy& policy) {
  if (policy.finish_answer) policy.finish_answer(req, res);
  res.set_header("Connection", "close");
  std::string answer = "HTTP/1.1 " + std::to_string(res.status) + " " + Reason(res.status) + "\r\n";
  for (const auto& [name, value] : res.headers) answer += name + ": " + value + "\r\n";
  answer += "Content-Length: " + std::to_string(res.body.size()) + "\r\n\r\n";
  if (req.method != "HEAD") answer += res.body;
  HttpConnection(req.local_addr, req.local_port, req.remote_addr, req.remote_port).AnswerAndClose(answer);
}

void Refuse(const httplib::Request& req, httplib::Response& res, const BodyPolicy& policy, int status,
            const std::string& message) {
  policy.write_error(res, status, message);
  AnswerAndClose(req, res, policy);
}

// The methods whose body httplib reads whenever they come, a length or not (expect_content in
// httplib 0.11; a DELETE without a Content-Length it takes to have none).
bool ReadsABody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI";
}

// The encodings httplib 0.11 decodes, compared as it compares them.
bool DecodedEncoding(const std::string& encoding) {
  return encoding == "gzip" || encoding == "deflate" || encoding == "br";
}

std::string Route(const httplib::Request& req) { return req.method + " " + req.path; }

std::string OverLimit(size_t max_bytes, bool once_decoded) {
  return "the request body is over " + std::to_string(max_bytes) + " bytes" + (once_decoded ? " once decoded" : "") +
         ", the most accepted";
}

struct Refusal {
  int status;
  std::string message;
};

// A declared length over the limit but within this many times it is read and dropped by
// httplib, so that a client that sends its body before reading (most do, without Expect:
// 100-continue) gets the 413 rather than a reset connection; a longer one is refused unread.
constexpr uint64_t kSkippedBodyFactor = 4;

// What Guard refuses of `req`, from its headers alone; nullopt to let it through.
// `expecting_continue`: the client waits for "100 Continue" before it sends a body.
std::optional<Refusal> Check(const httplib::Request& req, const BodyPolicy& policy, bool expecting_continue) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  const bool chunked = req.has_header("Transfer-Encoding");
  if (lengths > 1 || (lengths == 1 && chunked)) {
    return Refusal{400, Route(req) + " has " +
                            (chunked ? "both Content-Length and Transfer-Encoding"
                                     : std::to_string(lengths) + " Content-Length headers") +
                            "; send one"};
  }
  const std::string transfer = req.get_header_value("Transfer-Encoding");
  if (chunked && strcasecmp(transfer.c_str(), "chunked") != 0) {
    return Refusal{501, Route(req) + ": Transfer-Encoding '" + transfer + "' is not supported (chunked is)"};
  }
  const std::string length = req.get_header_value("Content-Length");
  if (lengths == 1 && (length.empty() || length.size() > 19 || length.find_first_not_of("0123456789") != std::string::npos)) {
    return Refusal{400, Route(req) + ": Content-Length '" + length + "' is not a byte count"};
  }
  const uint64_t declared = lengths == 1 ? std::stoull(length) : 0;
  if (declared > policy.max_bytes &&
      (expecting_continue || declared / kSkippedBodyFactor >= policy.max_bytes)) {
    return Refusal{413, OverLimit(policy.max_bytes, /*once_decoded=*/false)};
  }
  const bool has_body = chunked || declared > 0;
  if (has_body && !ReadsABody(req.method) && req.method != "DELETE") return Refusal{400, Route(req) + " takes no body"};
  if (!has_body) return std::nullopt;
  const std::string encoding = req.get_header_value("Content-Encoding");
  const bool encoded = !encoding.empty() && strcasecmp(encoding.c_str(), "identity") != 0;
  if (policy.capped_route && policy.capped_route(req)) {
    if (req.is_multipart_form_data()) return Refusal{415, Route(req) + " takes a JSON body, not multipart/form-data"};
    if (encoded && !DecodedEncoding(encoding)) {
      return Refusal{415, Route(req) + ": Content-Encoding '" + encoding + "' is not supported (gzip, deflate and br are)"};
    }
    return std::nullopt;
  }
  if (chunked) {
    return Refusal{411, Route(req) + " takes no body of unknown length (Transfer-Encoding): send it with a Content-Length"};
  }
  if (encoded) return Refusal{415, Route(req) + " takes no Content-Encoding " + encoding + ": send the body as it is"};
  return std::nullopt;
}

}  // namespace

void Guard(httplib::Server& server, BodyPolicy policy) {
  server.set_payload_max_length(policy.max_bytes);
  auto shared = std::make_shared<const BodyPolicy>(std::move(policy));
  server.set_pre_routing_handler([shared](const httplib::Request& req, httplib::Response& res) {
    // HTTP/1.1 gives a request with neither a length nor chunking no body; httplib would read
    // one from a POST, PUT or PATCH until the client closed. It is told the length is 0. (The
    // request is httplib's own local, not a constant.)
    if (ReadsABody(req.method) && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      const_cast<httplib::Request&>(req).set_header("Content-Length", "0");
    }
    std::optional<Refusal> refusal = Check(req, *shared, /*expecting_continue=*/false);
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    Refuse(req, res, *shared, refusal->status, refusal->message);
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib answers "100 Continue" before the pre-routing handler runs, inviting a body the
  // guard would then refuse: the same checks answer first.
  server.set_expect_100_continue_handler([shared](const httplib::Request& req, httplib::Response& res) {
    std::optional<Refusal> refusal = Check(req, *shared, /*expecting_continue=*/true);
    if (!refusal) return 100;
    Refuse(req, res, *shared, refusal->status, refusal->message);
    return refusal->status;
  });
}

std::optional<std::string> ReadCapped(const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader, const BodyPolicy& policy) {
  const size_t max_bytes = policy.max_bytes;
  std::string body;
  bool over = false;
  const bool read = reader([&](const char* data, size_t size) {
    if (size > max_bytes - body.size()) {
      over = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  if (read) return body;
  // A declared length over the limit: httplib answered 413 and skipped the body. Past the
  // limit once decoded or unchunked, or broken: the rest is still on the connection.
  const bool declared_too_long = !over && res.status == 413;
  if (over || declared_too_long) {
    const bool decoded = req.has_header("Content-Encoding") || req.has_header("Transfer-Encoding");
    policy.write_error(res, 413, OverLimit(max_bytes, decoded && over));
  } else {
    policy.write_error(res, 400, "the request body could not be read (broken chunks or encoding, or the "
                                 "client stopped sending)");
  }
  if (!declared_too_long) AnswerAndClose(req, res, policy);
  return std::nullopt;
}

}  // namespace bmad::http_body
