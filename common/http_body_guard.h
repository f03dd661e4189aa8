// A bound on every request body an httplib server reads. cpp-httplib 0.11 reads a request's
// whole body into memory before it routes the request, whatever its method and path, and its
// payload_max_length bounds only a declared Content-Length: a chunked body, a compressed one
// (it inflates Content-Encoding gzip, deflate and br), or a POST with neither length nor
// chunking (read until the client closes) could grow until the process ran out of memory,
// before any handler or API key check ran.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace httplib {
class Server;
class Request;
class Response;
class ContentReader;
}  // namespace httplib

namespace bmad::http_body {

// Writes a refusal: the API's JSON error object, or a plain text line.
using ErrorWriter = std::function<void(httplib::Response&, int http_status, const std::string& message)>;

// Routes that read their body through ReadCapped (registered with a ContentReader).
using CappedRoute = std::function<bool(const httplib::Request&)>;

// Bounds what `server` reads: a declared length over `max_bytes` gets 413 (httplib's own check,
// which skips the body); a body with no length at all gets 411, one with two framings
// (Content-Length and Transfer-Encoding) 400. A chunked or compressed body
// gets 411 or 415, except on the routes `capped_route` names, which read it through ReadCapped.
// A refused body that cannot be skipped is left unread and the connection closed after the
// answer. Call before the server listens; it takes the server's pre-routing handler.
void Guard(httplib::Server& server, size_t max_bytes, CappedRoute capped_route, ErrorWriter write_error);

// The body of a capped route: at most `max_bytes` once decoded. Otherwise nullopt, with the
// refusal written (413 past the limit, 400 when the chunking or encoding is broken) and, where
// some of the body is left unread, the connection closed after the answer.
std::optional<std::string> ReadCapped(const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader, size_t max_bytes,
                                      const ErrorWriter& write_error);

}  // namespace bmad::http_body
