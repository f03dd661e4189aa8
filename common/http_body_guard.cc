#include "common/http_body_guard.h"

#include <httplib.h>

#include <strings.h>

#include "common/http_connection.h"

namespace bmad::http_body {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    default: return "Error";
  }
}

// Answers `res` and closes the connection, so that what is left of the body is not read as
// further requests (HttpConnection::AnswerAndClose). Where the socket is not found, httplib
// answers as usual.
void AnswerAndClose(const httplib::Request& req, httplib::Response& res) {
  res.set_header("Connection", "close");
  std::string answer = "HTTP/1.1 " + std::to_string(res.status) + " " + Reason(res.status) + "\r\n";
  for (const auto& [name, value] : res.headers) answer += name + ": " + value + "\r\n";
  answer += "Content-Length: " + std::to_string(res.body.size()) + "\r\n\r\n" + res.body;
  HttpConnection(req.local_addr, req.local_port, req.remote_addr, req.remote_port).AnswerAndClose(answer);
}

// The methods whose body httplib reads whenever they come, a length or not (expect_content in
// httplib 0.11; a DELETE without a Content-Length it takes to have none).
bool ReadsABody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI";
}

std::string Route(const httplib::Request& req) { return req.method + " " + req.path; }

}  // namespace

void Guard(httplib::Server& server, size_t max_bytes, CappedRoute capped_route, ErrorWriter write_error) {
  server.set_payload_max_length(max_bytes);
  server.set_pre_routing_handler([capped_route = std::move(capped_route), write_error = std::move(write_error)](
                                     const httplib::Request& req, httplib::Response& res) {
    const bool chunked = req.has_header("Transfer-Encoding");
    const std::string encoding = req.get_header_value("Content-Encoding");
    const bool encoded = !encoding.empty() && strcasecmp(encoding.c_str(), "identity") != 0;
    std::string refusal;
    int status = 0;
    if (chunked && req.has_header("Content-Length")) {
      // Two framings: a proxy in front may have read the other one (request smuggling).
      status = 400;
      refusal = Route(req) + " has both Content-Length and Transfer-Encoding; send one";
    } else if (!chunked && !req.has_header("Content-Length") && ReadsABody(req.method)) {
      // HTTP/1.1 says such a request has no body; httplib would read one until the client
      // closes (or pauses for 5 s).
      status = 411;
      refusal = Route(req) + " needs a Content-Length header (0 for no body)";
    } else if (capped_route && capped_route(req)) {
      return httplib::Server::HandlerResponse::Unhandled;
    } else if (chunked) {
      status = 411;
      refusal = Route(req) + " takes no body of unknown length (Transfer-Encoding): send it with a Content-Length";
    } else if (encoded) {
      status = 415;
      refusal = Route(req) + " takes no Content-Encoding " + encoding + ": send the body as it is";
    } else {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    write_error(res, status, refusal);
    AnswerAndClose(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
}

std::optional<std::string> ReadCapped(const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader, size_t max_bytes,
                                      const ErrorWriter& write_error) {
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
    write_error(res, 413, "the request body is over " + std::to_string(max_bytes) + " bytes" +
                              (decoded && over ? " once decoded" : "") + ", the most accepted");
  } else {
    write_error(res, 400, "the request body could not be read (broken chunks or encoding, or the "
                          "client stopped sending)");
  }
  if (!declared_too_long) AnswerAndClose(req, res);
  return std::nullopt;
}

}  // namespace bmad::http_body
